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
  4. A reference walks outwards from its innermost scope: in a hoisted scope any definition of the
     name matches; in a sequential one only a definition that starts before the reference. Class
     scopes are skipped when seen from a nested scope; an isolated scope stops the walk. A
     definition other than a parameter in a "reuse" scope (Ruby block) first looks outwards the same way and, if the name
     is visible there, joins that binding.
  5. Unresolved references are "free" (globals, builtins, imports from elsewhere, attributes if the
     queries capture them): one binding per name per file, marked role ``free``.
Cost: O((S + I) log) with a Python loop over identifiers (~1 us each).
Not covered: Python ``global``/``nonlocal``, Go's rule that ``x := x + 1`` sees the outer ``x`` on
the right (we bind it to the new one), dynamic scoping (PHP ``$$x``, Ruby ``binding``), attributes
and fields reached through an object (``self.x``) -- those need types, not scopes.
"""

from __future__ import annotations

import numpy as np

from codept.structure import kinds

_MODES = list(kinds.SCOPE_MODES)
_M_DEFAULT, _M_HOISTED, _M_SEQ, _M_ISOLATED, _M_CLASS, _M_REUSE = (
    _MODES.index(m) for m in ("", "hoisted", "sequential", "isolated", "class", "reuse")
)
_ORDERED = {_M_SEQ, _M_REUSE}  # modes where a definition is visible only after its position
_K_PARAMETER = kinds.DEF_KINDS.index("parameter")
_PARENT_KINDS = {kinds.DEF_KINDS.index(k) for k in kinds.PARENT_BINDING_DEF_KINDS}


def resolve(
    scopes: np.ndarray,
    defs: np.ndarray,
    refs: np.ndarray,
    def_names: list,
    ref_names: list,
    default_order: str,
    n: int,
):
    """Returns (idents (I, 4) int64 [start, end, role, binding], the name of every binding).

    Names may be str or bytes (anything hashable); they are only compared.

    `n` is the length of the file in the same unit as the offsets. Identifiers are sorted by start;
    a range captured both as definition and reference is a definition (role def).
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

    # -- 2. innermost scope of every identifier: the last scope starting at or before it, or the
    # nearest ancestor of that one which still contains it (a few vectorised steps up the tree)
    inner = np.searchsorted(s_start, pos[:, 0], side="right") - 1
    while True:
        out_ = s_end[inner] < pos[:, 1]
        if not out_.any():
            break
        inner[out_] = parent[inner[out_]]
    parent_l = parent.tolist()
    inner_l = inner.tolist()

    # -- 3. definitions, 4. references -------------------------------------------------------------
    table: dict[tuple[int, str], int] = {}  # (scope, name) -> first definition start

    def lookup(scope: int, name: str, at: int) -> int:
        """The scope whose binding of `name` is visible at position `at` from `scope`, or -1."""
        s, first = scope, True
        while s >= 0:
            mode = s_mode[s]
            if first or mode != _M_CLASS:
                p = table.get((s, name))
                if p is not None and (mode not in _ORDERED or p <= at):
                    return s
            if mode == _M_ISOLATED:
                return -1
            s, first = parent_l[s], False
        return -1

    owner = [-1] * len(keys)  # binding scope of each definition
    for i, (key, scope) in enumerate(zip(keys, inner_l)):  # source order: outer defs come first
        k, name = items[key]
        if k < 0:
            continue
        if k in _PARENT_KINDS and scope != 0:
            scope = parent_l[scope]
        elif s_mode[scope] == _M_REUSE and k != _K_PARAMETER and (scope, name) not in table:
            outer = lookup(parent_l[scope], name, key[0])
            if outer >= 0:  # assigning a visible outer variable: same binding
                scope = outer
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
