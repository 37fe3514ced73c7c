; Syntax spans for Ruby. Kinds: codept/structure/kinds.py SPAN_KINDS. No `type` kind (language.toml).

; names: locals and method names, constants, @ivars, @@cvars, $globals, `key:` hash keys
[
  (identifier) (constant) (instance_variable) (class_variable) (global_variable)
  (hash_key_symbol)
] @span.identifier
[(integer) (float) (rational) (complex) (true) (false) (nil)] @span.literal
; strings, heredocs (the `<<~EOS` opener and the body are separate nodes), symbols, regexes,
; %w/%i arrays, `backticks`, ?c characters
[
  (string) (chained_string) (heredoc_beginning) (heredoc_body) (subshell) (character) (regex)
  (simple_symbol) (delimited_symbol) (string_array) (symbol_array)
] @span.string
(comment) @span.comment

; every call: `f(x)`, `puts x`, `obj.m`, `obj.m = v`, `super(x)`, `f { }` (block included)
(call) @span.call
(call arguments: (argument_list) @span.arguments)
(yield (argument_list) @span.arguments)
[(method_parameters) (lambda_parameters) (block_parameters)] @span.parameters

[
  (binary) (unary) (conditional) (element_reference) (range) (scope_resolution) (lambda)
  (match_pattern) (test_pattern)
] @span.expression

[
  (if) (unless) (while) (until) (elsif) (if_modifier) (unless_modifier) (while_modifier)
  (until_modifier) (conditional) (if_guard) (unless_guard)
] condition: (_) @span.condition
(case value: (_) @span.condition)
(case_match value: (_) @span.condition)

[(assignment) (operator_assignment)] @span.assignment

; simple statements: jumps anywhere, and expressions in statement position (Ruby has no
; expression-statement node, so the statement lists are enumerated)
[(return) (break) (next) (redo) (retry) (alias) (undef)] @span.statement
; (one pattern per container and type: an alternation of types runs 2-3x slower)
(program (call) @span.statement)
(program (assignment) @span.statement)
(program (operator_assignment) @span.statement)
(program (identifier) @span.statement)
(program (instance_variable) @span.statement)
(program (constant) @span.statement)
(program (yield) @span.statement)
(program (super) @span.statement)
(program (binary) @span.statement)
(program (unary) @span.statement)
(program (element_reference) @span.statement)
(program (conditional) @span.statement)
(program (match_pattern) @span.statement)
(program (test_pattern) @span.statement)
(body_statement (call) @span.statement)
(body_statement (assignment) @span.statement)
(body_statement (operator_assignment) @span.statement)
(body_statement (identifier) @span.statement)
(body_statement (instance_variable) @span.statement)
(body_statement (constant) @span.statement)
(body_statement (yield) @span.statement)
(body_statement (super) @span.statement)
(body_statement (binary) @span.statement)
(body_statement (unary) @span.statement)
(body_statement (element_reference) @span.statement)
(body_statement (conditional) @span.statement)
(body_statement (match_pattern) @span.statement)
(body_statement (test_pattern) @span.statement)
(block_body (call) @span.statement)
(block_body (assignment) @span.statement)
(block_body (operator_assignment) @span.statement)
(block_body (identifier) @span.statement)
(block_body (instance_variable) @span.statement)
(block_body (constant) @span.statement)
(block_body (yield) @span.statement)
(block_body (super) @span.statement)
(block_body (binary) @span.statement)
(block_body (unary) @span.statement)
(block_body (element_reference) @span.statement)
(block_body (conditional) @span.statement)
(block_body (match_pattern) @span.statement)
(block_body (test_pattern) @span.statement)
(then (call) @span.statement)
(then (assignment) @span.statement)
(then (operator_assignment) @span.statement)
(then (identifier) @span.statement)
(then (instance_variable) @span.statement)
(then (constant) @span.statement)
(then (yield) @span.statement)
(then (super) @span.statement)
(then (binary) @span.statement)
(then (unary) @span.statement)
(then (element_reference) @span.statement)
(then (conditional) @span.statement)
(then (match_pattern) @span.statement)
(then (test_pattern) @span.statement)
(else (call) @span.statement)
(else (assignment) @span.statement)
(else (operator_assignment) @span.statement)
(else (identifier) @span.statement)
(else (instance_variable) @span.statement)
(else (constant) @span.statement)
(else (yield) @span.statement)
(else (super) @span.statement)
(else (binary) @span.statement)
(else (unary) @span.statement)
(else (element_reference) @span.statement)
(else (conditional) @span.statement)
(else (match_pattern) @span.statement)
(else (test_pattern) @span.statement)
(do (call) @span.statement)
(do (assignment) @span.statement)
(do (operator_assignment) @span.statement)
(do (identifier) @span.statement)
(do (instance_variable) @span.statement)
(do (constant) @span.statement)
(do (yield) @span.statement)
(do (super) @span.statement)
(do (binary) @span.statement)
(do (unary) @span.statement)
(do (element_reference) @span.statement)
(do (conditional) @span.statement)
(do (match_pattern) @span.statement)
(do (test_pattern) @span.statement)
(begin (call) @span.statement)
(begin (assignment) @span.statement)
(begin (operator_assignment) @span.statement)
(begin (identifier) @span.statement)
(begin (instance_variable) @span.statement)
(begin (constant) @span.statement)
(begin (yield) @span.statement)
(begin (super) @span.statement)
(begin (binary) @span.statement)
(begin (unary) @span.statement)
(begin (element_reference) @span.statement)
(begin (conditional) @span.statement)
(begin (match_pattern) @span.statement)
(begin (test_pattern) @span.statement)
(ensure (call) @span.statement)
(ensure (assignment) @span.statement)
(ensure (operator_assignment) @span.statement)
(ensure (identifier) @span.statement)
(ensure (instance_variable) @span.statement)
(ensure (constant) @span.statement)
(ensure (yield) @span.statement)
(ensure (super) @span.statement)
(ensure (binary) @span.statement)
(ensure (unary) @span.statement)
(ensure (element_reference) @span.statement)
(ensure (conditional) @span.statement)
(ensure (match_pattern) @span.statement)
(ensure (test_pattern) @span.statement)
(begin_block (call) @span.statement)
(begin_block (assignment) @span.statement)
(begin_block (operator_assignment) @span.statement)
(begin_block (identifier) @span.statement)
(begin_block (instance_variable) @span.statement)
(begin_block (constant) @span.statement)
(begin_block (yield) @span.statement)
(begin_block (super) @span.statement)
(begin_block (binary) @span.statement)
(begin_block (unary) @span.statement)
(begin_block (element_reference) @span.statement)
(begin_block (conditional) @span.statement)
(begin_block (match_pattern) @span.statement)
(begin_block (test_pattern) @span.statement)
(end_block (call) @span.statement)
(end_block (assignment) @span.statement)
(end_block (operator_assignment) @span.statement)
(end_block (identifier) @span.statement)
(end_block (instance_variable) @span.statement)
(end_block (constant) @span.statement)
(end_block (yield) @span.statement)
(end_block (super) @span.statement)
(end_block (binary) @span.statement)
(end_block (unary) @span.statement)
(end_block (element_reference) @span.statement)
(end_block (conditional) @span.statement)
(end_block (match_pattern) @span.statement)
(end_block (test_pattern) @span.statement)

[
  (if) (unless) (while) (until) (for) (case) (case_match) (begin) (if_modifier) (unless_modifier)
  (while_modifier) (until_modifier) (rescue_modifier)
] @span.control

; require/load are plain calls: the method name tells them apart
(call
  !receiver
  method: (identifier) @_m
  (#any-of? @_m "require" "require_relative" "load" "autoload")) @span.import

; bodies: of def/class/module/do-block (body_statement), of `{ }` blocks, of branches, loops and
; rescue clauses (then/else/do), a lambda's `{ }`
[(body_statement) (block_body) (then) (else) (do) (ensure)] @span.block
(lambda body: (block) @span.block)

[(method) (singleton_method) (lambda)] @span.function
; a block is a closure: `each { |x| ... }`, `map do |x| ... end` (a lambda's own body is not)
(call block: (_) @span.function)
[(class) (module) (singleton_class)] @span.class
