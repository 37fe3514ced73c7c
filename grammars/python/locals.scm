; Scopes and bindings for Python, resolved by codept/structure/resolve.py.

; -- scopes ------------------------------------------------------------------
; the module: the scope `global x` binds in (a scope of its own, below the file's)
(module) @local.scope
(function_definition) @local.scope
(lambda) @local.scope
(class_definition) @local.scope.class
; comprehensions: their loop variables are their own, a `:=` inside binds in the enclosing function
[
  (list_comprehension) (set_comprehension) (dictionary_comprehension) (generator_expression)
] @local.scope.inline

; -- definitions ---------------------------------------------------------------
(function_definition name: (identifier) @local.definition.function)
(class_definition name: (identifier) @local.definition.class)

; parameters (plain, default, typed, *args, **kwargs), also of lambdas
(parameters (identifier) @local.definition.parameter)
(lambda_parameters (identifier) @local.definition.parameter)
(default_parameter name: (identifier) @local.definition.parameter)
(typed_parameter . (identifier) @local.definition.parameter)
(typed_default_parameter name: (identifier) @local.definition.parameter)
(list_splat_pattern (identifier) @local.definition.parameter)
(dictionary_splat_pattern (identifier) @local.definition.parameter)

; assignment targets, also nested in tuples/lists and starred
(assignment left: (identifier) @local.definition.var)
(assignment left: (pattern_list (identifier) @local.definition.var))
(assignment left: (tuple_pattern (identifier) @local.definition.var))
(assignment left: (list_pattern (identifier) @local.definition.var))
(pattern_list (list_splat_pattern (identifier) @local.definition.var))
; nested targets: `for i, (a, b) in ...`, `(a, [b, c]) = ...`
[(tuple_pattern (tuple_pattern (identifier) @local.definition.var))
 (tuple_pattern (list_pattern (identifier) @local.definition.var))
 (list_pattern (tuple_pattern (identifier) @local.definition.var))
 (list_pattern (list_pattern (identifier) @local.definition.var))
 (pattern_list (tuple_pattern (identifier) @local.definition.var))
 (pattern_list (list_pattern (identifier) @local.definition.var))]
; `c += i` defines c again AND reads it: both captures, one binding
(augmented_assignment left: (identifier) @local.definition.var)
(named_expression name: (identifier) @local.definition.outer)

; loop and comprehension variables
(for_statement left: (identifier) @local.definition.var)
(for_statement left: (pattern_list (identifier) @local.definition.var))
(for_statement left: (tuple_pattern (identifier) @local.definition.var))
(for_in_clause left: (identifier) @local.definition.var)
(for_in_clause left: (pattern_list (identifier) @local.definition.var))
(for_in_clause left: (tuple_pattern (identifier) @local.definition.var))

; with ... as x, except ... as e
(as_pattern alias: (as_pattern_target (identifier) @local.definition.var))

; imports bind their first (or aliased) name
(import_statement name: (dotted_name . (identifier) @local.definition.import))
(aliased_import alias: (identifier) @local.definition.import)
(import_from_statement name: (dotted_name (identifier) @local.definition.import))

; `nonlocal x` / `global x`: x in this function is the enclosing function's / the module's
(nonlocal_statement (identifier) @local.nonlocal)
(global_statement (identifier) @local.global)

; -- references -----------------------------------------------------------------
(identifier) @local.reference

; names reached through an object or keyword are never locals
(attribute attribute: (identifier) @local.member)
(keyword_argument name: (identifier) @local.member)
(import_from_statement module_name: (dotted_name (identifier) @local.member))
(import_from_statement module_name: (relative_import (dotted_name (identifier) @local.member)))
(aliased_import name: (dotted_name (identifier) @local.member))
(import_statement name: (dotted_name (identifier) (identifier) @local.member))
