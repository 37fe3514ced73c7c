; Definitions with their PHPDoc for PHP (tree-sitter tags convention). @doc: the comments right
; before the declaration; codept keeps the adjacent run and only if it starts with `/**`.
; Attributes (#[...]) and modifiers are inside the declaration node, so they do not separate the
; doc from it.

((comment)? @doc
  .
  (function_definition name: (name) @name) @definition.function)

((comment)? @doc
  .
  (method_declaration name: (name) @name) @definition.method)

((comment)? @doc
  .
  [
    (class_declaration name: (name) @name)
    (interface_declaration name: (name) @name)
    (trait_declaration name: (name) @name)
    (enum_declaration name: (name) @name)
  ] @definition.class)
