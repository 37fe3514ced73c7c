"""codept as a library: a wheel built from this checkout, installed in a clean venv, run from a
clean folder (no PYTHONPATH, no checkout in sight) finds its grammars, ds_configs and recipes.

The venv (python -m venv; torch==2.13.0 first, the local CPU wheel; then the wheel with its
dependencies) is built once per dependency set and kept in codept's cache folder
(``$CODEPT_CACHE/test-venvs/<key>``, a ``.ready`` file marks a complete one); each run then
reinstalls only the freshly built wheel. First run: a few minutes of installs; later: ~30 s."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

from codept import resources
from codept.languages import available_languages
from codept.tokenizer import cache_dir

REPO = Path(__file__).resolve().parents[1]


def _pip(python: Path, *args: str, timeout: int = 1200) -> None:
    r = subprocess.run([str(python), "-m", "pip", "install", "-q", *args], capture_output=True, text=True,
                       timeout=timeout, env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    assert r.returncode == 0, f"pip install {args}: {r.stderr[-3000:]}"


def _build_wheel(dest: Path) -> Path:
    """The wheel of the checkout's files (tracked and new, not ignored), built in a copy of them."""
    src = dest / "src"
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True,
                           check=True).stdout.decode().split("\0")
    for f in filter(None, files):
        if (REPO / f).is_file():
            (src / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / f, src / f)
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", str(src),
                        "-w", str(dest / "dist")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    (wheel,) = (dest / "dist").glob("codept-*.whl")
    return wheel


def _venv(wheel: Path) -> Path:
    """A venv holding the wheel's dependencies (cached by them) with this wheel installed."""
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    key = hashlib.sha256(repr((sys.version, sorted(deps))).encode()).hexdigest()[:16]
    venv = cache_dir() / "test-venvs" / key
    venv.parent.mkdir(parents=True, exist_ok=True)
    python = venv / "bin" / "python"
    with open(venv.parent / f".{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one builder at a time; the others then find it ready
        if not (venv / ".ready").is_file():
            for old in venv.parent.iterdir():  # venvs of older dependency sets (1.7 GB each)
                if old.is_dir() and old != venv:
                    shutil.rmtree(old, ignore_errors=True)
            shutil.rmtree(venv, ignore_errors=True)
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
            _pip(python, "torch==2.13.0")  # first, pinned: the CPU wheel on local disk
            _pip(python, str(wheel))
            (venv / ".ready").write_text("ok\n")
        _pip(python, "--no-deps", "--force-reinstall", str(wheel))
    return venv


def _run(venv: Path, cwd: Path, *cmd: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CODEPT_GRAMMARS", "VIRTUAL_ENV")}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", OMP_NUM_THREADS="1",
               TOKENIZERS_PARALLELISM="false")
    return subprocess.run(list(cmd), cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_resources_in_a_checkout_are_the_top_level_folders():
    for name in resources.SHIPPED:
        assert resources.folder(name) == REPO / name
    assert resources.recipe("pretrain_code") == REPO / "recipes" / "pretrain_code.py"
    with pytest.raises(FileNotFoundError, match="recipes: .*pretrain_code"):
        resources.recipe("nope")


@pytest.mark.slow
def test_installed_wheel_works_outside_the_checkout(tmp_path):
    wheel = _build_wheel(tmp_path)
    venv = _venv(wheel)
    user = tmp_path / "user"  # a clean folder: no checkout, no grammars/ next to it
    user.mkdir()
    site = venv / "lib"

    r = _run(venv, user, "python", "-c", "import codept, codept.languages as L; print(codept.__file__); "
             "print(','.join(L.available_languages()))")
    assert r.returncode == 0, r.stderr[-3000:]
    where, langs = r.stdout.split()[-2:]
    assert Path(where).is_relative_to(site), f"codept imported from {where}, not the venv"
    assert langs.split(",") == available_languages(), "the wheel's grammars differ from the checkout's"

    r = _run(venv, user, "codept", "grammar", "check")
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    checked = [ln for ln in r.stdout.splitlines() if " fixtures, " in ln]
    assert len(checked) == len(available_languages()) and all(ln.endswith(" 0 failures") for ln in checked)

    files = sorted(str(p) for p in (Path(sysconfig.get_paths()["stdlib"]) / "json").glob("*.py"))
    r = _run(venv, user, "codept", "prepare", *files, "--out", str(user / "views"))
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    assert f"python: {len(files)} viewed" in r.stdout, r.stdout

    r = _run(venv, user, "codept", "recipe", "pretrain_code")
    recipe = Path(r.stdout.strip())
    assert r.returncode == 0 and recipe.is_file() and recipe.is_relative_to(site), r.stdout + r.stderr
    r = _run(venv, user, "python", str(recipe), "data.mixture=nope:1")  # the recipe's main, up to its checks
    assert r.returncode == 2 and "unknown objective 'nope'" in r.stderr, r.stderr[-3000:]
    r = _run(venv, user, "python", "-c", "from codept.train.config import DS_CONFIG_DIR, load_engine_json; "
             "print(DS_CONFIG_DIR, load_engine_json('zero2')['zero_optimization']['stage'])")
    assert r.returncode == 0 and r.stdout.split()[-1] == "2" and Path(r.stdout.split()[0]).is_relative_to(site), \
        r.stdout + r.stderr
    r = _run(venv, user, "codept", "recipe", "nope")
    assert r.returncode == 2 and "pretrain_code" in r.stderr
