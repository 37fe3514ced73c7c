"""Prepare on an existing engine (issue 23.1): ``codept prepare --executor ray`` on a local Ray
cluster gives the local build's folder byte for byte (content key, manifest, Arrow shards); the
per-input isolation holds inside Ray tasks (a crash, a hang, a raise, a memory limit: the local
path's skip reasons); near-dedup on Ray is over the whole corpus, which per-machine shards are not.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from codept.data.engines import view_map
from codept.data.sources import stdlib_root
from codept.prepare import PrepareConfig, prepare
from codept.tokenizer import train_tokenizer
from test_robustness import _init, _work  # a crash, a hang, a raise (importable by Ray's workers)

ray = pytest.importorskip("ray", reason="ray is a dev dependency: pip install -e '.[dev]'")


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("tok")
    train_tokenizer(sorted(stdlib_root().glob("json/*.py")), out, vocab_size=800)
    return out


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Three stdlib packages, near-copies of five of their modules (a renamed function, a comment
    added), a Makefile (token-only), a generated file over the worker memory limit set below."""
    root = tmp_path_factory.mktemp("corpus")
    for pkg in ("json", "email", "importlib"):
        shutil.copytree(stdlib_root() / pkg, root / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    for f in sorted((root / "email").glob("*.py"))[:5]:
        text = f.read_text()
        (root / "vendored").mkdir(exist_ok=True)
        (root / "vendored" / f.name).write_text("# vendored copy\n" + text.replace("def ", "def v_", 1))
    (root / "Makefile").write_text("all:\n\tcc -o main main.c\n")
    (root / "big.py").write_text("".join(f"def f{i}(a, b):\n    return a + b * {i}\n" for i in range(20000)))
    return root


def _files(folder: Path) -> dict[str, str]:
    """sha256 of every file the build writes but summary.json (seconds, workers) and listing.json
    (the stat key, which names the executor). (A too_much_memory line names the headroom the worker
    had left, which depends on what that worker viewed before: not compared byte for byte.)"""
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name not in ("summary.json", "listing.json")}


def test_prepare_on_ray_equals_the_local_build_byte_for_byte(corpus, tok_dir, tmp_path, capsys):
    from codept.cli import main

    args = [str(corpus), "--tokenizer", str(tok_dir), "--workers", "2", "--near-dedup", "0.8", "--max-bytes", "50000000",
            "--timeout", "300"]  # a loaded host must not turn a slow file into a skip in one build only
    assert main(["prepare", *args, "--out", str(tmp_path / "local")]) == 0
    assert main(["prepare", *args, "--out", str(tmp_path / "ray"), "--executor", "ray"]) == 0
    out = capsys.readouterr().out
    a, b = (json.loads((tmp_path / d / "summary.json").read_text()) for d in ("local", "ray"))
    assert a["cache_key"] == b["cache_key"] and b["executor"] == "ray" and "executor" not in a
    assert _files(tmp_path / "local") == _files(tmp_path / "ray")
    assert a["skipped"] == b["skipped"] and b["skipped"]["near_duplicate"] == 5 and b["tokens_only"] == 1 and b["viewed"] > 50
    assert "with 2 workers" in out and ray.is_initialized() is False  # its own instance, stopped after


@pytest.fixture()
def cluster():
    """A running Ray instance the job joins (as a user's cluster), the tests folder importable by
    its workers (their tasks call test_robustness._work)."""
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": str(Path(__file__).parent)}})
    yield
    ray.shutdown()


def test_isolation_holds_inside_ray_tasks_and_near_dedup_spans_the_corpus(cluster, corpus, tok_dir, tmp_path):
    items = ["a", "segv", "b", "hang", "raise", "c"]
    out = {i: (ok, v) for i, ok, v in view_map("ray", _work, items, workers=1, timeout=2.0, init=_init,
                                                  init_args=(">",), memory_limit=0)}
    assert sorted(out) == list(range(len(items)))  # nothing lost
    assert out[0] == (True, ">a") and out[2] == (True, ">b") and out[5] == (True, ">c")
    assert [out[i][1][0] for i in (1, 3, 4)] == ["worker_crash", "timeout", "RuntimeError"]
    assert ray.is_initialized()  # a cluster the job joined is left running
    # near-dedup: on Ray one LSH index over every input; two machines' shards each see their own half
    cfg = dict(workers=2, near_dedup=0.8, worker_memory=300 << 20, max_bytes=50_000_000)
    whole = prepare([str(corpus)], out=tmp_path / "whole", tokenizer_dir=tok_dir,
                    cfg=PrepareConfig(**cfg, executor="ray"), progress=False)
    parts = [prepare([str(corpus)], out=tmp_path / f"part{i}", tokenizer_dir=tok_dir,
                     cfg=PrepareConfig(**cfg, num_shards=2, shard_index=i), progress=False) for i in (0, 1)]
    assert whole["skipped"]["near_duplicate"] == 5 and whole["skipped"]["too_much_memory"] == 1  # big.py
    assert sum(p["skipped"].get("near_duplicate", 0) for p in parts) < 5  # a pair split over shards is missed
    assert sum(p["inputs"] for p in parts) == whole["inputs"]
