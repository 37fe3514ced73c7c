; Syntax spans for TypeScript (tsx/spans.scm inherits them). Kinds: codept/structure/kinds.py SPAN_KINDS.

[
  (identifier) (property_identifier) (private_property_identifier)
  (shorthand_property_identifier) (shorthand_property_identifier_pattern) (statement_identifier)
  (type_identifier)
] @span.identifier
[(number) (true) (false) (null) (undefined) (regex)] @span.literal
[(string) (template_string)] @span.string
[(comment) (hash_bang_line)] @span.comment

[(call_expression) (new_expression)] @span.call
(arguments) @span.arguments
[(formal_parameters) (type_parameters)] @span.parameters
; `x => x`: the single unparenthesized parameter is the whole list
(arrow_function parameter: (identifier) @span.parameters)

[
  (binary_expression) (unary_expression) (update_expression) (ternary_expression)
  (member_expression) (subscript_expression) (await_expression) (yield_expression)
  (sequence_expression) (arrow_function) (as_expression) (satisfies_expression) (non_null_expression)
] @span.expression

; the tested expression only, without the parentheses (and without a comment inside them)
(if_statement condition: (parenthesized_expression [(expression) (sequence_expression)] @span.condition))
(while_statement condition: (parenthesized_expression [(expression) (sequence_expression)] @span.condition))
(do_statement condition: (parenthesized_expression [(expression) (sequence_expression)] @span.condition))
(for_statement condition: [(expression) (sequence_expression)] @span.condition)
(ternary_expression condition: (_) @span.condition)
(switch_case value: (_) @span.condition)

[(assignment_expression) (augmented_assignment_expression)] @span.assignment
(variable_declarator value: (_)) @span.assignment
(public_field_definition value: (_)) @span.assignment

[
  (expression_statement) (return_statement) (break_statement) (continue_statement)
  (throw_statement) (debugger_statement) (lexical_declaration) (variable_declaration)
  (type_alias_declaration)
] @span.statement
; `export { a }`, `export default x;` (an exported declaration is that declaration)
(export_statement !declaration !source) @span.statement

[
  (if_statement) (for_statement) (for_in_statement) (while_statement) (do_statement)
  (try_statement) (switch_statement) (with_statement)
] @span.control

(import_statement) @span.import
; re-exports name another module: `export { a } from "m"`, `export * from "m"`
(export_statement source: (_)) @span.import
; CommonJS `require("m")` and dynamic `import("m")`
(call_expression
  function: (identifier) @_require
  (#eq? @_require "require")) @span.import
(call_expression function: (import)) @span.import

[(statement_block) (class_body) (switch_body) (interface_body) (enum_body) (object_type)] @span.block
[
  (function_declaration) (generator_function_declaration) (function_expression)
  (generator_function) (arrow_function) (method_definition) (function_signature)
  (method_signature) (abstract_method_signature)
] @span.function
[
  (class_declaration) (abstract_class_declaration) (class) (interface_declaration) (enum_declaration)
  (internal_module) (module)
] @span.class

; a type annotation's type (`x: T`, `(): T`), a type alias's value, `as T`, `satisfies T` (not the
; `<T>x` assertion: no node of the TSX grammar, which inherits this file)
(type_annotation (_) @span.type)
(type_alias_declaration value: (_) @span.type)
(as_expression (_) @span.type .)
(satisfies_expression (_) @span.type .)

