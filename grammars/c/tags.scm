; Definitions with their doc comments for C (tree-sitter tags convention).
; @doc: the comment right before the definition; codept extends it to the run of comments adjacent
; to it (no blank line between). Only the LAST comment is captured (see grammars/README.md).
; A function returning a pointer nests its function_declarator in pointer_declarators.

((comment)? @doc
  .
  (function_definition
    declarator: [
      (function_declarator declarator: (identifier) @name)
      (pointer_declarator declarator: (function_declarator declarator: (identifier) @name))
      (pointer_declarator declarator: (pointer_declarator declarator: (function_declarator declarator: (identifier) @name)))
    ]) @definition.function)

; `struct s { ... };` at file level, `typedef struct { ... } s_t;`, the same for union and enum
((comment)? @doc
  .
  [
    (struct_specifier name: (type_identifier) @name body: (_))
    (union_specifier name: (type_identifier) @name body: (_))
    (enum_specifier name: (type_identifier) @name body: (_))
  ] @definition.class)
((comment)? @doc
  .
  (type_definition
    type: [(struct_specifier body: (_)) (union_specifier body: (_)) (enum_specifier body: (_))]
    declarator: (type_identifier) @name) @definition.class)
