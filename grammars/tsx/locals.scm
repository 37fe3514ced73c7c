; inherits: typescript
; Scopes and bindings for TSX beyond TypeScript's: intrinsic JSX elements (<div>) are tag names,
; not variables (<Foo> is a component reference); attribute names are property_identifier nodes.
(jsx_opening_element name: (identifier) @local.member (#match? @local.member "^[a-z]"))
(jsx_closing_element name: (identifier) @local.member (#match? @local.member "^[a-z]"))
(jsx_self_closing_element name: (identifier) @local.member (#match? @local.member "^[a-z]"))
(jsx_namespace_name (_) @local.member)
