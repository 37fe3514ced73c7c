"""``syntax_span``: mask whole syntactic units (identifiers, calls, expressions, statements, ...).

1. Candidate units: the view's syntax spans (kinds from codept.structure.kinds.SPAN_KINDS, all by
   default or a configured subset) made only of ordinary tokens.
2. Shuffle them and keep non-overlapping units until ``rate`` (15%) of the document's ordinary
   tokens is spent (codept.objectives.select.whole_spans): units too large for the budget are
   skipped, so long documents mask many small units and a few large ones.
3. Render 80/10/10 over each unit: the whole unit is masked, replaced or kept together.
4. Bidirectional; labels under ``labels["mlm"]`` (same head as mlm); the kept units as pointers
   ``span`` (K, 2) [first, last] token, for span-level heads (SBO) and analysis.
Cost: O(S + T) per document. Not covered: a view without spans (returns an all-IGNORE example),
span length control (SpanBERT geometric spans are a separate selector).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from codept.data.example import Example
from codept.objectives import render, select
from codept.structure.kinds import SPAN_KIND_ID


@dataclass(frozen=True)
class Config:
    rate: float = 0.15
    kinds: tuple[str, ...] = ()  # empty = every span kind
    p_mask: float = 0.8
    p_random: float = 0.1

    def __post_init__(self):
        unknown = [k for k in self.kinds if k not in SPAN_KIND_ID]
        if unknown:
            raise ValueError(f"syntax_span kinds {unknown} not in {list(SPAN_KIND_ID)}")


def build(vocab: render.Vocab, cfg: Config = Config()):
    kind_ids = np.array([SPAN_KIND_ID[k] for k in cfg.kinds], dtype=np.int64)

    def syntax_span(view, rng: np.random.Generator, ctx=None) -> Example:
        ids = np.asarray(view.input_ids)
        spans = np.asarray(view.spans)
        if len(kind_ids):
            spans = spans[np.isin(spans[:, 2], kind_ids)]
        units = select.whole_spans(spans, vocab.candidates(ids), cfg.rate, rng)
        new, labels = render.bert_80_10_10(ids, units, vocab, rng, cfg.p_mask, cfg.p_random)
        bounds = np.stack([units[:, 0], units[:, 1] - 1], axis=1) if len(units) else np.zeros((0, 2), np.int64)
        return Example(new, np.ones(len(ids), dtype=bool), labels={"mlm": labels}, pointers={"span": bounds})

    return syntax_span
