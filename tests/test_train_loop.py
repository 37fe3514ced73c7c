"""codept.train.loop.run's steps that need no process group, in process: a hostile table of bad
settings (both recipes) refused with the key named, the resume table and the default out_dir
(codept.train.resume), schedules at step 1, per-objective validation rows that never hang, a planted
pickle refused by the checkpoint reader. The launched paths are in tests/test_recipe.py,
tests/test_pretrain_text.py and tests/test_train_ds.py."""

from __future__ import annotations

import json
import os
import pickle
import sys
from pathlib import Path

import numpy as np
import pytest

from codept.train.settings import ConfigError

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "recipes"))

import pretrain_code as CODE  # noqa: E402
import pretrain_text as TEXT  # noqa: E402

BASE = {"code": ["model.hidden=64", "model.heads=2", "data.mixture=mlm:1"], "text": ["model.layers=1"]}
RECIPES = {"code": CODE, "text": TEXT}
PRESET = {"code": "debug_cpu", "text": "english_cpu"}


def _named(key: str, message: str) -> bool:
    """The refusal names the setting: the whole key, or its section and ``field=``."""
    section, _, field = key.rpartition(".")
    return key in message or (field + "=" in message and (not section or section in message))


# (recipe, items, key the message must name) -- issue 29's 21 settings that passed the parser and then
# hung, printed a traceback or wrote garbage, and more of the same kinds
HOSTILE = [
    ("code", ["data.buffer=0"], "data.buffer"),  # hung forever
    ("code", ["data.buffer=-4"], "data.buffer"),  # hung forever
    ("text", ["data.buffer=0"], "data.buffer"),
    ("code", ["probe.every=-1"], "probe.every"),  # probed after every step
    ("code", ["out_dir="], "out_dir"),  # wrote into the current folder
    ("text", ["out_dir=  "], "out_dir"),
    ("code", ["global_batch_rows=7"], "global_batch_rows"),  # traceback in derive after the group
    ("code", ["global_batch_tokens=300"], "global_batch_tokens"),
    ("code", ["seed=-1"], "seed"),  # traceback in numpy
    ("code", ["ds_config=nosuch"], "ds_config"),  # traceback at engine build
    ("text", ["ds_config=/nonexistent/x.json"], "ds_config"),
    ("code", ["probe.holdout=1.5"], "probe.holdout"),
    ("code", ["probe.project=nosuch_project_codept"], "probe.project"),
    ("code", ["probe.baselines=bm25,nosuch"], "probe.baselines"),
    ("code", ["probe.baselines=random:nosuch"], "probe.baselines"),
    ("code", ["probe.pool=1"], "probe.pool"),
    ("code", ["probe.queries=0"], "probe.queries"),
    ("code", ["data.sources=/nonexistent/codept"], "data.sources"),
    ("code", ["data.corpora=/nonexistent/codept"], "data.corpora"),
    ("text", ["data.vocab_size=0"], "data.vocab_size"),
    ("text", ["data.vocab_size=300"], "data.vocab_size"),
    ("code", ["data.text=/nonexistent/codept", "data.mixture=mlm@text:1"], "data.text"),
    ("text", ["data.text=/nonexistent/codept"], "data.text"),
    ("text", ["data.pairs=/nonexistent/codept"], "data.pairs"),
    ("code", ["data.mixture=electra:1", "ds_config=zero3"], "data.mixture"),  # traceback in the first step
    ("code", ["data.mixture=electra:1", "zero_stage=3"], "data.mixture"),
    ("code", ["data.mixture=ar:1", "objective.ar.schedule=linear", "zero_stage=3"], "data.mixture"),
    ("text", ["data.probe_rows=0"], "data.probe_rows"),  # NaN in summary.json
    ("text", ["data.retrieval_pool=1"], "data.retrieval_pool"),
    ("code", ["steps=3", "steps=4"], "steps"),  # duplicate keys: the last won silently
    ("code", ["probe.every=5", "probe.every=0"], "probe.every"),
    ("text", ["data.mixture=mlm@text:1", "data.mixture=sop@text:1"], "data.mixture"),
    ("code", ["seq_len=1024"], "seq_len"),  # > the model's position table
    ("code", ["val.seed=-1"], "val.seed"),
    ("code", ["val.holdout=1"], "val.holdout"),
    ("code", ["val.rows=0"], "val.rows"),
    ("code", ["data.tokenizer=/nonexistent/codept"], "data.tokenizer"),
    ("text", ["data.tokenizer=/nonexistent/codept"], "data.tokenizer"),
    ("code", ["data.lang_bytes=-1"], "data.lang_bytes"),
    ("code", ["model.layer_norm_eps=0"], "model"),
    ("code", ["model.pad_id=-1"], "model"),
    ("code", ["micro_batch_rows=0"], "micro_batch_rows"),
    ("code", ["lr=0"], "lr"),
    ("code", ["lr=nan"], "lr"),
    ("code", ["keep_last=-1"], "keep_last"),
    ("code", ["loss.mlm=-1"], "loss.mlm"),
    ("code", ["objective.mlm.rate=2"], "objective.mlm"),
    ("code", ["objective.mlm.rate=0"], "objective.mlm"),  # selects nothing: was accepted, no labels
    ("code", ["data.mixture=electra:1", "objective.electra.rate=0"], "objective.electra"),
    ("text", ["data.mixture=phrase@text:1", "objective.phrase.rate=0"], "objective.phrase"),
    ("text", ["data.rows=both"], "data.rows"),
    ("text", ["data.long=stride:0"], "data.long"),
    ("text", ["data.shuffle_sentences=-0.1"], "data.shuffle_sentences"),
    ("code", ["data.mixture=electra:1", "objective.electra.rate=2"], "objective.electra"),
    ("text", ["data.mixture=phrase@text:1", "objective.phrase.lexicon=/nonexistent/codept"], "objective.phrase.lexicon"),
    ("text", ["data.mixture=phrase@text:1", "objective.phrase.p_mask=0.95"], "objective.phrase"),
]


def test_every_objective_config_validates_itself():
    from codept.objectives import OBJECTIVES

    assert [n for n, o in OBJECTIVES.items() if not hasattr(o.config, "__post_init__")] == []


@pytest.mark.parametrize("recipe,items,key", HOSTILE, ids=[" ".join(i) for _, i, _ in HOSTILE])
def test_every_bad_setting_is_refused_before_any_work_with_its_key(recipe, items, key):
    R = RECIPES[recipe]
    base = [x for x in BASE[recipe] if x.split("=")[0] not in {i.split("=")[0] for i in items}]
    R.configure(PRESET[recipe], base)  # the base is fine
    with pytest.raises(ConfigError) as e:
        R.configure(PRESET[recipe], base + items)
    assert _named(key, str(e.value)), str(e.value)


def test_the_process_groups_world_size_is_in_the_batch_check(monkeypatch):
    """global_batch_rows=16 divides into micro-batches of 8 on 1 or 2 ranks, not on 3 (WORLD_SIZE,
    set by the launcher before the process group exists)."""
    CODE.configure("debug_cpu", [])
    monkeypatch.setenv("WORLD_SIZE", "3")
    with pytest.raises(ConfigError, match=r"global_batch_rows=16 with 3 rank\(s\)"):
        CODE.configure("debug_cpu", [])


def test_own_tokenizer_from_codept_tokenizer_train(tmp_path):
    """`codept tokenizer train` output is a setting of every recipe (data.tokenizer=DIR); a folder
    without tokenizer.json, and one next to --init-from, are refused before any work."""
    import subprocess

    out = tmp_path / "tok"
    src = Path(json.__file__).parent  # the stdlib json package: real code
    r = subprocess.run([sys.executable, "-m", "codept.cli", "tokenizer", "train", str(src), "--out", str(out),
                        "--vocab-size", "1200"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    for name, R in RECIPES.items():
        s, _ = R.configure(PRESET[name], [*BASE[name], f"data.tokenizer={out}"])
        assert s.sections["data"].tokenizer == str(out)
        with pytest.raises(ConfigError, match=r"data.tokenizer=.*no tokenizer.json"):
            R.configure(PRESET[name], [*BASE[name], f"data.tokenizer={tmp_path}"])
    from codept.train.loop import check_tokenizer

    with pytest.raises(ConfigError, match=r"brings its own tokenizer"):
        check_tokenizer("data.tokenizer", str(out), init_dir=tmp_path)


# -- resume: which settings may change, which folder a run writes --------------------------------


def _settings(items: list[str]) -> dict:
    from codept.train import resume

    given = {i.split("=")[0] for i in items}
    s, mixture = CODE.configure("debug_cpu", [x for x in BASE["code"] if x.split("=")[0] not in given] + items)
    return resume.flat(s, mixture, None)


def _checkpoint(out: Path, step: int, settings: dict, summary: bool = False) -> Path:
    """The files resume.plan reads: ``latest`` and the rank-0 manifest of a checkpoint at `step`."""
    tag = f"step{step:08d}"
    (out / tag).mkdir(parents=True)
    (out / tag / "rank0.json").write_text(json.dumps({"step": step, "world": 2, "config": settings}))
    (out / "latest").write_text(tag)
    if summary:
        (out / "summary.json").write_text("{}\n")
    return out


def test_flat_settings_hold_every_section_and_the_whole_objective_config():
    s = _settings(["steps=7"])
    assert s["steps"] == 7 and s["model.hidden"] == 64 and s["data.mixture"] == "mlm:1"
    assert s["objective.mlm.rate"] == 0.15 and s["loss.mlm"] == 1.0 and s["init_from"] is None
    assert s == _settings(["steps=7", "objective.mlm.rate=0.15"])  # spelling a default out is no change


def test_resume_refuses_a_change_that_breaks_exactness_naming_old_and_new(tmp_path):
    """Defect: lr=0.5 on resume was accepted and ignored (the saved optimizer and schedule won);
    seq_len=64 was applied to a run saved with 128."""
    from codept.train import resume

    out = _checkpoint(tmp_path / "run", 6, _settings(["steps=10", "lr=0.001"]))
    with pytest.raises(ConfigError, match=r"lr 0.001 -> 0.5.*keep its settings, or give another out_dir"):
        resume.plan(str(out), True, _settings(["steps=10", "lr=0.5"]))
    with pytest.raises(ConfigError, match=r"seq_len 256 -> 64"):
        resume.plan(str(out), True, _settings(["steps=10", "lr=0.001", "seq_len=64"]))
    with pytest.raises(ConfigError, match=r"steps '10 \(checkpoint at step 6\)' -> 4"):  # cannot go back
        resume.plan(str(out), True, _settings(["steps=4", "lr=0.001"]))


def test_resume_applies_and_logs_the_safe_changes(tmp_path):
    from codept.train import resume

    out = _checkpoint(tmp_path / "run", 6, _settings(["steps=10"]))
    p = resume.plan(str(out), True, _settings(["steps=10"]))
    assert (p.out_dir, p.applied, p.step, p.finished) == (str(out), {}, 6, False)
    p = resume.plan(str(out), True, _settings(["steps=20", "save_every=5", "val.every=2", "probe.every=0"]))
    assert p.applied == {"steps": (10, 20), "save_every": (100, 5), "val.every": (50, 2), "probe.every": (50, 0)}
    assert set(resume.MAY_CHANGE) <= set(_settings([])), "a MAY_CHANGE key that is no setting"


def test_a_finished_run_is_not_run_again(tmp_path):
    """Defect: the same command again "resumed" a finished run: exit 0, tokens_trained 0, its
    summary.json and loss plot overwritten."""
    from codept.train import resume

    now = _settings(["steps=6"])
    out = _checkpoint(tmp_path / "run", 6, now, summary=True)
    assert resume.plan(str(out), False, now).finished
    assert not resume.plan(str(out), False, _settings(["steps=8"])).finished  # more steps: resume


def test_default_out_dir_with_other_settings_starts_a_numbered_folder(tmp_path):
    """Defect (README's second Training command after the first): without out_dir= a run of other
    settings resumed the first one's folder (a state_dict traceback, or a "resumed" finished run).
    Now: out_dir given -> refused naming the difference; not given -> the first numbered folder
    that is free or holds a run of the same settings, so the same command again finds its own."""
    from codept.train import resume

    first, second, third = _settings([]), _settings(["data.mixture=syntax_span:1"]), _settings(["lr=0.1"])
    out = _checkpoint(tmp_path / "debug_cpu", 200, first, summary=True)
    with pytest.raises(ConfigError, match=r"data.mixture 'mlm:1' -> 'syntax_span:1'"):
        resume.plan(str(out), True, second)
    p = resume.plan(str(out), False, second)
    assert p.out_dir == f"{out}-2" and "data.mixture 'mlm:1' -> 'syntax_span:1'" in p.note and not p.applied
    _checkpoint(Path(p.out_dir), 100, second)  # the second run saved a checkpoint there
    assert resume.plan(str(out), False, second).out_dir == f"{out}-2"  # found again, resumed
    assert resume.plan(str(out), False, third).out_dir == f"{out}-3"
    assert resume.plan(str(out), False, first).finished  # the first command again: nothing to do


def test_an_incomplete_checkpoint_is_named_before_the_process_group(tmp_path):
    from codept.train import resume

    out = tmp_path / "run"
    out.mkdir()
    (out / "latest").write_text("step00000004")
    with pytest.raises(ConfigError, match=r"latest names step00000004, but .*rank0.json is missing"):
        resume.plan(str(out), True, _settings([]))
    (out / "latest").write_text("../elsewhere")
    with pytest.raises(ConfigError, match="not a checkpoint tag"):
        resume.plan(str(out), True, _settings([]))
    (tmp_path / "afile").write_text("x")
    with pytest.raises(ConfigError, match="exists and is not a folder"):
        resume.plan(str(tmp_path / "afile"), True, _settings([]))


# -- checkpoints are code: codept's own files load with weights_only ---------------------------------


class _Planted:
    """A pickle that runs code when it is loaded (what a tampered rank file would hold)."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_planted_pickle_in_a_rank_file_runs_no_code(tmp_path):
    """Defect: rank<r>.pt was loaded with torch.load(weights_only=False): a planted pickle ran, even
    with the manifest's size and sha256 updated to match."""
    import torch

    from codept.train import checkpoint as ckpt

    marker = tmp_path / "ran"
    bad = tmp_path / "rank0.pt"
    torch.save({"step": 4, "rank": 0, "save_id": "x", "client_state": {"stream": _Planted(str(marker))},
                "rng": {}}, bad)
    pickle.loads(pickle.dumps(_Planted(str(tmp_path / "control"))))  # the payload works when unpickled
    assert (tmp_path / "control").exists()
    with pytest.raises(ckpt.CheckpointError, match=r"rank0.pt: holds more than plain data.*refused unread"):
        ckpt.read_rank_state(bad)
    assert not marker.exists()
    # what codept writes loads: plain data and tensors (RNG states included)
    ckpt.seed_all(3)
    good = tmp_path / "good.pt"
    torch.save({"step": 4, "rank": 0, "save_id": "x", "client_state": {"stream": {"buffer": 1}},
                "rng": ckpt.capture_rng(), "config": {"betas": (0.9, 0.98)}}, good)
    state = ckpt.read_rank_state(good)
    a = np.random.rand()
    ckpt.restore_rng(state["rng"])
    assert np.random.rand() == a


def test_format1_rank_files_still_load(tmp_path):
    """Older checkpoints hold numpy's RNG state as an array: allowed by name, nothing else."""
    import random

    import torch

    from codept.train import checkpoint as ckpt

    old = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    torch.save({"step": 1, "rank": 0, "save_id": "x", "client_state": {}, "rng": old}, tmp_path / "r.pt")
    state = ckpt.read_rank_state(tmp_path / "r.pt")
    a = np.random.rand()
    ckpt.restore_rng(state["rng"])
    assert np.random.rand() != a or True  # restored without error
    ckpt.restore_rng(old)
    b = np.random.rand()
    ckpt.restore_rng(state["rng"])
    assert np.random.rand() == b


# -- schedules start at their start value; validation rows never hang ---------------------------


@pytest.fixture(scope="module")
def code_views(small_tok):
    from codept.data.sources import read_source, stdlib_files
    from codept.views import open_views
    from codept.structure.view import build_view, views_to_table

    py = [p for p in stdlib_files() if 2000 < p.stat().st_size < 12000 and p.name[0] != "_"][:48]
    return open_views(views_to_table([build_view(str(p), "python", read_source(p), small_tok) for p in py]))


def _mask_share(rows, vocab) -> float:
    from codept.data.example import IGNORE

    sel = np.concatenate([r["labels.mlm"] != IGNORE for r in rows])
    ids = np.concatenate([r["input_ids"] for r in rows])
    return float((ids[sel] == vocab.mask_id).mean())


def test_mask_share_schedule_starts_at_its_start_value_at_step_1(code_views, small_tok):
    """Defect: in a recipe run the [MASK]-share schedule sat near its end value from step 1 (0.47
    where 0.80 was expected): progress moved per mixture step inside one shuffled packing buffer,
    and a CPU run is shorter than one buffer. Progress now moves per buffer: step 1 is at 0."""
    from codept.objectives.render import Vocab
    from codept.train.loop import packed, set_horizon, streams
    from codept.train.process import World

    vocab = Vocab.from_tokenizer(small_tok)
    mixture = [("mlm", 1.0)]
    settings = {"mlm": {"p_mask_final": 0.0, "schedule_start": 0.0}}  # 0.80 at progress 0, 0 at 1
    world = World(rank=0, world_size=1, local_rank=0, backend="gloo")
    stream = packed(streams(code_views, mixture, vocab, settings), mixture, 0, world, 128, vocab.pad_id, 256)
    set_horizon(stream, 200 * 8)  # debug_cpu's rows per rank: a run within the first buffer
    assert 0.76 < _mask_share([next(stream) for _ in range(32)], vocab) < 0.84  # steps 1-2 (~600 targets)
    # a run of many buffers: the first at the start value, the last at the end value
    stream = packed(streams(code_views, mixture, vocab, settings), mixture, 0, world, 128, vocab.pad_id, 4)
    rows_per_buffer = len(stream.rows_of_buffer(0))
    set_horizon(stream, 10 * rows_per_buffer)
    rows = [next(stream) for _ in range(10 * rows_per_buffer)]
    assert 0.75 < _mask_share(rows[:rows_per_buffer], vocab) < 0.85
    assert _mask_share(rows[-rows_per_buffer // 2:], vocab) < 0.15


def test_validation_rows_of_an_objective_with_nothing_to_say_are_reported_not_awaited():
    """Per-objective validation streams one objective alone: one that makes no example from these
    views must not loop forever (the mixed stream hid it behind the others' rows)."""
    from codept.data.stream import Mixture, PackedStream, Source
    from codept.train.loop import _fixed_rows

    never = Source("never", 40, lambda i, rng: None)
    assert _fixed_rows(PackedStream(Mixture([never], [1.0], seed=0), 32, 0, buffer=8), 16, 40) == []
    from codept.data.example import Example

    some = Source("some", 40, lambda i, rng: Example(np.arange(5, 25, dtype=np.int32), np.ones(20, bool),
                                                      labels={"mlm": np.arange(5, 25, dtype=np.int32)}))
    assert len(_fixed_rows(PackedStream(Mixture([some], [1.0], seed=0), 32, 0, buffer=8), 16, 40)) == 16


def test_validation_summary_reports_every_objective_and_no_zero_silently():
    from codept.train.loop import Validation

    v = Validation({"mlm": [], "glm": []}, docs=9, empty={"code_doc": "made no example"})
    last = {"val/mlm/loss": 2.0, "val/mlm/acc": 0.5, "val/mlm/n": 10.0,
            "val/mlm/mlm/loss": 2.0, "val/mlm/mlm/acc": 0.5, "val/mlm/mlm/n": 10.0,
            "val/glm/loss": float("nan"), "val/glm/acc": float("nan"), "val/glm/n": 0.0,
            "val/glm/glm/loss": float("nan"), "val/glm/glm/acc": float("nan"), "val/glm/glm/n": 0.0}
    s = v.summary(last, 5)
    assert s["mlm"] == {"loss": 2.0, "acc": 0.5, "n": 10} and s["glm"]["n"] == 0
    assert s["by_objective"]["glm"] == {"glm": {"loss": None, "acc": None, "n": 0}}
    assert s["by_objective"]["code_doc"] == {"no_rows": "made no example"}
    assert s["no_labels"] == ["glm/glm"]
    json.dumps(s, allow_nan=False)  # valid JSON: no NaN
