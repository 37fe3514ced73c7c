"""The widened Example -> row -> batch contract: every optional field through pack, unpack, collate
(padded and varlen) and the model; the attention rule with an order; Vocab's named specials; typed
columnar view sources (code, text, pair) equal to the record path; Context partner draws and progress."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from codept.attention import visible
from codept.data.collate import collate
from codept.data.example import IGNORE, Example
from codept.data.pack import pack, unpack
from codept.data.sources import read_source, stdlib_files
from codept.data.stream import Mixture, PackedStream, Source
from codept.views import open_views, view_source
from codept.model import transformer as T
from codept.objectives import build
from codept.objectives.render import Vocab


def tlm_like(n1: int, n2: int, base: int = 20) -> Example:
    """A pair in ONE attention segment: types 0/1, langs 1/2, positions reset for side two, a float target."""
    n = n1 + n2
    return Example(
        input_ids=np.arange(base, base + n, dtype=np.int32), prefix=np.ones(n, bool),
        labels={"mlm": np.where(np.arange(n) % 3 == 0, np.arange(n), IGNORE).astype(np.int32)},
        positions=np.r_[np.arange(n1), np.arange(n2)].astype(np.int32),
        types=np.r_[np.zeros(n1), np.ones(n2)].astype(np.int32),
        langs=np.r_[np.full(n1, 1), np.full(n2, 2)].astype(np.int32),
        targets={"value": np.where(np.arange(n) == 2, 0.5, np.nan).astype(np.float32)},
        scalars={"sop": 1})


def plain(n: int, base: int = 100) -> Example:
    return Example(np.arange(base, base + n, dtype=np.int32), np.ones(n, bool), labels={"mlm": np.full(n, IGNORE, np.int32)})


def test_every_field_round_trips_through_pack_and_unpack():
    glm = Example(np.arange(5, dtype=np.int32) + 40, np.array([1, 1, 0, 0, 0], bool),
                  block_positions=np.array([0, 0, 1, 2, 3], np.int32), order=np.array([0, 1, 4, 2, 3], np.int32))
    exs = [tlm_like(4, 3), plain(6), glm]
    rows = pack(exs, seq_len=32, pad_id=0)
    assert len(rows) == 1
    row = rows[0]
    assert {"types", "langs", "block_positions", "order", "targets.value"} <= set(row)
    back = {int(e.input_ids[0]): e for e in unpack(row)}
    for ex in exs:
        got = back[int(ex.input_ids[0])]
        assert np.array_equal(got.input_ids, ex.input_ids)
        for f in ("positions", "types", "langs", "block_positions", "order"):
            want = getattr(ex, f)
            if want is None:  # a document that sets nothing gets the defaults
                want = np.arange(len(ex)) if f in ("positions", "order") else np.zeros(len(ex))
            assert np.array_equal(getattr(got, f), want), f
        if ex.targets:
            assert np.array_equal(got.targets["value"], ex.targets["value"], equal_nan=True)
        else:
            assert np.isnan(got.targets["value"]).all()
    assert np.isnan(row["targets.value"][row["segment_ids"] == 0]).all()


def test_rows_without_new_fields_have_no_new_columns():
    row = pack([plain(5), plain(7)], seq_len=16, pad_id=0)[0]
    assert set(row) == {"input_ids", "segment_ids", "positions", "prefix", "labels.mlm"}


def test_windows_keep_fields_and_start_positions_at_zero():
    ex = tlm_like(10, 10)
    rows = pack([ex], seq_len=8, pad_id=0)  # split into windows of 8
    for r in rows:
        seg = r["segment_ids"] > 0
        assert r["positions"][seg].min() == 0
    got = np.concatenate([r["langs"][r["segment_ids"] > 0] for r in rows])
    assert sorted(got.tolist()) == sorted(ex.langs.tolist())


def test_collate_padded_and_varlen_carry_the_fields():
    rows = pack([tlm_like(4, 3)], 10, 0) + pack([plain(6)], 10, 0)
    b = collate(rows)
    assert b["types"].dtype == torch.long and b["types"].shape == (2, 10)
    assert b["targets.value"].dtype == torch.float32 and torch.isnan(b["targets.value"][1]).all()
    assert b["types"][1].tolist() == [0] * 10 and "order" not in b  # filled with the default; no order set
    glm = Example(np.arange(3, dtype=np.int32), np.zeros(3, bool), order=np.array([2, 0, 1], np.int32))
    c = collate(pack([glm], 10, 0) + pack([plain(6)], 10, 0))
    assert c["order"][0, :3].tolist() == [2, 0, 1] and c["order"][1].tolist() == list(range(10))
    v = collate(rows, varlen=True)
    assert v["langs"].shape == (1, 13) and v["langs"][0, :7].tolist() == [1, 1, 1, 1, 2, 2, 2]
    assert v["targets.value"].shape == (1, 13) and float(v["targets.value"][0, 2]) == 0.5


def test_example_rejects_bad_fields():
    with pytest.raises(ValueError, match="types has shape"):
        Example(np.zeros(3, np.int32), np.ones(3, bool), types=np.zeros(2, np.int32))
    with pytest.raises(ValueError, match="langs holds -1"):
        Example(np.zeros(3, np.int32), np.ones(3, bool), langs=np.array([0, -1, 0]))
    with pytest.raises(ValueError, match="targets"):
        Example(np.zeros(3, np.int32), np.ones(3, bool), targets={"x": np.zeros(3, np.int32)})


def test_attention_rule_with_an_order_matches_hand_computed_masks():
    seg = np.array([1, 1, 1, 1])
    order = np.array([2, 0, 3, 1])  # factorisation order: token 1, 3, 0, 2
    got = visible(seg, np.zeros(4, bool), order)
    want = np.array([[1, 1, 0, 1],   # token 0 (order 2) sees orders 0, 1, 2: tokens 1, 3, itself
                     [0, 1, 0, 0],
                     [1, 1, 1, 1],
                     [0, 1, 0, 1]], bool)
    assert np.array_equal(got, want)
    assert np.array_equal(visible(seg, np.zeros(4, bool), np.arange(4)), visible(seg, np.zeros(4, bool)))
    m = T.visibility(torch.tensor(seg[None]), torch.zeros(1, 4, dtype=torch.bool), torch.tensor(order[None]))
    assert np.array_equal(m[0].numpy(), want)


def test_model_consumes_types_langs_blocks_and_order():
    torch.manual_seed(0)
    cfg = T.tiny(n_langs=3, block_positions=True, attention="reference")
    model = T.Transformer(cfg).eval()
    rows = pack([tlm_like(4, 3)], 12, 0)
    b = collate(rows)
    h = model.encode(b)
    no_langs = model.encode({k: v for k, v in b.items() if k != "langs"})
    assert not torch.allclose(h, no_langs)  # the language table is used
    sdpa = model.encode(b, attention="sdpa")
    assert torch.allclose(h, sdpa, atol=1e-5)
    flat = T.Transformer(T.tiny()).eval()
    with pytest.raises(ValueError, match="n_langs"):
        flat.encode(b)


def test_model_without_optional_columns_is_unchanged():
    torch.manual_seed(0)
    model = T.Transformer(T.tiny()).eval()
    b = collate(pack([plain(9)], 12, 0))
    zero_types = dict(b, types=torch.zeros_like(b["input_ids"]))
    assert torch.equal(model.encode(b), model.encode(zero_types))


def test_hf_export_keeps_types_and_refuses_a_language_table(tmp_path, small_tok):
    transformers = pytest.importorskip("transformers")
    from codept import tokenizer as ctok
    from codept.model import hf

    tok_dir = tmp_path / "tok"
    ctok.save_tokenizer(small_tok, tok_dir, {"vocab_size": small_tok.get_vocab_size()})
    torch.manual_seed(0)
    model = T.Transformer(T.tiny(vocab_size=small_tok.get_vocab_size(), attention="reference")).eval()
    hf.export(model, tok_dir, tmp_path / "out")
    bert = transformers.AutoModel.from_pretrained(tmp_path / "out").eval()
    ids = torch.arange(10, 20)[None]
    types = torch.tensor([[0] * 5 + [1] * 5])
    ours = model(ids, types=types)
    theirs = bert(input_ids=ids, token_type_ids=types).last_hidden_state
    assert torch.allclose(ours, theirs, atol=1e-4)
    with pytest.raises(ValueError, match="language-embedding table"):
        hf.export(T.Transformer(T.tiny(vocab_size=small_tok.get_vocab_size(), n_langs=2)), tok_dir, tmp_path / "x")


def test_vocab_names_every_special(default_tok):
    v = Vocab.from_tokenizer(default_tok)
    assert {r for r, _ in v.roles} == {"cls", "sep", "bos", "eos", "unk", "sop", "eop"}
    assert len(v.sentinel_ids) == 100 and v.sentinel(0) < v.sentinel(99) < v.n_special
    assert v.lang_id("python") < v.n_special and v.lang_id("zh") < v.n_special
    assert all(v.is_special[[v.id_of(r) for r, _ in v.roles]])
    with pytest.raises(ValueError, match="no <lang_klingon>"):
        v.lang_id("klingon")


# -- typed sources -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def code_table(small_tok):
    from codept.structure.grammar import SkipFile
    from codept.structure.view import build_view, views_to_table

    views = []
    for p in stdlib_files()[:12]:
        try:
            views.append(build_view(str(p), "python", read_source(p), small_tok))
        except SkipFile:
            pass
    return views, views_to_table(views)


def test_code_views_read_columnar_equal_the_record_path(code_table):
    """Views read from the table (each field on first access) equal the record path's, field by field."""
    import pickle

    from codept.structure.view import CodeView

    views, table = code_table
    got = open_views(table)
    assert got.kind == "code" and len(got) == len(views)
    for i, v in enumerate(views):
        g, r = got[i], CodeView.from_record(table.slice(i, 1).to_pylist()[0])
        for f in ("path", "lang", "text", "has_error", "names"):
            assert getattr(g, f) == getattr(r, f) == getattr(v, f)
        for f in ("input_ids", "offsets", "leaf", "spans", "idents", "functions", "errors", "dataflow", "summaries"):
            assert np.array_equal(getattr(g, f), getattr(r, f)) and getattr(g, f).shape == getattr(r, f).shape
        assert not g.input_ids.flags.writeable  # views of the Arrow buffers: objectives cannot mutate them
        assert isinstance(g, CodeView) and not hasattr(g, "no_such_field")
        back = pickle.loads(pickle.dumps(got[i]))  # a lazy view travels as the eager one, every field read
        assert type(back) is CodeView and back.names == v.names and np.array_equal(back.dataflow, v.dataflow)
    sel = got.select([3, 1])
    assert sel[0].path == views[3].path and sel[1].path == views[1].path and len(sel) == 2


def test_typed_stream_gives_the_record_path_batches_byte_identical(code_table, small_tok):
    from codept.structure.view import CodeView

    views, table = code_table
    vocab = Vocab.from_tokenizer(small_tok)
    recs = table.to_pylist()

    def stream(src):
        return PackedStream(Mixture([src], [1.0], seed=3), seq_len=128, pad_id=vocab.pad_id, buffer=16)

    for name in ("mlm", "syntax_span", "code_doc"):
        obj = build(name, vocab)
        # the views an objective can use (code_doc.keep: a documented definition); the others never read
        kept = [recs[i] for i in np.flatnonzero(obj.keep(open_views(table))[0])] if hasattr(obj, "keep") else recs
        old = Source(name, len(kept), lambda i, rng: obj(CodeView.from_record(kept[i]), rng), salt=1)
        new = view_source(table, obj, name, salt=1)
        assert new.n == len(kept) < len(recs) if name == "code_doc" else new.n == len(recs)
        a, b = stream(old), stream(new)
        for _ in range(40):
            ra, rb = next(a), next(b)
            assert ra.keys() == rb.keys()
            for k in ra:
                assert np.array_equal(ra[k], rb[k]) and ra[k].dtype == rb[k].dtype, (name, k)


def _text_tables(tok):
    import json as _json
    import textwrap

    from codept.text.build import build_pair_view, build_text_view
    from codept.text.view import pairs_to_table, views_to_table

    docs = [build_text_view(f"doc{i}", "text", d, tok) for i, d in enumerate((_json.__doc__, textwrap.__doc__, np.__doc__))]
    pairs = [build_pair_view("p0", "en", "Open the file for reading", "de", "Öffne die Datei zum Lesen", tok),
             build_pair_view("p1", "en", "Save the current file", "zh", "保存当前文件", tok)]
    return docs, views_to_table(docs), pairs, pairs_to_table(pairs)


def test_text_and_pair_views_are_typed_by_their_schema(small_tok):
    docs, tt, pairs, pt = _text_tables(small_tok)
    t, p = open_views(tt), open_views(pt)
    assert (t.kind, p.kind) == ("text", "pair")
    assert all(t[i] == d for i, d in enumerate(docs))
    assert all(p[i] == q for i, q in enumerate(pairs))
    with pytest.raises(ValueError, match="holds text views, not pair"):
        open_views(tt, kind="pair")


def test_mlm_streams_from_text_views(small_tok):
    _, tt, _, _ = _text_tables(small_tok)
    vocab = Vocab.from_tokenizer(small_tok)
    s = PackedStream(Mixture([view_source(tt, build("mlm", vocab), "mlm")], [1.0], seed=0), 64, vocab.pad_id, buffer=8)
    rows = [next(s) for _ in range(10)]
    masked = sum(int((r["labels.mlm"] != IGNORE).sum()) for r in rows)
    real = sum(int((r["segment_ids"] > 0).sum()) for r in rows)
    assert 0.08 < masked / real < 0.22


def test_partner_draws_and_progress_are_pure_functions_of_the_state(small_tok):
    _, tt, _, _ = _text_tables(small_tok)
    seen = []

    def obj(view, rng, ctx):
        j, other = ctx.partner(rng)
        assert j != ctx.index and other.path == f"doc{j}"
        seen.append((ctx.index, j, round(ctx.progress, 6)))
        n = 4
        return Example(np.asarray(view.input_ids[:n]), np.ones(n, bool), scalars={"partner": j})

    def run():
        seen.clear()
        m = Mixture([view_source(tt, obj, "p")], [1.0], seed=5, horizon=10)
        for step in range(12):
            m.example(step)
        return list(seen)

    first, second = run(), run()
    assert first == second
    assert [p for _, _, p in first] == [min(1.0, s / 10) for s in range(12)]
    assert len({j for _, j, _ in first}) > 1


def test_a_context_stream_resumes_exactly(small_tok):
    """Partner draws and progress come from the stream state: a stream restored mid-buffer yields the
    rows the uninterrupted one yields."""
    _, tt, _, _ = _text_tables(small_tok)
    vocab = Vocab.from_tokenizer(small_tok)

    def nsp_like(view, rng, ctx):
        _, other = ctx.partner(rng)
        a, b = np.asarray(view.input_ids[:6]), np.asarray(other.input_ids[:6])
        ids = np.r_[a, b].astype(np.int32)
        return Example(ids, np.ones(len(ids), bool), types=np.r_[np.zeros(len(a)), np.ones(len(b))].astype(np.int32),
                       scalars={"nsp": int(ctx.progress > 0.5)})

    def stream():
        src = view_source(tt, nsp_like, "nsp")
        return PackedStream(Mixture([src, view_source(tt, build("mlm", vocab), "mlm", salt=2)], [1.0, 1.0], seed=9,
                                    horizon=40), seq_len=32, pad_id=vocab.pad_id, buffer=8)

    whole = stream()
    rows = [next(whole) for _ in range(30)]
    part = stream()
    for _ in range(13):
        next(part)
    again = stream()
    again.load_state_dict(part.state_dict())
    for want in rows[13:]:
        got = next(again)
        assert want.keys() == got.keys() and all(np.array_equal(want[k], got[k]) for k in want)


def _parts_ok(p: np.ndarray) -> bool:
    """The parts rule, directly: starts at 0, every step 0 or 1."""
    v = p.astype(np.float64)
    return len(v) == 0 or (v[0] == 0 and bool(np.all((np.diff(v) == 0) | (np.diff(v) == 1))))


def test_parts_and_scalar_checks_accept_exactly_the_rule():
    """Example's checks of parts (one unsigned max for integer parts) and of per-part scalars (the
    element types first for a list) accept and refuse what the rules say, for every integer width,
    signed or not, floats, and lists of ints, numpy ints, floats and nested sequences."""
    rng = np.random.default_rng(0)
    seen = {True: 0, False: 0}
    for trial in range(3000):
        n = int(rng.integers(0, 9))
        steps = rng.choice([0, 1, 1, 0, -1, 2, 255, -128], size=max(n - 1, 0), p=[.3, .3, .2, .1, .03, .03, .02, .02])
        p = np.concatenate([[rng.choice([0, 0, 0, 1, -1])], steps]).cumsum()[:n] if n else np.zeros(0)
        dtype = rng.choice([np.int8, np.uint8, np.int16, np.int32, np.int64, np.uint32, np.uint64, np.float32])
        with np.errstate(over="ignore"):
            if np.issubdtype(dtype, np.unsignedinteger) and (p < 0).any():
                continue  # a negative part id has no unsigned spelling
            parts = p.astype(dtype)
        if not np.array_equal(parts.astype(np.float64), p.astype(np.float64)):
            continue  # wrapped: not the array the rule is about
        ok = _parts_ok(parts)
        seen[ok] += 1
        ids = np.zeros(n, np.int32)
        if ok:
            e = Example(ids, np.ones(n, bool), parts=parts)
            assert e.n_parts == (int(parts[-1]) + 1 if n else 0)
        else:
            with pytest.raises(ValueError, match="start at 0"):
                Example(ids, np.ones(n, bool), parts=parts)
    assert seen[True] > 500 and seen[False] > 500
    two = np.array([0, 0, 1], np.int32)
    for v, ok in [([4, 5], True), ((4, 5), True), ([np.int64(4), np.int32(5)], True), ([4.0, 5], True),
                  ([True, 5], True), (np.array([4, 5]), True), ([4, 5, 6], "3 values"), ([[4], 5], "shape"),
                  ([np.array([4]), 5], "shape"), ((4, (5,)), "shape"), (7, True), (np.int64(7), True),
                  (np.array([[4, 5]]), "shape"), ([], "0 values")]:
        if ok is True:
            Example(np.zeros(3, np.int32), np.ones(3, bool), scalars={"pair": v}, parts=two)
        else:
            with pytest.raises(ValueError, match=ok):
                Example(np.zeros(3, np.int32), np.ones(3, bool), scalars={"pair": v}, parts=two)
