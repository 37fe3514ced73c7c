"""WHERE to corrupt: selections over one document, as boolean (T,) masks or unit lists.

Pure functions of (arrays, rng); they never modify their inputs. Rendering (HOW: 80/10/10,
sentinels, ...) is codept.objectives.render.

1. ``budget(n, rate, rng)``: how many tokens a rate buys, with probabilistic rounding so the
   expected count is exactly ``rate * n`` (no bias on short documents).
2. ``random_tokens``: that many candidate tokens, uniformly without replacement (BERT MLM).
3. ``whole_spans``: shuffle candidate spans, keep each that fits the remaining budget and overlaps
   nothing kept (syntax units, identifiers, leaves, words). Returns the kept spans in token order.
Cost: O(T) for tokens; spans O(S + T) after an O(S) shuffle. Not covered: geometric span lengths
(SpanBERT) -- a later objective adds a selector here.
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
