"""codept.text.retrieval: tie rule, BM25 on real gettext pairs, centering, the pools of retrieval()."""

from __future__ import annotations

import gettext

import numpy as np
import pytest
import torch

from codept.model import transformer as T
from codept.objectives.render import Vocab
from codept.text import corpora as C
from codept.text.build import build_pair_view
from codept.text.retrieval import _pools, _scores, bm25, chance, mrr_of, retrieval


def _catalog_pairs(n: int) -> list[tuple[str, str]]:
    """(English, German) messages of this machine's coreutils catalog, >= 3 words, translated."""
    mo = next((p for p in C.catalogs(("de",)) if p.name == "coreutils.mo"), None)
    if mo is None:
        pytest.skip("no de coreutils catalog on this machine")
    cat = gettext.GNUTranslations(open(mo, "rb"))._catalog
    out = [(" ".join(k.split()), " ".join(v.split())) for k, v in cat.items()
           if isinstance(k, str) and len(k.split()) >= 3 and v and v != k]
    return out[:n]


@pytest.fixture(scope="module")
def pair_views(small_tok):
    return [build_pair_view(f"coreutils.mo#{i}", "text", s, "de", t, small_tok)
            for i, (s, t) in enumerate(_catalog_pairs(160))]


def test_tie_rules():
    n = 7
    assert mrr_of(np.zeros((n, n)), ties="expected") == pytest.approx(np.full(n, chance(n)))
    assert mrr_of(np.zeros((n, n))).tolist() == [1.0] * n  # optimistic: every tie counts for the query
    s = np.eye(4)[[1, 0, 2, 3]]  # queries 0, 1: one candidate above, two tied with the true one
    assert mrr_of(s, ties="expected")[:2] == pytest.approx([(1 / 2 + 1 / 3 + 1 / 4) / 3] * 2)
    assert mrr_of(s, ties="expected")[2:].tolist() == [1.0, 1.0]
    assert chance(1000) == pytest.approx(0.0074854, abs=1e-6)
    with pytest.raises(ValueError, match="ties='random'"):
        mrr_of(s, ties="random")
    with pytest.raises(ValueError, match=r"shape \(2, 3\)"):
        mrr_of(np.zeros((2, 3)))


def test_bm25_retrieves_real_translations_and_not_shuffled_ones(pair_views, small_tok):
    q = [np.asarray(p.src.input_ids) for p in pair_views]
    c = [np.asarray(p.tgt.input_ids) for p in pair_views]
    vocab = small_tok.get_vocab_size()
    true = mrr_of(bm25(q, c, vocab), ties="expected").mean()
    perm = np.random.default_rng(0).permutation(len(c))
    shuffled = mrr_of(bm25(q, [c[i] for i in perm], vocab), ties="expected").mean()
    # shared placeholders, option names and numbers: far above chance; a wrong pairing is not
    assert true > 0.5 > 10 * chance(len(c)), true
    assert shuffled < 2 * chance(len(c)), shuffled
    with pytest.raises(ValueError, match="outside \\[0, vocab_size=10\\)"):
        bm25(q[:2], c[:2], 10)


def test_centering_removes_a_language_offset():
    rng = np.random.default_rng(0)
    content = rng.normal(size=(50, 16))
    src = content + rng.normal(scale=0.3, size=content.shape)
    tgt = content + rng.normal(scale=0.3, size=content.shape)
    offset_s, offset_t = 40 * rng.normal(size=16), 40 * rng.normal(size=16)  # large per-language shifts
    clean = mrr_of(_scores(src, tgt, src.mean(0), tgt.mean(0)), ties="expected").mean()
    shifted_raw = mrr_of(_scores(src + offset_s, tgt + offset_t, None, None), ties="expected").mean()
    shifted_cen = mrr_of(_scores(src + offset_s, tgt + offset_t, (src + offset_s).mean(0),
                                 (tgt + offset_t).mean(0)), ties="expected").mean()
    assert shifted_cen == pytest.approx(clean) and clean > 0.9
    assert shifted_raw < clean - 0.3


def test_pools_and_reference_are_disjoint(pair_views):
    mixed, per, ref = _pools(pair_views, 60, seed=3)
    assert len(mixed) == 60 and set(per) == {"de"} and len(per["de"]) == 60
    assert not set(ref.tolist()) & (set(mixed.tolist()) | set(per["de"].tolist()))
    left = len(pair_views) - len(set(mixed.tolist()) | set(per["de"].tolist()))
    assert len(ref) == min(60, left) and left > 0  # up to `pool` reference pairs per target language


def test_retrieval_on_a_real_model_layers_match_the_final_states(pair_views, small_tok):
    torch.manual_seed(0)
    vocab = Vocab.from_tokenizer(small_tok)
    model = T.Transformer(T.configure(T.debug_cpu(), vocab_size=vocab.size, n_langs=3, layers=2,
                                      max_positions=128))
    out = retrieval(model, pair_views, {"text": 1, "de": 2}, vocab, "cpu", pool=60, max_side=40, layers=True)
    p = out["pools"]["de"]
    mixed, per, ref = _pools(pair_views, 60, seed=0)
    assert out["n"] == 60 and p["n"] == 60 and out["centroids"] == "reference" and out["reference"] == len(ref) > 0
    assert len(p["layers_raw"]) == 3 and p["layers_raw"][-1] == p["raw"] and p["layers_centered"][-1] == p["centered"]
    assert p["chance"] == round(chance(60), 4) and p["bm25"] > 5 * chance(60)
    assert all(0 < v <= 1 for v in (p["raw"], p["centered"], out["mrr"], out["centered"]))
    again = retrieval(model, pair_views, {"text": 1, "de": 2}, vocab, "cpu", pool=60, max_side=40, layers=True,
                      per_query=True)
    rr = again["pools"]["de"].pop("rr")
    assert again == out  # deterministic in (model, pairs, seed)
    assert round(float(rr["raw"].mean()), 4) == p["raw"] and round(float(rr["centered"].mean()), 4) == p["centered"]
    assert rr["paths"] == [pair_views[int(i)].path for i in _pools(pair_views, 60, seed=0)[1]["de"]]
    few = retrieval(model, pair_views[:60], {"text": 1, "de": 2}, vocab, "cpu", pool=60, max_side=40)
    assert few["centroids"] == "pool" and few["reference"] == 0
    assert retrieval(model, pair_views[:1], {"text": 1, "de": 2}, vocab, "cpu")["skipped"].startswith("1 held-out")
