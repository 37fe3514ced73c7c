"""Natural-language inputs -> documents (TextDoc), translation pairs (PairDoc) and skips.

Every input file is accounted for: :func:`read_file` yields at least one TextDoc/PairDoc, or a
:class:`Skip` naming the file and a stable reason. Skips with ``count > 1`` (or a path ``file``
that also yielded documents) are entries dropped inside a kept file, aggregated per reason
(``short_source: 3120``) so a 40k-entry catalog does not write 40k manifest rows.

Formats (:func:`format_of`, by file name; ``.gz`` is decompressed for the text formats):

1. plain text (``.txt``, ``.text``): paragraphs are blocks separated by blank lines. A ``.txt``
   after ``.rst`` or ``.md`` (Sphinx's ``_sources/x.rst.txt``) is read as that format.
2. Markdown (``.md``, ``.markdown``): parsed by markdown-it-py (CommonMark + GFM tables and
   strikethrough, raw HTML recognised). Each inline run (paragraph, heading, list item, block quote)
   outside a table is a paragraph; its text is the text and code-span tokens (image alt text kept,
   links -> their text, emphasis markers, raw HTML and link targets dropped). Code blocks (fenced and
   indented), HTML blocks, HTML comments, link definitions, rules and tables give nothing; YAML front
   matter is cut first. Nothing is read but the text; MyST include fences (```{include} x```) and
   HTML server-side includes are recorded as ``include_refused``.
3. reStructuredText (``.rst``, ``.rest``): parsed by docutils (``publish_doctree``; reports silenced,
   nothing halts, no file inclusion, no raw, no config file read: ``include``, ``raw``,
   ``csv-table :file:/:url:`` and Sphinx's ``literalinclude`` read nothing and are recorded as
   ``include_refused`` / ``raw_refused`` skips with their target, see :func:`rst_read`). Sphinx's roles render their text (``:func:`~a.b``` -> b,
   ``:ref:`title <x>``` -> title); Sphinx's directives get a generic handler registered once per name in
   docutils' process-wide registry: the body of prose directives (function, class, note-like, seealso,
   versionchanged with its text) is kept and their signature dropped, the body of
   :data:`RST_DROP_BODY` (code, toctree, index, productionlist, ...) dropped. Each block text element of
   the doctree (paragraph, title, term, line, ...) is a paragraph; literal and doctest blocks, tables,
   comments, targets, footnotes, substitution definitions, images, math blocks, the contents topic and
   markup errors (docutils' problematic nodes: an unmatched ``*``) give nothing.
4. man pages (``name.N[suffix][.gz|.bz2|.xz|.zst]``, e.g. ``ls.1.gz``): decompressed here, rendered by
   groff as ``MANWIDTH=80 man --nh --nj`` renders them (the same text on 81 of 82 sampled system
   pages; man itself follows ``.so`` to any file), overstrike and SGR codes removed, the header and
   footer lines dropped; unindented lines (NAME, DESCRIPTION) become headings. groff reads only the
   page (:func:`render_man`): the page on stdin, in an empty folder, a minimal environment, safer
   mode, and the requests that read a file (``.so``, ``.mso``, ``.nx``, ``.cf``, ``.trf``, ``.hpf``,
   ``.psbb``) or run a command (``.sy``, ``.pso``, ``.pi``, ``.open``) removed before the page, so
   no spelling reaches them; each call is recorded (``include_refused`` / ``command_refused``, with
   the target). A page that is only ``.so other.1`` (a link) gives no document. Without ``groff``
   every page is a skip ``man_unavailable``. Language from the path (``/usr/share/man/zh_CN/...``
   -> 'zh').
5. pairs from jsonl (``.jsonl``): one JSON object per line with ``src`` and ``tgt`` (+ optional
   ``src_lang``/``tgt_lang``), or code pairs as codept.objectives.translate reads them (``lang_a``,
   ``code_a``, ``lang_b``, ``code_b``); a line with ``text`` (+ optional ``lang``) is a document instead.
6. pairs from TSV (``.tsv``): ``src<TAB>tgt`` per line (further columns ignored).
   Both are read a line at a time (no file size limit; ``max_bytes`` bounds a line) with per-line
   accounting: a bad line (not JSON, e.g. 100k-deep; not an object; invalid UTF-8; a lone
   surrogate; over max_bytes) is a counted skip with its reason and line number, the rest is kept.
7. gettext catalogs (``.mo`` via stdlib ``gettext.GNUTranslations``; ``.po`` via polib, decoded by the
   header's charset; fuzzy and obsolete entries dropped). msgid (English) -> msgstr (first plural
   form); placeholders and accelerators are normalised (:func:`normalise_message`); kept when the
   source has >= ``min_src_words`` words, the target is non-empty and differs from the source.

Pair languages, first found: the ``pair_langs`` argument; per record (jsonl); the catalog header
``Language:`` (target; source 'text'); the path (``.../<locale>/LC_MESSAGES/x.mo``, ``po/de.po``,
``name.en-de.tsv``). Document language: the ``lang`` argument, a man page's locale directory, else
:func:`codept.text.segment.guess_lang` ('zh', 'ja' or 'text'). All languages pass through
:func:`codept.text.segment.normalise_lang` (English -> 'text', Chinese -> 'zh'); a pair side given by
the record or ``pair_langs`` may also be a code language (:func:`pair_lang`: 'python', 'java', ...),
the pairs the ``translate`` objective trains on.

Paragraph text is reflowed (lines joined with one space, none between two CJK characters), so
hard-wrapped sources give clean sentences; paragraphs are joined by one blank line.
Why parsers and not regexes: benchmarks/bench_readers.py compares them with the hand-written readers
they replaced (kept in benchmarks/baseline_readers.py) on the Python docs (reST vs Sphinx's HTML) and
Node's API docs (Markdown vs Node's HTML): the parsers keep more of the reference's words, leave less
markup, and read constructs the regexes missed (numbers in that script's docstring). :func:`fingerprint` names the
parser versions for cache keys.
Cost: linear in the input; man pages ~50-100 ms each (groff); on one core docutils ~0.8 MB/s,
markdown-it-py ~3 MB/s, polib ~8.5 MB/s (the hand-written readers were 3-14x faster and less clean).
reST lines longer than ``rst_line_limit`` are kept as plain text (docutils' limit would empty the
document). Not covered: HTML, PDF, DocBook, texinfo; MyST/Sphinx extensions beyond the generic role/directive
handling (a directive's arguments are dropped, its generated text such as "New in version 3.2" is not
produced); text inside Markdown HTML blocks; table cells; dedup and redaction (codept.data handles them).
"""

from __future__ import annotations

import codecs
import copy
import functools
import gettext
import gzip
import io
import json
import os
import re
import shutil
import struct
import subprocess
import zlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from codept.data.sources import decode_source, read_bytes, walk
from codept.data.jobs import SkipFile, printable
from codept.text.segment import HAN, KANA, count_words, guess_lang, normalise_lang

TEXT_MAX_BYTES = 8_000_000  # per input file; views cost ~20 bytes of temporaries per char
MIN_SRC_WORDS = 3
MAN_TIMEOUT_S = 20.0
RST_LINE_LIMIT = 10_000  # docutils' default line_length_limit; longer lines are kept unparsed


@dataclass(frozen=True)
class TextDoc:
    path: str
    lang: str
    text: str


@dataclass(frozen=True)
class PairDoc:
    path: str
    src_lang: str
    tgt_lang: str
    src: str
    tgt: str


@dataclass(frozen=True)
class Skip:
    path: str
    reason: str
    detail: str = ""
    count: int = 1


Item = TextDoc | PairDoc | Skip

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


def discover(sources: Iterable[str | os.PathLike]) -> tuple[list[tuple[str, str]], list[Skip]]:
    """Files and directories -> (files [(path, kind)], skips), both sorted by path
    (codept.data.sources.walk); unknown formats are skips ``unknown_format``. A symlink found while
    walking a folder whose target lies outside that folder (``notes.txt -> ~/.ssh/id_rsa``) is a
    skip ``symlink_outside_input``, never read; a symlink named as a source itself is read."""

    def classify(p: Path):
        kind = format_of(p)
        if kind is None:
            return None, ("unknown_format", f"suffix {p.suffix!r} not in {sorted(_EXT)} or name.N")
        return kind, None

    files: list[tuple[str, str]] = []
    skipped: list[tuple[str, str, str]] = []
    for src in sources:
        found, skips = walk([src], classify)
        skipped += skips
        if not Path(src).is_dir():
            files += found
            continue
        root = os.path.realpath(src)  # a symlink found inside a folder may not lead out of it
        for path, kind in found:
            target = os.path.realpath(path) if os.path.islink(path) else None
            if target is not None and os.path.commonpath([root, target]) != root:
                skipped.append((path, "symlink_outside_input", f"a link to {printable(target)}, outside {printable(root)}"))
            else:
                files.append((path, kind))
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


def input_bytes(path: str, max_bytes: int, data: bytes | None = None) -> bytes:
    """A file's content, ``.gz`` decompressed, at most ``max_bytes + 1`` bytes (SkipFile too_large /
    unreadable as codept.data.sources.read_bytes). `data`: the file's bytes as read from disk by the
    caller (prepare-text reads each input once, in its main process); None: read them here."""
    if data is None:
        return read_bytes(path, max_bytes)
    if len(data) > max_bytes:
        raise SkipFile("too_large", f"{len(data)} bytes > max_bytes={max_bytes}")
    if not path.endswith(".gz"):
        return data
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as f:
            return f.read(max_bytes + 1)
    except (OSError, EOFError, zlib.error) as e:
        raise SkipFile("unreadable", f"{type(e).__name__}: {e}") from e


def _read_text(path: str, max_bytes: int, data: bytes | None = None) -> str:
    raw = input_bytes(path, max_bytes, data)
    return decode_source(raw, max_bytes).replace("\r\n", "\n").replace("\r", "\n")


# -- paragraphs -----------------------------------------------------------------------------------

_CJK_EDGE = re.compile(f"[{HAN}{KANA}\u3000-\u303f\uff00-\uffef]")


def reflow(lines: list[str]) -> str:
    """Join the lines of one paragraph: stripped, one space between them, none between two CJK chars."""
    out = ""
    for line in lines:
        s = " ".join(line.split())
        if not s:
            continue
        if out and not (_CJK_EDGE.match(out[-1]) and _CJK_EDGE.match(s[0])):
            out += " "
        out += s
    return out


def _join(paragraphs: Iterable[list[str]], inline=None) -> str:
    """Reflow each paragraph, clean its inline markup (after reflow: links and code spans may cross
    lines), drop empty ones, join with a blank line."""
    out = (reflow(b) for b in paragraphs)
    if inline is not None:
        out = (inline(p) for p in out)
    return "\n\n".join(p.strip() for p in out if p.strip())


def _blocks(lines: Iterable[str]) -> Iterator[list[str]]:
    cur: list[str] = []
    for line in lines:
        if line.strip():
            cur.append(line)
        elif cur:
            yield cur
            cur = []
    if cur:
        yield cur


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def plain_to_text(text: str) -> str:
    """Paragraphs = blocks of non-blank lines; each reflowed; joined by a blank line."""
    return _join(_blocks(text.splitlines()))


# -- Markdown (markdown-it-py) --------------------------------------------------------------------

_MD_FRONT_MATTER = re.compile(r"\A---[ \t]*\n.*?\n(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.S)
_md_parser = None


def _markdown_it():
    """CommonMark + GFM tables and strikethrough, raw HTML recognised (so it can be dropped); built once."""
    global _md_parser
    if _md_parser is None:
        from markdown_it import MarkdownIt
        _md_parser = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
    return _md_parser


def _md_inline_text(children) -> str:
    """Visible text of an inline token's children: markup, raw HTML and link targets dropped,
    code spans and image alt text kept, line breaks kept as newlines (for reflow)."""
    out = []
    for c in children or ():
        if c.type in ("text", "code_inline"):
            out.append(c.content)
        elif c.type in ("softbreak", "hardbreak"):
            out.append("\n")
        elif c.type == "image":
            out.append(_md_inline_text(c.children))
    return "".join(out)


def markdown_to_text(text: str) -> str:
    """Markdown -> plain paragraphs: each inline run (paragraph, heading, list item, quote) outside
    tables becomes one paragraph; code blocks, HTML blocks and link definitions carry no inline run."""
    return markdown_read(text)[0]


# MyST's include-like directives (```{include} path```) and server-side includes (<!--#include file=x-->):
# markdown-it-py reads no file for either (a fence and an HTML comment); recorded, never followed
_MD_DIRECTIVE = re.compile(r"\{([\w:.+-]*include|raw|csv-table)\}\s*(.*)")
_MD_SSI = re.compile(r"<!--\s*#\s*include\s+(?:virtual|file)\s*=\s*[\"']?([^\"'>\s]*)", re.I)


def markdown_read(text: str) -> tuple[str, list[tuple[str, str, str]]]:
    """(paragraphs as :func:`markdown_to_text`, refusals): MyST include fences (``{include}``,
    ``{literalinclude}``, ``{raw}``/``{csv-table}`` with ``:file:``/``:url:``) and HTML server-side
    includes, as (reason, directive, target) like :func:`rst_read`. markdown-it-py itself reads
    nothing but the text: these are only recorded."""
    text = _MD_FRONT_MATTER.sub("", text, count=1)
    paras: list[list[str]] = []
    refused: list[tuple[str, str, str]] = []
    in_table = 0
    for tok in _markdown_it().parse(text):
        if tok.type == "table_open":
            in_table += 1
        elif tok.type == "table_close":
            in_table -= 1
        elif tok.type == "inline" and not in_table:
            paras.append(_md_inline_text(tok.children).split("\n"))
            refused += [("include_refused", "<!--#include-->", m.group(1))
                        for c in tok.children or () if c.type == "html_inline" for m in _MD_SSI.finditer(c.content)]
        elif tok.type == "fence" and (m := _MD_DIRECTIVE.match(tok.info.strip())):
            opt = _RST_FILE_OPTION.search(tok.content)
            if m.group(1).endswith("include") or opt:
                refused.append(("include_refused", "{%s}" % m.group(1), opt.group(1).strip() if opt else m.group(2)))
        elif tok.type == "html_block":
            refused += [("include_refused", "<!--#include-->", m.group(1)) for m in _MD_SSI.finditer(tok.content)]
    return _join(paras), refused


# -- reStructuredText (docutils) ------------------------------------------------------------------

# Sphinx directives whose body is not prose (docutils' own code/image/math/table/raw/include/contents
# produce nodes that _RST_SKIP drops).
RST_DROP_BODY = frozenset(
    "code-block sourcecode literalinclude highlight toctree tabularcolumns graphviz productionlist testcode "
    "testoutput testsetup testcleanup doctest autosummary automodule autoclass autofunction index only ifconfig "
    "kernel-doc kernel-feat kernel-abi kernel-include flat-table sectionauthor moduleauthor codeauthor".split())
_RST_VERSION = frozenset("versionadded versionchanged deprecated deprecated-removed".split())
_RST_DIRECTIVE_NAME = re.compile(r"^[ \t]*\.\.[ \t]+([\w:.+-]+?)[ \t]*::", re.M)


def _rst_role_text(text: str) -> str:
    """Sphinx cross-reference text as rendered: ``title <target>`` -> title, ``~a.b`` -> b, ``!x`` -> x."""
    if text.endswith(">") and " <" in text:
        text = text[: text.rindex(" <")].rstrip()
    if text.startswith("~"):
        text = text[1:].rsplit(".", 1)[-1]
    return text.lstrip("!")


_rst_state = None


def _docutils():
    """(settings, directive classes), built once: reports silenced, nothing halts the parse; see
    :func:`_register_directives` for the directives and :func:`_rst_parser` for the roles."""
    global _rst_state
    if _rst_state is not None:
        return _rst_state
    from docutils import frontend, nodes
    from docutils.parsers.rst import Directive, Parser, directives

    class AnyOptions(dict):  # a Sphinx directive's options are not known here: accept (and drop) any
        def __missing__(self, key):
            return directives.unchanged

    class Text(Directive):
        """A Sphinx directive whose body is prose (function, class, seealso, ...): body kept, signature dropped."""
        has_content, optional_arguments, final_argument_whitespace = True, 99, True
        option_spec = AnyOptions(noindex=directives.flag)

        def run(self):
            node = nodes.container()
            if self.name in _RST_VERSION and len(self.arguments) > 1:  # ".. versionchanged:: 3.2 Text."
                inline, _ = self.state.inline_text(" ".join(self.arguments[1:]), self.lineno)
                node += nodes.paragraph("", "", *inline)
            self.state.nested_parse(self.content, self.content_offset, node)
            return [node]

    class Drop(Text):
        def run(self):
            if self.name.split(":")[-1].endswith("include"):  # literalinclude, kernel-include: never read
                self.state.document.reporter.warning(f'"{self.name}" directive disabled.',
                                                     nodes.literal_block(self.block_text, self.block_text),
                                                     line=self.lineno)
            return []

    settings = frontend.get_default_settings(Parser)
    for k, v in dict(report_level=5, halt_level=5, warning_stream=io.StringIO(), file_insertion_enabled=False,
                     raw_enabled=False, smart_quotes=False, syntax_highlight="none", doctitle_xform=False,
                     sectsubtitle_xform=False, _disable_config=True, tab_width=8, traceback=True).items():
        setattr(settings, k, v)
    _rst_state = settings, Text, Drop
    return _rst_state


def _rst_parser():
    """A new docutils parser whose inliner renders unknown (Sphinx) roles as their text. New per document:
    an Inliner appends to its dispatch list on every parse (reused, parsing slowed 10x over 150 files)."""
    from docutils import nodes
    from docutils.parsers.rst import Parser, roles, states
    from docutils.utils import unescape

    inliner = states.Inliner()  # (not a subclass: its regexes are formatted from vars(type(self)))
    known = inliner.interpreted

    def interpreted(rawsource, text, role, lineno):
        if roles.role(role, inliner.language, lineno, inliner.reporter)[0] is not None:
            return known(rawsource, text, role, lineno)
        return [nodes.Text(_rst_role_text(unescape(text)))], []

    inliner.interpreted = interpreted

    return Parser(inliner=inliner)


def _register_directives(text: str, text_cls, drop_cls) -> None:
    """Directive names used in `text` that docutils does not know get a generic handler in docutils'
    process-wide registry (once per name): RST_DROP_BODY names drop their body, others keep it. docutils'
    ``class`` directive is replaced too: in Sphinx sources it is the Python domain's class."""
    from docutils.parsers.rst import directives
    from docutils.parsers.rst.languages import en

    for name in {m.group(1).lower() for m in _RST_DIRECTIVE_NAME.finditer(text)}:
        if name in directives._directives and name != "class":
            continue
        if name != "class" and en.directives.get(name, name) in directives._directive_registry:
            continue
        base = name.split(":")[-1]
        directives.register_directive(name, drop_cls if base in RST_DROP_BODY else text_cls)


def _rst_skip():
    from docutils import nodes
    return (nodes.literal_block, nodes.doctest_block, nodes.comment, nodes.substitution_definition,
            nodes.system_message, nodes.problematic, nodes.raw, nodes.image, nodes.table, nodes.math_block,
            nodes.footnote, nodes.citation, nodes.footnote_reference, nodes.citation_reference, nodes.label,
            nodes.generated, nodes.pending)


def _rst_paragraphs(doc) -> Iterator[str]:
    """Each block text element (paragraph, title, term, line, ...) -> its visible text, in document order;
    an explicit stack (no recursion), skipped subtrees never entered."""
    from docutils import nodes
    skip = _rst_skip()
    stack = [doc]
    while stack:
        node = stack.pop()
        if isinstance(node, skip) or (isinstance(node, nodes.topic) and "contents" in node["classes"]):
            continue
        if isinstance(node, nodes.TextElement) and not isinstance(node, nodes.Inline):
            yield _rst_text(node, skip)
            continue
        stack.extend(reversed(node.children))


def _rst_text(node, skip) -> str:
    from docutils import nodes
    out, stack = [], [node]
    while stack:
        n = stack.pop()
        if isinstance(n, nodes.Text):
            out.append(n.astext())  # (str(n) keeps the NULs that mark backslash escapes)
        elif not isinstance(n, skip):
            stack.extend(reversed(n.children))
    return "".join(out)


def rst_to_text(text: str) -> str:
    """reStructuredText -> plain paragraphs: the docutils doctree (with Sphinx roles and directives
    handled generically) walked for the text of its block elements; code, tables, comments, targets,
    footnotes, substitution definitions and markup errors dropped."""
    return rst_read(text)[0]


_RST_REFUSED = re.compile(r'"([\w:.+-]+)" directive disabled|File and URL access deactivated; ignoring "([\w:.+-]+)"')
_RST_FILE_OPTION = re.compile(r"^\s*:(?:file|url|source):\s*(\S.*)$", re.M)


def _rst_long_lines(text: str, limit: int) -> tuple[str, dict[str, str]]:
    """Lines longer than `limit` -> a placeholder word at the line's indentation (so the line keeps its
    place in the structure: a paragraph, a list item, a code block), mapped to the line's text."""
    if limit <= 0 or max(map(len, text.split("\n"))) <= limit:
        return text, {}
    stem = "codeptlongline"
    while stem in text:
        stem += "x"
    lines, kept = text.split("\n"), {}
    for i, line in enumerate(lines):
        if len(line) > limit:
            word = f"{stem}{len(kept)}z"
            kept[word] = " ".join(line.split())
            lines[i] = line[: len(line) - len(line.lstrip())] + word
    return "\n".join(lines), kept


def rst_read(text: str, line_limit: int = RST_LINE_LIMIT) -> tuple[str, list[tuple[str, str, str]]]:
    """(paragraphs as :func:`rst_to_text`, refusals): every directive that docutils refused to run
    because it reads a file or inserts raw output (``include``, ``raw``, ``csv-table :file:``/``:url:``,
    Sphinx's ``literalinclude``; file insertion and raw are off) as (reason, directive, target), reason
    ``include_refused`` for one that names a file or URL, ``raw_refused`` for inline raw output. Found
    by an observer on the document's reporter (reports are silenced, never lost). Lines longer than
    `line_limit` are not parsed (docutils would empty the whole document): each keeps its place and
    its text, unparsed (markup characters and all), recorded as ``long_line_unparsed``."""
    from docutils.core import publish_doctree
    from docutils.readers import standalone

    found: list = []

    class Reader(standalone.Reader):
        def new_document(self):
            doc = super().new_document()
            doc.reporter.attach_observer(found.append)
            return doc

    settings, text_cls, drop_cls = _docutils()
    text, long_lines = _rst_long_lines(text, line_limit)
    _register_directives(text, text_cls, drop_cls)
    settings = copy.copy(settings)
    settings.line_length_limit = max(line_limit, 1) + 1
    doc = publish_doctree(text, reader=Reader(), parser=_rst_parser(), settings=settings)
    refused = [("long_line_unparsed", f"{len(v):,} chars", v[:60]) for v in long_lines.values()]
    for msg in found:
        m = _RST_REFUSED.search(msg.astext().split("\n", 1)[0])
        if not m:
            continue
        name = m.group(1) or m.group(2)
        src = "\n".join(c.astext() for c in msg.children[1:])  # the directive's source block
        first = src.strip().split("\n", 1)[0]
        arg = first.split("::", 1)[1].strip() if "::" in first else ""
        opt = _RST_FILE_OPTION.search(src)
        target = opt.group(1).strip() if opt else arg
        reads = name.split(":")[-1].endswith("include") or opt is not None
        refused.append(("include_refused" if reads else "raw_refused", name, target))
    body = _join(p.split("\n") for p in _rst_paragraphs(doc))
    if long_lines:
        body = re.sub("|".join(long_lines), lambda m: long_lines[m.group()], body)
    return body, refused


# -- man pages ------------------------------------------------------------------------------------

_OVERSTRIKE = re.compile(r".\x08")
_SGR = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_MAN_LOCALE = re.compile(r"/man/([a-z]{2,3}(?:_[A-Z]{2})?)(?:\.[\w-]+)?(?:@\w+)?/man[^/]*/[^/]+$")


def man_lang(path: str) -> str | None:
    """Language from a man page's locale directory (``.../man/zh_CN/man1/x.1.gz`` -> 'zh')."""
    m = _MAN_LOCALE.search(path)
    return normalise_lang(m.group(1)) if m else None


def man_to_text(rendered: str) -> str:
    """Output of ``man -Tutf8`` -> paragraphs (header/footer dropped, headings separate)."""
    text = _SGR.sub("", _OVERSTRIKE.sub("", rendered))
    lines = text.splitlines()
    nonblank = [i for i, x in enumerate(lines) if x.strip()]
    if len(nonblank) > 2:  # "LS(1)  User Commands  LS(1)" ... "GNU coreutils 9.1  2022  LS(1)"
        lines = lines[nonblank[0] + 1 : nonblank[-1]]
    paras: list[list[str]] = []
    for block in _blocks(lines):
        cur: list[str] = []
        for line in block:
            if _indent(line) == 0:  # section heading
                if cur:
                    paras.append(cur)
                paras.append([line])
                cur = []
            else:
                cur.append(line)
        if cur:
            paras.append(cur)
    return _join(paras)


# groff requests that read a file (the page would put /etc/passwd into a document) and those that run a
# command or write a file (groff's safer mode refuses these; removed as well). Removed with ``.rm``
# after the macro package is loaded and before the page, so no spelling (``.cc``, ``.als``, ``.do``,
# a string holding the name) reaches them: a removed request cannot be named again.
MAN_FILE_REQUESTS = ("so", "soquiet", "mso", "msoquiet", "nx", "cf", "trf", "hpf", "hpfa", "psbb")
MAN_COMMAND_REQUESTS = ("sy", "pso", "pi", "open", "opena")
_MAN_REQUEST = re.compile(r"^[.'][ \t]*(" + "|".join(MAN_FILE_REQUESTS + MAN_COMMAND_REQUESTS) + r")(?![^ \t\n])[ \t]*(.*)$",
                          re.M)
_MAN_NAMES = "|".join(MAN_FILE_REQUESTS + MAN_COMMAND_REQUESTS)
_MAN_ALIAS = re.compile(rf"^[.'][ \t]*(?:rn[ \t]+({_MAN_NAMES})|als[ \t]+\S+[ \t]+({_MAN_NAMES}))(?![^ \t\n])", re.M)
_MAN_UNDEFINED = re.compile(rf"warning: macro '({_MAN_NAMES})' not defined")
# --nh --nj of man-db, and the requests removed; the macro package (-man or -mdoc) is loaded before it
MAN_PRELUDE = (".nh\n.de hy\n..\n.na\n.de ad\n..\n.rm " + " ".join(MAN_FILE_REQUESTS + MAN_COMMAND_REQUESTS) + "\n")
_MDOC = re.compile(r"^\.[ \t]*Dd\b", re.M)
_MAN_TH = re.compile(r"^\.[ \t]*TH\b", re.M)


def _man_source(path: str, data: bytes) -> str:
    """A man page's bytes (compressed by its name's suffix) -> its roff text (UTF-8, else Latin-1 as
    man-db falls back to)."""
    import bz2
    import lzma

    name = path.lower()
    try:
        if name.endswith(".gz"):
            data = gzip.decompress(data)
        elif name.endswith(".bz2"):
            data = bz2.decompress(data)
        elif name.endswith((".xz", ".lzma")):
            data = lzma.decompress(data)
        elif name.endswith(".zst"):
            exe = shutil.which("zstd")
            if exe is None:
                raise SkipFile("unreadable", "a .zst man page needs the 'zstd' executable on PATH")
            r = subprocess.run([exe, "-dcq"], input=data, capture_output=True, timeout=60)
            if r.returncode != 0:
                raise SkipFile("unreadable", f"zstd -d: rc={r.returncode}")
            data = r.stdout
    except (OSError, EOFError, ValueError, lzma.LZMAError) as e:
        raise SkipFile("unreadable", f"{type(e).__name__}: {e}") from e
    if b"\0" in data[:8192]:
        raise SkipFile("binary", "NUL byte in the first 8 KiB")
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def man_requests(src: str, warnings: str = "") -> list[tuple[str, str]]:
    """(request, argument) of every call of a request of MAN_FILE_REQUESTS or MAN_COMMAND_REQUESTS in
    `src`: lines that call one directly (``.so x``, ``'so x``), rename or alias one (``.rn so x``,
    ``.als x so``), and, from groff's stderr (`warnings`, ``-wmac``), the calls of a removed request
    spelled any other way (``.do so``, ``.cc !`` + ``!so``, a string holding its name): argument '?'."""
    found = [(m.group(1), m.group(2).strip()) for m in _MAN_REQUEST.finditer(src)]
    found += [(m.group(1) or m.group(2), "(renamed or aliased)") for m in _MAN_ALIAS.finditer(src)]
    direct = Counter(name for name, _ in found)
    warned = Counter(m.group(1) for m in _MAN_UNDEFINED.finditer(warnings))
    for name, n in sorted(warned.items()):
        found += [(name, "(spelled indirectly)")] * max(0, n - direct[name])
    return found


@functools.lru_cache(maxsize=None)
def _man_package(exe: str, kind: str) -> str:
    """The groff macro package that loads the man (or mdoc) macros at once. ``-man`` and ``-mdoc`` of
    groff 1.22 go through andoc.tmac, which loads the real package with ``.mso`` at the page's first
    ``.TH``, after the prelude removed ``mso``: name the package itself (an-old.tmac in groff 1.22,
    an.tmac from 1.23 on) so it is loaded before the prelude."""
    for name in (("an-old", "an") if kind == "man" else ("mdoc",)):
        r = subprocess.run([exe, "-m", name, "-Tutf8"], input=b"", capture_output=True, timeout=30,
                           env={"PATH": os.environ.get("PATH", os.defpath)})
        if r.returncode == 0:
            return name
    return "an" if kind == "man" else "mdoc"


def render_man(src: str, timeout_s: float = MAN_TIMEOUT_S) -> tuple[str, str]:
    """roff source of a man page -> (groff's -Tutf8 output, its warnings): 80 columns as
    ``MANWIDTH=80 man --nh --nj`` renders (no hyphenation or justification).

    groff runs on stdin (so a page has no name to resolve a relative path against) in an empty
    working folder, with a minimal environment (``\\V`` reads no secret), in safer mode (groff's
    default), with tbl; the file-reading and command-running requests are removed (MAN_PRELUDE).
    Non-ASCII characters are passed as ``\\[uXXXX]`` escapes (what preconv does)."""
    import tempfile

    exe = shutil.which("groff")
    if exe is None:
        raise SkipFile("man_unavailable", "no 'groff' executable on PATH")
    macros = _man_package(exe, "mdoc" if _MDOC.search(src) and not _MAN_TH.search(src) else "man")
    body = "".join(c if ord(c) < 128 else f"\\[u{ord(c):04X}]" for c in src)
    env = {"PATH": os.path.dirname(exe), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "GROFF_NO_SGR": "1"}
    with tempfile.TemporaryDirectory(prefix="codept-man-") as cwd:
        try:
            r = subprocess.run([exe, "-Tutf8", "-t", "-wmac", "-m", macros, "-rLL=78n", "-rLT=78n", "-"],
                               input=(MAN_PRELUDE + body + "\n").encode("ascii"), capture_output=True,
                               timeout=timeout_s, env=env, cwd=cwd)
        except subprocess.TimeoutExpired as e:
            raise SkipFile("man_timeout", f"groff ran over {timeout_s}s") from e
        except OSError as e:
            raise SkipFile("man_failed", f"{type(e).__name__}: {e}") from e
    if r.returncode != 0:
        raise SkipFile("man_failed", f"rc={r.returncode}: {r.stderr.decode('utf-8', 'replace')[-200:].strip()}")
    try:
        return r.stdout.decode("utf-8"), r.stderr.decode("utf-8", "replace")
    except UnicodeDecodeError as e:
        raise SkipFile("bad_utf8", f"groff output: invalid UTF-8 at byte {e.start}") from e


def _read_man(path: str, lang: str | None, timeout_s: float, max_bytes: int, data: bytes | None) -> Iterator[Item]:
    if shutil.which("groff") is None:
        raise SkipFile("man_unavailable", "no 'groff' executable on PATH")
    if data is None:
        try:
            size = os.path.getsize(path)
            if size > max_bytes:
                raise SkipFile("too_large", f"{size} bytes > max_bytes={max_bytes}")
            with open(path, "rb") as f:
                data = f.read(max_bytes + 1)
        except OSError as e:
            raise SkipFile("unreadable", f"{type(e).__name__}: {e}") from e
    src = _man_source(path, data)
    if len(src) > max_bytes:
        raise SkipFile("too_large", f"> max_bytes={max_bytes} after decompression")
    out, warnings = render_man(src, timeout_s)
    refused = man_requests(src, warnings)
    body = man_to_text(out)
    if re.search(r"\w", body):  # a page that is only ``.so other.1`` renders an empty header: "()"
        yield TextDoc(path, lang or man_lang(path) or guess_lang(body), body)
    yield from _refusals(path, [(f".{req}", arg) for req, arg in refused if req in MAN_FILE_REQUESTS],
                        "include_refused", "groff request that reads a file, not followed")
    yield from _refusals(path, [(f".{req}", arg) for req, arg in refused if req in MAN_COMMAND_REQUESTS],
                        "command_refused", "groff request that runs a command or writes a file, not run")


def _refusals(path: str, found: list[tuple[str, str]], reason: str, what: str) -> Iterator[Skip]:
    """One aggregated Skip for the includes (or commands) a reader refused: the count and the first few."""
    if found:
        shown = "; ".join(f"{name} {printable(arg)[:200]}".strip() for name, arg in found[:3])
        yield Skip(path, reason, f"{what}: {shown}" + (" ..." if len(found) > 3 else ""),
                   len(found))


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
