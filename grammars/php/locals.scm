; Scopes and bindings for PHP, resolved by codept/structure/resolve.py.
;
; Identifiers: a variable is the whole (variable_name) `$x`, so a variable never shares a binding
; with a function, class or constant called `x`; its inner (name) is no identifier. Every other
; (name) is one (function, class, constant, import, type and label names).
;
; PHP has two kinds of names, and the resolver one mechanism, so the scopes are laid out for both:
;   * variables are function-scoped (no block scopes; scope_order = hoisted), and a function or
;     method does not see the file's variables;
;   * class, interface, import (`use`) and constant names are file-wide: visible in every body.
; Isolating functions (@local.scope.isolated) would hide the second kind too (every `use`d class
; referenced in a method would be free, apart from its import). Instead the file's own variable
; scope is the `program` node as a class scope: seen from the top-level code only, skipped from
; every nested body, so the walk from a body goes on to the implicit whole-file scope, where the
; file-wide names bind. Those names are captured as .class definitions: a name of kind
; function/method/class binds in the scope enclosing its innermost one, and the innermost scope of
; a top-level class, `use` or `const` name is `program`, so they land in the whole-file scope.
; Bodies (functions, methods, closures, arrow functions) are plain scopes below that.
;
; What follows:
;   * a function or method sees its own variables and the file-wide names, not the file's variables;
;   * an arrow function `fn($x) => $x + $y` sees the enclosing function's variables (as in PHP);
;   * a closure `function () use ($x) {...}` too: its `use` list and its reads of captured variables
;     bind to the enclosing variable (by value or by reference, the same variable where the closure
;     is created); its own assignments and parameters stay local. Over-approximation: a read of an
;     outer variable missing from the `use` list (undefined at run time) binds to it as well, and
;     writing a captured variable inside (`use (&$n) { $n++; }`) makes it closure-local, `use`
;     entry included;
;   * limitations: closures and arrow functions written at the top level do not see the file's
;     variables (the program scope is skipped from them), so their captures are free; function
;     names bind in the program scope (the function node is the scope of its parameters and
;     contains its name), so a call from inside another body is free; a named function or an
;     anonymous class nested in a function body sees that function's variables;
;   * class bodies are class scopes: members bind there and are invisible from the methods
;     (reached through `$this->`, `self::`, which are members, never bound).

; -- scopes ----------------------------------------------------------------------
(program) @local.scope.class
[(function_definition) (method_declaration) (anonymous_function) (arrow_function)] @local.scope
[(declaration_list) (enum_declaration_list)] @local.scope.class

; -- definitions ---------------------------------------------------------------
; a function name binds in the scope around the function node: `program` for a top-level one
(function_definition name: (name) @local.definition.function)
(method_declaration name: (name) @local.definition.method)
; file-wide names: the class node is no scope (its body is), so they bind above `program`
(class_declaration name: (name) @local.definition.class)
(interface_declaration name: (name) @local.definition.class)
(trait_declaration name: (name) @local.definition.class)
(enum_declaration name: (name) @local.definition.class)

; class members: properties, constants, enum cases
(property_element name: (variable_name) @local.definition.field)
(const_element (name) @local.definition)
(program (const_declaration (const_element (name) @local.definition.class)))
(namespace_definition body: (compound_statement
  (const_declaration (const_element (name) @local.definition.class))))
(declaration_list (const_declaration (const_element (name) @local.definition.field)))
(enum_declaration_list (const_declaration (const_element (name) @local.definition.field)))
(enum_case name: (name) @local.definition.field)

; parameters (plain, by reference, variadic, constructor promotion), also of closures and fn
(simple_parameter name: (variable_name) @local.definition.parameter)
(variadic_parameter name: (variable_name) @local.definition.parameter)
(property_promotion_parameter name: (variable_name) @local.definition.parameter)

; assignment targets, also destructured: [$a, [$b]] = ..., list('k' => $c) = ..., [&$r] = ...
(assignment_expression left: (variable_name) @local.definition.var)
(reference_assignment_expression left: (variable_name) @local.definition.var)
(list_literal (variable_name) @local.definition.var)
(list_literal (by_ref (variable_name) @local.definition.var))
; `$c += $i` and `$i++` define the variable again AND read it: both captures, one binding
(augmented_assignment_expression left: (variable_name) @local.definition.var)
(update_expression argument: (variable_name) @local.definition.var)

; foreach ($xs as $v), ($xs as $k => $v), ($xs as &$v), ($xs as [$a, $b]): not the iterated $xs
(foreach_statement "as" . (variable_name) @local.definition.var)
(foreach_statement (by_ref (variable_name) @local.definition.var))
(foreach_statement (pair (variable_name) @local.definition.var))
(foreach_statement (pair (by_ref (variable_name) @local.definition.var)))

; catch (E $e), static $n = 0
(catch_clause name: (variable_name) @local.definition.var)
(static_variable_declaration name: (variable_name) @local.definition.var)
; global $g: $g in this function is the file's variable
(global_declaration (variable_name) @local.global)

; imports bind their alias, else their last name: use A\B; use A\B as C; use A\{B, C as D};
; written .class (not .import) so that they bind file-wide, like the class names (see the top)
(namespace_use_clause alias: (name) @local.definition.class)
(namespace_use_clause . (name) @local.definition.class . )
(namespace_use_clause . (qualified_name (name) @local.definition.class) . )

; -- references -----------------------------------------------------------------
(variable_name) @local.reference
((name) @local.reference
  (#not-any-of? @local.reference "self" "static" "parent"))

; never locals: the inner name of a variable (the variable_name is the identifier), names reached
; through an object or class (`$o->p`, `$o?->m()`, `A::m()`, `A::$p`, `A::C`), named arguments,
; namespace paths, trait adaptations, property hooks
(variable_name (name) @local.member)
(member_access_expression name: (name) @local.member)
(nullsafe_member_access_expression name: (name) @local.member)
(member_call_expression name: (name) @local.member)
(nullsafe_member_call_expression name: (name) @local.member)
(scoped_call_expression name: (name) @local.member)
(scoped_property_access_expression name: (variable_name) @local.member)
(class_constant_access_expression (_) (name) @local.member .)
(argument name: (name) @local.member)
(namespace_name (name) @local.member)
(namespace_use_clause (qualified_name (name) @local.member) alias: (_))
(namespace_use_clause . (name) @local.member alias: (_))
(use_as_clause (name) @local.member)
(use_instead_of_clause (name) @local.member)
(property_hook (name) @local.member)
