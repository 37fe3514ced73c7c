; Control flow and assignments for Go, read by codept/structure/dataflow.py.
; Vocabulary: codept/structure/kinds.py FLOW_KINDS, grammars/README.md.

[(function_declaration) (method_declaration) (func_literal)] @flow.function

(for_statement) @flow.loop
(for_clause initializer: (_) @flow.init)
(for_clause update: (_) @flow.step)

(if_statement) @flow.branch
(if_statement consequence: (_) @flow.arm)
(if_statement alternative: (_) @flow.default)
[(expression_switch_statement) (type_switch_statement) (select_statement)] @flow.switch
[(expression_case) (type_case) (communication_case)] @flow.arm
(default_case) @flow.default

(return_statement) @flow.exit
(break_statement) @flow.break
(continue_statement) @flow.continue

(short_var_declaration left: (_) @flow.target right: (_) @flow.value)
(assignment_statement left: (_) @flow.target right: (_) @flow.value)
(assignment_statement left: (expression_list (identifier) @flow.write))
(assignment_statement left: (expression_list (identifier) @flow.update)
  operator: ["+=" "-=" "*=" "/=" "%=" "&=" "|=" "^=" "<<=" ">>=" "&^="])
[(inc_statement (identifier) @flow.update) (dec_statement (identifier) @flow.update)]
(var_spec name: (_) @flow.target value: (_) @flow.value)
(range_clause left: (_) @flow.target right: (_) @flow.collection)
(range_clause !left right: (_) @flow.collection)
(range_clause left: (expression_list (identifier) @flow.write))
(receive_statement left: (_) @flow.target right: (_) @flow.value)

; `a, b = b, a` pairs a <- b, b <- a (`a, b := f()` has one value: all-to-all)
[(assignment_statement left: (expression_list (_) @flow.item))
 (assignment_statement right: (expression_list (_) @flow.item))
 (short_var_declaration left: (expression_list (_) @flow.item))
 (short_var_declaration right: (expression_list (_) @flow.item))]
