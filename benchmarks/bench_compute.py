"""Forward + backward time per token of the encoder's compute paths, on real packed MLM rows, one interleaved run.

Rows: packed MLM rows (15% of tokens selected, codept.objectives.mlm defaults) of the running
interpreter's standard library from the real stream (prepare -> views -> mlm -> PackedStream), --seq
tokens each (default 512), micro-batches of --rows rows. Model: the debug_cpu encoder (4 x 256, vocab
16384) + the MLM head, dropout 0 on every path (each path computes the same function; the preset's
zero residual init replaced by BERT's, so that attention changes the loss and the loss comparison
means something); the same initial weights on every path.
Paths (``--paths``, each in fp32 and, with --bf16, under torch.autocast(bfloat16)):
  dense          attention "sdpa" with the dense (B, T, T) mask, the DENSE head (logits at every position)
  today          attention "sdpa" with the dense mask, the sparse head: the default before issue 25
  varlen_dense   attention "varlen" (per packed document, no mask), the dense head
  varlen         attention "varlen", the sparse head (logits only at the targets)
  compiled       "varlen" + sparse head, the whole Pretrainer under torch.compile (compile time excluded)
Each timed step: forward, loss_sum / n, backward, zero_grad (no optimizer: that is the engine's,
benchmarks/bench_engine.py). The paths take turns batch by batch, the order rotating every batch, so a
load change on the machine hits every path alike; the first --warmup batches (compilation) are not
timed. Prints per path the median step, microseconds per token, tokens/s, the speedup over ``today``
(fp32) and the first timed batch's loss, the largest loss and gradient-norm differences from today's fp32 path (the
paths compute the same function: float-rounding differences in fp32, bf16's in bf16), and as
its LAST line the speedup of the fastest path over the dense path (dense fp32, issue 25's bar: >= 1.5x)
and over today's (today fp32; that line alone when --paths has no dense).
Where the time goes (torch.profiler, today fp32, 2 steps of 4 x 512 rows, 1 thread): matmuls (mm +
addmm) 60%, SDPA forward + backward 25%, log-softmax 3.4%, GELU 2.3%, the rest < 10%: compute-bound;
at 1.02 documents per stdlib row of 512 varlen saves no attention FLOPs, so on CPU it cannot beat
today by much (fewer documents per row than the function-level corpora varlen is for).
Usage: python benchmarks/bench_compute.py [--steps 8] [--warmup 3] [--seq 512] [--rows 8] [--threads 1]
       [--paths dense,today,varlen_dense,varlen,compiled] [--no-bf16] [--explain]
--explain prints torch._dynamo.explain's graph breaks of the compiled path and exits.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

PATHS = {  # name -> (attention, sparse head, compiled)
    "dense": ("sdpa", False, False),
    "today": ("sdpa", True, False),
    "varlen_dense": ("varlen", False, False),
    "varlen": ("varlen", True, False),
    "compiled": ("varlen", True, True),
}


def mlm_rows(seq: int, rows: int, n: int):
    """n micro-batches of `rows` packed MLM rows of `seq` tokens from the stdlib stream, and the vocab size."""
    from codept.data.collate import collate
    from codept.data.stream import Mixture, PackedStream
    from codept.views import view_source
    from codept.objectives import build
    from codept.objectives.render import Vocab
    from codept.prepare import load_views, prepare
    from codept.tokenizer import default_tokenizer_dir, load_tokenizer

    tok_dir = default_tokenizer_dir()
    views = load_views(prepare([], tokenizer_dir=tok_dir, progress=False)["out"])
    vocab = Vocab.from_tokenizer(load_tokenizer(tok_dir))
    stream = PackedStream(Mixture([view_source(views, build("mlm", vocab), "mlm")], [1], seed=0), seq, vocab.pad_id)
    return [collate([next(stream) for _ in range(rows)]) for _ in range(n)], vocab.size


def build_net(vocab_size: int, seq: int, attention: str, sparse: bool, compiled: bool):
    import torch

    from codept.model import transformer as T
    from codept.model.pretrainer import Pretrainer, build_head

    torch.manual_seed(0)
    m = T.Transformer(T.debug_cpu(vocab_size=vocab_size, max_positions=max(512, seq), attention=attention,
                                  dropout=0.0, attention_dropout=0.0, residual_init="normal"))
    net = Pretrainer(m, {"mlm": build_head("mlm", m)})
    net.heads["mlm"].sparse = sparse
    if compiled:
        net.compile()
    return net


def step_fn(net, bf16: bool):
    import torch

    def step(batch) -> tuple[float, float]:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            s, n = net(batch)["mlm"]
        (s / n.clamp(min=1)).backward()
        norm = torch.nn.utils.get_total_norm([p.grad for p in net.parameters() if p.grad is not None])
        net.zero_grad(set_to_none=True)
        return float(s.detach()) / max(1, int(n)), float(norm)

    return step


def explain(batch, vocab_size: int, seq: int) -> None:
    import torch

    for attention in ("varlen", "sdpa"):
        net = build_net(vocab_size, seq, attention, True, False)
        ex = torch._dynamo.explain(net)(batch)
        print(f"attention={attention}: {ex.graph_count} graphs, {ex.graph_break_count} graph breaks")
        seen: dict[str, int] = {}
        for r in ex.break_reasons:
            stack = [f for f in (r.user_stack or []) if "codept" in f.filename] or list(r.user_stack or [])
            at = " <- ".join(f"{Path(f.filename).name}:{f.lineno} ({f.name})" for f in stack[::-1][:2]) or "?"
            line = f"{at}: {r.reason.splitlines()[0][:120]}"
            seen[line] = seen.get(line, 0) + 1
        for line, n in seen.items():
            print(f"  {n} x {line}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=8, help="timed batches per path")
    ap.add_argument("--warmup", type=int, default=3, help="untimed batches first (compilation)")
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--rows", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--paths", default=",".join(PATHS))
    ap.add_argument("--no-bf16", action="store_true", help="fp32 only (bf16 autocast needs AVX512-BF16/AMX to pay)")
    ap.add_argument("--explain", action="store_true")
    args = ap.parse_args()
    names = args.paths.split(",")
    bad = [n for n in names if n not in PATHS]
    if bad or "today" not in names:
        ap.error(f"--paths: unknown {bad}; known {list(PATHS)}, and 'today' (the baseline) must be one")
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    import torch

    torch.set_num_threads(args.threads)
    t0 = time.time()
    data, vocab_size = mlm_rows(args.seq, args.rows, args.warmup + args.steps)
    if args.explain:
        return explain(data[0], vocab_size, args.seq)
    labels = sum(int((b["labels.mlm"] != -100).sum()) for b in data)
    tokens = [int((b["segment_ids"] > 0).sum()) for b in data]
    docs = sum(int(b["segment_ids"].max(1).values.sum()) for b in data)
    print(f"{len(data)} batches of {args.rows} x {args.seq} real packed MLM rows ({time.time() - t0:.0f} s): "
          f"{docs / (len(data) * args.rows):.2f} documents per row, fill {sum(tokens) / (len(data) * args.rows * args.seq):.4f}, "
          f"{labels / sum(tokens):.3f} of tokens are targets; {args.threads} thread(s), torch {torch.__version__}")
    runs = {}
    for precision in ("fp32",) + (() if args.no_bf16 else ("bf16",)):
        for name in names:
            attention, sparse, compiled = PATHS[name]
            runs[f"{name} {precision}"] = step_fn(build_net(vocab_size, args.seq, attention, sparse, compiled),
                                                 precision == "bf16")
    keys = list(runs)
    times = {k: [] for k in keys}
    losses = {k: [] for k in keys}
    for i, batch in enumerate(data):
        shift = i % len(keys)
        for k in keys[shift:] + keys[:shift]:  # rotate the order every batch
            t = time.perf_counter()
            loss = runs[k](batch)
            dt = time.perf_counter() - t
            if i >= args.warmup:
                times[k].append(dt)
                losses[k].append(loss)
    timed = sum(tokens[args.warmup:])
    base = sum(times["today fp32"])
    print(f"{'path':18s} {'median step ms':>14s} {'us/token':>9s} {'tok/s':>7s} {'vs today':>9s} {'loss[0]':>9s} "
          f"{'max |dloss|':>11s} {'max grad-norm rel. diff':>23s}  (last two: against today fp32)")
    ref = losses["today fp32"]
    for k in keys:
        total = sum(times[k])
        dl = max(abs(a[0] - b[0]) for a, b in zip(losses[k], ref))
        dg = max(abs(a[1] - b[1]) / b[1] for a, b in zip(losses[k], ref))
        print(f"{k:18s} {statistics.median(times[k]) * 1e3:14.0f} {total / timed * 1e6:9.1f} {timed / total:7.0f} "
              f"{base / total:8.2f}x {losses[k][0][0]:9.5f} {dl:11.1e} {dg:23.1e}")
    best = min(keys, key=lambda k: sum(times[k]))
    best32 = min((k for k in keys if k.endswith("fp32")), key=lambda k: sum(times[k]))
    over_today = (f"over today (sdpa + dense mask + sparse head, the default before issue 25): "
                  f"{base / sum(times[best]):.2f}x (fp32 only: {best32} {base / sum(times[best32]):.2f}x)")
    if "dense fp32" not in times:
        print(f"speedup of the best path ({best}) {over_today}")
        return
    dense = sum(times["dense fp32"])
    print(f"speedup of the best path ({best}) over the dense path (dense fp32: dense mask, logits at every "
          f"position): {dense / sum(times[best]):.2f}x; {over_today}")


if __name__ == "__main__":
    main()
