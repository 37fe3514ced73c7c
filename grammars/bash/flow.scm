; Control flow and assignments for Bash, read by codept/structure/dataflow.py.
; Vocabulary: codept/structure/kinds.py FLOW_KINDS, grammars/README.md.
;
; Not covered: the then-part of an `if` is no node of the grammar (its commands are children of
; the if_statement), so it runs as part of the condition and elif/else are arms after it (an
; over-approximation: a definition in the then-part reaches the else-part); `set -e`; a
; subshell's writes (they cannot reach the parent, here they do); `return`/`break N` levels.

(function_definition) @flow.function

[(for_statement) (c_style_for_statement) (while_statement)] @flow.loop
(c_style_for_statement initializer: (_) @flow.init)
(c_style_for_statement update: (_) @flow.step)

(if_statement) @flow.branch
[(elif_clause) (else_clause)] @flow.arm
; `a && b`, `a || b`: b runs or not
(list) @flow.branch
(list ["&&" "||"] . (_) @flow.arm)
(case_statement) @flow.switch
(case_item) @flow.arm
(case_item value: (extglob_pattern) @_star (#eq? @_star "*")) @flow.default

((command name: (command_name (word) @_w)) @flow.exit (#any-of? @_w "return" "exit"))
((command name: (command_name (word) @_w)) @flow.break (#eq? @_w "break"))
((command name: (command_name (word) @_w)) @flow.continue (#eq? @_w "continue"))

(variable_assignment name: (_) @flow.target value: (_) @flow.value)
(for_statement variable: (_) @flow.target . "in" . (_) @flow.collection)
(postfix_expression (variable_name) @flow.update)
(postfix_expression (word) @flow.update)
