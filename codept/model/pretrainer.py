"""The pretrainer: the head registry, the transformer plus its named heads, and the heads' output priors.

1. :data:`HEADS` maps a head name to its constructor (codept.model.heads, plus the staged heads of
   codept.model.regimes); :func:`build_head` builds one on a model, options overriding its defaults.
2. :class:`Pretrainer` runs the staged regimes (codept.model.regimes.stages), one encoder pass
   (regimes.encode: the content stream, plus XLNet's query stream when a head reads it), then every
   head whose field the batch carries: batch -> {head: (loss_sum, n_valid)} (or Metrics).
3. :func:`target_counts` counts each head's targets in a batch before any forward (the global
   normaliser of codept.train.engine.train_step).
4. :func:`init_output_priors` starts the token-level output biases at the log label frequencies.
Cost: one encoder pass per batch plus the heads (codept.model.heads) and the stages (regimes).
Not covered: the heads themselves (heads.py), the staged forwards (regimes.py), the optimizer.
"""

from __future__ import annotations

from functools import partial

import torch
from torch import nn

from codept.data.example import IGNORE
from codept.model.heads import (ContrastiveHead, EdgeHead, LMHead, Metrics, MultiPointerHead, PairClassifier,
                                PointerHead, SpanBoundaryHead, TokenClassifier, _zero_loss)
from codept.model.regimes import Generator, QueryLMHead, encode, stages
from codept.model.transformer import Transformer

# name -> constructor(model, **options); the name is also the default label key.
HEADS = {
    "mlm": partial(LMHead, label="mlm", causal=False),
    "lm": partial(LMHead, label="lm", causal=True),
    "rtd": partial(TokenClassifier, label="rtd", n_classes=2),
    "sop": partial(PairClassifier, label="sop", n_classes=2),
    "nsp": partial(PairClassifier, label="nsp", n_classes=2),
    "edge": partial(PointerHead, label="edge"),
    "dataflow": partial(MultiPointerHead, label="dataflow"),  # any reaching definition of a use
    "dataflow_edge": partial(EdgeHead, label="dataflow_edge"),  # is (anchor, other) a dataflow edge?
    "contrastive": partial(ContrastiveHead, label="pair"),
    "sbo": partial(SpanBoundaryHead, label="sbo", target="mlm"),
    "glm": partial(LMHead, label="glm", causal=False),  # GLM part B: labels already shifted
    "plm": partial(QueryLMHead, label="plm"),  # XLNet query stream
    "gen": partial(Generator, label="gen"),  # ELECTRA generator
    "exec_lines": partial(TokenClassifier, label="exec_lines", n_classes=5),  # codept.exec.views.N_BUCKETS
    "exec_values": partial(LMHead, label="exec_values", causal=False),  # masked trace values
}


def build_head(name: str, model: Transformer, **options) -> nn.Module:
    """The registered head `name` on `model`; `options` override its defaults (label, n_classes, ...)."""
    if name not in HEADS:
        raise KeyError(f"unknown head {name!r}; registered: {sorted(HEADS)}")
    return HEADS[name](model, **options)


def target_counts(batch: dict, heads: dict[str, nn.Module]) -> dict[str, int]:
    """Each head's number of targets in a batch before any forward (codept.train.engine.train_step's
    count_fn): ``head.count(batch)`` when the head defines it, else the labels that are not IGNORE;
    0 when the batch lacks the head's field."""
    out = {}
    for name, head in heads.items():
        if head.field not in batch:
            out[name] = 0
        elif hasattr(head, "count"):
            out[name] = head.count(batch)
        else:
            out[name] = int((batch[head.field] != IGNORE).sum())
    return out


def init_output_priors(pretrainer: "Pretrainer", batches: list[dict], skip: tuple = ()) -> dict[str, int]:
    """Start every token-level output bias at the log frequency of its targets in ``batches``
    (centred): TokenClassifier (rtd, exec_lines) over its classes, LMHead (mlm, lm, glm, plm,
    exec_values) over the vocabulary, each count plus min(1, N / K) for N targets over K outputs (a
    batch of ~600 MLM targets over a 16 k vocabulary would otherwise be 97% smoothing). Returns
    {head: targets counted}; a head without targets, or named in ``skip`` (e.g. a loaded pretrained
    head), keeps its bias. ELECTRA's staged heads are left alone: the generator, and the
    discriminator whose labels (``rtd_field``) the generator's stage writes.
    Why: with a zero bias a head starts at p = 1/K, and AdamW moves a bias by about lr per step, so
    the label prior (ident_rtd: 3% renamed tokens, a 3.5-nat logit gap) is fitted faster through the
    encoder, by one shared direction in every token, which the post-LN blocks turn into constant final
    states (debug_cpu, lr 1e-3: per-dimension std of the final states over tokens 0.80 -> 0.0002 in
    100 steps of ident_rtd, 0.011 for mlm; every document then embeds alike). Cost: one bincount per
    head over the batches."""
    staged = {getattr(h, "rtd_field", None) for h in pretrainer.heads.values() if hasattr(h, "stage")}
    out = {}
    for name, head in pretrainer.heads.items():
        if (name in skip or hasattr(head, "stage") or head.field in staged
                or not isinstance(head, (TokenClassifier, LMHead))):
            continue
        bias = head.out.bias if isinstance(head, TokenClassifier) else head.bias
        counts = torch.zeros(bias.shape, dtype=torch.float64)
        n = 0
        for b in batches:
            if head.field not in b:
                continue
            t = head.targets(b) if isinstance(head, LMHead) else b[head.field]
            t = t[t != IGNORE].long()
            counts += torch.bincount(t, minlength=len(counts))[: len(counts)].double()
            n += len(t)
        if n == 0:
            continue
        counts += min(1.0, n / len(counts))
        logp = (counts / counts.sum()).log()
        with torch.no_grad():
            bias.copy_((logp - logp.mean()).to(bias.dtype))
        out[name] = n
    return out


class Pretrainer(nn.Module):
    """The transformer plus named heads: batch -> {head name: (loss_sum, n_valid)}. One forward of
    the encoder serves every head; the trainer normalises each head by its global count. A head whose
    input (``head.field``, e.g. "labels.mlm") is absent from the batch yields a graph-connected 0 and
    count 0, so every rank runs the same parameters whatever its micro-batch holds; a head with
    ``always_forward`` (a collective across ranks) runs anyway and handles the absence itself."""

    def __init__(self, model: Transformer, heads: dict[str, nn.Module]):
        super().__init__()
        self.model = model
        self.heads = nn.ModuleDict(heads)

    def forward(self, batch: dict, metrics: bool = False) -> dict[str, tuple]:
        """{head: (loss_sum, n_valid)}; with ``metrics`` {head: :class:`Metrics`} (validation: the
        same forward, plus each head's top-1 hits; run it under torch.no_grad, in eval mode).
        Staged regimes (codept.model.regimes: scheduled sampling, ELECTRA's generator, XLNet's two
        streams) run first and only when the batch carries their columns."""
        batch, out = stages(self, batch, metrics)  # {} and the same batch without them
        streams = encode(self, batch)  # {"content": (B, T, C)} (+ "query" for plm)
        hidden = streams["content"]
        for name, head in self.heads.items():
            if name in out:
                continue
            if head.field in batch or getattr(head, "always_forward", False):
                h = streams[getattr(head, "stream", "content")]
                out[name] = head(h, batch, metrics=True) if metrics else head(h, batch)
            else:
                none = torch.zeros((), dtype=torch.long, device=hidden.device)
                loss = _zero_loss(hidden, *head.parameters())
                out[name] = Metrics(loss, none, none, none) if metrics else (loss, none)
        return out
