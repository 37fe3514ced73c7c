"""Grammar layer: every query compiles, captures stay in the vocabulary, fixtures pass exactly."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from codept import languages
from codept.structure import grammar, kinds
from codept.structure.fixtures import check_fixture, fixture_files

SIX = ["go", "java", "javascript", "php", "python", "ruby"]
LANGS = languages.available_languages()


def test_six_languages_present():
    assert set(SIX) <= set(LANGS)


# What each query file must capture for its layer to work at all (a prefix: any refinement counts,
# e.g. local.definition.var); the loader itself rejects names outside the vocabulary.
CORE_CAPTURES = {
    "spans": ("span.identifier", "span.call", "span.function"),
    "locals": ("local.scope", "local.definition", "local.reference"),
    "tags": ("definition.", "name"),
    "flow": ("flow.function", "flow.branch", "flow.loop"),
}


def _missing_core(g) -> list[str]:
    out = []
    for qk, needed in CORE_CAPTURES.items():
        q = g.queries[qk]
        names = {q.capture_name(i) for i in range(q.capture_count)}
        out += [f"{qk}.scm: @{n}" for n in needed if not any(c == n or c.startswith(n.rstrip(".") + ".") for c in names)]
    return out


@pytest.mark.parametrize("lang", LANGS)
def test_grammar_loads_and_captures_core(lang):
    """Every language's queries capture the core of each layer. (This test once asserted only that
    each capture is in the vocabulary, which load_grammar had already enforced: it could not fail.)"""
    g = grammar.load_grammar(lang)
    assert _missing_core(g) == []


def test_missing_core_capture_is_caught(tmp_path, monkeypatch):
    """The check above can fail: python's locals.scm without its references."""
    dst = _copy_python(tmp_path, monkeypatch)
    src = (dst / "locals.scm").read_text()
    assert "@local.reference" in src
    (dst / "locals.scm").write_text(src.replace("@local.reference", "@_was_reference"))
    assert _missing_core(grammar.load_grammar.__wrapped__("python")) == ["locals.scm: @local.reference"]


def test_extensions_are_unique_and_mapped():
    ext = languages.extension_map()
    assert ext[".py"] == "python" and ext[".java"] == "java" and ext[".go"] == "go"
    assert ext[".js"] == "javascript" and ext[".rb"] == "ruby" and ext[".php"] == "php"
    assert languages.language_for_path("x/y/Z.JAVA") == "java"
    assert languages.language_for_path("README") is None


def _copy_python(tmp_path, monkeypatch):
    dst = tmp_path / "python"
    shutil.copytree(languages.grammars_dir() / "python", dst)
    monkeypatch.setenv("CODEPT_GRAMMARS", str(tmp_path))
    return dst


def test_unknown_capture_is_rejected(tmp_path, monkeypatch):
    dst = _copy_python(tmp_path, monkeypatch)
    with open(dst / "spans.scm", "a") as f:
        f.write("\n(identifier) @span.identifer\n")  # typo
    with pytest.raises(ValueError, match=r"unknown capture @span\.identifer"):
        grammar.load_grammar.__wrapped__("python")


def test_unknown_flow_capture_is_rejected(tmp_path, monkeypatch):
    dst = _copy_python(tmp_path, monkeypatch)
    with open(dst / "flow.scm", "a") as f:
        f.write("\n(while_statement) @flow.loops\n")  # typo
    with pytest.raises(ValueError, match=r"unknown capture @flow\.loops; flow.scm allows"):
        grammar.load_grammar.__wrapped__("python")


def test_capture_of_another_file_is_rejected(tmp_path, monkeypatch):
    dst = _copy_python(tmp_path, monkeypatch)
    with open(dst / "tags.scm", "a") as f:
        f.write("\n(identifier) @local.reference\n")
    with pytest.raises(ValueError, match="tags.scm allows"):
        grammar.load_grammar.__wrapped__("python")


def test_broken_query_names_the_file(tmp_path, monkeypatch):
    dst = _copy_python(tmp_path, monkeypatch)
    (dst / "locals.scm").write_text("(no_such_node) @local.reference\n")
    with pytest.raises(ValueError, match="locals.scm: does not compile"):
        grammar.load_grammar.__wrapped__("python")


def test_bad_scope_order_and_missing_file(tmp_path, monkeypatch):
    dst = _copy_python(tmp_path, monkeypatch)
    toml = (dst / "language.toml").read_text().replace('scope_order = "hoisted"', 'scope_order = "lexical"')
    (dst / "language.toml").write_text(toml)
    with pytest.raises(ValueError, match="scope_order='lexical'"):
        grammar.load_grammar.__wrapped__("python")
    (dst / "language.toml").write_text(toml.replace('"lexical"', '"hoisted"'))
    (dst / "tags.scm").unlink()
    with pytest.raises(ValueError, match="missing tags.scm"):
        grammar.load_grammar.__wrapped__("python")


def test_fingerprint_changes_with_queries(tmp_path, monkeypatch):
    before = grammar.load_grammar("python").fingerprint
    dst = _copy_python(tmp_path, monkeypatch)
    assert grammar.load_grammar.__wrapped__("python").fingerprint == before
    with open(dst / "spans.scm", "a") as f:
        f.write("\n; a comment changes the hash\n")
    assert grammar.load_grammar.__wrapped__("python").fingerprint != before


FIXTURES = [(lang, p) for lang in LANGS for p in fixture_files(lang)]


@pytest.mark.parametrize("lang,path", FIXTURES, ids=[f"{lang}/{p.name}" for lang, p in FIXTURES])
def test_fixture(lang, path):
    r = check_fixture(path, lang)
    assert r.n_checks > 0
    assert not r.failures, "\n".join(r.failures)


@pytest.mark.parametrize("lang", LANGS)
def test_fixtures_cover_the_vocabulary(lang):
    files = fixture_files(lang)
    assert len(files) >= 2, f"{lang}: needs fixture files"
    asserted: set[str] = set()
    for p in files:
        asserted |= set(check_fixture(p, lang).asserted)
    unsupported = set(languages.language(lang).unsupported_span_kinds)
    assert unsupported <= set(kinds.SPAN_KINDS)
    missing = {f"span.{k}" for k in kinds.SPAN_KINDS if k not in unsupported} - asserted
    assert not missing, f"{lang}: fixtures never assert {sorted(missing)}"
    for need in ("def", "ref", "free", "doc", "df"):
        assert need in asserted, f"{lang}: fixtures never assert {need}"
    assert any(a.startswith("definition.") for a in asserted)


def _multiset(rows) -> list:
    return sorted(map(tuple, rows.tolist()))


@pytest.mark.parametrize("lang", LANGS)
def test_walk_answers_kind_only_patterns_exactly(lang):
    """parse() answers kind-only patterns from its tree walk: the captures (as multisets) must be
    those of the full queries, on every fixture and on malformed input."""
    g = grammar.load_grammar(lang)
    assert len(g.kind_routes), f"{lang}: no kind-only pattern found"
    sources = [p.read_bytes() for p in fixture_files(lang)]
    sources += [s[: len(s) // 2] + b"\n)]}( @@ \n" + s[len(s) // 2 :] for s in sources]  # syntax errors
    for src in sources:
        parsed = grammar.parse(lang, src)
        ref = {**grammar.query_rows(lang, src, "spans"), **grammar.query_rows(lang, src, "locals")}
        spans = [(s, e, kinds.SPAN_KIND_ID[n.split(".", 1)[1]]) for n, rows in ref.items() if n.startswith("span.")
                 for s, e in rows.tolist()]
        assert _multiset(parsed.spans) == sorted(spans)
        refs = ref.get("local.reference", np.zeros((0, 2), np.int64))
        members = {tuple(r) for r in ref.get("local.member", np.zeros((0, 2), np.int64)).tolist()}
        assert _multiset(parsed.refs) == sorted(r for r in map(tuple, refs.tolist()) if r not in members)
        defs = [(s, e) for n, rows in ref.items() if n.startswith("local.definition") for s, e in rows.tolist()]
        assert sorted(map(tuple, parsed.defs[:, :2].tolist())) == sorted(defs)


def test_binding_floor_visits_every_node_once():
    """The benchmark's floor (bench_structure.py) walks the whole tree: `x = 1` is module,
    expression_statement, assignment, identifier, "=", integer; a file's count covers its leaves."""
    assert grammar.binding_floor("python", b"x = 1\n") == 6
    src = open(grammar.__file__, "rb").read()
    assert grammar.binding_floor("python", src) > len(grammar.parse("python", src).leaves)
