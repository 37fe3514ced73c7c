"""``dataflow``: "where was this variable last assigned?" -- pointers from masked uses to every
definition that may reach them (the view's comesFrom edges, codept.structure.dataflow).

1. Candidate uses: identifiers with at least one incoming edge of ``kinds`` (definitions reaching
   them: comesFrom by default, GraphCodeBERT's function-local view; or comesFromNonlocal, the
   definitions in enclosing functions and the module; or both), plus, with share ``p_none``, uses
   without any (free names, uses before any definition), whose answer is "none".
2. Pick ``rate`` of the document's candidate uses (at least one when there is any), uniformly.
3. Mask every token of each picked use with <mask> (``mask_uses``; off = GraphCodeBERT-style
   edge prediction on the visible code) and, with ``mlm`` on, label them for the MLM head too.
4. Pointer records ``pointers["dataflow"]`` (K, 1 + m): the use's first token, then the first
   token of up to ``max_targets`` reaching definitions (-1 padded; all -1 = none). The
   MultiPointerHead ("dataflow") accepts any of them (marginal likelihood). Packing re-indexes them;
   a record whose definition leaves a cropped window is dropped with it.
Bidirectional (prefix all True). Cost: O(T + E) per document.
Not covered: computedFrom targets (derivable from view.dataflow kind 1; not trained here); a
use with more than ``max_targets`` reaching definitions keeps the ``max_targets`` nearest before it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from codept.data.example import IGNORE, Example
from codept.objectives import render
from codept.objectives.spec import Objective
from codept.structure.dataflow import COMES_FROM, COMES_FROM_FIELD, COMES_FROM_NONLOCAL, COMPUTED_FROM

# reaching definitions asked for: "comes_from" is GraphCodeBERT's function-local view (a use of a
# module-level name inside a function has none); "nonlocal" only the definitions in other functions
# (enclosing functions, the module) reaching a closure's or function's use; "all" every kind
KINDS = {"comes_from": (COMES_FROM,), "nonlocal": (COMES_FROM_NONLOCAL,),
         "all": (COMES_FROM, COMES_FROM_NONLOCAL, COMES_FROM_FIELD)}


@dataclass(frozen=True)
class Config:
    rate: float = 0.3  # share of candidate uses turned into pointer records
    max_targets: int = 4  # m: definitions kept per use
    p_none: float = 0.1  # share of uses without a reaching definition kept as "none" records
    mask_uses: bool = True
    mlm: bool = False  # also label the masked use tokens for the MLM head
    kinds: str = "comes_from"  # which definitions reach a use: comes_from | nonlocal | all (KINDS)

    def __post_init__(self):
        if not 0 < self.rate <= 1:
            raise ValueError(f"dataflow rate={self.rate}: must be in (0, 1]")
        if self.max_targets < 1:
            raise ValueError(f"dataflow max_targets={self.max_targets}: must be >= 1")
        if not 0 <= self.p_none <= 1:
            raise ValueError(f"dataflow p_none={self.p_none}: must be in [0, 1]")
        if self.kinds not in KINDS:
            raise ValueError(f"dataflow kinds={self.kinds!r}: expected one of {sorted(KINDS)}")


def use_targets(view, max_targets: int, kinds: str = "comes_from") -> tuple[np.ndarray, np.ndarray]:
    """(U,) identifier rows of the uses with reaching definitions (edges of `kinds`) and (U, m)
    the token starts of those definitions (-1 padded), nearest before the use first."""
    e = np.asarray(view.dataflow).reshape(-1, 3)
    e = e[np.isin(e[:, 2], KINDS[kinds])]
    if len(e) == 0:
        return np.zeros(0, np.int64), np.zeros((0, max_targets), np.int64)
    starts = np.asarray(view.idents)[:, 0].astype(np.int64)
    dst, src = e[:, 0].astype(np.int64), e[:, 1].astype(np.int64)
    # nearest definitions before the use first, then the ones after (loop back edges)
    after = starts[src] > starts[dst]
    dist = np.abs(starts[dst] - starts[src])
    o = np.lexsort((dist, after, dst))
    dst, src = dst[o], src[o]
    uses, first = np.unique(dst, return_index=True)
    rank = np.arange(len(dst)) - np.repeat(first, np.diff(np.append(first, len(dst))))
    keep = rank < max_targets
    out = np.full((len(uses), max_targets), -1, np.int64)
    out[np.searchsorted(uses, dst[keep]), rank[keep]] = starts[src[keep]]
    return uses, out


def build(vocab: render.Vocab, cfg: Config = Config()):
    def dataflow(view, rng: np.random.Generator, ctx=None) -> Example:
        ids = np.asarray(view.input_ids)
        idents = np.asarray(view.idents)
        uses, targets = use_targets(view, cfg.max_targets, cfg.kinds)
        # uses without a reaching definition: identifiers that are not definitions (role != 0),
        # not already a use with targets, and not a target of any edge (of the asked kinds, and
        # of computedFrom: a written variable)
        role = idents[:, 3] if len(idents) else np.zeros(0, np.int64)
        e = np.asarray(view.dataflow).reshape(-1, 3)
        e = e[np.isin(e[:, 2], KINDS[cfg.kinds] + (COMPUTED_FROM,))]
        lonely = np.setdiff1d(np.flatnonzero(role != 0), np.concatenate([uses, e[:, 0]]))
        lonely = lonely[rng.random(len(lonely)) < cfg.p_none]
        rows = np.concatenate([uses, lonely])
        tgts = np.concatenate([targets, np.full((len(lonely), cfg.max_targets), -1, np.int64)])
        n = len(rows)
        k = min(n, max(1, int(round(cfg.rate * n)))) if n else 0
        pick = np.sort(rng.choice(n, size=k, replace=False)) if k else np.zeros(0, np.int64)
        new = ids.copy()
        labels = np.full(len(ids), IGNORE, dtype=np.int64)
        for r in rows[pick].tolist():
            s, t = int(idents[r, 0]), int(idents[r, 1])
            if cfg.mask_uses:
                new[s:t] = vocab.mask_id
            if cfg.mlm:
                labels[s:t] = ids[s:t]
        ptr = np.concatenate([idents[rows[pick], :1].astype(np.int64), tgts[pick]], axis=1)
        out_labels = {"mlm": labels} if cfg.mlm else {}
        return Example(new, np.ones(len(ids), dtype=bool), labels=out_labels, pointers={"dataflow": ptr})

    return dataflow


# masked uses -> any reaching definition (MultiPointerHead)
OBJECTIVE = Objective("dataflow", build, Config, heads=("dataflow",), views=("code",), structure=True)
