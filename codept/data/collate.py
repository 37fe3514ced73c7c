"""Rows (codept.data.pack) -> a batch of torch tensors. No randomness, no policy: just layout.

Padded layout (default), B rows of L tokens:
  input_ids, segment_ids, positions (B, L) long; prefix (B, L) bool; labels.<n> (B, L) long;
  ptr.<n> (B, K, ...) long padded with -1 to the batch's largest K; ptr_seg.<n> (B, K) 0-padded;
  scalar.<n> (B, D) long padded with IGNORE to the largest document count;
  the optional columns of codept.data.pack: types, langs, block_positions, order (B, L) long;
  targets.<n> (B, L) or (B, L, m) float32 (NaN = no target).
Padding-free layout (``varlen=True``) for varlen attention kernels: padding dropped, rows
concatenated into one sequence (1, N); ``cu_seqlens`` (n_docs + 1,) int32 document boundaries and
``max_seqlen``; segment ids made unique across the batch; pointers shifted to batch coordinates and
concatenated (K_total, ...); scalars concatenated (n_docs,).
Cost: one copy of the batch. Not covered: pinned memory / device transfer (the trainer's job).
"""

from __future__ import annotations

import numpy as np
import torch

from codept.data.example import IGNORE

_TOKEN_KEYS = ("input_ids", "segment_ids", "positions", "prefix", "types", "langs", "block_positions", "order")


def _token_level(k: str) -> bool:
    return k in _TOKEN_KEYS or k.startswith(("labels.", "targets."))


def collate(rows: list[dict], varlen: bool = False) -> dict[str, torch.Tensor]:
    if not rows:
        raise ValueError("collate needs at least one row")
    return _varlen(rows) if varlen else _padded(rows)


def _fill(rows: list[dict]) -> list[dict]:
    """Rows packed from different buffers may lack a field another row has (a buffer without any
    span-masking document has no ``ptr.span``): add it empty (labels IGNORE, no pointer records)."""
    keys = {k for r in rows for k in r}
    if all(len(r) == len(keys) for r in rows):
        return rows
    like = {k: next(r[k] for r in rows if k in r) for k in keys}
    out = []
    for r in rows:
        r = dict(r)
        for k in keys - r.keys():
            n = len(r["input_ids"])
            if k.startswith("labels."):
                r[k] = np.full(n, IGNORE, dtype=np.int32)
            elif k.startswith("targets."):
                r[k] = np.full((n, *like[k].shape[1:]), np.nan, dtype=np.float32)
            elif k == "order":  # the default order: the row index
                r[k] = np.arange(n, dtype=np.int32)
            elif k in _TOKEN_KEYS:
                r[k] = np.zeros(n, dtype=np.int32)
            elif k.startswith(("ptr.", "ptr_seg.", "scalar.")):
                r[k] = np.zeros((0, *like[k].shape[1:]), dtype=like[k].dtype)
            else:
                raise KeyError(f"collate: row without {k!r}")
        out.append(r)
    return out


def _padded(rows: list[dict]) -> dict[str, torch.Tensor]:
    rows = _fill(rows)
    out: dict[str, torch.Tensor] = {}
    for k in rows[0]:
        vals = [r[k] for r in rows]
        if _token_level(k):
            a = np.stack(vals)
            out[k] = torch.from_numpy(a if a.dtype.kind in "bf" else a.astype(np.int64))
        elif k.startswith(("ptr.", "ptr_seg.", "scalar.")):
            fill = IGNORE if k.startswith("scalar.") else (0 if k.startswith("ptr_seg.") else -1)
            kmax = max(len(v) for v in vals)
            a = np.full((len(vals), kmax, *vals[0].shape[1:]), fill, dtype=np.int64)
            for i, v in enumerate(vals):
                a[i, : len(v)] = v
            out[k] = torch.from_numpy(a)
        else:
            raise KeyError(f"collate: unknown row field {k!r}")
    return out


def _varlen(rows: list[dict]) -> dict[str, torch.Tensor]:
    rows = _fill(rows)
    keep = [r["segment_ids"] > 0 for r in rows]
    out: dict[str, torch.Tensor] = {}
    seg_base, tok_base = [], []
    s_acc = t_acc = 0
    for r, m in zip(rows, keep):
        seg_base.append(s_acc)
        tok_base.append(t_acc)
        s_acc += int(r["segment_ids"].max(initial=0))
        t_acc += int(m.sum())
    for k in rows[0]:
        if k == "segment_ids":
            a = np.concatenate([r[k][m] + b for r, m, b in zip(rows, keep, seg_base)])
        elif _token_level(k):
            a = np.concatenate([r[k][m] for r, m in zip(rows, keep)])
        elif k.startswith("ptr."):
            a = np.concatenate([np.where(r[k] >= 0, r[k] + b, -1) for r, b in zip(rows, tok_base)])
        elif k.startswith("ptr_seg."):
            a = np.concatenate([r[k] + b for r, b in zip(rows, seg_base)])
        elif k.startswith("scalar."):
            a = np.concatenate([r[k] for r in rows])
        else:
            raise KeyError(f"collate: unknown row field {k!r}")
        t = torch.from_numpy(a if a.dtype.kind in "bf" else a.astype(np.int64))
        out[k] = t.unsqueeze(0) if _token_level(k) else t
    seg = out["segment_ids"][0].numpy()
    starts = np.flatnonzero(np.r_[True, seg[1:] != seg[:-1]]) if len(seg) else np.zeros(0, np.int64)
    cu = np.r_[starts, len(seg)].astype(np.int32)
    out["cu_seqlens"] = torch.from_numpy(cu)
    out["max_seqlen"] = torch.tensor(int(np.diff(cu).max(initial=0)))
    return out
