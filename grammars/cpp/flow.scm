; inherits: c
; Control flow and assignments for C++ beyond those of C (grammars/c/flow.scm, inherited).

(lambda_expression) @flow.function
(for_range_loop) @flow.loop
(for_range_loop declarator: (_) @flow.target right: (_) @flow.collection)
(try_statement) @flow.try
(catch_clause) @flow.handler
(throw_statement) @flow.exit
