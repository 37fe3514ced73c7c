"""``ident_mask``: recover masked identifiers (DOBF; CodeT5's masked identifier prediction), as one
prefix-LM sequence (the t5_span rendering).

1. Windows: a document longer than ``length - target_room`` tokens is cut into windows of that
   many tokens (the targets need the rest of the row) tiling it from a random offset, one Example
   each (a list: one read of a file feeds all of it); ``windows=1``: one random window. Unless
   ``length`` is given, the recipes lower it to seq_len (a longer example would be split by packing,
   its targets cut from their inputs) and they refuse a given length > seq_len. ``target_room``
   defaults to 3/16 of ``length`` (96 at 512, 48 at 256): a fixed 96 left rows of 256 65% full
   (windows of 160 tokens, targets of ~20), 3/16 83%; on the stdlib no picked binding was dropped
   for lack of room at either setting (of ~6,000).
2. Bindings: those whose every occurrence lies inside the window, is not a free name, and spells
   its name cleanly (codept.objectives.ident_rtd.occurrences); pick ``rate`` of them (at least
   one), at most the tokenizer's sentinel count.
3. Inputs: every occurrence of the i-th picked binding becomes ONE token ``<sentinel_i>`` (all its
   tokens collapse into it; the leading space of a spaced occurrence is lost with them). Targets:
   ``<sentinel_0> name_0 <sentinel_1> name_1 ... <eos>``, each name as the token ids of one of its
   own occurrences (so no tokenizer online).
4. Example = inputs + targets: prefix True on the inputs, False on the targets; ``labels["lm"]``
   the target ids (UNshifted, the "lm" head), IGNORE on the inputs. None when no binding qualifies.
Cost: O(T + I) per read plus O(I) per window: which bindings qualify in which window is decided
once per read (every occurrence of a binding inside one window: its first and last tokens), and a
window's inputs are one gather (the occurrences' tokens after their first dropped, the first set to
the sentinel). Not covered: free names (builtins, imported names) are never masked; a target list
longer than ``target_room`` drops its last bindings (their occurrences are then kept in the input).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from codept.data.example import IGNORE, Example
from codept.objectives import render
from codept.objectives.ident_rtd import occurrences
from codept.objectives.spec import Objective
from codept.structure.kinds import ROLE_FREE


@dataclass(frozen=True)
class Config:
    rate: float = 0.3  # share of the qualifying bindings masked
    length: int = 512  # longest example (inputs + targets); unless given, recipes lower it to seq_len
    target_room: int = 0  # tokens reserved for the targets; 0 = 3/16 of length (96 at 512, 48 at 256)
    windows: int = 0  # windows per read: 0 = the whole file in windows (a list); 1 = one random window
    whole_in_row: ClassVar[bool] = True  # a split example loses its inputs: recipes check length <= seq_len
    row_field: ClassVar[str] = "length"  # the setting recipes fit to the row (codept.train.loop.row_settings)
    default_row_share: ClassVar[float] = 1.0  # unless given, length = min(length, seq_len)

    def __post_init__(self):
        if self.windows < 0:
            raise ValueError(f"ident_mask windows={self.windows}: must be >= 0 (0 = every window)")
        if not 0 < self.rate <= 1:
            raise ValueError(f"ident_mask rate={self.rate}: must be in (0, 1]")
        if not 0 < self.room() < self.length:
            raise ValueError(f"ident_mask target_room={self.target_room}: must be in (0, length={self.length}) "
                             "(0: 3/16 of length)")

    def room(self) -> int:
        """The target room in tokens: ``target_room``, or 3/16 of ``length`` when it is 0."""
        return self.target_room or max(1, (3 * self.length) // 16)


def build(vocab: render.Vocab, cfg: Config = Config()):
    sentinels = np.asarray(vocab.sentinel_ids, dtype=np.int64)
    if len(sentinels) == 0:
        raise ValueError("ident_mask needs sentinel tokens (<sentinel_i> / <extra_id_i>) in the tokenizer; it has none")
    eos = vocab.id_of("eos")
    target_room = cfg.room()
    room = cfg.length - target_room

    def ident_mask(view, rng: np.random.Generator, ctx=None) -> Example | list[Example] | None:
        ids = np.asarray(view.input_ids)
        idents = np.asarray(view.idents)
        if len(idents) == 0 or len(ids) == 0:
            return None
        if cfg.windows == 1 or len(ids) <= room:
            lo = int(rng.integers(0, len(ids) - room + 1)) if len(ids) > room else 0
            bounds = [(lo, min(len(ids), lo + room))]
        else:
            shift = int(rng.integers(room))  # windows of `room` tokens tile the file from a random offset
            starts = [0] + list(range(shift or room, len(ids), room))
            bounds = list(zip(starts, starts[1:] + [len(ids)]))
        out = []
        uniq, inv, first_row, ok_of = _bindings(view, idents, bounds)
        in_order = len(idents) < 2 or bool((idents[1:, 0] >= idents[:-1, 0]).all())  # rows by token start
        for (lo, hi), ok in zip(bounds, ok_of):
            if len(ok) == 0:
                continue
            k = min(len(sentinels), max(1, int(round(cfg.rate * len(ok)))))
            picked = rng.permutation(ok)[:k]  # positions in uniq (a permutation moves values, whatever they are)
            rank = np.full(len(uniq), -1, np.int64)  # binding (position in uniq) -> its sentinel number
            rank[picked] = np.arange(len(picked))
            inputs, targets = _render(ids, idents, rank[inv], first_row[picked], sentinels, lo, hi,
                                      target_room - 1, in_order)
            targets = np.append(targets, eos)
            prefix = np.concatenate([np.ones(len(inputs), bool), np.zeros(len(targets), bool)])
            labels = np.concatenate([np.full(len(inputs), IGNORE, np.int64), targets])
            out.append(Example(np.concatenate([inputs, targets]).astype(ids.dtype), prefix, labels={"lm": labels}))
        if cfg.windows == 1 or len(bounds) == 1:
            return out[0] if out else None
        return (out[: cfg.windows] if cfg.windows else out) or None

    return ident_mask


def _bindings(view, idents: np.ndarray, bounds: list[tuple[int, int]]):
    """(sorted binding ids, each identifier's position among them, each binding's first identifier
    row, per window [lo, hi) the positions of the bindings that qualify there: every occurrence
    inside it, clean and not a free name; the windows tile the file, so a binding qualifies in at
    most one)."""
    clean, _ = occurrences(view)
    uniq, first_row, inv = np.unique(idents[:, 4], return_index=True, return_inverse=True)
    first = np.full(len(uniq), np.iinfo(np.int64).max)
    last = np.full(len(uniq), -1, np.int64)
    np.minimum.at(first, inv, idents[:, 0])
    np.maximum.at(last, inv, idents[:, 1])
    bad = np.zeros(len(uniq), bool)
    bad[inv[~clean | (idents[:, 3] == ROLE_FREE)]] = True
    lo = np.array([b[0] for b in bounds], np.int64)
    hi = np.array([b[1] for b in bounds], np.int64)
    w = np.searchsorted(lo, first, side="right") - 1  # the window holding the binding's first token
    ok = ~bad & (w >= 0) & (last <= hi[np.maximum(w, 0)])
    return uniq, inv, first_row, [np.flatnonzero(ok & (w == j)) for j in range(len(bounds))]


def _render(ids, idents, rank, first_row, sentinels, lo: int, hi: int, room: int, in_order: bool = False):
    """Inputs (window [lo, hi) with every occurrence of the i-th picked binding as ``<sentinel_i>``;
    ``rank``: each identifier's i, -1 if not picked) and targets ``<sentinel_i> name_i ...`` (each
    name spelled as its binding's first occurrence; from the first binding whose target would pass
    `room` on, the bindings are dropped and keep their names). ``in_order``: the rows are sorted by
    token start."""
    s0, e0 = idents[first_row, 0], idents[first_row, 1]
    fits = np.cumsum(1 + e0 - s0) <= room
    n = len(fits) if fits.all() else int(np.argmin(fits))
    tgt = [x for i in range(n) for x in (sentinels[i:i + 1], ids[s0[i]:e0[i]])]
    targets = (np.concatenate(tgt) if tgt else np.zeros(0, np.int64)).astype(np.int64)
    occ = np.flatnonzero((rank >= 0) & (rank < n))  # the occurrences to replace
    s, e, sid = idents[occ, 0].astype(np.int64), idents[occ, 1].astype(np.int64), sentinels[rank[occ]]
    if not in_order:
        srt = np.argsort(s, kind="stable")
        s, e, sid, occ = s[srt], e[srt], sid[srt], occ[srt]
    if (e <= s).any() or (s[1:] < e[:-1]).any():  # ranges that overlap or share a start: in written order
        seq = np.lexsort((occ, rank[occ]))  # (binding, row): the order the ranges were written in
        return _render_pieces(ids, s[seq], e[seq], sid[seq], lo, hi), targets
    cut = np.zeros(hi - lo + 1, np.int64)  # drop an occurrence's tokens after its first
    cut[s - lo + 1] += 1
    cut[e - lo] -= 1
    out = ids[lo:hi].copy()
    out[s - lo] = sid
    return out[np.cumsum(cut[:-1]) <= 0], targets


def _render_pieces(ids, s, e, sid, lo: int, hi: int) -> np.ndarray:
    """The window with token ranges [s, e) replaced by one token each, for ranges that overlap or
    share a start: the last range written for a start wins, the pieces follow the starts."""
    at_start = {}
    for a, b, x in zip(s.tolist(), e.tolist(), sid.tolist()):
        at_start[a] = (b, x)
    pieces, at = [], lo
    for a in sorted(at_start):
        b, x = at_start[a]
        pieces += [ids[at:a], np.array([x], ids.dtype)]
        at = b
    pieces.append(ids[at:hi])
    return np.concatenate(pieces)


# DOBF: the masked names after the code, causal
OBJECTIVE = Objective("ident_mask", build, Config, heads=("lm",), views=("code",), structure=True)
