"""Cross-lingual retrieval of held-out translation pairs: mean-pooled source vs target side, MRR.

1. Each side of a pair is encoded alone, as the TLM objective renders it without masks: its first
   ``max_side`` tokens + [SEP], its language id (codept.objectives.tlm: 1 + index in the table),
   positions from 0; one document per row (codept.data.pack, rows="document"). Both arms of the
   TLM-vs-MLM comparison are encoded this way (the MLM-only control trains on the same sides with
   the same language ids, each side alone).
2. Mean pool over the side's tokens, [SEP] included (padding excluded), of the final layer
   (``layers=True`` also: the embedding output and every block, a diagnostic).
3. Pools: one per target language (queries: the source sides of ``pool`` held-out pairs of that
   language, candidates: their target sides, so every query has ``pool - 1`` distractors of its own
   target language), and one mixed pool over all languages (the first metric, kept for
   comparability; there a language-wide offset ranks one whole language above another).
   Rank of the true target: its expected rank when ties are broken at random (``mrr_of``,
   ``ties="expected"``; cosines never tie in practice, BM25 scores often do); MRR = mean 1/rank.
   Chance: H_N / N (0.0075 at N = 1000).
4. Scores, each reported raw and centered:
   raw       cosine of the L2-normalised pooled vectors;
   centered  per-language mean-centering (Libovicky et al. 2020, "On the language neutrality of
             pre-trained multilingual representations"): each pooled vector minus the mean of its
             language's pooled vectors, then cosine. Mean-pooled states share a few large common
             directions and a language offset (the language id is added to every token), which
             swamp the sentence content; the means are estimated on held-out sides OUTSIDE the
             evaluated pools (``reference`` pairs, no labels used), or, when no pair is left, on
             the pool's own sides (``centroids: "pool"`` in the result).
   lexical   BM25 (k1 1.2, b 0.75; query terms counted once) over the same BPE ids of the two sides:
             placeholders (%s), numbers, option names and untranslated names are shared tokens, so
             a purely lexical ranking places the model numbers.
Cost: 2 single-side forwards per evaluated or reference pair (batched, padded per batch) + one
pool x pool product per score; BM25: a (pool x vocab) dense matrix per pool.
Not covered: retrieval in the other direction (target -> source), other pooling rules.
"""

from __future__ import annotations

import numpy as np
import torch

from codept.data.collate import collate
from codept.data.example import Example
from codept.data.pack import pack


def side_example(view, sep: int, lang_id: int, max_side: int) -> Example:
    ids = np.concatenate([np.asarray(view.input_ids)[:max_side], [sep]]).astype(np.int32)
    return Example(ids, np.ones(len(ids), bool), langs=np.full(len(ids), lang_id, dtype=np.int32))


@torch.no_grad()
def embed(model, examples: list[Example], pad_id: int, device, batch_rows: int = 64, normalise: bool = True,
          layers: bool = False) -> np.ndarray:
    """(N, C) mean-pooled final states, one row per example (L2-normalised unless ``normalise=False``);
    ``layers=True``: (L + 1, N, C), the embedding output and every block's output, not normalised."""
    was = model.training
    model.eval()
    grabbed: list[torch.Tensor] = []
    hooks = []
    if layers:
        for m in [model.embed, *model.blocks]:
            hooks.append(m.register_forward_hook(lambda mod, inp, out: grabbed.append(out)))
    out = []
    try:
        for i in range(0, len(examples), batch_rows):
            chunk = examples[i:i + batch_rows]
            rows = pack(chunk, max(len(e) for e in chunk), pad_id, rows="document")
            batch = {k: v.to(device) for k, v in collate(rows).items()}
            grabbed.clear()
            h = model.encode(batch)  # (B, T, C)
            m = (batch["segment_ids"] > 0).unsqueeze(-1).to(h.dtype)
            states = grabbed if layers else [h]
            v = torch.stack([(x * m).sum(1) / m.sum(1).clamp(min=1) for x in states]).float()  # (S, B, C)
            out.append(v.cpu().numpy())
    finally:
        for hk in hooks:
            hk.remove()
        model.train(was)
    v = np.concatenate(out, axis=1)
    if layers:
        return v
    return normalised(v[0]) if normalise else v[0]


def normalised(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True).clip(1e-12)


def mrr_of(scores: np.ndarray, ties: str = "optimistic") -> np.ndarray:
    """(N, N) scores, true candidate on the diagonal -> (N,) reciprocal ranks. ``ties="optimistic"``:
    rank = 1 + candidates with a strictly higher score; ``"expected"``: the mean of 1/rank over a
    random order of the candidates that tie with the true one (all tied -> H_N / N, chance)."""
    if ties not in ("optimistic", "expected"):
        raise ValueError(f"ties={ties!r}: expected 'optimistic' or 'expected'")
    scores = np.asarray(scores)
    if scores.ndim != 2 or scores.shape[0] != scores.shape[1]:
        raise ValueError(f"scores of shape {scores.shape}: expected a square (N, N) matrix")
    true = np.diag(scores)[:, None]
    above = (scores > true).sum(axis=1)
    if ties == "optimistic":
        return 1.0 / (1 + above)
    tied = (scores == true).sum(axis=1)  # >= 1: the true candidate itself
    harmonic = np.concatenate([[0.0], np.cumsum(1.0 / np.arange(1, scores.shape[1] + 1))])
    return (harmonic[above + tied] - harmonic[above]) / tied


def chance(n: int) -> float:
    """MRR of a random ranking of n candidates: H_n / n."""
    return float(np.sum(1.0 / np.arange(1, n + 1)) / n) if n else float("nan")


def bm25(queries: list[np.ndarray], candidates: list[np.ndarray], vocab_size: int, k1: float = 1.2,
         b: float = 0.75) -> np.ndarray:
    """(Q, C) Okapi BM25 scores of token-id sequences; idf from the candidates (BM25's +1 form),
    every distinct query term counted once. Ids must lie in [0, vocab_size)."""
    for name, xs in (("queries", queries), ("candidates", candidates)):
        for x in xs:
            x = np.asarray(x)
            if len(x) and (x.min() < 0 or x.max() >= vocab_size):
                raise ValueError(f"bm25: {name} hold ids outside [0, vocab_size={vocab_size})")

    def counts(xs) -> np.ndarray:
        m = np.zeros((len(xs), vocab_size), dtype=np.float32)
        for i, x in enumerate(xs):
            np.add.at(m[i], np.asarray(x, dtype=np.int64), 1.0)
        return m

    tf, q = counts(candidates), counts(queries) > 0
    n = len(candidates)
    df = (tf > 0).sum(axis=0)
    idf = np.log(1.0 + (n - df + 0.5) / (df + 0.5)).astype(np.float32)
    length = tf.sum(axis=1, keepdims=True)
    w = tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / max(float(length.mean()), 1e-12))) * idf
    return q.astype(np.float32) @ w.T


def _pools(pairs, pool: int, seed: int) -> tuple[np.ndarray, dict[str, np.ndarray], np.ndarray]:
    """(mixed pool, {target language: pool}, reference pairs outside every pool) as index arrays."""
    langs = np.array([pairs[i].tgt.lang for i in range(len(pairs))])
    mixed = np.random.default_rng(seed).permutation(len(pairs))[:pool]
    per = {lang: np.random.default_rng(seed).permutation(np.flatnonzero(langs == lang))[:pool]
           for lang in sorted(set(langs.tolist()))}
    used = np.zeros(len(pairs), bool)
    used[mixed] = True
    for idx in per.values():
        used[idx] = True
    rest = np.random.default_rng([seed, 1]).permutation(np.flatnonzero(~used))
    ref = np.concatenate([rest[langs[rest] == lang][:pool] for lang in per]) if len(rest) else rest
    return mixed, per, ref.astype(np.int64)


def _scores(src: np.ndarray, tgt: np.ndarray, src_mean: np.ndarray | None, tgt_mean: np.ndarray | None) -> np.ndarray:
    if src_mean is not None:
        src, tgt = src - src_mean, tgt - tgt_mean
    return normalised(src) @ normalised(tgt).T


def retrieval(model, pairs, table: dict[str, int], vocab, device, pool: int = 1000, max_side: int = 62,
              seed: int = 0, layers: bool = False, lexical: bool = True, per_query: bool = False) -> dict:
    """Module docstring. {'mrr', 'n', 'by_lang'} of the mixed pool (raw), 'centered' (mixed pool),
    'chance', 'pools': {lang: {'n', 'chance', 'raw', 'centered', 'bm25'}}, 'reference', 'centroids';
    with ``layers``: per pool, 'layers_raw' / 'layers_centered' (embedding output, block 1, ...);
    with ``per_query``: per pool, 'rr': {'raw', 'centered'} (pool,) reciprocal ranks as arrays, in the
    pool's order (the same queries for every model on the same pairs and seed: paired comparisons)."""
    n = min(pool, len(pairs))
    if n < 2:
        return {"mrr": float("nan"), "n": n, "skipped": f"{len(pairs)} held-out pairs: need at least 2"}
    mixed, per, ref = _pools(pairs, n, seed)
    need = np.unique(np.concatenate([mixed, *per.values(), ref]))
    row = {int(i): k for k, i in enumerate(need)}
    sep = vocab.id_of("sep")
    chosen = [pairs[int(i)] for i in need]
    src = embed(model, [side_example(p.src, sep, table[p.src.lang], max_side) for p in chosen], vocab.pad_id, device,
                layers=True)  # (S, M, C)
    tgt = embed(model, [side_example(p.tgt, sep, table[p.tgt.lang], max_side) for p in chosen], vocab.pad_id, device,
                layers=True)
    src_lang = np.array([p.src.lang for p in chosen])
    tgt_lang = np.array([p.tgt.lang for p in chosen])
    centroids = "reference" if len(ref) else "pool"
    ref_rows = np.array([row[int(i)] for i in ref], dtype=np.int64)

    def means(states: np.ndarray, langs: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """(S, M, C): each row's language mean (over the reference rows, else over `rows`)."""
        basis = ref_rows if len(ref_rows) else rows
        out = np.zeros_like(states)
        for lang in set(langs[rows].tolist()):
            at = basis[langs[basis] == lang]
            at = at if len(at) else rows[langs[rows] == lang]
            out[:, langs == lang] = states[:, at].mean(axis=1, keepdims=True)
        return out

    def rr(idx: np.ndarray, layer: int, center: bool) -> np.ndarray:
        rows = np.array([row[int(i)] for i in idx], dtype=np.int64)
        s, t = src[layer, rows], tgt[layer, rows]
        sm = means(src, src_lang, rows)[layer, rows] if center else None
        tm = means(tgt, tgt_lang, rows)[layer, rows] if center else None
        return mrr_of(_scores(s, t, sm, tm), ties="expected")

    final = src.shape[0] - 1
    raw_mixed = rr(mixed, final, False)
    langs_mixed = np.array([pairs[int(i)].tgt.lang for i in mixed])
    out = {"mrr": round(float(raw_mixed.mean()), 4), "n": int(len(mixed)),
           "by_lang": {lang: {"mrr": round(float(raw_mixed[langs_mixed == lang].mean()), 4),
                              "n": int((langs_mixed == lang).sum())} for lang in sorted(set(langs_mixed.tolist()))},
           "centered": round(float(rr(mixed, final, True).mean()), 4), "chance": round(chance(len(mixed)), 4),
           "reference": int(len(ref)), "centroids": centroids, "pools": {}}
    for lang, idx in per.items():
        if len(idx) < 2:
            continue
        raw, cen = rr(idx, final, False), rr(idx, final, True)
        entry = {"n": int(len(idx)), "chance": round(chance(len(idx)), 4),
                 "raw": round(float(raw.mean()), 4), "centered": round(float(cen.mean()), 4)}
        if per_query:
            entry["rr"] = {"raw": raw, "centered": cen, "paths": [pairs[int(i)].path for i in idx]}
        if lexical:
            q = [np.asarray(pairs[int(i)].src.input_ids)[:max_side] for i in idx]
            c = [np.asarray(pairs[int(i)].tgt.input_ids)[:max_side] for i in idx]
            entry["bm25"] = round(float(mrr_of(bm25(q, c, vocab.size), ties="expected").mean()), 4)
        if layers:
            entry["layers_raw"] = [round(float(rr(idx, k, False).mean()), 4) for k in range(final + 1)]
            entry["layers_centered"] = [round(float(rr(idx, k, True).mean()), 4) for k in range(final + 1)]
        out["pools"][lang] = entry
    return out
