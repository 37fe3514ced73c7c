; Syntax spans for Python. Kinds: codept/structure/kinds.py SPAN_KINDS.

(identifier) @span.identifier
[(integer) (float) (true) (false) (none) (ellipsis)] @span.literal
[(string) (concatenated_string)] @span.string
(comment) @span.comment

(call) @span.call
(call arguments: (_) @span.arguments)
[(parameters) (lambda_parameters)] @span.parameters

[
  (binary_operator) (unary_operator) (boolean_operator) (not_operator)
  (comparison_operator) (conditional_expression) (lambda) (subscript) (attribute)
  (list_comprehension) (set_comprehension) (dictionary_comprehension) (generator_expression)
  (await)
] @span.expression

(if_statement condition: (_) @span.condition)
(elif_clause condition: (_) @span.condition)
(while_statement condition: (_) @span.condition)
(if_clause (_) @span.condition)
(conditional_expression (_) . "if" . (_) @span.condition)

[(assignment) (augmented_assignment) (named_expression)] @span.assignment

[
  (expression_statement) (return_statement) (pass_statement) (break_statement)
  (continue_statement) (raise_statement) (assert_statement) (delete_statement)
  (global_statement) (nonlocal_statement)
] @span.statement

[
  (if_statement) (for_statement) (while_statement) (try_statement) (with_statement)
  (match_statement)
] @span.control

[(import_statement) (import_from_statement) (future_import_statement)] @span.import

(block) @span.block
[(function_definition) (lambda)] @span.function
(class_definition) @span.class
(type) @span.type
