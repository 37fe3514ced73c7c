; inherits: c
; Scopes and bindings for C++ beyond those of C (grammars/c/locals.scm, inherited), resolved by
; codept/structure/resolve.py.
;
; Limitations: overloads of a name share one binding; a member used in an out-of-class method
; definition (`int S::f() { return n_; }`) is free there (the class body is not its scope);
; names after `::` and `using namespace` are members, never bound; templates' type parameters are
; type names (never bound); argument-dependent lookup and `this->` members are not resolved.

; -- scopes ------------------------------------------------------------------
; namespace bodies: members are used in any order (like the file)
(declaration_list) @local.scope.hoisted
; a class is the scope of its header and body; its members' names bind in the body (hoisted, from C)
[(class_specifier) (struct_specifier)] @local.scope
[(lambda_expression) (for_range_loop) (catch_clause) (template_declaration)] @local.scope

; -- definitions ---------------------------------------------------------------
; in-class methods: `int area() const { ... }`, `static S make();`
(function_declarator declarator: (field_identifier) @local.definition.method)
(optional_parameter_declaration declarator: (identifier) @local.definition.parameter)
(reference_declarator (identifier) @local.definition.var)
(structured_binding_declarator (identifier) @local.definition.var)
(for_range_loop declarator: (identifier) @local.definition.var)
(reference_declarator (field_identifier) @local.definition.field)

; -- references -----------------------------------------------------------------
; qualified names (`std::vector`, `S::f`) and using-directives name other scopes' members
(qualified_identifier name: (identifier) @local.member)
(qualified_identifier name: (qualified_identifier name: (identifier) @local.member))
(using_declaration (identifier) @local.member)
; `~S()` names the class
(destructor_name (identifier) @local.member)
