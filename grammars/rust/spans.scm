; Syntax spans for Rust. Kinds: codept/structure/kinds.py SPAN_KINDS.

[(identifier) (field_identifier) (type_identifier) (shorthand_field_identifier)] @span.identifier
[(integer_literal) (float_literal) (boolean_literal)] @span.literal
[(string_literal) (raw_string_literal) (char_literal)] @span.string
[(line_comment) (block_comment)] @span.comment

[(call_expression) (macro_invocation)] @span.call
(arguments) @span.arguments
[(parameters) (closure_parameters)] @span.parameters

[
  (binary_expression) (unary_expression) (field_expression) (index_expression)
  (type_cast_expression) (reference_expression) (try_expression) (closure_expression)
  (range_expression) (await_expression)
] @span.expression

(if_expression condition: (_) @span.condition)
(while_expression condition: (_) @span.condition)
(match_pattern condition: (_) @span.condition)

[(assignment_expression) (compound_assignment_expr)] @span.assignment
(let_declaration value: (_)) @span.assignment

[
  (expression_statement) (let_declaration) (return_expression) (break_expression)
  (continue_expression)
] @span.statement

[
  (if_expression) (match_expression) (for_expression) (while_expression) (loop_expression)
] @span.control

[(use_declaration) (extern_crate_declaration)] @span.import

[
  (block) (declaration_list) (field_declaration_list) (match_block) (enum_variant_list)
] @span.block

[(function_item) (function_signature_item) (closure_expression)] @span.function

[(struct_item) (enum_item) (trait_item) (impl_item) (union_item)] @span.class

; the declared type of a parameter, binding, field, item, cast, and a function's return type
[
  (parameter type: (_) @span.type) (let_declaration type: (_) @span.type)
  (field_declaration type: (_) @span.type) (const_item type: (_) @span.type)
  (static_item type: (_) @span.type) (type_cast_expression type: (_) @span.type)
  (function_item return_type: (_) @span.type) (function_signature_item return_type: (_) @span.type)
  (closure_expression return_type: (_) @span.type) (type_item type: (_) @span.type)
]
