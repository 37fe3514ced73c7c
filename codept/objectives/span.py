"""``span``: SpanBERT span masking with the span-boundary objective (SBO) on text and code views.

1. Words: TextView ``words`` or CodeView leaves (select.runs), as for ``wwm``.
2. Spans (select.geometric_spans): length l ~ Geometric(p = 0.2) truncated to 1..10 words (mean
   3.78 words), start at a uniformly drawn word start, no overlap, until ``rate`` (15%) of the
   candidate tokens is spent.
3. Render 80/10/10 per span (render.bert_80_10_10: a span is masked, replaced or kept together);
   labels under ``labels["mlm"]``.
4. SBO pointers ``sbo`` (N, 3): one record (left, right, token) per token of a span, with
   left = the token before the span and right = the token after it; a span touching either end of
   the document has no boundary there and gets no SBO records (it still trains the mlm head). The
   ``sbo`` head (codept.model.heads.SpanBoundaryHead) predicts labels.mlm[token] from the hidden
   states of left and right and the embedding of token - left - 1. Packing shifts all three.
Cost: O(T) NumPy plus O(spans) Python steps for the overlap check. Not covered: spans across
sentence boundaries are allowed (as in SpanBERT, which drew over whole 512-token blocks).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from codept.data.example import Example
from codept.objectives import render, select
from codept.objectives.spec import Objective


@dataclass(frozen=True)
class Config:
    rate: float = 0.15
    p: float = 0.2  # geometric parameter of the span length in words
    max_words: int = 10  # longest span, in words
    p_mask: float = 0.8
    p_random: float = 0.1

    def __post_init__(self):
        select.geometric_lengths(self.p, self.max_words)  # validates p and max_words


def sbo_records(spans: np.ndarray, n_tokens: int) -> np.ndarray:
    """(N, 3) int64 (left boundary, right boundary, token) for every token of every span that has a
    token on both sides inside the document."""
    inner = spans[(spans[:, 0] > 0) & (spans[:, 1] < n_tokens)]
    if len(inner) == 0:
        return np.zeros((0, 3), dtype=np.int64)
    lengths = inner[:, 1] - inner[:, 0]
    tok = render.unit_tokens(inner)
    return np.stack([np.repeat(inner[:, 0] - 1, lengths), np.repeat(inner[:, 1], lengths), tok], axis=1)


def build(vocab: render.Vocab, cfg: Config = Config()):
    def span(view, rng: np.random.Generator, ctx=None) -> Example:
        ids = np.asarray(view.input_ids)
        words = select.runs(view.words if hasattr(view, "words") else view.leaf)
        spans, _ = select.geometric_spans(words, vocab.candidates(ids), cfg.rate, rng, cfg.p, cfg.max_words)
        new, labels = render.bert_80_10_10(ids, spans, vocab, rng, cfg.p_mask, cfg.p_random)
        return Example(new, np.ones(len(ids), dtype=bool), labels={"mlm": labels},
                       pointers={"sbo": sbo_records(spans, len(ids))})

    return span


# SpanBERT: MLM on the spans + the span-boundary objective
OBJECTIVE = Objective("span", build, Config, heads=("mlm", "sbo"), views=("code", "text"))
