"""GradCache (Gao et al. 2021) for the contrastive head: the negatives of every micro-batch of an
optimizer step (and of every data-parallel rank) in the activation memory of one micro-batch.

1. :meth:`GradCache.prepare` (once per optimizer step, before the micro-batch loop): for each of
   this rank's k micro-batches, the torch RNG state is saved, then the encoder runs WITHOUT grad
   and the head pools and normalises its documents (ContrastiveHead.embed): (M_j, C) each, the only
   thing kept. Their concatenation (M, C) goes through the head's scoring
   (ContrastiveHead.score: the cross-rank gather with its gradient rule, symmetric / Matryoshka /
   temperature settings), as if the step were one micro-batch; ``torch.autograd.grad`` gives
   d loss / d z for every row and the gradient of the head's own parameters (a learned
   temperature), nothing accumulated yet.
2. The ordinary micro-batch loop then runs (codept.train.engine.train_step, any engine): before
   micro-batch j's forward, :meth:`GradCache.forward` restores the saved RNG state (the same dropout
   masks, so the re-computed embeddings equal the cached ones) and hands the head its entry; the
   head returns the surrogate sum(z_j * g_j) (+ sum(p * g_p) on the first micro-batch) with the
   value of the step's loss on the first micro-batch and 0 after (their sum is the step's loss),
   and n = the micro-batch's pairs (what count() gave the normaliser). engine.backward of it gives
   exactly the big batch's parameter gradient, plus the other heads' ordinary gradients.
Cost: one extra encoder forward per micro-batch (without grad: ~1/3 of a training step's compute)
and (M, C) floats per step; the contrastive logits are (P, M) for the step's P pairs. Memory of the
activations: one micro-batch. Test: tests/test_gradcache.py (parameter gradients equal the
full-batch gradients on a real tiny model, with dropout, and across 2 ranks).
Not covered: staged regimes (ELECTRA, scheduled sampling: they change the batch before the encoder;
refused), validation (metrics=True keeps the micro-batch's negatives), chunks other than the
micro-batches (set micro_batch_rows to the memory, global_batch_rows to the negatives wanted).
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from codept.model.regimes import encode


class Cached(NamedTuple):
    """What the head's second-pass forward of one micro-batch needs."""

    grad: torch.Tensor  # (M_j, C): d step loss / d its embeddings
    value: torch.Tensor  # () the step's loss sum on the first micro-batch, 0 on the others
    param_grads: tuple  # the head's parameters' gradients on the first micro-batch (None elsewhere)


def _rng_state(device) -> tuple:
    cuda = torch.cuda.get_rng_state(device) if torch.device(device).type == "cuda" else None
    return torch.get_rng_state(), cuda


def _set_rng_state(state: tuple, device) -> None:
    cpu, cuda = state
    torch.set_rng_state(cpu)
    if cuda is not None:
        torch.cuda.set_rng_state(cuda, device)


class GradCache:
    """GradCache over a Pretrainer's head ``name`` (a ContrastiveHead); see the module docstring."""

    def __init__(self, net, name: str = "contrastive"):
        if name not in net.heads:
            raise ValueError(f"GradCache: the model has no {name!r} head (heads: {sorted(net.heads)})")
        staged = sorted(h for h, m in net.heads.items() if hasattr(m, "stage"))
        if staged:
            raise ValueError(f"GradCache with staged heads {staged}: their stages change the batch before the "
                             "encoder; train them without grad_cache")
        self.net, self.name = net, name
        self.head = net.heads[name]
        self.pending: list[tuple] = []  # (rng state, Cached) per micro-batch, in order

    @property
    def _device(self):
        return next(self.net.parameters()).device

    def prepare(self, batches: list[dict]) -> dict:
        """Step 1 over this rank's micro-batches of one optimizer step (on the model's device).
        Returns {"rows": M, "pairs": P (this rank's), "loss": the step's loss sum} for logging."""
        head, dev = self.head, self._device
        states, zs, keys = [], [], []
        for b in batches:
            if "labels.sample" in b:
                raise ValueError("GradCache with scheduled sampling (labels.sample): it changes the batch before "
                                 "the encoder; train it without grad_cache")
            states.append(_rng_state(dev))
            with torch.no_grad():
                z, k = head.embed(encode(self.net, b)["content"], b)
            zs.append(z)
            keys.append(k)
        z = torch.cat(zs).requires_grad_(True)
        params = [p for p in head.parameters() if p.requires_grad]
        loss, n = head.score(z, torch.cat(keys))
        grads = torch.autograd.grad(loss, [z, *params], allow_unused=True)
        gz = grads[0] if grads[0] is not None else torch.zeros_like(z)
        pg = tuple(grads[1:])
        zero = torch.zeros((), device=loss.device)
        self.pending = [(s, Cached(g, loss.detach() if j == 0 else zero, pg if j == 0 else ()))
                        for j, (s, g) in enumerate(zip(states, gz.split([len(x) for x in zs])))]
        return {"rows": len(z), "pairs": int(n), "loss": float(loss.detach())}

    def forward(self, model_call, batch: dict):
        """Step 2 for the next micro-batch: restore its RNG state, arm the head, then
        ``model_call(batch)`` (e.g. ``engine(batch)``: the Pretrainer's forward)."""
        if not self.pending:
            raise ValueError("GradCache.forward without a prepared micro-batch: call prepare(micro_batches) "
                             "once per optimizer step, then forward each of them in order")
        state, cached = self.pending.pop(0)
        _set_rng_state(state, self._device)
        self.head.cached = cached
        try:
            return model_call(batch)
        finally:
            self.head.cached = None
