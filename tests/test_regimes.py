"""Issue 15's regimes: ar (+ scheduled sampling), unilm, glm, plm (two streams), electra; masks against
hand-computed ones, the staged forwards, reference vs efficient attention, the causal export."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from codept.attention import visible
from codept.data.collate import collate
from codept.data.example import IGNORE
from codept.data.pack import pack
from codept.data.sources import stdlib_files
from codept.model import regimes
from codept.model import transformer as T
from codept.model.pretrainer import Pretrainer, build_head, target_counts
from codept.objectives import HEADS_OF, LOSS_WEIGHTS_OF, OBJECTIVES, VIEWS_OF, build
from codept.objectives import ar as AR
from codept.objectives import glm as GLM
from codept.objectives.render import Vocab

REGIMES = ("ar", "unilm", "glm", "plm", "electra")
X, _ = True, False  # readable mask literals


@pytest.fixture(scope="module")
def vocab(default_tok):
    return Vocab.from_tokenizer(default_tok)


@pytest.fixture(scope="module")
def views(default_tok):
    """Real documents: the first 2000 characters of 10 stdlib modules."""
    files = [f for f in stdlib_files() if f.stat().st_size > 3000][:10]
    return [SimpleNamespace(input_ids=np.array(default_tok.encode(f.read_text(errors="replace")[:2000]).ids, np.int32))
            for f in files]


def doc(ids):
    return SimpleNamespace(input_ids=np.asarray(ids, dtype=np.int32))


def batch_of(name, vocab, views, seq=128, **cfg):
    if name in ("glm", "plm"):
        cfg.setdefault("max_tokens", seq)  # rendered examples fit a row: packing never splits them
    obj = build(name, vocab, **cfg)
    exs = [obj(v, np.random.default_rng([0, 0, i])) for i, v in enumerate(views)]
    exs = [x for e in exs for x in (e if isinstance(e, list) else [e])]  # glm: every window of a read
    return collate(pack(exs, seq, vocab.pad_id)[:4])


def pretrainer(name, vocab, seed=0, **model):
    torch.manual_seed(seed)
    m = T.Transformer(T.tiny(vocab_size=vocab.size, block_positions=name == "glm", **model))
    return Pretrainer(m, {h: build_head(h, m) for h in HEADS_OF[name]})


def test_registries_hold_every_regime():
    for name in REGIMES:
        assert name in OBJECTIVES and name in HEADS_OF and name in VIEWS_OF
    assert LOSS_WEIGHTS_OF["electra"] == {"rtd": 50.0}


# ------------------------------------------------------------------------------------------------
# masks, by hand


def test_unilm_masks_by_hand(vocab):
    """Each mode's mask on a 5-token document, compared with the rule written out by hand."""
    from codept.objectives.unilm import Config, prefix_of

    rng = np.random.default_rng(0)
    seg = np.ones(5, int)
    bi = visible(seg, prefix_of("bidirectional", 5, rng, Config()))
    l2r = visible(seg, prefix_of("left_to_right", 5, rng, Config()))
    s2s = visible(seg, prefix_of("seq2seq", 5, rng, Config(src_min=0.4, src_max=0.4)))  # source = 2 tokens
    assert bi.all()
    assert (l2r == np.array([[X, _, _, _, _], [X, X, _, _, _], [X, X, X, _, _], [X, X, X, X, _], [X, X, X, X, X]])).all()
    assert (s2s == np.array([[X, X, _, _, _], [X, X, _, _, _], [X, X, X, _, _], [X, X, X, X, _], [X, X, X, X, X]])).all()
    # over many documents the three modes come in about a third each
    obj = build("unilm", vocab)
    modes = [tuple(obj(doc(np.arange(200, 240)), np.random.default_rng([1, 0, i])).prefix[[0, -1]]) for i in range(600)]
    share = {m: modes.count(m) / len(modes) for m in set(modes)}  # (T,T) bidi, (F,F) l2r, (T,F) seq2seq
    assert set(share) == {(True, True), (False, False), (True, False)}
    assert all(abs(s - 1 / 3) < 0.07 for s in share.values()), share


def test_glm_blanks_by_hand(vocab):
    """Spans [1,3) and [4,5) of a 6-token document, B in the order (span 1, span 0)."""
    ids = np.array([100, 101, 102, 103, 104, 105])
    ex = GLM.render_blanks(ids, np.array([[1, 3], [4, 5]]), np.array([1, 0]), vocab)
    m, sop, eop = vocab.mask_id, vocab.id_of("sop"), vocab.id_of("eop")
    #                   part A: 100 [M] 103 [M] 105 | part B: <sop> 104 | <sop> 101 102
    assert ex.input_ids.tolist() == [100, m, 103, m, 105, sop, 104, sop, 101, 102]
    assert ex.labels["glm"].tolist() == [IGNORE] * 5 + [104, eop, 101, 102, eop]
    assert ex.positions.tolist() == [0, 1, 2, 3, 4, 3, 3, 1, 1, 1]
    assert ex.block_positions.tolist() == [0, 0, 0, 0, 0, 1, 2, 1, 2, 3]
    assert ex.prefix.tolist() == [X] * 5 + [_] * 5
    want = np.zeros((10, 10), bool)
    want[:, :5] = True  # every token sees all of part A
    want[5:, 5:] = np.tril(np.ones((5, 5), bool))  # part B: causal
    assert (visible(np.ones(10, int), ex.prefix) == want).all()


@pytest.mark.parametrize("all_windows", [True, False])
def test_glm_span_statistics(vocab, views, all_windows):
    obj = build("glm", vocab, all_windows=all_windows)
    masked, total, lengths = 0, 0, []
    got = [obj(views[i % len(views)], np.random.default_rng([2, 0, i])) for i in range(200 if not all_windows else 20)]
    for ex in [x for e in got for x in (e if isinstance(e, list) else [e])]:
        n_a = int(ex.prefix.sum())
        m = int((ex.input_ids[:n_a] == vocab.mask_id).sum())
        span_tok = len(ex) - n_a - m  # part B without its <sop>s
        masked, total = masked + span_tok, total + n_a - m + span_tok
        lengths += np.diff(np.flatnonzero(ex.input_ids[n_a:] == vocab.id_of("sop")).tolist() + [len(ex) - n_a]).tolist()
        assert len(ex) <= 256 and (ex.labels["glm"][n_a:] != IGNORE).all()
    assert abs(masked / total - 0.15) < 0.01
    assert 2.6 < np.mean(lengths) - 1 < 3.4  # Poisson(3), >= 1, the last span cut to the budget


def test_plm_masks_by_hand_and_partial_prediction(vocab):
    order = torch.tensor([[2, 0, 3, 1]])  # factorisation order: token 1, 3, 0, 2
    seg, pre = torch.ones(1, 4, dtype=torch.long), torch.zeros(1, 4, dtype=torch.bool)
    content = T.visibility(seg, pre, order)[0]
    query = T.visibility(seg, pre, order, strict=True)[0]
    assert content.tolist() == [[X, X, _, X], [_, X, _, _], [X, X, X, X], [_, X, _, X]]
    # strict: a query never sees itself; token 1 comes first, sees nothing -> its own diagonal only
    assert query.tolist() == [[_, X, _, X], [_, X, _, _], [X, X, _, X], [_, X, _, _]]
    assert (content.numpy() == visible(seg.numpy(), pre.numpy(), order.numpy())[0]).all()
    ex = build("plm", vocab, k=4)(doc(np.arange(300, 340)), np.random.default_rng(0))
    targets = np.flatnonzero(ex.labels["plm"] != IGNORE)
    assert sorted(ex.order.tolist()) == list(range(40))
    assert sorted(ex.order[targets].tolist()) == list(range(30, 40))  # the last 1/K of the order
    assert (ex.input_ids == np.arange(300, 340)).all()  # the input is not corrupted


def test_plm_query_stream_never_reads_its_own_token(vocab, views):
    """Changing the token at a target leaves that target's query state alone, changes its content state."""
    net = pretrainer("plm", vocab)
    b = batch_of("plm", vocab, views)
    q = net.heads["plm"].query
    h, g = net.model.two_stream(b, q)
    r, t = [int(x[0]) for x in (b["labels.plm"] != IGNORE).nonzero(as_tuple=True)]
    b2 = {**b, "input_ids": b["input_ids"].clone()}
    b2["input_ids"][r, t] = (b["input_ids"][r, t] + 1) % vocab.size
    h2, g2 = net.model.two_stream(b2, q)
    assert torch.equal(g[r, t], g2[r, t])
    assert not torch.allclose(h[r, t], h2[r, t])
    assert torch.equal(h, net.model.encode(b))  # the content stream IS the ordinary forward


def test_plm_refuses_a_target_without_context(vocab):
    net = pretrainer("plm", vocab)
    ex = build("plm", vocab, k=1)(doc(np.arange(300, 310)), np.random.default_rng(0))
    b = collate(pack([ex], 5, vocab.pad_id))  # packing splits the order: a window's first token is a target
    with pytest.raises(ValueError, match="max_tokens <= seq_len"):
        net(b)


# ------------------------------------------------------------------------------------------------
# reference vs efficient attention, every regime


@pytest.mark.parametrize("name", REGIMES)
def test_reference_and_sdpa_agree_and_counts_match(name, vocab, views):
    b = batch_of(name, vocab, views)
    outs = {}
    for path in ("reference", "sdpa"):
        net = pretrainer(name, vocab, attention=path)
        torch.manual_seed(1)  # ELECTRA samples: the same draws on both paths
        outs[path] = net(b)
    counts = target_counts(b, net.heads)
    for h, (loss, n) in outs["sdpa"].items():
        ref, n_ref = outs["reference"][h]
        assert int(n) == int(n_ref) == counts[h] > 0
        assert torch.allclose(loss, ref, rtol=1e-4, atol=1e-4), (h, float(loss), float(ref))


@pytest.mark.parametrize("name", REGIMES)
def test_flex_agrees_with_reference(name, vocab, views):
    b = batch_of(name, vocab, views)
    with torch.no_grad():  # FlexAttention has no CPU backward
        ref_net, flex_net = pretrainer(name, vocab, attention="reference"), pretrainer(name, vocab, attention="flex")
        torch.manual_seed(1)
        ref = ref_net(b)
        torch.manual_seed(1)
        flex = flex_net(b)
    for h in ref:
        assert torch.allclose(ref[h][0], flex[h][0], rtol=1e-4, atol=1e-4)


def test_causal_lm_count_equals_the_shifted_targets(vocab, views):
    """Defect: the "lm" head scores one target fewer per document than it has labels, and
    target_counts counted the labels, so train_step's count check failed on every ar step."""
    b = batch_of("ar", vocab, views)
    net = pretrainer("ar", vocab)
    _, n = net(b)["lm"]
    assert target_counts(b, net.heads)["lm"] == int(n) == int((b["labels.lm"] != IGNORE).sum()) - int(
        b["segment_ids"].amax(1).sum())


# ------------------------------------------------------------------------------------------------
# scheduled sampling


def test_schedules():
    for s in ("linear", "exponential", "inverse_sigmoid"):
        eps = [AR.teacher_forcing(s, p) for p in np.linspace(0, 1, 11)]
        assert eps[0] > 0.99 and eps[-1] < 0.06 and all(a >= b for a, b in zip(eps, eps[1:])), (s, eps)
    assert AR.teacher_forcing("linear", 0.3) == pytest.approx(0.7)
    assert AR.teacher_forcing("exponential", 0.5, 0.04) == pytest.approx(0.2)
    with pytest.raises(ValueError, match="schedule='cosine'"):
        AR.Config(schedule="cosine")


def test_scheduled_sampling_marks_follow_progress(vocab, views):
    obj = build("ar", vocab, schedule="linear", max_share=0.5)
    share = {}
    for p in (0.0, 0.5, 1.0):
        ctx = SimpleNamespace(progress=p)
        marks = [obj(v, np.random.default_rng([3, 0, i]), ctx).labels["sample"] for i, v in enumerate(views)]
        share[p] = float(np.mean(np.concatenate(marks) == 1))
    assert share[0.0] == 0 and abs(share[0.5] - 0.25) < 0.03 and abs(share[1.0] - 0.5) < 0.03
    a = obj(views[0], np.random.default_rng([3, 0, 0]), SimpleNamespace(progress=0.7)).labels["sample"]
    b = obj(views[0], np.random.default_rng([3, 0, 0]), SimpleNamespace(progress=0.7)).labels["sample"]
    assert (a == b).all()  # a function of (seed, epoch, index) and progress: resumes exactly


def test_scheduled_sampling_feeds_the_models_own_predictions(vocab, views):
    obj = build("ar", vocab, schedule="linear", max_share=1.0)
    exs = [obj(v, np.random.default_rng([4, 0, i]), SimpleNamespace(progress=1.0)) for i, v in enumerate(views)]
    b = collate(pack(exs, 128, vocab.pad_id)[:4])
    net = pretrainer("ar", vocab)
    new = regimes.scheduled_sampling(net.model, net.heads["lm"], b)
    with torch.no_grad():
        pred = net.heads["lm"].logits(net.model.encode(b)).argmax(-1)  # (B, T) prediction of token t+1
    seg = b["segment_ids"]
    marked = (b["labels.sample"][:, 1:] != IGNORE) & (seg[:, 1:] == seg[:, :-1]) & (seg[:, 1:] != 0)
    assert marked.sum() > 300
    assert torch.equal(new["input_ids"][:, 1:][marked], pred[:, :-1][marked])
    assert torch.equal(new["input_ids"][:, 1:][~marked], b["input_ids"][:, 1:][~marked])
    assert torch.equal(new["labels.lm"], b["labels.lm"])  # the loss stays on the true tokens
    loss, n = net(b)["lm"]  # the second pass; gradient flows, the first pass had none
    loss.backward()
    assert net.model.embed.tokens.weight.grad is not None
    teacher, _ = net({k: v for k, v in b.items() if k != "labels.sample"})["lm"]
    assert float(loss) != float(teacher)


# ------------------------------------------------------------------------------------------------
# ELECTRA


def test_electra_generator_sample_discriminator(vocab, views):
    b = batch_of("electra", vocab, views)
    net = pretrainer("electra", vocab, hidden=64, heads=4, intermediate=128)
    gen = net.heads["gen"]
    assert gen.decoder_weight is net.model.embed.tokens.weight  # token table shared
    assert gen.config.hidden == 16 and gen.config.heads == 1  # width 0.25 at the same head size
    torch.manual_seed(0)
    new, (loss, n) = gen.stage(net.model, b, False)
    masked = b["labels.gen"] != IGNORE
    assert int(n) == int(masked.sum()) > 0
    assert torch.equal(new["input_ids"][~masked], b["input_ids"][~masked])
    replaced = new["input_ids"] != torch.where(masked, b["labels.gen"], b["input_ids"])
    rtd = new["labels.rtd"]
    assert torch.equal(rtd[b["labels.rtd"] != IGNORE], replaced[b["labels.rtd"] != IGNORE].long())
    assert (rtd[masked & ~replaced] == 0).all()  # a sample equal to the original counts as original
    # no gradient through the sampling: the RTD loss alone reaches no generator parameter
    torch.manual_seed(0)
    out = net(b)
    out["rtd"][0].backward()
    assert all(p.grad is None or not p.grad.any() for name, p in gen.named_parameters() if name != "decoder_weight")
    assert net.model.blocks[0].attn.q.weight.grad.abs().sum() > 0


def test_electra_validation_draws_are_fixed(vocab, views):
    b = batch_of("electra", vocab, views)
    net = pretrainer("electra", vocab).eval()
    with torch.no_grad():
        first, second = net(b, metrics=True), net(b, metrics=True)
    assert all(torch.equal(first[h].loss_sum, second[h].loss_sum) for h in first)


# ------------------------------------------------------------------------------------------------
# the causal export generates what codept generates


def test_causal_export_generates_codepts_greedy_tokens(vocab, views, tmp_path):
    from transformers import AutoModel, AutoModelForCausalLM

    from codept.model.hf import export
    from codept.tokenizer import default_tokenizer_dir

    net = pretrainer("ar", vocab, causal=True)
    b = batch_of("ar", vocab, views)
    opt = torch.optim.AdamW(net.parameters(), lr=3e-3)
    for _ in range(30):  # a little training, so that greedy decoding is not a constant token
        loss, n = net(b)["lm"]
        opt.zero_grad()
        (loss / n).backward()
        opt.step()
    net.eval()
    export(net.model, default_tokenizer_dir(), tmp_path, lm_head=net.heads["lm"])
    hf = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    assert type(hf).__name__ == "BertLMHeadModel" and hf.config.is_decoder
    prompts = torch.stack([torch.from_numpy(v.input_ids[:16]).long() for v in views[:3]])
    ours = regimes.greedy(net.model, net.heads["lm"], prompts, 24)
    theirs = hf.generate(prompts, attention_mask=torch.ones_like(prompts), max_new_tokens=24, do_sample=False,
                         pad_token_id=vocab.pad_id)
    assert torch.equal(ours, theirs)
    assert len(set(ours[:, 16:].flatten().tolist())) > 3
    assert AutoModel.from_pretrained(tmp_path).config.is_decoder
    with pytest.raises(ValueError, match="causal LMHead"):
        export(net.model, default_tokenizer_dir(), tmp_path / "x", lm_head=build_head("mlm", net.model))


def test_electra_exports_discriminator_and_generator(vocab, views, tmp_path):
    """The discriminator as a BERT encoder (AutoModel), the generator as ElectraForMaskedLM, both
    with the codept model's outputs."""
    from transformers import AutoModel, AutoModelForMaskedLM

    from codept.model.hf import export, export_generator
    from codept.tokenizer import default_tokenizer_dir

    net = pretrainer("electra", vocab, hidden=64, heads=4, intermediate=128)
    b = batch_of("electra", vocab, views)
    opt = torch.optim.AdamW(net.parameters(), lr=3e-3)
    for _ in range(3):  # trained weights, not the init
        out = net(b)
        opt.zero_grad()
        sum(loss / n for loss, n in out.values()).backward()
        opt.step()
    net.eval()
    export(net.model, default_tokenizer_dir(), tmp_path / "disc")
    export_generator(net.model, net.heads["gen"], default_tokenizer_dir(), tmp_path / "gen")
    ids = torch.from_numpy(views[0].input_ids[:40]).long()[None]
    one = {"input_ids": ids, "segment_ids": torch.ones_like(ids), "positions": torch.arange(40)[None],
           "prefix": torch.ones_like(ids, dtype=torch.bool)}
    with torch.no_grad():
        disc = AutoModel.from_pretrained(tmp_path / "disc").eval()(ids).last_hidden_state
        gen = AutoModelForMaskedLM.from_pretrained(tmp_path / "gen").eval()
        assert type(gen).__name__ == "ElectraForMaskedLM"
        assert torch.allclose(disc, net.model.encode(one), atol=1e-5)
        ours = net.heads["gen"].logits(net.heads["gen"].hidden(net.model, one))
        assert torch.allclose(gen(ids).logits, ours, atol=1e-4)


def test_recipe_stream_progress_moves_over_the_run(vocab, views):
    """Defect: the recipe's Mixture had no horizon, so ctx.progress was 0 for the whole run and a
    scheduled-sampling (or any) schedule never left its start. loop.set_horizon gives it one."""
    from codept.data.stream import Mixture, PackedStream, Source
    from codept.train.loop import set_horizon

    obj = build("ar", vocab, schedule="linear", max_share=1.0)
    make = lambda i, rng, ctx: obj(views[i], rng, ctx)  # noqa: E731
    stream = PackedStream(Mixture([Source("ar", len(views), make, context=True)], [1.0], seed=0), 128,
                          vocab.pad_id, buffer=8)
    rows_of_run = 60
    assert set_horizon(stream, rows_of_run) > 0
    rows = [next(stream) for _ in range(rows_of_run)]
    share = [float(np.mean(r["labels.sample"][r["segment_ids"] > 0] == 1)) for r in rows]
    assert np.mean(share[:10]) < 0.25 and np.mean(share[-10:]) > 0.6, (share[:10], share[-10:])
    assert set_horizon(stream, 10) == stream.mixture.horizon  # kept once set (a resume computes the same)


def test_recipe_refuses_glm_and_plm_examples_longer_than_a_row():
    """Defect: a GLM example longer than seq_len was split by packing, so part B trained without
    part A, silently. The recipe's configure now refuses max_tokens > seq_len for glm and plm."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "recipes"))
    from pretrain_code import configure

    from codept.train.settings import ConfigError

    for name in ("glm", "plm"):
        with pytest.raises(ConfigError, match=rf"objective.{name}.max_tokens=256 > seq_len=128"):
            configure("debug_cpu", [f"data.mixture={name}:1", "seq_len=128"])
        configure("debug_cpu", [f"data.mixture={name}:1", "seq_len=128", f"objective.{name}.max_tokens=128"])
    settings, _ = configure("debug_cpu", ["data.mixture=glm:1,electra:1"])
    assert settings.sections["model"].block_positions and settings.loss == {"rtd": 50.0}


@pytest.mark.slow
def test_plm_leaves_the_content_stream_telling_tokens_apart(default_tok, vocab):
    """plm trains only the query stream's output; the content stream (what the probes, the export and
    every other head read) shares its weights. With g0 LayerNormed like a token's embedding, the shared
    attention grew until its nearly constant context read matched the residual, and every final
    content state became alike (here: spread 0.14 after 60 steps; 0.61 with the raw g0 of
    transformer.Embeddings; debug_cpu 100 steps in docs/ablations.md). Spread = per-dimension std of
    the final states over the tokens of unseen documents, averaged (benchmarks/state_spread.py)."""
    from codept.data.sources import read_source
    from codept.data.stream import Mixture, PackedStream, Source
    from codept.model.pretrainer import init_output_priors
    from codept.probe.encoders import layer_states
    from codept.structure.view import build_view

    files = [p for p in stdlib_files()[100:160] if 3000 < p.stat().st_size < 60000][:24]
    views = [build_view(str(p), "python", read_source(p), default_tok) for p in files]
    train, held = views[:20], views[20:]
    obj = build("plm", vocab, max_tokens=128)
    src = Source("s", len(train), lambda i, rng, ctx: obj(train[i], rng, ctx), salt=5, get=train.__getitem__,
                 context=True)
    torch.manual_seed(0)
    m = T.Transformer(T.configure(T.debug_cpu(vocab_size=vocab.size), hidden=64, heads=4, intermediate=256,
                                  layers=2, dropout=0.0, attention_dropout=0.0))  # post-LN, zero residual init
    net = Pretrainer(m, {"plm": build_head("plm", m)})
    batches = PackedStream(Mixture([src], [1.0], seed=0), seq_len=128, pad_id=vocab.pad_id, buffer=32).batches(16)
    opt = None
    for step, rows in enumerate(batches):
        batch = collate(rows)
        if opt is None:  # as the recipes: output priors, then AdamW at debug_cpu's lr
            assert init_output_priors(net, [batch])["plm"] > 0
            opt = torch.optim.AdamW(net.parameters(), lr=1e-3, betas=(0.9, 0.98), eps=1e-6, weight_decay=0.01)
        loss_sum, n = net(batch)["plm"]
        opt.zero_grad()
        (loss_sum / n.clamp(min=1)).backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        if step == 59:
            break
    ids = torch.zeros(len(held), 128, dtype=torch.long)
    for i, v in enumerate(held):
        ids[i] = torch.as_tensor(v.input_ids[:128])
    with torch.no_grad():
        final = layer_states(m.eval(), ids, torch.ones_like(ids, dtype=torch.bool))[-1]  # (B, T, C) bidirectional
    spread = float(final.reshape(-1, final.shape[-1]).std(0).mean())
    assert spread > 0.4, f"content stream collapsed: spread {spread:.3f} (random init ~0.8)"
