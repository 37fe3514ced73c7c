"""``unilm``: UniLM's three language models in one model, chosen per document by its attention mask.

1. Draw the document's mode with probabilities ``shares`` (bidirectional, left-to-right, seq2seq;
   UniLM: a third each).
2. Select ``rate`` of the candidate (non-special) tokens and render them 80/10/10 (as ``mlm``);
   labels under ``labels["mlm"]``: every mode is a cloze task predicted at the masked token's own
   position (UniLM's formulation), so one head (codept.model.heads "mlm") serves all three.
3. The mask is the one attention rule's prefix: bidirectional = all True; left-to-right = all
   False (a masked token sees itself and what precedes it); seq2seq = a leading run of True over the
   source (a split point drawn uniformly in [src_min, src_max] of the length), the target causal
   and seeing the whole source. Masks fall in both segments, as in UniLM.
Cost: O(T) NumPy. Not covered: UniLM's per-mode segment embeddings and its [SOS]/[EOS] framing; a
source/target split at a sentence or docstring boundary (the split is a random cut).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from codept.data.example import Example
from codept.objectives import render, select
from codept.objectives.spec import Objective

MODES = ("bidirectional", "left_to_right", "seq2seq")


@dataclass(frozen=True)
class Config:
    bidirectional: float = 1 / 3  # share of documents of each mode (normalised to sum 1)
    left_to_right: float = 1 / 3
    seq2seq: float = 1 / 3
    rate: float = 0.15
    p_mask: float = 0.8
    p_random: float = 0.1
    src_min: float = 0.25  # seq2seq: the source is a leading share of the document in [src_min, src_max]
    src_max: float = 0.75

    def __post_init__(self):
        shares = [self.bidirectional, self.left_to_right, self.seq2seq]
        if min(shares) < 0 or sum(shares) <= 0:
            raise ValueError(f"unilm shares {dict(zip(MODES, shares))}: each must be >= 0 and their sum > 0")
        if not 0.0 <= self.src_min <= self.src_max <= 1.0:
            raise ValueError(f"src_min={self.src_min}, src_max={self.src_max}: need 0 <= src_min <= src_max <= 1")


def prefix_of(mode: str, n: int, rng: np.random.Generator, cfg: Config) -> np.ndarray:
    """(n,) bool: the prefix mask of a document of n tokens in `mode`."""
    if mode == "bidirectional":
        return np.ones(n, dtype=bool)
    prefix = np.zeros(n, dtype=bool)
    if mode == "seq2seq":
        prefix[: int(round(rng.uniform(cfg.src_min, cfg.src_max) * n))] = True
    return prefix


def build(vocab: render.Vocab, cfg: Config = Config()):
    shares = np.array([cfg.bidirectional, cfg.left_to_right, cfg.seq2seq], dtype=float)
    shares /= shares.sum()

    def unilm(view, rng: np.random.Generator, ctx=None) -> Example:
        ids = np.asarray(view.input_ids)
        mode = MODES[int(rng.choice(3, p=shares))]
        prefix = prefix_of(mode, len(ids), rng, cfg)
        chosen = select.random_tokens(vocab.candidates(ids), cfg.rate, rng)
        new, labels = render.bert_80_10_10(ids, render.tokens_as_units(chosen), vocab, rng, cfg.p_mask, cfg.p_random)
        return Example(new, prefix, labels={"mlm": labels})

    return unilm


# cloze under three masks
OBJECTIVE = Objective("unilm", build, Config, heads=("mlm",), views=("code", "text"))
