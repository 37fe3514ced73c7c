; Scopes and bindings for TypeScript (tsx/locals.scm inherits them), resolved by
; codept/structure/resolve.py. The JavaScript rules (grammars/javascript/locals.scm) with
; TypeScript's node names; type names (type_identifier) are never references, and a type-only
; name (interface, type alias, type parameter) is never bound: types and values are separate
; namespaces, and only values are resolved.
;
; `var` and function declarations belong to the enclosing function, `let`/`const`/`class`/`using`
; to the enclosing block. A block is therefore a scope only when it declares something
; block-scoped itself (directly); a block holding only `var`s is no scope, so its `var`s bind in
; the function (or in the nearest enclosing block that is a scope: see the limitations below).
; Plain and augmented assignments (`x = 1`, `x += 1`) never declare in JavaScript: their targets
; are references to the declared variable (or free: implicit globals).
;
; Limitations: a `var` in a block that also declares a `let`/`const`/class binds in that block,
; not in the function; a destructuring assignment without a declaration (`[a, b] = [b, a]`)
; defines its names in the innermost scope; sloppy-mode function declarations in blocks
; (Annex B) are block-scoped here; `with` is ignored; declaration merging (a namespace and a
; class of one name) is one binding; `declare` ambient declarations bind like real ones.

; -- scopes ------------------------------------------------------------------
[
  (function_declaration) (generator_function_declaration) (function_expression)
  (generator_function) (arrow_function) (method_definition)
] @local.scope
; the class name binds outside (declaration) or inside (named class expression)
[(class_declaration) (abstract_class_declaration) (class)] @local.scope
(class_static_block) @local.scope
; signatures (`f(a: T): U;` in interfaces, overloads, abstract methods) hold their parameters
[(function_signature) (method_signature) (abstract_method_signature) (call_signature)
 (construct_signature) (function_type) (constructor_type)] @local.scope
; namespaces and ambient modules
[(internal_module) (module)] @local.scope

; blocks that declare block-scoped names
(statement_block
  [
    (lexical_declaration) (class_declaration) (abstract_class_declaration) (enum_declaration)
    (function_declaration) (generator_function_declaration)
  ]) @local.scope
(switch_body
  (switch_case
    [
      (lexical_declaration) (class_declaration)
      (function_declaration) (generator_function_declaration)
    ])) @local.scope
(switch_body
  (switch_default
    [
      (lexical_declaration) (class_declaration)
      (function_declaration) (generator_function_declaration)
    ])) @local.scope
; loop variables of `for (let ...)` / `for (const x of ...)`; `for (var ...)` needs no scope
(for_statement initializer: (lexical_declaration)) @local.scope
(for_in_statement kind: ["let" "const"]) @local.scope
(catch_clause parameter: (_)) @local.scope

; -- definitions ---------------------------------------------------------------
; declarations bind in the scope enclosing the function/class node
(function_declaration name: (identifier) @local.definition.function)
(generator_function_declaration name: (identifier) @local.definition.function)
(class_declaration name: (type_identifier) @local.definition.class)
(abstract_class_declaration name: (type_identifier) @local.definition.class)
(enum_declaration name: (identifier) @local.definition.class)
(internal_module name: (identifier) @local.definition.class)
(function_signature name: (identifier) @local.definition.function)
; the name of a function/class expression is visible only inside it
(function_expression name: (identifier) @local.definition)
(generator_function name: (identifier) @local.definition)
(class name: (type_identifier) @local.definition)

; parameters
(required_parameter pattern: (identifier) @local.definition.parameter)
(optional_parameter pattern: (identifier) @local.definition.parameter)
(arrow_function parameter: (identifier) @local.definition.parameter)
; `constructor(private readonly x: T)` also declares a field; the parameter is what the body reads

; variables (var, let, const, using)
(variable_declarator name: (identifier) @local.definition.var)

; destructuring, at any depth: parameters, declarators, catch and loop variables
(object_pattern (shorthand_property_identifier_pattern) @local.definition.var)
(object_assignment_pattern left: (shorthand_property_identifier_pattern) @local.definition.var)
(pair_pattern value: (identifier) @local.definition.var)
(array_pattern (identifier) @local.definition.var)
(rest_pattern (identifier) @local.definition.var)
(assignment_pattern left: (identifier) @local.definition.var)

; `for (const x of xs)` declares x; `for (x of xs)` assigns an existing x (a reference)
(for_in_statement kind: _ left: (identifier) @local.definition.var)
(catch_clause parameter: (identifier) @local.definition.var)

; imports: default, namespace, named (the alias if there is one)
(import_clause (identifier) @local.definition.import)
(namespace_import (identifier) @local.definition.import)
(import_specifier !alias name: (identifier) @local.definition.import)
(import_specifier alias: (identifier) @local.definition.import)

; -- references -----------------------------------------------------------------
(identifier) @local.reference
; `{a}` in an object literal reads a
(shorthand_property_identifier) @local.reference

; property names (`obj.x`, `{x: 1}`, methods, fields) are property_identifier nodes and never
; captured; identifiers that still are no local names:
(import_specifier name: (identifier) @local.member alias: (_))
(export_specifier alias: (identifier) @local.member)
(namespace_export (identifier) @local.member)
(export_statement
  (export_clause (export_specifier name: (identifier) @local.member))
  source: (_))
