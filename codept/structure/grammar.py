"""Grammars: load ``grammars/<lang>/`` and parse source bytes into language-agnostic arrays.

This is the ONLY module that imports ``tree_sitter``. Everything above it sees NumPy arrays of UTF-8
byte offsets and integer kinds, never a tree-sitter object.

A language is a folder ``grammars/<lang>/`` holding
  ``language.toml``  the grammar wheel's module and entry point, file extensions, comment syntax,
                     doc-comment prefixes and the default scope order (see grammars/README.md);
  ``spans.scm``      ``@span.<kind>`` captures (kinds: codept.structure.kinds.SPAN_KINDS);
  ``locals.scm``     ``@local.scope/definition/reference`` captures;
  ``tags.scm``       ``@definition.<kind>`` + ``@name`` + optional ``@doc``.
Adding a language needs no Python: add the folder and pin the wheel in pyproject.toml.

Parsing one file (:func:`parse`):
  1. parse with tree-sitter (from bytes; with ``timeout_s``, fed from a callable so a progress
     callback can cancel it -- tree-sitter 0.26 has no other in-process time bound);
  2. one iterative cursor walk collects the leaves (byte start/end) and the maximum depth; a tree
     deeper than ``max_depth`` is refused (queries on a 100k-deep tree take minutes);
  3. if the tree has errors, an ERROR/MISSING query gives the error byte ranges;
  4. the spans and locals queries run with ``captures``, the tags query with ``matches`` (a tag
     needs its name and doc from the same match).
Cost, CPython stdlib on one core: parse ~10 MB/s; the walk and queries add about as much again.
Not covered: injected languages (SQL in strings, JS in HTML), incremental re-parsing.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import os
import time
import tomllib
from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path

import numpy as np
import tree_sitter as ts

from codept.structure import kinds

QUERY_FILES = ("spans", "locals", "tags")


class SkipFile(Exception):
    """A file that cannot be viewed; ``reason`` is a short stable key for manifests."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


def grammars_dir() -> Path:
    """``$CODEPT_GRAMMARS`` or the ``grammars/`` folder next to the ``codept`` package."""
    env = os.environ.get("CODEPT_GRAMMARS")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "grammars"


def available_languages() -> list[str]:
    root = grammars_dir()
    return sorted(p.parent.name for p in root.glob("*/language.toml"))


@functools.lru_cache(maxsize=None)
def extension_map() -> dict[str, str]:
    """File extension (with dot, lower case) -> language name, from every language.toml."""
    out: dict[str, str] = {}
    for lang in available_languages():
        for ext in _read_toml(grammars_dir() / lang / "language.toml").get("extensions", []):
            if ext.lower() in out:
                raise ValueError(f"extension {ext} claimed by both {out[ext.lower()]} and {lang}")
            out[ext.lower()] = lang
    return out


def language_for_path(path: str | os.PathLike) -> str | None:
    return extension_map().get(Path(path).suffix.lower())


def _read_toml(path: Path) -> dict:
    with open(path, "rb") as f:
        return tomllib.load(f)


@dataclass(frozen=True)
class Grammar:
    """A loaded language: settings from language.toml and the three compiled queries."""

    name: str
    extensions: tuple[str, ...]
    line_comment: tuple[str, ...]
    doc_comment_prefixes: tuple[str, ...]
    scope_order: str
    fingerprint: str  # sha256 over language.toml, the query files and the grammar wheel version
    language: ts.Language = field(repr=False)
    queries: dict[str, ts.Query] = field(repr=False)
    needs_text: bool = False  # a query uses a text predicate (#eq?, #match?, ...)


REQUIRED_TOML_KEYS = ("module", "extensions", "line_comment", "scope_order")


@functools.lru_cache(maxsize=None)
def load_grammar(name: str) -> Grammar:
    """Load ``grammars/<name>/``; raises ValueError naming the file and rule that is broken."""
    folder = grammars_dir() / name
    toml_path = folder / "language.toml"
    if not toml_path.is_file():
        raise ValueError(f"no grammar {name!r}: {toml_path} missing; available: {available_languages()}")
    cfg = _read_toml(toml_path)
    missing = [k for k in REQUIRED_TOML_KEYS if k not in cfg]
    if missing:
        raise ValueError(f"{toml_path}: missing keys {missing}")
    if cfg["scope_order"] not in ("hoisted", "sequential"):
        raise ValueError(f"{toml_path}: scope_order={cfg['scope_order']!r}, expected hoisted or sequential")
    module = import_module(cfg["module"])
    language = ts.Language(getattr(module, cfg.get("function", "language"))())
    h = hashlib.sha256(toml_path.read_bytes())
    h.update(f"{cfg['module']}=={getattr(module, '__version__', _dist_version(cfg))}".encode())
    queries: dict[str, ts.Query] = {}
    for qk in QUERY_FILES:
        qpath = folder / f"{qk}.scm"
        if not qpath.is_file():
            raise ValueError(f"{folder}: missing {qk}.scm")
        src = qpath.read_text(encoding="utf-8")
        h.update(qk.encode() + b"\0" + src.encode())
        try:
            q = ts.Query(language, src)
        except Exception as e:  # tree_sitter.QueryError: report the file, not just the offset
            raise ValueError(f"{qpath}: does not compile: {e}") from e
        for i in range(q.capture_count):
            kinds.check_capture(qk, q.capture_name(i), str(qpath))
        queries[qk] = q
    queries["errors"] = ts.Query(language, "(ERROR) @e (MISSING) @e")
    # spans + locals run as ONE query: one traversal of the tree instead of two
    queries["structure"] = ts.Query(language, (folder / "spans.scm").read_text(encoding="utf-8") + "\n"
                                    + (folder / "locals.scm").read_text(encoding="utf-8"))
    lc = cfg["line_comment"]
    return Grammar(
        name=name,
        extensions=tuple(cfg["extensions"]),
        line_comment=(lc,) if isinstance(lc, str) else tuple(lc),
        doc_comment_prefixes=tuple(cfg.get("doc_comment_prefixes", [])),
        scope_order=cfg["scope_order"],
        fingerprint=h.hexdigest(),
        language=language,
        queries=queries,
        needs_text=any("(#" in (folder / f"{qk}.scm").read_text(encoding="utf-8") for qk in QUERY_FILES),
    )


def _dist_version(cfg: dict) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(cfg.get("wheel", cfg["module"].replace("_", "-")))
    except PackageNotFoundError:
        return "unknown"


@functools.lru_cache(maxsize=None)
def _parser(name: str) -> ts.Parser:
    return ts.Parser(load_grammar(name).language)


def grammars_fingerprint(names: list[str] | None = None) -> str:
    """One hash over the given (default: all) grammars: part of every prepared-data cache key."""
    h = hashlib.sha256()
    for n in names or available_languages():
        h.update(load_grammar(n).fingerprint.encode())
    return h.hexdigest()


# ---------------------------------------------------------------------------------------------
# Parsing


@dataclass
class Tag:
    kind: int  # index into kinds.DEFINITION_KINDS
    start: int  # byte range of the whole definition
    end: int
    name_start: int
    name_end: int
    doc: list[tuple[int, int]]  # byte ranges of the doc nodes (docstring, or adjacent comments)


@dataclass
class ParsedFile:
    """Language-agnostic parse result; every offset is a UTF-8 byte offset into the source."""

    n_bytes: int
    has_error: bool
    max_depth: int
    leaves: np.ndarray  # (L, 2) int64 start, end of every non-empty leaf, in source order
    errors: np.ndarray  # (E, 2) int64 ERROR / MISSING ranges
    spans: np.ndarray  # (S, 3) int64 start, end, kind id
    scopes: np.ndarray  # (C, 3) int64 start, end, mode id (index into kinds.SCOPE_MODES)
    defs: np.ndarray  # (D, 3) int64 start, end, def kind id (index into kinds.DEF_KINDS)
    refs: np.ndarray  # (R, 2) int64 start, end
    tags: list[Tag]
    timings: dict[str, float] = field(default_factory=dict)


_SPAN_ID = {f"span.{k}": i for i, k in enumerate(kinds.SPAN_KINDS)}
_SCOPE_MODE_ID = {("local.scope" + (f".{m}" if m else "")): i for i, m in enumerate(kinds.SCOPE_MODES)}
_DEF_KIND_ID = {("local.definition" + (f".{k}" if k else "")): i for i, k in enumerate(kinds.DEF_KINDS)}
_TAG_KIND_ID = {f"definition.{k}": i for i, k in enumerate(kinds.DEFINITION_KINDS)}


def _ranges(nodes) -> list[tuple[int, int]]:
    return [(n.start_byte, n.end_byte) for n in nodes]


def _array(rows: list, width: int) -> np.ndarray:
    return np.asarray(rows, dtype=np.int64).reshape(-1, width)


def _rows(nodes: list, kind: int | None = None) -> np.ndarray:
    """(N, 2) start, end byte offsets of `nodes`, or (N, 3) with a constant `kind` column."""
    out = np.empty((len(nodes), 2 if kind is None else 3), dtype=np.int64)
    out[:, 0] = [n.start_byte for n in nodes]
    out[:, 1] = [n.end_byte for n in nodes]
    if kind is not None:
        out[:, 2] = kind
    return out


def _stack(parts: list[np.ndarray], width: int) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros((0, width), np.int64)


def _isin_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Which (start, end) rows of `a` occur in `b` (offsets < 2**32)."""
    return np.isin(a[:, 0] << 32 | a[:, 1], b[:, 0] << 32 | b[:, 1])


def parse(lang: str, source: bytes, *, timeout_s: float | None = None, max_depth: int = 1500) -> ParsedFile:
    """Parse `source` (bytes) as `lang`. Raises SkipFile('too_deep'), and 'parse_timeout' when a
    `timeout_s` is given.

    With ``timeout_s=None`` (the default, and what ``codept prepare`` uses: its workers are killed
    after their own timeout) tree-sitter parses the bytes directly. With a timeout, the source must
    be fed through a callable (tree-sitter 0.26 ignores the progress callback for bytes), and
    py-tree-sitter 0.26 then leaks a reference to every chunk it reads: each timed parse keeps its
    source alive for the life of the process. Use it for one-off parses, not for a corpus loop.
    """
    g = load_grammar(lang)
    parser = _parser(lang)
    t0 = time.perf_counter()
    n = len(source)
    if timeout_s is None:
        tree = parser.parse(source)
    else:
        deadline = t0 + timeout_s
        chunk = 1 << 20  # few read calls: each one leaks its chunk

        def read(offset: int, _point) -> bytes:
            return source[offset : offset + chunk] if offset < n else b""

        try:
            tree = parser.parse(read, progress_callback=lambda *_: time.perf_counter() > deadline)
        except ValueError as e:  # cancelled by the progress callback
            parser.reset()  # else the NEXT parse resumes this cancelled one and returns its tree
            raise SkipFile("parse_timeout", f"> {timeout_s:g}s for {n} bytes") from e
        if g.needs_text:
            # a tree parsed from a callable has no text: text predicates (#eq?, #match?) would
            # re-read the source through the callable from every node's start. A re-parse from bytes
            # reusing the whole tree (old_tree, no edits) costs ~12% of a parse.
            tree = parser.parse(source, old_tree=tree)
    t1 = time.perf_counter()
    root = tree.root_node

    # 2. iterative walk: leaves + depth (never recurse: 100k-deep trees exist in the wild)
    starts: list[int] = []
    ends: list[int] = []
    cur = tree.walk()
    depth = deepest = 0
    while True:
        if cur.goto_first_child():
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > max_depth:
                    raise SkipFile("too_deep", f"syntax tree depth > {max_depth}")
            continue
        node = cur.node
        s, e = node.start_byte, node.end_byte
        if e > s:
            starts.append(s)
            ends.append(e)
        while not cur.goto_next_sibling():
            if not cur.goto_parent():
                break
            depth -= 1
        else:
            continue
        break
    leaves = np.stack([np.asarray(starts, np.int64), np.asarray(ends, np.int64)], axis=1)
    t2 = time.perf_counter()

    # 3. error regions
    has_error = root.has_error
    errors: list = []
    if has_error:
        errors = _ranges(ts.QueryCursor(g.queries["errors"]).captures(root).get("e", []))

    # 4. queries: route captures by name; offsets as flat int lists (no per-node tuples)
    spans: list[np.ndarray] = []
    scopes: list[np.ndarray] = []
    defs: list[np.ndarray] = []
    refs = members = None
    for name, nodes in ts.QueryCursor(g.queries["structure"]).captures(root).items():
        kind = _SPAN_ID.get(name)
        if kind is None:
            kind = _SCOPE_MODE_ID.get(name)
            if kind is None:
                kind = _DEF_KIND_ID.get(name)
                if kind is None:
                    if name == "local.reference":
                        refs = _rows(nodes)
                    elif name == "local.member":
                        members = _rows(nodes)
                    continue
                defs.append(_rows(nodes, kind))
                continue
            scopes.append(_rows(nodes, kind))
            continue
        spans.append(_rows(nodes, kind))
    refs = np.zeros((0, 2), np.int64) if refs is None else refs
    if members is not None and len(refs):
        refs = refs[~_isin_rows(refs, members)]
    tags = _tags(g, source, ts.QueryCursor(g.queries["tags"]).matches(root))
    t3 = time.perf_counter()
    return ParsedFile(
        n_bytes=n,
        has_error=has_error,
        max_depth=deepest,
        leaves=leaves,
        errors=_array(errors, 2),
        spans=_stack(spans, 3),
        scopes=_stack(scopes, 3),
        defs=_stack(defs, 3),
        refs=refs,
        tags=tags,
        timings={"parse": t1 - t0, "walk": t2 - t1, "query": t3 - t2},
    )


def _tags(g: Grammar, source: bytes, matches) -> list[Tag]:
    """One Tag per definition node; docs before the definition must be adjacent doc comments."""
    best: dict[tuple[int, int], Tag] = {}
    siblings: dict[int, tuple[list, list[int]]] = {}  # parent id -> (children, their start bytes)
    for _pattern, caps in matches:
        defn = [(k, v) for k, v in caps.items() if k in _TAG_KIND_ID]
        names = caps.get("name")
        if not defn or not names:
            continue
        kind_name, dnodes = defn[0]
        d, nm = dnodes[0], names[0]
        doc = _adjacent_doc(g, source, d.start_byte, caps.get("doc", []), siblings)
        key = (d.start_byte, d.end_byte)
        tag = Tag(_TAG_KIND_ID[kind_name], d.start_byte, d.end_byte, nm.start_byte, nm.end_byte, doc)
        old = best.get(key)
        # `(comment)* @doc . (def)` matches several ways, and a method also matches as a function:
        # keep the longest doc, then the more specific kind
        if old is None or (len(doc), tag.kind) > (len(old.doc), old.kind):
            best[key] = tag
    return sorted(best.values(), key=lambda t: (t.start, -t.end))


def _gap_ok(source: bytes, end: int, start: int) -> bool:
    """Only whitespace and at most one line break between two nodes: no blank line."""
    gap = source[end:start]
    return not gap.strip() and gap.count(b"\n") <= 1


def _adjacent_doc(g: Grammar, source: bytes, def_start: int, nodes: list, siblings: dict) -> list[tuple[int, int]]:
    """Doc nodes inside the definition (docstrings) are kept as they are. Before it, the doc is the
    run of same-type comments ending right above the definition (no blank line between), whose
    first comment starts with a doc prefix. The query need only capture the LAST comment
    (``(comment)? @doc . (def)``): the run is extended here through the preceding siblings, in
    linear time (a ``(comment)*`` pattern, and tree-sitter's ``prev_sibling``, are quadratic in the
    length of a comment run). `siblings` caches each parent's children across calls."""
    inside = [(n.start_byte, n.end_byte) for n in nodes if n.start_byte >= def_start]
    before = sorted((n for n in nodes if n.end_byte <= def_start), key=lambda n: n.start_byte)
    if not before or not _gap_ok(source, before[-1].end_byte, def_start):
        return inside
    last = before[-1]
    parent = last.parent
    if parent is None:
        run = [last]
    else:
        if parent.id not in siblings:
            kids = parent.children
            siblings[parent.id] = (kids, [k.start_byte for k in kids])
        kids, starts = siblings[parent.id]
        i = bisect.bisect_left(starts, last.start_byte)
        while i < len(kids) and kids[i] != last:
            i += 1
        run = [last]
        j = i - 1
        while j >= 0 and kids[j].kind_id == last.kind_id and _gap_ok(source, kids[j].end_byte, run[-1].start_byte):
            run.append(kids[j])
            j -= 1
    run.reverse()
    ranges = [(n.start_byte, n.end_byte) for n in run]
    if g.doc_comment_prefixes:
        prefixes = tuple(p.encode() for p in g.doc_comment_prefixes)
        # a run is a doc only from its first doc comment on (/** ..., ///, # ...)
        while ranges and not source[ranges[0][0] : ranges[0][1]].startswith(prefixes):
            ranges.pop(0)
    return ranges + inside
