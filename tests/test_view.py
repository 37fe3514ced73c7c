"""CodeView: golden output, offsets with non-ASCII code, leaves, Arrow round trip, six languages."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from codept.structure import kinds
from codept.structure.view import CodeView, build_view, table_to_views, views_to_table

K = kinds.SPAN_KIND_ID
SRC = 'def f(a):\n    """Doc."""\n    b = a + 1\n    return b\n'


def test_golden_view(byte_tok):
    v = build_view("g.py", "python", SRC, byte_tok)
    assert len(v) == len(SRC)  # one token per byte (ASCII): token index == char index
    assert v.spans.tolist() == [
        [0, 51, K["function"]], [4, 5, K["identifier"]], [5, 8, K["parameters"]], [6, 7, K["identifier"]],
        [14, 51, K["block"]], [14, 24, K["string"]], [14, 24, K["statement"]], [29, 38, K["assignment"]],
        [29, 38, K["statement"]], [29, 30, K["identifier"]], [33, 38, K["expression"]],
        [33, 34, K["identifier"]], [37, 38, K["literal"]], [43, 51, K["statement"]], [50, 51, K["identifier"]],
    ]
    # token start, end, name id, role, binding
    assert v.idents.tolist() == [[4, 5, 0, 0, 0], [6, 7, 1, 0, 1], [29, 30, 2, 0, 2], [33, 34, 1, 1, 1],
                                 [50, 51, 2, 1, 2]]
    assert v.names == ["f", "a", "b"]
    # kind function, def [0, 51), name [4, 5), doc [14, 24)
    assert v.functions.tolist() == [[0, 0, 51, 4, 5, 14, 24]]
    assert v.leaf.tolist() == [
        0, 0, 0, -1, 1, 2, 3, 4, 5, -1, -1, -1, -1, -1, 6, 6, 6, 7, 7, 7, 7, 8, 8, 8, -1, -1, -1, -1, -1,
        9, -1, 10, -1, 11, -1, 12, -1, 13, -1, -1, -1, -1, -1, 14, 14, 14, 14, 14, 14, -1, 15, -1]
    assert not v.has_error and v.errors.shape == (0, 2)


NON_ASCII = '''def grüße(naïve, 名前="日本語 😀"):
    """Grüße an 名前."""
    naïve += len(名前)
    return naïve
'''


@pytest.mark.parametrize("tok_name", ["byte_tok", "small_tok"])
def test_non_ascii_identifiers_and_strings(tok_name, request):
    tok = request.getfixturevalue(tok_name)
    v = build_view("u.py", "python", NON_ASCII, tok)
    got = {(v.names[n], kinds.ROLES[r]) for _s, _e, n, r, _b in v.idents.tolist()}
    assert {("grüße", "def"), ("naïve", "def"), ("名前", "def"), ("naïve", "ref"), ("名前", "ref")} <= got
    for s, e, n, _r, _b in v.idents.tolist():  # token ranges cover exactly the name (+ a BPE space)
        assert v.token_text(s, e).strip() == v.names[n]
    strings = [v.token_text(s, e).strip() for s, e, k in v.spans.tolist() if k == K["string"]]
    assert '"日本語 😀"' in strings
    (kind, *_rest, ds, de), = v.functions.tolist()
    assert v.token_text(ds, de).strip() == '"""Grüße an 名前."""'
    # all naïve identifiers share one binding (parameter, += target, return)
    b = {bb for s, e, n, r, bb in v.idents.tolist() if v.names[n] == "naïve"}
    assert len(b) == 1


def test_leaves_group_tokens_of_one_identifier(small_tok):
    text = "def very_long_identifier_name(x):\n    return x\n"
    v = build_view("l.py", "python", text, small_tok)
    (s, e, *_), = [row for row in v.idents.tolist() if v.names[row[2]] == "very_long_identifier_name"]
    assert e - s > 1  # several BPE tokens...
    assert len(set(v.leaf[s:e].tolist())) == 1 and v.leaf[s] >= 0  # ...one leaf
    ws = [i for i in range(len(v)) if v.token_text(i, i + 1).strip() == ""]
    assert ws and all(v.leaf[i] == -1 for i in ws)


def test_text_between_leaves_is_one_unit(small_tok):
    """Python keeps a string's content as a node whose only children are its escape sequences: the
    text around an escape is no leaf. Each run of it is one unit, apart from the escape's leaf."""
    text = 'x = "hello world\\n more text"\n'
    v = build_view("e.py", "python", text, small_tok)
    unit = {}
    for i in range(len(v)):
        unit.setdefault(int(v.leaf[i]), []).append(v.token_text(i, i + 1))
    runs = {"".join(toks).strip() for k, toks in unit.items() if k >= 0}
    assert {"hello world", "\\n", "more text", '"', "x", "="} <= runs
    assert "".join(unit[-1]).strip() == ""


def test_every_token_with_text_has_one_contiguous_unit(small_tok):
    """On real files (a sample of the stdlib): a token holding a non-space char has a leaf id, a
    whitespace-only token has -1, and the tokens of one id are contiguous (whitespace aside)."""
    from codept.data.sources import read_source, stdlib_files

    ws = " \t\n\r\x0b\x0c"
    for path in stdlib_files()[::25]:
        v = build_view(str(path), "python", read_source(path), small_tok)
        blank = np.array([v.token_text(i, i + 1).strip(ws) == "" for i in range(len(v))], dtype=bool)
        assert ((v.leaf == -1) == blank).all(), path
        ids = v.leaf[~blank]
        runs = 1 + int((ids[1:] != ids[:-1]).sum()) if len(ids) else 0
        assert runs == len(np.unique(ids)), path


def test_special_ids_never_in_views(small_tok):
    from codept.tokenizer import n_special

    v = build_view("s.py", "python", "x = '<mask> <pad> <sentinel_0>'\n", small_tok)
    assert v.input_ids.min() >= n_special(small_tok)


def _assert_same(a: CodeView, b: CodeView):
    assert (a.path, a.lang, a.text, a.has_error, a.names) == (b.path, b.lang, b.text, b.has_error, b.names)
    for f in ("input_ids", "offsets", "leaf", "spans", "idents", "functions", "errors"):
        x, y = getattr(a, f), getattr(b, f)
        assert x.dtype == y.dtype and x.shape == y.shape, f
        np.testing.assert_array_equal(x, y, err_msg=f)


def test_arrow_round_trip(small_tok, tmp_path):
    views = [build_view("a.py", "python", SRC, small_tok), build_view("u.py", "python", NON_ASCII, small_tok),
             build_view("e.py", "python", "def f(:\n  pass\n", small_tok)]
    table = views_to_table(views)
    path = tmp_path / "v.arrow"
    with pa.ipc.new_stream(str(path), table.schema) as w:
        w.write_table(table)
    back = table_to_views(pa.ipc.open_stream(str(path)).read_all())
    for a, b in zip(views, back):
        _assert_same(a, b)


SNIPPETS = {
    "java": ("A.java", "class A {\n  /** Adds. */\n  int add(int a, int b) { int c = a + b; return c; }\n}\n"),
    "javascript": ("a.js", "/** Adds. */\nfunction add(a, b) { const c = a + b; return c; }\n"),
    "go": ("a.go", "package a\n\n// Add: Adds.\nfunc Add(a, b int) int { c := a + b; return c }\n"),
    "ruby": ("a.rb", "# Adds.\ndef add(a, b)\n  c = a + b\n  c\nend\n"),
    "php": ("a.php", "<?php\n/** Adds. */\nfunction add($a, $b) { $c = $a + $b; return $c; }\n"),
    "python": ("a.py", 'def add(a, b):\n    """Adds."""\n    c = a + b\n    return c\n'),
}


@pytest.mark.parametrize("lang", sorted(SNIPPETS))
def test_every_language_builds_a_view(lang, small_tok):
    path, src = SNIPPETS[lang]
    v = build_view(path, lang, src, small_tok)
    assert not v.has_error
    docs = [v.token_text(ds, de) for *_x, ds, de in v.functions.tolist() if ds >= 0]
    assert any("Adds." in d for d in docs), (lang, v.functions)
    # `c` defined then read: one binding, a def and a ref
    c = [(r, b) for s, e, n, r, b in v.idents.tolist() if v.names[n].lstrip("$") == "c"]
    assert {kinds.ROLES[r] for r, _ in c} == {"def", "ref"} and len({b for _, b in c}) == 1, (lang, c)
    assert {K["call"], K["function"]} & set(v.spans[:, 2].tolist())


def test_name_ids_exact_with_and_without_hash_collisions(monkeypatch):
    from codept.structure import view as view_mod

    data = "ab a abc ab é éé a" + "x" * 300 + " ab\0 ab\0\0 ab".replace("\0", "\x01")
    data = data.encode()
    words = [(m.start(), m.end()) for m in __import__("re").finditer(rb"\S+", data)]
    ranges = np.array(words + [(0, 0), (3, 3)], dtype=np.int64)

    def check(ids, first):
        want = [data[s:e] for s, e in ranges[: len(ids)].tolist()]
        assert all((ids[i] == ids[j]) == (want[i] == want[j]) for i in range(len(want)) for j in range(len(want)))
        assert [want[f] for f in first.tolist()] == [want[ids.tolist().index(k)] for k in range(len(first))]

    check(*view_mod.name_ids(data, ranges))  # one range > max_len: the dict path
    check(*view_mod.name_ids(data, ranges[:6]))  # the hashed path
    monkeypatch.setattr(view_mod, "_HASH_MUL", np.zeros_like(view_mod._HASH_MUL))  # every hash collides
    check(*view_mod.name_ids(data, ranges[:6]))
