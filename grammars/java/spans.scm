; Syntax spans for Java. Kinds: codept/structure/kinds.py SPAN_KINDS.

; names: variables, methods, fields, labels, and type names (type_identifier)
[(identifier) (type_identifier)] @span.identifier
[
  (decimal_integer_literal) (hex_integer_literal) (octal_integer_literal) (binary_integer_literal)
  (decimal_floating_point_literal) (hex_floating_point_literal) (true) (false) (null_literal)
] @span.literal
; string_literal covers text blocks ("""...""") too
[(string_literal) (character_literal) (template_expression)] @span.string
[(line_comment) (block_comment)] @span.comment

; calls: method calls, `new T(...)` (anonymous class bodies included), `super(...)` / `this(...)`
[(method_invocation) (object_creation_expression) (explicit_constructor_invocation)] @span.call
(argument_list) @span.arguments
; methods, constructors, record headers, lambdas: `(int a)`, `(a, b)`, and the bare `x` of `x -> ...`
[(formal_parameters) (inferred_parameters)] @span.parameters
(lambda_expression parameters: (identifier) @span.parameters)

[
  (binary_expression) (unary_expression) (ternary_expression) (lambda_expression)
  (array_access) (field_access) (instanceof_expression) (cast_expression) (method_reference)
  (array_creation_expression) (class_literal)
] @span.expression

; the tested expression, without the parentheses of `if (...)`
(if_statement condition: (parenthesized_expression (_) @span.condition))
(while_statement condition: (parenthesized_expression (_) @span.condition))
(do_statement condition: (parenthesized_expression (_) @span.condition))
(for_statement condition: (_) @span.condition)
(ternary_expression condition: (_) @span.condition)
(guard (_) @span.condition)

; assignments (`=`, `+=`, ...), `i++` / `--i`, declarations with an initializer
[(assignment_expression) (update_expression)] @span.assignment
(local_variable_declaration declarator: (variable_declarator value: (_))) @span.assignment
(field_declaration declarator: (variable_declarator value: (_))) @span.assignment
(constant_declaration declarator: (variable_declarator value: (_))) @span.assignment

[
  (expression_statement) (return_statement) (break_statement) (continue_statement)
  (throw_statement) (yield_statement) (assert_statement) (local_variable_declaration)
  (explicit_constructor_invocation)
] @span.statement

; switch is an expression node in this grammar (also as a statement)
[
  (if_statement) (for_statement) (enhanced_for_statement) (while_statement) (do_statement)
  (try_statement) (try_with_resources_statement) (switch_expression) (synchronized_statement)
] @span.control

(import_declaration) @span.import

[
  (block) (constructor_body) (class_body) (interface_body) (enum_body) (annotation_type_body)
  (switch_block)
] @span.block

[
  (method_declaration) (constructor_declaration) (compact_constructor_declaration)
  (lambda_expression)
] @span.function

[
  (class_declaration) (interface_declaration) (enum_declaration) (record_declaration)
  (annotation_type_declaration)
] @span.class

; the type of a declaration, parameter, cast, `new`, instanceof, catch, extends/implements/throws;
; type arguments inside a generic type are not spans of their own
(_ type: (_) @span.type)
(instanceof_expression right: (_) @span.type)
(spread_parameter (_) @span.type . (variable_declarator))
(catch_formal_parameter (catch_type) @span.type)
(type_pattern . (_) @span.type)
(record_pattern_component . (_) @span.type (identifier))
(superclass (_) @span.type)
(type_list (_) @span.type)
(throws (_) @span.type)
