"""``ident_rtd``: replaced-token detection on identifiers (CodeBERT's RTD, restricted to names).

1. Bindings: the view's bindings (idents column 4) that are not free names (builtins, globals from
   elsewhere), whose every occurrence is "clean": its tokens spell exactly the name, with at most
   a leading space (byte-level BPE folds the space before a word into its first token).
2. Pick ``rate`` of them (at least one), uniformly.
3. For each, draw another name (of a binding, never a free name) of the same shape (same first-character class: lower / upper /
   ``_`` / ``$``, so a PHP variable stays a variable and a Ruby local never becomes a constant):
   from the same file (``source="file"``) or from a partner document of the same source
   (``source="partner"``, ctx.partner: the corpus' identifier vocabulary, one file at a time).
   Its token ids come from one of its own clean occurrences with the same leading-space status,
   so no tokenizer is needed online.
4. Replace every occurrence of the binding (``consistent=True``: the renamed code means the same,
   only the name is foreign) or one occurrence at random (``consistent=False``).
5. Labels ``labels["rtd"]``: 1 on every token of a replaced occurrence, 0 on every other
   ordinary token, IGNORE on special tokens (ELECTRA labels all tokens). Bidirectional.
Cost: O(T + I) per document. Not covered: a binding whose name only has occurrences straddling a
token boundary with punctuation (skipped); a renamed name may collide with another binding of the
same file (the code still parses the same way; its meaning may change, as a bug would).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from codept.data.example import IGNORE, Example
from codept.objectives import render
from codept.structure.kinds import ROLE_FREE


@dataclass(frozen=True)
class Config:
    rate: float = 0.15  # share of the document's bindings to rename
    consistent: bool = True  # rename every occurrence (else one occurrence)
    source: str = "file"  # where replacement names come from: file | partner

    def __post_init__(self):
        if not 0 < self.rate <= 1:
            raise ValueError(f"ident_rtd rate={self.rate}: must be in (0, 1]")
        if self.source not in ("file", "partner"):
            raise ValueError(f"ident_rtd source={self.source!r}: expected 'file' or 'partner'")


def _shape(name: str) -> int:
    c = name[:1]
    return 0 if c.islower() else 1 if c.isupper() else 2 if c == "_" else 3 if c == "$" else 4


def occurrences(view) -> tuple[np.ndarray, np.ndarray]:
    """(I,) bool: the identifier's tokens spell its name (after an optional leading space), and
    (I,) bool: its first token starts with whitespace."""
    idents, off, text = np.asarray(view.idents), np.asarray(view.offsets), view.text
    clean = np.zeros(len(idents), bool)
    spaced = np.zeros(len(idents), bool)
    for i, (s, e, nid) in enumerate(idents[:, :3].tolist()):
        piece = text[off[s, 0]: off[e - 1, 1]]
        name = view.names[nid]
        stripped = piece.lstrip(" \t")
        clean[i] = stripped == name and len(piece) - len(stripped) <= 1
        spaced[i] = stripped != piece
    return clean, spaced


def spellings(view, clean: np.ndarray, spaced: np.ndarray) -> dict[tuple[str, bool], np.ndarray]:
    """(name, leading space) -> the token ids of one clean, non-free occurrence spelled so."""
    idents, ids = np.asarray(view.idents), np.asarray(view.input_ids)
    out: dict[tuple[str, bool], np.ndarray] = {}
    # names of the file's own bindings only: a free name may be a builtin the grammar knows
    # (Go's `make(x)` parses x as a type)
    for i in np.flatnonzero(clean & (idents[:, 3] != ROLE_FREE)).tolist():
        key = (view.names[idents[i, 2]], bool(spaced[i]))
        if key not in out:
            out[key] = ids[idents[i, 0]: idents[i, 1]]
    return out


def build(vocab: render.Vocab, cfg: Config = Config()):
    def ident_rtd(view, rng: np.random.Generator, ctx=None) -> Example | None:
        ids = np.asarray(view.input_ids)
        idents = np.asarray(view.idents)
        labels = np.where(vocab.candidates(ids), 0, IGNORE).astype(np.int64)
        if len(idents) == 0:
            return Example(ids.copy(), np.ones(len(ids), bool), labels={"rtd": labels})
        clean, spaced = occurrences(view)
        binding = idents[:, 4]
        bad = np.unique(binding[~clean | (idents[:, 3] == ROLE_FREE)])
        ok = np.setdiff1d(np.unique(binding), bad)
        pool = spellings(view, clean, spaced)
        if cfg.source == "partner" and ctx is not None:
            other = ctx.partner(rng)
            pool = spellings(other, *occurrences(other)) if len(other.idents) else {}
        variants: dict[str, set[bool]] = {}
        for name, sp in pool:
            variants.setdefault(name, set()).add(sp)
        k = max(1, int(round(cfg.rate * len(ok)))) if len(ok) else 0
        edits: list[tuple[int, int, np.ndarray]] = []
        for b in rng.permutation(ok)[:k].tolist():
            rows = np.flatnonzero(binding == b)
            if not cfg.consistent:
                rows = rows[[rng.integers(len(rows))]]
            name = view.names[idents[rows[0], 2]]
            need = set(spaced[rows].tolist())
            names = sorted(n for n, v in variants.items() if n != name and _shape(n) == _shape(name) and need <= v)
            if not names:
                continue
            new = names[rng.integers(len(names))]
            edits += [(int(idents[r, 0]), int(idents[r, 1]), pool[(new, bool(spaced[r]))]) for r in rows.tolist()]
        return _splice(ids, labels, edits)

    return ident_rtd


def _splice(ids: np.ndarray, labels: np.ndarray, edits: list) -> Example:
    """Replace token ranges by new ids (label 1), keep the rest (its labels)."""
    pieces, labs, at = [], [], 0
    for s, e, new in sorted(edits, key=lambda x: x[0]):
        pieces += [ids[at:s], new]
        labs += [labels[at:s], np.ones(len(new), np.int64)]
        at = e
    pieces.append(ids[at:])
    labs.append(labels[at:])
    out = np.concatenate(pieces).astype(ids.dtype)
    return Example(out, np.ones(len(out), bool), labels={"rtd": np.concatenate(labs)})
