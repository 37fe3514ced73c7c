"""``tlm``: XLM's translation language modelling on a parallel pair (codept.text.view.PairView).

1. Order: with probability ``p_swap`` the target side comes first, so both directions train.
2. Each side is cut to ``max_side`` tokens (its first ones) and closed by [SEP]: ``x [SEP] y [SEP]``
   (XLM's ``</s> x </s> </s> y </s>`` without the doubled separator). ``joint=True``: one attention
   segment, the second side's positions restart at 0 (``Example.positions``), so a token's position
   says nothing about which side it is on; the language id does.
3. Language ids (``Example.langs``): 1 + the index of the side's language in ``languages`` (a
   comma-separated list, e.g. ``text,de,zh``; 0 is "none", the id of documents without languages);
   the model needs ``n_langs >= len(languages) + 1``. A language outside the list is an error
   naming it and the list.
4. Masks on both sides: ``src_rate`` / ``tgt_rate`` of each side's non-special tokens
   (select.random_tokens, render.bert_80_10_10), labels under ``labels["mlm"]`` (the MLM head):
   a masked word can be recovered from its translation.
5. ``joint=False`` is the monolingual control with the same data and masks: each side becomes its
   own part (``Example.parts``: its own attention segment, positions from 0), i.e. XLM's MLM on
   the two sentences separately. The retrieval evidence compares the two.
Cost: O(T) per pair. Not covered: XLM's BPE-level language tags in the text, alternating
monolingual/parallel batches (the mixture interleaves them inside one stream).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from codept.data.example import Example
from codept.objectives import render, select
from codept.objectives.spec import Objective


@dataclass(frozen=True)
class Config:
    languages: str = "text,de,zh"  # language table: id = 1 + index ('text' = English)
    src_rate: float = 0.15  # masked share of the source side
    tgt_rate: float = 0.15  # masked share of the target side
    max_side: int = 62  # tokens kept per side (the first ones), [SEP] excluded
    p_swap: float = 0.5  # probability that the target side comes first
    joint: bool = True  # False: each side its own attention segment (monolingual MLM control)
    p_mask: float = 0.8
    p_random: float = 0.1

    # a pair is packed whole (a side cut off its partner teaches nothing): recipes lower max_side
    # unless given, and refuse a given one whose pair is longer than a row (codept.train.loop.row_settings)
    whole_in_row: ClassVar[bool] = True
    row_field: ClassVar[str] = "max_side"
    unit_fields: ClassVar[tuple] = ("max_side",)

    def unit_tokens(self) -> int:
        """The longest pair: each side's max_side tokens and its [SEP]."""
        return 2 * (self.max_side + 1)

    def fit_unit(self, seq_len: int) -> dict:
        return {"max_side": seq_len // 2 - 1} if seq_len >= 4 else {}

    def __post_init__(self):
        for name in ("src_rate", "tgt_rate", "p_swap"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name}={getattr(self, name)} must be in [0, 1]")
        if self.max_side < 1:
            raise ValueError(f"max_side={self.max_side} must be >= 1")
        if not self.table():
            raise ValueError(f"languages={self.languages!r}: name at least one language")

    def table(self) -> dict[str, int]:
        return {x: i + 1 for i, x in enumerate(filter(None, (s.strip() for s in self.languages.split(","))))}


def lang_ids(table: dict[str, int], lang: str) -> int:
    if lang not in table:
        raise ValueError(f"tlm: language {lang!r} is not in objective.tlm.languages={','.join(table)}")
    return table[lang]


def build(vocab: render.Vocab, cfg: Config = Config()):
    table, sep = cfg.table(), vocab.id_of("sep")

    def side(view, rate: float, rng: np.random.Generator):
        ids = np.concatenate([np.asarray(view.input_ids)[:cfg.max_side], [sep]]).astype(np.int32)
        chosen = select.random_tokens(vocab.candidates(ids), rate, rng)
        new, labels = render.bert_80_10_10(ids, render.tokens_as_units(chosen), vocab, rng, cfg.p_mask, cfg.p_random)
        return new, labels, np.full(len(ids), lang_ids(table, view.lang), dtype=np.int32)

    def tlm(pair, rng: np.random.Generator, ctx=None) -> Example:
        first = (pair.src, cfg.src_rate), (pair.tgt, cfg.tgt_rate)
        if rng.random() < cfg.p_swap:
            first = first[::-1]
        (ia, la, ga), (ib, lb, gb) = (side(v, r, rng) for v, r in first)
        ids = np.concatenate([ia, ib])
        positions = np.concatenate([np.arange(len(ia)), np.arange(len(ib))]).astype(np.int32)
        parts = None if cfg.joint else np.repeat([0, 1], [len(ia), len(ib)])
        return Example(ids, np.ones(len(ids), dtype=bool), labels={"mlm": np.concatenate([la, lb])},
                       parts=parts, positions=positions, langs=np.concatenate([ga, gb]))

    return tlm


OBJECTIVE = Objective("tlm", build, Config, heads=("mlm",), views=("pair",))
