"""Doc summaries: the tokens of a definition's doc that a code-search query looks like, at prepare time.

:func:`summary_tokens` picks, from the token range of one doc, the tokens overlapping its first
sentence (codept.text.segment), without the quote / comment-marker / whitespace tokens that frame
it, a leading repeat of the function's name dropped (Go's "// Foo returns ..."), and, for the
languages of codept.text.markup.LANGS (java, javascript, php, ruby), Javadoc / JSDoc / PHPDoc / YARD
tags and HTML read as the probe's query cleaner reads them (codept.probe.query.clean_query).
:func:`doc_summaries` runs it once per documented definition of a view, when the view is built
(codept.structure.view: the ``summaries`` field), so that ``code_doc`` (doc="summary") reads a
summary as an index slice instead of doing this string work for every pair of every read.

1. The doc's chars: from its first token's start to its last token's end; a Python string prefix
   (``r\"\"\"``) is not a word; no word character, or a doctest (``>>>``) before the first word:
   no summary.
2. Markup languages: skip the markup that opens the doc (:func:`_first_text_word`).
3. The end: the first sentence / paragraph break after the start (only the first ``limit`` tokens
   are searched; a line holding only its comment marker, `` *`` / ``//`` / ``#``, is a blank line:
   "Get the ID\n *\n * The parent ..." ends at "ID"); markup languages also stop at a line opening
   with a block tag (``@param``) or block HTML (``<p>``).
4. The tokens overlapping [start, end), less markup-only tokens and framing marker tokens.
Cost: one regex pass over at most ``limit`` tokens of text per documented definition, once per
view (benchmarks/bench_structure.py measures the whole view).
Not covered: Python roles inside the summary (``:func:`x``` stays as tokens); ``{@link X label}``
keeps ``X label`` where the probe keeps only the label; HTML entities stay; dropping a markup token
that carries a space glues the words around it (``a <b>bar`` -> ``abar``); a doc whose first
sentence is a signature line.
"""

from __future__ import annotations

import re

import numpy as np

from codept.text import markup
from codept.text.segment import first_sentence_break

SUMMARY_CAP = 64  # tokens kept per doc in the view's ``summaries`` field (code_doc's max_doc_tokens up to this)
SUMMARY_LIMIT = 2 * SUMMARY_CAP + 8  # tokens searched for the first sentence break (markers dropped never need more)
_WORD = re.compile(r"\w")
_MARKER_ONLY = re.compile(r"[\s*/#'\"`]*")  # whitespace, quotes and comment markers only
_STRING_PREFIX = re.compile(r"\s*[rRbBuU]{1,2}(?=[\"'])")  # r\"\"\"...: the prefix is not a word
_LINE_LEAD = re.compile(r"[ \t]*(?:[*/#]+[ \t]*)?")  # a doc line's indentation and comment marker
_BLOCK_TAG = re.compile(r"\n" + _LINE_LEAD.pattern + "@[A-Za-z!]")  # a line opening with @param, @return, ...
_MARKER_LINE = re.compile(r"(?<=\n)[ \t]*[*/#]+[ \t]*(?=\n)")  # a doc line holding only its comment marker


def _blank_marker_lines(doc: str) -> str:
    """`doc` with every line that holds only a comment marker (`` *`` of ``/** */``, ``//``, ``#``)
    made blank, char for char (offsets unchanged): such a line is the empty line of a comment, so
    it breaks a paragraph as a blank line does (codept.text.segment.paragraph_breaks; the probe's
    query cleaner strips the markers before it looks for paragraphs)."""
    return _MARKER_LINE.sub(lambda m: " " * len(m.group()), doc)


def summary_tokens(text: str, offsets: np.ndarray, ds: int, de: int, name: str = "", lang: str = "",
                   limit: int | None = None) -> np.ndarray:
    """Token indices (K,) int64 in [ds, de) of the doc's summary: the tokens overlapping the chars
    from the doc's first word character to its first sentence break (codept.text.segment, paragraph
    breaks included), minus the tokens made only of whitespace, quotes and comment markers that
    hold a newline, open a line, or open or close the doc (inside a line they stay: 'the "call"
    list'). A leading `name` (the documented function's name: "// Foo returns ...") is skipped.
    For `lang` in codept.text.markup.LANGS (java, javascript, php, ruby), as the probe's query
    cleaner reads such docs: the markup opening the doc is skipped (:func:`_first_text_word`), a
    line opening with a block tag (``@param``) or block HTML (``<p>``) ends the summary, and
    tokens holding only inline-tag / HTML markup (``{@code``, its ``}``, ``<b>``), or markup and
    punctuation (``}.``), are dropped.
    Empty when the doc has no word character, only tags, or opens with a doctest (``>>>``).
    ``limit``: only the first `limit` tokens from the summary's start are read (the caller keeps
    fewer: a long docstring's sentence search need not run to its end)."""
    empty = np.zeros(0, dtype=np.int64)
    off = np.asarray(offsets).reshape(-1, 2)
    c0, c1 = int(off[ds, 0]), int(off[de - 1, 1])
    doc = text[c0:c1]
    prefix = _STRING_PREFIX.match(doc)
    m = _WORD.search(doc, prefix.end() if prefix else 0)
    if m is None or ">>>" in doc[: m.start()]:  # no words, or a doc that opens with a doctest
        return empty
    html = lang in markup.LANGS
    first = _first_text_word(text, c0, c0 + m.start(), c1, lang) if html else c0 + m.start()
    if first is None:
        return empty
    start = first - c0
    if name and doc.startswith(name, start) and doc[start + len(name): start + len(name) + 1].isspace():
        start += len(name) + 1
    stop = len(doc)
    if limit is not None:
        first_tok = ds + int(np.searchsorted(off[ds:de, 1], c0 + start, side="right"))
        stop = min(stop, int(off[min(de - 1, first_tok + limit), 1]) - c0)
    brk = first_sentence_break(_blank_marker_lines(doc[start:stop]))
    end = start + (brk if brk is not None else stop - start)
    if html:  # Javadoc / JSDoc / PHPDoc / YARD: a block tag (@param) or block HTML (<p>) ends the text
        for stop in (_BLOCK_TAG.search(doc, start, end), markup.HTML_BLOCK.search(doc, start, end)):
            end = stop.start() if stop else end
    o = off[ds:de] - c0
    idx = np.flatnonzero((o[:, 1] > start) & (o[:, 0] < end))
    a, b = o[idx, 0], o[idx, 1]  # doc-relative
    lo, hi = np.maximum(a, start), np.minimum(b, end)
    keep = np.ones(len(idx), dtype=bool)
    if html:
        masked = _markup_mask(doc, end)
        count = np.concatenate([[0], np.cumsum(masked)])
        has_markup = count[hi] - count[lo] > 0
        for k in np.flatnonzero(has_markup | (hi < b)).tolist():
            # a token holding markup or running past the summary: kept for the text beside it, and
            # beside markup only for a word ("}." and ">," go, "e}" stays)
            l, h = int(lo[k]), int(hi[k])
            rest = "".join(ch for ch, mk in zip(doc[l:h], masked[l:h]) if not mk).strip()
            if not rest or (has_markup[k] and not _WORD.search(rest)):
                keep[k] = False
    # tokens of whitespace, quotes and comment markers only (a superset first: any non-ASCII char
    # may be Unicode whitespace, the regex decides)
    other = np.concatenate([[0], np.cumsum(~_maybe_marker(doc[: int(b.max()) if len(b) else 0]))])
    for k in np.flatnonzero(keep & (other[b] == other[a])).tolist():
        ta, tb = c0 + int(a[k]), c0 + int(b[k])
        if _MARKER_ONLY.fullmatch(text, ta, tb):
            line_start = text.rfind("\n", 0, ta) + 1
            if "\n" in text[ta:tb] or ta < c0 + start or tb >= c1 or not text[max(line_start, c0 + start):ta].strip():
                keep[k] = False  # blank, opening / closing quotes, or a line's comment marker
    return ds + idx[keep]


_MARKER_ASCII = np.zeros(128, dtype=bool)  # the ASCII chars _MARKER_ONLY accepts
_MARKER_ASCII[[ord(c) for c in "*/#'\"`"] + [c for c in range(128) if chr(c).isspace()]] = True


def _maybe_marker(doc: str) -> np.ndarray:
    """(len(doc),) bool: chars that _MARKER_ONLY may accept (every non-ASCII char: it may be space)."""
    if doc.isascii():
        return _MARKER_ASCII[np.frombuffer(doc.encode("ascii"), dtype=np.uint8)]
    codes = np.frombuffer(doc.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    return (codes >= 128) | _MARKER_ASCII[np.minimum(codes, 127)]


def _first_text_word(text: str, begin: int, pos: int, end: int, lang: str) -> int | None:
    """For a doc text[begin:end] with markup (codept.text.markup.LANGS): `pos` (its first word
    character), or the first word after the markup that opens the doc, as the probe's query cleaner
    reads it: HTML tags (``<p>``) and inline-tag names (``{@code`` of ``{@code x}``) are skipped;
    block tags opening a line are skipped in Ruby (YARD's ``@api private``, with their indented
    continuation lines), give the tag's text for ``@description`` / ``@summary``, and otherwise
    mean no summary (a Javadoc with no text before its tags). None when nothing is left."""
    while True:
        skip = _markup_at(text, begin, pos)
        if skip is None and pos > 0 and text[pos - 1] == "@":
            line = text.rfind("\n", 0, pos) + 1
            if _LINE_LEAD.match(text, line).end() == pos - 1:  # a block tag opens the line
                if lang == "ruby":
                    skip = _tag_block_end(text, pos, end, tag_col=pos - 1 - line)
                elif described := markup.DESCRIPTION_TAG.match(text, pos - 1):
                    skip = described.end()
                else:
                    return None
        if skip is None:
            return pos
        m = _WORD.search(text, skip, end)
        if m is None:
            return None
        pos = m.start()


def _tag_block_end(text: str, pos: int, end: int, tag_col: int) -> int:
    """Where a YARD tag starting at its line's column `tag_col` ends: the start of the first later
    line that is not blank and not indented deeper than the tag (`end` if none)."""
    nxt = text.find("\n", pos, end)
    while nxt >= 0:
        line = nxt + 1
        lead = _LINE_LEAD.match(text, line, end).end()
        nxt = text.find("\n", line, end)
        if text[lead : nxt if nxt >= 0 else end].strip() and lead - line <= tag_col:
            return lead
    return end


def _markup_at(text: str, begin: int, pos: int) -> int | None:
    """The end of the HTML tag or inline-tag opening (``{@code ``) that starts at or after `begin`
    and holds the word character at `pos`, or None."""
    if pos - 2 >= begin and text[pos - 2 : pos] == "{@":
        return markup.INLINE_TAG_OPEN.match(text, pos - 2).end()
    lt = text.rfind("<", begin, pos)
    if lt < 0 or ">" in text[lt:pos]:
        return None
    tag = markup.HTML_BLOCK.match(text, lt) or markup.HTML_INLINE.match(text, lt)
    return tag.end() if tag else None


def _markup_mask(doc: str, end: int) -> np.ndarray:
    """(len(doc),) bool: the chars of doc[:end] that are markup: inline-tag openings (``{@code ``)
    with their closing ``}``, and HTML tags."""
    mask = np.zeros(len(doc), dtype=bool)
    for m in markup.INLINE_TAG_OPEN.finditer(doc, 0, end):
        mask[m.start() : m.end()] = True
        close = doc.find("}", m.end(), end)
        if close >= 0:
            mask[close] = True
    for m in markup.HTML_INLINE.finditer(doc, 0, end):
        mask[m.start() : m.end()] = True
    return mask


def doc_summaries(text: str, offsets: np.ndarray, functions: np.ndarray, lang: str,
                  cap: int = SUMMARY_CAP) -> np.ndarray:
    """(K, 2) int32 rows (function row, token index): for every row of `functions` (F, 7) with a doc,
    the first `cap` tokens of :func:`summary_tokens` (the function's name from its name range, the
    sentence search over ``2 * cap + 8`` tokens), in row order then token order. A doc with no
    summary has no rows."""
    off = np.asarray(offsets).reshape(-1, 2)
    funcs = np.asarray(functions).reshape(-1, 7)
    rows, toks = [], []
    documented = np.flatnonzero((funcs[:, 5] >= 0) & (funcs[:, 6] > funcs[:, 5]))
    for r, (_, _, _, ns, ne, ds, de) in zip(documented.tolist(), funcs[documented].tolist()):
        name = text[off[ns, 0]: off[ne - 1, 1]].strip() if ne > ns else ""
        t = summary_tokens(text, off, ds, de, name, lang, 2 * cap + 8)[:cap]
        rows.append(np.full(len(t), r, dtype=np.int64))
        toks.append(t)
    if not rows:
        return np.zeros((0, 2), dtype=np.int32)
    return np.stack([np.concatenate(rows), np.concatenate(toks)], axis=1).astype(np.int32).reshape(-1, 2)
