"""recipes/ablate.py and recipes/ablate_text.py without launching a run: run specs (a mixture and that
run's own settings), every run checked by the recipe's parser before the first launch, and the
English doc probe (continuation retrieval) on real standard-library docstrings with a real model."""

from __future__ import annotations

import ast
import json
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]


def _load(name: str):
    sys.path.insert(0, str(REPO / "recipes"))
    spec = importlib.util.spec_from_file_location(name, REPO / "recipes" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_run_spec_is_a_mixture_then_its_own_settings():
    ablate = _load("ablate")
    assert ablate.parse_run("code_doc:1 seed=1") == ("code_doc:1", ["seed=1"])
    assert ablate.run_name("code_doc:1,dataflow:1") == "code_doc1+dataflow1"
    assert ablate.run_name("syntax_span:1 objective.syntax_span.max_unit_tokens=32") == "syntax_span1@max_unit_tokens=32"
    assert ablate.run_name("code_doc:1 loss.contrastive=0.5 seed=2") == "code_doc1@contrastive=0.5@seed=2"
    with pytest.raises(SystemExit, match=r"'steps=5' must be key=value and not one of"):
        ablate.parse_run("mlm:1 steps=5")
    with pytest.raises(SystemExit, match=r"must start with a mixture"):
        ablate.parse_run("seed=1 mlm:1")


def test_every_run_is_checked_before_the_first_launch(tmp_path):
    ablate = _load("ablate")
    # a setting of an objective the run does not train: the recipe's parser refuses it, by run
    with pytest.raises(SystemExit, match=r"run 'mlm:1 objective.syntax_span.max_unit_tokens=32'.*syntax_span"):
        ablate.main(["--mixtures", "code_doc:1", "mlm:1 objective.syntax_span.max_unit_tokens=32", "--out", str(tmp_path)])
    with pytest.raises(SystemExit, match=r"share a folder name: \['mlm1@seed=1'\]"):
        ablate.main(["--mixtures", "mlm:1 seed=1", "mlm:1  seed=1", "--out", str(tmp_path)])
    assert not list(tmp_path.iterdir())  # nothing launched


def test_text_regimes_pass_the_recipe_parser_and_glm_needs_a_row():
    text = _load("ablate_text")
    runs = {spec: [f"data.mixture={text.parse_run(spec)[0]}", *text.parse_run(spec)[1]] for spec in text.REGIMES}
    settings = text.check_settings(runs, 100, ["val.every=0"])
    assert {s.run.steps for s in settings.values()} == {100}
    with pytest.raises(SystemExit, match=r"run 'glm'.*max_tokens"):  # english_cpu rows are 128 tokens
        text.check_settings({"glm": ["data.mixture=glm@text:1"]}, 100, [])


def _docstring_ids(n: int = 80) -> list[np.ndarray]:
    """Token ids of the longer module docstrings of the standard library (read with ast), stdlib BPE."""
    from codept.data.sources import stdlib_files
    from codept.tokenizer import default_tokenizer_dir, load_tokenizer

    tok = load_tokenizer(default_tokenizer_dir())
    out = []
    for path in stdlib_files():
        try:
            doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        if doc and len(doc.split()) >= 60:
            out.append(np.array(tok.encode(doc).ids, dtype=np.int32))
        if len(out) == n:
            break
    return out


def test_doc_probe_on_real_docstrings():
    text = _load("ablate_text")
    from codept.model import transformer as T
    from codept.objectives.render import Vocab
    from codept.tokenizer import default_tokenizer_dir, load_tokenizer
    from codept.train import checkpoint

    ids = _docstring_ids()
    a, b = text.doc_pairs(ids)
    assert len(a) == len(b) == sum(len(x) >= 2 * text.MIN_HALF for x in ids) >= 40
    for x, qa, cb in zip(ids, a, b):  # two adjacent, equal, disjoint halves of the document's start
        assert len(qa) == len(cb) <= text.MAX_HALF and np.array_equal(np.concatenate([qa, cb]), x[:2 * len(qa)])
    with pytest.raises(ValueError, match="min_half=0"):
        text.doc_pairs(ids, min_half=0)

    vocab = Vocab.from_tokenizer(load_tokenizer(default_tokenizer_dir()))
    chance = float(np.mean(1.0 / np.arange(1, len(a) + 1)))
    assert text.tfidf_mrr(a, a, vocab.size).mean() == 1.0  # each half finds itself
    lexical = text.tfidf_mrr(a, b, vocab.size).mean()
    assert lexical > 4 * chance  # the halves of one docstring share words
    checkpoint.seed_all(0, 0)
    model = T.Transformer(T.debug_cpu(vocab_size=vocab.size, layers=2)).eval()
    bi = text.encoder_mrr(model, a, b, vocab, causal=False)
    causal = text.encoder_mrr(model, a, b, vocab, causal=True)
    # zero residual init: every block is the identity, so the mask cannot matter and the mean-pooled
    # states are a bag of token + position vectors, which keeps the shared words
    assert np.allclose(bi, causal) and bi.mean() > 3 * chance
    # the same halves paired wrongly (each query's partner is another document's half): near chance
    wrong = text.encoder_mrr(model, a, b[1:] + b[:1], vocab, causal=False)
    assert wrong.mean() < bi.mean() / 2


@pytest.mark.slow
def test_study_smoke_two_steps_then_cached(tmp_path):
    """The study command end to end at a 2-step budget (one rank): every row trained and probed, the
    untrained row added, a table and a PNG per question, and a second call reuses every row; the
    runs also exercise the training-time hook probe.structure_every."""
    ablate = _load("ablate")
    out = tmp_path / "study"
    argv = ["--study", "smoke", "--steps", "2", "--seeds", "0", "--ranks", "1", "--out", str(out),
            "probe.final_queries=30", "probe.queries=10", "probe.project=", "probe.structure_every=1",
            "probe.structure_files=12"]
    assert ablate.main(argv) == 0
    md = (out / "smoke.md").read_text()
    for row in ("| mlm |", "| code_doc |", "| untrained |"):
        assert row in md
    assert (out / "smoke.png").stat().st_size > 1000 and "Complete." in (out / "README.md").read_text()
    report = json.loads((out / "study.json").read_text())["questions"]["smoke"]
    assert report["missing"] == [] and report["rows"]["mlm"]["node_kind"]["acc"]["n"] == 1
    summary = json.loads((out / "runs" / "mlm@seed=0" / "summary.json").read_text())
    assert set(summary["structure"]) >= {"node_kind", "def_use", "same_binding", "dataflow_edge"}  # the hook
    evals = (out / "runs" / "mlm@seed=0" / "eval.jsonl").read_text()
    assert '"step": 1' in evals and "structure/" in evals  # probe.structure_every=1: also after step 1
    stamp = (out / "runs" / "mlm@seed=0" / "summary.json").stat().st_mtime
    assert ablate.main(argv) == 0  # cached: nothing is trained again
    assert (out / "runs" / "mlm@seed=0" / "summary.json").stat().st_mtime == stamp
