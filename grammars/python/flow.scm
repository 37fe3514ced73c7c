; Control flow and assignments for Python, read by codept/structure/dataflow.py.
; Vocabulary: codept/structure/kinds.py FLOW_KINDS, grammars/README.md.

; -- units: dataflow restarts inside; no edge crosses them ------------------------
(function_definition) @flow.function
(lambda) @flow.function

; -- loops ---------------------------------------------------------------------
(for_statement) @flow.loop
(while_statement) @flow.loop
; `else:` of a loop runs when it ends without break
[(for_statement alternative: (else_clause) @flow.nobreak) (while_statement alternative: (else_clause) @flow.nobreak)]
; a comprehension runs its element once per iteration of its for clauses
[(list_comprehension) (set_comprehension) (dictionary_comprehension) (generator_expression)] @flow.loop

; -- branches ------------------------------------------------------------------
(if_statement) @flow.branch
(if_statement consequence: (_) @flow.arm)
(elif_clause consequence: (_) @flow.arm)
(if_statement alternative: (else_clause) @flow.default)
(match_statement) @flow.branch
(case_clause) @flow.arm

; -- exceptions ----------------------------------------------------------------
(try_statement) @flow.try
(except_clause) @flow.handler
(finally_clause) @flow.finally

; -- exits ---------------------------------------------------------------------
[(return_statement) (raise_statement)] @flow.exit
(break_statement) @flow.break
(continue_statement) @flow.continue

; -- assignments: the target is evaluated after its value --------------------------
(assignment left: (_) @flow.target right: (_) @flow.value)
(augmented_assignment left: (_) @flow.target right: (_) @flow.value)
(augmented_assignment left: (identifier) @flow.update)
(named_expression name: (_) @flow.target value: (_) @flow.value)
(for_statement left: (_) @flow.target right: (_) @flow.collection)
(for_in_clause left: (_) @flow.target right: (_) @flow.value)
(with_item value: (as_pattern (_) @flow.value alias: (as_pattern_target) @flow.target))

; -- destructuring: `a, b = x, y` pairs a <- x, b <- y; a starred element is no item (its level
; falls back to all-to-all), nor is any kind missing from these lists
(assignment left: (pattern_list [(identifier) (tuple_pattern) (list_pattern) (attribute) (subscript)] @flow.item))
[(tuple_pattern [(identifier) (tuple_pattern) (list_pattern) (attribute) (subscript)] @flow.item)
 (list_pattern [(identifier) (tuple_pattern) (list_pattern) (attribute) (subscript)] @flow.item)]
(assignment left: [(pattern_list) (tuple_pattern) (list_pattern)] right: (expression_list
  [(identifier) (attribute) (subscript) (call) (integer) (float) (string) (concatenated_string) (true)
   (false) (none) (list) (tuple) (dictionary) (set) (binary_operator) (unary_operator)
   (comparison_operator) (boolean_operator) (not_operator) (conditional_expression) (lambda)
   (parenthesized_expression) (list_comprehension) (dictionary_comprehension) (set_comprehension)
   (generator_expression) (await)] @flow.item))
(assignment left: [(pattern_list) (tuple_pattern) (list_pattern)] right: (tuple
  [(identifier) (attribute) (subscript) (call) (integer) (float) (string) (concatenated_string) (true)
   (false) (none) (list) (tuple) (dictionary) (set) (binary_operator) (unary_operator)
   (comparison_operator) (boolean_operator) (not_operator) (conditional_expression) (lambda)
   (parenthesized_expression) (list_comprehension) (dictionary_comprehension) (set_comprehension)
   (generator_expression) (await)] @flow.item))
(assignment left: [(pattern_list) (tuple_pattern) (list_pattern)] right: (list
  [(identifier) (attribute) (subscript) (call) (integer) (float) (string) (concatenated_string) (true)
   (false) (none) (list) (tuple) (dictionary) (set) (binary_operator) (unary_operator)
   (comparison_operator) (boolean_operator) (not_operator) (conditional_expression) (lambda)
   (parenthesized_expression) (list_comprehension) (dictionary_comprehension) (set_comprehension)
   (generator_expression) (await)] @flow.item))

; one level deeper on the value side: `(a, b), c = (x, y), z` pairs a <- x, b <- y (the target side
; nests at any depth above). The outer value is any node (expression_list, tuple, list): a tuple or
; list child of anything else is never an item of it, so that level stays all-to-all
(assignment left: [(pattern_list) (tuple_pattern) (list_pattern)]
  right: (_ [(tuple [(identifier) (attribute) (subscript) (call) (integer) (float) (string) (concatenated_string) (true)
    (false) (none) (list) (tuple) (dictionary) (set) (binary_operator) (unary_operator)
    (comparison_operator) (boolean_operator) (not_operator) (conditional_expression) (lambda)
    (parenthesized_expression) (list_comprehension) (dictionary_comprehension) (set_comprehension)
    (generator_expression) (await)] @flow.item)
             (list [(identifier) (attribute) (subscript) (call) (integer) (float) (string) (concatenated_string) (true)
    (false) (none) (list) (tuple) (dictionary) (set) (binary_operator) (unary_operator)
    (comparison_operator) (boolean_operator) (not_operator) (conditional_expression) (lambda)
    (parenthesized_expression) (list_comprehension) (dictionary_comprehension) (set_comprehension)
    (generator_expression) (await)] @flow.item)]))

; -- object fields (views with fields only: codept.structure.view.build_view(fields=True)): self.x
((attribute object: (identifier) @_self attribute: (identifier) @flow.field) (#eq? @_self "self"))
((assignment left: (attribute object: (identifier) @_self attribute: (identifier) @flow.field @flow.write))
  (#eq? @_self "self"))
((pattern_list (attribute object: (identifier) @_self attribute: (identifier) @flow.field @flow.write))
  (#eq? @_self "self"))
((augmented_assignment left: (attribute object: (identifier) @_self attribute: (identifier) @flow.field @flow.update))
  (#eq? @_self "self"))
