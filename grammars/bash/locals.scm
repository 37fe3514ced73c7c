; Scopes and bindings for Bash, resolved by codept/structure/resolve.py.
;
; Bash variables are global unless declared `local` (or `declare`/`typeset`) in a function, and
; scoping is dynamic. Here a function body is a `reuse` scope: assigning a variable that the
; script defines anywhere joins that (global) binding; a variable assigned only inside one function
; binds there; a `local` declaration is captured with kind parameter, the kind that never joins an
; outer binding. A command name is a reference (to a function of the file, else free: an
; external command or builtin).
;
; Limitations: dynamic scoping (a function reading its caller's locals) is not modelled;
; `eval`, `declare -n` references, `read`'s variables other than plain names, arrays' elements;
; names inside arithmetic words other than a C-style for header.

; -- scopes ------------------------------------------------------------------
(program) @local.scope.hoisted
(function_definition) @local.scope.reuse

; -- definitions ---------------------------------------------------------------
(function_definition name: (word) @local.definition.function)
(variable_assignment name: (variable_name) @local.definition.var)
(for_statement variable: (variable_name) @local.definition.var)
(declaration_command ["local" "declare" "typeset"] (variable_assignment name: (variable_name) @local.definition.parameter))
(declaration_command ["local" "declare" "typeset"] (variable_name) @local.definition.parameter)
; `read -r name ...` assigns its plain-name arguments
((command
   name: (command_name (word) @_read)
   argument: (word) @local.definition.var)
 (#eq? @_read "read") (#match? @local.definition.var "^[A-Za-z_][A-Za-z0-9_]*$"))

; -- references -----------------------------------------------------------------
; `$x`, `${x}`, `${x:-d}`, `${a[@]}`; not `$1` or `$@`
((variable_name) @local.reference (#match? @local.reference "^[A-Za-z_]"))
; control words written as commands are no names
((command_name (word) @local.reference)
 (#not-match? @local.reference "^(break|continue|return|exit|:|[.]|source|true|false)$"))
(c_style_for_statement condition: (binary_expression (word) @local.reference))
(c_style_for_statement update: (postfix_expression (word) @local.reference))
