; inherits: typescript
; Control flow for TSX: that of TypeScript (JSX adds no control flow).
