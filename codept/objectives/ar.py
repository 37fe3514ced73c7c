"""``ar``: causal language modelling with teacher forcing, optionally with scheduled sampling.

1. The document is read left to right: prefix all False (the attention rule's causal decoder).
2. Labels ``labels["lm"]`` are the UNshifted input ids; codept.model.heads.LMHead(causal=True)
   predicts token t from hidden state t-1 inside the document (teacher forcing).
3. Scheduled sampling (Bengio et al. 2015, against exposure bias), ``schedule != "none"``: with
   p = ctx.progress in [0, 1], the teacher-forcing probability is
     linear:           eps = 1 - p
     exponential:      eps = k ** p                       (k in (0, 1); default 0.05)
     inverse_sigmoid:  eps = k / (k + exp(k (2p - 1)))   (k >= 1; Bengio's k / (k + exp(i / k)), shifted)
   and each token t >= 1 is, with probability ``max_share * (1 - eps)``, marked in ``labels["sample"]``
   (1 = replace, IGNORE = keep). The model side (codept.model.regimes.scheduled_sampling) then runs a
   first pass without gradient and feeds the model's own greedy prediction in place of every marked
   token; the loss is that of the second pass, on the true targets. Which tokens are marked is a
   function of the (seed, epoch, index) rng and the stream's progress, so a resume is exact.
Cost: O(T) NumPy. Not covered: sampling (not argmax) of the replacements; per-token schedules
(the share is per document); a schedule driven by anything but ctx.progress.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from codept.data.example import IGNORE, Example
from codept.objectives.spec import Objective

SCHEDULES = ("none", "linear", "exponential", "inverse_sigmoid")


@dataclass(frozen=True)
class Config:
    schedule: str = "none"  # scheduled sampling: none | linear | exponential | inverse_sigmoid
    max_share: float = 0.25  # share of tokens replaced once the teacher-forcing probability reaches 0
    k: float = 0.0  # the schedule's constant; 0 = its default (exponential 0.05, inverse_sigmoid 5)

    def __post_init__(self):
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule={self.schedule!r}: expected one of {SCHEDULES}")
        if not 0.0 <= self.max_share <= 1.0:
            raise ValueError(f"max_share={self.max_share}: must be in [0, 1]")
        if self.schedule == "exponential" and not 0.0 <= self.k < 1.0:
            raise ValueError(f"k={self.k}: the exponential schedule needs 0 < k < 1 (0 = default 0.05)")
        if self.schedule == "inverse_sigmoid" and self.k != 0 and self.k < 1.0:
            raise ValueError(f"k={self.k}: the inverse-sigmoid schedule needs k >= 1 (0 = default 5)")


def teacher_forcing(schedule: str, p: float, k: float = 0.0) -> float:
    """The probability eps of feeding the true token at progress p (module docstring)."""
    p = min(max(float(p), 0.0), 1.0)
    if schedule == "none":
        return 1.0
    if schedule == "linear":
        return 1.0 - p
    if schedule == "exponential":
        return (k or 0.05) ** p
    if schedule == "inverse_sigmoid":
        k = k or 5.0
        return k / (k + math.exp(k * (2 * p - 1)))
    raise ValueError(f"schedule={schedule!r}: expected one of {SCHEDULES}")


def build(vocab, cfg: Config = Config()):
    def ar(view, rng: np.random.Generator, ctx=None) -> Example:
        ids = np.asarray(view.input_ids)
        labels = {"lm": ids.astype(np.int32)}
        if cfg.schedule != "none":
            share = cfg.max_share * (1.0 - teacher_forcing(cfg.schedule, ctx.progress if ctx else 0.0, cfg.k))
            marked = rng.random(len(ids)) < share
            marked[:1] = False  # the first token has no prediction to replace it with
            labels["sample"] = np.where(marked, 1, IGNORE).astype(np.int32)
        return Example(ids, np.zeros(len(ids), dtype=bool), labels=labels)

    return ar


# causal LM (scheduled sampling: codept.model.regimes)
OBJECTIVE = Objective("ar", build, Config, heads=("lm",), views=("code", "text"))
