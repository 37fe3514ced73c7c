"""Prepared views -> stream sources: the glue between ``codept prepare`` output and objectives.

``view_source(dataset, objective, name, salt)`` wraps a prepared views dataset (rows of
CodeView.to_record(), e.g. ``codept.prepare.load_views(DIR)``) as a codept.data.stream.Source
whose ``make(index, rng)`` rebuilds the CodeView of row ``index`` and applies the objective.
Cost: one Arrow row -> Python lists -> NumPy per document (~tens of microseconds per KB); the
objective's own cost. Not covered: function-level units (a later mixture component).
"""

from __future__ import annotations

from codept.data.stream import Source
from codept.structure.view import CodeView


def view_source(dataset, objective, name: str, salt: int = 0) -> Source:
    if len(dataset) == 0:
        raise ValueError(f"source {name!r}: the views dataset is empty")

    def make(index: int, rng):
        return objective(CodeView.from_record(dataset[index]), rng)

    return Source(name=name, n=len(dataset), make=make, salt=salt)
