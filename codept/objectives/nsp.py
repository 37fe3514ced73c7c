"""``nsp``: BERT's next-sentence prediction on a text view, with MLM on the same input.

1. Budget ``max_tokens - 3``, shortened with ``short_seq_prob`` (codept.objectives.segments).
2. A chunk of whole sentences from a uniform start (at least 2); A = its first ``a_end`` sentences.
3. With probability 1 - ``p_negative``: B = the rest of the chunk, the true continuation (label 0,
   IsNext). Otherwise a negative (label 1, NotNext), by ``negatives``:
   - ``random`` (BERT): B = whole sentences from a uniform start in another document of the
     source, drawn with the example's rng (codept.data.stream.Context.partner);
   - ``same_document``: B = whole sentences of this document that neither overlap A nor touch it:
     B ends at least one sentence before A starts, or starts at least one sentence after A ends
     (never the true next sentence, never the sentence just before A). Same topic in both
     classes, which removes the topic shortcut of random-document negatives (RoBERTa's critique).
     If A leaves no such place, A shrinks to the document's first sentence and B starts at the
     third.
4. Truncate A + B to the budget, render ``[CLS] A [SEP] B [SEP]`` (types 0/1, ``scalars["nsp"]``),
   MLM at ``mlm_rate``.
5. ``walk`` (default) (BERT's ``create_instances_from_document``): instead of one pair from a uniform
   start, pairs chunk after chunk from sentence 0 to the end of the document (a list of examples);
   a chunk whose B came from elsewhere gives its unused sentences back to the next chunk, as BERT
   does. Every sentence then reaches a pair once per epoch (but a lone last sentence), and the cost
   of reading a view is shared by all its pairs.
   Rendering, grouping and the defaults (BERT's: walked, pairs of the row): codept.objectives.segments,
   steps 7-8. ``walk=False``: one pair from a uniform start per read.
Documents that cannot give a pair return None (the stream drops them; ``eligible`` says which):
fewer than 2 sentences, and for ``same_document`` fewer than 3. ``random`` needs a Context with
at least 2 documents (ValueError otherwise). Cost: O(T) per document (+ the partner's view read).
Not covered: BERT's ``dupe_factor`` (epochs draw other masks instead).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from codept.data.example import Example
from codept.objectives import render, segments as S
from codept.objectives.spec import Objective

NEGATIVES = ("random", "same_document")


@dataclass(frozen=True)
class Config:
    max_tokens: int = 512  # [CLS] A [SEP] B [SEP] at most this long (BERT / ALBERT: max_seq_length); recipes lower it to the row
    whole_in_row: ClassVar[bool] = True  # a split pair loses its frame: recipes check max_tokens <= seq_len
    short_seq_prob: float = 0.1
    p_negative: float = 0.5  # share of NotNext pairs (label 1)
    negatives: str = "random"  # 'random' (another document, BERT) or 'same_document' (non-adjacent)
    mlm_rate: float = 0.15
    p_mask: float = 0.8
    p_random: float = 0.1
    walk: bool = True  # pairs chunk after chunk through the whole document (BERT); False: one pair from a uniform start per read
    group_tokens: int = 0  # walk: consecutive pairs grouped into multi-part Examples of at most this many tokens (0 = max_tokens; 1 = one per pair)
    default_row_share: ClassVar[float] = 1.0  # unless given, recipes set max_tokens = min(max_tokens, seq_len) (BERT: pairs fill the row)

    def __post_init__(self):
        S.check(self.max_tokens, self.short_seq_prob, self.mlm_rate)
        if not 0 <= self.group_tokens <= self.max_tokens:
            raise ValueError(f"group_tokens={self.group_tokens} must be in [0, max_tokens={self.max_tokens}] "
                             "(a group never outgrows one pair's budget, so it fits the row; 0 = max_tokens)")
        if self.negatives not in NEGATIVES:
            raise ValueError(f"negatives={self.negatives!r}: expected one of {NEGATIVES}")
        if not 0.0 <= self.p_negative <= 1.0:
            raise ValueError(f"p_negative={self.p_negative} must be in [0, 1]")


def eligible(view, negatives: str = "random") -> bool:
    return len(view.sentences) >= (3 if negatives == "same_document" else 2)


def same_document_negative(sents: np.ndarray, a: tuple[int, int], budget: int,
                           rng: np.random.Generator) -> tuple[tuple[int, int], tuple[int, int]]:
    """(A, B) sentence-index ranges -> (A's sentences, B's token range): B's first sentence uniform
    over the places that neither overlap nor touch A (module docstring, step 3)."""
    n = len(sents)
    first, end = a
    before = np.arange(0, max(0, first - 1))  # B starts and ends before sentence first - 1
    after = np.arange(end + 1, n)
    starts = np.concatenate([before, after])
    if len(starts) == 0:  # A covers too much of the document: A = sentence 0, B from sentence 2
        first, end, starts = 0, 1, np.arange(2, n)
    s = int(starts[rng.integers(0, len(starts))])
    stop = first - 1 if s < first else None  # a B before A must end before the sentence preceding A
    return (first, end), S.run_from(sents, s, budget, stop)


def build(vocab: render.Vocab, cfg: Config = Config()):
    mlm = (cfg.mlm_rate, cfg.p_mask, cfg.p_random)

    def pair(sents: np.ndarray, ids: np.ndarray, start: int | None, rng: np.random.Generator,
             ctx) -> tuple[tuple, int]:
        """One pair (ids of A, ids of B, label) from the chunk at ``start`` (None: a uniform start), and
        where the next chunk of a walk starts: after the chunk, or at B's first sentence when B was
        not used (BERT)."""
        budget = S.target_length(cfg.max_tokens - 3, cfg.short_seq_prob, rng)
        if start is None:
            start = int(rng.integers(0, len(sents) - 1))
        first, end = S.chunk(sents, start, budget)
        b_first = S.split_chunk(first, end, rng)
        negative = rng.random() < cfg.p_negative
        after = b_first if negative else end
        other = ids
        if not negative:
            a, b = S.tokens_of(sents, first, b_first), S.tokens_of(sents, b_first, end)
        elif cfg.negatives == "same_document":
            (first, b_first), b = same_document_negative(sents, (first, b_first), budget, rng)
            a = S.tokens_of(sents, first, b_first)
            b = (b[0], min(b[1], b[0] + max(1, budget - (a[1] - a[0]))))
        else:
            a = S.tokens_of(sents, first, b_first)
            b, other = random_document_segment(ctx, rng, max(1, budget - (a[1] - a[0])))
        a, b = S.truncate_pair(a, b, cfg.max_tokens - 3, rng)
        return (ids[a[0]:a[1]], np.asarray(other)[b[0]:b[1]], int(negative)), after

    def nsp(view, rng: np.random.Generator, ctx=None) -> Example | list[Example] | None:
        if not eligible(view, cfg.negatives):
            return None
        sents, ids = np.asarray(view.sentences), np.asarray(view.input_ids)
        if not cfg.walk:
            return S.render_pair(*pair(sents, ids, None, rng, ctx)[0], "nsp", vocab, rng, *mlm)
        return S.render_pairs(S.walk(lambda start: pair(sents, ids, start, rng, ctx), len(sents)), "nsp", vocab,
                              rng, *mlm, group=cfg.group_tokens or cfg.max_tokens)

    return nsp


def random_document_segment(ctx, rng: np.random.Generator, budget: int) -> tuple[tuple[int, int], np.ndarray]:
    """(token range, ids) of whole sentences from a uniform start in another document."""
    if ctx is None:
        raise ValueError("nsp with negatives='random' needs the stream's Context (another document of the source)")
    _, doc = ctx.partner(rng)
    sents = np.asarray(doc.sentences)
    if len(sents) == 0:  # an empty partner: one token of nothing is impossible, take its whole (empty) text
        return (0, 0), np.asarray(doc.input_ids)
    start = int(rng.integers(0, len(sents)))
    return S.run_from(sents, start, budget), np.asarray(doc.input_ids)


# the pair label, and MLM on the same input (mlm_rate > 0)
OBJECTIVE = Objective("nsp", build, Config, heads=("nsp", "mlm"), views=("text",))
