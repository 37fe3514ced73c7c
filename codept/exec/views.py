"""Trace rows (the output of ``codept trace``) -> :class:`TraceView`, what the exec_* objectives read.

No code runs here: labels were recorded offline in the sandbox. For each row:
  1. Tokenize the unit's code (codept.data.viewrows.tokenize); map every token to its line.
  2. Statement lines: ``ast`` of the dedented code; every statement's first line, except the unit's
     own ``def`` / ``class`` line, its decorators and docstring-only statements (they never get a
     line event), and, for a class unit, the statements its body ran when the class was created
     (method ``def`` lines, class attributes: at import, before tracing, so always "never"). ``line_labels[t]`` = the count bucket (BUCKETS) of that line at the token holding
     the line's first non-blank character, IGNORE elsewhere.
  3. The trace, serialized as CodeExecutor does: `` <line> 3 <state> x : 1 ; y : [1, 2] <line> 4
     <state> ...`` (the variables whose repr changed after that line), cut at ``max_trace_chars``;
     tokenized, with (K, 2) token ranges ``value_units`` of every value (exec_values masks them).
With ``docstrings="examples"`` the model reads each docstring's doctest examples without its prose
(:func:`example_lines`; long API docs otherwise fill the window and push the code out of it).
Rows whose code does not parse after dedent, or that hold no statement line, are skipped and counted
(``skipped``). Cost: one tokenization of code + trace per row. Not covered: traces of units whose
line events fall outside the unit (nested functions defined elsewhere).
"""

from __future__ import annotations

import ast
import bisect
import hashlib
import textwrap
from dataclasses import dataclass
from pathlib import Path

import json

import numpy as np
import pyarrow as pa

from codept.data.example import IGNORE
from codept.data.viewrows import arrays_from_record, to_record, tokenize

BUCKETS = (0, 1, 2, 5, 17)  # lower bounds: never, once, 2-4, 5-16, 17+
N_BUCKETS = len(BUCKETS)


def bucket(count: int) -> int:
    return bisect.bisect_right(BUCKETS, count) - 1


@dataclass
class TraceView:
    id: str
    source: str
    code: str
    input_ids: np.ndarray  # (T,) int32 code tokens
    line_labels: np.ndarray  # (T,) int32 bucket at each statement line's first token, IGNORE elsewhere
    trace_ids: np.ndarray  # (U,) int32 serialized trace tokens
    value_units: np.ndarray  # (K, 2) token ranges of the values inside trace_ids

    # the schema, written once (codept.data.viewrows): what codept.views reads and to_table writes
    KIND = "trace"
    KEY = "source"  # held-out splits by source module: a module never straddles them (split_by_source)
    SPLIT = "source"
    ARRAYS = {"input_ids": (np.int32, 0), "line_labels": (np.int32, 0), "trace_ids": (np.int32, 0),
              "value_units": (np.int64, 2)}
    SCHEMA = pa.schema([("id", pa.string()), ("source", pa.string()), ("code", pa.large_string()),
                        *((k, pa.list_(pa.from_numpy_dtype(d))) for k, (d, _) in ARRAYS.items())])
    DERIVED = ()

    def __len__(self) -> int:
        return len(self.input_ids)

    def to_record(self) -> dict:
        return to_record(self)

    @classmethod
    def from_record(cls, rec: dict) -> "TraceView":
        return cls(id=rec["id"], source=rec["source"], code=rec["code"], **arrays_from_record(rec, cls.ARRAYS))


def statement_lines(code: str) -> list[int] | None:
    """0-based lines that start a statement (step 2); None when the code does not parse."""
    try:
        tree = ast.parse(textwrap.dedent(code))
    except (SyntaxError, ValueError):
        return None
    top = tree.body[0] if len(tree.body) == 1 and isinstance(tree.body[0], (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else None
    skip = set()
    if top is not None:
        skip = {top.lineno} | {d.lineno for d in top.decorator_list}
    if isinstance(top, ast.ClassDef):
        skip |= _class_body_lines(top)
    out = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt) or node.lineno in skip:
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            continue
        out.add(node.lineno - 1)
    return sorted(out)


def _class_body_lines(cls: ast.ClassDef) -> set[int]:
    """Lines of the statements a class body runs when the class is created (method ``def`` lines,
    class attributes, nested class bodies; not the methods' own bodies): that happened at import,
    before tracing began, so they always read "never" and say nothing about the doctest's run."""
    out, stack = set(), list(cls.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.stmt):
            out.add(node.lineno)
            out |= {d.lineno for d in getattr(node, "decorator_list", ())}
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            stack += [c for c in ast.iter_child_nodes(node) if isinstance(c, (ast.stmt, ast.excepthandler, ast.match_case))]
    return out


def serialize(states: list, max_chars: int) -> tuple[str, list[tuple[int, int]]]:
    """CodeExecutor's trace text and the char ranges of its values (step 3); whole steps only, up
    to `max_chars`."""
    text, values = "", []
    for line, delta in states:
        step, spans = f" <line> {line} <state>", []
        for j, (name, value) in enumerate(delta.items()):
            step += (" ;" if j else "") + f" {name} : "
            spans.append((len(text) + len(step), len(text) + len(step) + len(value)))
            step += value
        if len(text) + len(step) > max_chars:
            break
        text += step
        values += spans
    return text, values


def _first_token(offsets: np.ndarray, char: int) -> int:
    """The token whose char range holds `char`."""
    return int(np.searchsorted(offsets[:, 1], char, side="right"))


def example_lines(code: str) -> list[int]:
    """0-based lines of `code` kept by ``docstrings="examples"``: every line outside docstrings, and
    inside each docstring (of the unit, its methods, nested functions) only its quote lines, its
    ``>>>`` / ``...`` lines and the expected output after them (up to a blank line): the inputs the
    trace ran on, without the prose. Unparsable code: every line."""
    n = code.count("\n") + 1
    try:
        tree = ast.parse(textwrap.dedent(code))
    except (SyntaxError, ValueError):
        return list(range(n))
    raw = code.split("\n")
    drop = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and body):
            continue
        doc = body[0]
        if not (isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant) and isinstance(doc.value.value, str)):
            continue
        in_example = False
        for ln in range(doc.lineno, doc.end_lineno - 1):  # 0-based inner lines (quote lines kept)
            text = raw[ln].strip()
            if text.startswith((">>>", "...")):
                in_example = True
            elif not text:
                in_example = False
            if not in_example:
                drop.add(ln)
    return [i for i in range(n) if i not in drop]


def view_of(row: dict, tokenizer, max_trace_chars: int = 2000, docstrings: str = "full") -> TraceView | None:
    """The view of one trace row (module docstring). ``docstrings="examples"`` shows the model each
    docstring's doctest examples only (:func:`example_lines`; labels and trace line numbers follow
    the kept lines); ``"full"``: the unit's source as traced."""
    if docstrings not in ("full", "examples"):
        raise ValueError(f"docstrings={docstrings!r}: expected 'full' or 'examples'")
    lines = statement_lines(row["code"])
    if not lines:
        return None
    keep = example_lines(row["code"]) if docstrings == "examples" else None
    new_of = {old: new for new, old in enumerate(keep)} if keep is not None else None
    code = "\n".join(row["code"].split("\n")[i] for i in keep) if keep is not None else row["code"]
    ids, offsets = tokenize(tokenizer, code)
    starts = [0] + [i + 1 for i, c in enumerate(code) if c == "\n"]
    labels = np.full(len(ids), IGNORE, dtype=np.int32)
    counts = {int(k): v for k, v in row["counts"].items()}
    for old in lines:
        ln = new_of.get(old, -1) if new_of is not None else old
        if not 0 <= ln < len(starts):
            continue
        text = code[starts[ln] :].split("\n", 1)[0]
        char = starts[ln] + len(text) - len(text.lstrip())
        t = _first_token(offsets, char)
        if t < len(ids):
            labels[t] = bucket(counts.get(old, 0))
    states = row["states"] if new_of is None else [[new_of.get(l, l), d] for l, d in row["states"]]
    text, spans = serialize(states, max_trace_chars)
    tids, toffs = tokenize(tokenizer, text) if text else (np.zeros(0, np.int32), np.zeros((0, 2), np.int64))
    units = [(_first_token(toffs, s), _first_token(toffs, e - 1) + 1) for s, e in spans if e > s]
    return TraceView(row["id"], row["source"], code, ids, labels, tids,
                     np.array(units, dtype=np.int64).reshape(-1, 2))


def read_rows(out: Path) -> list[dict]:
    """Every kept trace row of a finished ``codept trace`` folder, in shard order (no code runs)."""
    out = Path(out)
    if not (out / "summary.json").exists():
        raise FileNotFoundError(f"{out}: not a finished trace folder (no summary.json); run `codept trace ... --out {out}`")
    n = json.loads((out / "summary.json").read_text())["shards"]
    return [json.loads(l) for i in range(n) for l in (out / "shards" / f"{i:05d}.jsonl").open(encoding="utf-8")]


def views_of(rows, tokenizer, max_trace_chars: int = 2000, docstrings: str = "full") -> tuple[list[TraceView], int]:
    """(views, skipped) of trace rows (:func:`view_of` each; codept.views.open_views reads a folder)."""
    views, skipped = [], 0
    for row in rows:
        v = view_of(row, tokenizer, max_trace_chars, docstrings)
        if v is None:
            skipped += 1
        else:
            views.append(v)
    return views, skipped


def _unit_hash(source: str) -> float:
    return int(hashlib.sha256(source.encode()).hexdigest()[:8], 16) / 16**8


def split_by_source(views: list[TraceView], held_out: float = 0.2, fold: int = 0,
                    salt: str = "") -> tuple[list[TraceView], list[TraceView]]:
    """(train, held-out) by a hash of the source item (a module never straddles the split). Fold k
    holds out the sources whose hash lies in [k * held_out, (k + 1) * held_out): with held_out = 1/n,
    folds 0..n-1 hold out every source exactly once (cross-validation). Another ``salt`` gives a
    split independent of this one (a validation part carved out of a training part)."""
    lo, hi = fold * held_out, (fold + 1) * held_out
    if not (0 < held_out < 1 and 0 <= lo < 1):
        raise ValueError(f"held_out={held_out}, fold={fold}: need 0 < held_out < 1 and fold * held_out < 1")
    out = [lo <= _unit_hash(salt + v.source) < hi for v in views]
    return [v for v, o in zip(views, out) if not o], [v for v, o in zip(views, out) if o]
