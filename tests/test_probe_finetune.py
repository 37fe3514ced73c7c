"""The fine-tune protocol (codept.probe.finetune) and the standard formats (codept.probe.formats): the
schedule, intervals and metrics with analytic values, fine-tuning a real codept checkpoint on real
standard-library pairs (the loss falls, the run is reproducible, every setting is in the output), and
CodeSearchNet jsonl / BEIR folders written by the test, scored through the command line."""

from __future__ import annotations

import ast
import gzip
import json
import os
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from codept.probe import Pair, save_pairs  # noqa: E402
from codept.probe import finetune as F  # noqa: E402
from codept.probe import formats as B  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from model_data import write_run  # noqa: E402


def stdlib_pairs(n: int) -> list[Pair]:
    """(first docstring sentence, function without its docstring) of real stdlib functions."""
    from codept.data.sources import stdlib_files

    out = []
    for path in sorted(stdlib_files(), key=lambda p: p.name):
        try:
            src = path.read_text(encoding="utf-8")
            tree = ast.parse(src)
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        lines = src.splitlines(keepends=True)
        for fn in tree.body:
            doc = ast.get_docstring(fn) if isinstance(fn, ast.FunctionDef) else None
            if doc and len(doc.split()) >= 4 and fn.end_lineno - fn.lineno >= 3:
                d = fn.body[0]
                code = "".join(lines[fn.lineno - 1: d.lineno - 1] + lines[d.end_lineno: fn.end_lineno])
                out.append(Pair("python", str(path), fn.name, doc.split("\n\n")[0].split(". ")[0], textwrap.dedent(code)))
                if len(out) == n:
                    return out
    return out


def test_schedule_intervals_and_rank_metrics():
    cfg = F.FinetuneConfig(steps=10, warmup=0.2, lr=1.0)
    assert [round(F.lr_at(s, cfg), 3) for s in range(10)] == [0.5, 1.0, 1.0, 0.875, 0.75, 0.625, 0.5, 0.375, 0.25, 0.125]
    iv = F.t_interval([0.1, 0.2, 0.3])
    assert iv["mean"] == pytest.approx(0.2) and iv["half95"] == pytest.approx(4.303 * 0.1 / 3 ** 0.5)
    assert F.t_interval([0.5])["half95"] is None
    m = F.rank_metrics(np.array([1, 2, 11]))
    assert m["mrr"] == pytest.approx((1 + 0.5 + 1 / 11) / 3)
    assert m["ndcg10"] == pytest.approx((1 + 1 / np.log2(3) + 0) / 3)
    ci = F.bootstrap_ci(np.array([1] * 50 + [4] * 50), 500)
    assert ci["mrr"][0] < 0.625 < ci["mrr"][1]


def test_decontaminate():
    a = Pair("python", "a.py", "f", "Return the sum.", "def f(x):\n    return x")
    b = Pair("python", "b.py", "g", "Other text here.", "def g(y):\n  return y")
    same_code = Pair("python", "c.py", "h", "A new query here.", "def f(x):   return x")
    kept, dropped = F.decontaminate([a, b, same_code], {"p": [a]})
    assert kept == [b] and dropped == 2


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    from codept.model import transformer as T
    from codept.tokenizer import default_tokenizer_dir, load_tokenizer

    tok = default_tokenizer_dir()
    torch.manual_seed(0)
    model = T.Transformer(T.tiny(vocab_size=load_tokenizer(tok).get_vocab_size(), max_positions=128))
    return write_run(tmp_path_factory.mktemp("ft") / "run", model, tok)


def test_finetune_learns_and_is_reproducible(checkpoint):
    from codept.probe.encoders import load_encoder

    pairs = stdlib_pairs(16)
    cfg = F.FinetuneConfig(steps=25, batch=16, lr=3e-3, code_len=64, seeds=(0,))
    runs = []
    for _ in range(2):
        enc = load_encoder(str(checkpoint))
        fit = F.finetune(enc, pairs, cfg, seed=0)
        runs.append((fit, enc.model.embed.tokens.weight.detach().clone()))
    assert runs[0][0]["loss_last"] < 0.5 * runs[0][0]["loss_first"]  # 16 pairs, one batch: it fits them
    assert runs[0][0]["loss_last"] == runs[1][0]["loss_last"] and torch.equal(runs[0][1], runs[1][1])


def test_run_finetune_end_to_end(checkpoint, tmp_path):
    from codept import cli

    pairs = stdlib_pairs(72)
    save_pairs(pairs[:40], tmp_path / "train", {})
    save_pairs(pairs[40:], tmp_path / "heldout", {})
    out = tmp_path / "out"
    code = cli.main(["probe", "finetune", "--model", str(checkpoint), "--probe", str(tmp_path / "heldout"),
                     "--train", str(tmp_path / "train"), "--steps", "3", "--batch", "8", "--code-len", "64",
                     "--seeds", "0", "1", "--boot", "50", "--out", str(out)])
    assert code == 0
    r = json.loads((out / "results.json").read_text())
    assert r["protocol"]["steps"] == 3 and r["protocol"]["seeds"] == [0, 1] and r["harness"] == F.HARNESS
    assert r["train"]["pairs"] == 40 and r["probes"]["heldout"]["pairs"] == 32
    assert set(r["finetuned"]) == {"model", "random"} and len(r["finetuned"]["random"]["runs"]) == 2
    s = r["finetuned"]["model"]["summary"]["heldout"]["mrr"]
    assert s["n"] == 2 and s["half95"] is not None
    run0 = r["finetuned"]["model"]["runs"][0]["probes"]["heldout"]
    assert run0["pool"] == {"python": 32} and 0 < run0["mrr"] <= 1 and "ndcg10" in run0
    assert r["zero_shot"]["bm25"]["probes"]["heldout"]["mrr"] > run0["mrr"]  # BM25 beats 3 steps from random
    assert "bm25 zero-shot" in (out / "results.md").read_text()


# ------------------------------------------------------------------------------------------------
# standard formats


def test_query_metrics_analytic():
    # 4 docs; relevant: doc 2 (gain 2) and doc 3 (gain 1); ranking by score: 0, 2, 1, 3
    m = B.query_metrics(np.array([0.9, 0.5, 0.7, 0.1]), np.array([0.0, 0.0, 2.0, 1.0]))
    dcg = 2 / np.log2(3) + 1 / np.log2(5)
    idcg = 2 / np.log2(2) + 1 / np.log2(3)
    assert m["ndcg10"] == pytest.approx(dcg / idcg)
    assert m["mrr"] == m["mrr10"] == 0.5 and m["recall1"] == 0 and m["recall5"] == 1
    tie = B.query_metrics(np.zeros(3), np.array([0.0, 1.0, 0.0]))  # everything tied: pessimistic, last
    assert tie["mrr"] == pytest.approx(1 / 3)


def _write_beir(d: Path, pairs: list[Pair]) -> None:
    (d / "qrels").mkdir(parents=True)
    with open(d / "corpus.jsonl", "w") as f:
        for i, p in enumerate(pairs):
            f.write(json.dumps({"_id": f"d{i}", "title": p.name, "text": p.code}) + "\n")
        f.write(json.dumps({"_id": "extra", "title": "", "text": "def unrelated(): pass"}) + "\n")
    with open(d / "queries.jsonl", "w") as f:
        for i, p in enumerate(pairs):
            f.write(json.dumps({"_id": f"q{i}", "text": p.query}) + "\n")
        f.write(json.dumps({"_id": "q_orphan", "text": "no relevant document"}) + "\n")
    (d / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" +
                                          "".join(f"q{i}\td{i}\t1\n" for i in range(len(pairs))) + "q_orphan\textra\t0\n")


def _write_csn(path: Path, pairs: list[Pair]) -> None:
    with gzip.open(path, "wt") as f:
        for p in pairs:
            doc = f'"""{p.query}"""'
            code = p.code.replace(":\n", f":\n    {doc}\n", 1)
            f.write(json.dumps({"repo": "stdlib", "path": p.path, "func_name": p.name, "language": "python",
                                "code": code, "docstring": doc, "docstring_tokens": p.query.split()}) + "\n")
        f.write(json.dumps({"language": "python", "code": "def f(): pass", "docstring": ""}) + "\n")


def test_beir_and_csn_folders_through_the_cli(tmp_path, capsys):
    from codept import cli

    pairs = stdlib_pairs(30)
    _write_beir(tmp_path / "beir", pairs)
    corpus, queries, qrels = B.read_beir(tmp_path / "beir")
    assert len(corpus) == 31 and len(queries) == 31 and qrels["q0"] == {"d0": 1.0}
    assert cli.main(["probe", "bench", "--model", "bm25", "--data", str(tmp_path / "beir"), "--out", str(tmp_path / "o1")]) == 0
    r = json.loads((tmp_path / "o1" / "results.json").read_text())
    assert r["harness"] == B.HARNESS and r["format"] == "beir"
    m = r["metrics"]
    assert m["queries"] == 30 and m["corpus"] == 31 and m["skipped"]["no_relevant_document"] == 1
    assert 0.5 < m["ndcg10"] <= 1 and m["recall100"] == 1.0 and m["mrr"] >= m["mrr10"]
    _write_csn(tmp_path / "python_test_0.jsonl.gz", pairs)
    read, meta = B.read_csn(tmp_path / "python_test_0.jsonl.gz")
    assert len(read) == 30 and meta["skipped"] == {"no_query": 1, "no_code": 0}
    assert pairs[0].query.split()[0] in read[0].query and '"""' not in read[0].code
    assert cli.main(["probe", "bench", "--model", "bm25", "--data", str(tmp_path / "python_test_0.jsonl.gz")]) == 0
    assert "ndcg10" in capsys.readouterr().out
    assert cli.main(["probe", "bench", "--model", "bm25", "--data", str(tmp_path / "nothing")]) == 2
    assert "no CodeSearchNet" in capsys.readouterr().err
