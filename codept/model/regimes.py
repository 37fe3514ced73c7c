"""Staged forwards: the training regimes that need more than one encoder pass, each one function.

codept.model.pretrainer.Pretrainer.forward calls :func:`stages` (before the encoder) and :func:`encode`
(the encoder pass itself); a batch without the columns these look for runs exactly the one plain
forward it always did.

1. :func:`scheduled_sampling` (objective ``ar`` with a schedule; Bengio et al. 2015): when the batch
   has ``labels.sample`` and the run has the "lm" head, a first pass WITHOUT gradient (teacher
   forcing, the model in its current train/eval mode), then every marked token t is replaced by the
   model's greedy prediction from hidden state t-1 of the same document; the loss is that of the
   second, ordinary pass on the true targets. Which tokens are marked comes from the data (seeded by
   (seed, epoch, index) and ctx.progress), argmax is deterministic: a resume is bit-exact.
2. :class:`Generator` (head "gen", objective ``electra``): ELECTRA's generator -> sample ->
   discriminator. The generator reads the discriminator's embeddings (token, position and type
   tables shared, ELECTRA's choice) through a linear projection to its width (``width`` x the
   discriminator's heads, same head size, same depth), its MLM head ties its decoder to the shared
   token table. Its MLM loss is the "gen" head's output; replacements are sampled from its softmax
   under no_grad (multinomial from torch's RNG in training, saved and restored by the checkpoint;
   a fixed seed in eval mode, so validation draws the same tokens every time); ``labels.rtd`` becomes
   1 where the sample differs from the original (a sample equal to the original counts as
   original), and the discriminator (the Pretrainer's model) then reads the corrupted ids.
   Everything is one nn.Module: one DeepSpeed engine, one optimizer, one checkpoint.
3. :func:`encode` runs XLNet's two streams (codept.model.transformer.Transformer.two_stream) when a
   head reads the query stream (:class:`QueryLMHead`, head "plm") and its labels are in the batch;
   the content stream then serves every other head, the query stream the plm head.
:func:`greedy` continues causal documents token by token (full recompute per token), the reference
for codept.model.hf's causal export.
Cost: scheduled sampling one extra forward without gradient; ELECTRA the generator's forward +
backward (~width^2 of the discriminator's per layer) and one multinomial draw per masked token;
two-stream about twice a forward. NOT covered: ZeRO-3 (the stages call head methods other than
``forward``, which ZeRO-3's parameter gathering does not hook), KV caches in :func:`greedy`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from codept.data.example import IGNORE
from codept.model.heads import LMHead, _classify, _init
from codept.model.transformer import Block, Transformer, attention_mask, configure

# ------------------------------------------------------------------------------------------------
# 1. scheduled sampling


def scheduled_sampling(model: Transformer, lm_head: LMHead, batch: dict) -> dict:
    """The batch with every token marked in ``labels.sample`` replaced by the model's greedy
    prediction of it from a first, gradient-free pass (module docstring, 1)."""
    marked = batch["labels.sample"][:, 1:] != IGNORE  # (B, T-1): token t = 1.. is replaced
    seg = batch["segment_ids"]
    marked = marked & (seg[:, 1:] == seg[:, :-1]) & (seg[:, 1:] != 0)  # t-1 in the same document
    if not bool(marked.any()):
        return batch
    with torch.no_grad():
        hidden = model.encode(batch)  # (B, T, C), teacher forced
        pred = lm_head.logits(hidden[:, :-1][marked]).argmax(-1)  # (N,) prediction of token t from t-1
    ids = batch["input_ids"].clone()
    ids[:, 1:][marked] = pred
    return {**batch, "input_ids": ids}


# ------------------------------------------------------------------------------------------------
# 2. ELECTRA's generator


def generator_config(cfg, width: float):
    """The generator's ModelConfig: ``width`` x the heads (at least 1) at the same head size."""
    if not 0.0 < width <= 1.0:
        raise ValueError(f"generator width={width}: must be in (0, 1] (a share of the discriminator's width)")
    heads = max(1, round(cfg.heads * width))
    hidden = heads * (cfg.hidden // cfg.heads)
    return configure(cfg, hidden=hidden, heads=heads, intermediate=4 * hidden)


class Generator(nn.Module):
    """ELECTRA's generator as a staged head (module docstring, 2): ``stage(model, batch, metrics)``
    -> (the discriminator's batch, the generator's (loss_sum, n_valid) or Metrics)."""

    def __init__(self, model: Transformer, label: str = "gen", width: float = 0.25, rtd: str = "rtd"):
        super().__init__()
        cfg = model.config
        self.label, self.field, self.rtd_field = label, f"labels.{label}", f"labels.{rtd}"
        self.config = generator_config(cfg, width)
        g = self.config.hidden
        self.project = nn.Linear(cfg.hidden, g)  # shared embeddings (width C) -> generator width
        self.blocks = nn.ModuleList(Block(self.config) for _ in range(self.config.layers))
        self.dense = nn.Linear(g, cfg.hidden)  # MLM head: back to the embedding width, tied decoder
        self.norm = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)
        self.decoder_weight = model.embed.tokens.weight  # the same Parameter: shared token table
        self.bias = nn.Parameter(torch.zeros(cfg.vocab_size))
        self.sparse = True  # False: the dense reference (every position projected, then selected)
        _init(self, cfg.init_std)
        for m in self.modules():
            if isinstance(m, nn.LayerNorm):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """(..., g) -> (..., V)"""
        return F.linear(self.norm(F.gelu(self.dense(hidden))), self.decoder_weight, self.bias)

    def hidden(self, model: Transformer, batch: dict) -> torch.Tensor:
        """(B, T, g): the generator's encoder over the shared embeddings, under the batch's mask."""
        extra = {k: batch.get(k) for k in ("types", "langs", "block_positions")}
        path = model.config.attention
        mask = attention_mask(batch["segment_ids"], batch["prefix"], batch.get("order"), path)
        x = self.project(model.embed(batch["input_ids"], batch["positions"], **extra))
        for block in self.blocks:
            x = block(x, mask, path)
        return x

    def sample(self, logits: torch.Tensor) -> torch.Tensor:
        """(N, V) -> (N,) token ids drawn from softmax(logits); no gradient flows through it."""
        probs = logits.detach().float().softmax(-1)
        if len(probs) == 0:
            return torch.zeros(0, dtype=torch.long, device=logits.device)
        gen = None
        if not self.training:  # validation: the same draws every time, torch's RNG untouched
            gen = torch.Generator(device=logits.device).manual_seed(0)
        return torch.multinomial(probs, 1, generator=gen).squeeze(-1)

    def stage(self, model: Transformer, batch: dict, metrics: bool = False):
        labels = batch[self.field]  # (B, T): original ids at the masked tokens
        valid = labels != IGNORE
        h = self.hidden(model, batch)  # (B, T, g)
        logits = self.logits(h[valid]) if self.sparse else self.logits(h)[valid]  # (N, V)
        out = _classify(logits, labels[valid], valid.sum(), metrics, self.bias)
        sampled = self.sample(logits)  # (N,)
        ids = batch["input_ids"].clone()
        ids[valid] = sampled
        replaced = torch.zeros_like(valid)
        replaced[valid] = sampled != labels[valid]
        new = {**batch, "input_ids": ids}
        if self.rtd_field in batch:
            rtd = batch[self.rtd_field]
            new[self.rtd_field] = torch.where(rtd != IGNORE, replaced.to(rtd.dtype), rtd)
        return new, out


# ------------------------------------------------------------------------------------------------
# 3. two streams (XLNet)


class QueryLMHead(LMHead):
    """The plm head: an LM head read from the QUERY stream at each labelled token (label at its own
    position), plus XLNet's learned query vector w (C,) that starts the query stream."""

    stream = "query"

    def __init__(self, model: Transformer, label: str = "plm"):
        super().__init__(model, label=label, causal=False)
        self.query = nn.Parameter(torch.randn(model.config.hidden) * model.config.init_std)

    def forward(self, hidden: torch.Tensor, batch: dict, metrics: bool = False):
        check_context(batch, batch[self.field] != IGNORE)
        return super().forward(hidden, batch, metrics)


def check_context(batch: dict, targets: torch.Tensor) -> None:
    """Every target of the query stream must have a key before it in its order (else the row sees
    only itself and would read its own token): a ValueError naming the rule otherwise."""
    seg = batch["segment_ids"]
    b, t = seg.shape
    order = batch.get("order", torch.arange(t, device=seg.device).expand(b, t))
    first = torch.full((b, int(seg.max()) + 1), torch.iinfo(order.dtype).max, dtype=order.dtype, device=seg.device)
    first.scatter_reduce_(1, seg.long(), order, reduce="amin")  # (B, D+1) smallest order per segment
    alone = targets & (order == first.gather(1, seg.long())) & ~batch["prefix"].bool()
    if bool(alone.any()):
        raise ValueError(f"plm: {int(alone.sum())} target token(s) come first in their factorisation order and "
                         "would see no other token; a document was split by packing: set objective.plm.max_tokens "
                         "<= seq_len")


def stages(pretrainer, batch: dict, metrics: bool) -> tuple[dict, dict]:
    """(the batch the encoder reads, {head: output} of the staged heads), module docstring 1-2."""
    heads, out = pretrainer.heads, {}
    if "labels.sample" in batch and "lm" in heads:
        refuse_partitioned(pretrainer, "scheduled sampling")
        batch = scheduled_sampling(pretrainer.model, heads["lm"], batch)
    for name, head in heads.items():
        if hasattr(head, "stage") and head.field in batch:
            refuse_partitioned(pretrainer, f"the {name!r} head's staged forward")
            batch, out[name] = head.stage(pretrainer.model, batch, metrics)
    return batch, out


def refuse_partitioned(module: nn.Module, what: str) -> None:
    """ZeRO-3 gathers a module's parameters only around its ``forward``; a stage calls other
    methods, so it would read empty partitions: a ValueError naming the rule instead."""
    p = next(module.parameters())
    if hasattr(p, "ds_id") and p.numel() == 0:
        raise ValueError(f"{what} runs outside forward(): it needs ZeRO stage <= 2 (set zero_stage=2 or a "
                         "zero2 ds_config), not stage 3")


def encode(pretrainer, batch: dict) -> dict[str, torch.Tensor]:
    """{"content": (B, T, C)} and, when a query-stream head has labels here, {"query": (B, T, C)}."""
    query = [h for h in pretrainer.heads.values() if getattr(h, "stream", "content") == "query" and h.field in batch]
    if not query:
        return {"content": pretrainer.model.encode(batch)}
    h, g = pretrainer.model.two_stream(batch, query[0].query)
    return {"content": h, "query": g}


# ------------------------------------------------------------------------------------------------
# decoding (the reference for the causal export)


@torch.no_grad()
def greedy(model: Transformer, lm_head: LMHead, input_ids: torch.Tensor, new_tokens: int) -> torch.Tensor:
    """(B, T) prompts -> (B, T + new_tokens): each step appends the argmax of the next-token logits
    of a causal pass (prefix all False) over the whole sequence so far."""
    ids = input_ids
    for _ in range(new_tokens):
        b, t = ids.shape
        hidden = model(ids, prefix=torch.zeros(b, t, dtype=torch.bool, device=ids.device))  # (B, T, C)
        nxt = lm_head.logits(hidden[:, -1]).argmax(-1, keepdim=True)  # (B, 1)
        ids = torch.cat([ids, nxt], dim=1)
    return ids
