; inherits: typescript
; Syntax spans for TSX beyond TypeScript's: JSX elements (an element's name is an identifier,
; its attribute values strings or expressions).
(jsx_text) @span.string
(jsx_expression) @span.expression
