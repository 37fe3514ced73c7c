"""``sop``: ALBERT's sentence-order prediction on a text view, with MLM on the same input.

1. Budget: ``max_tokens - 3`` ([CLS], [SEP], [SEP]), shortened with ``short_seq_prob``
   (codept.objectives.segments.target_length).
2. A start sentence uniform over the document's sentences; a chunk of whole sentences from it up
   to the budget (at least 2 sentences); A = its first ``a_end`` sentences (uniform split), B =
   the rest: two consecutive segments of one document.
3. With probability 1/2 the two are swapped (label 1), else kept in order (label 0): the topic is
   the same in both classes, only the order tells them apart.
4. Truncate A + B to the budget (BERT's rule), render ``[CLS] A [SEP] B [SEP]`` with types 0/1 and
   ``scalars["sop"]`` = the label; MLM over the same tokens at ``mlm_rate`` (0 = no MLM labels),
   as ALBERT trains both on one input.
5. ``walk`` (default): pairs chunk after chunk from sentence 0 to the end of the document (a list of
   examples; ALBERT's data builder, BERT's): every sentence reaches a pair once per epoch, but a
   lone last sentence, and the cost of reading a view is shared by all its pairs.
   Rendering, grouping and the defaults (BERT's: walked, pairs of the row): codept.objectives.segments,
   steps 7-8. ``walk=False``: one pair from a uniform start per read.
A document with fewer than 2 sentences has no order to predict: the objective returns None for it
(the stream drops it; ``eligible(view)`` says which documents count, and the recipe reports the
number). Cost: O(T) per document. Not covered: ALBERT's n-gram masking (the masking issue).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from codept.data.example import Example
from codept.objectives import render, segments as S
from codept.objectives.spec import Objective


@dataclass(frozen=True)
class Config:
    max_tokens: int = 512  # [CLS] A [SEP] B [SEP] at most this long (BERT / ALBERT: max_seq_length); recipes lower it to the row
    whole_in_row: ClassVar[bool] = True  # a split pair loses its frame: recipes check max_tokens <= seq_len
    short_seq_prob: float = 0.1  # BERT/ALBERT: share of pairs with a shorter random budget
    p_swap: float = 0.5  # share of swapped pairs (label 1)
    mlm_rate: float = 0.15  # MLM on the pair's tokens (0 = the pair label only)
    p_mask: float = 0.8
    p_random: float = 0.1
    walk: bool = True  # pairs chunk after chunk through the whole document (ALBERT); False: one pair from a uniform start per read
    group_tokens: int = 0  # walk: consecutive pairs grouped into multi-part Examples of at most this many tokens (0 = max_tokens; 1 = one per pair)
    default_row_share: ClassVar[float] = 1.0  # unless given, recipes set max_tokens = min(max_tokens, seq_len) (BERT: pairs fill the row)

    def __post_init__(self):
        S.check(self.max_tokens, self.short_seq_prob, self.mlm_rate)
        if not 0 <= self.group_tokens <= self.max_tokens:
            raise ValueError(f"group_tokens={self.group_tokens} must be in [0, max_tokens={self.max_tokens}] "
                             "(a group never outgrows one pair's budget, so it fits the row; 0 = max_tokens)")
        if not 0.0 <= self.p_swap <= 1.0:
            raise ValueError(f"p_swap={self.p_swap} must be in [0, 1]")


def eligible(view) -> bool:
    """A document gives SOP pairs when it has at least 2 sentences."""
    return len(view.sentences) >= 2


def build(vocab: render.Vocab, cfg: Config = Config()):
    mlm = (cfg.mlm_rate, cfg.p_mask, cfg.p_random)

    def pair(sents: np.ndarray, ids: np.ndarray, start: int | None, rng: np.random.Generator) -> tuple[tuple, int]:
        """One pair (ids of A, ids of B, label) from the chunk at ``start`` (None: a uniform start) and
        the chunk's end."""
        budget = S.target_length(cfg.max_tokens - 3, cfg.short_seq_prob, rng)
        if start is None:
            start = int(rng.integers(0, len(sents) - 1))
        first, end = S.chunk(sents, start, budget)
        b_first = S.split_chunk(first, end, rng)
        a, b = S.tokens_of(sents, first, b_first), S.tokens_of(sents, b_first, end)
        a, b = S.truncate_pair(a, b, cfg.max_tokens - 3, rng)
        swapped = rng.random() < cfg.p_swap
        if swapped:
            a, b = b, a
        return (ids[a[0]:a[1]], ids[b[0]:b[1]], int(swapped)), end

    def sop(view, rng: np.random.Generator, ctx=None) -> Example | list[Example] | None:
        if not eligible(view):
            return None
        sents, ids = np.asarray(view.sentences), np.asarray(view.input_ids)
        if not cfg.walk:
            return S.render_pair(*pair(sents, ids, None, rng)[0], "sop", vocab, rng, *mlm)
        return S.render_pairs(S.walk(lambda start: pair(sents, ids, start, rng), len(sents)), "sop", vocab, rng,
                              *mlm, group=cfg.group_tokens or cfg.max_tokens)

    return sop


# the order label, and MLM on the same input (mlm_rate > 0)
OBJECTIVE = Objective("sop", build, Config, heads=("sop", "mlm"), views=("text",))
