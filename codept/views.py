"""The view kinds as one floor: every kind of prepared view read the same way, and the stream source.

Kinds (:data:`KINDS`): ``code`` (codept.structure.view.CodeView, ``codept prepare``), ``text`` and
``pair`` (codept.text.view.TextView / PairView, ``codept prepare-text`` -> ``DIR/text``, ``DIR/pairs``),
``trace`` (codept.exec.views.TraceView, from the rows of ``codept trace``). Each view class carries
its schema (KIND, ARRAYS, SCHEMA, KEY, SPLIT, DERIVED: codept.data.viewrows), written once in its own module;
this module holds no column list of its own. One writer: :func:`to_table` (views -> Arrow table).

:func:`open_views` reads any of them: a prepared folder (or several, read as one), a ``codept
trace`` folder (``tokenizer=`` needed: trace rows are tokenized here, once), a ``datasets.Dataset``
(also after ``.select``) or a ``pyarrow.Table``, and returns :class:`Views`: the kind read from the
Arrow schema (never guessed from paths), every ``list<int>`` column held as per-record-batch NumPy
(flat values + offsets, zero-copy over the memory-mapped shards); ``columns=`` reads only the fields
named. ``views[i]`` is a real view of its kind whose arrays are read-only slices of those buffers:
nothing is converted to Python lists, only the few string fields become Python objects.

:func:`view_source` wraps Views and an objective as a codept.data.stream.Source. The objective is
called as ``objective(view, rng, ctx)`` (codept.data.stream.Context: its own index and epoch, the
training progress, and ``ctx.partner(rng)`` to draw another document of the same source with the
example's own rng, e.g. NSP's random-document negatives; ``ctx.find(path)`` for the index of the
source's view of that path, None when the source lacks it), so it stays a pure function of
(seed, epoch, index) and the stream state. An objective with a ``bind(source)`` attribute is bound
once when the source is made (code_doc's mined negatives: the sidecar beside ``Views.folders``, the
prepared folders the views were read from, is loaded and checked there, before any example).

Algorithm of ``views[i]``: 1. the record batch holding row i (binary search over batch starts);
2. a view object whose fields are read on first access (:func:`_lazy`): an array column as
``values[offsets[j]:offsets[j + 1]]`` reshaped to the field's width, a string with one Arrow scalar
conversion, a DERIVED field the table lacks computed by its class. Cost: O(fields read) small NumPy
views per document, plus the text copy when the text is read (benchmarks/bench_objectives.py); a
trace folder costs one tokenization of every row at open. Not covered: views whose arrays hold
nulls (prepare never writes them), remote / streaming tables (prepare them to disk first).
"""

from __future__ import annotations

import hashlib
import importlib
from dataclasses import fields
from functools import partial
from pathlib import Path

import numpy as np
import pyarrow as pa

from codept.data.jobs import load_dataset
from codept.data.stream import Source
from codept.data.viewrows import to_table  # noqa: F401 (the one writer, re-exported)

# kind -> its view class, imported on first use (text views never import tree-sitter). The order is
# the order kind_of tries them: code last, so a text table never loads codept.structure.
KINDS = {"text": "codept.text.view:TextView", "pair": "codept.text.view:PairView",
         "trace": "codept.exec.views:TraceView", "code": "codept.structure.view:CodeView"}


def view_class(kind: str) -> type:
    """The view class of ``kind`` (one of :data:`KINDS`)."""
    if kind not in KINDS:
        raise ValueError(f"kind={kind!r}: expected one of {tuple(KINDS)}")
    module, _, name = KINDS[kind].partition(":")
    return getattr(importlib.import_module(module), name)


def _required(cls: type) -> set[str]:
    return set(cls.SCHEMA.names) - set(cls.DERIVED)


def kind_of(schema: pa.Schema) -> str:
    """The kind whose schema (DERIVED columns aside) the table's columns hold; an error naming them
    otherwise."""
    names = set(schema.names)
    for kind in KINDS:
        if _required(view_class(kind)) <= names:
            return kind
    raise ValueError(f"not a views table: columns {sorted(names)} match none of the view kinds {tuple(KINDS)}")


class Views:
    """A views table as NumPy buffers; ``len(views)``, ``views[i]`` -> the i-th view object.
    ``columns``: read only these fields (a view then lacks the others: AttributeError)."""

    def __init__(self, table: pa.Table, indices: np.ndarray | None = None, columns=None, skipped: int = 0):
        self.kind = kind_of(table.schema)
        self.cls = view_class(self.kind)
        self.skipped = skipped  # inputs that gave no view (trace rows that do not parse)
        self._batches = [b for b in table.to_batches() if b.num_rows]
        sizes = np.array([b.num_rows for b in self._batches], dtype=np.int64)
        self._starts = np.concatenate([[0], np.cumsum(sizes)])
        self._indices = None if indices is None else np.asarray(indices, dtype=np.int64)
        n_rows = int(self._starts[-1])
        self._n = n_rows if self._indices is None else len(self._indices)
        if self._indices is not None and len(self._indices) and not 0 <= self._indices.min() <= self._indices.max() < n_rows:
            raise ValueError(f"indices outside [0, {n_rows})")
        present = set(table.schema.names)
        if columns is not None:
            columns = set(columns)
            own = {f.name for f in fields(self.cls)} | set(self.cls.SCHEMA.names)
            side = {n.split("_", 1)[1] for n in self.cls.SCHEMA.names if "_" in n}  # pair: a side's field names
            if not columns <= own | side:
                raise ValueError(f"columns={sorted(columns)}: {self.kind} views have no "
                                 f"{sorted(columns - own - side)} (fields: {sorted(own - {'stats'})})")
        self.columns = columns
        self.folders: tuple[str, ...] = ()  # the prepared folders read (open_views sets them): sidecars beside them
        self._read = {n for n in self.cls.SCHEMA.names if n in present and self._wanted(n)}
        self._widths = {n: w for n, (_, w) in self.cls.ARRAYS.items()}
        # per batch: array column -> (flat values, offsets), zero-copy
        self._cols = [{n: (b.column(n).values.to_numpy(zero_copy_only=False), b.column(n).offsets.to_numpy())
                       for n in self._widths if n in self._read} for b in self._batches]

    def _wanted(self, column: str) -> bool:
        if self.columns is None or column in self.columns or column == self.cls.KEY:
            return True
        return self.kind == "pair" and column.split("_", 1)[-1] in self.columns

    def __len__(self) -> int:
        return self._n

    def __iter__(self):
        return (self[i] for i in range(self._n))

    def select(self, indices) -> "Views":
        """The views at `indices` (positions in this Views), in that order."""
        idx = np.asarray(indices, dtype=np.int64)
        base = idx if self._indices is None else self._indices[idx]
        out = object.__new__(Views)
        out.__dict__.update(self.__dict__)
        out._indices, out._n = base, len(base)
        return out

    def keys(self) -> list[str]:
        """The split key of every view, in order (the class's KEY column: a path, a trace's source)."""
        return self.strings(self.cls.KEY)

    def strings(self, column: str) -> list:
        """One scalar column (``path``, ``lang``) of every view, in order; no arrays are read."""
        rows = np.arange(self._starts[-1]) if self._indices is None else self._indices
        b = np.searchsorted(self._starts, rows, side="right") - 1
        cols = [bt.column(column).to_pylist() for bt in self._batches]
        return [cols[i][r - int(self._starts[i])] for i, r in zip(b.tolist(), rows.tolist())]

    def paths(self) -> list[str]:
        """The path of every view, in order (one string column read, no arrays)."""
        return self.keys()

    def split(self, share: float, salt: str = "holdout") -> tuple["Views", "Views"]:
        """(kept, held-out) views: a view is held out when the hash of ``salt`` and its SPLIT column
        (the text; a pair's source side; a trace's source module) falls in the first `share` of the
        hash range. The split is the same on every rank, machine and run, wherever the corpus lies
        and in whatever order (a path-based hash moved documents with the folder: CI's tmp folder
        once held out 1 of 60), and identical documents land on the same side. Cost: one SHA-1 pass
        over the column's bytes, read zero-copy from the Arrow buffers."""
        if not 0.0 <= share < 1.0:
            raise ValueError(f"share={share}: the held-out share must be in [0, 1)")
        h = self._split_hashes(salt)
        held = h < np.uint64(int(share * 2**64)) if share else np.zeros(len(h), bool)
        return self.select(np.flatnonzero(~held)), self.select(np.flatnonzero(held))

    def _split_hashes(self, salt: str) -> np.ndarray:
        """uint64 hash of ``salt`` + the SPLIT column's UTF-8 bytes, per view in order."""
        seed = hashlib.sha1(salt.encode())
        per_batch = []
        for b in self._batches:
            col = b.column(self.cls.SPLIT)
            col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
            wide = pa.types.is_large_string(col.type) or pa.types.is_large_binary(col.type)
            _, offsets, data = col.buffers()
            offs = np.frombuffer(offsets, np.int64 if wide else np.int32)[col.offset:col.offset + len(col) + 1]
            mem = memoryview(data if data is not None else b"")
            out = np.empty(len(col), np.uint64)
            for i, (s, e) in enumerate(zip(offs[:-1].tolist(), offs[1:].tolist())):
                d = seed.copy()
                d.update(mem[s:e])
                out[i] = int.from_bytes(d.digest()[:8], "big")
            per_batch.append(out)
        every = np.concatenate(per_batch) if per_batch else np.zeros(0, np.uint64)
        return every if self._indices is None else every[self._indices]

    def ragged(self, name: str) -> tuple[np.ndarray, np.ndarray] | None:
        """One array field of every view at once: (values, counts), the views' arrays concatenated in
        view order ((sum counts, width) for a 2-D field) and each view's number of entries; None when
        the table lacks the column (a DERIVED field of an older table: read per view instead). Cost:
        one copy of the field (no per-view Python object); an objective's whole-corpus filter reads it."""
        if not all(name in c for c in self._cols):
            return None
        w = self._widths[name]
        flat = np.concatenate([c[name][0] for c in self._cols]) if self._cols else np.zeros(0, np.int64)
        base = np.cumsum([0] + [len(c[name][0]) for c in self._cols])
        ends = np.concatenate([c[name][1][1:] + base[i] for i, c in enumerate(self._cols)]) if self._cols else np.zeros(0, np.int64)
        starts = np.concatenate([c[name][1][:-1] + base[i] for i, c in enumerate(self._cols)]) if self._cols else ends
        if self._indices is not None:
            starts, ends = starts[self._indices], ends[self._indices]
        counts = (ends - starts).astype(np.int64)
        total = int(counts.sum())
        idx = np.repeat(starts - (np.cumsum(counts) - counts), counts) + np.arange(total)
        values = flat[idx]
        return (values if w == 0 else values.reshape(-1, w)), (counts if w == 0 else counts // w)

    def __getitem__(self, i: int):
        if not -self._n <= i < self._n:
            raise IndexError(f"view {i} out of range for {self._n} views")
        row = int(i % self._n) if self._indices is None else int(self._indices[i])
        b = int(np.searchsorted(self._starts, row, side="right")) - 1
        j = row - int(self._starts[b])
        if self.kind == "pair":
            side = view_class("text")  # each side a TextView over its prefixed columns
            sides = {s: _lazy(side, partial(self._field, b, j, f"{s}_")) for s in self.cls.SIDES}
            return self.cls(path=self._batches[b].column("path")[j].as_py(), **sides)
        return _lazy(self.cls, partial(self._field, b, j, ""))

    def _field(self, b: int, j: int, prefix: str, name: str):
        """One field of view (b, j) (a pair side: columns ``prefix + name``), read on first access."""
        col = prefix + name
        if col in self._cols[b]:
            values, offsets = self._cols[b][col]
            a = values[offsets[j]:offsets[j + 1]]
            w = self._widths[col]
            return a if w == 0 else a.reshape(-1, w)
        if col in self._read:
            return self._batches[b].column(col)[j].as_py()
        if prefix and name == "path":  # a pair side: the pair's path
            return self._batches[b].column("path")[j].as_py()
        if name in self.cls.DERIVED and (self.columns is None or name in self.columns):
            return self.cls.derive(name, partial(self._field, b, j, prefix))
        if self.columns is not None and (col in self.cls.SCHEMA.names or prefix):
            raise AttributeError(f"{name}: not among the columns read ({sorted(self.columns)})")
        raise AttributeError(name)


_LAZY: dict[type, type] = {}  # view class -> its lazy subclass


def _lazy(cls: type, load):
    """A `cls` view (isinstance holds, every field equal to the eager view's) whose fields are read
    from the table on first access, then kept: an objective that reads 3 of a code view's 14 fields
    pays for 3 (the text and the name list are the dear ones)."""
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


def open_views(src, kind: str | None = None, columns=None, *, tokenizer=None, max_trace_chars: int = 2000,
               docstrings: str = "full") -> Views:
    """Views of a prepared folder (or a list of them, read as one), a ``codept trace`` folder, a
    ``datasets.Dataset``, a ``pyarrow.Table`` or Views. A ``codept prepare-text`` folder holds two
    datasets: ``kind='text'`` or ``'pair'`` picks one (or pass ``DIR/text`` / ``DIR/pairs``).
    ``kind``, when given, must match what the table holds. ``columns``: the fields to read (all by
    default). A trace folder needs ``tokenizer`` (the model's); ``max_trace_chars`` and
    ``docstrings`` are codept.exec.views.view_of's."""
    if kind is not None and kind not in KINDS:
        raise ValueError(f"kind={kind!r}: expected one of {tuple(KINDS)}")
    if isinstance(src, Views):
        views = src if columns is None else Views(pa.Table.from_batches(src._batches), src._indices, columns, src.skipped)
        views.folders = src.folders
    elif isinstance(src, pa.Table):
        views = Views(src, None, columns)
    elif isinstance(src, (str, Path, list, tuple)):
        folders = [Path(p) for p in ([src] if isinstance(src, (str, Path)) else src)]
        views = _open_folders(folders, kind, columns, tokenizer, max_trace_chars, docstrings)
    else:  # a datasets.Dataset (possibly with an indices mapping from .select / .shuffle)
        idx = getattr(src, "_indices", None)
        views = Views(src.data.table, None if idx is None else idx.column(0).to_numpy(), columns)
        views.folders = _folders_of(src)
    if kind is not None and views.kind != kind:
        raise ValueError(f"{src}: holds {views.kind} views, not {kind}")
    return views


def _folders_of(dataset) -> tuple[str, ...]:
    """The prepared folders (with DONE) holding a datasets.Dataset's Arrow files, in order (also after
    ``.select``, whose indices keep the data files); () for an in-memory dataset."""
    out: list[str] = []
    for f in getattr(dataset, "cache_files", None) or []:
        folder = Path(f["filename"]).parent
        if (folder / "DONE").is_file() and str(folder) not in out:
            out.append(str(folder))
    return tuple(out)


def is_trace_folder(path: Path) -> bool:
    """A ``codept trace`` folder: rows in shards/*.jsonl and a summary.json, no Arrow dataset (a
    prepared folder holds state.json and DONE instead; codept.exec.views.read_rows checks the rest)."""
    return ((path / "shards").is_dir() and (path / "summary.json").is_file()
            and not (path / "state.json").exists() and not (path / "DONE").exists())


def _open_folders(paths: list[Path], kind, columns, tokenizer, max_trace_chars, docstrings) -> Views:
    if not paths:
        raise ValueError("open_views: no folder given")
    traces = [is_trace_folder(p) for p in paths]
    if any(traces):
        if not all(traces):
            raise ValueError(f"{[str(p) for p in paths]}: trace folders mixed with views folders (one kind per Views)")
        if tokenizer is None:
            raise ValueError(f"{paths[0]} is a `codept trace` folder: pass tokenizer= (its rows are tokenized "
                             "into TraceViews when opened)")
        from codept.exec.views import TraceView, read_rows, views_of

        rows = [r for p in paths for r in read_rows(p)]
        views, skipped = views_of(rows, tokenizer, max_trace_chars, docstrings)
        return Views(to_table(views, TraceView), None, columns, skipped)
    resolved = []
    for path in paths:
        subs = {"text": path / "text", "pair": path / "pairs"}
        if path.is_dir() and not (path / "state.json").is_file() and any((p / "state.json").is_file() for p in subs.values()):
            if kind not in subs:
                raise ValueError(f"{path} is a prepare-text folder with two datasets: pass kind='text' "
                                 f"({subs['text']}) or kind='pair' ({subs['pair']})")
            path = subs[kind]
        resolved.append(path)
    return open_views(load_dataset(*resolved), columns=columns)


def view_source(views, objective, name: str, salt: int = 0, kind: str | None = None) -> Source:
    """A stream Source applying ``objective(view, rng, ctx)`` to the views of `views` (anything
    :func:`open_views` takes). An objective with a ``keep(views) -> (mask | None, reason)`` attribute
    names the views it can never make an example from (code_doc: no documented definition); the
    source serves only the others, and counts the left-out ones in ``Source.skipped`` {reason: n}
    (the stream then spends no read on them: 43% of the stdlib's views for code_doc). One with a
    ``prepare(views)`` attribute computes per-document arrays once over the served views
    (``Source.prepared``, read as ``ctx.source.prepared[ctx.index]``-style look-ups): the same
    examples as from the view alone, without re-deriving them at every read."""
    views = open_views(views, kind)
    if len(views) == 0:
        raise ValueError(f"source {name!r}: the views dataset is empty")
    skipped = {}
    keep = getattr(objective, "keep", None)
    if keep is not None:  # views the objective can never make an example from are not read at all
        mask, reason = keep(views)
        if mask is not None and not mask.all():
            if not mask.any():
                raise ValueError(f"source {name!r}: none of its {len(views)} views can give an example ({reason})")
            skipped = {reason: int((~mask).sum())}
            views = views.select(np.flatnonzero(mask))

    def make(index: int, rng, ctx):
        return objective(views[index], rng, ctx)

    index: dict[str, int] = {}

    def find(key: str) -> int | None:  # the key -> index map, built on the first look-up (one string column)
        if not index:
            index.update((k, i) for i, k in reversed(list(enumerate(views.keys()))))
        return index.get(key)

    prep = getattr(objective, "prepare", None)
    source = Source(name=name, n=len(views), make=make, salt=salt, get=views.__getitem__, context=True, find=find,
                    folders=views.folders, skipped=skipped, prepared=prep(views) if prep else None)
    bind = getattr(objective, "bind", None)
    if bind is not None:  # an objective reading more than its document checks it can, before any example
        bind(source)
    return source
