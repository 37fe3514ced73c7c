; Definitions with their docstrings for Python (tree-sitter tags convention).

(function_definition
  name: (identifier) @name
  body: (block . (expression_statement . (string) @doc .)?)) @definition.function

(class_definition
  body: (block
    [
      (function_definition
        name: (identifier) @name
        body: (block . (expression_statement . (string) @doc .)?)) @definition.method
      (decorated_definition
        definition: (function_definition
          name: (identifier) @name
          body: (block . (expression_statement . (string) @doc .)?)) @definition.method)
    ]))

(class_definition
  name: (identifier) @name
  body: (block . (expression_statement . (string) @doc .)?)) @definition.class
