"""RunConfig, typed overrides, the one derivation of DeepSpeed batch keys / optimizer / schedule, and
the ds_configs/*.json rules (engine concerns only). No DeepSpeed import, no launch."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import math
import re
from pathlib import Path

import pytest

from codept.train import config as C
from codept.train import settings as S
from codept.train.config import DERIVED_KEYS, RunConfig, derive
from codept.train.settings import override

REPO = Path(__file__).resolve().parents[1]
DS_JSONS = sorted((REPO / "ds_configs").glob("*.json"))


# ------------------------------------------------------------------------------------------------
# ds_configs/


def test_the_expected_ds_configs_exist():
    assert {p.stem for p in DS_JSONS} >= {"zero1", "zero2", "zero3", "zero3_offload", "zero2_bf16"}


@pytest.mark.parametrize("path", DS_JSONS, ids=lambda p: p.stem)
def test_ds_config_parses_holds_no_derived_keys_and_derives(path):
    d = json.loads(path.read_text())
    assert not set(d) & set(DERIVED_KEYS), f"{path.name} holds derived keys {set(d) & set(DERIVED_KEYS)}"
    assert C.zero_stage_of(d) in (1, 2, 3)
    assert C.load_engine_json(path.stem) == d
    for world in (1, 2, 8):
        plan = derive(RunConfig(ds_config=path.stem, micro_batch_rows=2, global_batch_rows=16 * world), world)
        assert plan.ds_config["train_batch_size"] == 16 * world
        assert plan.ds_config["train_micro_batch_size_per_gpu"] * world * plan.ds_config[
            "gradient_accumulation_steps"] == plan.ds_config["train_batch_size"]


def test_offload_config_offloads_optimizer_and_params():
    z = C.load_engine_json("zero3_offload")["zero_optimization"]
    assert z["stage"] == 3 and z["offload_optimizer"]["device"] == "cpu" and z["offload_param"]["device"] == "cpu"


@pytest.mark.parametrize("key", DERIVED_KEYS)
def test_derived_keys_are_banned_from_engine_json(key, tmp_path):
    p = tmp_path / "bad.json"
    p.write_text(json.dumps({"zero_optimization": {"stage": 2}, key: 4}))
    with pytest.raises(ValueError, match=re.escape(key)):
        C.load_engine_json(str(p))
    with pytest.raises(ValueError, match="derived from the RunConfig"):
        derive(RunConfig(), 2, {key: 1})


def test_unknown_ds_config_name_lists_the_available_ones():
    with pytest.raises(FileNotFoundError, match="available: .*zero2"):
        C.load_engine_json("zero9")


# ------------------------------------------------------------------------------------------------
# derive


def test_derive_rows_and_accumulation():
    cfg = RunConfig(micro_batch_rows=4, global_batch_rows=64, seq_len=128)
    plan = derive(cfg, 2, {"zero_optimization": {"stage": 2}})
    assert (plan.global_rows, plan.micro_rows, plan.grad_accum, plan.world) == (64, 4, 8, 2)
    assert plan.tokens_per_step == 64 * 128
    ds = plan.ds_config
    batch_keys = ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps")
    assert tuple(ds[k] for k in batch_keys) == (64, 4, 8)
    assert ds["gradient_clipping"] == 1.0 and ds["zero_optimization"] == {"stage": 2}


def test_derive_from_tokens():
    cfg = override(RunConfig(seq_len=512), ["global_batch_tokens=524288", "micro_batch_rows=16"])
    assert cfg.global_batch_rows == 0  # setting tokens clears rows
    plan = derive(cfg, 8, {})
    assert (plan.global_rows, plan.grad_accum) == (1024, 8)


def test_tokens_must_be_a_multiple_of_seq_len():
    with pytest.raises(ValueError, match="global_batch_tokens=1000 is not a multiple of seq_len=128"):
        RunConfig(global_batch_rows=0, global_batch_tokens=1000, seq_len=128)


def test_exactly_one_global_batch_size():
    with pytest.raises(ValueError, match="exactly one of them"):
        RunConfig(global_batch_rows=8, global_batch_tokens=1024, seq_len=128)
    with pytest.raises(ValueError, match="exactly one of them"):
        RunConfig(global_batch_rows=0, global_batch_tokens=0)


def test_indivisible_batch_names_values_and_nearest_fits():
    with pytest.raises(ValueError) as e:
        derive(RunConfig(micro_batch_rows=8, global_batch_rows=100), 3, {})
    msg = str(e.value)
    assert "100 rows" in msg and "micro_batch_rows (8) x world (3) = 24" in msg
    assert "global_batch_rows=96 or 120" in msg


def test_derive_does_not_mutate_the_engine_json():
    base = {"zero_optimization": {"stage": 1}, "bf16": {"enabled": False}}
    snapshot = json.dumps(base, sort_keys=True)
    derive(RunConfig(precision="bf16", zero_stage=2), 2, base)
    assert json.dumps(base, sort_keys=True) == snapshot


def test_precision_and_stage_overrides():
    base = {"zero_optimization": {"stage": 1}, "bf16": {"enabled": False}}
    assert C.precision_of(derive(RunConfig(), 1, base).ds_config) == "fp32"
    ds = derive(RunConfig(precision="bf16", zero_stage=3), 1, base).ds_config
    assert C.precision_of(ds) == "bf16" and C.zero_stage_of(ds) == 3
    ds = derive(RunConfig(precision="fp32"), 1, {"bf16": {"enabled": True}}).ds_config
    assert C.precision_of(ds) == "fp32"


def test_param_offload_needs_zero3():
    with pytest.raises(ValueError, match="only ZeRO-3"):
        derive(RunConfig(ds_config="zero3_offload", zero_stage=2), 2)


def test_optimizer_and_schedule_come_from_the_run_config():
    cfg = RunConfig(lr=3e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, schedule="linear", warmup_steps=5,
                    steps=50, min_lr_ratio=0.0)
    plan = derive(cfg, 2, {})
    assert plan.optimizer == {"name": "adamw", "lr": 3e-4, "betas": (0.9, 0.95), "eps": 1e-8, "weight_decay": 0.1}
    assert plan.schedule == {"kind": "linear", "warmup_steps": 5, "total_steps": 50, "min_lr_ratio": 0.0}


@pytest.mark.parametrize("kind", C.SCHEDULES)
def test_lr_multiplier_shape(kind):
    s = {"kind": kind, "warmup_steps": 10, "total_steps": 110, "min_lr_ratio": 0.1}
    m = [C.lr_multiplier(i, s) for i in range(130)]
    assert m[0] == pytest.approx(0.1) and m[9] == pytest.approx(1.0)  # linear warm-up, never 0
    assert all(a < b for a, b in zip(m[:9], m[1:10]))
    assert m[10] == pytest.approx(1.0)
    end = 1.0 if kind == "constant" else 0.1
    assert m[110] == pytest.approx(end) and m[129] == pytest.approx(end)
    assert all(b <= a + 1e-12 for a, b in zip(m[10:], m[11:]))  # non-increasing after warm-up
    if kind == "cosine":
        assert m[60] == pytest.approx(0.55)


# ------------------------------------------------------------------------------------------------
# override


def test_override_parses_types():
    cfg = override(RunConfig(), ["lr=3e-4", "steps=1e3", "warmup_steps=1_000", "betas=0.8,0.9",
                                 "ds_config=zero3", "precision=bf16", "zero_stage=3", "grad_clip=0"])
    assert cfg.lr == 3e-4 and cfg.steps == 1000 and cfg.warmup_steps == 1000
    assert cfg.betas == (0.8, 0.9) and isinstance(cfg.betas, tuple)
    assert cfg.ds_config == "zero3" and cfg.precision == "bf16" and cfg.zero_stage == 3 and cfg.grad_clip == 0.0
    assert override(cfg, []) == cfg


def test_override_rejects_unknown_keys_with_a_suggestion():
    with pytest.raises(ValueError, match=r"unknown setting 'lrr'.*did you mean lr"):
        override(RunConfig(), ["lrr=1"])
    with pytest.raises(ValueError, match="unknown setting 'foo'.*allowed: seq_len"):
        override(RunConfig(), ["foo=1"])


@pytest.mark.parametrize("item,match", [
    ("steps", "expected key=value"),
    ("steps=ten", r"steps='ten': expected an integer"),
    ("steps=1.5", r"steps='1.5': expected an integer"),
    ("lr=fast", r"lr='fast': expected a number"),
    ("lr=nan", "expected a finite number"),
    ("betas=0.9", "expected 2 comma-separated values"),
    ("precision=fp16", r"precision='fp16': expected one of"),
    ("steps=0", "steps=0: must be >= 1"),
    ("zero_stage=4", "zero_stage=4"),
])
def test_override_rejects_bad_values(item, match):
    with pytest.raises(ValueError, match=match):
        override(RunConfig(), [item])


def test_run_config_is_frozen_and_round_trips():
    cfg = RunConfig(betas=(0.85, 0.9))
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.lr = 1.0  # type: ignore[misc]
    d = json.loads(json.dumps(cfg.to_dict()))  # as saved in a checkpoint manifest: tuples become lists
    assert RunConfig.from_dict(d) == cfg
    with pytest.raises(ValueError, match="unknown keys"):
        RunConfig.from_dict({**d, "nope": 1})


def test_every_run_config_field_is_documented():
    tree = ast.parse(inspect.getsource(RunConfig))
    body = tree.body[0].body
    undocumented = []
    for i, node in enumerate(body):
        if isinstance(node, ast.AnnAssign):
            nxt = body[i + 1] if i + 1 < len(body) else None
            doc = isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str)
            if not doc:
                undocumented.append(node.target.id)
    assert not undocumented, f"RunConfig fields without a docstring: {undocumented}"


def _imports_deepspeed(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "deepspeed" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "deepspeed":
            return True
    return False


def test_deepspeed_is_imported_in_one_place_only():
    users = sorted(str(p.relative_to(REPO)) for p in (REPO / "codept").rglob("*.py") if _imports_deepspeed(p))
    assert users == ["codept/train/engine.py"]


def test_lr_multiplier_is_finite_for_degenerate_schedules():
    for s in ({"kind": "cosine", "warmup_steps": 0, "total_steps": 1, "min_lr_ratio": 0.0},
              {"kind": "linear", "warmup_steps": 5, "total_steps": 5, "min_lr_ratio": 0.0}):
        assert all(math.isfinite(C.lr_multiplier(i, s)) for i in range(10))


# ------------------------------------------------------------------------------------------------
# parse_settings: the one parser of every recipe setting


@dataclasses.dataclass(frozen=True)
class _Probe:
    every: int = 50
    holdout: float = 0.1
    project: str = "networkx"


@dataclasses.dataclass(frozen=True)
class _Flags:
    fast: bool = False
    kinds: tuple[str, ...] = ("function",)
    limit: "int | None" = None

    def __post_init__(self):
        if self.limit is not None and self.limit < 0:
            raise ValueError(f"limit={self.limit}: must be >= 0")


def _settings(*items, heads=("mlm", "contrastive")):
    from codept.objectives import OBJECTIVES

    objectives = {n: o.config for n, o in OBJECTIVES.items()}
    return S.parse_settings(list(items), RunConfig(), {"probe": _Probe(), "flags": _Flags()}, objectives, heads)


def test_parse_settings_routes_and_types_every_kind_of_key():
    s = _settings("steps=7", "probe.every=0", "probe.project=", "flags.fast=YES", "flags.kinds=function,class",
                  "flags.limit=3", "objective.mlm.rate=0.2", "objective.code_doc.kinds=function,method,class",
                  "loss.contrastive=0.5")
    assert s.run.steps == 7 and s.sections["probe"] == _Probe(every=0, project="")
    assert s.sections["flags"] == _Flags(fast=True, kinds=("function", "class"), limit=3)
    assert s.objectives == {"mlm": {"rate": 0.2}, "code_doc": {"kinds": ("function", "method", "class")}}
    assert s.loss == {"contrastive": 0.5}
    assert _settings("flags.limit=none").sections["flags"].limit is None
    assert _settings("flags.kinds=").sections["flags"].kinds == ()


@pytest.mark.parametrize("item,match", [
    # the defects of the old recipe parser: a bool typo passed as False, a bad int had no key
    ("flags.fast=ture", r"flags.fast='ture': expected a boolean: one of true/false/1/0/yes/no"),
    ("probe.every=true", r"probe.every='true': expected an integer"),
    ("probe.holdout=much", r"probe.holdout='much': expected a number"),
    ("probe.evry=1", r"unknown setting 'probe.evry'.*did you mean probe.every"),
    ("prob.every=1", r"unknown setting 'prob.every'.*no section 'prob'.*did you mean probe"),
    ("flags.limit=-1", r"flags.limit=-1: must be >= 0"),  # the whole key
    ("objective.mlmm.rate=0.2", r"unknown setting 'objective.mlmm'.*did you mean objective.mlm"),
    ("objective.mlm.rat=0.2", r"unknown setting 'objective.mlm.rat'.*did you mean objective.mlm.rate"),
    ("objective.mlm=0.2", r"expected objective.<name>.<field>=value"),
    ("objective.mlm.rate=high", r"objective.mlm.rate='high': expected a number"),
    ("objective.code_doc.doc=verbatim", r"objective.code_doc: code_doc doc='verbatim': expected one of"),
    ("loss.mlm=-1", r"loss.mlm='-1': a loss weight must be >= 0"),
    ("loss.mlm=inf", r"loss.mlm='inf': expected a finite number"),
    ("loss.rtd=1", r"unknown setting 'loss.rtd'.*allowed: loss.mlm, loss.contrastive"),
    ("=3", "expected key=value"),
])
def test_parse_settings_names_key_value_and_rule(item, match):
    with pytest.raises(S.ConfigError, match=match):
        _settings(item)


@pytest.mark.parametrize("raw,want", [("true", True), ("False", False), ("1", True), ("0", False),
                                      ("yes", True), ("NO", False)])
def test_bool_accepts_exactly_the_documented_spellings(raw, want):
    assert S.parse_value("k", raw, bool) is want


@pytest.mark.parametrize("raw", ["ture", "", "2", "on", "off", "y", "t"])
def test_bool_refuses_everything_else(raw):
    with pytest.raises(S.ConfigError, match=f"k={raw!r}: expected a boolean"):
        S.parse_value("k", raw, bool)
