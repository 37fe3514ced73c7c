; Definitions with their comments for Bash (tree-sitter tags convention).
; @doc: the `#` comment lines right above the function (no blank line between).
((comment)? @doc . (function_definition name: (word) @name) @definition.function)
