"""``exec_lines``: predict how often each line of a unit ran (an encoder objective on trace views).

Reads a codept.exec.views.TraceView: the code's tokens and, at the first token of every statement
line, the bucket of that line's execution count recorded offline in the sandbox (never / once /
2-4 / 5-16 / 17+; codept.exec.views.BUCKETS). The code is not corrupted: the model sees the whole
unit (prefix all True) and classifies the labelled tokens (head ``exec_lines``, a TokenClassifier
with N_BUCKETS classes). The unit's inputs are its docstring's doctest calls, which are part of
the code the model reads (views built with ``docstrings="examples"`` keep only those examples of each
docstring): it must infer which branches those examples take and how often loops run.
Cost: O(T) per document (a copy). Not covered: per-token labels inside a line (one label per
line, on its first token), inputs given separately from the docstring.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from codept.data.example import Example
from codept.objectives import render
from codept.objectives.spec import Objective


@dataclass(frozen=True)
class Config:
    min_labels: int = 1  # documents with fewer labelled lines give no example

    def __post_init__(self):
        if self.min_labels < 0:
            raise ValueError(f"min_labels={self.min_labels}: must be >= 0")


def build(vocab: render.Vocab, cfg: Config = Config()):
    def exec_lines(view, rng: np.random.Generator, ctx=None) -> Example | None:
        labels = np.asarray(view.line_labels, dtype=np.int32)
        if int((labels >= 0).sum()) < cfg.min_labels:
            return None
        ids = np.asarray(view.input_ids)
        return Example(ids.copy(), np.ones(len(ids), dtype=bool), labels={"exec_lines": labels.copy()})

    return exec_lines


# line execution-count buckets (codept.exec.views)
OBJECTIVE = Objective("exec_lines", build, Config, heads=("exec_lines",), views=("trace",))
