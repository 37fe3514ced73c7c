; Scopes and bindings for Rust, resolved by codept/structure/resolve.py.
; Type names (type_identifier), fields (field_identifier), lifetimes and labels are never bound.
; Default order (language.toml) is sequential: a `let` binding is visible from its statement on.
;
; Limitations: shadowing in one block (`let x = 1; let x = x + 1;`) is one binding (the resolver
; joins the definitions of a name in one scope); a name in a pattern is a binding when it starts
; with a lower-case letter or `_` (`Some(v)`, `x`), a reference when upper-case (`None`, `MAX`:
; constants and variants), since only name resolution can tell; macro bodies (`macro_rules!`) are
; opaque; names after `::` are members, never bound; trait methods called as `x.f()` are members.

; -- scopes ------------------------------------------------------------------
; items may be used before their definition: the file and module/impl/trait bodies
(source_file) @local.scope.hoisted
(declaration_list) @local.scope.hoisted
[(function_item) (function_signature_item) (closure_expression)] @local.scope
[(block) (for_expression) (match_arm) (struct_item) (enum_item) (trait_item) (impl_item)] @local.scope
; `if let` / `while let` bindings are visible in the body
(if_expression condition: (let_condition)) @local.scope
(while_expression condition: (let_condition)) @local.scope
(macro_definition) @local.scope

; -- definitions ---------------------------------------------------------------
(function_item name: (identifier) @local.definition.function)
(function_signature_item name: (identifier) @local.definition.function)
(macro_definition name: (identifier) @local.definition.function)
(const_item name: (identifier) @local.definition.var)
(static_item name: (identifier) @local.definition.var)
(mod_item name: (identifier) @local.definition.class)
(enum_variant name: (identifier) @local.definition.field)
(field_declaration name: (field_identifier) @local.definition.field)

(parameter pattern: (identifier) @local.definition.parameter)
(closure_parameters (identifier) @local.definition.parameter)

; patterns: let, for, match arms, if/while let, parameters, nested in tuples, structs, slices,
; references, `mut`, `x @ 1..=5`
(let_declaration pattern: (identifier) @local.definition.var)
(for_expression pattern: (identifier) @local.definition.var)
(let_condition pattern: (identifier) @local.definition.var)
((match_pattern . (identifier) @local.definition.var) (#match? @local.definition.var "^[a-z_]"))
((tuple_pattern (identifier) @local.definition.var) (#match? @local.definition.var "^[a-z_]"))
((tuple_struct_pattern type: (_) (identifier) @local.definition.var) (#match? @local.definition.var "^[a-z_]"))
((slice_pattern (identifier) @local.definition.var) (#match? @local.definition.var "^[a-z_]"))
((or_pattern (identifier) @local.definition.var) (#match? @local.definition.var "^[a-z_]"))
(field_pattern name: (shorthand_field_identifier) @local.definition.var)
(field_pattern pattern: (identifier) @local.definition.var)
(mut_pattern (identifier) @local.definition.var)
(ref_pattern (identifier) @local.definition.var)
(reference_pattern (identifier) @local.definition.var)
(captured_pattern . (identifier) @local.definition.var)

; imports bind their last name (`use a::b::C;`, `use a::{b, c as d};`), not `self` or `*`
(use_declaration argument: (identifier) @local.definition.import)
(use_declaration argument: (scoped_identifier name: (identifier) @local.definition.import))
(use_as_clause alias: (identifier) @local.definition.import)
(use_list (identifier) @local.definition.import)
(use_list (scoped_identifier name: (identifier) @local.definition.import))
(extern_crate_declaration name: (identifier) @local.definition.import)

; An assignment (`x = 1`, `x += 1`) is NOT a definition: it writes a `let mut` binding
; declared before; its target is a reference to it (one binding).

; -- references -----------------------------------------------------------------
(identifier) @local.reference
(shorthand_field_initializer (identifier) @local.reference)

; names after `::` (`HashMap::new`, `std::io`) are members of another item: the first segment
; stays a reference (to an import, a module, a type); lifetimes and loop labels are no locals
(scoped_identifier name: (identifier) @local.member)
(scoped_type_identifier path: (scoped_identifier name: (identifier) @local.member))
(lifetime (identifier) @local.member)
(label (identifier) @local.member)
(attribute_item (attribute (identifier) @local.member))
(inner_attribute_item (attribute (identifier) @local.member))
(use_as_clause path: (identifier) @local.member)
(attribute arguments: (token_tree (identifier) @local.member))
; inside a macro's token tree (`format!("{}", self.name)`) `.name` is a member, as in code
(token_tree "." . (identifier) @local.member)
