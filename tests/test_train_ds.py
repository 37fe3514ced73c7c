"""Real DeepSpeed on CPU, 2 ranks, through the launcher: loss normalisation, ZeRO 1/2/3 (+ offload),
kill -9 and resume bit-exact, kill -9 during a save, resume on another world size.

Every test launches ``deepspeed --num_gpus N --master_port P tests/ds_worker.py ...`` in a new session
(so ``kill -9`` reaches the whole job: launcher and ranks), with DS_ACCELERATOR=cpu, OMP_NUM_THREADS=1
and TORCH_EXTENSIONS_DIR=~/.cache/codept/torch_extensions (the shared-memory comm op is compiled
there once, about a minute; ZeRO-Offload's cpu_adam a few minutes more, once). Afterwards it kills
what is left of that session and deletes the ``/dev/shm/deepspeed_allreduce_buffer_<uid>_*_<P>_*``
files of its own port. One cached launch takes 20-30 s, mostly ``import deepspeed``.
"""

from __future__ import annotations

import collections
import glob
import importlib.util
import json
import math
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
WORKER = REPO / "tests" / "ds_worker.py"
EXT_DIR = Path.home() / ".cache" / "codept" / "torch_extensions"


def _worker_module():
    spec = importlib.util.spec_from_file_location("ds_worker", WORKER)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


W = _worker_module()


def _deepspeed_cmd() -> list[str]:
    exe = Path(sys.executable).with_name("deepspeed")
    if exe.exists():
        return [str(exe)]
    return [sys.executable, "-m", "deepspeed.launcher.runner"]


def _build_cpu_adam() -> None:
    """Compile DeepSpeed's cpu_adam op (ZeRO-Offload's optimizer) once, in one process, before a
    launch needs it: ~100 s on 2 cores the first time, cached in EXT_DIR after, and outside the
    launch's timeout (inside it, two ranks waiting on one first build took the whole 420 s in CI)."""
    env = {**os.environ, "DS_ACCELERATOR": "cpu", "TORCH_EXTENSIONS_DIR": str(EXT_DIR)}
    r = subprocess.run([sys.executable, "-c", "from deepspeed.ops.op_builder import CPUAdamBuilder; "
                        "CPUAdamBuilder().load()"], env=env, capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, f"building DeepSpeed's cpu_adam op failed:\n{(r.stdout + r.stderr)[-4000:]}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Run:
    rc: int
    output: str
    killed: bool
    seconds: float
    leftover_shm: list  # this job's /dev/shm files still there when it ended (then deleted)


def launch(out: Path, *args: str, nproc: int = 2, kill_when=None, timeout: float = 420,
           kill_signal: int = signal.SIGKILL) -> Run:
    """Run the worker under the deepspeed launcher; ``kill_when()`` -> True sends ``kill_signal``
    (default SIGKILL) to the whole job."""
    out.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    env = {**os.environ, "DS_ACCELERATOR": "cpu", "OMP_NUM_THREADS": "1", "TORCH_EXTENSIONS_DIR": str(EXT_DIR),
           "PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false"}
    cmd = [*_deepspeed_cmd(), "--num_gpus", str(nproc), "--master_port", str(port), str(WORKER),
           "--out", str(out), *args]
    log_path = out / f"launch-{port}.log"
    t0 = time.time()
    killed = False
    with open(log_path, "w") as log:
        p = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            while p.poll() is None:
                if kill_when is not None and kill_when():
                    os.killpg(p.pid, kill_signal)  # kill -9 (or -TERM, -INT) of the whole job
                    killed = True
                    break
                if time.time() - t0 > timeout:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
                    pytest.fail(f"deepspeed launch timed out after {timeout}s: {' '.join(cmd)}\n"
                                + log_path.read_text()[-4000:])
                time.sleep(0.02)
            rc = p.wait()
        finally:
            try:  # ranks orphaned by a dead launcher are still in our session
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            leftover = sorted(glob.glob(f"/dev/shm/deepspeed_allreduce_buffer_{os.getuid()}_*_{port}_*"))
            for f in leftover:
                os.unlink(f)
    return Run(rc=rc, output=log_path.read_text(), killed=killed, seconds=time.time() - t0, leftover_shm=leftover)


def losses(path: Path) -> dict[int, float]:
    if not path.exists():
        return {}
    out = {}
    for line in path.read_text().splitlines():
        if line.endswith("}"):  # a kill may leave a half-written last line
            d = json.loads(line)
            out[d["step"]] = d["loss"]
    return out


def ok(run: Run) -> Run:
    assert run.rc == 0, f"launch failed (rc {run.rc}):\n{run.output[-6000:]}"
    return run


# ------------------------------------------------------------------------------------------------
# (a) + (b): loss normalisation under each ZeRO stage, then a few ordinary steps


def reference_step(cfg_kw: dict) -> dict:
    """Single process, no DeepSpeed: the full batch (2 ranks x 2 micro-batches) as one token mean."""
    from codept.train.config import RunConfig, derive

    cfg = RunConfig(**cfg_kw)
    plan = derive(cfg, 2, {})
    model = W.TinyLM(seed=cfg.seed, dropout=0.0)
    mbs = [b for r in (0, 1) for b in W.norm_batches(r)]
    outs = [W.lm_loss(model, b)["lm"] for b in mbs]
    n = sum(o[1] for o in outs)
    loss = sum(o[0] for o in outs) / n
    loss.backward()
    grads = {k: p.grad.clone() for k, p in model.named_parameters()}
    from codept.train.config import lr_multiplier

    o = plan.optimizer
    opt = torch.optim.AdamW(model.parameters(), lr=o["lr"] * lr_multiplier(0, plan.schedule), betas=o["betas"],
                            eps=o["eps"], weight_decay=o["weight_decay"])
    opt.step()
    # what a per-micro-batch mean would give: the test must be able to tell them apart
    naive = W.TinyLM(seed=cfg.seed, dropout=0.0)
    for b in mbs:
        s, c = W.lm_loss(naive, b)["lm"]
        if c:
            (s / c / len(mbs)).backward()
    params = {k: p.detach().clone() for k, p in model.named_parameters()}
    return {"loss": float(loss.detach()), "grads": grads, "params": params,
            "naive_grads": {k: p.grad for k, p in naive.named_parameters()}, "counts": [o[1] for o in outs]}


NORM_CFG = dict(seq_len=32, micro_batch_rows=2, global_batch_rows=8, steps=12, lr=1e-2, warmup_steps=2, grad_clip=0.0)

STAGES = [
    pytest.param("zero2", [], 1e-6, id="zero2"),
    pytest.param("zero1", [], 1e-6, id="zero1", marks=pytest.mark.slow),
    pytest.param("zero3", [], 1e-6, id="zero3", marks=pytest.mark.slow),
    # cpu_adam (DeepSpeedCPUAdam, required by ZeRO-Offload) rounds differently from torch AdamW
    pytest.param("zero3_offload", ["precision=fp32"], 1e-6, id="zero3_offload", marks=pytest.mark.slow),
]


@pytest.mark.parametrize("ds_config,extra,tol", STAGES)
def test_loss_normalisation_and_steps(ds_config, extra, tol, tmp_path):
    """k=2 micro-batches x 2 ranks with unequal valid-token counts (41, 3 | 0, 17): the logged loss,
    the reduced gradients and the parameters after one step equal the single-process full-batch token
    mean; then three ordinary steps run."""
    if "offload" in ds_config:
        _build_cpu_adam()
    ref = reference_step(NORM_CFG)
    assert len(set(ref["counts"])) == 4 and 0 in ref["counts"]
    gap = max((ref["grads"][k] - ref["naive_grads"][k]).abs().max().item() for k in ref["grads"])
    assert gap > 1e-2, "test data cannot tell global from per-micro-batch normalisation"

    cfg_path = ds_config
    if ds_config.startswith("zero3"):  # partition even the tiny test parameters
        z = json.loads((REPO / "ds_configs" / f"{ds_config}.json").read_text())
        z["zero_optimization"]["stage3_param_persistence_threshold"] = 0
        cfg_path = str(tmp_path / f"{ds_config}.json")
        Path(cfg_path).write_text(json.dumps(z))
    sets = [f"{k}={v}" for k, v in NORM_CFG.items()] + [f"ds_config={cfg_path}"] + extra
    run = ok(launch(tmp_path, "--mode", "norm", "--extra_steps", "3", "--set", *sets))
    got = torch.load(tmp_path / "norm.pt", weights_only=False)

    assert got["k"] == 2
    assert got["stage"] == int(ds_config[4])
    if got["stage"] == 3:
        assert got["local_numel"] < got["numel"], "ZeRO-3 did not partition the parameters"
    assert math.isclose(got["logs"]["loss"], ref["loss"], rel_tol=1e-6), (got["logs"]["loss"], ref["loss"])
    assert got["logs"]["n.lm"] == sum(ref["counts"])
    for k, g in ref["grads"].items():
        torch.testing.assert_close(got["grads"][k], g, atol=tol, rtol=0, msg=f"gradient of {k}")
    for k, p in ref["params"].items():
        torch.testing.assert_close(got["params"][k], p, atol=tol, rtol=0, msg=f"parameter {k} after one step")
    steps = losses(tmp_path / "losses.jsonl")
    assert sorted(steps) == [2, 3, 4] and all(math.isfinite(v) for v in steps.values())
    assert run.leftover_shm == [], "engine.shutdown() left /dev/shm files behind"
    print(f"{ds_config}: launch {run.seconds:.1f}s")


# ------------------------------------------------------------------------------------------------
# (c), (d), (e): checkpoints, on one uninterrupted reference run


TRAIN = ["--mode", "train", "--set", "save_every=4"]  # ZeRO-2 (default ds_config), 12 steps, k = 2


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    out = tmp_path_factory.mktemp("uninterrupted")
    run = ok(launch(out, *TRAIN))
    ref = losses(out / "losses.jsonl")
    assert sorted(ref) == list(range(1, 13))
    assert (out / "ckpt" / "latest").read_text() == "step00000012"
    return {"out": out, "losses": ref, "final": json.loads((out / "final.json").read_text()), "seconds": run.seconds}


def _check_resumed(uninterrupted, out: Path, log: str, from_step: int):
    got = losses(out / log)
    assert sorted(got) == list(range(from_step + 1, 13)), sorted(got)
    for s, v in got.items():
        want = uninterrupted["losses"][s]
        assert v == want, f"step {s}: resumed loss {v!r} != uninterrupted {want!r}"
    assert json.loads((out / "final.json").read_text()) == uninterrupted["final"], "final parameters differ"
    assert (out / "ckpt" / "latest").read_text() == "step00000012"


def test_kill9_at_random_step_then_resume_is_bit_exact(uninterrupted, tmp_path):
    kill_at = random.Random().randint(5, 11)
    print(f"kill -9 after step {kill_at}")

    def reached():
        got = losses(tmp_path / "losses-killed.jsonl")
        return bool(got) and max(got) >= kill_at

    run = launch(tmp_path, *TRAIN, "--step_sleep", "0.3", "--log", "losses-killed.jsonl", kill_when=reached)
    assert run.killed, f"the job ended before step {kill_at}:\n{run.output[-3000:]}"
    before = losses(tmp_path / "losses-killed.jsonl")
    assert all(v == uninterrupted["losses"][s] for s, v in before.items())
    saved = int((tmp_path / "ckpt" / "latest").read_text()[len("step"):])
    assert saved % 4 == 0 and 4 <= saved <= max(before), (saved, max(before))

    run = ok(launch(tmp_path, *TRAIN, "--log", "losses-resumed.jsonl"))
    assert f"resumed from {tmp_path / 'ckpt' / f'step{saved:08d}'} at step {saved}" in run.output
    _check_resumed(uninterrupted, tmp_path, "losses-resumed.jsonl", saved)


@pytest.mark.slow
def test_bf16_trains_close_to_fp32(uninterrupted, tmp_path):
    """ds_configs/zero2_bf16.json: same run in bf16; losses finite and within 2% of the fp32 run."""
    run = ok(launch(tmp_path, "--mode", "train", "--set", "ds_config=zero2_bf16", "save_every=6"))
    got = losses(tmp_path / "losses.jsonl")
    assert sorted(got) == list(range(1, 13))
    for s, v in got.items():
        assert math.isfinite(v) and abs(v - uninterrupted["losses"][s]) < 0.02 * uninterrupted["losses"][s]
    assert (tmp_path / "ckpt" / "latest").read_text() == "step00000012"
    assert run.leftover_shm == []


def test_kill9_during_save_resumes_from_previous_checkpoint(uninterrupted, tmp_path):
    run = launch(tmp_path, *TRAIN, "--die_in_save", "8", "--log", "losses-died.jsonl")
    assert run.rc != 0 and "rank 1 dies in the save of step 8" in run.output
    ckpt = tmp_path / "ckpt"
    assert (ckpt / "latest").read_text() == "step00000004", "latest moved to a checkpoint rank 1 never finished"
    assert (ckpt / "step00000008").is_dir() and not (ckpt / "step00000008" / "rank1.json").exists()

    run = ok(launch(tmp_path, *TRAIN, "keep_last=2", "--log", "losses-resumed.jsonl"))
    assert f"resumed from {ckpt / 'step00000004'} at step 4" in run.output
    _check_resumed(uninterrupted, tmp_path, "losses-resumed.jsonl", 4)
    # the broken step 8 was saved over; keep_last=2 pruned step 4
    assert sorted(p.name for p in ckpt.iterdir() if p.is_dir()) == ["step00000008", "step00000012"]
    assert (ckpt / "step00000008" / "rank1.json").exists()


DOCS = ["--mode", "train", "--rows", "document", "--long", "truncate", "--record", "docs", "--set", "save_every=4"]


def _docs(out: Path, upto: int | None = None) -> list[int]:
    """The documents every rank of the runs in `out` trained on (steps <= upto), in step order."""
    recs = [json.loads(x) for f in sorted(out.glob("docs-rank*.jsonl")) for x in f.read_text().splitlines()]
    return [d for r in sorted(recs, key=lambda r: (r["step"], r["rank"])) if upto is None or r["step"] <= upto
            for d in r["docs"]]


def _zero_full(tag_dir: Path) -> tuple[dict, dict]:
    """(weights, Adam moments) of a ZeRO-1/2 checkpoint, consolidated by hand from DeepSpeed's files:
    the module of mp_rank_00, the flat moment partitions of every rank concatenated, cut by
    param_shapes (an independent check of the universal path)."""
    model = torch.load(tag_dir / "mp_rank_00_model_states.pt", weights_only=False)
    parts = [torch.load(p, weights_only=False)["optimizer_state_dict"]
             for p in sorted(tag_dir.glob("zero_pp_rank_*_optim_states.pt"))]
    moments = {}
    for key in ("exp_avg", "exp_avg_sq"):
        flat = torch.cat([part["base_optimizer_state"]["state"][0][key] for part in parts])
        off = 0
        for name, shape in model["param_shapes"][0].items():
            n = math.prod(shape)
            moments[f"{name}/{key}"] = flat[off:off + n].view(shape)
            off += n
    return {k: v.float() for k, v in model["module"].items()}, moments


def test_resume_on_another_world_size(tmp_path):
    """Bar of issue 23.6: a checkpoint of 2 ranks resumes on 1 (no refusal): the weights and Adam
    moments are the saved ones (checked against DeepSpeed's files consolidated by hand), the log says
    what changed, and the documents trained on, before and after, are exactly those of the
    uninterrupted 2-rank run, none twice. (One document per row, so that both runs end on whole
    buffers; ragged ends: tests/test_stream_world.py.)"""
    full = tmp_path / "full"
    ok(launch(full, *DOCS))
    want = _docs(full)
    assert len(want) == 12 * 8 and len(set(want)) == len(want)

    out = tmp_path / "resumed"
    (out / "ckpt").mkdir(parents=True)
    shutil.copytree(full / "ckpt" / "step00000004", out / "ckpt" / "step00000004")
    (out / "ckpt" / "latest").write_text("step00000004")
    for f in full.glob("docs-rank*.jsonl"):  # what the 2 ranks trained on up to the checkpoint
        (out / f"before-{f.name}").write_text("".join(x + "\n" for x in f.read_text().splitlines()
                                                      if json.loads(x)["step"] <= 4))
    run = ok(launch(out, *DOCS, "--dump_load", nproc=1))
    assert "resumed from" in run.output and "at step 4 (saved by 2 ranks)" in run.output, run.output[-3000:]
    assert "resume: world size 2 -> 1: ZeRO-2 weights and optimizer state re-partitioned" in run.output
    assert (out / "ckpt" / "step00000004" / "universal" / "step00000004" / "zero").is_dir()

    weights, moments = _zero_full(out / "ckpt" / "step00000004")
    got = torch.load(out / "load.pt", weights_only=True)
    assert set(got["params"]) == set(weights) and set(got["moments"]) == set(moments)
    for k, v in weights.items():
        assert torch.equal(got["params"][k], v), f"weights of {k} after the load differ from the saved ones"
    for k, v in moments.items():
        assert torch.equal(got["moments"][k], v), f"{k} after the load differs from the saved one"

    before = [d for f in sorted(out.glob("before-docs-rank*.jsonl")) for x in f.read_text().splitlines()
              for d in json.loads(x)["docs"]]
    after = _docs(out)
    assert len(after) == 8 * 8, "the 1-rank run trained 8 steps of the same global batch"
    seen = collections.Counter(before + after)
    assert [d for d, c in seen.items() if c > 1] == [], "documents trained twice"
    assert seen == collections.Counter(want), "the union differs from the uninterrupted run's"
    assert (out / "ckpt" / "latest").read_text() == "step00000012"


def test_universal_conversion_runs_no_planted_pickle(uninterrupted, tmp_path):
    """DeepSpeed's converter calls torch.load(weights_only=False); codept runs it with torch.load
    replaced by the allow-list load: a pickle planted in a ZeRO file is refused, no code runs."""
    from codept.train import checkpoint as ckpt
    from codept.train import engine as E

    shutil.copytree(uninterrupted["out"] / "ckpt" / "step00000004", tmp_path / "step00000004")
    tag = tmp_path / "step00000004"
    marker = tmp_path / "planted-code-ran"
    optim = tag / "zero_pp_rank_1_mp_rank_00_optim_states.pt"
    real = ckpt.load_allowed(optim, E.checkpoint_globals())
    _plant(optim, {**real, "ds_version": _Planted(str(marker))})
    error = ckpt.convert_universal(tag, "some-save", E.checkpoint_globals())
    assert "refused unread" in error, error
    assert not marker.exists() and not (tag / "universal").exists()
    assert torch.load is ckpt._TORCH_LOAD, "torch.load was not given back"


class _Planted:
    """A pickle that runs code when it is loaded (what a tampered checkpoint file would hold)."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _plant(path: Path, payload: dict) -> None:
    """Replace a checkpoint file with `payload` and update its size and sha256 in the rank manifest
    that lists it, as an attacker with write access to the folder would."""
    from codept.data.sources import sha256_file

    torch.save(payload, path)
    for m in path.parent.glob("rank*.json"):
        d = json.loads(m.read_text())
        if path.name in d["files"]:
            d["files"][path.name] = {"size": path.stat().st_size, "sha256": sha256_file(path)}
            m.write_text(json.dumps(d))


def test_a_planted_pickle_runs_no_code_on_resume(uninterrupted, tmp_path):
    """Defect: rank<r>.pt was loaded with torch.load(weights_only=False): a pickle planted in it ran
    on resume, its size and sha256 updated in the manifest. Now codept's files load with
    weights_only=True and DeepSpeed's with its own few types allowed by name; both are refused."""
    from codept.train import checkpoint as ckpt

    shutil.copytree(uninterrupted["out"] / "ckpt", tmp_path / "ckpt")
    tag = tmp_path / "ckpt" / "step00000012"
    marker = tmp_path / "planted-code-ran"
    state = torch.load(tag / "rank1.pt", weights_only=True)
    state["client_state"]["stream"] = _Planted(str(marker))
    _plant(tag / "rank1.pt", state)
    run = launch(tmp_path, *TRAIN)
    assert run.rc != 0 and "rank1.pt: holds more than plain data" in run.output, run.output[-4000:]
    assert not marker.exists(), "the planted pickle ran"
    # DeepSpeed's own files: its optimizer states load with its types allowed, a planted one does not
    from codept.train import engine as E

    optim = tag / "zero_pp_rank_0_mp_rank_00_optim_states.pt"
    real = ckpt.load_allowed(optim, E.checkpoint_globals())
    assert "optimizer_state_dict" in real
    _plant(optim, {**real, "ds_version": _Planted(str(marker))})
    with pytest.raises(ckpt.CheckpointError, match="refused unread"):
        ckpt.load_allowed(optim, E.checkpoint_globals())
    assert not marker.exists()


@pytest.mark.slow
def test_one_rank_killed_by_sigterm_leaves_no_shm_file(tmp_path):
    """A single-rank CPU run killed by a signal (SIGTERM here: a scheduler's or `timeout`'s) left its
    66 MiB /dev/shm/deepspeed_allreduce_buffer_* file: only multi-rank runs unlinked theirs at init."""
    out = tmp_path / "run"
    run = launch(out, "--mode", "train", "--set", "steps=200", "save_every=0", "--step_sleep", "0.2", nproc=1,
                 kill_when=lambda: len(losses(out / "losses.jsonl")) >= 2, kill_signal=signal.SIGTERM)
    assert run.killed, run.output[-3000:]
    assert run.leftover_shm == [], (run.leftover_shm, run.output[-3000:])
