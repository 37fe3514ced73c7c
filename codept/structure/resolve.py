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
     scopes are skipped when seen from a nested scope; an isolated scope stops the walk.
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
_M_DEFAULT, _M_HOISTED, _M_SEQ, _M_ISOLATED, _M_CLASS = (
    _MODES.index(m) for m in ("", "hoisted", "sequential", "isolated", "class")
)
_PARENT_KINDS = {kinds.DEF_KINDS.index(k) for k in kinds.PARENT_BINDING_DEF_KINDS}


def resolve(
    scopes: np.ndarray,
    defs: np.ndarray,
    refs: np.ndarray,
    def_names: list[str],
    ref_names: list[str],
    default_order: str,
    n: int,
):
    """Returns (idents (I, 4) int64 [start, end, role, binding], binding_names list[str]).

    `n` is the length of the file in the same unit as the offsets. Identifiers are sorted by start;
    a range captured both as definition and reference is a definition (role def).
    """
    default_mode = _M_HOISTED if default_order == "hoisted" else _M_SEQ
    # -- 1. scope tree --------------------------------------------------------------------------
    order = np.lexsort((-scopes[:, 1], scopes[:, 0])) if len(scopes) else np.zeros(0, np.int64)
    s_start = [0]
    s_end = [n + 1]
    s_mode = [default_mode]
    parent = [-1]
    stack = [0]
    seen: dict[tuple[int, int], int] = {}
    for i in order:
        st, en, mode = (int(x) for x in scopes[i])
        if mode == _M_DEFAULT:
            mode = default_mode
        key = (st, en)
        if key in seen:  # the same node captured twice: an explicit mode wins over the default
            j = seen[key]
            if s_mode[j] == default_mode:
                s_mode[j] = mode
            continue
        while s_end[stack[-1]] <= st:
            stack.pop()
        seen[key] = len(s_start)
        parent.append(stack[-1])
        s_start.append(st)
        s_end.append(en)
        s_mode.append(mode)
        stack.append(len(s_start) - 1)
    # scopes in (start, -end) order: index order == sweep order

    # -- identifiers: defs win over refs on the same range -----------------------------------------
    items: dict[tuple[int, int], tuple[int, str]] = {}  # (start, end) -> (def kind or -1, name)
    for (st, en, k), name in zip(defs.tolist(), def_names):
        prev = items.get((st, en))
        if prev is None or (prev[0] == 0 and k > 0):  # a specific kind beats plain @local.definition
            items[(st, en)] = (k, name)
    for (st, en), name in zip(refs.tolist(), ref_names):
        items.setdefault((st, en), (-1, name))
    keys = sorted(items)

    # -- 2. innermost scope of every identifier -------------------------------------------------
    inner = []
    stack = [0]
    nxt = 1
    n_scopes = len(s_start)
    for st, en in keys:
        while nxt < n_scopes and s_start[nxt] <= st:
            while s_end[stack[-1]] <= s_start[nxt]:
                stack.pop()
            stack.append(nxt)
            nxt += 1
        while s_end[stack[-1]] < en or s_end[stack[-1]] <= st:
            stack.pop()
        inner.append(stack[-1])

    # -- 3. definitions ---------------------------------------------------------------------------
    table: dict[tuple[int, str], int] = {}  # (scope, name) -> first definition start
    owner = []  # binding scope of each identifier (defs only)
    for (st, _en), sc in zip(keys, inner):
        k, name = items[(st, _en)]
        if k < 0:
            owner.append(-1)
            continue
        if k in _PARENT_KINDS and sc != 0:
            sc = parent[sc]
        owner.append(sc)
        key = (sc, name)
        if key not in table or st < table[key]:
            table[key] = st

    # -- 4./5. references, then dense binding ids in order of appearance -------------------------
    binding_of: dict[tuple[int, str], int] = {}
    names: list[str] = []
    out = np.empty((len(keys), 4), dtype=np.int64)
    for i, ((st, en), sc) in enumerate(zip(keys, inner)):
        k, name = items[(st, en)]
        if k >= 0:
            key, role = (owner[i], name), kinds.ROLE_DEF
        else:
            key, role = (-1, name), kinds.ROLE_FREE
            s, first = sc, True
            while s >= 0:
                mode = s_mode[s]
                if first or mode != _M_CLASS:
                    pos = table.get((s, name))
                    if pos is not None and (mode != _M_SEQ or pos <= st):
                        key, role = (s, name), kinds.ROLE_REF
                        break
                if mode == _M_ISOLATED:
                    break
                s, first = parent[s], False
        b = binding_of.get(key)
        if b is None:
            b = binding_of[key] = len(names)
            names.append(name)
        out[i] = (st, en, role, b)
    return out, names
