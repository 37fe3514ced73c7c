"""Example: one corrupted document, the unit an objective produces and packing consumes.

All fields are NumPy arrays in document coordinates (token 0 = first token of the document):

  input_ids (T,) int32   token ids after corruption
  prefix    (T,) bool    keys every query of the document may see (codept.attention): all True for
                         encoders, all False for causal LM, a leading run for prefix-LM / GLM part A
  labels    {name: (T,)} per-token targets, IGNORE where nothing is predicted (mlm, rtd, ...)
  pointers  {name: (K,) or (K, m) int} token indices into the document (span bounds, dataflow edges);
                         -1 = none. Packing shifts them into row coordinates and drops a record
                         whose indices leave a cropped window.
  scalars   {name: int}  per-document labels (NSP/SOP), kept per segment

Not covered: per-token float targets (add a dict when an objective needs one).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

IGNORE = -100


@dataclass
class Example:
    input_ids: np.ndarray
    prefix: np.ndarray
    labels: dict[str, np.ndarray] = field(default_factory=dict)
    pointers: dict[str, np.ndarray] = field(default_factory=dict)
    scalars: dict[str, int] = field(default_factory=dict)

    def __post_init__(self):
        t = len(self.input_ids)
        if self.prefix.shape != (t,):
            raise ValueError(f"prefix has shape {self.prefix.shape}, input_ids has {t} tokens")
        for k, v in self.labels.items():
            if v.shape != (t,):
                raise ValueError(f"labels[{k!r}] has shape {v.shape}, expected ({t},)")

    def __len__(self) -> int:
        return len(self.input_ids)

    def window(self, start: int, end: int) -> "Example":
        """Tokens [start, end) as a document of their own; pointer records that reach outside the
        window are dropped, the others shifted."""
        pointers = {}
        for k, p in self.pointers.items():
            rec = p.reshape(len(p), int(np.prod(p.shape[1:])))  # one pointer record per row
            inside = np.all((rec == -1) | ((rec >= start) & (rec < end)), axis=1)
            kept = np.where(rec[inside] >= 0, rec[inside] - start, -1)
            pointers[k] = kept.reshape((-1,) + p.shape[1:])
        return Example(
            input_ids=self.input_ids[start:end],
            prefix=self.prefix[start:end],
            labels={k: v[start:end] for k, v in self.labels.items()},
            pointers=pointers,
            scalars=dict(self.scalars),
        )
