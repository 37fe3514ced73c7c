"""Sentence segments for the pair objectives (NSP, SOP): whole sentences up to a target length.

The shared builder of codept.objectives.nsp and .sop, following BERT's and ALBERT's
``create_pretraining_data`` for one document (a codept.text.view.TextView: ``sentences`` are token
ranges that tile the document):

1. ``target_length``: the token budget of A + B. With probability ``short_seq_prob`` (BERT: 0.1) a
   uniform length in [2, budget] instead of the full budget, so the model also sees short inputs.
2. ``chunk``: from a start sentence, take whole sentences until the budget is reached (at least
   ``min_sentences`` of them when the document has that many): BERT's ``current_chunk``.
3. ``split_chunk``: A = the first ``a_end`` sentences of the chunk, ``a_end`` uniform in
   [1, k - 1] (k sentences), B = the rest; the true continuation of A.
4. ``run_from``: a segment of whole sentences from a given start up to a token budget (the
   negative B of NSP, taken from another document or from a non-adjacent place of the same one).
5. ``truncate_pair``: while A + B exceed the budget, drop one token of the longer side, from its
   front or its back with probability 1/2 each (BERT's ``truncate_seq_pair``).
6. ``render_pair``: ``[CLS] A [SEP] B [SEP]``, types 0 for [CLS] A [SEP] and 1 for B [SEP], one
   attention segment (no ``parts``), optional MLM (select.random_tokens + render.bert_80_10_10 over
   the non-special tokens), the pair label as ``scalars[name]`` (one value for the document: the
   pair head reads it on the first token, [CLS]).
7. ``walk``: pairs chunk after chunk from sentence 0 while at least 2 sentences remain (BERT's
   loop over a document), each pair saying where the next chunk starts; ``render_pairs`` renders all
   pairs of the walk at once and groups consecutive pairs into multi-part Examples (each pair a
   part: its own segment and label once packed).
8. Defaults of nsp / sop (BERT's and ALBERT's data): the document walked, ``max_tokens`` = the row
   (512 unless the recipe's row is shorter), groups of at most ``group_tokens`` (0: ``max_tokens``)
   tokens. The earlier CPU-sized default (64-token pairs, one per read) delivered 0.2-0.3x HF's list
   collator's tokens/s: the cost is per pair, not per token (docs/benchmarks.md).
Segments are token ranges ``(start, end)`` into the document; nothing is copied until rendering.
All draws come from the caller's rng (the stream's (seed, epoch, index) generator).
Cost: O(sentences) to build a chunk, O(T) to render. Not covered: BERT's reuse of the sentences
a random-next example leaves unused (a later epoch draws another start instead), sentence
splitting itself (codept.text.segment, at prepare time).
"""

from __future__ import annotations

import numpy as np

from codept.data.example import Example
from codept.objectives import render, select


def target_length(budget: int, short_seq_prob: float, rng: np.random.Generator) -> int:
    """The token budget of one pair: ``budget``, or with ``short_seq_prob`` uniform in [2, budget]."""
    if budget < 2:
        raise ValueError(f"budget={budget}: a pair needs at least 2 tokens (one per side)")
    if not 0.0 <= short_seq_prob <= 1.0:
        raise ValueError(f"short_seq_prob={short_seq_prob} must be in [0, 1]")
    return int(rng.integers(2, budget + 1)) if rng.random() < short_seq_prob else budget


def chunk(sentences: np.ndarray, start: int, target: int, min_sentences: int = 2) -> tuple[int, int]:
    """Sentences [start, end): whole sentences from `start` until their tokens reach `target`,
    at least `min_sentences` (as many as remain when fewer)."""
    lengths = sentences[start:, 1] - sentences[start:, 0]
    reach = int(np.searchsorted(np.cumsum(lengths), target, side="left")) + 1  # sentences to reach target
    k = min(len(lengths), max(reach, min_sentences))
    return start, start + k


def split_chunk(first: int, end: int, rng: np.random.Generator) -> int:
    """The first sentence of B: uniform in [first + 1, end - 1] (the chunk needs >= 2 sentences)."""
    if end - first < 2:
        raise ValueError(f"sentences [{first}, {end}): splitting needs at least 2")
    return int(rng.integers(first + 1, end))


def tokens_of(sentences: np.ndarray, first: int, end: int) -> tuple[int, int]:
    """Token range of sentences [first, end)."""
    return int(sentences[first, 0]), int(sentences[end - 1, 1])


def run_from(sentences: np.ndarray, start: int, budget: int, stop: int | None = None) -> tuple[int, int]:
    """Token range of whole sentences from `start` (at least one) until `budget` tokens are reached,
    never past sentence `stop` (exclusive; default: the end of the document)."""
    stop = len(sentences) if stop is None else stop
    first, end = chunk(sentences[:stop], start, budget, min_sentences=1)
    return tokens_of(sentences, first, end)


def truncate_pair(a: tuple[int, int], b: tuple[int, int], budget: int,
                  rng: np.random.Generator) -> tuple[tuple[int, int], tuple[int, int]]:
    """Trim the longer of the token ranges a, b by one token (front or back, 1/2 each) until
    len(a) + len(b) <= budget. Both sides keep at least one token when budget >= 2."""
    (a0, a1), (b0, b1) = a, b
    excess = (a1 - a0) + (b1 - b0) - budget
    if excess <= 0:
        return (a0, a1), (b0, b1)
    # one draw per trimmed token, in the order a loop trimming one token at a time would make them
    front, on_a = rng.random(excess) < 0.5, _trim_sides(a1 - a0, b1 - b0, excess)
    fa, fb = int((front & on_a).sum()), int((front & ~on_a).sum())
    na = int(on_a.sum())
    return (a0 + fa, a1 - (na - fa)), (b0 + fb, b1 - (excess - na - fb))


def _trim_sides(la: int, lb: int, steps: int) -> np.ndarray:
    """(steps,) bool: does truncate_pair's loop trim A (True) or B at each step? The longer side until
    both are equal, then B (a tie trims B), A, B, ... alternately."""
    on_a = np.zeros(steps, bool)
    d = min(abs(la - lb), steps)
    if la > lb:
        on_a[:d] = True
    on_a[d + 1::2] = True
    return on_a


def render_pair(ids_a: np.ndarray, ids_b: np.ndarray, label: int, name: str, vocab: render.Vocab,
                rng: np.random.Generator, mlm_rate: float = 0.0, p_mask: float = 0.8,
                p_random: float = 0.1) -> Example:
    """``[CLS] A [SEP] B [SEP]`` with types 0/1, the label as ``scalars[name]`` and MLM labels
    (``labels["mlm"]``) when mlm_rate > 0."""
    cls, sep = vocab.id_of("cls"), vocab.id_of("sep")
    ids = np.concatenate([[cls], ids_a, [sep], ids_b, [sep]]).astype(np.int32)
    types = np.zeros(len(ids), dtype=np.int32)
    types[len(ids_a) + 2:] = 1
    labels = {}
    if mlm_rate > 0:
        chosen = select.random_tokens(vocab.candidates(ids), mlm_rate, rng)
        ids, labels["mlm"] = render.bert_80_10_10(ids, render.tokens_as_units(chosen), vocab, rng, p_mask, p_random)
    return Example(ids, np.ones(len(ids), dtype=bool), labels=labels, scalars={name: int(label)}, types=types)


def render_pairs(pairs: list[tuple[np.ndarray, np.ndarray, int]], name: str, vocab: render.Vocab,
                 rng: np.random.Generator, mlm_rate: float = 0.0, p_mask: float = 0.8, p_random: float = 0.1,
                 group: int = 0) -> list[Example]:
    """Every ``(ids_a, ids_b, label)`` of a walk rendered at once, as :func:`render_pair` renders one
    (the same tokens, types and label; MLM: each pair's own select.budget of its candidates, a
    uniform choice of them, 80/10/10 per token), consecutive pairs grouped into multi-part Examples
    of at most ``group`` tokens (each pair one part: its own segment and label when packed, so the
    model sees it as when it was an Example of its own; a longer pair alone; 0 = one Example per
    pair). One concatenation and ~15 array operations per read instead of per pair."""
    cls, sep = vocab.id_of("cls"), vocab.id_of("sep")
    one_cls, one_sep = np.array([cls], np.int32), np.array([sep], np.int32)
    pieces, sizes = [], np.empty((len(pairs), 2), np.int64)
    for i, (a, b, _) in enumerate(pairs):
        pieces += [one_cls, a, one_sep, b, one_sep]
        sizes[i] = len(a) + 2, len(b) + 1
    ids = np.concatenate(pieces).astype(np.int32) if pieces else np.zeros(0, np.int32)
    lens = sizes.sum(1)
    pair_of = np.repeat(np.arange(len(pairs)), lens)
    types = np.repeat(np.tile(np.array([0, 1], np.int32), len(pairs)), sizes.ravel())
    labels = {}
    if mlm_rate > 0:
        cand = np.flatnonzero(vocab.candidates(ids))
        owner = pair_of[cand]
        count = np.bincount(owner, minlength=len(pairs))
        x = mlm_rate * count
        k = np.floor(x).astype(np.int64) + (rng.random(len(pairs)) < x - np.floor(x))  # select.budget per pair
        srt = np.lexsort((rng.random(len(cand)), owner))  # a uniform order of each pair's candidates
        rank = np.arange(len(cand)) - (np.cumsum(count) - count)[owner[srt]]
        chosen = np.zeros(len(ids), bool)
        chosen[cand[srt][rank < k[owner[srt]]]] = True
        ids, labels["mlm"] = render.bert_80_10_10(ids, render.tokens_as_units(chosen), vocab, rng, p_mask, p_random)
    bounds = np.concatenate([[0], np.cumsum(lens)]).tolist()
    ends = np.cumsum(render.group_sizes(lens.tolist(), group)).tolist()
    groups = list(zip([0, *ends[:-1]], ends))
    out = []
    for g0, g1 in groups:
        a, b = bounds[g0], bounds[g1]
        parts = None if g1 - g0 == 1 else (pair_of[a:b] - g0)
        value = int(pairs[g0][2]) if parts is None else [int(p[2]) for p in pairs[g0:g1]]
        out.append(Example(ids[a:b], np.ones(b - a, bool), labels={k: v[a:b] for k, v in labels.items()},
                           scalars={name: value}, parts=parts, types=types[a:b]))
    return out


def walk(pair_at, n_sentences: int) -> list:
    """``pair_at(start) -> (pair, next start)`` from sentence 0 while 2 or more sentences remain: the
    pairs in order (what :func:`render_pairs` renders)."""
    out, start = [], 0
    while n_sentences - start >= 2:
        example, after = pair_at(start)
        if after <= start:
            raise ValueError(f"a pair from sentence {start} said the next starts at {after}: no progress")
        out.append(example)
        start = after
    return out


def check(max_tokens: int, short_seq_prob: float, mlm_rate: float) -> None:
    """The settings every pair objective shares; ValueError naming the value and the rule."""
    if max_tokens < 5:
        raise ValueError(f"max_tokens={max_tokens}: [CLS] A [SEP] B [SEP] needs at least 5 tokens")
    if not 0.0 <= short_seq_prob <= 1.0:
        raise ValueError(f"short_seq_prob={short_seq_prob} must be in [0, 1]")
    if not 0.0 <= mlm_rate <= 1.0:
        raise ValueError(f"mlm_rate={mlm_rate} must be in [0, 1]")
