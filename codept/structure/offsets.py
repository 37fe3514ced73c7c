"""The one place that converts between UTF-8 byte, character and token offsets.

tree-sitter reports UTF-8 byte offsets; ``tokenizers`` reports character (code point) offsets;
objectives work in token indices. All conversions are vectorised NumPy.

1. ``byte_to_char``: for ASCII text the identity; otherwise a lookup table built from the UTF-8 lead
   bytes (``char_of_byte[b]`` = index of the character containing byte ``b``; ``len(bytes)`` maps to
   ``len(text)``). Cost O(bytes) once per non-ASCII file.
2. ``char_to_byte``: the inverse, from the cumulative UTF-8 length of each character.
3. ``char_span_to_tokens``: token offsets from ``tokenizers`` (untrimmed, so they tile the text) ->
   the smallest token range ``[t0, t1)`` covering a character range; by binary search, or, for
   many ranges of one file, by look-up in ``token_tables`` (counts per char offset, O(chars)).
4. ``token_anchor``: the character a token "stands for": its first non-whitespace character (a
   byte-level BPE token such as ``" foo"`` carries the preceding space).
5. ``rows_in``: which (start, end) ranges of one list occur in another, by a table indexed by
   start offset (no sort) when no two ranges of the other share a start.

Not covered: grapheme clusters (a character here is a code point, like Python's ``str``).
"""

from __future__ import annotations

import numpy as np

_WHITESPACE = np.zeros(128, dtype=bool)
_WHITESPACE[[9, 10, 11, 12, 13, 32]] = True


def byte_to_char_table(data: bytes) -> np.ndarray | None:
    """Table mapping byte offset (0..len(data)) -> char offset; None when data is ASCII (identity)."""
    if data.isascii():
        return None
    b = np.frombuffer(data, dtype=np.uint8)
    is_lead = (b & 0xC0) != 0x80  # a character starts at every non-continuation byte
    table = np.empty(len(b) + 1, dtype=np.int64)
    table[:-1] = np.cumsum(is_lead) - 1
    table[-1] = int(is_lead.sum())
    # a byte offset inside a character (never produced by tree-sitter) maps to that character
    return table


def byte_to_char(offsets: np.ndarray, table: np.ndarray | None) -> np.ndarray:
    offsets = np.asarray(offsets, dtype=np.int64)
    return offsets if table is None else table[offsets]


def char_to_byte(text: str, offsets: np.ndarray) -> np.ndarray:
    """Char offsets (0..len(text)) -> UTF-8 byte offsets."""
    offsets = np.asarray(offsets, dtype=np.int64)
    if text.isascii():
        return offsets
    cps = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    width = 1 + (cps >= 0x80) + (cps >= 0x800) + (cps >= 0x10000)
    cum = np.zeros(len(cps) + 1, dtype=np.int64)
    np.cumsum(width, out=cum[1:])
    return cum[offsets]


def char_span_to_tokens(tok_starts: np.ndarray, tok_ends: np.ndarray, start: np.ndarray, end: np.ndarray,
                        tables: tuple[np.ndarray, np.ndarray] | None = None):
    """Smallest token range [t0, t1) whose tokens overlap the char range [start, end).

    ``tok_starts``/``tok_ends`` must be sorted (they are for tokenizer offsets). An empty result
    (t0 >= t1) means no token overlaps the range. With ``tables`` (:func:`token_tables` of the
    same tokens) the binary searches become look-ups, same result.
    """
    if tables is None:
        t0 = np.searchsorted(tok_ends, start, side="right")  # first token ending after `start`
        t1 = np.searchsorted(tok_starts, end, side="left")  # tokens starting before `end`
    else:
        t0, t1 = tables[0][start], tables[1][end]
    return t0, np.where(np.asarray(end) > np.asarray(start), t1, t0)  # an empty range covers nothing


def token_tables(tok_starts: np.ndarray, tok_ends: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per char offset c in [0, n]: (number of tokens ending at or before c, number of tokens
    starting before c), i.e. ``searchsorted(tok_ends, c, "right")`` and
    ``searchsorted(tok_starts, c, "left")`` for every c at once. O(n + T) once per file; a
    look-up then costs a gather instead of a binary search over T tokens."""
    ends_le = np.cumsum(np.bincount(tok_ends, minlength=n + 1))
    starts_at = np.bincount(tok_starts, minlength=n + 1)
    return ends_le, np.cumsum(starts_at) - starts_at


def last_start_table(starts: np.ndarray, n: int) -> np.ndarray:
    """Per char offset c in [0, n]: index of the last of the sorted `starts` at or before c, -1 if
    none (``searchsorted(starts, c, "right") - 1`` for every c at once)."""
    return np.cumsum(np.bincount(starts, minlength=n + 1)) - 1


def token_anchor(text: str, tok_starts: np.ndarray, tok_ends: np.ndarray) -> np.ndarray:
    """Char offset of each token's first non-whitespace char, -1 for all-whitespace tokens.

    Byte-level BPE pre-tokenization attaches at most one leading space to a word token and keeps
    longer whitespace runs as tokens of their own, so checking the first two characters suffices.
    """
    n = len(text)
    ws = np.zeros(n + 1, dtype=bool)
    if text.isascii():  # one byte per char: no UTF-32 copy
        ws[:n] = _WHITESPACE[np.frombuffer(text.encode("ascii"), dtype=np.uint8)]
    else:
        codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
        ascii_ = codes < 128
        ws[:n][ascii_] = _WHITESPACE[codes[ascii_]]
    ws[n] = True
    s = np.asarray(tok_starts, dtype=np.int64)
    e = np.asarray(tok_ends, dtype=np.int64)
    anchor = s.copy()
    lead_ws = ws[np.minimum(s, n)]
    anchor[lead_ws] += 1
    bad = (anchor >= e) | ws[np.minimum(anchor, n)]
    anchor[bad] = -1
    return anchor


def rows_in(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(len(a),) bool: which (start, end) rows of `a` (N, 2+) occur in `b` (M, 2+); offsets < 2**31.

    ``np.isin`` on packed keys sorts both sides; here a table ``end_at[start]`` of `b` answers each
    row of `a` by one look-up, O(N + M + max start). Falls back to ``np.isin`` when two rows of
    `b` share a start (nested nodes) or the offsets are large (> 2**24: the table's memory)."""
    if len(a) == 0 or len(b) == 0:
        return np.zeros(len(a), dtype=bool)
    n = int(max(a[:, 0].max(), b[:, 0].max())) + 1
    if n <= 1 << 24:
        end_at = np.full(n, -1, dtype=np.int32)
        end_at[b[:, 0]] = b[:, 1]
        if np.array_equal(end_at[b[:, 0]], b[:, 1]):
            return end_at[a[:, 0]] == a[:, 1]
    return np.isin(a[:, 0] << 32 | a[:, 1], b[:, 0] << 32 | b[:, 1])
