"""The hand-written Markdown, reST and .po readers of codept/text/readers.py as of commit d79c4e8,
frozen here only as the baseline of benchmarks/bench_readers.py (the library now uses markdown-it-py,
docutils and polib). Not imported by codept; do not fix bugs here: it is the measured "before"."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator

from codept.text.prose import _join, reflow  # noqa: F401  (shared paragraph helpers)


def _blocks(lines):
    cur = []
    for line in lines:
        if line.strip():
            cur.append(line)
        elif cur:
            yield cur
            cur = []
    if cur:
        yield cur


# -- Markdown -------------------------------------------------------------------------------------

_MD_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
_MD_ATX = re.compile(r"^\s{0,3}#{1,6}(?:\s+(.*?))?\s*#*\s*$")
_MD_SETEXT = re.compile(r"^\s{0,3}(?:=+|-+)\s*$")
_MD_HR = re.compile(r"^\s{0,3}([-*_])(?:\s*\1){2,}\s*$")
_MD_TABLE_SEP = re.compile(r"^\s*\|?\s*:?-+:?\s*(?:\|\s*:?-+:?\s*)+\|?\s*$")
_MD_LINKDEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*\S")
_MD_QUOTE = re.compile(r"^\s*(?:>\s?)+")
_MD_ITEM = re.compile(r"^\s*(?:[-*+]|\d{1,9}[.)])\s+")
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.S)
_HTML_TAG = re.compile(r"</?(?:a|abbr|b|br|code|dd|del|details|div|dl|dt|em|h[1-6]|hr|i|img|ins|kbd|li|ol|p|"
                       r"pre|s|samp|small|span|strong|sub|summary|sup|table|tbody|td|th|thead|tr|u|ul|var)"
                       r"\b[^>]*>", re.I)
_MD_CODE = re.compile(r"(`+)(.+?)\1", re.S)
_MD_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_MD_LINK = re.compile(r"\[([^\]]+)\](?:\([^)]*\)|\[[^\]]*\])")
_MD_STRONG = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
_MD_EM = re.compile(r"(?<![\w*])\*(?=[^\s*])([^*\n]+?)(?<=\S)\*(?![\w*])")
_MD_ESCAPE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|<>~])")


def _md_inline(s: str) -> str:
    s = _MD_IMAGE.sub(r"\1", s)
    s = _MD_LINK.sub(r"\1", s)  # before code spans: link text is often code ([`path.sep`][])
    parts = _MD_CODE.split(s)  # [text, ticks, code, text, ticks, code, ...]
    out = []
    for i in range(0, len(parts), 3):
        t = parts[i]
        t = _HTML_TAG.sub("", t)
        t = _MD_STRONG.sub(r"\2", t)
        t = _MD_EM.sub(r"\1", t)
        out.append(_MD_ESCAPE.sub(r"\1", t))
        if i + 2 < len(parts):
            out.append(parts[i + 2].strip())
    return "".join(out)


def markdown_to_text(text: str) -> str:
    """Markdown -> plain paragraphs (see the module docstring for what is dropped)."""
    text = _HTML_COMMENT.sub("", text)
    lines = text.splitlines()
    if lines and lines[0].strip() == "---":  # YAML front matter
        for j in range(1, len(lines)):
            if lines[j].strip() in ("---", "..."):
                lines = lines[j + 1 :]
                break
    paras: list[list[str]] = []
    cur: list[str] = []

    def flush():
        nonlocal cur
        if cur:
            paras.append(cur)
            cur = []

    fence = None
    for line in lines:
        if fence is not None:
            m = _MD_FENCE.match(line)
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not line.strip(fence[0] + " \t"):
                fence = None
            continue
        m = _MD_FENCE.match(line)
        if m:
            flush()
            fence = m.group(1)
            continue
        if not line.strip():
            flush()
            continue
        if "<!--" in line:  # an unterminated comment opener (terminated ones are gone): drop the line
            continue
        m = _MD_ATX.match(line)
        if m:
            flush()
            paras.append([m.group(1) or ""])
            continue
        if _MD_SETEXT.match(line) and cur:
            title = cur.pop()
            flush()
            paras.append([title])
            continue
        if _MD_HR.match(line) or _MD_TABLE_SEP.match(line) or line.lstrip().startswith("|") or _MD_LINKDEF.match(line):
            if line.lstrip().startswith("|") or _MD_TABLE_SEP.match(line):
                cur = []  # a table's header row came before its separator: drop it too
            flush()
            continue
        line = _MD_QUOTE.sub("", line)
        m = _MD_ITEM.match(line)
        if m:
            flush()
            line = line[m.end() :]
        cur.append(line)
    flush()
    return _join(paras, _md_inline)


# -- reStructuredText -----------------------------------------------------------------------------

RST_DROP_BODY = frozenset(
    "code code-block sourcecode literalinclude highlight image figure toctree math raw include csv-table "
    "list-table table tabularcolumns graphviz productionlist testcode testoutput testsetup testcleanup doctest "
    "autosummary automodule autoclass autofunction index only ifconfig contents sectnum kernel-doc "
    "kernel-feat kernel-abi kernel-include flat-table c:macro-dummy".split())
_RST_ADORN = re.compile(r"^([=\-`:'\"~^_*+#<>.!$%&,/;?@\\|])\1{2,}\s*$")
_RST_DIRECTIVE = re.compile(r"^(\s*)\.\.\s+([\w:.+-]+)::(.*)$")
_RST_EXPLICIT = re.compile(r"^(\s*)\.\.(?:\s|$)")
_RST_OPTION = re.compile(r"^\s*:[\w.+ -]+:(?:\s|$)")
_RST_TABLE = re.compile(r"^\s*(?:\+[-=+]+\+|=+(?:\s+=+)+)\s*$")
_RST_ITEM = re.compile(r"^\s*(?:[-*+•‣]|\d{1,9}[.)]|#\.|\(?[a-zA-Z0-9]\))\s+")
_RST_LITERAL = re.compile(r"``(.+?)``")
_RST_ROLE = re.compile(r":[\w:.+-]+:`([^`]*)`")
_RST_REF = re.compile(r"`([^`]*?)\s*<[^<>`]*>`_{0,2}")
_RST_INTERP = re.compile(r"`([^`]+)`_{0,2}")
_RST_STRONG = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*")
_RST_EM = re.compile(r"(?<![\w*])\*(?=[^\s*])([^*\n]+?)(?<=\S)\*(?![\w*])")
_RST_FOOTNOTE = re.compile(r"\s?\[(?:#[\w-]*|\d+|\*)\]_")
_RST_ESCAPE = re.compile(r"\\(.)")


def _rst_role_text(m: re.Match) -> str:
    t = m.group(1)
    t = re.sub(r"\s*<[^<>]*>$", "", t) if t.rstrip().endswith(">") and "<" in t else t
    if t.startswith("~"):  # Sphinx: show the last component only
        t = t[1:].rsplit(".", 1)[-1]
    return t.lstrip("!")


def _rst_inline(s: str) -> str:
    parts = _RST_LITERAL.split(s)  # [text, literal, text, ...]
    out = []
    for i, t in enumerate(parts):
        if i % 2:
            out.append(t)
            continue
        t = _RST_ROLE.sub(_rst_role_text, t)
        t = _RST_REF.sub(r"\1", t)
        t = _RST_INTERP.sub(r"\1", t)
        t = _RST_STRONG.sub(r"\1", t)
        t = _RST_EM.sub(r"\1", t)
        t = _RST_FOOTNOTE.sub("", t)
        out.append(_RST_ESCAPE.sub(r"\1", t))
    return "".join(out)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def rst_to_text(text: str) -> str:
    """reStructuredText -> plain paragraphs (see the module docstring for what is dropped)."""
    lines = text.expandtabs(8).splitlines()
    paras: list[list[str]] = []
    cur: list[str] = []
    cur_indent = 0
    skip_deeper: int | None = None  # skip blank lines and lines indented more than this
    literal_after: int | None = None  # the last paragraph ended with '::' at this indent
    drop_block = False  # inside a table or doctest block: drop until a blank line
    in_options = False  # right after a kept directive: drop its ':option: value' lines

    def flush():
        nonlocal cur, literal_after
        if cur:
            last = cur[-1].rstrip()
            if last.endswith("::"):
                literal_after = cur_indent
                cur[-1] = last[:-2].rstrip() + (":" if last[:-2].strip() and not last[:-2].endswith(" ") else "")
                if not cur[-1].strip():
                    cur.pop()
            if cur:
                paras.append(cur)
            cur = []

    for line in lines:
        s = line.strip()
        if skip_deeper is not None:
            if not s or _indent(line) > skip_deeper:
                continue
            skip_deeper = None
        if drop_block:
            if s:
                continue
            drop_block = False
        if not s:
            flush()
            continue
        if literal_after is not None:
            ind = _indent(line)
            la, literal_after = literal_after, None
            if ind > la:  # the literal block of a preceding '::'
                skip_deeper = la
                continue
        if _RST_TABLE.match(line) or s.startswith(">>>"):
            cur = []
            drop_block = True
            continue
        if _RST_ADORN.match(line):  # over/underline: the line before it is a title
            title = cur.pop() if cur else None
            flush()
            if title is not None:
                paras.append([title])
            continue
        m = _RST_DIRECTIVE.match(line)
        if m:
            flush()
            ind, name = len(m.group(1)), m.group(2).lower()
            if name in RST_DROP_BODY or name.split(":")[-1] in RST_DROP_BODY:
                skip_deeper = ind
            else:  # keep the body (note, warning, function, ...), drop the signature/arguments
                in_options = True
            continue
        if _RST_EXPLICIT.match(line):  # comment, target, footnote, substitution: drop with its body
            flush()
            skip_deeper = _indent(line)
            continue
        if in_options:
            if _RST_OPTION.match(line) and not cur:
                continue
            in_options = False
        if not cur:
            cur_indent = _indent(line)
        m = _RST_ITEM.match(line)
        if m:
            flush()
            cur_indent = _indent(line)
            line = line[m.end() :]
        elif s.startswith("| "):  # line block
            line = s[2:]
        cur.append(line)
    flush()
    return _join(paras, _rst_inline)


_PO_KEY = re.compile(r'^(msgctxt|msgid|msgid_plural|msgstr(?:\[(\d+)\])?)\s*"(.*)"\s*$')
_PO_CONT = re.compile(r'^"(.*)"\s*$')
_C_ESCAPE = re.compile(r"\\(x[0-9A-Fa-f]{1,2}|[0-7]{1,3}|.)")
_C_SIMPLE = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v"}


def _unescape(s: str) -> str:
    def one(m: re.Match) -> str:
        e = m.group(1)
        if e[0] == "x":
            return chr(int(e[1:], 16))
        if e[0] in "01234567":
            return chr(int(e, 8))
        return _C_SIMPLE.get(e, e)

    return _C_ESCAPE.sub(one, s) if "\\" in s else s


@dataclass
class PoEntry:
    msgid: str = ""
    msgid_plural: str | None = None
    msgctxt: str | None = None
    msgstr: dict | None = None  # plural index (0 for a singular msgstr) -> string
    fuzzy: bool = False


def parse_po(text: str, where: str = "<po>") -> Iterator[PoEntry]:
    """Entries of a .po file, in order (obsolete ``#~`` entries are not returned).
    Raises ValueError naming the line for anything that is not .po syntax."""
    entry = PoEntry()
    field: tuple[str, int] | None = None
    started = False
    for n, raw in enumerate(text.split("\n"), 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            if started and entry.msgstr is not None:  # a comment after msgstr starts a new entry
                yield entry
                entry, field, started = PoEntry(), None, False
            if line.startswith("#,") and "fuzzy" in [x.strip() for x in line[2:].split(",")]:
                entry.fuzzy = True
            continue
        m = _PO_KEY.match(line)
        if m:
            key, idx, val = m.group(1), m.group(2), _unescape(m.group(3))
            if key in ("msgctxt", "msgid") and entry.msgstr is not None:
                yield entry
                entry, started = PoEntry(), False
            started = True
            if key.startswith("msgstr"):
                entry.msgstr = entry.msgstr or {}
                i = int(idx) if idx is not None else 0
                entry.msgstr[i] = val
                field = ("msgstr", i)
            else:
                setattr(entry, key, val)
                field = (key, -1)
            continue
        m = _PO_CONT.match(line)
        if m and field is not None:
            val = _unescape(m.group(1))
            if field[0] == "msgstr":
                entry.msgstr[field[1]] += val
            else:
                setattr(entry, field[0], (getattr(entry, field[0]) or "") + val)
            continue
        raise ValueError(f"{where}:{n}: not .po syntax (keyword, quoted continuation or comment): {raw[:80]!r}")
    if started and entry.msgstr is not None:
        yield entry


