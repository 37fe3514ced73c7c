"""benchmarks/gpu_check.py's CPU dry run (its --dry-run mode, the tiny model): the attention paths, the
plain bf16 loop per attention path and the engine with the issue-25 switches (varlen, bf16 autocast) run
on real packed MLM rows and report MFU; the peak table."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from codept.data.collate import collate
from codept.data.pack import pack
from codept.data.sources import stdlib_files
from codept.objectives import build
from codept.objectives.render import Vocab

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import gpu_check  # noqa: E402


def test_peak_table():
    assert gpu_check.peak_of("NVIDIA H200")[0] == gpu_check.peak_of("NVIDIA H100 80GB HBM3")[0] == 989.0
    assert gpu_check.peak_of("NVIDIA H100 PCIe")[0] == 756.0
    assert gpu_check.peak_of("NVIDIA A100-SXM4-80GB")[0] == 312.0
    assert gpu_check.peak_of("NVIDIA H200", 500.0) == (500.0, "--peak-tflops")
    peak, why = gpu_check.peak_of("cpu (dry run)")
    assert peak == 0.0 and "--peak-tflops" in why and gpu_check.mfu(1.0, peak) is None


@pytest.mark.slow
def test_dry_run_on_real_rows(default_tok, tmp_path):
    vocab = Vocab.from_tokenizer(default_tok)
    files = [f for f in stdlib_files() if f.stat().st_size > 3000][:40]
    obj = build("mlm", vocab)
    exs = [obj(type("V", (), {"input_ids": np.array(default_tok.encode(f.read_text(errors="replace")).ids[:400],
                                                              np.int32)})(), np.random.default_rng([0, 0, i]))
           for i, f in enumerate(files)]
    rows = pack(exs, 128, vocab.pad_id)[:48]
    assert len(rows) == 48
    npz = tmp_path / "rows.npz"
    gpu_check.save_batches(collate(rows), vocab.size, str(npz))
    # compiled sections are left out: a cold inductor compile of even the tiny model takes ~90 s here
    # (tests/test_compute.py checks the compiled model; benchmarks/bench_compute.py times it)
    sections = "attention_paths,plain_sdpa,plain_varlen,engine_varlen_eager_stage2,engine_zero2_bf16"
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "DS_ACCELERATOR": "cpu"}
    r = subprocess.run([sys.executable, str(REPO / "benchmarks" / "gpu_check.py"), "--dry-run", "--batches", str(npz),
                        "--seq", "128", "--peak-tflops", "1.0", "--sections", sections, "--budget-s", "900",
                        "--out", str(tmp_path)], capture_output=True, text=True, timeout=900, cwd=REPO, env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    res = json.loads((tmp_path / "gpu_check.json").read_text())
    for name in sections.split(","):
        assert "error" not in res[name] and "skipped" not in res[name], (name, res[name])
    att = res["attention_paths"]
    assert att["varlen_vs_reference_fp32"] < 1e-5 and att["sdpa_vs_reference_fp32"] < 1e-5
    assert att["varlen_bf16_vs_reference_fp32"] <= 1.25 * att["sdpa_bf16_vs_reference_fp32"] + 1e-6
    assert att["varlen_kernel_bf16"] == "sdpa"  # no flash-attn on a CPU
    for name in ("plain_sdpa", "plain_varlen", "engine_varlen_eager_stage2", "engine_zero2_bf16"):
        assert res[name]["tok_s"] > 0 and res[name]["mfu"] > 0, (name, res[name])
    assert res["plain_sdpa"]["loss_first"] == pytest.approx(res["plain_varlen"]["loss_first"], abs=1e-3)
    eng = res["engine_varlen_eager_stage2"]
    assert eng["precision"] == "bf16_autocast" and eng["all_finite"] and eng["loss_last_tenth"] < eng["loss_first_tenth"]
    assert "engine_varlen_eager_stage2_over_plain" in res and "varlen_over_sdpa" in res
