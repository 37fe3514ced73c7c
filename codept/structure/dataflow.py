"""Dataflow edges between identifiers, from ``grammars/<lang>/flow.scm`` regions only.

Input: the resolved identifiers of a file (``(I, 4)`` start, end, role, binding, sorted by start, as
:func:`codept.structure.view.resolve_identifiers` gives them), the ``@flow.<kind>`` captures
(``ParsedFile.flow``: start, end, kind id of codept.structure.kinds.FLOW_KINDS) and the
``@local.definition`` rows (to know which definitions are function/method/class names). Output:
``(E, 3)`` int64 rows ``[dst, src, kind]`` of identifier row indices, sorted and unique:

  kind 0 ``COMES_FROM``     dst is a use (or an update) of a variable, src a definition of the same
                            binding that may reach it (reaching definitions)
  kind 1 ``COMPUTED_FROM``  dst is a written variable, src an identifier its new value is computed
                            from: every identifier read in the paired ``@flow.value`` (``x = f(a, b)``
                            gives x <- f, a, b), and for an update (``c += i``) also every definition
                            of c reaching it (the old value) -- the edge GraphCodeBERT drops

Algorithm (syntax-directed reaching definitions; no control-flow graph is built):
  1. every identifier gets a flow role: DEF (a ``@local.definition``, or ``@flow.write``), UPDATE
     (``@flow.update``: read, then written), USE (any other identifier);
  2. regions and identifiers become one tree by interval nesting (one sorted sweep); a
     function/method/class name is moved out of its own ``@flow.function`` unit (it binds outside);
  3. one interpretation of the tree in evaluation order, with a state ``{binding: definitions that
     may reach here}``: a USE links to every definition in the state; a DEF replaces the state of
     its binding. A ``target`` runs after its ``value`` sibling. Arms of a ``branch`` start from
     the same state and join (plus the state before them unless a ``default`` arm exists); arms of a
     ``switch.fallthrough`` start from the state before them joined with the previous arm's end;
     a ``loop`` runs its body, then again from the join of its start and the end of the body (and
     ``continue`` states) if that adds definitions -- the back edge, exact for reaching definitions
     after two passes; ``init`` runs once before, ``step`` at the end of each pass; ``break`` /
     ``continue`` / ``exit`` hand their state to the innermost loop (or switch) and leave a dead
     state; ``handler`` arms start from every state the ``try`` body reached (each definition in
     the body is added to the try's accumulator); ``finally`` starts from the join of the body and
     the handlers; a ``function`` unit starts from an empty state (no edge crosses a function).
  4. edges are deduplicated (a second loop pass repeats the first pass's edges).
Cost: one Python step per identifier and per region, times two per enclosing loop level whose body
carries a definition around (2**d for d nested such loops), plus a dict copy per arm.

Not covered (documented approximations): short-circuit operators and conditional expressions
(both sides are taken as evaluated); a ``do``/``while`` body is treated as possibly skipped; a
``return`` inside ``try`` does not run ``finally`` first; a loop's ``else`` clause runs as part of
its body; Go's ``fallthrough``; generators and ``yield`` (sequential); exceptions raised outside a
``try`` body; destructuring assigns every target from every value (``a, b = b, a`` gives a <- a, b);
attribute and subscript targets (``self.x = v``, ``a[i] = v``) write no variable; default parameter
values run inside the function's unit (so they get no edge from the enclosing function); a closure's
use of an enclosing function's variable gets no edge (units never share state), but a Ruby block
(captured as a loop) does; Python ``global``/``nonlocal``.
Dead code (after a return/break) sees the state before the exit, so its uses still get edges.
"""

from __future__ import annotations

import numpy as np

from codept.structure import kinds

COMES_FROM, COMPUTED_FROM = 0, 1
EDGE_KINDS = ("comesFrom", "computedFrom")

_K = kinds.FLOW_KIND_ID
_FUNCTION, _LOOP, _INIT, _STEP = _K["function"], _K["loop"], _K["init"], _K["step"]
_BRANCH, _SWITCH, _FALL = _K["branch"], _K["switch"], _K["switch.fallthrough"]
_ARM, _DEFAULT, _TRY, _HANDLER, _FINALLY = _K["arm"], _K["default"], _K["try"], _K["handler"], _K["finally"]
_EXIT, _BREAK, _CONTINUE = _K["exit"], _K["break"], _K["continue"]
_TARGET, _VALUE, _WRITE, _UPDATE = _K["target"], _K["value"], _K["write"], _K["update"]
# nesting rank of regions on the same node (smaller = outer)
_RANK = {_TARGET: 0, _VALUE: 0, _ARM: 1, _DEFAULT: 1, _HANDLER: 1, _FINALLY: 1, _INIT: 1, _STEP: 1,
         _FUNCTION: 2, _LOOP: 3, _TRY: 4, _BRANCH: 5, _SWITCH: 5, _FALL: 5, _EXIT: 6, _BREAK: 6, _CONTINUE: 6}
_RANK_OF = np.array([_RANK.get(k, 9) for k in range(len(_K))], dtype=np.int64)
_PARENT_KINDS = np.array([k in kinds.PARENT_BINDING_DEF_KINDS for k in kinds.DEF_KINDS])

_PAIRS = {_TARGET: _VALUE, _VALUE: _TARGET}
USE, DEF, UPDATE = 0, 1, 2
DEAD = -1  # a key of a state: no path reaches here (after an exit)
_EMPTY: frozenset = frozenset()
MAX_REGION_DEPTH = 250  # deeper region trees get no edges (stats say so): recursion guard


def _keys(a: np.ndarray) -> np.ndarray:
    return a[:, 0] << 32 | a[:, 1]


def flow_roles(idents: np.ndarray, flow: np.ndarray, defs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(I,) flow role of every identifier (USE/DEF/UPDATE) and (I,) bool: is it a function/method/
    class name (binds outside its own unit)."""
    role = np.where(idents[:, 2] == kinds.ROLE_DEF, DEF, USE)
    key = _keys(idents)
    for kind, value in ((_WRITE, DEF), (_UPDATE, UPDATE)):
        rows = flow[flow[:, 2] == kind]
        if len(rows):
            role[np.isin(key, _keys(rows))] = value
    named = defs[_PARENT_KINDS[defs[:, 2]]] if len(defs) else defs
    outer = np.isin(key, _keys(named)) if len(named) else np.zeros(len(idents), bool)
    return role, outer & (role == DEF)


def build_tree(idents: np.ndarray, regions: np.ndarray, outer: np.ndarray) -> tuple[list, int]:
    """The region tree: a node is ``[kind, children]``; a child is a node or an identifier row index.
    Returns (root node, maximum region depth)."""
    order = np.lexsort((_RANK_OF[regions[:, 2]], -regions[:, 1], regions[:, 0]))
    regions = regions[order]
    # merge by start: regions before identifiers at the same start (a region contains the identifier)
    starts = np.concatenate([regions[:, 0], idents[:, 0]])
    is_ident = np.concatenate([np.zeros(len(regions), bool), np.ones(len(idents), bool)])
    seq = np.lexsort((np.arange(len(starts)), is_ident, starts)).tolist()
    n_reg = len(regions)
    r_start, r_end, r_kind = regions[:, 0].tolist(), regions[:, 1].tolist(), regions[:, 2].tolist()
    i_start, outer_l = idents[:, 0].tolist(), outer.tolist()
    root: list = [_FUNCTION, []]
    stack: list = [root]
    ends = [1 << 62]
    depth = 0
    for j in seq:
        if j < n_reg:
            s = r_start[j]
            while ends[-1] <= s:
                stack.pop()
                ends.pop()
            node = [r_kind[j], []]
            stack[-1][1].append(node)
            stack.append(node)
            ends.append(r_end[j])
            depth = max(depth, len(stack))
            continue
        i = j - n_reg
        s = i_start[i]
        while ends[-1] <= s:
            stack.pop()
            ends.pop()
        stack[-1][1].append(i)
        if outer_l[i]:
            _move_name_out(stack, i)
    return root, depth


def _move_name_out(stack: list, i: int) -> None:
    """A function/method/class name binds in the enclosing unit: when it is the first child of
    its innermost unit, the unit's own name (a class name inside a function comes after the
    function's parameters or statements: it stays), move it to the unit's parent."""
    for k in range(len(stack) - 1, 0, -1):
        node = stack[k]
        if node[0] == _FUNCTION:
            if node[1] == [i]:
                node[1].pop()
                stack[k - 1][1].append(i)
            return


def _join(states: list) -> dict:
    """Union of the live states (all of them if none is live; the result is then dead)."""
    live = [s for s in states if DEAD not in s]
    pick = live or states
    out = dict(pick[0])
    for s in pick[1:]:
        for b, ds in s.items():
            o = out.get(b)
            if o is None:
                out[b] = ds
            elif o is not ds:
                out[b] = o | ds
    return out


def _covered(new: dict, old: dict) -> bool:
    """Does `old` already hold every definition of `new` (or is `new` dead)?"""
    if DEAD in new:
        return True
    return all(ds <= old.get(b, _EMPTY) for b, ds in new.items())


class _Interpreter:
    """Step 3 of the module docstring: evaluates the region tree, appending edges."""

    def __init__(self, role: list, binding: list):
        self.role, self.binding = role, binding
        self.edges: list[tuple[int, int, int]] = []
        self.jumps: list[list] = []  # [is_loop, breaks, continues] of the open loops and switches
        self.tries: list[dict] = []  # accumulators of the open try bodies
        self.reads: list | None = None  # identifiers read in the value being evaluated
        self.sources: list | None = None  # what the target being evaluated is computed from

    def run(self, children: list, st: dict) -> dict:
        n = len(children)
        k = 0
        while k < n:
            c = children[k]
            if isinstance(c, int):
                self.ident(c, st)
            elif c[0] in _PAIRS and k + 1 < n and isinstance(children[k + 1], list) and children[k + 1][0] == _PAIRS[c[0]]:
                nxt = children[k + 1]  # a target and its value, in either order (PHP foreach: value first)
                st = self.assign(c, nxt, st) if c[0] == _TARGET else self.assign(nxt, c, st)
                k += 1
            else:
                st = self.node(c, st)
            k += 1
        return st

    def ident(self, i: int, st: dict) -> None:
        r, b, edges = self.role[i], self.binding[i], self.edges
        if r != DEF:
            kind = COMES_FROM if r == USE else COMPUTED_FROM
            for d in st.get(b, _EMPTY):
                edges.append((i, d, kind))
            if self.reads is not None:
                self.reads.append(i)
            if r == USE:
                return
        if self.sources:
            for s in self.sources:
                edges.append((i, s, COMPUTED_FROM))
        one = frozenset((i,))
        st[b] = one
        for acc in self.tries:
            acc[b] = acc.get(b, _EMPTY) | one

    def assign(self, target: list, value: list, st: dict) -> dict:
        outer_reads, outer_sources = self.reads, self.sources
        self.reads, self.sources = [], None
        st = self.run(value[1], st)
        reads = self.reads
        if outer_reads is not None:
            outer_reads.extend(reads)
        self.reads, self.sources = outer_reads, reads
        st = self.run(target[1], st)
        self.sources = outer_sources
        return st

    def node(self, c: list, st: dict) -> dict:
        kind, kids = c
        if kind == _FUNCTION:
            self.unit(kids)
            return st
        if kind == _LOOP:
            return self.loop(kids, st)
        if kind in (_BRANCH, _SWITCH, _FALL):
            return self.choice(kind, kids, st)
        if kind == _TRY:
            return self.attempt(kids, st)
        if kind == _VALUE:
            outer_sources, self.sources = self.sources, None
            st = self.run(kids, st)
            self.sources = outer_sources
            return st
        st = self.run(kids, st)
        if kind in (_EXIT, _BREAK, _CONTINUE):
            self.jump(kind, st)
            st[DEAD] = True
        return st

    def unit(self, kids: list) -> None:
        saved = self.jumps, self.tries, self.reads, self.sources
        self.jumps, self.tries, self.reads, self.sources = [], [], None, None
        self.run(kids, {})
        self.jumps, self.tries, self.reads, self.sources = saved

    def jump(self, kind: int, st: dict) -> None:
        if kind == _EXIT or DEAD in st:
            return
        for frame in reversed(self.jumps):
            if kind == _BREAK:
                frame[1].append(dict(st))
                return
            if frame[0]:  # continue: the innermost loop (a switch is no continue target)
                frame[2].append(dict(st))
                return

    def loop(self, kids: list, st: dict) -> dict:
        inits = [c for c in kids if isinstance(c, list) and c[0] == _INIT]
        steps = [c for c in kids if isinstance(c, list) and c[0] == _STEP]
        body = [c for c in kids if not (isinstance(c, list) and c[0] in (_INIT, _STEP))] + steps
        for c in inits:
            st = self.run(c[1], st)
        frame = [True, [], []]
        self.jumps.append(frame)
        start = st
        end = self.run(body, dict(start))
        back = _join([end, *frame[2]])
        if not _covered(back, start):
            start = _join([start, back])
            frame[1], frame[2] = [], []
            end = self.run(body, dict(start))
            back = _join([end, *frame[2]])
        self.jumps.pop()
        return _join([start, back, *frame[1]])

    def choice(self, kind: int, kids: list, st: dict) -> dict:
        frame = [False, [], []]
        if kind != _BRANCH:
            self.jumps.append(frame)
        outs: list = []
        prev = None
        exhaustive = False
        plain: list = []  # ordinary children (conditions) waiting to run, in order
        for c in kids:
            if not (isinstance(c, list) and c[0] in (_ARM, _DEFAULT)):
                plain.append(c)
                continue
            st, plain = self.run(plain, st), []
            exhaustive |= c[0] == _DEFAULT
            start = _join([st, prev]) if kind == _FALL and prev is not None else dict(st)
            end = self.run(c[1], start)
            if kind == _FALL:
                prev = end
            else:
                outs.append(end)
        st = self.run(plain, st)
        if kind != _BRANCH:
            self.jumps.pop()
        if prev is not None:
            outs.append(prev)
        return _join(outs + frame[1] + ([] if exhaustive else [st]))

    def attempt(self, kids: list, st: dict) -> dict:
        acc = {b: ds for b, ds in st.items() if b != DEAD}
        self.tries.append(acc)
        in_body = True
        outs: list = []
        plain: list = []
        for c in kids:
            kind = c[0] if isinstance(c, list) else None
            if kind not in (_HANDLER, _FINALLY):
                plain.append(c)
                continue
            st, plain = self.run(plain, st), []
            if in_body:
                self.tries.pop()
                in_body = False
            if kind == _HANDLER:
                outs.append(self.run(c[1], dict(acc)))
            else:
                st = self.run(c[1], _join([st, *outs]))
                outs = []
        st = self.run(plain, st)
        if in_body:
            self.tries.pop()
        return _join([st, *outs])


def edges(idents: np.ndarray, flow: np.ndarray, defs: np.ndarray, stats: dict | None = None) -> np.ndarray:
    """(E, 3) int64 [dst, src, kind] identifier-row edges of one file (module docstring).
    `idents` (I, 4+) start, end, role, binding, sorted by start; `flow` (N, 3); `defs` (D, 3)."""
    if len(idents) == 0:
        return np.zeros((0, 3), np.int64)
    role, outer = flow_roles(idents, flow, defs)
    regions = flow[(flow[:, 2] != _WRITE) & (flow[:, 2] != _UPDATE)]
    # a node captured as default and as arm is the default arm
    default = regions[regions[:, 2] == _DEFAULT]
    if len(default):
        regions = regions[~((regions[:, 2] == _ARM) & np.isin(_keys(regions), _keys(default)))]
    tree, depth = build_tree(idents, regions, outer)
    if depth > MAX_REGION_DEPTH:
        if stats is not None:
            stats["dataflow_skipped"] = f"region depth {depth} > {MAX_REGION_DEPTH}"
        return np.zeros((0, 3), np.int64)
    it = _Interpreter(role.tolist(), idents[:, 3].tolist())
    it.unit(tree[1])
    if not it.edges:
        return np.zeros((0, 3), np.int64)
    return np.unique(np.asarray(it.edges, dtype=np.int64), axis=0)


def graphcodebert_dfg(view) -> list[tuple[str, int, str, list[str], list[int]]]:
    """The view's edges in GraphCodeBERT's DFG format: one row per variable occurrence with incoming
    edges, ``(name, token index, "comesFrom" | "computedFrom", [source names], [source token
    indices])``, sorted by token index. Token index = the first token of the identifier."""
    idents, names = view.idents, view.names
    rows: dict[tuple[int, int], list] = {}
    for dst, src, kind in view.dataflow.tolist():
        key = (int(idents[dst, 0]), kind)
        row = rows.setdefault(key, [names[idents[dst, 2]], key[0], EDGE_KINDS[kind], [], []])
        row[3].append(names[idents[src, 2]])
        row[4].append(int(idents[src, 0]))
    return [tuple(rows[k]) for k in sorted(rows)]
