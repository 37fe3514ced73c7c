"""CodeView: one source file as token ids plus its structure, all in token coordinates.

This is the single, language-agnostic input of every code objective. Fields (T tokens):

  input_ids  (T,)   int32  token ids (no special tokens added)
  offsets    (T, 2) int32  char offsets into ``text``; they tile the text (byte-level BPE, untrimmed)
  leaf       (T,)   int32  index of the AST leaf the token stands for (its first non-space char), -1 for
                           whitespace-only tokens; equal ids = one syntactic token (whole-leaf masking).
                           Text a node holds outside its children (Python's string content around
                           an escape sequence) is one unit per run between two leaves, with an id
                           at or above the leaf count: every token with a non-space char has an id
  spans      (S, 3) int32  token start, token end (exclusive), kind (codept.structure.kinds.SPAN_KINDS);
                           sorted by (start, -end, kind); none overlaps a syntax error
  idents     (I, 5) int32  token start, end, name id (into ``names``), role (def/ref/free), binding id
  functions  (F, 7) int32  kind (DEFINITION_KINDS), def start, def end, name start, name end,
                           doc start, doc end (-1, -1 without a doc); all token ranges
  errors     (E, 2) int32  token ranges of ERROR / MISSING regions
  dataflow   (G, 3) int32  dst, src, kind: rows of ``idents`` joined by a dataflow edge
                           (codept.structure.dataflow: kind 0 comesFrom = dst a use reached by the
                           definition src; kind 1 computedFrom = dst a written variable computed
                           from src); sorted, unique; no edge touches a dropped identifier
  summaries  (K, 2) int32  function row, token index: the first tokens (at most SUMMARY_CAP) of each
                           doc's summary, its first sentence without framing markers, as a query
                           reads (codept.structure.summary); by row, then token; code_doc's doc side

Building one (:func:`build_view`):
  1. :func:`codept.structure.grammar.parse` -> byte-offset arrays (leaves, spans, locals, tags);
  2. tokenize the text once (``tokenizers``, char offsets);
  3. convert every byte range to chars (one table per non-ASCII file), then to token ranges by
     look-up in per-char count tables (codept.structure.offsets.token_tables: same result as a
     binary search, O(chars) once per file);
  4. resolve names (codept.structure.resolve) on byte offsets, then convert; names are compared as
     integer ids (:func:`name_ids`: hashed byte rows, verified exactly);
  5. drop spans and identifiers that overlap a syntax error;
  6. dataflow edges (codept.structure.dataflow) on the byte-level identifiers, re-indexed to the
     kept ones;
  7. doc summaries (codept.structure.summary.doc_summaries) of the kept definitions.
A token-only view (:func:`build_token_view`, a language without a grammar: codept.languages,
grammars/tokens_only.toml) has the tokens, offsets and ``leaf`` = lexemes (a run of word characters
or one other non-space character: ``foo.bar(x)`` is 6 units), every structure field empty and
has_error False; objectives that need structure skip it (codept.objectives.spec ``structure``).
A token range is the smallest run of tokens covering the node; a BPE token that straddles two nodes
(``"):"``) belongs to both ranges. Cost: see benchmarks/bench_structure.py (last line: the ratio to
tokenize-only). Not covered: execution labels (later issues add fields here).
"""

from __future__ import annotations

import itertools
import re
import time
from dataclasses import dataclass, field, fields

import numpy as np
import pyarrow as pa

from codept.data.viewrows import TokenText, arrays_from_record, to_record, to_table, tokenize  # noqa: F401 (re-exported)
from codept.structure import dataflow, grammar, kinds, offsets, resolve
from codept.structure.summary import doc_summaries


# array field -> (dtype, width; 0 = 1-D)
_ARRAYS = {
    "input_ids": (np.int32, 0),
    "offsets": (np.int32, 2),
    "leaf": (np.int32, 0),
    "spans": (np.int32, 3),
    "idents": (np.int32, 5),
    "functions": (np.int32, 7),
    "errors": (np.int32, 2),
    "dataflow": (np.int32, 3),
    "summaries": (np.int32, 2),
}

ARROW_SCHEMA = pa.schema(
    [
        ("path", pa.string()),
        ("lang", pa.string()),
        ("text", pa.large_string()),
        ("has_error", pa.bool_()),
        *((name, pa.list_(pa.int32())) for name in _ARRAYS),
        ("names", pa.list_(pa.string())),
    ]
)


@dataclass(eq=False)
class CodeView(TokenText):
    path: str
    lang: str
    text: str
    has_error: bool
    input_ids: np.ndarray
    offsets: np.ndarray
    leaf: np.ndarray
    spans: np.ndarray
    idents: np.ndarray
    names: list[str]
    functions: np.ndarray
    errors: np.ndarray
    dataflow: np.ndarray
    summaries: np.ndarray
    stats: dict = field(default_factory=dict, compare=False)

    # the schema, written once (codept.data.viewrows): what codept.views reads and to_table writes
    KIND = "code"
    KEY = "path"
    SPLIT = "text"  # held out by content, like the probe split (codept.probe.split)
    ARRAYS = _ARRAYS
    SCHEMA = ARROW_SCHEMA
    DERIVED = ("summaries",)  # tables written before the field existed lack it: derive() per view

    @staticmethod
    def derive(name: str, get):
        """A DERIVED field from the view's other fields (``get(field)``)."""
        if name != "summaries":
            raise AttributeError(name)
        return doc_summaries(get("text"), get("offsets"), get("functions"), get("lang"))

    def __len__(self) -> int:
        return len(self.input_ids)

    # -- Arrow ------------------------------------------------------------------------------------
    def to_record(self) -> dict:
        return to_record(self)

    @classmethod
    def from_record(cls, rec: dict) -> "CodeView":
        return cls(path=rec["path"], lang=rec["lang"], text=rec["text"], has_error=bool(rec["has_error"]),
                   names=list(rec["names"]), **arrays_from_record(rec, _ARRAYS))


def views_to_table(views: list[CodeView]) -> pa.Table:
    return to_table(views, CodeView)  # the one writer (codept.data.viewrows)


def table_to_views(table: pa.Table) -> list[CodeView]:
    return [CodeView.from_record(r) for r in table.to_pylist()]


# ---------------------------------------------------------------------------------------------


def _overlaps_any(ranges: np.ndarray, bad: np.ndarray) -> np.ndarray:
    """Boolean mask: which [s, e) in `ranges` (N, 2+) overlap any [s, e) in `bad` (E, 2)."""
    if len(bad) == 0 or len(ranges) == 0:
        return np.zeros(len(ranges), dtype=bool)
    bad = bad[np.argsort(bad[:, 0])]
    max_end = np.maximum.accumulate(bad[:, 1])
    # candidates: error regions starting before the range ends; overlap iff the furthest-reaching
    # of them ends after the range starts
    k = np.searchsorted(bad[:, 0], ranges[:, 1], side="left")
    reach = np.where(k > 0, max_end[np.maximum(k - 1, 0)], -1)
    return reach > ranges[:, 0]


def resolve_identifiers(parsed: grammar.ParsedFile, data: bytes, scope_order: str) -> tuple[np.ndarray, list[str]]:
    """(I, 4) int64 byte start, end, role, binding of every identifier of a parsed file, and the
    name of every binding. Names are compared as raw bytes and decoded once per binding."""
    decls = parsed.decls
    ranges = np.concatenate([parsed.defs[:, :2], parsed.refs, decls[:, :2]])
    name_id, first = name_ids(data, ranges)
    n_defs, n_refs = len(parsed.defs), len(parsed.refs)
    idents, names = resolve.resolve(parsed.scopes, parsed.defs, parsed.refs, name_id[:n_defs],
                                    name_id[n_defs:n_defs + n_refs], scope_order, len(data), decls=decls,
                                    decl_names=name_id[n_defs + n_refs:])
    return idents, [data[s:e].decode("utf-8", "replace") for s, e in ranges[first[names]].tolist()]


# odd 64-bit multipliers of the name hash (any fixed odd values do: equality is verified exactly)
_HASH_MUL = (np.random.default_rng(0).integers(0, 1 << 62, size=33, dtype=np.int64).astype(np.uint64) << 1) | 1


def name_ids(data: bytes, ranges: np.ndarray, max_len: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """(N,) int64 id of the bytes of each range of `data` (N, 2), equal ids iff equal bytes, and (U,)
    the index of one range per id. Vectorised: the ranges' bytes as rows of 8-byte words, one
    64-bit hash per row, then a check that the rows of each hash are identical; a hash collision,
    or a range longer than `max_len`, falls back to a dict over the byte strings."""
    n = len(ranges)
    length = ranges[:, 1] - ranges[:, 0]
    width = int(length.max()) if n else 0
    if 0 < width <= max_len:
        n_words = (width + 7) // 8
        cols = np.arange(8 * n_words)
        buf = np.frombuffer(data + bytes(8 * n_words), dtype=np.uint8)
        rows = buf[ranges[:, :1] + cols]  # (N, 8 * n_words)
        rows[cols >= length[:, None]] = 0
        words = rows.view(np.uint64)  # (N, n_words)
        h = (words * _HASH_MUL[:n_words]).sum(axis=1, dtype=np.uint64) + length.astype(np.uint64) * _HASH_MUL[-1]
        _, first, inv = np.unique(h, return_index=True, return_inverse=True)
        inv = inv.reshape(-1)
        rep = first[inv]
        if np.array_equal(words[rep], words) and np.array_equal(length[rep], length):
            return inv.astype(np.int64), first
    ids: dict[bytes, int] = {}
    out = np.fromiter((ids.setdefault(data[s:e], len(ids)) for s, e in ranges.tolist()), dtype=np.int64, count=n)
    first = np.full(len(ids), n, dtype=np.int64)
    np.minimum.at(first, out, np.arange(n))
    return out, first


def _kept_edges(edges: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """Edges (E, 3) over all identifier rows -> over the kept rows only (both ends kept)."""
    new = np.cumsum(keep) - 1
    ok = keep[edges[:, 0]] & keep[edges[:, 1]]
    out = edges[ok]
    return np.column_stack([new[out[:, 0]], new[out[:, 1]], out[:, 2]])


def with_fields(parsed: grammar.ParsedFile, data: bytes, idents: np.ndarray, names: list[str]):
    """The identifiers plus the object fields (the ``@flow.field`` captures: ``self.x``, ``this.x``):
    role free, one binding per field name, after the resolver's bindings; sorted by start. Returns
    (idents (I', 4), names, (I',) bool: is a field)."""
    rows = parsed.flow[parsed.flow[:, 2] == kinds.FLOW_KIND_ID["field"], :2]
    rows = np.unique(rows, axis=0) if len(rows) else rows.reshape(0, 2)
    rows = rows[~offsets.rows_in(rows, idents)] if len(idents) else rows
    if len(rows) == 0:
        return idents, names, np.zeros(len(idents), bool)
    text = [data[s:e].decode("utf-8", "replace") for s, e in rows.tolist()]
    own: dict[str, int] = {}
    binding = np.array([own.setdefault(t, len(names) + len(own)) for t in text], np.int64)
    new = np.column_stack([rows, np.full(len(rows), kinds.ROLE_FREE), binding])
    out = np.concatenate([idents.reshape(-1, 4), new])
    o = np.argsort(out[:, 0], kind="stable")
    out, names = out[o], names + list(own)
    # binding ids dense in order of first appearance again
    ub, first, inv = np.unique(out[:, 3], return_index=True, return_inverse=True)
    rank = np.empty(len(ub), np.int64)
    rank[np.argsort(first)] = np.arange(len(ub))
    out[:, 3] = rank[inv.reshape(-1)]
    return out, [names[b] for b in ub[np.argsort(first)].tolist()], (np.arange(len(o)) >= len(idents))[o]


_LEXEME = re.compile(r"\w+|[^\w\s]")


def lexeme_leaf(text: str, offsets_: np.ndarray) -> np.ndarray:
    """(T,) int32: for each token, the index of the lexeme (a run of word characters or one other
    non-space character) holding its first non-space character; -1 for whitespace-only tokens. The
    ``leaf`` of a token-only view: equal ids = one unit for whole-unit masking (wwm, span)."""
    unit = np.full(len(text) + 1, -1, dtype=np.int64)
    starts = [m.start() for m in _LEXEME.finditer(text)]
    if starts:
        s = np.asarray(starts, dtype=np.int64)
        ends = np.asarray([m.end() for m in _LEXEME.finditer(text)], dtype=np.int64)
        lens = ends - s
        unit[np.repeat(s - (np.cumsum(lens) - lens), lens) + np.arange(int(lens.sum()))] = np.repeat(np.arange(len(s)), lens)
    anchor = offsets.token_anchor(text, offsets_[:, 0], offsets_[:, 1])
    return np.where(anchor >= 0, unit[np.maximum(anchor, 0)], -1).astype(np.int32)


def build_token_view(path: str, lang: str, text: str, tokenizer) -> CodeView:
    """The view of a file in a language without a grammar: tokens, offsets and lexeme units, no
    structure (every structure field with 0 rows). Cost: one tokenize and one regex pass."""
    ids, tok_off = tokenize(tokenizer, text)
    empty = {name: np.zeros((0, w) if w else 0, dtype=np.int32) for name, (_, w) in _ARRAYS.items()}
    return CodeView(**{**empty, "input_ids": ids, "offsets": tok_off.astype(np.int32).reshape(-1, 2),
                       "leaf": lexeme_leaf(text, tok_off)},
                    path=path, lang=lang, text=text, has_error=False, names=[],
                    stats={"bytes": len(text.encode("utf-8", "surrogatepass")), "tokens_only": True})


def build_view(path: str, lang: str, text: str, tokenizer, *, timeout_s: float | None = None,
               max_depth: int = 1500, fields: bool = False) -> CodeView:
    """Build the view of one decoded source file. Raises grammar.SkipFile for refused input.
    ``fields``: object fields (``self.x``) are identifiers too, with ``comesFromField`` edges
    (codept.structure.dataflow); off by default."""
    data = text.encode("utf-8")
    parsed = grammar.parse(lang, data, timeout_s=timeout_s, max_depth=max_depth, fields=fields)
    g = grammar.load_grammar(lang)

    # 2. tokens
    ids, tok_off = tokenize(tokenizer, text)
    ts_, te_ = tok_off[:, 0], tok_off[:, 1]

    # 3. byte -> char -> token
    table = offsets.byte_to_char_table(data)

    tables = offsets.token_tables(ts_, te_, len(text))

    def to_tokens(byte_ranges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        c0 = offsets.byte_to_char(byte_ranges[:, 0], table)
        c1 = offsets.byte_to_char(byte_ranges[:, 1], table)
        return offsets.char_span_to_tokens(ts_, te_, c0, c1, tables)

    # leaf of each token: the leaf holding its anchor; an anchor between two leaves (text a node
    # holds outside its children: Python's string content around an escape sequence) belongs to
    # that run of text, id L + 1 + (index of the leaf before it; -1 before the first)
    leaves_c = offsets.byte_to_char(parsed.leaves.reshape(-1), table).reshape(-1, 2)
    anchor = offsets.token_anchor(text, ts_, te_)
    has = anchor >= 0
    li = np.where(has, offsets.last_start_table(leaves_c[:, 0], len(text))[anchor], -1)
    inside = has & (li >= 0)
    inside[inside] = anchor[inside] < leaves_c[li[inside], 1]
    leaf = np.where(inside, li, np.where(has, len(leaves_c) + 1 + li, -1)).astype(np.int32)

    errors = parsed.errors
    err_t0, err_t1 = to_tokens(errors) if len(errors) else (np.zeros(0, np.int64),) * 2

    # spans: drop those touching an error, empty ones and duplicates
    sp = parsed.spans[~_overlaps_any(parsed.spans, errors)]
    t0, t1 = to_tokens(sp)
    # sort by (start, -end, kind), drop duplicates: one int64 key per span (below 2**63 for any file
    # under 2**28 tokens): one sort
    ne = t1 > t0
    n_tok, n_kinds = len(ids) + 1, len(kinds.SPAN_KINDS)
    key = np.sort((t0[ne] * n_tok + (n_tok - 1 - t1[ne])) * n_kinds + sp[ne, 2])
    key = key[np.concatenate([[True], key[1:] != key[:-1]])] if len(key) else key
    rest = key // n_kinds
    spans = np.stack([rest // n_tok, n_tok - 1 - rest % n_tok, key % n_kinds], axis=1)

    # 4. identifiers: resolve on bytes (positions comparable), then convert. Every identifier of a
    # binding has the binding's name, so names come per binding, never decoded per identifier.
    idents_b, binding_names = resolve_identifiers(parsed, data, g.scope_order)
    is_field = None
    if fields:
        idents_b, binding_names, is_field = with_fields(parsed, data, idents_b, binding_names)
    i0, i1 = to_tokens(idents_b)
    keep = (i1 > i0) & ~_overlaps_any(idents_b, errors)
    t_flow = time.perf_counter()
    stats: dict = {}
    flow = _kept_edges(dataflow.edges(idents_b, parsed.flow, parsed.defs, stats, parsed.decls, is_field), keep)
    stats["dataflow"] = time.perf_counter() - t_flow
    idents_b, i0, i1 = idents_b[keep], i0[keep], i1[keep]
    # renumber kept bindings densely (ids are in order of first appearance, np.unique keeps it)
    kept, binding = np.unique(idents_b[:, 3], return_inverse=True)
    name_index: dict[str, int] = {}
    name_of_binding = np.array([name_index.setdefault(binding_names[b], len(name_index)) for b in kept.tolist()],
                               dtype=np.int64)
    idents = np.stack([i0, i1, name_of_binding[binding] if len(kept) else binding, idents_b[:, 2], binding], axis=1)

    # tags -> functions: one vectorised conversion for all (definition, name, doc) ranges
    tags = parsed.tags
    if tags:
        rows = np.array([(t.kind, t.start, t.end, t.name_start, t.name_end,
                          t.doc[0][0] if t.doc else 0, t.doc[-1][1] if t.doc else 0) for t in tags], dtype=np.int64)
        rows = rows[~_overlaps_any(rows[:, 1:3], errors)]
        functions = np.empty((len(rows), 7), dtype=np.int64)
        functions[:, 0] = rows[:, 0]
        for col in (1, 3, 5):
            functions[:, col], functions[:, col + 1] = to_tokens(rows[:, col : col + 2])
        no_doc = rows[:, 6] <= rows[:, 5]
        functions[no_doc, 5:7] = -1
    else:
        functions = np.zeros((0, 7), dtype=np.int64)

    return CodeView(
        path=path,
        lang=lang,
        text=text,
        has_error=bool(parsed.has_error),
        input_ids=ids,
        offsets=tok_off.astype(np.int32),
        leaf=leaf,
        spans=spans.astype(np.int32).reshape(-1, 3),
        idents=idents.astype(np.int32).reshape(-1, 5),
        names=list(name_index),
        functions=functions.astype(np.int32),
        errors=np.stack([err_t0, err_t1], axis=1).astype(np.int32).reshape(-1, 2),
        dataflow=flow.astype(np.int32).reshape(-1, 3),
        summaries=doc_summaries(text, tok_off, functions, lang),
        stats={"bytes": len(data), "max_depth": parsed.max_depth, **parsed.timings, **stats},
    )
