"""The paths users take, run as a user runs them (issues 29 and 30): recipes launched as processes on a
small real corpus (the stdlib email package), no launcher (``python recipes/...``: one rank), exports
loaded by transformers, prepare-text on a user's jsonl.

1. Bad settings (issue 29.4): every case of tests/test_train_loop.py's hostile table and more, each
   launched as ``python recipes/<recipe>.py ...`` and timed: exit 2, one ``error:`` line naming the
   key, no traceback, nothing written, under 5 s, and torch never imported (so no process group).
2. A recipe run without a launcher trains (DeepSpeed's MPI fallback was a traceback).
3. Schedules at step 1 of a recipe run and t5_span rows whole (issue 30.3 / 30.4): the micro-batches
   a recipe run trains on (tests/recipe_batches.py records them).
4. An ``ar`` recipe run exported: AutoModelForCausalLM's next-token argmax and generate() equal
   codept's own model (issue 30.2).
5. Code translation pairs (issue 30.5): prepare-text keeps them, the recipe trains translate on them.
The rest of the user paths have their own tests: two runs in a row without out_dir
(tests/test_recipe.py::test_two_runs_in_a_row_without_out_dir_and_an_own_tokenizer), the wheel
(tests/test_wheel.py), the HF Trainer loop (tests/test_examples.py)."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from test_train_loop import BASE, HOSTILE, PRESET, _named

REPO = Path(__file__).resolve().parents[1]
EMAIL = Path(json.__file__).parent.parent / "email"  # a small real corpus: 40-odd stdlib files
SCRIPT = {"code": REPO / "recipes" / "pretrain_code.py", "text": REPO / "recipes" / "pretrain_text.py"}
LAUNCHER_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "OMPI_COMM_WORLD_SIZE",
                "PMI_SIZE", "SLURM_NTASKS")
# the settings of a small code run: 1 rank, no probes, the email package
SMALL = [f"data.sources={EMAIL}", "save_every=0", "val.every=0", "probe.every=0", "probe.project=",
         "probe.baselines=", "probe.holdout=0.2", "model.layers=1", "model.hidden=64", "model.heads=2",
         "model.intermediate=128", "seq_len=128", "micro_batch_rows=4", "global_batch_rows=8", "log_every=1"]

# runs the recipe as its __main__ and reports, after its exit, whether torch was imported
WATCH = """
import runpy, sys
script, *items = sys.argv[1:]
sys.argv = [script, *items]
try:
    runpy.run_path(script, run_name="__main__")
except SystemExit as e:
    code = e.code
else:
    code = 0
print(f"torch imported: {'torch' in sys.modules}", file=sys.stderr)
sys.exit(code)
"""


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_ENV}
    env.update(OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false", PYTHONPATH=str(REPO))
    return env


def _python(cwd: Path, *cmd: str, timeout: float = 900, cpu: list | None = None) -> tuple[int, str, float]:
    """(exit code, output, wall seconds) of ``python *cmd``; ``cpu`` receives its CPU seconds (user + sys)."""
    t0, before = time.time(), resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run([sys.executable, *cmd], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if cpu is not None:
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return r.returncode, r.stdout + r.stderr, time.time() - t0


def merged(*items: str) -> list[str]:
    """key=value items, a later one replacing an earlier one of the same key (the recipes refuse a
    key given twice)."""
    out: dict[str, str] = {}
    for item in items:
        key, _, value = item.partition("=")
        out.pop(key, None)
        out[key] = value
    return [f"{k}={v}" for k, v in out.items()]


# -- 1. bad settings: refused in under 5 s, before torch (and so before any process group) ---------


def test_the_settings_check_imports_no_torch(tmp_path):
    """Defect: a bad setting took 8.7-10.9 s to refuse on a 2-core machine (load ~2): the recipes
    imported torch (3-4 s, and torch._dynamo) before their settings check. Now the check reads
    codept.model.config and the loop imports torch on first use: ~1.3-2 s."""
    for recipe in ("code", "text"):
        rc, out, seconds = _python(tmp_path, "-c", WATCH, str(SCRIPT[recipe]), "data.buffer=0")
        assert rc == 2 and "error: data.buffer=0" in out, out[-3000:]
        assert "torch imported: False" in out, out[-3000:]


def test_head_names_are_the_registered_heads():
    from codept.model.config import HEAD_NAMES
    from codept.model.pretrainer import HEADS

    assert tuple(HEADS) == HEAD_NAMES


# more hostile settings of the same kinds (recipe, items, key the message must name)
MORE = [
    ("code", ["steps=0"], "steps"),
    ("code", ["steps=1e3x"], "steps"),
    ("code", ["steps==3"], "steps"),
    ("code", ["=3"], "=3"),
    ("code", ["steps"], "steps"),
    ("code", ["lr=inf"], "lr"),
    ("code", ["lr=0x10"], "lr"),
    ("code", ["betas=0.9,1.5"], "betas"),
    ("code", ["min_lr_ratio=2"], "min_lr_ratio"),
    ("code", ["schedule=nosuch"], "schedule"),
    ("code", ["precision=fp8"], "precision"),
    ("code", ["zero_stage=5"], "zero_stage"),
    ("code", ["data.mixture=mlm:nan"], "data.mixture"),
    ("code", ["data.mixture=mlm:1,mlm@code:1"], "data.mixture"),  # one entry twice: was accepted
    ("code", ["data.mixture=translate@pairs:1"], "data.mixture"),  # no pair corpus given
    ("code", ["data.mixture=t5_span:1", "objective.t5_span.length=4096"], "objective.t5_span.length"),
    ("code", ["data.mixture=ar:1", "objective.ar.schedule=nosuch"], "objective.ar.schedule"),
    ("code", ["loss.nosuch=1"], "loss.nosuch"),
    ("code", ["model.attention=nosuch"], "model.attention"),
    ("code", ["probe.structure_every=-1"], "probe.structure_every"),
    ("code", ["ds_config=BATCH_JSON"], "ds_config"),  # batch keys in an engine file
    ("code", ["ds_config=BROKEN_JSON"], "ds_config"),
    ("code", ["data.tokenizer=BROKEN_JSON"], "data.tokenizer"),
    ("code", ["out_dir=A_FILE"], "out_dir"),
    ("code", ["out_dir=A_FILE/run"], "out_dir"),  # a file on the way: was a traceback after the group
    ("code", ["--preset", "nosuch"], "--preset"),
    ("text", ["data.mixture=mlm@text:1,mlm@text:2"], "data.mixture"),
    ("text", ["val.every=-1"], "val.every"),
]


def _files(tmp_path: Path) -> dict:
    (tmp_path / "batch.json").write_text('{"train_batch_size": 8, "zero_optimization": {"stage": 2}}\n')
    (tmp_path / "broken.json").write_text('{"zero_optimization": \n')
    (tmp_path / "a_file").write_text("not a folder\n")
    return {"BATCH_JSON": str(tmp_path / "batch.json"), "BROKEN_JSON": str(tmp_path / "broken.json"),
            "A_FILE": str(tmp_path / "a_file")}


@pytest.mark.slow
@pytest.mark.parametrize("recipe,items,key", HOSTILE + MORE, ids=[" ".join(i) for _, i, _ in HOSTILE + MORE])
def test_every_bad_setting_is_refused_in_under_5_s_before_torch(tmp_path, recipe, items, key):
    """Issue 29.4's bar, as a user meets it: ``python recipes/<recipe>.py <setting>`` (one rank;
    under the deepspeed launcher add the launcher's own import of deepspeed, ~7 s of CPU here).
    Under 5 s of CPU (before: 7.3 s, torch's import); under 5 s of wall time too unless the machine
    is oversubscribed (its load above its cores: the shared test machine often is)."""
    files = _files(tmp_path)
    items = [next((x.replace(k, v) for k, v in files.items() if k in x), x) for x in items]
    given = {i.split("=")[0] for i in items}
    base = [x for x in BASE[recipe] if x.split("=")[0] not in given]
    if not any(x.startswith("--preset") for x in items):
        base = ["--preset", PRESET[recipe], *base]
    user = tmp_path / "user"
    user.mkdir()
    cpu: list = []
    rc, out, seconds = _python(user, "-c", WATCH, str(SCRIPT[recipe]), *base, *items, timeout=120, cpu=cpu)
    errors = [ln for ln in out.splitlines() if "error:" in ln]  # codept's "error: ...", argparse's "prog: error: ..."
    assert rc == 2 and len(errors) == 1, out[-3000:]
    assert _named(key, errors[0]) or key in errors[0], errors[0]
    assert "Traceback" not in out and "torch imported: True" not in out, out[-3000:]
    assert list(user.iterdir()) == [], "a refused run wrote files"
    assert cpu[0] < 5.0, f"{cpu[0]:.1f} s of CPU to refuse {items}"
    if os.getloadavg()[0] < (os.cpu_count() or 1):
        assert seconds < 5.0, f"{seconds:.1f} s to refuse {items}"
    print(f"{items}: refused in {seconds:.2f} s wall, {cpu[0]:.2f} s CPU")


# -- 2.-4. recipe runs: no launcher, schedules at step 1, whole t5 rows, an exported decoder --------


def test_a_run_without_a_launcher_is_one_rank(monkeypatch):
    from codept.train.process import single_process_env

    for k in LAUNCHER_ENV:
        monkeypatch.delenv(k, raising=False)
    assert single_process_env()
    assert (os.environ["RANK"], os.environ["WORLD_SIZE"], os.environ["LOCAL_RANK"]) == ("0", "1", "0")
    assert 0 < int(os.environ["MASTER_PORT"]) < 65536
    monkeypatch.setenv("WORLD_SIZE", "2")  # a launcher's environment is its own
    monkeypatch.setenv("RANK", "1")
    assert not single_process_env() and os.environ["RANK"] == "1"


def _batches(path: Path) -> dict[int, list[dict]]:
    """{step: [micro-batch {column: array}]} of tests/recipe_batches.py's file."""
    out: dict[int, dict[int, dict]] = {}
    with np.load(path) as z:
        for k in z.files:
            step, micro, col = k.split("/", 2)
            out.setdefault(int(step), {}).setdefault(int(micro), {})[col] = z[k]
    return {s: [m[i] for i in sorted(m)] for s, m in sorted(out.items())}


def _mask_share(micro: list[dict], mask_id: int) -> tuple[float, int]:
    sel = np.concatenate([(b["labels.mlm"] >= 0).ravel() for b in micro])
    ids = np.concatenate([b["input_ids"].ravel() for b in micro])
    return float((ids[sel] == mask_id).mean()), int(sel.sum())


@pytest.fixture(scope="module")
def mixed_run(tmp_path_factory):
    """A recipe run of mlm (a [MASK] share falling from 0.80 at progress 0 to 0 at the end) and
    t5_span on rows of 128 (its length not given: the recipe fits it), 6 steps at the preset's
    buffer, as a user runs it; its micro-batches recorded."""
    tmp = tmp_path_factory.mktemp("mixed")
    items = merged(*SMALL, f"out_dir={tmp / 'run'}", "steps=6", "global_batch_rows=16",
                   "data.mixture=mlm:1,t5_span:1", "objective.mlm.p_mask_final=0", "objective.mlm.schedule_start=0")
    rc, out, seconds = _python(tmp, str(REPO / "tests" / "recipe_batches.py"), str(tmp / "b.npz"), "6",
                               str(SCRIPT["code"]), *items)
    assert rc == 0, out[-4000:]
    return tmp, _batches(tmp / "b.npz"), out, seconds


@pytest.mark.slow
def test_a_run_without_a_launcher_trains(mixed_run):
    """Defect: ``python recipes/pretrain_code.py`` (no deepspeed launcher) ended in a traceback
    (DeepSpeed fell back to MPI discovery: No module named 'mpi4py')."""
    tmp, batches, out, _ = mixed_run
    summary = json.loads((tmp / "run" / "summary.json").read_text())
    assert summary["ranks"] == 1 and summary["steps"] == 6 and sorted(batches) == list(range(6))
    assert "Traceback" not in out


@pytest.mark.slow
def test_mask_share_is_at_its_start_value_at_step_1_of_a_recipe_run(mixed_run):
    """Issue 30.3: the [MASK] share of the rows of step 1 is the schedule's start value (0.80; the
    issue measured 0.474). This run is within one packing buffer (t5_span reads every window of a
    document at once: one email file gives 202 rows), so the share stays there, as documented
    (docs/training.md "Schedules"); that it falls over many buffers is
    tests/test_train_loop.py::test_mask_share_schedule_starts_at_its_start_value_at_step_1."""
    from codept.objectives.render import Vocab
    from codept.tokenizer import load_tokenizer

    tmp, batches, _, _ = mixed_run
    summary = json.loads((tmp / "run" / "summary.json").read_text())
    vocab = Vocab.from_tokenizer(load_tokenizer(summary["tokenizer"]))
    first, n = _mask_share(batches[0], vocab.mask_id)
    assert n >= 100 and 0.72 < first < 0.88, (first, n)


@pytest.mark.slow
def test_t5_span_rows_hold_whole_examples_in_a_recipe_run(mixed_run):
    """Issue 30.4: every t5_span segment of the rows a recipe run trains on holds its inputs and its
    targets whole: the targets start at <sentinel_0> and end at <eos>, and they name exactly the
    sentinels of the inputs."""
    from codept.tokenizer import load_tokenizer

    tmp, batches, _, _ = mixed_run
    tok = load_tokenizer(json.loads((tmp / "run" / "summary.json").read_text())["tokenizer"])
    sentinels = {tok.token_to_id(f"<sentinel_{i}>") for i in range(100)} - {None}
    assert sentinels, "the tokenizer has no sentinels"
    eos = tok.token_to_id("<eos>")
    n = 0
    for micro in batches.values():
        for b in micro:
            for r in range(b["input_ids"].shape[0]):
                ids, seg, lab = b["input_ids"][r], b["segment_ids"][r], b["labels.lm"][r]
                for s in np.unique(seg[seg > 0]):
                    at = seg == s
                    target = lab[at][lab[at] >= 0]
                    if not len(target):
                        continue  # an mlm segment
                    n += 1
                    inputs = ids[at][lab[at] < 0]
                    assert target[0] in sentinels and target[-1] == eos, (target[:3], target[-3:])
                    assert {t for t in target if t in sentinels} == {t for t in inputs if t in sentinels}
    assert n >= 20, n


@pytest.fixture(scope="module")
def ar_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ar")
    items = merged(*SMALL, f"out_dir={tmp / 'run'}", "steps=30", "lr=3e-3", "warmup_steps=2", "data.mixture=ar:1")
    rc, out, _ = _python(tmp, str(SCRIPT["code"]), *items)
    assert rc == 0, out[-4000:]
    return tmp / "run"


@pytest.mark.slow
def test_export_of_an_ar_recipe_run_predicts_codepts_next_tokens(ar_run, tmp_path):
    """Issue 30.2 on a recipe run: ``codept export`` of an ar run is a decoder whose next-token argmax
    (every position of real code rows) and greedy generate() equal codept's own model."""
    import torch
    from transformers import AutoModelForCausalLM

    from codept.cli import main as cli
    from codept.model import regimes
    from codept.train.export import trained
    from codept.tokenizer import load_tokenizer

    assert cli(["export", str(ar_run), "--out", str(tmp_path / "hf")]) == 0
    hf = AutoModelForCausalLM.from_pretrained(tmp_path / "hf").eval()
    assert hf.config.is_decoder
    t = trained(ar_run)
    model, head = t["model"], t["heads"]["lm"]
    tok = load_tokenizer(t["tokenizer"])
    code = [p.read_text() for p in sorted(EMAIL.glob("*.py"))[:6]]
    ids = torch.tensor([tok.encode(c).ids[:64] for c in code])
    with torch.no_grad():
        ours = head.logits(model(ids, prefix=torch.zeros_like(ids, dtype=torch.bool)))  # causal: prefix all False
        theirs = hf(input_ids=ids, attention_mask=torch.ones_like(ids)).logits
    greedy = regimes.greedy(model, head, ids[:, :16], 16)
    gen = hf.generate(ids[:, :16], attention_mask=torch.ones_like(ids[:, :16]), max_new_tokens=16, do_sample=False,
                      pad_token_id=0)
    assert torch.equal(greedy, gen)
    agree = float((ours.argmax(-1) == theirs.argmax(-1)).float().mean())
    assert agree == 1.0, agree  # every position of every row
    assert float((ours - theirs).abs().max()) < 1e-3
    first = regimes.greedy(model, head, ids[:, :63], 1)[:, -1]
    assert torch.equal(first, theirs[:, 62].argmax(-1))
    assert len(set(ours.argmax(-1).flatten().tolist())) > 3, "one predicted token everywhere: the test has no power"


# -- 5. code translation pairs through prepare-text and the recipe -------------------------------

PY = "def add(a, b):\n    return a + b + {i}\n"
JAVA = "static int add(int a, int b) {{\n    return a + b + {i};\n}}\n"
RUST = "fn add(a: i64, b: i64) -> i64 {{\n    a + b + {i}\n}}\n"


def _code_pairs(folder: Path, n: int = 40) -> list[Path]:
    """A user's parallel code: both jsonl spellings (translate's own lang_a/code_a/lang_b/code_b and
    prepare-text's src/tgt with src_lang/tgt_lang), and a TSV of one-line pairs named NAME.SRC-TGT.tsv."""
    folder.mkdir(parents=True, exist_ok=True)
    a, b, c = folder / "py_java.jsonl", folder / "py_rust.jsonl", folder / "oneliners.py-js.tsv"
    a.write_text("".join(json.dumps({"lang_a": "python", "code_a": PY.format(i=i), "lang_b": "java",
                                     "code_b": JAVA.format(i=i)}) + "\n" for i in range(n)))
    b.write_text("".join(json.dumps({"src_lang": "py", "src": PY.format(i=i), "tgt_lang": "Rust",
                                     "tgt": RUST.format(i=i)}) + "\n" for i in range(n)))
    c.write_text("".join(f"x = {i} + y\tlet x = {i} + y;\n" for i in range(n)))
    return [a, b, c]


def test_prepare_text_keeps_code_pairs(tmp_path):
    """Issue 30.5: prepare-text dropped every code pair (unknown_pair_langs: 40 of 40 lines, and
    translate's own jsonl format was bad_record), so training found an empty views dataset. Now code
    languages are pair languages (by name or alias: 'py', 'Rust'); 'cs' (Czech) stays a natural language."""
    from codept.text.prepare import prepare_text
    from codept.text.records import pair_lang

    a, b, c = _code_pairs(tmp_path / "src")
    out = prepare_text([str(a), str(b)], out=tmp_path / "v", progress=False)
    tsv = prepare_text([str(c)], out=tmp_path / "t", progress=False)  # languages from the name
    from datasets import load_from_disk

    pairs = load_from_disk(str(tmp_path / "v" / "pairs"))
    assert len(pairs) == 80, out
    assert sorted({(r["src_lang"], r["tgt_lang"]) for r in pairs}) == [("python", "java"), ("python", "rust")]
    assert pairs[0]["src_text"] == PY.format(i=0).strip()  # code kept as written (no reflow)
    assert len(load_from_disk(str(tmp_path / "t" / "pairs"))) == 40, tsv
    assert [pair_lang(x) for x in ("py", "golang", "c++", "C", "cs", "de_DE", "en")] == \
        ["python", "go", "cpp", "c", "cs", "de", "text"]


@pytest.mark.slow
def test_translate_trains_on_code_pairs_from_the_recipe(tmp_path):
    """Issue 30.5's recipe path: prepare-text's code pairs as data.text, ``translate@pairs`` in the
    code recipe (its language table and the model's sized by the recipe): trains, validates, exit 0."""
    srcs = _code_pairs(tmp_path / "src")
    items = merged(*SMALL, f"out_dir={tmp_path / 'run'}", "steps=4", "data.mixture=translate@pairs:1,mlm:1",
                   "data.text=" + ",".join(map(str, srcs)), "val.rows=8")
    rc, out, _ = _python(tmp_path, str(SCRIPT["code"]), *items)
    assert rc == 0, out[-4000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["train_docs"]["pairs"] + summary["held_docs"]["pairs"] == 120, summary["train_docs"]
    assert summary["train_docs"]["pairs"] >= 60 and summary["held_docs"]["pairs"] > 0, summary["held_docs"]
    val = summary["val"]["by_objective"]["translate@pairs"]["mlm"]
    assert val["n"] > 0 and val["loss"] > 0, summary["val"]
    losses = [json.loads(x) for x in (tmp_path / "run" / "losses.jsonl").read_text().splitlines()]
    assert len(losses) == 4 and all(np.isfinite(x["loss"]) for x in losses)


# -- 6. a tampered checkpoint of a recipe run: no planted code runs (issue 29.2) -----------------


class _Planted:
    """A pickle that runs code when it is loaded."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.slow
def test_a_pickle_planted_in_a_recipe_checkpoint_runs_no_code(ar_run, tmp_path):
    """Each file of a real recipe checkpoint (codept's rank0.pt, DeepSpeed's model and optimizer
    states) replaced by a pickle that runs code, its size and sha256 updated in the manifest as an
    attacker with write access would: resuming the run, exporting it and probing it refuse it, and
    the code never runs."""
    import shutil

    import torch

    from codept.data.sources import sha256_file

    tag = (ar_run / "latest").read_text().strip()
    files = sorted(p.name for p in (ar_run / tag).glob("*.pt"))
    assert {"rank0.pt", "mp_rank_00_model_states.pt"} <= set(files), files
    for name in files:
        run = tmp_path / name.replace(".pt", "")
        shutil.copytree(ar_run, run)
        marker = tmp_path / f"ran-{name}"
        path = run / tag / name
        state = torch.load(path, weights_only=False)
        state["planted"] = _Planted(str(marker))
        torch.save(state, path)
        for m in path.parent.glob("rank*.json"):
            d = json.loads(m.read_text())
            if name in d.get("files", {}):
                d["files"][name] = {"size": path.stat().st_size, "sha256": sha256_file(path)}
                m.write_text(json.dumps(d))
        items = merged(*SMALL, f"out_dir={run}", "steps=32", "lr=3e-3", "warmup_steps=2", "data.mixture=ar:1")
        rc, out, _ = _python(tmp_path, str(SCRIPT["code"]), *items)
        assert rc != 0 and "refused unread" in out, (name, out[-3000:])
        assert not marker.exists(), f"the pickle planted in {name} ran on resume"
        if name in ("rank0.pt", "mp_rank_00_model_states.pt"):  # what export and probes read
            rc, out, _ = _python(tmp_path, "-m", "codept.cli", "export", str(run), "--out", str(tmp_path / "hf"))
            assert rc == 2 and "refused unread" in out, (name, out[-3000:])
            assert not marker.exists(), f"the pickle planted in {name} ran on export"
