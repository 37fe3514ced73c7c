"""The sandbox used from inside other Python environments, each built here under /tmp (so a prefix
under /tmp must survive the sandbox's own /tmp tmpfs): venv (symlinks, --copies,
--system-site-packages), virtualenv, uv venv, a venv of the distribution's python, a standalone
conda-style prefix (bin/python + lib/python3.X, no pyvenv.cfg: the layout of conda environments and
of uv-managed interpreters) and a uv venv over such a prefix kept under a 0700 home folder.

In each, tests/exec_env_driver.py runs with that environment's interpreter: the preflight must pass
(same version, prefix and site-packages inside as outside), a benign program prints, the doctests of
a package installed ONLY in that environment's site-packages are traced (``pkg:`` items), that
site-packages folder is read-only inside, and the hostile cases about the file system layout stay
contained. Before the fix every one of them was refused ("the sandbox runs another interpreter").
Needs bubblewrap (the ``bwrap`` fixture); a flavour whose tool is missing is skipped with its reason.
Cost: ~1-3 s per flavour.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DRIVER = REPO / "tests" / "exec_env_driver.py"
PROBE = "codept_env_probe"
HOSTILE = ["host_paths", "prefix_parents_empty", "write_host_file", "write_usr", "write_root", "read_shadow",
           "list_etc", "env_secret", "proc_environ", "subprocess_spawn", "pid_namespace", "user_namespace"]
PROBE_SRC = '''"""Installed only in one test environment's site-packages."""


def double(x):
    """
    >>> double(21)
    42
    """
    y = x * 2
    return y
'''


@pytest.fixture
def under_tmp():
    d = Path(tempfile.mkdtemp(prefix="codept-env-", dir="/tmp"))  # /tmp itself, whatever TMPDIR says
    yield d
    shutil.rmtree(d)


def _run(*cmd, **kw):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=120, **kw)
    assert r.returncode == 0, f"{cmd}: {r.stdout[-2000:]}{r.stderr[-2000:]}"
    return r.stdout


def _distro_python() -> Path:
    """The distribution's own python3.X (Debian: statically linked, relocatable by copying), or skip."""
    for name in (f"python3.{sys.version_info[1]}", "python3"):
        p = Path("/usr/bin") / name
        if p.exists() and p.resolve() != Path(sys.executable).resolve():
            ver = _run(p, "-c", "import sys; print(sys.version_info >= (3, 10))").strip()
            if ver == "True":
                return p
    pytest.skip("no distribution python >= 3.10 in /usr/bin besides this interpreter")


def _standalone_prefix(root: Path) -> Path:
    """A conda-style prefix (bin/python3.X, lib/python3.X, conda-meta/; no pyvenv.cfg) copied from the
    distribution's statically linked python, stdlib hard-linked."""
    src = _distro_python()
    if "libpython" in _run("ldd", src):
        pytest.skip(f"{src} links libpython dynamically: a copy would not be relocatable")
    ver = _run(src, "-c", "import sys; print(f'{sys.version_info[0]}.{sys.version_info[1]}')").strip()
    stdlib = Path(_run(src, "-c", "import sysconfig; print(sysconfig.get_paths()['stdlib'])").strip())
    (root / "bin").mkdir(parents=True)
    shutil.copy2(src.resolve(), root / "bin" / f"python{ver}")
    (root / "bin" / "python").symlink_to(f"python{ver}")
    (root / "lib").mkdir()
    try:
        _run("cp", "-al", stdlib, root / "lib" / f"python{ver}")
    except AssertionError:  # another file system: copy
        shutil.copytree(stdlib, root / "lib" / f"python{ver}", symlinks=True)
    (root / "conda-meta").mkdir()
    (root / "conda-meta" / "history").write_text("")
    return root / "bin" / "python"


def _uv() -> str:
    uv = pytest.importorskip("uv", reason="uv not installed (pip install uv; the dev extra has it)")
    return uv.find_uv_bin()


def build(flavour: str, d: Path) -> Path:
    """The environment `flavour` under `d`; returns its python."""
    env = d / "env"
    if flavour in ("venv", "venv_copies", "venv_system_site"):
        extra = {"venv": [], "venv_copies": ["--copies"], "venv_system_site": ["--system-site-packages"]}[flavour]
        _run(sys.executable, "-m", "venv", "--without-pip", *extra, env)
    elif flavour == "virtualenv":
        pytest.importorskip("virtualenv", reason="virtualenv not installed (the dev extra has it)")
        _run(sys.executable, "-m", "virtualenv", "-q", "--no-seed", "--no-periodic-update", env)
    elif flavour == "uv_venv":
        _run(_uv(), "venv", "-q", "--no-config", "--python", sys.executable, env)
    elif flavour == "distro_venv":
        _run(_distro_python(), "-m", "venv", "--without-pip", env)
    elif flavour == "standalone_prefix":
        return _standalone_prefix(env)
    elif flavour == "uv_venv_on_standalone_0700":
        home = d / "home"
        py = _standalone_prefix(home / ".local" / "share" / "uv" / "python" / "cpython-standalone")
        home.chmod(0o700)
        _run(_uv(), "venv", "-q", "--no-config", "--python", py, env)
    else:
        raise ValueError(flavour)
    return env / "bin" / "python"


def install_probe(py: Path) -> Path:
    """The probe package in `py`'s first site-packages folder (made if missing); returns that folder."""
    site = Path(_run(py, "-c", "import site; print(site.getsitepackages()[0])").strip())
    (site / PROBE).mkdir(parents=True)
    (site / PROBE / "__init__.py").write_text(PROBE_SRC)
    return site


FLAVOURS = ["venv", "venv_copies", "venv_system_site", "virtualenv", "uv_venv", "distro_venv", "standalone_prefix",
            "uv_venv_on_standalone_0700"]


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_sandbox_from_environment(bwrap, flavour, under_tmp):
    py = build(flavour, under_tmp)
    site = install_probe(py)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOME": str(under_tmp), "LANG": "C.UTF-8"}
    out = json.loads(_run(py, DRIVER, PROBE, *HOSTILE, env=env, cwd=under_tmp))
    host = out["host"]
    assert "unavailable" not in out, out.get("unavailable")
    assert host["prefix"].startswith(str(under_tmp)) and str(site) in host["site"]  # the environment's own
    if flavour == "venv_system_site":
        base = sysconfig.get_paths(vars={"base": sys.base_prefix, "platbase": sys.base_exec_prefix})["purelib"]
        assert base in host["site"]  # the base interpreter's packages too
    assert out["hello"][0] == "ok" and out["hello"][1].startswith("hello from"), out["hello"]
    units = {u["name"]: u for u in out["trace"] if "name" in u}
    u = units[f"{PROBE}.double"]
    assert (u["error"], u["attempted"], u["failed"]) == (None, 1, 0) and u["counts"], u
    assert out["write_site"][1].startswith("CONTAINED"), out["write_site"]
    assert out["script"][:2] == ["ok", "/tmp/probe_script.py /tmp/probe_script.py 42\n"], out["script"]
    assert not (site / "pwned.py").exists()
    rows = {r["case"]: r for r in out["hostile"]}
    assert sorted(rows) == sorted(HOSTILE)
    assert all(r["contained"] and not r["host_touched"] and r["survivors"] == 0 for r in rows.values()), \
        [r for r in rows.values() if not r["contained"]]


def test_prefix_over_sandbox_mounts_refused(monkeypatch):
    """A prefix that holds /tmp (or is /) cannot be bound without showing the host's /tmp: refused."""
    from codept.exec import sandbox

    monkeypatch.setattr(sys, "base_prefix", "/")
    with pytest.raises(sandbox.SandboxUnavailable, match=r"interpreter prefix /: it holds the sandbox's own /tmp"):
        sandbox._binds()
