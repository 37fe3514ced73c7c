; Definitions with their doc comments for Ruby (tree-sitter tags convention). A doc is the run of
; `#` comments right above the definition: the query captures the last comment only, codept
; extends the run through the previous adjacent comments (no blank line between) in linear time;
; a `(comment)*` pattern would be quadratic in the length of a comment run.

; def name / def self.name / def name= / def +, also inside class bodies; `private def m` is a
; method too, but its comments are not adjacent to the def (`private ` between): no doc
(
  (comment)? @doc
  .
  [
    (method name: (_) @name) @definition.method
    (singleton_method name: (_) @name) @definition.method
  ])
; comments above the first statement of a body belong to the enclosing node, not to the body:
; `class A\n  # doc\n  def m` is (class (comment) body: (body_statement (method))). A definition
; without a comment is already matched above
(_
  (comment) @doc
  .
  (_
    .
    [
      (method name: (_) @name) @definition.method
      (singleton_method name: (_) @name) @definition.method
    ]))

; class Name / class A::Name / module Name (`class << self` has no name: not a definition)
(
  (comment)? @doc
  .
  [
    (class name: [(constant) @name (scope_resolution name: (_) @name)]) @definition.class
    (module name: [(constant) @name (scope_resolution name: (_) @name)]) @definition.class
  ])
(_
  (comment) @doc
  .
  (_
    .
    [
      (class name: [(constant) @name (scope_resolution name: (_) @name)]) @definition.class
      (module name: [(constant) @name (scope_resolution name: (_) @name)]) @definition.class
    ]))
