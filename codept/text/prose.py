"""Markup to text: plain text, Markdown and reStructuredText -> paragraphs joined by one blank line,
with the directives that would read a file (or insert raw output) recorded, never followed. Read
through codept.text.readers (:func:`codept.text.readers.read_file`), which makes the records skips.

1. plain text (``.txt``, ``.text``): paragraphs are blocks separated by blank lines.
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

Paragraph text is reflowed (lines joined with one space, none between two CJK characters), so
hard-wrapped sources give clean sentences; paragraphs are joined by one blank line (the paragraph
helpers serve codept.text.man and codept.text.records too).
Why parsers and not regexes: benchmarks/bench_readers.py compares them with the hand-written readers
they replaced (kept in benchmarks/baseline_readers.py) on the Python docs (reST vs Sphinx's HTML) and
Node's API docs (Markdown vs Node's HTML): the parsers keep more of the reference's words, leave less
markup, and read constructs the regexes missed (numbers in that script's docstring).
Cost: linear in the input; on one core docutils ~0.8 MB/s, markdown-it-py ~3 MB/s (the hand-written
readers were 3-14x faster and less clean); both are imported on first use.
reST lines longer than ``rst_line_limit`` are kept as plain text (docutils' limit would empty the
document). Not covered: MyST/Sphinx extensions beyond the generic role/directive
handling (a directive's arguments are dropped, its generated text such as "New in version 3.2" is not
produced); text inside Markdown HTML blocks; table cells.
"""

from __future__ import annotations

import copy
import io
import re
from typing import Iterable, Iterator

from codept.text.segment import HAN, KANA

RST_LINE_LIMIT = 10_000  # docutils' default line_length_limit; longer lines are kept unparsed


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
