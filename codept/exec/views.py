"""Trace rows (the output of ``codept trace``) -> :class:`TraceView`, what the exec_* objectives read.

No code runs here: labels were recorded offline in the sandbox. For each row:
  1. Tokenize the unit's code (codept.data.viewrows.tokenize); map every token to its line.
  2. Statement lines: ``ast`` of the dedented code; every statement's first line, except the unit's
     own ``def`` / ``class`` line, its decorators and docstring-only statements (they never get a
     line event). ``line_labels[t]`` = the count bucket (BUCKETS) of that line at the token holding
     the line's first non-blank character, IGNORE elsewhere.
  3. The trace, serialized as CodeExecutor does: `` <line> 3 <state> x : 1 ; y : [1, 2] <line> 4
     <state> ...`` (the variables whose repr changed after that line), cut at ``max_trace_chars``;
     tokenized, with (K, 2) token ranges ``value_units`` of every value (exec_values masks them).
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

import numpy as np

from codept.data.example import IGNORE
from codept.data.viewrows import tokenize

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

    def __len__(self) -> int:
        return len(self.input_ids)


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
    out = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt) or node.lineno in skip:
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            continue
        out.add(node.lineno - 1)
    return sorted(out)


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


def view_of(row: dict, tokenizer, max_trace_chars: int = 2000) -> TraceView | None:
    lines = statement_lines(row["code"])
    if not lines:
        return None
    code = row["code"]
    ids, offsets = tokenize(tokenizer, code)
    starts = [0] + [i + 1 for i, c in enumerate(code) if c == "\n"]
    labels = np.full(len(ids), IGNORE, dtype=np.int32)
    counts = {int(k): v for k, v in row["counts"].items()}
    for ln in lines:
        if ln >= len(starts):
            continue
        text = code[starts[ln] :].split("\n", 1)[0]
        char = starts[ln] + len(text) - len(text.lstrip())
        t = _first_token(offsets, char)
        if t < len(ids):
            labels[t] = bucket(counts.get(ln, 0))
    text, spans = serialize(row["states"], max_trace_chars)
    tids, toffs = tokenize(tokenizer, text) if text else (np.zeros(0, np.int32), np.zeros((0, 2), np.int64))
    units = [(_first_token(toffs, s), _first_token(toffs, e - 1) + 1) for s, e in spans if e > s]
    return TraceView(row["id"], row["source"], code, ids, labels, tids,
                     np.array(units, dtype=np.int64).reshape(-1, 2))


def load_views(out: str | Path, tokenizer, max_trace_chars: int = 2000) -> tuple[list[TraceView], int]:
    """(views, skipped) of a finished trace folder."""
    from codept.exec.job import read_rows

    views, skipped = [], 0
    for row in read_rows(Path(out)):
        v = view_of(row, tokenizer, max_trace_chars)
        if v is None:
            skipped += 1
        else:
            views.append(v)
    return views, skipped


def _unit_hash(source: str) -> float:
    return int(hashlib.sha256(source.encode()).hexdigest()[:8], 16) / 16**8


def split_by_source(views: list[TraceView], held_out: float = 0.2, fold: int = 0) -> tuple[list[TraceView], list[TraceView]]:
    """(train, held-out) by a hash of the source item (a module never straddles the split). Fold k
    holds out the sources whose hash lies in [k * held_out, (k + 1) * held_out): with held_out = 1/n,
    folds 0..n-1 hold out every source exactly once (cross-validation)."""
    lo, hi = fold * held_out, (fold + 1) * held_out
    if not (0 < held_out < 1 and 0 <= lo < 1):
        raise ValueError(f"held_out={held_out}, fold={fold}: need 0 < held_out < 1 and fold * held_out < 1")
    out = [lo <= _unit_hash(v.source) < hi for v in views]
    return [v for v, o in zip(views, out) if not o], [v for v, o in zip(views, out) if o]
