; Definitions with their XML doc comments for C# (tree-sitter tags convention).
; @doc: the `///` run right above the declaration (attributes are inside the declaration node, so
; the comment still precedes it). Only the LAST comment is captured (see grammars/README.md).

((comment)? @doc
  .
  [
    (class_declaration name: (identifier) @name)
    (struct_declaration name: (identifier) @name)
    (interface_declaration name: (identifier) @name)
    (enum_declaration name: (identifier) @name)
    (record_declaration name: (identifier) @name)
  ] @definition.class)

((comment)? @doc
  .
  [
    (method_declaration name: (identifier) @name)
    (constructor_declaration name: (identifier) @name)
  ] @definition.method)

((comment)? @doc
  .
  (local_function_statement name: (identifier) @name) @definition.function)
