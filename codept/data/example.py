"""Example: one corrupted document, the unit an objective produces and packing consumes.

All fields are NumPy arrays in document coordinates (token 0 = first token of the document):

  input_ids (T,) int32   token ids after corruption
  prefix    (T,) bool    keys every query of the document may see (codept.attention): all True for
                         encoders, all False for causal LM, a leading run for prefix-LM / GLM part A
  labels    {name: (T,)} per-token targets, IGNORE where nothing is predicted (mlm, rtd, ...)
  pointers  {name: (K,) or (K, m) int} token indices into the document (span bounds, dataflow edges);
                         -1 = none. Packing shifts them into row coordinates and drops a record
                         whose indices leave a cropped window.
  scalars   {name: int | (k,) ints}  per-document labels (NSP/SOP, contrastive pair keys), kept per
                         segment; a sequence gives one value per part (below), a plain int is the
                         value of every part
  parts     (T,) int or None  multi-part example: k documents that must share one packed row (the
                         two sides of a contrastive pair). Non-decreasing part index 0..k-1, every
                         part non-empty. Packing places the example as one unit and makes each part
                         its own segment (positions restart, no attention between parts). A pointer
                         record must stay inside one part. None = one document (k = 1).

Optional per-token fields (None = the default, and then the packed row carries no such column, so
objectives that never set them produce exactly the rows they always did):
  positions  (T,) int    explicit position ids (default: 0..n-1 per part). TLM resets them for the
                         second side; a window of a long document is shifted to start at 0.
  block_positions (T,) int  a second position id (GLM's 2-D positions: the position inside a span),
                         default 0; the model adds its own table when configured for it.
  types      (T,) int    token types / segment A-B inside one attention segment (NSP/SOP), default 0
  langs      (T,) int    a language id per token (XLM's language embedding), default 0 = none
  order      (T,) int    factorisation order for the attention rule: key k is visible to query q of
                         the same segment when order[k] <= order[q] or prefix[k] (XLNet's permuted
                         orders; default: the token's own index, i.e. left to right)
  targets    {name: (T,) or (T, m) float32}  per-token float targets (execution values, ...), NaN
                         where nothing is predicted

Not covered: per-document float targets (use ``targets`` on the document's first token).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

IGNORE = -100
TOKEN_FIELDS = ("positions", "block_positions", "types", "langs", "order")  # optional (T,) int fields


_UNSIGNED = {n: np.dtype(f"u{n}") for n in (1, 2, 4, 8)}  # same-width unsigned dtypes, by itemsize
_PLAIN = frozenset({int, bool, float, np.int64, np.int32})  # element types that are never a sequence


def _is_seq(v) -> bool:
    """A per-part scalar (list / tuple / 1-D array) rather than one int."""
    if isinstance(v, (list, tuple)):  # np.ndim would copy the list into an array first
        # the element types in C first (a list of ints: one set), the per-element check otherwise
        return set(map(type, v)) <= _PLAIN or not any(isinstance(x, (list, tuple, np.ndarray)) for x in v)
    return not isinstance(v, (int, np.integer)) and np.ndim(v) == 1


@dataclass
class Example:
    input_ids: np.ndarray
    prefix: np.ndarray
    labels: dict[str, np.ndarray] = field(default_factory=dict)
    pointers: dict[str, np.ndarray] = field(default_factory=dict)
    scalars: dict[str, int | Sequence[int]] = field(default_factory=dict)
    parts: np.ndarray | None = None
    positions: np.ndarray | None = None
    block_positions: np.ndarray | None = None
    types: np.ndarray | None = None
    langs: np.ndarray | None = None
    order: np.ndarray | None = None
    targets: dict[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self):
        t = len(self.input_ids)
        if self.prefix.shape != (t,):
            raise ValueError(f"prefix has shape {self.prefix.shape}, input_ids has {t} tokens")
        for k, v in self.labels.items():
            if v.shape != (t,):
                raise ValueError(f"labels[{k!r}] has shape {v.shape}, expected ({t},)")
        for name in TOKEN_FIELDS:
            v = getattr(self, name)
            if v is not None and (np.shape(v) != (t,) or not np.issubdtype(np.asarray(v).dtype, np.integer)):
                raise ValueError(f"{name} has shape {np.shape(v)} / dtype {np.asarray(v).dtype}: expected ({t},) integers")
            if v is not None and name != "order" and t and int(np.min(v)) < 0:
                raise ValueError(f"{name} holds {int(np.min(v))}: ids must be >= 0")
        for k, v in self.targets.items():
            if v.shape[:1] != (t,) or v.ndim > 2 or v.dtype.kind != "f":
                raise ValueError(f"targets[{k!r}] has shape {v.shape} / dtype {v.dtype}: expected ({t},) or ({t}, m) floats")
        if self.parts is not None:
            self._check_parts(t)
        if not self.scalars:
            return
        k = self.n_parts
        for name, v in self.scalars.items():
            if _is_seq(v):
                if len(v) != k:
                    raise ValueError(f"scalars[{name!r}] has {len(v)} values for {k} parts; give one per part or one int")
            elif np.ndim(v) != 0:
                raise ValueError(f"scalars[{name!r}] has shape {np.shape(v)}: expected an int or one value per part")

    def _check_parts(self, t: int) -> None:
        p = self.parts
        if p.shape != (t,):
            raise ValueError(f"parts has shape {p.shape}, input_ids has {t} tokens")
        d = p[1:] - p[:-1]
        if t > 1 and p.dtype.kind in "iu":  # every step 0 or 1 <=> each step, read unsigned, is <= 1 (one max)
            bad = p[0] != 0 or d.view(_UNSIGNED[d.itemsize]).max() > 1
        else:
            bad = t and (p[0] != 0 or ((d < 0) | (d > 1)).any())
        if bad:
            raise ValueError("parts must start at 0 and step by 0 or 1 (non-decreasing, no empty part), "
                             f"got {p[:8].tolist()}...")
        for name, ptr in self.pointers.items():
            rec = ptr.reshape(len(ptr), int(np.prod(ptr.shape[1:])))  # one pointer record per row
            if rec.size == 0 or t == 0:
                continue
            part = np.where(rec >= 0, p[np.clip(rec, 0, t - 1)], -1)  # part of every index, -1 = none
            lo = np.where(part >= 0, part, t).min(axis=1)
            hi = part.max(axis=1)
            if np.any((hi >= 0) & (lo != hi)):
                raise ValueError(f"pointers[{name!r}]: a record points into two parts (a record must stay inside one)")

    def __len__(self) -> int:
        return len(self.input_ids)

    @property
    def n_parts(self) -> int:
        """Documents this example becomes when packed (1 without ``parts``)."""
        if self.parts is None:
            return 1
        return int(self.parts[-1]) + 1 if len(self.parts) else 0

    def part_bounds(self) -> np.ndarray:
        """(k + 1,) token offsets: part j is tokens [bounds[j], bounds[j + 1])."""
        if self.parts is None:
            return np.array([0, len(self)], dtype=np.int64)
        return np.searchsorted(self.parts, np.arange(self.n_parts + 1), side="left").astype(np.int64)

    def scalar_of_parts(self, name: str) -> list[int]:
        """The value of scalar `name` for each part (an int is every part's value)."""
        v = self.scalars[name]
        return [int(x) for x in v] if _is_seq(v) else [int(v)] * self.n_parts

    def window(self, start: int, end: int) -> "Example":
        """Tokens [start, end) as a document of their own; pointer records that reach outside the
        window are dropped, the others shifted. A multi-part example keeps the parts the window
        touches (renumbered from 0) and their per-part scalars; parts outside lose theirs."""
        pointers = {}
        for k, p in self.pointers.items():
            rec = p.reshape(len(p), int(np.prod(p.shape[1:])))  # one pointer record per row
            inside = np.all((rec == -1) | ((rec >= start) & (rec < end)), axis=1)
            kept = np.where(rec[inside] >= 0, rec[inside] - start, -1)
            pointers[k] = kept.reshape((-1,) + p.shape[1:])
        if self.parts is None:
            parts, scalars = None, dict(self.scalars)
        else:
            parts = self.parts[start:end]
            first, last = (int(parts[0]), int(parts[-1]) + 1) if len(parts) else (0, 0)
            parts = parts - first
            scalars = {k: list(v)[first:last] if _is_seq(v) else v for k, v in self.scalars.items()}
        cut = {name: None if getattr(self, name) is None else getattr(self, name)[start:end] for name in TOKEN_FIELDS}
        if cut["positions"] is not None and end > start:  # a window starts at position 0, as a document does
            cut["positions"] = cut["positions"] - cut["positions"].min()
        return Example(
            input_ids=self.input_ids[start:end],
            prefix=self.prefix[start:end],
            labels={k: v[start:end] for k, v in self.labels.items()},
            pointers=pointers,
            scalars=scalars,
            parts=parts,
            targets={k: v[start:end] for k, v in self.targets.items()},
            **cut,
        )
