; Syntax spans for C. Kinds: codept/structure/kinds.py SPAN_KINDS.

; names: variables, functions, fields, labels, type names
[(identifier) (field_identifier) (type_identifier) (statement_identifier)] @span.identifier
[(number_literal) (true) (false) (null)] @span.literal
[(string_literal) (char_literal) (concatenated_string) (system_lib_string)] @span.string
(comment) @span.comment

(call_expression) @span.call
(argument_list) @span.arguments
(parameter_list) @span.parameters
(preproc_params) @span.parameters

[
  (binary_expression) (unary_expression) (pointer_expression) (conditional_expression)
  (subscript_expression) (field_expression) (cast_expression) (sizeof_expression)
  (compound_literal_expression) (comma_expression) (alignof_expression)
] @span.expression

; the tested expression, without the parentheses of `if (...)`
(if_statement condition: (parenthesized_expression (_) @span.condition))
(while_statement condition: (parenthesized_expression (_) @span.condition))
(do_statement condition: (parenthesized_expression (_) @span.condition))
(for_statement condition: (_) @span.condition)
(conditional_expression condition: (_) @span.condition)
(case_statement value: (_) @span.condition)

[(assignment_expression) (update_expression) (init_declarator)] @span.assignment

[
  (expression_statement) (return_statement) (break_statement) (continue_statement)
  (goto_statement) (declaration)
] @span.statement

[
  (if_statement) (for_statement) (while_statement) (do_statement) (switch_statement)
] @span.control

(preproc_include) @span.import

[(compound_statement) (field_declaration_list) (enumerator_list)] @span.block

(function_definition) @span.function

; struct / union / enum definitions (with a body), not their uses (`struct foo *p`)
[
  (struct_specifier body: (_)) (union_specifier body: (_)) (enum_specifier body: (_))
] @span.class

; the type of a declaration, parameter, field, function, typedef; of a cast, sizeof or compound
; literal (its type_descriptor, once: not again its inner `type:`)
(type_descriptor) @span.type
[
  (declaration type: (_) @span.type) (parameter_declaration type: (_) @span.type)
  (field_declaration type: (_) @span.type) (function_definition type: (_) @span.type)
  (type_definition type: (_) @span.type)
]
