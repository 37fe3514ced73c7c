; Syntax spans for C#. Kinds: codept/structure/kinds.py SPAN_KINDS.

; names (type names are identifiers in this grammar too)
[(identifier) (implicit_parameter)] @span.identifier
[(integer_literal) (real_literal) (boolean_literal) (null_literal)] @span.literal
[
  (string_literal) (verbatim_string_literal) (raw_string_literal) (character_literal)
  (interpolated_string_expression)
] @span.string
(comment) @span.comment

[(invocation_expression) (object_creation_expression)] @span.call
(argument_list) @span.arguments
[(parameter_list) (type_parameter_list)] @span.parameters
(lambda_expression parameters: (implicit_parameter) @span.parameters)

[
  (binary_expression) (prefix_unary_expression) (conditional_expression) (lambda_expression)
  (member_access_expression) (element_access_expression) (conditional_access_expression)
  (cast_expression) (is_pattern_expression) (as_expression) (await_expression) (typeof_expression)
  (anonymous_method_expression) (query_expression) (switch_expression)
] @span.expression

[
  (if_statement condition: (_) @span.condition) (while_statement condition: (_) @span.condition)
  (do_statement condition: (_) @span.condition) (for_statement condition: (_) @span.condition)
  (conditional_expression condition: (_) @span.condition)
]
(catch_filter_clause (_) @span.condition)

[(assignment_expression) (postfix_unary_expression) ] @span.assignment
(prefix_unary_expression ["++" "--"]) @span.assignment
(variable_declarator "=") @span.assignment

[
  (expression_statement) (return_statement) (break_statement) (continue_statement)
  (throw_statement) (yield_statement) (local_declaration_statement) (goto_statement)
] @span.statement

[
  (if_statement) (for_statement) (foreach_statement) (while_statement) (do_statement)
  (switch_statement) (try_statement) (using_statement) (lock_statement) (checked_statement)
] @span.control

(using_directive) @span.import

[(block) (declaration_list) (switch_body) (accessor_list) (enum_member_declaration_list)] @span.block

[
  (method_declaration) (constructor_declaration) (local_function_statement) (lambda_expression)
  (anonymous_method_expression) (destructor_declaration) (operator_declaration)
] @span.function

[
  (class_declaration) (struct_declaration) (interface_declaration) (enum_declaration)
  (record_declaration)
] @span.class

[
  (variable_declaration type: (_) @span.type) (parameter type: (_) @span.type)
  (method_declaration returns: (_) @span.type) (property_declaration type: (_) @span.type)
  (cast_expression type: (_) @span.type) (object_creation_expression type: (_) @span.type)
  (catch_declaration type: (_) @span.type) (foreach_statement type: (_) @span.type)
  (declaration_pattern type: (_) @span.type) (local_function_statement type: (_) @span.type)
]
(base_list (_) @span.type)
