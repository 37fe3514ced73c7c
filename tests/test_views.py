"""codept.views: one open_views for every view kind (code, text, pair, trace), the schema each view
class carries, ``columns=``, the one writer, and the held-out split by the class's key."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from codept.data.sources import read_source, stdlib_files
from codept.exec import views as X
from codept.exec.job import _write
from codept.views import KINDS, open_views, to_table, view_class

LOOP = "def f(n):\n    t = 0\n    for i in range(n):\n        t += i\n    return t\n"
GUARD = "def g(x):\n    if x < 0:\n        raise ValueError(x)\n    return x\n"


def trace_folder(path, n_sources=6):
    """A `codept trace` folder as the job writes it (shards/*.jsonl + summary.json), no sandbox."""
    rows = [{"id": f"m{i % n_sources}::u{i}", "source": f"stdlib:m{i % n_sources}", "code": LOOP if i % 2 else GUARD,
             "counts": {"1": 1, "2": 1 + i % 4, "3": i % 3}, "states": [[2, {"t": "0"}], [3, {"i": "0"}]]}
            for i in range(24)]
    rows.append({"id": "bad::u", "source": "stdlib:bad", "code": "def (:\n", "counts": {}, "states": []})
    (path / "shards").mkdir(parents=True)
    _write(path / "shards" / "00000.jsonl", rows)
    (path / "summary.json").write_text(json.dumps({"shards": 1}))
    return rows


def test_every_kind_declares_its_schema_once():
    for kind in KINDS:
        cls = view_class(kind)
        assert cls.KIND == kind and cls.KEY in cls.SCHEMA.names and cls.SPLIT in cls.SCHEMA.names
        assert set(cls.ARRAYS) <= set(cls.SCHEMA.names) and set(cls.DERIVED) <= set(cls.ARRAYS)
    with pytest.raises(ValueError, match="kind='graph': expected one of"):
        view_class("graph")


def test_trace_folder_opens_as_views_with_the_runs_tokenizer(tmp_path, byte_tok):
    rows = trace_folder(tmp_path / "t")
    with pytest.raises(ValueError, match="is a `codept trace` folder: pass tokenizer="):
        open_views(tmp_path / "t")
    views = open_views(tmp_path / "t", kind="trace", tokenizer=byte_tok)
    eager, skipped = X.views_of(rows, byte_tok)
    assert views.kind == "trace" and len(views) == len(eager) == 24 and views.skipped == skipped == 1
    for got, want in zip(views, eager):
        assert isinstance(got, X.TraceView) and got.id == want.id and got.code == want.code
        for f in X.TraceView.ARRAYS:
            a, b = getattr(got, f), getattr(want, f)
            assert a.dtype == b.dtype and np.array_equal(a, b), f
    kept, held = views.split(0.3)
    assert len(kept) + len(held) == 24 and len(held) > 0 and len(kept) > 0
    assert not {v.source for v in kept} & {v.source for v in held}  # a module never straddles the split
    back = to_table(eager)  # the one writer: trace views round-trip
    assert back.schema == X.TraceView.SCHEMA and open_views(back)[3].id == eager[3].id
    with pytest.raises(ValueError, match="holds trace views, not code"):
        open_views(back, kind="code")


def test_held_out_split_is_by_content_wherever_the_corpus_lies(small_tok):
    """The same stdlib docstrings under two folders (CI's tmp folder vs a user's) hold out the same
    documents; a duplicate lands with its twin; select() keeps each view's side."""
    import ast

    from codept.text.build import build_text_view

    docs = [d for d in (ast.get_docstring(ast.parse(p.read_bytes())) for p in stdlib_files()[:150]) if d][:60]
    docs.append(docs[0])  # a duplicate under another name

    def split(root: str):
        views = [build_text_view(f"{root}/doc{i}.txt", "en", d, small_tok) for i, d in enumerate(docs)]
        kept, held = open_views(to_table(views)).split(0.3)
        return [v.text for v in kept], [v.text for v in held]

    a, b = split("/tmp/pytest-of-root/pytest-52/t0/txt"), split("/home/user/corpus")
    assert a == b and 5 < len(a[1]) < 35 and len(a[0]) + len(a[1]) == len(docs)
    assert (docs[0] in a[1]) == (a[1].count(docs[0]) == 2)  # both copies on one side
    views = open_views(to_table([build_text_view(f"x{i}", "en", d, small_tok) for i, d in enumerate(docs)]))
    sub = views.select(np.arange(len(docs))[::-1])
    assert sorted(v.text for v in sub.split(0.3)[1]) == sorted(a[1])


def test_columns_reads_only_the_fields_named(small_tok):
    from codept.structure.view import CodeView, build_view

    cvs = [build_view(str(p), "python", read_source(p), small_tok) for p in stdlib_files()[:3]]
    views = open_views(to_table(cvs), columns=["text", "functions"])
    v = views[1]
    assert isinstance(v, CodeView) and v.text == cvs[1].text and np.array_equal(v.functions, cvs[1].functions)
    assert v.path == cvs[1].path  # the split key is always read
    with pytest.raises(AttributeError, match="spans: not among the columns read"):
        v.spans
    with pytest.raises(ValueError, match=r"code views have no \['sapns'\]"):
        open_views(to_table(cvs), columns=["sapns"])
    with pytest.raises(TypeError, match="one kind per table"):
        to_table([cvs[0], X.view_of({"id": "a", "source": "s", "code": LOOP, "counts": {}, "states": []}, small_tok)])


def test_a_text_table_loads_no_code_view_module():
    code = ("import sys, numpy as np\n"
            "from codept.text.view import TextView, views_to_table\n"
            "from codept.views import open_views\n"
            "t = TextView('p', 'en', 'ab', np.zeros(1, np.int32), np.array([[0, 2]], np.int32), np.zeros(1, np.int32),"
            " np.zeros((0, 2), np.int32), np.zeros((0, 2), np.int32))\n"
            "v = open_views(views_to_table([t]))\n"
            "assert v.kind == 'text' and v[0].text == 'ab'\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'tree_sitter' or m.startswith('codept.structure')))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "[]"
