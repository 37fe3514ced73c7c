"""Pieces every view type shares, with no tree-sitter import: tokenizing with offsets, text access by
token range, and the view dataclass <-> flat Arrow row conversion (codept.structure.view for code,
codept.text.view for text; codept.views reads the rows back as NumPy without Python lists).
Cost: tokenize is the tokenizer's own cost plus one NumPy copy of the ids and offsets.
Not covered: the Arrow schemas themselves (each view module owns its own).
"""

from __future__ import annotations

import itertools
from dataclasses import fields

import numpy as np


class TokenText:
    """Text access shared by views with ``text`` and token ``offsets`` (T, 2)."""

    def token_text(self, start: int, end: int) -> str:
        """Text covered by tokens [start, end)."""
        if end <= start:
            return ""
        return self.text[self.offsets[start, 0] : self.offsets[end - 1, 1]]

    def char_range(self, start: int, end: int) -> tuple[int, int]:
        return int(self.offsets[start, 0]), int(self.offsets[end - 1, 1])


def tokenize(tokenizer, text: str) -> tuple[np.ndarray, np.ndarray]:
    """Token ids (T,) int32 and char offsets (T, 2) int64 of `text`, no special tokens added.

    Source text never yields a special id: ``"<mask>"`` in a string literal is encoded as text."""
    if not tokenizer.encode_special_tokens:
        tokenizer.encode_special_tokens = True
    enc = tokenizer.encode(text, add_special_tokens=False)
    ids = np.array(enc.ids, dtype=np.int32)
    offs = np.fromiter(itertools.chain.from_iterable(enc.offsets), dtype=np.int64, count=2 * len(ids))
    return ids, offs.reshape(-1, 2)


def to_record(view) -> dict:
    """A view dataclass as a flat dict of Arrow-friendly values (2-D arrays flattened row-major;
    the ``stats`` field is run-time information and is not stored)."""
    rec = {}
    for f in fields(view):
        if f.name != "stats":
            v = getattr(view, f.name)
            rec[f.name] = v.reshape(-1) if isinstance(v, np.ndarray) else v
    return rec


def arrays_from_record(rec: dict, spec: dict[str, tuple]) -> dict[str, np.ndarray]:
    """The arrays of a record, as `spec` (name -> (dtype, width; 0 = 1-D)) says."""
    out = {}
    for name, (dtype, width) in spec.items():
        a = np.asarray(rec[name], dtype=dtype)
        out[name] = a if width == 0 else a.reshape(-1, width)
    return out
