; Syntax spans for Lua. Kinds: codept/structure/kinds.py SPAN_KINDS.

(identifier) @span.identifier
[(number) (true) (false) (nil)] @span.literal
(string) @span.string
(comment) @span.comment

(function_call) @span.call
(arguments) @span.arguments
(parameters) @span.parameters

[
  (binary_expression) (unary_expression) (dot_index_expression) (bracket_index_expression)
  (method_index_expression) (function_definition) (parenthesized_expression)
] @span.expression

[
  (if_statement condition: (_) @span.condition) (elseif_statement condition: (_) @span.condition)
  (while_statement condition: (_) @span.condition) (repeat_statement condition: (_) @span.condition)
]

(assignment_statement) @span.assignment

[
  (variable_declaration) (assignment_statement) (return_statement) (break_statement)
  (goto_statement)
] @span.statement
; a call used as a statement
[(chunk (function_call) @span.statement) (block (function_call) @span.statement)]

[(if_statement) (for_statement) (while_statement) (repeat_statement) (do_statement)] @span.control

((function_call name: (identifier) @_require) @span.import (#eq? @_require "require"))

(block) @span.block

[(function_declaration) (function_definition)] @span.function
