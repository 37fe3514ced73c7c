"""``codept probe structure --model M``: what the frozen states of every layer hold about code
structure, by small linear (bilinear for pairs) probes with control tasks.

Tasks (labels from the views of ``codept prepare``: spans, identifiers, dataflow; text views for the
last one), each example taken inside one window of ``window`` tokens so a pair's two tokens see
each other:
  node_kind     per token (whitespace-only tokens and tokens outside every span left out): the kind
                of the innermost syntax span covering it (codept.structure.kinds.SPAN_KINDS); softmax
                probe over the token's state.
  def_use       per identifier occurrence (its first token): defined here vs used; logistic probe.
  same_binding  pairs of occurrences of the SAME name in a window (both bound): do they bind the same
                variable (codept.structure.resolve)? Bilinear probe over the two first-token states.
                Sampled so that neither the name nor the distance answers (see below).
  dataflow_edge pairs (use u, definition d) of the same name in a window: does u read d (a
                comesFrom edge of codept.structure.dataflow)? Bilinear probe. Sampled so that
                neither the name, the distance nor the direction (d before or after u) answers.
  word_boundary (text views) per token: does it start a word (TextView.words)? Logistic probe.
Pair tasks are balanced to 50/50 by seeded subsampling (train and test alike); node_kind is not
(the table gives its majority-class rate). The pair tasks (STRATIFIED) are balanced WITHIN each stratum
(name, direction, log2 token distance) of each part (:func:`stratified_balance`): every stratum has as
many positive pairs as negative ones, so a probe that knows only the name, only the distance bucket or
only the direction scores 0.5. same_binding (its pairs are always in text order): what is left is
whether the two occurrences share a scope. dataflow_edge (negatives: definitions of the SAME name as
the use, at a similar distance on the same side): what is left is which definition reaches the use.
(The plain 50/50 balance over all pairs, the first version of both tasks, let cheap cues answer. On
networkx, same_binding: a per-name majority predictor scored 0.752 on test, above MiniLM's 0.743, and
a distance stump 0.67-0.81. dataflow_edge: a distance stump 0.724, above MiniLM's 0.675; balanced
within (name, distance bucket) only, the direction alone still scored 0.82-0.84, since a definition
after the use reaches it only around a loop.) Baselines in every task's result: ``majority``;
``name_only`` (the fit examples' majority label per type, the overall one for unseen types); pair
tasks also ``distance_only`` (the best threshold on the token distance, chosen on fit; above 0.5 only
by what is left inside a bucket) and ``direction_only`` (the fit majority label per direction).

Control tasks, in the spirit of Hewitt & Liang (2019, "Designing and Interpreting Probes with
Control Tasks"): the same probe on the same examples, with each example's label replaced so that it
depends on the example's TYPE only (node_kind, word_boundary: the token id; def_use: the name; pair
tasks: the shared name). H&L draw ONE label per type; that control is as lexical as a task can be,
and here it is easier than the tasks themselves (measured with all-MiniLM-L6-v2 on networkx: a
type-majority predictor gets 0.57 of node kinds right, the one-label-per-type control 0.87 at
layer 0), so its selectivity would be negative for any encoder. The control used here permutes the
task's labels WITHIN each type: every type keeps its own label distribution (the same lexical
ceiling as the task), and only what the context says is destroyed. A probe that memorises tokens or
names scores the same on both; selectivity = task accuracy - control accuracy (same layer) is what
the states add beyond token identity. (Shuffling labels across all examples would give chance for
every encoder: a floor that says nothing about memorisation.)

Protocol (:func:`run_structure`):
  1. The views' files are split by a content hash (salt ``codept-structure``) into probe-train and
     probe-test halves; the probe-train files into fit (3/4) and dev (1/4) by the same hash.
  2. Each file gives its first ``windows`` windows of ``window`` tokens; each window is framed as the
     model's tokenizer frames text (MiniLM: [CLS] .. [SEP]) and run once through the frozen encoder
     (codept.probe.encoders.layer_states); the states of every layer (0 = embeddings) are kept for
     the tokens the tasks need only. Caps: ``max_train`` / ``max_test`` examples per task.
  3. Per task and layer: features standardised with the fit examples' mean/std; the probe trained by
     L-BFGS (``iters`` iterations, L2 ``l2``) on fit, for the task and its control; accuracy on dev
     and test.
  4. The reported layer of a task is the one with the best DEV accuracy (never chosen on test); its
     test accuracy, control accuracy and selectivity, each with a standard error from a bootstrap
     over TEST FILES (``boot`` resamples: examples of a file are not independent), and every layer's
     numbers in results.json.
Output (``--out``): results.json (model, settings, sources, counts, per task: chance / majority,
per layer acc and control, the chosen layer with SEs, seconds), results.md, results.png (accuracy
and control by layer, one panel per task).
Cost: one forward over files x windows x window tokens (defaults 96 x 2 x 256 = 49 k tokens: the
debug_cpu encoder ~3 s, MiniLM ~10 s on one core) plus 2 fits per task and layer (each a few
hundred ms for the defaults); :func:`StructureProbe` keeps the data for repeated use in training
(``probe.structure_every``) with smaller caps.
The pair tasks need a larger budget than the defaults: only pairs of strata that hold both labels
survive. networkx, MiniLM's tokenizer: same_binding at the defaults 262 / 366 / 546 fit / dev / test
pairs, at 300 files x 2 windows of 510 tokens (``--files 300 --window 512``, ~80 s on 2 cores) the
caps' 3000 / 1000 / 2000 from 106 test files; dataflow_edge 74 / 78 / 162 at the defaults, 1300 / 604 /
1912 from 134 test files at 300 x 512. The training hook's caps give fewer (a task is reported as
skipped when fit has < 10).
Not covered: tree-distance / depth probes (Hewitt & Manning), MDL probing, probes across windows,
languages whose views lack the structure a task needs (the task is reported with n = 0).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from codept.argtypes import int_at_least, out_folder

SALT = "codept-structure"
CODE_TASKS = ("node_kind", "def_use", "same_binding", "dataflow_edge")
TEXT_TASKS = ("word_boundary",)
PAIR_TASKS = ("same_binding", "dataflow_edge")
STRATIFIED = ("same_binding", "dataflow_edge")  # pair tasks balanced within (name, direction, distance bucket)
HARNESS = "codept.probe.structure 3"  # 2: same_binding stratified by name and distance; 3: dataflow_edge too, + direction


@dataclass(frozen=True)
class StructureConfig:
    files: int = 96  # files read (half probe-train, half probe-test, by content hash)
    window: int = 256  # tokens per window (framing included), at most the model's positions
    windows: int = 2  # windows per file (from its start)
    max_train: int = 4000  # examples per task for fit + dev
    max_test: int = 2000  # examples per task for test
    iters: int = 60  # L-BFGS iterations per probe
    l2: float = 1e-3  # L2 penalty on the probe's weights (mean loss + l2 * |W|^2)
    rank: int = 32  # rank of the bilinear pair probe
    boot: int = 200  # bootstrap resamples over test files
    seed: int = 0
    attention: str = "bi"  # "bi" (every model) or "causal" (a model trained causal, e.g. ar)

    def __post_init__(self):
        for name, lo in (("files", 4), ("window", 16), ("windows", 1), ("max_train", 20), ("max_test", 10),
                         ("iters", 1), ("rank", 1), ("boot", 10)):
            if getattr(self, name) < lo:
                raise ValueError(f"{name}={getattr(self, name)}: must be >= {lo}")
        if self.attention not in ("bi", "causal"):
            raise ValueError(f"attention={self.attention!r}: must be 'bi' or 'causal'")


# ---------------------------------------------------------------------------------------------
# 1-2. examples from views


def file_part(text: str) -> str:
    """"fit", "dev" or "test": the file's place in the protocol (a content hash, never the path)."""
    from codept.probe.split import held_out_score

    u = held_out_score(text, SALT)
    return "test" if u >= 0.5 else "dev" if u >= 0.375 else "fit"


def innermost_kind(spans: np.ndarray, n: int) -> np.ndarray:
    """(n,) int: the kind of the innermost span over each token, -1 where none. Spans come sorted by
    (start, -end): a later span that starts inside an earlier one is nested in it, so writing them in
    order leaves the innermost."""
    out = np.full(n, -1, dtype=np.int64)
    for s, e, k in spans:
        out[s:e] = k
    return out


@dataclass
class Window:
    """One window of one file: its token ids (unframed) and the examples it gives, in window
    coordinates (token index into ``ids``)."""

    file: int
    part: str
    ids: np.ndarray
    tokens: dict  # task -> (idx (N,), labels (N,), types (N,))  per-token tasks
    pairs: dict  # task -> (a (N,), b (N,), labels (N,), types (N,))


def code_window(view, file: int, part: str, w0: int, w1: int, name_type) -> Window:
    """The examples of tokens [w0, w1) of a CodeView; ``name_type(name) -> int`` types names globally."""
    ids = np.asarray(view.input_ids[w0:w1], dtype=np.int64)
    n = len(ids)
    spans = view.spans[(view.spans[:, 0] < w1) & (view.spans[:, 1] > w0)]  # clipped to the window: labels
    kind = innermost_kind(np.c_[np.maximum(spans[:, 0], w0) - w0, np.minimum(spans[:, 1], w1) - w0, spans[:, 2]], n)
    keep = np.nonzero((kind >= 0) & (np.asarray(view.leaf[w0:w1]) >= 0))[0]
    tokens = {"node_kind": (keep, kind[keep], ids[keep])}
    idents = np.asarray(view.idents)
    rows = np.nonzero((idents[:, 0] >= w0) & (idents[:, 1] <= w1))[0] if len(idents) else np.zeros(0, np.int64)
    first = idents[rows, 0] - w0 if len(rows) else np.zeros(0, np.int64)
    names = np.array([name_type(view.names[idents[r, 2]]) for r in rows], dtype=np.int64)
    roles = idents[rows, 3] if len(rows) else np.zeros(0, np.int64)
    binding = idents[rows, 4] if len(rows) else np.zeros(0, np.int64)
    tokens["def_use"] = (first, (roles == 0).astype(np.int64), names)
    pairs = {}
    a, b = np.triu_indices(len(rows), 1)
    same = names[a] == names[b]
    bound = (roles[a] != 2) & (roles[b] != 2)  # role 2: a free name (no binding to compare)
    sa, sb = a[same & bound], b[same & bound]
    pairs["same_binding"] = (first[sa], first[sb], (binding[sa] == binding[sb]).astype(np.int64), names[sa])
    edges = np.asarray(view.dataflow)
    edge_set = {(int(d), int(s)) for d, s, k in edges if k == 0}
    u = np.r_[a, b]
    d = np.r_[b, a]
    ok = (names[u] == names[d]) & (roles[u] == 1) & (roles[d] == 0)
    u, d = u[ok], d[ok]
    lab = np.array([(int(rows[x]), int(rows[y])) in edge_set for x, y in zip(u, d)], dtype=np.int64)
    pairs["dataflow_edge"] = (first[u], first[d], lab, names[u])
    return Window(file, part, ids, tokens, pairs)


def text_window(view, file: int, part: str, w0: int, w1: int) -> Window:
    """The word_boundary examples of tokens [w0, w1) of a TextView (tokens inside words only)."""
    ids = np.asarray(view.input_ids[w0:w1], dtype=np.int64)
    words = np.asarray(view.words, dtype=np.int64)
    prev = np.r_[-2, words[:-1]][w0:w1]
    cur = words[w0:w1]
    keep = np.nonzero(cur >= 0)[0]
    keep = keep[keep > 0]  # the window's first token has no left context to decide from
    return Window(file, part, ids, {"word_boundary": (keep, (cur[keep] != prev[keep]).astype(np.int64), ids[keep])}, {})


def windows_of(views, cfg: StructureConfig, length: int, kind: str = "code") -> list[Window]:
    """Windows of the first ``cfg.files`` views (in a content-hash order, so the file set does not
    depend on the folder's order), ``length`` tokens each."""
    order = sorted(range(len(views)), key=lambda i: hashlib.blake2b(views[i].text.encode("utf-8", "surrogatepass"),
                                                                    digest_size=8).digest())
    types: dict[str, int] = {}
    name_type = lambda s: types.setdefault(s, len(types))  # noqa: E731
    out = []
    for f, i in enumerate(order[: cfg.files]):
        v = views[i]
        part = file_part(v.text)
        for w in range(cfg.windows):
            w0, w1 = w * length, min((w + 1) * length, len(v))
            if w1 - w0 < 8:
                break
            out.append(code_window(v, f, part, w0, w1, name_type) if kind == "code" else text_window(v, f, part, w0, w1))
    return out


# ---------------------------------------------------------------------------------------------
# 2. states


def encode_windows(enc, windows: list[Window], cfg: StructureConfig, batch_size: int = 16) -> list[list[np.ndarray]]:
    """Per window, [(n, C) float32] * (L + 1): the states of its tokens (framing removed), every layer;
    the model's train/eval mode is restored afterwards."""
    pre, post = enc.frame
    pad = enc.config.pad_id
    out: list = [None] * len(windows)
    model, was = enc.model, enc.model.training
    model.eval()
    try:
        _encode(model, windows, pre, post, pad, cfg, batch_size, out)
    finally:
        model.train(was)  # the training hook probes the live model
    return out


def _encode(model, windows, pre, post, pad, cfg, batch_size, out) -> None:
    import torch

    from codept.probe.encoders import layer_states

    device = next(model.parameters()).device
    with torch.inference_mode():
        for s in range(0, len(windows), batch_size):
            chunk = windows[s:s + batch_size]
            t = max(len(w.ids) for w in chunk) + len(pre) + len(post)
            x = torch.full((len(chunk), t), pad, dtype=torch.long)
            m = torch.zeros((len(chunk), t), dtype=torch.bool)
            for r, w in enumerate(chunk):
                row = list(pre) + w.ids.tolist() + list(post)
                x[r, : len(row)] = torch.tensor(row)
                m[r, : len(row)] = True
            states = layer_states(model, x.to(device), m.to(device), causal=cfg.attention == "causal")
            for r, w in enumerate(chunk):
                sl = slice(len(pre), len(pre) + len(w.ids))
                out[s + r] = [h[r, sl].float().cpu().numpy() for h in states]


def _cap(idx: np.ndarray, k: int, seed: int) -> np.ndarray:
    return idx if len(idx) <= k else np.sort(np.random.default_rng(seed).choice(idx, k, replace=False))


def _balance(labels: np.ndarray, idx: np.ndarray, k: int, seed: int) -> np.ndarray:
    """At most k indices of ``idx``, half of each binary label (as many as the rarer label allows)."""
    pos, neg = idx[labels[idx] == 1], idx[labels[idx] == 0]
    m = min(len(pos), len(neg), k // 2)
    rng = np.random.default_rng(seed)
    return np.sort(np.r_[rng.choice(pos, m, replace=False), rng.choice(neg, m, replace=False)]).astype(np.int64)


def distance_bucket(dist: np.ndarray) -> np.ndarray:
    """(N,) int: floor(log2(max(d, 1))) of token distances (0: 1, 1: 2-3, 2: 4-7, ..., 7: 128-255)."""
    return np.floor(np.log2(np.maximum(np.asarray(dist, dtype=np.float64), 1))).astype(np.int64)


def stratified_balance(labels: np.ndarray, strata: np.ndarray, idx: np.ndarray, k: int, seed: int) -> np.ndarray:
    """At most k indices of ``idx`` (k // 2 of each binary label), balanced WITHIN each stratum: a
    stratum with p positives and q negatives gives min(p, q) of each (seeded choice), and when more
    than k // 2 such (positive, negative) couples exist, k // 2 couples are drawn, so every stratum
    stays 50/50 and a predictor that knows only the stratum scores exactly 0.5."""
    rng = np.random.default_rng([seed, 13])
    couples = []
    for s in np.unique(strata[idx]):
        g = idx[strata[idx] == s]
        pos, neg = g[labels[g] == 1], g[labels[g] == 0]
        m = min(len(pos), len(neg))
        if m:
            couples.append(np.c_[rng.choice(pos, m, replace=False), rng.choice(neg, m, replace=False)])
    if not couples:
        return np.zeros(0, np.int64)
    couples = np.concatenate(couples)
    if len(couples) > k // 2:
        couples = couples[rng.choice(len(couples), k // 2, replace=False)]
    return np.sort(couples.ravel()).astype(np.int64)


def task_data(task: str, windows: list[Window], states: list, cfg: StructureConfig) -> dict | None:
    """{"X": [(N, C) or (N, 2, C) per layer], "y", "types", "file", "part", "dist", "after"} of one task,
    capped (balanced for pair tasks, within name x direction x distance strata for STRATIFIED); None when
    no example. ``dist``: the token distance of a pair (0 for token tasks); ``after``: 1 where the pair's
    second token (dataflow_edge: the definition) comes after its first (the use)."""
    rows = []
    for wi, w in enumerate(windows):
        if task in w.tokens:
            idx, lab, typ = w.tokens[task]
            rows += [(wi, (i,), y, t) for i, y, t in zip(idx.tolist(), lab.tolist(), typ.tolist())]
        elif task in w.pairs:
            a, b, lab, typ = w.pairs[task]
            rows += [(wi, (i, j), y, t) for i, j, y, t in zip(a.tolist(), b.tolist(), lab.tolist(), typ.tolist())]
    if not rows:
        return None
    y = np.array([r[2] for r in rows], dtype=np.int64)
    part = np.array([windows[r[0]].part for r in rows])
    types = np.array([r[3] for r in rows], dtype=np.int64)
    dist = np.array([abs(r[1][-1] - r[1][0]) for r in rows], dtype=np.int64)
    after = np.array([r[1][-1] > r[1][0] for r in rows], dtype=np.int64)  # pair: its second token comes later
    strata = (types * 2 + after) * 64 + distance_bucket(dist)  # buckets < 64 for any window a model takes
    keep = []
    for p, k in (("fit", cfg.max_train * 3 // 4), ("dev", cfg.max_train // 4), ("test", cfg.max_test)):
        idx = np.nonzero(part == p)[0]
        keep.append(stratified_balance(y, strata, idx, k, cfg.seed) if task in STRATIFIED else
                    _balance(y, idx, k, cfg.seed) if task in PAIR_TASKS else _cap(idx, k, cfg.seed))
    keep = np.concatenate(keep)
    if not len(keep):
        return None
    n_layers = len(states[0])
    X = []
    for layer in range(n_layers):
        X.append(np.stack([np.stack([states[rows[i][0]][layer][t] for t in rows[i][1]]) for i in keep]).squeeze(1)
                 if task not in PAIR_TASKS else
                 np.stack([np.stack([states[rows[i][0]][layer][t] for t in rows[i][1]]) for i in keep]))
    return {"X": X, "y": y[keep], "types": types[keep], "dist": dist[keep], "after": after[keep],
            "file": np.array([windows[rows[i][0]].file for i in keep], dtype=np.int64), "part": part[keep]}


def name_only(y: np.ndarray, types: np.ndarray, fit: np.ndarray, test: np.ndarray) -> float:
    """Test accuracy of the type-only predictor: the fit examples' majority label per type (ties and
    unseen types: the fit examples' overall majority)."""
    n_classes = int(y.max()) + 1
    default = int(np.bincount(y[fit], minlength=n_classes).argmax())
    counts: dict[int, np.ndarray] = {}
    for t, lab in zip(types[fit].tolist(), y[fit].tolist()):
        counts.setdefault(t, np.zeros(n_classes, np.int64))[lab] += 1
    guess = {t: (int(c.argmax()) if (c == c.max()).sum() == 1 else default) for t, c in counts.items()}
    pred = np.array([guess.get(t, default) for t in types[test].tolist()], dtype=np.int64)
    return float((pred == y[test]).mean())


def distance_only(y: np.ndarray, dist: np.ndarray, fit: np.ndarray, test: np.ndarray) -> float:
    """Test accuracy of the best one-threshold rule on the token distance (``d <= t`` -> 1, or its
    reverse), chosen on fit: what the distance alone says about a binary pair label."""
    d, lab = dist[fit], y[fit]
    best = (-1.0, 0, True)
    for t in np.unique(d):
        acc = float(((d <= t) == lab).mean())
        best = max(best, (acc, int(t), True), (1 - acc, int(t), False))
    _, t, near = best
    pred = (dist[test] <= t) if near else (dist[test] > t)
    return float((pred == y[test]).mean())


def control_labels(y: np.ndarray, types: np.ndarray, fit: np.ndarray, seed: int) -> np.ndarray:
    """Control labels: the task's labels permuted WITHIN each type (seeded by ``seed`` and the type),
    over all examples of the task at once. Each type keeps its own label distribution, so a probe
    that knows only the type does exactly as well on the control as on the task, and what the
    context says about an example is gone. (``fit`` is unused: the permutation is over every part.)"""
    out = y.copy()
    for t in np.unique(types):
        idx = np.nonzero(types == t)[0]
        out[idx] = y[idx][np.random.default_rng([seed, 7, int(t)]).permutation(len(idx))]
    return out


# ---------------------------------------------------------------------------------------------
# 3. probes


def fit_probe(X: np.ndarray, y: np.ndarray, n_classes: int, cfg: StructureConfig, pair: bool):
    """A probe trained by L-BFGS on standardised features; returns predict(X) -> labels.
    Token: softmax(W x + b). Pair: logit = (A xa) . (B xb) + c (rank ``cfg.rank``)."""
    import torch

    Xt = torch.from_numpy(np.ascontiguousarray(X, dtype=np.float32))
    mu = Xt.reshape(-1, Xt.shape[-1]).mean(0)
    sd = Xt.reshape(-1, Xt.shape[-1]).std(0).clamp(min=1e-6)
    Z = (Xt - mu) / sd
    yt = torch.from_numpy(y)
    g = torch.Generator().manual_seed(cfg.seed)
    c = Z.shape[-1]
    if pair:
        params = [(torch.randn(c, cfg.rank, generator=g) / c ** 0.5).requires_grad_(),
                  (torch.randn(c, cfg.rank, generator=g) / c ** 0.5).requires_grad_(), torch.zeros(1, requires_grad=True)]

        def logits(Z):
            return ((Z[:, 0] @ params[0]) * (Z[:, 1] @ params[1])).sum(-1) + params[2]
    else:
        params = [torch.zeros(c, n_classes, requires_grad=True), torch.zeros(n_classes, requires_grad=True)]

        def logits(Z):
            return Z @ params[0] + params[1]

    opt = torch.optim.LBFGS(params, lr=1.0, max_iter=cfg.iters, history_size=10, line_search_fn="strong_wolfe")
    loss_fn = (lambda z: torch.nn.functional.binary_cross_entropy_with_logits(z, yt.float())) if pair else \
        (lambda z: torch.nn.functional.cross_entropy(z, yt))

    def closure():
        opt.zero_grad()
        loss = loss_fn(logits(Z)) + cfg.l2 * sum((p ** 2).sum() for p in params[:-1])
        loss.backward()
        return loss

    opt.step(closure)

    def predict(X2: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            z = logits((torch.from_numpy(np.ascontiguousarray(X2, dtype=np.float32)) - mu) / sd)
            return (z > 0).long().numpy() if pair else z.argmax(-1).numpy()

    return predict


def file_bootstrap(correct: np.ndarray, files: np.ndarray, boot: int, seed: int) -> float:
    """Standard error of the mean of ``correct`` (per example, float) by resampling FILES."""
    uniq, inv = np.unique(files, return_inverse=True)
    if len(uniq) < 2:
        return float("nan")
    sums = np.bincount(inv, weights=correct, minlength=len(uniq))
    counts = np.bincount(inv, minlength=len(uniq)).astype(np.float64)
    rng = np.random.default_rng([seed, 11])
    draws = rng.integers(0, len(uniq), size=(boot, len(uniq)))
    means = sums[draws].sum(1) / np.maximum(counts[draws].sum(1), 1)
    return float(means.std(ddof=1))


def score_task(task: str, data: dict, cfg: StructureConfig) -> dict:
    """Every layer's dev/test accuracy on the task and its control; the dev-chosen layer with SEs."""
    y, part, files = data["y"], data["part"], data["file"]
    fit, dev, test = (part == "fit"), (part == "dev"), (part == "test")
    classes = np.unique(y)
    pair = task in PAIR_TASKS
    out = {"n": {"fit": int(fit.sum()), "dev": int(dev.sum()), "test": int(test.sum())},
           "test_files": int(len(np.unique(files[test]))), "classes": int(len(classes))}
    if fit.sum() < 10 or test.sum() < 5 or len(np.unique(y[fit])) < 2:
        return {**out, "skipped": "too few examples (or one label) in fit/test"}
    ctrl = control_labels(y, data["types"], fit, cfg.seed)
    n_classes = int(y.max()) + 1
    counts = np.bincount(y[test], minlength=n_classes)
    out["majority"] = float(counts.max() / counts.sum())
    out["name_only"] = name_only(y, data["types"], fit, test)
    if pair:
        out["distance_only"] = distance_only(y, data["dist"], fit, test)
        out["direction_only"] = name_only(y, data["after"], fit, test)  # the majority label per direction
    out["types_test_seen_in_fit"] = float(np.isin(data["types"][test], data["types"][fit]).mean())
    layers, best, keep = [], None, {}
    for layer, X in enumerate(data["X"]):
        row = {"layer": layer}
        for name, lab in (("task", y), ("control", ctrl)):
            pred = fit_probe(X[fit], lab[fit], n_classes, cfg, pair)
            p = pred(X[dev | test])
            hit = np.zeros(len(y))
            hit[dev | test] = p == lab[dev | test]
            row[f"{name}_dev"] = float(hit[dev].mean()) if dev.any() else float("nan")
            row[f"{name}_test"] = float(hit[test].mean())
            keep[(layer, name)] = hit[test]
        row["selectivity_test"] = row["task_test"] - row["control_test"]
        layers.append(row)
        score = row["task_dev"] if dev.any() else row["task_test"]
        if best is None or score > best[0]:
            best = (score, layer)
    layer = best[1]
    t, c = keep[(layer, "task")], keep[(layer, "control")]
    ft = files[test]
    out.update(layers=layers, layer=layer, acc=float(t.mean()), acc_se=file_bootstrap(t, ft, cfg.boot, cfg.seed),
               control=float(c.mean()), control_se=file_bootstrap(c, ft, cfg.boot, cfg.seed),
               selectivity=float(t.mean() - c.mean()), selectivity_se=file_bootstrap(t - c, ft, cfg.boot, cfg.seed),
               chosen_by="dev accuracy" if dev.any() else "test accuracy (no dev examples)")
    return out


# ---------------------------------------------------------------------------------------------
# 4. the whole protocol


class StructureProbe:
    """Windows and labels fixed once (from views tokenised with the model's tokenizer), scored for
    any encoder of that tokenizer: :meth:`evaluate` (also the training-time hook)."""

    def __init__(self, code_views=None, text_views=None, cfg: StructureConfig = StructureConfig(), length: int = 256):
        self.cfg = cfg
        self.windows: dict[str, list[Window]] = {}
        if code_views is not None and len(code_views):
            self.windows["code"] = windows_of(code_views, cfg, length, "code")
        if text_views is not None and len(text_views):
            self.windows["text"] = windows_of(text_views, cfg, length, "text")

    def tasks(self) -> list[tuple[str, str]]:
        return [(k, t) for k in self.windows for t in (CODE_TASKS if k == "code" else TEXT_TASKS)]

    def evaluate(self, enc, tasks: list[str] | None = None) -> dict:
        t0 = time.perf_counter()
        out, secs = {}, {}
        for kind, windows in self.windows.items():
            if tasks and not any(k == kind and t in tasks for k, t in self.tasks()):
                continue  # no requested task reads these windows: no forward over them
            t1 = time.perf_counter()
            states = encode_windows(enc, windows, self.cfg)
            secs[f"encode_{kind}"] = round(time.perf_counter() - t1, 2)
            secs[f"tokens_{kind}"] = int(sum(len(w.ids) for w in windows))
            for k, task in self.tasks():
                if k != kind or (tasks and task not in tasks):
                    continue
                t2 = time.perf_counter()
                data = task_data(task, windows, states, self.cfg)
                out[task] = score_task(task, data, self.cfg) if data else {"skipped": "no example"}
                secs[task] = round(time.perf_counter() - t2, 2)
        return {"tasks": out, "seconds": {**secs, "total": round(time.perf_counter() - t0, 2)}}


HOOK = StructureConfig(files=32, windows=1, max_train=1500, max_test=800, iters=30, boot=50)


def scalars(result: dict, prefix: str = "structure/") -> dict:
    """Flat scalars of a result for logs: ``structure/<task>/acc|control|selectivity|layer``."""
    out = {}
    for task, r in result["tasks"].items():
        if "acc" in r:
            out.update({f"{prefix}{task}/{k}": float(r[k]) for k in ("acc", "control", "selectivity", "layer")})
    return out


def markdown(result: dict) -> str:
    lines = [f"# structural probes: {result.get('slug', '')}", "",
             f"harness {HARNESS}; states of every layer (0 = embeddings), frozen; layer chosen by dev accuracy; "
             "SE = bootstrap over test files; control = the labels permuted within each token/name type", "",
             "| task | layer | accuracy | control | selectivity | majority / name-only / distance-only / direction-only | "
             "n fit / dev / test (test files) |",
             "|---|---|---|---|---|---|---|"]
    for task, r in result["tasks"].items():
        if "acc" not in r:
            lines.append(f"| {task} | - | {r.get('skipped', '')} | | | | |")
            continue
        chance = " / ".join(f"{r[k]:.3f}" for k in ("majority", "name_only", "distance_only", "direction_only") if k in r)
        n = r["n"]
        lines.append(f"| {task} | {r['layer']} | {r['acc']:.3f} ± {r['acc_se']:.3f} | {r['control']:.3f} ± "
                     f"{r['control_se']:.3f} | {r['selectivity']:.3f} ± {r['selectivity_se']:.3f} | {chance} | "
                     f"{n['fit']} / {n['dev']} / {n['test']} ({r['test_files']}) |")
    lines += ["", "per layer (test accuracy / control):", ""]
    for task, r in result["tasks"].items():
        if "layers" in r:
            lines.append(f"- {task}: " + ", ".join(f"L{x['layer']} {x['task_test']:.3f}/{x['control_test']:.3f}"
                                                  for x in r["layers"]))
    return "\n".join(lines) + "\n"


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = [t for t, r in result["tasks"].items() if "layers" in r]
    if not tasks:
        return
    fig, axes = plt.subplots(1, len(tasks), figsize=(3.2 * len(tasks), 3), squeeze=False)
    for ax, task in zip(axes[0], tasks):
        rows = result["tasks"][task]["layers"]
        xs = [r["layer"] for r in rows]
        ax.plot(xs, [r["task_test"] for r in rows], marker="o", label="task")
        ax.plot(xs, [r["control_test"] for r in rows], marker="x", label="control")
        ax.set_title(task)
        ax.set_xlabel("layer")
        ax.set_ylim(0, 1)
    axes[0][0].set_ylabel("test accuracy")
    axes[0][0].legend()
    fig.suptitle(result.get("slug", ""))
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def prepared_views(source: str, tok_dir: Path, text: bool = False):
    """Views of ``source`` (an installed package name such as networkx, ``stdlib``, or any path
    prepare reads) tokenised with ``tok_dir`` (prepare caches them by content)."""
    from codept.views import open_views

    if text:
        from codept.text.prepare import prepare_text

        return open_views(prepare_text([source], tokenizer_dir=tok_dir, progress=False)["out"], kind="text")
    from codept.prepare import prepare
    from codept.probe.defaults import project_dir

    srcs = [] if source == "stdlib" else [str(project_dir(source))]
    summary = prepare(srcs, tokenizer_dir=tok_dir, progress=False)
    return open_views(summary["out"])


def check_tasks(tasks) -> list[str]:
    """The requested task names (empty: all), each one of CODE_TASKS + TEXT_TASKS."""
    tasks = list(tasks or [])
    for t in tasks:
        if t not in CODE_TASKS + TEXT_TASKS:
            raise ValueError(f"task {t!r}: unknown; the tasks are {', '.join(CODE_TASKS + TEXT_TASKS)}")
    return tasks


def run_structure(model: str, source: str = "networkx", text: str = "", cfg: StructureConfig = StructureConfig(),
                  tokenizer=None, like: str = "", tasks=None) -> dict:
    """results.json dict of one model (``like``: the model whose shape ``random`` copies; ``tasks``: a
    subset of the tasks, default all)."""
    from codept.probe.encoders import load_encoder

    tasks = check_tasks(tasks)
    t0 = time.perf_counter()
    ref = load_encoder(like, tokenizer=tokenizer) if like else None
    enc = load_encoder(model, like=ref, seed=cfg.seed, tokenizer=tokenizer)
    length = min(cfg.window, enc.config.max_positions) - len(enc.frame[0]) - len(enc.frame[1])
    code = prepared_views(source, enc.tokenizer_dir) if source else None
    txt = prepared_views(text, enc.tokenizer_dir, text=True) if text else None
    probe = StructureProbe(code, txt, cfg, length)
    res = probe.evaluate(enc, tasks)
    slug = Path(model).name if model not in ("random",) and not model.startswith("random:") else \
        f"random-{Path(like).name if like else model.partition(':')[2]}-s{cfg.seed}"
    return {"harness": HARNESS, "slug": slug, "model": enc.desc, "source": source, "text": text,
            "settings": asdict(cfg), "tasks_requested": tasks, "window_tokens": length, "frame": [list(x) for x in enc.frame],
            **res, "seconds_all": round(time.perf_counter() - t0, 2)}


def write(result: dict, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / "results.md").write_text(markdown(result))
    plot(result, out / "results.png")
    return out


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="a codept run/checkpoint folder, a transformers BERT/RoBERTa folder "
                   "(codept export output, all-MiniLM-L6-v2), random (the shape of --like) or random:PRESET")
    p.add_argument("--like", default="", help="with --model random: the model whose shape and tokenizer to copy")
    p.add_argument("--source", default="networkx", help="code to probe on: an installed package, 'stdlib', or a "
                   "path prepare reads ('' = none); views are prepared with the model's tokenizer (cached)")
    p.add_argument("--text", default="", help="text to probe word boundaries on (a `codept prepare-text` source)")
    p.add_argument("--tasks", nargs="+", default=[], metavar="TASK",
                   help=f"only these tasks (default all): {', '.join(CODE_TASKS + TEXT_TASKS)}")
    p.add_argument("--out", type=out_folder, help="output folder (default runs/structure/<model slug>)")
    p.add_argument("--tokenizer", help="tokenizer folder for a codept checkpoint or random:PRESET (default: theirs)")
    helps = {"files": "files read (half probe-train, half probe-test by content hash)", "window": "tokens per window",
             "windows": "windows per file, from its start", "max_train": "examples per task for fit + dev",
             "max_test": "examples per task for test", "iters": "L-BFGS iterations per probe",
             "rank": "rank of the bilinear pair probe", "boot": "bootstrap resamples over test files",
             "seed": "seed of the subsets, control labels, probe init and a random model"}
    for f, h in helps.items():
        p.add_argument(f"--{f.replace('_', '-')}", type=int_at_least(0), default=getattr(StructureConfig(), f),
                       help=f"{h} (default {getattr(StructureConfig(), f)})")
    p.add_argument("--l2", type=float, default=StructureConfig().l2, help="L2 penalty on the probe weights")
    p.add_argument("--attention", choices=["bi", "causal"], default="bi",
                   help="attention over the window: bi (default) or causal (a model trained causal)")


def main(args) -> int:
    try:
        cfg = StructureConfig(**{f: getattr(args, f) for f in StructureConfig.__dataclass_fields__})
        result = run_structure(args.model, args.source, args.text, cfg, args.tokenizer, args.like, args.tasks)
    except (ValueError, FileNotFoundError) as e:
        print(f"codept probe structure: {e}", file=sys.stderr)
        return 2
    out = write(result, args.out or Path("runs/structure") / result["slug"])
    print(markdown(result))
    print(f"-> {out}/results.json, results.md, results.png ({result['seconds_all']:.1f} s)")
    return 0
