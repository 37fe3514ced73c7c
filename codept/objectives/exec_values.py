"""``exec_values`` (encoder) and ``exec_trace`` (causal LM) on serialized execution traces.

Both read a codept.exec.views.TraceView: the unit's code tokens and its trace serialized as
CodeExecutor does (`` <line> 3 <state> x : 1 ; y : [1, 2] ...``, recorded offline in the sandbox),
with (K, 2) token ranges of the values.
  exec_values: input = code + trace (``sep`` between when the tokenizer has one); select ``rate`` of
    the values (at least one) and corrupt every token of a selected value (render.bert_80_10_10,
    default 100% <mask>: a value is predicted from the code and the rest of the trace). Labels
    under ``labels["exec_values"]`` (head ``exec_values``: an MLM head). Bidirectional.
  exec_trace: generation. Prefix-LM: the code is the visible prefix, the trace is predicted left to
    right; ``labels["lm"]`` = the trace tokens (IGNORE on the code), head ``lm``.
Cost: O(T + U) per document. Not covered: full states (only the variables that changed are
serialized), traces longer than views.max_trace_chars (cut).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from codept.data.example import IGNORE, Example
from codept.objectives import render
from codept.objectives.spec import Objective


@dataclass(frozen=True)
class Config:
    rate: float = 0.25  # share of values selected
    p_mask: float = 1.0
    p_random: float = 0.0

    def __post_init__(self):
        if not 0.0 < self.rate <= 1.0:  # 0 selects no token: every example without labels
            raise ValueError(f"rate={self.rate}: must be in (0, 1] (0 selects no token: nothing to learn)")
        for name in ("p_mask", "p_random"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name}={getattr(self, name)}: must be in [0, 1]")
        if self.p_mask + self.p_random > 1.0:
            raise ValueError(f"p_mask + p_random = {self.p_mask + self.p_random}: must be <= 1")


@dataclass(frozen=True)
class TraceConfig:
    max_trace_tokens: int = 512  # the trace part is cut here (generation target length)

    def __post_init__(self):
        if self.max_trace_tokens < 1:
            raise ValueError(f"max_trace_tokens={self.max_trace_tokens}: must be >= 1")


def _joined(view, vocab: render.Vocab) -> tuple[np.ndarray, int]:
    """code + [sep] + trace ids, and the index of the trace's first token."""
    code = np.asarray(view.input_ids, dtype=np.int32)
    sep = [vocab.id_of("sep")] if "sep" in dict(vocab.roles) else []
    start = len(code) + len(sep)
    return np.concatenate([code, np.array(sep, dtype=np.int32), np.asarray(view.trace_ids, dtype=np.int32)]), start


def build(vocab: render.Vocab, cfg: Config = Config()):
    if not 0 < cfg.rate <= 1:
        raise ValueError(f"exec_values rate={cfg.rate}: must be in (0, 1]")

    def exec_values(view, rng: np.random.Generator, ctx=None) -> Example | None:
        units = np.asarray(view.value_units, dtype=np.int64).reshape(-1, 2)
        if len(units) == 0:
            return None
        ids, start = _joined(view, vocab)
        k = max(1, int(round(cfg.rate * len(units))))
        chosen = np.sort(rng.choice(len(units), size=k, replace=False))
        new, labels = render.bert_80_10_10(ids, units[chosen] + start, vocab, rng, cfg.p_mask, cfg.p_random)
        return Example(new, np.ones(len(ids), dtype=bool), labels={"exec_values": labels})

    return exec_values


def build_trace(vocab: render.Vocab, cfg: TraceConfig = TraceConfig()):
    def exec_trace(view, rng: np.random.Generator, ctx=None) -> Example | None:
        if len(view.trace_ids) == 0:
            return None
        ids, start = _joined(view, vocab)
        ids = ids[: start + cfg.max_trace_tokens]
        prefix = np.arange(len(ids)) < start
        labels = np.where(prefix, IGNORE, ids).astype(np.int32)
        return Example(ids, prefix, labels={"lm": labels})

    return exec_trace


# masked values of the serialized trace
OBJECTIVE = Objective("exec_values", build, Config, heads=("exec_values",), views=("trace",))
# trace generation after the code (prefix-LM)
TRACE_OBJECTIVE = Objective("exec_trace", build_trace, TraceConfig, heads=("lm",), views=("trace",))
