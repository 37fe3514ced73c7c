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

The ``key=value`` settings parser (RunConfig fields, sections, objectives, loss weights:
ConfigError, parse_settings, override) is codept.train.settings.
Cost: negligible. Not covered: pipeline / tensor parallelism (world = data-parallel ranks), batch-size
ramp-up, schedules other than constant / linear / cosine with linear warm-up.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import typing
from dataclasses import dataclass, field
from pathlib import Path

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
        return cls(**{k: tuple(v) if typing.get_origin(hints[k]) is tuple else v for k, v in d.items()})


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
