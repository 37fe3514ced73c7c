"""One prepared GPU check: attention paths agree, ZeRO-2 bf16 smoke run, MFU of a ~125 M encoder at seq 512.

Two halves, because the GPU machine has torch but no tree-sitter/datasets/tokenizers pipeline:
  here (CPU):  python benchmarks/gpu_check.py --make-batches runs/gpu_batches.npz
               real packed MLM rows from the stdlib stream (default tokenizer, seq 512), int16 on disk
  there (GPU): python benchmarks/gpu_check.py --batches runs/gpu_batches.npz [--budget-s 420]
Sections (each one guarded: a failure prints its traceback and the next section runs):
  1. attention: reference vs sdpa vs varlen vs flex on packed real rows (fp32 and bf16 max abs diff of
     hidden states)
  2. plain torch loop, bf16 autocast + fused AdamW: tokens/s, model TFLOP/s, MFU (``plain_<path>``, eager
     and ``_compiled``: sdpa = the dense masked path, varlen = per document (issue 25), flex)
  3. DeepSpeed engine through codept.train.engine (world size 1, NCCL): ``engine_zero2_bf16`` (DeepSpeed's
     bf16, ds_configs/zero2_bf16.json, sdpa: the engine as measured before issue 25) and
     ``engine_varlen_<stage>`` (precision=bf16_autocast, attention varlen, RunConfig.compile, ZeRO stage
     0/1/2; ``engine_varlen_eager_<stage>`` uncompiled): loss first/last over the smoke run, tokens/s, MFU,
     ratio to the plain varlen loop, compiled or not (``*_over_plain``: the issue's bar is >= 0.95)
  4. every regime of issue 15 (``regime_<name>``: mlm, ar, ar_ss = ar with scheduled sampling, unilm, glm,
     plm, electra): the plain bf16 loop on that regime's own packed rows (its masks, 2-D positions, orders,
     two streams, generator), eager and compiled, sdpa and flex; then the engine on one GPU with ZeRO stage 0
     (nothing to partition on one GPU) vs stage 2 (``engine_stage0_bf16``).
  here (CPU):  python benchmarks/gpu_check.py --make-batches runs/gpu_batches.npz --regimes all
  there (GPU): python benchmarks/gpu_check.py --sections engine_zero2_bf16,engine_stage0_bf16,regimes,regimes_flex
               (``regimes`` = every regime_<name>_compiled; ~2 min each with compilation: raise --budget-s)
Model FLOPs = 6N per token for the encoder's weight matmuls (N = non-embedding parameters, forward +
backward) + 12 L C T for attention over the row (Transformer.flops_per_token, PaLM's count: the full T x T
even where packed documents are shorter) + the MLM head at the labelled positions only (6 (C^2 + C V)
per label), i.e. the work the model does with the sparse head. MFU is against the device's dense bf16
peak from PEAK_TFLOPS (H100 SXM / H200: 989) unless --peak-tflops is given.
Dry run (CPU, the tiny model, a few micro-batches, every section's code path): tests/test_gpu_check.py.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
KEYS = ("input_ids", "segment_ids", "positions", "prefix", "labels.mlm")

# dense bf16 tensor-core peaks (TFLOP/s, without sparsity) by a substring of torch.cuda.get_device_name();
# the first match wins (more specific names first)
PEAK_TFLOPS = (("H100 PCIe", 756.0), ("H100", 989.0), ("H200", 989.0), ("GH200", 989.0), ("A100", 312.0),
               ("L40S", 362.0), ("L4", 121.0))


def peak_of(device: str, given: float = 0.0) -> tuple[float, str]:
    """(peak TFLOP/s, where it came from) for an MFU: --peak-tflops when given, else PEAK_TFLOPS by device
    name; (0, why) when neither knows the device (MFU is then not reported)."""
    if given > 0:
        return given, "--peak-tflops"
    for key, tflops in PEAK_TFLOPS:
        if key in device:
            return tflops, f"PEAK_TFLOPS[{key!r}] (dense bf16)"
    return 0.0, f"{device!r} is not in PEAK_TFLOPS: pass --peak-tflops"


def mfu(tflops: float, peak: float):
    return round(tflops / peak, 4) if peak > 0 else None


REGIMES = {  # regime -> (objective, its settings, model settings)
    "mlm": ("mlm", {}, {}),
    "ar": ("ar", {}, {}),
    "ar_ss": ("ar", {"schedule": "linear", "max_share": 0.25}, {}),
    "unilm": ("unilm", {}, {}),
    "glm": ("glm", {"max_tokens": 512}, {"block_positions": True}),
    "plm": ("plm", {"max_tokens": 512}, {}),
    "electra": ("electra", {}, {}),
}


def make_regime_batches(out: str, rows: int, seq: int, regimes: list[str]) -> None:
    """Packed rows of each regime's objective (every column the model reads) -> one .npz; ar_ss rows are
    drawn at progress 0.5 (a quarter of the schedule's share replaced)."""
    import numpy as np

    from codept.data.collate import collate
    from codept.data.pack import pack
    from codept.objectives import build
    from codept.objectives.render import Vocab
    from codept.views import open_views
    from codept.prepare import prepare
    from codept.tokenizer import default_tokenizer_dir, load_tokenizer

    tok_dir = default_tokenizer_dir()
    views = open_views(prepare([], tokenizer_dir=tok_dir, progress=False)["out"])
    vocab = Vocab.from_tokenizer(load_tokenizer(tok_dir))
    arrays = {}
    for name in regimes:
        objective, cfg, _ = REGIMES[name]
        obj = build(objective, vocab, **cfg)
        ctx = type("Ctx", (), {"progress": 0.5})()
        got, i = [], 0
        while len(got) < rows:
            exs = [obj(views[j % len(views)], np.random.default_rng([0, 0, j]), ctx) for j in range(i, i + 256)]
            got += pack([e for e in exs if e is not None], seq, vocab.pad_id)
            i += 256
        b = collate(got[:rows])
        for k, v in b.items():
            arrays[f"{name}__{k}"] = v.numpy().astype(np.bool_ if v.dtype == __import__("torch").bool else np.int16)
        print(f"{name}: {rows} rows, columns {sorted(b)}", flush=True)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, vocab_size=vocab.size, **arrays)
    print(f"-> {out} ({Path(out).stat().st_size / 1e6:.1f} MB)")


def load_regime_batches(path: str, regime: str, micro: int, device):
    import numpy as np
    import torch

    z = np.load(path)
    pre = f"{regime}__"
    full = {k[len(pre):]: torch.from_numpy(z[k].astype(np.bool_ if z[k].dtype == np.bool_ else np.int64))
            for k in z.files if k.startswith(pre)}
    if not full:
        raise KeyError(f"{path} holds no rows of regime {regime!r}: make them with --make-batches ... --regimes {regime}")
    n = full["input_ids"].shape[0] // micro
    pin = device == "cuda"
    return [{k: (v[i * micro:(i + 1) * micro].pin_memory() if pin else v[i * micro:(i + 1) * micro])
             for k, v in full.items()} for i in range(n)]


def build_regime_net(regime: str, vocab_size: int, attention: str):
    import torch

    from codept.model import transformer as T
    from codept.model.pretrainer import Pretrainer, build_head
    from codept.objectives import HEADS_OF

    objective, _, model_cfg = REGIMES[regime]
    torch.manual_seed(0)
    m = T.Transformer(T.PRESETS[PRESET](vocab_size=vocab_size, max_positions=512, attention=attention, dropout=0.0,
                                        attention_dropout=0.0, **model_cfg))
    return m, Pretrainer(m, {h: build_head(h, m) for h in HEADS_OF[objective]})


def regime_flops(net, batches, seq: int) -> float:
    """The work the regime's code does: encoder passes (plm: a second, query stream; scheduled
    sampling: a forward-only first pass = 1/3 of a training pass; ELECTRA: + the generator) and the
    heads at their labelled positions only."""
    m, heads = net.model, net.heads
    c, v = m.config.hidden, m.config.vocab_size
    tokens = sum(int((b["segment_ids"] > 0).sum()) for b in batches)
    enc = tokens * m.flops_per_token(seq)
    total = enc * (2.0 if "plm" in heads else 1.0)
    if any("labels.sample" in b for b in batches):
        total += enc / 3
    if "gen" in heads:
        g = heads["gen"]
        n_gen = sum(p.numel() for n, p in g.named_parameters() if n.startswith(("blocks", "project")))
        total += tokens * (6.0 * n_gen + 12.0 * g.config.layers * g.config.hidden * seq)
    for name, head in heads.items():
        n = sum(int((b[head.field] != -100).sum()) for b in batches if head.field in b)
        width = heads["gen"].config.hidden if name == "gen" else c
        total += n * 6.0 * ((width * c + c * v) if name != "rtd" else (c * c + 2 * c))
    return total


def bf16_step(net, fwd, opt, losses: list, loss_of):
    """One plain-loop step on a batch: bf16 autocast forward, ``loss_of(outputs)``, backward, clip at
    1.0, the optimizer; the loss is kept (detached) in `losses`."""
    import torch

    def step(b):
        b = to_dev(b)
        with torch.autocast(DEV, dtype=torch.bfloat16):
            out = fwd(b)
        loss = loss_of(out)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.detach())

    return step


def regime_plain(batches, regime: str, attention: str, compile_: bool, seq: int, peak: float, warmup: int) -> dict:
    """The plain bf16 loop (fused AdamW, optionally torch.compile) on one regime's rows."""
    import torch

    from codept.objectives import LOSS_WEIGHTS_OF

    m, net = build_regime_net(regime, 50304, attention)
    net = net.to(DEV)
    weights = LOSS_WEIGHTS_OF.get(REGIMES[regime][0], {})
    opt = torch.optim.AdamW(net.parameters(), lr=1e-4, fused=DEV == "cuda")
    fwd = torch.compile(net) if compile_ else net
    losses = []

    step = bf16_step(net, fwd, opt, losses,
                     lambda out: sum(weights.get(h, 1.0) * s / n.clamp(min=1) for h, (s, n) in out.items()))

    dt = timed_loop(step, batches, warmup)
    fl = regime_flops(net, batches[warmup:], seq)
    tokens = sum(int((b["segment_ids"] > 0).sum()) for b in batches[warmup:])
    res = {"regime": regime, "attention": attention, "compiled": compile_, "tok_s": round(tokens / dt),
           "model_tflops": round(fl / dt / 1e12, 1), "mfu": mfu(fl / dt / 1e12, peak),
           "loss_first": float(losses[0]), "loss_last": float(losses[-1]), "peak_mem_gib": peak_mem_gib()}
    del net, opt, fwd
    if DEV == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    return res


def make_batches(out: str, rows: int, seq: int) -> None:
    """Real packed MLM rows of the stdlib stream (benchmarks/bench_compute.py's rows) -> the .npz."""
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
    stream = PackedStream(Mixture([view_source(views, build("mlm", vocab), "mlm")], [1], seed=0), seq, vocab.pad_id,
                          buffer=512)
    save_batches(collate([next(stream) for _ in range(rows)]), vocab.size, out)


def save_batches(batch: dict, vocab_size: int, out: str) -> None:
    """A padded MLM batch (codept.data.collate) -> the .npz that --batches reads (int16 ids: vocab < 32768)."""
    import numpy as np

    if vocab_size > 32767:
        raise ValueError(f"vocab_size={vocab_size}: the batches file stores ids as int16 (< 32768)")
    arrays = {k.replace(".", "_"): batch[k].numpy().astype(np.int16 if k != "prefix" else np.bool_) for k in KEYS}
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, vocab_size=vocab_size, **arrays)
    rows, seq = batch["input_ids"].shape
    print(f"{rows} rows x {seq} tokens -> {out} ({Path(out).stat().st_size / 1e6:.1f} MB)")


def load_batches(path: str, micro: int, device):
    import numpy as np
    import torch

    z = np.load(path)
    full = {k: torch.from_numpy(z[k.replace(".", "_")].astype(np.bool_ if k == "prefix" else np.int64)) for k in KEYS}
    n = full["input_ids"].shape[0] // micro
    pin = device == "cuda"
    return [{k: (v[i * micro:(i + 1) * micro].pin_memory() if pin else v[i * micro:(i + 1) * micro])
             for k, v in full.items()} for i in range(n)]


def to_dev(b: dict) -> dict:
    return {k: v.to(DEV, non_blocking=True) for k, v in b.items()}


PRESET = "small_1xh200"  # --dry-run: "tiny" on the CPU
DEV = "cuda"


def sync() -> None:
    import torch

    if DEV == "cuda":
        torch.cuda.synchronize()


def peak_mem_gib() -> float:
    import torch

    return round(torch.cuda.max_memory_allocated() / 2**30, 1) if DEV == "cuda" else 0.0


def build_net(vocab_size: int, attention: str, dropout: float = 0.0):
    import torch

    from codept.model import transformer as T
    from codept.model.pretrainer import Pretrainer, build_head

    torch.manual_seed(0)
    m = T.Transformer(T.PRESETS[PRESET](vocab_size=vocab_size, max_positions=512, attention=attention,
                                        dropout=dropout, attention_dropout=0.0))
    return m, Pretrainer(m, {"mlm": build_head("mlm", m)})


def flops_of(model, batches, seq: int) -> float:
    c, v = model.config.hidden, model.config.vocab_size
    tokens = sum(int((b["segment_ids"] > 0).sum()) for b in batches)
    labels = sum(int((b["labels.mlm"] != -100).sum()) for b in batches)
    return tokens * model.flops_per_token(seq) + labels * 6.0 * (c * c + c * v)


def section(name: str, fn, results: dict, deadline: float, need_s: float):
    left = deadline - time.time()
    if left < need_s:
        print(f"\n== {name}: SKIPPED ({left:.0f} s of budget left, needs ~{need_s:.0f})", flush=True)
        results[name] = {"skipped": f"budget ({left:.0f} s left)"}
        return
    print(f"\n== {name}", flush=True)
    t0 = time.time()
    try:
        results[name] = fn()
    except Exception as e:  # keep going: one prepared run must report every section it can
        traceback.print_exc()
        results[name] = {"error": f"{type(e).__name__}: {e}"[:500]}
    results[name]["seconds"] = round(time.time() - t0, 1)
    print(json.dumps({name: results[name]}), flush=True)


def attention_paths(batches) -> dict:
    import torch

    m, _ = build_net(50304, "reference")
    m = m.to(DEV).eval()
    b = to_dev({k: v[:8] for k, v in batches[0].items()})
    out = {}
    with torch.inference_mode():
        ref = m.encode(b, attention="reference")
        for path in ("sdpa", "varlen", "flex"):
            out[f"{path}_vs_reference_fp32"] = float((m.encode(b, attention=path) - ref).abs().max())
        with torch.autocast(DEV, dtype=torch.bfloat16):
            ref16 = m.encode(b, attention="reference").float()
            for path in ("sdpa", "varlen"):  # bf16 vs the fp32 reference: each path's own bf16 error
                out[f"{path}_bf16_vs_reference_fp32"] = float((m.encode(b, attention=path).float() - ref).abs().max())
        out["bf16_vs_fp32_reference"] = float((ref16 - ref).abs().max())
        from codept.model import transformer as T

        docs = T.documents(b["segment_ids"], b["prefix"])
        out["varlen_kernel_bf16"] = T.varlen_kernel(docs, DEV, torch.bfloat16, m.config.hidden // m.config.heads,
                                                    T._flash_varlen())
    return out


def timed_loop(step, batches, warmup: int) -> float:
    import torch

    for b in batches[:warmup]:
        step(b)
    sync()
    t0 = time.perf_counter()
    for b in batches[warmup:]:
        step(b)
    sync()
    return time.perf_counter() - t0


def plain(batches, attention: str, compile_: bool, seq: int, peak: float, warmup: int, profile: bool = False) -> dict:
    import torch

    m, net = build_net(50304, attention)
    net = net.to(DEV)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-4, fused=DEV == "cuda")
    fwd = torch.compile(net) if compile_ else net
    losses = []

    step = bf16_step(net, fwd, opt, losses, lambda out: out["mlm"][0] / out["mlm"][1].clamp(min=1))

    dt = timed_loop(step, batches, warmup)
    fl = flops_of(m, batches[warmup:], seq)
    tokens = sum(int((b["segment_ids"] > 0).sum()) for b in batches[warmup:])
    top = kernel_profile(step, batches[:3]) if profile else None
    res = {"params": m.num_parameters(), "tok_s": round(tokens / dt), "model_tflops": round(fl / dt / 1e12, 1),
           "mfu": mfu(fl / dt / 1e12, peak), "loss_first": float(losses[0]), "loss_last": float(losses[-1]),
           "peak_mem_gib": peak_mem_gib()}
    if top:
        res["top_kernels_ms"] = top
    del net, opt, fwd
    if DEV == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    return res


def kernel_profile(step, batches) -> dict:
    """GPU time per kernel family over a few steps (where the time goes)."""
    from torch.profiler import ProfilerActivity, profile

    cuda = DEV == "cuda"
    with profile(activities=[ProfilerActivity.CUDA if cuda else ProfilerActivity.CPU]) as prof:
        for b in batches:
            step(b)
        sync()
    t = (lambda e: e.device_time_total) if cuda else (lambda e: e.cpu_time_total)
    rows = sorted(prof.key_averages(), key=lambda e: -t(e))[:12]
    return {e.key[:80]: round(t(e) / 1e3 / len(batches), 2) for e in rows}


def engine_smoke(batches, seq: int, micro: int, peak: float, warmup: int, steps: int, compile_: bool = False,
                 port: int = 29561, profile: bool = False, dropout: float = 0.0, zero_stage: int = -1,
                 attention: str = "sdpa", precision: str = "auto") -> dict:
    """The engine (codept.train.engine.build_engine + train_step) on the batches: ds_configs/zero2_bf16.json
    (zero2 on the CPU dry run) with the RunConfig's zero_stage, precision ("auto": DeepSpeed's bf16 on
    GPU; "bf16_autocast": torch.autocast) and compile switches."""
    import torch

    os.environ.update({"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1",
                       "MASTER_PORT": str(port)})
    from codept.train import engine as E
    from codept.train.config import RunConfig

    world = E.init_distributed()
    m, net = build_net(50304, attention, dropout=dropout)
    if DEV == "cpu":
        torch.set_num_threads(2)
    cfg = RunConfig(seq_len=seq, micro_batch_rows=micro, global_batch_rows=micro, steps=steps, lr=5e-4,
                    warmup_steps=10, schedule="cosine", ds_config="zero2_bf16" if DEV == "cuda" else "zero2",
                    zero_stage=zero_stage, precision=precision, compile=compile_)
    eng = E.build_engine(net, cfg, world)
    data = [batches[i % len(batches)] for i in range(steps)]
    losses = []

    def step(b):
        losses.append(E.train_step(eng, [b], lambda e, x: e(x), heads=["mlm"])["loss"])

    dt = timed_loop(step, data, warmup)
    fl = flops_of(m, data[warmup:], seq)
    tokens = sum(int((b["segment_ids"] > 0).sum()) for b in data[warmup:])
    prof = engine_profile(step, data[:4]) if profile else None
    k = max(1, len(losses) // 10)
    res = {"ds_config": cfg.ds_config, "zero_stage": zero_stage, "compiled": compile_, "attention": attention,
           "precision": precision,
           "optimizer": getattr(eng, "codept_optimizer", "?"), "steps": steps, "tok_s": round(tokens / dt),
           "model_tflops": round(fl / dt / 1e12, 1), "mfu": mfu(fl / dt / 1e12, peak),
           "loss_first_tenth": round(sum(losses[:k]) / k, 3), "loss_last_tenth": round(sum(losses[-k:]) / k, 3),
           "all_finite": all(x == x and abs(x) < 1e4 for x in losses),
           "peak_mem_gib": peak_mem_gib()}
    if prof:
        res["profile"] = prof
    E.shutdown()
    return res


def engine_profile(step, batches) -> dict:
    """Wall time vs GPU busy time per step, and the host-side ops that cost most (is the step CPU-bound?)."""
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if DEV == "cuda" else [])
    sync()
    t0 = time.perf_counter()
    with profile(activities=acts) as prof:
        for b in batches:
            step(b)
        sync()
    wall = (time.perf_counter() - t0) / len(batches)
    ev = prof.key_averages()
    gpu = sum(e.self_device_time_total for e in ev) / 1e6 / len(batches) if DEV == "cuda" else 0.0
    cpu_top = sorted(ev, key=lambda e: -e.self_cpu_time_total)[:15]
    return {"wall_ms_per_step": round(wall * 1e3, 1), "gpu_busy_ms_per_step": round(gpu * 1e3, 1),
            "top_self_cpu_ms": {e.key[:70]: round(e.self_cpu_time_total / 1e3 / len(batches), 2) for e in cpu_top}}


def ratios(results: dict) -> None:
    """Throughput ratios of the sections that ran (in place): each engine section over the plain loop it
    is the engine twin of (the issue's bar: >= 0.95), varlen over sdpa."""
    def tok(name):
        return results.get(name, {}).get("tok_s")

    pairs = {"engine_over_plain_sdpa": ("engine_zero2_bf16", "plain_sdpa"),
             "varlen_over_sdpa": ("plain_varlen", "plain_sdpa"),
             "varlen_over_sdpa_compiled": ("plain_varlen_compiled", "plain_sdpa_compiled"),
             **{f"engine_varlen_stage{s}_over_plain": (f"engine_varlen_stage{s}", "plain_varlen_compiled")
                for s in (0, 1, 2)},
             **{f"engine_varlen_eager_stage{s}_over_plain": (f"engine_varlen_eager_stage{s}", "plain_varlen")
                for s in (0, 1, 2)}}
    for key, (a, b) in pairs.items():
        if tok(a) and tok(b):
            results[key] = round(tok(a) / tok(b), 3)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--make-batches", default="", help="CPU: write real packed rows to this .npz and exit")
    ap.add_argument("--batches", default="runs/gpu_batches.npz")
    ap.add_argument("--rows", type=int, default=1024)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--micro", type=int, default=64, help="rows per micro-batch on the GPU")
    ap.add_argument("--peak-tflops", type=float, default=0.0, help="dense bf16 peak for MFU (default: PEAK_TFLOPS "
                    "by device name)")
    ap.add_argument("--budget-s", type=float, default=420.0, help="skip sections that would overrun this")
    ap.add_argument("--engine-steps", type=int, default=120)
    ap.add_argument("--sections", default="attention_paths,plain_sdpa,plain_varlen,plain_sdpa_compiled,"
                    "plain_varlen_compiled,engine_varlen_stage2,engine_varlen_stage0,engine_zero2_bf16,plain_flex_compiled",
                    help="comma-separated subset, run in this order")
    ap.add_argument("--profile", action="store_true", help="per-kernel GPU time of the compiled plain loop")
    ap.add_argument("--out", default=os.environ.get("OUT", "runs"))
    ap.add_argument("--dry-run", action="store_true", help="CPU, tiny model, 4 micro-batches: check the script")
    ap.add_argument("--regimes", default="", help="with --make-batches: 'all' or a comma list of "
                    f"{','.join(REGIMES)} (their rows for the regime_<name> sections)")
    args = ap.parse_args()
    if args.make_batches and args.regimes:
        names = list(REGIMES) if args.regimes == "all" else args.regimes.split(",")
        make_batches(args.make_batches, args.rows, args.seq)
        base = args.make_batches.removesuffix(".npz")
        return make_regime_batches(f"{base}_regimes.npz", min(args.rows, 256), args.seq, names)
    if args.make_batches:
        return make_batches(args.make_batches, args.rows, args.seq)

    import torch

    global PRESET, DEV
    if args.dry_run:
        PRESET, DEV, args.micro, args.engine_steps = "tiny", "cpu", 8, 8
        os.environ.setdefault("DS_ACCELERATOR", "cpu")

    deadline = time.time() + args.budget_s
    torch.backends.cuda.matmul.allow_tf32 = True
    batches = load_batches(args.batches, args.micro, DEV)
    if args.dry_run:
        batches = batches[:6]
    device = torch.cuda.get_device_name() if DEV == "cuda" else "cpu (dry run)"
    p, peak_from = peak_of(device, args.peak_tflops)
    results = {"device": device, "torch": torch.__version__, "micro_rows": args.micro, "seq": args.seq,
               "micro_batches": len(batches), "peak_tflops": p, "peak_from": peak_from,
               "flops": "6N per token (non-embedding weights, fwd+bwd) + 12 L C T attention + 6 (C^2 + C V) per MLM target"}
    print(json.dumps(results), flush=True)
    w = 3
    seq = args.seq
    plan = {
        "attention_paths": (20, lambda: attention_paths(batches)),
        "plain_sdpa": (30, lambda: plain(batches, "sdpa", False, seq, p, w)),
        "plain_varlen": (30, lambda: plain(batches, "varlen", False, seq, p, w)),
        "plain_varlen_compiled": (150, lambda: plain(batches, "varlen", True, seq, p, w, args.profile)),
        "plain_flex": (60, lambda: plain(batches, "flex", False, seq, p, w)),
        "engine_zero2_bf16": (90, lambda: engine_smoke(batches, seq, args.micro, p, w, args.engine_steps)),
        "plain_sdpa_compiled": (150, lambda: plain(batches, "sdpa", True, seq, p, w, args.profile)),
        "plain_flex_compiled": (150, lambda: plain(batches, "flex", True, seq, p, w)),
        "engine_zero2_bf16_profile": (90, lambda: engine_smoke(batches, seq, args.micro, p, w, 40, port=29563,
                                                               profile=True)),
        "plain_sdpa_profile": (40, lambda: plain(batches, "sdpa", False, seq, p, w, True)),
        "engine_zero2_bf16_compiled": (200, lambda: engine_smoke(batches, seq, args.micro, p, w, args.engine_steps,
                                                                 compile_=True, port=29562)),
        "engine_stage0_bf16": (90, lambda: engine_smoke(batches, seq, args.micro, p, w, args.engine_steps,
                                                        port=29564, zero_stage=0)),
    }
    for stage in (0, 1, 2):  # the issue-25 path through the engine: varlen, bf16 autocast, RunConfig.compile
        for comp in (True, False):
            plan[f"engine_varlen{'' if comp else '_eager'}_stage{stage}"] = (200 if comp else 90, lambda stage=stage, comp=comp: engine_smoke(
                batches, seq, args.micro, p, w, args.engine_steps, compile_=comp, port=29570 + 2 * stage + comp,
                zero_stage=stage, attention="varlen", precision="bf16_autocast"))
    regime_file = args.batches.removesuffix(".npz") + "_regimes.npz"
    for name in REGIMES:  # regime_<name>[_flex][_compiled]: a short plain loop on the regime's own rows
        rb = (lambda name=name: load_regime_batches(regime_file, name, args.micro, DEV)[: 4 if args.dry_run else 16])
        for attn in ("sdpa", "flex", "varlen"):
            for comp in (False, True):
                key = f"regime_{name}" + ("" if attn == "sdpa" else f"_{attn}") + ("_compiled" if comp else "")
                plan[key] = (120 if comp else 40,
                             lambda name=name, attn=attn, comp=comp, rb=rb: regime_plain(rb(), name, attn, comp, seq, p, w))
    aliases = {"regimes": [f"regime_{n}_compiled" for n in REGIMES],  # one short compiled run per regime
               "regimes_flex": [f"regime_{n}_flex_compiled" for n in REGIMES],
               "regimes_varlen": [f"regime_{n}_varlen_compiled" for n in REGIMES]}
    names = [x for name in args.sections.split(",") for x in aliases.get(name, [name])]
    unknown = [n for n in names if n not in plan]
    if unknown:
        raise SystemExit(f"--sections: unknown {unknown}; known: {', '.join(list(plan) + list(aliases))}")
    for name in names:
        need, fn = plan[name]
        section(name, fn, results, deadline, need)
    ratios(results)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "gpu_check.json").write_text(json.dumps(results, indent=2))
    print("\n" + json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
