"""``mlm``: BERT masked language modelling on a code or text view (any document with input_ids).

1. Candidates: every token except special ids (Vocab.is_special). Select ``rate`` (15%) of them
   uniformly (codept.objectives.select.random_tokens); the expected count is exact.
2. Render 80/10/10 per token (codept.objectives.render.bert_80_10_10).
3. Bidirectional: prefix all True. Labels under ``labels["mlm"]``.
Masking modes:
  * dynamic (default, RoBERTa): the stream seeds the rng by (seed, epoch, index), so every epoch
    draws new masks.
  * ``static=True`` (BERT's original): one mask per document for the whole run. Every draw comes from
    ``default_rng([ctx.seed, ctx.index, ctx.source.salt, STATIC_SALT])`` -- no epoch in it -- so epochs
    repeat the mask exactly, and a resumed run (which rebuilds the same Context from the stream state)
    reproduces it; nothing is stored.
  * ``p_mask_final``: the [MASK] share of 80/10/10 falls linearly from ``p_mask`` at progress
    ``schedule_start`` to ``p_mask_final`` at the end of the run (ctx.progress = mixture step /
    horizon, a function of the stream state, so exact on resume); the freed share stays unchanged
    (render.scheduled_mask_share). Needs a Context; without one (ctx None) progress is 0.
The study's third remedy, a lower learning rate for the [MASK] embedding row during fine-tuning, is an
optimizer option, not a data one: codept.train.mask_lr.mask_row_lr.
Cost: O(T) NumPy per document. Not covered: whole words (``wwm``), spans (``span``, ``t5_span``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from codept.data.example import Example
from codept.objectives import render, select
from codept.objectives.spec import Objective

STATIC_SALT = 0x57A71C  # separates static-mask draws from every (seed, epoch, index, salt) stream draw


@dataclass(frozen=True)
class Config:
    rate: float = 0.15  # share of candidate tokens selected
    p_mask: float = 0.8  # of the selected: -> <mask>
    p_random: float = 0.1  # of the selected: -> random ordinary token; the rest stay
    static: bool = False  # one mask per document for the whole run (keyed by (seed, index), not epoch)
    p_mask_final: float | None = None  # [MASK] share at the end of the run (None: no schedule)
    schedule_start: float = 0.8  # training progress where the [MASK] share starts to fall

    def __post_init__(self):
        if not 0.0 < self.rate <= 1.0:  # 0 selects no token: every example without labels
            raise ValueError(f"mlm: rate={self.rate}: must be in (0, 1] (0 selects no token: nothing to learn)")
        for name in ("p_mask", "p_random", "schedule_start"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"mlm: {name}={getattr(self, name)} must be in [0, 1]")
        if self.p_mask + self.p_random > 1.0:
            raise ValueError(f"mlm: p_mask + p_random = {self.p_mask + self.p_random} must be <= 1")
        if self.p_mask_final is not None and not 0.0 <= self.p_mask_final <= self.p_mask:
            raise ValueError(f"mlm: p_mask_final={self.p_mask_final} must be in [0, p_mask={self.p_mask}]")
        if self.p_mask_final is not None and self.schedule_start >= 1.0:
            raise ValueError("mlm: schedule_start must be < 1 for the [MASK] share to fall")


def static_rng(ctx) -> np.random.Generator:
    """The draws of a static mask: (stream seed, document index, source salt), never the epoch."""
    if ctx is None:
        raise ValueError("mlm static=True needs the stream's Context (seed, index): call it from a stream "
                         "source (codept.views.view_source)")
    return np.random.default_rng([ctx.seed, ctx.index, ctx.source.salt, STATIC_SALT])


def build(vocab: render.Vocab, cfg: Config = Config()):
    def mlm(view, rng: np.random.Generator, ctx=None) -> Example:
        if cfg.static:
            rng = static_rng(ctx)
        progress = ctx.progress if ctx is not None else 0.0
        p_mask = render.scheduled_mask_share(cfg.p_mask, cfg.p_mask_final, cfg.schedule_start, progress)
        ids = np.asarray(view.input_ids)
        chosen = select.random_tokens(vocab.candidates(ids), cfg.rate, rng)
        new, labels = render.bert_80_10_10(ids, render.tokens_as_units(chosen), vocab, rng, p_mask, cfg.p_random)
        return Example(new, np.ones(len(ids), dtype=bool), labels={"mlm": labels})

    return mlm


OBJECTIVE = Objective("mlm", build, Config, heads=("mlm",), views=("code", "text"))
