"""Run configuration and the ONE place where batch sizes, optimizer and schedule are derived.

A :class:`RunConfig` (frozen, every field documented) says what to train; ``ds_configs/<name>.json``
says how the engine runs it (ZeRO stage, precision, offload, buckets, comms). :func:`derive` joins
the two for a given data-parallel world size:

1. Global rows per optimizer step: ``global_batch_rows``, or ``global_batch_tokens / seq_len``
   (which must divide exactly).
2. Gradient accumulation ``k = rows / (micro_batch_rows * world)`` (must divide exactly; the error
   names the nearest valid global batch sizes).
3. The engine JSON is read and checked: it must not hold any key derived here (:data:`DERIVED_KEYS`:
   batch sizes, accumulation, gradient clipping, optimizer, scheduler).
4. The derived keys are injected; ``precision`` and ``zero_stage`` of the RunConfig, when set,
   override the JSON's (``auto`` / ``-1`` keep it).
5. The optimizer (AdamW hyper-parameters) and the learning-rate schedule are returned as plain data
   next to the DeepSpeed dict; ``codept.train.engine`` turns them into torch objects mechanically.

Settings: :func:`parse_settings` is the ONE parser of every ``key=value`` setting of the recipes:
RunConfig fields, ``<section>.<field>`` (model, data, probe, val: any dataclass), objective settings
``objective.<name>.<field>`` (typed by the objective's Config) and per-head loss weights
``loss.<head>=w``. Values are parsed from the dataclass type hints (:func:`parse_value`: int, float,
bool as true/false/1/0/yes/no only, str, tuples as comma lists, Optional); an unknown key (with a
difflib suggestion), a key given twice, a bad value or a ``__post_init__`` refusal is a
:class:`ConfigError` naming the key, the value and what is allowed. :func:`override` applies plain RunConfig items.
Cost: negligible. Not covered: pipeline / tensor parallelism (world = data-parallel ranks), batch-size
ramp-up, schedules other than constant / linear / cosine with linear warm-up.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import json
import math
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from codept import resources

DS_CONFIG_DIR = resources.folder("ds_configs")  # in a checkout or an installed wheel

# Keys of a DeepSpeed JSON that are derived from the RunConfig and injected; a ds_config file that
# holds one of them is refused (two sources of truth for the batch size is how runs silently change).
DERIVED_KEYS = ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
                "gradient_clipping", "optimizer", "scheduler")

PRECISIONS = ("auto", "fp32", "bf16", "bf16_autocast")
SCHEDULES = ("constant", "linear", "cosine")


@dataclass(frozen=True)
class RunConfig:
    """What to train. Presets are plain functions returning one of these; ``override`` edits it."""

    # --- data / batch -------------------------------------------------------------------------
    seq_len: int = 128
    """Tokens per packed row (codept.data.pack)."""
    micro_batch_rows: int = 8
    """Rows per forward/backward on one rank (DeepSpeed's train_micro_batch_size_per_gpu)."""
    global_batch_rows: int = 32
    """Rows per optimizer step over all ranks and micro-batches; 0 = use global_batch_tokens."""
    global_batch_tokens: int = 0
    """Tokens per optimizer step (a multiple of seq_len); used only when global_batch_rows = 0."""
    seed: int = 0
    """Seeds the data stream, model init and the per-rank torch/numpy/python RNGs."""

    # --- optimisation (AdamW + warm-up + decay) ------------------------------------------------
    steps: int = 1000
    """Optimizer steps of the run (the schedule decays to min_lr_ratio * lr at this step)."""
    lr: float = 5e-4
    """Peak learning rate, reached after warmup_steps."""
    warmup_steps: int = 100
    """Linear warm-up from 0 to lr over this many optimizer steps."""
    schedule: str = "cosine"
    """After warm-up: 'constant', 'linear' or 'cosine' decay to min_lr_ratio * lr at `steps`."""
    min_lr_ratio: float = 0.1
    """Final learning rate as a fraction of lr (linear / cosine)."""
    weight_decay: float = 0.01
    """AdamW decoupled weight decay (applied to every parameter; the model may pass groups)."""
    betas: tuple[float, float] = (0.9, 0.98)
    """AdamW (beta1, beta2)."""
    eps: float = 1e-6
    """AdamW epsilon."""
    grad_clip: float = 1.0
    """Global gradient-norm clip (DeepSpeed gradient_clipping); 0 disables."""

    # --- engine -------------------------------------------------------------------------------
    ds_config: str = "zero2"
    """Name of ds_configs/<name>.json, or a path to a JSON file: engine concerns only."""
    precision: str = "auto"
    """'auto' (as the ds_config says), 'fp32', 'bf16' (DeepSpeed's: bf16 weights and activations, fp32
    master weights in the optimizer) or 'bf16_autocast' (fp32 weights, the forward under
    torch.autocast(bfloat16): matmuls and attention in bf16, norms, softmax and losses in fp32;
    DeepSpeed's torch_autocast): overrides the ds_config's precision."""
    zero_stage: int = -1
    """-1 (as the ds_config says) or 0..3: overrides the ds_config's ZeRO stage."""
    compile: bool = False
    """torch.compile the model with its heads and losses (nn.Module.compile, in place: checkpoints and
    exports keep their parameter names); the varlen attention and the heads' target selection stay
    eager between compiled graphs (docs/compute.md lists the graph breaks). The first steps compile
    (about a minute for debug_cpu on one CPU core)."""

    # --- output -------------------------------------------------------------------------------
    out_dir: str = "runs/debug"
    """Checkpoints (``latest`` + one folder per saved step), logs."""
    save_every: int = 0
    """Save a checkpoint every this many optimizer steps; 0 = only at the end."""
    keep_last: int = 0
    """Keep this many newest checkpoints (older ones are deleted after `latest` moves); 0 = all."""
    log_every: int = 10
    """Print / log scalars every this many optimizer steps."""

    def __post_init__(self):
        _check(self)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "RunConfig":
        unknown = sorted(set(d) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise ValueError(f"RunConfig.from_dict: unknown keys {unknown}")
        hints = typing.get_type_hints(cls)
        return cls(**{k: tuple(v) if _is_tuple(hints[k]) else v for k, v in d.items()})


def _check(c: RunConfig) -> None:
    def need(ok: bool, msg: str):
        if not ok:
            raise ValueError(msg)

    for name in ("seq_len", "micro_batch_rows", "steps"):
        need(getattr(c, name) >= 1, f"{name}={getattr(c, name)}: must be >= 1")
    for name in ("global_batch_rows", "global_batch_tokens", "warmup_steps", "save_every", "keep_last"):
        need(getattr(c, name) >= 0, f"{name}={getattr(c, name)}: must be >= 0")
    need(c.log_every >= 1, f"log_every={c.log_every}: must be >= 1")
    need(c.seed >= 0, f"seed={c.seed}: must be >= 0 (numpy seeds are non-negative)")
    need(bool(c.out_dir.strip()), f"out_dir={c.out_dir!r}: name the run's output folder (an empty one would "
         "write into the current folder)")
    need((c.global_batch_rows > 0) != (c.global_batch_tokens > 0),
         f"global_batch_rows={c.global_batch_rows}, global_batch_tokens={c.global_batch_tokens}: "
         "exactly one of them must be > 0 (the other 0)")
    need(c.global_batch_tokens % c.seq_len == 0,
         f"global_batch_tokens={c.global_batch_tokens} is not a multiple of seq_len={c.seq_len}")
    need(c.lr > 0, f"lr={c.lr}: must be > 0")
    need(0 <= c.min_lr_ratio <= 1, f"min_lr_ratio={c.min_lr_ratio}: must be in [0, 1]")
    need(c.weight_decay >= 0, f"weight_decay={c.weight_decay}: must be >= 0")
    need(len(c.betas) == 2 and all(0 <= b < 1 for b in c.betas), f"betas={c.betas}: need two values in [0, 1)")
    need(c.eps > 0, f"eps={c.eps}: must be > 0")
    need(c.grad_clip >= 0, f"grad_clip={c.grad_clip}: must be >= 0 (0 disables)")
    need(c.schedule in SCHEDULES, f"schedule={c.schedule!r}: expected one of {SCHEDULES}")
    need(c.precision in PRECISIONS, f"precision={c.precision!r}: expected one of {PRECISIONS}")
    need(c.zero_stage in (-1, 0, 1, 2, 3), f"zero_stage={c.zero_stage}: expected -1 (as ds_config) or 0..3")
    need(bool(c.ds_config), "ds_config is empty: name a file of ds_configs/ (e.g. 'zero2') or a JSON path")


# ------------------------------------------------------------------------------------------------
# overrides: the ONE parser of key=value settings (RunConfig, model./data./probe./val. sections,
# objective.<name>.<field>, loss.<head>)


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


# ------------------------------------------------------------------------------------------------
# derivation


@dataclass(frozen=True)
class Plan:
    """Everything derived from (RunConfig, world size): what DeepSpeed and the trainer are handed."""

    ds_config: dict
    """The engine JSON with the derived keys injected: pass to deepspeed.initialize(config=...)."""
    world: int
    """Data-parallel ranks."""
    global_rows: int
    """Rows per optimizer step, all ranks."""
    micro_rows: int
    """Rows per micro-batch on one rank."""
    grad_accum: int
    """Micro-batches per optimizer step on each rank (k)."""
    optimizer: dict = field(default_factory=dict)
    """{'name': 'adamw', 'lr', 'betas', 'eps', 'weight_decay'}."""
    schedule: dict = field(default_factory=dict)
    """{'kind', 'warmup_steps', 'total_steps', 'min_lr_ratio'}: multiplier of lr per step."""

    seq_len: int = 0
    """Tokens per row."""

    @property
    def tokens_per_step(self) -> int:
        return self.global_rows * self.seq_len


def ds_config_path(name: str) -> Path:
    """``ds_configs/<name>.json`` for a bare name, else the path itself."""
    p = Path(name)
    if p.suffix == ".json" or p.parent != Path("."):
        return p
    return DS_CONFIG_DIR / f"{name}.json"


def load_engine_json(name: str) -> dict:
    """Read an engine-only DeepSpeed JSON and refuse derived keys in it."""
    path = ds_config_path(name)
    if not path.is_file():
        have = sorted(p.stem for p in DS_CONFIG_DIR.glob("*.json"))
        raise FileNotFoundError(f"ds_config {name!r}: no file {path} (available: {', '.join(have)})")
    try:
        d = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"ds_config {path}: not valid JSON ({e})") from None
    check_engine_only(d, str(path))
    return d


def check_engine_only(d: dict, where: str = "ds_config") -> None:
    bad = [k for k in DERIVED_KEYS if k in d]
    if bad:
        raise ValueError(f"{where} holds {bad}: batch sizes, accumulation, clipping, optimizer and "
                         "scheduler are derived from the RunConfig (codept.train.config.derive); "
                         "remove them from the JSON and set the RunConfig fields instead")


def lr_multiplier(step: int, schedule: dict) -> float:
    """Learning-rate multiplier after ``step`` optimizer steps (step 0 = before the first update)."""
    warm, total = schedule["warmup_steps"], schedule["total_steps"]
    lo = schedule["min_lr_ratio"]
    if warm and step < warm:
        return (step + 1) / warm  # linear warm-up, never exactly 0 so the first step moves
    if schedule["kind"] == "constant" or total <= warm:
        return 1.0
    t = min(1.0, (step - warm) / (total - warm))
    if schedule["kind"] == "linear":
        return 1.0 - (1.0 - lo) * t
    return lo + (1.0 - lo) * 0.5 * (1.0 + math.cos(math.pi * t))


def derive(cfg: RunConfig, world: int, engine_json: dict | None = None) -> Plan:
    """The one place batch keys, optimizer and schedule come from (see the module docstring)."""
    if world < 1:
        raise ValueError(f"world={world}: need at least one data-parallel rank")
    rows = cfg.global_batch_rows or cfg.global_batch_tokens // cfg.seq_len
    per_pass = cfg.micro_batch_rows * world
    if rows % per_pass:
        lo, hi = max(per_pass, rows // per_pass * per_pass), (rows // per_pass + 1) * per_pass
        raise ValueError(f"global batch of {rows} rows is not a multiple of micro_batch_rows "
                         f"({cfg.micro_batch_rows}) x world ({world}) = {per_pass}: use "
                         f"global_batch_rows={lo} or {hi} (or change micro_batch_rows)")
    k = rows // per_pass
    ds = copy.deepcopy(engine_json if engine_json is not None else load_engine_json(cfg.ds_config))
    check_engine_only(ds, f"ds_config {cfg.ds_config!r}")
    ds["train_batch_size"] = rows
    ds["train_micro_batch_size_per_gpu"] = cfg.micro_batch_rows
    ds["gradient_accumulation_steps"] = k
    ds["gradient_clipping"] = float(cfg.grad_clip)
    if cfg.precision != "auto":
        ds["bf16"] = {**ds.get("bf16", {}), "enabled": cfg.precision == "bf16"}
        if "fp16" in ds:
            ds["fp16"] = {**ds["fp16"], "enabled": False}
        autocast = cfg.precision == "bf16_autocast"
        if autocast or "torch_autocast" in ds:
            ds["torch_autocast"] = {**ds.get("torch_autocast", {}), "enabled": autocast,
                                    **({"dtype": "bfloat16"} if autocast else {})}
    if cfg.zero_stage >= 0:
        zero = dict(ds.get("zero_optimization", {}))
        if cfg.zero_stage < 3 and "offload_param" in zero:
            raise ValueError(f"zero_stage={cfg.zero_stage} with ds_config {cfg.ds_config!r}: it offloads "
                             "parameters, which only ZeRO-3 supports; pick another ds_config")
        zero["stage"] = cfg.zero_stage
        ds["zero_optimization"] = zero
    return Plan(
        ds_config=ds, world=world, global_rows=rows, micro_rows=cfg.micro_batch_rows, grad_accum=k,
        seq_len=cfg.seq_len,
        optimizer={"name": "adamw", "lr": cfg.lr, "betas": tuple(cfg.betas), "eps": cfg.eps,
                   "weight_decay": cfg.weight_decay},
        schedule={"kind": cfg.schedule, "warmup_steps": cfg.warmup_steps, "total_steps": cfg.steps,
                  "min_lr_ratio": cfg.min_lr_ratio},
    )


def compile_problem(cuda: bool | None = None) -> str | None:
    """Why ``compile=true`` cannot work on this machine, or None: torch.compile's inductor backend
    builds C++ kernels on CPU (a C++ compiler on PATH: $CXX, g++, c++ or clang++) and Triton kernels
    on CUDA (the triton package). ``cuda``: whether the run trains on CUDA (default: a GPU is visible)."""
    import importlib.util
    import os
    import shutil

    if cuda is None:
        import torch

        cuda = torch.cuda.is_available()
    if cuda:
        return None if importlib.util.find_spec("triton") else "torch.compile on CUDA needs triton (pip install triton)"
    names = [os.environ["CXX"]] if os.environ.get("CXX") else ["g++", "c++", "clang++"]
    if any(shutil.which(n) for n in names):
        return None
    return f"torch.compile on CPU builds C++ kernels and found no compiler ({', '.join(names)} not on PATH)"


def precision_of(ds_config: dict) -> str:
    if ds_config.get("torch_autocast", {}).get("enabled"):
        return "bf16_autocast"
    return "bf16" if ds_config.get("bf16", {}).get("enabled") else "fp32"


def zero_stage_of(ds_config: dict) -> int:
    return int(ds_config.get("zero_optimization", {}).get("stage", 0))
