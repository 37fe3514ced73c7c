; Scopes and bindings for C#, resolved by codept/structure/resolve.py.
; Type names are identifiers in this grammar: a use of a type (`new Shape()`, `Shape s`) is a
; reference to the class of that name when the file declares it, else free. Default order
; (language.toml) is sequential: a local is visible from its declaration on.
;
; Limitations: members used as bare names bind to the member of the enclosing type declared in
; this file (inherited members and partial classes elsewhere are free); overloads share a
; binding; names after `.` are members, never bound; `using static` imports are not resolved.

; -- scopes ------------------------------------------------------------------
(compilation_unit) @local.scope.hoisted
; namespace, class, struct, interface bodies: members in any order
(declaration_list) @local.scope.hoisted
[
  (class_declaration) (struct_declaration) (interface_declaration) (enum_declaration)
  (record_declaration)
] @local.scope
[
  (method_declaration) (constructor_declaration) (local_function_statement) (lambda_expression)
  (anonymous_method_expression) (accessor_declaration) (destructor_declaration)
  (operator_declaration)
] @local.scope
[
  (block) (for_statement) (foreach_statement) (catch_clause) (using_statement) (switch_section)
] @local.scope

; -- definitions ---------------------------------------------------------------
[
  (class_declaration name: (identifier) @local.definition.class)
  (struct_declaration name: (identifier) @local.definition.class)
  (interface_declaration name: (identifier) @local.definition.class)
  (enum_declaration name: (identifier) @local.definition.class)
  (record_declaration name: (identifier) @local.definition.class)
  (delegate_declaration name: (identifier) @local.definition.class)
]
(method_declaration name: (identifier) @local.definition.method)
(local_function_statement name: (identifier) @local.definition.function)
; a constructor's name stays a reference: it resolves to its class

(field_declaration (variable_declaration (variable_declarator name: (identifier) @local.definition.field)))
(event_field_declaration (variable_declaration (variable_declarator name: (identifier) @local.definition.field)))
(property_declaration name: (identifier) @local.definition.field)
(enum_member_declaration name: (identifier) @local.definition.field)
(record_declaration (parameter_list (parameter name: (identifier) @local.definition.field)))

(parameter name: (identifier) @local.definition.parameter)
(implicit_parameter) @local.definition.parameter
(type_parameter name: (identifier) @local.definition)

(local_declaration_statement (variable_declaration (variable_declarator name: (identifier) @local.definition.var)))
(for_statement initializer: (variable_declaration (variable_declarator name: (identifier) @local.definition.var)))
(using_statement (variable_declaration (variable_declarator name: (identifier) @local.definition.var)))
(foreach_statement left: (identifier) @local.definition.var)
(catch_declaration name: (identifier) @local.definition.var)
(declaration_pattern name: (identifier) @local.definition.var)
(declaration_expression name: (identifier) @local.definition.var)
(var_pattern (identifier) @local.definition.var)

; An assignment (`x = 1`, `x += 1`, `x++`) is NOT a definition in C#: it writes a variable
; declared elsewhere; its target is a reference to the declaration (one binding).

; -- references -----------------------------------------------------------------
(identifier) @local.reference

; names reached through an object, a namespace or a keyword
(member_access_expression name: (identifier) @local.member)
(member_binding_expression name: (identifier) @local.member)
(qualified_name name: (identifier) @local.member)
(using_directive (identifier) @local.member)
(using_directive (qualified_name (identifier) @local.member))
(namespace_declaration name: (_) @local.member)
(file_scoped_namespace_declaration name: (_) @local.member)
(namespace_declaration name: (qualified_name (identifier) @local.member))
(argument name: (identifier) @local.member)
(initializer_expression (assignment_expression left: (identifier) @local.member))
(attribute name: (identifier) @local.member)
(attribute name: (qualified_name (identifier) @local.member))
(labeled_statement (identifier) @local.member)
(goto_statement (identifier) @local.member)
(using_directive (qualified_name qualifier: (qualified_name qualifier: (identifier) @local.member)))
(using_directive (qualified_name qualifier: (qualified_name qualifier: (qualified_name qualifier: (identifier) @local.member))))
