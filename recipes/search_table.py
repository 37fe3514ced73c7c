"""Code-search table with intervals: BM25, dense models and BM25 + model hybrids on probe folders.

  python recipes/search_table.py --probe P1 P2 ... --model zero=DIR s0=RUN s1=RUN ... \\
      [--hybrid zero s0 s1] [--ref zero] [--seeds s0,s1] [--pool 1000] [--max-queries 1000] \\
      [--out runs/table.json]

Per probe folder and language, exactly as ``codept probe run --max-queries Q --pool P --seed 0``:
  1. the seeded subset of at most ``max_queries`` pairs and the seeded pools (codept.probe.run.Probe /
     codept.probe.metrics.pools, same seed), so every number equals that command's MRR;
  2. each ``--model NAME=SPEC`` (any ``--model`` value of ``codept probe run``: a transformers folder,
     a codept run folder) embeds the queries and codes ONCE; its dense ranks come from the cosines,
     and a ``--hybrid NAME`` reuses the same embeddings with BM25 (codept.probe.run.hybrid_scorer:
     alpha * z(BM25) + (1 - alpha) * z(cosine), alpha 0.5), so a hybrid costs no second encoding;
  3. per-query reciprocal ranks are kept; a 95% percentile bootstrap over queries (2,000 resamples,
     seeded) gives each MRR's interval and each model's paired difference to ``--ref`` (the same
     resampled queries for both); ``--seeds a,b`` adds a row for the mean over those training seeds
     (each query's mean reciprocal rank over the seeds, bootstrapped the same way; the seed-to-seed
     spread is printed beside it).
Output: Markdown tables on stdout; ``--out`` a JSON with every MRR, interval and the per-query
reciprocal ranks. Cost: one forward per query and code per model (MiniLM on 2 CPU cores: ~1 min per
model for six languages of 1,000 pairs), BM25 one index per pool. Not covered: the corpus protocol,
training-seed intervals beyond the spread of the seeds given.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from codept.probe import load_pairs
from codept.probe import metrics as M
from codept.probe.run import BM25Scorer, _by_lang, _subsample, build_scorer, dense_scorer, hybrid_scorer


def ci(rr: np.ndarray, n_boot: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95% percentile bootstrap interval of the mean of `rr` (resampling queries)."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(rr), size=(n_boot, len(rr)))
    means = rr[idx].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def reciprocal_ranks(fn, n: int, pool: int, seed: int) -> np.ndarray:
    """Per-query 1/rank in the pool protocol, in codept.probe.metrics.score_pools order."""
    return 1.0 / M.score_pools(fn, M.pools(n, pool, seed), pool).astype(np.float64)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--probe", nargs="+", required=True, type=Path, help="probe folders (pairs.jsonl)")
    ap.add_argument("--model", nargs="+", default=[], help="NAME=SPEC (a codept probe run --model value)")
    ap.add_argument("--hybrid", nargs="*", default=[], help="model NAMEs also scored as BM25 + NAME")
    ap.add_argument("--ref", default="", help="model NAME the paired differences are taken against")
    ap.add_argument("--seeds", default="", help="comma-separated model NAMEs: training seeds of one recipe (a mean row)")
    ap.add_argument("--pool", type=int, default=1000)
    ap.add_argument("--max-queries", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0, help="pool / subset seed (codept probe run --seed)")
    ap.add_argument("--alpha", type=float, default=0.5)
    ap.add_argument("--max-len", type=int, default=256)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    specs = {}
    for item in args.model:
        if "=" not in item:
            ap.error(f"--model {item!r}: expected NAME=SPEC")
        name, spec = item.split("=", 1)
        specs[name] = spec
    for h in args.hybrid:
        if h not in specs:
            ap.error(f"--hybrid {h}: not a --model NAME ({sorted(specs)})")
    seeds = [s for s in args.seeds.split(",") if s]
    for name in seeds + ([args.ref] if args.ref else []):
        if name not in specs:
            ap.error(f"{name}: not a --model NAME ({sorted(specs)})")
    scorers = {n: build_scorer(s, max_len=args.max_len, device="cpu") for n, s in specs.items()}
    rr: dict[str, dict[str, np.ndarray]] = {}  # lang -> column -> per-query 1/rank
    for probe in args.probe:
        pairs = load_pairs(probe)
        for lang, idx in _by_lang(pairs).items():
            idx = idx[_subsample(len(idx), args.max_queries, args.seed)]
            q, c = [pairs[i].query for i in idx], [pairs[i].code for i in idx]
            bm = BM25Scorer(q, c)
            col = {"bm25": reciprocal_ranks(bm, len(q), args.pool, args.seed)}
            for name, sc in scorers.items():
                enc = sc.prepare(q, c)  # the dense score_fn: embeddings computed here, once
                col[name] = reciprocal_ranks(enc, len(q), args.pool, args.seed)
                if name in args.hybrid:
                    col[f"bm25+{name}"] = reciprocal_ranks(hybrid_scorer(bm, enc, args.alpha), len(q), args.pool, args.seed)
                print(f"{lang} {name} {col[name].mean():.3f}", file=sys.stderr, flush=True)
            if seeds:
                col["mean(" + ",".join(seeds) + ")"] = np.mean([col[s] for s in seeds], axis=0)
                hyb = [f"bm25+{s}" for s in seeds if s in args.hybrid]
                if len(hyb) == len(seeds):
                    col["mean(" + ",".join(hyb) + ")"] = np.mean([col[h] for h in hyb], axis=0)
            rr[lang] = col
    langs = sorted(rr)
    cols = list(rr[langs[0]])
    table = {lang: {k: {"mrr": float(v.mean()), "ci": ci(v), "n": int(len(v))} for k, v in rr[lang].items()} for lang in langs}
    if args.ref:
        for lang in langs:
            for k, v in rr[lang].items():
                if k != args.ref:
                    d = v - rr[lang][args.ref]
                    table[lang][k]["diff_vs_ref"] = {"mean": float(d.mean()), "ci": ci(d)}
    print(f"MRR (pool {args.pool}, seed {args.seed}, <= {args.max_queries} queries), 95% bootstrap over queries\n")
    print("| lang | n | " + " | ".join(cols) + " |")
    print("|---|---|" + "---|" * len(cols))
    for lang in langs:
        cells = [f"{table[lang][k]['mrr']:.3f} [{table[lang][k]['ci'][0]:.3f}, {table[lang][k]['ci'][1]:.3f}]" for k in cols]
        print(f"| {lang} | {table[lang][cols[0]]['n']} | " + " | ".join(cells) + " |")
    if args.ref:
        print(f"\nPaired difference to {args.ref} (same queries), mean [95% bootstrap]\n")
        others = [k for k in cols if k != args.ref]
        print("| lang | " + " | ".join(others) + " |")
        print("|---|" + "---|" * len(others))
        for lang in langs:
            cells = [f"{table[lang][k]['diff_vs_ref']['mean']:+.3f} [{table[lang][k]['diff_vs_ref']['ci'][0]:+.3f}, "
                     f"{table[lang][k]['diff_vs_ref']['ci'][1]:+.3f}]" for k in others]
            print(f"| {lang} | " + " | ".join(cells) + " |")
    if seeds:
        print("\nSeed spread: " + "; ".join(f"{lang} " + " / ".join(f"{table[lang][s]['mrr']:.3f}" for s in seeds) for lang in langs))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        blob = {"args": {k: str(v) for k, v in vars(args).items()}, "specs": specs, "table": table,
                "rr": {lang: {k: v.round(6).tolist() for k, v in rr[lang].items()} for lang in langs}}
        args.out.write_text(json.dumps(blob) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
