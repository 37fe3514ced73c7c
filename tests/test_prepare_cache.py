"""`codept prepare`: the cache check before any read, one read per input, one builder per node (a lock),
odd file names, missing sources, bounded worker memory, streaming HF datasets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

import codept.prepare as cprep
from codept.data import records
from codept.data.jobs import NothingToPrepare
from codept.data.sources import stdlib_files
from codept.prepare import PrepareConfig, load_views, prepare
from codept.tokenizer import train_tokenizer


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("tok")
    train_tokenizer(stdlib_files()[:30], out, vocab_size=1500)
    return out


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CODEPT_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def small_corpus(root, n=6):
    root.mkdir()
    for p in stdlib_files()[10:10 + n]:
        (root / p.name).write_bytes(p.read_bytes())
    return root


def manifest(out):
    return [json.loads(x) for x in (out / "manifest.jsonl").read_text().splitlines()]


def test_non_utf8_file_name_is_viewed_and_manifest_written(tmp_path, tok_dir):
    """Was: UnicodeEncodeError hashing the origin in the plan, no manifest at all."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "good.py").write_text("x = 1\n")
    with open(os.path.join(os.fsencode(src), b"bad\xff\xfename.py"), "wb") as f:
        f.write(b"def f(a):\n    return a\n")
    s = prepare([str(src)], out=tmp_path / "out", tokenizer_dir=tok_dir, cfg=PrepareConfig(workers=1), progress=False)
    rows = manifest(tmp_path / "out")
    assert s["inputs"] == len(rows) == 2 and s["viewed"] == 2
    paths = sorted(load_views(tmp_path / "out")["path"])
    assert paths[0].endswith("bad\\xff\\xfename.py")  # shown losslessly in the Arrow column
    assert os.fsencode(rows[0]["path"]).endswith(b"bad\xff\xfename.py")  # the manifest keeps the name
    again = prepare([str(src)], out=tmp_path / "out", tokenizer_dir=tok_dir, progress=False)
    assert again["cache_key"] == s["cache_key"]


def test_nonexistent_source_is_an_error_and_nothing_cached(tmp_path, tok_dir, cache):
    from codept.cli import main as cli_main
    from codept.text.prepare import prepare_text

    with pytest.raises(NothingToPrepare, match="nonexistent"):
        prepare([str(tmp_path / "nonexistent")], tokenizer_dir=tok_dir, progress=False)
    with pytest.raises(NothingToPrepare):
        prepare([str(tmp_path / "nothing*.py")], tokenizer_dir=tok_dir, progress=False)
    with pytest.raises(NothingToPrepare):
        prepare_text([str(tmp_path / "nonexistent")], tokenizer_dir=tok_dir, progress=False)
    assert not (cache / "views").exists() and not (cache / "text").exists()
    r = subprocess.run([sys.executable, "-m", "codept.cli", "prepare", str(tmp_path / "nonexistent"),
                        "--tokenizer", str(tok_dir)], capture_output=True, text=True,
                       env={**os.environ, "CODEPT_CACHE": str(cache)})
    assert r.returncode == 2 and "nothing to prepare" in r.stderr and "Traceback" not in r.stderr
    assert cli_main(["prepare-text", str(tmp_path / "nonexistent"), "--tokenizer", str(tok_dir)]) == 2
    assert not (cache / "views").exists() and not (cache / "text").exists()


def test_worker_memory_limit_gives_a_recorded_skip(tmp_path, tok_dir):
    """A generated 800 kB Python file under a 300 MiB worker limit: skipped as too_much_memory (its
    view needs ~250x its size), the job goes on and the small file is viewed."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "big.py").write_text("".join(f"def f{i}(a, b):\n    return a + b * {i}\n" for i in range(20000)))
    (src / "small.py").write_text("x = 1\n")
    cfg = PrepareConfig(workers=1, max_bytes=50_000_000, worker_memory=300 << 20)
    s = prepare([str(src)], out=tmp_path / "out", tokenizer_dir=tok_dir, cfg=cfg, progress=False)
    by = {r["path"].rsplit("/", 1)[-1]: r for r in manifest(tmp_path / "out")}
    assert by["big.py"]["reason"] == "too_much_memory", by["big.py"]
    assert by["small.py"]["status"] == "viewed" and s["skipped"] == {"too_much_memory": 1}
    with pytest.raises(ValueError, match="worker_memory=-5"):
        PrepareConfig(worker_memory=-5)


def _allocate(state, n_mib):
    return len(bytearray(n_mib << 20))


def test_isolated_map_memory_error_is_too_much_memory():
    from codept.parallel import default_memory_limit, isolated_map

    out = dict((i, (ok, v)) for i, ok, v in isolated_map(_allocate, [1, 2000, 2], workers=1, timeout=60,
                                                         memory_limit=400 << 20))
    assert out[0] == (True, 1 << 20) and out[2] == (True, 2 << 20)
    assert out[1][0] is False and out[1][1][0] == "too_much_memory"
    assert 0 < default_memory_limit(4) < default_memory_limit(1)


def test_cache_hit_reads_no_input(tmp_path, tok_dir, monkeypatch):
    src = small_corpus(tmp_path / "src")
    monkeypatch.setattr(records, "RACY_NS", 0)  # the files were just written: trust their stat anyway
    reads = []
    real = cprep._read
    monkeypatch.setattr(cprep, "_read", lambda rec, n: (reads.append(rec.origin), real(rec, n))[1])
    a = prepare([str(src)], out=tmp_path / "out", tokenizer_dir=tok_dir, progress=False)
    assert sorted(reads) == sorted(set(reads)) and len(reads) == a["inputs"] == 6  # one read per input
    reads.clear()
    b = prepare([str(src)], out=tmp_path / "out", tokenizer_dir=tok_dir, progress=False)
    assert b["cached"] and b["cache_key"] == a["cache_key"] and reads == []  # served from stat alone
    f = next(src.iterdir())
    os.utime(f)  # stat changes, content does not: one hash pass, then reused
    c = prepare([str(src)], out=tmp_path / "out", tokenizer_dir=tok_dir, progress=False)
    assert c["cached"] and c["cache_key"] == a["cache_key"] and len(reads) == 6
    reads.clear()
    f.write_bytes(f.read_bytes() + b"\n# changed\n")
    d = prepare([str(src)], out=tmp_path / "out", tokenizer_dir=tok_dir, progress=False)
    assert not d["cached"] and d["cache_key"] != a["cache_key"]


def test_default_cache_folder_reused_by_stat(tmp_path, tok_dir, cache, monkeypatch):
    src = small_corpus(tmp_path / "src", 3)
    monkeypatch.setattr(records, "RACY_NS", 0)
    a = prepare([str(src)], tokenizer_dir=tok_dir, progress=False)
    assert a["out"] == str(cache / "views" / a["cache_key"]) and (cache / "views" / a["cache_key"] / "DONE").is_file()
    monkeypatch.setattr(cprep, "_read", None)  # any read would fail
    b = prepare([str(src)], tokenizer_dir=tok_dir, progress=False)
    assert b["cached"] and b["out"] == a["out"]


LOCK_RUN = """
import json, sys, time
from codept.prepare import PrepareConfig, prepare
t = time.time()
s = prepare([sys.argv[1]], tokenizer_dir=sys.argv[2], cfg=PrepareConfig(workers=1), progress=False)
print(json.dumps({"cached": s["cached"], "key": s["cache_key"], "out": s["out"], "t0": t, "t1": time.time()}))
"""


def test_one_builder_per_node_two_processes(tmp_path, tok_dir, cache):
    """Two ranks without a shared cache folder of their own start together: one builds, the other
    waits on the lock and reuses the folder (no race on the same folder, no second build)."""
    src = small_corpus(tmp_path / "src", 8)
    env = {**os.environ, "CODEPT_CACHE": str(cache)}
    procs = [subprocess.Popen([sys.executable, "-c", LOCK_RUN, str(src), str(tok_dir)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    res = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
        res.append(json.loads(out.strip().splitlines()[-1]))
    assert sorted(r["cached"] for r in res) == [False, True]
    assert res[0]["key"] == res[1]["key"] and res[0]["out"] == res[1]["out"]
    builder, waiter = sorted(res, key=lambda r: r["cached"])
    assert waiter["t1"] >= builder["t1"] - 0.5  # the waiter finished after the build, not beside it
    folders = [p for p in (cache / "views").iterdir() if p.is_dir() and not p.name.startswith((".", "index"))]
    assert [p.name for p in folders] == [builder["key"]]


def test_streaming_hf_dataset_read_once(tmp_path, tok_dir):
    """A local jsonl of stdlib files read with load_dataset(..., streaming=True): rows read once,
    nothing materialised; the same views as the jsonl file given as a path."""
    import datasets

    data = tmp_path / "rows.jsonl"
    files = stdlib_files()[40:52]
    data.write_text("".join(json.dumps({"content": p.read_text(), "lang": "python", "path": str(p)}) + "\n"
                            for p in files))
    stream = datasets.load_dataset("json", data_files=str(data), split="train", streaming=True)
    assert isinstance(stream, datasets.IterableDataset)
    s = prepare([stream], out=tmp_path / "s", tokenizer_dir=tok_dir, cfg=PrepareConfig(workers=2), progress=False)
    f = prepare([str(data)], out=tmp_path / "f", tokenizer_dir=tok_dir, cfg=PrepareConfig(workers=2), progress=False)
    assert s["inputs"] == len(files) and s["viewed"] == f["viewed"] > 0
    vs, vf = load_views(tmp_path / "s"), load_views(tmp_path / "f")
    assert vs["input_ids"] == vf["input_ids"] and vs["path"] == vf["path"]
    assert manifest(tmp_path / "s")[0]["origin"] == "stream:0:json#0"
    parts = [prepare([stream], out=tmp_path / f"p{i}", tokenizer_dir=tok_dir,
                     cfg=PrepareConfig(workers=1, num_shards=2, shard_index=i), progress=False) for i in range(2)]
    assert sum(p["inputs"] for p in parts) == len(files)  # shard by shard, one pass each


def test_listing_reads_no_content(tmp_path):
    src = small_corpus(tmp_path / "src", 2)
    before = records.list_sources([str(src)])
    time.sleep(0.01)
    (src / "new.py").write_text("y = 2\n")
    after = records.list_sources([str(src)])
    assert before.exists and len(after.entries) == len(before.entries) + 1 and after.racy
    assert not records.list_sources([str(tmp_path / "missing")]).exists


def test_cli_takes_worker_memory(tmp_path):
    from codept.cli import build_parser

    args = build_parser().parse_args(["prepare", str(tmp_path), "--worker-memory", str(300 << 20)])
    assert args.worker_memory == 300 << 20


def test_library_prepare_never_replaces_a_folder_of_user_files(tmp_path, tok_dir):
    """Was: prepare(out=DIR) removed whatever DIR held (only the CLI checked). A killed build (job mark,
    no DONE) is codept's own and is replaced; the same rule holds for prepare_text."""
    from codept.data.jobs import JOB_MARK, ForeignFolder
    from codept.text.prepare import prepare_text

    src = tmp_path / "src"
    src.mkdir()
    (src / "a.py").write_text("x = 1\n")
    (src / "notes.txt").write_text("Some notes. Two sentences.\n")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("keep me\n")
    with pytest.raises(ForeignFolder, match=r"mine: a folder with other files \(thesis.tex, \.\.\.\) and no DONE"):
        prepare([str(src)], out=mine, tokenizer_dir=tok_dir, cfg=PrepareConfig(workers=1), progress=False)
    with pytest.raises(ForeignFolder, match="thesis.tex"):
        prepare_text([str(src / "notes.txt")], out=mine, tokenizer_dir=tok_dir, progress=False)
    assert (mine / "thesis.tex").read_text() == "keep me\n" and sorted(p.name for p in mine.iterdir()) == ["thesis.tex"]
    killed = tmp_path / "killed"
    killed.mkdir()
    (killed / JOB_MARK).write_text("")
    (killed / "manifest.jsonl").write_text("half\n")
    s = prepare([str(src)], out=killed, tokenizer_dir=tok_dir, cfg=PrepareConfig(workers=1), progress=False)
    assert s["viewed"] == 1 and (killed / "DONE").is_file() and (killed / JOB_MARK).is_file()
    assert len(manifest(killed)) == s["inputs"] == 2  # the half-written manifest is gone
