"""Issue 28.6: `codept prepare-text` shares the code prepare's job pieces: the stat-listing cache check
(a second run over an unchanged folder reads no input), one read per input (the worker views the bytes
the main process read), and one builder per node (a build lock)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import datasets
import pytest

import codept.text.prepare as tprep
from codept.data import records
from codept.data.sources import stdlib_files
from codept.text.prepare import TextConfig, prepare_text
from codept.text.view import TextView
from codept.tokenizer import train_tokenizer


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("tok")
    train_tokenizer(stdlib_files()[:10], out, vocab_size=800)
    return out


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CODEPT_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def text_corpus(root, n=4):
    """Module docstrings of the stdlib as .txt files (real English text)."""
    import ast

    root.mkdir()
    k = 0
    for p in stdlib_files():
        doc = ast.get_docstring(ast.parse(p.read_bytes())) or ""
        if len(doc.split()) >= 30:
            (root / f"{p.stem}.txt").write_text(doc + "\n")
            k += 1
            if k == n:
                break
    return root


def test_cache_hit_reads_no_input_and_the_worker_views_the_bytes_read(tmp_path, tok_dir, monkeypatch):
    src = text_corpus(tmp_path / "src")
    monkeypatch.setattr(records, "RACY_NS", 0)  # the files were just written: trust their stat anyway
    reads = []
    real = tprep._read

    def spy(path, n):
        reads.append(path)
        raw, refused = real(path, n)
        return b"Zyxwvut said so. " + raw, refused  # what the worker views comes from this read alone

    monkeypatch.setattr(tprep, "_read", spy)
    cfg = TextConfig(workers=1)
    a = prepare_text([str(src)], out=tmp_path / "out", tokenizer_dir=tok_dir, cfg=cfg, progress=False)
    assert sorted(reads) == sorted(set(reads)) and len(reads) == a["inputs"] == 4  # one read per input
    texts = [TextView.from_record(r).text for r in datasets.load_from_disk(str(tmp_path / "out" / "text"))]
    assert len(texts) == 4 and all(t.startswith("Zyxwvut said so. ") for t in texts)  # never read again
    reads.clear()
    b = prepare_text([str(src)], out=tmp_path / "out", tokenizer_dir=tok_dir, cfg=cfg, progress=False)
    assert b["cached"] and b["cache_key"] == a["cache_key"] and reads == []  # served from stat alone
    f = sorted(src.iterdir())[0]
    os.utime(f)  # stat changes, content does not: one hash pass, then reused
    c = prepare_text([str(src)], out=tmp_path / "out", tokenizer_dir=tok_dir, cfg=cfg, progress=False)
    assert c["cached"] and c["cache_key"] == a["cache_key"] and len(reads) == 4
    f.write_text(f.read_text() + "\nOne more sentence here.\n")
    d = prepare_text([str(src)], out=tmp_path / "out", tokenizer_dir=tok_dir, cfg=cfg, progress=False)
    assert not d["cached"] and d["cache_key"] != a["cache_key"]
    (src / "new.txt").write_text("A new file. It has two sentences.\n")
    e = prepare_text([str(src)], out=tmp_path / "out", tokenizer_dir=tok_dir, cfg=cfg, progress=False)
    assert not e["cached"] and e["inputs"] == 5


def test_default_cache_folder_reused_by_stat(tmp_path, tok_dir, cache, monkeypatch):
    src = text_corpus(tmp_path / "src", 2)
    monkeypatch.setattr(records, "RACY_NS", 0)
    a = prepare_text([str(src)], tokenizer_dir=tok_dir, cfg=TextConfig(workers=1), progress=False)
    assert a["out"] == str(cache / "text" / a["cache_key"]) and (cache / "text" / a["cache_key"] / "DONE").is_file()
    monkeypatch.setattr(tprep, "_read", None)  # any read would fail
    b = prepare_text([str(src)], tokenizer_dir=tok_dir, cfg=TextConfig(workers=1), progress=False)
    assert b["cached"] and b["out"] == a["out"]


LOCK_RUN = """
import json, sys, time
from codept.text.prepare import TextConfig, prepare_text
t = time.time()
s = prepare_text([sys.argv[1]], tokenizer_dir=sys.argv[2], cfg=TextConfig(workers=1), progress=False)
print(json.dumps({"cached": s["cached"], "key": s["cache_key"], "out": s["out"], "t0": t, "t1": time.time()}))
"""


def test_two_builds_into_one_folder_serialize(tmp_path, tok_dir, cache):
    """Two processes start together on the same sources: one builds, the other waits on the lock and
    reuses the folder (one build, one folder)."""
    src = text_corpus(tmp_path / "src", 6)
    env = {**os.environ, "CODEPT_CACHE": str(cache), "PYTHONPATH": os.pathsep.join(sys.path)}
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
    folders = [p.name for p in (cache / "text").iterdir() if p.is_dir() and not p.name.startswith((".", "index"))]
    assert folders == [builder["key"]]
