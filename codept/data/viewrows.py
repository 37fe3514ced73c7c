"""Pieces every view type shares, with no tree-sitter import: tokenizing with offsets, text access by
token range, the view dataclass <-> flat Arrow row conversion, and the one writer (:func:`to_table`).

Every view class (codept.structure.view.CodeView, codept.text.view.TextView / PairView,
codept.exec.views.TraceView) carries its own schema, written once in its module:
  KIND    its name in codept.views.KINDS ("code", "text", "pair", "trace");
  ARRAYS  array field -> (dtype, width; 0 = 1-D), stored as flat ``list<int>`` columns;
  SCHEMA  the Arrow schema of its rows (every column, in order);
  KEY     the string column naming a view (a file path; a trace's source module): ``ctx.find``;
  SPLIT   the string column whose bytes a held-out split hashes (the text: never the path, which
          names the machine's folders, so the split is the same wherever the corpus lies);
  DERIVED array columns an older table may lack, computed per view by ``cls.derive(name, get)``.
codept.views reads the rows back as NumPy without Python lists. Cost: tokenize is the tokenizer's
own cost plus one NumPy copy of the ids and offsets; to_table one Python pass over the views.
"""

from __future__ import annotations

import itertools
from dataclasses import fields

import numpy as np
import pyarrow as pa


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


def to_table(views, cls: type | None = None) -> pa.Table:
    """The one writer: views of one kind -> an Arrow table of that kind's ``SCHEMA`` (``cls``
    names the kind when ``views`` may be empty)."""
    views = list(views)
    if cls is None:
        if not views:
            raise ValueError("to_table: no views and no view class (pass cls= for an empty table)")
        cls = type(views[0])
    cols: dict[str, list] = {f.name: [] for f in cls.SCHEMA}
    for v in views:
        if not isinstance(v, cls):
            raise TypeError(f"to_table: a {type(v).__name__} among {cls.__name__}s (one kind per table)")
        rec = v.to_record()
        for k in cols:
            cols[k].append(rec[k])
    return pa.table(cols, schema=cls.SCHEMA)
