"""``syntax_span``: mask whole syntactic units (identifiers, calls, expressions, statements, ...).

1. Candidate units: the view's syntax spans (kinds from codept.structure.kinds.SPAN_KINDS, all by
   default or a configured subset) made only of ordinary tokens; with ``max_unit_tokens`` > 0 only
   units of at most that many tokens (AST-T5 bounds the subtree size: uncapped, a unit can be a
   whole class -- on the stdlib a mean of 7.4 tokens, a max of 1,081, 16% of the masked tokens in
   units over 100); with ``weights`` ("kind=w", unlisted kinds 1) each unit stays a candidate with
   probability w / max(w), so kinds are drawn in proportion to their weights.
2. Shuffle them and keep non-overlapping units until ``rate`` (15%) of the document's ordinary
   tokens is spent (codept.objectives.select.whole_spans): units too large for the budget are
   skipped, so long documents mask many small units and a few large ones.
3. Render 80/10/10 over each unit: the whole unit is masked, replaced or kept together.
4. Bidirectional; labels under ``labels["mlm"]`` (same head as mlm); the kept units as pointers
   ``span`` (K, 2) [first, last] token, for span-level heads (SBO) and analysis.
Cost: O(S + T) per document. Not covered: a view without spans (returns an all-IGNORE example);
a cap does not split a long unit into smaller ones (its sub-units are candidates already).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from codept.data.example import Example
from codept.objectives import render, select
from codept.objectives.spec import Objective
from codept.structure.kinds import SPAN_KIND_ID


@dataclass(frozen=True)
class Config:
    rate: float = 0.15
    kinds: tuple[str, ...] = ()  # empty = every span kind
    p_mask: float = 0.8
    p_random: float = 0.1
    max_unit_tokens: int = 0  # 0 = no cap; else units longer than this are never chosen
    weights: tuple[str, ...] = ()  # "kind=w" (w >= 0): relative chance of a unit of that kind

    def __post_init__(self):
        unknown = [k for k in self.kinds if k not in SPAN_KIND_ID]
        if unknown:
            raise ValueError(f"syntax_span kinds {unknown} not in {list(SPAN_KIND_ID)}")
        if self.max_unit_tokens < 0:
            raise ValueError(f"syntax_span max_unit_tokens={self.max_unit_tokens}: must be >= 0 (0 = no cap)")
        kind_weights(self.weights)


def kind_weights(weights: tuple[str, ...]) -> np.ndarray:
    """(n_kinds,) keep-probability of each span kind from "kind=w" entries (unlisted: 1), / max."""
    w = np.ones(len(SPAN_KIND_ID))
    for item in weights:
        kind, _, raw = item.partition("=")
        try:
            value = float(raw)
        except ValueError:
            value = -1.0
        if kind not in SPAN_KIND_ID or not value >= 0:
            raise ValueError(f"syntax_span weights entry {item!r}: expected KIND=W with KIND in "
                             f"{list(SPAN_KIND_ID)} and W >= 0")
        w[SPAN_KIND_ID[kind]] = value
    if w.max() <= 0:
        raise ValueError(f"syntax_span weights {list(weights)}: every kind has weight 0")
    return w / w.max()


def build(vocab: render.Vocab, cfg: Config = Config()):
    kind_ids = np.array([SPAN_KIND_ID[k] for k in cfg.kinds], dtype=np.int64)
    keep_p = kind_weights(cfg.weights) if cfg.weights else None

    def syntax_span(view, rng: np.random.Generator, ctx=None) -> Example:
        ids = np.asarray(view.input_ids)
        spans = np.asarray(view.spans)
        if len(kind_ids):
            spans = spans[np.isin(spans[:, 2], kind_ids)]
        if cfg.max_unit_tokens:
            spans = spans[spans[:, 1] - spans[:, 0] <= cfg.max_unit_tokens]
        if keep_p is not None:
            spans = spans[rng.random(len(spans)) < keep_p[spans[:, 2]]]
        units = select.whole_spans(spans, vocab.candidates(ids), cfg.rate, rng)
        new, labels = render.bert_80_10_10(ids, units, vocab, rng, cfg.p_mask, cfg.p_random)
        bounds = np.stack([units[:, 0], units[:, 1] - 1], axis=1) if len(units) else np.zeros((0, 2), np.int64)
        return Example(new, np.ones(len(ids), dtype=bool), labels={"mlm": labels}, pointers={"span": bounds})

    return syntax_span


OBJECTIVE = Objective("syntax_span", build, Config, heads=("mlm",), views=("code",), structure=True)
