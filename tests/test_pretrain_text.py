"""recipes/pretrain_text.py: presets, settings checked before work, corpora, document strategies,
the retrieval metric, and the CLI end to end on CPU (2 ranks)."""

from __future__ import annotations

import glob
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "recipes"))

import pretrain_text as R  # noqa: E402

from codept.text import corpora as C  # noqa: E402
from codept.text.build import build_text_view  # noqa: E402
from codept.text.retrieval import mrr_of  # noqa: E402
from codept.text.view import word_spans  # noqa: E402
from codept.train.settings import ConfigError  # noqa: E402


@pytest.mark.parametrize("preset", sorted(R.PRESETS))
def test_every_preset_configures(preset):
    settings, mixture = R.configure(preset, [])
    assert mixture and settings.run.seq_len == 128
    if preset == "tlm_cpu":
        assert dict(mixture) == {"mlm@text": 1.0, "tlm@pairs": 16.0} and settings.sections["model"].n_langs == 4


@pytest.mark.parametrize("items, message", [
    (["data.corpus=wiki"], r"corpus='wiki': expected one of"),
    (["data.long=stride:0"], r"data.long='stride:0'.*1 <= S <= seq_len=128"),
    (["data.mixture=tlm@pairs:1"], r"pairs corpus, which data.corpus='english' lacks"),
    (["data.mixture=sop@pairs:1", "data.corpus=tlm"], r"sop reads text views, corpus 'pairs' holds pair views"),
    (["data.shuffle_sentences=2"], r"shuffle_sentences=2.0 must be in \[0, 1\]"),
    (["objective.nsp.negatives=topic", "data.mixture=nsp@text:1"], r"negatives='topic'"),
])
def test_bad_settings_are_refused_before_any_work(items, message):
    with pytest.raises(ConfigError, match=message):
        R.configure("english_cpu", items)


def test_pairs_longer_than_a_row_are_refused():
    """A pair split by packing would carry its label into a window without [CLS] A [SEP] B."""
    with pytest.raises(ConfigError, match=r"objective.sop.max_tokens=256 > seq_len=128"):
        R.configure("english_cpu", ["objective.sop.max_tokens=256"])
    with pytest.raises(ConfigError, match=r"objective.tlm with max_side=80: one indivisible example is up to 162 tokens > seq_len=128"):
        R.configure("tlm_cpu", ["objective.tlm.max_side=80"])


def test_tlm_needs_a_language_table():
    with pytest.raises(ConfigError, match=r"model.n_langs=2: tlm's languages text,de,zh need n_langs >= 4"):
        R.configure("tlm_cpu", ["model.n_langs=2"])


def test_english_corpus_is_stdlib_docstrings_and_pydoc_topics():
    folder = C.english_docs()
    mods, topics = list((folder / "modules").glob("*.txt")), list((folder / "topics").glob("*.txt"))
    from pydoc_data.topics import topics as pydoc_topics

    assert len(topics) == len(pydoc_topics) and len(mods) > 100
    assert all(len(p.read_text().split()) >= 40 for p in mods[:50])  # min_words, one docstring each
    assert C.english_docs() == folder  # cached


def test_catalogs_drop_symlinked_duplicates():
    files = C.catalogs(("de",))
    if not files:
        pytest.skip("no /usr/share/locale/de catalogs on this machine")
    assert all(not p.is_symlink() for p in files) and len({p.resolve() for p in files}) == len(files)


def test_sentence_shuffling_moves_whole_sentences(small_tok):
    import textwrap

    v = build_text_view("d", "text", textwrap.__doc__ * 3 + " Last one. Really the last.", small_tok)
    changed = 0
    for seed in range(20):
        w = R.shuffle_sentences(v, np.random.default_rng(seed))
        assert sorted(w.input_ids.tolist()) == sorted(v.input_ids.tolist())  # a permutation, nothing lost
        old = {tuple(v.input_ids[a:b]) for a, b in v.sentences}
        assert {tuple(w.input_ids[a:b]) for a, b in w.sentences} == old  # the same sentences
        assert w.sentences[0, 0] == 0 and w.sentences[-1, 1] == len(w) and (w.sentences[1:, 0] == w.sentences[:-1, 1]).all()
        word_spans(w.words)  # word ids renumbered: dense and contiguous
        changed += not np.array_equal(w.input_ids, v.input_ids)
    assert changed >= 18


def test_sentence_shuffling_leaves_short_documents_alone(small_tok):
    for text in ("", "Just one sentence here"):
        v = build_text_view("d", "text", text, small_tok)
        assert R.shuffle_sentences(v, np.random.default_rng(0)) is v


def test_reciprocal_ranks():
    assert mrr_of(np.eye(5)).tolist() == [1.0] * 5
    s = np.eye(4)[[1, 0, 2, 3]]  # queries 0, 1 prefer each other's target: rank 2
    assert mrr_of(s).tolist() == [0.5, 0.5, 1.0, 1.0]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_text_recipe(out: Path, *items: str) -> dict:
    """recipes/pretrain_text.py on 2 CPU ranks with ``out_dir=out`` and `items`; its summary.json
    (the run must exit 0; its /dev/shm buffers are removed whatever happens)."""
    port = _port()
    exe = Path(sys.executable).with_name("deepspeed")
    launcher = [str(exe)] if exe.exists() else [sys.executable, "-m", "deepspeed.launcher.runner"]
    env = {**os.environ, "DS_ACCELERATOR": "cpu", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    try:
        r = subprocess.run([*launcher, "--num_gpus", "2", "--master_port", str(port), "recipes/pretrain_text.py",
                            f"out_dir={out}", *items], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    finally:
        for f in glob.glob(f"/dev/shm/deepspeed_allreduce_buffer_{os.getuid()}_*_{port}_*"):
            os.unlink(f)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    return json.loads((out / "summary.json").read_text())


@pytest.mark.slow
def test_text_recipe_end_to_end_on_two_ranks(tmp_path):
    """english_cpu for a few steps: validation of both heads, the pair probes, stride windows counted."""
    out = tmp_path / "run"
    tok = tmp_path / "tok"  # your own tokenizer (`codept tokenizer train`), a setting of the recipe
    r = subprocess.run([sys.executable, "-m", "codept.cli", "tokenizer", "train", str(C.english_docs()), "--out",
                        str(tok), "--vocab-size", "2000"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    s = _run_text_recipe(out, "steps=6", "val.every=3", "val.rows=8", "data.probe_rows=8", "data.long=stride:96",
                         "data.shuffle_sentences=0.5", "model.layers=1", f"data.tokenizer={tok}")
    assert s["tokenizer"] == str(tok) and s["vocab"] == 2000
    assert s["output_priors"]["mlm"] > 0  # the collapse fix holds for text runs too (it was the code recipe's)
    assert s["val"]["sop"]["n"] > 0 and s["val"]["mlm"]["n"] > 0 and set(s["val_se"]) == {"mlm", "sop"}
    assert s["val"]["by_objective"]["sop@text"]["sop"]["n"] == s["val"]["sop"]["n"]
    assert set(s["pair_probes"]["sop"]) == {"nsp_random", "nsp_same_document", "sop"}
    st = s["strategies"]
    assert st["long"] == "stride:96" and 0 <= st["stride_overlap_tokens"] < st["text_tokens"]


def _catalog_jsonl(path: Path, n: int = 300) -> Path | None:
    """en-de pairs of a real gettext catalog of this machine as jsonl (None without one)."""
    import gettext

    mo = next((p for p in C.catalogs(("de",)) if p.name == "coreutils.mo"), None)
    if mo is None:
        return None
    cat = gettext.GNUTranslations(open(mo, "rb"))._catalog
    rows = [{"src": k, "tgt": v, "src_lang": "en", "tgt_lang": "de"} for k, v in cat.items()
            if isinstance(k, str) and len(k.split()) >= 3 and v and v != k][:n]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.slow
def test_tlm_recipe_reports_retrieval_on_held_out_pairs(tmp_path):
    pairs = _catalog_jsonl(tmp_path / "pairs.en-de.jsonl")
    if pairs is None:
        pytest.skip("no de coreutils catalog on this machine")
    text = tmp_path / "text"
    text.mkdir()
    for p in sorted((C.english_docs() / "topics").glob("*.txt"))[:20]:
        (text / p.name).write_text(p.read_text())
    # val.holdout=0.5: at the preset's 0.2, 2 of these 20 documents could be too few (one per rank)
    s = _run_text_recipe(tmp_path / "run", "--preset", "tlm_cpu", "steps=4", "val.every=2", "val.rows=8",
                         "val.holdout=0.5", "model.layers=1", f"data.text={text}", f"data.pairs={pairs}",
                         "data.retrieval_pool=40")
    ret = s["retrieval"]
    assert ret["n"] == 40 and 0 < ret["mrr"] <= 1 and set(ret["by_lang"]) == {"de"}
    assert s["val"]["mlm"]["n"] > 0 and s["held_docs"]["pairs"] >= 40
