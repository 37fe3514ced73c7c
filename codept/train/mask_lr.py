"""A separate (lower) learning rate for the [MASK] embedding row: the study's fine-tuning advice
against the pretrain / fine-tune mismatch, as an optimizer option.

The row is one slice of the tied token table (``embed.tokens.weight``), not a parameter of its own,
so no param group can hold it. Instead the update of that row is scaled: a step pre-hook keeps the
row, a step post-hook sets ``row = old + factor * (new - old)``. For AdamW (and SGD, Adam, any
optimizer whose update is lr x a direction that does not depend on lr) this is exactly a param group
with lr x factor for that row: the moments depend on gradients only, and decoupled weight decay is
scaled by lr too. Cost: one (C,) copy per step.

Use: ``mask_row_lr(optimizer, model.embed.tokens.weight, vocab.mask_id, factor=0.1)`` with a torch
optimizer that updates the model's own parameters (a fine-tuning loop; codept.train.engine's AdamW
when DeepSpeed runs without ZeRO and without a separate fp32 master copy). Not covered: ZeRO stages
1-3 and bf16/fp16 master weights (the optimizer there steps flat fp32 partitions, not the row):
those would need the same blend on the master partition holding the row.
"""

from __future__ import annotations

import torch


def mask_row_lr(optimizer: torch.optim.Optimizer, weight: torch.nn.Parameter, row: int, factor: float):
    """Scale the update of ``weight[row]`` by `factor` (in [0, 1]) at every ``optimizer.step()``.
    Returns the two hook handles (``.remove()`` them to stop)."""
    if not 0.0 <= factor <= 1.0:
        raise ValueError(f"mask_row_lr: factor={factor} must be in [0, 1] (a lower rate for the [MASK] row)")
    if not 0 <= row < weight.shape[0]:
        raise ValueError(f"mask_row_lr: row {row} outside the table's {weight.shape[0]} rows")
    if not any(p is weight for g in optimizer.param_groups for p in g["params"]):
        raise ValueError("mask_row_lr: the optimizer does not update this weight (ZeRO flattens parameters: "
                         "see the module docstring)")
    saved: dict[str, torch.Tensor] = {}

    def pre(opt, args, kwargs):
        saved["row"] = weight.detach()[row].clone()

    def post(opt, args, kwargs):
        with torch.no_grad():
            old = saved.pop("row")
            weight[row] = old + factor * (weight[row] - old)

    return optimizer.register_step_pre_hook(pre), optimizer.register_step_post_hook(post)
