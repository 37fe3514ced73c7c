"""Prepared views -> stream sources: typed, columnar, and without a Python-list hop per document.

:func:`open_views` reads a prepared folder (``codept prepare`` -> CodeViews; ``codept prepare-text``
-> ``DIR/text`` TextViews and ``DIR/pairs`` PairViews), a ``datasets.Dataset`` (also after
``.select``) or a ``pyarrow.Table``, and returns :class:`Views`: the view type read from the Arrow
schema (never guessed from paths), and every ``list<int32>`` column held as per-record-batch NumPy
(flat values + offsets, zero-copy over the memory-mapped shards). ``views[i]`` is a real CodeView /
TextView / PairView whose arrays are read-only slices of those buffers: nothing is converted to
Python lists, only the few string fields (path, lang, text, names) become Python objects.

:func:`view_source` wraps Views and an objective as a codept.data.stream.Source. The objective is
called as ``objective(view, rng, ctx)`` (codept.data.stream.Context: its own index and epoch, the
training progress, and ``ctx.partner(rng)`` to draw another document of the same source with the
example's own rng, e.g. NSP's random-document negatives), so it stays a pure function of
(seed, epoch, index) and the stream state.

Algorithm of ``views[i]``: 1. the record batch holding row i (binary search over batch starts);
2. a view object whose fields are read on first access (:func:`_lazy`): an array column as
``values[offsets[j]:offsets[j + 1]]`` reshaped to the field's width, a string with one Arrow scalar
conversion. Cost: O(fields read) small NumPy views per document, plus the text copy when the text is
read (benchmarks/bench_objectives.py). Not covered: views whose arrays hold nulls
(prepare never writes them), remote / streaming tables (prepare them to disk first).
"""

from __future__ import annotations

import hashlib
from dataclasses import fields
from functools import partial
from pathlib import Path

import numpy as np
import pyarrow as pa

from codept.data.stream import Source

# kind -> (array field -> (dtype, width; 0 = 1-D)), string/bool fields, list<string> fields
_TEXT_ARRAYS = {"input_ids": 0, "offsets": 2, "words": 0, "sentences": 2, "paragraphs": 2}
_CODE_ARRAYS = {"input_ids": 0, "offsets": 2, "leaf": 0, "spans": 3, "idents": 5, "functions": 7, "errors": 2,
                "dataflow": 3, "summaries": 2}
_DERIVED = {"summaries"}  # code columns a table written before they existed may lack: computed per view
KINDS = ("code", "text", "pair")


def kind_of(schema: pa.Schema) -> str:
    """'code', 'text' or 'pair' from the columns of a views table; an error naming them otherwise."""
    names = set(schema.names)
    if {"has_error", "spans", "idents", "functions"} <= names:
        return "code"
    if {"src_input_ids", "tgt_input_ids"} <= names:
        return "pair"
    if {"words", "sentences", "paragraphs"} <= names:
        return "text"
    raise ValueError(f"not a views table: columns {sorted(names)} match none of the view types {KINDS}")


class Views:
    """A views table as NumPy buffers; ``len(views)``, ``views[i]`` -> the i-th view object."""

    def __init__(self, table: pa.Table, indices: np.ndarray | None = None):
        self.kind = kind_of(table.schema)
        self._batches = [b for b in table.to_batches() if b.num_rows]
        sizes = np.array([b.num_rows for b in self._batches], dtype=np.int64)
        self._starts = np.concatenate([[0], np.cumsum(sizes)])
        self._indices = None if indices is None else np.asarray(indices, dtype=np.int64)
        n_rows = int(self._starts[-1])
        self._n = n_rows if self._indices is None else len(self._indices)
        if self._indices is not None and len(self._indices) and not 0 <= self._indices.min() <= self._indices.max() < n_rows:
            raise ValueError(f"indices outside [0, {n_rows})")
        arrays = {"code": _CODE_ARRAYS, "text": _TEXT_ARRAYS,
                  "pair": {f"{s}_{k}": w for s in ("src", "tgt") for k, w in _TEXT_ARRAYS.items()}}[self.kind]
        self._arrays = arrays
        # per batch: column -> (flat int32 values, int32/int64 offsets), zero-copy
        self._cols = [{name: (b.column(name).values.to_numpy(zero_copy_only=False), b.column(name).offsets.to_numpy())
                       for name in arrays if name in table.schema.names or name not in _DERIVED} for b in self._batches]
        self._make = {"code": self._code, "text": self._text, "pair": self._pair}[self.kind]

    def __len__(self) -> int:
        return self._n

    def select(self, indices) -> "Views":
        """The views at `indices` (positions in this Views), in that order."""
        idx = np.asarray(indices, dtype=np.int64)
        base = idx if self._indices is None else self._indices[idx]
        out = object.__new__(Views)
        out.__dict__.update(self.__dict__)
        out._indices, out._n = base, len(base)
        return out

    def paths(self) -> list[str]:
        """The path of every view, in order (one string column read, no arrays)."""
        rows = np.arange(self._starts[-1]) if self._indices is None else self._indices
        b = np.searchsorted(self._starts, rows, side="right") - 1
        cols = [bt.column("path").to_pylist() for bt in self._batches]
        return [cols[i][r - int(self._starts[i])] for i, r in zip(b.tolist(), rows.tolist())]

    def split(self, share: float, salt: str = "holdout") -> tuple["Views", "Views"]:
        """(kept, held-out) views: a view is held out when the hash of ``salt + path`` falls in the
        first `share` of the hash range, so the split is the same on every rank, machine and run and
        does not depend on the corpus order."""
        if not 0.0 <= share < 1.0:
            raise ValueError(f"share={share}: the held-out share must be in [0, 1)")
        h = np.array([int.from_bytes(hashlib.sha1((salt + p).encode("utf-8", "surrogateescape")).digest()[:8], "big")
                      for p in self.paths()], dtype=np.uint64)
        held = h < np.uint64(int(share * 2**64)) if share else np.zeros(len(h), bool)
        return self.select(np.flatnonzero(~held)), self.select(np.flatnonzero(held))

    def __getitem__(self, i: int):
        if not -self._n <= i < self._n:
            raise IndexError(f"view {i} out of range for {self._n} views")
        row = int(i % self._n) if self._indices is None else int(self._indices[i])
        b = int(np.searchsorted(self._starts, row, side="right")) - 1
        return self._make(b, row - int(self._starts[b]))

    def _array(self, b: int, j: int, name: str) -> np.ndarray:
        values, offsets = self._cols[b][name]
        a = values[offsets[j]:offsets[j + 1]]
        w = self._arrays[name]
        return a if w == 0 else a.reshape(-1, w)

    def _str(self, b: int, j: int, name: str):
        return self._batches[b].column(name)[j].as_py()

    def _code_field(self, b: int, j: int, name: str):
        """One field of code view (b, j), read when an objective first touches it."""
        if name in self._cols[b]:
            return self._array(b, j, name)
        if name == "summaries":  # views prepared before the field existed
            from codept.structure.summary import doc_summaries

            return doc_summaries(self._str(b, j, "text"), self._array(b, j, "offsets"), self._array(b, j, "functions"),
                                 self._str(b, j, "lang"))
        if name == "has_error":
            return bool(self._str(b, j, name))
        if name in ("path", "lang", "text", "names"):
            return self._str(b, j, name)
        raise AttributeError(name)

    def _text_field(self, b: int, j: int, prefix: str, name: str):
        if name in _TEXT_ARRAYS:
            return self._array(b, j, prefix + name)
        if name in ("lang", "text"):
            return self._str(b, j, prefix + name)
        if name == "path":
            return self._str(b, j, "path")
        raise AttributeError(name)

    def _code(self, b: int, j: int):
        from codept.structure.view import CodeView  # code views only: the text path never imports tree-sitter

        return _lazy(CodeView, partial(self._code_field, b, j))

    def _side(self, b: int, j: int, prefix: str):
        from codept.text.view import TextView

        return _lazy(TextView, partial(self._text_field, b, j, prefix))

    def _text(self, b: int, j: int):
        return self._side(b, j, "")

    def _pair(self, b: int, j: int):
        from codept.text.view import PairView

        return PairView(path=self._str(b, j, "path"), src=self._side(b, j, "src_"), tgt=self._side(b, j, "tgt_"))


_LAZY: dict[type, type] = {}  # view class -> its lazy subclass


def _lazy(cls: type, load):
    """A `cls` view (CodeView / TextView: isinstance holds, every field equal to the eager view's)
    whose fields are read from the table on first access, then kept: an objective that reads 3 of
    a code view's 14 fields pays for 3 (the text and the name list are the dear ones)."""
    sub = _LAZY.get(cls)
    if sub is None:
        def __getattr__(self, name):  # only called for a field not read yet (or an unknown name)
            if name.startswith("__"):
                raise AttributeError(name)
            value = self.__dict__["_load"](name)
            self.__dict__[name] = value
            return value

        def __reduce__(self):  # pickled / copied as the eager view (every field read)
            return _eager, (cls, {f.name: getattr(self, f.name) for f in fields(cls)})

        sub = _LAZY[cls] = type(f"Lazy{cls.__name__}", (cls,), {"__getattr__": __getattr__, "__reduce__": __reduce__,
                                                                "__module__": __name__})
    view = object.__new__(sub)
    view.__dict__.update(_load=load, stats={})
    return view


def _eager(cls: type, values: dict):
    return cls(**values)


def open_views(src, kind: str | None = None) -> Views:
    """Views of a prepared folder, a ``datasets.Dataset`` or a ``pyarrow.Table``. A ``codept
    prepare-text`` folder holds two datasets: ``kind='text'`` or ``'pair'`` picks one (or pass
    ``DIR/text`` / ``DIR/pairs``). ``kind``, when given, must match what the table holds."""
    if kind is not None and kind not in KINDS:
        raise ValueError(f"kind={kind!r}: expected one of {KINDS}")
    if isinstance(src, Views):
        views = src
    elif isinstance(src, pa.Table):
        views = Views(src)
    elif isinstance(src, (str, Path)):
        views = _open_folder(Path(src), kind)
    else:  # a datasets.Dataset (possibly with an indices mapping from .select / .shuffle)
        idx = getattr(src, "_indices", None)
        views = Views(src.data.table, None if idx is None else idx.column(0).to_numpy())
    if kind is not None and views.kind != kind:
        raise ValueError(f"{src}: holds {views.kind} views, not {kind}")
    return views


def _open_folder(path: Path, kind: str | None) -> Views:
    import datasets

    if not path.is_dir():
        raise FileNotFoundError(f"{path}: no such prepared views folder")
    subs = {"text": path / "text", "pair": path / "pairs"}
    if not (path / "state.json").is_file() and any((p / "state.json").is_file() for p in subs.values()):
        if kind not in subs:
            raise ValueError(f"{path} is a prepare-text folder with two datasets: pass kind='text' "
                             f"({subs['text']}) or kind='pair' ({subs['pair']})")
        path = subs[kind]
    done = path / "DONE" if (path / "DONE").is_file() else path.parent / "DONE"
    if not done.is_file():
        raise FileNotFoundError(f"{path} is not a complete prepared dataset (no DONE marker)")
    return open_views(datasets.load_from_disk(str(path)))


def view_source(views, objective, name: str, salt: int = 0, kind: str | None = None) -> Source:
    """A stream Source applying ``objective(view, rng, ctx)`` to the views of `views` (anything
    :func:`open_views` takes)."""
    views = open_views(views, kind)
    if len(views) == 0:
        raise ValueError(f"source {name!r}: the views dataset is empty")

    def make(index: int, rng, ctx):
        return objective(views[index], rng, ctx)

    return Source(name=name, n=len(views), make=make, salt=salt, get=views.__getitem__, context=True)
