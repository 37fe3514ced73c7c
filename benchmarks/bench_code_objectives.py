"""Online throughput of the code objectives of issue 16 against HF's MLM collator, one core.

Same run, same views (every 8th stdlib file, built in memory and served from an Arrow table through
codept.views.view_source, as training reads prepared views), repeats interleaved:
  <objective>        view_source -> objective -> best-fit pack -> collate (rows of --seq): dataflow,
                     dataflow_edge, ident_rtd, ident_mask, code_doc (every documented definition per read),
                     code_doc+hn (with hard negatives), code_doc 1-pair (the single-pair path), mlm
  hf lists           transformers' DataCollatorForLanguageModeling (mlm 0.15) on lists of dicts
                     (rows of --seq tokens)
``--seq`` (default 512) is the row length of every contender. The code_doc contenders get the settings
the recipes give them at that row length (codept.train.loop.configure): their group budget
``max_tokens`` is lowered to seq / 2 (Config.default_row_share) unless ``--max-tokens`` gives it (256
at rows of 512, 128 at rows of 256: debug_cpu, the ablations), and a pair with its hard negatives that
does not fit the row gets the lowered code cut of Config.fit_unit (code_doc+hn at rows of 256:
max_code_tokens 96, 2 x (32 + 96) = 256).
Tokens/s counts delivered (non-padding) tokens of the collated batches. benchmarks/bench_objectives.py
runs every registered objective on the full prepared stdlib; this one is the quick, focused check.
Usage: python benchmarks/bench_code_objectives.py [--seq 512] [--max-tokens N] [--repeats 3] [--batches 12]
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("RAYON_NUM_THREADS", "1")
sys.path.insert(0, os.path.dirname(__file__))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from bench_objectives import codept_run, hf_run  # noqa: E402
from codept.data.sources import read_source, stdlib_files  # noqa: E402
from codept.views import open_views, view_source  # noqa: E402
from codept.objectives import OBJECTIVES, build  # noqa: E402
from codept.objectives.render import Vocab  # noqa: E402
from codept.structure.grammar import SkipFile  # noqa: E402
from codept.structure.view import build_view, views_to_table  # noqa: E402
from codept.tokenizer import default_tokenizer_dir, load_tokenizer  # noqa: E402
from codept.train.loop import row_settings  # noqa: E402

CONTENDERS = {"dataflow": {}, "dataflow_edge": {}, "ident_rtd": {}, "ident_mask": {}, "code_doc": {}, "code_doc+hn": {"hard_negatives": True},
              "code_doc 1-pair": {"pairs": 1}, "mlm": {}}


def settings(name: str, given: dict, seq: int, max_tokens: int | None) -> dict:
    """The contender's objective settings at rows of `seq`, as the recipes derive them
    (codept.train.loop.row_settings); `max_tokens` (if set) as if given."""
    cfg = OBJECTIVES[name].config
    if not getattr(cfg, "whole_in_row", False):
        return dict(given)
    return row_settings(name, cfg, {**given, **({} if max_tokens is None else {"max_tokens": max_tokens})}, seq)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batches", type=int, default=12)
    ap.add_argument("--seq", type=int, default=512, help="row length of every contender (HF's too)")
    ap.add_argument("--max-tokens", type=int, default=None,
                    help="code_doc's group budget (default: seq / 2, the recipes' rule)")
    args = ap.parse_args()
    seq = args.seq
    torch.set_num_threads(1)
    from transformers import AutoTokenizer, DataCollatorForLanguageModeling

    tok_dir = default_tokenizer_dir()
    tok = load_tokenizer(tok_dir)
    views = []
    for p in stdlib_files()[::8]:
        try:
            views.append(build_view(str(p), "python", read_source(p), tok))
        except SkipFile:
            pass
    cv = open_views(views_to_table(views))
    vocab = Vocab.from_tokenizer(tok)
    base = {k: k.split("+")[0].split()[0] for k in CONTENDERS}
    runs = {k: view_source(cv, build(base[k], vocab, **settings(base[k], kw, seq, args.max_tokens)), k)
            for k, kw in CONTENDERS.items()}
    hf = DataCollatorForLanguageModeling(AutoTokenizer.from_pretrained(str(tok_dir)), mlm=True, mlm_probability=0.15)
    flat = np.concatenate([np.asarray(v.input_ids) for v in views])
    n = len(flat) // seq
    lists = [{"input_ids": r.tolist()} for r in flat[: n * seq].reshape(n, seq)]
    rates: dict[str, list[float]] = {k: [] for k in [*runs, "hf lists"]}
    print(f"{len(views)} views, {len(flat):,} tokens; rows of {seq}, batches of 32, {args.batches} x {args.repeats}")
    names = list(rates)
    for r in range(args.repeats):
        for k in names[r % len(names):] + names[: r % len(names)]:
            t, s = hf_run(hf, lists, 32, args.batches) if k == "hf lists" else \
                codept_run(runs[k], seq, 32, args.batches, vocab.pad_id)
            rates[k].append(t / s)
    for k, v in rates.items():
        ratio = np.median([a / b for a, b in zip(v, rates["hf lists"])])
        print(f"{k:<18} {np.median(v) / 1e6:6.3f} M tok/s   / hf lists {ratio:5.2f}")


if __name__ == "__main__":
    main()
