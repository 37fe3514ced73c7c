"""``electra``: ELECTRA's replaced-token detection; the data half (the model half is
codept.model.regimes: generator -> sample -> discriminator in one engine).

1. Select ``rate`` of the candidate (non-special) tokens (codept.objectives.select.random_tokens)
   and replace them by [MASK] (``p_mask`` = 1: ELECTRA's generator input; 80/10/10 with 0.8, 0.1).
2. ``labels["gen"]``: the original ids at the selected tokens (the generator's MLM targets).
3. ``labels["rtd"]``: 0 at EVERY candidate token, IGNORE at special tokens: the discriminator labels
   every token; the model side sets 1 where the generator's sample differs from the original (a
   sampled token equal to the original counts as original).
4. Bidirectional: prefix all True.
Cost: O(T) NumPy. Not covered: the generator's sampling temperature (the model side samples at 1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from codept.data.example import IGNORE, Example
from codept.objectives import render, select
from codept.objectives.spec import Objective


@dataclass(frozen=True)
class Config:
    rate: float = 0.15
    p_mask: float = 1.0  # of the selected: -> [MASK]
    p_random: float = 0.0  # of the selected: -> a random ordinary token; the rest stay

    def __post_init__(self):
        if not 0.0 < self.rate <= 1.0:  # 0 selects no token: every example without labels
            raise ValueError(f"rate={self.rate}: must be in (0, 1] (0 selects no token: nothing to learn)")
        for name in ("p_mask", "p_random"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name}={getattr(self, name)}: must be in [0, 1]")
        if self.p_mask + self.p_random > 1.0:
            raise ValueError(f"p_mask + p_random = {self.p_mask + self.p_random}: must be <= 1")


def build(vocab: render.Vocab, cfg: Config = Config()):
    def electra(view, rng: np.random.Generator, ctx=None) -> Example:
        ids = np.asarray(view.input_ids)
        cand = vocab.candidates(ids)
        chosen = select.random_tokens(cand, cfg.rate, rng)
        new, gen = render.bert_80_10_10(ids, render.tokens_as_units(chosen), vocab, rng, cfg.p_mask, cfg.p_random)
        rtd = np.where(cand, 0, IGNORE).astype(np.int32)
        return Example(new, np.ones(len(ids), dtype=bool), labels={"gen": gen, "rtd": rtd})

    return electra


# generator MLM + discriminator replaced-token detection; loss = MLM + 50 x RTD (ELECTRA's lambda)
OBJECTIVE = Objective("electra", build, Config, heads=("gen", "rtd"), views=("code", "text"),
                      loss_weights={"rtd": 50.0})
