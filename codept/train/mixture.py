"""The mixture spec of a run: ``data.mixture=mlm:1,code_doc:2,mlm@text:1`` -> [(key, weight)], and
what a key names (its objective, its corpus) and trains (its heads). Plain functions over the
objective registry (codept.objectives), no training code, so codept.train.resume and
codept.train.loop both read them without importing each other.
Cost: a dict look-up per entry. Not covered: the corpora themselves (each recipe's CORPORA).
"""

from __future__ import annotations

import difflib
import math

from codept.objectives import HEADS_OF, OBJECTIVES, VIEWS_OF
from codept.train.settings import ConfigError

CORPUS_SEP = "@"


def objective_of(key: str) -> str:
    """``"mlm@text"`` -> ``"mlm"`` (a mixture key names an objective and, optionally, its corpus)."""
    return key.partition(CORPUS_SEP)[0]


def corpus_of(key: str) -> str:
    """``"mlm@text"`` -> ``"text"``; a key without a corpus reads the recipe's first (default) corpus."""
    return key.partition(CORPUS_SEP)[2] or "code"


def parse_mixture(spec: str, corpora: dict[str, str] | None = None) -> list[tuple[str, float]]:
    """``"mlm:1,code_doc:2,mlm@text:1"`` -> [(key, weight)]; ``corpora`` maps the recipe's corpus names
    to their view kinds (default {"code": "code"}): an objective must read that kind
    (codept.objectives.VIEWS_OF). ConfigError naming the entry and the rule."""
    corpora = corpora or {"code": "code"}
    out: list[tuple[str, float]] = []
    for entry in filter(None, (e.strip() for e in spec.split(","))):
        key, colon, raw = entry.partition(":")
        name, corpus = objective_of(key), corpus_of(key)
        if name not in OBJECTIVES:
            close = difflib.get_close_matches(name, list(OBJECTIVES), n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise ConfigError(f"data.mixture={spec!r}: unknown objective {name!r}{hint} (registered: "
                              f"{', '.join(OBJECTIVES)})")
        if corpus not in corpora:
            raise ConfigError(f"data.mixture={spec!r}: {key!r} names corpus {corpus!r}; this recipe has "
                              f"{', '.join(corpora)} (write objective{CORPUS_SEP}corpus)")
        if corpora[corpus] not in VIEWS_OF[name]:
            raise ConfigError(f"data.mixture={spec!r}: {name} reads {'/'.join(VIEWS_OF[name])} views, corpus "
                              f"{corpus!r} holds {corpora[corpus]} views")
        try:
            w = float(raw) if colon else 1.0
        except ValueError:
            raise ConfigError(f"data.mixture={spec!r}: weight {raw!r} of {key} is not a number") from None
        if not (math.isfinite(w) and w > 0):
            raise ConfigError(f"data.mixture={spec!r}: weight {raw!r} of {key} must be finite and > 0 "
                              "(drop the objective instead of weighing it 0)")
        same = [k for k, _ in out if (objective_of(k), corpus_of(k)) == (name, corpus)]
        if same:  # mlm and mlm@code are one entry (code is the default corpus)
            raise ConfigError(f"data.mixture={spec!r}: {key} appears twice"
                              f"{f' (as {same[0]})' if same[0] != key else ''} (give it one weight)")
        out.append((key, w))
    if not out:
        raise ConfigError(f"data.mixture={spec!r}: name at least one objective as name:weight")
    return out


def corpora_used(mixture: list[tuple[str, float]]) -> list[str]:
    """The corpora the mixture reads, in first-use order."""
    return list(dict.fromkeys(corpus_of(k) for k, _ in mixture))


def heads_of(mixture: list[tuple[str, float]]) -> list[str]:
    """The heads the mixture trains, sorted (codept.objectives.HEADS_OF)."""
    return sorted({h for key, _ in mixture for h in HEADS_OF[objective_of(key)]})
