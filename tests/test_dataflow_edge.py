"""``dataflow_edge``: GraphCodeBERT-style binary edge prediction with sampled negatives (EdgeHead)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from codept.data.collate import collate
from codept.data.pack import pack
from codept.data.sources import read_source, stdlib_files
from codept.objectives import build
from codept.objectives.dataflow_edge import edges_of, innermost
from codept.objectives.render import Vocab
from codept.structure.view import build_view
from tests.test_dataflow_objective import _train

SRC = ("def f(n):\n    x = 0\n    while n:\n        if n: x = 1\n        else: x = 2\n        n = x\n    return x\n\n"
       "def g(x):\n    y = x\n    return y\n")


@pytest.fixture(scope="module")
def vocab(small_tok):
    return Vocab.from_tokenizer(small_tok)


@pytest.fixture(scope="module")
def code_views(small_tok):
    return [build_view(str(p), "python", read_source(p), small_tok) for p in stdlib_files()[40:70]
            if p.stat().st_size > 2000]


def _named(v):
    """token start -> 'name@line' of the identifier starting there."""
    return {int(s): v.names[n] + "@" + str(v.text[: v.offsets[s, 0]].count("\n") + 1)
            for s, n in zip(v.idents[:, 0].tolist(), v.idents[:, 2].tolist())}


def test_fixture_positives_are_exactly_the_edges_and_negatives_are_not(small_tok, vocab):
    v = build_view("f.py", "python", SRC, small_tok)
    rec = build("dataflow_edge", vocab, rate=1.0, p_hard=1.0)(v, np.random.default_rng(0)).pointers["dataflow_edge"]
    name = _named(v)
    pos = {(name[a], name[p]) for a, p, _ in rec.tolist()}
    assert pos == {("n@3", "n@1"), ("n@3", "n@6"), ("n@4", "n@1"), ("n@4", "n@6"), ("n@6", "x@6"),
                   ("x@6", "x@4"), ("x@6", "x@5"), ("x@7", "x@2"), ("x@7", "x@4"), ("x@7", "x@5"),
                   ("y@10", "x@10"), ("x@10", "x@9"), ("y@11", "y@10")}  # `x = 0` is killed before x@6
    assert (rec[:, 2] >= 0).all()
    for a, _, n in rec.tolist():
        assert (name[a], name[n]) not in pos and a != n
        assert (int(name[a].split("@")[1]) >= 9) == (int(name[n].split("@")[1]) >= 9)  # same function


def test_records_on_real_code(code_views, vocab):
    """On stdlib files: positives are edges, negatives are not and lie in the anchor's definition,
    about one negative per positive, about p_hard of them sharing the source's name; deterministic."""
    obj = build("dataflow_edge", vocab, p_hard=0.5)
    n_pos = n_neg = same_name = 0
    for i, v in enumerate(code_views):
        ex = obj(v, np.random.default_rng(i))
        rec = ex.pointers["dataflow_edge"]
        assert np.array_equal(ex.input_ids, v.input_ids) and ex.prefix.all()
        assert np.array_equal(rec, obj(v, np.random.default_rng(i)).pointers["dataflow_edge"])
        st = v.idents[:, 0].astype(np.int64)
        e = edges_of(v, "both")
        edge = set(zip(st[e[:, 0]].tolist(), st[e[:, 1]].tolist()))
        row = {s: r for r, s in enumerate(st.tolist())}
        fn = innermost(st, v.functions)
        for a, p, n in rec.tolist():
            assert (a, p) in edge
            n_pos += 1
            if n >= 0:
                n_neg += 1
                assert (a, n) not in edge and n != a
                assert fn[row[a]] == fn[row[n]]
                same_name += v.idents[row[p], 2] == v.idents[row[n], 2]
    assert n_pos > 500
    assert n_neg / n_pos > 0.95, (n_neg, n_pos)
    assert 0.4 < same_name / n_neg < 0.8, same_name / n_neg


def test_records_survive_packing(small_tok, vocab):
    obj = build("dataflow_edge", vocab, rate=1.0)
    v = build_view("f.py", "python", SRC, small_tok)
    exs = [obj(v, np.random.default_rng(i)) for i in range(3)]
    batch = collate(pack(exs, 128, pad_id=0))
    ptr, seg, ids = batch["ptr.dataflow_edge"], batch["segment_ids"], batch["input_ids"]
    got = []
    for b in range(ptr.shape[0]):
        for a, p, n in ptr[b].tolist():
            if a < 0:
                continue
            assert seg[b, p] == seg[b, a] and (n < 0 or seg[b, n] == seg[b, a])
            first = int((seg[b] == seg[b, a]).nonzero()[0])
            got.append((a - first, p - first, n - first if n >= 0 else -1))
            assert ids[b, a] == v.input_ids[a - first]
    assert sorted(got) == sorted(tuple(r) for e in exs for r in e.pointers["dataflow_edge"].tolist())


def test_edge_head_is_binary_cross_entropy_over_present_pairs():
    from codept.model import transformer as T
    from codept.model.pretrainer import build_head, target_counts

    torch.manual_seed(0)
    m = T.Transformer(T.tiny(vocab_size=100))
    head = build_head("dataflow_edge", m)
    assert all(p.dim() > 0 for p in head.parameters())  # DeepSpeed's broadcast refuses 0-dim ones
    h = torch.randn(1, 6, m.config.hidden)
    batch = {"segment_ids": torch.ones(1, 6, dtype=torch.long),
             "ptr.dataflow_edge": torch.tensor([[[5, 1, 3], [4, 2, -1], [-1, -1, -1]]])}
    loss, n = head(h, batch)
    assert n.item() == 3 == target_counts(batch, {"dataflow_edge": head})["dataflow_edge"]

    def logit(a, b):
        return (head.query(h[0, a]) @ head.key(h[0, b])).item() / m.config.hidden ** 0.5 + head.bias.item()

    ls = [logit(5, 1), logit(5, 3), logit(4, 2)]
    want = -np.log(1 / (1 + np.exp(-ls[0]))) - np.log(1 - 1 / (1 + np.exp(-ls[1]))) - np.log(1 / (1 + np.exp(-ls[2])))
    assert abs(loss.item() - want) < 1e-4
    met = head(h, batch, metrics=True)
    assert met.count.item() == 3 and met.correct.item() == (ls[0] > 0) + (ls[1] <= 0) + (ls[2] > 0)
    empty = {"segment_ids": batch["segment_ids"], "ptr.dataflow_edge": torch.full((1, 1, 3), -1)}
    le, ne = head(h.requires_grad_(), empty)
    assert ne.item() == 0 and le.item() == 0 and le.requires_grad


def test_bad_config_is_named(vocab):
    for bad, msg in (({"rate": 0}, "rate=0"), ({"kinds": "every"}, "kinds='every'"), ({"p_hard": 2}, "p_hard=2")):
        with pytest.raises(ValueError, match=msg):
            build("dataflow_edge", vocab, **bad)


@pytest.mark.slow
def test_dataflow_edge_loss_falls(code_views, small_tok, vocab):
    ls = _train(build("dataflow_edge", vocab), code_views, ["dataflow_edge"], small_tok.get_vocab_size(), steps=150)
    first, last = np.mean(ls["dataflow_edge"][:10]), np.mean(ls["dataflow_edge"][-50:])
    assert first > 0.65 and last < first - 0.07, (first, last)  # from ln 2 (balanced pairs) down
