; Definitions with their Javadoc for Java (tree-sitter tags convention).
; @doc: the block comments right before the declaration; codept keeps the run adjacent to it that
; starts with `/**` (a line comment or a blank line in between: no doc). Annotations (@Override)
; are inside the declaration's modifiers, so the Javadoc still precedes the declaration node.
; Only the LAST comment is captured: codept extends the run upwards itself, in linear time (a
; `(block_comment)*` pattern costs time quadratic in the number of consecutive comments).

((block_comment)? @doc
  .
  [
    (class_declaration name: (identifier) @name)
    (interface_declaration name: (identifier) @name)
    (enum_declaration name: (identifier) @name)
    (record_declaration name: (identifier) @name)
    (annotation_type_declaration name: (identifier) @name)
  ] @definition.class)

((block_comment)? @doc
  .
  [
    (method_declaration name: (identifier) @name)
    (constructor_declaration name: (identifier) @name)
    (compact_constructor_declaration name: (identifier) @name)
    (annotation_type_element_declaration name: (identifier) @name)
  ] @definition.method)
