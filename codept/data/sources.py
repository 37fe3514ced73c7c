"""Input discovery: which files a job reads, with every one of them accounted for.

1. ``stdlib_files()``: the running interpreter's standard library, the embedded default corpus
   (``sysconfig`` stdlib, without ``test/``, ``tests/``, ``idlelib/``, ``lib2to3/``, ``site-packages/``).
2. ``discover(sources, tokens_only)``: files and directories -> ``(path, lang)`` for files whose
   extension belongs to a grammar (or, with ``tokens_only``, to a token-only language), plus
   ``(path, reason)`` skips for everything else (unknown language, symlink loop, unreadable directory). Directories are walked without following symlinks; symlinked files are
   read once under their own path.
3. ``read_source(path, max_bytes)``: bytes -> text with the file-level filters (too large, binary,
   bad UTF-8, empty), raising SkipFile with a stable reason. A leading byte-order mark (U+FEFF,
   common in files saved on Windows) is an encoding marker, not content: it is dropped.
Not covered yet (data-pipeline issue): jsonl/parquet/HF inputs, dedup, redaction.
"""

from __future__ import annotations

import gzip
import os
import sysconfig
from pathlib import Path

from codept.data.jobs import SkipFile, printable, sha256_file  # noqa: F401  (sha256_file: its old home)

STDLIB_EXCLUDE = {"test", "tests", "idlelib", "lib2to3", "site-packages", "__pycache__"}
DEFAULT_MAX_BYTES = 1_000_000
BOM = "\ufeff"  # a leading byte-order mark is dropped when decoding


def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def stdlib_files() -> list[Path]:
    root = stdlib_root()
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in STDLIB_EXCLUDE)
        out.extend(Path(dirpath) / f for f in filenames if f.endswith(".py"))
    return sorted(out)


def walk(sources: list[str | os.PathLike], classify) -> tuple[list[tuple[str, str]], list[tuple[str, str, str]]]:
    """Every file under `sources`, accounted for: ``classify(path) -> (kind, None)`` keeps it as
    (path, kind), ``(None, (reason, detail))`` skips it. Returns (files, skips [(path, reason,
    detail)]), both sorted by path. Directories are walked without following symlinks; a file
    symlink found inside a walked folder whose target lies outside it (``notes.py -> ~/.ssh/id_rsa``)
    is a skip ``symlink_outside_input``, never read (a symlink named as a source itself is read)."""
    files: list[tuple[str, str]] = []
    skipped: list[tuple[str, str, str]] = []

    def add(p: Path) -> None:
        kind, why = classify(p)
        if kind is None:
            skipped.append((str(p), *why))
        else:
            files.append((str(p), kind))

    for src in sources:
        p = Path(src)
        if p.is_file():
            add(p)
            continue
        if not p.is_dir():
            skipped.append((str(p), "not_found" if not os.path.lexists(p) else "not_a_file", ""))
            continue
        errors: list[OSError] = []
        root = os.path.realpath(p)
        for dirpath, dirnames, filenames in os.walk(p, onerror=errors.append, followlinks=False):
            dirnames.sort()
            for d in dirnames:
                if os.path.islink(os.path.join(dirpath, d)):
                    skipped.append((os.path.join(dirpath, d), "symlinked_directory", ""))
            for f in sorted(filenames):
                fp = Path(dirpath) / f
                if fp.is_symlink() and not fp.exists():
                    skipped.append((str(fp), "broken_symlink", ""))
                elif not fp.is_file():
                    skipped.append((str(fp), "not_a_file", ""))
                elif fp.is_symlink() and os.path.commonpath([root, target := os.path.realpath(fp)]) != root:
                    skipped.append((str(fp), "symlink_outside_input", f"a link to {printable(target)}, outside {printable(root)}"))
                else:
                    add(fp)
        skipped.extend((e.filename or str(p), "unreadable_directory", "") for e in errors)
    return sorted(files), sorted(skipped)


def discover(sources: list[str | os.PathLike], tokens_only: bool = False) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """Code files -> (files [(path, lang)], skipped [(path, reason)]), both sorted by path.
    ``tokens_only``: files of a token-only language (grammars/tokens_only.toml: extension or file
    name, e.g. ``Makefile``) are kept too, with that language."""

    files, skipped = walk(sources, language_classifier(tokens_only))
    return files, [(p, r) for p, r, _ in skipped]


def language_classifier(tokens_only: bool = False):
    """The ``classify`` of code files for :func:`walk` (and codept.data.remote.walk): a file's
    language by extension or name, else a skip ``unknown_language``."""
    from codept.languages import language_for_path, view_language_for_path

    find = view_language_for_path if tokens_only else language_for_path

    def classify(p: Path):
        lang = find(p)
        return (lang, None) if lang else (None, ("unknown_language", ""))

    return classify


def read_bytes(path: str | os.PathLike, max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
    """At most max_bytes + 1 bytes of a file (``.gz`` decompressed) or of an object-store URL
    (codept.data.remote), or SkipFile too_large / unreadable. Every reader of a corpus file goes
    through here, so the size rule is one rule."""
    from codept.data import remote

    if remote.is_url(str(path)):
        return remote.read_bytes(str(path), max_bytes)
    try:
        size = os.path.getsize(path)
        if size > max_bytes:
            raise SkipFile("too_large", f"{size} bytes > max_bytes={max_bytes}")
        opener = gzip.open if str(path).endswith(".gz") else open
        with opener(path, "rb") as f:
            return f.read(max_bytes + 1)
    except (OSError, EOFError) as e:
        raise SkipFile("unreadable", f"{type(e).__name__}: {e}") from e


def read_source(path: str | os.PathLike, max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    """Read and decode one source file, or raise SkipFile naming the filter that refused it."""
    return decode_source(read_bytes(path, max_bytes), max_bytes)


def decode_source(data: bytes, max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    if len(data) > max_bytes:
        raise SkipFile("too_large", f"{len(data)} bytes > max_bytes={max_bytes}")
    if b"\0" in data[:8192]:
        raise SkipFile("binary", "NUL byte in the first 8 KiB")
    try:
        text = data.decode("utf-8").removeprefix(BOM)
    except UnicodeDecodeError as e:
        raise SkipFile("bad_utf8", f"invalid UTF-8 at byte {e.start}") from e
    if not text.strip():
        raise SkipFile("empty")
    return text
