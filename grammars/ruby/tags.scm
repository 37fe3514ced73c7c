; Definitions with their doc comments for Ruby (tree-sitter tags convention). The doc is the run
; of `#` comments right above the definition (codept keeps only the run adjacent to it).

; def name / def self.name / def name= / def +, also inside class bodies and as `private def ...`
(
  (comment)* @doc
  .
  [
    (method name: (_) @name) @definition.method
    (singleton_method name: (_) @name) @definition.method
  ])
; comments above the first statement of a body belong to the enclosing node, not to the body:
; `class A\n  # doc\n  def m` is (class (comment) body: (body_statement (method))). `+`, not `*`:
; a definition without a comment is already matched above, and `*` here doubles the query time
(_
  (comment)+ @doc
  .
  (_
    .
    [
      (method name: (_) @name) @definition.method
      (singleton_method name: (_) @name) @definition.method
    ]))

; class Name / class A::Name / module Name (`class << self` has no name: not a definition)
(
  (comment)* @doc
  .
  [
    (class name: [(constant) @name (scope_resolution name: (_) @name)]) @definition.class
    (module name: [(constant) @name (scope_resolution name: (_) @name)]) @definition.class
  ])
(_
  (comment)+ @doc
  .
  (_
    .
    [
      (class name: [(constant) @name (scope_resolution name: (_) @name)]) @definition.class
      (module name: [(constant) @name (scope_resolution name: (_) @name)]) @definition.class
    ]))
