"""Packing, collation and the resumable stream, on real code views."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from codept.attention import visible
from codept.data.collate import collate
from codept.data.example import IGNORE, Example
from codept.data.pack import best_fit, pack, split_long, unpack, utilisation
from codept.data.sources import read_source, stdlib_files
from codept.data.stream import Mixture, PackedStream, Source
from codept.structure.grammar import SkipFile
from codept.structure.view import build_view
from codept.tokenizer import n_special

MASK = 4  # <mask> id (specials come first, see codept.tokenizer.BASE_SPECIALS)


@pytest.fixture(scope="module")
def views(small_tok):
    out = []
    for p in stdlib_files()[:40]:
        try:
            out.append(build_view(str(p), "python", read_source(p), small_tok))
        except SkipFile:
            pass
    return out


def function_docs(view):
    """Function-level documents: (start, end) token ranges of top-level definitions."""
    rows = sorted(view.functions[:, 1:3].tolist())
    out, end = [], -1
    for s, e in rows:
        if s >= end:
            out.append((s, e))
            end = e
    return out


def toy_objective(view, start, end, rng, n_spec):
    """Mask 15% of tokens; span boundaries as pointers; a document-level scalar."""
    ids = view.input_ids[start:end].copy()
    pick = (rng.random(len(ids)) < 0.15) & (ids >= n_spec)
    labels = np.where(pick, ids, IGNORE).astype(np.int32)
    ids[pick] = MASK
    sp = view.spans[(view.spans[:, 0] >= start) & (view.spans[:, 1] <= end)]
    bounds = np.stack([sp[:, 0] - start, sp[:, 1] - 1 - start], axis=1).astype(np.int64)
    return Example(ids, np.ones(len(ids), bool), {"mlm": labels}, {"span": bounds}, {"n_spans": len(sp)})


@pytest.fixture(scope="module")
def docs(views, small_tok):
    ns = n_special(small_tok)
    rng = np.random.default_rng(0)
    return [toy_objective(v, s, e, rng, ns) for v in views for s, e in function_docs(v)]


def test_pack_unpack_round_trip(docs):
    rows = pack(docs, 512, pad_id=0)
    back = [d for r in rows for d in unpack(r)]
    ref = split_long(docs, 512)  # documents over 512 tokens become windows
    assert len(ref) > len(docs)
    assert len(back) == len(ref) == sum(int(r["segment_ids"].max()) for r in rows)
    key = lambda d: (d.input_ids.tobytes(), d.pointers["span"].tobytes())  # noqa: E731
    for a, b in zip(sorted(ref, key=key), sorted(back, key=key)):
        np.testing.assert_array_equal(a.input_ids, b.input_ids)
        np.testing.assert_array_equal(a.labels["mlm"], b.labels["mlm"])
        np.testing.assert_array_equal(a.pointers["span"], b.pointers["span"])
        assert a.scalars == b.scalars


def test_rows_positions_pointers_and_attention(docs):
    rows = pack(docs, 256, pad_id=0)
    for r in rows[:50]:
        seg, pos = r["segment_ids"], r["positions"]
        assert len(seg) == 256
        for s in range(1, seg.max() + 1):
            idx = np.flatnonzero(seg == s)
            assert np.all(np.diff(idx) == 1)  # contiguous
            np.testing.assert_array_equal(pos[idx], np.arange(len(idx)))  # reset per document
        # pointers point inside their own document and at the same tokens as before packing
        p, ps = r["ptr.span"], r["ptr_seg.span"]
        assert np.all(seg[p[:, 0]] == ps) and np.all(seg[p[:, 1]] == ps)
        # the attention rule: no token sees another document or padding
        m = visible(seg, r["prefix"])
        q, k = np.nonzero(m)
        assert np.all(seg[q] == seg[k]) and np.all(seg[q] > 0)
        assert not m[seg == 0].any()


def test_long_documents_split_and_pointers_dropped():
    ids = np.arange(10, 1010, dtype=np.int32)
    # windows [0, 256) [256, 512) [512, 768) [768, 1000); [250, 260] and [500, 530] cross an edge
    ptr = np.array([[0, 5], [500, 530], [250, 260], [-1, 3], [300, 310]])
    ex = Example(ids, np.ones(1000, bool), {}, {"p": ptr})
    rows = pack([ex], 256, pad_id=0, long="split")
    assert sorted(int((r["segment_ids"] > 0).sum()) for r in rows) == [232, 256, 256, 256]
    by_first = {int(r["input_ids"][0]): r["ptr.p"].tolist() for r in rows}
    assert by_first == {10: [[0, 5], [-1, 3]], 266: [[44, 54]], 522: [], 778: []}
    rows_t = pack([ex], 256, pad_id=0, long="truncate")
    assert len(rows_t) == 1 and rows_t[0]["ptr.p"].tolist() == [[0, 5], [-1, 3]]


def test_best_fit_beats_first_come_and_is_valid():
    rng = np.random.default_rng(1)
    lengths = rng.integers(20, 400, size=2000).tolist()
    bins = best_fit(lengths, 512)
    assert sorted(i for b in bins for i in b) == list(range(len(lengths)))
    assert all(sum(lengths[i] for i in b) <= 512 for b in bins)
    assert sum(lengths) / (512 * len(bins)) > 0.97


def test_collate_padded_and_varlen(docs):
    rows = pack(docs[:40], 512, pad_id=0)
    b = collate(rows)
    assert b["input_ids"].shape == (len(rows), 512) and b["input_ids"].dtype == torch.int64
    assert b["prefix"].dtype == torch.bool and b["ptr.span"].shape[0] == len(rows)
    v = collate(rows, varlen=True)
    n = int(sum((r["segment_ids"] > 0).sum() for r in rows))
    assert v["input_ids"].shape == (1, n)
    cu = v["cu_seqlens"].numpy()
    assert cu[0] == 0 and cu[-1] == n and len(cu) == sum(int(r["segment_ids"].max()) + 1 for r in rows) - len(rows) + 1
    seg = v["segment_ids"][0].numpy()
    assert np.all(np.diff(seg) >= 0) and len(np.unique(seg)) == len(cu) - 1
    p, ps = v["ptr.span"].numpy(), v["ptr_seg.span"].numpy()
    assert np.all(seg[p[:, 0]] == ps)


# -- stream ----------------------------------------------------------------------------------


def make_sources(views, small_tok):
    ns = n_special(small_tok)
    units = [(v, s, e) for v in views for s, e in function_docs(v)]

    def make_a(i, rng):
        v, s, e = units[i]
        return toy_objective(v, s, e, rng, ns)

    def make_b(i, rng):
        v = views[i]
        return toy_objective(v, 0, min(len(v), 700), rng, ns)

    return [Source("functions", len(units), make_a, salt=1), Source("files", len(views), make_b, salt=2)]


def test_mixture_exact_proportions_and_rank_disjoint(views, small_tok):
    src = make_sources(views, small_tok)
    m = Mixture(src, [3, 1], seed=7)
    picks = [m.schedule(i)[0] for i in range(2000)]
    for n in (1, 10, 333, 2000):
        c = sum(1 for x in picks[:n] if x == 0)
        assert abs(c - 0.75 * n) <= 1
    # ranks see disjoint documents within an epoch
    seen = []
    for r in range(2):
        mr = Mixture(src[:1], [1], seed=7, rank=r, world=2)
        seen.append({mr.locate(i)[2] for i in range(src[0].n // 2)})
    assert not seen[0] & seen[1] and len(seen[0] | seen[1]) == 2 * (src[0].n // 2)


def test_dynamic_masking_by_epoch(views, small_tok):
    src = make_sources(views, small_tok)[:1]
    m = Mixture(src, [1], seed=3)
    n = src[0].n
    _, epoch, index = m.locate(0)
    j = next(j for j in range(n, 2 * n) if m.locate(j)[2] == index)  # same document, next epoch
    assert m.locate(j)[1] == epoch + 1
    a, a2 = m.example(0), m.example(j)
    assert len(a.input_ids) == len(a2.input_ids) and not np.array_equal(a.labels["mlm"], a2.labels["mlm"])
    again = Mixture(src, [1], seed=3).example(0)  # same (seed, epoch, index): same example
    np.testing.assert_array_equal(again.input_ids, a.input_ids)
    np.testing.assert_array_equal(again.labels["mlm"], a.labels["mlm"])


def _digest(rows):
    return [b"".join(np.ascontiguousarray(r[k]).tobytes() for k in sorted(r)) for r in rows]


def test_resume_reproduces_next_100_batches(views, small_tok):
    def stream():
        return PackedStream(Mixture(make_sources(views, small_tok), [2, 1], seed=11), seq_len=128, pad_id=0, buffer=32)

    full = stream()
    batches = [next(full.batches(4)) for _ in range(130)]
    s = stream()
    it = s.batches(4)
    for _ in range(30):
        next(it)
    state = s.state_dict()
    resumed = stream()
    resumed.load_state_dict(state)
    it2 = resumed.batches(4)
    for i in range(100):
        assert _digest(next(it2)) == _digest(batches[30 + i]), f"batch {30 + i} differs after resume"


def test_state_refuses_other_rank(views, small_tok):
    s = PackedStream(Mixture(make_sources(views, small_tok), [1, 1], seed=1, rank=0, world=2), 128, 0)
    t = PackedStream(Mixture(make_sources(views, small_tok), [1, 1], seed=1, rank=1, world=2), 128, 0)
    with pytest.raises(ValueError, match="rank"):
        t.load_state_dict(s.state_dict())


def test_loader_workers_do_not_change_the_stream(views, small_tok):
    def stream():
        return PackedStream(Mixture(make_sources(views, small_tok), [1, 1], seed=5), seq_len=128, pad_id=0, buffer=16)

    ref = list(itertools.islice(stream(), 60))
    for workers in (0, 2):
        s = stream()
        got = list(itertools.islice(s.iter_loader(workers), 60))
        assert _digest(got) == _digest(ref), f"workers={workers}"


def test_prepared_views_to_batches_end_to_end(tmp_path):
    """prepare -> load_views -> objectives -> mixture -> packed stream -> collate."""
    from codept.views import view_source
    from codept.objectives import build
    from codept.objectives.render import Vocab
    from codept.prepare import PrepareConfig, load_views, prepare
    from codept.tokenizer import load_tokenizer, train_tokenizer

    train_tokenizer(stdlib_files()[:20], tmp_path / "tok", vocab_size=1200)
    s = prepare([str(p) for p in stdlib_files()[20:45]], out=tmp_path / "views", tokenizer_dir=tmp_path / "tok",
                cfg=PrepareConfig(workers=1), progress=False)
    ds = load_views(tmp_path / "views")
    assert len(ds) == s["viewed"] > 10
    vocab = Vocab.from_tokenizer(load_tokenizer(tmp_path / "tok"))
    sources = [view_source(ds, build("mlm", vocab), "mlm", salt=1),
               view_source(ds, build("syntax_span", vocab), "syntax_span", salt=2)]
    stream = PackedStream(Mixture(sources, [1, 1], seed=0), seq_len=256, pad_id=vocab.pad_id, buffer=8)
    batch = collate(next(stream.batches(4)))
    assert batch["input_ids"].shape == (4, 256)
    lab = batch["labels.mlm"]
    assert ((lab != IGNORE).sum() / (batch["segment_ids"] > 0).sum()).item() > 0.1
    assert "ptr.span" in batch


def test_rows_from_different_objectives_collate_together():
    """A buffer with no pointer-carrying document still gives a 2-D empty ptr array, and rows
    without a field collate with rows that have it."""
    plain = Example(np.arange(5, 15, dtype=np.int32), np.ones(10, bool), {"mlm": np.full(10, IGNORE, np.int32)})
    spans = Example(np.arange(5, 12, dtype=np.int32), np.ones(7, bool), {"mlm": np.full(7, IGNORE, np.int32)},
                    {"span": np.array([[1, 2], [4, 4]])})
    rows_a = pack([plain, spans, plain], 12, pad_id=0)
    assert all(r["ptr.span"].shape[1:] == (2,) for r in rows_a)
    rows_b = pack([plain], 12, pad_id=0)  # no pointers at all in this buffer
    assert "ptr.span" not in rows_b[0]
    for varlen in (False, True):
        b = collate(rows_a + rows_b, varlen=varlen)
        assert b["ptr.span"].shape[-1] == 2


# --- the rows equal the per-document construction ----------------------------------------------------


def _reference_row(docs: list[Example], seq_len: int, pad_id: int, label_keys, ptr_tails, scalar_keys, token, targets) -> dict:
    """A row as packing built it one document at a time before the columns were built for all rows at
    once (codept.data.pack._rows): the reference its rows must equal, column by column."""
    row = {"input_ids": np.full(seq_len, pad_id, dtype=np.int32), "segment_ids": np.zeros(seq_len, dtype=np.int32),
           "positions": np.zeros(seq_len, dtype=np.int32), "prefix": np.zeros(seq_len, dtype=bool)}
    for k in label_keys:
        row[f"labels.{k}"] = np.full(seq_len, IGNORE, dtype=np.int32)
    for f in token:
        row[f] = np.arange(seq_len, dtype=np.int32) if f == "order" else np.zeros(seq_len, dtype=np.int32)
    for k, tail in targets.items():
        row[f"targets.{k}"] = np.full((seq_len, *tail), np.nan, dtype=np.float32)
    ptr_keys = sorted(ptr_tails)
    ptrs, ptr_segs = {k: [] for k in ptr_keys}, {k: [] for k in ptr_keys}
    scalars = {k: [] for k in scalar_keys}
    off, seg = 0, 1
    for d in docs:
        n = len(d)
        sl = slice(off, off + n)
        row["input_ids"][sl] = d.input_ids
        row["prefix"][sl] = d.prefix
        if d.parts is None:
            row["segment_ids"][sl] = seg
            row["positions"][sl] = np.arange(n)
            tok_seg = None
        else:
            row["segment_ids"][sl] = seg + d.parts
            row["positions"][sl] = np.arange(n) - d.part_bounds()[d.parts]
            tok_seg = seg + d.parts
        if d.positions is not None:
            row["positions"][sl] = d.positions
        for f in token:
            if getattr(d, f) is not None:
                row[f][sl] = getattr(d, f) + off if f == "order" else getattr(d, f)
        for k, v in d.targets.items():
            row[f"targets.{k}"][sl] = v
        for k, v in d.labels.items():
            row[f"labels.{k}"][sl] = v
        for k in ptr_keys:
            p = d.pointers.get(k)
            if p is not None and len(p):
                ptrs[k].append(np.where(p >= 0, p + off, -1))
                if tok_seg is None:
                    ptr_segs[k].append(np.full(len(p), seg, dtype=np.int32))
                else:  # the part of each record's first index >= 0
                    rec = p.reshape(len(p), -1)
                    idx = rec[np.arange(len(rec)), np.argmax(rec >= 0, axis=1)]
                    ptr_segs[k].append(np.where((rec >= 0).any(axis=1), tok_seg[np.clip(idx, 0, n - 1)], seg).astype(np.int32))
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


def _random_example(rng) -> Example:
    """An Example with a random subset of every field: parts (1-5, int32 / int64), labels, optional
    token fields, targets, pointer records inside one part (some -1), per-part and plain scalars."""
    n = int(rng.integers(1, 90))
    kw = {}
    if rng.random() < 0.5 and n >= 2:
        k = int(rng.integers(1, min(n, 5) + 1))
        cuts = np.sort(rng.choice(np.arange(1, n), size=k - 1, replace=False))
        kw["parts"] = np.repeat(np.arange(k, dtype=rng.choice([np.int32, np.int64])), np.diff(np.r_[0, cuts, n]))
    ids = rng.integers(0, 1000, n).astype(rng.choice([np.int32, np.int64]))
    if rng.random() < 0.6:
        kw["labels"] = {"mlm": np.where(rng.random(n) < 0.3, ids, IGNORE).astype(np.int32)}
    if rng.random() < 0.3:
        kw.setdefault("labels", {})["rtd"] = rng.integers(0, 2, n).astype(np.int32)
    for f in ("positions", "types", "langs", "block_positions", "order"):
        if rng.random() < 0.15:
            kw[f] = rng.permutation(n).astype(np.int32) if f == "order" else rng.integers(0, 5, n).astype(np.int32)
    if rng.random() < 0.2:
        kw["targets"] = {"v": np.where(rng.random(n) < 0.5, rng.random(n), np.nan).astype(np.float32)}
    if rng.random() < 0.2:
        kw.setdefault("targets", {})["w"] = rng.random((n, 3)).astype(np.float32)
    if rng.random() < 0.4:
        part = kw.get("parts", np.zeros(n, int))
        recs = []
        for _ in range(int(rng.integers(0, 4))):
            a = int(rng.integers(n))
            recs.append(sorted([a, int(rng.choice(np.flatnonzero(part == part[a])))]) if rng.random() < 0.8 else [-1, -1])
        kw["pointers"] = {"span": np.array(recs, np.int64).reshape(-1, 2)}
    scalars = {}
    if rng.random() < 0.5:
        k = int(kw["parts"][-1]) + 1 if "parts" in kw else 1
        scalars["pair"] = [int(x) for x in rng.integers(0, 10**12, k)] if rng.random() < 0.7 else int(rng.integers(9))
    if rng.random() < 0.3:
        scalars["nsp"] = int(rng.integers(2))
    return Example(ids, rng.random(n) < 0.5, scalars=scalars, **kw)


def test_rows_equal_the_per_document_reference():
    """pack builds the columns of all rows at once; every row equals the one-document-at-a-time
    construction (_reference_row over the same bins): same columns, order, dtypes and values, for
    random Examples of every field, every long-document mode and one document per row."""
    rng = np.random.default_rng(0)
    n_rows = 0
    for trial in range(300):
        exs = [_random_example(rng) for _ in range(int(rng.integers(1, 40)))]
        seq = int(rng.choice([16, 64, 128, 256]))
        long, rows_mode = str(rng.choice(["split", "truncate", "stride:8"])), str(rng.choice(["packed", "document"]))
        got = pack(exs, seq, 1, long, rows_mode)
        docs = split_long(exs, seq, long)
        bins = best_fit([len(d) for d in docs], seq) if rows_mode == "packed" else [[i] for i in range(len(docs))]
        keys = (sorted({k for d in docs for k in d.labels}), {k: p.shape[1:] for d in docs for k, p in d.pointers.items()},
                sorted({k for d in docs for k in d.scalars}),
                tuple(f for f in ("block_positions", "types", "langs", "order") if any(getattr(d, f) is not None for d in docs)),
                {k: v.shape[1:] for d in docs for k, v in d.targets.items()})
        assert len(got) == len(bins)
        for row, b in zip(got, bins):
            want = _reference_row([docs[i] for i in b], seq, 1, *keys)
            assert list(row) == list(want)
            for k in want:
                assert row[k].dtype == want[k].dtype and row[k].shape == want[k].shape, (trial, k)
                assert np.array_equal(row[k], want[k], equal_nan=want[k].dtype.kind == "f"), (trial, k)
            n_rows += 1
    assert n_rows > 1000
