; Control flow and assignments for PHP, read by codept/structure/dataflow.py.
; Vocabulary: codept/structure/kinds.py FLOW_KINDS, grammars/README.md.

[(function_definition) (method_declaration) (anonymous_function) (arrow_function)] @flow.function

[(while_statement) (do_statement) (for_statement) (foreach_statement)] @flow.loop
(for_statement initialize: (_) @flow.init)
(for_statement update: (_) @flow.step)

(if_statement) @flow.branch
(if_statement body: (_) @flow.arm)
(else_if_clause body: (_) @flow.arm)
(if_statement alternative: (else_clause) @flow.default)
(switch_statement) @flow.switch.fallthrough
(case_statement) @flow.arm
(default_statement) @flow.default

(try_statement) @flow.try
(catch_clause) @flow.handler
(finally_clause) @flow.finally

[(return_statement) (throw_expression)] @flow.exit
(break_statement) @flow.break
(continue_statement) @flow.continue

(assignment_expression left: (_) @flow.target right: (_) @flow.value)
(reference_assignment_expression left: (_) @flow.target right: (_) @flow.value)
(augmented_assignment_expression left: (_) @flow.target right: (_) @flow.value)
(augmented_assignment_expression left: (variable_name) @flow.update)
(update_expression argument: (variable_name) @flow.update)
; foreach ($xs as $k => $v): the collection comes first (a value before its target)
(foreach_statement . (_) @flow.value . [(variable_name) (pair) (by_ref)] @flow.target)
