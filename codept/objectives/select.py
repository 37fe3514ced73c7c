"""WHERE to corrupt: selections over one document, as boolean (T,) masks or unit lists.

Pure functions of (arrays, rng); they never modify their inputs. Rendering (HOW: 80/10/10,
sentinels, ...) is codept.objectives.render.

1. ``budget(n, rate, rng)``: how many tokens a rate buys, with probabilistic rounding so the
   expected count is exactly ``rate * n`` (no bias on short documents).
2. ``random_tokens``: that many candidate tokens, uniformly without replacement (BERT MLM).
3. ``whole_spans``: shuffle candidate spans, keep each that fits the remaining budget and overlaps
   nothing kept (syntax units, identifiers, leaves, words). Returns the kept spans in token order.
4. ``runs`` / ``subword_units``: units from per-token ids (TextView words, CodeView leaves), cut at
   camelCase / snake_case boundaries; ``disjoint_units``: whole non-overlapping units up to the budget,
   vectorised (wwm, phrase).
5. ``geometric_spans``: SpanBERT spans of Geometric(0.2) words truncated at 10 (mean 3.8), anchored
   at word starts; ``t5_noise_mask``: T5's random_spans_noise_mask (seqio).
Cost: O(T) for tokens; spans O(S + T) after an O(S) shuffle; geometric spans O(T) + O(K) Python
steps for K spans. Not covered: span selection that respects sentence boundaries.
"""

from __future__ import annotations

import numpy as np


def budget(n: int, rate: float, rng: np.random.Generator) -> int:
    """floor(rate * n) or one more, with probability equal to the fractional part."""
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"rate={rate} must be in [0, 1]")
    x = rate * n
    k = int(np.floor(x))
    return k + int(rng.random() < x - k)


def random_tokens(candidates: np.ndarray, rate: float, rng: np.random.Generator) -> np.ndarray:
    """Boolean (T,) selection of about rate * candidates.sum() candidate positions."""
    idx = np.flatnonzero(candidates)
    k = budget(len(idx), rate, rng)
    out = np.zeros(len(candidates), dtype=bool)
    out[rng.choice(idx, size=k, replace=False)] = True
    return out


def whole_spans(spans: np.ndarray, candidates: np.ndarray, rate: float, rng: np.random.Generator) -> np.ndarray:
    """Non-overlapping spans (K, 2) [start, end) chosen from `spans` (S, 2+) up to a budget of
    rate * candidates.sum() tokens; a span touching a non-candidate token is never chosen."""
    limit = budget(int(candidates.sum()), rate, rng)
    if limit == 0 or len(spans) == 0:
        return np.zeros((0, 2), dtype=np.int64)
    se = spans[:, :2].astype(np.int64)
    lengths = se[:, 1] - se[:, 0]
    # spans made only of candidate tokens (prefix sums: O(S))
    bad = np.concatenate([[0], np.cumsum(~candidates)])
    ok = (lengths > 0) & (lengths <= limit) & (bad[se[:, 1]] - bad[se[:, 0]] == 0)
    order = rng.permutation(np.flatnonzero(ok))
    taken = np.zeros(len(candidates) + 1, dtype=bool)
    kept = []
    left = limit
    for i in order.tolist():
        s, e = se[i]
        n = e - s
        if n <= left and not taken[s:e].any():
            taken[s:e] = True
            kept.append((s, e))
            left -= n
            if left == 0:
                break
    kept.sort()
    return np.asarray(kept, dtype=np.int64).reshape(-1, 2)


# -- units ------------------------------------------------------------------------------------------
# A unit is a (start, end) token range masked as one piece: a word, an AST leaf, a sub-word, a phrase.


def runs(ids: np.ndarray) -> np.ndarray:
    """(W, 2) int64 token ranges of the maximal runs of equal ids >= 0 (-1 tokens belong to none):
    TextView.words or CodeView.leaf -> word / leaf units. O(T), vectorised."""
    w = np.asarray(ids)
    if len(w) == 0:
        return np.zeros((0, 2), dtype=np.int64)
    change = np.empty(len(w), dtype=bool)
    change[0] = True
    np.not_equal(w[1:], w[:-1], out=change[1:])
    starts = np.flatnonzero(change)
    ends = np.append(starts[1:], len(w))
    keep = w[starts] >= 0
    return np.stack([starts[keep], ends[keep]], axis=1).astype(np.int64)


_SUBWORD_BREAK = None


def subword_units(text: str, offsets: np.ndarray, units: np.ndarray) -> np.ndarray:
    """Split units at camelCase / snake_case / digit boundaries of `text` (``parseHTTPResponse`` ->
    parse|HTTP|Response, ``max_len`` -> max|_len): a token starts a new unit when a sub-word break
    falls in (previous token's start, its start]. A BPE token holding a break keeps its whole self in
    the earlier sub-word. O(chars) regex + O(T) NumPy."""
    import re

    global _SUBWORD_BREAK
    if _SUBWORD_BREAK is None:
        _SUBWORD_BREAK = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])|(?<=[A-Za-z])(?=[0-9])|_+")
    if len(units) == 0:
        return units
    br = np.zeros(len(text) + 1, dtype=np.int64)
    for m in _SUBWORD_BREAK.finditer(text):
        br[m.start()] = 1
    cum = np.cumsum(br)  # cum[c]: breaks at chars <= c
    starts = offsets[:, 0].astype(np.int64)
    T = len(starts)
    new = np.zeros(T, dtype=bool)
    new[units[:, 0]] = True
    inside = np.ones(T, dtype=bool)
    inside[units[:, 0]] = False
    tok = np.arange(1, T)
    split = inside[1:] & (cum[starts[1:]] - cum[starts[:-1]] > 0)
    new[tok[split]] = True
    unit_of = np.full(T + 1, -1, dtype=np.int64)  # unit id of every token in a unit, -1 outside
    lengths = units[:, 1] - units[:, 0]
    covered = np.repeat(units[:, 0], lengths) + (np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths))
    ids = np.cumsum(new) - 1
    unit_of[covered] = ids[covered]
    return runs(unit_of[:T])


def disjoint_units(units: np.ndarray, candidates: np.ndarray, rate: float, rng: np.random.Generator,
                   first: np.ndarray | None = None) -> np.ndarray:
    """Like :func:`whole_spans` for units that never overlap (words, leaves, runs): shuffle the units
    made only of candidate tokens, take them in that order while they fit ``budget(rate * candidates)``
    tokens (a unit that does not fit is skipped, as in whole_spans). ``first`` (U,) bool: those units
    come before the others in the order (each group shuffled; ERNIE's phrases before single words).
    Vectorised: the prefix that fits is one cumulative sum; only the few units after it are visited
    one by one. Returns (K, 2) in token order."""
    limit = budget(int(candidates.sum()), rate, rng)
    if limit == 0 or len(units) == 0:
        return np.zeros((0, 2), dtype=np.int64)
    se = units[:, :2].astype(np.int64)
    lengths = se[:, 1] - se[:, 0]
    bad = np.concatenate([[0], np.cumsum(~candidates)])
    ok = np.flatnonzero((lengths > 0) & (lengths <= limit) & (bad[se[:, 1]] - bad[se[:, 0]] == 0))
    order = ok[rng.permutation(len(ok))]
    if first is not None:
        order = np.concatenate([order[first[order]], order[~first[order]]])
    cum = np.cumsum(lengths[order])
    n = int(np.searchsorted(cum, limit, side="right"))  # order[:n] fit entirely
    kept = order[:n].tolist()
    left = limit - (int(cum[n - 1]) if n else 0)
    if left:
        rest = order[n:]
        for i in rest[lengths[rest] <= left].tolist():  # greedy fill, as whole_spans does
            if lengths[i] <= left:
                kept.append(i)
                left -= int(lengths[i])
                if left == 0:
                    break
    kept.sort()
    return se[kept].reshape(-1, 2)


def geometric_lengths(p: float = 0.2, max_len: int = 10) -> np.ndarray:
    """SpanBERT's span-length distribution over 1..max_len: P(l) proportional to p (1-p)^(l-1),
    truncated and renormalised (mean 3.78 for p=0.2, max 10)."""
    if not 0.0 < p <= 1.0 or max_len < 1:
        raise ValueError(f"geometric spans need 0 < p <= 1 and max_len >= 1, got p={p}, max_len={max_len}")
    w = p * (1 - p) ** np.arange(max_len)
    return w / w.sum()


def geometric_spans(words: np.ndarray, candidates: np.ndarray, rate: float, rng: np.random.Generator,
                    p: float = 0.2, max_len: int = 10, tries: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """SpanBERT span masking: repeat {length l ~ truncated Geometric(p) in words, a start word
    uniformly among those where l words fit; keep the l words from there as one span} until
    ``budget(rate * candidates)`` tokens are taken. A start that overlaps a kept span or touches a
    non-candidate token is redrawn (up to `tries` times) with the same l, so long spans are not
    rejected more often than short ones and the kept lengths follow the distribution (mean 3.8).
    The span that would overshoot is kept with probability left / its tokens (so the expected count
    is the budget) and ends the draw. Spans start at word starts and cover whole words (and the
    whitespace between them). Returns ((K, 2) token ranges in token order, (K,) lengths in words).
    Draws are made in batches; O(K * tries) Python steps, K ~ 4% of T."""
    limit = budget(int(candidates.sum()), rate, rng)
    W = len(words)
    empty = np.zeros((0, 2), dtype=np.int64), np.zeros(0, dtype=np.int64)
    if limit == 0 or W == 0:
        return empty
    probs = geometric_lengths(p, max_len)
    bad = np.concatenate([[0], np.cumsum(~candidates)])
    taken = bytearray(W)  # 1 = word inside a kept span; bytearray.find is a C scan
    kept, kept_len, left, rounds = [], [], limit, 0
    while left > 0 and rounds < 8:
        rounds += 1
        n = limit // 4 + 8  # spans drawn per round (a span holds >= 1 token per word, ~3.8 words)
        lens = np.minimum(rng.choice(max_len, size=n, p=probs) + 1, W)
        first = (rng.random((n, tries)) * (W - lens + 1)[:, None]).astype(np.int64)  # (n, tries)
        last = first + lens[:, None]  # exclusive
        s, e = words[first, 0], words[last - 1, 1]
        ok = bad[e] - bad[s] == 0
        u = rng.random(n).tolist()
        # try 0 as flat Python lists (the common case); later tries read the arrays (rare: overlaps)
        f0, l0, s0, e0, ok0 = first[:, 0].tolist(), last[:, 0].tolist(), s[:, 0].tolist(), e[:, 0].tolist(), ok[:, 0].tolist()
        for i in range(n):
            if ok0[i] and taken.find(1, f0[i], l0[i]) < 0:
                a, b, ss, ee = f0[i], l0[i], s0[i], e0[i]
            else:
                hit = next((k for k in range(1, tries)
                            if ok[i, k] and taken.find(1, int(first[i, k]), int(last[i, k])) < 0), None)
                if hit is None:
                    continue
                a, b, ss, ee = int(first[i, hit]), int(last[i, hit]), int(s[i, hit]), int(e[i, hit])
            size = ee - ss
            if size > left:
                if u[i] < left / size:
                    kept.append((ss, ee))
                    kept_len.append(b - a)
                left = 0
                break
            taken[a:b] = b"\x01" * (b - a)
            kept.append((ss, ee))
            kept_len.append(b - a)
            left -= size
            if left == 0:
                break
    if not kept:
        return empty
    order = np.argsort([k[0] for k in kept], kind="stable")
    return np.asarray(kept, dtype=np.int64)[order], np.asarray(kept_len, dtype=np.int64)[order]


def t5_noise_mask(length: int, density: float, mean_len: float, rng: np.random.Generator,
                  max_spans: int | None = None) -> np.ndarray:
    """T5's ``random_spans_noise_mask`` (seqio): round(length * density) noise tokens in
    round(noise / mean_len) spans (at most ``max_spans``), the noise and non-noise tokens each cut into
    that many non-empty pieces at uniformly random points, interleaved non-noise first. (T,) bool."""
    if not 0.0 < density < 1.0 or mean_len < 1:
        raise ValueError(f"T5 span corruption needs 0 < density < 1 and mean_len >= 1, got {density}, {mean_len}")
    if length < 2:
        return np.zeros(length, dtype=bool)
    n_noise = min(max(int(round(length * density)), 1), length - 1)
    n_spans = max(int(round(n_noise / mean_len)), 1)
    if max_spans is not None:
        n_spans = min(n_spans, max_spans)
    n_spans = min(n_spans, n_noise, length - n_noise)

    def pieces(n_items: int) -> np.ndarray:  # n_spans positive lengths summing to n_items
        cuts = np.sort(rng.choice(n_items - 1, size=n_spans - 1, replace=False)) + 1 if n_spans > 1 else np.zeros(0, int)
        return np.diff(np.concatenate([[0], cuts, [n_items]]))

    noise, keep = pieces(n_noise), pieces(length - n_noise)
    lens = np.stack([keep, noise], axis=1).reshape(-1)
    flag = np.tile([False, True], n_spans)
    return np.repeat(flag, lens)
