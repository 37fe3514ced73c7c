"""The optimizer and learning-rate schedule choices of codept.train.engine that need no DeepSpeed.

:func:`optimizer_kind` names the optimizer codept.train.engine.build_engine makes for a ds_config and
a backend: DeepSpeed's ``DeepSpeedCPUAdam`` when the ds_config offloads the optimizer (ZeRO-Offload
refuses other optimizers), torch's fused AdamW on GPU ranks (nccl), torch's default (for-each) AdamW
on CPU ranks. :class:`Schedule` is the picklable multiplier of the engine's LambdaLR
(codept.train.config.lr_multiplier: linear warm-up, then constant / linear / cosine decay);
:func:`reschedule` replaces it on a built or resumed engine.
Cost: negligible; imports neither torch nor deepspeed (the optimizer and scheduler objects are built
in build_engine, next to the one deepspeed import). Limits: AdamW only; reschedule expects
build_engine's LambdaLR (one Schedule object shared by every param group, edited in place).
"""

from __future__ import annotations

from codept.train.config import lr_multiplier


class Schedule:
    """Picklable lr multiplier (LambdaLR saves callable objects' __dict__ in its state)."""

    def __init__(self, schedule: dict):
        self.schedule = dict(schedule)

    def __call__(self, step: int) -> float:
        return lr_multiplier(step, self.schedule)


def _offloads_optimizer(ds_config: dict) -> bool:
    off = ds_config.get("zero_optimization", {}).get("offload_optimizer") or {}
    return off.get("device", "none") in ("cpu", "nvme")


def optimizer_kind(ds_config: dict, backend: str) -> str:
    """``"cpu_adam"`` (ZeRO-Offload), ``"adamw_fused"`` (GPU ranks: nccl) or ``"adamw"`` (CPU ranks)."""
    if _offloads_optimizer(ds_config):
        return "cpu_adam"
    return "adamw_fused" if backend == "nccl" else "adamw"


def reschedule(engine, schedule: dict) -> None:
    """Replace the learning-rate schedule of a built (or resumed) engine: its LambdaLR's multiplier
    (a checkpoint restores the saved one) and the current learning rate, which the next step uses,
    recomputed at the scheduler's step. For a resume with more (or fewer) steps: the decay then
    ends at the new last step."""
    sched = engine.lr_scheduler
    sched.lr_lambdas[0].schedule = dict(schedule)
    for group, base in zip(sched.optimizer.param_groups, sched.base_lrs):
        group["lr"] = base * sched.lr_lambdas[0](sched.last_epoch)
    sched._last_lr = [g["lr"] for g in sched.optimizer.param_groups]
