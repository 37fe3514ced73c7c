"""Best-fit packing of Examples into rows of ``seq_len`` tokens, with per-document attention.

A row is a dict of NumPy arrays (L = seq_len):

  input_ids   (L,)  int32  pad_id after the last document
  segment_ids (L,)  int32  1-based document number within the row, 0 on padding
  positions   (L,)  int32  restart at 0 for every document
  prefix      (L,)  bool   the documents' prefix masks (codept.attention.visible uses seg + prefix)
  labels.<n>  (L,)  int32  IGNORE on padding and where a document has no such label
  ptr.<n>     (K, ...)     pointer records of all documents, shifted into row coordinates
  ptr_seg.<n> (K,)  int32  the segment each pointer record belongs to
  scalar.<n>  (D,)  int64  one value per document of the row (D = documents in the row)
Optional columns, present only when a document of the packed list sets the field (codept.data.example):
  types, langs, block_positions (L,) int32   0 where a document does not set them
  order       (L,)  int32  row offset + the document's order (row index where it sets none): the
                           attention rule compares order only within a segment
  targets.<n> (L,) or (L, m) float32   NaN on padding and where a document has no such target
Explicit ``positions`` of a document replace its 0..n-1.

A multi-part Example (``parts``, codept.data.example: the two sides of a contrastive pair) is placed
as one unit, but each part is a document of the row: consecutive segment ids, positions restarting
per part, its own scalar value, so the attention rule keeps the parts apart.

Algorithm (:func:`pack`):
  1. Documents longer than ``seq_len`` are split into windows of ``seq_len`` (``long="split"``),
     cut to their first ``seq_len`` tokens (``long="truncate"``), or covered by sliding windows
     every S tokens (``long="stride:S"``: the last window ends at the document's end, so no token is
     lost; repeated tokens keep their input but not their labels, :func:`overlap_tokens` counts
     them); ``rows="document"`` puts every document alone in a row; pointer records that leave a
     window are dropped (codept.data.example.Example.window). A multi-part example is always cut to
     its first ``seq_len`` tokens (its parts must stay together); parts cut off entirely are lost
     with their scalars, a part cut in the middle keeps its scalar.
  2. Best-fit decreasing: documents sorted by length (longest first, ties by input order; a
     multi-part example is one item of its total length); each goes to the open row with the least
     free space that still fits it, else to a new row. A sorted list of free capacities makes each
     placement O(log R) plus an O(R) list insert.
  3. Rows are emitted in creation order, documents inside a row in placement order, so the output is
     a pure function of the input list. The token columns of all rows of one call are built at once
     (:func:`_rows`: one concatenation per column); a row's arrays are rows of those (R, L) arrays.
Utilisation on function-level code at seq 512 is measured by benchmarks/bench_packing.py. Not
covered: packing across buffers (a document never waits for a later buffer); :func:`unpack` inverts
packing per segment, so a multi-part example comes back as its k parts.
"""

from __future__ import annotations

import bisect

import numpy as np

from codept.data.example import IGNORE, TOKEN_FIELDS, Example

OPTIONAL_TOKEN_COLUMNS = tuple(f for f in TOKEN_FIELDS if f != "positions")  # positions is always a column


def split_long(examples: list[Example], seq_len: int, long: str = "split") -> list[Example]:
    """Documents longer than seq_len: ``split`` into consecutive windows, ``truncate`` to the first
    seq_len tokens, or ``stride:S`` (sliding windows, see :func:`stride_windows`)."""
    stride = parse_long(long, seq_len)
    out: list[Example] = []
    for ex in examples:
        n = len(ex)
        if n == 0:
            continue
        if n <= seq_len:
            out.append(ex)
        elif long == "truncate" or ex.parts is not None:  # the parts of an example stay in one row
            out.append(ex.window(0, seq_len))
        elif stride:
            out.extend(stride_windows(ex, seq_len, stride))
        else:
            out.extend(ex.window(s, min(s + seq_len, n)) for s in range(0, n, seq_len))
    return out


def parse_long(long: str, seq_len: int) -> int:
    """The stride of ``stride:S`` (1 <= S <= seq_len), 0 for ``split`` / ``truncate``."""
    if long in ("split", "truncate"):
        return 0
    head, _, raw = long.partition(":")
    if head != "stride" or not raw.isdigit() or not 1 <= int(raw) <= seq_len:
        raise ValueError(f"long={long!r}: expected 'split', 'truncate' or 'stride:S' with 1 <= S <= seq_len={seq_len}")
    return int(raw)


def window_starts(n: int, seq_len: int, stride: int) -> list[int]:
    """Starts of windows of seq_len every `stride` tokens; the last window ends at n (no token lost)."""
    starts = list(range(0, max(n - seq_len, 0) + 1, stride))
    if starts[-1] + seq_len < n:
        starts.append(n - seq_len)
    return starts


def stride_windows(ex: Example, seq_len: int, stride: int) -> list[Example]:
    """Sliding windows of seq_len every `stride` tokens (the last one ends at the document's end).
    A token seen by an earlier window keeps its input in the later ones (context) but loses its
    labels and targets there, so every target is trained once; the overlap is counted by
    :func:`overlap_tokens`."""
    n, out, seen = len(ex), [], 0  # seen: tokens [0, seen) already in a window
    for s in window_starts(n, seq_len, stride):
        w = ex.window(s, s + seq_len)
        k = seen - s  # leading tokens of w an earlier window held
        if k > 0:
            w.labels = {name: np.where(np.arange(len(w)) < k, IGNORE, v).astype(v.dtype) for name, v in w.labels.items()}
            w.targets = {name: np.where((np.arange(len(w)) < k).reshape((-1,) + (1,) * (v.ndim - 1)), np.nan, v)
                         .astype(v.dtype) for name, v in w.targets.items()}
        seen = s + len(w)
        out.append(w)
    return out


def overlap_tokens(n: int, seq_len: int, stride: int) -> int:
    """Input tokens a document of n tokens repeats under ``stride:S`` (windows' tokens minus n)."""
    if n <= seq_len:
        return 0
    return len(window_starts(n, seq_len, stride)) * seq_len - n


def best_fit(lengths: list[int], capacity: int) -> list[list[int]]:
    """Bins (lists of item indices) from best-fit decreasing; every length must be <= capacity."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    bins: list[list[int]] = []
    free: list[tuple[int, int]] = []  # sorted (free space, bin id)
    for i in order:
        n = lengths[i]
        j = bisect.bisect_left(free, (n, -1))
        if j == len(free):
            bins.append([i])
            rest, b = capacity - n, len(bins) - 1
        else:
            rest, b = free.pop(j)
            bins[b].append(i)
            rest -= n
        if rest > 0:
            bisect.insort(free, (rest, b))
    return bins


def pack(examples: list[Example], seq_len: int, pad_id: int, long: str = "split", rows: str = "packed") -> list[dict]:
    """Pack `examples` into rows (see module docstring). Deterministic in the input order.
    ``rows="document"``: one document (window) per row, no cross-document packing."""
    if rows not in ("packed", "document"):
        raise ValueError(f"rows={rows!r}: expected 'packed' (best-fit, per-document attention) or 'document'")
    docs = split_long(examples, seq_len, long)
    bins = best_fit([len(d) for d in docs], seq_len) if rows == "packed" else [[i] for i in range(len(docs))]
    labels, ptr_tails, scalars, token, targets = set(), {}, set(), set(), {}  # the union over the documents
    for d in docs:
        if d.labels:
            labels.update(d.labels)
        if d.pointers:
            ptr_tails.update((k, p.shape[1:]) for k, p in d.pointers.items())  # record shape per key
        if d.scalars:
            scalars.update(d.scalars)
        if d.targets:
            targets.update((k, v.shape[1:]) for k, v in d.targets.items())
        for f in OPTIONAL_TOKEN_COLUMNS:
            if getattr(d, f) is not None:
                token.add(f)
    keys = _Keys(sorted(labels), ptr_tails, sorted(scalars), tuple(f for f in OPTIONAL_TOKEN_COLUMNS if f in token), targets)
    return _rows([[docs[i] for i in b] for b in bins], seq_len, pad_id, keys)


class _Keys:
    """The columns every row of one pack call carries (the union over its documents)."""

    def __init__(self, labels, ptr_tails, scalars, token, targets):
        self.labels, self.ptr_tails, self.scalars, self.token, self.targets = labels, ptr_tails, scalars, token, targets


def _rows(bins: list[list[Example]], seq_len: int, pad_id: int, keys: _Keys) -> list[dict]:
    """One row per bin, its documents in bin order. The token columns of all rows are built at
    once: each column is one concatenation, in row-major order, of every document's values (a
    column's fill where a document does not set it) and of every row's padding, read as (R,
    seq_len). Segment ids: 1 + the parts of the row's earlier documents + the token's part;
    positions restart at every segment's first token (0 on padding) unless a document gives its
    own. Pointer records and scalars are gathered per document. A row's columns are rows of those
    (R, seq_len) arrays."""
    L, n_rows = seq_len, len(bins)
    if not n_rows:
        return []
    items, lens, bases, starts = [], [], [], []  # row-major: each document, then its row's padding (None)
    for b in bins:
        used, base = 0, 1
        for d in b:
            n, k = len(d), d.n_parts
            items.append(d)
            lens.append(n)
            bases.append(base)
            starts.append(used)
            used, base = used + n, base + k
        if used > L:
            raise ValueError(f"pack: a row of {used} tokens > seq_len={L}")
        if used < L:
            items.append(None)
            lens.append(L - used)
            bases.append(0)
            starts.append(used)

    def column(value, fill: np.ndarray, dtype) -> np.ndarray:
        """(R, L, ...) from value(d) per document (None: `fill`, as on padding)."""
        pieces = []
        for d, n in zip(items, lens):
            v = None if d is None else value(d)
            pieces.append(fill[:n] if v is None else v)
        out = np.concatenate(pieces, dtype=dtype, casting="unsafe")
        return out.reshape(n_rows, L, *out.shape[1:])

    pad = np.full(L, pad_id, dtype=np.int32)
    no = np.zeros(L, dtype=np.int32)
    ids = column(lambda d: d.input_ids, pad, np.int32)
    pre = column(lambda d: d.prefix, no.astype(bool), bool)
    tok_seg = np.repeat(np.array(bases, dtype=np.int32), lens)  # every token's document's first segment
    if any(d is not None and d.parts is not None for d in items):
        tok_seg += column(lambda d: d.parts, no, np.int32).ravel()  # + its part
    first = np.empty(n_rows * L, dtype=bool)  # a segment's first token (padding: every token, position 0)
    first[:1] = True
    np.not_equal(tok_seg[1:], tok_seg[:-1], out=first[1:])
    sizes = np.asarray(lens)
    first[(np.cumsum(sizes) - sizes)[sizes > 0]] = True  # every document's first token
    first |= tok_seg == 0
    at = np.arange(n_rows * L, dtype=np.int32)
    pos = at - np.maximum.accumulate(np.where(first, at, 0))
    offset = 0
    for d, n in zip(items, lens):
        if d is not None and d.positions is not None:
            pos[offset: offset + n] = d.positions
        offset += n
    cols = {"input_ids": ids, "segment_ids": tok_seg.reshape(n_rows, L), "positions": pos.reshape(n_rows, L),
            "prefix": pre}
    ignore = np.full(L, IGNORE, dtype=np.int32)
    for k in keys.labels:
        cols[f"labels.{k}"] = column(lambda d: d.labels.get(k), ignore, np.int32)
    ar = np.arange(L, dtype=np.int32)
    for f in keys.token:
        if f != "order":
            cols[f] = column(lambda d: getattr(d, f), no, np.int32)
            continue
        # order: the document's own + its first token's row index; elsewhere the row index
        pieces = [ar[o: o + n] if d is None or d.order is None else d.order + o for d, n, o in zip(items, lens, starts)]
        cols[f] = np.concatenate(pieces, dtype=np.int32, casting="unsafe").reshape(n_rows, L)
    for k, tail in keys.targets.items():
        cols[f"targets.{k}"] = column(lambda d: d.targets.get(k), np.full((L, *tail), np.nan, dtype=np.float32), np.float32)
    out, j = [], 0
    for r, b in enumerate(bins):
        row = {name: col[r] for name, col in cols.items()}
        row.update(_records(b, starts[j: j + len(b)], bases[j: j + len(b)], keys))
        j += len(b) + (j + len(b) < len(items) and items[j + len(b)] is None)  # + the row's padding
        out.append(row)
    return out


def _records(docs: list[Example], starts: list[int], bases: list[int], keys: _Keys) -> dict:
    """A row's pointer records (shifted to row coordinates, with their segments) and per-segment
    scalars, from its documents placed at `starts` with first segments `bases`."""
    ptr_keys = sorted(keys.ptr_tails)
    ptrs: dict[str, list] = {k: [] for k in ptr_keys}
    ptr_segs: dict[str, list] = {k: [] for k in ptr_keys}
    scalars: dict[str, list[int]] = {k: [] for k in keys.scalars}
    for d, off, seg in zip(docs, starts, bases):
        if d.pointers:
            tok_part = None if d.parts is None else seg + d.parts
            for k in ptr_keys:
                p = d.pointers.get(k)
                if p is not None and len(p):
                    ptrs[k].append(np.where(p >= 0, p + off, -1))
                    ptr_segs[k].append(np.full(len(p), seg, dtype=np.int32) if tok_part is None
                                       else _record_segments(p, tok_part, seg))
        for k in keys.scalars:
            scalars[k].extend(d.scalar_of_parts(k) if k in d.scalars else [IGNORE] * d.n_parts)
    out = {}
    for k in ptr_keys:
        out[f"ptr.{k}"] = np.concatenate(ptrs[k]).astype(np.int64) if ptrs[k] else np.zeros((0, *keys.ptr_tails[k]), np.int64)
        out[f"ptr_seg.{k}"] = np.concatenate(ptr_segs[k]) if ptr_segs[k] else np.zeros(0, np.int32)
    for k in keys.scalars:
        out[f"scalar.{k}"] = np.array(scalars[k], dtype=np.int64)
    return out


def _record_segments(p: np.ndarray, tok_seg: np.ndarray, first: int) -> np.ndarray:
    """(K,) segment of each pointer record of a multi-part document: the part of its first index
    >= 0 (Example checks that a record stays in one part); a record of -1 only gets the first part."""
    rec = p.reshape(len(p), -1)
    has = rec >= 0
    j = np.argmax(has, axis=1)  # first index >= 0 of each record
    idx = rec[np.arange(len(rec)), j]
    return np.where(has.any(axis=1), tok_seg[np.clip(idx, 0, len(tok_seg) - 1)], first).astype(np.int32)


def unpack(row: dict) -> list[Example]:
    """The documents of a row, back in document coordinates: the inverse of :func:`pack` per
    segment, so each part of a multi-part example comes back as an Example of its own (without
    ``parts``), with its own scalar values."""
    seg = row["segment_ids"]
    n_docs = int(seg.max()) if len(seg) else 0
    out = []
    for s in range(1, n_docs + 1):
        idx = np.flatnonzero(seg == s)
        a, b = int(idx[0]), int(idx[-1]) + 1
        labels = {k[7:]: v[a:b] for k, v in row.items() if k.startswith("labels.")}
        pointers = {}
        for k, v in row.items():
            if k.startswith("ptr."):
                mine = row[f"ptr_seg.{k[4:]}"] == s
                pointers[k[4:]] = np.where(v[mine] >= 0, v[mine] - a, -1)
        scalars = {k[7:]: int(v[s - 1]) for k, v in row.items() if k.startswith("scalar.")}
        extra = {f: row[f][a:b] - (a if f == "order" else 0) for f in OPTIONAL_TOKEN_COLUMNS if f in row}
        targets = {k[8:]: v[a:b] for k, v in row.items() if k.startswith("targets.")}
        out.append(Example(row["input_ids"][a:b], row["prefix"][a:b], labels, pointers, scalars,
                           positions=row["positions"][a:b], targets=targets, **extra))
    return out


def utilisation(rows: list[dict]) -> float:
    """Share of row slots holding a document token (not padding)."""
    if not rows:
        return 0.0
    return float(sum(int((r["segment_ids"] > 0).sum()) for r in rows) / sum(len(r["segment_ids"]) for r in rows))
