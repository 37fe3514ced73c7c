"""Grammars: load ``grammars/<lang>/`` and parse source bytes into language-agnostic arrays.

This is the ONLY module that imports ``tree_sitter``. Everything above it sees NumPy arrays of UTF-8
byte offsets and integer kinds, never a tree-sitter object.

A language is a folder ``grammars/<lang>/`` holding
  ``language.toml``  the grammar wheel's module and entry point, file extensions, aliases, comment
                     syntax, doc-comment prefixes and the default scope order (see
                     grammars/README.md), read by codept.languages (no tree-sitter) -- the
                     language table, extension map and aliases live there, not here;
  ``spans.scm``      ``@span.<kind>`` captures (kinds: codept.structure.kinds.SPAN_KINDS);
  ``locals.scm``     ``@local.scope/definition/reference`` captures;
  ``tags.scm``       ``@definition.<kind>`` + ``@name`` + optional ``@doc``;
  ``flow.scm``       ``@flow.<kind>`` control-flow regions and assignment parts (kinds.FLOW_KINDS),
                     read by codept.structure.dataflow.
Adding a language needs no Python: add the folder and pin the wheel in pyproject.toml.

Parsing one file (:func:`parse`):
  1. parse with tree-sitter (from bytes; with ``timeout_s``, fed from a callable so a progress
     callback can cancel it -- tree-sitter 0.26 has no other in-process time bound);
  2. one iterative cursor walk collects the leaves (byte start/end) and the maximum depth; a tree
     deeper than ``max_depth`` is refused (queries on a 100k-deep tree take minutes). It also
     answers the kind-only patterns of spans.scm/locals.scm (``(identifier) @span.identifier``,
     ``[(integer) (float)] @span.literal``, ``(identifier) @local.reference``): it reads every
     node's kind and keeps the nodes of those kinds, and the patterns are disabled in the query.
     A tree-sitter capture costs a Python Node and two attribute reads; these patterns made ~85%
     of the Python stdlib's captures. Only ``@span.*``, ``@local.reference`` and ``@local.member``
     move (their consumers use them as sets), so row order may differ from the query's, not rows;
  3. if the tree has errors, an ERROR/MISSING query gives the error byte ranges;
  4. the rest of spans + locals + flow runs as one query with ``captures``, the tags query with
     ``matches`` (a tag needs its name and doc from the same match).
Cost, CPython stdlib on one core: parse ~10 MB/s; the walk and queries add about 0.8x the parse
time (the walk ~0.4x, the queries ~0.4x, a third of it the traversal of the tags query).
Not covered: injected languages (SQL in strings, JS in HTML), incremental re-parsing.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import os
import re
import time
from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path

import numpy as np
import tree_sitter as ts

from codept import languages
from codept.data.jobs import SkipFile  # noqa: F401  (moved to the neutral module; re-exported)
from codept.structure import kinds, offsets

QUERY_FILES = ("spans", "locals", "tags", "flow")


@dataclass(frozen=True)
class Grammar:
    """A loaded language: settings from language.toml and the three compiled queries."""

    name: str
    extensions: tuple[str, ...]
    line_comment: tuple[str, ...]
    doc_comment_prefixes: tuple[str, ...]
    scope_order: str
    doc_skip_kinds: frozenset[str]  # node kinds that may stand between a doc comment and its definition
    fingerprint: str  # sha256 over language.toml, the query files and the grammar wheel version
    language: ts.Language = field(repr=False)
    queries: dict[str, ts.Query] = field(repr=False)
    needs_text: bool = False  # a query uses a text predicate (#eq?, #match?, ...)
    # kind-only patterns of spans/locals, answered by the walk instead of the query (see
    # _kind_only_patterns): walk_kinds[kind_id] == 1 if a node of that kind is captured by one;
    # kind_routes (E, 65536) int64: the row codes of a node of each kind (-1: none), one row per
    # capture the query would have made (see _ROUTE_REF / _ROUTE_MEMBER; a span kind id otherwise)
    walk_kinds: bytes = field(default=bytes(1 << 16), repr=False)
    kind_routes: np.ndarray = field(default_factory=lambda: np.zeros((0, 1 << 16), np.int64), repr=False)


@functools.lru_cache(maxsize=None)
def load_grammar(name: str) -> Grammar:
    """Load ``grammars/<name>/``; raises ValueError naming the file and rule that is broken."""
    info = languages.language(name)
    folder = info.path.parent
    module = import_module(info.module)
    entry = getattr(module, info.function)
    language = ts.Language(entry() if info.argument is None else entry(info.argument))
    h = hashlib.sha256(info.path.read_bytes())
    h.update(f"{info.module}=={getattr(module, '__version__', None) or _dist_version(info.wheel)}".encode())
    queries: dict[str, ts.Query] = {}
    sources: dict[str, str] = {}
    for qk in QUERY_FILES:
        qpath = folder / f"{qk}.scm"
        src = sources[qk] = query_source(name, qk)
        h.update(qk.encode() + b"\0" + src.encode())
        try:
            q = ts.Query(language, src)
        except Exception as e:  # tree_sitter.QueryError: report the file, not just the offset
            raise ValueError(f"{qpath}: does not compile: {e}") from e
        for i in range(q.capture_count):
            kinds.check_capture(qk, q.capture_name(i), str(qpath))
        queries[qk] = q
    queries["errors"] = ts.Query(language, "(ERROR) @e (MISSING) @e")
    # spans + locals run as ONE query: one traversal of the tree instead of two; its kind-only
    # patterns are disabled there and answered by the walk
    structure_src = "\n".join(sources[qk] for qk in ("spans", "locals", "flow"))
    queries["structure"] = ts.Query(language, structure_src)
    walk_kinds, kind_routes = _kind_only_patterns(language, queries["structure"], structure_src)
    # patterns capturing @flow.field run only for views with fields: a second copy of the query
    # keeps them (compiled here: queries are not picklable, and grammars load once per process)
    field_patterns = _patterns_with(queries["structure"], structure_src, "@flow.field")
    if field_patterns:
        queries["structure_fields"] = ts.Query(language, structure_src)
        _kind_only_patterns(language, queries["structure_fields"], structure_src)
        for i in field_patterns:
            queries["structure"].disable_pattern(i)
    return Grammar(
        name=name,
        extensions=info.extensions,
        line_comment=info.line_comment,
        doc_comment_prefixes=info.doc_comment_prefixes,
        scope_order=info.scope_order,
        doc_skip_kinds=frozenset(info.doc_skip_kinds),
        fingerprint=h.hexdigest(),
        language=language,
        queries=queries,
        needs_text=any("(#" in src for src in sources.values()),
        walk_kinds=walk_kinds,
        kind_routes=kind_routes,
    )


_INHERITS = re.compile(r";\s*inherits:\s*([\w, -]+)")


def query_source(lang: str, qk: str, _seen: tuple[str, ...] = ()) -> str:
    """The text of ``grammars/<lang>/<qk>.scm``. A file whose first line is ``; inherits: a, b``
    starts with the same file of languages a and b (recursively; nvim-treesitter's convention), so
    a grammar that extends another (TSX of TypeScript, C++ of C) adds only its own patterns.
    Every inherited pattern must compile against the inheriting grammar."""
    path = languages.grammars_dir() / lang / f"{qk}.scm"
    if not path.is_file():
        raise ValueError(f"{path.parent}: missing {qk}.scm" + (f" (inherited by {_seen[-1]})" if _seen else ""))
    src = path.read_text(encoding="utf-8")
    m = _INHERITS.match(src.split("\n", 1)[0])
    if not m:
        return src
    parts = []
    for parent in (x.strip() for x in m.group(1).split(",")):
        if parent in _seen or parent == lang:
            raise ValueError(f"{path}: inherits {parent!r} in a cycle {(*_seen, lang)}")
        parts.append(query_source(parent, qk, (*_seen, lang)))
    return "\n".join([*parts, src])


# A pattern that names node kinds only: `(identifier) @c` or `[(integer) (float)] @c`.
_KIND_ONLY = re.compile(r"(?:\((\w+)\)|\[((?:\s*\(\w+\))+)\s*\])\s*@([\w.]+)")
_ROUTE_REF = len(kinds.SPAN_KINDS)  # row codes of the walk's captures: a span kind id, or these
_ROUTE_MEMBER = _ROUTE_REF + 1
_ROUTE_FLOW = _ROUTE_MEMBER + 1  # + a flow kind id


def _strip_comments(src: str) -> str:
    """A query pattern without its `;` comments (outside string literals), whitespace collapsed."""
    out: list[str] = []
    i, n, in_str = 0, len(src), False
    while i < n:
        c = src[i]
        if in_str:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(src[i + 1])
                i += 1
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
            out.append(c)
        elif c == ";":
            while i < n and src[i] != "\n":
                i += 1
            continue
        else:
            out.append(c)
        i += 1
    return " ".join("".join(out).split())


def _kind_only_patterns(language: ts.Language, query: ts.Query, src: str) -> tuple[bytes, np.ndarray]:
    """Disable in `query` the patterns that capture nodes by kind alone, and return the tables with
    which :func:`parse`'s walk answers them (``walk_kinds``, ``kind_routes``, see Grammar).

    A tree-sitter capture costs a Python Node object and two attribute reads (~0.7 us); the walk
    visits every node anyway, and reads a node's kind for ~0.1 us. Only patterns whose captures
    are used as sets are moved (``@span.*``, ``@local.reference``, ``@local.member``: the view
    sorts spans, the resolver sorts identifiers), so row order may differ from the query's, the
    rows may not. A kind qualifies if it is a visible, named, non-supertype kind of the language
    (a supertype, ``(_)`` or an unknown name stays with the query)."""
    data = src.encode("utf-8")  # pattern offsets are UTF-8 byte offsets
    supertypes = set(language.supertypes)
    named_ids: dict[str, list[int]] = {}  # visible named kinds by name
    for k in range(language.node_kind_count):
        if language.node_kind_is_named(k) and language.node_kind_is_visible(k):
            named_ids.setdefault(language.node_kind_for_id(k), []).append(k)
    routes: list[tuple[int, int]] = []  # (kind id, row code), once per capture the query would make
    for i in range(query.pattern_count):
        text = _strip_comments(data[query.start_byte_for_pattern(i) : query.end_byte_for_pattern(i)].decode("utf-8"))
        m = _KIND_ONLY.fullmatch(text)
        if not m:
            continue
        cap = m.group(3)
        code = _SPAN_ID.get(cap, {"local.reference": _ROUTE_REF, "local.member": _ROUTE_MEMBER}.get(cap))
        if code is None and cap in _FLOW_ID:
            code = _ROUTE_FLOW + _FLOW_ID[cap]
        if code is None:
            continue
        names = [m.group(1)] if m.group(1) else re.findall(r"\((\w+)\)", m.group(2))
        # a query matches a kind by NAME: every symbol of that name (aliases give one name several
        # ids, e.g. JavaScript's `identifier`), so the walk must know all of them
        ids = [k for nm in names for k in named_ids.get(nm, [None])]
        if any(k is None or k in supertypes for k in ids):
            continue
        query.disable_pattern(i)
        routes.extend((k, code) for k in ids)
    per_kind: dict[int, list[int]] = {}
    for k, code in routes:
        per_kind.setdefault(k, []).append(code)
    table = np.full((max(map(len, per_kind.values()), default=0), 1 << 16), -1, np.int64)
    want = bytearray(1 << 16)
    for k, codes in per_kind.items():
        table[: len(codes), k] = codes
        want[k] = 1
    return bytes(want), table


def _patterns_with(query: ts.Query, src: str, capture: str) -> list[int]:
    """Indices of the patterns of `query` (compiled from `src`) that use `capture` (``@name``)."""
    data = src.encode("utf-8")
    pat = re.compile(re.escape(capture) + r"(?![\w.])")
    return [i for i in range(query.pattern_count)
            if pat.search(_strip_comments(data[query.start_byte_for_pattern(i): query.end_byte_for_pattern(i)]
                                          .decode("utf-8")))]


def _dist_version(wheel: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(wheel)
    except PackageNotFoundError:
        return "unknown"


@functools.lru_cache(maxsize=None)
def _parser(name: str) -> ts.Parser:
    return ts.Parser(load_grammar(name).language)


def grammars_fingerprint(names: list[str] | None = None) -> str:
    """One hash over the given (default: all) grammars: part of every prepared-data cache key."""
    h = hashlib.sha256()
    for n in names or languages.available_languages():
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
    flow: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), np.int64))  # (N, 3) start, end, flow kind id
    # (K, 3) start, end, DECL_KINDS id: names declared @local.nonlocal / @local.global
    decls: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), np.int64))
    timings: dict[str, float] = field(default_factory=dict)


_SPAN_ID = {f"span.{k}": i for i, k in enumerate(kinds.SPAN_KINDS)}
_SCOPE_MODE_ID = {("local.scope" + (f".{m}" if m else "")): i for i, m in enumerate(kinds.SCOPE_MODES)}
_DEF_KIND_ID = {("local.definition" + (f".{k}" if k else "")): i for i, k in enumerate(kinds.DEF_KINDS)}
_TAG_KIND_ID = {f"definition.{k}": i for i, k in enumerate(kinds.DEFINITION_KINDS)}
_FLOW_ID = {f"flow.{k}": i for k, i in kinds.FLOW_KIND_ID.items()}
DECL_KINDS = ("nonlocal", "global")
_DECL_ID = {f"local.{k}": i for i, k in enumerate(DECL_KINDS)}


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


def _kind_rows(g: Grammar, starts: np.ndarray, ends: np.ndarray, kind_ids: np.ndarray) -> np.ndarray:
    """(N, 3) start, end, row code of the captures of the kind-only patterns, from the walk's
    nodes of those kinds: one row per (node, capture), as the query would have made."""
    parts = []
    for route in g.kind_routes:  # (65536,) row code of each kind, -1 for none
        code = route[kind_ids]
        hit = code >= 0
        parts.append(np.column_stack([starts[hit], ends[hit], code[hit]]))
    return np.concatenate(parts) if parts else np.zeros((0, 3), np.int64)


def _stack(parts: list[np.ndarray], width: int) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros((0, width), np.int64)


def _isin_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Which (start, end) rows of `a` occur in `b`."""
    return offsets.rows_in(a, b)


def parse(lang: str, source: bytes, *, timeout_s: float | None = None, max_depth: int = 1500,
          fields: bool = False) -> ParsedFile:
    """Parse `source` (bytes) as `lang`. Raises SkipFile('too_deep'), and 'parse_timeout' when a
    `timeout_s` is given. ``fields``: also run the ``@flow.field`` patterns (kinds.FLOW_KINDS).

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

    # 2. iterative walk: leaves + depth (never recurse: 100k-deep trees exist in the wild), and the
    # nodes of the kinds that kind-only patterns capture (g.walk_kinds)
    want = g.walk_kinds
    leaf_s: list[int] = []
    leaf_e: list[int] = []
    leaf_k: list[int] = []
    node_s: list[int] = []
    node_e: list[int] = []
    node_k: list[int] = []
    cur = tree.walk()
    depth = deepest = 0
    while True:
        node = cur.node
        if cur.goto_first_child():
            k = node.kind_id
            if want[k]:
                node_s.append(node.start_byte)
                node_e.append(node.end_byte)
                node_k.append(k)
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > max_depth:
                    raise SkipFile("too_deep", f"syntax tree depth > {max_depth}")
            continue
        leaf_s.append(node.start_byte)
        leaf_e.append(node.end_byte)
        leaf_k.append(node.kind_id)
        while not cur.goto_next_sibling():
            if not cur.goto_parent():
                break
            depth -= 1
        else:
            continue
        break
    ls, le, lk = (np.fromiter(x, np.int64, len(leaf_s)) for x in (leaf_s, leaf_e, leaf_k))
    hit = np.frombuffer(want, np.uint8)[lk] != 0
    kind_rows = _kind_rows(g, *(np.concatenate([a[hit], np.fromiter(b, np.int64, len(node_s))])
                                for a, b in ((ls, node_s), (le, node_e), (lk, node_k))))
    nonempty = le > ls
    leaves = np.column_stack([ls[nonempty], le[nonempty]])
    t2 = time.perf_counter()

    # 3. error regions
    has_error = root.has_error
    errors: list = []
    if has_error:
        # sorted: the order of these captures was seen to vary between runs of the same input
        errors = sorted(_ranges(ts.QueryCursor(g.queries["errors"]).captures(root).get("e", [])))

    # 4. queries: route captures by name; offsets as flat int lists (no per-node tuples)
    code = kind_rows[:, 2]
    spans: list[np.ndarray] = [kind_rows[code < _ROUTE_REF]]
    flow_l: list[np.ndarray] = [kind_rows[code >= _ROUTE_FLOW] - np.array([0, 0, _ROUTE_FLOW])]
    scopes: list[np.ndarray] = []
    defs: list[np.ndarray] = []
    refs_l: list[np.ndarray] = [kind_rows[code == _ROUTE_REF, :2]]
    members_l: list[np.ndarray] = [kind_rows[code == _ROUTE_MEMBER, :2]]
    decls: list[np.ndarray] = []
    query = g.queries.get("structure_fields", g.queries["structure"]) if fields else g.queries["structure"]
    for name, nodes in ts.QueryCursor(query).captures(root).items():
        kind = _SPAN_ID.get(name)
        if kind is None:
            kind = _SCOPE_MODE_ID.get(name)
            if kind is None:
                kind = _DEF_KIND_ID.get(name)
                if kind is None:
                    kind = _FLOW_ID.get(name)
                    if kind is not None:
                        flow_l.append(_rows(nodes, kind))
                    elif name == "local.reference":
                        refs_l.append(_rows(nodes))
                    elif name == "local.member":
                        members_l.append(_rows(nodes))
                    elif name in _DECL_ID:
                        decls.append(_rows(nodes, _DECL_ID[name]))
                    continue
                defs.append(_rows(nodes, kind))
                continue
            scopes.append(_rows(nodes, kind))
            continue
        spans.append(_rows(nodes, kind))
    refs = np.concatenate(refs_l)
    members = np.concatenate(members_l)
    if len(members) and len(refs):
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
        flow=_flow_rows(flow_l, fields),
        decls=_stack(decls, 3),
        timings={"parse": t1 - t0, "walk": t2 - t1, "query": t3 - t2},
    )


_FIELD = kinds.FLOW_KIND_ID["field"]


def _flow_rows(parts: list[np.ndarray], fields: bool) -> np.ndarray:
    """The flow rows; without fields, none of kind field (a kind-only field pattern, Ruby's
    `(instance_variable) @flow.field`, is answered by the walk either way)."""
    flow = _stack(parts, 3)
    return flow if fields else flow[flow[:, 2] != _FIELD]


def binding_floor(lang: str, source: bytes) -> int:
    """The least work any view of `source` needs from py-tree-sitter, for benchmarks: parse, visit
    every node once with a cursor reading its kind, and two query traversals (spans + locals, tags)
    with a query that never captures. Returns the number of nodes. What :func:`parse` costs beyond
    this: the real patterns' matching, one Python Node per capture, and our own recording and
    routing."""
    root = _parser(lang).parse(source).root_node
    never = _never_query(lang)
    for _ in range(2):
        ts.QueryCursor(never).captures(root)
    cur, n = root.walk(), 0
    while True:
        cur.node.kind_id
        n += 1
        if cur.goto_first_child():
            continue
        while not cur.goto_next_sibling():
            if not cur.goto_parent():
                return n


@functools.lru_cache(maxsize=None)
def _never_query(lang: str) -> ts.Query:
    return ts.Query(load_grammar(lang).language, "(ERROR (ERROR (ERROR (ERROR)))) @x")


def query_rows(lang: str, source: bytes, qk: str) -> dict[str, np.ndarray]:
    """Capture name -> (N, 2) byte ranges of ``grammars/<lang>/<qk>.scm`` with every pattern run by
    tree-sitter (none answered by the walk): the reference that :func:`parse` must match."""
    g = load_grammar(lang)
    root = _parser(lang).parse(source).root_node
    return {name: _rows(nodes) for name, nodes in ts.QueryCursor(g.queries[qk]).captures(root).items()}


def _tags(g: Grammar, source: bytes, matches) -> list[Tag]:
    """One Tag per definition node and name; docs before the definition must be adjacent doc comments."""
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
    # one definition per name: a wrapper and the definition inside it (C++ `template <...>` and
    # its function) both match; keep the documented one, then the more specific kind, the outer
    by_name: dict[tuple[int, int], Tag] = {}
    for t in best.values():
        old = by_name.get((t.name_start, t.name_end))
        if old is None or (len(t.doc), t.kind, t.end - t.start) > (len(old.doc), old.kind, old.end - old.start):
            by_name[(t.name_start, t.name_end)] = t
    return sorted(by_name.values(), key=lambda t: (t.start, -t.end))


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
    if not before:
        return inside
    last = before[-1]
    parent = last.parent
    if parent is None:
        if not _gap_ok(source, last.end_byte, def_start):
            return inside
        run = [last]
    else:
        if parent.id not in siblings:
            kids = parent.children
            siblings[parent.id] = (kids, [k.start_byte for k in kids])
        kids, starts = siblings[parent.id]
        i = bisect.bisect_left(starts, last.start_byte)
        while i < len(kids) and kids[i] != last:
            i += 1
        # between the doc and the definition: nothing, or nodes of the language's doc_skip_kinds
        # (Rust `#[attr]`, C# `[Attr]`), each on its own lines without a blank line
        end, k = last.end_byte, i + 1
        while k < len(kids) and kids[k].start_byte < def_start and kids[k].type in g.doc_skip_kinds \
                and _gap_ok(source, end, kids[k].start_byte):
            end, k = kids[k].end_byte, k + 1
        if not _gap_ok(source, end, def_start):
            return inside
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
