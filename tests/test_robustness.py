"""Bad input: a view with a flag or a recorded skip with a reason, never a crash."""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest

from codept.data.sources import decode_source, discover, read_source
from codept.parallel import WorkersFailing, isolated_map
from codept.structure import grammar
from codept.structure.view import build_view


def test_syntax_error_view_is_flagged_and_spans_avoid_errors(small_tok):
    src = "def ok(a):\n    return a + 1\n\ndef broken(:\n    x = = 2\n\nclass C:\n    y = [1, 2\n"
    v = build_view("e.py", "python", src, small_tok)
    assert v.has_error and len(v.errors) > 0
    err = np.zeros(len(v) + 1, dtype=bool)
    for s, e in v.errors.tolist():
        err[s:e] = True
    for s, e, _k in v.spans.tolist():
        assert not err[s:e].any(), f"span {v.token_text(s, e)!r} overlaps a syntax error"
    for s, e, *_ in v.idents.tolist():
        assert not err[s:e].any()
    # the healthy function keeps its structure
    assert "ok" in v.names and any(v.token_text(s, e).startswith("def ok") for s, e, _ in v.spans.tolist())


@pytest.mark.parametrize(
    "data,reason",
    [
        (b"\xff\xfe x = 1\n", "bad_utf8"),
        (b"print('a')\n\x00\x01\x02binary", "binary"),
        (b"   \n\t\n", "empty"),
        (b"x = 1\n" * 300_000, "too_large"),
    ],
)
def test_file_filters(data, reason):
    with pytest.raises(grammar.SkipFile) as e:
        decode_source(data, max_bytes=1_000_000)
    assert e.value.reason == reason


def test_byte_order_mark_is_dropped(small_tok):
    """A file saved with a UTF-8 BOM decodes, views and dedups like the same file without one; a
    BOM alone is an empty file."""
    from codept.data.dedup import content_hash
    from codept.data.records import Record, record_text

    plain = "import os\n\ndef f(x):\n    return x + 1\n"
    bom = b"\xef\xbb\xbf" + plain.encode()
    assert decode_source(bom) == plain
    assert record_text(Record(path="r.py", lang="python", content="\ufeff" + plain, origin="r")) == plain
    assert content_hash(bom) == content_hash(plain)
    a, b = build_view("a.py", "python", decode_source(bom), small_tok), build_view("b.py", "python", plain, small_tok)
    assert a.input_ids.tolist() == b.input_ids.tolist() and a.spans.tolist() == b.spans.tolist()
    with pytest.raises(grammar.SkipFile, match="empty"):
        decode_source(b"\xef\xbb\xbf\n")


def test_deep_nesting_is_refused_quickly(small_tok):
    src = "x = " + "(" * 100_000 + "1" + ")" * 100_000 + "\n"
    t = time.perf_counter()
    with pytest.raises(grammar.SkipFile) as e:
        build_view("deep.py", "python", src, small_tok)
    assert e.value.reason == "too_deep"
    assert time.perf_counter() - t < 10  # the query on such a tree takes ~40 s; we never run it


def test_parse_timeout_is_a_skip():
    src = ("def f(x):\n    return [x for x in range(10) if x % 2]\n" * 40_000).encode()
    with pytest.raises(grammar.SkipFile) as e:
        grammar.parse("python", src, timeout_s=0.01)
    assert e.value.reason == "parse_timeout"
    # the cancelled parse must not leak into the next one (tree-sitter resumes unless reset)
    assert grammar.parse("python", b"x = 1\n").leaves.tolist() == [[0, 1], [2, 3], [4, 5]]


def test_unreadable_and_missing_files(tmp_path):
    p = tmp_path / "secret.py"
    p.write_text("x = 1\n")
    p.chmod(0)
    if os.geteuid() != 0:  # root reads anything
        with pytest.raises(grammar.SkipFile, match="unreadable"):
            read_source(p)
    with pytest.raises(grammar.SkipFile, match="unreadable"):
        read_source(tmp_path / "nope.py")


def test_discover_accounts_for_everything(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "b.txt").write_text("hello\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "c.go").write_text("package c\n")
    (tmp_path / "loop").symlink_to(tmp_path, target_is_directory=True)  # a symlink loop
    (tmp_path / "dangling.py").symlink_to(tmp_path / "missing.py")
    files, skipped = discover([tmp_path, tmp_path / "nothing-here"])
    assert [os.path.basename(p) for p, _ in files] == ["a.py", "c.go"]
    reasons = {os.path.basename(p): r for p, r in skipped}
    assert reasons == {"b.txt": "unknown_language", "loop": "symlinked_directory",
                       "dangling.py": "broken_symlink", "nothing-here": "not_found"}


def test_a_link_out_of_a_walked_folder_is_never_read(tmp_path):
    """A repository's ``leak.py -> /etc/passwd`` (or ``~/.ssh/id_rsa``) was read into the views by
    code prepare; now a skip naming the target, as prepare-text does. A link inside the folder, and
    a link named as a source itself, are read."""
    from codept.prepare import PrepareConfig, prepare

    secret = tmp_path / "home" / "secret.py"
    secret.parent.mkdir()
    secret.write_text("TOKEN = 'do-not-read'\n")
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.py").write_text("def f(x):\n    return x + 1\n")
    (repo / "leak.py").symlink_to(secret)
    (repo / "again.py").symlink_to(repo / "a.py")
    files, skipped = discover([repo, secret])
    assert sorted(os.path.basename(p) for p, _ in files) == ["a.py", "again.py", "secret.py"]
    assert [(os.path.basename(p), r) for p, r in skipped] == [("leak.py", "symlink_outside_input")]
    s = prepare([str(repo)], out=tmp_path / "out", cfg=PrepareConfig(workers=1, dedup=False), progress=False)
    assert s["skipped"] == {"symlink_outside_input": 1} and s["viewed"] == 2
    assert "do-not-read" not in (tmp_path / "out" / "manifest.jsonl").read_text()


# -- killable workers -------------------------------------------------------------------------


def _init(x):
    return x


def _work(state, item):
    if item == "segv":
        os.kill(os.getpid(), signal.SIGSEGV)
    if item == "hang":
        time.sleep(3600)
    if item == "raise":
        raise RuntimeError("boom")
    return state + item


def test_isolated_map_survives_crashes_hangs_and_errors():
    items = ["a", "segv", "b", "hang", "raise", "c"]
    out = {i: (ok, v) for i, ok, v in isolated_map(_work, items, workers=2, timeout=2.0, init=_init,
                                                      init_args=(">",), startup_timeout=60)}
    assert sorted(out) == list(range(len(items)))  # nothing lost
    assert out[0] == (True, ">a") and out[2] == (True, ">b") and out[5] == (True, ">c")
    assert out[1][0] is False and out[1][1][0] == "worker_crash"
    assert out[3][0] is False and out[3][1][0] == "timeout"
    assert out[4][0] is False and out[4][1][0] == "RuntimeError"


def _bad_init(x):
    raise ValueError(f"cannot load {x}")


def test_isolated_map_failing_init_is_an_error_not_skips():
    t0 = time.monotonic()
    with pytest.raises(WorkersFailing, match="initialisation failed: ValueError: cannot load tok"):
        list(isolated_map(_work, ["a"] * 50, workers=2, timeout=5.0, init=_bad_init, init_args=("tok",)))
    assert time.monotonic() - t0 < 60  # not one fresh worker per item


def test_isolated_map_every_item_crashing_is_an_error():
    with pytest.raises(WorkersFailing, match="first 4 items all crashed"):
        list(isolated_map(_work, ["segv"] * 20, workers=2, timeout=5.0, init=_init, init_args=(">",),
                          max_initial_crashes=4))
    # a crash after a success stays a recorded skip
    out = list(isolated_map(_work, ["a"] + ["segv"] * 5, workers=1, timeout=5.0, init=_init, init_args=(">",),
                            max_initial_crashes=4))
    assert sorted(ok for _, ok, _ in out) == [False] * 5 + [True]


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def test_parsing_a_corpus_does_not_leak():
    """py-tree-sitter 0.26 leaks every chunk a callable source returns; the default path parses bytes."""
    from codept.data.sources import stdlib_files

    datas = []
    for p in stdlib_files()[:150]:
        try:
            datas.append(read_source(p).encode())
        except grammar.SkipFile:
            pass
    rss = []
    for _ in range(4):
        for d in datas:
            grammar.parse("python", d)
        rss.append(_rss_mb())
    corpus_mb = sum(map(len, datas)) / 2**20
    assert rss[-1] - rss[1] < max(2.0, 0.5 * corpus_mb), (rss, corpus_mb)
