"""``plm``: XLNet's permutation language modelling with partial prediction.

1. Window: a random window of at most ``max_tokens`` tokens (packing must not split the
   factorisation order; set it to the run's seq_len).
2. A factorisation order: a uniformly random permutation; ``order[i]`` = the rank of token i in it
   (the attention rule's ``order`` column: key k is visible to query q when order[k] <= order[q]).
3. Partial prediction: only the last 1/K of the order are targets (``labels["plm"]`` = the token,
   IGNORE elsewhere), never rank 0 (it has no context); the input is the document unchanged.
4. The model side (codept.model.transformer.Transformer.two_stream, run by codept.model.regimes for
   the "plm" head): the content stream sees order[k] <= order[q], the query stream order[k] < order[q]
   and predicts token q without seeing it.
What differs from XLNet: absolute (not relative) positions and no Transformer-XL memory or segment
recurrence; the query stream starts from XLNet's learned vector w plus the absolute position
(codept.model.regimes.QueryLMHead; not LayerNormed, codept.model.transformer.Embeddings);
the permutation is over single tokens (XLNet permutes within spans of a longer context), no
bidirectional data input pipeline; partial prediction by rank exactly as in XLNet (K = 6 or 7 there).
Cost: O(T) NumPy; the model side about twice a forward. Not covered: span-based permutations.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from codept.data.example import IGNORE, Example
from codept.objectives.spec import Objective


@dataclass(frozen=True)
class Config:
    k: int = 6  # predict the last 1/k of the factorisation order
    max_tokens: int = 256  # longest example; set to the run's seq_len
    whole_in_row: ClassVar[bool] = True  # packing must never split an example: recipes check max_tokens <= seq_len

    def __post_init__(self):
        if self.k < 1 or self.max_tokens < 2:
            raise ValueError(f"plm: k={self.k} must be >= 1 and max_tokens={self.max_tokens} >= 2")


def build(vocab, cfg: Config = Config()):
    def plm(view, rng: np.random.Generator, ctx=None) -> Example:
        ids = np.asarray(view.input_ids)
        if len(ids) > cfg.max_tokens:
            start = int(rng.integers(0, len(ids) - cfg.max_tokens + 1))
            ids = ids[start:start + cfg.max_tokens]
        n = len(ids)
        order = np.empty(n, dtype=np.int32)
        order[rng.permutation(n)] = np.arange(n, dtype=np.int32)  # order[i] = rank of token i
        n_targets = min(max(1, int(np.ceil(n / cfg.k))), n - 1)  # never rank 0 (no context)
        target = (order >= n - n_targets) & vocab.candidates(ids)
        labels = np.where(target, ids, IGNORE).astype(np.int32)
        return Example(ids, np.zeros(n, dtype=bool), labels={"plm": labels}, order=order)

    return plm


# the query stream (two-stream attention)
OBJECTIVE = Objective("plm", build, Config, heads=("plm",), views=("code", "text"))
