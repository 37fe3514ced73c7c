"""nsp / sop / tlm and the document strategies: golden arrays, statistics over many seeds, invariants."""

from __future__ import annotations

import ast

import numpy as np
import pytest

from codept.data.example import IGNORE, Example
from codept.data.pack import overlap_tokens, pack, split_long, stride_windows, unpack
from codept.data.sources import stdlib_files
from codept.data.stream import Mixture, PackedStream
from codept.views import view_source
from codept.objectives import build, segments as S
from codept.objectives.render import Vocab
from codept.text.build import build_pair_view, build_text_view
from codept.text.view import pairs_to_table, views_to_table


def _docstring_docs(tok, n: int = 12):
    """Real English documents: the longest module docstrings of the first stdlib files."""
    docs = []
    for p in stdlib_files()[:200]:
        try:
            d = ast.get_docstring(ast.parse(p.read_bytes()))
        except (SyntaxError, ValueError):
            continue
        if d and len(d) > 1500:
            docs.append(build_text_view(str(p), "text", d, tok))
        if len(docs) == n:
            break
    return docs


@pytest.fixture(scope="module")
def docs(small_tok):
    return _docstring_docs(small_tok)


@pytest.fixture(scope="module")
def vocab(small_tok):
    return Vocab.from_tokenizer(small_tok)


def _sides(ex: Example, vocab) -> tuple[np.ndarray, np.ndarray]:
    """(A, B) ids of ``[CLS] A [SEP] B [SEP]`` (after checking the frame and the types)."""
    ids, cls, sep = ex.input_ids, vocab.id_of("cls"), vocab.id_of("sep")
    seps = np.flatnonzero(ids == sep)
    assert ids[0] == cls and len(seps) == 2 and seps[1] == len(ids) - 1
    assert ex.types.tolist() == [0] * (seps[0] + 1) + [1] * (len(ids) - seps[0] - 1)
    assert ex.parts is None and ex.prefix.all()
    return ids[1:seps[0]], ids[seps[0] + 1:-1]


def _find(hay: np.ndarray, needle: np.ndarray) -> int:
    """First index of `needle` in `hay`, -1 if absent."""
    n = len(needle)
    for i in range(len(hay) - n + 1):
        if np.array_equal(hay[i:i + n], needle):
            return i
    return -1


class _Ctx:
    """A Context stand-in over a list of documents (partner = uniform other document)."""

    def __init__(self, docs, index):
        self.docs, self.index = docs, index

    def partner(self, rng):
        j = int(rng.integers(0, len(self.docs) - 1))
        j += j >= self.index
        return j, self.docs[j]


def test_registered_with_heads_and_view_kinds():
    from codept.objectives import HEADS_OF, OBJECTIVES, VIEWS_OF

    assert {"nsp", "sop", "tlm"} <= set(OBJECTIVES)
    assert HEADS_OF["sop"] == ("sop", "mlm") and HEADS_OF["nsp"] == ("nsp", "mlm") and HEADS_OF["tlm"] == ("mlm",)
    assert VIEWS_OF["sop"] == ("text",) and VIEWS_OF["tlm"] == ("pair",)


def test_bad_settings_name_the_value_and_the_rule(vocab):
    with pytest.raises(ValueError, match="negatives='topic'"):
        build("nsp", vocab, negatives="topic")
    with pytest.raises(ValueError, match="max_tokens=4"):
        build("sop", vocab, max_tokens=4)
    with pytest.raises(ValueError, match="short_seq_prob=1.5"):
        build("nsp", vocab, short_seq_prob=1.5)
    with pytest.raises(ValueError, match="tgt_rate=-0.1"):
        build("tlm", vocab, tgt_rate=-0.1)


def test_golden_sop_for_a_fixed_seed(byte_tok):
    """Byte tokens (ASCII: one token per character): the sentences and the swap are readable."""
    v = build_text_view("g", "text", "One a. Two b. Three c. Four d.", byte_tok)
    vocab = Vocab.from_tokenizer(byte_tok)
    ex = build("sop", vocab, mlm_rate=0.0, max_tokens=64, walk=False)(v, np.random.default_rng(0))
    a, b = _sides(ex, vocab)
    text = lambda ids: byte_tok.decode(ids.tolist())  # noqa: E731
    assert (text(a), text(b), ex.scalars) == (" Three c. Four d.", " Two b.", {"sop": 1})  # swapped
    assert ex.input_ids.tolist() == [2, 369, 200, 220, 230, 217, 217, 369, 215, 162, 369, 186, 227, 233, 230, 369,
                                     216, 162, 3, 369, 200, 235, 227, 369, 214, 162, 3]
    nsp = build("nsp", vocab, mlm_rate=0.0, max_tokens=64, negatives="same_document", walk=False)
    got = [(text(x), text(y), e.scalars["nsp"]) for e in (nsp(v, np.random.default_rng(s)) for s in (0, 1, 3))
           for x, y in [_sides(e, vocab)]]
    # seeds 0, 1: same-document negatives a sentence apart (either side); seed 3: the true next
    assert got == [(" Two b.", " Four d.", 1), (" Three c.", "One a.", 1), ("One a.", " Two b.", 0)]


def test_sop_labels_are_half_and_swapped_pairs_are_really_swapped(docs, vocab):
    obj = build("sop", vocab, mlm_rate=0.0, max_tokens=64, walk=False)
    labels = []
    for seed in range(1200):
        d = docs[seed % len(docs)]
        ex = obj(d, np.random.default_rng([seed, 0, seed % len(docs), 1]))
        a, b = _sides(ex, vocab)
        first, second = (b, a) if ex.scalars["sop"] else (a, b)  # the document order
        ia, ib = _find(d.input_ids, first), _find(d.input_ids, second)
        assert ia >= 0 and ib >= 0  # both from the document
        if len(first) + len(second) < 64 - 3:  # untruncated: B follows A directly in the document
            assert _find(d.input_ids, np.r_[first, second]) >= 0
        labels.append(ex.scalars["sop"])
    assert abs(np.mean(labels) - 0.5) < 0.02 * 2.5  # 1200 draws: sd 0.0144


def test_segments_are_whole_sentences_up_to_the_target(docs):
    d = docs[0]
    s = np.asarray(d.sentences)
    for seed in range(200):
        rng = np.random.default_rng(seed)
        target = S.target_length(125, 0.1, rng)
        first, end = S.chunk(s, int(rng.integers(0, len(s) - 1)), target)
        got = int(s[end - 1, 1] - s[first, 0])
        assert end - first >= 2
        assert got >= target or end == len(s)  # reached the target, or the document ended
        assert end - first == 2 or int(s[end - 2, 1] - s[first, 0]) < target  # no sentence more than needed
    lengths = [S.target_length(125, 0.1, np.random.default_rng(i)) for i in range(4000)]
    assert abs(np.mean(np.array(lengths) < 125) - 0.1) < 0.015  # the short-sequence probability


def test_nsp_random_negatives_come_from_another_document(docs, vocab):
    obj = build("nsp", vocab, mlm_rate=0.0, max_tokens=64, walk=False)
    labels, other = [], 0
    for seed in range(1000):
        i = seed % len(docs)
        ex = obj(docs[i], np.random.default_rng([seed, 0, i, 1]), _Ctx(docs, i))
        a, b = _sides(ex, vocab)
        labels.append(ex.scalars["nsp"])
        here = _find(docs[i].input_ids, b) >= 0
        if ex.scalars["nsp"] == 0:
            assert _find(docs[i].input_ids, np.r_[a, b]) >= 0 or len(a) + len(b) == 61  # A then B in the document
        else:
            other += any(_find(d.input_ids, b) >= 0 for j, d in enumerate(docs) if j != i) and not here
    n_neg = sum(labels)
    assert abs(np.mean(labels) - 0.5) < 0.04
    assert other > 0.97 * n_neg


def test_nsp_same_document_negatives_are_from_the_document_and_not_adjacent(docs, vocab):
    from codept.objectives.nsp import same_document_negative

    for seed in range(2000):  # the sentence arithmetic, on real sentence ranges
        d = docs[seed % len(docs)]
        sents, rng = np.asarray(d.sentences), np.random.default_rng(seed)
        first, end = S.chunk(sents, int(rng.integers(0, len(sents) - 1)), int(rng.integers(2, 126)))
        (af, ae), (b0, b1) = same_document_negative(sents, (first, S.split_chunk(first, end, rng)), 125, rng)
        sb0, sb1 = int(np.flatnonzero(sents[:, 0] == b0)[0]), int(np.flatnonzero(sents[:, 1] == b1)[0]) + 1
        assert sb0 >= ae + 1 or sb1 <= af - 1, (af, ae, sb0, sb1)  # a whole sentence between A and B
    obj = build("nsp", vocab, mlm_rate=0.0, max_tokens=64, negatives="same_document", walk=False)
    labels = []
    for seed in range(1000):  # end to end: both segments are text of this document
        i = seed % len(docs)
        ex = obj(docs[i], np.random.default_rng([seed, 0, i, 1]))
        labels.append(ex.scalars["nsp"])
        a, b = _sides(ex, vocab)
        assert _find(docs[i].input_ids, a) >= 0 and _find(docs[i].input_ids, b) >= 0
    assert abs(np.mean(labels) - 0.5) < 0.04


def test_walk_pairs_cover_the_document_in_order_and_reuse_unused_sentences(docs, vocab):
    """walk (the default, BERT's loop over a document; one Example per pair here): SOP's pairs tile the document's sentences in order,
    each sentence once (but a lone last one); NSP's positives continue where the last chunk ended,
    a random-next chunk gives its B sentences back (the next A starts at them)."""
    sop = build("sop", vocab, mlm_rate=0.0, p_swap=0.0, short_seq_prob=0.0, max_tokens=64, group_tokens=1)
    for i, d in enumerate(docs):
        exs = sop(d, np.random.default_rng([i, 0, i, 1]))
        sents, ids = np.asarray(d.sentences), np.asarray(d.input_ids)
        chunks, start = [], 0  # the chunks the walk must take: the budget is fixed (short_seq_prob=0)
        while len(sents) - start >= 2:
            chunks.append(S.chunk(sents, start, 64 - 3))
            start = chunks[-1][1]
        assert isinstance(exs, list) and len(exs) == len(chunks) >= 2
        assert len(sents) - chunks[-1][1] <= 1  # all sentences used but a lone last one
        for ex, (first, end) in zip(exs, chunks):
            a, b = _sides(ex, vocab)
            span = ids[sents[first, 0]:sents[end - 1, 1]]
            assert _find(span, a) >= 0 and _find(span, b) >= 0  # A and B from this chunk (truncated ends)
            if len(span) <= 64 - 3:
                assert np.array_equal(np.r_[a, b], span)  # untruncated: the chunk itself, in order
    nsp = build("nsp", vocab, mlm_rate=0.0, short_seq_prob=0.0, max_tokens=64, group_tokens=1)
    n_pairs = {"walk": 0, "one": 0}
    for i, d in enumerate(docs):
        exs = nsp(d, np.random.default_rng([i, 0, i, 1]), _Ctx(docs, i))
        labels = [e.scalars["nsp"] for e in exs]
        assert 0 in labels and len(exs) >= 2
        n_pairs["walk"] += len(exs)
    one = build("nsp", vocab, mlm_rate=0.0, short_seq_prob=0.0, max_tokens=64, walk=False)
    assert isinstance(one(docs[0], np.random.default_rng(0), _Ctx(docs, 0)), Example)
    assert n_pairs["walk"] > 3 * len(docs)


def test_short_documents_give_no_pair(byte_tok):
    vocab = Vocab.from_tokenizer(byte_tok)
    one = build_text_view("one", "text", "Only one sentence here", byte_tok)
    two = build_text_view("two", "text", "First one. Second one.", byte_tok)
    assert build("sop", vocab)(one, np.random.default_rng(0)) is None
    assert build("nsp", vocab, negatives="same_document")(two, np.random.default_rng(0)) is None
    assert build("sop", vocab)(two, np.random.default_rng(0)) is not None


def test_pair_mlm_never_masks_the_frame(docs, vocab):
    obj = build("sop", vocab, mlm_rate=0.15, max_tokens=64, walk=False)
    sel = tot = 0
    for seed in range(300):
        ex = obj(docs[seed % len(docs)], np.random.default_rng(seed))
        lab = ex.labels["mlm"]
        frame = np.isin(np.arange(len(lab)), [0, len(lab) - 1]) | (ex.input_ids == vocab.id_of("sep"))
        assert (lab[frame] == IGNORE).all() and ex.input_ids[0] == vocab.id_of("cls")
        sel += int((lab != IGNORE).sum())
        tot += len(lab) - 3
    assert abs(sel / tot - 0.15) < 0.01


@pytest.fixture(scope="module")
def pairs(small_tok):
    texts = [("Open the file for reading", "de", "Öffne die Datei zum Lesen"),
             ("Save the current file to disk", "zh", "将当前文件保存到磁盘"),
             ("Could not read the configuration file", "de", "Die Konfigurationsdatei konnte nicht gelesen werden")]
    return [build_pair_view(f"p{i}", "text", s, lang, t, small_tok) for i, (s, lang, t) in enumerate(texts)]


def test_tlm_masks_both_sides_resets_positions_and_sets_languages(pairs, vocab):
    obj = build("tlm", vocab, src_rate=0.3, tgt_rate=0.2, p_swap=0.0)
    sep = vocab.id_of("sep")
    per_side = np.zeros(2)
    n_side = np.zeros(2)
    for seed in range(600):
        p = pairs[seed % len(pairs)]
        ex = obj(p, np.random.default_rng(seed))
        n1 = len(p.src.input_ids) + 1
        assert ex.input_ids[n1 - 1] == sep and ex.input_ids[-1] == sep and ex.parts is None
        assert ex.positions.tolist() == list(range(n1)) + list(range(len(ex) - n1))  # reset for the second side
        table = {"text": 1, "de": 2, "zh": 3}
        assert ex.langs.tolist() == [1] * n1 + [table[p.tgt.lang]] * (len(ex) - n1)
        lab = ex.labels["mlm"]
        sel = lab != IGNORE
        assert not sel[n1 - 1] and not sel[-1]
        np.testing.assert_array_equal(lab[sel], np.r_[p.src.input_ids, [sep], p.tgt.input_ids, [sep]][sel])
        per_side += [sel[:n1].sum(), sel[n1:].sum()]
        n_side += [n1 - 1, len(ex) - n1 - 1]
    rates = per_side / n_side
    assert abs(rates[0] - 0.3) < 0.02 and abs(rates[1] - 0.2) < 0.02, rates


def test_tlm_swap_and_the_monolingual_control(pairs, vocab):
    swapped = build("tlm", vocab, p_swap=1.0)(pairs[1], np.random.default_rng(0))
    assert swapped.langs[0] == 3 and swapped.langs[-1] == 1  # zh first
    sep_ = build("tlm", vocab, joint=False)(pairs[0], np.random.default_rng(0))
    assert sep_.n_parts == 2  # each side its own attention segment
    rows = pack([sep_], 64, vocab.pad_id)
    assert rows[0]["segment_ids"].max() == 2
    with pytest.raises(ValueError, match="language 'de' is not in objective.tlm.languages=text,zh"):
        build("tlm", vocab, languages="text,zh")(pairs[0], np.random.default_rng(0))


def test_determinism_by_seed_epoch_index(docs, pairs, small_tok, vocab):
    tt, pt = views_to_table(docs), pairs_to_table(pairs)
    for name, table in (("sop", tt), ("nsp", tt), ("tlm", pt)):
        def rows(seed):
            s = PackedStream(Mixture([view_source(table, build(name, vocab), name)], [1.0], seed=seed), 128,
                             vocab.pad_id, buffer=8)
            return [next(s) for _ in range(6)]
        a, b, c = rows(1), rows(1), rows(2)
        assert all(np.array_equal(x[k], y[k]) for x, y in zip(a, b) for k in x), name
        assert not all(np.array_equal(x["input_ids"], y["input_ids"]) for x, y in zip(a, c)), name


def test_stride_windows_lose_no_token_and_train_each_target_once():
    n, L, stride = 23, 8, 5
    ex = Example(np.arange(100, 100 + n, dtype=np.int32), np.ones(n, bool), labels={"mlm": np.arange(n, dtype=np.int32)})
    ws = stride_windows(ex, L, stride)
    assert [len(w) for w in ws] == [8, 8, 8, 8] and ws[-1].input_ids[-1] == 100 + n - 1  # the end is covered
    seen = np.concatenate([w.input_ids for w in ws])
    assert set(seen.tolist()) == set(range(100, 100 + n))  # no token lost
    labelled = np.concatenate([w.labels["mlm"][w.labels["mlm"] != IGNORE] for w in ws])
    assert sorted(labelled.tolist()) == list(range(n))  # every target exactly once
    assert overlap_tokens(n, L, stride) == len(seen) - n == 9
    assert [len(w) for w in split_long([ex], L, "truncate")] == [8]
    with pytest.raises(ValueError, match="stride:S"):
        split_long([ex], L, "stride:0")


def test_one_document_per_row():
    exs = [Example(np.full(k, 7, np.int32), np.ones(k, bool)) for k in (3, 4, 5)]
    assert len(pack(exs, 16, 0)) == 1
    rows = pack(exs, 16, 0, rows="document")
    assert len(rows) == 3 and all(r["segment_ids"].max() == 1 for r in rows)
    assert [len(d) for r in rows for d in unpack(r)] == [3, 4, 5]  # input order, one per row


def test_render_pairs_equals_render_pair_and_keeps_each_pair_a_part():
    """segments.render_pairs (a walk's pairs at once, grouped): without MLM each pair's part equals
    render_pair's Example (tokens, types, label); groups never pass `group` tokens (a longer pair
    alone); with MLM every pair gets exactly its select.budget of masked candidates, never a special
    token."""
    from codept.objectives import segments as S
    from codept.objectives.render import Vocab
    from codept.tokenizer import default_tokenizer_dir, load_tokenizer

    vocab = Vocab.from_tokenizer(load_tokenizer(default_tokenizer_dir()))
    g = np.random.default_rng(0)
    pairs = [(g.integers(300, 900, int(n)).astype(np.int32), g.integers(300, 900, int(m)).astype(np.int32), int(y))
             for n, m, y in zip(g.integers(1, 60, 40), g.integers(1, 60, 40), g.integers(0, 2, 40))]
    for group in (1, 64, 130):
        got = S.render_pairs(pairs, "sop", vocab, np.random.default_rng(1), group=group)
        parts = []
        for ex in got:
            assert len(ex) <= group or ex.n_parts == 1
            b = ex.part_bounds().tolist()
            labels = ex.scalar_of_parts("sop")
            parts += [(ex.input_ids[x:y], ex.types[x:y], lab) for x, y, lab in zip(b, b[1:], labels)]
        assert len(parts) == len(pairs)
        for (ids, types, lab), (a, b_, y) in zip(parts, pairs):
            ref = S.render_pair(a, b_, y, "sop", vocab, np.random.default_rng(2))
            assert (ids == ref.input_ids).all() and (types == ref.types).all() and lab == ref.scalars["sop"]
    got = S.render_pairs(pairs, "nsp", vocab, np.random.default_rng(3), mlm_rate=0.15, group=1)
    for ex, (a, b_, _) in zip(got, pairs):
        n_cand = len(a) + len(b_)
        n = int((ex.labels["mlm"] != -100).sum())
        assert n in (int(0.15 * n_cand), int(0.15 * n_cand) + 1)
        assert not vocab.is_special[ex.labels["mlm"][ex.labels["mlm"] != -100]].any()
        assert (ex.labels["mlm"][[0, len(a) + 1, len(ex) - 1]] == -100).all()  # [CLS] and the [SEP]s
