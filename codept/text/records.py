"""Record formats -> pairs (PairDoc) and documents (TextDoc): jsonl and TSV lines, gettext catalogs;
read through codept.text.readers (:func:`codept.text.readers.read_file`).

1. pairs from jsonl (``.jsonl``): one JSON object per line with ``src`` and ``tgt`` (+ optional
   ``src_lang``/``tgt_lang``), or code pairs as codept.objectives.translate reads them (``lang_a``,
   ``code_a``, ``lang_b``, ``code_b``); a line with ``text`` (+ optional ``lang``) is a document instead.
2. pairs from TSV (``.tsv``): ``src<TAB>tgt`` per line (further columns ignored).
   Both are read a line at a time (no file size limit; ``max_bytes`` bounds a line) with per-line
   accounting: a bad line (not JSON, e.g. 100k-deep; not an object; invalid UTF-8; a lone
   surrogate; over max_bytes) is a counted skip with its reason and line number, the rest is kept.
3. gettext catalogs (``.mo`` via stdlib ``gettext.GNUTranslations``; ``.po`` via polib, decoded by the
   header's charset; fuzzy and obsolete entries dropped). msgid (English) -> msgstr (first plural
   form); placeholders and accelerators are normalised (:func:`normalise_message`); kept when the
   source has >= ``min_src_words`` words, the target is non-empty and differs from the source.

Pair languages here: per record (jsonl), the catalog header ``Language:`` (target; source 'text'),
the path (``.../<locale>/LC_MESSAGES/x.mo``, ``po/de.po``, ``name.en-de.tsv``); a side may be a code
language (:func:`pair_lang`).
Cost: linear in the input; polib ~8.5 MB/s on one core (imported on first use). Limits: a catalog is
read whole (up to ``max_bytes``); only the first plural form is kept; a line's dropped entries show
their first three line numbers.
"""

from __future__ import annotations

import codecs
import gettext
import gzip
import io
import json
import os
import re
import struct
import zlib
from pathlib import Path
from typing import Iterable, Iterator

from codept.data.jobs import SkipFile, printable
from codept.text.items import Item, PairDoc, Skip, TextDoc, input_bytes
from codept.text.prose import plain_to_text
from codept.text.segment import count_words, guess_lang, normalise_lang


# -- pairs: jsonl, TSV ------------------------------------------------------------------------------

_PAIR_SUFFIX = re.compile(r"\.([A-Za-z]{2,3}(?:_[A-Za-z]{2,4})?)-([A-Za-z]{2,3}(?:_[A-Za-z]{2,4})?)$")


def pair_lang(name: str) -> str:
    """A pair side's language: a code language of ``grammars/`` by its name ('python', 'go', 'c') or
    by an alias that names no locale ('py', 'golang', 'c++'; 'cs', 'sh' and 'ts' stay Czech,
    Serbo-Croatian and Tsonga: Python's locale table knows them), else a natural language
    (:func:`codept.text.segment.normalise_lang`). ValueError for neither."""
    import locale

    from codept.languages import available_languages, canonical_language

    key = name.strip().lower() if isinstance(name, str) else name
    if key in available_languages():
        return key
    code = canonical_language(key)
    if code is not None and key not in locale.locale_alias:
        return code
    return normalise_lang(name)


def langs_from_name(path: str) -> tuple[str, str] | None:
    """``name.en-zh_CN.tsv`` -> ('text', 'zh'), ``name.py-js.tsv`` -> ('python', 'javascript'); None
    when the name carries no pair."""
    name = Path(path).name
    for suf in (".gz", ".tsv", ".jsonl"):
        if name.endswith(suf):
            name = name[: -len(suf)]
    m = _PAIR_SUFFIX.search(name)
    if not m:
        return None
    try:
        return pair_lang(m.group(1)), pair_lang(m.group(2))
    except ValueError:
        return None


def _chunk_lines(data: bytes, first_line: int) -> Iterator[tuple[int, bytes]]:
    """(1-based line number, line bytes without the newline) of a chunk of whole lines."""
    for i, line in enumerate(data.split(b"\n"), first_line + 1):
        yield i, line


def _file_lines(path: str, max_bytes: int, data: bytes | None) -> Iterator[tuple[int, bytes]]:
    """(line number, line) of a file, read a line at a time (``.gz`` decompressed); a line over
    `max_bytes` is yielded as its first max_bytes + 1 bytes (the caller counts it too_large), the
    rest of it skipped unread into memory. `data`: the file's bytes, already read."""
    try:
        raw = io.BytesIO(data) if data is not None else open(path, "rb")
        with (gzip.GzipFile(fileobj=raw) if path.endswith(".gz") else raw) as f:
            n = 0
            while line := f.readline(max_bytes + 1):
                n += 1
                if len(line) > max_bytes and not line.endswith(b"\n"):
                    while (rest := f.readline(1 << 20)) and not rest.endswith(b"\n"):
                        pass
                yield n, line.rstrip(b"\n")
    except (OSError, EOFError, zlib.error) as e:
        raise SkipFile("unreadable", f"{type(e).__name__}: {e}") from e


class _Dropped:
    """Lines dropped inside a pair file, counted per reason, with the first few line numbers and why."""

    def __init__(self, path: str):
        self.path, self.by = path, {}

    def add(self, reason: str, line_no: int, why: str) -> None:
        n, shown = self.by.get(reason, (0, []))
        if len(shown) < 3:
            shown.append(f"line {line_no}: {why}")
        self.by[reason] = (n + 1, shown)

    def skips(self) -> Iterator[Skip]:
        for reason, (n, shown) in sorted(self.by.items()):
            yield Skip(self.path, reason, "; ".join(shown) + (" ..." if n > len(shown) else ""), n)


def _line_text(raw: bytes, line_no: int, max_bytes: int, dropped: _Dropped) -> str | None:
    """A line's text, or None (counted: too_large, bad_utf8); blank lines are None, not counted."""
    if len(raw) > max_bytes:
        dropped.add("too_large", line_no, f"over max_bytes={max_bytes}")
        return None
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        dropped.add("bad_utf8", line_no, f"invalid UTF-8 at byte {e.start}")
        return None
    line = line.removeprefix("\ufeff").rstrip("\r") if line_no == 1 else line.rstrip("\r")
    return line if line.strip() else None


def _encodable(*values) -> bool:
    """No lone surrogate (a JSON ``\\ud800`` escape): such text cannot be written as UTF-8."""
    try:
        for v in values:
            if isinstance(v, str):
                v.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def _read_jsonl(path: str, lines: Iterable[tuple[int, bytes]], lang: str | None, pair_langs,
                max_bytes: int) -> Iterator[Item]:
    """Per-line accounting: a bad line (not JSON, too deep, not an object, a lone surrogate, invalid
    UTF-8, over max_bytes) is a counted skip with its reason and line number; the rest is kept."""
    default = pair_langs or langs_from_name(path)
    dropped = _Dropped(path)
    shown = printable(path)
    for i, raw in lines:
        line = _line_text(raw, i, max_bytes, dropped)
        if line is None:
            continue
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError) as e:  # RecursionError: a 100k-deep nested line
            dropped.add("bad_record", i, f"not JSON: {type(e).__name__}: {str(e)[:80]}")
            continue
        if not isinstance(rec, dict):
            dropped.add("bad_record", i, f"not an object: {type(rec).__name__}")
            continue
        if not _encodable(rec.get("src"), rec.get("tgt"), rec.get("text"), rec.get("lang"),
                          rec.get("src_lang"), rec.get("tgt_lang")):
            dropped.add("bad_utf8", i, "a lone surrogate (\\ud800-\\udfff escape) in a field")
            continue
        where = f"{shown}#{i}"
        if all(isinstance(rec.get(k), str) for k in ("lang_a", "code_a", "lang_b", "code_b")):
            rec = {"src": rec["code_a"], "tgt": rec["code_b"], "src_lang": rec["lang_a"], "tgt_lang": rec["lang_b"]}
        if isinstance(rec.get("src"), str) and isinstance(rec.get("tgt"), str):
            src, tgt = rec["src"].strip(), rec["tgt"].strip()
            if not src or not tgt:
                dropped.add("empty_side", i, "src or tgt is empty")
                continue
            try:
                sl = pair_lang(rec["src_lang"]) if "src_lang" in rec else (default[0] if default else None)
                tl = pair_lang(rec["tgt_lang"]) if "tgt_lang" in rec else (default[1] if default else None)
            except (ValueError, AttributeError, TypeError):
                sl = tl = None
            if sl is None or tl is None:
                dropped.add("unknown_pair_langs", i, "no src_lang/tgt_lang, pair_langs or NAME.SRC-TGT.jsonl")
                continue
            yield PairDoc(where, sl, tl, src, tgt)
        elif isinstance(rec.get("text"), str):
            body = plain_to_text(rec["text"])
            if not body:
                dropped.add("empty_side", i, "text is empty")
                continue
            try:
                dl = normalise_lang(rec["lang"]) if isinstance(rec.get("lang"), str) else (lang or guess_lang(body))
            except ValueError:
                dropped.add("unknown_pair_langs", i, f"lang={rec['lang']!r}")
                continue
            yield TextDoc(where, dl, body)
        else:
            dropped.add("bad_record", i, "needs src+tgt (+langs), lang_a+code_a+lang_b+code_b, or text")
    yield from dropped.skips()


def _read_tsv(path: str, lines: Iterable[tuple[int, bytes]], pair_langs, max_bytes: int) -> Iterator[Item]:
    langs = pair_langs or langs_from_name(path)
    if langs is None:
        raise SkipFile("unknown_pair_langs", "pass pair_langs or name the file NAME.SRC-TGT.tsv")
    dropped = _Dropped(path)
    shown = printable(path)
    for i, raw in lines:
        line = _line_text(raw, i, max_bytes, dropped)
        if line is None:
            continue
        cols = line.split("\t")
        if len(cols) < 2 or not cols[0].strip() or not cols[1].strip():
            dropped.add("bad_row", i, "a TSV row needs two non-empty columns")
            continue
        yield PairDoc(f"{shown}#{i}", langs[0], langs[1], cols[0].strip(), cols[1].strip())
    yield from dropped.skips()


# -- gettext --------------------------------------------------------------------------------------

# printf (C, with positions/flags/length modifiers, <inttypes.h> macros), Python %(name)s, and
# {0} / {name} format fields; '%%' is a literal percent sign
PLACEHOLDER = re.compile(
    r"%%"
    r"|%(?:\d+\$)?[-+ #0']*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|L|q|j|z|Z|t|I64|I32)?[diouxXeEfFgGaAcCsSpnm]"
    r"|%<PRI[a-zA-Z0-9]+>"
    r"|%\([A-Za-z_][\w.-]*\)[-+ #0]*\d*(?:\.\d+)?[diouxXeEfFgGcrsa]"
    r"|\{\d*\}|\{[A-Za-z_]\w*\}")
_ACCEL_PAREN = re.compile(r"\s*[(（]\s*[_&][A-Za-z0-9]\s*[)）]")
_ACCEL_US_INITIAL = re.compile(r"(?<!\w)_(?=[^\W_])")
_ACCEL_US_INNER = re.compile(r"(?<=[^\W\d_])_(?=[^\W\d_])")
_ACCEL_AMP = re.compile(r"&&|&(?!#?\w+;)(?=\w)")


def normalise_message(s: str) -> str:
    """A catalog string with its markup normalised, as DATA.md asks:

    1. every placeholder (``%s``, ``%1$d``, ``%-5.2f``, ``%lu``, ``%m``, ``%<PRIu64>``, ``%(name)s``,
       ``{0}``, ``{name}``) becomes ``%s``; ``%%`` becomes ``%``;
    2. accelerators are removed: ``(_F)`` / ``(&F)`` after a label (CJK catalogs), a word-initial
       ``_`` (``_File``, ``Save _As``), a single inner ``_`` between letters when the message has
       exactly one ``_`` and the word is not all lowercase (``E_xit``, not ``file_name``), and ``&``
       before a word character (``&Open``, ``Sa&ve``; ``&&`` -> ``&``; entities such as ``&amp;``
       are kept);
    3. surrounding whitespace is stripped.
    """
    s = PLACEHOLDER.sub(lambda m: "%" if m.group() == "%%" else "%s", s)
    s = _ACCEL_PAREN.sub("", s)
    if "_" in s:
        if s.count("_") == 1:
            m = _ACCEL_US_INNER.search(s)
            if m:
                w0 = re.search(r"\w*$", s[: m.start()]).group()
                w1 = re.match(r"\w*", s[m.end() :]).group()
                if not (w0 + w1).islower():
                    s = s[: m.start()] + s[m.end() :]
        s = _ACCEL_US_INITIAL.sub("", s)
    if "&" in s:
        s = _ACCEL_AMP.sub(lambda m: "&" if m.group() == "&&" else "", s)
    return s.strip()


def catalog_pairs(path: str, entries: Iterable[tuple[str, str]], src_lang: str, tgt_lang: str,
                  min_src_words: int) -> Iterator[Item]:
    """(msgid, msgstr) -> PairDocs (path ``file#index``) + aggregated skips per drop reason."""
    dropped: dict[str, int] = {}
    for i, (msgid, msgstr) in enumerate(entries):
        if not msgid:  # the header entry
            continue
        src, tgt = normalise_message(msgid), normalise_message(msgstr)
        reason = None
        if not tgt:
            reason = "empty_target"
        elif src == tgt:
            reason = "untranslated"
        elif count_words(PLACEHOLDER.sub(" ", src.replace("%s", " "))) < min_src_words:
            reason = "short_source"
        if reason:
            dropped[reason] = dropped.get(reason, 0) + 1
            continue
        yield PairDoc(f"{path}#{i}", src_lang, tgt_lang, src, tgt)
    for reason, n in sorted(dropped.items()):
        yield Skip(path, reason, f"catalog entries dropped (min_src_words={min_src_words})", n)


_LOCALE_DIR = re.compile(r"(?:^|/)([a-z]{2,3}(?:_[A-Z]{2})?)(?:\.[\w-]+)?(?:@\w+)?/LC_MESSAGES/[^/]+$")
_LOCALE_NAME = re.compile(r"([a-z]{2,3}(?:_[A-Z]{2})?)(?:\.[\w-]+)?(?:@\w+)?")


def catalog_langs(path: str, header_language: str | None, pair_langs) -> tuple[str, str] | None:
    if pair_langs:
        return pair_langs
    for cand in (header_language,):
        if cand:
            try:
                return "text", normalise_lang(cand)
            except ValueError:
                pass
    m = _LOCALE_DIR.search(path.replace(os.sep, "/"))
    stem = Path(path).stem
    code = m.group(1) if m else (stem if _LOCALE_NAME.fullmatch(stem) else None)
    if code:
        try:
            return "text", normalise_lang(code)
        except ValueError:
            return None
    return None


def _mo_entries(catalog: dict) -> Iterator[tuple[str, str]]:
    for k, v in catalog.items():
        if isinstance(k, tuple):  # plural: (msgid, n) -> take form 0 only
            if k[1] != 0:
                continue
            k = k[0]
        if "\x04" in k:  # msgctxt \x04 msgid
            k = k.split("\x04", 1)[1]
        yield k, v


def _read_mo(path: str, pair_langs, max_bytes: int, min_src_words: int, data: bytes | None) -> Iterator[Item]:
    data = input_bytes(path, max_bytes, data)
    try:  # gettext reports a bad magic number as OSError(0, ...), a bad charset as LookupError
        t = gettext.GNUTranslations(io.BytesIO(data))
    except (OSError, ValueError, LookupError, UnicodeDecodeError, IndexError, KeyError, struct.error) as e:
        raise SkipFile("bad_catalog", f"{type(e).__name__}: {e}") from e
    langs = catalog_langs(path, t.info().get("language"), pair_langs)
    if langs is None:
        raise SkipFile("unknown_pair_langs", "no Language header, locale directory or pair_langs")
    yield from catalog_pairs(path, _mo_entries(t._catalog), langs[0], langs[1], min_src_words)


# .po: polib ------------------------------------------------------------------------------------


def _po_catalog(text: str):
    """The polib catalog of decoded .po text; a syntax error is a SkipFile naming the line."""
    import polib

    try:  # polib opens its argument when it names a file (os.path.isfile): a first comment line holding a
        # NUL makes isfile raise ValueError, so the text is never taken for a path (``/etc/passwd\n``)
        return polib.pofile("# \0\n" + text, check_for_duplicates=False)
    except (OSError, ValueError) as e:  # (line numbers of the text as given, without that first line)
        msg = re.sub(r"\(line (\d+)\)", lambda m: f"(line {int(m.group(1)) - 1})", str(e))
        raise SkipFile("bad_catalog", f"polib: {msg}") from e


def _read_po(path: str, pair_langs, max_bytes: int, min_src_words: int, data: bytes | None) -> Iterator[Item]:
    raw = input_bytes(path, max_bytes, data)
    if len(raw) > max_bytes:
        raise SkipFile("too_large", f"> max_bytes={max_bytes} after decompression")
    text = _decode_po(path, raw)
    po = _po_catalog(text.replace("\r\n", "\n"))
    langs = catalog_langs(path, po.metadata.get("Language"), pair_langs)
    if langs is None:
        raise SkipFile("unknown_pair_langs", "no Language header, locale directory, locale file name or pair_langs")
    live = [e for e in po if not e.obsolete]
    fuzzy = sum(1 for e in live if e.fuzzy)
    pairs = [(e.msgid, e.msgstr or e.msgstr_plural.get(0, "")) for e in live if not e.fuzzy]
    yield from catalog_pairs(path, pairs, langs[0], langs[1], min_src_words)
    if fuzzy:
        yield Skip(path, "fuzzy", "fuzzy entries are not reviewed translations", fuzzy)


def _decode_po(path: str, data: bytes) -> str:
    """Decode by the header's charset (the template placeholder ``CHARSET`` and no header mean UTF-8)."""
    m = re.search(rb"charset=([A-Za-z0-9_.:-]+)", data[:4096])
    charset = m.group(1).decode("ascii") if m else "utf-8"
    if charset.upper() == "CHARSET":
        charset = "utf-8"
    try:
        codecs.lookup(charset)
        return data.decode(charset)
    except (LookupError, UnicodeDecodeError) as e:
        raise SkipFile("bad_catalog", f"charset {charset!r}: {type(e).__name__}") from e
