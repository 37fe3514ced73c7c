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
     a pure function of the input list.
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
    label_keys = sorted({k for d in docs for k in d.labels})
    ptr_tails = {k: p.shape[1:] for d in docs for k, p in d.pointers.items()}  # record shape per key
    scalar_keys = sorted({k for d in docs for k in d.scalars})
    keys = _Keys(label_keys, ptr_tails, scalar_keys,
                 token=tuple(f for f in OPTIONAL_TOKEN_COLUMNS if any(getattr(d, f) is not None for d in docs)),
                 targets={k: v.shape[1:] for d in docs for k, v in d.targets.items()})
    return [_row([docs[i] for i in b], seq_len, pad_id, keys) for b in bins]


class _Keys:
    """The columns every row of one pack call carries (the union over its documents)."""

    def __init__(self, labels, ptr_tails, scalars, token, targets):
        self.labels, self.ptr_tails, self.scalars, self.token, self.targets = labels, ptr_tails, scalars, token, targets


def _row(docs: list[Example], seq_len: int, pad_id: int, keys: _Keys) -> dict:
    label_keys, ptr_tails, scalar_keys = keys.labels, keys.ptr_tails, keys.scalars
    row = {
        "input_ids": np.full(seq_len, pad_id, dtype=np.int32),
        "segment_ids": np.zeros(seq_len, dtype=np.int32),
        "positions": np.zeros(seq_len, dtype=np.int32),
        "prefix": np.zeros(seq_len, dtype=bool),
    }
    for k in label_keys:
        row[f"labels.{k}"] = np.full(seq_len, IGNORE, dtype=np.int32)
    for f in keys.token:
        row[f] = np.arange(seq_len, dtype=np.int32) if f == "order" else np.zeros(seq_len, dtype=np.int32)
    for k, tail in keys.targets.items():
        row[f"targets.{k}"] = np.full((seq_len, *tail), np.nan, dtype=np.float32)
    ptr_keys = sorted(ptr_tails)
    ptrs: dict[str, list] = {k: [] for k in ptr_keys}
    ptr_segs: dict[str, list] = {k: [] for k in ptr_keys}
    off, seg = 0, 1  # seg: segment id of the next document's first part
    scalars: dict[str, list[int]] = {k: [] for k in scalar_keys}
    for d in docs:
        n = len(d)
        sl = slice(off, off + n)
        row["input_ids"][sl] = d.input_ids
        row["prefix"][sl] = d.prefix
        if d.parts is None:
            row["segment_ids"][sl] = seg
            row["positions"][sl] = np.arange(n)
            tok_seg = None
        else:  # each part its own segment, positions from 0 in each
            bounds = d.part_bounds()
            row["segment_ids"][sl] = seg + d.parts
            row["positions"][sl] = np.arange(n) - bounds[d.parts]
            tok_seg = seg + d.parts
        if d.positions is not None:
            row["positions"][sl] = d.positions
        for f in keys.token:
            v = getattr(d, f)
            if v is not None:
                row[f][sl] = v + off if f == "order" else v
        for k, v in d.targets.items():
            row[f"targets.{k}"][sl] = v
        for k, v in d.labels.items():
            row[f"labels.{k}"][sl] = v
        for k in ptr_keys:
            p = d.pointers.get(k)
            if p is not None and len(p):
                ptrs[k].append(np.where(p >= 0, p + off, -1))
                ptr_segs[k].append(np.full(len(p), seg, dtype=np.int32) if tok_seg is None
                                   else _record_segments(p, tok_seg, seg))
        for k in scalar_keys:
            scalars[k].extend(d.scalar_of_parts(k) if k in d.scalars else [IGNORE] * d.n_parts)
        off += n
        seg += d.n_parts
    for k in ptr_keys:
        row[f"ptr.{k}"] = np.concatenate(ptrs[k]).astype(np.int64) if ptrs[k] else np.zeros((0, *ptr_tails[k]), np.int64)
        row[f"ptr_seg.{k}"] = np.concatenate(ptr_segs[k]) if ptr_segs[k] else np.zeros(0, np.int32)
    for k in scalar_keys:
        row[f"scalar.{k}"] = np.array(scalars[k], dtype=np.int64)
    return row


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
