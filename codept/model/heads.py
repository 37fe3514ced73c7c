"""Heads: hidden states (B, T, C) + the batch -> (loss_sum, n_valid), one per objective family.

Every head returns the SUM of its per-record losses and the number of records that carried a
label; the trainer divides by the count summed over the whole optimizer step (all micro-batches,
all ranks), so packing and gradient accumulation do not change what the loss means. A record
labelled IGNORE (-100; pointer -1) contributes neither. Batches are the padded layout of
codept.data.collate:

  head              reads                      a record is            loss
  LMHead (mlm)      labels.<name> (B, T)       a labelled token       CE over the tied vocabulary
  LMHead (lm)       labels.<name> (B, T)       a token whose previous token is in the same document
  TokenClassifier   labels.<name> (B, T)       a labelled token       CE over n_classes (RTD: 2)
  PairClassifier    scalar.<name> (B, D)       a labelled document    CE on its first token (NSP/SOP)
  PointerHead       ptr.<name> (B, K, 2)       a pair (src, dst)      CE over dst's document + "none"
  MultiPointerHead  ptr.<name> (B, K, 1 + m)   src + m targets        -log P(any target) (marginal)
  EdgeHead          ptr.<name> (B, K, 3)       a pair (anchor, pos)   binary CE: 1 for (anchor, positive),
                                               or (anchor, neg)       0 for (anchor, negative)
  ContrastiveHead   scalar.<name> (B, D)       a matched pair         in-batch InfoNCE (symmetric by default)
  SpanBoundaryHead  ptr.sbo (B, K, 3) +        a span token           CE over the tied vocabulary from
    (sbo)           labels.mlm (B, T)                                 the span's two boundary states

Algorithms:
  1. LMHead is BERT's MLM head (dense, GELU, LayerNorm, decoder tied to ``embed.tokens`` + bias),
     applied only at labelled positions (logits for ~15% of tokens, not all). With ``causal=True``
     the label of token t is predicted from hidden state t-1, and only when t-1 and t belong to the
     same document: a shift never crosses a packing boundary. labels.lm holds UNshifted targets
     (usually the input ids themselves; IGNORE where no prediction is wanted).
  2. PairClassifier pools each document by its first token (positions restart at 0 per document,
     BERT's CLS position) through dense + tanh (BERT's pooler), then a linear classifier.
  3. PointerHead scores every candidate key j of the source's document with a bilinear form
     (W_q h_src) . (W_k h_j) / sqrt(C), plus a learned score for "no target" (dst = -1); records
     with src = -1 are padding.
  4. ContrastiveHead mean-pools each document, L2-normalises, and matches documents by their scalar
     value ``2 * pair_id + side`` (side 0 = e.g. doc, 1 = code). Every matched pair is scored against
     all other-side documents of the micro-batch on every data-parallel rank (in-batch negatives,
     all-gathered with gradient), both directions, temperature tau.
Validation: ``head(hidden, batch, metrics=True)`` returns :class:`Metrics` (loss_sum, n_valid,
correct, count) from the same scores: correct = argmax == target for the LM, token, pair and pointer
heads, and for a binary TokenClassifier (RTD) also ``extra``: true / false positives, false negatives
and margin histograms, so validation reports F1 and AUC on the replaced class (:func:`binary_scores`;
its accuracy sits at the share of original tokens); for ContrastiveHead the top-1 retrieval of the partner among the other-side documents it
scores (the micro-step's, gathered over ranks), both directions (count = 2 per pair); for EdgeHead
logit > 0 == the pair's label. Passing the
flag through ``forward`` (not a separate method) keeps ZeRO-3's parameter gathering, which hooks
``forward``, working.
Sparse heads: the token-level heads (LMHead, TokenClassifier, and the generator of
codept.model.regimes) gather the hidden states at their targets first, then project (ModernBERT's
sparse prediction); ``head.sparse = False`` gives the dense reference (every position projected,
then selected), equal in loss, gradients and metrics (tests/test_compute.py), kept for tests and
benchmarks/bench_compute.py.
Cost: LM heads O(N_labelled V C); pointer O(K T C) per row; edge O(K C^2); contrastive O(M^2 C) for M documents.
Selecting labelled positions by boolean index costs one host-device sync per head and step.
Not covered: the varlen layout; negatives across micro-batches of one step or from a queue (the
contrastive loss of a pair depends on its micro-step, so its sum over micro-batches is not a full-batch
loss).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from codept.data.example import IGNORE
from codept.model.transformer import Transformer


def _zero_loss(*tensors: torch.Tensor) -> torch.Tensor:
    """A 0 connected to the graph: a head without records this micro-batch still yields (zero)
    gradients for its parameters, which data-parallel reductions expect."""
    return sum(t.sum() for t in tensors) * 0.0


class Metrics(NamedTuple):
    """What a head returns with ``metrics=True`` (held-out validation): its loss and accuracy terms,
    each a sum over the batch, so they add up over micro-batches and ranks like the loss does."""

    loss_sum: torch.Tensor
    n_valid: torch.Tensor
    correct: torch.Tensor
    """Records whose top-1 prediction is right (argmax == target; the partner for contrastive)."""
    count: torch.Tensor
    """Records scored for accuracy (n_valid; 2 per pair for contrastive: both directions)."""
    extra: torch.Tensor | None = None
    """A binary token head's :func:`binary_counts` (None for the others): sums, like the rest."""


AUC_BINS = 1024  # bins of a binary head's logit margin, uniform in asinh(256 m) over |m| < 32: its AUC
_AUC_SCALE, _AUC_TOP = 256.0, math.asinh(256.0 * 32)  # bin width ~7e-5 near m = 0 (a fresh head), ~0.3 at |m| = 16


def binary_counts(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """(N, 2) logits, (N,) targets in {0, 1} -> (3 + 2 AUC_BINS,) float64: true positives, false
    positives, false negatives of the argmax, then the positives' and the negatives' counts per bin
    of the margin m = logit_1 - logit_0 (AUC_BINS bins uniform in asinh(256 m), fine near 0 where
    an untrained head's margins sit, |m| >= 32 in the end bins). Sums over batches and ranks add
    up; :func:`binary_scores` turns them into F1 and AUC (class 1 = positive: replaced)."""
    margin = (logits[:, 1] - logits[:, 0]).float()
    pos, pred = target == 1, margin > 0
    u = torch.asinh(margin.double() * _AUC_SCALE) / _AUC_TOP  # in (-1, 1) for |m| < 32
    bins = ((u + 1) * (AUC_BINS / 2)).long().clamp(0, AUC_BINS - 1)
    hist = torch.zeros(2, AUC_BINS, dtype=torch.float64, device=logits.device)
    hist[0].index_add_(0, bins[pos], torch.ones(int(pos.sum()), dtype=torch.float64, device=logits.device))
    hist[1].index_add_(0, bins[~pos], torch.ones(int((~pos).sum()), dtype=torch.float64, device=logits.device))
    tp, fp, fn = (pred & pos).sum(), (pred & ~pos).sum(), (~pred & pos).sum()
    return torch.cat([torch.stack([tp, fp, fn]).double(), hist.ravel()])


def binary_scores(counts) -> dict[str, float]:
    """{precision, recall, f1, auc} of summed :func:`binary_counts` (nan where undefined: no
    predicted positive, no positive, or one class absent). AUC = P(margin of a positive > margin of
    a negative), a tie within a bin counting 1/2."""
    c = torch.as_tensor(counts, dtype=torch.float64)
    tp, fp, fn = (float(x) for x in c[:3])
    hp, hn = c[3:3 + AUC_BINS], c[3 + AUC_BINS:]
    nan = float("nan")
    below = torch.cumsum(hn, 0) - hn  # negatives in lower bins
    p, n = float(hp.sum()), float(hn.sum())
    return {"precision": tp / (tp + fp) if tp + fp else nan, "recall": tp / (tp + fn) if tp + fn else nan,
            "f1": 2 * tp / (2 * tp + fp + fn) if tp + fn else nan,
            "auc": float((hp * (below + 0.5 * hn)).sum()) / (p * n) if p and n else nan}


def _classify(logits: torch.Tensor, target: torch.Tensor, n: torch.Tensor, metrics: bool, *keep: torch.Tensor):
    """Cross-entropy SUM of (N, K) logits against (N,) targets, and n; with ``metrics`` a
    :class:`Metrics` whose ``correct`` counts argmax == target. ``keep``: tensors a graph-connected
    zero loss is built from when N = 0."""
    if logits.shape[0] == 0:
        loss = _zero_loss(logits, *keep)
    else:
        loss = F.cross_entropy(logits.float(), target, reduction="sum")
    if not metrics:
        return loss, n
    return Metrics(loss, n, (logits.argmax(-1) == target).sum(), n)


def _init(module: nn.Module, std: float) -> None:
    """BERT's initialisation for a head's own layers (the tied decoder is left alone)."""
    for m in module.modules():
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=std)
            nn.init.zeros_(m.bias)


class LMHead(nn.Module):
    """Masked (causal=False) or causal (causal=True) language modelling over the tied vocabulary."""

    def __init__(self, model: Transformer, label: str = "mlm", causal: bool = False):
        super().__init__()
        cfg = model.config
        self.label, self.causal = label, causal
        self.field = f"labels.{label}"
        self.dense = nn.Linear(cfg.hidden, cfg.hidden)
        self.norm = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)
        self.decoder_weight = model.embed.tokens.weight  # tied: the same Parameter as the input table
        self.bias = nn.Parameter(torch.zeros(cfg.vocab_size))
        self.sparse = True  # False: the dense reference (every position projected, then selected)
        _init(self, cfg.init_std)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """(..., C) -> (..., V)"""
        return F.linear(self.norm(F.gelu(self.dense(hidden))), self.decoder_weight, self.bias)

    def targets(self, batch: dict) -> torch.Tensor:
        """(B, T) target of each hidden state; for causal LM the next token's label within its document."""
        labels = batch[self.field]  # (B, T)
        if not self.causal:
            return labels
        seg = batch["segment_ids"]
        same_doc = (seg[:, 1:] == seg[:, :-1]) & (seg[:, :-1] != 0)  # (B, T-1): t and t+1 in one document
        nxt = torch.where(same_doc, labels[:, 1:], torch.full_like(labels[:, 1:], IGNORE))
        return torch.cat([nxt, torch.full_like(labels[:, :1], IGNORE)], dim=1)  # last token predicts nothing

    def count(self, batch: dict) -> int:
        """Targets the forward will score (codept.model.pretrainer.target_counts): for causal LM the
        shifted targets, one fewer per document than its labels."""
        return int((self.targets(batch) != IGNORE).sum())

    def forward(self, hidden: torch.Tensor, batch: dict, metrics: bool = False):
        targets = self.targets(batch)  # (B, T)
        valid = targets != IGNORE
        logits = self.logits(hidden[valid]) if self.sparse else self.logits(hidden)[valid]  # (N, V)
        return _classify(logits, targets[valid], valid.sum(), metrics, self.bias)


class TokenClassifier(nn.Module):
    """Per-token classification (ELECTRA's replaced-token detection: 2 classes)."""

    def __init__(self, model: Transformer, label: str = "rtd", n_classes: int = 2):
        super().__init__()
        cfg = model.config
        self.label, self.field = label, f"labels.{label}"
        self.dense = nn.Linear(cfg.hidden, cfg.hidden)
        self.out = nn.Linear(cfg.hidden, n_classes)
        self.extra_size = 3 + 2 * AUC_BINS if n_classes == 2 else 0  # Metrics.extra: binary_counts
        self.sparse = True  # False: the dense reference (every position classified, then selected)
        _init(self, cfg.init_std)

    def forward(self, hidden: torch.Tensor, batch: dict, metrics: bool = False):
        labels = batch[self.field]  # (B, T)
        valid = labels != IGNORE
        h = hidden[valid] if self.sparse else hidden
        logits = self.out(F.gelu(self.dense(h)))  # (N, n_classes)
        logits = logits if self.sparse else logits[valid]
        out = _classify(logits, labels[valid], valid.sum(), metrics)
        if metrics and self.extra_size:  # accuracy sits at the majority share: F1 and AUC on class 1 tell
            out = out._replace(extra=binary_counts(logits.detach(), labels[valid]))
        return out


def first_tokens(segment_ids: torch.Tensor, n_docs: int) -> torch.Tensor:
    """(B, D) row index of the first token of documents 1..D of each row; T where a row has fewer."""
    b, t = segment_ids.shape
    idx = torch.arange(t, device=segment_ids.device).expand(b, t)
    first = torch.full((b, n_docs + 1), t, dtype=torch.long, device=segment_ids.device)
    seg = segment_ids.long().clamp(max=n_docs)  # documents beyond D carry no label here
    first.scatter_reduce_(1, seg, idx, reduce="amin")
    return first[:, 1:]


class PairClassifier(nn.Module):
    """Document-level classification on each document's first token (NSP/SOP); BERT pooler + linear."""

    def __init__(self, model: Transformer, label: str = "sop", n_classes: int = 2):
        super().__init__()
        cfg = model.config
        self.label, self.field = label, f"scalar.{label}"
        self.pool = nn.Linear(cfg.hidden, cfg.hidden)
        self.out = nn.Linear(cfg.hidden, n_classes)
        _init(self, cfg.init_std)

    def forward(self, hidden: torch.Tensor, batch: dict, metrics: bool = False):
        labels = batch[self.field]  # (B, D), IGNORE-padded
        b, t, c = hidden.shape
        first = first_tokens(batch["segment_ids"], labels.shape[1])  # (B, D)
        valid = (labels != IGNORE) & (first < t)
        h = hidden.gather(1, first.clamp(max=t - 1)[..., None].expand(-1, -1, c))  # (B, D, C)
        logits = self.out(torch.tanh(self.pool(h[valid])))  # (N, n_classes)
        return _classify(logits, labels[valid], valid.sum(), metrics)


def _query_key(head: nn.Module, model: Transformer, label: str):
    """A pointer-style head's label, field ``ptr.<label>`` and query / key projections; its config."""
    cfg = model.config
    head.label, head.field = label, f"ptr.{label}"
    head.query = nn.Linear(cfg.hidden, cfg.hidden)
    head.key = nn.Linear(cfg.hidden, cfg.hidden)
    return cfg


class PointerHead(nn.Module):
    """Edges (src -> dst) scored by a bilinear form over the keys of src's document, or "none"."""

    def __init__(self, model: Transformer, label: str = "edge"):
        super().__init__()
        cfg = _query_key(self, model, label)
        # score of "src has no target"; (1,), not 0-dim: DeepSpeed's initial broadcast views every
        # parameter as bytes, which a 0-dim tensor refuses ("self.dim() cannot be 0")
        self.none = nn.Parameter(torch.zeros(1))
        _init(self, cfg.init_std)

    def count(self, batch: dict) -> int:
        """Records (src >= 0) in a batch: what forward's n_valid will be (target_counts)."""
        return int((batch[self.field][..., 0] >= 0).sum())

    def forward(self, hidden: torch.Tensor, batch: dict, metrics: bool = False):
        ptr = batch[self.field]  # (B, K, 2)
        if ptr.dim() != 3 or ptr.shape[-1] != 2:
            raise ValueError(f"{self.field} has shape {tuple(ptr.shape)}; PointerHead expects (B, K, 2) pairs")
        b, t, c = hidden.shape
        seg = batch["segment_ids"]  # (B, T)
        src, dst = ptr[..., 0], ptr[..., 1]  # (B, K)
        valid = src >= 0
        s = src.clamp(min=0)
        q = self.query(hidden).gather(1, s[..., None].expand(-1, -1, c))  # (B, K, C)
        k = self.key(hidden)  # (B, T, C)
        scores = (q @ k.transpose(1, 2)).float() / math.sqrt(c)  # (B, K, T)
        same_doc = (seg.gather(1, s)[..., None] == seg[:, None, :]) & (seg[:, None, :] != 0)  # (B, K, T)
        scores = scores.masked_fill(~same_doc, float("-inf"))
        scores = torch.cat([scores, self.none.float().expand(b, scores.shape[1], 1)], dim=-1)  # (B, K, T+1)
        target = torch.where(dst >= 0, dst, torch.full_like(dst, t))  # "none" is column T
        return _classify(scores[valid], target[valid], valid.sum(), metrics, q, k, self.none)


class MultiPointerHead(PointerHead):
    """A source token and SEVERAL acceptable targets (``ptr.<label>`` (B, K, 1 + m): src, then m
    targets padded with -1; all -1 = "none"): the loss is -log of the probability mass on the
    targets (the marginal likelihood: any of them is right), so where several definitions reach a
    use the model is not forced to pick one. Accuracy: argmax is one of the targets. Same bilinear
    scores over src's document plus "none" as PointerHead."""

    def __init__(self, model: Transformer, label: str = "dataflow"):
        super().__init__(model, label)

    def forward(self, hidden: torch.Tensor, batch: dict, metrics: bool = False):
        ptr = batch[self.field]  # (B, K, 1 + m)
        if ptr.dim() != 3 or ptr.shape[-1] < 2:
            raise ValueError(f"{self.field} has shape {tuple(ptr.shape)}; MultiPointerHead expects (B, K, 1 + m)")
        b, t, c = hidden.shape
        seg = batch["segment_ids"]  # (B, T)
        src, dst = ptr[..., 0], ptr[..., 1:]  # (B, K), (B, K, m)
        valid = src >= 0
        s = src.clamp(min=0)
        q = self.query(hidden).gather(1, s[..., None].expand(-1, -1, c))  # (B, K, C)
        k = self.key(hidden)  # (B, T, C)
        scores = (q @ k.transpose(1, 2)).float() / math.sqrt(c)  # (B, K, T)
        same_doc = (seg.gather(1, s)[..., None] == seg[:, None, :]) & (seg[:, None, :] != 0)  # (B, K, T)
        scores = scores.masked_fill(~same_doc, float("-inf"))
        scores = torch.cat([scores, self.none.float().expand(b, scores.shape[1], 1)], dim=-1)  # (B, K, T+1)
        cols = torch.where(dst >= 0, dst, torch.full_like(dst, t))  # (B, K, m); -1 -> the "none" column
        is_none = (dst < 0).all(-1, keepdim=True)  # (B, K, 1)
        target = torch.zeros_like(scores, dtype=torch.bool)
        target.scatter_(2, cols, (dst >= 0) | is_none)  # (B, K, T+1): the acceptable columns
        sc, tg = scores[valid], target[valid]  # (N, T+1)
        n = valid.sum()
        if sc.shape[0] == 0:
            loss = _zero_loss(sc, q, k, self.none)
        else:
            loss = (torch.logsumexp(sc, -1) - torch.logsumexp(sc.masked_fill(~tg, float("-inf")), -1)).sum()
        if not metrics:
            return loss, n
        hit = tg.gather(1, sc.argmax(-1, keepdim=True)).sum() if sc.shape[0] else n * 0
        return Metrics(loss, n, hit, n)


class EdgeHead(nn.Module):
    """Binary edge prediction over token pairs (GraphCodeBERT's): ``ptr.<label>`` (B, K, 3) holds an
    anchor, a token joined to it (positive) and one that is not (negative), -1 where absent. A pair's
    logit is (W_q h_anchor) . (W_k h_other) / sqrt(C) + b (directed: anchor and other play different
    parts); the loss is the summed binary cross-entropy, each present pair one record. Accuracy:
    logit > 0 agrees with the pair's label (dataflow_edge draws one negative per positive, so about
    0.5 is chance). Only the K anchors and their pairs are projected: O(K C^2) per row."""

    def __init__(self, model: Transformer, label: str = "dataflow_edge"):
        super().__init__()
        cfg = _query_key(self, model, label)
        self.bias = nn.Parameter(torch.zeros(1))  # (1,): see PointerHead.none
        _init(self, cfg.init_std)

    @staticmethod
    def _present(ptr: torch.Tensor) -> torch.Tensor:
        return (ptr[..., 1:] >= 0) & (ptr[..., :1] >= 0)  # (B, K, 2): positive, negative

    def count(self, batch: dict) -> int:
        return int(self._present(batch[self.field]).sum())

    def forward(self, hidden: torch.Tensor, batch: dict, metrics: bool = False):
        ptr = batch[self.field]
        if ptr.dim() != 3 or ptr.shape[-1] != 3:
            raise ValueError(f"{self.field} has shape {tuple(ptr.shape)}; EdgeHead expects (B, K, 3) triples")
        b, k, _ = ptr.shape
        c = hidden.shape[-1]
        h = hidden.gather(1, ptr.clamp(min=0).reshape(b, 3 * k, 1).expand(-1, -1, c)).reshape(b, k, 3, c)
        q, keys = self.query(h[:, :, 0]), self.key(h[:, :, 1:])  # (B, K, C), (B, K, 2, C)
        logits = (q.float()[:, :, None] * keys.float()).sum(-1) / math.sqrt(c) + self.bias.float()  # (B, K, 2)
        valid = self._present(ptr)
        target = torch.tensor([1.0, 0.0], device=logits.device).expand_as(logits)[valid]
        lg, n = logits[valid], valid.sum()
        if lg.shape[0] == 0:
            loss = _zero_loss(q, keys, self.bias)
        else:
            loss = F.binary_cross_entropy_with_logits(lg, target, reduction="sum")
        if not metrics:
            return loss, n
        return Metrics(loss, n, ((lg > 0).float() == target).sum(), n)


def _gather_rows(z: torch.Tensor, key: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Every data-parallel rank's rows of z (N_r, C) and key (N_r,), concatenated in rank order, and the
    offset of this rank's rows. Other ranks' rows are constants; this rank's keep their graph. A
    collective (forward only): every rank calls it the same number of times, also with N_r = 0."""
    import torch.distributed as dist

    n = torch.tensor([z.shape[0]], dtype=torch.long, device=z.device)
    sizes = [torch.zeros_like(n) for _ in range(dist.get_world_size())]
    dist.all_gather(sizes, n)
    sizes = [int(v) for v in sizes]
    rank, top = dist.get_rank(), max(sizes)
    off = sum(sizes[:rank])
    if top == 0:
        return z, key, off
    zb, kb = z.detach().new_zeros((top, z.shape[1])), key.new_zeros(top)  # padded to the largest rank
    zs, ks = [torch.empty_like(zb) for _ in sizes], [torch.empty_like(kb) for _ in sizes]
    zb[: len(z)], kb[: len(key)] = z.detach(), key
    dist.all_gather(zs, zb)
    dist.all_gather(ks, kb)
    rows = [z if r == rank else zs[r][: sizes[r]] for r in range(len(sizes))]
    return torch.cat(rows), torch.cat([k[:m] for k, m in zip(ks, sizes)]), off


def _data_parallel() -> bool:
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


TEMPERATURE_SCHEDULES = ("fixed", "learned", "linear")
MAX_LOGIT_SCALE = 100.0  # a learned 1 / temperature is clamped here (CLIP's cap: temperature >= 0.01)


class ContrastiveHead(nn.Module):
    """InfoNCE between paired documents (code <-> docstring), mean-pooled.

    Negatives: every other-side document of the micro-batch and, with ``gather=True`` (default) in a
    data-parallel run, of the same micro-step on every other rank (all-gathered in the forward; no
    collective in the backward). Every rank then scores ALL ranks' pairs against all candidates; the
    value it returns is the loss of its own pairs (summed over ranks: the whole batch's loss), the
    gradient it returns is that of every rank's pairs through its own rows (averaged over ranks by
    the engine: exactly the whole batch's gradient, tests/test_heads.py). The cheaper variant, each
    rank's own pairs with other ranks' rows as constants (open_clip's default), was measured to
    collapse the debug_cpu encoder trained from scratch (loss stuck at chance, grad norm -> 0.01 by
    step 50): nearly identical embeddings at init are pushed away from stale copies of themselves. The
    head is a collective: it runs on every micro-batch, with or without pairs (``always_forward``).
    Settings (code_doc's ``symmetric``, ``temperature*``, ``matryoshka``; codept.objectives.code_doc):
      symmetric   True: a pair's term = the mean of query->code CE (side 0 against every side-1
                  document) and code->query CE, each computed on its own; False: query->code only.
      temperature ``fixed``: ``temperature``; ``learned``: a parameter log(1 / t) starting at
                  1 / ``temperature``, 1 / t clamped at MAX_LOGIT_SCALE (CLIP); ``linear``: from
                  ``temperature_start`` to ``temperature`` over the run (``set_progress(step /
                  steps)``, called by codept.train.loop.train before every step: a resume sets it
                  from the step too).
      matryoshka  sizes d: the loss is the mean over the sizes (the full width added when not
                  listed) of the loss on the first d dimensions, re-normalised (MRL). Accuracy
                  (validation) is read at the full width.
      grad_cache  negatives from every micro-batch of the optimizer step (all ranks), in the memory
                  of one (codept.model.gradcache; codept.train.loop.train drives it).
    Cost: the (N_a x N_b) logits of the whole step's pairs on every rank (a few hundred squared),
    once per Matryoshka size."""

    def __init__(self, model: Transformer, label: str = "pair", temperature: float = 0.05, gather: bool = True,
                 symmetric: bool = True, temperature_schedule: str = "fixed", temperature_start: float = 0.1,
                 matryoshka: tuple[int, ...] = (), grad_cache: bool = False):
        super().__init__()
        if temperature <= 0 or temperature_start <= 0:
            raise ValueError(f"temperature={temperature}, temperature_start={temperature_start}: must be > 0")
        if temperature_schedule not in TEMPERATURE_SCHEDULES:
            raise ValueError(f"temperature_schedule={temperature_schedule!r}: expected one of {TEMPERATURE_SCHEDULES}")
        width = model.config.hidden
        bad = [d for d in matryoshka if not 0 < int(d) <= width]
        if bad:
            raise ValueError(f"matryoshka sizes {bad}: each must be in [1, hidden={width}]")
        self.label, self.field, self.temperature, self.gather = label, f"scalar.{label}", temperature, gather
        self.symmetric, self.schedule, self.temperature_start = symmetric, temperature_schedule, temperature_start
        self.sizes = tuple(sorted({int(d) for d in matryoshka} | {width})) if matryoshka else (width,)
        if temperature_schedule == "learned":  # (1,): see PointerHead.none
            self.log_scale = nn.Parameter(torch.full((1,), math.log(1.0 / temperature)))
        self.register_buffer("progress", torch.zeros(1), persistent=False)  # linear schedule: step / steps
        self.grad_cache = grad_cache  # codept.model.gradcache: negatives = the whole optimizer step
        self.cached = None  # GradCache's entry for the next forward (codept.model.gradcache.Cached)

    def set_progress(self, fraction: float) -> None:
        """Where the run is (step / steps): the linear temperature schedule reads it."""
        self.progress.fill_(min(max(float(fraction), 0.0), 1.0))

    def current_temperature(self) -> torch.Tensor | float:
        """The temperature now: a float when fixed (logits / t exactly as before the settings), else
        a (1,) float32 (float64 in a float64 model) tensor (a function of the parameter when learned)."""
        wide = lambda x: x.to(torch.promote_types(x.dtype, torch.float32))  # noqa: E731 (float64 stays)
        if self.schedule == "learned":
            return (-wide(self.log_scale).clamp(max=math.log(MAX_LOGIT_SCALE))).exp()
        if self.schedule == "linear":
            return self.temperature_start + (self.temperature - self.temperature_start) * wide(self.progress)
        return self.temperature

    @property
    def always_forward(self) -> bool:
        """Gathering is a collective: Pretrainer runs the head on every micro-batch, pairs or not."""
        return self.gather

    def count(self, batch: dict) -> int:
        """Pairs with both sides in the batch (what forward's n_valid will be), from the batch alone."""
        keys = batch[self.field]
        k = keys[keys != IGNORE]
        side, pair = k % 2, k // 2
        return int(torch.isin(pair[side == 0], pair[side == 1]).sum())

    def embed(self, hidden: torch.Tensor, batch: dict) -> tuple[torch.Tensor, torch.Tensor]:
        """(M, C) L2-normalised mean-pooled documents that carry a key (float32, or float64 for a float64
        model: the exactness tests), and their keys (M,)."""
        if self.field not in batch:
            return hidden.new_zeros((0, hidden.shape[-1]), dtype=torch.float32), \
                torch.zeros(0, dtype=torch.long, device=hidden.device)
        keys = batch[self.field]  # (B, D): 2 * pair_id + side, IGNORE where unpaired
        d = keys.shape[1]
        seg = batch["segment_ids"]
        member = (seg[..., None] == torch.arange(1, d + 1, device=seg.device)).to(hidden.dtype)  # (B, T, D)
        count = member.sum(1)  # (B, D)
        pooled = member.transpose(1, 2) @ hidden / count.clamp(min=1)[..., None]  # (B, D, C)
        ok = (keys != IGNORE) & (count > 0)
        return F.normalize(pooled[ok].to(torch.promote_types(pooled.dtype, torch.float32)), dim=-1), keys[ok]

    def forward(self, hidden: torch.Tensor, batch: dict, metrics: bool = False):
        z, key = self.embed(hidden, batch)
        if self.cached is not None and not metrics:  # GradCache's second pass (codept.model.gradcache)
            return self._cached(z, key, hidden)
        return self.score(z, key, metrics, keep=hidden)

    def _cached(self, z: torch.Tensor, key: torch.Tensor, hidden: torch.Tensor):
        """The loss of a micro-batch whose gradient GradCache computed over the whole step: value
        ``cached.value``, gradient sum(z * cached.grad) (+ the head's own parameters' cached gradient)."""
        c, self.cached = self.cached, None
        if c.grad.shape != z.shape:
            raise ValueError(f"GradCache: cached gradient {tuple(c.grad.shape)} for embeddings {tuple(z.shape)}: "
                             "the second pass must see the micro-batches of prepare(), in order")
        surrogate = (z * c.grad).sum() + _zero_loss(hidden)  # connected even without pairs here
        for p, g in zip(self.parameters(), c.param_grads):
            if g is not None:
                surrogate = surrogate + (p * g).sum()
        side, pair = key % 2, key // 2
        n = torch.isin(pair[side == 0], pair[side == 1]).sum()  # this micro-batch's pairs (count())
        return surrogate + (c.value - surrogate).detach(), n

    def score(self, z: torch.Tensor, key: torch.Tensor, metrics: bool = False, keep: torch.Tensor | None = None):
        """(loss_sum, n) or Metrics of embeddings ``z`` (M, C), L2-normalised, with keys (M,): the
        head after pooling (``forward`` = embed + score; GradCache calls it on a whole step's
        embeddings). ``keep``: a tensor a graph-connected zero is built from (default z)."""
        keep = z if keep is None else keep
        m, off = len(key), 0
        if self.gather and _data_parallel():
            z, key, off = _gather_rows(z, key)
        mine = torch.zeros(len(key), dtype=torch.bool, device=key.device)
        mine[off : off + m] = True
        side, pair = key % 2, key // 2
        a, b, pa, pb = z[side == 0], z[side == 1], pair[side == 0], pair[side == 1]  # (Na, C), (Nb, C)
        match = pa[:, None] == pb[None, :]  # (Na, Nb)
        if bool((match.sum(0) > 1).any() or (match.sum(1) > 1).any()):
            raise ValueError(f"{self.field}: a pair id occurs twice on one side of the batch")
        ia, ib = match.nonzero(as_tuple=True)  # every rank's matched pairs (both sides in one row)
        own = mine[side == 0][ia]  # the pairs of this rank
        n = own.sum()
        t = self.current_temperature()
        if torch.is_tensor(t) and len(key) != m:  # learned / scheduled, other ranks' pairs here: the
            # temperature's gradient through this rank's pairs only (summed over ranks: once per pair,
            # like the encoder's), its value the same for every pair
            t = torch.where(own, t, t.detach())[:, None]  # (P, 1)
        if len(ia) == 0:
            loss = _zero_loss(keep, z, *self.parameters())
            return Metrics(loss, n, torch.zeros_like(n), 2 * n) if metrics else (loss, n)
        terms = torch.stack([self.terms(a, b, ia, ib, t, d) for d in self.sizes]).mean(0)  # (P,)
        if metrics:  # top-1 retrieval of the partner, both directions, this rank's pairs (full width)
            ab, ba = a[ia] @ b.T, b[ib] @ a.T
            hit = ((ab.argmax(-1) == ib) & own).sum() + ((ba.argmax(-1) == ia) & own).sum()
            return Metrics(self._value(terms, own, len(key) == m, keep), n, hit, 2 * n)
        return self._value(terms, own, len(key) == m, keep), n

    def terms(self, a: torch.Tensor, b: torch.Tensor, ia: torch.Tensor, ib: torch.Tensor, t,
              d: int | None = None) -> torch.Tensor:
        """(P,) loss of each matched pair (ia[p], ib[p]) of side-0 rows ``a`` (Na, C) against side-1 rows
        ``b`` (Nb, C), L2-normalised, on their first ``d`` dimensions (re-normalised; None = all):
        query->code CE, averaged with code->query CE when symmetric."""
        if d is not None and d < a.shape[1]:
            a, b = F.normalize(a[:, :d], dim=-1), F.normalize(b[:, :d], dim=-1)
        ab = a[ia] @ b.T / t  # (P, Nb): each query against every code
        out = F.cross_entropy(ab, ib, reduction="none")
        if not self.symmetric:
            return out
        ba = b[ib] @ a.T / t  # (P, Na): each code against every query
        return (out + F.cross_entropy(ba, ia, reduction="none")) / 2

    @staticmethod
    def _value(terms: torch.Tensor, own: torch.Tensor, local: bool, hidden: torch.Tensor) -> torch.Tensor:
        """The loss sum to return from the per-pair terms of every rank's pairs (see the class doc)."""
        if local:  # no other rank's rows: every pair is local
            return terms.sum()
        # value: this rank's pairs (summed over ranks: the loss of the whole batch); gradient: that of
        # every rank's pairs through this rank's rows (averaged over ranks: the whole batch's gradient)
        total = terms.sum()
        # + a graph-connected 0: this rank may hold no rows at all this micro-step
        return total + (terms[own].sum() - total).detach() + _zero_loss(hidden)


class SpanBoundaryHead(nn.Module):
    """SpanBERT's span-boundary objective: each token of a masked span predicted from the states of
    the two tokens just outside the span and a relative-position embedding, never from the span.

    Reads ``ptr.<label>`` (B, K, 3) records (left, right, token) in row coordinates (-1 = padding;
    codept.objectives.span) and the targets ``labels.<target>`` (B, T) at ``token`` (the mlm labels:
    the original ids). y = LN(GELU(W2 LN(GELU(W1 [h_left; h_right; p_(token-left-1)])))), scored
    against the tied vocabulary (+ own bias). A record counts when its token's label is not IGNORE.
    Cost: O(K C^2 + K V C) per row."""

    def __init__(self, model: Transformer, label: str = "sbo", target: str = "mlm", max_offset: int = 64):
        super().__init__()
        cfg = model.config
        self.label, self.field, self.target = label, f"ptr.{label}", f"labels.{target}"
        self.offset = nn.Embedding(max_offset, cfg.hidden)
        self.mlp = nn.Sequential(nn.Linear(3 * cfg.hidden, cfg.hidden), nn.GELU(), nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps),
                                 nn.Linear(cfg.hidden, cfg.hidden), nn.GELU(), nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps))
        self.decoder_weight = model.embed.tokens.weight  # tied, as LMHead
        self.bias = nn.Parameter(torch.zeros(cfg.vocab_size))
        _init(self, cfg.init_std)
        nn.init.normal_(self.offset.weight, std=cfg.init_std)

    def _records(self, batch: dict):
        ptr = batch[self.field]  # (B, K, 3)
        if ptr.dim() != 3 or ptr.shape[-1] != 3:
            raise ValueError(f"{self.field} has shape {tuple(ptr.shape)}; SpanBoundaryHead expects (B, K, 3) records")
        labels = batch[self.target]  # (B, T)
        tok = ptr[..., 2].clamp(min=0)
        target = labels.gather(1, tok)  # (B, K)
        valid = (ptr[..., 0] >= 0) & (target != IGNORE)
        return ptr, target, valid

    def count(self, batch: dict) -> int:
        if self.target not in batch:
            return 0
        return int(self._records(batch)[2].sum())

    def forward(self, hidden: torch.Tensor, batch: dict, metrics: bool = False):
        ptr, target, valid = self._records(batch)
        b_idx = torch.arange(hidden.shape[0], device=hidden.device)[:, None].expand_as(ptr[..., 0])[valid]
        left, right, tok = ptr[..., 0][valid], ptr[..., 1][valid], ptr[..., 2][valid]  # (N,)
        rel = (tok - left - 1).clamp(0, self.offset.num_embeddings - 1)
        x = torch.cat([hidden[b_idx, left], hidden[b_idx, right], self.offset(rel)], dim=-1)  # (N, 3C)
        logits = F.linear(self.mlp(x), self.decoder_weight, self.bias)  # (N, V)
        return _classify(logits, target[valid], valid.sum(), metrics, self.bias, *self.mlp.parameters(),
                         self.offset.weight)
