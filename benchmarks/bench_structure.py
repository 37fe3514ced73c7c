"""Structure throughput on the running interpreter's standard library, one core, one process.

Measures, on the same files in the same run:
  parse-only     tree-sitter parse (no walk, no queries)
  tokenize-only  the tokenizer with offsets (the floor: a view needs the tokens anyway)
  full view      codept.structure.view.build_view (parse + walk + queries + resolve + alignment)
and prints MB/s and tokens/s for each (best pass), a breakdown of the view's stages, and last:
  view/tokenize time ratio: X
X is the median over repeats of (view pass / tokenize pass): the two passes run back to back in each
repeat, their order flipping every repeat, so a slow spell of a shared machine hits both sides of a
ratio (best-of timings taken minutes apart moved the ratio between 1.43 and 2.05 on the same 300
files). The best-pass ratio is printed too.
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
    print(f"corpus: {len(texts)} stdlib files, {mb:.2f} MB, {n_tokens:,} tokens; best of {args.repeat}")

    t_parse = best_of(args.repeat, lambda: [parser.parse(d) for d in datas])
    # tokenize-only = what a tokenize-only prepare stores: ids and char offsets as arrays
    stages: dict[str, float] = {}

    def tokenize_all():
        for _, t in texts:
            tokenize(tok, t)

    def views():
        stages.clear()
        for path, t in texts:
            v = build_view(path, "python", t, tok)
            for k in ("parse", "walk", "query"):
                stages[k] = stages.get(k, 0.0) + v.stats[k]

    t_toks: list[float] = []
    t_views: list[float] = []
    best_stages: dict[str, float] = {}
    for r in range(args.repeat):
        passes = [(t_toks, tokenize_all), (t_views, views)]
        for times, fn in passes[::-1] if r % 2 else passes:
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
            if times is t_views and times[-1] == min(times):
                best_stages = dict(stages)
    t_tok, t_view = min(t_toks), min(t_views)
    ratios = sorted(v / t for v, t in zip(t_views, t_toks))
    for name, t in (("parse-only", t_parse), ("tokenize-only", t_tok), ("full view", t_view)):
        print(f"{name:<14} {t:7.2f} s  {mb / t:6.2f} MB/s  {n_tokens / t / 1e6:5.3f} M tok/s")
    rest = t_view - sum(best_stages.values())
    print("view stages (best pass): " + ", ".join(f"{k} {v:.2f} s" for k, v in best_stages.items())
          + f", tokenize+align+resolve {rest:.2f} s")
    print(f"per-repeat view/tokenize ratios: {' '.join(f'{x:.2f}' for x in ratios)}; "
          f"best-pass ratio {t_view / t_tok:.2f}")
    print(f"view/tokenize time ratio: {ratios[len(ratios) // 2]:.2f}")


if __name__ == "__main__":
    main()
