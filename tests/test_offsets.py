"""Byte <-> char <-> token conversions, with non-ASCII code."""

from __future__ import annotations

import numpy as np

from codept.structure import offsets
from codept.structure.view import tokenize

TEXT = 'naïve = "中文" + 😀x  # é\n'


def test_byte_char_round_trip_non_ascii():
    data = TEXT.encode()
    table = offsets.byte_to_char_table(data)
    assert table is not None and table[-1] == len(TEXT)
    chars = np.arange(len(TEXT) + 1)
    b = offsets.char_to_byte(TEXT, chars)
    assert b[-1] == len(data)
    np.testing.assert_array_equal(offsets.byte_to_char(b, table), chars)
    # every char's byte offset points at the same character
    for c in range(len(TEXT)):
        assert data[b[c] : b[c + 1]].decode() == TEXT[c]


def test_ascii_is_identity():
    assert offsets.byte_to_char_table(b"abc") is None
    np.testing.assert_array_equal(offsets.char_to_byte("abc", np.array([0, 3])), [0, 3])


def test_token_offsets_tile_the_text(small_tok):
    ids, off = tokenize(small_tok, TEXT)
    assert len(ids) == len(off) > 0
    assert off[0, 0] == 0 and off[-1, 1] == len(TEXT)
    # contiguous: each token starts where the previous ended, or shares it (a multi-byte character
    # split over several byte-level tokens)
    assert np.all((off[1:, 0] == off[:-1, 1]) | (off[1:, 0] == off[:-1, 0]))


def test_char_span_to_tokens_smallest_cover():
    starts = np.array([0, 3, 4, 7])
    ends = np.array([3, 4, 7, 9])
    t0, t1 = offsets.char_span_to_tokens(starts, ends, np.array([0, 4, 5, 3, 8]), np.array([3, 7, 6, 9, 8]))
    assert t0.tolist() == [0, 2, 2, 1, 3]
    assert t1.tolist() == [1, 3, 3, 4, 3]  # the empty range [8, 8) covers no token


def test_token_anchor_skips_leading_space_and_whitespace_tokens():
    text = "a  foo\n\tb"
    # tokens: "a", " ", " foo", "\n\t", "b"
    s = np.array([0, 1, 2, 6, 8])
    e = np.array([1, 2, 6, 8, 9])
    assert offsets.token_anchor(text, s, e).tolist() == [0, -1, 3, -1, 8]


def test_token_tables_equal_binary_search():
    rng = np.random.default_rng(0)
    for n in (0, 1, 7, 300):
        # tokens tiling [0, n), and a non-tiling set (gaps, repeats) with sorted starts and ends
        cuts = np.unique(np.concatenate([[0, n], rng.integers(0, n + 1, size=n // 3)]))
        tilings = [(cuts[:-1], cuts[1:])]
        s = np.sort(rng.integers(0, n + 1, size=n // 2))
        tilings.append((s, np.sort(np.minimum(s + rng.integers(0, 4, size=len(s)), n))))
        for ts_, te_ in tilings:
            tables = offsets.token_tables(ts_, te_, n)
            a = rng.integers(0, n + 1, size=200)
            b = np.minimum(a + rng.integers(0, 9, size=200), n)
            want = offsets.char_span_to_tokens(ts_, te_, a, b)
            got = offsets.char_span_to_tokens(ts_, te_, a, b, tables)
            assert all(np.array_equal(x, y) for x, y in zip(got, want))
            assert np.array_equal(offsets.last_start_table(ts_, n)[a], np.searchsorted(ts_, a, side="right") - 1)


def test_token_anchor_ascii_and_non_ascii_agree():
    text = " def  f(x):\n\treturn x  # é\n"
    ts_ = np.arange(len(text))
    te_ = ts_ + 1
    a = offsets.token_anchor(text, ts_, te_)
    b = offsets.token_anchor(text.replace("é", "e"), ts_, te_)
    assert np.array_equal(a, b) and (a[np.array([c.isspace() for c in text])] == -1).all()
