; Syntax spans for Bash. Kinds: codept/structure/kinds.py SPAN_KINDS.

; names: variables, function names, command names
[(variable_name) (function_definition name: (word)) (command_name)] @span.identifier
(number) @span.literal
[(string) (raw_string) (ansi_c_string) (translated_string) (heredoc_body)] @span.string
(comment) @span.comment

; a command with its arguments (the command name is the callee)
(command) @span.call
; the arguments of a command: its words after the name, one span per argument
(command argument: (_) @span.arguments)

[
  (binary_expression) (unary_expression) (postfix_expression) (ternary_expression)
  (expansion) (command_substitution) (arithmetic_expansion) (process_substitution) (test_command)
] @span.expression

(if_statement condition: (_) @span.condition)
(while_statement condition: (_) @span.condition)
(c_style_for_statement condition: (_) @span.condition)
(case_item value: (_) @span.condition)

(variable_assignment) @span.assignment

[
  (command) (pipeline) (list) (declaration_command) (redirected_statement) (unset_command)
  (negated_command)
] @span.statement

[
  (if_statement) (for_statement) (c_style_for_statement) (while_statement) (case_statement)
] @span.control

; `source lib.sh` / `. lib.sh`
((command name: (command_name (word) @_source)) @span.import (#any-of? @_source "source" "."))

[(compound_statement) (do_group) (subshell)] @span.block

(function_definition) @span.function
