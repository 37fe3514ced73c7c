"""Structure of real corpora per language: what the grammars make of fetched code (issue 24).

usage: python benchmarks/lang_corpora.py CORPORA_DIR [NAME ...]   (default: the corpora of
codept.data.corpora.MORE_CODE_LANGS present in CORPORA_DIR, fetched by `codept corpora fetch`)

For every file of each corpus (its registry language): parse, resolve, dataflow, tags. Prints one
row per corpus: files, MB, files refused (SkipFile reasons), crashes (any other exception), files
with a syntax error (and the share of their bytes inside ERROR/MISSING nodes), identifier
occurrences and the share bound to a definition of the file (role def or ref, not free),
dataflow edges and the edges that break a rule (a comesFrom edge whose ends differ in binding, a
local edge across two functions), definitions (tags) and the share with a doc. One core, no tokenizer.
"""

from __future__ import annotations

import collections
import sys
import time
from pathlib import Path

import numpy as np

from codept import languages
from codept.data.corpora import CORPORA, MORE_CODE_LANGS
from codept.data.jobs import SkipFile
from codept.structure import dataflow, grammar, kinds
from codept.structure.view import resolve_identifiers

UNITS = (kinds.FLOW_KIND_ID["function"], kinds.FLOW_KIND_ID["function.copy"])


def unit_of(idents: np.ndarray, flow: np.ndarray, outer: np.ndarray) -> np.ndarray:
    """Innermost flow unit (function) around each identifier (-1: the file), by geometry; a
    function/method/class name that is the first identifier of its unit belongs to the parent
    (the rule of tests/test_dataflow.py)."""
    u = flow[np.isin(flow[:, 2], UNITS)]
    u = u[np.lexsort((-u[:, 1], u[:, 0]))]
    unit = np.full(len(idents), -1)
    parent = np.full(len(u) + 1, -1)
    for j, (s, e, _) in enumerate(u.tolist()):
        before = (u[:j, 0] <= s) & (u[:j, 1] >= e)
        parent[j] = np.flatnonzero(before)[-1] if before.any() else -1
        unit[(idents[:, 0] >= s) & (idents[:, 1] <= e)] = j
    first: dict = {}
    for i in range(len(idents)):
        first.setdefault(unit[i], i)
    for i in np.flatnonzero(outer).tolist():
        if unit[i] >= 0 and first[unit[i]] == i:
            unit[i] = parent[unit[i]]
    return unit


def one_file(lang: str, src: bytes, c: collections.Counter) -> None:
    parsed = grammar.parse(lang, src)
    c["syntax_error_files"] += parsed.has_error
    if parsed.has_error and len(parsed.errors):
        c["error_bytes"] += int((parsed.errors[:, 1] - parsed.errors[:, 0]).sum())
    idents, _ = resolve_identifiers(parsed, src, grammar.load_grammar(lang).scope_order)
    c["idents"] += len(idents)
    c["bound"] += int((idents[:, 2] != kinds.ROLE_FREE).sum()) if len(idents) else 0
    e = dataflow.edges(idents, parsed.flow, parsed.defs, decls=parsed.decls)
    c["edges"] += len(e)
    if len(e):
        b = idents[:, 3]
        same = np.isin(e[:, 2], (dataflow.COMES_FROM, dataflow.COMES_FROM_NONLOCAL))  # a use <- its definition
        c["edge_other_binding"] += int((b[e[same, 0]] != b[e[same, 1]]).sum())
        local = np.isin(e[:, 2], dataflow.LOCAL_KINDS)
        _role, outer = dataflow.flow_roles(idents, parsed.flow, parsed.defs, parsed.decls)
        unit = unit_of(idents, parsed.flow, outer)
        c["edge_cross_function"] += int((unit[e[local, 0]] != unit[e[local, 1]]).sum())
    c["definitions"] += len(parsed.tags)
    c["documented"] += sum(bool(t.doc) for t in parsed.tags)


def measure(name: str, root: Path) -> collections.Counter:
    lang = CORPORA[name].lang
    exts = languages.language(lang).extensions
    c = collections.Counter()
    t0 = time.perf_counter()
    for p in sorted(root.rglob("*")):
        if not p.is_file() or p.suffix.lower() not in exts:
            continue
        src = p.read_bytes()
        c["files"] += 1
        c["bytes"] += len(src)
        try:
            one_file(lang, src, c)
        except SkipFile as e:
            c[f"skip_{e.reason}"] += 1
        except Exception as e:  # a crash: the row counts it, the message names the file
            c["crashes"] += 1
            print(f"  crash {p}: {type(e).__name__}: {e}", file=sys.stderr)
    c["seconds"] = round(time.perf_counter() - t0)
    return c


def main(argv: list[str]) -> int:
    root = Path(argv[0])
    names = argv[1:] or [n for n, c in CORPORA.items() if c.lang in MORE_CODE_LANGS and (root / n).is_dir()]
    print(f"{'corpus':18} {'lang':10} {'role':5} {'files':>6} {'MB':>6} {'skip':>4} {'crash':>5} {'err%':>6} "
          f"{'errB%':>6} {'idents':>8} {'bound%':>6} {'edges':>8} {'bad':>4} {'defs':>6} {'doc%':>5} {'s':>4}")
    for n in names:
        c = measure(n, root / n)
        skips = sum(v for k, v in c.items() if k.startswith("skip_"))
        viewed = c["files"] - skips - c["crashes"]
        print(f"{n:18} {CORPORA[n].lang:10} {CORPORA[n].role:5} {c['files']:6} {c['bytes'] / 1e6:6.1f} {skips:4} "
              f"{c['crashes']:5} {100 * c['syntax_error_files'] / max(viewed, 1):6.2f} "
              f"{100 * c['error_bytes'] / max(c['bytes'], 1):6.3f} {c['idents']:8} "
              f"{100 * c['bound'] / max(c['idents'], 1):6.1f} {c['edges']:8} "
              f"{c['edge_other_binding'] + c['edge_cross_function']:4} {c['definitions']:6} "
              f"{100 * c['documented'] / max(c['definitions'], 1):5.1f} {c['seconds']:4}")
        if skips:
            print("  skipped:", {k[5:]: v for k, v in c.items() if k.startswith("skip_")})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
