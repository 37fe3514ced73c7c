"""The DeepSpeed engine and one optimizer step with loss normalised over the whole step.

The ONLY module of codept that imports deepspeed. It sets ``TORCH_EXTENSIONS_DIR`` (if unset) to
``~/.cache/codept/torch_extensions`` before the import, so the shared-memory comm op DeepSpeed builds
with g++ on CPU (about a minute) is compiled once per machine.

:func:`build_engine` (model, RunConfig, World) -> engine:
  1. ``codept.train.config.derive`` gives the DeepSpeed dict (engine JSON + injected batch keys and
     clipping), the AdamW hyper-parameters and the schedule.
  2. A torch ``AdamW`` is built (DeepSpeed's FusedAdam would compile CUDA/C++ code first): on GPU
     ranks (nccl) torch's fused one (one kernel for the whole update of DeepSpeed's fp32 partitions;
     CPU ranks keep the default for-each kernel, whose numerics the CPU tests pin); when the
     ds_config offloads the optimizer to CPU, DeepSpeed's ``DeepSpeedCPUAdam`` instead (DeepSpeed
     refuses other optimizers with ZeRO-Offload; it compiles its cpu_adam op once, cached too).
     ``codept.train.optim.optimizer_kind`` names the choice.
  3. A ``LambdaLR`` over ``config.lr_multiplier`` (warm-up + decay; ``codept.train.optim.Schedule``);
     DeepSpeed steps it after every optimizer step and saves it in its checkpoint.
  4. ``deepspeed.initialize(model, optimizer, lr_scheduler, config)``.
  5. With ``RunConfig.compile``, ``engine.compile()``: the module (model, heads and losses) is
     compiled in place by torch.compile (inductor); parameter names, checkpoints and exports are
     unchanged.

:func:`train_step` (engine, k micro-batches, loss_fn) -> scalars. Every head h returns
``(loss_sum S, n_valid n)``; the loss of the step is ``sum_h w_h * (sum of S_h over all micro-batches
and ranks) / N_h`` with ``N_h`` the global count, so packing, accumulation and uneven ranks do not
change what a token weighs. Algorithm:
  1. ``count_fn`` counts each head's valid targets in each micro-batch from the batch alone (default:
     ``labels.<h> != IGNORE``), before any forward; the per-head totals are summed over the k
     micro-batches and all-reduced (SUM) over the data-parallel ranks: ``N_h``.
  2. Micro-batch j on rank r runs ``loss_fn(engine, batch) -> {h: (S_hrj, n_hrj)}`` (n must equal the
     count of step 1) and backpropagates ``L_rj = sum_h w_h * S_hrj * W * k / N_h``.
     Why ``W * k``: DeepSpeed's ``engine.backward`` divides the loss by ``gradient_accumulation_steps``
     (= k), gradients accumulate over the k micro-steps, and its data-parallel reduction AVERAGES over
     the W ranks. So the gradient it applies is
        (1/W) sum_r sum_j grad(L_rj / k) = (1/W)(1/k) * W*k * sum_h w_h/N_h sum_rj grad S_hrj
                                         = sum_h w_h * grad(global S_h) / N_h,
     the gradient of the global token mean, whatever the per-micro-batch counts. (Normalising each
     micro-batch by its own count instead would weigh a token of a short micro-batch more.)
  3. ``engine.step()`` after every backward (DeepSpeed updates only at the k-th); ``before_step``, if
     given, runs after the last backward, before the update (gradients are complete there).
  4. The detached ``S_h`` are all-reduced; the logged loss is ``global S_h / N_h`` (and the weighted
     sum over heads).
Cost: three all-reduces of a few float64 per step (head-set check, counts, sums), one host sync
after the update, nothing per token. A head with N_h = 0 over the whole step contributes 0 (its loss
is logged as nan). The heads' own n_valid are checked against count_fn after the step (all ranks
raise together on a mismatch).

:func:`evaluate` (engine, fixed held-out micro-batches, heads) -> ``val/<h>/loss`` and ``val/<h>/acc``
(codept.model.heads.Metrics summed over batches and ranks; eval mode, no_grad; a collective).

Also here: :func:`init_distributed` (on CPU it also tunes glibc malloc:
``codept.train.process.tune_cpu_allocator``; it returns a ``codept.train.process.World``),
collectives for codept.train.checkpoint, :func:`full_params` / :func:`full_grads` (ZeRO-aware, for tests
and export), :func:`shutdown` (destroy the process group, delete this job's
``/dev/shm/deepspeed_allreduce_buffer_*`` file that DeepSpeed never deletes) and :func:`exit_process`
(leave without the interpreter teardown in which ZeRO-3 ranks were seen to abort).

NOT covered: pipeline / tensor / sequence parallelism (W = data-parallel ranks), fp16 loss-scale
overflow bookkeeping in the logged loss, ``zero.Init`` for models too big to build on one rank,
DeepSpeed's decoupled (async) checkpoint engines.
"""

from __future__ import annotations

import glob
import logging
import math
import os
import sys
import zlib
from pathlib import Path
from typing import Callable, Mapping

os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(Path.home() / ".cache" / "codept" / "torch_extensions"))

import deepspeed  # noqa: E402  (the one import site; see module docstring)
import deepspeed.comm as dist  # noqa: E402
import torch  # noqa: E402

from codept.data.example import IGNORE  # noqa: E402
from codept.train.config import Plan, RunConfig, derive  # noqa: E402
from codept.train.optim import Schedule, optimizer_kind  # noqa: E402
from codept.train.process import World, single_process_env, tune_cpu_allocator  # noqa: E402

SHM_PREFIX = "/dev/shm/deepspeed_allreduce_buffer"

HeadOut = tuple  # (loss_sum: Tensor (), n_valid: int | Tensor ())
LossFn = Callable[[torch.nn.Module, dict], "Mapping[str, HeadOut] | HeadOut"]
CountFn = Callable[[dict], "Mapping[str, int]"]


def init_distributed(timeout_s: float = 1800.0) -> World:
    """Join the process group the launcher (``deepspeed``/``torchrun``) set up: gloo on CPU, the
    accelerator's backend (nccl) otherwise. On CPU it also calls
    :func:`codept.train.process.tune_cpu_allocator` and, once
    every rank has mapped its peers' shared-memory all-reduce buffers, deletes this rank's
    ``/dev/shm`` buffer file (the mapping lives on; DeepSpeed never deletes it, 66 MiB per rank)."""
    from datetime import timedelta

    from deepspeed.accelerator import get_accelerator

    backend = "gloo" if get_accelerator().device_name() == "cpu" else None
    if backend == "gloo":
        tune_cpu_allocator()
    single_process_env()
    deepspeed.init_distributed(dist_backend=backend, timeout=timedelta(seconds=timeout_s))
    if backend == "gloo":
        # every rank created its shared-memory buffer file and mapped its peers' inside
        # init_distributed (DeepSpeed's shm_initialize); past this barrier nobody opens them again,
        # so each rank unlinks its own now: no exit path (error, SIGTERM, SIGINT, kill -9) can leave
        # them. One rank has no peer to wait for (it too made its 66 MiB file).
        if dist.get_world_size() > 1:
            dist.barrier()
        remove_shm_files()
    local = int(os.environ.get("LOCAL_RANK", 0))
    if get_accelerator().device_name() != "cpu":
        get_accelerator().set_device(local)
    return World(rank=dist.get_rank(), world_size=dist.get_world_size(), local_rank=local,
                 backend=backend or get_accelerator().communication_backend_name())


def build_engine(model: torch.nn.Module, cfg: RunConfig, world: World, params=None, plan: Plan | None = None):
    """DeepSpeed engine for ``model`` (see the module docstring). ``params``: parameters or param
    groups for the optimizer (default ``model.parameters()``), e.g. to exempt norms from weight
    decay. The derived :class:`~codept.train.config.Plan` is kept as ``engine.codept_plan``."""
    plan = plan or derive(cfg, world.world_size)
    o = plan.optimizer
    kind = optimizer_kind(plan.ds_config, world.backend)
    params = list(model.parameters()) if params is None else params
    hyper = dict(lr=o["lr"], betas=o["betas"], eps=o["eps"], weight_decay=o["weight_decay"])
    if kind == "cpu_adam":
        from deepspeed.ops.adam import DeepSpeedCPUAdam

        opt = DeepSpeedCPUAdam(params, adamw_mode=True, **hyper)
    else:
        opt = torch.optim.AdamW(params, fused=kind == "adamw_fused", **hyper)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, Schedule(plan.schedule))
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=opt, lr_scheduler=sched, config=plan.ds_config)
    engine.codept_plan, engine.codept_optimizer = plan, kind
    if cfg.compile:
        engine.compile()
    return engine


def checkpoint_globals() -> list:
    """The classes of DeepSpeed's own that its checkpoint files pickle besides tensors and plain data
    (ZeRO optimizer states: the tensor-fragment addresses, the ZeRO stage enum, the loss scaler; seen
    in ZeRO 1-3, offload, fp32 and bf16 files of 0.19.8): allowed by name, DeepSpeed's files load with
    ``torch.load(weights_only=True)`` as codept's do (codept.train.checkpoint.load), so a pickle
    planted in one runs no code either."""
    from deepspeed.runtime.fp16.loss_scaler import DynamicLossScaler, LossScaler
    from deepspeed.runtime.zero.config import ZeroStageEnum
    from deepspeed.utils.tensor_fragment import fragment_address

    return [fragment_address, ZeroStageEnum, LossScaler, DynamicLossScaler]


# ------------------------------------------------------------------------------------------------
# one optimizer step


def label_counts(batch: Mapping[str, torch.Tensor]) -> dict[str, int]:
    """Default count_fn: head ``h`` counts ``labels.<h> != IGNORE``."""
    return {k[len("labels."):]: int((v != IGNORE).sum()) for k, v in batch.items() if k.startswith("labels.")}


def _to(batch: Mapping, device) -> dict:
    return {k: (v.to(device, non_blocking=True) if isinstance(v, torch.Tensor) else v) for k, v in batch.items()}


def dp_world_size(engine) -> int:
    return int(getattr(engine, "dp_world_size", None) or dist.get_world_size())


def _dp_group(engine):
    return getattr(engine, "data_parallel_group", None)


def check_weights(weights: Mapping[str, float] | None, heads: list[str]) -> dict[str, float]:
    """Per-head loss weights as a dict (default 1.0); a weight for a head not in ``heads``, or one
    that is not finite and >= 0, is a ValueError naming it."""
    weights = dict(weights or {})
    unknown = sorted(set(weights) - set(heads))
    if unknown:
        raise ValueError(f"loss weights for heads {unknown} that the step does not train (heads: {heads})")
    bad = {h: w for h, w in weights.items() if not (math.isfinite(w) and w >= 0)}
    if bad:
        raise ValueError(f"loss weights {bad}: each must be finite and >= 0")
    return weights


def train_step(engine, micro_batches: list[Mapping[str, torch.Tensor]], loss_fn: LossFn, *,
               count_fn: CountFn = label_counts, heads: "list[str] | None" = None,
               weights: Mapping[str, float] | None = None,
               before_step: Callable[[object], None] | None = None) -> dict[str, float]:
    """One optimizer step over k = len(micro_batches) micro-batches of this rank; see the module
    docstring for the normalisation. ``loss_fn(engine, batch)`` returns ``{head: (loss_sum, n_valid)}``
    (or one ``(loss_sum, n_valid)`` pair, head name ``loss``); loss_sum must stay connected to the
    graph even when n_valid is 0 (a masked sum is). ``heads``: the heads of the run in a fixed order
    (default: those count_fn finds this step; every rank must then find the same ones). ``weights``:
    per-head loss weights (default 1). Returns ``{'loss', 'loss.<h>', 'n.<h>', 'lr',
    'grad_norm'}`` with global (all-rank) values."""
    k = len(micro_batches)
    gas = engine.gradient_accumulation_steps()
    if k != gas:
        raise ValueError(f"train_step got {k} micro-batches but the engine accumulates over "
                         f"gradient_accumulation_steps={gas} (derived from the RunConfig): pass exactly {gas}")
    W = dp_world_size(engine)

    # 1. counts before any forward: N_h over micro-batches and ranks
    counts = [dict(count_fn(mb)) for mb in micro_batches]
    if heads is None:
        heads = sorted({h for c in counts for h in c})
    else:
        heads = list(heads)
        extra = sorted({h for c in counts for h in c} - set(heads))
        if extra:
            raise ValueError(f"count_fn counted heads {extra} that are not in heads={heads}")
    if not heads:
        raise ValueError("count_fn found no heads in the micro-batches (no 'labels.<head>' keys?)")
    weights = check_weights(weights, heads)
    hidx = {h: i for i, h in enumerate(heads)}
    n_local = torch.zeros(len(heads), dtype=torch.float64)
    for c in counts:
        for h, n in c.items():
            n_local[hidx[h]] += float(n)
    # every rank must count the same heads, or the SUM below would add different heads together
    sig = torch.tensor([len(heads), zlib.crc32(",".join(heads).encode()) % (1 << 30)], dtype=torch.float64)
    sig_sum = sig.clone().to(engine.device)  # .to() is a no-op on CPU: never reduce in place
    dist.all_reduce(sig_sum, group=_dp_group(engine))
    if not torch.equal(sig_sum.cpu(), sig * W):
        raise ValueError(f"rank {dist.get_rank()} counted heads {heads} but other data-parallel ranks counted "
                         "a different set: every rank's count_fn must report the same heads each step "
                         "(report 0 for a head a rank's micro-batches lack)")
    n_global = n_local.clone().to(engine.device)
    dist.all_reduce(n_global, group=_dp_group(engine))  # SUM
    n_global = n_global.cpu()
    scale = {h: (W * k / float(n_global[i])) if n_global[i] > 0 else 0.0 for h, i in hidx.items()}

    lrs = engine.get_lr()  # the learning rate this step uses (the scheduler moves it in engine.step)
    # 2.-3. forward / backward per micro-batch, update at the last. Sums and the heads' own counts stay
    # on the device (no host sync per micro-batch); they are fetched once, after the step.
    dev = engine.device
    s_dev = torch.zeros(len(heads), dtype=torch.float64, device=dev)
    n_dev = torch.zeros(len(heads), dtype=torch.float64, device=dev)
    for j, mb in enumerate(micro_batches):
        out = loss_fn(engine, _to(mb, dev))
        if not isinstance(out, Mapping):
            out = {"loss": out}
        total = None
        for h, (loss_sum, n_valid) in out.items():
            if h not in hidx:
                raise ValueError(f"loss_fn returned head {h!r} that count_fn did not count (counted: {heads}); "
                                 "pass a count_fn that counts every head before the forward")
            i = hidx[h]
            s_dev[i] += loss_sum.detach().double()
            n_dev[i] += n_valid.detach().double() if isinstance(n_valid, torch.Tensor) else float(n_valid)
            term = loss_sum.float() * (weights.get(h, 1.0) * scale[h])
            total = term if total is None else total + term
        if total is None:
            raise ValueError(f"loss_fn returned no heads for micro-batch {j}")
        engine.backward(total)  # DeepSpeed divides by k here; W * k in `scale` undoes both k and W
        if j == k - 1 and before_step is not None:
            before_step(engine)
        engine.step()

    # 4. logged loss: global sum / global count (one all-reduce, one host sync)
    # the heads' own n_valid must equal what count_fn counted; a mismatch flag rides along in the
    # all-reduce so every rank raises together instead of leaving the others waiting
    mismatch = (n_dev != n_local.to(dev)).any().double().reshape(1)
    s_global = torch.cat([s_dev, mismatch])
    dist.all_reduce(s_global, group=_dp_group(engine))
    s_global = s_global.cpu()
    if s_global[-1] > 0:
        n_seen = n_dev.cpu()
        bad = {h: (float(n_seen[i]), float(n_local[i])) for h, i in hidx.items() if n_seen[i] != n_local[i]}
        raise ValueError(f"rank {dist.get_rank()}: heads' n_valid over the step differ from count_fn's counts on "
                         f"{int(s_global[-1])} rank(s); here (n_valid, counted) = {bad}. The normaliser is fixed "
                         "before the forward, so the two must agree: pass a count_fn that counts what each head "
                         "averages over")
    logs: dict[str, float] = {}
    loss = 0.0
    for h, i in hidx.items():
        n = float(n_global[i])
        v = float(s_global[i]) / n if n > 0 else float("nan")
        logs[f"loss.{h}"], logs[f"n.{h}"] = v, n
        if n > 0:
            loss += weights.get(h, 1.0) * v
    logs["loss"] = loss
    logs["lr"] = float(lrs[0]) if lrs else float("nan")
    gn = engine.get_global_grad_norm()
    logs["grad_norm"] = float(gn) if gn is not None else float("nan")
    return logs


# ------------------------------------------------------------------------------------------------
# held-out validation


def metrics_of(prefix: str, sums) -> dict[str, float]:
    """``{prefix/loss, prefix/acc, prefix/n}`` of one head's summed (loss_sum, n_valid, correct,
    count); a binary token head's sums go on with its counts (codept.model.heads.binary_counts) and
    add ``prefix/precision|recall|f1|auc`` on the replaced class; nan where there is no record."""
    from codept.model.heads import binary_scores

    loss, n, correct, count = (float(v) for v in sums[:4])
    out = {f"{prefix}/loss": loss / n if n > 0 else float("nan"),
           f"{prefix}/acc": correct / count if count > 0 else float("nan"), f"{prefix}/n": n}
    if len(sums) > 4:
        out.update({f"{prefix}/{k}": v for k, v in binary_scores(list(sums[4:])).items()})
    return out


@torch.no_grad()
def evaluate_sums(engine, batches: list[Mapping[str, torch.Tensor]], heads: list[str]) -> dict[str, list[float]]:
    """{head: [loss_sum, n_valid, correct, count, *extra]} of the model on ``batches``, summed over
    them and over all data-parallel ranks (one all-reduce); ``extra``: a head's ``extra_size`` more
    sums (Metrics.extra, zeros where a batch has none); as :func:`evaluate`, a collective."""
    module = engine.module
    was_training = module.training
    module.eval()
    own = getattr(module, "heads", {})
    sizes = [4 + (getattr(own[h], "extra_size", 0) if h in own else 0) for h in heads]
    starts = [sum(sizes[:i]) for i in range(len(heads))]
    sums = torch.zeros(sum(sizes), dtype=torch.float64, device=engine.device)
    try:
        for batch in batches:
            out = module(_to(batch, engine.device), metrics=True)
            for h, at, size in zip(heads, starts, sizes):
                m = out[h]
                sums[at:at + 4] += torch.stack([torch.as_tensor(v, device=engine.device).double() for v in m[:4]])
                extra = m.extra if hasattr(m, "extra") else None
                if size > 4 and extra is not None:
                    sums[at + 4:at + size] += extra.to(sums)
    finally:
        module.train(was_training)
    if dist.is_initialized():
        dist.all_reduce(sums, group=_dp_group(engine))
    sums = sums.cpu()
    return {h: [float(v) for v in sums[at:at + size]] for h, at, size in zip(heads, starts, sizes)}


def evaluate(engine, batches: list[Mapping[str, torch.Tensor]], heads: list[str]) -> dict[str, float]:
    """Per-head loss and accuracy of the model on fixed held-out micro-batches: ``{'val/<h>/loss',
    'val/<h>/acc', 'val/<h>/n'}`` (binary token heads also precision, recall, F1, AUC), global over all data-parallel ranks (sums of loss_sum, n_valid,
    correct, count, one all-reduce). Runs ``engine.module(batch, metrics=True)`` (a
    codept.model.pretrainer.Pretrainer) in eval mode under no_grad, then restores the mode. A collective:
    every rank calls it with the same number of batches (ZeRO-3 gathers parameters in each forward,
    the contrastive head gathers rows). A head with no record is reported as nan."""
    logs = {}
    for h, row in evaluate_sums(engine, batches, heads).items():
        logs.update(metrics_of(f"val/{h}", row))
    return logs


# ------------------------------------------------------------------------------------------------
# collectives used by codept.train.checkpoint (so that module needs no deepspeed import)


def rank() -> int:
    return dist.get_rank() if dist.is_initialized() else 0


def world_size() -> int:
    return dist.get_world_size() if dist.is_initialized() else 1


def barrier() -> None:
    if dist.is_initialized():
        dist.barrier()


def broadcast_object(obj, src: int = 0):
    if not dist.is_initialized():
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=src)
    return box[0]


def all_gather_object(obj) -> list:
    if not dist.is_initialized():
        return [obj]
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


# ------------------------------------------------------------------------------------------------
# full (unpartitioned) parameters and gradients


def _named(engine):
    return list(engine.module.named_parameters())


def full_params(engine) -> dict[str, torch.Tensor]:
    """Every parameter, gathered under ZeRO-3, cloned to CPU. Collective: all ranks must call it."""
    named = _named(engine)
    if engine.zero_optimization_stage() == 3:
        with deepspeed.zero.GatheredParameters([p for _, p in named], modifier_rank=None):
            return {n: p.detach().clone().cpu() for n, p in named}
    return {n: p.detach().clone().cpu() for n, p in named}


def full_grads(engine) -> dict[str, torch.Tensor]:
    """Every parameter's reduced gradient (what the optimizer will apply), gathered across ZeRO
    partitions. Call between the last backward and ``engine.step()`` (``train_step``'s before_step).
    Collective under ZeRO: all ranks must call it."""
    from deepspeed.utils import safe_get_full_grad

    out = {}
    for n, p in _named(engine):
        g = safe_get_full_grad(p)
        if g is None:
            g = p.grad
        out[n] = None if g is None else g.detach().clone().float().cpu()
    return out


def full_optimizer_states(engine, keys=("exp_avg", "exp_avg_sq")) -> dict[str, torch.Tensor]:
    """``{"<param>/<key>": fp32 state}`` of every parameter, gathered across ZeRO partitions (Adam's
    moments by default; for tests of a resume on another world size). Collective under ZeRO."""
    from deepspeed.utils import safe_get_full_optimizer_state

    out = {}
    for n, p in _named(engine):
        for k in keys:
            v = safe_get_full_optimizer_state(p, k)
            if v is not None:
                out[f"{n}/{k}"] = v.detach().clone().float().cpu()
    return out


# ------------------------------------------------------------------------------------------------
# shutdown


def shm_files(addr: str | None = None, port: str | int | None = None, ranks=None) -> list[str]:
    """``/dev/shm`` files of DeepSpeed's CPU shared-memory all-reduce for the job at addr:port
    (default: this process's MASTER_ADDR/MASTER_PORT); named ``<prefix>_<uid>_<addr>_<port>_<rank>``."""
    addr = addr or os.environ.get("MASTER_ADDR", "*")
    port = port or os.environ.get("MASTER_PORT", "*")
    pats = [f"{SHM_PREFIX}_{os.getuid()}_{addr}_{port}_{r}" for r in (ranks if ranks is not None else ["*"])]
    return sorted({f for p in pats for f in glob.glob(p)})


def _own_rank() -> int:
    if dist.is_initialized():
        return dist.get_rank()
    return int(os.environ.get("RANK", 0))


def remove_shm_files() -> list[str]:
    """Delete THIS rank's ``/dev/shm`` all-reduce buffer file of this job (the one this process
    created; named by MASTER_ADDR/MASTER_PORT and the rank); returns what was deleted. Safe once every
    peer has mapped it (they map at init_distributed); a no-op outside a launched job."""
    if "MASTER_PORT" not in os.environ:
        return []
    gone = []
    for f in shm_files(ranks=[_own_rank()]):
        try:
            os.unlink(f)
            gone.append(f)
        except FileNotFoundError:
            pass
    return gone


def shutdown() -> None:
    """End of a run, on every rank: barrier, ``destroy_process_group`` (avoids the rc-250 abort at
    exit seen with ZeRO-3), then delete this rank's shared-memory buffer file if it is still there
    (init_distributed deletes it already)."""
    me = _own_rank()
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
    if "MASTER_PORT" in os.environ:
        for f in shm_files(ranks=[me]):
            try:
                os.unlink(f)
            except FileNotFoundError:
                pass


def exit_process(code: int = 0):
    """Leave a launched rank after :func:`shutdown`: flush Python's streams and logging, then
    ``os._exit(code)``, skipping the interpreter's teardown (atexit hooks and C++ static
    destructors). Measured here: a ZeRO-3 rank occasionally aborts in that teardown ("terminate called
    without an active exception", rank rc -6, launcher rc 250) after its work is done: 1 of ~14
    launches without ``destroy_process_group``, and once more in CI with it (ZeRO-3 + CPU offload,
    2026-12-01). Callers close their own files first (os._exit runs no finalizers)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    logging.shutdown()
    os._exit(code)


def consolidated_state_dict(tag_dir: str | os.PathLike) -> dict[str, torch.Tensor]:
    """The full fp32 module state of a saved checkpoint folder (``OUT/<tag>``), in one process, any
    ZeRO stage: stages 0-2 keep the module whole in ``mp_rank_00_model_states.pt``; stage 3 shards
    it, so DeepSpeed's zero_to_fp32 gathers the partitions."""
    tag_dir = Path(tag_dir)
    whole = tag_dir / "mp_rank_00_model_states.pt"  # ZeRO-3 writes zero_pp_rank_<r>_mp_rank_00_model_states.pt
    module = torch.load(whole, map_location="cpu", weights_only=True).get("module") if whole.is_file() else None
    if module and all(t.numel() > 0 for t in module.values()):
        return {k: v.float() for k, v in module.items()}
    from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint

    return dict(get_fp32_state_dict_from_zero_checkpoint(str(tag_dir.parent), tag=tag_dir.name))


def ds_to_universal():
    """DeepSpeed's universal-checkpoint converter module (imported here: the one deepspeed import site)."""
    from deepspeed.checkpoint import ds_to_universal as module

    return module
