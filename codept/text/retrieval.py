"""Cross-lingual retrieval of held-out translation pairs: mean-pooled source vs target side, MRR.

1. Each side of a pair is encoded alone, as the TLM objective renders it without masks: its first
   ``max_side`` tokens + [SEP], its language id (codept.objectives.tlm: 1 + index in the table),
   positions from 0; one document per row (codept.data.pack, rows="document").
2. Mean pool over the side's tokens (padding excluded), L2-normalise.
3. Queries: the source sides of the first ``pool`` pairs (of a fixed permutation by ``seed``);
   candidates: the target sides of the same pairs, so every query has ``pool - 1`` distractors.
   Rank of the true target = 1 + the candidates with a strictly higher cosine; MRR = mean 1/rank;
   reported overall and per target language.
Cost: 2 * pool forward passes of one side each (batched) + a pool x pool matrix product.
Not covered: retrieval in the other direction, candidates from other language pairs than the
query's own pool (pairs of both languages share one pool).
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
def embed(model, examples: list[Example], pad_id: int, device, batch_rows: int = 64) -> np.ndarray:
    """(N, C) L2-normalised mean-pooled final states, one row per example."""
    seq = max(len(e) for e in examples)
    was = model.training
    model.eval()
    out = []
    try:
        for i in range(0, len(examples), batch_rows):
            rows = pack(examples[i:i + batch_rows], seq, pad_id, rows="document")
            batch = {k: v.to(device) for k, v in collate(rows).items()}
            h = model.encode(batch)  # (B, T, C)
            m = (batch["segment_ids"] > 0).unsqueeze(-1).to(h.dtype)
            v = (h * m).sum(1) / m.sum(1).clamp(min=1)
            out.append(torch.nn.functional.normalize(v.float(), dim=-1).cpu().numpy())
    finally:
        model.train(was)
    return np.concatenate(out)


def mrr_of(scores: np.ndarray) -> np.ndarray:
    """(N, N) scores, true candidate on the diagonal -> (N,) reciprocal ranks."""
    true = np.diag(scores)[:, None]
    return 1.0 / (1 + (scores > true).sum(axis=1))


def retrieval(model, pairs, table: dict[str, int], vocab, device, pool: int = 1000, max_side: int = 62,
              seed: int = 0) -> dict:
    """{'mrr', 'n', 'by_lang': {lang: {'mrr', 'n'}}} over the first `pool` held-out pairs."""
    n = min(pool, len(pairs))
    if n < 2:
        return {"mrr": float("nan"), "n": n, "skipped": f"{len(pairs)} held-out pairs: need at least 2"}
    idx = np.random.default_rng(seed).permutation(len(pairs))[:n]
    chosen = [pairs[int(i)] for i in idx]
    sep = vocab.id_of("sep")
    src = embed(model, [side_example(p.src, sep, table[p.src.lang], max_side) for p in chosen], vocab.pad_id, device)
    tgt = embed(model, [side_example(p.tgt, sep, table[p.tgt.lang], max_side) for p in chosen], vocab.pad_id, device)
    rr = mrr_of(src @ tgt.T)
    langs = np.array([p.tgt.lang for p in chosen])
    by = {lang: {"mrr": round(float(rr[langs == lang].mean()), 4), "n": int((langs == lang).sum())}
          for lang in sorted(set(langs.tolist()))}
    return {"mrr": round(float(rr.mean()), 4), "n": n, "by_lang": by}
