"""Training throughput through the DeepSpeed engine against a plain torch loop, same model, same batches.

One rank each, both with the same torch threads (--threads, default all cores), the debug_cpu encoder + MLM head on packed
stdlib batches from the real stream:
  plain torch   forward, loss_sum / n_valid, backward, AdamW step, zero_grad
  deepspeed     codept.train.engine.train_step (ZeRO-2 engine, loss normalised over the step)
Prints tokens/s of both, their ratio, model FLOPs per token (6N + attention) and achieved TFLOP/s;
MFU when --peak-tflops is given (e.g. 989 for an H200's dense bf16).
Usage: python benchmarks/bench_engine.py [--steps 30] [--seq 256] [--rows 8] [--peak-tflops X]
(the script launches itself under `deepspeed --num_gpus 1` for the engine half)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def batches(seq: int, rows: int, n: int):
    from codept.data.collate import collate
    from codept.data.stream import Mixture, PackedStream
    from codept.data.views import view_source
    from codept.objectives import build
    from codept.objectives.render import Vocab
    from codept.prepare import load_views, prepare
    from codept.tokenizer import default_tokenizer_dir, load_tokenizer

    tok_dir = default_tokenizer_dir()
    views = load_views(prepare([], tokenizer_dir=tok_dir, progress=False)["out"])
    vocab = Vocab.from_tokenizer(load_tokenizer(tok_dir))
    stream = PackedStream(Mixture([view_source(views, build("mlm", vocab), "mlm")], [1], seed=0), seq, vocab.pad_id)
    return [collate([next(stream) for _ in range(rows)]) for _ in range(n)], vocab.size


def model(vocab_size: int):
    import torch

    from codept.model import transformer as T
    from codept.model.heads import Pretrainer, build_head

    torch.manual_seed(0)
    m = T.Transformer(T.debug_cpu(vocab_size=vocab_size, dropout=0.0, attention_dropout=0.0))
    return m, Pretrainer(m, {"mlm": build_head("mlm", m)})


def plain(args) -> dict:
    import torch

    torch.set_num_threads(args.threads)
    data, v = batches(args.seq, args.rows, args.steps)
    m, net = model(v)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-4)
    t0 = time.perf_counter()
    for i, b in enumerate(data):
        if i == args.warmup:
            t0 = time.perf_counter()
        s, n = net(b)["mlm"]
        (s / n.clamp(min=1)).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    dt = time.perf_counter() - t0
    tokens = sum(int((b["segment_ids"] > 0).sum()) for b in data[args.warmup:])
    return {"tok_s": tokens / dt, "flops_per_token": m.flops_per_token(args.seq)}


def engine_half(args) -> None:
    import torch

    from codept.train import engine as E

    torch.set_num_threads(args.threads)  # the launcher may set OMP_NUM_THREADS=1: same threads as plain
    from codept.train.config import RunConfig

    world = E.init_distributed()
    data, v = batches(args.seq, args.rows, args.steps)
    _, net = model(v)
    cfg = RunConfig(seq_len=args.seq, micro_batch_rows=args.rows, global_batch_rows=args.rows, steps=args.steps,
                    lr=1e-4, warmup_steps=0, schedule="constant", grad_clip=0.0, ds_config=args.ds_config,
                    precision="fp32")
    eng = E.build_engine(net, cfg, world)
    t0 = time.perf_counter()
    for i, b in enumerate(data):
        if i == args.warmup:
            t0 = time.perf_counter()
        E.train_step(eng, [b], lambda e, batch: e(batch), heads=["mlm"])
    dt = time.perf_counter() - t0
    tokens = sum(int((b["segment_ids"] > 0).sum()) for b in data[args.warmup:])
    Path(args.result).write_text(json.dumps({"tok_s": tokens / dt}))
    E.shutdown()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--rows", type=int, default=8)
    ap.add_argument("--peak-tflops", type=float, default=0.0)
    ap.add_argument("--ds-config", default="zero2", help="ds_configs/<name>.json for the engine half")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="torch threads, both halves")
    ap.add_argument("--engine-half", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--result", default="", help=argparse.SUPPRESS)
    ap.add_argument("--local_rank", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.engine_half:
        return engine_half(args)
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    result = REPO / "runs" / "bench_engine.json"
    result.parent.mkdir(exist_ok=True)
    exe = Path(sys.executable).with_name("deepspeed")
    subprocess.run([str(exe), "--num_gpus", "1", "--master_port", "29733", __file__, "--engine-half",
                    "--result", str(result), "--steps", str(args.steps), "--warmup", str(args.warmup),
                    "--seq", str(args.seq), "--rows", str(args.rows), "--threads", str(args.threads),
                    "--ds-config", args.ds_config],
                   check=True, cwd=REPO,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ds = json.loads(result.read_text())
    pl = plain(args)
    fpt = pl["flops_per_token"]
    print(f"plain torch loop  {pl['tok_s']:9.0f} tok/s  {pl['tok_s'] * fpt / 1e12:.4f} TFLOP/s")
    print(f"deepspeed engine  {ds['tok_s']:9.0f} tok/s  ({args.ds_config})  {ds['tok_s'] * fpt / 1e12:.4f} TFLOP/s")
    print(f"model FLOPs per token: {fpt / 1e6:.1f} M (6N + attention, seq {args.seq})")
    if args.peak_tflops:
        print(f"MFU (engine): {ds['tok_s'] * fpt / 1e12 / args.peak_tflops:.1%}")
    print(f"engine/plain throughput ratio: {ds['tok_s'] / pl['tok_s']:.2f}")


if __name__ == "__main__":
    main()
