"""code_doc: multi-part examples through pack/collate, the objective on real code, the contrastive head."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from codept.attention import visible
from codept.data.collate import collate
from codept.data.example import IGNORE, Example
from codept.data.pack import pack, split_long, unpack
from codept.data.sources import read_source, stdlib_files
from codept.data.stream import Mixture, PackedStream, Source
from codept.model import pretrainer as P
from codept.model import transformer as T
from codept.objectives import HEADS_OF, build
from codept.objectives import code_doc
from codept.objectives.code_doc import candidates
from codept.objectives.render import Vocab
from codept.structure.grammar import SkipFile
from codept.structure.kinds import DEFINITION_KINDS
from codept.structure.view import build_view

GRAMMARS = Path(__file__).resolve().parents[1] / "grammars"
BIG = 10**6  # no cut: whole doc, whole definition


def decode(tok, ids) -> str:
    return tok.decode(np.asarray(ids).tolist(), skip_special_tokens=False)


def sides(e: Example) -> tuple[np.ndarray, np.ndarray]:
    b = e.part_bounds()
    assert e.n_parts == 2 and b.tolist() == [0, b[1], len(e)] and 0 < b[1] < len(e)
    return e.input_ids[: b[1]], e.input_ids[b[1] :]


def stdlib_views(tok, lo, hi, min_size=3000):
    out = []
    for p in stdlib_files()[lo:hi]:
        if p.stat().st_size < min_size:
            continue
        try:
            out.append(build_view(str(p), "python", read_source(p), tok))
        except SkipFile:
            pass
    return out


def fixture_view(lang: str, name: str, tok):
    """A grammar fixture without its caret annotation lines (they repeat the doc text)."""
    path = GRAMMARS / lang / "fixtures" / name
    text = "".join(ln for ln in path.read_text().splitlines(keepends=True) if not re.match(r"\s*//\s*(\^|<-)", ln))
    return build_view(path.name, lang, text, tok)


# --- Example.parts and packing --------------------------------------------------------------------------


def two_part(n0: int, n1: int, first: int = 10, **scalars) -> Example:
    ids = np.arange(first, first + n0 + n1, dtype=np.int32)
    return Example(ids, np.ones(n0 + n1, bool), labels={"mlm": ids.copy()},
                   scalars=scalars, parts=np.repeat(np.array([0, 1], np.int32), [n0, n1]))


def test_parts_are_checked():
    ok = two_part(3, 2, pair=[4, 5])
    assert ok.n_parts == 2 and ok.part_bounds().tolist() == [0, 3, 5] and ok.scalar_of_parts("pair") == [4, 5]
    ids = np.arange(4, dtype=np.int32)
    with pytest.raises(ValueError, match="start at 0"):
        Example(ids, np.ones(4, bool), parts=np.array([0, 0, 2, 2]))
    with pytest.raises(ValueError, match="start at 0"):
        Example(ids, np.ones(4, bool), parts=np.array([1, 1, 1, 1]))
    with pytest.raises(ValueError, match="parts has shape"):
        Example(ids, np.ones(4, bool), parts=np.array([0, 1]))
    with pytest.raises(ValueError, match="3 values for 2 parts"):
        two_part(2, 2, pair=[1, 2, 3])
    with pytest.raises(ValueError, match="two parts"):
        Example(ids, np.ones(4, bool), pointers={"p": np.array([[0, 1], [1, 2]])}, parts=np.array([0, 0, 1, 1]))


def test_truncation_and_window_keep_parts_consistent():
    ex = two_part(5, 5, pair=[6, 7], sop=1)
    for long in ("split", "truncate"):  # a multi-part example is never split
        (t,) = split_long([ex], 7, long)
        assert t.parts.tolist() == [0] * 5 + [1] * 2 and t.scalars == {"pair": [6, 7], "sop": 1}
        (t,) = split_long([ex], 4, long)
        assert t.parts.tolist() == [0] * 4 and t.scalars == {"pair": [6], "sop": 1}  # part 1 lost with its value
    w = ex.window(6, 9)  # inside part 1 only: renumbered from 0
    assert w.parts.tolist() == [0, 0, 0] and w.scalars["pair"] == [7] and w.input_ids.tolist() == [16, 17, 18]


def test_pack_makes_each_part_a_segment():
    plain = Example(np.arange(100, 106, dtype=np.int32), np.ones(6, bool), scalars={"sop": 1},
                    pointers={"p": np.array([[0, 5]])})
    multi = Example(np.arange(10, 19, dtype=np.int32), np.ones(9, bool), scalars={"pair": [8, 9], "sop": 0},
                    pointers={"p": np.array([[0, 3], [5, 8], [-1, 6]])}, parts=np.array([0] * 4 + [1] * 5))
    (row,) = pack([plain, multi], 20, pad_id=0)
    # best fit, longest first: the 9-token pair, then the plain document
    assert row["segment_ids"].tolist() == [1] * 4 + [2] * 5 + [3] * 6 + [0] * 5
    assert row["positions"][:15].tolist() == [0, 1, 2, 3, 0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 5]
    assert row["scalar.pair"].tolist() == [8, 9, IGNORE] and row["scalar.sop"].tolist() == [0, 0, 1]  # int: every part
    assert row["ptr.p"].tolist() == [[0, 3], [5, 8], [-1, 6], [9, 14]] and row["ptr_seg.p"].tolist() == [1, 2, 2, 3]
    m = visible(row["segment_ids"], row["prefix"])
    assert not m[:4, 4:].any() and not m[4:9, :4].any() and m[:4, :4].all() and m[4:9, 4:9].all()
    back = unpack(row)  # the inverse is per segment: the pair comes back as its two parts
    assert [b.input_ids.tolist() for b in back] == [list(range(10, 14)), list(range(14, 19)), list(range(100, 106))]
    assert [b.scalars for b in back] == [{"pair": 8, "sop": 0}, {"pair": 9, "sop": 0}, {"pair": IGNORE, "sop": 1}]
    assert [b.pointers["p"].tolist() for b in back] == [[[0, 3]], [[1, 4], [-1, 2]], [[0, 5]]]
    assert all(b.parts is None for b in back)


# --- the objective on real code -------------------------------------------------------------------------


def test_registry_entry_and_config(byte_tok):
    vocab = Vocab.from_tokenizer(byte_tok)
    assert HEADS_OF["code_doc"] == ("contrastive",)
    with pytest.raises(ValueError, match="kinds"):
        build("code_doc", vocab, pairs=1, kinds=("lambda",))
    with pytest.raises(ValueError, match="mlm_rate"):
        build("code_doc", vocab, pairs=1, mlm_rate=1.5)
    with pytest.raises(ValueError, match=">= 1"):
        build("code_doc", vocab, pairs=1, max_doc_tokens=0)


def python_functions(text: str) -> dict[str, set]:
    """name -> docstrings (raw) of the (async) functions of a module, from ``ast``."""
    out: dict[str, set] = {}
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.setdefault(node.name, set()).add(ast.get_docstring(node, clean=False))
    return out


def spliced(text: str, doc: str, code: str) -> bool:
    """Whether `code` is the text around some occurrence of `doc` in `text` with the doc cut out:
    its signature line before the doc, the rest after it."""
    head = code.partition("\n")[0]
    i = text.find(doc)
    while i >= 0:
        j = text.rfind(head, 0, i)
        if j >= 0:
            pre = text[j:i]
            if code == pre + text[i + len(doc): i + len(doc) + len(code) - len(pre)]:
                return True
        i = text.find(doc, i + 1)
    return False


def test_python_doc_side_is_the_docstring_and_code_side_lacks_it(byte_tok):
    """byte-level tokens (one per byte): exact text. The doc side evaluates to the function's
    docstring; the code side is the definition from `def` with exactly the docstring removed."""
    vocab = Vocab.from_tokenizer(byte_tok)
    obj = build("code_doc", vocab, pairs=1, max_doc_tokens=BIG, max_code_tokens=BIG, doc="raw")
    views = [v for v in stdlib_views(byte_tok, 100, 130, min_size=6000) if v.text.isascii()][:4]
    assert len(views) >= 3
    seen = 0
    for v in views:
        funcs = python_functions(v.text)
        picked = set()
        for seed in range(30):
            e = obj(v, np.random.default_rng([seed, 7]))
            if e is None:
                break
            doc_ids, code_ids = sides(e)
            doc, code = decode(byte_tok, doc_ids), decode(byte_tok, code_ids)
            m = re.match(r"(async\s+)?def\s+(\w+)\s*\(", code)
            assert m, code[:80]
            assert ast.literal_eval(doc) in funcs[m.group(2)]  # the doc side IS the docstring literal
            # the code side is the file's text around this docstring, without it
            assert doc not in code and spliced(v.text, doc, code)
            assert e.prefix.all() and e.labels == {}
            a, b = e.scalars["pair"]
            assert b == a + 1 and a % 2 == 0 and 0 <= a < 2**63
            picked.add(m.group(2))
            seen += 1
        n_cand = len(candidates(v.functions, np.array([0, 1])))
        assert len(picked) > min(n_cand, 30) // 3  # uniform choice: many different functions picked
    assert seen >= 60


def test_python_with_a_real_bpe_and_cuts(small_tok):
    vocab = Vocab.from_tokenizer(small_tok)
    obj = build("code_doc", vocab, pairs=1, doc="raw")  # defaults: 32 doc tokens, 128 code tokens
    cfg = code_doc.Config()
    views = stdlib_views(small_tok, 300, 330)
    n = 0
    for v in views:
        funcs = python_functions(v.text)
        for seed in range(5):
            e = obj(v, np.random.default_rng(seed))
            if e is None:
                continue
            doc_ids, code_ids = sides(e)
            assert len(doc_ids) <= cfg.max_doc_tokens and len(code_ids) <= cfg.max_code_tokens
            doc, code = decode(small_tok, doc_ids), decode(small_tok, code_ids)
            m = re.match(r"\s*(async\s+)?def\s+(\w+)\s*\(", code)
            assert m, code[:80]
            first = next(ln for ln in doc.strip().strip("rbuRBU").strip("\"'").splitlines() + [""] if ln.strip())
            assert any(first.strip() in (d or "") for d in funcs[m.group(2)])
            if first.strip() and len(first.strip()) > 20:
                assert first.strip() not in code
            n += 1
    assert n >= 50


@pytest.mark.parametrize("lang,fixture,name,doc_words,code_start", [
    ("java", "spans.java", "Shapes", "Builds a shape.", "public Shapes(int width) {"),
    ("go", "scopes.go", "helper", "helper doubles n.\n// A second line of doc.", "func helper(n int) int {"),
])
def test_brace_language_doc_precedes_the_definition(byte_tok, lang, fixture, name, doc_words, code_start):
    v = fixture_view(lang, fixture, byte_tok)
    obj = build("code_doc", Vocab.from_tokenizer(byte_tok), pairs=1, max_doc_tokens=BIG, max_code_tokens=BIG, doc="raw")
    pairs = {}
    for seed in range(60):
        doc_ids, code_ids = sides(obj(v, np.random.default_rng(seed)))
        pairs[decode(byte_tok, doc_ids)] = decode(byte_tok, code_ids)
    # every documented function / method was picked, and only those (never a class doc)
    documented = {v.token_text(r[5], r[6]) for r in v.functions.tolist() if r[5] >= 0 and r[0] in (0, 1)}
    assert set(pairs) == documented and len(documented) >= 2
    doc = next(d for d in pairs if doc_words in d)
    code = pairs[doc]
    assert doc.strip().startswith("/**" if lang == "java" else "//")
    assert code.strip().startswith(code_start.strip()) and code.rstrip().endswith("}")
    assert doc_words.split("\n")[0] not in code
    assert not any("Shapes and their areas" in d or "Point is a position" in d for d in pairs)  # classes


SUMMARY_SRC = '''def best(x):
    r"""Return the "best" value of
    x, e.g. the largest one.

    More text that is not the summary.
    """
    return x


def glue(y):
    """Compute glue over two lines. Then a second sentence."""
    return y


def doctest_only(z):
    """
    >>> doctest_only(1)
    1
    """
    return z


def marks(w):
    """'Quoted' start!"""
    return w
'''


def summaries(obj, view) -> dict[str, str]:
    """function name -> decoded doc side, over enough draws to pick every candidate."""
    out = {}
    for seed in range(80):
        e = obj(view, np.random.default_rng(seed))
        if e is not None:
            doc, code = sides(e)
            out[re.match(r"\s*def\s+(\w+)", decode(obj.tok, code)).group(1)] = decode(obj.tok, doc)
    return out


@pytest.mark.parametrize("tok_name", ["small_tok", "default_tok"])
def test_summary_doc_side_is_the_first_sentence_without_markers(request, tok_name):
    """doc="summary" (the default): from the first word to the first sentence break, quotes and
    string prefixes dropped, a doctest-only doc gives no pair; "raw" keeps the literal."""
    tok = request.getfixturevalue(tok_name)
    view = build_view("s.py", "python", SUMMARY_SRC, tok)
    obj = build("code_doc", Vocab.from_tokenizer(tok), pairs=1)
    obj.tok = tok
    got = {k: " ".join(v.split()) for k, v in summaries(obj, view).items()}
    assert got == {"best": 'Return the "best" value of x, e.g. the largest one.',
                   "glue": "Compute glue over two lines.",
                   "marks": "Quoted' start!"} or got["marks"] == "'Quoted' start!"
    raw = build("code_doc", Vocab.from_tokenizer(tok), pairs=1, doc="raw")
    raw.tok = tok
    assert summaries(raw, view)["doctest_only"].strip().startswith('"""')
    with pytest.raises(ValueError, match="doc="):
        build("code_doc", Vocab.from_tokenizer(tok), pairs=1, doc="first_line")


def test_summary_falls_back_to_a_definition_with_a_summary(small_tok):
    """A draw that picks the doctest-only function takes another one instead of giving no pair;
    a file whose only doc opens with a doctest gives none."""
    view = build_view("s.py", "python", SUMMARY_SRC, small_tok)
    obj = build("code_doc", Vocab.from_tokenizer(small_tok), pairs=1)
    names = [view.token_text(f[3], f[4]).strip() for f in view.functions]
    assert names == ["best", "glue", "doctest_only", "marks"]  # all four are candidates
    assert 2 in [np.random.default_rng(seed).integers(4) for seed in range(40)]  # some draws pick doctest_only
    made = [obj(view, np.random.default_rng(seed)) for seed in range(40)]
    assert all(e is not None for e in made)
    code = {re.match(r"\s*def\s+(\w+)", decode(small_tok, sides(e)[1])).group(1) for e in made}
    assert code == {"best", "glue", "marks"}
    only = SUMMARY_SRC[SUMMARY_SRC.index("def doctest_only"):SUMMARY_SRC.index("def marks")]
    assert obj(build_view("d.py", "python", only, small_tok), np.random.default_rng(0)) is None


@pytest.mark.parametrize("lang,src,expected", [
    ("java", "class A {\n    /**\n     * Notifies all listeners of a change\n     * @param changed whether it did\n"
             "     */\n    void fire(boolean changed) { }\n}\n", "Notifies all listeners of a change"),
    ("php", "<?php\nclass A {\n    /**\n     * Default constructor\n     *\n     * @param array $o options\n"
            "     */\n    function __construct($o) { }\n}\n", "Default constructor"),
    ("ruby", "class A\n  # Get a value by name\n  # @param name [String] the key\n  def get(name)\n    name\n  end\n"
             "end\n", "Get a value by name"),
    # the token after a dropped " <" keeps no space ("bar", not " bar": BPE ids differ): "abar"
    ("java", "class A {\n    /**\n     * Returns the {@code Foo} of a <b>bar</b> list\n     * <p>More text.\n     */\n"
             "    int f() { return 0; }\n}\n", "Returns the Foo of abar list"),
    ("java", "class A {\n    /** <p>Builds it. */\n    int f() { return 0; }\n}\n", "Builds it."),
    ("ruby", "class A\n  # @api private\n  # @param code [Integer] the exit code\n  #   to return\n  #\n"
             "  # Reports a run that exited early.\n  def f(code)\n    code\n  end\nend\n",
     "Reports a run that exited early."),
])
def test_summary_skips_tags_and_markup(small_tok, lang, src, expected):
    """Javadoc / PHPDoc / YARD: a line opening with a tag ends the summary, tags opening the doc are
    skipped (with their indented continuation), inline tags and HTML dropped: the summary is what
    the probe's query cleaner (codept.probe.query.clean_query, on strings) makes of the doc."""
    from codept.probe.query import clean_query, normalize_query

    v = build_view("a", lang, src, small_tok)
    obj = build("code_doc", Vocab.from_tokenizer(small_tok), pairs=1)
    got = " ".join(decode(small_tok, sides(obj(v, np.random.default_rng(0)))[0]).split())
    assert got == expected
    (_, _, _, ns, ne, ds, de), = [f for f in v.functions.tolist() if f[0] != DEFINITION_KINDS.index("class")]
    query = normalize_query(clean_query(v.token_text(ds, de), lang, v.token_text(ns, ne)))
    assert normalize_query(got) == query or "abar" in got


def _java(doc: str) -> str:
    return "class A {\n    " + doc + "\n    int f() { return 0; }\n}\n"


@pytest.mark.parametrize("lang,src", [
    ("java", _java("/** {@code true} if the list is empty. */")),
    ("java", _java("/** {@link Foo} instance for bars. */")),
    ("java", _java("/** Returns {@code x}, or {@code y}. */")),
    ("javascript", "/**\n * @description Returns x.\n */\nfunction f() { return 1; }\n"),
    ("ruby", "class A\n  # @api private\n  # <b>Builds</b> it.\n  def f\n    1\n  end\nend\n"),
    ("go", "package a\n\n// @Summary get a user\n// @Router /x [get]\nfunc F() {}\n"),  # Go: no tag rules
    ("python", 'def f():\n    """Compute x\n    @param a: foo"""\n    return 1\n'),  # Python: no tag rules
])
def test_summary_reads_markup_as_the_probe_does(small_tok, lang, src):
    """Docs that open with markup, or mix markup and punctuation in one token ("}.", ">,"): the
    doc side has no markup left and says what the probe's query says."""
    from codept.probe.query import clean_query, normalize_query

    v = build_view("a", lang, src, small_tok)
    (_, _, _, ns, ne, ds, de), = [f for f in v.functions.tolist() if f[0] != DEFINITION_KINDS.index("class")]
    e = build("code_doc", Vocab.from_tokenizer(small_tok), pairs=1)(v, np.random.default_rng(0))
    got = decode(small_tok, sides(e)[0])
    query = clean_query(v.token_text(ds, de), lang, v.token_text(ns, ne))
    assert normalize_query(got) == normalize_query(query) != ""
    if lang != "go":
        assert not set("{}<>") & set(got), got


@pytest.mark.parametrize("doc", ["/** {@inheritDoc} */", "/**\n     * @deprecated\n     * <p>Builds it.\n     */"])
def test_summary_of_a_tag_only_javadoc_is_no_pair(small_tok, doc):
    """The probe reads no query in these (nothing before the first block tag; an inherited doc)."""
    v = build_view("a", "java", _java(doc), small_tok)
    assert build("code_doc", Vocab.from_tokenizer(small_tok), pairs=1)(v, np.random.default_rng(0)) is None


@pytest.mark.parametrize("lang,fixture,expected", [
    ("java", "spans.java", "Builds a shape."),
    ("go", "scopes.go", "doubles n."),  # Go's leading function name is dropped, as the probe's queries do
])
def test_summary_of_brace_language_docs(small_tok, lang, fixture, expected):
    v = fixture_view(lang, fixture, small_tok)
    obj = build("code_doc", Vocab.from_tokenizer(small_tok), pairs=1)
    docs = {" ".join(decode(small_tok, sides(obj(v, np.random.default_rng(s)))[0]).split()) for s in range(60)}
    assert expected in docs
    assert not any(d.startswith(("/", "*")) for d in docs)


# a doc whose first paragraph has no full stop, then a line holding only the comment marker: the
# summary ends at that line (the probe's query does). PHP: MediaWiki's ContentSecurityPolicy::sendHeaders
# doc as written (tabs); the others the same shape in each language's comment syntax.
_MARKER_PARAGRAPH = [
    ("php", "<?php\nclass ContentSecurityPolicy {\n\t/**\n\t * Send CSP headers based on wiki config\n\t *\n"
            "\t * Main method that callers (OutputPage) are expected to use.\n\t * As a general rule, you would never"
            " call this in an extension unless\n\t * you have disabled OutputPage and are fully controlling the output.\n"
            "\t *\n\t * @since 1.32\n\t */\n\tpublic function sendHeaders() {\n\t\t$this->sendCSPHeader( 'a' );\n"
            "\t\treturn;\n\t}\n}\n"),
    ("java", "class A {\n    /**\n     * Send CSP headers based on wiki config\n     *\n     * Main method that callers"
             " are expected to use.\n     */\n    void send() { return; }\n}\n"),
    ("javascript", "/**\n * Send CSP headers based on wiki config\n *\n * Main method that callers are expected to use.\n"
                   " */\nfunction send() { return 1; }\n"),
    ("go", "package a\n\n// Send CSP headers based on wiki config\n//\n// Main method that callers are expected to use.\n"
           "func SendHeaders() {}\n"),
    ("ruby", "class A\n  # Send CSP headers based on wiki config\n  #\n  # Main method that callers are expected to use.\n"
             "  def send\n    1\n  end\nend\n"),
]


@pytest.mark.parametrize("lang,src", _MARKER_PARAGRAPH, ids=[x[0] for x in _MARKER_PARAGRAPH])
def test_summary_ends_at_a_comment_marker_only_line(small_tok, lang, src):
    """A line holding only `` *`` / ``//`` / ``#`` is a comment's empty line: a paragraph break.
    Before, the summary ran on into the next paragraph (5% of the PHP training pairs of
    minilm_six_cpu: "get the edit's parent revision id the "parent" revision is ..."), where the
    probe's query stops; now both say the first paragraph, in the view's summaries field too."""
    from codept.probe.query import clean_query, normalize_query

    v = build_view("a", lang, src, small_tok)
    (_, _, _, ns, ne, ds, de), = [f for f in v.functions.tolist() if f[0] != DEFINITION_KINDS.index("class")]
    e = build("code_doc", Vocab.from_tokenizer(small_tok), pairs=1)(v, np.random.default_rng(0))
    got = normalize_query(decode(small_tok, sides(e)[0]))
    assert got == normalize_query("Send CSP headers based on wiki config"), got
    assert got == normalize_query(clean_query(v.token_text(ds, de), lang, v.token_text(ns, ne)))


def test_summary_agrees_with_the_probe_queries_on_the_stdlib(small_tok):
    """The training doc side and the probe's query (codept.probe.query.clean_query, an independent
    string-level cleaner) agree word for word on most stdlib docstrings."""
    from codept.objectives.code_doc import summary_tokens
    from codept.probe.query import clean_query, normalize_query

    n = same = 0
    for v in stdlib_views(small_tok, 350, 380):
        off = v.offsets.reshape(-1, 2)
        for k, s, e, ns, ne, ds, de in v.functions.reshape(-1, 7).tolist():
            if ds < 0 or k not in (0, 1):
                continue
            name = v.text[off[ns, 0]: off[ne - 1, 1]].strip()
            query = clean_query(v.text[off[ds, 0]: off[de - 1, 1]], "python", name)
            ours = decode(small_tok, v.input_ids[summary_tokens(v.text, off, ds, de, name)])
            n += 1
            same += normalize_query(ours) == normalize_query(query)
    assert n >= 200 and same / n >= 0.8, (n, same / n)


def test_views_without_docs_give_none_and_the_stream_drops_them(small_tok):
    vocab = Vocab.from_tokenizer(small_tok)
    obj = build("code_doc", vocab, pairs=1)
    bare = build_view("a.py", "python", "def f(x):\n    return x\n\nclass C:\n    '''A class.'''\n", small_tok)
    assert obj(bare, np.random.default_rng(0)) is None  # a class doc only: not a function
    assert build("code_doc", vocab, pairs=1, kinds=("class",))(bare, np.random.default_rng(0)) is not None
    real = stdlib_views(small_tok, 350, 370)[:6]
    views = [bare, *real, bare]
    src = Source("code_doc", len(views), lambda i, rng: obj(views[i], rng))
    stream = PackedStream(Mixture([src], [1.0], seed=3), seq_len=256, pad_id=0, buffer=len(views))
    rows = stream.rows_of_buffer(0)
    made = [obj(v, np.random.default_rng(0)) for v in views]
    n_pairs = sum(e is not None for e in made)
    assert 0 < n_pairs < len(views)
    assert sum(int((r["scalar.pair"] % 2 == 0).sum()) for r in rows) == n_pairs


def test_determinism_by_seed(small_tok):
    obj = build("code_doc", Vocab.from_tokenizer(small_tok), pairs=1, mlm_rate=0.15)
    v = stdlib_views(small_tok, 400, 410)[0]
    a, b = obj(v, np.random.default_rng([1, 2, 3])), obj(v, np.random.default_rng([1, 2, 3]))
    assert a.input_ids.tobytes() == b.input_ids.tobytes() and a.parts.tobytes() == b.parts.tobytes()
    assert a.scalars == b.scalars and a.labels["mlm"].tobytes() == b.labels["mlm"].tobytes()
    keys = {obj(v, np.random.default_rng([1, 2, s])).scalars["pair"][0] for s in range(50)}
    assert len(keys) == 50  # a fresh pair id per draw


def test_optional_mlm_on_the_code_side(small_tok):
    vocab = Vocab.from_tokenizer(small_tok)
    plain, masked = build("code_doc", vocab, pairs=1), build("code_doc", vocab, pairs=1, mlm_rate=0.15)
    sel = tot = 0
    for v in stdlib_views(small_tok, 500, 520):
        for seed in range(4):
            e = masked(v, np.random.default_rng(seed))
            if e is None:
                continue
            lab = e.labels["mlm"]
            n0 = e.part_bounds()[1]
            assert (lab[:n0] == IGNORE).all()  # never on the doc side
            chosen = np.flatnonzero(lab != IGNORE)
            sel, tot = sel + len(chosen), tot + len(e) - n0
            # the labels are the code side's original tokens: the same draw without MLM shows them
            _, code = sides(plain(v, np.random.default_rng(seed)))
            assert (lab[n0:][lab[n0:] != IGNORE] == code[lab[n0:] != IGNORE]).all()
    assert tot > 2000 and abs(sel / tot - 0.15) < 0.02


# --- pack + collate + the real ContrastiveHead --------------------------------------------------------


@pytest.fixture(scope="module")
def mixed(small_tok):
    """code_doc pairs and ordinary MLM documents (function-sized windows) from real stdlib views."""
    vocab = Vocab.from_tokenizer(small_tok)
    pair, mlm = build("code_doc", vocab, pairs=1), build("mlm", vocab)
    views = stdlib_views(small_tok, 450, 490)
    exs = []
    for i, v in enumerate(views):
        e = pair(v, np.random.default_rng([i, 0]))
        if e is not None:
            exs.append(e)
        m = mlm(v, np.random.default_rng([i, 1]))
        exs.append(m.window(0, min(len(m), 40 + 13 * i % 150)))
    return exs


def test_pack_collate_mixed_rows(mixed):
    pairs = [e for e in mixed if e.parts is not None]
    assert len(pairs) >= 10 and len(mixed) - len(pairs) >= 10
    rows = pack(mixed, 256, pad_id=0)
    found = 0
    for r in rows:
        seg, pos, key = r["segment_ids"], r["positions"], r["scalar.pair"]
        assert len(key) == seg.max()  # one value per segment
        m = visible(seg, r["prefix"])
        q, k = np.nonzero(m)
        assert np.all(seg[q] == seg[k]) and np.all(seg[q] > 0)  # no attention across segments (parts)
        for s in range(1, seg.max() + 1):
            idx = np.flatnonzero(seg == s)
            assert np.all(np.diff(idx) == 1) and pos[idx].tolist() == list(range(len(idx)))
            if key[s - 1] != IGNORE and key[s - 1] % 2 == 0:  # a doc side: its code side is the next segment
                assert key[s] == key[s - 1] + 1
                nxt = np.flatnonzero(seg == s + 1)
                assert nxt[0] == idx[-1] + 1  # adjacent
                found += 1
            if key[s - 1] != IGNORE and key[s - 1] % 2 == 1:
                assert key[s - 2] == key[s - 1] - 1
    assert found == len(pairs)
    # the rows hold each pair's two sides as two documents (unpack is per segment)
    back = {d.input_ids.tobytes(): d.scalars["pair"] for r in rows for d in unpack(r)}
    for e in pairs:
        d, c = sides(e)
        assert back[d.tobytes()] == e.scalars["pair"][0] and back[c.tobytes()] == e.scalars["pair"][1]
    # varlen layout: the two sides are two sequences for the kernel
    vb = collate(rows[:4], varlen=True)
    seg = vb["segment_ids"][0].numpy()
    assert len(vb["cu_seqlens"]) - 1 == len(np.unique(seg)) == len(vb["scalar.pair"])


def test_contrastive_head_on_collated_pairs(mixed, small_tok):
    rows = pack(mixed, 256, pad_id=0)
    batch = collate(rows)
    n_pairs = sum(e.parts is not None for e in mixed)
    torch.manual_seed(0)
    model = T.Transformer(T.tiny(vocab_size=small_tok.get_vocab_size(), max_positions=256))
    heads = {h: P.build_head(h, model) for name in ("code_doc", "mlm") for h in HEADS_OF[name]}
    assert set(heads) == {"contrastive", "mlm"}
    pre = P.Pretrainer(model, heads)
    out = pre(batch)
    loss, n = out["contrastive"]
    assert torch.isfinite(loss) and n.item() == n_pairs
    assert loss.item() / n_pairs > 0.5  # an untrained model cannot tell pairs apart
    assert out["mlm"][1].item() > 0
    total = sum(ls / cnt.clamp(min=1) for ls, cnt in out.values())
    total.backward()
    g = model.embed.tokens.weight.grad
    assert g is not None and torch.isfinite(g).all() and g.abs().sum() > 0
    # the contrastive loss alone reaches the encoder
    model.zero_grad()
    loss2, _ = heads["contrastive"](model.encode(batch), batch)
    loss2.backward()
    assert model.embed.tokens.weight.grad.abs().sum() > 0



# --- every documented definition per read; hard negatives (issue 16) -----------------------------------

THREE = ('def add(a, b):\n    """Add two numbers."""\n    return a + b\n\n\n'
         'def sub(a, b):\n    """Subtract one number from another."""\n    return a - b\n\n\n'
         'def mul(a, b):\n    """Multiply the two numbers."""\n    return a * b\n\n\n'
         'def nodoc(a):\n    return a\n')


def test_every_documented_definition_per_read(small_tok):
    v = build_view("t.py", "python", THREE, small_tok)
    out = build("code_doc", Vocab.from_tokenizer(small_tok), max_tokens=0)(v, np.random.default_rng(0))
    assert isinstance(out, list) and len(out) == 3
    docs = sorted(decode(small_tok, sides(e)[0]).rstrip('"') for e in out)  # a BPE token may hold '."""'
    assert docs == ["Add two numbers.", "Multiply the two numbers.", "Subtract one number from another."]
    keys = [k for e in out for k in e.scalars["pair"]]
    assert len(set(k // 2 for k in keys)) == 3  # three pair ids, each with both sides
    two = build("code_doc", Vocab.from_tokenizer(small_tok), pairs=2, max_tokens=0)(v, np.random.default_rng(0))
    assert len(two) == 2
    with pytest.raises(ValueError, match="pairs=-1"):
        build("code_doc", Vocab.from_tokenizer(small_tok), pairs=-1)


def test_delivered_tokens_per_read_on_the_stdlib(small_tok):
    """The data path: tokens delivered per read of a file, every documented definition vs one."""
    views = stdlib_views(small_tok, 80, 120)
    vocab = Vocab.from_tokenizer(small_tok)
    one, every = build("code_doc", vocab, pairs=1), build("code_doc", vocab)
    n1 = sum(len(e) for i, v in enumerate(views) if (e := one(v, np.random.default_rng(i))) is not None)
    n0 = sum(len(x) for i, v in enumerate(views) for x in (every(v, np.random.default_rng(i)) or []))
    print(f"code_doc delivered tokens over {len(views)} files: one pair {n1}, every definition {n0}")
    assert n0 > 5 * n1


def test_hard_negatives_are_unmatched_parts_of_the_row(small_tok):
    v = build_view("t.py", "python", THREE, small_tok)
    out = build("code_doc", Vocab.from_tokenizer(small_tok), hard_negatives=True, max_tokens=0)(v, np.random.default_rng(0))
    docs = {decode(small_tok, e.input_ids[: e.part_bounds()[1]]) for e in out}
    for e in out:
        b = e.part_bounds()
        assert e.n_parts == 4
        doc, code, neg_doc, neg_code = (e.input_ids[b[i]: b[i + 1]] for i in range(4))
        p = e.scalars["pair"]
        assert p[0] // 2 == p[1] // 2 and len({p[0] // 2, p[2] // 2, p[3] // 2}) == 3
        assert [x % 2 for x in p] == [0, 1, 0, 1]
        nd = decode(small_tok, neg_doc)
        assert nd in docs and nd != decode(small_tok, doc)  # another definition's doc
        c, nc = decode(small_tok, code), decode(small_tok, neg_code)
        assert c != nc and c.split("(", 1)[1] == nc.split("(", 1)[1]  # only the name differs
        assert nc.split("(")[0].split()[-1] in ("add", "sub", "mul")
    rows = pack(out, 256, pad_id=0)
    batch = collate(rows)
    model = T.Transformer(T.tiny(vocab_size=small_tok.get_vocab_size(), max_positions=256))
    head = P.build_head("contrastive", model)
    assert head.count(batch) == 3  # the negatives match nothing
    hidden = model.encode(batch)
    z, key = head.embed(hidden, batch)
    assert len(key) == 12 and int((key % 2 == 1).sum()) == 6  # every part is a candidate


# --- the view's summaries field (prepare time) -------------------------------------------------------


def _online_doc(v, row: int, max_doc: int = 32) -> np.ndarray:
    """The doc side as code_doc computed it per read before the field: summary_tokens over 2m + 8 tokens."""
    from codept.structure.summary import summary_tokens

    off = v.offsets.reshape(-1, 2)
    _, s, e, ns, ne, ds, de = (int(x) for x in v.functions[row])
    name = v.text[off[ns, 0]: off[ne - 1, 1]].strip() if ne > ns else ""
    return v.input_ids[summary_tokens(v.text, off, ds, de, name, v.lang, 2 * max_doc + 8)][:max_doc]




def test_summaries_field_is_the_per_read_summary(small_tok):
    """The summaries field (built with the view) gives code_doc the doc side it computed per read:
    every documented definition of real stdlib files and of every grammar fixture (six languages),
    the same tokens, also after the Arrow round trip; a table without the column (views prepared
    before it existed) derives the same field per view."""
    import pyarrow as pa

    from codept.views import open_views
    from codept.structure.summary import SUMMARY_CAP
    from codept.structure.view import views_to_table

    views = stdlib_views(small_tok, 300, 330)
    views += [fixture_view(f.parent.parent.name, f.name, small_tok) for f in sorted(GRAMMARS.glob("*/fixtures/*.*"))]
    assert {v.lang for v in views if (v.functions[:, 5] >= 0).any()} >= {"python", "java", "go"}
    n = 0
    for v in views:
        summ = v.summaries
        assert summ.dtype == np.int32 and summ.shape[1:] == (2,)
        assert np.all(np.diff(summ[:, 0]) >= 0) and np.all(np.isin(summ[:, 0], np.flatnonzero(v.functions[:, 5] >= 0)))
        for r in np.flatnonzero(v.functions[:, 5] >= 0).tolist():
            got = summ[summ[:, 0] == r, 1]
            _, _, _, _, _, ds, de = v.functions[r].tolist()
            assert len(got) <= SUMMARY_CAP and np.all((got >= ds) & (got < de)) and np.all(np.diff(got) > 0)
            assert np.array_equal(v.input_ids[got][:32], _online_doc(v, r)), (v.path, r)
            n += 1
    assert n >= 250
    table = views_to_table(views)
    back = open_views(table)
    old = open_views(table.drop_columns(["summaries"]))
    for i, v in enumerate(views):
        assert np.array_equal(back[i].summaries, v.summaries) and np.array_equal(old[i].summaries, v.summaries)
    # the objective reads the field: same doc sides as the per-read path (max_doc_tokens > SUMMARY_CAP)
    vocab = Vocab.from_tokenizer(small_tok)
    fast = build("code_doc", vocab, max_tokens=0)
    slow = build("code_doc", vocab, max_doc_tokens=SUMMARY_CAP + 1, max_tokens=0)
    for v in views[:10]:
        a, b = fast(v, np.random.default_rng(5)) or [], slow(v, np.random.default_rng(5)) or []
        assert [decode(small_tok, sides(e)[0]) for e in a] == [decode(small_tok, sides(e)[0][:32]) for e in b]
        assert [sides(e)[1].tolist() for e in a] == [sides(e)[1].tolist() for e in b]


def _pairs_of(examples: list[Example]) -> list[tuple]:
    """(pair key, side tokens) of every part of `examples`, in order."""
    out = []
    for e in examples:
        b = e.part_bounds()
        out += [(k, e.input_ids[b[i]: b[i + 1]].tobytes()) for i, k in enumerate(e.scalars["pair"])]
    return out


@pytest.mark.parametrize("hard_negatives,mlm_rate", [(False, 0.0), (True, 0.0), (False, 0.15)])
def test_grouped_pairs_are_the_same_pairs_in_fewer_examples(small_tok, hard_negatives, mlm_rate):
    """max_tokens groups consecutive pairs of a read into one multi-part Example: the same parts,
    keys and labels in the same order as one Example per pair (same rng), every group within the
    budget unless a single pair exceeds it, and packed rows keep every part its own segment."""
    views = stdlib_views(small_tok, 80, 100)
    vocab = Vocab.from_tokenizer(small_tok)
    kw = dict(hard_negatives=hard_negatives, mlm_rate=mlm_rate)
    grouped, single = build("code_doc", vocab, max_tokens=256, **kw), build("code_doc", vocab, max_tokens=0, **kw)
    n_groups = n_pairs = 0
    for i, v in enumerate(views):
        g, s1 = grouped(v, np.random.default_rng(i)) or [], single(v, np.random.default_rng(i)) or []
        assert _pairs_of(g) == _pairs_of(s1)
        if mlm_rate and g:
            assert np.array_equal(np.concatenate([e.labels["mlm"] for e in g]), np.concatenate([e.labels["mlm"] for e in s1]))
        assert all(len(e) <= 256 or e.n_parts <= (4 if hard_negatives else 2) for e in g)
        n_groups, n_pairs = n_groups + len(g), n_pairs + len(s1)
    assert n_pairs >= (1.05 if hard_negatives else 1.5) * n_groups  # several pairs per Example (many files hold one or two)
    e = grouped(views[0], np.random.default_rng(0))[0]
    row = pack([e], 256, pad_id=0)[0]
    assert row["segment_ids"].max() == e.n_parts and row["scalar.pair"].tolist() == e.scalars["pair"]
    first = np.flatnonzero(np.diff(row["segment_ids"][: len(e)], prepend=0))
    assert row["positions"][first].tolist() == [0] * e.n_parts  # positions restart in every part
    with pytest.raises(ValueError, match="max_tokens=-1"):
        build("code_doc", vocab, max_tokens=-1)


# --- what code_doc produces is pinned (the speed work of issue 16 must not change it) -----------------


def _golden_source() -> str:
    """A Python file of 40 definitions: docs of 1-3 sentences, bodies of 1-12 lines, a class with
    methods, undocumented and doctest-only definitions (deterministic, no stdlib version in it)."""
    words = "read the next value from a buffer and return it parse one token of input into a tree".split()
    out = []
    for i in range(40):
        name = f"fn_{i}_{words[i % len(words)]}"
        indent = "    " if 10 <= i < 18 else ""
        if i == 10:
            out.append("class Holder:\n    '''Holds values.'''\n\n")
        doc = " ".join(words[(i * 7 + j) % len(words)] for j in range(3 + i % 9)).capitalize() + "."
        if i % 4 == 1:
            doc += " " + " ".join(words[(i + j) % len(words)] for j in range(5)) + "."
        args = ", ".join(f"a{j}" for j in range(i % 4)) if not indent else ", ".join(["self"] + [f"a{j}" for j in range(i % 3)])
        out.append(f"{indent}def {name}({args}):\n")
        if i % 9 == 4:
            pass  # no doc
        elif i % 13 == 6:
            out.append(f'{indent}    """>>> {name}()\n{indent}    1\n{indent}    """\n')  # doctest only
        else:
            out.append(f'{indent}    """{doc}"""\n')
        for j in range(1 + (i * 5) % 12):
            out.append(f"{indent}    x{j} = {j} * {i} + len(str({j}))\n")
        out.append(f"{indent}    return {i}\n\n")
    return "".join(out)


def _digest(examples) -> str:
    """sha256 over every field of every Example: ids, prefix, parts, labels, pointers, scalars (as
    int64 values per part), optional fields, dtypes and shapes included."""
    import hashlib

    h = hashlib.sha256()

    def arr(tag, a):
        a = np.asarray(a)
        h.update(f"{tag}:{a.dtype.str}:{a.shape};".encode())
        h.update(np.ascontiguousarray(a).tobytes())

    for e in examples:
        if e is None:
            h.update(b"None;")
            continue
        arr("ids", e.input_ids)
        arr("prefix", e.prefix)
        h.update(b"parts:none;") if e.parts is None else arr("parts", e.parts)
        for k in sorted(e.labels):
            arr(f"labels.{k}", e.labels[k])
        for k in sorted(e.pointers):
            arr(f"ptr.{k}", e.pointers[k])
        for k in sorted(e.scalars):
            arr(f"scalar.{k}", np.asarray(e.scalar_of_parts(k), dtype=np.int64))
        for f in ("positions", "block_positions", "types", "langs", "order"):
            v = getattr(e, f)
            h.update(f"{f}:none;".encode()) if v is None else arr(f, v)
        for k in sorted(e.targets):
            arr(f"targets.{k}", e.targets[k])
    return h.hexdigest()[:16]


GOLDEN_CONFIGS = {  # name -> (code_doc settings, digest computed with the code before the speed work)
    "default": ({}, "d37381ccf109b289"),
    "groups_128": ({"max_tokens": 128, "max_code_tokens": 40}, "44c8768f707254dc"),
    "one_per_pair": ({"max_tokens": 0}, "3e7fa02f621cd4fe"),
    "hard_negatives": ({"hard_negatives": True}, "353e8bc327e5e2d3"),
    "hn_groups_128": ({"hard_negatives": True, "max_tokens": 128, "max_code_tokens": 24}, "6d8ab721f3c82f87"),
    "mlm": ({"mlm_rate": 0.15, "max_tokens": 128, "max_code_tokens": 40}, "da3f8e8594f12303"),
    "hn_mlm": ({"mlm_rate": 0.15, "hard_negatives": True}, "479897698cce9a78"),
    "pairs_1": ({"pairs": 1}, "bd0c71724c413514"),
    "pairs_1_hn_mlm": ({"pairs": 1, "hard_negatives": True, "mlm_rate": 0.2}, "533c87383c90a28e"),
    "pairs_3": ({"pairs": 3, "max_tokens": 200}, "5b63234a1b8ba038"),
    "raw": ({"doc": "raw", "max_doc_tokens": 48}, "6f67994f49c4a531"),
    "classes_long_doc": ({"kinds": ("function", "method", "class"), "max_doc_tokens": 80}, "0699aa63205c7f37"),
}


# the fixtures the digests were taken on (a fixed list: new fixtures and languages must not move them)
GOLDEN_FIXTURES = [f"{lang}/fixtures/{name}.{ext}" for lang, ext in (("go", "go"), ("javascript", "js"), ("php", "php"),
                   ("python", "py"), ("ruby", "rb")) for name in ("flow", "scopes", "spans")]
GOLDEN_FIXTURES = sorted(GOLDEN_FIXTURES + ["java/fixtures/Flow.java", "java/fixtures/scopes.java", "java/fixtures/spans.java"])


def _golden_views(tok):
    views = [build_view("golden.py", "python", _golden_source(), tok)]
    views += [fixture_view(*f.split("/fixtures/"), tok) for f in GOLDEN_FIXTURES]
    return views


def _golden_outputs(tok, kw):
    obj = build("code_doc", Vocab.from_tokenizer(tok), **kw)
    out = []
    for i, v in enumerate(_golden_views(tok)):
        for seed in range(3):
            got = obj(v, np.random.default_rng([i, seed]))
            out += got if isinstance(got, list) else [got]
    return out


@pytest.mark.parametrize("name", sorted(GOLDEN_CONFIGS))
def test_outputs_are_pinned(byte_tok, name):
    """code_doc's Examples (ids, prefix, parts, labels, pair keys, for a given rng) equal, bit for bit,
    what the code before the speed work produced (digests of GOLDEN_CONFIGS) on a generated Python
    file and every grammar fixture with the byte-level tokenizer (ids stable across machines)."""
    kw, want = GOLDEN_CONFIGS[name]
    out = _golden_outputs(byte_tok, kw)
    assert sum(e is not None for e in out) >= 20 and sum(e.n_parts for e in out if e is not None) >= 40
    assert _digest(out) == want, name


@pytest.mark.parametrize("kw", [{}, {"max_tokens": 128}, {"max_tokens": 0}, {"max_tokens": 512}, {"pairs": 3},
                                {"max_code_tokens": 7, "max_doc_tokens": 5, "max_tokens": 40},
                                {"kinds": ("function", "method", "class")}, {"pairs": 1},
                                {"pairs": 1, "max_code_tokens": 7, "max_doc_tokens": 2}])
def test_fast_path_is_the_unit_path(small_tok, monkeypatch, kw):
    """The default path (summaries field, no MLM, no negatives) computes every pair as index
    arithmetic over the read; the per-pair path (_pair + _as_example, which MLM and hard negatives
    take) is its reference: the same Examples, field by field and type by type, on real stdlib files."""
    vocab = Vocab.from_tokenizer(small_tok)
    fast = build("code_doc", vocab, **kw)
    monkeypatch.setattr(code_doc, "_UNIT_PATH", True)
    slow = build("code_doc", vocab, **kw)
    n = 0
    for i, v in enumerate(stdlib_views(small_tok, 120, 150) + wordless_doc_views(small_tok) * 3):
        ra, rb = np.random.default_rng([i, 9]), np.random.default_rng([i, 9])
        a, b = fast(v, ra), slow(v, rb)
        a, b = ([a] if isinstance(a, Example) else a), ([b] if isinstance(b, Example) else b)  # pairs=1: one
        assert (a is None) == (b is None) and len(a or []) == len(b or [])
        assert ra.bit_generator.state == rb.bit_generator.state  # the same draws
        for x, y in zip(a or [], b or []):
            assert x.input_ids.dtype == y.input_ids.dtype and np.array_equal(x.input_ids, y.input_ids)
            assert x.parts.dtype == y.parts.dtype and np.array_equal(x.parts, y.parts)
            assert x.prefix.dtype == y.prefix.dtype and np.array_equal(x.prefix, y.prefix)
            assert x.scalars == y.scalars and all(type(k) is int for k in x.scalars["pair"])
            assert x.labels == y.labels == {} and x.pointers == y.pointers == {}
            n += x.n_parts // 2
    assert n >= (15 if kw.get("pairs") == 1 else 40)  # pairs compared (pairs=1: one per view at most)


def wordless_doc_views(tok) -> list:
    """Files whose docs have no word (``\"\"\"...\"\"\"``: a doc, no summary) next to two documented
    functions: the picks that fall back to another definition (in a drawn order), and a file with none."""
    bare = 'def a{i}(x):\n    """..."""\n    return x\n\n\n'
    good = 'def b(y):\n    """Return y doubled."""\n    return 2 * y\n\n\n'
    other = 'def c(z):\n    """Return z halved."""\n    return z / 2\n\n\n'
    texts = ["".join(bare.format(i=i) for i in range(k)) + good + bare.format(i=99) + other for k in (1, 3, 6)]
    texts.append("".join(bare.format(i=i) for i in range(4)))  # docs, none with a word
    return [build_view(f"wordless{j}.py", "python", t, tok) for j, t in enumerate(texts)]


@pytest.mark.parametrize("kw", [{}, {"pairs": 1}, {"doc": "raw"}, {"kinds": ("class",)}, {"max_doc_tokens": 10_000}])
def test_keep_drops_exactly_the_views_that_never_give_a_pair(small_tok, kw):
    """view_source reads only the views code_doc.keep marks (whole-corpus arrays): a dropped view gives
    no pair for any rng, and (doc from the view's summaries, or raw) every kept one gives one; the
    stream's Source counts the dropped ones. Real stdlib files (43% have no documented definition)."""
    from codept.views import open_views, to_table, view_source

    vs = stdlib_views(small_tok, 0, 90, min_size=0) + [fixture_view("java", "Fields.java", small_tok)] + wordless_doc_views(small_tok)
    views = open_views(to_table(vs))
    obj = build("code_doc", Vocab.from_tokenizer(small_tok), **kw)
    mask, reason = obj.keep(views)
    gives = np.array([obj(v, np.random.default_rng([i, 3])) is not None for i, v in enumerate(vs)])
    assert 5 < mask.sum() < len(vs) and reason == "no_documented_definition"
    assert not gives[~mask].any()  # never a pair lost
    if kw.get("max_doc_tokens", 0) <= 64:  # doc sides known from the arrays: exact
        assert np.array_equal(mask, gives)
    sel = np.arange(len(vs))[::2]
    assert np.array_equal(obj.keep(views.select(sel))[0], mask[sel])  # also over a selection
    src = view_source(views, obj, "code_doc")
    assert src.n == mask.sum() and src.skipped == {reason: int((~mask).sum())}
    assert [src.get(i).path for i in range(src.n)] == [v.path for v, m in zip(vs, mask) if m]


def test_candidates_small_path_equals_the_array_path(small_tok, monkeypatch):
    """Up to code_doc.SMALL definitions candidates() takes a Python pass: the same rows as the NumPy
    mask (eligible) on real views of every size, every kind table."""
    vs = stdlib_views(small_tok, 0, 60, min_size=0)
    funcs = [np.asarray(v.functions) for v in vs] + [np.array([[0, 5, 9, 5, 6, 5, 7], [9, 0, 4, 0, 1, 0, 2],
                                                               [-1, 0, 9, 0, 1, 3, 5], [1, 0, 3, 0, 1, 0, 3]], np.int32)]
    assert sum(0 < len(f.reshape(-1, 7)) <= code_doc.SMALL for f in funcs) >= 10
    for kinds in ([0, 1, 2], [1], list(range(len(code_doc.DEFINITION_KINDS)))):
        allowed = code_doc.allowed_kinds(np.array(kinds))
        for f in funcs:
            want = np.flatnonzero(code_doc.eligible(f.reshape(-1, 7), allowed)) if len(f) else np.zeros(0, np.intp)
            got = code_doc.candidates(f, None, allowed)
            assert got.dtype == np.intp and got.tolist() == want.tolist()


@pytest.mark.parametrize("kw", [{"pairs": 1}, {"pairs": 1, "max_doc_tokens": 3, "max_code_tokens": 9, "kinds": ("class", "function")}])
def test_prepared_index_gives_the_same_stream(small_tok, kw):
    """pairs=1 on the default path reads view i's candidates from the source's index (prepare, one
    pass over the corpus); without a context it derives them from the view: the same Example and
    the same rng draws for every served view, fallback draws (a pick without a summary) included."""
    from codept.data.stream import Context
    from codept.views import open_views, to_table, view_source

    vs = stdlib_views(small_tok, 0, 120, min_size=0) + wordless_doc_views(small_tok)
    obj = build("code_doc", Vocab.from_tokenizer(small_tok), **kw)
    views = open_views(to_table(vs))
    src = view_source(views, obj, "code_doc")
    index = src.prepared
    assert isinstance(index, code_doc._Index) and (index.hi <= index.lo).sum() > 5  # candidates without a summary
    for epoch in range(3):
        for i in range(src.n):
            ra, rb = np.random.default_rng([i, epoch]), np.random.default_rng([i, epoch])
            a = obj(src.get(i), ra, Context(src, i, epoch, 0.0))
            b = obj(src.get(i), rb)
            assert ra.bit_generator.state == rb.bit_generator.state
            assert (a is None) == (b is None)
            if a is not None:
                assert a.input_ids.dtype == b.input_ids.dtype and np.array_equal(a.input_ids, b.input_ids)
                assert np.array_equal(a.parts, b.parts) and a.parts.dtype == b.parts.dtype
                assert np.array_equal(a.prefix, b.prefix) and a.scalars == b.scalars
    assert build("code_doc", Vocab.from_tokenizer(small_tok)).prepare(views) is None  # pairs=0: its own path
