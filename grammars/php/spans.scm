; Syntax spans for PHP. Kinds: codept/structure/kinds.py SPAN_KINDS.

; -- identifiers -----------------------------------------------------------------
; A variable is (variable_name "$" (name)): the whole `$x` is the identifier, never its inner name.
; Every other (name) is an identifier in its own right; tree-sitter has no "parent is not" test, so
; the parents of a non-variable (name) are listed (those of tree-sitter-php 0.25).
(variable_name) @span.identifier
[
  (argument (name) @span.identifier)
  (array_element_initializer (name) @span.identifier)
  (arrow_function (name) @span.identifier)
  (assignment_expression (name) @span.identifier)
  (attribute (name) @span.identifier)
  (augmented_assignment_expression (name) @span.identifier)
  (base_clause (name) @span.identifier)
  (binary_expression (name) @span.identifier)
  (break_statement (name) @span.identifier)
  (case_statement (name) @span.identifier)
  (cast_expression (name) @span.identifier)
  (class_constant_access_expression (name) @span.identifier)
  (class_declaration (name) @span.identifier)
  (class_interface_clause (name) @span.identifier)
  (clone_expression (name) @span.identifier)
  (conditional_expression (name) @span.identifier)
  (const_element (name) @span.identifier)
  (continue_statement (name) @span.identifier)
  (echo_statement (name) @span.identifier)
  (encapsed_string (name) @span.identifier)
  (enum_case (name) @span.identifier)
  (enum_declaration (name) @span.identifier)
  (error_suppression_expression (name) @span.identifier)
  (exit_statement (name) @span.identifier)
  (expression_statement (name) @span.identifier)
  (for_statement (name) @span.identifier)
  (foreach_statement (name) @span.identifier)
  (function_call_expression (name) @span.identifier)
  (function_definition (name) @span.identifier)
  (goto_statement (name) @span.identifier)
  (heredoc_body (name) @span.identifier)
  (include_expression (name) @span.identifier)
  (include_once_expression (name) @span.identifier)
  (interface_declaration (name) @span.identifier)
  (list_literal (name) @span.identifier)
  (match_condition_list (name) @span.identifier)
  (match_conditional_expression (name) @span.identifier)
  (match_default_expression (name) @span.identifier)
  (member_access_expression (name) @span.identifier)
  (member_call_expression (name) @span.identifier)
  (method_declaration (name) @span.identifier)
  (named_label_statement (name) @span.identifier)
  (named_type (name) @span.identifier)
  (namespace_name (name) @span.identifier)
  (namespace_use_clause (name) @span.identifier)
  (nullsafe_member_access_expression (name) @span.identifier)
  (nullsafe_member_call_expression (name) @span.identifier)
  (object_creation_expression (name) @span.identifier)
  (pair (name) @span.identifier)
  (parenthesized_expression (name) @span.identifier)
  (print_intrinsic (name) @span.identifier)
  (property_element (name) @span.identifier)
  (property_hook (name) @span.identifier)
  (property_promotion_parameter (name) @span.identifier)
  (qualified_name (name) @span.identifier)
  (reference_assignment_expression (name) @span.identifier)
  (relative_name (name) @span.identifier)
  (require_expression (name) @span.identifier)
  (require_once_expression (name) @span.identifier)
  (return_statement (name) @span.identifier)
  (scoped_call_expression (name) @span.identifier)
  (scoped_property_access_expression (name) @span.identifier)
  (sequence_expression (name) @span.identifier)
  (simple_parameter (name) @span.identifier)
  (static_variable_declaration (name) @span.identifier)
  (subscript_expression (name) @span.identifier)
  (throw_expression (name) @span.identifier)
  (trait_declaration (name) @span.identifier)
  (unary_op_expression (name) @span.identifier)
  (use_as_clause (name) @span.identifier)
  (use_declaration (name) @span.identifier)
  (use_instead_of_clause (name) @span.identifier)
  (variadic_unpacking (name) @span.identifier)
  (yield_expression (name) @span.identifier)
]

; -- literals, strings, comments -----------------------------------------------------
[(integer) (float) (boolean) (null)] @span.literal
[(string) (encapsed_string) (heredoc) (nowdoc) (shell_command_expression)] @span.string
(comment) @span.comment

; -- calls ------------------------------------------------------------------------
; `new Foo(...)` is a constructor call; `new class(...) {...}` too (its arguments are arguments)
[
  (function_call_expression) (member_call_expression) (nullsafe_member_call_expression)
  (scoped_call_expression) (object_creation_expression)
] @span.call
(arguments) @span.arguments
(formal_parameters) @span.parameters

; -- expressions ------------------------------------------------------------------------
; arrow functions and closures are the lambdas of PHP: expression and function
[
  (binary_expression) (unary_op_expression) (conditional_expression) (cast_expression)
  (member_access_expression) (nullsafe_member_access_expression)
  (scoped_property_access_expression) (class_constant_access_expression) (subscript_expression)
  (clone_expression) (error_suppression_expression) (update_expression)
  (arrow_function) (anonymous_function)
] @span.expression

; conditions: the tested expression only, without the parentheses of if/elseif/while/do
(if_statement condition: (parenthesized_expression (_) @span.condition))
(else_if_clause condition: (parenthesized_expression (_) @span.condition))
(while_statement condition: (parenthesized_expression (_) @span.condition))
(do_statement condition: (parenthesized_expression (_) @span.condition))
(for_statement condition: (_) @span.condition)
(conditional_expression condition: (_) @span.condition)
(case_statement value: (_) @span.condition)
(match_conditional_expression conditional_expressions: (match_condition_list) @span.condition)

; assignments, and declarations with an initializer (`static $n = 0`, `const A = 1`, properties)
[(assignment_expression) (augmented_assignment_expression) (reference_assignment_expression)]
  @span.assignment
(static_variable_declaration value: (_)) @span.assignment
(const_element (_) . (_)) @span.assignment
(property_element default_value: (_)) @span.assignment

; -- statements -----------------------------------------------------------------
[
  (expression_statement) (return_statement) (break_statement) (continue_statement)
  (echo_statement) (unset_statement) (global_declaration) (function_static_declaration)
  (exit_statement) (goto_statement) (declare_statement) (empty_statement)
] @span.statement
; `namespace App\Models;` (the form with a body is left as its block)
(namespace_definition !body) @span.statement

[
  (if_statement) (for_statement) (foreach_statement) (while_statement) (do_statement)
  (switch_statement) (try_statement) (match_expression)
] @span.control

[
  (namespace_use_declaration) (require_expression) (require_once_expression)
  (include_expression) (include_once_expression)
] @span.import

; bodies: statement blocks (also `: ... endif;`), class/enum bodies, switch and match bodies
[
  (compound_statement) (colon_block) (declaration_list) (enum_declaration_list) (switch_block)
  (match_block)
] @span.block

[(function_definition) (method_declaration) (anonymous_function) (arrow_function)] @span.function
[
  (class_declaration) (interface_declaration) (trait_declaration) (enum_declaration)
  (anonymous_class)
] @span.class

; types: the whole annotation (nested union/optional parts are not spans of their own)
(simple_parameter type: (_) @span.type)
(variadic_parameter type: (_) @span.type)
(property_promotion_parameter type: (_) @span.type)
(property_declaration type: (_) @span.type)
(const_declaration type: (_) @span.type)
(catch_clause type: (_) @span.type)
(cast_expression type: (_) @span.type)
(function_definition return_type: (_) @span.type)
(method_declaration return_type: (_) @span.type)
(anonymous_function return_type: (_) @span.type)
(arrow_function return_type: (_) @span.type)
(enum_declaration (primitive_type) @span.type)
