"""recipes/train_exec.py's evaluation parts: baselines fitted on training rows only, the bootstrap
over held-out sources, and a short end-to-end run on trace rows written here (real tokenizer, real
model; no sandbox needed: rows are what `codept trace` writes)."""

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from codept.data.pack import pack
from codept.exec import views
from codept.objectives import build
from codept.objectives.render import Vocab

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("train_exec", REPO / "recipes" / "train_exec.py")
train_exec = importlib.util.module_from_spec(spec)
spec.loader.exec_module(train_exec)

# Two real-looking units: a loop (its body runs n times) and a guard whose raise never runs.
LOOP = "def f(n):\n    t = 0\n    for i in range(n):\n        t += i\n    return t\n"
GUARD = "def g(x):\n    if x < 0:\n        raise ValueError(x)\n    return x\n"


def row(i, code, counts, source):
    return {"id": f"{source}::u{i}", "source": source, "code": code,
            "counts": {str(k): v for k, v in counts.items()}, "states": []}


def rows_of(byte_tok, units):
    vocab = Vocab.from_tokenizer(byte_tok)
    obj = build("exec_lines", vocab)
    vs = [views.view_of(r, byte_tok) for r in units]
    return pack([obj(v, np.random.default_rng(0)) for v in vs], 64, vocab.pad_id)


@pytest.fixture(scope="module")
def code_tok():
    from codept.tokenizer import default_tokenizer_dir, load_tokenizer

    return load_tokenizer(default_tokenizer_dir())  # BPE on the stdlib: 'raise' and 'return' are tokens


def test_baselines_fit_on_training_rows_only(code_tok):
    train = rows_of(code_tok, [row(0, LOOP, {1: 1, 2: 4, 3: 3, 4: 1}, "a"), row(1, GUARD, {1: 1, 3: 1}, "a"),
                               row(2, GUARD, {1: 1, 3: 1}, "a")])
    held = rows_of(code_tok, [row(3, GUARD, {1: 1, 2: 1}, "b")])  # this time the raise ran
    field = "labels.exec_lines"
    p = train_exec.fit_baselines({"train": train}, field)
    toks, labs = train_exec.labelled(held, field)
    assert labs.tolist() == [1, 1, 0]  # 'if', 'raise', 'return' (raise ran, the return did not)
    tr_toks, tr_labs = train_exec.labelled(train, field)
    major = int(np.bincount(tr_labs).argmax())
    assert p["majority[train]"](toks).tolist() == [major] * 3
    lookup = p["first_token[train]"](toks)
    assert lookup[1] == 0  # in training every 'raise' line was never run
    assert lookup[0] == 1  # and every 'if' once


def test_bootstrap_resamples_sources():
    same = {f"s{i}": {"n": 10, "model": 7, "base": 5} for i in range(20)}
    b = train_exec.bootstrap(same, ["model", "base"], 500, 0)
    assert b["model"] == {"acc": 0.7, "se": 0.0} and b["model - base"]["diff"] == 0.2
    assert b["model - base"]["p_not_above"] == 0.0 and b["model - base"]["se"] == 0.0
    mixed = {f"s{i}": {"n": 10, "model": 9 if i % 2 else 1, "base": 5} for i in range(20)}
    m = train_exec.bootstrap(mixed, ["model", "base"], 2000, 0)
    assert m["model"]["acc"] == 0.5 and 0.05 < m["model"]["se"] < 0.12  # 20 sources at 0.1 or 0.9
    assert 0.3 < m["model - base"]["p_not_above"] < 0.7


def test_recipe_end_to_end_on_written_traces(tmp_path):
    """12 sources with written rows: the folds hold out every source once, the dev part is carved
    out of training, the json reports baselines and the model with standard errors."""
    from codept.exec.job import _write

    shards = tmp_path / "t" / "shards"
    shards.mkdir(parents=True)
    rows = [row(i, LOOP if i % 2 else GUARD, {1: 1, 2: 1 + i % 5, 3: i % 3, 4: 1}, f"stdlib:m{i % 12}") for i in range(48)]
    rows += [row(100 + i, LOOP, {1: 1, 2: 3, 3: 2, 4: 1}, "pkg:x") for i in range(8)]
    _write(shards / "00000.jsonl", rows)
    (tmp_path / "t" / "summary.json").write_text(json.dumps({"shards": 1}))
    out = tmp_path / "o"
    rc = train_exec.main(["--traces", str(tmp_path / "t"), "--out", str(out), "--folds", "3", "--steps", "4",
                          "--eval-every", "2", "--hidden", "32", "--layers", "1", "--seq-len", "64", "--extra", "pkg:",
                          "--bootstrap", "100", "--dev", "0.3"])
    assert rc == 0
    res = json.loads((out / "train_exec.json").read_text())
    s = res["summary"]
    assert s["sources"] == 12 and s["folds"] == 3
    assert sum(f["val_views"] for f in s["per_fold"]) == 48  # each stdlib view held out exactly once
    assert all(f["extra_views"] == 8 for f in s["per_fold"])
    for arm in ("model", "model_last", "majority[train]", "first_token[train_only]", "held_out_majority"):
        assert 0 <= s[arm]["acc"] <= 1 and s[arm]["se"] >= 0
    assert all(f["picked_step"] in (2, 4) for f in s["per_fold"])
    with pytest.raises(SystemExit):
        train_exec.parse(["--traces", "x", "--out", "y", "--dev", "1.5"])
