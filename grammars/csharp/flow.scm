; Control flow and assignments for C#, read by codept/structure/dataflow.py.
; Vocabulary: codept/structure/kinds.py FLOW_KINDS, grammars/README.md.
; Not covered: `out`/`ref` arguments written by the callee, `goto`, `yield`.

[
  (method_declaration) (constructor_declaration) (local_function_statement) (lambda_expression)
  (anonymous_method_expression) (accessor_declaration) (destructor_declaration)
  (operator_declaration)
] @flow.function

[(while_statement) (do_statement) (for_statement) (foreach_statement)] @flow.loop
(for_statement initializer: (_) @flow.init)
(for_statement update: (_) @flow.step)

(if_statement) @flow.branch
(if_statement consequence: (_) @flow.arm)
(if_statement alternative: (_) @flow.default)
; C# sections never fall through (each ends in break/return/throw/goto)
(switch_statement) @flow.switch
(switch_section) @flow.arm
(switch_section "default") @flow.default

(try_statement) @flow.try
(catch_clause) @flow.handler
(finally_clause) @flow.finally

[(return_statement) (throw_statement)] @flow.exit
(break_statement) @flow.break
(continue_statement) @flow.continue

(variable_declarator name: (_) @flow.target "=" (_) @flow.value)
(assignment_expression left: (_) @flow.target right: (_) @flow.value)
(assignment_expression left: (identifier) @flow.write)
(assignment_expression left: (identifier) @flow.update
  operator: ["+=" "-=" "*=" "/=" "%=" "&=" "|=" "^=" "<<=" ">>=" ">>>=" "??="])
(postfix_unary_expression (identifier) @flow.update ["++" "--"])
(prefix_unary_expression ["++" "--"] (identifier) @flow.update)
(foreach_statement left: (_) @flow.target right: (_) @flow.collection)
