"""``mlm``: BERT masked language modelling on a code view (or any document with input_ids).

1. Candidates: every token except special ids (Vocab.is_special). Select ``rate`` (15%) of them
   uniformly (codept.objectives.select.random_tokens); the expected count is exact.
2. Render 80/10/10 per token (codept.objectives.render.bert_80_10_10).
3. Bidirectional: prefix all True. Labels under ``labels["mlm"]``.
Dynamic masking comes from the stream: the rng is seeded by (seed, epoch, index), so every epoch
draws new masks. Cost: O(T) NumPy per document. Not covered: whole-word masking (next objective).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from codept.data.example import Example
from codept.objectives import render, select


@dataclass(frozen=True)
class Config:
    rate: float = 0.15  # share of candidate tokens selected
    p_mask: float = 0.8  # of the selected: -> <mask>
    p_random: float = 0.1  # of the selected: -> random ordinary token; the rest stay


def build(vocab: render.Vocab, cfg: Config = Config()):
    def mlm(view, rng: np.random.Generator, ctx=None) -> Example:
        ids = np.asarray(view.input_ids)
        chosen = select.random_tokens(vocab.candidates(ids), cfg.rate, rng)
        new, labels = render.bert_80_10_10(ids, render.tokens_as_units(chosen), vocab, rng, cfg.p_mask, cfg.p_random)
        return Example(new, np.ones(len(ids), dtype=bool), labels={"mlm": labels})

    return mlm
