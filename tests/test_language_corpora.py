"""The grammars of the languages added after the six, on real code: each held-out corpus of
codept.data.corpora.MORE_CODE_LANGS (fetched with `codept corpora fetch`, a few MB), a sample of its
files: no crash, few syntax errors, identifiers bound, documented definitions found, and the
dataflow properties of tests/test_dataflow.py (every edge joins one binding, no local edge crosses a
function). $CODEPT_CORPORA names a folder that already holds the corpora (no fetch)."""

from __future__ import annotations

import collections
import hashlib
import os
from pathlib import Path

import numpy as np
import pytest

from codept import languages
from codept.data import corpora as C
from codept.data import fetch as F
from codept.data.jobs import SkipFile
from codept.structure import grammar, kinds
from codept.structure.view import resolve_identifiers
from test_dataflow import _assert_properties, check_properties

EVAL = {c.lang: n for n, c in C.CORPORA.items() if c.role == "eval" and c.lang in C.MORE_CODE_LANGS}
SAMPLE = 40  # files per corpus, in a fixed hash order
# Floors and ceilings a little outside what these samples measure (docs/languages.md), so that a
# grammar change that loses docs or adds syntax errors fails. Syntax errors are the grammar wheels'
# (not the query files'): tree-sitter-c/-cpp on macro-built statements (`STEP(a, b)` lines without a
# `;`) and `#if` splitting an expression (libxcrypt), tree-sitter-cpp 0.23.4 on `#if` inside initializer lists and `operator=`
# calls (greenlet), tree-sitter-bash 0.25.1 on some `${x//a/b}` / `${x:(-n)}` expansions,
# tree-sitter-typescript 0.23.2 on TS 4.7+ variance annotations (`<in out T>`) and `export type *`.
MIN_DOC_SHARE = {"c": 0.3, "cpp": 0.1, "csharp": 0.08, "rust": 0.3, "bash": 0.1, "typescript": 0.05, "tsx": 0.05,
                 "lua": 0.05}
MAX_ERROR_FILES = {"c": 0.2, "cpp": 0.35, "bash": 0.15, "tsx": 0.3}  # others: 5%
# uses with an earlier definition in their function but no reaching one: Rust's `let x = f(x);`
# shadowing (the resolver joins a scope's definitions of a name, as for Go's `x := x + 1`)
USE_TOLERANCE = 0.01


@pytest.fixture(scope="module")
def corpora_dir(tmp_path_factory) -> Path:
    given = os.environ.get("CODEPT_CORPORA")
    if given and all((Path(given) / n / F.MARKER).is_file() for n in EVAL.values()):
        return Path(given)
    dest = tmp_path_factory.mktemp("corpora")
    rows = F.fetch(sorted(EVAL.values()), dest, timeout=300)
    failed = [r for r in rows if r["status"] != "ok"]
    if failed:
        pytest.skip(f"could not fetch {[(r['name'], r.get('error', '')[:120]) for r in failed]}")
    return dest


def _sample(folder: Path, lang: str) -> list[Path]:
    exts = languages.language(lang).extensions
    files = [p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in exts]
    files.sort(key=lambda p: hashlib.sha1(str(p.relative_to(folder)).encode()).digest())
    return files[:SAMPLE]


@pytest.mark.slow
@pytest.mark.parametrize("lang", sorted(EVAL))
def test_new_language_on_its_held_out_corpus(lang, corpora_dir):
    files = _sample(corpora_dir / EVAL[lang], lang)
    assert len(files) >= min(SAMPLE, 10), f"{EVAL[lang]}: only {len(files)} {lang} files"
    total, errors, idents, bound, defs, docs = collections.Counter(), 0, 0, 0, 0, 0
    order = grammar.load_grammar(lang).scope_order
    for p in files:
        src = p.read_bytes()
        try:
            parsed = grammar.parse(lang, src)
        except SkipFile:
            continue
        errors += parsed.has_error
        ids, _ = resolve_identifiers(parsed, src, order)
        idents += len(ids)
        bound += int((ids[:, 2] != kinds.ROLE_FREE).sum()) if len(ids) else 0
        defs += len(parsed.tags)
        docs += sum(bool(t.doc) for t in parsed.tags)
        total.update(check_properties(lang, src))  # any exception here fails the test: a crash
    _assert_properties(total, tolerance=USE_TOLERANCE)
    assert errors <= max(1, MAX_ERROR_FILES.get(lang, 0.05) * len(files)), \
        f"{lang}: {errors} of {len(files)} files with syntax errors"
    assert idents and bound / idents > 0.5, f"{lang}: {bound} of {idents} identifiers bound"
    assert defs and docs / defs >= MIN_DOC_SHARE[lang], f"{lang}: {docs} of {defs} definitions documented"
    assert np.isfinite(total["edges"]) and total["edges"] > 0
