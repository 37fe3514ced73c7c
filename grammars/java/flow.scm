; Control flow and assignments for Java, read by codept/structure/dataflow.py.
; Vocabulary: codept/structure/kinds.py FLOW_KINDS, grammars/README.md.

[(method_declaration) (constructor_declaration) (compact_constructor_declaration) (lambda_expression)] @flow.function

[(while_statement) (do_statement) (for_statement) (enhanced_for_statement)] @flow.loop
(for_statement init: (_) @flow.init)
(for_statement update: (_) @flow.step)

(if_statement) @flow.branch
(if_statement consequence: (_) @flow.arm)
(if_statement alternative: (_) @flow.default)
(switch_expression body: (switch_block (switch_block_statement_group))) @flow.switch.fallthrough
(switch_expression body: (switch_block (switch_rule))) @flow.switch
[(switch_block_statement_group) (switch_rule)] @flow.arm
(switch_block_statement_group (switch_label "default")) @flow.default
(switch_rule (switch_label "default")) @flow.default

[(try_statement) (try_with_resources_statement)] @flow.try
(catch_clause) @flow.handler
(finally_clause) @flow.finally

[(return_statement) (throw_statement)] @flow.exit
(break_statement) @flow.break
(continue_statement) @flow.continue

(variable_declarator name: (_) @flow.target value: (_) @flow.value)
(assignment_expression left: (_) @flow.target right: (_) @flow.value)
(assignment_expression left: (identifier) @flow.write)
(assignment_expression left: (identifier) @flow.update
  operator: ["+=" "-=" "*=" "/=" "%=" "&=" "|=" "^=" "<<=" ">>=" ">>>="])
(update_expression (identifier) @flow.update)
(enhanced_for_statement name: (_) @flow.target value: (_) @flow.collection)
(resource name: (_) @flow.target value: (_) @flow.value)

; object fields (views with fields only: codept.structure.view.build_view(fields=True)): this.x
(field_access object: (this) field: (identifier) @flow.field)
(assignment_expression left: (field_access object: (this) field: (identifier) @flow.field @flow.write))
(assignment_expression left: (field_access object: (this) field: (identifier) @flow.field @flow.update)
  operator: ["+=" "-=" "*=" "/=" "%=" "&=" "|=" "^=" "<<=" ">>=" ">>>="])
(update_expression (field_access object: (this) field: (identifier) @flow.field @flow.update))
