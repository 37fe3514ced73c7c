"""Input formats for prepare: files, globs, jsonl(.gz), parquet, saved HF datasets; every input
accounted for (a Record or a Skip with a reason), streaming, one filter rule for rows and files."""

from __future__ import annotations

import gzip
import json
import tracemalloc

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from codept.data import records
from codept.data.records import Record, Skip, canonical_language, iter_records, record_text
from codept.data.sources import stdlib_files
from codept.structure.grammar import SkipFile

PY = 'def f(x):\n    """Doc."""\n    return x + 1\n'
JS = "function f(x) { return x + 1; }\n"
GO = "package main\n\nfunc f(x int) int { return x + 1 }\n"


def split(items):
    recs = [r for r in items if isinstance(r, Record)]
    skips = [s for s in items if isinstance(s, Skip)]
    assert len(recs) + len(skips) == len(items)
    return recs, skips


@pytest.mark.parametrize("name,lang", [
    ("python", "python"), ("Python", "python"), ("PY", "python"), (" py ", "python"), ("python3", "python"),
    ("js", "javascript"), ("JavaScript", "javascript"), ("node", "javascript"), ("golang", "go"), ("Go", "go"),
    ("rb", "ruby"), ("Java", "java"), ("PHP", "php"),
    ("cobol", None), ("klingon", None), ("", None), (None, None), (3, None),
])
def test_canonical_language(name, lang):
    assert canonical_language(name) == lang


def jsonl_lines():
    """(line text, expected reason or lang); blank lines are not rows."""
    return [
        (json.dumps({"content": PY, "lang": "Python", "path": "a/f.py"}), "python"),
        (json.dumps({"content": JS, "lang": "js"}), "javascript"),
        (json.dumps({"content": GO, "lang": "golang", "path": "m.go"}), "go"),
        (json.dumps({"content": "class A; end\n", "path": "lib/a.rb"}), "ruby"),  # lang from path
        ("", None),
        (json.dumps({"content": "x", "lang": "cobol"}), "unknown_language"),
        (json.dumps({"lang": "python"}), "bad_record"),  # no content
        (json.dumps({"content": 42, "lang": "python"}), "bad_record"),
        (json.dumps({"content": PY}), "bad_record"),  # no lang, no path
        (json.dumps({"content": PY, "path": "notes.txt"}), "unknown_language"),  # no lang, path of no grammar
        ('{"content": "x", "lang": ', "bad_record"),  # truncated JSON
        ("[1, 2]", "bad_record"),  # not an object
        (json.dumps({"content": PY, "lang": "python"}), "python"),
    ]


def write_jsonl(path, lines, gz=False):
    data = ("\n".join(t for t, _ in lines) + "\n").encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


@pytest.mark.parametrize("gz", [False, True])
def test_jsonl_every_line_accounted(tmp_path, gz):
    lines = jsonl_lines()
    f = write_jsonl(tmp_path / ("d.jsonl.gz" if gz else "d.jsonl"), lines, gz)
    out = list(iter_records([f]))
    expected = [(i + 1, exp) for i, (t, exp) in enumerate(lines) if exp is not None]
    assert len(out) == len(expected)  # one output per non-blank line, in order
    for (line_no, exp), r in zip(expected, out):
        assert r.origin == f"jsonl:{f}#{line_no}"
        if isinstance(r, Record):
            assert r.lang == exp
        else:
            assert r.reason == exp, r
    recs, skips = split(out)
    assert [r.path for r in recs][:2] == ["a/f.py", f"jsonl:{f}#2"]  # no path: the origin
    assert recs[0].content == PY
    bad = {s.origin.rsplit("#", 1)[1]: s.detail for s in skips}
    assert "line 11 is not JSON" in bad["11"] and "'content' must be a string, got missing" in bad["7"]
    assert "got int" in bad["8"] and "cobol" in bad["6"]


def test_jsonl_truncated_gzip_keeps_rows_read_and_reports(tmp_path):
    rows = [(json.dumps({"content": f"x = {i}\n", "lang": "python"}), "python") for i in range(200)]
    good = tmp_path / "good.jsonl.gz"
    write_jsonl(good, rows, gz=True)
    bad = tmp_path / "cut.jsonl.gz"
    bad.write_bytes(good.read_bytes()[: len(good.read_bytes()) // 2])
    recs, skips = split(list(iter_records([bad])))
    assert len(skips) == 1 and skips[0].reason == "bad_file" and skips[0].origin == f"jsonl:{bad}"
    assert "after line" in skips[0].detail and 0 < len(recs) < 200
    assert all(r.origin == f"jsonl:{bad}#{i + 1}" for i, r in enumerate(recs))


def stdlib_table(n: int, binary: bool = False) -> pa.Table:
    files = stdlib_files()[:n]
    content = [f.read_bytes() if binary else f.read_text() for f in files]
    return pa.table({"content": pa.array(content, pa.binary() if binary else pa.string()),
                     "lang": ["python"] * n, "path": [str(f) for f in files]})


@pytest.mark.parametrize("binary", [False, True])
def test_parquet_rows(tmp_path, monkeypatch, binary):
    monkeypatch.setattr(records, "BATCH_ROWS", 7)  # several batches and row groups
    t = stdlib_table(40, binary)
    t = t.set_column(1, "lang", pa.array(["python"] * 38 + ["cobol", None]))
    f = tmp_path / "d.parquet"
    pq.write_table(t, f, row_group_size=10)
    out = list(iter_records([str(f)]))
    assert [r.origin for r in out] == [f"parquet:{f}#{i}" for i in range(40)]
    recs, skips = split(out)
    assert len(recs) == 39 and [s.reason for s in skips] == ["unknown_language"]  # the None row: from .py path
    assert recs[5].path == t["path"][5].as_py() and record_text(recs[5]) == stdlib_files()[5].read_text()
    assert isinstance(recs[0].content, bytes if binary else str)


def test_parquet_without_content_column_is_one_skip(tmp_path):
    f = tmp_path / "d.parquet"
    pq.write_table(pa.table({"code": ["x = 1\n"] * 5, "lang": ["python"] * 5}), f)
    (s,) = iter_records([f])
    assert isinstance(s, Skip) and s.reason == "bad_file" and "no 'content' column" in s.detail
    assert "5 rows not read" in s.detail


def test_not_a_parquet_file(tmp_path):
    f = tmp_path / "d.parquet"
    f.write_text("not parquet")
    (s,) = iter_records([f])
    assert isinstance(s, Skip) and s.reason == "unreadable"


def test_hf_dataset_and_dataset_dict(tmp_path):
    import datasets

    rows = {"content": [PY, JS, "x", GO], "lang": ["python", "JavaScript", "cobol", "go"],
            "path": ["a.py", "b.js", "c.cs", "d.go"], "stars": [1, 2, 3, 4]}
    ds = datasets.Dataset.from_dict(rows)
    ds.save_to_disk(str(tmp_path / "one"))
    datasets.DatasetDict({"train": ds, "test": ds.select([0])}).save_to_disk(str(tmp_path / "two"))
    out = list(iter_records([tmp_path / "one", tmp_path / "two"]))
    one, two = str(tmp_path / "one"), str(tmp_path / "two")
    assert [r.origin for r in out] == [f"hf:{one}#{i}" for i in range(4)] + [f"hf:{two}:test#0"] + [
        f"hf:{two}:train#{i}" for i in range(4)]
    recs, skips = split(out)
    assert [r.lang for r in recs[:3]] == ["python", "javascript", "go"] and recs[0].content == PY
    assert [s.reason for s in skips] == ["unknown_language", "unknown_language"]


def test_files_dirs_and_globs(tmp_path):
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "a.py").write_text(PY)
    (src / "b.js").write_text(JS)
    (src / "notes.txt").write_text("not code")
    (src / "sub" / "c.py").write_text(PY)
    (src / "sub" / "d.go").write_text(GO)
    jl = write_jsonl(tmp_path / "rows.jsonl", jsonl_lines()[:2])
    out = list(iter_records([src, f"{src}/**/*.py", str(tmp_path / "*.jsonl"), f"{src}/*.rs", tmp_path / "missing.py"]))
    origins = [r.origin for r in out]
    assert origins == [
        f"file:{src}/a.py", f"file:{src}/b.js", f"file:{src}/notes.txt", f"file:{src}/sub/c.py", f"file:{src}/sub/d.go",
        f"file:{src}/a.py", f"file:{src}/sub/c.py",  # the glob (recursive)
        f"jsonl:{jl}#1", f"jsonl:{jl}#2",  # a glob matching data files reads them as rows
        f"glob:{src}/*.rs",  # a glob matching nothing
        f"file:{tmp_path}/missing.py",
    ]
    reasons = {r.origin: r.reason for r in out if isinstance(r, Skip)}
    assert reasons == {f"file:{src}/notes.txt": "unknown_language", f"glob:{src}/*.rs": "not_found",
                       f"file:{tmp_path}/missing.py": "not_found"}
    assert out[0].content is None and record_text(out[0]) == PY and out[4].lang == "go"


def test_data_files_inside_a_directory_are_not_rows(tmp_path):
    (tmp_path / "fixture.jsonl").write_text(json.dumps({"content": PY, "lang": "python"}) + "\n")
    (s,) = iter_records([tmp_path])
    assert isinstance(s, Skip) and s.reason == "unknown_language"


def test_record_text_filters_rows_like_files():
    def reason(content, max_bytes=1000):
        with pytest.raises(SkipFile) as e:
            record_text(Record("p.py", "python", content, "x"), max_bytes)
        return e.value.reason

    assert record_text(Record("p.py", "python", PY, "x")) == PY
    assert record_text(Record("p.py", "python", PY.encode(), "x")) == PY
    assert reason("x" * 1001) == "too_large"
    assert reason("é" * 600) == "too_large"  # 1200 UTF-8 bytes
    assert reason(" \n\t") == reason("") == "empty"
    assert reason("a\0b") == reason(b"a\0b") == "binary"
    assert reason("x = '\ud800'") == reason(b"x = '\xff'") == "bad_utf8"  # lone surrogate from a JSON escape


def _peak_python_memory(f) -> tuple[int, int]:
    """(records read, peak bytes of Python allocations) while streaming ``f``."""
    n = 0
    tracemalloc.start()
    try:
        for r in iter_records([f]):
            n += isinstance(r, Record)
        return n, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_streaming_memory_does_not_grow_with_rows(tmp_path, monkeypatch, fmt):
    """Streaming 3x the rows (stdlib files) has the same peak of Python allocations as 1x, and
    that peak is a fraction of the data read."""
    monkeypatch.setattr(records, "BATCH_ROWS", 16)
    t = stdlib_table(192)  # a multiple of the batch size: every copy is batched alike
    total = sum(len(c) for c in t["content"].to_pylist())
    peaks = []
    for copies in (1, 3):
        f = tmp_path / f"d{copies}.{fmt}"
        if fmt == "parquet":
            pq.write_table(pa.concat_tables([t] * copies), f, row_group_size=16)
        else:
            f.write_text("".join(json.dumps(row) + "\n" for row in t.to_pylist()) * copies)
        n, peak = _peak_python_memory(f)
        assert n == 192 * copies
        peaks.append(peak)
    assert total > 2_000_000 and peaks[0] < total / 3, (peaks, total)
    assert peaks[1] < 1.2 * peaks[0] + 100_000, peaks


def test_the_stack_shaped_rows_stream_and_the_tag_wins(tmp_path):
    """The Stack's columns (``max_stars_repo_path``, ``language``), read from parquet and from a
    ``datasets`` stream of it; the row's tag wins over the path's extension; with tokens_only a
    tag without a grammar is a token-only language."""
    import datasets

    files = stdlib_files()[:6]
    t = pa.table({"content": [f.read_text() for f in files],
                  "language": ["Python", "Python", "python", "Makefile", "Haskell", None],
                  "max_stars_repo_path": ["a/x.txt", "b/y.py", "", "Makefile", "Main.hs", "c/z.py"],
                  "max_stars_count": [1, 2, 3, 4, 5, 6]})
    f = tmp_path / "stack.parquet"
    pq.write_table(t, f, row_group_size=2)
    for rows in (list(iter_records([f], tokens_only=True)),
                 list(iter_records([datasets.load_dataset("parquet", data_files=str(f), split="train", streaming=True)],
                                   tokens_only=True))):
        recs, skips = split(rows)
        assert not skips and [r.lang for r in recs] == ["python", "python", "python", "makefile", "haskell", "python"]
        assert [r.path for r in recs][:2] == ["a/x.txt", "b/y.py"]  # the tag wins over .txt
        assert recs[2].path == recs[2].origin and recs[0].content == files[0].read_text()
    recs, skips = split(list(iter_records([f])))  # grammar languages only
    assert len(recs) == 4 and [s.reason for s in skips] == ["unknown_language"] * 2
