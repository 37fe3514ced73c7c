"""examples/: each user-loop script runs a few real training steps on stdlib views (in-process:
the scripts' main(argv)), with 2 DataLoader workers, and its loss falls."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _main(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main


def test_own_loop_trains(capsys):
    last = _main("own_loop")(["--steps", "6", "--files", "30", "--workers", "2", "--seq-len", "128"])
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("step ")]
    assert len(lines) == 6
    first = float(lines[0].split()[3])
    assert math.isfinite(last) and last < first, lines


@pytest.mark.slow
def test_hf_trainer_trains(tmp_path):
    out = _main("hf_trainer")(["--steps", "6", "--files", "30", "--workers", "2", "--seq-len", "128",
                               "--buffers", "8", "--out", str(tmp_path / "run")])
    assert out["steps"] == 6 and len(out["losses"]) == 6
    assert out["losses"][-1] < out["losses"][0], out["losses"]
