"""codept.train.export.module_state on real DeepSpeed checkpoints (tests/ds_worker.py, one CPU rank):
ZeRO-2's whole module file is read with torch alone, ZeRO-3's partitions (no whole file) are gathered;
both give exactly the parameters the run ended with."""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from codept.train.export import module_state

REPO = Path(__file__).resolve().parents[1]
WORKER = REPO / "tests" / "ds_worker.py"


def _worker():
    spec = importlib.util.spec_from_file_location("ds_worker", WORKER)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # module level: model and data only, no deepspeed
    return mod


def _train(out: Path, ds_config: str) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    exe = Path(sys.executable).with_name("deepspeed")
    launcher = [str(exe)] if exe.exists() else [sys.executable, "-m", "deepspeed.launcher.runner"]
    env = {**os.environ, "DS_ACCELERATOR": "cpu", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
           "TORCH_EXTENSIONS_DIR": str(Path.home() / ".cache" / "codept" / "torch_extensions")}
    try:
        r = subprocess.run([*launcher, "--num_gpus", "1", "--master_port", str(port), str(WORKER), "--out", str(out),
                            "--mode", "train", "--set", "steps=2", "save_every=2", f"ds_config={ds_config}"],
                           cwd=REPO, env=env, capture_output=True, text=True, timeout=420)
    finally:
        for f in glob.glob(f"/dev/shm/deepspeed_allreduce_buffer_{os.getuid()}_*_{port}_*"):
            os.unlink(f)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]


@pytest.mark.slow
@pytest.mark.parametrize("ds_config,whole", [("zero2", True), ("zero3", False)])
def test_module_state_of_real_checkpoints(tmp_path, ds_config, whole):
    if ds_config == "zero3":  # partition even the tiny test parameters
        z = json.loads((REPO / "ds_configs" / "zero3.json").read_text())
        z["zero_optimization"]["stage3_param_persistence_threshold"] = 0
        ds_config = str(tmp_path / "zero3.json")
        Path(ds_config).write_text(json.dumps(z))
    _train(tmp_path, ds_config)
    tag_dir = tmp_path / "ckpt" / "step00000002"
    assert (tag_dir / "mp_rank_00_model_states.pt").is_file() == whole
    state = module_state(tag_dir)
    final = json.loads((tmp_path / "final.json").read_text())
    assert _worker()._params_sha(state) == final["sha256"]  # the parameters after the saved step, exactly
