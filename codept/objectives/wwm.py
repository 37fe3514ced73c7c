"""``wwm``: whole-word masking; the units come from the view's offsets and structure, never from
tokenizer prefixes (``##``, ``Ġ``) or whitespace.

1. Units (select.runs over a per-token unit id; a token belongs to exactly one unit or none):
   * TextView: ``words`` -- the words of codept.text.build: regex words for alphabetic scripts,
     jieba words for Han runs (user dictionary: ``codept prepare-text --user-dict``; it is part of the
     views' cache key), a BPE token reaching into the next word joins both into one unit.
   * CodeView, ``code_units="leaf"``: AST leaves (``leaf``: ``foo``, ``.``, ``bar``, ``(``, ...);
     ``"ident"``: only identifiers (``idents``), every other token stays unmasked.
   * ``subwords=True`` (code): units are further cut at camelCase / snake_case / digit boundaries
     (select.subword_units: ``parseHTTPResponse`` -> parse | HTTP | Response).
2. Select whole units until ``rate`` (15%) of the candidate tokens is spent (select.disjoint_units:
   a shuffled order, the prefix that fits by one cumulative sum).
3. Render 80/10/10 per unit (render.bert_80_10_10): a whole word is masked, replaced (every token
   by an independent random ordinary id) or kept together. Random replacement is kept (HF's
   whole-word path turns it off).
4. Bidirectional; labels under ``labels["mlm"]`` (the mlm head).
Cost: O(T) NumPy per document (+ one regex pass over the text with ``subwords``). Not covered:
re-segmenting a view at training time (a different user dictionary needs a new prepare-text).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from codept.data.example import Example
from codept.objectives import render, select
from codept.objectives.spec import Objective

CODE_UNITS = ("leaf", "ident")


@dataclass(frozen=True)
class Config:
    rate: float = 0.15
    p_mask: float = 0.8
    p_random: float = 0.1
    code_units: str = "leaf"  # code views: "leaf" (AST leaves) or "ident" (identifiers only)
    subwords: bool = False  # code views: cut units at camelCase / snake_case boundaries

    def __post_init__(self):
        if self.code_units not in CODE_UNITS:
            raise ValueError(f"wwm: code_units={self.code_units!r} must be one of {CODE_UNITS}")


def word_units(view, cfg: Config) -> np.ndarray:
    """(W, 2) token ranges of the whole-word units of a TextView or CodeView (see the module doc)."""
    if hasattr(view, "words"):  # TextView
        return select.runs(view.words)
    if cfg.code_units == "leaf":
        units = select.runs(view.leaf)
    else:
        idents = np.asarray(view.idents)
        units = np.unique(idents[:, :2].astype(np.int64), axis=0) if len(idents) else np.zeros((0, 2), np.int64)
        units = _first_of_overlaps(units)
    if cfg.subwords:
        units = select.subword_units(view.text, np.asarray(view.offsets), units)
    return units


def _first_of_overlaps(units: np.ndarray) -> np.ndarray:
    """Sorted ranges without overlaps: a range starting before the previous one ends is dropped (a
    BPE token shared by two identifiers, ``a,b``, joins the first)."""
    if len(units) < 2:
        return units
    end = np.maximum.accumulate(units[:, 1])
    keep = np.concatenate([[True], units[1:, 0] >= end[:-1]])
    return units[keep]


def build(vocab: render.Vocab, cfg: Config = Config()):
    def wwm(view, rng: np.random.Generator, ctx=None) -> Example:
        ids = np.asarray(view.input_ids)
        units = select.disjoint_units(word_units(view, cfg), vocab.candidates(ids), cfg.rate, rng)
        new, labels = render.bert_80_10_10(ids, units, vocab, rng, cfg.p_mask, cfg.p_random)
        return Example(new, np.ones(len(ids), dtype=bool), labels={"mlm": labels})

    return wwm


# code_units="ident" reads the identifiers (structure); "leaf" runs on token-only views too (lexemes)
OBJECTIVE = Objective("wwm", build, Config, heads=("mlm",), views=("code", "text"),
                      structure=lambda cfg: cfg.code_units == "ident")
