; Control flow and assignments for JavaScript, read by codept/structure/dataflow.py.
; Vocabulary: codept/structure/kinds.py FLOW_KINDS, grammars/README.md.

[
  (function_declaration) (generator_function_declaration) (function_expression)
  (generator_function) (arrow_function) (method_definition)
] @flow.function

[(while_statement) (do_statement) (for_statement) (for_in_statement)] @flow.loop
(for_statement initializer: (_) @flow.init)
(for_statement increment: (_) @flow.step)

(if_statement) @flow.branch
(if_statement consequence: (_) @flow.arm)
(if_statement alternative: (else_clause) @flow.default)
(switch_statement) @flow.switch.fallthrough
(switch_case) @flow.arm
(switch_default) @flow.default

(try_statement) @flow.try
(catch_clause) @flow.handler
(finally_clause) @flow.finally

[(return_statement) (throw_statement)] @flow.exit
(break_statement) @flow.break
(continue_statement) @flow.continue

(variable_declarator name: (_) @flow.target value: (_) @flow.value)
(assignment_expression left: (_) @flow.target right: (_) @flow.value)
(assignment_expression left: (identifier) @flow.write)
(augmented_assignment_expression left: (_) @flow.target right: (_) @flow.value)
(augmented_assignment_expression left: (identifier) @flow.update)
(update_expression argument: (identifier) @flow.update)
(for_in_statement left: (_) @flow.target right: (_) @flow.collection)
(for_in_statement left: (identifier) @flow.write)

; destructuring: `[a, b] = [b, a]` pairs a <- b, b <- a; a rest/spread element is no item (its
; level falls back to all-to-all)
(array_pattern [(identifier) (array_pattern) (object_pattern) (member_expression) (subscript_expression)
  (assignment_pattern)] @flow.item)
[(assignment_expression right: (array (expression) @flow.item))
 (variable_declarator value: (array (expression) @flow.item))]

; object fields (views with fields only: codept.structure.view.build_view(fields=True)): this.x
(member_expression object: (this) property: (property_identifier) @flow.field)
(assignment_expression left: (member_expression object: (this) property: (property_identifier) @flow.field @flow.write))
(augmented_assignment_expression
  left: (member_expression object: (this) property: (property_identifier) @flow.field @flow.update))
(update_expression argument: (member_expression object: (this) property: (property_identifier) @flow.field @flow.update))
