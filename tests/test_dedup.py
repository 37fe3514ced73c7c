"""Exact dedup (normalised content hash) and near-duplicate removal (MinHash LSH) on real stdlib code."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import numpy as np
import pytest

from codept.data.dedup import ExactDedup, content_hash, normalize, shingles, words
from codept.data.sources import stdlib_root


def src(name: str) -> str:
    return (stdlib_root() / name).read_text()


def vendored_copy(text: str) -> str:
    """What a near-copy looks like in the wild: re-indented (4 -> 2 spaces), CRLF, trailing spaces,
    a licence header added and every 10th comment rewritten."""
    out, k = [], 0
    for line in text.split("\n"):
        indent = len(line) - len(line.lstrip(" "))
        line = " " * (indent // 2) + line.lstrip(" ")
        if line.lstrip().startswith("#"):
            k += 1
            if k % 10 == 0:
                line = line.split("#")[0] + "# NOTE(vendor): checked"
        out.append(line + "  ")
    return "# Copyright (c) 2024 Vendor Inc.\n# Licensed under the Apache License.\n\n" + "\r\n".join(out)


def test_normalize_rules():
    assert normalize("\n\n  \r\nx = 1  \r\n\r\n  y = 2\t\r\n\n \n") == "x = 1\n\n  y = 2"
    assert normalize("a\rb") == "a\nb"  # old Mac newlines
    assert normalize(b"x = 1\r\n") == "x = 1"


def test_exact_dedup_crlf_and_trailing_whitespace_copies():
    text = src("textwrap.py")
    crlf = text.replace("\n", "\r\n")
    spaced = "\n\n" + "\n".join(line + " \t" for line in text.split("\n")) + "\n\n\n"
    reindented = text.replace("\n    ", "\n  ")  # indentation is content: not an exact copy
    assert content_hash(text) == content_hash(crlf) == content_hash(spaced) == content_hash(crlf.encode())
    assert content_hash(text) == hashlib.sha256(normalize(text).encode()).hexdigest()
    d = ExactDedup()
    assert [d.check(t, o) for t, o in [(text, "a"), (crlf, "b"), (reindented, "c"), (spaced, "d"), (src("shutil.py"), "e")]] \
        == [None, "a", None, "a", None]
    assert d.counts == {"kept": 3, "duplicate": 2}
    assert d.seen(text) and not ExactDedup().seen(text)


def test_words_split_identifiers():
    assert words("class HTTPServer(getUserName, get_user_name): x2 = 42  # café 变量") == [
        "class", "http", "server", "get", "user", "name", "get", "user", "name", "x", "2", "42", "café", "变量"]
    assert shingles("a b c", k=5) == {b"a b c"} and shingles("+-*", k=5) == set()
    assert len(shingles("a b c d e f g", k=5)) == 3


def test_near_dedup_flags_vendored_copy_not_unrelated_file():
    pytest.importorskip("datasketch")
    from codept.data.dedup import NearDedup

    text = src("textwrap.py")
    copy = vendored_copy(text)
    assert content_hash(copy) != content_hash(text)  # exact dedup misses it
    nd = NearDedup(threshold=0.85)
    assert nd.check(text, "textwrap.py") is None
    assert nd.check(copy, "vendor/textwrap.py") == "textwrap.py"
    assert nd.check(src("shutil.py"), "shutil.py") is None  # unrelated
    assert nd.check(src("json/decoder.py"), "json/decoder.py") is None
    assert nd.check(vendored_copy(src("shutil.py")), "vendor/shutil.py") == "shutil.py"
    assert nd.check("", "empty") is None and nd.check("+ - *", "no words") is None
    assert nd.counts == {"kept": 3, "near_duplicate": 2, "no_words": 2}


def test_near_dedup_real_stdlib_pair():
    """The stdlib itself holds near-copies: generated codec tables differing in a few mappings."""
    pytest.importorskip("datasketch")
    from codept.data.dedup import NearDedup

    nd = NearDedup()
    assert not nd.seen(src("encodings/cp1252.py"))
    assert nd.seen(src("encodings/cp1254.py"))  # Turkish vs Western European code page
    assert not nd.seen(src("encodings/cp037.py"))  # an EBCDIC table: other layout and comments


def test_near_dedup_signature_is_deterministic_across_processes():
    pytest.importorskip("datasketch")
    from codept.data.dedup import NearDedup, minhash_signature

    text = src("textwrap.py")
    sig = minhash_signature(text)
    assert sig.shape == (128,) and np.array_equal(sig, NearDedup().signature(text))
    code = ("import hashlib, sys; from codept.data.dedup import minhash_signature; "
            "print(hashlib.sha256(minhash_signature(open(sys.argv[1]).read()).tobytes()).hexdigest())")
    out = subprocess.run([sys.executable, "-c", code, str(stdlib_root() / "textwrap.py")],
                         capture_output=True, text=True, check=True).stdout.strip()
    assert out == hashlib.sha256(sig.tobytes()).hexdigest()
    # a signature computed elsewhere (a worker) is checked in the main process
    nd = NearDedup()
    assert nd.check_signature(sig, "a") is None and nd.check_signature(sig.copy(), "b") == "a"
    with pytest.raises(ValueError, match="num_perm=128"):
        nd.check_signature(sig[:64])


def test_near_dedup_rejects_bad_settings():
    pytest.importorskip("datasketch")
    from codept.data.dedup import NearDedup

    with pytest.raises(ValueError, match="threshold=1.5"):
        NearDedup(threshold=1.5)
    with pytest.raises(ValueError, match="shingle=0"):
        NearDedup(shingle=0)
