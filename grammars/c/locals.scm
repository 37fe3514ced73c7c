; Scopes and bindings for C, resolved by codept/structure/resolve.py.
; Type names (type_identifier) and goto labels (statement_identifier) are never bound; a struct
; field is defined in its struct body (a scope of its own) and reached only as a member
; (`p->x`, `s.x`: field_identifier, never a reference).
; Default order (language.toml) is sequential: a local is visible from its declaration on.
;
; Limitations: the preprocessor is not run (a macro's body is opaque text, code in both arms of
; `#if`/`#else` is seen); a parameter declared through a pointer or array (`char **argv`) is
; captured with kind var, not parameter (same binding); tags (`struct s`) and ordinary names share
; no namespace because tags are never bound.

; -- scopes ------------------------------------------------------------------
; file-level functions and globals are used before their definition (prototypes in headers)
(translation_unit) @local.scope.hoisted
; a function definition is the scope of its parameters and body; its name binds in the file
(function_definition) @local.scope
[(compound_statement) (for_statement)] @local.scope
; a prototype is the scope of its parameter names (its function name binds outside it)
(declaration declarator: (function_declarator)) @local.scope
(declaration declarator: (pointer_declarator declarator: (function_declarator))) @local.scope
(declaration declarator: (pointer_declarator declarator: (pointer_declarator declarator: (function_declarator)))) @local.scope
(field_declaration declarator: (function_declarator)) @local.scope
; parameter names of function-pointer declarators stay inside them
(function_declarator declarator: (parenthesized_declarator) parameters: (parameter_list) @local.scope)
; a struct/union body: its fields (and, in C++, members used in any order by the methods)
(field_declaration_list) @local.scope.hoisted
(preproc_function_def) @local.scope

; -- definitions ---------------------------------------------------------------
(function_declarator declarator: (identifier) @local.definition.function)
(preproc_function_def name: (identifier) @local.definition.function)
(preproc_def name: (identifier) @local.definition.var)
(preproc_params (identifier) @local.definition.parameter)

(parameter_declaration declarator: (identifier) @local.definition.parameter)
; variables: `int x;`, `int x = 1;`, `int *p;`, `int a[3];`, `void (*fp)(int);`, at any nesting
(declaration declarator: (identifier) @local.definition.var)
(init_declarator declarator: (identifier) @local.definition.var)
(pointer_declarator declarator: (identifier) @local.definition.var)
(array_declarator declarator: (identifier) @local.definition.var)
(enumerator name: (identifier) @local.definition.field)
(field_declaration declarator: (field_identifier) @local.definition.field)
(pointer_declarator declarator: (field_identifier) @local.definition.field)
(array_declarator declarator: (field_identifier) @local.definition.field)

; An assignment (`x = 1`, `x += 1`, `x++`) is NOT a definition in C: it writes a variable
; declared elsewhere; its target is a reference to the declaration (one binding).

; -- references -----------------------------------------------------------------
(identifier) @local.reference
