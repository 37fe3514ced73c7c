; Scopes and bindings for Java, resolved by codept/structure/resolve.py.
; Only (identifier) nodes take part: type names are (type_identifier) and are never bound.
; Default order (language.toml) is sequential: a local is visible from its declaration on.

; -- scopes ------------------------------------------------------------------
; top-level types may refer to each other in any order
(program) @local.scope.hoisted
; members (fields, methods, nested types, enum constants) are visible anywhere in the body, and
; from nested methods, lambdas and classes
[(class_body) (interface_body) (enum_body) (annotation_type_body)] @local.scope.hoisted
; a type or method declaration is the scope of its header and body, so its own name binds in the
; enclosing body (definition kinds class/method bind one scope out)
[
  (class_declaration) (interface_declaration) (enum_declaration) (record_declaration)
  (annotation_type_declaration)
] @local.scope
[
  (method_declaration) (constructor_declaration) (compact_constructor_declaration)
  (annotation_type_element_declaration) (lambda_expression)
] @local.scope
; block locals; loop, catch and resource variables live in their statement
[
  (block) (constructor_body) (switch_block) (switch_rule) (for_statement) (enhanced_for_statement)
  (catch_clause) (try_with_resources_statement)
] @local.scope

; -- definitions ---------------------------------------------------------------
(class_declaration name: (identifier) @local.definition.class)
(interface_declaration name: (identifier) @local.definition.class)
(enum_declaration name: (identifier) @local.definition.class)
(record_declaration name: (identifier) @local.definition.class)
(annotation_type_declaration name: (identifier) @local.definition.class)

; Java keeps methods and variables in separate namespaces, the resolver has one: a field and a
; method of the same name share a binding, and an unqualified call `size()` after a local `size`
; binds to the local.
(method_declaration name: (identifier) @local.definition.method)
(annotation_type_element_declaration name: (identifier) @local.definition.method)
; a constructor's name (also `P { ... }` of a record) stays a reference: it resolves to its class

; fields, interface constants, enum constants, record components
(field_declaration declarator: (variable_declarator name: (identifier) @local.definition.field))
(constant_declaration declarator: (variable_declarator name: (identifier) @local.definition.field))
(enum_constant name: (identifier) @local.definition.field)
(record_declaration parameters: (formal_parameters
  (formal_parameter name: (identifier) @local.definition.field)))

; parameters of methods, constructors and lambdas; varargs; catch parameters
(formal_parameter name: (identifier) @local.definition.parameter)
(spread_parameter (variable_declarator name: (identifier) @local.definition.parameter))
(lambda_expression parameters: (identifier) @local.definition.parameter)
(inferred_parameters (identifier) @local.definition.parameter)
(catch_formal_parameter name: (identifier) @local.definition.parameter)

; local variables (also in a for header), enhanced-for variables, try-with-resources,
; pattern variables (`o instanceof String s`, `case Point(int x, var y)`)
(local_variable_declaration declarator: (variable_declarator name: (identifier) @local.definition.var))
(enhanced_for_statement name: (identifier) @local.definition.var)
(resource name: (identifier) @local.definition.var)
(instanceof_expression name: (identifier) @local.definition.var)
(type_pattern (identifier) @local.definition.var)
(record_pattern_component (identifier) @local.definition.var)

; statement labels: `outer: for (...) { ... break outer; }`
(labeled_statement . (identifier) @local.definition)

; An assignment (`x = 1`, `x += 1`, `x++`) is NOT a definition in Java: it writes a variable
; declared elsewhere, often in an enclosing block, and binding it in its own block would split the
; variable in two. Its target is a reference to the declaration: one binding.

; -- references -----------------------------------------------------------------
(identifier) @local.reference

; names reached through an object or a keyword are never locals
(field_access field: (identifier) @local.member)
(method_invocation object: (_) name: (identifier) @local.member)
(method_reference "::" . (identifier) @local.member)
(element_value_pair key: (identifier) @local.member)
; qualified names: package and import paths, `@a.b.Ann`, module names (the imported name of an
; import is its definition, which the member capture does not remove)
(scoped_identifier (identifier) @local.member)
(package_declaration (identifier) @local.member)
(module_declaration name: (identifier) @local.member)
(module_body (_ (identifier) @local.member))

; imports bind their last name (`import java.util.List;`, `import static a.B.max;`), not `.*`
(import_declaration (scoped_identifier name: (identifier) @local.definition.import) .)
(import_declaration . (identifier) @local.definition.import .)
