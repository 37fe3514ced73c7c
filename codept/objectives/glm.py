"""``glm``: GLM's autoregressive blank infilling, one document -> part A + part B in one segment.

1. Windows of at most ``(max_tokens - 2) / (1 + 2 rate)`` tokens, so that a rendered example
   (window + 2 per span) fits ``max_tokens`` and packing never splits it (set ``max_tokens`` to the
   run's seq_len). ``all_windows`` (default): the windows tile the document from a random phase
   (the first window's length uniform in [1, width], so boundaries move every epoch) and each
   becomes one example (a list: one read serves the whole document, as t5_span does); their spans
   are drawn and rendered for all windows at once (:func:`sample_windows`, :func:`render_windows`:
   each window's Example equals :func:`render_blanks` of its spans, tests). ``all_windows=false``:
   one random window per read (the per-window path).
2. Spans: lengths ~ Poisson(``mean_span``) (at least 1) drawn until they cover ``rate`` (15%) of
   the window (the last one shortened to the budget, codept.objectives.select.budget); placed
   without overlap at uniformly random gaps; a span touching a special token is dropped.
3. Part A: the window with each span replaced by ONE [MASK]; prefix True (bidirectional), 2-D
   positions (position in A, 0).
4. Part B: the spans in a random order, each as ``<sop> x_1 .. x_n`` (input) predicting
   ``x_1 .. x_n <eop>`` (``labels["glm"]``, already shifted: the label of a token is the next
   one, read at its own position by the "glm" head); prefix False (causal, and every token of B
   sees all of A through A's prefix); positions = the position of the span's [MASK] in A, block
   positions 1 .. n + 1. The model needs ``block_positions=True`` (its second position table).
Cost: O(T) NumPy per read, about 30 array operations whatever the number of windows (per window
only its Example); the one-window path costs ~25 Python/NumPy steps per span. Not covered: GLM's
document- and sentence-level span objectives (one long span), multi-task mixing of span lengths.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from codept.data.example import IGNORE, Example
from codept.objectives import render, select
from codept.objectives.spec import Objective


@dataclass(frozen=True)
class Config:
    rate: float = 0.15  # share of the window's tokens inside spans
    mean_span: float = 3.0  # Poisson lambda of span lengths
    max_tokens: int = 256  # longest rendered example (window + 2 per span); set to the run's seq_len
    all_windows: bool = True  # every window of a document is an example (False: one random window per read)
    whole_in_row: ClassVar[bool] = True  # packing must never split an example: recipes check max_tokens <= seq_len

    def __post_init__(self):
        if not 0.0 < self.rate < 1.0 or self.mean_span <= 0 or self.max_tokens < 8:
            raise ValueError(f"glm: rate={self.rate} must be in (0, 1), mean_span={self.mean_span} > 0, "
                             f"max_tokens={self.max_tokens} >= 8")


def span_lengths(budget: int, mean: float, rng: np.random.Generator) -> np.ndarray:
    """Poisson(mean) lengths (>= 1) summing to exactly `budget`."""
    out, left = [], budget
    while left > 0:
        n = min(max(1, int(rng.poisson(mean))), left)
        out.append(n)
        left -= n
    return np.asarray(out, dtype=np.int64)


def place(lengths: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """(m, 2) non-overlapping [start, end) spans of the given lengths at random gaps in n tokens."""
    free = n - int(lengths.sum())
    gaps = np.sort(rng.integers(0, free + 1, size=len(lengths)))  # free tokens before each span
    starts = gaps + np.concatenate([[0], np.cumsum(lengths)[:-1]])
    return np.stack([starts, starts + lengths], axis=1)


def render_blanks(ids: np.ndarray, spans: np.ndarray, order: np.ndarray, vocab: render.Vocab) -> Example:
    """Part A (spans -> one [MASK] each) + part B (spans in `order`), see the module docstring.
    `spans`: non-overlapping, each at least one token long (any order). Python lists over the
    window's ids: a window holds ~200 tokens and ~10 spans, where each NumPy call (the index
    arithmetic of 7481001: ~40 of them) cost more than the list work (~3x faster, same output:
    tests/test_objective_pins.py)."""
    sop, eop, mask = vocab.id_of("sop"), vocab.id_of("eop"), vocab.mask_id
    ids_l = ids.tolist()
    st, en = spans[:, 0].tolist(), spans[:, 1].tolist()
    a: list[int] = []
    mask_pos = [0] * len(st)  # position of each span's [MASK] in part A
    at = 0
    for k in sorted(range(len(st)), key=st.__getitem__):
        a += ids_l[at:st[k]]
        mask_pos[k] = len(a)
        a.append(mask)
        at = en[k]
    a += ids_l[at:]
    n_a = len(a)
    b_in, b_lab, pos, block = a, [IGNORE] * n_a, list(range(n_a)), [0] * n_a  # part A, then B appended
    for k in order.tolist():
        piece = ids_l[st[k]:en[k]]
        b_in += [sop] + piece  # <sop> x_1 .. x_n  predicts  x_1 .. x_n <eop>
        b_lab += piece + [eop]
        pos += [mask_pos[k]] * (len(piece) + 1)
        block += range(1, len(piece) + 2)
    prefix = np.zeros(len(b_in), bool)
    prefix[:n_a] = True
    return Example(
        input_ids=np.array(b_in, np.int32),
        prefix=prefix,
        labels={"glm": np.array(b_lab, np.int32)},
        positions=np.array(pos, np.int32),
        block_positions=np.array(block, np.int32),
    )


def _clean(cand: np.ndarray, st: np.ndarray, en: np.ndarray) -> np.ndarray | None:
    """Which spans [st, en) hold no special token (``cand`` False); None when the tokens hold none
    (the usual case: every span is kept)."""
    if cand.all():
        return None
    bad = np.concatenate([[0], np.cumsum(~cand)])
    return bad[en] == bad[st]


def _excl(x: np.ndarray, groups: np.ndarray, n: int) -> np.ndarray:
    """Exclusive cumulative sum of x within consecutive groups (``groups`` non-decreasing, in [0, n))."""
    c = np.cumsum(x)
    base = np.concatenate([[0], np.cumsum(np.bincount(groups, x, minlength=n))]).astype(c.dtype)[:-1]
    return c - x - base[groups]


def sample_windows(starts: np.ndarray, n: int, rate: float, mean: float, rng: np.random.Generator):
    """Spans of every window [starts[w], starts[w + 1] or n) at once, drawn as :func:`span_lengths` and
    :func:`place` draw them for one window: (st, en, win) sorted by start (global token indices, the
    window of each span) and the part-B order (a uniform permutation within each window)."""
    w = len(starts)
    size = np.diff(np.append(starts, n))
    x = rate * size
    budgets = (np.floor(x) + (rng.random(w) < x - np.floor(x))).astype(np.int64)  # select.budget per window
    seg = np.repeat(np.arange(w), budgets)  # each length >= 1: a window never needs more draws than its budget
    draws = np.maximum(rng.poisson(mean, size=len(seg)), 1)
    before = _excl(draws, seg, w)
    keep = before < budgets[seg]
    win = seg[keep]
    lengths = np.minimum(draws, budgets[seg] - before)[keep]
    free = size - np.bincount(win, lengths, minlength=w).astype(np.int64)
    gaps = rng.integers(0, free[win] + 1)
    gaps = gaps[np.lexsort((gaps, win))]  # sorted within each window (win is non-decreasing)
    st = starts[win] + gaps + _excl(lengths, win, w)
    order = np.lexsort((rng.random(len(win)), win))
    return st, st + lengths, win, order


def render_windows(ids: np.ndarray, starts: np.ndarray, st: np.ndarray, en: np.ndarray, win: np.ndarray,
                   order: np.ndarray, vocab: render.Vocab) -> list[Example]:
    """One Example per window, each equal to render_blanks(window, its spans, its order): every
    window's part A and part B written into shared flat arrays by index arithmetic."""
    sop, eop = vocab.id_of("sop"), vocab.id_of("eop")
    t, w = len(ids), len(starts)
    size = np.diff(np.append(starts, t))
    n_spans = np.bincount(win, minlength=w)
    edge = np.zeros(t + 1, np.int32)
    edge[st] += 1
    edge[en] -= 1
    keep_a = np.cumsum(edge[:t]) <= 0  # outside every span, or (below) a span's first token
    keep_a[st] = True
    src = ids.astype(np.int32)
    src[st] = vocab.mask_id
    at_a = np.flatnonzero(keep_a)
    win_a = np.searchsorted(starts, at_a, side="right") - 1
    n_a = np.bincount(win_a, minlength=w)
    rank_a = (np.arange(len(at_a)) - np.concatenate([[0], np.cumsum(n_a)[:-1]])[win_a]).astype(np.int32)
    lens = size + 2 * n_spans
    off = np.concatenate([[0], np.cumsum(lens)])
    total = int(off[-1])
    inp, lab = np.empty(total, np.int32), np.full(total, IGNORE, np.int32)
    pos, blk, prefix = np.empty(total, np.int32), np.zeros(total, np.int32), np.zeros(total, bool)
    out_a = off[win_a] + rank_a
    inp[out_a], pos[out_a], prefix[out_a] = src[at_a], rank_a, True
    mask_pos = np.empty(t, np.int32)
    mask_pos[at_a] = rank_a
    so, lo, wo = st[order], en[order] - st[order], win[order]
    piece = lo + 1  # <sop> x_1 .. x_n
    j = np.arange(int(piece.sum())) - np.repeat(np.cumsum(piece) - piece, piece)
    out_b = np.repeat(off[wo] + n_a[wo] + _excl(piece, wo, w), piece) + j
    tok = np.repeat(so, piece) + j
    inp[out_b] = np.where(j == 0, sop, ids[np.maximum(tok - 1, 0)])
    lab[out_b] = np.where(j == np.repeat(lo, piece), eop, ids[np.minimum(tok, t - 1)])
    pos[out_b], blk[out_b] = np.repeat(mask_pos[so], piece), j + 1
    return [Example(input_ids=inp[a:b], prefix=prefix[a:b], labels={"glm": lab[a:b]}, positions=pos[a:b],
                    block_positions=blk[a:b]) for a, b in zip(off[:-1].tolist(), off[1:].tolist())]


def build(vocab: render.Vocab, cfg: Config = Config()):
    vocab.id_of("sop"), vocab.id_of("eop")  # fail at build time on a tokenizer without GLM's tokens
    width = int((cfg.max_tokens - 2) / (1 + 2 * cfg.rate))

    def glm(view, rng: np.random.Generator, ctx=None) -> Example | list[Example]:
        ids = np.asarray(view.input_ids)
        if cfg.all_windows and len(ids) > width:
            first = int(rng.integers(1, width + 1))  # the phase: the first window's length
            starts = np.array([0, *range(first, len(ids), width)], np.int64)
            st, en, win, order = sample_windows(starts, len(ids), cfg.rate, cfg.mean_span, rng)
            ok = _clean(vocab.candidates(ids), st, en)
            if ok is not None:
                rank = np.cumsum(ok) - 1  # a kept span's index among the kept
                order = rank[order[ok[order]]]
                st, en, win = st[ok], en[ok], win[ok]
            return render_windows(ids, starts, st, en, win, order, vocab)
        start = int(rng.integers(0, len(ids) - width + 1)) if len(ids) > width else 0
        ids = ids[start:start + width]
        lengths = span_lengths(select.budget(len(ids), cfg.rate, rng), cfg.mean_span, rng)
        spans = place(lengths, len(ids), rng)
        ok = _clean(vocab.candidates(ids), spans[:, 0], spans[:, 1])
        if ok is not None:
            spans = spans[ok]
        return render_blanks(ids, spans, rng.permutation(len(spans)), vocab)

    return glm


# part B, labels already shifted; its 2-D positions need the second position table
OBJECTIVE = Objective("glm", build, Config, heads=("glm",), views=("code", "text"), model={"block_positions": True})
