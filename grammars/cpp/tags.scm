; inherits: c
; Definitions with their doc comments for C++ beyond those of C (grammars/c/tags.scm, inherited:
; free functions, structs, unions, enums, typedefs). Doxygen `///` and `/** */` runs are docs.

; methods defined in the class body, and out of it (`int S::f() { ... }`)
((comment)? @doc
  .
  (function_definition
    declarator: [
      (function_declarator declarator: (field_identifier) @name)
      (function_declarator declarator: (qualified_identifier name: (identifier) @name))
      (pointer_declarator declarator: (function_declarator declarator: (qualified_identifier name: (identifier) @name)))
      (reference_declarator (function_declarator declarator: (qualified_identifier name: (identifier) @name)))
    ]) @definition.method)

((comment)? @doc
  .
  (class_specifier name: (type_identifier) @name body: (_)) @definition.class)

; templates: the doc precedes `template <...>`
((comment)? @doc
  .
  (template_declaration
    [
      (class_specifier name: (type_identifier) @name body: (_))
      (struct_specifier name: (type_identifier) @name body: (_))
    ]) @definition.class)
((comment)? @doc
  .
  (template_declaration
    (function_definition
      declarator: [
        (function_declarator declarator: (identifier) @name)
        (pointer_declarator declarator: (function_declarator declarator: (identifier) @name))
        (reference_declarator (function_declarator declarator: (identifier) @name))
      ])) @definition.function)
