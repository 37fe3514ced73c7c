"""Multi-node training tested on one host (issue 23.5): two "nodes" on localhost, each DeepSpeed's
per-node launcher (``python -m deepspeed.launcher.launch --node_rank=i``: what DeepSpeed's pdsh
runner and an ``srun`` line run on every node), one process group over TCP, a local rank 0 on
each node, a shared out_dir. The run resumes on the two nodes, and its losses equal, bit for bit, those
of one node with two local ranks: the layout of ranks over nodes changes nothing.
"""

from __future__ import annotations

import base64
import glob
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_recipe import REPO, TINY, _port, losses, merged, recipe  # noqa: E402


def two_nodes(out: Path, *overrides: str, timeout: float = 400) -> list[str]:
    """The recipe on two nodes of one local rank each; returns both nodes' logs (both must exit 0)."""
    port = _port()
    world = base64.urlsafe_b64encode(json.dumps({"node0": [0], "node1": [0]}).encode()).decode()
    env = {**os.environ, "DS_ACCELERATOR": "cpu", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    out.parent.mkdir(parents=True, exist_ok=True)
    logs = [out.parent / f"{out.name}.node{r}.log" for r in (0, 1)]
    procs = []
    try:
        for r, log in enumerate(logs):
            with open(log, "w") as f:
                procs.append(subprocess.Popen(
                    [sys.executable, "-m", "deepspeed.launcher.launch", f"--world_info={world}", f"--node_rank={r}",
                     "--master_addr=127.0.0.1", f"--master_port={port}", str(REPO / "recipes" / "pretrain_code.py"),
                     f"out_dir={out}", *merged(*TINY, *overrides)],
                    cwd=REPO, env=env, stdout=f, stderr=subprocess.STDOUT, start_new_session=True))
        t0 = time.time()
        rcs = [p.wait(timeout=max(1.0, timeout - (time.time() - t0))) for p in procs]
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for f in glob.glob(f"/dev/shm/deepspeed_allreduce_buffer_{os.getuid()}_*_{port}_*"):
            os.unlink(f)
    text = [log.read_text() for log in logs]
    assert rcs == [0, 0], "\n".join(t[-3000:] for t in text)
    return text


@pytest.mark.slow
def test_two_nodes_on_localhost_train_resume_and_equal_one_node(tmp_path):
    run = tmp_path / "two"
    first = two_nodes(run, "steps=3")
    assert "nnodes=2, num_local_procs=1, node_rank=1" in first[1] and "dist_world_size=2" in first[0]
    summary, _ = json.JSONDecoder().raw_decode(first[0][first[0].index("{\n"):])
    assert summary["ranks"] == 2 and summary["steps"] == 3
    assert (run / "latest").read_text().strip() == "step00000003"
    again = two_nodes(run, "steps=6")  # a new job on both nodes resumes from `latest`
    assert "resumed_from" in again[0] and sorted(losses(run)) == list(range(1, 7))
    one = tmp_path / "one"
    recipe(one, "steps=6")  # one node, two local ranks, uninterrupted
    rows = lambda p: [json.loads(x) for x in (p / "losses.jsonl").read_text().splitlines()]  # noqa: E731
    assert rows(run) == rows(one)  # every logged value of every step, bit for bit
