; Definitions with their comments for Lua (tree-sitter tags convention).
; @doc: the `--` run right above the function (LDoc `---` blocks included).

((comment)? @doc
  .
  (function_declaration
    name: [(identifier) @name (dot_index_expression field: (identifier) @name)]) @definition.function)
((comment)? @doc
  .
  (function_declaration name: (method_index_expression method: (identifier) @name)) @definition.method)
; `M.f = function (...) ... end`, `local f = function ... end`
((comment)? @doc
  .
  (assignment_statement
    (variable_list . [(identifier) @name (dot_index_expression field: (identifier) @name)] .)
    (expression_list . (function_definition) .)) @definition.function)
((comment)? @doc
  .
  (variable_declaration
    (assignment_statement
      (variable_list . (identifier) @name .)
      (expression_list . (function_definition) .))) @definition.function)
