"""Input records: every source a corpus can come in -> one stream of ``Record`` | ``Skip``.

A *source* (one command-line argument of ``codept prepare``) is one of:

- a file or a directory of source files (``codept.data.sources.discover``; language from the
  extension in ``grammars/*/language.toml``);
- a glob pattern (``src/**/*.py``; ``**`` recurses), expanded in sorted order, each match handled as
  below;
- a ``.jsonl`` / ``.jsonl.gz`` file, one JSON object per line with ``content`` and ``lang`` (and
  optionally ``path``); The Stack's names are read too: ``language`` (LANG_COLUMNS) and
  ``max_stars_repo_path`` (PATH_COLUMNS), the first present non-empty column of each list winning;
- a ``.parquet`` file with the same columns;
- a Hugging Face dataset saved with ``save_to_disk`` (a directory holding ``dataset_info.json`` /
  ``state.json``, or ``dataset_dict.json`` for several splits), same columns.

Algorithm:
1. Resolve each source, in the order given: a glob expands to its sorted matches; a data file
   (``.jsonl``, ``.jsonl.gz``, ``.parquet``) or a saved HF dataset is read as rows; anything else goes
   to ``discover``. Data files found while walking a directory are NOT read as rows (a repository may
   hold ``.jsonl`` fixtures): name them or glob them.
2. A row's language is ``canonical_language(lang)`` (names and aliases, case-insensitive, e.g.
   ``Python``, ``py``, ``golang``, ``node``); with no ``lang`` value, the extension of its ``path``.
   A language without a grammar (``cobol``) is a skip ``unknown_language``, unless ``tokens_only``
   (``codept prepare``'s default): then a file's extension or name may also be a token-only
   language's (``grammars/tokens_only.toml``) and a row's tag any name (codept.languages.view_language:
   ``COBOL`` -> ``cobol``), viewed as tokens only. Names and aliases come from each
   ``grammars/<lang>/language.toml`` (``codept.languages``).
3. Every input comes out exactly once, in input order, as a ``Record`` (to view) or a ``Skip``
   (``origin``, ``reason``, ``detail``). Reasons: those of ``discover`` (``unknown_language``,
   ``not_found``, ``symlinked_directory``, ...), ``bad_record`` (a line that is not a JSON object, a
   missing or non-text ``content``), ``bad_file`` (a data file that cannot be read or decoded at all:
   the detail names how many rows were already yielded), ``unreadable``.
4. ``record_text(record, max_bytes)`` applies the file-level filters of ``codept.data.sources``
   (too_large, binary, bad_utf8, empty) to any record, raising ``SkipFile``, so rows and files are
   filtered by one rule.

Origins (stable, unique per input; usable as manifest keys and for hash sharding):
``file:<path>``, ``jsonl:<file>#<line>`` (1-based line), ``parquet:<file>#<row>`` (0-based),
``hf:<dir>#<row>`` or ``hf:<dir>:<split>#<row>`` (0-based, splits in sorted order). A row without a
``path`` gets its origin as path.

Cost: streaming. jsonl is read a line at a time, parquet a batch of ``BATCH_ROWS`` rows at a time
(one row group is decoded at once by pyarrow), a saved HF dataset is memory-mapped Arrow read in
batches; file records carry no content (``record_text`` reads the file when asked). Memory is
bounded by the largest row batch, not the corpus.
A source may also be a ``datasets.IterableDataset`` (e.g. ``load_dataset("json", data_files=...,
streaming=True)``) or an in-memory ``datasets.Dataset`` passed from Python: its rows are read once, in
order, never materialised; origins ``stream:<k>:<name>#<row>`` (k = the source's position).

Listing (:func:`list_sources`, the cheap cache check of ``codept prepare``): the files that decide a
job's records (discovered source files, data files, every file of a saved HF dataset) with their
``stat`` (device, inode, size, mtime_ns, ctime_ns), without reading any content. A write to a file
changes its ctime (no tool can set it back), a rename its inode, an added file the listing; files
changed within 2 s of the listing are *racy* (a second write in the same timestamp tick would not
show, the problem git's index has), and a stream has no listing at all: then the caller hashes.
Not covered: ``.json`` arrays, CSV/TSV, remote datasets (``datasets.load_dataset`` from the Hub
without streaming), column names other than ROW_COLUMNS, archives (``.tar``/``.zip``).
"""

from __future__ import annotations

import glob
import gzip
import json
import os
import time
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from codept.data import remote
from codept.data.jobs import SkipFile
from codept.data.sources import BOM, DEFAULT_MAX_BYTES, decode_source, discover, language_classifier, read_source
from codept.languages import (TAG_RULE, available_languages, canonical_language, language_for_path, view_language,
                              view_language_for_path)

BATCH_ROWS = 1024
DATA_SUFFIXES = (".jsonl", ".jsonl.gz", ".parquet")
GLOB_CHARS = set("*?[")
# a row's columns, first present and non-empty wins: The Stack (v1) names the path max_stars_repo_path
PATH_COLUMNS = ("path", "max_stars_repo_path", "max_forks_repo_path", "max_issues_repo_path")
LANG_COLUMNS = ("lang", "language")
ROW_COLUMNS = ("content", *LANG_COLUMNS, *PATH_COLUMNS)



@dataclass(frozen=True)
class Record:
    """One input to view. ``content`` is None for a file (read by ``record_text``), else the row's
    text (str) or raw bytes (a binary parquet/Arrow column)."""

    path: str
    lang: str
    content: str | bytes | None
    origin: str


@dataclass(frozen=True)
class Skip:
    """One input that will not be viewed, and why (``reason`` is a short stable manifest key)."""

    origin: str
    reason: str
    detail: str = ""
    path: str = ""


def is_stream(src: object) -> bool:
    """A dataset object (``datasets.IterableDataset`` / ``Dataset``), not a path."""
    return not isinstance(src, (str, os.PathLike)) and hasattr(src, "__iter__")


def iter_records(sources: Iterable, tokens_only: bool = False) -> Iterator[Record | Skip]:
    """Every input of ``sources`` exactly once, in order: a Record to view or a Skip with a reason.
    ``tokens_only``: languages without a grammar are Records too (token-only views, step 2)."""
    for k, src in enumerate(sources):
        if is_stream(src):
            yield from _iter_stream(src, k, tokens_only)
            continue
        src = str(src)
        if not os.path.lexists(src) and GLOB_CHARS & set(src):
            matches = sorted(glob.glob(src, recursive=True))
            if not matches:
                yield Skip(f"glob:{src}", "not_found", "glob pattern matched nothing", src)
            for m in matches:
                yield from _one_source(m, tokens_only)
        else:
            yield from _one_source(src, tokens_only)


def _one_source(src: str, tokens_only: bool) -> Iterator[Record | Skip]:
    if remote.is_url(src):
        yield from _one_url(src, tokens_only)
        return
    src = remote.local_path(src)
    p = Path(src)
    if p.is_file() and src.lower().endswith((".jsonl", ".jsonl.gz")):
        yield from _iter_jsonl(p, tokens_only)
    elif p.is_file() and src.lower().endswith(".parquet"):
        yield from _iter_parquet(p, tokens_only)
    elif p.is_dir() and is_hf_dataset_dir(p):
        yield from _iter_hf(p, tokens_only)
    else:
        files, skipped = discover([src], tokens_only)
        rows: list[Record | Skip] = [Record(f, lang, None, f"file:{f}") for f, lang in files]
        rows += [Skip(f"file:{f}", reason, "", f) for f, reason in skipped]
        yield from sorted(rows, key=lambda r: r.origin)


def _one_url(url: str, tokens_only: bool) -> Iterator[Record | Skip]:
    """An object-store URL (codept.data.remote): a data file read as rows, streamed; an object or
    a prefix listed and classified like a folder's files (origins ``file:<url>``)."""
    if url.lower().endswith((".jsonl", ".jsonl.gz")):
        yield from _iter_jsonl(url, tokens_only)
    elif url.lower().endswith(".parquet"):
        yield from _iter_parquet(url, tokens_only)
    else:
        files, skipped, _ = remote.walk(url, language_classifier(tokens_only))
        rows: list[Record | Skip] = [Record(f, lang, None, f"file:{f}") for f, lang in files]
        rows += [Skip(f"file:{f}", reason, detail, f) for f, reason, detail in skipped]
        yield from sorted(rows, key=lambda r: r.origin)


def is_hf_dataset_dir(p: Path) -> bool:
    return any((p / n).is_file() for n in ("dataset_info.json", "state.json", "dataset_dict.json"))


def _row(origin: str, row: object, tokens_only: bool = False) -> Record | Skip:
    """A decoded row (dict) -> Record, or Skip naming the field and the rule it broke."""
    if not isinstance(row, dict):
        return Skip(origin, "bad_record", f"expected a JSON object, got {type(row).__name__}", origin)
    path = next((p for p in map(row.get, PATH_COLUMNS) if isinstance(p, str) and p), origin)
    content = row.get("content")
    if not isinstance(content, (str, bytes)):
        got = "missing" if "content" not in row else type(content).__name__
        return Skip(origin, "bad_record", f"'content' must be a string, got {got}", path)
    raw = next((x for x in map(row.get, LANG_COLUMNS) if x is not None and x != ""), None)
    if raw is None or raw == "":
        if path == origin:
            return Skip(origin, "bad_record", "no 'lang' field and no 'path' to take the language from", path)
        lang = view_language_for_path(path) if tokens_only else language_for_path(path)
        if lang is None:
            return Skip(origin, "unknown_language", f"no 'lang' field and {path!r} has no grammar's extension"
                        + (" nor a token-only language's (grammars/tokens_only.toml)" if tokens_only else ""), path)
    else:
        lang = view_language(raw) if tokens_only else canonical_language(raw)
        if lang is None:
            return Skip(origin, "unknown_language", f"lang={raw!r} is not one of {available_languages()} "
                        "or their aliases" + (f", and not a token-only name (rule {TAG_RULE.pattern} once "
                                              "lower-cased, blanks as _)" if tokens_only else ""), path)
    return Record(path, lang, content, origin)


def _iter_jsonl(p: Path | str, tokens_only: bool = False) -> Iterator[Record | Skip]:
    """Rows of a jsonl(.gz) file, a local path or an object-store URL (read as a stream)."""
    line_no = 0
    try:
        raw = remote.open_binary(p) if remote.is_url(p) else open(p, "rb")
        with raw:
            f = gzip.GzipFile(fileobj=raw) if str(p).lower().endswith(".gz") else raw
            for line_no, line in enumerate(f, 1):
                if not line.strip():
                    continue  # blank lines (a trailing newline, padding) are not rows
                origin = f"jsonl:{p}#{line_no}"
                try:
                    row = json.loads(line)
                except (ValueError, RecursionError) as e:  # JSONDecodeError and UnicodeDecodeError
                    yield Skip(origin, "bad_record", f"line {line_no} is not JSON: {str(e)[:120]}", origin)
                    continue
                yield _row(origin, row, tokens_only)
    except (OSError, EOFError, zlib.error) as e:  # unreadable file, truncated or corrupt gzip
        yield Skip(f"jsonl:{p}", "bad_file" if line_no else "unreadable",
                   f"{type(e).__name__} after line {line_no}: {e}", str(p))


def _iter_parquet(p: Path | str, tokens_only: bool = False) -> Iterator[Record | Skip]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = 0
    try:
        pf = pq.ParquetFile(remote.open_binary(p) if remote.is_url(p) else p)
        names = set(pf.schema_arrow.names)
        if "content" not in names:
            yield Skip(f"parquet:{p}", "bad_file", f"no 'content' column (columns: {sorted(names)}); "
                       f"{pf.metadata.num_rows} rows not read", str(p))
            return
        cols = [c for c in ROW_COLUMNS if c in names]
        for batch in pf.iter_batches(batch_size=BATCH_ROWS, columns=cols):
            for row in batch.to_pylist():
                yield _row(f"parquet:{p}#{n}", row, tokens_only)
                n += 1
    except (OSError, pa.ArrowException) as e:
        yield Skip(f"parquet:{p}", "bad_file" if n else "unreadable",
                   f"{type(e).__name__} after {n} rows: {e}", str(p))


def _iter_hf(p: Path, tokens_only: bool = False) -> Iterator[Record | Skip]:
    import datasets

    try:
        ds = datasets.load_from_disk(str(p))
    except Exception as e:  # datasets raises many types for a damaged folder
        yield Skip(f"hf:{p}", "unreadable", f"{type(e).__name__}: {e}", str(p))
        return
    splits = [(f"hf:{p}:{k}", ds[k]) for k in sorted(ds)] if isinstance(ds, datasets.DatasetDict) \
        else [(f"hf:{p}", ds)]
    for prefix, d in splits:
        if "content" not in d.column_names:
            yield Skip(prefix, "bad_file", f"no 'content' column (columns: {d.column_names}); "
                       f"{len(d)} rows not read", str(p))
            continue
        d = d.select_columns([c for c in ROW_COLUMNS if c in d.column_names])
        n = 0
        for batch in d.iter(batch_size=BATCH_ROWS):
            keys = list(batch)
            for values in zip(*(batch[k] for k in keys)):
                yield _row(f"{prefix}#{n}", dict(zip(keys, values)), tokens_only)
                n += 1


def _iter_stream(ds, k: int, tokens_only: bool = False) -> Iterator[Record | Skip]:
    """Rows of a (streaming) HF dataset, one at a time: nothing is materialised."""
    name = getattr(getattr(ds, "info", None), "dataset_name", None) or type(ds).__name__
    prefix = f"stream:{k}:{name}"
    cols = getattr(ds, "column_names", None)  # None: a stream whose features are not known yet
    if cols is not None and "content" not in cols:
        yield Skip(prefix, "bad_file", f"no 'content' column (columns: {cols}); no row read", prefix)
        return
    if cols is not None:
        ds = ds.select_columns([c for c in ROW_COLUMNS if c in cols])
    n = 0
    try:
        for row in ds:
            yield _row(f"{prefix}#{n}", row, tokens_only)
            n += 1
    except Exception as e:  # noqa: BLE001 - datasets/fsspec raise many types for a broken stream
        yield Skip(prefix, "bad_file" if n else "unreadable", f"{type(e).__name__} after {n} rows: {e}", prefix)


@dataclass
class Listing:
    """What decides a job's records, from names and ``stat`` only (see the module docstring)."""

    entries: list[str] = field(default_factory=list)  # one line per file or skip, in order
    stats: list[str] = field(default_factory=list)  # the same files' stat, for the stat key
    exists: bool = False  # some source names something that exists
    streamed: bool = False  # a source is a dataset object: no listing, hash while reading
    racy: bool = False  # a file changed within RACY_NS of the listing


RACY_NS = 2_000_000_000


def list_sources(sources: Iterable, tokens_only: bool = False) -> Listing:
    """The listing of ``sources`` (no content read; ``tokens_only`` as :func:`iter_records`)."""
    out = Listing()
    now = time.time_ns()
    for src in sources:
        if is_stream(src):
            out.streamed = True
            continue
        src = str(src)
        if remote.is_url(src):
            _list_url(src, out, tokens_only)
            continue
        src = remote.local_path(src)
        if not os.path.lexists(src) and GLOB_CHARS & set(src):
            matches = sorted(glob.glob(src, recursive=True))
            out.entries += [f"glob\0{src}\0{len(matches)}"]
            for m in matches:
                _list_one(m, out, now, tokens_only)
        else:
            _list_one(src, out, now, tokens_only)
    return out


def _list_one(src: str, out: Listing, now: int, tokens_only: bool = False) -> None:
    p = Path(src)
    if p.is_file() and src.lower().endswith(DATA_SUFFIXES):
        files = [src]
    elif p.is_dir() and is_hf_dataset_dir(p):
        files = sorted(str(f) for f in p.rglob("*") if f.is_file())
    else:
        found, skipped = discover([src], tokens_only)
        files = [f for f, _ in found]
        out.entries += [f"skip\0{f}\0{reason}" for f, reason in skipped]
        out.exists |= any(reason != "not_found" for _, reason in skipped)
    add_file_stats(out, files, now)


def _list_url(url: str, out: Listing, tokens_only: bool) -> None:
    """A URL's listing: its objects with the store's size, ETag and modification time (an ETag
    changes with the content: such a listing is never racy)."""
    infos: dict[str, str] = {}
    if url.lower().endswith(DATA_SUFFIXES):
        files = [url]
    else:
        found, skipped, exists = remote.walk(url, language_classifier(tokens_only), infos)
        files = [f for f, _ in found]
        out.entries += [f"skip\0{f}\0{reason}" for f, reason, _ in skipped]
        out.exists |= exists
    for f in files:
        line = infos.get(f) or remote.stat_line(f)
        out.exists |= not line.startswith("error")
        out.entries.append(f"file\0{f}")
        out.stats.append(f"{f}\0{line}")


def add_file_stats(out: Listing, files: Iterable[str], now: int) -> None:
    """Append each file's listing line and stat line to `out` (no content read); also the listing of
    ``codept prepare-text`` (codept.text.prepare), whose files come from its own discovery."""
    for f in files:
        try:
            st = os.stat(f)
        except OSError as e:
            out.stats.append(f"{f}\0error {e.errno}")
            continue
        out.exists = True
        out.entries.append(f"file\0{f}")
        out.stats.append(f"{f}\0{st.st_dev} {st.st_ino} {st.st_size} {st.st_mtime_ns} {st.st_ctime_ns}")
        out.racy |= max(st.st_mtime_ns, st.st_ctime_ns) >= now - RACY_NS


def record_text(rec: Record, max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    """The record's text after the file-level filters; raises SkipFile(reason) like read_source."""
    if rec.content is None:
        return read_source(rec.path, max_bytes)
    if isinstance(rec.content, bytes):
        return decode_source(rec.content, max_bytes)
    text = rec.content.removeprefix(BOM)
    if len(text) > max_bytes:  # cheap bound first: a char is at least one byte
        raise SkipFile("too_large", f"{len(text)} chars > max_bytes={max_bytes}")
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as e:  # lone surrogates, e.g. a JSON "\ud800" escape
        raise SkipFile("bad_utf8", f"unencodable code point at char {e.start}") from e
    if size > max_bytes:
        raise SkipFile("too_large", f"{size} bytes > max_bytes={max_bytes}")
    if "\0" in text[:8192]:
        raise SkipFile("binary", "NUL character in the first 8 KiB")
    if not text.strip():
        raise SkipFile("empty")
    return text
