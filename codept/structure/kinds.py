"""The closed vocabulary of query capture names, shared by every language.

Query files in ``grammars/<lang>/`` may only use the capture names defined here (plus private
helper captures starting with ``_``, which are ignored). Grammar loading rejects anything else, so
a typo in a query is an error, not a silently empty span list.

Three query files, three families of captures:

``spans.scm``   ``@span.<kind>`` with ``kind`` from :data:`SPAN_KINDS` (a syntax unit to mask whole).
``locals.scm``  ``@local.scope[.<mode>]``, ``@local.definition[.<kind>]``, ``@local.reference``
                (tree-sitter's locals convention; modes and kinds below), ``@local.member``:
                a name reached through an object or a keyword (``obj.attr``, ``f(key=1)``), never
                bound to a local; it removes the same node from the references; and
                ``@local.nonlocal`` / ``@local.global``: a name declared to belong to an enclosing
                scope (Python ``nonlocal x`` / ``global x``, PHP ``global $x``): in its innermost
                scope every occurrence of that name binds where the name resolves from the parent
                scope (nonlocal) or in the outermost scope below the file's (global).
``tags.scm``    ``@definition.<kind>`` with ``@name`` and optional ``@doc`` (tree-sitter's tags
                convention), kinds from :data:`DEFINITION_KINDS`.
``flow.scm``    ``@flow.<kind>`` with ``kind`` from :data:`FLOW_KINDS`: the control-flow skeleton
                (units, loops, branches, exits) and the assignments that dataflow needs
                (codept.structure.dataflow).

Span kinds are indices into :data:`SPAN_KINDS`; their order is part of the view format (stored as
int8 in prepared datasets), so only ever append.
"""

from __future__ import annotations

# kind -> what the query files must capture with it. Order is the on-disk id: append only.
SPAN_KINDS: dict[str, str] = {
    "identifier": "a name: variable, parameter, function, type, attribute or property name",
    "literal": "a number, boolean, null/None/nil literal",
    "string": "a string/char/template/heredoc literal, including f-string and interpolations",
    "comment": "a comment (line or block), including doc comments",
    "call": "a function/method/constructor call, callee and arguments",
    "arguments": "the argument list of a call, with its delimiters",
    "parameters": "the formal parameter list of a function, with its delimiters",
    "expression": "a compound expression: binary, unary, boolean, comparison, conditional, lambda, "
    "subscript, attribute/member access",
    "condition": "the condition of an if/while/for/ternary/case (the tested expression only)",
    "assignment": "an assignment, augmented assignment or variable declaration with initializer",
    "statement": "a simple statement: expression statement, return, break/continue, raise/throw, pass",
    "control": "a compound control-flow statement: if, for, while, do, try, switch/match, with",
    "import": "an import/include/require/use declaration",
    "block": "a body: the statements of a function, class, loop or branch (braces included)",
    "function": "a function, method, lambda/arrow function or closure definition, including its body",
    "class": "a class, struct, interface, enum, trait or module definition, including its body",
    "type": "a type annotation or type expression",
}
SPAN_KIND_ID: dict[str, int] = {k: i for i, k in enumerate(SPAN_KINDS)}

# @local.scope modes: how names resolve through the scope. See codept.structure.resolve.
SCOPE_MODES: dict[str, str] = {
    "": "the language default from language.toml (`scope_order`)",
    "hoisted": "a definition anywhere in the scope is visible in all of it (Python function, Java "
    "class body, Go package, JS function)",
    "sequential": "a definition is visible from its position on (Go/Java/Ruby block locals)",
    "isolated": "sees no enclosing scope (Ruby def/class/module, PHP function)",
    "class": "hoisted, and invisible to scopes nested inside it (Python class body)",
    "reuse": "sequential, and assigning a name already visible from an enclosing scope rebinds that "
    "variable instead of defining a new one (Ruby blocks: `xs.each { |x| sum += x }`)",
    "inline": "hoisted; a scope that runs in place inside the enclosing one (Python comprehensions): "
    "its own definitions stay inside, `@local.definition.outer` names bind through it",
}

# @local.definition kinds. function/class/method names bind in the scope ENCLOSING the innermost
# scope around them: write the defining node (function_definition, ...) as a @local.scope.
# "outer": binds in the innermost scope around it that is not `inline` (Python's `:=`, which inside a
# comprehension binds in the enclosing function). Append only (ids are used in ParsedFile.defs).
DEF_KINDS: tuple[str, ...] = ("", "var", "parameter", "import", "field", "function", "method", "class", "outer")
PARENT_BINDING_DEF_KINDS = frozenset({"function", "method", "class"})

DEFINITION_KINDS: tuple[str, ...] = ("function", "method", "class")

# @flow.<kind> captures (flow.scm), read by codept.structure.dataflow. Regions are nodes; write and
# update mark identifiers. Order is the id used in ParsedFile.flow: append only.
FLOW_KINDS: dict[str, str] = {
    "function": "a flow unit (function, method, lambda, closure): dataflow restarts inside, no "
    "function-local edge crosses it (a `comesFromNonlocal` edge joins a variable's uses and definitions "
    "in different units); the names it defines for its parent (function/method/class names) stay outside",
    "loop": "a loop (while, for, do, a Ruby block, a comprehension): its body may run zero or more "
    "times, so the state at its end flows back to its start; `break` leaves it, `continue` restarts it",
    "init": "the part of a loop that runs once, before the first iteration (a C-style for initializer)",
    "step": "the part of a loop that runs after the body of every iteration (a C-style for update)",
    "branch": "a choice (if/else, unless, Python match, Ruby case): its arms are alternatives; without a default arm "
    "the state before the arms also flows past it",
    "switch": "a break target whose arms are alternatives (Go switch/select, Java arrow cases)",
    "switch.fallthrough": "a break target whose arms fall through into the next one unless they exit "
    "(C-style switch: Java, JavaScript, PHP)",
    "arm": "one alternative of a branch or switch (then-block, elif body, case body)",
    "default": "the alternative taken when no other is (else, default): the choice is exhaustive",
    "try": "a try statement: any state reached inside its body may flow to its handlers",
    "handler": "an exception handler of a try (except, catch, rescue): an alternative to the body's end",
    "finally": "the part of a try that runs after the body and the handlers (finally, ensure)",
    "exit": "return / raise / throw: the flow stops here (code after it is dead and sees the state "
    "before the exit; dead states do not join)",
    "break": "break: the flow goes to the end of the innermost loop or switch",
    "continue": "continue / next: the flow goes back to the start of the innermost loop",
    "target": "the written side of an assignment or loop header; evaluated after the next `value` "
    "sibling, and every variable it writes is computed from the identifiers of that value",
    "value": "the read side of an assignment (right-hand side, initializer, iterated collection)",
    "write": "an identifier that an assignment writes although the locals resolve it as a reference "
    "(Java/JavaScript/Go `x = 1` to a declared variable)",
    "update": "an identifier that is read and written (`c += i`, `i++`): computed from its old value",
    "nobreak": "the part of a loop that runs when it ends without `break` (Python `for`/`while ... else`): "
    "it starts from the loop's normal exit, and a `break` skips it",
    "collection": "the iterated collection of a for-each loop header (`for x in xs`, `for (T x : xs)`, "
    "Go `range`, PHP `foreach`): paired with its `target` like a `value`, but evaluated once, before the "
    "first iteration; the target is written at the start of every iteration, computed from it",
    "item": "one element of a tuple/list target or value (`a, b = x, y`): when every child of a paired "
    "target and value is an item and the counts match, the k-th target item is computed from the k-th "
    "value item only (items of items pair the same way); otherwise every target variable is computed "
    "from every value identifier",
    "function.copy": "a unit that copies the enclosing variables it reads when it is created (PHP "
    "`function () use ($x)`, `fn`): only the definitions reaching its creation reach it",
    "field": "the member name of an access through the instance (`self.x`, `this.x`, `$this->x`, Ruby "
    "`@x`): an identifier of its own (one variable per name per file) only in views built with fields "
    "(codept.structure.view.build_view(fields=True)); the patterns with this capture run only then",
}
FLOW_KIND_ID: dict[str, int] = {k: i for i, k in enumerate(FLOW_KINDS)}

# Identifier roles in a CodeView.
ROLE_DEF, ROLE_REF, ROLE_FREE = 0, 1, 2
ROLES = ("def", "ref", "free")


def allowed_captures(query_kind: str) -> frozenset[str]:
    """Public capture names a query file of `query_kind` (spans, locals, tags) may use."""
    if query_kind == "spans":
        return frozenset(f"span.{k}" for k in SPAN_KINDS)
    if query_kind == "locals":
        scopes = {"local.scope" + (f".{m}" if m else "") for m in SCOPE_MODES}
        defs = {"local.definition" + (f".{k}" if k else "") for k in DEF_KINDS}
        return frozenset(scopes | defs | {"local.reference", "local.member", "local.nonlocal", "local.global"})
    if query_kind == "tags":
        return frozenset({f"definition.{k}" for k in DEFINITION_KINDS} | {"name", "doc"})
    if query_kind == "flow":
        return frozenset(f"flow.{k}" for k in FLOW_KINDS)
    raise ValueError(f"unknown query kind {query_kind!r}; expected spans, locals, tags or flow")


def check_capture(query_kind: str, name: str, where: str) -> None:
    """Raise ValueError when `name` is not in the vocabulary of `query_kind`."""
    if name.startswith("_"):
        return
    allowed = allowed_captures(query_kind)
    if name not in allowed:
        raise ValueError(
            f"{where}: unknown capture @{name}; {query_kind}.scm allows "
            + ", ".join("@" + a for a in sorted(allowed))
            + " (and private @_names)"
        )
