; Control flow and assignments for C, read by codept/structure/dataflow.py.
; Vocabulary: codept/structure/kinds.py FLOW_KINDS, grammars/README.md.
; Not covered: goto (the flow goes on past it), setjmp/longjmp, writes through pointers.

(function_definition) @flow.function

[(while_statement) (do_statement) (for_statement)] @flow.loop
(for_statement initializer: (_) @flow.init)
(for_statement update: (_) @flow.step)

(if_statement) @flow.branch
(if_statement consequence: (_) @flow.arm)
(if_statement alternative: (else_clause) @flow.default)
(switch_statement) @flow.switch.fallthrough
(case_statement) @flow.arm
(case_statement !value) @flow.default

(return_statement) @flow.exit
(break_statement) @flow.break
(continue_statement) @flow.continue

(init_declarator declarator: (_) @flow.target value: (_) @flow.value)
(assignment_expression left: (_) @flow.target right: (_) @flow.value)
(assignment_expression left: (identifier) @flow.write)
(assignment_expression left: (identifier) @flow.update
  operator: ["+=" "-=" "*=" "/=" "%=" "&=" "|=" "^=" "<<=" ">>="])
(update_expression argument: (identifier) @flow.update)
