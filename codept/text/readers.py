"""Natural-language inputs -> documents (TextDoc), translation pairs (PairDoc) and skips: which reader
a file gets, the limits every reader runs under, and the cache key of the parsers behind them.

Every input file is accounted for: :func:`read_file` yields at least one TextDoc/PairDoc, or a
:class:`Skip` naming the file and a stable reason. Skips with ``count > 1`` (or a path ``file``
that also yielded documents) are entries dropped inside a kept file, aggregated per reason
(``short_source: 3120``) so a 40k-entry catalog does not write 40k manifest rows. Bad input never
raises: a read or decode failure is a skip ``reader_error``, a maintained parser's exception
``parser_error``, a file with nothing left ``no_documents``.

Formats (:func:`format_of`, by file name; ``.gz`` is decompressed for the text formats), each read by
its own module:

1. plain text (``.txt``, ``.text``), Markdown (``.md``, ``.markdown``; markdown-it-py) and
   reStructuredText (``.rst``, ``.rest``; docutils), and a ``.txt`` after ``.rst`` or ``.md``
   (Sphinx's ``_sources/x.rst.txt``) as that format: codept.text.prose (markup to paragraphs);
2. man pages (``name.N[suffix][.gz|.bz2|.xz|.zst]``, e.g. ``ls.1.gz``), rendered by groff with the
   requests that read a file or run a command removed: codept.text.man;
3. pairs and documents from jsonl (``.jsonl``), pairs from TSV (``.tsv``) and gettext catalogs
   (``.mo``, ``.po``; polib): codept.text.records.

The item types and the helpers the readers share (:func:`codept.text.items.input_bytes`) are in
codept.text.items, below all of these modules.

Limits (:func:`read_file`): ``max_bytes`` (TEXT_MAX_BYTES) bounds a document or catalog file and a
jsonl/TSV line (a pair file is read a line at a time, with no size limit); ``min_src_words`` a
catalog pair's source; ``man_timeout_s`` one groff run; ``rst_line_limit`` the reST lines that are
parsed. :func:`discover` never reads a symlink found in a folder that leads out of it.

Pair languages, first found: the ``pair_langs`` argument; per record (jsonl); the catalog header
``Language:`` (target; source 'text'); the path (``.../<locale>/LC_MESSAGES/x.mo``, ``po/de.po``,
``name.en-de.tsv``). Document language: the ``lang`` argument, a man page's locale directory, else
:func:`codept.text.segment.guess_lang` ('zh', 'ja' or 'text'). All languages pass through
:func:`codept.text.segment.normalise_lang` (English -> 'text', Chinese -> 'zh'); a pair side given by
the record or ``pair_langs`` may also be a code language (:func:`codept.text.records.pair_lang`:
'python', 'java', ...), the pairs the ``translate`` objective trains on.

:func:`fingerprint` names the parser versions for cache keys.
Cost: linear in the input, that of the format's reader (see each module): docutils ~0.8 MB/s,
markdown-it-py ~3 MB/s, polib ~8.5 MB/s on one core, man pages ~50-100 ms each (groff); discovery is
one walk of the sources. Not covered: HTML, PDF, DocBook, texinfo; dedup and redaction (codept.data
handles them).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Iterable, Iterator

from codept.data import remote
from codept.data.jobs import SkipFile
from codept.data.sources import decode_source, walk
from codept.text.items import Item, Skip, TextDoc, _refusals, input_bytes
from codept.text.man import MAN_TIMEOUT_S, _read_man
from codept.text.prose import RST_LINE_LIMIT, markdown_read, plain_to_text, rst_read
from codept.text.records import _chunk_lines, _file_lines, _read_jsonl, _read_mo, _read_po, _read_tsv, pair_lang
from codept.text.segment import guess_lang, normalise_lang

TEXT_MAX_BYTES = 8_000_000  # per input file; views cost ~20 bytes of temporaries per char
MIN_SRC_WORDS = 3


# -- formats --------------------------------------------------------------------------------------

_EXT = {".txt": "plain", ".text": "plain", ".md": "markdown", ".markdown": "markdown", ".rst": "rst",
        ".rest": "rst", ".jsonl": "jsonl", ".tsv": "tsv", ".mo": "mo", ".po": "po"}
_MAN_NAME = re.compile(r".+\.[1-9][a-z0-9]{0,6}(?:\.(?:gz|bz2|xz|lzma|zst))?")
FORMATS = ("plain", "markdown", "rst", "man", "jsonl", "tsv", "mo", "po")
PARSERS = {"markdown": "markdown-it-py", "rst": "docutils", "po": "polib"}  # the maintained parser per format


def format_of(path: str | os.PathLike) -> str | None:
    """The reader kind for a file name, or None."""
    name = Path(path).name
    base = name[:-3] if name.endswith(".gz") else name
    kind = _EXT.get(Path(base).suffix.lower())
    if kind == "plain":  # Sphinx ships its sources as _sources/x.rst.txt: the inner suffix says
        inner = _EXT.get(Path(Path(base).stem).suffix.lower())
        kind = inner if inner in ("rst", "markdown") else kind
    if kind == "mo" and name.endswith(".gz"):
        return None
    if kind is not None:
        return kind
    return "man" if _MAN_NAME.fullmatch(name) else None


def discover(sources: Iterable[str | os.PathLike], infos: dict | None = None) -> tuple[list[tuple[str, str]], list[Skip]]:
    """Files and directories -> (files [(path, kind)], skips), both sorted by path
    (codept.data.sources.walk); unknown formats are skips ``unknown_format``. A symlink found while
    walking a folder whose target lies outside that folder (``notes.txt -> ~/.ssh/id_rsa``) is a
    skip ``symlink_outside_input``, never read; a symlink named as a source itself is read. A
    source may be an object-store URL (codept.data.remote.walk: an object or a prefix); `infos` gets
    each object's stat line from that listing."""

    def classify(p: Path):
        kind = format_of(p)
        if kind is None:
            return None, ("unknown_format", f"suffix {p.suffix!r} not in {sorted(_EXT)} or name.N")
        return kind, None

    files: list[tuple[str, str]] = []
    skipped: list[tuple[str, str, str]] = []
    for src in sources:
        if remote.is_url(str(src)):  # an object or a prefix in a store: objects, no symlinks
            found, skips, _ = remote.walk(str(src), classify, infos)
            files, skipped = files + found, skipped + skips
            continue
        found, skips = walk([remote.local_path(str(src))], classify)  # links out of a folder: skips
        files, skipped = files + found, skipped + skips
    return sorted(files), [Skip(p, r, d) for p, r, d in sorted(skipped)]


def read_sources(sources: Iterable[str | os.PathLike], **kw) -> Iterator[Item]:
    """Every item of every file under `sources` (see :func:`read_file` for keyword arguments),
    discovery skips first, then files in path order."""
    files, skips = discover(sources)
    yield from skips
    for path, kind in files:
        yield from read_file(path, kind, **kw)


def read_file(path: str | os.PathLike, kind: str | None = None, *, lang: str | None = None,
              pair_langs: tuple[str, str] | None = None, max_bytes: int = TEXT_MAX_BYTES,
              min_src_words: int = MIN_SRC_WORDS, man_timeout_s: float = MAN_TIMEOUT_S,
              rst_line_limit: int = RST_LINE_LIMIT, data: bytes | None = None,
              first_line: int | None = None) -> Iterator[Item]:
    """Documents, pairs and skips of one file; at least one item, never an exception for bad input
    (bad arguments raise ValueError).

    `max_bytes`: the largest document or catalog file, and the longest jsonl/TSV line (a pair file
    has no size limit: it is read a line at a time). `rst_line_limit`: reST lines longer than this
    are kept as plain text, not parsed (docutils' own limit empties the whole document; inline
    markup parsing is quadratic in a line's length). `data`: the file's bytes as read from disk
    (prepare-text's main process reads each input once). `first_line`: `data` is a chunk of whole
    lines of a jsonl/TSV file (already decompressed) whose first line is line ``first_line + 1``;
    then no ``no_documents`` skip is added (the caller accounts for the file)."""
    path = str(path)
    kind = kind or format_of(path)
    if kind not in FORMATS:
        if kind is None:
            yield Skip(path, "unknown_format", f"{Path(path).name!r}")
            return
        raise ValueError(f"kind={kind!r} is not a text format; expected one of {FORMATS}")
    if lang is not None:
        lang = normalise_lang(lang)
    if pair_langs is not None:
        if len(pair_langs) != 2:
            raise ValueError(f"pair_langs={pair_langs!r}: expected (src_lang, tgt_lang)")
        pair_langs = (pair_lang(pair_langs[0]), pair_lang(pair_langs[1]))
    n_docs = 0
    try:
        if kind == "man":
            it = _read_man(path, lang, man_timeout_s, max_bytes, data)
        elif kind == "mo":
            it = _read_mo(path, pair_langs, max_bytes, min_src_words, data)
        elif kind == "po":
            it = _read_po(path, pair_langs, max_bytes, min_src_words, data)
        elif kind in ("jsonl", "tsv"):
            lines = _chunk_lines(data, first_line) if first_line is not None else _file_lines(path, max_bytes, data)
            it = (_read_jsonl(path, lines, lang, pair_langs, max_bytes) if kind == "jsonl"
                  else _read_tsv(path, lines, pair_langs, max_bytes))
        else:
            text = _read_text(path, max_bytes, data)
            if kind == "rst":
                body, refused = rst_read(text, rst_line_limit)
            else:
                body, refused = markdown_read(text) if kind == "markdown" else (plain_to_text(text), [])
            it = _doc_and_refusals(path, lang, body, refused)
        for item in it:
            n_docs += not isinstance(item, Skip)
            yield item
    except SkipFile as e:
        yield Skip(path, e.reason, e.detail)
        return
    except (ValueError, UnicodeError, RecursionError, MemoryError, OSError) as e:  # hostile input, never a crash
        yield Skip(path, "reader_error", f"{type(e).__name__}: {str(e)[:200]}")
        return
    except Exception as e:  # a third-party parser failing on one file makes that file a skip, not a crash
        if kind not in PARSERS:
            raise
        yield Skip(path, "parser_error", f"{PARSERS[kind]}: {type(e).__name__}: {str(e)[:200]}")
        return
    if n_docs == 0 and first_line is None:
        yield Skip(path, "no_documents", f"{kind}: nothing left after clean-up and filters")


def _doc_and_refusals(path: str, lang: str | None, body: str, refused) -> Iterator[Item]:
    if body.strip():
        yield TextDoc(path, lang or guess_lang(body), body)
    for reason, what in (("include_refused", "directive that reads a file, not followed"),
                         ("raw_refused", "raw output, dropped"),
                         ("long_line_unparsed", "lines over rst_line_limit kept as plain text")):
        yield from _refusals(path, [(n, t) for r, n, t in refused if r == reason], reason, what)


def _read_text(path: str, max_bytes: int, data: bytes | None = None) -> str:
    raw = input_bytes(path, max_bytes, data)
    return decode_source(raw, max_bytes).replace("\r\n", "\n").replace("\r", "\n")


# -- cache key ------------------------------------------------------------------------------------


def fingerprint() -> bytes:
    """Names and versions of the parsers behind the readers (``docutils=0.19;markdown-it-py=4.3.0;...``):
    a new parser version can change the text of every document, so text caches key on this."""
    from importlib.metadata import PackageNotFoundError, version

    parts = []
    for dist in ("docutils", "markdown-it-py", "polib"):
        try:
            parts.append(f"{dist}={version(dist)}")
        except PackageNotFoundError:
            parts.append(f"{dist}=missing")
    return ";".join(parts).encode()
