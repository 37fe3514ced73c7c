; Scopes and local variables for Ruby, resolved by codept/structure/resolve.py.
;
; Only Ruby *local variables* are modelled. A local exists from its first assignment on (scope_order
; "sequential"); before that, and whenever nothing defines it, a bare name is a method call on self
; and stays free. Not locals, so never captured: @ivars, @@cvars, $globals and Constants (other
; node types, resolved dynamically or through the module nesting) and method names. `def foo`
; does NOT bind `foo`: Ruby methods live in another namespace than locals (`def x; end; x = 1`
; are two things), and a bare call `foo` inside another def cannot see a local anyway. So the
; name of a def is no identifier at all, and every bare call `foo` of a file shares one free
; binding.
;
; Blocks and lambdas are `reuse` scopes: an assignment inside a block to a local already visible
; from the enclosing scope (`sum = 0; xs.each { |x| sum += x }`) rebinds that local, as in Ruby;
; a name first assigned inside the block stays block-local. Block parameters always shadow.

; -- scopes ------------------------------------------------------------------
; scope gates: def / class / module bodies see no enclosing local
(method) @local.scope.isolated
(singleton_method) @local.scope.isolated
; the class body only: `class A < base` and `class << obj` evaluate outside
(class body: (body_statement) @local.scope.isolated)
(module body: (body_statement) @local.scope.isolated)
(singleton_class body: (body_statement) @local.scope.isolated)
; closures see the enclosing locals and assign to them; their parameters and new locals are their own
[(block) (do_block) (lambda)] @local.scope.reuse

; -- definitions ---------------------------------------------------------------
; parameters of defs, blocks and lambdas: plain, `a = 1`, `*r`, `**o`, `k:`, `k: 1`, `&blk`,
; destructured `|(a, (b, *c))|`, block-locals `|x; tmp|`
(method_parameters (identifier) @local.definition.parameter)
(block_parameters (identifier) @local.definition.parameter)
(lambda_parameters (identifier) @local.definition.parameter)
(destructured_parameter (identifier) @local.definition.parameter)
(optional_parameter name: (identifier) @local.definition.parameter)
(keyword_parameter name: (identifier) @local.definition.parameter)
(block_parameter name: (identifier) @local.definition.parameter)
; `*r` / `**o` (their parent is a parameter list; in a pattern they are variables, below)
(method_parameters
  [(splat_parameter name: (identifier) @local.definition.parameter)
   (hash_splat_parameter name: (identifier) @local.definition.parameter)])
(block_parameters
  [(splat_parameter name: (identifier) @local.definition.parameter)
   (hash_splat_parameter name: (identifier) @local.definition.parameter)])
(lambda_parameters
  [(splat_parameter name: (identifier) @local.definition.parameter)
   (hash_splat_parameter name: (identifier) @local.definition.parameter)])
(destructured_parameter
  [(splat_parameter name: (identifier) @local.definition.parameter)
   (hash_splat_parameter name: (identifier) @local.definition.parameter)])

; assignment targets, also `a, (b, *c) = ...` and `for a, b in ...`
(assignment left: (identifier) @local.definition.var)
(left_assignment_list (identifier) @local.definition.var)
(destructured_left_assignment (identifier) @local.definition.var)
(rest_assignment (identifier) @local.definition.var)
; `c += i`, `c ||= 1` define c again AND read it: both captures, one binding
(operator_assignment left: (identifier) @local.definition.var)
(for pattern: (identifier) @local.definition.var)

; rescue Error => e
(exception_variable (identifier) @local.definition.var)

; pattern matching (`case/in`, `=>`, `in`) binds every bare name of the pattern
(in_clause pattern: (identifier) @local.definition.var)
(match_pattern pattern: (identifier) @local.definition.var)
(test_pattern pattern: (identifier) @local.definition.var)
(array_pattern (identifier) @local.definition.var)
(find_pattern (identifier) @local.definition.var)
(parenthesized_pattern (identifier) @local.definition.var)
(keyword_pattern value: (identifier) @local.definition.var)
(as_pattern name: (identifier) @local.definition.var)
(array_pattern (splat_parameter name: (identifier) @local.definition.var))
(find_pattern (splat_parameter name: (identifier) @local.definition.var))
(hash_pattern (hash_splat_parameter name: (identifier) @local.definition.var))
; `in {name:}` binds `name`
(keyword_pattern key: (hash_key_symbol) @local.definition.var !value)

; -- references -----------------------------------------------------------------
(identifier) @local.reference
; `f(key:)` / `{key:}` shorthand reads the local (or calls the method) `key`
(pair key: (hash_key_symbol) @local.reference !value)

; method names are never locals: called on an object, defined, aliased, undefined
(call receiver: (_) method: (identifier) @local.member)
(method name: (identifier) @local.member)
(singleton_method name: (identifier) @local.member)
(setter (identifier) @local.member)
(alias (identifier) @local.member)
(undef (identifier) @local.member)
