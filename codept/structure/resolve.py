"""Language-agnostic name resolution over the ``locals.scm`` captures.

Input: scopes ``(start, end, mode)``, definitions ``(start, end, kind)``, references ``(start, end)``
and the name of every identifier, as produced by :func:`codept.structure.grammar.parse`. Output: for
every identifier, its role (def / ref / free) and a binding id, dense in order of first appearance.
Two identifiers with the same binding id denote the same variable, so renaming per binding is safe.

Algorithm:
  1. Scopes are proper intervals (tree nodes). Sort by (start, -end); a stack gives each scope its
     parent. The whole file is scope 0, with the language's default order.
  2. One sweep over identifiers in source order keeps the stack of open scopes: the top is the
     innermost scope containing the identifier.
  3. A definition binds in its innermost scope, except function/method/class names, which bind in the
     enclosing one (the defining node is itself the scope of its body). All definitions of a name in
     one scope share one binding (``x = 1; x = 2``; ``c += i`` is a definition AND a reference in
     the queries, and the definition wins the role but they share the binding).
     A definition of kind ``outer`` binds in the innermost scope around it that is not ``inline``
     (Python's ``:=`` in a comprehension binds in the enclosing function).
  3b. Declared names (``@local.nonlocal`` / ``@local.global``: Python ``nonlocal x``/``global x``,
     PHP ``global $x``): the declaring scope's definitions of the name bind in the target scope --
     where the name resolves from the parent scope (nonlocal), or the outermost scope below the
     file's (global: Python's ``module``, PHP's ``program``) -- and a reference walking through the
     declaring scope binds there too.
  4. A reference walks outwards from its innermost scope: in a hoisted scope any definition of the
     name matches; in a sequential one only a definition that starts before the reference. Class
     scopes are skipped when seen from a nested scope; an isolated scope stops the walk. A
     definition other than a parameter in a "reuse" scope (Ruby block) first looks outwards the same way and, if the name
     is visible there, joins that binding.
  5. Unresolved references are "free" (globals, builtins, imports from elsewhere, attributes if the
     queries capture them): one binding per name per file, marked role ``free``.
Cost: O((S + I) log), vectorised: steps 3-5 run on arrays, and the outward walk of step 4 moves
all unresolved references one scope level per step (as many steps as scopes nest). Files with a
"reuse" scope (Ruby) take the reference path, a Python loop over identifiers (~1 us each).
Not covered: Go's rule that ``x := x + 1`` sees the outer ``x`` on
the right (we bind it to the new one), dynamic scoping (PHP ``$$x``, Ruby ``binding``), attributes
and fields reached through an object (``self.x``) -- those need types, not scopes.
"""

from __future__ import annotations

import itertools

import numpy as np

from codept.structure import kinds

_MODES = list(kinds.SCOPE_MODES)
_M_DEFAULT, _M_HOISTED, _M_SEQ, _M_ISOLATED, _M_CLASS, _M_REUSE, _M_INLINE = (
    _MODES.index(m) for m in ("", "hoisted", "sequential", "isolated", "class", "reuse", "inline")
)
_ORDERED = {_M_SEQ, _M_REUSE}  # modes where a definition is visible only after its position
_K_PARAMETER = kinds.DEF_KINDS.index("parameter")
_K_OUTER = kinds.DEF_KINDS.index("outer")
_GLOBAL = 1  # decl kinds (codept.structure.grammar.DECL_KINDS): 0 nonlocal, 1 global
_PARENT_KINDS = {kinds.DEF_KINDS.index(k) for k in kinds.PARENT_BINDING_DEF_KINDS}
# the same sets as boolean look-up tables (a def kind of -1, a reference, reads the last entry: False)
_IS_PARENT_KIND = np.array([k in _PARENT_KINDS for k in range(len(kinds.DEF_KINDS))] + [False])
_IS_ORDERED = np.array([m in _ORDERED for m in range(len(_MODES))])


def resolve(
    scopes: np.ndarray,
    defs: np.ndarray,
    refs: np.ndarray,
    def_names: list,
    ref_names: list,
    default_order: str,
    n: int,
    *,
    reference: bool = False,
    decls: np.ndarray | None = None,
    decl_names: list | None = None,
):
    """Returns (idents (I, 4) int64 [start, end, role, binding], the name of every binding).

    Names may be str or bytes (anything hashable); they are only compared. Or both are int arrays of
    name ids (equal id = equal name), and the names returned are ids too.

    `n` is the length of the file in the same unit as the offsets. Identifiers are sorted by start;
    a range captured both as definition and reference is a definition (role def). Offsets must be
    below 2**32. ``reference=True`` takes the one-identifier-at-a-time path (tests compare the two).
    `decls` (K, 3) start, end, kind (0 nonlocal, 1 global) with `decl_names`: names declared to
    belong to an enclosing scope (step 3b of the module docstring).
    """
    default_mode = _M_HOISTED if default_order == "hoisted" else _M_SEQ
    # -- 1. scope tree: root + scopes in (start, -end) order, duplicates merged ------------------
    sc = np.concatenate([[[0, n + 1, default_mode]], scopes]) if len(scopes) else np.array([[0, n + 1, default_mode]])
    sc = sc[np.lexsort((-sc[:, 1], sc[:, 0]))]
    sc[sc[:, 2] == _M_DEFAULT, 2] = default_mode
    if len(sc) > 1:  # the same node captured twice: keep one, an explicit mode wins over the default
        same = np.all(sc[1:, :2] == sc[:-1, :2], axis=1)
        if same.any():
            explicit = sc[:, 2] != default_mode
            for i in np.flatnonzero(same)[::-1]:
                if explicit[i + 1]:
                    sc[i, 2] = sc[i + 1, 2]
            sc = sc[np.concatenate([[True], ~same])]
    s_start, s_end, s_mode = sc[:, 0], sc[:, 1], sc[:, 2].tolist()
    parent = np.full(len(sc), -1, dtype=np.int64)
    stack = [0]
    for i, (st, en) in enumerate(zip(s_start.tolist()[1:], s_end.tolist()[1:]), start=1):
        while s_end[stack[-1]] <= st:
            stack.pop()
        parent[i] = stack[-1]
        stack.append(i)

    decl = None
    if decls is not None and len(decls):
        dn = decl_names.tolist() if isinstance(decl_names, np.ndarray) else list(decl_names)
        decl = (decls, dn, _innermost(s_start, s_end, parent, decls).tolist())
    if reference or _M_REUSE in s_mode:  # reuse: a def's binding depends on the bindings made before it
        if isinstance(def_names, np.ndarray) and isinstance(ref_names, np.ndarray):
            def_names, ref_names = def_names.tolist(), ref_names.tolist()
        return _resolve_loop(s_start, s_end, s_mode, parent, defs, refs, def_names, ref_names, decl)
    return _resolve_arrays(s_start, s_end, np.asarray(s_mode, dtype=np.int64), parent, defs, refs, def_names,
                           ref_names, decl)


def _decl_targets(decl, s_mode: list, parent: list, first_def) -> dict:
    """(scope, name) -> target scope of every @local.nonlocal / @local.global declaration: global ->
    the outermost scope below the file's (the file's if none); nonlocal -> the scope where the name
    resolves from the parent of the declaring scope (declarations applied in source order, so an
    outer one is seen by an inner one). `first_def(scope, name)` -> first definition start or None.
    A nonlocal whose name resolves nowhere is ignored."""
    rows, names, inner = decl
    out: dict = {}
    for (start, _end, kind), name, sc in zip(rows.tolist(), names, inner):
        if kind == _GLOBAL:
            t = sc
            while t > 0 and parent[t] > 0:
                t = parent[t]
        else:
            t = _lookup(parent[sc], name, start, s_mode, parent, first_def, out)
        if t >= 0 and t != sc:
            out.setdefault((sc, name), t)
    return out


def _lookup(s: int, name, at: int, s_mode: list, parent: list, first_def, over: dict, first: bool = False) -> int:
    """The scope whose binding of `name` is visible at `at` walking outwards from `s` (step 4), or -1."""
    while s >= 0:
        t = over.get((s, name))
        if t is not None:
            return t
        mode = s_mode[s]
        if first or mode != _M_CLASS:
            p = first_def(s, name)
            if p is not None and (mode not in _ORDERED or p <= at):
                return s
        if mode == _M_ISOLATED:
            return -1
        s, first = parent[s], False
    return -1


def _innermost(s_start, s_end, parent, pos: np.ndarray) -> np.ndarray:
    """Innermost scope of every (start, end) row of `pos`: the last scope starting at or before it,
    or the nearest ancestor of that one which still contains it (a few vectorised steps up the tree)."""
    inner = np.searchsorted(s_start, pos[:, 0], side="right") - 1
    while True:
        out_ = s_end[inner] < pos[:, 1]
        if not out_.any():
            return inner
        inner[out_] = parent[inner[out_]]


def _resolve_arrays(s_start, s_end, s_mode, parent, defs, refs, def_names, ref_names, decl=None):
    """Steps 2-5 for scope trees without "reuse" scopes, vectorised: identical output to
    :func:`_resolve_loop`. Names become integer ids (one dict look-up per identifier); a binding
    is the pair (scope, name id), encoded as one int64."""
    # -- identifiers: defs win over refs on the same range; of several defs, the first of a
    # specific kind wins over plain @local.definition (kind 0), else the first one
    if isinstance(def_names, np.ndarray) and isinstance(ref_names, np.ndarray):  # name ids already
        name_id = np.concatenate([def_names, ref_names]).astype(np.int64)
        n_names = int(name_id.max()) + 1 if len(name_id) else 1
        if decl is not None:
            n_names = max(n_names, max(decl[1]) + 1)
        all_names = None
    else:
        names_of: dict = {}
        name_id = np.fromiter((names_of.setdefault(x, len(names_of)) for x in itertools.chain(def_names, ref_names)),
                              dtype=np.int64, count=len(def_names) + len(ref_names))
        if decl is not None:  # declared names as ids too
            decl = (decl[0], [names_of.setdefault(x, len(names_of)) for x in decl[1]], decl[2])
        n_names = max(len(names_of), 1)
        all_names = list(names_of)
    dkey = defs[:, 0] << 32 | defs[:, 1]
    o = np.lexsort((np.arange(len(defs)), defs[:, 2] == 0, dkey))
    o = o[np.concatenate([[True], dkey[o][1:] != dkey[o][:-1]])] if len(o) else o
    rkey = refs[:, 0] << 32 | refs[:, 1]
    rkeys, r_first = np.unique(rkey, return_index=True)
    dk = dkey[o]  # sorted, unique
    at = np.minimum(np.searchsorted(dk, rkeys), max(len(dk) - 1, 0))
    r_only = (dk[at] != rkeys) if len(dk) else np.ones(len(rkeys), dtype=bool)
    key = np.concatenate([dk, rkeys[r_only]])
    if len(key) == 0:
        return np.zeros((0, 4), np.int64), []
    kind = np.concatenate([defs[o, 2], np.full(int(r_only.sum()), -1, np.int64)])
    name = np.concatenate([name_id[o], name_id[len(defs) + r_first[r_only]]])
    order = np.argsort(key, kind="stable")
    key, kind, name = key[order], kind[order], name[order]
    pos = np.column_stack([key >> 32, key & 0xFFFFFFFF])

    # -- 2. innermost scope of every identifier (as in _resolve_loop)
    inner = _innermost(s_start, s_end, parent, pos)

    # -- 3. definitions bind in their innermost scope, function/method/class names in its parent;
    # the table holds each (scope, name)'s first definition start
    is_def = kind >= 0
    owner = inner.copy()
    up = _IS_PARENT_KIND[kind] & (inner != 0)
    owner[up] = parent[inner[up]]
    rows = np.flatnonzero(kind == _K_OUTER)  # "outer" definitions bind through inline scopes
    while len(rows):
        rows = rows[s_mode[owner[rows]] == _M_INLINE]
        owner[rows] = parent[owner[rows]]

    def table():
        tkey = owner[is_def] * n_names + name[is_def]
        tkeys, t_first = np.unique(tkey, return_index=True)  # defs are in source order: first = earliest
        return tkeys, pos[is_def, 0][t_first]

    tkeys, tpos = table()
    over: dict = {}
    if decl is not None:  # 3b. declared names: their scope's definitions bind in the target scope
        first_at = dict(zip(tkeys.tolist(), tpos.tolist()))
        over = _decl_targets(decl, s_mode.tolist(), parent.tolist(), lambda sc, nm: first_at.get(sc * n_names + nm))
        for (sc, nm), t in over.items():
            owner[is_def & (owner == sc) & (name == nm)] = t
        tkeys, tpos = table()

    # -- 4. references walk outwards (all at once, one scope level per step)
    bscope = np.where(is_def, owner, -1)
    todo = np.flatnonzero(~is_def)
    s = inner[todo]
    first = True
    okeys = np.array(sorted(sc * n_names + nm for sc, nm in over), np.int64)
    otarget = np.array([over[divmod(int(k), n_names)] for k in okeys], np.int64)
    while len(todo):
        mode = s_mode[s]
        want = s * n_names + name[todo]
        if len(okeys):  # a declared name in this scope: the declaration's target
            j = np.minimum(np.searchsorted(okeys, want), len(okeys) - 1)
            ov = okeys[j] == want
            s = np.where(ov, otarget[j], s)
            mode = np.where(ov, -1, mode)  # found: below, `hit` takes s as the binding scope
        if len(tkeys):
            j = np.minimum(np.searchsorted(tkeys, want), len(tkeys) - 1)
            hit = ((tkeys[j] == want) & (first | (mode != _M_CLASS))
                   & (~_IS_ORDERED[mode] | (tpos[j] <= pos[todo, 0])))
        else:
            hit = np.zeros(len(todo), dtype=bool)
        if len(okeys):
            hit |= mode == -1
            mode = np.where(mode == -1, _M_HOISTED, mode)
        bscope[todo[hit]] = s[hit]
        s = parent[s]
        go = ~hit & (mode != _M_ISOLATED) & (s >= 0)
        todo, s, first = todo[go], s[go], False

    # -- 5. roles; dense binding ids in order of first appearance (free: one binding per name)
    role = np.where(is_def, kinds.ROLE_DEF, np.where(bscope >= 0, kinds.ROLE_REF, kinds.ROLE_FREE))
    bkey = (bscope + 1) * n_names + name
    ukeys, u_first, inv = np.unique(bkey, return_index=True, return_inverse=True)
    rank = np.empty(len(ukeys), dtype=np.int64)
    by_first = np.argsort(u_first)
    rank[by_first] = np.arange(len(ukeys))
    names = (ukeys[by_first] % n_names).tolist()
    if all_names is not None:
        names = [all_names[i] for i in names]
    return np.column_stack([pos, role, rank[inv.reshape(-1)]]), names


def _resolve_loop(s_start, s_end, s_mode, parent, defs, refs, def_names, ref_names, decl=None):
    """Steps 2-5 one identifier at a time (the reference; needed for "reuse" scopes, where a
    definition's binding depends on the definitions before it)."""
    # -- identifiers: defs win over refs on the same range -----------------------------------------
    items: dict[tuple[int, int], tuple[int, str]] = {}  # (start, end) -> (def kind or -1, name)
    for (st, en, k), name in zip(defs.tolist(), def_names):
        prev = items.get((st, en))
        if prev is None or (prev[0] == 0 and k > 0):  # a specific kind beats plain @local.definition
            items[(st, en)] = (k, name)
    for (st, en), name in zip(refs.tolist(), ref_names):
        items.setdefault((st, en), (-1, name))
    keys = sorted(items)
    if not keys:
        return np.zeros((0, 4), np.int64), []
    pos = np.asarray(keys, dtype=np.int64)

    # -- 2. innermost scope of every identifier
    inner = _innermost(s_start, s_end, parent, pos)
    parent_l = parent.tolist()
    inner_l = inner.tolist()

    # -- 3. definitions, 4. references -------------------------------------------------------------
    table: dict[tuple[int, str], int] = {}  # (scope, name) -> first definition start
    over: dict = {}  # (scope, name) -> target scope of a declared name (step 3b)

    def lookup(scope: int, name: str, at: int) -> int:
        """The scope whose binding of `name` is visible at position `at` from `scope`, or -1."""
        return _lookup(scope, name, at, s_mode, parent_l, lambda sc, nm: table.get((sc, nm)), over, True)

    def home(k: int, scope: int) -> int:
        if k in _PARENT_KINDS and scope != 0:
            return parent_l[scope]
        while k == _K_OUTER and s_mode[scope] == _M_INLINE:
            scope = parent_l[scope]
        return scope

    if decl is not None:  # the targets need every definition's scope first
        pre: dict = {}
        for key, scope in zip(keys, inner_l):
            k, name = items[key]
            if k >= 0:
                pre.setdefault((home(k, scope), name), key[0])
        over.update(_decl_targets(decl, s_mode, parent_l, lambda sc, nm: pre.get((sc, nm))))

    owner = [-1] * len(keys)  # binding scope of each definition
    for i, (key, scope) in enumerate(zip(keys, inner_l)):  # source order: outer defs come first
        k, name = items[key]
        if k < 0:
            continue
        if k in _PARENT_KINDS or k == _K_OUTER:
            scope = home(k, scope)
        elif s_mode[scope] == _M_REUSE and k != _K_PARAMETER and (scope, name) not in table:
            outer = lookup(parent_l[scope], name, key[0])
            if outer >= 0:  # assigning a visible outer variable: same binding
                scope = outer
        scope = over.get((scope, name), scope)
        owner[i] = scope
        tk = (scope, name)
        if tk not in table or key[0] < table[tk]:
            table[tk] = key[0]

    # -- 5. free references, then dense binding ids in order of appearance -----------------------
    binding_of: dict[tuple[int, str], int] = {}
    names: list[str] = []
    role = np.empty(len(keys), dtype=np.int64)
    binding = np.empty(len(keys), dtype=np.int64)
    for i, (key, scope) in enumerate(zip(keys, inner_l)):
        k, name = items[key]
        if k >= 0:
            bkey, r = (owner[i], name), kinds.ROLE_DEF
        else:
            s = lookup(scope, name, key[0])
            bkey, r = ((s, name), kinds.ROLE_REF) if s >= 0 else ((-1, name), kinds.ROLE_FREE)
        b = binding_of.get(bkey)
        if b is None:
            b = binding_of[bkey] = len(names)
            names.append(name)
        role[i] = r
        binding[i] = b
    return np.column_stack([pos, role, binding]), names
