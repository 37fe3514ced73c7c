"""``ident_mask``: recover masked identifiers (DOBF; CodeT5's masked identifier prediction), as one
prefix-LM sequence (the t5_span rendering).

1. Windows: a document longer than ``length - target_room`` tokens is cut into windows of that
   many tokens (the targets need the rest of the row) tiling it from a random offset, one Example
   each (a list: one read of a file feeds all of it); ``windows=1``: one random window.
2. Bindings: those whose every occurrence lies inside the window, is not a free name, and spells
   its name cleanly (codept.objectives.ident_rtd.occurrences); pick ``rate`` of them (at least
   one), at most the tokenizer's sentinel count.
3. Inputs: every occurrence of the i-th picked binding becomes ONE token ``<sentinel_i>`` (all its
   tokens collapse into it; the leading space of a spaced occurrence is lost with them). Targets:
   ``<sentinel_0> name_0 <sentinel_1> name_1 ... <eos>``, each name as the token ids of one of its
   own occurrences (so no tokenizer online).
4. Example = inputs + targets: prefix True on the inputs, False on the targets; ``labels["lm"]``
   the target ids (UNshifted, the "lm" head), IGNORE on the inputs. None when no binding qualifies.
Cost: O(T + I). Not covered: free names (builtins, imported names) are never masked; a target list
longer than ``target_room`` drops its last bindings (their occurrences are then kept in the input).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from codept.data.example import IGNORE, Example
from codept.objectives import render
from codept.objectives.ident_rtd import occurrences
from codept.objectives.spec import Objective
from codept.structure.kinds import ROLE_FREE


@dataclass(frozen=True)
class Config:
    rate: float = 0.3  # share of the qualifying bindings masked
    length: int = 512  # longest example (inputs + targets): set it to the row length
    target_room: int = 96  # tokens reserved for the targets
    windows: int = 0  # windows per read: 0 = the whole file in windows (a list); 1 = one random window

    def __post_init__(self):
        if self.windows < 0:
            raise ValueError(f"ident_mask windows={self.windows}: must be >= 0 (0 = every window)")
        if not 0 < self.rate <= 1:
            raise ValueError(f"ident_mask rate={self.rate}: must be in (0, 1]")
        if not 0 < self.target_room < self.length:
            raise ValueError(f"ident_mask target_room={self.target_room}: must be in (0, length={self.length})")


def build(vocab: render.Vocab, cfg: Config = Config()):
    sentinels = np.asarray(vocab.sentinel_ids, dtype=np.int64)
    if len(sentinels) == 0:
        raise ValueError("ident_mask needs sentinel tokens (<sentinel_i> / <extra_id_i>) in the tokenizer; it has none")
    eos = vocab.id_of("eos")
    room = cfg.length - cfg.target_room

    def ident_mask(view, rng: np.random.Generator, ctx=None) -> Example | list[Example] | None:
        ids = np.asarray(view.input_ids)
        idents = np.asarray(view.idents)
        if len(idents) == 0 or len(ids) == 0:
            return None
        if cfg.windows == 1 or len(ids) <= room:
            lo = int(rng.integers(0, len(ids) - room + 1)) if len(ids) > room else 0
            return window(view, ids, idents, lo, min(len(ids), lo + room), rng)
        shift = int(rng.integers(room))  # windows of `room` tokens tile the file from a random offset
        starts = [0] + list(range(shift or room, len(ids), room))
        out = [ex for lo, hi in zip(starts, starts[1:] + [len(ids)])
               if (ex := window(view, ids, idents, lo, hi, rng)) is not None]
        return (out[: cfg.windows] if cfg.windows else out) or None

    def window(view, ids, idents, lo: int, hi: int, rng) -> Example | None:
        inside = (idents[:, 0] >= lo) & (idents[:, 1] <= hi)
        rows = np.flatnonzero(inside)
        if len(rows) == 0:
            return None
        clean, _ = occurrences(view, rows)
        binding = idents[:, 4]
        # bindings with an occurrence outside the window, unclean, or free never qualify
        bad = np.unique(np.concatenate([binding[~inside], binding[rows][~clean | (idents[rows, 3] == ROLE_FREE)]]))
        ok = np.setdiff1d(np.unique(binding[rows]), bad)
        if len(ok) == 0:
            return None
        k = min(len(sentinels), max(1, int(round(cfg.rate * len(ok)))))
        picked = rng.permutation(ok)[:k]
        inputs, targets = _render(ids, idents[rows], binding[rows], picked, sentinels, lo, hi, cfg.target_room - 1)
        targets = np.append(targets, eos)
        prefix = np.concatenate([np.ones(len(inputs), bool), np.zeros(len(targets), bool)])
        labels = np.concatenate([np.full(len(inputs), IGNORE, np.int64), targets])
        return Example(np.concatenate([inputs, targets]).astype(ids.dtype), prefix, labels={"lm": labels})

    return ident_mask


def _render(ids, idents, binding, picked, sentinels, lo: int, hi: int, room: int):
    """Inputs (the window with each picked binding's occurrences as its sentinel) and targets."""
    targets: list[np.ndarray] = []
    sentinel_at: dict[int, int] = {}  # token start of an occurrence -> (its end, sentinel id)
    used = 0
    for i, b in enumerate(picked.tolist()):
        rows = np.flatnonzero(binding == b)
        s0, e0 = int(idents[rows[0], 0]), int(idents[rows[0], 1])
        name = ids[s0:e0]
        if used + 1 + len(name) > room:
            break
        targets += [sentinels[i:i + 1], name]
        used += 1 + len(name)
        for r in rows.tolist():
            sentinel_at[int(idents[r, 0])] = (int(idents[r, 1]), int(sentinels[i]))
    pieces, at = [], lo
    for s in sorted(sentinel_at):
        e, sid = sentinel_at[s]
        pieces += [ids[at:s], np.array([sid], ids.dtype)]
        at = e
    pieces.append(ids[at:hi])
    tgt = np.concatenate(targets) if targets else np.zeros(0, np.int64)
    return np.concatenate(pieces), tgt.astype(np.int64)


# DOBF: the masked names after the code, causal
OBJECTIVE = Objective("ident_mask", build, Config, heads=("lm",), views=("code",))
