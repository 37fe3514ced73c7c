"""Layering: a model checkpoint is probed and exported without importing deepspeed (the one import
site is codept/train/engine.py, needed only to train or to gather ZeRO-3 partitions)."""

from __future__ import annotations

import os
import subprocess
import sys

from codept import tokenizer as ctok
from codept.data.sources import stdlib_root
from codept.model import transformer as T
from model_data import write_run

PROBE_AND_EXPORT = """
import sys
from codept.probe import run as R
from codept.cli import main

run, hf = sys.argv[1], sys.argv[2]
scorer = R.build_scorer(run, device="cpu")
score = scorer.prepare(["add two numbers"], ["def add(a, b):\\n    return a + b\\n"])
assert score([0], [0]).shape == (1, 1)
assert main(["export", run, "--out", hf]) == 0
loaded = sorted(m for m in sys.modules if m.split(".")[0] == "deepspeed")
assert not loaded, loaded
print("no deepspeed")
"""


def _run_folder(tmp_path):
    """A checkpoint laid out as codept.train.checkpoint + DeepSpeed (ZeRO 0-2) write it."""
    tok_dir = tmp_path / "tok"
    ctok.train_tokenizer(sorted(stdlib_root().glob("json/*.py")), tok_dir, vocab_size=600)
    return write_run(tmp_path / "run", T.Transformer(T.tiny(vocab_size=600)), tok_dir)


def test_probe_and_export_load_a_model_without_deepspeed(tmp_path):
    run = _run_folder(tmp_path)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    r = subprocess.run([sys.executable, "-c", PROBE_AND_EXPORT, str(run), str(tmp_path / "hf")],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0 and "no deepspeed" in r.stdout, r.stderr[-3000:]
    assert (tmp_path / "hf" / "model.safetensors").is_file()
