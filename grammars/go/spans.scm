; Syntax spans for Go. Kinds: codept/structure/kinds.py SPAN_KINDS.

; names: variables, functions, fields, methods, types, packages, labels
[
  (identifier) (field_identifier) (type_identifier) (package_identifier) (label_name)
] @span.identifier
[
  (int_literal) (float_literal) (imaginary_literal) (true) (false) (nil) (iota)
] @span.literal
[(interpreted_string_literal) (raw_string_literal) (rune_literal)] @span.string
(comment) @span.comment

; a conversion `[]byte(s)` reads like a call (`int(x)` parses as one)
[(call_expression) (type_conversion_expression)] @span.call
(call_expression arguments: (argument_list) @span.arguments)
; receiver and value parameters (not the named results, not type parameters)
(_ receiver: (parameter_list) @span.parameters)
(_ parameters: (parameter_list) @span.parameters)

[
  (binary_expression) (unary_expression) (selector_expression) (index_expression)
  (slice_expression) (type_assertion_expression) (type_instantiation_expression) (func_literal)
] @span.expression

(if_statement condition: (_) @span.condition)
(for_clause condition: (_) @span.condition)
; `for x < n { ... }`: the bare expression child of a for statement
(for_statement (_expression) @span.condition)
(expression_switch_statement value: (_) @span.condition)
(expression_case value: (_) @span.condition)

[
  (short_var_declaration) (assignment_statement) (inc_statement) (dec_statement)
] @span.assignment
; `var x = 1` / `const c = 1`: the whole declaration; in a group `var ( ... )` each spec.
; (No text predicates anywhere in these files: codept parses from a callable, and py-tree-sitter
; then re-reads the source for every predicate test, quadratic in the file size.)
(var_declaration (var_spec value: (_))) @span.assignment
(var_spec_list (var_spec value: (_)) @span.assignment)
; a const group has its specs as direct children: a lone spec is the whole declaration, a spec
; with a named sibling (comment or spec) before or after it is one of a group
(const_declaration . (const_spec value: (_)) .) @span.assignment
(const_declaration (comment) . (const_spec value: (_)) @span.assignment)
(const_declaration (const_spec) . (const_spec value: (_)) @span.assignment)
(const_declaration . (const_spec value: (_)) @span.assignment . (_))

[
  (expression_statement) (return_statement) (break_statement) (continue_statement)
  (goto_statement) (fallthrough_statement) (go_statement) (defer_statement) (send_statement)
] @span.statement

[
  (if_statement) (for_statement) (expression_switch_statement) (type_switch_statement)
  (select_statement)
] @span.control

(import_declaration) @span.import

; bodies: braced blocks, struct bodies, and the statements of a switch/select case
[(block) (field_declaration_list)] @span.block
(expression_case (statement_list) @span.block)
(default_case (statement_list) @span.block)
(type_case (statement_list) @span.block)
(communication_case (statement_list) @span.block)

[(function_declaration) (method_declaration) (func_literal)] @span.function

; a struct or interface type: `type T struct {...}` whole; in a group `type ( ... )` each spec
; (same lone-spec / spec-with-a-named-sibling split as for const)
(type_declaration . (type_spec type: [(struct_type) (interface_type)]) .) @span.class
(type_declaration
  (comment) . (type_spec type: [(struct_type) (interface_type)]) @span.class)
(type_declaration
  [(type_spec) (type_alias)] . (type_spec type: [(struct_type) (interface_type)]) @span.class)
(type_declaration
  . (type_spec type: [(struct_type) (interface_type)]) @span.class . (_))

; every type expression in a type position (the supertype `_simple_type` matches by position,
; so the name in `type T ...` is not a type span)
[(_simple_type) (parenthesized_type)] @span.type
(composite_literal type: (_) @span.type)
