"""What an objective declares about itself, in its own module: :class:`Objective`.

Each objective module ends with ``OBJECTIVE = Objective(...)``: its name, its ``build(vocab, cfg)``
and Config, the heads its labels train (codept.model.pretrainer.HEADS names), the view kinds it
reads (code, text, pair, trace), default loss weights of its heads, the model settings its
batches need, and whether it reads the code structure (``structure``: token-only views are not its
documents). codept.objectives.OBJECTIVES lists the declarations, one line each; recipes read
everything else from them. A declaration is data: nothing is registered on import.
Not covered: checking head names against the model's registry (the model layer sits above this
one: tests/test_objectives.py checks them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Mapping


@dataclass(frozen=True)
class Objective:
    name: str
    build: Callable  # (vocab, Config) -> objective(view, rng, ctx=None) -> Example | list | None
    config: type  # frozen dataclass of its settings (``objective.<name>.<field>``)
    heads: tuple[str, ...]  # the heads its labels train, codept.model.pretrainer.HEADS names
    views: tuple[str, ...]  # the view kinds it reads; a recipe refuses a corpus of another kind
    loss_weights: Mapping[str, float] = field(default_factory=dict)  # default ``loss.<head>`` weights
    model: Mapping[str, Any] = field(default_factory=dict)  # model settings its batches need
    head_options: Callable | None = None  # Config -> {head: {option: value}}: its settings that build its heads
    # reads the code structure (spans, identifiers, dataflow, definitions): True, or Config -> bool.
    # A token-only code view (a language without a grammar) is then not one of its documents: the
    # recipes leave such views out of its source and count them (codept.train.loop.streams)
    structure: bool | Callable = False

    def needs_structure(self, cfg) -> bool:
        """Whether this objective with settings `cfg` (its Config) reads the code structure."""
        return bool(self.structure(cfg) if callable(self.structure) else self.structure)

    def __post_init__(self):
        for what in ("heads", "views"):
            v = getattr(self, what)
            if not (isinstance(v, tuple) and v and all(isinstance(x, str) for x in v)):
                raise ValueError(f"objective {self.name!r}: {what}={v!r} must be a non-empty tuple of names")
        unknown = sorted(set(self.loss_weights) - set(self.heads))
        if unknown:
            raise ValueError(f"objective {self.name!r}: loss_weights for {unknown}, which are not its heads "
                             f"{list(self.heads)}")
        object.__setattr__(self, "loss_weights", MappingProxyType(dict(self.loss_weights)))
        object.__setattr__(self, "model", MappingProxyType(dict(self.model)))
