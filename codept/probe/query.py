"""Query cleaning for the code-search probe: a doc as it stands in the source -> its first sentence.

:func:`clean_query` takes a docstring literal or a run of doc comments (the token range that
``grammars/<lang>/tags.scm`` attaches to a definition) and returns the query of a probe pair;
:func:`normalize_query` is the key for duplicates and decontamination (codept.probe.build). The
code_doc objective cuts its doc side to agree with these queries (codept.objectives.code_doc; checked
in tests/test_code_doc.py). Strings in, strings out: no views, no NumPy; the doc-markup patterns
shared with the token-space side come from codept.text.markup.

Query cleaning (:func:`clean_query`): comment syntax stripped and dedented; Python stops at
reST/Google/numpy sections, doctests and directives, roles ``:func:`x``` -> ``x``, a leading call
signature paragraph ("S.lower() -> str") is skipped; Javadoc, JSDoc and PHPDoc stop at the first block
``@tag`` (JSDoc's ``@description`` is used when nothing precedes the tags), inline tags become their
text, HTML tags are removed (block tags end a paragraph) and entities unescaped; Go drops directives
(``//go:...``) and doc links keep their text (``[io.Reader]``); Ruby skips leading YARD tags
(``@private``, ``@api``) and stops at the next one, skips ``:call-seq:`` blocks, rdoc ``+x+`` and YARD
``{#x}`` -> ``x``, ``:nodoc:`` means undocumented. Every language: markdown code/bold/links keep their
text, a list item or an ``Examples:`` line ends the paragraph, ``TODO``/``FIXME``/``Deprecated:``
paragraphs are skipped. Then the first sentence of the first paragraph (up to ``.``/``?``/``!`` +
whitespace or end; not at ``e.g.``/``i.e.``), and a leading mention of the function's own name is
dropped (Go's convention, "Foo returns ..." -> "returns ...", and any language that does the same),
so the query does not give the answer away by its first word.

Cost: ~180 us per doc (measured on 2 busy cores), regexes only; no state, no memory beyond the doc.
Not covered: near-duplicate queries ("Return the x" and "Returns the x" differ after
:func:`normalize_query`), languages whose docs follow other conventions than those above (they get
the generic cleaning: comment syntax, markdown, first sentence).
"""

from __future__ import annotations

import html
import re
import textwrap

from codept.text.markup import BLOCK_TAG_LINE, DESCRIPTION_TAG, HTML_BLOCK, HTML_INLINE
from codept.text.markup import LANGS as MARKUP_LANGS

_PY_STRING = re.compile(r"""^\s*[rRuUbBfF]{0,2}("{3}|'{3}|"|')(.*?)\1\s*$""", re.S)
_BLOCK_OPEN = re.compile(r"^\s*/\*+!?")
_BLOCK_CLOSE = re.compile(r"\s*\*+/\s*$")
_BLOCK_STAR = re.compile(r"^\s*\*(?!/) ?")
_BANNER_END = re.compile(r"(?:^|\s+)\*+\s*$")  # "* Section title *" boxes, "*****" rules
_LINE_COMMENT = re.compile(r"^\s*(//[/!]?|#+) ?")
_GO_DIRECTIVE = re.compile(r"^\s*//(?:[a-z0-9]+:[a-z0-9]|line |export |nolint)")
_UNDERLINE = re.compile(r"^\s*([-=~^*+#\"'`])\1{2,}\s*$")

_PY_SECTIONS = (
    "args", "arguments", "parameters", "params", "param", "parameter", "returns", "return", "yields", "yield",
    "raises", "raise", "examples", "example", "notes", "note", "see also", "references", "attributes",
    "keyword args", "keyword arguments", "kwargs", "other parameters", "warns", "warnings", "warning",
    "todo", "methods", "usage", "exceptions", "receives",
)
_PY_SECTION = re.compile(r"^\s*(?:" + "|".join(re.escape(s) for s in _PY_SECTIONS) + r")\s*:\s*$", re.I)
_PY_STOP = re.compile(r"^\s*(?:>>>|\.\.\s+[\w-]+::|:[A-Za-z][\w ]*(?:\s[^:]*)?:(?:\s|$))")
_PY_SIGNATURE = re.compile(r"^\s*[\w.]+\(.*\)\s*(?:->.*)?$")
_PY_ROLE = re.compile(r":(?:[\w-]+:)*[\w-]+:`~?([^`<]*?)(?:\s*<[^>]*>)?`")

_DESCRIPTION_TAG = re.compile(r"^\s*" + DESCRIPTION_TAG.pattern, re.I)
_INLINE_LINK_LABEL = re.compile(r"\[([^\]]+)\]\{@link(?:plain|code)?\s+[^}]*\}")
_INLINE_LINK = re.compile(r"\{@(?:link|linkplain|linkcode|see)\s+([^\s}|]+)(?:\s*\|\s*|\s+)?([^}]*)\}")
_INLINE_DROP = re.compile(r"\{@(?:inheritDoc|inheritdoc|internal)\s*\}")
_INLINE_OTHER = re.compile(r"\{@[A-Za-z]+\s*([^{}]*(?:\{[^{}]*\}[^{}]*)*)\}")

_MD_LINK = re.compile(r"\[([^\]\n]+)\]\([^)\s]*\)")
_GO_DOC_LINK = re.compile(r"(?<![\w\]])\[(\*?[A-Za-z_][\w.]*)\](?![\w(\[:])")
_BACKTICKS = re.compile(r"``?([^`]+)``?")
_BOLD = re.compile(r"(?<![\w*])\*\*(\w[^*\n]*?)\*\*(?![\w*])")
_EMPHASIS = re.compile(r"(?<![\w*])\*(\w+)\*(?![\w*])")  # rST *word*, rdoc *word*, markdown *word*
_RDOC_CODE = re.compile(r"(?<![\w+])\+([^+\s][^+\n]*?)\+(?![\w+])")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+\u2022]|\d{1,2}[.)])\s+\S")
_LIST_MARK = re.compile(r"^(?:[-*+\u2022]|\d{1,2}[.)])\s+")
_EXAMPLES = re.compile(r"^\s*(?:Examples?|Usage|For example)\s*:\s*$", re.I)  # ends the description, any language
_NOT_A_SUMMARY = re.compile(r"^(?:TODO|FIXME|XXX|HACK|NOTE\(|Deprecated:)")  # a paragraph that is not the summary
_YARD_LINK = re.compile(r"\{([#\w:.?!]+)(?:\s[^}]*)?\}")
_RDOC_DIRECTIVE = re.compile(r"(?<!\S):(?:nocov|stopdoc|startdoc|enddoc|doc|yields|notnew|not-new|internal):(?!\S)")
_RUBY_STATUS = re.compile(r"^(?:Public|Internal|Private|Deprecated|Protected):\s*")

_ABBREV = frozenset({"e.g", "i.e", "eg", "ie", "cf", "vs", "approx", "resp", "incl", "viz", "al", "esp", "fig",
                     "mr", "mrs", "dr"})
_SENTENCE_END = re.compile(r"[.?!]+(?=\s|$)")
_LEADING_ARTICLE = frozenset({"a", "an", "the"})


def _py_docstring_lines(doc: str) -> list[str]:
    m = _PY_STRING.match(doc)
    body = m.group(2) if m else doc
    lines = body.expandtabs().split("\n")
    # inspect.cleandoc: the first line is not indented like the rest
    rest = textwrap.dedent("\n".join(lines[1:])).split("\n") if len(lines) > 1 else []
    return [lines[0].strip(), *rest]


def _comment_lines(doc: str, lang: str) -> list[str]:
    """The text of a run of comments: `/* */` blocks (leading `*` stripped), `//` and `#` lines,
    Ruby `=begin`/`=end`; dedented."""
    out: list[str] = []
    in_block = in_begin = False
    for raw in doc.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if in_begin:
            if raw.startswith("=end"):
                in_begin = False
            else:
                out.append(raw)
            continue
        if in_block:
            line = _BLOCK_STAR.sub("", raw, count=1)
            if _BLOCK_CLOSE.search(line) or line.strip() == "*/":
                in_block = False
                line = _BLOCK_CLOSE.sub("", line)
            out.append(_BANNER_END.sub("", line))
            continue
        if raw.startswith("=begin"):
            in_begin = True
            continue
        if _BLOCK_OPEN.match(raw):
            line = _BLOCK_OPEN.sub("", raw, count=1)
            if _BLOCK_CLOSE.search(line):
                line = _BLOCK_CLOSE.sub("", line)
            else:
                in_block = True
            out.append(line)
            continue
        if lang == "go" and _GO_DIRECTIVE.match(raw):
            continue
        out.append(_LINE_COMMENT.sub("", raw, count=1))
    return textwrap.dedent("\n".join(line.expandtabs().rstrip() for line in out)).split("\n")


def _paragraphs(lines: list[str]) -> list[str]:
    """Paragraphs, each joined into one whitespace-collapsed string: separated by blank lines, and a
    list item starts a new one ("Foo does:\n  - a\n  - b" -> "Foo does:", "- a", "- b")."""
    paras, cur = [], []
    for line in lines:
        if cur and _LIST_ITEM.match(line):
            paras.append(" ".join(cur))
            cur = []
        if line.strip():
            cur.append(line.strip())
        elif cur:
            paras.append(" ".join(cur))
            cur = []
    if cur:
        paras.append(" ".join(cur))
    return [" ".join(p.split()) for p in paras]


def _until(lines: list[str], stop) -> list[str]:
    for i, line in enumerate(lines):
        if stop(i, line):
            return lines[:i]
    return lines


def _python_lines(lines: list[str]) -> list[str]:
    def stop(i: int, line: str) -> bool:
        if _PY_STOP.match(line) or _PY_SECTION.match(line):
            return True
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        return bool(line.strip()) and bool(_UNDERLINE.match(nxt)) and not _UNDERLINE.match(line)

    lines = _until(lines, stop)
    # a first paragraph that is only a call signature ("f(x, y) -> int"), as C-accelerated modules write
    paras = _paragraphs(lines)
    if paras and _PY_SIGNATURE.match(paras[0]):
        first_blank = next((i for i, ln in enumerate(lines) if not ln.strip() and i > 0), len(lines))
        lines = lines[first_blank:]
    return lines


def _javadoc_lines(lines: list[str]) -> list[str]:
    desc = _until(lines, lambda i, line: bool(BLOCK_TAG_LINE.match(line)))
    if not any(ln.strip() for ln in desc):  # JSDoc may say it with a tag: @description / @summary
        for i, line in enumerate(lines):
            if _DESCRIPTION_TAG.match(line):
                rest = _until(lines[i + 1:], lambda j, ln: bool(BLOCK_TAG_LINE.match(ln)))
                return [_DESCRIPTION_TAG.sub("", line), *rest]
    return desc


def _ruby_lines(lines: list[str]) -> list[str] | None:
    if any(ln.strip() == ":nodoc:" for ln in lines):
        return None
    out, skip = [], False
    tag_indent = -1  # inside a YARD tag: its text continues on lines indented deeper than the tag
    for line in lines:
        s = line.strip()
        if tag_indent >= 0:
            if not s or len(line) - len(line.lstrip()) > tag_indent:
                continue
            tag_indent = -1
        if BLOCK_TAG_LINE.match(line):
            if any(ln.strip() for ln in out):
                break  # the description ends at the first tag after it
            tag_indent = len(line) - len(line.lstrip())  # leading tags (@private, @api public) are skipped
            continue
        if s.startswith("rubocop:") or re.match(r"^=+\s", s):
            break
        if s.startswith(":call-seq:"):
            skip = True
            continue
        if skip:  # the signatures after :call-seq: run to the next blank line
            skip = bool(s)
            continue
        out.append(line)
    return out


def _inline_markup(text: str, lang: str) -> str:
    if lang in MARKUP_LANGS:
        text = _INLINE_DROP.sub("", text)
        text = _INLINE_LINK_LABEL.sub(r"\1", text)
        text = _INLINE_LINK.sub(lambda m: m.group(2).strip() or _link_target(m.group(1)), text)
        text = _INLINE_OTHER.sub(r"\1", text)
        text = HTML_INLINE.sub("", text)
        text = html.unescape(text)
    if lang == "python":
        text = _PY_ROLE.sub(lambda m: m.group(1).rsplit(".", 1)[-1] if "~" in m.group(0) else m.group(1), text)
    if lang == "ruby":
        text = _RDOC_CODE.sub(r"\1", text)
        text = _YARD_LINK.sub(lambda m: m.group(1).lstrip("#"), text)
        text = _RDOC_DIRECTIVE.sub("", text)
        text = _RUBY_STATUS.sub("", text)
    if lang == "go":
        text = _GO_DOC_LINK.sub(r"\1", text)
    text = _MD_LINK.sub(r"\1", text)
    text = _BACKTICKS.sub(r"\1", text)
    text = _BOLD.sub(r"\1", text)
    if lang != "go":  # Go doc has no emphasis; a * there is a pointer
        text = _EMPHASIS.sub(r"\1", text)
    return text


def _link_target(target: str) -> str:
    """``Foo#bar(int)`` -> ``Foo.bar``; ``#bar`` -> ``bar``."""
    target = re.sub(r"\(.*", "", target)
    return target.lstrip("#").replace("#", ".")


def first_sentence(text: str) -> str:
    """Up to the first ``.``/``?``/``!`` followed by whitespace or the end (not ``e.g.``, ``i.e.``
    and similar abbreviations; ``etc.`` only before a capital)."""
    for m in _SENTENCE_END.finditer(text):
        if m.group(0) == ".":
            word = re.search(r"([\w.]+)$", text[: m.start()])
            w = word.group(1).lower() if word else ""
            if w in _ABBREV:
                continue  # single letters are not skipped: "the cycles of G." ends a sentence
            if w == "etc" and not re.match(r"\s+[A-Z]", text[m.end():]):
                continue
        return text[: m.end()]
    return text


def _drop_leading_name(sentence: str, name: str) -> str:
    words = sentence.split(" ")
    i = 1 if len(words) > 2 and words[0].lower() in _LEADING_ARTICLE else 0
    if not name or len(words) <= i + 1:
        return sentence
    w = re.sub(r"\(.*\)$|[,:]$", "", words[i])
    if w == name or w.rsplit(".", 1)[-1] == name or w.rsplit("::", 1)[-1] == name or w.rsplit("#", 1)[-1] == name:
        return " ".join(words[i + 1:])
    return sentence


def clean_query(doc_text: str, lang: str, name: str) -> str:
    """The first sentence of `doc_text` (a docstring literal or a run of doc comments, as in the
    source), cleaned per language (see the module docstring); "" when nothing is left."""
    name = name.strip()
    if lang == "python":
        lines = _python_lines(_py_docstring_lines(doc_text))
    else:
        lines = _comment_lines(doc_text, lang)
        if lang in ("java", "javascript", "php"):
            lines = _javadoc_lines(lines)
        elif lang == "ruby":
            lines = _ruby_lines(lines)
            if lines is None:
                return ""
    lines = _until(lines, lambda i, line: bool(_EXAMPLES.match(line)))
    if lang in MARKUP_LANGS:
        # block HTML ends a paragraph (Javadoc's first sentence ends there too)
        lines = HTML_BLOCK.sub("\n\n", "\n".join(lines)).split("\n")
    paras = [p for p in _paragraphs(lines) if not _NOT_A_SUMMARY.match(p)]
    if not paras:
        return ""
    sentence = first_sentence(" ".join(_inline_markup(_LIST_MARK.sub("", paras[0]), lang).split()))
    return _drop_leading_name(sentence, name).strip()


def normalize_query(query: str) -> str:
    """Lower-case, alphanumerics only (any script), single spaces: the key for duplicates and
    decontamination."""
    return " ".join(re.sub(r"[\W_]+", " ", query.lower()).split())
