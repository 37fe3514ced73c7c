"""The ONE parser of every ``key=value`` setting of the recipes, typed by dataclass type hints.

:func:`parse_settings` splits the items by prefix: RunConfig fields (no prefix; :func:`override`),
``<section>.<field>`` (model, data, probe, val: any dataclass; :func:`replace_typed`), objective
settings ``objective.<name>.<field>`` (typed by the objective's Config) and per-head loss weights
``loss.<head>=w``. Values are parsed from the dataclass type hints (:func:`parse_value`: int, float,
bool as true/false/1/0/yes/no only, str, tuples as comma lists, Optional); an unknown key (with a
difflib suggestion), a key given twice, a bad value or a ``__post_init__`` refusal is a
:class:`ConfigError` naming the key, the value and what is allowed. :func:`override` applies plain
RunConfig items (setting global_batch_tokens or _rows > 0 clears the other).
Cost: negligible; imports no torch (a bad setting is refused before any heavy import). Limits: the
type hints it parses are the ones above (a field of another type is a TypeError naming it);
mixture-dependent checks (a setting for an objective or head the run does not train) are
codept.train.loop.configure's; RunConfig's own rules are codept.train.config's.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import types
import typing
from dataclasses import dataclass
from typing import Callable, Mapping

from codept.train.config import RunConfig


class ConfigError(ValueError):
    """A bad setting. The message names the key, the value and the rule; recipes print it without a
    traceback and exit 2 (codept.train.loop.guarded)."""


BOOLS = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False}


def _is_tuple(tp) -> bool:
    return typing.get_origin(tp) is tuple


def _optional_arg(tp):
    """X for ``Optional[X]`` / ``X | None``, else None."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(tp)) == 2:
            return args[0]
    return None


def _parse_tuple(key: str, raw: str, tp, bad):
    args = typing.get_args(tp)
    parts = [p.strip() for p in raw.replace("(", "").replace(")", "").split(",") if p.strip()]
    if len(args) == 2 and args[1] is Ellipsis:  # tuple[X, ...]: any length, "" = ()
        return tuple(parse_value(key, p, args[0]) for p in parts)
    if len(parts) != len(args):
        raise bad(f"{len(args)} comma-separated values")
    return tuple(parse_value(key, p, a) for p, a in zip(parts, args))


def _parse_int(raw: str, bad) -> int:
    s = raw.strip().replace("_", "")
    try:
        return int(s)
    except ValueError:
        try:
            f = float(s)  # allow 1e3 / 2e5 but only when integral
        except ValueError:
            raise bad("an integer") from None
        if not math.isfinite(f) or not f.is_integer():
            raise bad("an integer") from None
        return int(f)


def _parse_float(raw: str, bad) -> float:
    try:
        v = float(raw.strip().replace("_", ""))
    except ValueError:
        raise bad("a number") from None
    if not math.isfinite(v):
        raise bad("a finite number")
    return v


def parse_value(key: str, raw: str, tp):
    """``raw`` parsed to the type hint ``tp``: int (``1e3`` and ``1_000`` allowed when integral), float
    (finite), bool (only true/false/yes/no/1/0, any case), str, ``tuple[X, Y]`` / ``tuple[X, ...]``
    (comma lists), ``Optional[X]`` (``none`` or empty = None). Anything else: ConfigError naming the
    key, the value and what is allowed."""
    def bad(expected: str):
        return ConfigError(f"{key}={raw!r}: expected {expected}")

    inner = _optional_arg(tp)
    if inner is not None:
        return None if raw.strip().lower() in ("", "none") else parse_value(key, raw, inner)
    if _is_tuple(tp):
        return _parse_tuple(key, raw, tp, bad)
    if tp is bool:
        low = raw.strip().lower()
        if low not in BOOLS:
            raise bad("a boolean: one of true/false/1/0/yes/no")
        return BOOLS[low]
    if tp is int:
        return _parse_int(raw, bad)
    if tp is float:
        return _parse_float(raw, bad)
    if tp is str:
        return raw
    raise TypeError(f"setting {key}: field type {tp!r} has no parser")


def split_item(item: str) -> tuple[str, str]:
    """``"key=value"`` -> (key, value); ConfigError without '=' or with an empty key."""
    key, eq, raw = item.partition("=")
    if not eq or not key.strip():
        raise ConfigError(f"setting {item!r}: expected key=value")
    return key.strip(), raw


def _unknown(key: str, names: list[str], what: str) -> ConfigError:
    close = difflib.get_close_matches(key, names, n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return ConfigError(f"unknown setting {key!r}: {what}{hint} (allowed: {', '.join(names) or 'none'})")


def replace_typed(cfg, raw: Mapping[str, str], prefix: str = ""):
    """The dataclass instance ``cfg`` with fields replaced by ``raw`` strings parsed to their type hints.
    Unknown fields (with a close-match suggestion), unparsable values and the dataclass's own
    ``__post_init__`` checks all raise ConfigError naming ``prefix + field``."""
    hints = typing.get_type_hints(type(cfg))
    names = [f.name for f in dataclasses.fields(cfg)]
    changes = {}
    for key, value in raw.items():
        if key not in names:
            raise _unknown(prefix + key, [prefix + n for n in names], f"{type(cfg).__name__} has no field {key!r}")
        changes[key] = parse_value(prefix + key, value, hints[key])
    return checked(lambda: dataclasses.replace(cfg, **changes), prefix.rstrip(".") or type(cfg).__name__,
                   prefix=prefix, fields=list(changes))


def checked(build: Callable, where: str, prefix: str = "", fields: list[str] = ()):
    """``build()``; a ValueError/TypeError it raises becomes a ConfigError prefixed with ``where``, or,
    when its message starts with one of the given ``fields`` (``"buffer=0: must be >= 1"``), with the
    whole key (``"data.buffer=0: must be >= 1"``)."""
    try:
        return build()
    except ConfigError:
        raise
    except (ValueError, TypeError) as e:
        msg = str(e)
        if any(msg.startswith(f"{f}=") for f in fields):
            raise ConfigError(f"{prefix}{msg}") from None
        raise ConfigError(f"{where}: {msg}") from None


def override(cfg: RunConfig, items: list[str]) -> RunConfig:
    """``cfg`` with ``key=value`` strings applied (see :func:`replace_typed`); the result is validated
    like any RunConfig. Setting global_batch_tokens (or _rows) > 0 clears the other one. Tuples are
    comma-separated: ``betas=0.9,0.95``."""
    raw = dict(split_item(item) for item in items)
    names = [f.name for f in dataclasses.fields(cfg)]
    for key in raw:
        if key not in names:
            raise _unknown(key, names, "RunConfig has no such field")
    hints = typing.get_type_hints(type(cfg))
    parsed = {k: parse_value(k, v, hints[k]) for k, v in raw.items()}
    # the global batch is given in rows OR tokens: setting one (> 0) clears the other
    if parsed.get("global_batch_tokens", 0) > 0 and "global_batch_rows" not in parsed:
        raw["global_batch_rows"] = "0"
    if parsed.get("global_batch_rows", 0) > 0 and "global_batch_tokens" not in parsed:
        raw["global_batch_tokens"] = "0"
    return replace_typed(cfg, raw)


@dataclass(frozen=True)
class Settings:
    """Every setting of a recipe, parsed and checked (:func:`parse_settings`)."""

    run: RunConfig
    sections: dict
    """prefix -> dataclass instance ("model" -> ModelConfig, "data" -> ..., "probe" -> ...)."""
    objectives: dict
    """objective name -> {field: typed value} given on the command line (``objective.<name>.<field>``)."""
    loss: dict
    """head -> loss weight given on the command line (``loss.<head>=w``); unnamed heads weigh 1.0."""


def parse_settings(items: list[str], run: RunConfig, sections: Mapping[str, object],
                   objectives: Mapping[str, type], heads: "list[str] | tuple[str, ...]") -> Settings:
    """Split ``items`` by prefix and parse each with the type hints of its target:
    ``<RunConfig field>=v``; ``<section>.<field>=v`` for each dataclass of ``sections``;
    ``objective.<name>.<field>=v`` checked against ``objectives[name]`` (a Config dataclass: its
    ``__post_init__`` runs); ``loss.<head>=w`` for ``heads`` (w finite and >= 0). Every problem is a
    ConfigError naming the key, the value and what is allowed. Mixture-dependent checks (an objective
    override or head weight for something the run does not train) are the recipe's
    (codept.train.loop.configure)."""
    by_prefix: dict[str, dict[str, str]] = {p: {} for p in (*sections, "objective", "loss")}
    plain = []
    seen: dict[str, str] = {}
    for item in items:
        key, raw = split_item(item)
        if key in seen:  # the last one used to win silently
            raise ConfigError(f"setting {key!r} given twice ({key}={seen[key]!r}, {key}={raw!r}): give it once")
        seen[key] = raw
        prefix, dot, rest = key.partition(".")
        if not dot:
            plain.append(item)
        elif prefix in by_prefix:
            by_prefix[prefix][rest] = raw
        else:
            close = difflib.get_close_matches(prefix, list(by_prefix), n=1)
            hint = f"; did you mean {close[0]}.{rest}?" if close else ""
            raise ConfigError(f"unknown setting {key!r}: no section {prefix!r}{hint} (sections: "
                              f"{', '.join(f'{p}.' for p in by_prefix)}; RunConfig fields have no prefix)")
    out = {p: replace_typed(cfg, by_prefix[p], p + ".") for p, cfg in sections.items()}
    return Settings(run=override(run, plain), sections=out,
                    objectives=_objective_settings(by_prefix["objective"], objectives),
                    loss=_loss_weights(by_prefix["loss"], heads))


def _objective_settings(raw: Mapping[str, str], objectives: Mapping[str, type]) -> dict:
    grouped: dict[str, dict[str, str]] = {}
    for key, value in raw.items():
        name, dot, fld = key.partition(".")
        if not dot or not fld:
            raise ConfigError(f"setting objective.{key}={value!r}: expected objective.<name>.<field>=value")
        if name not in objectives:
            raise _unknown(f"objective.{name}", [f"objective.{n}" for n in objectives], "no such objective")
        grouped.setdefault(name, {})[fld] = value
    out = {}
    for name, fields in grouped.items():
        cfg = replace_typed(objectives[name](), fields, f"objective.{name}.")
        out[name] = {f: getattr(cfg, f) for f in fields}
    return out


def _loss_weights(raw: Mapping[str, str], heads) -> dict[str, float]:
    out = {}
    for head, value in raw.items():
        if head not in heads:
            raise _unknown(f"loss.{head}", [f"loss.{h}" for h in heads], "no such head")
        w = parse_value(f"loss.{head}", value, float)
        if w < 0:
            raise ConfigError(f"loss.{head}={value!r}: a loss weight must be >= 0 (0 switches the head's loss off)")
        out[head] = w
    return out
