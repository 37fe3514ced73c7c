"""Structure throughput on the running interpreter's standard library, one core, one process.

Measures, on the same files in the same run:
  parse-only     tree-sitter parse (no walk, no queries)
  tokenize-only  the tokenizer with offsets (the floor: a view needs the tokens anyway)
  full view      codept.structure.view.build_view (parse + walk + queries + resolve + alignment +
                 dataflow edges; the dataflow stage is printed on its own)
  binding floor  tokenize + codept.structure.grammar.binding_floor: parse + what any view needs from
                 py-tree-sitter at the least (one cursor visit per node reading its kind, the C
                 traversals of the two queries with a never-matching query); the view's cost
                 beyond it is the real patterns' matching, Python Node objects per capture, and
                 our own Python/NumPy work
and prints MB/s and tokens/s for each (best repeat), a breakdown of the view's stages, and last:
  view/tokenize time ratio: X
X is the median over repeats of (sum of view times / sum of tokenize times), where each file is
tokenized, viewed and floor-measured back to back, in an order rotating per file: a slow spell of
a shared machine (this 2-core VM moves 30% between passes) hits every side alike. Whole passes
back to back gave per-repeat ratios from 1.37 to 2.12 on the same files; per-file pairing gives
1.76-1.82. (Rotation also spreads the tokenizer's word cache, warm for a second tokenization of
the same text, over all sides.)
Usage: python benchmarks/bench_structure.py [--files N] [--repeat R] [--tokenizer DIR]
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("RAYON_NUM_THREADS", "1")  # tokenizers: one core, like everything else here
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import time  # noqa: E402

from codept.data.sources import read_source, stdlib_files  # noqa: E402
from codept.structure import grammar  # noqa: E402
from codept.structure.view import build_view, tokenize  # noqa: E402
from codept.tokenizer import default_tokenizer_dir, load_tokenizer  # noqa: E402


def best_of(repeat: int, fn) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=0, help="first N stdlib files (0 = all)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--tokenizer", default=None)
    args = ap.parse_args()

    tok = load_tokenizer(args.tokenizer or default_tokenizer_dir())
    texts = []
    for p in stdlib_files()[: args.files or None]:
        try:
            texts.append((str(p), read_source(p)))
        except grammar.SkipFile:
            pass
    datas = [t.encode() for _, t in texts]
    mb = sum(map(len, datas)) / 1e6
    parser = grammar._parser("python")
    grammar.load_grammar("python")
    n_tokens = sum(len(tok.encode(t, add_special_tokens=False).ids) for _, t in texts)
    print(f"corpus: {len(texts)} stdlib files, {mb:.2f} MB, {n_tokens:,} tokens; {args.repeat} repeats")

    t_parse = best_of(args.repeat, lambda: [parser.parse(d) for d in datas])

    # tokenize-only = what a tokenize-only prepare stores: ids and char offsets as arrays
    def tok_only(path, t, d):
        tokenize(tok, t)

    def view(path, t, d):
        v = build_view(path, "python", t, tok)
        for k in ("parse", "walk", "query", "dataflow"):
            stages[k] += v.stats[k]

    def floor(path, t, d):
        tokenize(tok, t)
        grammar.binding_floor("python", d)

    fns = {"tokenize": tok_only, "view": view, "floor": floor}
    reps: list[dict[str, float]] = []
    for r in range(args.repeat):
        stages = dict.fromkeys(("parse", "walk", "query", "dataflow"), 0.0)
        total = dict.fromkeys(fns, 0.0)
        for i, (path, t) in enumerate(texts):  # the three back to back per file, order rotating
            names = list(fns)[(i + r) % 3:] + list(fns)[: (i + r) % 3]
            for name in names:
                t0 = time.perf_counter()
                fns[name](path, t, datas[i])
                total[name] += time.perf_counter() - t0
        reps.append({**total, **{f"stage_{k}": v for k, v in stages.items()}})

    def median(xs: list[float]) -> float:
        return sorted(xs)[len(xs) // 2]

    best = {k: min(r[k] for r in reps) for k in reps[0]}
    for name, t in (("parse-only", t_parse), ("tokenize-only", best["tokenize"]), ("full view", best["view"])):
        print(f"{name:<14} {t:7.2f} s  {mb / t:6.2f} MB/s  {n_tokens / t / 1e6:5.3f} M tok/s")
    stage = {k: best[f"stage_{k}"] for k in ("parse", "walk", "query", "dataflow")}
    print("view stages (best sums): " + ", ".join(f"{k} {v:.2f} s" for k, v in stage.items())
          + f", tokenize+align+resolve {best['view'] - sum(stage.values()):.2f} s")
    ratios = [r["view"] / r["tokenize"] for r in reps]
    floors = [r["floor"] / r["tokenize"] for r in reps]
    print(f"per-repeat view/tokenize ratios: {' '.join(f'{x:.2f}' for x in ratios)}")
    print(f"binding floor/tokenize: {median(floors):.2f} (per repeat {' '.join(f'{x:.2f}' for x in floors)}); "
          f"view/floor: {median(ratios) / median(floors):.2f}")
    print(f"view/tokenize time ratio: {median(ratios):.2f}")


if __name__ == "__main__":
    main()
