; Control flow and assignments for Ruby, read by codept/structure/dataflow.py.
; Vocabulary: codept/structure/kinds.py FLOW_KINDS, grammars/README.md.

[(method) (singleton_method) (lambda)] @flow.function

; a block runs zero or more times where it is passed (each, map, times, ...)
[(while) (until) (for) (while_modifier) (until_modifier) (block) (do_block)] @flow.loop

[(if) (unless) (if_modifier) (unless_modifier) (case) (case_match)] @flow.branch
[(if consequence: (_) @flow.arm) (elsif consequence: (_) @flow.arm) (unless consequence: (_) @flow.arm)]
[(if alternative: (else) @flow.default) (elsif alternative: (else) @flow.default)
 (unless alternative: (else) @flow.default)]
[(if_modifier body: (_) @flow.arm) (unless_modifier body: (_) @flow.arm)]
[(when) (in_clause)] @flow.arm
[(case (else) @flow.default) (case_match else: (else) @flow.default)]

(begin) @flow.try
(body_statement [(rescue) (ensure)]) @flow.try
(rescue) @flow.handler
(ensure) @flow.finally

(return) @flow.exit
(break) @flow.break
(next) @flow.continue

(assignment left: (_) @flow.target right: (_) @flow.value)
(operator_assignment left: (_) @flow.target right: (_) @flow.value)
(operator_assignment left: (identifier) @flow.update)
(for pattern: (_) @flow.target value: (_) @flow.collection)

; `a, b = b, a` pairs a <- b, b <- a; a splat (`*rest`, `*xs`) is no item (its level falls back to
; all-to-all)
[(left_assignment_list [(identifier) (destructured_left_assignment) (instance_variable) (global_variable)
   (class_variable) (constant) (call) (element_reference)] @flow.item)
 (destructured_left_assignment [(identifier) (destructured_left_assignment) (instance_variable)
   (global_variable) (class_variable) (constant) (call) (element_reference)] @flow.item)]
(assignment right: (right_assignment_list (_arg) @flow.item))

; object fields (views with fields only: codept.structure.view.build_view(fields=True)): @x
; (answered by the parser's walk, like every kind-only pattern; the two below then write no
; identifier in views without fields)
(instance_variable) @flow.field
(assignment left: (instance_variable) @flow.write)
(operator_assignment left: (instance_variable) @flow.update)
