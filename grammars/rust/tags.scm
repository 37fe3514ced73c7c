; Definitions with their doc comments for Rust (tree-sitter tags convention).
; @doc: the `///` run right above the item; attributes (`#[derive(..)]`) may stand between
; (language.toml doc_skip_kinds). Functions in `impl` and `trait` bodies are methods. Inside a
; parent pattern `(comment)? @doc . (x)` loses undocumented x after a documented one (tree-sitter
; 0.26), so those patterns are written twice.

(
  [(line_comment) (block_comment)]? @doc
  .
  (attribute_item)*
  .
  (function_item name: (identifier) @name) @definition.function)

(impl_item
  body: (declaration_list
    [(line_comment) (block_comment)] @doc
    .
    (attribute_item)*
    .
    (function_item name: (identifier) @name) @definition.method))
(impl_item body: (declaration_list (function_item name: (identifier) @name) @definition.method))
(trait_item
  body: (declaration_list
    [(line_comment) (block_comment)] @doc
    .
    (attribute_item)*
    .
    [(function_item name: (identifier) @name) (function_signature_item name: (identifier) @name)] @definition.method))
(trait_item
  body: (declaration_list
    [(function_item name: (identifier) @name) (function_signature_item name: (identifier) @name)] @definition.method))

(
  [(line_comment) (block_comment)]? @doc
  .
  (attribute_item)*
  .
  [
    (struct_item name: (type_identifier) @name)
    (enum_item name: (type_identifier) @name)
    (union_item name: (type_identifier) @name)
    (trait_item name: (type_identifier) @name)
  ] @definition.class)
