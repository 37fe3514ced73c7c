"""Objectives: ``build(vocab, config) -> objective(view, rng, ctx=None) -> Example | None``.

An objective is a pure function of one document view, a NumPy Generator (seeded by the stream from
(seed, epoch, index)) and a codept.data.stream.Context (training progress, partner documents drawn
with the same rng; None outside a stream). It returns the widened Example of codept.data.example:
ids + prefix, integer labels, float targets, pointers (several targets per record), per-document
scalars, parts, and optional positions / block positions / types / langs / order. It composes a selector (select.py: WHERE) with a renderer (render.py:
HOW). The registry is an explicit dict; a test checks it. ``HEADS_OF`` says which model heads
(codept.model.pretrainer.HEADS) each objective's labels train; recipes build heads from it.
"""

from __future__ import annotations

from codept.objectives import ar, electra, glm, plm, unilm  # issue 15: the regimes
from codept.objectives import code_doc, mlm, nsp, sop, syntax_span, tlm
from codept.objectives import dataflow, dataflow_edge, ident_mask, ident_rtd, translate  # issue 16: code objectives
from codept.objectives import phrase, span, t5_span, wwm
from codept.objectives import exec_lines, exec_values  # issue 17: execution traces

OBJECTIVES = {
    "mlm": (mlm.build, mlm.Config),
    "syntax_span": (syntax_span.build, syntax_span.Config),
    "code_doc": (code_doc.build, code_doc.Config),
    "ar": (ar.build, ar.Config),
    "unilm": (unilm.build, unilm.Config),
    "glm": (glm.build, glm.Config),
    "plm": (plm.build, plm.Config),
    "electra": (electra.build, electra.Config),
    "nsp": (nsp.build, nsp.Config),
    "sop": (sop.build, sop.Config),
    "tlm": (tlm.build, tlm.Config),
    "wwm": (wwm.build, wwm.Config),
    "phrase": (phrase.build, phrase.Config),
    "span": (span.build, span.Config),
    "t5_span": (t5_span.build, t5_span.Config),
    "exec_lines": (exec_lines.build, exec_lines.Config),
    "exec_values": (exec_values.build, exec_values.Config),
    "exec_trace": (exec_values.build_trace, exec_values.TraceConfig),
    "dataflow": (dataflow.build, dataflow.Config),
    "dataflow_edge": (dataflow_edge.build, dataflow_edge.Config),
    "ident_rtd": (ident_rtd.build, ident_rtd.Config),
    "ident_mask": (ident_mask.build, ident_mask.Config),
    "translate": (translate.build, translate.Config),
}

# objective -> the heads (codept.model.pretrainer.HEADS names) its labels train. code_doc's optional MLM
# on the code side (mlm_rate > 0) also feeds "mlm" when that head is built for another objective.
HEADS_OF = {
    "mlm": ("mlm",),
    "syntax_span": ("mlm",),
    "code_doc": ("contrastive",),
    "ar": ("lm",),  # causal LM (scheduled sampling: codept.model.regimes)
    "unilm": ("mlm",),  # cloze under three masks
    "glm": ("glm",),  # part B, labels already shifted
    "plm": ("plm",),  # the query stream (two-stream attention)
    "electra": ("gen", "rtd"),  # generator MLM + discriminator replaced-token detection
    "nsp": ("nsp", "mlm"),  # the pair label, and MLM on the same input (mlm_rate > 0)
    "sop": ("sop", "mlm"),
    "tlm": ("mlm",),
    "wwm": ("mlm",),
    "phrase": ("mlm",),
    "span": ("mlm", "sbo"),  # SpanBERT: MLM on the spans + the span-boundary objective
    "t5_span": ("lm",),  # the targets after the corrupted input, causal
    "exec_lines": ("exec_lines",),  # line execution-count buckets (codept.exec.views)
    "exec_values": ("exec_values",),  # masked values of the serialized trace
    "exec_trace": ("lm",),  # trace generation after the code (prefix-LM)
    "dataflow": ("dataflow",),  # masked uses -> any reaching definition (MultiPointerHead)
    "dataflow_edge": ("dataflow_edge",),  # GraphCodeBERT's edge prediction, sampled negatives (EdgeHead)
    "ident_rtd": ("rtd",),  # renamed identifiers detected per token
    "ident_mask": ("lm",),  # DOBF: the masked names after the code, causal
    "translate": ("mlm",),  # TLM over code <-> code and doc <-> code pairs
}


# objective -> the view kinds it reads (codept.data.views.KINDS: code, text, pair); a recipe refuses
# an objective on a corpus of another kind before any work.
VIEWS_OF = {
    "mlm": ("code", "text"),
    "syntax_span": ("code",),
    "code_doc": ("code",),
    "ar": ("code", "text"),
    "unilm": ("code", "text"),
    "glm": ("code", "text"),
    "plm": ("code", "text"),
    "electra": ("code", "text"),
    "nsp": ("text",),
    "sop": ("text",),
    "tlm": ("pair",),
    "wwm": ("code", "text"),
    "phrase": ("text",),
    "span": ("code", "text"),
    "t5_span": ("code", "text"),
    "exec_lines": ("trace",),  # codept.exec.views.TraceView (the output of `codept trace`)
    "exec_values": ("trace",),
    "exec_trace": ("trace",),
    "dataflow": ("code",),
    "dataflow_edge": ("code",),
    "ident_rtd": ("code",),
    "ident_mask": ("code",),
    "translate": ("pair",),
}

# objective -> default loss weights of its heads (a ``loss.<head>`` setting overrides them):
# ELECTRA's loss = MLM + lambda x RTD with lambda = 50.
LOSS_WEIGHTS_OF = {
    "electra": {"rtd": 50.0},
}

# objective -> model settings its batches need (a recipe applies them to its model section):
# GLM's 2-D positions need the second position table.
MODEL_OF = {
    "glm": {"block_positions": True},
}


def build(name: str, vocab, **overrides):
    """The objective `name` with its Config overridden by keyword (unknown keys are an error)."""
    if name not in OBJECTIVES:
        raise KeyError(f"unknown objective {name!r}; registered: {sorted(OBJECTIVES)}")
    make, config = OBJECTIVES[name]
    fields = set(config.__dataclass_fields__)
    bad = sorted(set(overrides) - fields)
    if bad:
        raise TypeError(f"objective {name!r} has no settings {bad}; it has {sorted(fields)}")
    return make(vocab, config(**overrides))
