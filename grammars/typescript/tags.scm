; Definitions with their JSDoc/TSDoc for TypeScript (tree-sitter tags convention); the patterns of
; grammars/javascript/tags.scm with TypeScript's node names, plus interfaces, enums, abstract
; classes and namespaces as classes (tsx/tags.scm inherits them).
;
; @doc is the run of comments right above the definition; codept keeps it only when adjacent (no
; blank line) and starting with `/**`. The doc of an exported declaration precedes `export`, so
; exported ones are tagged on the export_statement, and the other patterns name their parent
; (program, statement_block) so that they do not tag the declaration inside it a second time.
;
; Inside a parent pattern, `(comment)? @doc . (x)` loses every undocumented x after the first
; documented one (tree-sitter 0.26), so each is written twice: `(comment) @doc . (x)` and `(x)`;
; codept keeps the longest doc of a definition.

; -- functions: `function f`, `function* f`, and `const f = () => ...` / `var f = function ...`
;    when the declaration declares only f ----------------------------------------------------
(program
  (comment) @doc
  .
  [
    (function_declaration name: (identifier) @name)
    (generator_function_declaration name: (identifier) @name)
    (lexical_declaration
      . (variable_declarator name: (identifier) @name value: [(arrow_function) (function_expression) (generator_function)]) .)
    (variable_declaration
      . (variable_declarator name: (identifier) @name value: [(arrow_function) (function_expression) (generator_function)]) .)
  ] @definition.function)
(program
  [
    (function_declaration name: (identifier) @name)
    (generator_function_declaration name: (identifier) @name)
    (lexical_declaration
      . (variable_declarator name: (identifier) @name value: [(arrow_function) (function_expression) (generator_function)]) .)
    (variable_declaration
      . (variable_declarator name: (identifier) @name value: [(arrow_function) (function_expression) (generator_function)]) .)
  ] @definition.function)
(statement_block
  (comment) @doc
  .
  [
    (function_declaration name: (identifier) @name)
    (generator_function_declaration name: (identifier) @name)
    (lexical_declaration
      . (variable_declarator name: (identifier) @name value: [(arrow_function) (function_expression) (generator_function)]) .)
    (variable_declaration
      . (variable_declarator name: (identifier) @name value: [(arrow_function) (function_expression) (generator_function)]) .)
  ] @definition.function)
(statement_block
  [
    (function_declaration name: (identifier) @name)
    (generator_function_declaration name: (identifier) @name)
    (lexical_declaration
      . (variable_declarator name: (identifier) @name value: [(arrow_function) (function_expression) (generator_function)]) .)
    (variable_declaration
      . (variable_declarator name: (identifier) @name value: [(arrow_function) (function_expression) (generator_function)]) .)
  ] @definition.function)
(
  (comment)? @doc
  .
  (export_statement
    declaration: [
      (function_declaration name: (identifier) @name)
      (generator_function_declaration name: (identifier) @name)
      (lexical_declaration
        . (variable_declarator name: (identifier) @name value: [(arrow_function) (function_expression) (generator_function)]) .)
    ]) @definition.function)

; several declarators (`const f = () => 1, g = () => 2`): each declarator, without a doc
(_
  (variable_declarator)
  .
  (variable_declarator
    name: (identifier) @name
    value: [(arrow_function) (function_expression) (generator_function)]) @definition.function)
(_
  .
  (variable_declarator
    name: (identifier) @name
    value: [(arrow_function) (function_expression) (generator_function)]) @definition.function
  .
  (variable_declarator))

; `exports.f = function () {}`, `Foo.prototype.f = ...`, `f = () => ...`
(
  (comment)? @doc
  .
  (expression_statement
    (assignment_expression
      left: [
        (identifier) @name
        (member_expression property: (property_identifier) @name)
      ]
      right: [(arrow_function) (function_expression) (generator_function)])) @definition.function)

; `{ f: function () {} }`, `{ f: () => ... }`
(object
  (comment) @doc
  .
  (pair
    key: (property_identifier) @name
    value: [(arrow_function) (function_expression) (generator_function)]) @definition.function)
(object
  (pair
    key: (property_identifier) @name
    value: [(arrow_function) (function_expression) (generator_function)]) @definition.function)

; -- methods: in classes (also `f = () => ...` fields) and object literals ---------
(class_body
  (comment) @doc
  .
  [
    (method_definition name: (_) @name)
    (public_field_definition
      name: (_) @name
      value: [(arrow_function) (function_expression) (generator_function)])
  ] @definition.method)
(class_body
  [
    (method_definition name: (_) @name)
    (public_field_definition
      name: (_) @name
      value: [(arrow_function) (function_expression) (generator_function)])
  ] @definition.method)
(object
  (comment) @doc
  .
  (method_definition name: (_) @name) @definition.method)
(object
  (method_definition name: (_) @name) @definition.method)

; -- classes: `class C`, `const C = class ...` -------------------------------------
(program
  (comment) @doc
  .
  [
    (class_declaration name: (type_identifier) @name)
    (abstract_class_declaration name: (type_identifier) @name)
    (interface_declaration name: (type_identifier) @name)
    (enum_declaration name: (identifier) @name)
    (lexical_declaration . (variable_declarator name: (identifier) @name value: (class)) .)
  ] @definition.class)
(program
  [
    (class_declaration name: (type_identifier) @name)
    (abstract_class_declaration name: (type_identifier) @name)
    (interface_declaration name: (type_identifier) @name)
    (enum_declaration name: (identifier) @name)
    (lexical_declaration . (variable_declarator name: (identifier) @name value: (class)) .)
  ] @definition.class)
(statement_block
  (comment) @doc
  .
  [
    (class_declaration name: (type_identifier) @name)
    (abstract_class_declaration name: (type_identifier) @name)
    (interface_declaration name: (type_identifier) @name)
    (enum_declaration name: (identifier) @name)
    (lexical_declaration . (variable_declarator name: (identifier) @name value: (class)) .)
  ] @definition.class)
(statement_block
  [
    (class_declaration name: (type_identifier) @name)
    (abstract_class_declaration name: (type_identifier) @name)
    (interface_declaration name: (type_identifier) @name)
    (enum_declaration name: (identifier) @name)
    (lexical_declaration . (variable_declarator name: (identifier) @name value: (class)) .)
  ] @definition.class)
(
  (comment)? @doc
  .
  (export_statement
    declaration: [
      (class_declaration name: (type_identifier) @name)
    (abstract_class_declaration name: (type_identifier) @name)
    (interface_declaration name: (type_identifier) @name)
    (enum_declaration name: (identifier) @name)
      (lexical_declaration . (variable_declarator name: (identifier) @name value: (class)) .)
    ]) @definition.class)

; React components: `export const Button = forwardRef(function Button(props, ref) {...})`,
; `const Row = memo((props) => ...)`: the call's first argument is the function
(
  (comment)? @doc
  .
  (export_statement
    declaration: (lexical_declaration
      . (variable_declarator
          name: (identifier) @name
          value: (call_expression arguments: (arguments . [(arrow_function) (function_expression)]))) .)) @definition.function)
(program
  (comment) @doc
  .
  (lexical_declaration
    . (variable_declarator
        name: (identifier) @name
        value: (call_expression arguments: (arguments . [(arrow_function) (function_expression)]))) .) @definition.function)
(program
  (lexical_declaration
    . (variable_declarator
        name: (identifier) @name
        value: (call_expression arguments: (arguments . [(arrow_function) (function_expression)]))) .) @definition.function)
