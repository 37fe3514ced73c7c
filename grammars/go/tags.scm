; Definitions with their doc comments for Go (tree-sitter tags convention). A doc is the run of
; // comments right above the declaration: the query captures the last comment only, codept
; extends the run through the previous adjacent comments (no blank line between) in linear time;
; a `(comment)*` pattern would be quadratic in the length of a comment run.

(
  (comment)? @doc
  .
  (function_declaration
    name: (identifier) @name) @definition.function
)

(
  (comment)? @doc
  .
  (method_declaration
    name: (field_identifier) @name) @definition.method
)

; Struct and interface types. A declaration whose only named child is the spec (`type T struct
; {...}`) is the definition as a whole: its doc precedes the `type` keyword.
(
  (comment)? @doc
  .
  (type_declaration
    .
    (type_spec
      name: (type_identifier) @name
      type: [(struct_type) (interface_type)])
    .) @definition.class
)

; In a group `type ( ... )` each spec with a named sibling is a definition, documented by the
; comments right above it inside the group. (`(comment)? .` inside a parent demands that the
; spec be the first named child when no comment is there: hence one pattern per kind of neighbour.)
(type_declaration
  (comment) @doc
  .
  (type_spec
    name: (type_identifier) @name
    type: [(struct_type) (interface_type)]) @definition.class)

(type_declaration
  [(type_spec) (type_alias)]
  .
  (type_spec
    name: (type_identifier) @name
    type: [(struct_type) (interface_type)]) @definition.class)

(type_declaration
  .
  (type_spec
    name: (type_identifier) @name
    type: [(struct_type) (interface_type)]) @definition.class
  .
  (_))
