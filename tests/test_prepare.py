"""`codept prepare`: every input accounted for, cache keyed by content, views loadable."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from codept.data.redact import redact
from codept.data.sources import read_source, stdlib_files
from codept.prepare import PrepareConfig, format_summary, load_views, prepare
from codept.structure.view import CodeView, build_view
from codept.tokenizer import default_tokenizer_dir, load_tokenizer, train_tokenizer


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("tok")
    train_tokenizer(stdlib_files()[:30], out, vocab_size=1500)
    return out


def hostile_corpus(root):
    root.mkdir()
    (root / "good.py").write_text('def f(x):\n    """Doc."""\n    return x + 1\n')
    (root / "Good.java").write_text("class G { /** Doc. */ int f(int x) { return x + 1; } }\n")
    (root / "syntax_error.py").write_text("def broken(:\n    pass\n")
    (root / "bad_utf8.py").write_bytes(b"x = '\xff\xfe'\n")
    (root / "binary.py").write_bytes(b"\x00\x01\x02" * 100)
    (root / "empty.py").write_text("")
    (root / "huge.py").write_text("x = 1\n" * 2_000_000)  # 12 MB
    (root / "deep.py").write_text("x = " + "[" * 100_000 + "]" * 100_000 + "\n")
    (root / "notes.txt").write_text("not code\n")
    (root / "loop").symlink_to(root, target_is_directory=True)
    (root / "unreadable.py").write_text("x = 1\n")
    (root / "unreadable.py").chmod(0)
    return root


def test_hostile_corpus_complete_manifest(tmp_path, tok_dir):
    src = hostile_corpus(tmp_path / "src")
    s = prepare([str(src)], out=tmp_path / "out", tokenizer_dir=tok_dir, cfg=PrepareConfig(workers=2),
                progress=False)
    rows = [json.loads(x) for x in (tmp_path / "out" / "manifest.jsonl").read_text().splitlines()]
    by = {r["path"].rsplit("/", 1)[-1]: r for r in rows}
    assert len(rows) == s["inputs"] == 11
    assert by["good.py"]["status"] == by["Good.java"]["status"] == "viewed"
    assert by["syntax_error.py"]["status"] == "viewed" and by["syntax_error.py"]["has_error"]
    expect = {"bad_utf8.py": "bad_utf8", "binary.py": "binary", "empty.py": "empty", "huge.py": "too_large",
              "deep.py": "too_deep", "notes.txt": "unknown_language", "loop": "symlinked_directory"}
    for name, reason in expect.items():
        assert by[name]["status"] == "skipped" and by[name]["reason"] == reason, by[name]
    assert by["unreadable.py"]["status"] in ("viewed", "skipped")  # root can read a mode-000 file
    views = load_views(tmp_path / "out")
    assert len(views) == s["viewed"] == sum(r["status"] == "viewed" for r in rows)
    # the summary accounts for every input per language too, and prints the skips with it
    assert sum(n for c in s["per_lang"].values() for k, n in c.items()
               if k == "viewed" or k.startswith("skipped:")) == s["inputs"]
    assert "unknown: 0 viewed, 0 tokens, 0 with syntax errors, skipped " in format_summary(s)


def test_broken_workers_are_an_error_and_not_cached(tmp_path, tok_dir, monkeypatch):
    """Workers killed by the environment (here: they abort at start-up) view nothing; prepare raises
    instead of caching an empty dataset as DONE, and the CLI says why."""
    import os

    import codept.parallel
    from codept.cli import main as cli_main
    from codept.parallel import WorkersFailing

    real = codept.parallel.isolated_map
    monkeypatch.setattr(codept.parallel, "isolated_map",
                        lambda fn, items, **kw: real(fn, items, **{**kw, "init": os.abort, "init_args": ()}))
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.py").write_text("x = 1\n")
    (src / "b.py").write_text("y = 2\n")
    with pytest.raises(WorkersFailing, match="no input was viewed and 2 crashed"):
        prepare([str(src)], out=tmp_path / "out", tokenizer_dir=tok_dir, cfg=PrepareConfig(workers=1), progress=False)
    assert not (tmp_path / "out" / "DONE").exists()
    rows = (tmp_path / "out" / "manifest.jsonl").read_text().splitlines()
    assert [json.loads(r)["reason"] for r in rows] == ["worker_crash"] * 2
    for i in range(9):
        (src / f"c{i}.py").write_text(f"z = {i}\n")
    assert cli_main(["prepare", str(src), "--out", str(tmp_path / "out2"), "--tokenizer", str(tok_dir),
                     "--workers", "1"]) == 1  # 11 inputs: gives up after the first 8 crashes


def test_output_independent_of_workers_and_cached(tmp_path, tok_dir):
    files = [str(p) for p in stdlib_files()[:12]]
    a = prepare(files, out=tmp_path / "a", tokenizer_dir=tok_dir, cfg=PrepareConfig(workers=1), progress=False)
    b = prepare(files, out=tmp_path / "b", tokenizer_dir=tok_dir, cfg=PrepareConfig(workers=2), progress=False)
    assert a["cache_key"] == b["cache_key"] and not a["cached"]
    va, vb = load_views(tmp_path / "a"), load_views(tmp_path / "b")
    assert va[:] == vb[:]  # identical rows, whatever the number of workers
    assert [r["path"] for r in va] == sorted(r["path"] for r in va)
    again = prepare(files, out=tmp_path / "a", tokenizer_dir=tok_dir, cfg=PrepareConfig(workers=1), progress=False)
    assert again["cached"] and again["cache_key"] == a["cache_key"]
    # a different setting is a different key: never served stale
    other = prepare(files, out=tmp_path / "a", tokenizer_dir=tok_dir, cfg=PrepareConfig(workers=1, max_depth=900),
                    progress=False)
    assert not other["cached"] and other["cache_key"] != a["cache_key"]


def test_changed_input_changes_key(tmp_path, tok_dir):
    src = tmp_path / "m.py"
    src.write_text("x = 1\n")
    a = prepare([str(src)], out=tmp_path / "o", tokenizer_dir=tok_dir, progress=False)
    src.write_text("x = 2\n")
    b = prepare([str(src)], out=tmp_path / "o", tokenizer_dir=tok_dir, progress=False)
    assert a["cache_key"] != b["cache_key"] and not b["cached"]


@pytest.mark.slow
def test_whole_stdlib_zero_crashes():
    """The embedded default corpus: every file viewed or skipped with a reason, nothing crashes."""
    s = prepare([], progress=False)
    assert s["inputs"] == len(stdlib_files())
    assert s["viewed"] + sum(s["skipped"].values()) == s["inputs"]
    assert set(s["skipped"]) <= {"empty", "duplicate"}, s["skipped"]  # no crash, timeout or depth skip
    assert s["viewed"] > 500 and s["tokens"] > 1_000_000 and s["documented"] > 3000
    views = load_views(s["out"])
    assert len(views) == s["viewed"]
    # a stored view equals a freshly built one
    row = views[len(views) // 2]
    stored = CodeView.from_record(row)
    text, _ = redact(read_source(row["path"]))  # prepare redacts secrets/PII by default
    fresh = build_view(row["path"], "python", text, load_tokenizer(default_tokenizer_dir()))
    for f in ("input_ids", "offsets", "leaf", "spans", "idents", "functions"):
        np.testing.assert_array_equal(getattr(stored, f), getattr(fresh, f))


@pytest.mark.slow
def test_main_command_runs_without_arguments():
    r = subprocess.run([sys.executable, "-m", "codept.cli", "prepare"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "inputs viewed" in r.stdout and "spans:" in r.stdout and "redacted:" in r.stdout


def test_shards_are_disjoint_and_read_as_one(tmp_path, tok_dir):
    import datasets

    files = [str(p) for p in stdlib_files()[:30]]
    full = prepare(files, out=tmp_path / "all", tokenizer_dir=tok_dir, cfg=PrepareConfig(workers=2), progress=False)
    parts = [prepare(files, out=tmp_path / f"s{i}", tokenizer_dir=tok_dir,
                     cfg=PrepareConfig(workers=1, num_shards=3, shard_index=i), progress=False) for i in range(3)]
    assert sum(p["inputs"] for p in parts) == full["inputs"]
    assert all(p["inputs"] > 0 for p in parts)
    joined = load_views(*(tmp_path / f"s{i}" for i in range(3)))
    assert sorted(joined["path"]) == sorted(load_views(tmp_path / "all")["path"])
    assert len(datasets.load_from_disk(str(tmp_path / "s0"))) == parts[0]["viewed"]  # a plain HF dataset
    with pytest.raises(ValueError, match="shard_index"):
        PrepareConfig(num_shards=2, shard_index=2)


def test_rows_dedup_and_redaction_in_manifest(tmp_path, tok_dir):
    """jsonl rows + files: exact duplicates skipped before any work, secrets redacted and counted,
    near-duplicates (optional) decided in input order."""
    body = (stdlib_files()[5]).read_text()
    rows = [
        {"content": body, "lang": "python", "path": "a.py"},
        {"content": body.replace("\n", "\r\n"), "lang": "Python", "path": "a_crlf.py"},  # exact dup
        {"content": "# copy\n" + body + "\nX = 1\n", "lang": "py", "path": "a_near.py"},  # near dup
        {"content": 'KEY = "AKIAQWERTYUIOPASDFGH"\nmail = "dev@corp-mail.net"\n', "lang": "python", "path": "s.py"},
        {"content": "IDENTIFICATION DIVISION.", "lang": "COBOL/85"},  # no grammar, and no token-only name ("/")
        "not an object",
    ]
    data = tmp_path / "rows.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    s = prepare([str(data)], out=tmp_path / "o", tokenizer_dir=tok_dir,
                cfg=PrepareConfig(workers=2, near_dedup=0.8), progress=False)
    m = [json.loads(x) for x in (tmp_path / "o" / "manifest.jsonl").read_text().splitlines()]
    assert [r["status"] for r in m] == ["viewed", "skipped", "skipped", "viewed", "skipped", "skipped"]
    assert [r.get("reason") for r in m][1:3] == ["duplicate", "near_duplicate"]
    assert m[4]["reason"] == "unknown_language" and m[5]["reason"] == "bad_record"
    assert m[3]["redacted"] == {"aws_access_key": 1, "email": 1}
    assert s["redacted"] == {"aws_access_key": 1, "email": 1}
    text = load_views(tmp_path / "o")[1]["text"]
    assert "AKIA" not in text and "corp-mail" not in text


def _script_run(script, *args, timeout: float = 120.0):
    """`python script args` in its own session: (rc, stdout, stderr); a hang past `timeout` kills the
    whole session (the spawned workers too) and fails the test."""
    import os
    import signal
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    p = subprocess.Popen([sys.executable, str(script), *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True, cwd=script.parent,
                         env={**os.environ, "PYTHONPATH": str(repo), "TOKENIZERS_PARALLELISM": "false"})
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        pytest.fail(f"{script.name} hung for {timeout:g} s")
    return p.returncode, out, err


def test_unguarded_script_refused_not_hung(tmp_path, tok_dir):
    """prepare() at the top level of a script without `if __name__ == "__main__":` hung forever: each
    spawned worker re-ran the script and waited on the parent's build lock. Now it is refused before
    anything is made; the same call under a guard (either operand order) builds."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.py").write_text('def f(x):\n    """Doc."""\n    return x + 1\n')
    head = "import sys\nfrom codept.prepare import PrepareConfig, prepare\n\n"
    call = ("s = prepare([sys.argv[1]], out=sys.argv[2], tokenizer_dir=sys.argv[3], cfg=PrepareConfig(workers=1), "
            "progress=False)\nprint('VIEWED', s['viewed'])\n")
    bare, guarded = tmp_path / "bare.py", tmp_path / "guarded.py"
    bare.write_text(head + call)
    guarded.write_text(head + "if '__main__' == __name__:\n" + "".join("    " + ln for ln in call.splitlines(True)))
    rc, out, err = _script_run(bare, src, tmp_path / "o1", tok_dir)
    assert rc == 1 and "UnguardedMain" in err and "bare.py (line 4)" in err and 'if __name__ == "__main__":' in err, err[-2000:]
    assert not (tmp_path / "o1").exists()
    rc, out, err = _script_run(guarded, src, tmp_path / "o2", tok_dir)
    assert rc == 0 and "VIEWED 1" in out, err[-2000:]
