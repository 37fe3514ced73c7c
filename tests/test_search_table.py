"""recipes/search_table.py: its MRRs equal `codept probe run`'s (run_probe) on the same pairs, pools and
subset, for BM25, a dense model and the BM25 + model hybrid; the bootstrap interval brackets the mean."""

import inspect
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "recipes"))

import search_table as S  # noqa: E402

from codept.probe import load_pairs, save_pairs, Pair  # noqa: E402
from codept.probe.run import build_scorer, run_probe  # noqa: E402


def _stdlib_pairs():
    import json as j
    import shutil
    import textwrap

    out = []
    for mod in (textwrap, shutil, j):
        for name, fn in inspect.getmembers(mod, inspect.isfunction):
            doc = inspect.getdoc(fn)
            if fn.__module__ != mod.__name__ or not doc or len(doc.split()) < 3:
                continue
            src = inspect.getsource(fn).replace(fn.__doc__, "")
            out.append(Pair(lang="python", path=mod.__file__, name=name, query=doc.split("\n")[0], code=src))
    return out


def test_table_equals_probe_run(tmp_path):
    pairs = _stdlib_pairs()
    assert len(pairs) > 20
    probe = tmp_path / "probe"
    save_pairs(pairs, probe, {"test": True})
    out = tmp_path / "table.json"
    # pool 8 < n: several pools and a topped-up remainder; max_queries < n: a seeded subset
    S.main(["--probe", str(probe), "--model", "r=random", "--hybrid", "r", "--ref", "r", "--pool", "8",
            "--max-queries", "20", "--out", str(out)])
    table = json.loads(out.read_text())["table"]["python"]
    loaded = load_pairs(probe)
    for col, spec in (("bm25", "bm25"), ("r", "random"), ("bm25+r", "bm25+random")):
        ref = run_probe(build_scorer(spec, device="cpu"), loaded, pool_size=8, seed=0, max_queries=20)["rows"][0]
        assert table[col]["n"] == ref["n"] == 20
        assert abs(table[col]["mrr"] - ref["mrr"]) < 1e-9, (col, table[col]["mrr"], ref["mrr"])
        lo, hi = table[col]["ci"]
        assert lo <= table[col]["mrr"] <= hi
    d = table["bm25"]["diff_vs_ref"]
    assert abs(d["mean"] - (table["bm25"]["mrr"] - table["r"]["mrr"])) < 1e-9


def test_ci():
    assert S.ci(np.full(50, 0.25)) == (0.25, 0.25)
    rr = np.random.default_rng(0).random(400)
    lo, hi = S.ci(rr)
    se = rr.std() / np.sqrt(len(rr))
    assert lo < rr.mean() < hi and abs((hi - lo) - 2 * 1.96 * se) < 0.3 * 2 * 1.96 * se
