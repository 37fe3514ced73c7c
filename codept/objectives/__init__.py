"""Objectives: ``build(vocab, config) -> objective(view, rng, ctx=None) -> Example | None``.

An objective is a pure function of one document view, a NumPy Generator (seeded by the stream from
(seed, epoch, index)) and a codept.data.stream.Context (training progress, partner documents drawn
with the same rng; None outside a stream). It returns the widened Example of codept.data.example:
ids + prefix, integer labels, float targets, pointers (several targets per record), per-document
scalars, parts, and optional positions / block positions / types / langs / order. It composes a
selector (select.py: WHERE) with a renderer (render.py: HOW).

Each objective module declares itself at its end (codept.objectives.spec.Objective: build, Config,
the heads it trains, the view kinds it reads, default loss weights, model needs); :data:`OBJECTIVES`
below is the explicit registry, one line per objective, and tests/test_objectives.py fails on a
module under codept/objectives/ whose declaration is not registered. ``HEADS_OF``, ``VIEWS_OF``,
``LOSS_WEIGHTS_OF`` and ``MODEL_OF`` are read-only views of the declarations, by name.
Helpers, not objectives: select.py, render.py, segments.py, spec.py.
"""

from __future__ import annotations

from codept.objectives import ar, electra, glm, plm, unilm  # issue 15: the regimes
from codept.objectives import code_doc, mlm, nsp, sop, syntax_span, tlm
from codept.objectives import dataflow, dataflow_edge, ident_mask, ident_rtd, translate  # issue 16: code objectives
from codept.objectives import phrase, span, t5_span, wwm
from codept.objectives import exec_lines, exec_values  # issue 17: execution traces
from codept.objectives.spec import Objective

OBJECTIVES: dict[str, Objective] = {
    "mlm": mlm.OBJECTIVE,
    "syntax_span": syntax_span.OBJECTIVE,
    "code_doc": code_doc.OBJECTIVE,
    "ar": ar.OBJECTIVE,
    "unilm": unilm.OBJECTIVE,
    "glm": glm.OBJECTIVE,
    "plm": plm.OBJECTIVE,
    "electra": electra.OBJECTIVE,
    "nsp": nsp.OBJECTIVE,
    "sop": sop.OBJECTIVE,
    "tlm": tlm.OBJECTIVE,
    "wwm": wwm.OBJECTIVE,
    "phrase": phrase.OBJECTIVE,
    "span": span.OBJECTIVE,
    "t5_span": t5_span.OBJECTIVE,
    "exec_lines": exec_lines.OBJECTIVE,
    "exec_values": exec_values.OBJECTIVE,
    "exec_trace": exec_values.TRACE_OBJECTIVE,
    "dataflow": dataflow.OBJECTIVE,
    "dataflow_edge": dataflow_edge.OBJECTIVE,
    "ident_rtd": ident_rtd.OBJECTIVE,
    "ident_mask": ident_mask.OBJECTIVE,
    "translate": translate.OBJECTIVE,
}

# by name, from the declarations: the heads each objective trains, the view kinds it reads, its
# default loss weights and model needs (the last two only where it has some)
HEADS_OF = {name: o.heads for name, o in OBJECTIVES.items()}
VIEWS_OF = {name: o.views for name, o in OBJECTIVES.items()}
LOSS_WEIGHTS_OF = {name: o.loss_weights for name, o in OBJECTIVES.items() if o.loss_weights}
MODEL_OF = {name: o.model for name, o in OBJECTIVES.items() if o.model}


def build(name: str, vocab, **overrides):
    """The objective `name` with its Config overridden by keyword (unknown keys are an error)."""
    if name not in OBJECTIVES:
        raise KeyError(f"unknown objective {name!r}; registered: {sorted(OBJECTIVES)}")
    o = OBJECTIVES[name]
    fields = set(o.config.__dataclass_fields__)
    bad = sorted(set(overrides) - fields)
    if bad:
        raise TypeError(f"objective {name!r} has no settings {bad}; it has {sorted(fields)}")
    return o.build(vocab, o.config(**overrides))
