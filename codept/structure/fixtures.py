"""Caret-annotated grammar fixtures: the executable spec of a language's query files.

A fixture is a source file in ``grammars/<lang>/fixtures/``. An *annotation line* is a line whose
first non-blank text is the language's line comment followed by ``^`` or ``<-``; it points at the
nearest preceding non-annotation line (the target line)::

    def add(a, b):
    #       ^ def: a
    #          ^ def: b
    #   ^^^ @definition.function doc: Add two
        return a + b
    #          ^ ref: a
    #          ^^^^^ @span.expression

``^^^`` marks character columns [c0, c1) of the target line; ``<-`` marks the column where the
comment marker starts and checks the start only (for column 0 and 1). Assertions:

  ``@span.KIND``                a span of KIND starts at c0 and (on this line) ends at c1; a span
                                running past the line must be marked to the end of the line
  ``!@span.KIND``               no span of KIND is exactly here
  ``def: L`` / ``ref: L`` / ``free: L``
                                an identifier exactly here with that role; all identifiers labelled L
                                in one file share one binding, different labels differ
  ``!ident``                    no identifier here (attribute names, keyword arguments)
  ``df: N [<- A B ...] [<= C D ...] [<^ E F ...] [<. G ...]``
                                dataflow (codept.structure.dataflow): names this identifier
                                occurrence N; the definitions of its function that reach it are
                                exactly the occurrences A B (comesFrom), the identifiers its new value
                                is computed from exactly C D (computedFrom), the definitions in other
                                functions that reach it exactly E F (comesFromNonlocal), the field
                                writes that reach it exactly G (comesFromField); none listed = none.
                                In a file with any ``df:`` annotation every edge must join two named
                                occurrences, so the file states its whole edge set
  ``@definition.KIND [doc: TEXT | nodoc]``
                                a definition of KIND whose name is exactly here; its doc contains
                                TEXT, or it has none

Checks run on the parser layer in character offsets (no tokenizer), so they test the queries and
the resolver exactly. A fixture named ``fields.<ext>`` is checked as a view with object fields
(codept.structure.view.build_view(fields=True)). ``codept grammar check LANG`` runs them from the command line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from codept import languages
from codept.structure import dataflow, grammar, kinds, offsets
from codept.structure.view import resolve_identifiers, with_fields


@dataclass
class Annotation:
    line: int  # 1-based line number of the annotation (for messages)
    target: int  # 0-based index of the target line
    c0: int
    c1: int | None  # None: start-only (`<-`)
    text: str  # the assertion


@dataclass
class FixtureResult:
    path: str
    n_checks: int
    failures: list[str]
    asserted: dict[str, int]  # what was asserted: span kinds, roles, definition kinds


def parse_annotations(lines: list[str], comments: tuple[str, ...]) -> list[Annotation]:
    marker = "|".join(re.escape(c) for c in sorted(comments, key=len, reverse=True))
    pat = re.compile(rf"^(\s*)({marker})(\s*)(\^+|<-)\s*(.*?)\s*$")
    out: list[Annotation] = []
    target = -1
    for i, line in enumerate(lines):
        m = pat.match(line)
        if not m:
            target = i
            continue
        if target < 0:
            raise ValueError(f"line {i + 1}: annotation before any code line")
        indent, _mk, gap, arrow, text = m.groups()
        if arrow == "<-":
            out.append(Annotation(i + 1, target, len(indent), None, text))
        else:
            c0 = m.start(4)
            out.append(Annotation(i + 1, target, c0, c0 + len(arrow), text))
    return out


def check_fixture(path: str | Path, lang: str) -> FixtureResult:
    path = Path(path)
    g = grammar.load_grammar(lang)
    text = path.read_text(encoding="utf-8")
    data = text.encode("utf-8")
    lines = text.split("\n")
    line_start = np.concatenate([[0], np.cumsum([len(x) + 1 for x in lines])])
    anns = parse_annotations(lines, g.line_comment)

    fields = path.name.lower().startswith("fields")  # fields.<ext>: a view with object fields
    parsed = grammar.parse(lang, data, fields=fields)
    table = offsets.byte_to_char_table(data)

    def chars(a: np.ndarray) -> np.ndarray:
        return offsets.byte_to_char(a, table)

    failures: list[str] = []
    if parsed.has_error:
        failures.append(f"{path.name}: parses with syntax errors at bytes {parsed.errors.tolist()[:5]}")
    span_set = {}
    for s, e, k in parsed.spans.tolist():
        span_set.setdefault(int(chars(np.array([s]))[0]), []).append((int(chars(np.array([e]))[0]), k))
    idents, names = resolve_identifiers(parsed, data, g.scope_order)
    is_field = None
    if fields:
        idents, names, is_field = with_fields(parsed, data, idents, names)
    ident_at = {(int(chars(np.array([s]))[0]), int(chars(np.array([e]))[0])): (r, b) for s, e, r, b in idents.tolist()}
    ident_start = {s: v for (s, _e), v in ident_at.items()}
    tags = {}
    for t in parsed.tags:
        ns, ne = chars(np.array([t.name_start, t.name_end])).tolist()
        doc = "".join(data[a:b].decode() for a, b in t.doc)
        tags[(ns, ne)] = tags[ns] = (kinds.DEFINITION_KINDS[t.kind], doc, bool(t.doc))

    flow_edges = dataflow.edges(idents, parsed.flow, parsed.defs, decls=parsed.decls, fields=is_field)
    ident_row = {k: i for i, k in enumerate(ident_at)}  # ident_at keeps the order of `idents`
    ident_row_start = {k[0]: i for k, i in ident_row.items()}
    df_names: dict[str, int] = {}  # occurrence name -> ident row
    df_claims: list[tuple[str, int, str, list[str], list[str]]] = []
    labels: dict[str, int] = {}
    binding_label: dict[int, str] = {}
    asserted: dict[str, int] = {}
    for a in anns:
        where = f"{path.name}:{a.line}"
        lo = int(line_start[a.target]) + a.c0
        hi = None if a.c1 is None else int(line_start[a.target]) + a.c1
        line_end = int(line_start[a.target]) + len(lines[a.target].rstrip())
        got = repr(text[lo:hi if hi is not None else lo + 12])
        m = re.fullmatch(r"(!?)@span\.(\w+)", a.text)
        if m:
            neg, kind = m.groups()
            if kind not in kinds.SPAN_KIND_ID:
                failures.append(f"{where}: unknown span kind {kind!r}")
                continue
            k = kinds.SPAN_KIND_ID[kind]
            ok = any(
                kk == k and (hi is None or min(e, line_end) == hi and (e <= line_end or hi == line_end))
                for e, kk in span_set.get(lo, [])
            )
            if ok == bool(neg):
                failures.append(f"{where}: expected {'no ' if neg else ''}@span.{kind} at {got}; "
                                f"spans starting there: {[(kinds_name(kk), text[lo:e][:30]) for e, kk in span_set.get(lo, [])]}")
            if not neg:
                asserted[f"span.{kind}"] = asserted.get(f"span.{kind}", 0) + 1
            continue
        m = re.fullmatch(r"(def|ref|free):\s*(\S+)", a.text)
        if m:
            role, label = m.groups()
            hit = ident_start.get(lo) if hi is None else ident_at.get((lo, hi))
            asserted[role] = asserted.get(role, 0) + 1
            if hit is None:
                near = [text[s:e] for (s, e) in ident_at if s <= lo < e or lo <= s < (hi or lo + 1)]
                failures.append(f"{where}: expected identifier ({role}: {label}) at {got}; found {near or 'none'}")
                continue
            r, b = hit
            if kinds.ROLES[r] != role:
                failures.append(f"{where}: {got} has role {kinds.ROLES[r]}, expected {role}")
            if label in labels and labels[label] != b:
                failures.append(f"{where}: {got} (label {label}) has a different binding than earlier {label}")
            if b in binding_label and binding_label[b] != label:
                failures.append(f"{where}: {got} (label {label}) shares its binding with label {binding_label[b]}")
            labels.setdefault(label, b)
            binding_label.setdefault(b, label)
            continue
        m = re.fullmatch(r"df:\s*(\S+)((?:\s*(?:<-|<=|<\^|<\.)(?:\s+[^<\s]+)*)*)\s*", a.text)
        if m:
            name, claims = m.groups()
            want = {k: [] for k in range(len(dataflow.EDGE_KINDS))}
            for marker, names in re.findall(r"(<-|<=|<\^|<\.)((?:\s+[^<\s]+)*)", claims):
                want[_DF_MARKERS[marker]] += names.split()
            row = ident_row.get((lo, hi)) if hi is not None else ident_row_start.get(lo)
            asserted["df"] = asserted.get("df", 0) + 1
            if row is None:
                failures.append(f"{where}: expected an identifier (df: {name}) at {got}")
            elif name in df_names:
                failures.append(f"{where}: occurrence name {name} used twice")
            else:
                df_names[name] = row
                df_claims.append((where, row, name, want))
            continue
        if a.text == "!ident":
            hit = ident_start.get(lo) if hi is None else ident_at.get((lo, hi))
            if hit is not None:
                failures.append(f"{where}: {got} should not be an identifier (role {kinds.ROLES[hit[0]]})")
            continue
        m = re.fullmatch(r"@definition\.(\w+)(?:\s+(nodoc|doc:\s*(.+)))?", a.text)
        if m:
            kind, docspec, doctext = m.groups()
            asserted[f"definition.{kind}"] = asserted.get(f"definition.{kind}", 0) + 1
            hit = tags.get(lo) if hi is None else tags.get((lo, hi))
            if hit is None:
                failures.append(f"{where}: expected @definition.{kind} named {got}; none")
                continue
            tk, doc, has_doc = hit
            if tk != kind:
                failures.append(f"{where}: {got} is @definition.{tk}, expected {kind}")
            if docspec == "nodoc" and has_doc:
                failures.append(f"{where}: {got} should have no doc, has {doc[:40]!r}")
            if doctext is not None:
                asserted["doc"] = asserted.get("doc", 0) + 1
                if doctext not in doc:
                    failures.append(f"{where}: doc of {got} is {doc[:60]!r}, expected it to contain {doctext!r}")
            continue
        failures.append(f"{where}: cannot read annotation {a.text!r}")
    if df_names:
        failures += _check_dataflow(flow_edges, df_names, df_claims)
    return FixtureResult(str(path), len(anns), failures, asserted)


def _check_dataflow(edges: np.ndarray, names: dict[str, int], claims: list) -> list[str]:
    """Each named occurrence's incoming edges of each kind are exactly the claimed ones, and every
    edge joins two named occurrences."""
    failures = []
    label = {row: nm for nm, row in names.items()}
    incoming: dict[tuple[int, int], set[str]] = {}
    for dst, src, kind in edges.tolist():
        if dst not in label or src not in label:
            failures.append(f"edge {label.get(dst, f'row {dst}')} <- {label.get(src, f'row {src}')} "
                            f"({dataflow.EDGE_KINDS[kind]}) joins an unnamed occurrence")
            continue
        incoming.setdefault((dst, kind), set()).add(label[src])
    for where, row, name, wants in claims:
        for kind, want in wants.items():
            unknown = [w for w in want if w not in names]
            if unknown:
                failures.append(f"{where}: {name}: unknown occurrence names {unknown}")
            got = incoming.get((row, kind), set())
            if got != set(want):
                failures.append(f"{where}: {name} {dataflow.EDGE_KINDS[kind]} {sorted(got)}, expected {sorted(want)}")
    return failures


# df: markers -> edge kind (codept.structure.dataflow.EDGE_KINDS)
_DF_MARKERS = {"<-": dataflow.COMES_FROM, "<=": dataflow.COMPUTED_FROM, "<^": dataflow.COMES_FROM_NONLOCAL,
               "<.": dataflow.COMES_FROM_FIELD}


def kinds_name(k: int) -> str:
    return list(kinds.SPAN_KINDS)[k]


def fixture_files(lang: str) -> list[Path]:
    folder = languages.grammars_dir() / lang / "fixtures"
    return sorted(p for p in folder.glob("*") if p.is_file())


def check_language(lang: str) -> list[FixtureResult]:
    return [check_fixture(p, lang) for p in fixture_files(lang)]
