"""Languages without a grammar (issue 23.4): token-only CodeViews, counted, trained on by the
objectives that need no structure and left out (counted) by those that do.

Real inputs only: the interpreter's own Makefile (sysconfig), the tree-sitter query files shipped in
the pinned grammar wheels (Scheme syntax, ``.scm``), stdlib Python modules.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import sysconfig
from pathlib import Path

import numpy as np
import pytest

from codept import languages
from codept.data.sources import stdlib_root
from codept.objectives import build
from codept.objectives.render import Vocab
from codept.prepare import PrepareConfig, prepare
from codept.structure.view import build_token_view
from codept.tokenizer import train_tokenizer
from codept.views import open_views


def _scm_files() -> list[Path]:
    import tree_sitter_javascript
    import tree_sitter_python

    files = [p for m in (tree_sitter_python, tree_sitter_javascript) for p in Path(m.__file__).parent.rglob("*.scm")]
    assert len(files) >= 2, files  # the wheels ship their queries (highlights.scm, tags.scm, ...)
    return sorted(files)


def _makefile() -> Path:
    p = Path(sysconfig.get_makefile_filename())
    assert p.is_file(), p  # every CPython install has it (what python3-config reads)
    return p


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("tok")
    train_tokenizer(sorted(stdlib_root().glob("json/*.py")) + _scm_files()[:2], out, vocab_size=1200)
    return out


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """A folder mixing a grammar language (Python) with two without one (Makefile, Scheme) and a
    Markdown file (listed by no table: still unknown_language)."""
    root = tmp_path_factory.mktemp("mixed")
    shutil.copy(stdlib_root() / "json" / "decoder.py", root / "decoder.py")
    shutil.copy(_makefile(), root / "Makefile")
    for i, p in enumerate(_scm_files()[:2]):
        shutil.copy(p, root / f"{i}_{p.name}")
    (root / "notes.md").write_text("# notes\n")
    return root


def test_the_language_tables():
    assert languages.view_language_for_path("x/Makefile") == "makefile"
    assert languages.view_language_for_path("Main.HS") == "haskell"
    assert languages.view_language_for_path("a.py") == "python"  # a grammar wins
    assert languages.view_language_for_path("README.md") is None
    assert languages.language_for_path("Makefile") is None  # the grammar-only answer is unchanged
    assert languages.view_language("Jupyter Notebook") == "jupyter_notebook"  # The Stack's tags
    assert languages.view_language("F#") == "fsharp" and languages.view_language("C++") == "cpp"
    assert languages.view_language("!!") is None and languages.view_language(None) is None
    assert languages.has_grammar("python") and not languages.has_grammar("makefile")
    assert not set(languages.token_languages()) & set(languages.available_languages())


def test_a_token_only_claim_on_a_grammar_is_refused_naming_both(tmp_path, monkeypatch):
    shutil.copytree(languages.grammars_dir() / "python", tmp_path / "python")
    (tmp_path / languages.TOKENS_ONLY_FILE).write_text('[snake]\nextensions = [".py"]\n')
    monkeypatch.setenv("CODEPT_GRAMMARS", str(tmp_path))
    languages.clear_cache()
    try:
        with pytest.raises(ValueError, match=r"extension '\.py' claimed by both python and snake"):
            languages.view_language_for_path("a.hs")
        (tmp_path / languages.TOKENS_ONLY_FILE).write_text('[snake]\nextension = [".sn"]\n')
        languages.clear_cache()
        with pytest.raises(ValueError, match=r"unknown keys \['extension'\]"):
            languages.view_language("snake")
    finally:
        languages.clear_cache()


def test_token_view_units_are_lexemes(tok_dir):
    from codept.tokenizer import load_tokenizer

    text = _makefile().read_text()
    v = build_token_view("Makefile", "makefile", text, load_tokenizer(tok_dir))
    assert "".join(text[a:b] for a, b in v.offsets.tolist()) == text  # the offsets tile the text
    assert all(len(getattr(v, f)) == 0 for f in ("spans", "idents", "functions", "errors", "dataflow", "summaries"))
    word = [text[a:b].strip() for a, b in v.offsets.tolist()]
    leaf = v.leaf.tolist()
    assert all((lf == -1) == (w == "") for lf, w in zip(leaf, word))
    # a unit (a run of word characters or one other character) holds adjacent tokens only, and two
    # adjacent tokens inside one run of word characters ("put" "Str" "Ln") are one unit
    units: dict[int, list[int]] = {}
    for i, lf in enumerate(leaf):
        units.setdefault(lf, []).append(i)
    assert all(idx == list(range(idx[0], idx[-1] + 1)) for lf, idx in units.items() if lf >= 0)
    off = v.offsets.tolist()
    joined = [i for i in range(len(off) - 1) if re.fullmatch(r"\w+", text[off[i][0]: off[i + 1][1]])]
    assert len(joined) > 100 and all(leaf[i] == leaf[i + 1] for i in joined)
    assert len(units) < 0.9 * len(leaf)


def test_prepare_views_every_language_and_counts_both_kinds(mixed, tmp_path, tok_dir):
    s = prepare([str(mixed)], out=tmp_path / "out", tokenizer_dir=tok_dir, cfg=PrepareConfig(workers=1),
                progress=False)
    assert s["inputs"] == 5 and s["viewed"] == 4 and s["tokens_only"] == 3
    assert s["skipped"] == {"unknown_language": 1}  # notes.md
    assert s["per_lang"]["makefile"]["tokens_only"] == 1 and s["per_lang"]["scheme"]["tokens_only"] == 2
    assert "tokens_only" not in s["per_lang"]["python"] and s["functions"] > 10
    rows = {Path(r["path"]).name: r for r in map(json.loads, (tmp_path / "out" / "manifest.jsonl").read_text().splitlines())}
    assert rows["Makefile"]["tokens_only"] and rows["Makefile"]["lang"] == "makefile"
    assert "tokens_only" not in rows["decoder.py"]
    views = open_views(tmp_path / "out")
    by = {Path(v.path).name: v for v in views}
    assert len(by["Makefile"]) > 1000 and len(by["Makefile"].spans) == 0 and len(by["decoder.py"].spans) > 100
    # --structure-only: the old rule, each of the three a counted skip
    s2 = prepare([str(mixed)], out=tmp_path / "only", tokenizer_dir=tok_dir,
                 cfg=PrepareConfig(workers=1, tokens_only=False), progress=False)
    assert s2["viewed"] == 1 and s2["skipped"] == {"unknown_language": 4} and s2["tokens_only"] == 0


def test_a_rows_tag_names_its_language(tmp_path, tok_dir):
    rows = [{"content": _makefile().read_text()[:4000], "lang": "Makefile", "path": "build/rules"},
            {"content": "       IDENTIFICATION DIVISION.\n       PROGRAM-ID. HELLO.\n", "lang": "COBOL"},
            {"content": "x = 1\n", "lang": "!!"},
            {"content": "(define x 1)\n", "path": "a.scm"}]
    src = tmp_path / "rows.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    s = prepare([str(src)], out=tmp_path / "out", tokenizer_dir=tok_dir, cfg=PrepareConfig(workers=1), progress=False)
    assert s["viewed"] == 3 and s["tokens_only"] == 3
    assert sorted(s["per_lang"]) == ["cobol", "makefile", "scheme", "unknown"]
    bad = [json.loads(x) for x in (tmp_path / "out" / "manifest.jsonl").read_text().splitlines()][2]
    assert bad["reason"] == "unknown_language" and "'!!'" in bad["detail"] and "rule" in bad["detail"]


def _streams(views, mixture, tok_dir, settings=None):
    from codept.tokenizer import load_tokenizer
    from codept.train.loop import streams

    return streams(views, mixture, Vocab.from_tokenizer(load_tokenizer(tok_dir)), settings or {})


def test_structure_objectives_leave_token_views_out_counted(mixed, tmp_path, tok_dir, capsys):
    prepare([str(mixed)], out=tmp_path / "out", tokenizer_dir=tok_dir, cfg=PrepareConfig(workers=1), progress=False)
    views = open_views(tmp_path / "out")
    mlm, span, syn, doc, wwm = _streams(views, [("mlm", 1.0), ("span", 1.0), ("syntax_span", 1.0),
                                                 ("code_doc", 1.0), ("wwm", 1.0)], tok_dir)
    assert (mlm.n, span.n, syn.n, doc.n, wwm.n) == (4, 4, 1, 1, 4)  # wwm's default units: leaves / lexemes
    (ident,) = _streams(views, [("wwm", 1.0)], tok_dir, {"wwm": {"code_units": "ident"}})
    assert ident.n == 1  # wwm over identifiers reads the structure
    err = capsys.readouterr().err
    assert "syntax_span: 3 of 4 views skipped: tokens_only (no grammar, no structure: makefile 1, scheme 2)" in err
    assert "mlm:" not in err and "span:" not in err.replace("syntax_span:", "")
    # every document of the mixed corpus gives mlm and span rows
    assert all(mlm.make(i, np.random.default_rng(i), None) is not None for i in range(mlm.n))
    assert all(span.make(i, np.random.default_rng(i), None) is not None for i in range(span.n))
    only = views.select([i for i, v in enumerate(views) if not languages.has_grammar(v.lang)])
    with pytest.raises(ValueError, match=r"syntax_span: reads the code structure, and every one of its 3 views"):
        _streams(only, [("syntax_span", 1.0)], tok_dir)


def test_mlm_trains_on_token_only_views(tok_dir):
    from codept.tokenizer import load_tokenizer

    tok = load_tokenizer(tok_dir)
    text = _makefile().read_text()
    chunks = [text[i: i + 3000] for i in range(0, len(text), 3000)]  # one view per 3 kB of the Makefile
    views = [build_token_view(f"Makefile#{i}", "makefile", c, tok) for i, c in enumerate(chunks)]
    views += [build_token_view(str(p), "scheme", p.read_text(), tok) for p in _scm_files()]
    sys.path.insert(0, str(Path(__file__).parent))
    from test_dataflow_objective import _train

    ls = _train(build("mlm", Vocab.from_tokenizer(tok)), views, ["mlm"], tok.get_vocab_size())["mlm"]
    first, last = np.mean(ls[:5]), np.mean(ls[-5:])
    print(f"mlm on token-only views: {first:.3f} -> {last:.3f}")
    assert last < first - 0.5, (first, last)
