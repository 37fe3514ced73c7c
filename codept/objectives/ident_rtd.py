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
from codept.objectives.spec import Objective
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


def occurrences(view, rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(I,) bool: the identifier's tokens spell its name (after an optional leading space), and
    (I,) bool: its first token starts with a space or tab. Vectorised: the identifier lies inside
    its token range, so the range spells the name iff it is the name's length, or one more with a
    blank first character. `rows`: only those identifier rows (the result is for them)."""
    idents, off = np.asarray(view.idents), np.asarray(view.offsets)
    if rows is not None:  # only these identifier rows
        idents = idents[rows]
    if len(idents) == 0:
        return np.zeros(0, bool), np.zeros(0, bool)
    name_len = np.fromiter(map(len, view.names), np.int64, len(view.names))[idents[:, 2]]
    c0 = off[idents[:, 0], 0].astype(np.int64)
    span = off[idents[:, 1] - 1, 1].astype(np.int64) - c0
    first = np.frombuffer(view.text.encode("utf-32-le"), np.uint32)[np.minimum(c0, max(len(view.text) - 1, 0))]
    spaced = (first == 32) | (first == 9)
    clean = (span == name_len) | ((span == name_len + 1) & spaced)
    return clean, spaced & clean


def spellings(view, clean: np.ndarray, spaced: np.ndarray) -> dict[tuple[str, bool], np.ndarray]:
    """(name, leading space) -> the token ids of one clean, non-free occurrence spelled so."""
    idents, ids = np.asarray(view.idents), np.asarray(view.input_ids)
    # names of the file's own bindings only: a free name may be a builtin the grammar knows
    # (Go's `make(x)` parses x as a type)
    rows = np.flatnonzero(clean & (idents[:, 3] != ROLE_FREE))
    _, first = np.unique(idents[rows, 2] * 2 + spaced[rows], return_index=True)
    return {(view.names[idents[r, 2]], bool(spaced[r])): ids[idents[r, 0]: idents[r, 1]] for r in rows[first].tolist()}


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
            _, other = ctx.partner(rng)
            pool = spellings(other, *occurrences(other)) if len(other.idents) else {}
        # replacement names by (shape, spellings needed): with a leading space, without, both
        names_for: dict[tuple[int, int], list[str]] = {}
        for name in sorted({n for n, _ in pool}):
            have = 1 * ((name, False) in pool) + 2 * ((name, True) in pool)
            for need in (1, 2, 3):
                if need & have == need:
                    names_for.setdefault((_shape(name), need), []).append(name)
        k = max(1, int(round(cfg.rate * len(ok)))) if len(ok) else 0
        order = np.argsort(binding, kind="stable")
        lo = np.searchsorted(binding[order], ok)
        hi = np.searchsorted(binding[order], ok, side="right")
        edits: list[tuple[int, int, np.ndarray]] = []
        for j in rng.permutation(len(ok))[:k].tolist():
            rows = order[lo[j]: hi[j]]
            if not cfg.consistent:
                rows = rows[[rng.integers(len(rows))]]
            name = view.names[idents[rows[0], 2]]
            sp = spaced[rows]
            names = names_for.get((_shape(name), 1 * bool((~sp).any()) + 2 * bool(sp.any())), [])
            if len(names) < 1 + (name in names):
                continue
            new = names[rng.integers(len(names))]
            while new == name:
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


# renamed identifiers detected per token
OBJECTIVE = Objective("ident_rtd", build, Config, heads=("rtd",), views=("code",))
