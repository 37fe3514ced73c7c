; Scopes and bindings for Go, resolved by codept/structure/resolve.py.
;
; The default order is sequential (language.toml): a local is visible from its declaration on.
; The package level is hoisted: functions, types, vars and consts of a file see each other
; wherever they are declared.
;
; Not covered: the blank identifier `_` is an ordinary identifier to the grammar and is bound like
; a name (excluding it needs a text predicate, and predicates cost a re-read of the source per
; test under codept's callable parse); `x := x + 1` binds the right-hand x to the new variable
; (resolve.py); type names are type_identifiers and are not bound.

; -- scopes ------------------------------------------------------------------
(source_file) @local.scope.hoisted
[(function_declaration) (method_declaration) (func_literal)] @local.scope
(block) @local.scope
; the init statement of if/for/switch declares variables scoped to the whole statement
[
  (if_statement) (for_statement) (expression_switch_statement) (type_switch_statement)
] @local.scope
; each case clause is an implicit block
[(expression_case) (default_case) (type_case) (communication_case)] @local.scope
; parameter names in function types and interface methods, type parameters of generic types:
; local to the type, never package-level names
[(function_type) (method_elem) (type_spec) (type_alias)] @local.scope

; -- definitions ---------------------------------------------------------------
; function names bind in the package scope (the declaration is the scope of its body); method
; names are field_identifiers, reached only through a selector: not bound (like fields)
(function_declaration name: (identifier) @local.definition.function)

; receivers, parameters, named results, variadic and type parameters
(parameter_declaration name: (identifier) @local.definition.parameter)
(variadic_parameter_declaration name: (identifier) @local.definition.parameter)
(type_parameter_declaration name: (identifier) @local.definition.parameter)

; `a, b := ...`, var and const specs
(short_var_declaration left: (expression_list (identifier) @local.definition.var))
(var_spec name: (identifier) @local.definition.var)
; (the grammar's `name:` field of const_spec stops at the first comma: match direct children)
(const_spec (identifier) @local.definition.var)

; `for k, v := range m`, `case v, ok := <-ch:` (with `=` they only assign: references)
(range_clause left: (expression_list (identifier) @local.definition.var) ":=")
(receive_statement left: (expression_list (identifier) @local.definition.var) ":=")
; `switch v := x.(type)`
(type_switch_statement alias: (expression_list (identifier) @local.definition.var))

; `import f "fmt"` binds f; a plain `import "fmt"` binds its package name implicitly (not in the
; source text): its uses stay free, one binding per name
(import_spec name: (package_identifier) @local.definition.import)

; -- references -----------------------------------------------------------------
; `x = y` and `x += y` assign to an existing variable: references only (in Go they declare
; nothing, and a definition would open a new binding in an inner block)
(identifier) @local.reference
; the package of a qualified type `f.Reader` refers to an import
(qualified_type package: (package_identifier) @local.reference)

; field names in struct literals `T{Name: v}` (also elided `[]T{{Name: v}}`) are members;
; keys of map/slice/array literals are expressions
(composite_literal
  type: [(type_identifier) (qualified_type) (generic_type) (struct_type)]
  body: (literal_value (keyed_element key: (literal_element (identifier) @local.member))))
(literal_element
  (literal_value (keyed_element key: (literal_element (identifier) @local.member))))
