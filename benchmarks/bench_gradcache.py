"""GradCache: candidates per step against peak memory and time, on real code_doc pairs, one CPU process.

Rows: code_doc pairs (defaults, one Example per pair) of the running interpreter's standard library,
packed into rows of --seq tokens (codept.data.pack), the debug_cpu encoder (default tokenizer) and
the contrastive head. Per configuration, in a fresh subprocess (its own peak RSS):
  whole      the --global rows as ONE micro-batch: every pair against every candidate (the reference)
  gradcache  the same rows as micro-batches of --micro rows, GradCache (codept.model.gradcache):
             the same candidates, the memory of one micro-batch
  micro      micro-batches of --micro rows without GradCache: each pair against its micro-batch only
Each timed step: forward(s), backward(s), zero_grad (no optimizer), after one warm-up step. Prints per
configuration: candidates per step (code-side documents a query is scored against), pairs, median
seconds per step, peak RSS growth over the process after setup (MB), and the relative difference of
the parameter gradients from ``whole`` (GradCache: float32 rounding; micro: a different gradient).
Usage: OMP_NUM_THREADS=1 /work/locks/cpu python benchmarks/bench_gradcache.py [--global 64] [--micro 4]
       [--seq 256] [--steps 3]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time


def _rows(n_rows: int, seq: int):
    import numpy as np

    from codept.data.pack import pack
    from codept.data.sources import read_source, stdlib_files
    from codept.objectives import build
    from codept.objectives.render import Vocab
    from codept.structure.grammar import SkipFile
    from codept.structure.view import build_view
    from codept.tokenizer import default_tokenizer_dir, load_tokenizer

    tok = load_tokenizer(default_tokenizer_dir())
    obj = build("code_doc", Vocab.from_tokenizer(tok), max_tokens=0)
    exs = []
    for i, p in enumerate(stdlib_files()[300:]):
        try:
            v = build_view(str(p), "python", read_source(p), tok)
        except SkipFile:
            continue
        exs += obj(v, np.random.default_rng(i)) or []
        rows = pack(exs, seq, pad_id=0) if len(exs) > 4 * n_rows else []
        if len(rows) > n_rows:
            return rows[:n_rows], tok
    raise SystemExit("not enough documented functions in the stdlib for the rows asked")


def one(mode: str, n_global: int, n_micro: int, seq: int, steps: int) -> dict:
    import torch

    from codept.data.collate import collate
    from codept.model import pretrainer as P
    from codept.model import transformer as T
    from codept.model.gradcache import GradCache

    torch.set_num_threads(1)
    rows, tok = _rows(n_global, seq)
    torch.manual_seed(0)
    model = T.Transformer(T.debug_cpu(vocab_size=tok.get_vocab_size(), max_positions=max(seq, 512), dropout=0.0,
                                      attention_dropout=0.0))
    net = P.Pretrainer(model, {"contrastive": P.build_head("contrastive", model)}).train()
    micro = [collate(rows)] if mode == "whole" else [collate(rows[i: i + n_micro]) for i in range(0, len(rows), n_micro)]
    whole = collate(rows)
    keys = whole["scalar.pair"][whole["scalar.pair"] >= 0]
    candidates, pairs = int((keys % 2 == 1).sum()), P.build_head("contrastive", model).count(whole)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    times = []
    for step in range(steps + 1):
        net.zero_grad()
        t0 = time.perf_counter()
        if mode == "gradcache":
            gc = GradCache(net)
            gc.prepare(micro)
            for b in micro:
                gc.forward(net, b)["contrastive"][0].backward()
        else:
            for b in micro:
                net(b)["contrastive"][0].backward()
        if step:
            times.append(time.perf_counter() - t0)
    grads = torch.cat([p.grad.flatten() for p in net.parameters() if p.grad is not None])
    torch.save(grads, f"/tmp/bench_gradcache_{mode}.pt")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"mode": mode, "candidates": candidates if mode != "micro" else round(candidates / len(micro), 1),
            "pairs": pairs, "micro_batches": len(micro), "seconds": sorted(times)[len(times) // 2],
            "peak_rss_growth_mb": round((peak - base) / 1024, 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--global", dest="n_global", type=int, default=64)
    ap.add_argument("--micro", type=int, default=4)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--one", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        print(json.dumps(one(a.one, a.n_global, a.micro, a.seq, a.steps)))
        return 0
    import torch

    out = []
    for mode in ("whole", "gradcache", "micro"):
        r = subprocess.run([sys.executable, __file__, "--one", mode, "--global", str(a.n_global), "--micro",
                            str(a.micro), "--seq", str(a.seq), "--steps", str(a.steps)],
                           capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
        if r.returncode:
            print(r.stderr[-3000:], file=sys.stderr)
            return 1
        out.append(json.loads(r.stdout.strip().splitlines()[-1]))
    ref = torch.load("/tmp/bench_gradcache_whole.pt")
    print(f"{a.n_global} rows x {a.seq} tokens, micro-batches of {a.micro} rows, debug_cpu, 1 thread")
    print("| mode | candidates per query | pairs | micro-batches | s / step | peak RSS growth MB | grad rel. diff vs whole |")
    print("|---|---|---|---|---|---|---|")
    for r in out:
        g = torch.load(f"/tmp/bench_gradcache_{r['mode']}.pt")
        diff = float((g - ref).abs().max() / ref.abs().max())
        print(f"| {r['mode']} | {r['candidates']} | {r['pairs']} | {r['micro_batches']} | {r['seconds']:.2f} | "
              f"{r['peak_rss_growth_mb']} | {diff:.1e} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
