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
   so no tokenizer is needed online. A partner of another language lends no names (they may be
   this language's keywords): the file's own are drawn instead. The new name is never the name of
   a binding whose scope holds or lies in the renamed one's (:func:`scopes`: the smallest
   definition holding all its occurrences; free names have the whole file), nor a new name
   already given in such a scope, so the renamed code re-resolves to the same bindings (before:
   20.9% of renamed bindings of stdlib files merged with or captured another; tests/test_ident_rtd.py
   re-resolves renamed stdlib code and finds none). A binding with no such name left is not renamed.
4. Replace every occurrence of the binding (``consistent=True``: the renamed code means the same,
   only the name is foreign) or one occurrence at random (``consistent=False``).
5. Labels ``labels["rtd"]``: 1 on every token of a replaced occurrence, 0 on every other
   ordinary token, IGNORE on special tokens (ELECTRA labels all tokens). Bidirectional.
Cost: O(T + I + I F) per document (F definitions), O(B) per renamed binding. Not covered: a
binding whose name only has occurrences straddling a token boundary with punctuation (skipped);
scopes finer than a definition (comprehensions, blocks) count as their definition's, and class
bodies as enclosing their methods (safe: they only forbid more names).
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


def scopes(view, uniq: np.ndarray, inv: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(B,) token ranges [a, z): each binding's scope, the smallest definition (view.functions) that
    holds all its occurrences, a definition whose name is one of them excepted (a function's name
    belongs to the scope around it); the whole file when none does, and for free names."""
    idents, funcs = np.asarray(view.idents), np.asarray(view.functions).reshape(-1, 7).astype(np.int64)
    n, t = len(uniq), len(view.input_ids)
    first = np.full(n, t, np.int64)
    last = np.zeros(n, np.int64)
    np.minimum.at(first, inv, idents[:, 0])
    np.maximum.at(last, inv, idents[:, 1])
    a, z = np.zeros(n, np.int64), np.full(n, t, np.int64)
    if len(funcs):
        s, e, ns, ne = funcs[:, 1], funcs[:, 2], funcs[:, 3], funcs[:, 4]
        named = np.zeros((n, len(funcs)), bool)  # binding b has an occurrence in definition f's name
        in_name = (idents[:, :1] >= ns) & (idents[:, :1] < ne)  # (I, F)
        r, f = np.nonzero(in_name)
        named[inv[r], f] = True
        holds = (s <= first[:, None]) & (last[:, None] <= e) & ~named
        size = np.where(holds, e - s, np.iinfo(np.int64).max)
        best = size.argmin(axis=1)
        has = holds[np.arange(n), best]
        a[has], z[has] = s[best[has]], e[best[has]]
    free = np.zeros(n, bool)
    free[inv[idents[:, 3] == ROLE_FREE]] = True
    a[free], z[free] = 0, t
    return a, z


def renames(view, rng: np.random.Generator, ctx, cfg: Config) -> list[tuple[np.ndarray, str, list]]:
    """The renames of one read (steps 1-4): (identifier rows, new name, the token ids of each row's
    new spelling), in the order drawn."""
    idents = np.asarray(view.idents)
    clean, spaced = occurrences(view)
    binding = idents[:, 4]
    bad = np.unique(binding[~clean | (idents[:, 3] == ROLE_FREE)])
    ok = np.setdiff1d(np.unique(binding), bad)
    pool = spellings(view, clean, spaced)
    if cfg.source == "partner" and ctx is not None:
        _, other = ctx.partner(rng)
        if other.lang == view.lang:  # another language's names may be this one's keywords
            pool = spellings(other, *occurrences(other)) if len(other.idents) else {}
    # replacement names by (shape, spellings needed): with a leading space, without, both
    names_for: dict[tuple[int, int], list[str]] = {}
    for name in sorted({n for n, _ in pool}):
        have = 1 * ((name, False) in pool) + 2 * ((name, True) in pool)
        for need in (1, 2, 3):
            if need & have == need:
                names_for.setdefault((_shape(name), need), []).append(name)
    # every name as an id: the view's own, then the pool's others; a binding's name id
    table = {n: i for i, n in enumerate(view.names)}
    for n, _ in pool:
        table.setdefault(n, len(table))
    ids_for = {key: np.array([table[n] for n in names], np.int64) for key, names in names_for.items()}
    uniq, inv = np.unique(binding, return_inverse=True)
    name_of = np.zeros(len(uniq), np.int64)
    name_of[inv] = idents[:, 2]
    a, z = scopes(view, uniq, inv)
    k = max(1, int(round(cfg.rate * len(ok)))) if len(ok) else 0
    order = np.argsort(binding, kind="stable")
    lo = np.searchsorted(binding[order], ok)
    hi = np.searchsorted(binding[order], ok, side="right")
    at = np.searchsorted(uniq, ok)  # each qualifying binding's position in uniq
    out, given = [], []  # given: (scope start, end, name id) of every new name so far
    for j in rng.permutation(len(ok))[:k].tolist():
        rows = order[lo[j]: hi[j]]
        if not cfg.consistent:
            rows = rows[[rng.integers(len(rows))]]
        name = view.names[idents[rows[0], 2]]
        sp = spaced[rows]
        key = (_shape(name), 1 * bool((~sp).any()) + 2 * bool(sp.any()))
        names, cand = names_for.get(key, []), ids_for.get(key)
        if not names:
            continue
        # never a name of a binding whose scope holds this one's or lies in it (itself included)
        b = at[j]
        nested = ((a <= a[b]) & (z[b] <= z)) | ((a[b] <= a) & (z <= z[b]))
        taken = np.zeros(len(table), bool)
        taken[name_of[nested]] = True
        for ga, gz, g in given:  # and never a new name already given in a nested scope
            taken[g] |= (ga <= a[b] and z[b] <= gz) or (a[b] <= ga and gz <= z[b])
        free = np.flatnonzero(~taken[cand])
        if len(free) == 0:
            continue
        new = names[int(free[rng.integers(len(free))])]
        out.append((rows, new, [pool[(new, bool(spaced[r]))] for r in rows.tolist()]))
        given.append((int(a[b]), int(z[b]), table[new]))
        if cfg.consistent:  # every occurrence renamed: the old name is gone from this scope
            name_of[b] = table[new]
    return out


def build(vocab: render.Vocab, cfg: Config = Config()):
    def ident_rtd(view, rng: np.random.Generator, ctx=None) -> Example | None:
        ids = np.asarray(view.input_ids)
        idents = np.asarray(view.idents)
        labels = np.where(vocab.candidates(ids), 0, IGNORE).astype(np.int64)
        if len(idents) == 0:
            return Example(ids.copy(), np.ones(len(ids), bool), labels={"rtd": labels})
        edits = [(int(idents[r, 0]), int(idents[r, 1]), t) for rows, _, toks in renames(view, rng, ctx, cfg)
                 for r, t in zip(rows.tolist(), toks)]
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
OBJECTIVE = Objective("ident_rtd", build, Config, heads=("rtd",), views=("code",), structure=True)
