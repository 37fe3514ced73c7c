"""Training throughput through the DeepSpeed engine against a plain torch loop, same model, same batches.

One rank, the same torch threads (--threads, default all cores), the debug_cpu encoder + MLM head (same
initial weights on both sides, attention path --attention, default varlen) on packed stdlib batches from
the real stream, one micro-batch per step:
  plain torch   forward (under torch.autocast(bfloat16) with --precision bf16_autocast), loss_sum /
                n_valid, backward, global grad norm + clipping at --grad-clip (as DeepSpeed does: the norm
                always, the scaling when clip > 0), torch AdamW with the hyper-parameters build_engine
                gives DeepSpeed, LambdaLR step, zero_grad
  deepspeed     codept.train.engine.train_step (ds_configs/<--ds-config>.json, --zero-stage and
                --precision overriding it as the RunConfig fields do, loss normalised over the step)
--compile compiles both sides' module (nn.Module.compile; RunConfig.compile on the engine side); the
compiling steps fall in --warmup. --precision bf16 (DeepSpeed's bf16 weights) has no plain twin: the
plain side then runs bf16 autocast (the ratio compares the two ways of training in bf16).
The script relaunches itself as a 1-rank `deepspeed --num_gpus 1` job that runs the engine loop and starts
the plain loop in a child process (its own heap, with the glibc malloc settings that
codept.train.engine.init_distributed gives a CPU training process); the two take turns step by step, the
order flipping every step, so load from other processes hits both sides alike (run one after the other,
as before, background load swung the ratio from 0.8 to 1.8). On a loaded machine prefer --threads 1:
two OpenMP threads sharing a busy core slow every op several-fold, the plain loop's many small
optimizer ops most.
Prints tokens/s of both (timed steps after --warmup) and their ratio, the median and quartiles of the
per-step ratios, minor page faults per step (freshly touched memory, a real cost on CPU), the first
step's loss and grad norm of both sides (same work: the losses agree exactly; the norms in the 4th digit,
DeepSpeed sums the norm in fp64, torch in fp32), model FLOPs per token (6N + attention), achieved
TFLOP/s, and MFU when --peak-tflops is given.
Usage: python benchmarks/bench_engine.py [--steps 30] [--warmup 5] [--seq 256] [--rows 8]
       [--ds-config zero2] [--zero-stage -1] [--precision fp32] [--compile] [--attention varlen]
       [--grad-clip 1.0] [--threads N] [--peak-tflops X]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from codept.train.config import RunConfig  # no torch import

REPO = Path(__file__).resolve().parents[1]

RUN_DEFAULT_CLIP = RunConfig.grad_clip  # what the recipes clip at


def batches(seq: int, rows: int, n: int):
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


def model(vocab_size: int, attention: str = "varlen", seq: int = 512):
    import torch

    from codept.model import transformer as T
    from codept.model.pretrainer import Pretrainer, build_head

    torch.manual_seed(0)
    m = T.Transformer(T.debug_cpu(vocab_size=vocab_size, dropout=0.0, attention_dropout=0.0, attention=attention,
                                  max_positions=max(512, seq)))
    return m, Pretrainer(m, {"mlm": build_head("mlm", m)})


def _plain_step(net, opt, sched, batch, clip: float, bf16: bool = False) -> dict:
    """What train_step does for one micro-batch per step, without DeepSpeed: loss_sum / n_valid (the forward
    under bf16 autocast when ``bf16``), backward, the global grad norm (the ZeRO engine always computes it,
    train_step logs it), clipping when clip > 0, AdamW step, lr schedule step, zero_grad."""
    import torch

    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        s, n = net(batch)["mlm"]
    (s / n.clamp(min=1)).backward()
    params = [p for p in net.parameters() if p.grad is not None]
    if clip > 0:  # norm, then grads *= min(1, clip / norm) (DeepSpeed scales unconditionally too)
        gn = torch.nn.utils.clip_grad_norm_(params, clip)
    else:  # DeepSpeed computes the norm anyway and leaves the grads alone
        gn = torch.nn.utils.get_total_norm([p.grad for p in params])
    opt.step()
    sched.step()
    opt.zero_grad(set_to_none=True)
    return {"loss": float(s.detach()) / max(1, int(n)), "grad_norm": float(gn)}


def _timed(step, batch) -> tuple[float, int, dict]:
    """(wall seconds, minor page faults, logs) of one step in this process."""
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    t0 = time.perf_counter()
    logs = step(batch)
    return time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0, logs


def plain_worker(conn, threads: int, vocab_size: int, plan_optimizer: dict, schedule: dict, clip: float,
                 attention: str = "varlen", seq: int = 512, bf16: bool = False, compile_: bool = False) -> None:
    """The plain loop, in its own process (its own heap: no allocator interplay with the engine's
    buffers). Runs batch i when told i; answers (seconds, page faults, logs); stops on None."""
    import functools

    import torch

    from codept.train.config import lr_multiplier

    torch.set_num_threads(threads)
    data = conn.recv()
    _, net = model(vocab_size, attention, seq)
    if compile_:
        net.compile()
    o = plan_optimizer
    opt = torch.optim.AdamW(net.parameters(), lr=o["lr"], betas=tuple(o["betas"]), eps=o["eps"],
                            weight_decay=o["weight_decay"])  # the optimizer build_engine gives DeepSpeed
    sched = torch.optim.lr_scheduler.LambdaLR(opt, functools.partial(lr_multiplier, schedule=schedule))
    conn.send("ready")
    while (i := conn.recv()) is not None:
        conn.send(_timed(lambda b: _plain_step(net, opt, sched, b, clip, bf16), data[i]))


def engine_half(args) -> None:
    """The engine loop in this 1-rank DeepSpeed job, the plain loop in a child process; they take turns step
    by step (the order flips every step), so a load change on the machine hits both sides alike. Per-step
    wall times and page faults go to --result."""
    import multiprocessing

    import torch

    from codept.train import engine as E
    from codept.train.config import derive
    from codept.train.process import CPU_MALLOC_ENV

    torch.set_num_threads(args.threads)  # the launcher may set OMP_NUM_THREADS=1: same threads for both loops
    world = E.init_distributed()
    data, v = batches(args.seq, args.rows, args.steps)
    cfg = RunConfig(seq_len=args.seq, micro_batch_rows=args.rows, global_batch_rows=args.rows, steps=args.steps,
                    lr=1e-4, warmup_steps=0, schedule="constant", grad_clip=args.grad_clip, ds_config=args.ds_config,
                    precision=args.precision, zero_stage=args.zero_stage, compile=args.compile)
    plan = derive(cfg, world.world_size)
    if world.backend == "gloo":  # the plain process gets the glibc malloc settings init_distributed gave this one
        for name, value in CPU_MALLOC_ENV.items():
            os.environ.setdefault(name, value)
    ctx = multiprocessing.get_context("spawn")
    conn, child_conn = ctx.Pipe()
    worker = ctx.Process(target=plain_worker, args=(child_conn, args.threads, v, plan.optimizer, plan.schedule,
                                                    args.grad_clip, args.attention, args.seq,
                                                    args.precision != "fp32", args.compile), daemon=True)
    worker.start()
    conn.send(data)
    m, net = model(v, args.attention, args.seq)  # same seed as the worker's: the same initial weights on both sides
    flops_per_token = m.flops_per_token(args.seq)  # before ZeRO-3 partitions the parameters away
    eng = E.build_engine(net, cfg, world, plan=plan)
    if conn.recv() != "ready":
        raise RuntimeError("plain worker did not start")

    def plain_step(i):
        conn.send(i)
        return conn.recv()

    def engine_step(i):
        return _timed(lambda b: E.train_step(eng, [b], lambda e, batch: e(batch), heads=["mlm"]), data[i])

    times: dict[str, list[float]] = {"plain": [], "engine": []}
    faults: dict[str, list[int]] = {"plain": [], "engine": []}  # minor page faults: fresh memory touched
    first: dict[str, dict] = {}
    for i in range(len(data)):
        for name, step in ((("plain", plain_step), ("engine", engine_step)) if i % 2 == 0
                           else (("engine", engine_step), ("plain", plain_step))):
            dt, flt, logs = step(i)
            times[name].append(dt)
            faults[name].append(flt)
            first.setdefault(name, logs)
    conn.send(None)
    worker.join(60)
    tokens = [int((b["segment_ids"] > 0).sum()) for b in data]
    Path(args.result).write_text(json.dumps({"times": times, "faults": faults, "tokens": tokens, "first": first,
                                             "flops_per_token": flops_per_token}))
    E.shutdown()


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _quartiles(xs: list[float]) -> tuple[float, float, float]:
    q = statistics.quantiles(xs, n=4) if len(xs) > 1 else [xs[0]] * 3
    return q[0], q[1], q[2]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--rows", type=int, default=8)
    ap.add_argument("--grad-clip", type=float, default=RUN_DEFAULT_CLIP,
                    help=f"global grad-norm clip on both sides (RunConfig default {RUN_DEFAULT_CLIP}); 0: norm only")
    ap.add_argument("--peak-tflops", type=float, default=0.0)
    ap.add_argument("--ds-config", default="zero2", help="ds_configs/<name>.json for the engine half")
    ap.add_argument("--zero-stage", type=int, default=-1, help="RunConfig.zero_stage for the engine (-1: the ds_config's)")
    ap.add_argument("--precision", default="fp32", choices=("fp32", "bf16", "bf16_autocast"),
                    help="RunConfig.precision of the engine; the plain loop runs bf16 autocast unless fp32")
    ap.add_argument("--compile", action="store_true", help="torch.compile both sides (steps in --warmup compile)")
    ap.add_argument("--attention", default="varlen", help="the model's attention path, both sides")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="torch threads, both halves")
    ap.add_argument("--engine-half", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--result", default="", help=argparse.SUPPRESS)
    ap.add_argument("--local_rank", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.engine_half:
        return engine_half(args)
    if args.steps <= args.warmup:
        ap.error(f"--steps {args.steps} must exceed --warmup {args.warmup}")
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    result = REPO / "runs" / "bench_engine.json"
    result.parent.mkdir(exist_ok=True)
    result.unlink(missing_ok=True)
    exe = Path(sys.executable).with_name("deepspeed")
    port = _free_port()
    proc = subprocess.run([str(exe), "--num_gpus", "1", "--master_port", str(port), __file__,
                           "--engine-half", "--result", str(result), "--steps", str(args.steps),
                           "--warmup", str(args.warmup), "--seq", str(args.seq), "--rows", str(args.rows),
                           "--threads", str(args.threads), "--grad-clip", str(args.grad_clip),
                           "--ds-config", args.ds_config, "--zero-stage", str(args.zero_stage),
                           "--precision", args.precision, "--attention", args.attention]
                          + (["--compile"] if args.compile else []),
                          cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for f in glob.glob(f"/dev/shm/deepspeed_allreduce_buffer_*_{port}_*"):  # left behind if the job crashed
        Path(f).unlink(missing_ok=True)
    if proc.returncode or not result.is_file():
        sys.exit(f"benchmark job failed (rc {proc.returncode}); its output ends:\n{proc.stdout[-4000:]}")
    r = json.loads(result.read_text())
    w = args.warmup
    tp, te, tokens = r["times"]["plain"][w:], r["times"]["engine"][w:], sum(r["tokens"][w:])
    plain_tok_s, engine_tok_s = tokens / sum(tp), tokens / sum(te)
    pair = [p / e for p, e in zip(tp, te)]  # engine/plain throughput, step by step
    q1, med, q3 = _quartiles(pair)
    fpt = r["flops_per_token"]
    fp, fe = r["first"]["plain"], r["first"]["engine"]
    print(f"{len(tp)} timed steps per side after {w} warm-up, {args.rows} x {args.seq} tokens, {args.threads} threads, "
          f"grad_clip {args.grad_clip}, interleaved; attention {args.attention}, engine precision {args.precision}, "
          f"plain {'fp32' if args.precision == 'fp32' else 'bf16 autocast'}, compile {args.compile}")
    print(f"plain torch loop  {plain_tok_s:9.0f} tok/s  {plain_tok_s * fpt / 1e12:.4f} TFLOP/s  "
          f"(median step {statistics.median(tp) * 1e3:.0f} ms)")
    print(f"deepspeed engine  {engine_tok_s:9.0f} tok/s  {engine_tok_s * fpt / 1e12:.4f} TFLOP/s  "
          f"(median step {statistics.median(te) * 1e3:.0f} ms, {args.ds_config}, zero_stage {args.zero_stage})")
    print(f"minor page faults per step (median): plain {statistics.median(r['faults']['plain'][w:]):.0f}, "
          f"engine {statistics.median(r['faults']['engine'][w:]):.0f}")
    print(f"step 1: loss plain {fp['loss']:.6f} engine {fe['loss']:.6f}; grad norm plain {fp['grad_norm']:.6f} "
          f"engine {fe['grad_norm']:.6f}")
    print(f"model FLOPs per token: {fpt / 1e6:.1f} M (6N + attention, seq {args.seq})")
    if args.peak_tflops:
        print(f"MFU (engine): {engine_tok_s * fpt / 1e12 / args.peak_tflops:.1%}")
    print(f"per-step engine/plain ratio: median {med:.3f} (quartiles {q1:.3f} - {q3:.3f})")
    print(f"engine/plain throughput ratio: {engine_tok_s / plain_tok_s:.2f}")


if __name__ == "__main__":
    main()
