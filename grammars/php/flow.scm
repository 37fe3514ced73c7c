; Control flow and assignments for PHP, read by codept/structure/dataflow.py.
; Vocabulary: codept/structure/kinds.py FLOW_KINDS, grammars/README.md.

[(function_definition) (method_declaration)] @flow.function
; closures copy what they capture when created: `function () use ($x)`, `fn() => $x`
[(anonymous_function) (arrow_function)] @flow.function.copy

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
(foreach_statement . (_) @flow.collection . [(variable_name) (pair) (by_ref)] @flow.target)

; destructuring: `[$a, $b] = [$b, $a]` pairs $a <- $b, $b <- $a; a keyed or spread element is no
; item (its level falls back to all-to-all)
(list_literal [(variable_name) (list_literal) (by_ref) (member_access_expression) (subscript_expression)] @flow.item)
(assignment_expression right: (array_creation_expression (array_element_initializer . [
  (variable_name) (integer) (float) (string) (encapsed_string) (boolean) (null) (name)
  (function_call_expression) (member_call_expression) (scoped_call_expression) (member_access_expression)
  (subscript_expression) (binary_expression) (unary_op_expression) (array_creation_expression)
  (class_constant_access_expression) (parenthesized_expression) (object_creation_expression)] .) @flow.item))

; object fields (views with fields only: codept.structure.view.build_view(fields=True)): $this->x
((member_access_expression object: (variable_name (name) @_this) name: (name) @flow.field) (#eq? @_this "this"))
((assignment_expression
   left: (member_access_expression object: (variable_name (name) @_this) name: (name) @flow.field @flow.write))
  (#eq? @_this "this"))
((augmented_assignment_expression
   left: (member_access_expression object: (variable_name (name) @_this) name: (name) @flow.field @flow.update))
  (#eq? @_this "this"))
((update_expression
   argument: (member_access_expression object: (variable_name (name) @_this) name: (name) @flow.field @flow.update))
  (#eq? @_this "this"))
