"""One transformer for encoders and decoders, driven by the one attention rule of codept.attention.

    visible(q, k) = seg[q] == seg[k] != 0  and  (order[k] <= order[q]  or  prefix[k])   (order: row index by default)

The batch decides what the model is: ``prefix`` all True = bidirectional encoder (BERT), all False =
causal decoder, a leading run of True = prefix-LM / UniLM / GLM part A; ``segment_ids`` keep packed
documents apart and hide padding. The architecture is Hugging Face BERT's, so a model exports to and
imports from ``transformers.BertModel`` by renaming parameters (codept.model.hf):
post-LayerNorm blocks, exact (erf) GELU, learned absolute position embeddings indexed by the
``positions`` tensor (restarting at 0 for every packed document), token types from ``types`` (0 without), LayerNorm
eps from the config. The MLM decoder is tied to ``embed.tokens`` (codept.model.heads.LMHead).

Algorithm (:meth:`Transformer.forward`), for a padded batch of B rows of T tokens, C = hidden:
  1. x = LayerNorm(tokens[input_ids] + types[types or 0] + positions[positions]
                    (+ langs[langs] + blocks[block_positions] when configured))      # (B, T, C)
  2. The attention inputs are built ONCE per forward from (segment_ids, prefix, order): a dense
     (B, T, T) bool for "reference" and "sdpa", a FlexAttention BlockMask for "flex", the batch's
     documents (:class:`Documents`: the packer's document boundaries, found from the segment ids)
     for "varlen". A padding query (seg 0) sees only itself, so no row is empty (no NaN) and every
     path gives the same numbers.
  3. Each block: x = LN(x + Drop(Attn(x))); x = LN(x + Drop(W2 GELU(W1 x)))     # post-LN, as BERT
Attention paths (equal within float tolerance; tests/test_model.py, tests/test_compute.py):
  "reference" explicit softmax(QK^T / sqrt(d)) over the boolean mask; readable, O(B H T^2) memory.
  "sdpa"      torch.nn.functional.scaled_dot_product_attention with the same boolean mask (on GPU a
              fused memory-efficient kernel, on CPU the flash kernel reading the mask).
  "flex"      torch.nn.attention.flex_attention with a block mask from segment ids + prefix; skips
              fully hidden blocks (packed documents), compiled on CUDA. No attention dropout.
  "varlen"    attention per packed document (the cu_seqlens of the padding-free layout): documents
              of equal length and mask kind go through one SDPA call WITHOUT a mask when the rule
              needs none inside a document (bidirectional: every key; causal: is_causal), with the
              rule restricted to the document otherwise (prefix-LM, an explicit order, the query
              stream); flash-attn's varlen kernel instead when it is installed and applies
              (:func:`varlen_kernel`). Tokens never meet other documents' or padding keys, and the
              (B, T, T) mask is never built. Cost: one host copy of the (B, T) inputs per forward,
              one SDPA call per group, a gather and a scatter of q, k, v for rows holding several
              documents.
Two-stream attention (XLNet's permutation LM, :meth:`Transformer.two_stream`): a content stream
(the forward above) and a query stream that starts from a learned vector plus each position's
embeddings, not LayerNormed (small, as XLNet's w), and reads keys/values from the content stream under
the STRICT rule order[k] < order[q]; same weights.
Cost: ~6 N FLOPs per token for training (N = non-embedding parameters) plus 12 L C T for attention
(:meth:`Transformer.flops_per_token`). Not covered: KV caches / generation, relative or rotary
positions, pre-LN, MoE; the varlen path runs on the padded layout (the padding-free one of
codept.data.collate gives the same documents, tests/test_compute.py) and needs every document to be
one contiguous run of its segment id (the packer's layout).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

import torch
import torch.nn.functional as F
import torch.utils.checkpoint
from torch import nn

from codept.model.config import (ATTENTION_PATHS, OPTIONAL_INPUTS, PRESETS, RESIDUAL_INITS,  # noqa: F401
                                 ModelConfig, base_8xh200, configure, debug_cpu, small_1xh200, tiny)


# ---------------------------------------------------------------------------------------------
# The attention rule in torch


def _rule(segment_ids: torch.Tensor, prefix: torch.Tensor, order: torch.Tensor | None, strict: bool) -> torch.Tensor:
    """(B, T, T) bool: the rule itself, without the diagonal that keeps rows non-empty."""
    seg = segment_ids  # (B, T)
    t = seg.shape[-1]
    idx = torch.arange(t, device=seg.device)
    if order is None:
        causal = (idx[None, :] < idx[:, None] if strict else idx[None, :] <= idx[:, None])[None]  # (1, T, T) [q, k]
    elif strict:
        causal = order[:, None, :] < order[:, :, None]  # (B, T, T) [q, k]: order[k] < order[q]
    else:
        causal = order[:, None, :] <= order[:, :, None]  # (B, T, T) [q, k]: order[k] <= order[q]
    same = (seg[:, :, None] == seg[:, None, :]) & (seg[:, :, None] != 0)  # (B, T, T)
    return same & (causal | prefix[:, None, :].bool())


def visibility(segment_ids: torch.Tensor, prefix: torch.Tensor, order: torch.Tensor | None = None,
               strict: bool = False) -> torch.Tensor:
    """Boolean (B, T, T) mask, [b, q, k] True where query q may attend to key k: the rule of
    codept.attention.visible, plus the diagonal for padding queries so that no row is empty.
    ``strict``: XLNet's query stream, ``order[k] < order[q]`` (a query never sees its own token);
    a query that then sees nothing (first in its order, no prefix) gets its own diagonal so that no
    row is empty; such a row must never be a prediction target (codept.model.regimes checks)."""
    seg = segment_ids
    idx = torch.arange(seg.shape[-1], device=seg.device)
    mask = _rule(seg, prefix, order, strict)
    alone = ~mask.any(-1) if strict else (seg == 0)  # (B, T) queries that get their own diagonal
    pad_self = alone[:, :, None] & (idx[:, None] == idx[None, :])[None]
    return mask | pad_self


def flex_block_mask(segment_ids: torch.Tensor, prefix: torch.Tensor, order: torch.Tensor | None = None,
                    strict: bool = False):
    """FlexAttention BlockMask of the same rule (plus the same diagonal as :func:`visibility`)."""
    from torch.nn.attention.flex_attention import create_block_mask

    seg, pre = segment_ids, prefix.bool()
    b, t = seg.shape
    alone = ~_rule(seg, prefix, order, True).any(-1) if strict else (seg == 0)  # (B, T)

    def rule(bi, h, q, k):
        same = (seg[bi, q] == seg[bi, k]) & (seg[bi, q] != 0)
        if order is None:
            before = (k < q) if strict else (k <= q)
        else:
            before = (order[bi, k] < order[bi, q]) if strict else (order[bi, k] <= order[bi, q])
        return (same & (before | pre[bi, k])) | (alone[bi, q] & (q == k))

    return create_block_mask(rule, b, None, t, t, device=seg.device)


def attention_mask(segment_ids: torch.Tensor, prefix: torch.Tensor, order: torch.Tensor | None, path: str,
                   strict: bool = False):
    """What one forward builds once: a BlockMask for "flex", the documents of the batch
    (:class:`Documents`) for "varlen", a dense (B, T, T) bool otherwise."""
    if path == "varlen":
        return documents(segment_ids, prefix, order, strict)
    return (flex_block_mask if path == "flex" else visibility)(segment_ids, prefix, order, strict)


_compiled_flex = None


def _flex_attention(q, k, v, block_mask):
    from torch.nn.attention.flex_attention import flex_attention

    global _compiled_flex
    if q.device.type != "cuda":  # eager flex: correct but slow; fine for tests
        return flex_attention(q, k, v, block_mask=block_mask)
    if _compiled_flex is None:
        _compiled_flex = torch.compile(flex_attention)
    return _compiled_flex(q, k, v, block_mask=block_mask)


def attend(q, k, v, mask, path: str, dropout_p: float = 0.0) -> torch.Tensor:
    """softmax(q k^T / sqrt(d)) v over visible keys. q, k, v (B, T, H, D); mask: (B, T, T) bool,
    a BlockMask for "flex", :class:`Documents` for "varlen". Returns (B, T, H, D)."""
    if path == "varlen":
        return varlen_attend(q, k, v, mask, dropout_p)
    q, k, v = (x.transpose(1, 2) for x in (q, k, v))  # (B, H, T, D)
    if path == "reference":
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])  # (B, H, T, T)
        scores = scores.masked_fill(~mask[:, None], float("-inf"))  # no row is all -inf (padding diagonal)
        y = F.dropout(scores.softmax(dim=-1), p=dropout_p) @ v
    elif path == "sdpa":
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None], dropout_p=dropout_p)
    elif path == "flex":
        if dropout_p > 0:
            raise ValueError(f"attention='flex' has no attention dropout; got {dropout_p} (set attention_dropout=0)")
        y = _flex_attention(q, k, v, mask)
    else:
        raise ValueError(f"attention path {path!r}: expected one of {ATTENTION_PATHS}")
    return y.transpose(1, 2)  # (B, T, H, D)


# ---------------------------------------------------------------------------------------------
# The varlen path: attention per packed document, no mask where the rule needs none


class DocGroup(NamedTuple):
    """Documents of one length L and one mask kind, attended in one call."""

    index: torch.Tensor  # (G * L,) long: flat token positions b * T + t, document by document
    count: int  # G documents
    length: int  # L tokens each
    kind: str  # "full" (every key of the document), "causal" (k <= q) or "mask" (the rule, per document)
    mask: torch.Tensor | None  # (G, 1, L, L) bool for kind "mask"


@dataclass(frozen=True)
class Documents:
    """The packed documents of a batch (B rows of T tokens), found from ``segment_ids``: the plan of
    the varlen path, built once per forward (:func:`documents`) and used by every layer."""

    shape: tuple[int, int]  # (B, T)
    groups: tuple[DocGroup, ...]
    starts: np.ndarray  # (n_docs,) flat start b * T + t of each document, in row order
    lengths: np.ndarray  # (n_docs,)
    kinds: frozenset  # the kinds present
    strict: bool

    def flash_layout(self, device) -> tuple[torch.Tensor, torch.Tensor, int]:
        """(token index (N,), cu_seqlens (n_docs + 1,) int32, max_seqlen) of the documents' tokens
        concatenated in row order: flash-attn's varlen layout (padding left out)."""
        index = np.concatenate([np.arange(s, s + n) for s, n in zip(self.starts, self.lengths)]) if len(self.starts) \
            else np.zeros(0, np.int64)
        cu = np.r_[0, np.cumsum(self.lengths)].astype(np.int32)
        return (torch.from_numpy(index).to(device), torch.from_numpy(cu).to(device),
                int(self.lengths.max(initial=0)))


def _run_sums(x: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Sum of x over each run [start, start + length) of the flat array x."""
    c = np.r_[0, np.cumsum(x, dtype=np.int64)]
    return c[starts + lengths] - c[starts]


@torch.compiler.disable  # host-side planning (NumPy): outside any compiled graph
def documents(segment_ids: torch.Tensor, prefix: torch.Tensor, order: torch.Tensor | None = None,
              strict: bool = False) -> Documents:
    """The documents of a packed batch and the mask kind each needs under the rule (one host copy
    of the (B, T) inputs; the packer's layout: each document one contiguous run of its segment id).

    1. Runs of equal segment id per row; runs of 0 (padding) are left out.
    2. Kind per document: "full" when every key is in the prefix; "causal" when no key is and the
       order is the row order (not ``strict``); "mask" otherwise (prefix-LM, an explicit order,
       XLNet's query stream), whose (L, L) mask is the rule restricted to the document (the query
       stream's first token in its order sees itself, as :func:`visibility` gives it).
    3. Documents of equal (length, kind) form one group: one attention call per group."""
    seg = segment_ids.detach().cpu().numpy()
    pre = prefix.detach().cpu().numpy().astype(bool).reshape(-1)
    b, t = seg.shape
    flat = seg.reshape(-1).astype(np.int64)
    key = flat + np.repeat(np.arange(b, dtype=np.int64), t) * (int(flat.max(initial=0)) + 1)
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if flat.size else np.zeros(0, np.int64)
    lengths = np.diff(np.r_[starts, flat.size])
    real = flat[starts] != 0
    starts, lengths = starts[real], lengths[real]
    if len(np.unique(key[starts])) != len(starts):
        raise ValueError("attention='varlen' needs every document as one contiguous run of its segment id "
                         "(the packer's layout); a segment id occurs in two runs of a row: use attention='sdpa'")
    n_pre = _run_sums(pre, starts, lengths)
    if order is None:
        rising = np.ones(len(starts), dtype=bool)
    else:  # the order is the row order inside the document: a plain causal mask
        o = order.detach().cpu().numpy().reshape(-1)
        up = np.r_[o[1:] > o[:-1], False]
        rising = _run_sums(up, starts, np.maximum(lengths - 1, 0)) == lengths - 1
    kind = np.where(n_pre == lengths, 0, np.where((n_pre == 0) & rising & (not strict), 1, 2))
    device = segment_ids.device
    groups = []
    for k_, length in sorted({(int(k), int(n)) for k, n in zip(kind, lengths)}):
        sel = starts[(kind == k_) & (lengths == length)]
        index = torch.from_numpy((sel[:, None] + np.arange(length)).reshape(-1)).to(device)
        mask = None
        if k_ == 2:
            mask = _doc_mask(prefix.reshape(-1)[index].view(len(sel), length),
                             None if order is None else order.reshape(-1)[index].view(len(sel), length), strict)
        groups.append(DocGroup(index, len(sel), length, KINDS[k_], mask))
    return Documents((b, t), tuple(groups), starts, lengths, frozenset(KINDS[int(k)] for k in kind), strict)


KINDS = ("full", "causal", "mask")


def _doc_mask(prefix: torch.Tensor, order: torch.Tensor | None, strict: bool) -> torch.Tensor:
    """(G, 1, L, L) bool: the rule inside G documents of L tokens (every token in the document)."""
    g, n = prefix.shape
    if order is None:
        order = torch.arange(n, device=prefix.device).expand(g, n)
    before = order[:, None, :] < order[:, :, None] if strict else order[:, None, :] <= order[:, :, None]
    mask = before | prefix[:, None, :].bool()  # [g, q, k]
    if strict:  # a query that sees nothing gets its own diagonal (visibility's rule)
        mask = mask | (~mask.any(-1, keepdim=True) & torch.eye(n, dtype=torch.bool, device=prefix.device))
    return mask[:, None]


def _flash_varlen():
    """flash-attn's ``flash_attn_varlen_func`` when the package is installed, else None."""
    try:
        from flash_attn import flash_attn_varlen_func
    except ImportError:  # also the CPU build: flash-attn is CUDA only
        return None
    return flash_attn_varlen_func


def varlen_kernel(docs: Documents, device_type: str, dtype: torch.dtype, head_dim: int, flash) -> str:
    """Which kernel the varlen path runs: "flash_attn" (flash-attn's varlen kernel over the
    documents' tokens) when it is installed (``flash`` not None), on CUDA, in bf16/fp16, with a head
    size it supports (<= 256, a multiple of 8) and one mask kind for all documents that it has
    (full or causal); else "sdpa" (torch SDPA per group of equal-length documents)."""
    if (flash is not None and device_type == "cuda" and dtype in (torch.bfloat16, torch.float16)
            and head_dim <= 256 and head_dim % 8 == 0 and docs.kinds in ({"full"}, {"causal"})):
        return "flash_attn"
    return "sdpa"


@torch.compiler.disable  # a loop over data-dependent groups: eager, between compiled graphs
def varlen_attend(q, k, v, docs: Documents, dropout_p: float = 0.0, flash=None) -> torch.Tensor:
    """Attention document by document: q, k, v (B, T, H, D) -> (B, T, H, D). A padding token's output
    is its own value (it sees only itself, as on the dense paths). ``flash``: flash-attn's varlen
    function (default: the installed one, if any; see :func:`varlen_kernel`)."""
    b, t, h, d = q.shape
    flash = flash if flash is not None else _flash_varlen()
    qf, kf, vf = (x.reshape(b * t, h, d) for x in (q, k, v))  # views: the projections' (B, T, C) output
    if varlen_kernel(docs, q.device.type, q.dtype, d, flash) == "flash_attn":
        index, cu, longest = docs.flash_layout(q.device)
        y = flash(qf[index], kf[index], vf[index], cu, cu, longest, longest, dropout_p=dropout_p,
                  causal=docs.kinds == {"causal"})  # (N, H, D)
        return vf.index_copy(0, index, y.to(vf.dtype)).view(b, t, h, d)
    ys = []
    for g in docs.groups:
        if g.count == b and g.length == t:  # every row is one whole document: no gather
            qi, ki, vi = (x.transpose(1, 2) for x in (q, k, v))
        else:
            qi, ki, vi = (x.index_select(0, g.index).view(g.count, g.length, h, d).transpose(1, 2)
                          for x in (qf, kf, vf))  # (G, H, L, D)
        y = F.scaled_dot_product_attention(qi, ki, vi, attn_mask=g.mask, dropout_p=dropout_p,
                                           is_causal=g.kind == "causal")
        if g.count == b and g.length == t:
            return y.transpose(1, 2)
        ys.append(y.transpose(1, 2).reshape(-1, h, d))
    if not ys:
        return v
    index = torch.cat([g.index for g in docs.groups])
    return vf.index_copy(0, index, torch.cat(ys)).view(b, t, h, d)


# ---------------------------------------------------------------------------------------------
# Modules (names map 1:1 onto transformers.BertModel; see codept.model.hf.HF_NAMES)


class Embeddings(nn.Module):
    """tokens + types + positions (BERT's order), + languages (XLM) and block positions (GLM) when
    the config has those tables; a batch without ``types`` uses type 0 for every token."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.tokens = nn.Embedding(cfg.vocab_size, cfg.hidden)
        self.positions = nn.Embedding(cfg.max_positions, cfg.hidden)
        self.types = nn.Embedding(cfg.type_vocab_size, cfg.hidden)
        self.langs = nn.Embedding(cfg.n_langs, cfg.hidden) if cfg.n_langs else None
        self.blocks = nn.Embedding(cfg.max_positions, cfg.hidden) if cfg.block_positions else None
        self.norm = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, types: torch.Tensor | None = None,
                langs: torch.Tensor | None = None, block_positions: torch.Tensor | None = None,
                token_vector: torch.Tensor | None = None) -> torch.Tensor:
        """``token_vector`` (C,): used for every token instead of the token table (XLNet's query stream),
        and then NOT LayerNormed: the query stream starts at the raw scale of its vectors (norm ~0.3 at
        init_std 0.02), as XLNet's w does, not at the sqrt(C) of a normalised state. Its first block's
        post-LN then lets a context read of ordinary size outweigh the placeholder; from a normalised
        start the SHARED attention weights had to grow until their output matched the residual, and in
        the content stream that drowned every token's own identity (docs/ablations.md, plm)."""
        t = self.types.weight[0] if types is None else self.types(types)
        tok = self.tokens(input_ids) if token_vector is None else token_vector.view(1, 1, -1).expand(*input_ids.shape, -1)
        x = tok + t  # (B, T, C); BERT's summation order
        x = x + self.positions(positions)
        if self.langs is not None and langs is not None:
            x = x + self.langs(langs)
        if self.blocks is not None and block_positions is not None:
            x = x + self.blocks(block_positions)
        return self.drop(x if token_vector is not None else self.norm(x))


class SelfAttention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.heads = cfg.heads
        self.dropout = cfg.attention_dropout
        self.q = nn.Linear(cfg.hidden, cfg.hidden)
        self.k = nn.Linear(cfg.hidden, cfg.hidden)
        self.v = nn.Linear(cfg.hidden, cfg.hidden)
        self.out = nn.Linear(cfg.hidden, cfg.hidden)

    def forward(self, x: torch.Tensor, mask, path: str, kv: torch.Tensor | None = None) -> torch.Tensor:
        """Queries from x; keys and values from ``kv`` (XLNet's query stream reads the content
        stream) or, by default, from x itself."""
        b, t, c = x.shape
        kv = x if kv is None else kv
        # (B, T, C) -> (B, T, H, D)
        q, k, v = (lin(src).view(b, t, self.heads, c // self.heads)
                   for lin, src in ((self.q, x), (self.k, kv), (self.v, kv)))
        y = attend(q, k, v, mask, path, self.dropout if self.training else 0.0)  # (B, T, H, D)
        return self.out(y.reshape(b, t, c))  # (B, T, C)


class Block(nn.Module):
    """Post-LN transformer block (BERT): attention and MLP, each followed by residual + LayerNorm."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.attn = SelfAttention(cfg)
        self.attn_norm = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)
        self.up = nn.Linear(cfg.hidden, cfg.intermediate)
        self.down = nn.Linear(cfg.intermediate, cfg.hidden)
        self.mlp_norm = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor, mask, path: str, kv: torch.Tensor | None = None) -> torch.Tensor:
        x = self.attn_norm(x + self.drop(self.attn(x, mask, path, kv)))  # (B, T, C)
        return self.mlp_norm(x + self.drop(self.down(F.gelu(self.up(x)))))  # (B, T, C)


class Transformer(nn.Module):
    """Token ids + the attention rule's inputs -> hidden states (B, T, C)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.config = cfg
        self.embed = Embeddings(cfg)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.apply(self._init)
        if cfg.residual_init == "zero":
            for block in self.blocks:
                nn.init.zeros_(block.attn.out.weight)
                nn.init.zeros_(block.down.weight)

    def _init(self, m: nn.Module) -> None:  # BERT's initialisation
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=self.config.init_std)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)
        if isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)

    def forward(self, input_ids: torch.Tensor, segment_ids: torch.Tensor | None = None,
                positions: torch.Tensor | None = None, prefix: torch.Tensor | None = None,
                attention: str | None = None, *, types: torch.Tensor | None = None,
                langs: torch.Tensor | None = None, block_positions: torch.Tensor | None = None,
                order: torch.Tensor | None = None) -> torch.Tensor:
        """input_ids, segment_ids, positions (B, T) long; prefix (B, T) bool. Missing segment_ids =
        one document per row, missing positions = 0..T-1, missing prefix = ``not config.causal``;
        types / langs / block_positions (B, T) feed the embedding tables (codept.data.pack's optional
        columns), order (B, T) the attention rule. ``attention`` overrides the config's path.
        Returns hidden states (B, T, C)."""
        cfg = self.config
        b, t = input_ids.shape
        if t > cfg.max_positions and positions is None:
            raise ValueError(f"{t} tokens per row but max_positions={cfg.max_positions}; pass positions or crop")
        if segment_ids is None:
            segment_ids = torch.ones_like(input_ids)
        if positions is None:
            positions = torch.arange(t, device=input_ids.device).expand(b, t)
        if prefix is None:
            prefix = torch.full((b, t), not cfg.causal, dtype=torch.bool, device=input_ids.device)
        path = attention or cfg.attention
        self._check_tables(langs, block_positions)
        mask = attention_mask(segment_ids, prefix, order, path)
        x = self.embed(input_ids, positions, types, langs, block_positions)  # (B, T, C)
        for block in self.blocks:
            x = self._run(block, x, mask, path)
        return x

    def _check_tables(self, langs, block_positions) -> None:
        if langs is not None and self.config.n_langs == 0:
            raise ValueError("the batch has language ids (langs) but the model has no language table: set model.n_langs")
        if block_positions is not None and not self.config.block_positions:
            raise ValueError("the batch has block_positions but the model has no second position table: "
                             "set model.block_positions=true")

    def _run(self, block: "Block", x: torch.Tensor, mask, path: str, kv: torch.Tensor | None = None) -> torch.Tensor:
        if self.config.checkpointing and self.training:
            return torch.utils.checkpoint.checkpoint(block, x, mask, path, kv, use_reentrant=False)
        return block(x, mask, path, kv)

    def two_stream(self, batch: dict, query: torch.Tensor, attention: str | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """XLNet's two-stream attention over a padded batch: (content h, query g), each (B, T, C).

        1. h0 = the usual embeddings; g0 = the embeddings with the vector ``query`` (C,) (XLNet's
           learned w, held by the head) in place of every token, at the token's own position, type,
           language and block position: it knows WHERE, never WHAT. g0 skips the embedding LayerNorm
           (:class:`Embeddings`: a normalised g0 made the content stream collapse).
        2. Each block, with the SAME weights for both streams:
             h = Block(h, rule: order[k] <= order[q] or prefix[k])            (the usual forward)
             g = Block(g, keys/values from the previous layer's h, rule: order[k] < order[q] or prefix[k])
        So g at token i never sees token i, only what precedes it in the factorisation order; h is
        exactly :meth:`encode`'s output. Cost: about twice a forward (the query stream's attention
        and MLP run on every token)."""
        cfg = self.config
        ids, seg, pos, pre = batch["input_ids"], batch["segment_ids"], batch["positions"], batch["prefix"]
        order = batch.get("order")
        path = attention or cfg.attention
        extra = {k: batch.get(k) for k in ("types", "langs", "block_positions")}
        self._check_tables(extra["langs"], extra["block_positions"])
        see = attention_mask(seg, pre, order, path)  # content stream: order[k] <= order[q]
        see_before = attention_mask(seg, pre, order, path, strict=True)  # query stream: order[k] < order[q]
        h = self.embed(ids, pos, **extra)  # (B, T, C)
        g = self.embed(ids, pos, **extra, token_vector=query)  # (B, T, C)
        for block in self.blocks:
            h, g = self._run(block, h, see, path), self._run(block, g, see_before, path, kv=h)
        return h, g

    def encode(self, batch: dict, attention: str | None = None) -> torch.Tensor:
        """Hidden states (B, T, C) of a padded batch from codept.data.collate (its optional columns
        types, langs, block_positions and order are passed on when present)."""
        extra = {k: batch[k] for k in OPTIONAL_INPUTS if k in batch}
        return self(batch["input_ids"], batch["segment_ids"], batch["positions"], batch["prefix"], attention, **extra)

    def num_parameters(self, embeddings: bool = True) -> int:
        n = sum(p.numel() for p in self.parameters())
        if not embeddings:
            n -= sum(p.numel() for p in self.embed.parameters())
        return n

    def flops_per_token(self, seq_len: int) -> float:
        """Training FLOPs per token (forward + backward): 6 N for the weight matmuls plus
        12 L C T for attention scores and values over the full T x T (PaLM appendix B). Heads excluded."""
        cfg = self.config
        return 6.0 * self.num_parameters(embeddings=False) + 12.0 * cfg.layers * cfg.hidden * seq_len
