; Definitions with their doc comments for Go (tree-sitter tags convention). A doc is the run of
; // comments right above the declaration (codept keeps the adjacent run, no blank line between).

(
  (comment)* @doc
  .
  (function_declaration
    name: (identifier) @name) @definition.function
)

(
  (comment)* @doc
  .
  (method_declaration
    name: (field_identifier) @name) @definition.method
)

; `type T struct {...}`: the doc precedes the whole declaration
(
  (comment)* @doc
  .
  (type_declaration
    (type_spec
      name: (type_identifier) @name
      type: [(struct_type) (interface_type)])) @definition.class
  (#not-match? @definition.class "^type\\s*\\(")
)

; `type ( ... )`: each spec, documented by the comments right above it inside the group (two
; patterns: `(comment)* .` inside a parent would demand the spec be the first child when empty)
(type_declaration
  "("
  (comment)+ @doc
  .
  (type_spec
    name: (type_identifier) @name
    type: [(struct_type) (interface_type)]) @definition.class)

(type_declaration
  "("
  (type_spec
    name: (type_identifier) @name
    type: [(struct_type) (interface_type)]) @definition.class)
