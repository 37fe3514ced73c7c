; Syntax spans for C++. Kinds: codept/structure/kinds.py SPAN_KINDS.

[
  (identifier) (field_identifier) (type_identifier) (statement_identifier) (namespace_identifier)
] @span.identifier
[(number_literal) (true) (false) (null)] @span.literal
[
  (string_literal) (char_literal) (concatenated_string) (system_lib_string) (raw_string_literal)
  (user_defined_literal)
] @span.string
(comment) @span.comment

[(call_expression) (new_expression)] @span.call
(argument_list) @span.arguments
[(parameter_list) (preproc_params) (template_parameter_list)] @span.parameters

[
  (binary_expression) (unary_expression) (pointer_expression) (conditional_expression)
  (subscript_expression) (field_expression) (cast_expression) (sizeof_expression)
  (compound_literal_expression) (comma_expression) (alignof_expression) (lambda_expression)
  (delete_expression) (qualified_identifier) (template_function)
] @span.expression

; the tested expression, without the parentheses
(condition_clause value: (_) @span.condition)
(do_statement condition: (parenthesized_expression (_) @span.condition))
(for_statement condition: (_) @span.condition)
(conditional_expression condition: (_) @span.condition)
(case_statement value: (_) @span.condition)

[(assignment_expression) (update_expression) (init_declarator)] @span.assignment
(field_declaration default_value: (_)) @span.assignment

[
  (expression_statement) (return_statement) (break_statement) (continue_statement)
  (goto_statement) (declaration) (throw_statement) (alias_declaration)
] @span.statement

[
  (if_statement) (for_statement) (for_range_loop) (while_statement) (do_statement)
  (switch_statement) (try_statement)
] @span.control

[(preproc_include) (using_declaration)] @span.import

[(compound_statement) (field_declaration_list) (enumerator_list) (declaration_list)] @span.block

[(function_definition) (lambda_expression)] @span.function

[
  (class_specifier body: (_)) (struct_specifier body: (_)) (union_specifier body: (_))
  (enum_specifier body: (_))
] @span.class

(type_descriptor) @span.type
[
  (declaration type: (_) @span.type) (parameter_declaration type: (_) @span.type)
  (optional_parameter_declaration type: (_) @span.type)
  (field_declaration type: (_) @span.type) (function_definition type: (_) @span.type)
  (type_definition type: (_) @span.type) (for_range_loop type: (_) @span.type)
  (new_expression type: (_) @span.type)
]
