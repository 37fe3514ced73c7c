"""The shared pieces of the offline jobs (``codept prepare``, ``codept prepare-text``, later ``trace``).

Neutral on purpose: it imports neither tree-sitter nor the tokenizer nor a view module, so a text
job, a corpus reader or a test can use it without loading a grammar.

1. Skips: :class:`SkipFile` (an input that will not be viewed, with a short stable ``reason``) and
   :class:`NothingToPrepare` (a job whose sources name nothing that exists: an error, never a
   cached empty dataset).
2. Hashing: :func:`key_bytes` encodes any path or origin for a hash, also a file name with bytes
   that are not UTF-8 (``os.fsdecode`` gives lone surrogates; ``surrogateescape`` maps them back to
   the original bytes, so the hash is of the name as it is on disk); :func:`sha256_file` hashes a
   file in blocks; :func:`printable` shows such a name losslessly (``bad\\xffname.py``) where a
   column or a terminal needs valid UTF-8.
3. Output: :class:`ShardWriter` streams rows into Arrow shards of a ``Dataset.save_to_disk`` folder;
   :func:`progress` is the progress bar.
4. The cache check of a job (:class:`JobCache`): a *listing* (names + settings: which files decide
   the result) keys an index entry that maps it to the content key of its last build and to the
   stat key (the same files' ``stat``) it was built from; an equal stat key and a complete folder
   serve the job without reading an input (codept.prepare's docstring, step 2; ``codept prepare``
   and ``codept prepare-text`` both use it, with their own listing and cache root).
5. Folders: :func:`is_complete` (``DONE`` written last, holding the key), :func:`load_dataset` (the
   one reader of finished folders), :func:`fresh_folder`,
   :func:`mark_done`, :func:`publish` (an atomic rename of a finished build to its final name) and
   :func:`build_lock`, an exclusive ``fcntl.flock`` on a lock file next to the output folder: one
   process per node builds a missing folder, the others wait and then reuse it.
Cost: nothing beyond the I/O itself. Not covered: locks across machines on a shared network file
system (flock on NFS is advisory and not reliable everywhere: give each node its own cache, or one
``--out`` per node), Windows (no fcntl).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

SHARD_ROWS = 2000


class SkipFile(Exception):
    """A file that cannot be viewed; ``reason`` is a short stable key for manifests."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


class NothingToPrepare(ValueError):
    """The sources of a job name nothing that exists (every one is ``not_found``, or there is none)."""


# -- hashing -------------------------------------------------------------------------------------


def key_bytes(s: str) -> bytes:
    """A str (path, origin, reason) -> bytes for a hash. Names decoded by ``os.fsdecode`` carry lone
    surrogates for bytes that are not UTF-8; they become those bytes again (UTF-8 names unchanged)."""
    return s.encode("utf-8", "surrogateescape")


def printable(s: str) -> str:
    """Valid UTF-8 text for a name that may hold undecodable bytes: ``b'bad\\xff.py'`` -> ``'bad\\\\xff.py'``."""
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return s.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def sha256_file(path: str | os.PathLike, block: int = 1 << 22) -> str:
    """Hex sha256 of a file, read in blocks (manifests of fetched corpora and checkpoints)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(block), b""):
            h.update(chunk)
    return h.hexdigest()


# -- output --------------------------------------------------------------------------------------


class ShardWriter:
    """Rows -> Arrow stream shards of a ``save_to_disk``-compatible dataset folder."""

    def __init__(self, out: Path, schema, rows_per_shard: int = SHARD_ROWS, batch: int = 64):
        self.out, self.schema, self.rows_per_shard, self.batch = out, schema, rows_per_shard, batch
        self.buf: list[dict] = []
        self.writer = None
        self.rows_in_shard = 0
        self.n_shards = 0

    def write(self, row: dict) -> None:
        self.buf.append(row)
        if len(self.buf) >= self.batch:
            self._flush()

    def _flush(self, end: bool = False) -> None:
        import pyarrow as pa

        if self.buf:
            if self.writer is None:
                self.writer = pa.ipc.new_stream(str(self.out / f"data-{self.n_shards:05d}.arrow.tmp"), self.schema)
                self.n_shards += 1
            self.writer.write_table(pa.Table.from_pylist(self.buf, schema=self.schema))
            self.rows_in_shard += len(self.buf)
            self.buf.clear()
        if self.writer is not None and (end or self.rows_in_shard >= self.rows_per_shard):
            self.writer.close()
            self.writer, self.rows_in_shard = None, 0

    def close(self, fingerprint: str) -> int:
        """Finish the last shard, name shards ``data-i-of-n``, write state.json / dataset_info.json."""
        import datasets
        import pyarrow as pa

        self._flush(end=True)
        files = []
        for i in range(self.n_shards):
            name = f"data-{i:05d}-of-{self.n_shards:05d}.arrow"
            os.replace(self.out / f"data-{i:05d}.arrow.tmp", self.out / name)
            files.append({"filename": name})
        if not files:  # an empty dataset still loads
            with pa.ipc.new_stream(str(self.out / "data-00000-of-00001.arrow"), self.schema) as w:
                w.write_table(self.schema.empty_table())
            files.append({"filename": "data-00000-of-00001.arrow"})
        info = datasets.DatasetInfo(features=datasets.Features.from_arrow_schema(self.schema))
        info.write_to_directory(str(self.out))
        state = {"_data_files": files, "_fingerprint": fingerprint, "_format_columns": None, "_format_kwargs": {},
                 "_format_type": None, "_output_all_columns": False, "_split": None}
        (self.out / "state.json").write_text(json.dumps(state, indent=2) + "\n")
        return self.n_shards


def progress(total: int | None, enabled: bool, unit: str = "input"):
    """A tqdm bar as one function: ``update(n)``, ``update(0, close=True)``."""
    from tqdm import tqdm

    bar = tqdm(total=total, unit=unit, disable=not enabled, mininterval=1.0)

    def update(n: int, close: bool = False) -> None:
        bar.update(n)
        if close:
            bar.close()

    return update


# -- folders -------------------------------------------------------------------------------------


def is_complete(out: Path, key: str | None = None) -> bool:
    """``out`` holds a finished job (``DONE`` is written last), for ``key`` when one is given."""
    done = Path(out) / "DONE"
    if not done.is_file():
        return False
    if key is None:
        return True
    try:
        return json.loads((Path(out) / "summary.json").read_text()).get("cache_key") == key
    except (OSError, ValueError):
        return False


def load_dataset(*outs: str | Path):
    """Finished job folders as one memory-mapped ``datasets.Dataset`` (several folders, e.g. the
    shards of a multi-machine prepare, concatenated in order). A folder is finished when it or its
    parent holds ``DONE`` (``codept prepare-text`` writes DIR/text and DIR/pairs under one marker).
    The one folder reader: codept.prepare.load_views and codept.views.open_views call it."""
    import datasets

    if not outs:
        raise ValueError("load_dataset: name at least one folder")
    parts = []
    for out in map(Path, outs):
        if not out.is_dir():
            raise FileNotFoundError(f"{out}: no such prepared views folder")
        if not ((out / "DONE").is_file() or (out.parent / "DONE").is_file()):
            raise FileNotFoundError(f"{out} is not a complete prepared dataset (no DONE marker)")
        parts.append(datasets.load_from_disk(str(out)))
    return parts[0] if len(parts) == 1 else datasets.concatenate_datasets(parts)


def read_summary(out: Path) -> dict:
    return json.loads((Path(out) / "summary.json").read_text())


JOB_MARK = ".codept-job"  # written first into every folder a job creates: "codept may replace this"


class ForeignFolder(ValueError):
    """An output folder that holds files codept did not write: never removed."""


def replaceable(out: Path) -> bool:
    """``out`` may be replaced whole: absent, an empty folder, or a folder a codept job made (it holds
    ``DONE`` or :data:`JOB_MARK`, also when that job was killed before it finished)."""
    out = Path(out)
    if not out.exists() and not out.is_symlink():
        return True
    if out.is_symlink() or not out.is_dir():
        return False
    return (out / "DONE").is_file() or (out / JOB_MARK).is_file() or not any(out.iterdir())


def foreign_folder(out: Path) -> str | None:
    """Why ``out`` must not be replaced (the one message of the CLI and the library), None when it
    may (:func:`replaceable`)."""
    out = Path(out)
    if replaceable(out):
        return None
    entries = sorted(e.name for e in out.iterdir())[:3] if out.is_dir() and not out.is_symlink() else []
    what = f"a folder with other files ({', '.join(entries)}, ...)" if entries else "a file or a link"
    return (f"{out}: {what} and no DONE; this output folder is replaced whole, so it must be new, empty or "
            f"an earlier codept output (DONE, or {JOB_MARK} of a killed build)")


def fresh_folder(out: Path) -> Path:
    """An empty folder at ``out``, marked as a job's (whatever codept left there is removed: it was not
    complete, or forced). Raises :class:`ForeignFolder` for a file, a link or a folder of other files."""
    out = Path(out)
    why = foreign_folder(out)
    if why:
        raise ForeignFolder(why)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    (out / JOB_MARK).write_text("made by a codept job; codept replaces this folder whole\n")
    return out


def mark_done(out: Path, summary: dict) -> None:
    """summary.json, then DONE (holding the key) last: a killed job never looks complete."""
    (Path(out) / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (Path(out) / "DONE").write_text(summary["cache_key"] + "\n")


def publish(tmp: Path, final: Path, replace: bool = False) -> Path:
    """Move a finished build to its final name; if a complete one is already there, keep that
    (same key, same content) unless ``replace``."""
    final = Path(final)
    if is_complete(final) and not replace:
        shutil.rmtree(tmp, ignore_errors=True)
        return final
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    return final


def lock_path(out: Path) -> Path:
    out = Path(out)
    return out.parent / f".{out.name}.lock"


@contextlib.contextmanager
def build_lock(out: Path) -> Iterator[float]:
    """Hold an exclusive flock on ``.<name>.lock`` next to ``out``; yields the seconds waited.
    Another process on this node holding it (building the same folder) makes this one wait; the
    lock is released by the kernel if the holder dies, so a killed build never blocks the next."""
    path = lock_path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    with open(path, "a+") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield time.monotonic() - t0
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


# -- the cache check -----------------------------------------------------------------------------


def hexkey(settings, lines: list[str]) -> str:
    """The 20-hex key of a sha256 state (the settings) extended by `lines` (listing or stat lines)."""
    h = settings.copy()
    for line in lines:
        h.update(key_bytes(line) + b"\n")
    return h.hexdigest()[:20]


def served(folder: Path, key: str) -> dict | None:
    """The summary of a complete folder for `key` (``cached: True``), or None."""
    if not is_complete(folder, key):
        return None
    return {**read_summary(folder), "cached": True}


@dataclass
class JobCache:
    """Where the folder of a job lives and what the index says about it. ``listing`` is any object
    with ``streamed`` and ``racy`` (codept.data.records.Listing); ``root`` is the job's cache folder
    (``<cache>/views``, ``<cache>/text``): folders ``root/<content key>``, entries ``root/index/``."""

    listing: Any
    listing_key: str
    stat_key: str
    out: Path | None  # the user's --out, or None for the cache folder
    root: Path

    @property
    def index(self) -> Path:
        """A --out folder keeps its own entry (``listing.json``, written after DONE); the cache folder
        of a listing is found through ``root/index/``."""
        if self.out is not None:
            return self.out / "listing.json"
        return self.root / "index" / f"{self.listing_key}.json"

    def folder(self, key: str) -> Path:
        return self.out if self.out is not None else self.root / key

    def build_folder(self) -> Path:
        """Where a build writes (and the lock's name): the --out folder, else ``root/.build-<listing key>``
        (renamed to ``root/<content key>`` when done)."""
        return self.out if self.out is not None else self.root / f".build-{self.listing_key}"

    def entry(self) -> dict:
        try:
            return json.loads(self.index.read_text())
        except (OSError, ValueError):
            return {}

    def stat_hit(self) -> dict | None:
        """Served from stat alone: the index entry's stat key equals today's and its folder is complete."""
        e = self.entry()
        if self.listing.streamed or not e.get("stat_key") or e["stat_key"] != self.stat_key \
                or e.get("listing_key") != self.listing_key:
            return None
        return served(self.folder(e["content_key"]), e["content_key"])

    def candidate(self) -> Path | None:
        """A complete folder this listing may reuse (then a hash pass decides)."""
        if self.out is not None:
            return self.out if is_complete(self.out) else None
        e = self.entry()
        return self.folder(e["content_key"]) if e and is_complete(self.folder(e["content_key"])) else None

    def remember(self, key: str) -> None:
        """Index entry for the next run; no stat key while files were still changing (racy)."""
        if self.listing.streamed:
            return
        entry = {"content_key": key, "listing_key": self.listing_key,
                 "stat_key": None if self.listing.racy else self.stat_key}
        self.index.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.index.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(entry) + "\n")
        os.replace(tmp, self.index)
