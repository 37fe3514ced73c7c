"""Dataflow edges between identifiers, from ``grammars/<lang>/flow.scm`` regions only.

Input: the resolved identifiers of a file (``(I, 4)`` start, end, role, binding, sorted by start, as
:func:`codept.structure.view.resolve_identifiers` gives them), the ``@flow.<kind>`` captures
(``ParsedFile.flow``: start, end, kind id of codept.structure.kinds.FLOW_KINDS), the
``@local.definition`` rows (to know which definitions are function/method/class names) and the
``@local.nonlocal``/``@local.global`` rows (``ParsedFile.decls``: declarations, neither read nor
written). Output: ``(E, 3)`` int64 rows ``[dst, src, kind]`` of identifier row indices, sorted, unique:

  kind 0 ``COMES_FROM``     dst is a use (or an update) of a variable, src a definition of the same
                            binding IN THE SAME FUNCTION that may reach it (reaching definitions)
  kind 1 ``COMPUTED_FROM``  dst is a written variable, src an identifier its new value is computed
                            from: every identifier read in the paired ``@flow.value`` (``x = f(a, b)``
                            gives x <- f, a, b; ``a, b = x, y`` pairs a <- x, b <- y), and for an
                            update (``c += i``) also every definition of c reaching it (the old
                            value) -- the edge GraphCodeBERT drops
  kind 2 ``COMES_FROM_NONLOCAL``
                            dst is a use (or update) of a variable and src a definition of it in
                            ANOTHER function unit: a closure, lambda, method or function reading a
                            variable of an enclosing function or of the module (``x = 1; def f():
                            return x``; Java lambdas and anonymous classes, JS closures, Go func
                            literals, Ruby lambdas, PHP ``use``), and a write through ``nonlocal`` /
                            ``global`` / a closure assignment reaching a use outside its function
  kind 3 ``COMES_FROM_FIELD``
                            only in views built with fields: dst is a read (or update) of an object
                            field (``self.x``, ``this.x``, ``$this->x``, Ruby ``@x``; one variable
                            per name per file), src a write of it that may reach it: in the same
                            function by the paths above, from another method as for nonlocal edges
Kinds 0 and 1 are GraphCodeBERT's function-local view (:data:`LOCAL_KINDS`): no such edge joins two
units.

Algorithm (syntax-directed reaching definitions; no control-flow graph is built):
  1. every identifier gets a flow role: DEF (a ``@local.definition``, or ``@flow.write``), UPDATE
     (``@flow.update``: read, then written), NONE (a declared name: ``global x``), USE (any other);
  2. regions and identifiers become one tree by interval nesting (one sorted sweep); a
     function/method/class name is moved out of its own ``@flow.function`` unit (it binds outside).
     Every identifier gets its unit; for each unit, the bindings it shares with the code outside
     it and the definitions inside it of those bindings (its escaping writes) are found (arrays);
  3. one interpretation of each unit in evaluation order, with a state ``{binding: definitions that
     may reach here}``: a USE links to every definition in the state; a DEF replaces the state of
     its binding. A ``target`` runs after its ``value`` sibling; when both consist of ``item``s only,
     in equal numbers, item k of the target is computed from item k of the value (recursively);
     otherwise every target variable from every value identifier. Arms of a ``branch`` start from
     the same state and join (plus the state before them unless a ``default`` arm exists); arms of a
     ``switch.fallthrough`` start from the state before them joined with the previous arm's end;
     a ``loop`` evaluates its ``init`` and its header's ``collection`` once, then runs its body
     (the header's target first), then again from the join of its start and the end of the body
     (and ``continue`` states) if that adds definitions -- the back edge, exact for reaching
     definitions after two passes; ``step`` runs at the end of each pass; its ``nobreak`` part
     (Python's loop ``else``) runs from the loop's normal exit, and the loop ends in the join of
     that and the ``break`` states; ``break`` / ``continue`` / ``exit`` hand their state to the
     innermost loop (or switch) and leave a dead state; ``handler`` arms start from every state the
     ``try`` body reached (each definition in the body is added to the try's accumulator);
     ``finally`` runs twice: from the join of the normal ends of the body, its else part and the
     handlers (the state after the try), and, for its own edges only, from every state the body,
     else part and handlers reached (an exception or a return may leave from any of them);
  4. a nested unit is not run where it is created: it is recorded with the state there
     (restricted to the bindings it shares) and run when its creator has finished, starting from
     that state plus every definition of those bindings made later by its creator (later
     statements, the rest of each loop around the creation: the function may be called at any
     time after it exists), except for a ``function.copy`` unit (PHP closures), which starts from
     the creation state only. Where a unit is created, its escaping writes join the creator's
     state for good (a call may happen at any later point: they are re-added after each local
     definition); the root unit (the file) starts empty;
  5. an edge whose two identifiers lie in different units is a ``COMES_FROM_NONLOCAL`` edge; edges are
     deduplicated (a second loop pass repeats the first pass's edges).
Cost: one Python step per identifier and per region, times two per enclosing loop level whose body
carries a definition around (2**d for d nested such loops), plus a dict copy per arm; per created
unit, a look-up per shared binding; step 2 is O(I x unit depth) array work.

Not covered (documented approximations): short-circuit operators and conditional expressions
(both sides are taken as evaluated); a ``do``/``while`` body is treated as possibly skipped; a
``break``/``continue`` inside ``try`` does not run ``finally`` first (a ``return`` does, through the
second pass); Go's ``fallthrough``; generators and ``yield`` (sequential); exceptions raised outside
a ``try`` body; a starred element or a value that is no list makes its level of a destructuring
fall back to every target from every value (``a, *b = x, y``; ``a, b = f()``); attribute and subscript targets
(``self.x = v``, ``a[i] = v``) write no variable; default parameter values run inside the function's
unit; a closure's entry state ignores when it is called (every later definition may reach it, the
creation state always does, even after a later kill), and a closure's own writes do not reach its
own next call; escaping writes reach every later use in the creator, including ones a call cannot
precede; Ruby blocks are loops of their function (their reads of the function's variables are
function-local comesFrom edges), Ruby lambdas are units.
Dead code (after a return/break) sees the state before the exit, so its uses still get edges.
"""

from __future__ import annotations

import bisect

import numpy as np

from codept.structure import kinds
from codept.structure.offsets import rows_in

COMES_FROM, COMPUTED_FROM, COMES_FROM_NONLOCAL, COMES_FROM_FIELD = 0, 1, 2, 3
EDGE_KINDS = ("comesFrom", "computedFrom", "comesFromNonlocal", "comesFromField")
LOCAL_KINDS = (COMES_FROM, COMPUTED_FROM)  # GraphCodeBERT's function-local view

_K = kinds.FLOW_KIND_ID
_FUNCTION, _COPY, _LOOP, _INIT, _STEP = _K["function"], _K["function.copy"], _K["loop"], _K["init"], _K["step"]
_BRANCH, _SWITCH, _FALL = _K["branch"], _K["switch"], _K["switch.fallthrough"]
_ARM, _DEFAULT, _TRY, _HANDLER, _FINALLY = _K["arm"], _K["default"], _K["try"], _K["handler"], _K["finally"]
_EXIT, _BREAK, _CONTINUE = _K["exit"], _K["break"], _K["continue"]
_TARGET, _VALUE, _WRITE, _UPDATE = _K["target"], _K["value"], _K["write"], _K["update"]
_NOBREAK, _COLLECTION, _ITEM, _FIELD = _K["nobreak"], _K["collection"], _K["item"], _K["field"]
_HEADER = len(_K)  # a synthetic node: a loop header's target, [_HEADER, children, what it is computed from]
_UNITS = (_FUNCTION, _COPY)
# nesting rank of regions on the same node (smaller = outer)
_RANK = {_TARGET: 0, _VALUE: 0, _COLLECTION: 0, _ITEM: 1, _ARM: 2, _DEFAULT: 2, _HANDLER: 2, _FINALLY: 2,
         _INIT: 2, _STEP: 2, _NOBREAK: 2, _FUNCTION: 3, _COPY: 3, _LOOP: 4, _TRY: 5, _BRANCH: 6, _SWITCH: 6,
         _FALL: 6, _EXIT: 7, _BREAK: 7, _CONTINUE: 7}
_RANK_OF = np.array([_RANK.get(k, 9) for k in range(len(_K))], dtype=np.int64)
_PARENT_KINDS = np.array([k in kinds.PARENT_BINDING_DEF_KINDS for k in kinds.DEF_KINDS])

_PARTNERS = {_TARGET: (_VALUE,), _VALUE: (_TARGET,)}
USE, DEF, UPDATE, NONE = 0, 1, 2, 3
DEAD = -1  # a key of a state: no path reaches here (after an exit)
_EMPTY: frozenset = frozenset()
MAX_REGION_DEPTH = 250  # deeper region trees get no edges (stats say so): recursion guard


def _keys(a: np.ndarray) -> np.ndarray:
    return a[:, 0] << 32 | a[:, 1]


def flow_roles(idents: np.ndarray, flow: np.ndarray, defs: np.ndarray,
               decls: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(I,) flow role of every identifier (USE/DEF/UPDATE/NONE) and (I,) bool: is it a
    function/method/class name (binds outside its own unit)."""
    role = np.where(idents[:, 2] == kinds.ROLE_DEF, DEF, USE)
    for kind, value in ((_WRITE, DEF), (_UPDATE, UPDATE)):
        rows = flow[flow[:, 2] == kind]
        if len(rows):
            role[rows_in(idents, rows)] = value
    if decls is not None and len(decls):
        role[rows_in(idents, decls)] = NONE
    named = defs[_PARENT_KINDS[defs[:, 2]]] if len(defs) else defs
    outer = rows_in(idents, named)
    return role, outer & (role == DEF)


class Units:
    """The function units of a file, numbered in pre-order (0 = the file): ``node`` (the region
    node, whose third element is the id), ``parent``, ``last`` (the last unit inside it: its
    descendants are ``u + 1 .. last[u]``), ``of`` (the unit of every identifier); after
    :func:`_sharing`: per unit the bindings it shares with the code outside it, its escaping writes
    (definitions inside it of those bindings), and ``watch`` (the bindings its direct children share)."""

    def __init__(self):
        self.node: list = []
        self.parent: list[int] = []
        self.of: list[int] = []
        self.last: list[int] = []
        self.shared: list[list[int]] = []
        self.escaping: list[list[int]] = []
        self.watch: list[frozenset] = []


def build_tree(idents: np.ndarray, regions: np.ndarray, outer: np.ndarray) -> tuple[list, int, Units]:
    """The region tree: a node is ``[kind, children]`` (a unit: ``[kind, children, unit id]``); a
    child is a node or an identifier row index. Returns (root node, maximum region depth, units)."""
    order = np.lexsort((_RANK_OF[regions[:, 2]], -regions[:, 1], regions[:, 0]))
    regions = regions[order]
    # merge by start: regions before identifiers at the same start (a region contains the identifier)
    starts = np.concatenate([regions[:, 0], idents[:, 0]])
    is_ident = np.concatenate([np.zeros(len(regions), bool), np.ones(len(idents), bool)])
    seq = np.lexsort((np.arange(len(starts)), is_ident, starts)).tolist()
    n_reg = len(regions)
    r_start, r_end, r_kind = regions[:, 0].tolist(), regions[:, 1].tolist(), regions[:, 2].tolist()
    i_start, outer_l = idents[:, 0].tolist(), outer.tolist()
    units = Units()
    root: list = [_FUNCTION, [], 0]
    units.node.append(root)
    units.parent.append(-1)
    unit_of = [0] * len(idents)
    stack: list = [root]
    ustack = [0]  # innermost unit at each stack level
    ends = [1 << 62]
    depth = 0
    for j in seq:
        if j < n_reg:
            s = r_start[j]
            while ends[-1] <= s:
                stack.pop()
                ustack.pop()
                ends.pop()
            kind = r_kind[j]
            if kind in _UNITS:
                node = [kind, [], len(units.node)]
                units.parent.append(ustack[-1])
                units.node.append(node)
                ustack.append(node[2])
            else:
                node = [kind, []]
                ustack.append(ustack[-1])
            stack[-1][1].append(node)
            stack.append(node)
            ends.append(r_end[j])
            depth = max(depth, len(stack))
            continue
        i = j - n_reg
        s = i_start[i]
        while ends[-1] <= s:
            stack.pop()
            ustack.pop()
            ends.pop()
        top = stack[-1]
        if outer_l[i] and len(top) == 3 and not top[1] and len(stack) > 1:
            # a unit's own name (its first child: a class name inside a function comes after the
            # function's parameters or statements, it stays) binds in the enclosing unit
            stack[-2][1].append(i)
            unit_of[i] = ustack[-2]
        else:
            top[1].append(i)
            unit_of[i] = ustack[-1]
    units.of = unit_of
    last = list(range(len(units.node)))
    for u in range(len(last) - 1, 0, -1):
        p = units.parent[u]
        if last[u] > last[p]:
            last[p] = last[u]
    units.last = last
    return root, depth, units


def _sharing(units: Units, binding: np.ndarray, role: np.ndarray) -> None:
    """Step 2 of the module docstring, on arrays: for every unit below the file, the bindings that
    occur both inside it (at any depth) and outside it, and the definitions inside it of those."""
    n_units = len(units.node)
    units.shared = [[] for _ in range(n_units)]
    units.escaping = [[] for _ in range(n_units)]
    units.watch = [_EMPTY] * n_units
    if n_units == 1 or len(binding) == 0:
        return
    parent = np.asarray(units.parent, np.int64)
    u = np.asarray(units.of, np.int64)
    i = np.arange(len(u))
    pu, pi = [], []  # (unit, identifier) for every unit holding the identifier, the file excepted
    while len(u):
        keep = u > 0
        u, i = u[keep], i[keep]
        pu.append(u)
        pi.append(i)
        u = parent[u]
    pu, pi = np.concatenate(pu), np.concatenate(pi)
    n_b = int(binding.max()) + 1
    total = np.bincount(binding, minlength=n_b)
    key = pu * n_b + binding[pi]
    ukey, inv, count = np.unique(key, return_inverse=True, return_counts=True)
    shared = count < total[ukey % n_b]
    sk = ukey[shared]
    s_unit, s_bind = sk // n_b, sk % n_b
    bounds = np.searchsorted(s_unit, np.arange(n_units + 1))
    flat = s_bind.tolist()
    for k in np.flatnonzero(np.diff(bounds)).tolist():
        units.shared[k] = flat[bounds[k]:bounds[k + 1]]
    esc = shared[inv.reshape(-1)] & ((role[pi] == DEF) | (role[pi] == UPDATE))
    eu, ei = pu[esc], pi[esc]
    o = np.lexsort((ei, eu))
    eu, ei = eu[o], ei[o]
    bounds = np.searchsorted(eu, np.arange(n_units + 1))
    flat = ei.tolist()
    for k in np.flatnonzero(np.diff(bounds)).tolist():
        units.escaping[k] = flat[bounds[k]:bounds[k + 1]]
    watch: dict[int, set] = {}
    for k, bs in enumerate(units.shared):
        if bs:
            watch.setdefault(units.parent[k], set()).update(bs)
    for p, bs in watch.items():
        units.watch[p] = frozenset(bs)


def _join(states: list) -> dict:
    """Union of the live states (all of them if none is live; the result is then dead)."""
    if len(states) == 2:  # the common case: no list of live states
        a, b = states
        if DEAD in a:
            if DEAD not in b:
                return dict(b)
        elif DEAD in b:
            return dict(a)
        out = dict(a)
        for k, ds in b.items():
            o = out.get(k)
            if o is None:
                out[k] = ds
            elif o is not ds:
                out[k] = o | ds
        return out
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


def _is(c, kind: int) -> bool:
    return isinstance(c, list) and c[0] == kind


def _item_pairs(tkids: list, vkids: list) -> list | None:
    """Step 3's destructuring rule: [(target children, value children)] pairing item k with item
    k (recursively), or None when the two sides are not lists of items of one length."""
    n = len(tkids)
    if n == 0 or n != len(vkids) or tkids[0].__class__ is int or tkids[0][0] != _ITEM:  # the common case first
        return None
    if not all(_is(c, _ITEM) for c in tkids) or not all(_is(c, _ITEM) for c in vkids):
        return None
    out: list = []
    for t, v in zip(tkids, vkids):
        sub = _item_pairs(t[1], v[1])
        if sub is None:
            out.append((t[1], v[1]))
        else:
            out.extend(sub)
    return out


class _Interpreter:
    """Steps 3 and 4 of the module docstring: evaluates the region tree, appending edges."""

    def __init__(self, role: list, binding: list, units: Units):
        self.role, self.binding, self.units = role, binding, units
        # edges as one int each: (dst * n + src) * 4 + kind (cheaper than tuples; decoded once)
        self.edges: list[int] = []
        self.n4 = 4 * len(role)
        self.jumps: list[list] = []  # [is_loop, breaks, continues] of the open loops and switches
        self.tries: list[dict] = []  # accumulators of the open try bodies (and finally entries)
        self.reads: list | None = None  # identifiers read in the value being evaluated
        self.sources: list | None = None  # what the target being evaluated is computed from
        # the unit being run: nested units created so far ([node, creation state, since]), the
        # escaping writes of those, the log of definitions of the bindings they share
        self.pending: list = []
        self.pending_at: dict = {}
        self.sticky: dict = {}
        self.watch: frozenset = _EMPTY
        self.log: dict = {}  # binding -> [(seq, definition)]
        self.seq = 0

    def run(self, children: list, st: dict) -> dict:
        role, binding, edges, n4 = self.role, self.binding, self.edges, self.n4
        reads = self.reads  # every callee restores it
        n = len(children)
        k = 0
        while k < n:
            c = children[k]
            if c.__class__ is int:  # an identifier; a use (the most frequent) inline
                r = role[c]
                if r == USE:
                    ds = st.get(binding[c])
                    if ds:
                        base = c * n4  # + COMES_FROM (0)
                        for d in ds:
                            edges.append(base + 4 * d)
                    if reads is not None:
                        reads.append(c)
                elif r != NONE:
                    self.write(c, r, st)
            elif c[0] in _PARTNERS and k + 1 < n and isinstance(children[k + 1], list) \
                    and children[k + 1][0] in _PARTNERS[c[0]]:
                nxt = children[k + 1]  # a target and its value, in either order (PHP foreach: value first)
                st = self.assign(c, nxt, st) if c[0] == _TARGET else self.assign(nxt, c, st)
                k += 1
            else:
                st = self.node(c, st)
            k += 1
        return st

    def write(self, i: int, r: int, st: dict) -> None:
        """A definition (DEF) or an update (UPDATE: read first) of identifier `i`."""
        b, edges = self.binding[i], self.edges
        base = i * self.n4 + COMPUTED_FROM
        if r == UPDATE:
            for d in st.get(b, _EMPTY):
                edges.append(base + 4 * d)
            if self.reads is not None:
                self.reads.append(i)
        if self.sources:
            for s in self.sources:
                edges.append(base + 4 * s)
        one = frozenset((i,))
        if self.sticky:
            stuck = self.sticky.get(b)
            st[b] = one | stuck if stuck else one
        else:
            st[b] = one
        for acc in self.tries:
            acc[b] = acc.get(b, _EMPTY) | one
        if b in self.watch:
            self.log.setdefault(b, []).append((self.seq, i))
            self.seq += 1

    def assign(self, target: list, value: list, st: dict) -> dict:
        outer_reads, outer_sources = self.reads, self.sources
        pairs = _item_pairs(target[1], value[1])
        if pairs is None:
            pairs = [(target[1], value[1])]
        reads = []
        for _t, v in pairs:  # every value first, in order
            self.reads, self.sources = [], None
            st = self.run(v, st)
            reads.append(self.reads)
            if outer_reads is not None:
                outer_reads.extend(self.reads)
        self.reads = outer_reads
        for (t, _v), rd in zip(pairs, reads):
            self.sources = rd
            st = self.run(t, st)
        self.sources = outer_sources
        return st

    def node(self, c: list, st: dict) -> dict:
        kind = c[0]
        kids = c[1]
        if kind in _UNITS:
            self.create(c, st)
            return st
        if kind == _LOOP:
            return self.loop(kids, st)
        if kind in (_BRANCH, _SWITCH, _FALL):
            return self.choice(kind, kids, st)
        if kind == _TRY:
            return self.attempt(kids, st)
        if kind in (_VALUE, _COLLECTION, _HEADER):
            outer_sources, self.sources = self.sources, (c[2] if kind == _HEADER else None)
            st = self.run(kids, st)
            self.sources = outer_sources
            return st
        st = self.run(kids, st)
        if kind in (_EXIT, _BREAK, _CONTINUE):
            self.jump(kind, st)
            st[DEAD] = True
        return st

    # -- units (step 4) ---------------------------------------------------------------------------
    def create(self, c: list, st: dict) -> None:
        """A nested unit is created here: record it with the state of the bindings it shares, and
        let its escaping writes reach the rest of this unit."""
        u = c[2]
        units = self.units
        snap = {b: st[b] for b in units.shared[u] if b in st}
        rec = self.pending_at.get(u)
        if rec is None:
            rec = self.pending_at[u] = [c, snap, self.seq]
            self.pending.append(rec)
        else:  # created again (a second loop pass)
            rec[1] = _join([rec[1], snap])
        if c[0] == _COPY:
            return
        binding, sticky = self.binding, self.sticky
        for d in units.escaping[u]:
            b = binding[d]
            one = frozenset((d,))
            st[b] = st.get(b, _EMPTY) | one
            sticky[b] = sticky.get(b, _EMPTY) | one
            for acc in self.tries:
                acc[b] = acc.get(b, _EMPTY) | one
            if b in self.watch:
                self.log.setdefault(b, []).append((self.seq, d))
                self.seq += 1

    def unit(self, c: list, entry: dict) -> None:
        saved = (self.jumps, self.tries, self.reads, self.sources, self.pending, self.pending_at, self.sticky,
                 self.watch, self.log)
        self.jumps, self.tries, self.reads, self.sources = [], [], None, None
        self.pending, self.pending_at, self.sticky, self.log = [], {}, {}, {}
        self.watch = self.units.watch[c[2]]
        self.run(c[1], entry)
        pending, log = self.pending, self.log
        (self.jumps, self.tries, self.reads, self.sources, self.pending, self.pending_at, self.sticky,
         self.watch, self.log) = saved
        units = self.units
        for node, snap, since in pending:
            u = node[2]
            if node[0] != _COPY:
                lo, hi, of = u, units.last[u], units.of
                for b in units.shared[u]:
                    later = log.get(b)
                    if not later:
                        continue
                    k = bisect.bisect_left(later, (since, -1))
                    add = [d for _s, d in later[k:] if not lo <= of[d] <= hi]  # not its own writes
                    if add:
                        snap[b] = snap.get(b, _EMPTY) | frozenset(add)
            self.unit(node, snap)

    # -- control flow -----------------------------------------------------------------------------
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
        h = next((k for k, c in enumerate(kids) if _is(c, _COLLECTION)), -1)
        target = None
        if h > 0 and _is(kids[h - 1], _TARGET):
            target = kids[h - 1]
        elif 0 <= h < len(kids) - 1 and _is(kids[h + 1], _TARGET):
            target = kids[h + 1]
        inits, steps, body = [], [], []
        nobreak = None
        for c in kids:
            if isinstance(c, list):
                kind = c[0]
                if kind == _INIT:
                    inits.append(c)
                    continue
                if kind == _STEP:
                    steps.append(c)
                    continue
                if kind == _NOBREAK:
                    nobreak = c
                    continue
                if h >= 0 and (c is kids[h] or c is target):
                    continue
            body.append(c)
        for c in inits:
            st = self.run(c[1], st)
        if h >= 0:  # the header's collection once, before; its target starts every pass
            outer_reads, self.reads = self.reads, []
            st = self.node(kids[h], st)
            reads, self.reads = self.reads, outer_reads
            if outer_reads is not None:
                outer_reads.extend(reads)
            if target is not None:
                body.insert(0, [_HEADER, target[1], reads])
        body += steps
        frame = [True, [], []]
        self.jumps.append(frame)
        n_pending, seq0 = len(self.pending), self.seq
        start = st
        end = self.run(body, dict(start))
        back = _join([end, *frame[2]])
        if not _covered(back, start):
            start = _join([start, back])
            frame[1], frame[2] = [], []
            end = self.run(body, dict(start))
            back = _join([end, *frame[2]])
        self.jumps.pop()
        for rec in self.pending[n_pending:]:  # a unit created in the loop sees the whole loop's writes
            rec[2] = min(rec[2], seq0)
        out = _join([start, back])
        if nobreak is not None:
            out = self.run(nobreak[1], out)
        return _join([out, *frame[1]])

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
        live = {b: ds for b, ds in st.items() if b != DEAD}
        body_acc = dict(live)  # every state of the body: where a handler may start
        # every state of the body, its else part and the handlers: where an exception (or a
        # return) may enter the finally part from
        every = dict(live) if any(_is(c, _FINALLY) for c in kids) else None
        if every is not None:
            self.tries.append(every)
        self.tries.append(body_acc)
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
                self.tries.pop()  # body_acc
                in_body = False
            if kind == _HANDLER:
                outs.append(self.run(c[1], dict(body_acc)))
                continue
            if every is not None:
                self.tries.pop()  # every
                self.run(c[1], dict(every))  # the exceptional pass: it re-raises at its end
                every = None
            st = self.run(c[1], _join([st, *outs]))
            outs = []
        st = self.run(plain, st)
        if in_body:
            self.tries.pop()
        if every is not None:
            self.tries.pop()
        return _join([st, *outs])


def edges(idents: np.ndarray, flow: np.ndarray, defs: np.ndarray, stats: dict | None = None,
          decls: np.ndarray | None = None, fields: np.ndarray | None = None) -> np.ndarray:
    """(E, 3) int64 [dst, src, kind] identifier-row edges of one file (module docstring).
    `idents` (I, 4+) start, end, role, binding, sorted by start; `flow` (N, 3); `defs` (D, 3);
    `decls` (K, 2+) the declared names (ParsedFile.decls); `fields` (I,) bool: the identifiers
    that are object fields (codept.structure.view.build_view(fields=True)), whose reaching
    definitions become COMES_FROM_FIELD edges."""
    if len(idents) == 0:
        return np.zeros((0, 3), np.int64)
    role, outer = flow_roles(idents, flow, defs, decls)
    regions = flow[(flow[:, 2] != _WRITE) & (flow[:, 2] != _UPDATE) & (flow[:, 2] != _FIELD)]
    # a node captured as default and as arm is the default arm
    default = regions[regions[:, 2] == _DEFAULT]
    if len(default):
        regions = regions[~((regions[:, 2] == _ARM) & np.isin(_keys(regions), _keys(default)))]
    tree, depth, units = build_tree(idents, regions, outer)
    if depth > MAX_REGION_DEPTH:
        if stats is not None:
            stats["dataflow_skipped"] = f"region depth {depth} > {MAX_REGION_DEPTH}"
        return np.zeros((0, 3), np.int64)
    binding = idents[:, 3]
    _sharing(units, binding, role)
    it = _Interpreter(role.tolist(), binding.tolist(), units)
    it.unit(tree, {})
    if not it.edges:
        return np.zeros((0, 3), np.int64)
    key = np.unique(np.array(it.edges, dtype=np.int64))
    n = len(idents)
    dst, src, kind = key // (4 * n), key // 4 % n, key % 4
    unit = np.asarray(units.of, np.int64)
    far = unit[dst] != unit[src]
    if fields is not None and fields.any():  # a field's reaching definitions (not its value's reads)
        field = fields[dst] & ((kind != COMPUTED_FROM) | ((role[src] != USE) & (binding[src] == binding[dst])))
        kind[field] = COMES_FROM_FIELD
        far &= ~field
    if far.any():  # step 5: relabel, then unique again (two kinds of one pair become one edge)
        kind[far] = COMES_FROM_NONLOCAL
    if far.any() or (fields is not None and fields.any()):
        key = np.unique((dst * n + src) * 4 + kind)
        dst, src, kind = key // (4 * n), key // 4 % n, key % 4
    return np.stack([dst, src, kind], axis=1)


def graphcodebert_dfg(view, edge_kinds: tuple[int, ...] = LOCAL_KINDS) -> list[tuple[str, int, str, list[str], list[int]]]:
    """The view's edges in GraphCodeBERT's DFG format: one row per variable occurrence with incoming
    edges, ``(name, token index, "comesFrom" | "computedFrom", [source names], [source token
    indices])``, sorted by token index. Token index = the first token of the identifier. Only
    `edge_kinds` (default: GraphCodeBERT's function-local kinds; other kinds keep their names)."""
    idents, names = view.idents, view.names
    rows: dict[tuple[int, int], list] = {}
    for dst, src, kind in view.dataflow.tolist():
        if kind not in edge_kinds:
            continue
        key = (int(idents[dst, 0]), kind)
        row = rows.setdefault(key, [names[idents[dst, 2]], key[0], EDGE_KINDS[kind], [], []])
        row[3].append(names[idents[src, 2]])
        row[4].append(int(idents[src, 0]))
    return [tuple(rows[k]) for k in sorted(rows)]
