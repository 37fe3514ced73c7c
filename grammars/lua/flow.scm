; Control flow and assignments for Lua, read by codept/structure/dataflow.py.
; Vocabulary: codept/structure/kinds.py FLOW_KINDS, grammars/README.md.
; Not covered: goto, coroutines, the `until` condition's view of the body's locals.

[(function_declaration) (function_definition)] @flow.function

[(for_statement) (while_statement) (repeat_statement)] @flow.loop

(if_statement) @flow.branch
(if_statement consequence: (_) @flow.arm)
(elseif_statement) @flow.arm
(else_statement) @flow.default

(return_statement) @flow.exit
(break_statement) @flow.break

(assignment_statement (variable_list) @flow.target . "=" . (expression_list) @flow.value)
(assignment_statement (variable_list name: (identifier) @flow.write))
(for_generic_clause (variable_list) @flow.target (expression_list) @flow.collection)
; `a, b = b, a` pairs a <- b, b <- a
(assignment_statement (variable_list (_) @flow.item) (expression_list (_) @flow.item))
