; inherits: typescript
; Definitions for TSX: those of TypeScript (components are functions and classes).
