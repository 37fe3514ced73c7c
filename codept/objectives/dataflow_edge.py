"""``dataflow_edge``: GraphCodeBERT's edge prediction -- does a dataflow edge join these two variable
tokens? -- a binary decision over token pairs, with sampled negatives (codept.structure.dataflow).

1. Nodes: identifiers at either end of a dataflow edge of the configured ``kinds`` (GraphCodeBERT's
   variable nodes). Anchors: nodes with an incoming edge (a use reached by a definition, a variable
   computed from others).
2. Pick ``rate`` of the anchors (at least one when there is any), uniformly (GraphCodeBERT samples
   20% of the nodes); every incoming edge of a picked anchor is a positive pair (anchor, source).
3. One negative per positive (GraphCodeBERT samples as many negatives as positives): a node of the
   anchor's innermost definition (CodeView.functions; the module level outside any) that is neither
   the anchor nor one of its sources. With share ``p_hard`` it is first drawn among the nodes with
   the source's name (a definition of that name which does not reach the anchor, the name used
   elsewhere), else among all; by rejection, ``tries`` draws each. A positive without one keeps -1.
4. Records ``pointers["dataflow_edge"]`` (K, 3): the first token of the anchor, of the source, of the
   negative. EdgeHead (codept.model.heads) scores a pair with a bilinear form plus a bias: binary
   cross-entropy, 1 for the source, 0 for the negative. Packing re-indexes the records; one whose
   tokens leave a cropped window is dropped whole.
The code stays visible: GraphCodeBERT hides the asked edges in its graph-guided attention, but no
graph is part of the input here, so the model must infer the edges from the code. Bidirectional
(prefix all True). Cost: O(T + E + F N) per document (F definitions, N nodes).
Not covered: candidate pairs with the anchor as the source (GraphCodeBERT's V x Vs half); edge kinds
are not told apart (a pair is an edge of any configured kind or none).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from codept.data.example import Example
from codept.objectives import render
from codept.objectives.spec import Objective
from codept.structure.dataflow import COMES_FROM, COMES_FROM_FIELD, COMES_FROM_NONLOCAL, COMPUTED_FROM

# edge kinds asked about: "both" is GraphCodeBERT's function-local view (comesFrom + computedFrom);
# "nonlocal" the edges into functions from enclosing functions and the module (closures, globals);
# "all" every kind of the view
KINDS = {"both": (COMES_FROM, COMPUTED_FROM), "comes_from": (COMES_FROM,), "computed_from": (COMPUTED_FROM,),
         "nonlocal": (COMES_FROM_NONLOCAL,),
         "all": (COMES_FROM, COMPUTED_FROM, COMES_FROM_NONLOCAL, COMES_FROM_FIELD)}


@dataclass(frozen=True)
class Config:
    rate: float = 0.2  # share of anchors whose incoming edges become records
    p_hard: float = 0.5  # share of negatives first drawn among nodes with the source's name
    kinds: str = "both"  # edges asked about: both | comes_from | computed_from | nonlocal | all (KINDS)
    tries: int = 4  # rejection draws per negative (per group)

    def __post_init__(self):
        if not 0 < self.rate <= 1:
            raise ValueError(f"dataflow_edge rate={self.rate}: must be in (0, 1]")
        if not 0 <= self.p_hard <= 1:
            raise ValueError(f"dataflow_edge p_hard={self.p_hard}: must be in [0, 1]")
        if self.kinds not in KINDS:
            raise ValueError(f"dataflow_edge kinds={self.kinds!r}: expected one of {sorted(KINDS)}")
        if self.tries < 1:
            raise ValueError(f"dataflow_edge tries={self.tries}: must be >= 1")


def edges_of(view, kinds: str) -> np.ndarray:
    """(E, 2) unique (dst, src) identifier rows joined by an edge of `kinds`."""
    e = np.asarray(view.dataflow).reshape(-1, 3).astype(np.int64)
    e = e[np.isin(e[:, 2], KINDS[kinds])]
    return np.unique(e[:, :2], axis=0) if len(e) else np.zeros((0, 2), np.int64)


def innermost(starts: np.ndarray, functions: np.ndarray) -> np.ndarray:
    """(N,) row of the innermost definition whose token range holds each start, -1 for none."""
    f = np.asarray(functions).reshape(-1, 7).astype(np.int64)
    if len(f) == 0 or len(starts) == 0:
        return np.full(len(starts), -1, np.int64)
    inside = (f[None, :, 1] <= starts[:, None]) & (starts[:, None] < f[None, :, 2])  # (N, F)
    best = np.where(inside, f[None, :, 1], -1).argmax(axis=1)  # the latest-starting one holds the rest
    return np.where(inside.any(axis=1), best, -1)


def _draw(key_of_rec: np.ndarray, keys: np.ndarray, nodes: np.ndarray, rng) -> np.ndarray:
    """One node per record, uniformly among the nodes whose key equals the record's key; -1 for none.
    `keys` sorted ascending, `nodes` in the same order."""
    lo, hi = np.searchsorted(keys, key_of_rec, "left"), np.searchsorted(keys, key_of_rec, "right")
    pick = lo + np.floor(rng.random(len(key_of_rec)) * (hi - lo)).astype(np.int64)
    return np.where(hi > lo, nodes[np.minimum(pick, len(nodes) - 1)], -1)


def negatives(view, edges: np.ndarray, anchor: np.ndarray, source: np.ndarray, cfg: Config, rng) -> np.ndarray:
    """(K,) identifier row of a non-source node for each (anchor, source) record, -1 for none."""
    idents = np.asarray(view.idents).astype(np.int64)
    nodes = np.unique(edges)
    fn = innermost(idents[nodes, 0], view.functions)  # (N,)
    fn_of = dict(zip(nodes.tolist(), fn.tolist()))
    rec_fn = np.array([fn_of[a] for a in anchor.tolist()], np.int64)
    width = int(idents[:, 2].max()) + 2 if len(idents) else 1
    easy_key, hard_key = fn + 1, (fn + 1) * width + idents[nodes, 2]
    st = idents[:, 0]
    span = int(st.max()) + 1  # pairs compared by token starts: two identifiers may share a token
    taken = np.unique(st[edges[:, 0]] * span + st[edges[:, 1]])
    out = np.full(len(anchor), -1, np.int64)
    hard = rng.random(len(anchor)) < cfg.p_hard
    for group, key, rec_key in (("hard", hard_key, (rec_fn + 1) * width + idents[source, 2]),
                                ("easy", easy_key, rec_fn + 1)):
        o = np.argsort(key, kind="stable")
        for _ in range(cfg.tries):
            todo = np.flatnonzero((out < 0) & (hard if group == "hard" else True))
            if len(todo) == 0:
                break
            cand = _draw(rec_key[todo], key[o], nodes[o], rng)
            a, c = st[anchor[todo]], st[np.maximum(cand, 0)]
            ok = (cand >= 0) & (c != a) & ~np.isin(a * span + c, taken)
            out[todo[ok]] = cand[ok]
    return out


def build(vocab: render.Vocab, cfg: Config = Config()):
    def dataflow_edge(view, rng: np.random.Generator, ctx=None) -> Example:
        ids = np.asarray(view.input_ids)
        edges = edges_of(view, cfg.kinds)
        anchors = np.unique(edges[:, 0])
        k = min(len(anchors), max(1, int(round(cfg.rate * len(anchors))))) if len(anchors) else 0
        picked = np.sort(rng.choice(anchors, size=k, replace=False)) if k else anchors[:0]
        pos = edges[np.isin(edges[:, 0], picked)]  # (P, 2) dst (anchor), src
        neg = negatives(view, edges, pos[:, 0], pos[:, 1], cfg, rng) if len(pos) else np.zeros(0, np.int64)
        starts = np.asarray(view.idents)[:, 0].astype(np.int64)
        rec = np.stack([starts[pos[:, 0]], starts[pos[:, 1]], np.where(neg >= 0, starts[neg], -1)], axis=1) \
            if len(pos) else np.zeros((0, 3), np.int64)
        return Example(ids.copy(), np.ones(len(ids), dtype=bool), pointers={"dataflow_edge": rec})

    return dataflow_edge


# GraphCodeBERT's edge prediction, sampled negatives (EdgeHead)
OBJECTIVE = Objective("dataflow_edge", build, Config, heads=("dataflow_edge",), views=("code",), structure=True)
