"""Issue 29.5: text inputs lose no data. A file name that is not UTF-8 is viewed (it crashed the job at
its last step); one bad jsonl line is a counted skip with its reason, the rest of the file is kept
(a 100k-deep line or a lone surrogate dropped the whole rest); a reST line over docutils' 10,000-char
limit no longer empties the document; a pair file over max_bytes is read in chunks of whole lines
(it was refused whole as too_large); the limits are flags."""

from __future__ import annotations

import gzip
import json
import os

import datasets
import pytest

import codept.text.prepare as tprep
from codept.data.sources import stdlib_files
from codept.text.prepare import TextConfig, prepare_text
from codept.text.items import PairDoc, Skip, TextDoc
from codept.text.readers import read_file
from codept.text.view import PairView, TextView
from codept.tokenizer import train_tokenizer


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("tok")
    train_tokenizer(stdlib_files()[:10], out, vocab_size=800)
    return out


def pair(i: int) -> str:
    return json.dumps({"src": f"Open file number {i} for reading", "tgt": f"Datei Nummer {i} zum Lesen öffnen",
                       "src_lang": "en", "tgt_lang": "de"})


def test_non_utf8_file_name_is_viewed(tmp_path, tok_dir):
    """Was: UnicodeEncodeError writing the Arrow shard at the end of the job (every file's work lost)."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "good.txt").write_text("A good file. It has two sentences.\n")
    with open(os.path.join(os.fsencode(src), b"bad\xff\xfename.txt"), "wb") as f:
        f.write(b"Some text in a badly named file. Another sentence follows.\n")
    with open(os.path.join(os.fsencode(src), b"pairs\xff.en-de.tsv"), "wb") as f:
        f.write("Open the file for reading\tÖffne die Datei zum Lesen\n".encode())
    s = prepare_text([str(src)], out=tmp_path / "out", tokenizer_dir=tok_dir, cfg=TextConfig(workers=1),
                     progress=False)
    assert s["inputs"] == s["viewed"] == 3 and s["documents"] == 2 and s["pairs"] == 1
    paths = sorted(TextView.from_record(r).path for r in datasets.load_from_disk(str(tmp_path / "out" / "text")))
    assert paths[0].endswith("bad\\xff\\xfename.txt")  # shown losslessly in the Arrow column
    (p,) = datasets.load_from_disk(str(tmp_path / "out" / "pairs"))
    assert PairView.from_record(p).path.endswith("pairs\\xff.en-de.tsv#1")
    rows = [json.loads(x) for x in (tmp_path / "out" / "manifest.jsonl").read_text().splitlines()]
    assert os.fsencode(rows[0]["path"]).endswith(b"bad\xff\xfename.txt")  # the manifest keeps the name
    again = prepare_text([str(src)], out=tmp_path / "out", tokenizer_dir=tok_dir, progress=False)
    assert again["cache_key"] == s["cache_key"] and again["cached"]


def test_one_bad_jsonl_line_is_a_counted_skip(tmp_path):
    """Was: a 100k-deep line raised RecursionError and a lone surrogate failed the Arrow write: either
    dropped every line of the file (reader_error)."""
    bad = {
        2: "[" * 100_000 + "]" * 100_000,  # RecursionError in json.loads
        4: json.dumps({"src": "Lone \ud800 surrogate in the source", "tgt": "Einsames Surrogat", "src_lang": "en",
                       "tgt_lang": "de"}),
        6: "{not json",
        8: "[1, 2, 3]",
        10: "x" * 400_000,  # over max_bytes
    }
    lines = [bad.get(i) or pair(i) for i in range(1, 13)]
    f = tmp_path / "p.jsonl"
    data = "\n".join(lines).encode("utf-8", "surrogatepass") + b"\n" + b'{"src": "\xff\xfe bytes"}\n' + pair(14).encode()
    f.write_bytes(data)
    items = list(read_file(f, max_bytes=300_000))
    got = [i for i in items if isinstance(i, PairDoc)]
    assert [g.path.rsplit("#", 1)[1] for g in got] == ["1", "3", "5", "7", "9", "11", "12", "14"]
    skips = {s.reason: s for s in items if isinstance(s, Skip)}
    assert {r: s.count for r, s in skips.items()} == {"bad_record": 3, "bad_utf8": 2, "too_large": 1}
    assert "line 2: not JSON: RecursionError" in skips["bad_record"].detail
    assert "line 4" in skips["bad_utf8"].detail and "line 13" in skips["bad_utf8"].detail


def test_rst_long_line_keeps_the_document(tmp_path):
    """Was: docutils' line_length_limit (10,000) turned the whole document into one error: no text."""
    long = " ".join(f"word{i}" for i in range(2500))  # ~21,000 chars on one line
    f = tmp_path / "long.rst"
    f.write_text(f"Title\n=====\n\nFirst *paragraph*.\n\n{long}\n\n- a list item\n- another item\n\nLast paragraph.\n")
    (doc, skip) = read_file(f)
    assert isinstance(doc, TextDoc)
    assert doc.text.split("\n\n") == ["Title", "First paragraph.", long, "a list item", "another item", "Last paragraph."]
    assert skip.reason == "long_line_unparsed" and skip.count == 1
    (doc,) = read_file(f, rst_line_limit=30_000)  # the flag: parsed as reST
    assert long in doc.text


def test_pair_file_over_max_bytes_is_read_in_chunks(tmp_path, tok_dir):
    """Was: a jsonl over max_bytes (8 MB, no flag) was refused whole as too_large. Now it is read a chunk
    of whole lines at a time: 8.4 MB of junk lines and 20 pairs give 20 pairs and the junk counted."""
    src = tmp_path / "src"
    src.mkdir()
    junk = (json.dumps({"note": "x" * 200}) + "\n") * 40_000
    body = junk + "\n".join(pair(i) for i in range(20)) + "\n"
    (src / "big.jsonl").write_text(body)
    assert len(body) > TextConfig().max_bytes
    s = prepare_text([str(src)], out=tmp_path / "out", tokenizer_dir=tok_dir, cfg=TextConfig(workers=2), progress=False)
    assert s["viewed"] == 1 and s["pairs"] == 20 and s["dropped_inside_files"] == {"bad_record": 40_000}


def test_chunks_tile_the_file_exactly(tmp_path, tok_dir, monkeypatch):
    """Small chunks and a small line limit: every line is viewed once, with its own line number, across
    chunk boundaries and through gzip; an over-long line is cut out and counted, never held whole."""
    lines = [pair(i) for i in range(1, 61)]
    lines[29] = json.dumps({"src": "y" * 3000, "tgt": "z", "src_lang": "en", "tgt_lang": "de"})  # line 30 > limit
    text = "\n".join(lines)  # no final newline
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.jsonl").write_text(text)
    with gzip.open(src / "b.jsonl.gz", "wt") as g:
        g.write(text + "\n")
    chunks = list(tprep._line_chunks(str(src / "a.jsonl"), 500, 1000))
    assert len(chunks) > 5 and [c[3] for c in chunks] == [False] * (len(chunks) - 1) + [True]
    assert b"\n".join(c[1] for c in chunks).split(b"\n") == [x.encode() if len(x) <= 1000 else b"" for x in lines]
    assert [c[0] for c in chunks] == [sum(c2[1].count(b"\n") + 1 for c2 in chunks[:k]) for k in range(len(chunks))]
    assert sum(c[2] for c in chunks) == 1
    monkeypatch.setattr(tprep, "CHUNK_BYTES", 500)
    s = prepare_text([str(src)], out=tmp_path / "out", tokenizer_dir=tok_dir,
                     cfg=TextConfig(workers=2, max_bytes=1000), progress=False)
    assert s["pairs"] == 2 * 59 and s["dropped_inside_files"] == {"too_large": 2}
    got = sorted(PairView.from_record(r).path.rsplit("/", 1)[1] for r in datasets.load_from_disk(str(tmp_path / "out" / "pairs")))
    want = sorted(f"{n}#{i}" for n in ("a.jsonl", "b.jsonl.gz") for i in range(1, 61) if i != 30)
    assert got == want


def test_limits_are_flags(tmp_path):
    from codept.cli import build_parser

    p = build_parser()
    args = p.parse_args(["prepare-text", str(tmp_path), "--max-bytes", "1000", "--rst-line-limit", "500",
                         "--timeout", "5"])
    assert (args.max_bytes, args.rst_line_limit, args.timeout) == (1000, 500, 5.0)
    sub = next(a for a in p._subparsers._group_actions[0].choices.items() if a[0] == "prepare-text")[1]
    help_text = sub.format_help()
    assert "--max-bytes" in help_text and "--rst-line-limit" in help_text and "no size limit" in help_text
    for bad in (dict(max_bytes=0), dict(rst_line_limit=0), dict(timeout=0), dict(workers=-1), dict(min_src_words=-1)):
        with pytest.raises(ValueError, match=next(iter(bad))):
            TextConfig(**bad)
