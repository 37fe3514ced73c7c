; Control flow and assignments for Rust, read by codept/structure/dataflow.py.
; Vocabulary: codept/structure/kinds.py FLOW_KINDS, grammars/README.md.
; Not covered: `?` (an early return), panics, labelled break/continue (to the innermost loop).

[(function_item) (closure_expression)] @flow.function

[(for_expression) (while_expression) (loop_expression)] @flow.loop
(for_expression pattern: (_) @flow.target value: (_) @flow.collection)

(if_expression) @flow.branch
(if_expression consequence: (_) @flow.arm)
(if_expression alternative: (else_clause) @flow.default)
; a match is exhaustive (the compiler checks it): its last arm is the default
(match_expression) @flow.switch
(match_arm) @flow.arm
(match_block (match_arm) @flow.default .)

(return_expression) @flow.exit
(break_expression) @flow.break
(continue_expression) @flow.continue

(let_declaration pattern: (_) @flow.target value: (_) @flow.value)
(let_condition pattern: (_) @flow.target value: (_) @flow.value)
(assignment_expression left: (_) @flow.target right: (_) @flow.value)
(assignment_expression left: (identifier) @flow.write)
(assignment_expression left: (tuple_expression (identifier) @flow.write))
(compound_assignment_expr left: (_) @flow.target right: (_) @flow.value)
(compound_assignment_expr left: (identifier) @flow.update)

; `let (a, b) = (b, a);` pairs a <- b, b <- a
(let_declaration pattern: (tuple_pattern (_) @flow.item) value: (tuple_expression (_) @flow.item))
(assignment_expression left: (tuple_expression (_) @flow.item) right: (tuple_expression (_) @flow.item))
