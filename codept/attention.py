"""The one attention rule, shared by packing, MLM, causal LM, prefix-LM/UniLM and GLM.

    visible(q, k) = seg[q] == seg[k] != 0  and  (order[k] <= order[q]  or  prefix[k])

q and k are row indices (never position ids); ``order`` defaults to the row index itself (k <= q),
and an explicit factorisation order (XLNet's permutation LM) replaces left-to-right by any order. ``seg`` is 0 on padding and the 1-based document
number of the row elsewhere, so no token ever sees another document or padding. ``prefix[k]``
marks keys every query of the same document may see: all True = bidirectional encoder, all False =
causal decoder, a leading run of True = prefix-LM/UniLM seq2seq, GLM's part A.

This module is the reference (NumPy, O(T^2) memory): tests and the CPU path use it; the GPU path
(model layer) must agree with it. Not covered: sliding windows, ALiBi-style biases.
"""

from __future__ import annotations

import numpy as np


def visible(segment_ids: np.ndarray, prefix: np.ndarray, order: np.ndarray | None = None) -> np.ndarray:
    """Boolean (..., T, T) mask, [q, k] True where query q may attend to key k."""
    seg = np.asarray(segment_ids)
    pre = np.asarray(prefix, dtype=bool)
    t = seg.shape[-1]
    same = (seg[..., :, None] == seg[..., None, :]) & (seg[..., :, None] != 0)
    if order is None:
        causal = np.tril(np.ones((t, t), dtype=bool))
    else:
        o = np.asarray(order)
        causal = o[..., None, :] <= o[..., :, None]  # [q, k]: order[k] <= order[q]
    return same & (causal | pre[..., None, :])
