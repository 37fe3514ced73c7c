"""Object storage: corpus inputs and prepared outputs as fsspec URLs (``s3://``, ``gs://``,
``hf://``, ``az://``, ``file://``, ...).

1. :func:`is_url`: ``scheme://...`` with a scheme fsspec knows (a Windows drive or a local name
   with a colon is not one). ``file://`` URLs are local paths (:func:`local_path`) and go the
   local way.
2. :func:`filesystem` -> (fsspec filesystem, path inside it). Credentials and endpoints come the
   way each filesystem reads them (for S3: ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY``,
   ``AWS_ENDPOINT_URL`` for a non-AWS service, ``~/.aws``); a scheme whose package is missing
   (s3fs, gcsfs, adlfs, huggingface_hub) is a ValueError naming the package.
3. :func:`walk` lists a URL like codept.data.sources.walk lists a folder: an object is a file, a
   prefix is a folder listed recursively (``find``), sorted; each file classified by the caller
   (its language from the key's extension or name). :func:`stat_line` is the listing's change
   check: size, ETag / checksum and modification time as the store reports them.
4. :func:`read_bytes` reads at most ``max_bytes + 1`` bytes of an object (the size rule of local
   files), :func:`open_binary` opens one for the jsonl / parquet readers (streamed, not
   materialised).
5. :func:`upload` copies a finished local folder to a URL, ``DONE`` last (a reader that finds
   DONE finds everything else), nothing when the URL holds the same ``DONE``. Used by
   ``codept prepare`` and ``codept prepare-text`` (``--out s3://...``).
Cost: one listing request per prefix page, one ranged GET per object read; no local copy of the
inputs. Not covered: symlinks (object stores have none), a saved Hugging Face dataset or a prepared
folder read from a URL (download it, or prepare from the URL: the views go to the local cache),
atomic replace of an existing output prefix (an upload over an older folder leaves its extra objects).
"""

from __future__ import annotations

import re
from pathlib import Path

from codept.data.jobs import SkipFile

_SCHEME = re.compile(r"^([a-z][a-z0-9+.-]+)://", re.IGNORECASE)
PACKAGES = {"s3": "s3fs", "s3a": "s3fs", "gs": "gcsfs", "gcs": "gcsfs", "az": "adlfs", "abfs": "adlfs",
            "hf": "huggingface_hub"}


def is_url(src: object) -> bool:
    """True for ``scheme://...`` with a scheme other than ``file`` (those are local paths)."""
    if not isinstance(src, str):
        return False
    m = _SCHEME.match(src)
    return bool(m) and m.group(1).lower() != "file"


def local_path(src: str) -> str:
    """``file:///a/b`` -> ``/a/b``; any other string unchanged."""
    return src[len("file://"):] if src.lower().startswith("file://") else src


def filesystem(url: str):
    """(filesystem, path inside it) for `url`; ValueError naming the package of a missing scheme."""
    import fsspec

    scheme = _SCHEME.match(url).group(1).lower()
    try:
        return fsspec.core.url_to_fs(url)
    except ImportError as e:
        pkg = PACKAGES.get(scheme, f"the fsspec implementation of {scheme}://")
        raise ValueError(f"{url}: reading {scheme}:// URLs needs {pkg} (pip install {pkg}): {e}") from None
    except ValueError as e:  # an unknown protocol
        raise ValueError(f"{url}: {e}") from None


def _url(fs, path: str) -> str:
    return fs.unstrip_protocol(path)


def walk(url: str, classify, infos: dict | None = None) -> tuple[list[tuple[str, str]], list[tuple[str, str, str]], bool]:
    """Every object under `url` (an object, or a prefix listed recursively), accounted for:
    ``classify(key) -> (kind, None) | (None, (reason, detail))``. Returns (files [(url, kind)],
    skips [(url, reason, detail)], exists), sorted by URL; an unreachable store is one skip
    ``unreadable`` naming the error. ``infos``: filled with URL -> :func:`stat_line` of every file,
    from the same listing (no request per object)."""
    fs, path = filesystem(url)
    try:
        fs.invalidate_cache()  # fsspec keeps listings per instance: a listing is a change check
        found = {path: fs.info(path)} if fs.isfile(path) else fs.find(path, detail=True)
    except Exception as e:  # noqa: BLE001 - every filesystem raises its own types (auth, network)
        return [], [(url, "unreadable", f"{type(e).__name__}: {e}")], False
    if not found:
        return [], [(url, "not_found", "no object at or under this URL")], False
    files, skips = [], []
    for key in sorted(found):
        kind, why = classify(Path(key))
        if kind is None:
            skips.append((_url(fs, key), *why))
        else:
            files.append((_url(fs, key), kind))
            if infos is not None:
                infos[_url(fs, key)] = _stat(found[key])
    return files, skips, True


def stat_line(url: str) -> str:
    """The object's size, ETag / checksum and modification time as the store reports them (the
    listing's change check); ``error ...`` when it cannot be asked."""
    fs, path = filesystem(url)
    try:
        fs.invalidate_cache(path)
        return _stat(fs.info(path))
    except Exception as e:  # noqa: BLE001
        return f"error {type(e).__name__}"


def _stat(info: dict) -> str:
    tag = next((str(info[k]) for k in ("ETag", "etag", "md5Hash", "crc32c", "checksum") if info.get(k)), "")
    when = next((str(info[k]) for k in ("LastModified", "mtime", "updated", "last_modified") if info.get(k)), "")
    return f"{info.get('size')} {tag} {when}"


def read_bytes(url: str, max_bytes: int) -> bytes:
    """At most max_bytes + 1 bytes of the object, or SkipFile too_large / unreadable."""
    fs, path = filesystem(url)
    try:
        size = fs.size(path)
        if size is not None and size > max_bytes:
            raise SkipFile("too_large", f"{size} bytes > max_bytes={max_bytes}")
        with fs.open(path, "rb") as f:
            return f.read(max_bytes + 1)
    except SkipFile:
        raise
    except Exception as e:  # noqa: BLE001
        raise SkipFile("unreadable", f"{type(e).__name__}: {e}") from e


def open_binary(url: str):
    """A binary file object over the object (read in blocks as it is consumed)."""
    fs, path = filesystem(url)
    return fs.open(path, "rb")


def uploaded(summary: dict, url: str) -> dict:
    """A job's summary after its local folder (``summary["out"]``) is uploaded to `url`: ``out`` is
    the URL, ``local`` the folder (codept prepare / prepare-text ``--out URL``)."""
    upload(Path(summary["out"]), url)
    return {**summary, "local": summary["out"], "out": url}


def upload(folder: Path, url: str) -> bool:
    """Copy every file of `folder` under `url`, ``DONE`` last, unless the URL already holds the
    same ``DONE`` (the same content key: a re-run over unchanged inputs uploads nothing). Returns
    whether anything was copied."""
    fs, path = filesystem(url)
    done_url = f"{path.rstrip('/')}/DONE"
    try:
        if fs.exists(done_url) and fs.cat_file(done_url) == (Path(folder) / "DONE").read_bytes():
            return False
    except OSError:
        pass
    files = sorted(p for p in Path(folder).rglob("*") if p.is_file())
    done = [p for p in files if p.name == "DONE" and p.parent == Path(folder)]
    for p in [p for p in files if p not in done] + done:
        fs.put_file(str(p), f"{path.rstrip('/')}/{p.relative_to(folder).as_posix()}")
    return True
