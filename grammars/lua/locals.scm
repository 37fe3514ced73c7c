; Scopes and bindings for Lua, resolved by codept/structure/resolve.py.
; `local x` declares; a plain assignment (`x = 1`) writes the visible local or else a global (a
; reference: free when no local of that name is visible). `function f()` assigns a global f: it is
; captured as a definition in its scope so that calls after it bind to it.
;
; Limitations: `local x = x` reads the outer x (here: one binding with the new one); globals are
; one binding per file only when defined by `function f()`; `_ENV`, `setfenv`; the `until`
; condition of `repeat` sees the body's locals in Lua, not here.

; -- scopes ------------------------------------------------------------------
[(function_declaration) (function_definition)] @local.scope
[(block) (for_statement)] @local.scope

; -- definitions ---------------------------------------------------------------
(function_declaration name: (identifier) @local.definition.function)
(parameters name: (identifier) @local.definition.parameter)
(variable_declaration (variable_list name: (identifier) @local.definition.var))
(variable_declaration (assignment_statement (variable_list name: (identifier) @local.definition.var)))
(for_numeric_clause name: (identifier) @local.definition.var)
(for_generic_clause (variable_list name: (identifier) @local.definition.var))

; -- references -----------------------------------------------------------------
(identifier) @local.reference

; names reached through a table, and labels, are no locals
(dot_index_expression field: (identifier) @local.member)
(method_index_expression method: (identifier) @local.member)
(field name: (identifier) @local.member)
(attribute (identifier) @local.member)
(label_statement (identifier) @local.member)
(goto_statement (identifier) @local.member)
