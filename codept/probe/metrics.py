"""Retrieval metrics for code search: ranks, MRR, R@k, fixed seeded candidate pools, two protocols.

Every function scores queries against candidates where the TRUE candidate of query i is code i (the
pair's own code). A score matrix S (Q, C) holds query rows against candidate columns.

:func:`ranks` (S, true): 1-based rank of the true column of each row, ties counted PESSIMISTICALLY:
    rank = 1 + #(scores > true score) + #(other candidates with score == true score).
  A model that scores everything equal gets rank C (not 1, not C/2); NaN scores count as -inf.
:func:`pools` (n, pool_size, seed): query pools, a partition of range(n):
  1. perm = np.random.default_rng(seed).permutation(n); chunks of ``pool_size`` in that order.
  2. n <= pool_size: one pool of all n.
  3. A trailing remainder r = n % pool_size (n > pool_size) is its own SHORT query pool; its candidate
     set is topped up to ``pool_size`` by :func:`candidates` with the (pool_size - r) indices just before
     it in the permutation (codes of the previous pool, as distractors only). So every query is scored
     exactly once and always against exactly min(n, pool_size) candidates; CodeSearchNet drops the
     remainder instead (fewer queries), merging it into the last pool would make that pool harder.
:func:`evaluate` (score_fn, n, protocol, pool_size, seed) -> {mrr, r1, r5, r10, n_queries, pool_size}:
  "pool"   each pool's queries against its candidate set (:func:`candidates`): S = score_fn(q, c);
  "corpus" every query against all n candidates, in blocks of ``block`` queries (memory
           O(block * n) floats; one score_fn call per block with the same candidate array).
  ``score_fn(query_idx, cand_idx) -> (len(query_idx), len(cand_idx))`` array; it may cache by the
  candidate array (BM25 indexes each candidate set once).
Cost: O(Q C) per matrix. Not covered: several true candidates per query (duplicated code counts as a
tie, so as a miss), MAP/NDCG.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

PROTOCOLS = ("pool", "corpus")
KS = (1, 5, 10)

ScoreFn = Callable[[np.ndarray, np.ndarray], np.ndarray]


def ranks(scores: np.ndarray, true: np.ndarray | None = None) -> np.ndarray:
    """1-based pessimistic rank of the true column of each row. scores (Q, C); true (Q,) column
    indices, default ``arange(Q)`` (query i's code is column i). Returns (Q,) int64."""
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 2:
        raise ValueError(f"scores must be a (queries, candidates) matrix, got shape {s.shape}")
    q = s.shape[0]
    true = np.arange(q) if true is None else np.asarray(true, dtype=np.int64)
    if true.shape != (q,) or (q and (true.min() < 0 or true.max() >= s.shape[1])):
        raise ValueError(f"true columns {true.shape} must be one index in [0, {s.shape[1]}) per row of {s.shape}")
    s = np.where(np.isnan(s), -np.inf, s)
    t = s[np.arange(q), true][:, None]  # (Q, 1)
    # ">= t" counts the true column itself once: 1 + #(>) + #(== others) = #(>=)
    return (s >= t).sum(axis=1).astype(np.int64)


def mrr(r: np.ndarray) -> float:
    r = np.asarray(r)
    return float(np.mean(1.0 / r)) if r.size else float("nan")


def recall_at(r: np.ndarray, k: int) -> float:
    r = np.asarray(r)
    return float(np.mean(r <= k)) if r.size else float("nan")


def summarize(r: np.ndarray) -> dict:
    """{mrr, r1, r5, r10, n_queries} of a rank array."""
    return {"mrr": mrr(r), **{f"r{k}": recall_at(r, k) for k in KS}, "n_queries": int(np.asarray(r).size)}


def pools(n: int, pool_size: int, seed: int) -> list[np.ndarray]:
    """Query pools: a seeded partition of range(n) into chunks of ``pool_size`` (the last one may be
    shorter; see the module docstring)."""
    if n < 0 or pool_size < 2:
        raise ValueError(f"pools(n={n}, pool_size={pool_size}): need n >= 0 and pool_size >= 2")
    perm = np.random.default_rng(seed).permutation(n)
    return [perm[i : i + pool_size] for i in range(0, n, pool_size)]


def candidates(pool_list: list[np.ndarray], pool_size: int) -> list[np.ndarray]:
    """Candidate set of each pool: the pool itself (its queries first, in order, so query j's code is
    column j), a short trailing pool topped up to min(n, pool_size) with the indices just before it in
    the permutation (distractors only)."""
    perm = np.concatenate(pool_list) if pool_list else np.zeros(0, np.int64)
    want = min(len(perm), pool_size)
    out, start = [], 0
    for p in pool_list:
        need = want - len(p)
        out.append(np.concatenate([p, perm[start - need : start]]) if need > 0 else p)
        start += len(p)
    return out


def score_pools(score_fn: ScoreFn, pool_list: list[np.ndarray], pool_size: int) -> np.ndarray:
    """Ranks of every query of every pool against its candidate set, concatenated in pool order."""
    out = []
    for p, c in zip(pool_list, candidates(pool_list, pool_size)):
        s = np.asarray(score_fn(p, c))
        if s.shape != (len(p), len(c)):
            raise ValueError(f"score_fn returned {s.shape} for {len(p)} queries x {len(c)} candidates")
        out.append(ranks(s))
    return np.concatenate(out) if out else np.zeros(0, np.int64)


def score_corpus(score_fn: ScoreFn, n: int, block: int = 1024) -> np.ndarray:
    """Ranks of every query against all n candidates, ``block`` queries at a time."""
    cand = np.arange(n)
    out = []
    for i in range(0, n, block):
        q = cand[i : i + block]
        s = np.asarray(score_fn(q, cand))
        if s.shape != (len(q), n):
            raise ValueError(f"score_fn returned {s.shape} for {len(q)} queries x {n} candidates")
        out.append(ranks(s, q))
    return np.concatenate(out) if out else np.zeros(0, np.int64)


def evaluate(score_fn: ScoreFn, n: int, protocol: str = "pool", pool_size: int = 1000, seed: int = 0,
             block: int = 1024) -> dict:
    """{mrr, r1, r5, r10, n_queries, pool_size} of ``score_fn`` on n pairs under ``protocol``
    ("pool": seeded pools of ``pool_size`` candidates; "corpus": all n candidates)."""
    if protocol == "pool":
        r = score_pools(score_fn, pools(n, pool_size, seed), pool_size)
        size = min(n, pool_size)
    elif protocol == "corpus":
        r = score_corpus(score_fn, n, block)
        size = n
    else:
        raise ValueError(f"protocol {protocol!r}: expected one of {PROTOCOLS}")
    return {**summarize(r), "pool_size": int(size)}
