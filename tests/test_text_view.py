"""TextView / PairView: golden output, invariants on real English (stdlib docstrings, man pages,
Node.js docs, the stdlib's own .rst) and Chinese, jieba word grouping, Arrow round trip."""

from __future__ import annotations

import glob
import importlib
import importlib.util
import io
import os
import shutil
import sysconfig
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from codept import tokenizer as ctok
from codept.data.sources import stdlib_files
from codept.text import segment
from codept.text.build import build_pair_view, build_text_view, token_words
from codept.text.items import TextDoc
from codept.text.readers import read_file
from codept.text.view import (PAIR_ARROW_SCHEMA, TEXT_ARROW_SCHEMA, PairView, TextView, pairs_to_table,
                              table_to_pairs, table_to_views, views_to_table, word_spans)

ZH = ("我们正在研究自然语言处理。他说：“今天天气很好！”明天呢？这是第一部分；这是第二部分。\n\n"
      "中文分词使用结巴分词，用户词典可以配置。")
needs_jieba = pytest.mark.skipif(importlib.util.find_spec("jieba") is None,
                                 reason="jieba not installed (a dependency of codept.text: Chinese word boundaries)")
STDLIB_MODULES = ["json", "textwrap", "argparse", "collections", "csv", "difflib", "heapq", "logging",
                  "pickle", "string", "subprocess", "tempfile", "unittest", "zipfile", "email", "decimal"]


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    """A small real BPE (vocab 3000) on a few stdlib files plus a text file with Chinese."""
    d = tmp_path_factory.mktemp("texttok")
    extra = d / "zh.txt"
    # Chinese once: its characters are in the byte-level alphabet anyway; not repeated, so BPE
    # learns no merges across jieba words (see test_token_merging_across_words for that case)
    extra.write_text(ZH + "\n自然语言处理是人工智能的一个分支。英文 English text, e.g. this one.\n", encoding="utf-8")
    ctok.train_tokenizer(stdlib_files()[:30] + [extra], d / "tok", vocab_size=3000)
    return ctok.load_tokenizer(d / "tok")


def docstrings() -> list[tuple[str, str]]:
    out = []
    for name in STDLIB_MODULES:
        doc = importlib.import_module(name).__doc__
        if doc and doc.strip():
            out.append((name, doc))
    assert len(out) >= 10  # always there: the tests never skip entirely
    return out


def check_view(v: TextView) -> None:
    """Every structural invariant of a TextView."""
    v.validate()  # the structural rules, checked again below by hand
    T, text = len(v), v.text
    assert v.input_ids.shape == (T,) and v.offsets.shape == (T, 2) and v.words.shape == (T,)
    assert v.input_ids.dtype == v.offsets.dtype == v.words.dtype == np.int32
    if T == 0:
        assert len(v.sentences) == len(v.paragraphs) == 0
        return
    off = v.offsets
    # offsets tile the text (tokens of one multi-byte char share its offsets)
    assert off[0, 0] == 0 and off[-1, 1] == len(text)
    assert np.all((off[1:, 0] == off[:-1, 1]) | ((off[1:, 0] == off[:-1, 0]) & (off[1:, 1] == off[:-1, 1])))
    # sentences and paragraphs: ordered, non-overlapping, non-empty, tiling [0, T)
    for r in (v.sentences, v.paragraphs):
        assert r.dtype == np.int32 and r.shape[1] == 2 and len(r) >= 1
        assert r[0, 0] == 0 and r[-1, 1] == T
        assert np.all(r[:, 1] > r[:, 0]) and np.array_equal(r[1:, 0], r[:-1, 1])
    assert set(v.paragraphs[:, 0].tolist()) <= set(v.sentences[:, 0].tolist())  # sentences nest in paragraphs
    # -1 exactly on whitespace-only tokens (except whitespace inside a merged unit, never seen here)
    ws_only = np.array([not text[s:e].strip() for s, e in off.tolist()])
    assert np.array_equal(v.words < 0, ws_only)
    # word ids dense, in order, each on one contiguous run
    spans = word_spans(v.words)
    assert len(spans) == v.n_words
    # every char-level word: all tokens overlapping its characters share one id
    cw = segment.segment_words(text, v.lang)
    t0 = np.searchsorted(off[:, 1], cw[:, 0], side="right")
    t1 = np.searchsorted(off[:, 0], cw[:, 1], side="left")
    changes = np.concatenate([[0], np.cumsum(v.words[1:] != v.words[:-1])])
    same = (t1 > t0) & (changes[t1 - 1] == changes[t0]) & (v.words[t0] >= 0)
    assert same.all(), [text[s:e] for s, e in cw[~same][:5].tolist()]
    # every sentence holds a word when the text has one
    if text.strip():
        for s, e in v.sentences.tolist():
            assert (v.words[s:e] >= 0).any(), v.token_text(s, e)


def test_golden_byte_level(byte_tok):
    s = "Hi Mr. Li. Ok!\n\nNo. 2 is e.g. it. Go."
    v = build_text_view("g.txt", "text", s, byte_tok)
    assert len(v) == len(s)  # one token per byte: token index == char index
    assert v.words.tolist() == [0, 0, -1, 1, 1, 2, -1, 3, 3, 4, -1, 5, 5, 6, -1, -1, 7, 7, 8, -1, 9, -1, 10,
                                10, -1, 11, 11, 11, 12, -1, 13, 13, 14, -1, 15, 15, 16]
    assert v.sentences.tolist() == [[0, 10], [10, 14], [14, 33], [33, 37]]
    assert v.paragraphs.tolist() == [[0, 14], [14, 37]]
    assert [v.token_text(a, b) for a, b in v.sentences] == ["Hi Mr. Li.", " Ok!", "\n\nNo. 2 is e.g. it.", " Go."]
    check_view(v)


def test_stdlib_docstrings(tok):
    views = [build_text_view(f"{name}.__doc__", "text", doc, tok) for name, doc in docstrings()]
    for v in views:
        check_view(v)
    assert sum(len(v.sentences) for v in views) > 50
    assert sum(len(v.paragraphs) for v in views) > 20


ABBREV_TEXTS = [
    ("Use a parser, e.g. the one in json. It works.", 2),
    ("Mr. Smith met Dr. Watson at 3.14 p.m. today. Then they left.", 2),
    ("See Fig. 3 and No. 5 for details. I.e. nothing else.", 2),
    ("J. R. R. Tolkien wrote it, i.e. the book. Really? Yes! Wait... What now.", 5),
    ("Version 2.0 is out (see the U.S. mirror) etc. and more. Done.", 2),
]


@pytest.mark.parametrize("text,n", ABBREV_TEXTS)
def test_abbreviations_do_not_split(tok, text, n):
    v = build_text_view("a", "text", text, tok)
    check_view(v)
    sents = [v.token_text(s, e).strip() for s, e in v.sentences.tolist()]
    assert len(sents) == n, sents
    for s in sents[:-1]:  # no sentence ends on an abbreviation or inside a number
        last = s.split()[-1].lower()
        assert last.rstrip(".") not in segment.ABBREVIATIONS and not last[0].isdigit(), sents


def test_sentences_never_end_on_abbreviations_in_real_docstrings(tok):
    ends = 0
    for name, doc in docstrings():
        v = build_text_view(name, "text", doc, tok)
        for s, e in v.sentences.tolist()[:-1]:
            last = v.token_text(s, e).split()[-1].lower()
            assert last.rstrip(".") not in {"e.g", "i.e", "mr", "dr", "vs", "cf"}, (name, v.token_text(s, e))
            ends += 1
    assert ends > 50


@needs_jieba
def test_chinese_words_from_jieba(tok):
    v = build_text_view("zh", "zh", ZH, tok)
    check_view(v)
    words = [v.token_text(s, e) for s, e in v.word_spans()]
    assert "自然语言" in words and "处理" in words and "我们" in words
    # the tokens of 自然语言 share one id (several byte-level tokens), different from 处理's
    i = ZH.index("自然语言处理")
    tok_of = lambda c: int(np.searchsorted(v.offsets[:, 1], c, side="right"))  # noqa: E731
    a = {int(v.words[t]) for t in range(tok_of(i), tok_of(i + 3) + 1)}
    b = {int(v.words[t]) for t in range(tok_of(i + 4), tok_of(i + 5) + 1)}
    assert len(a) == 1 and len(b) == 1 and a != b
    assert tok_of(i + 3) > tok_of(i)  # 自然语言 really is several tokens
    sents = [v.token_text(s, e).strip() for s, e in v.sentences.tolist()]
    assert sents == ["我们正在研究自然语言处理。", "他说：“今天天气很好！”", "明天呢？", "这是第一部分；", "这是第二部分。",
                     "中文分词使用结巴分词，用户词典可以配置。"]
    assert len(v.paragraphs) == 2


def test_token_merging_across_words():
    """A BPE token reaching across a word boundary joins the words: every token keeps one id and
    all tokens of a word still share it (jieba words 自然语言|处理, a token 言处)."""
    text = "自然语言处理 ok"
    words = np.array([[0, 4], [4, 6], [7, 9]])
    starts = np.array([0, 2, 3, 5, 6, 7])  # 自然 | 语 | 言处 | 理 | " ok" split as " " + "ok"
    ends = np.array([2, 3, 5, 6, 7, 9])
    assert token_words(text, words, starts, ends).tolist() == [0, 0, 0, 0, -1, 1]
    starts, ends = np.array([0, 4, 6, 7]), np.array([4, 6, 7, 9])  # no straddling token
    assert token_words(text, words, starts, ends).tolist() == [0, 1, -1, 2]


@needs_jieba
def test_user_dictionary(tok, tmp_path):
    d = tmp_path / "user.dict"
    d.write_text("自然语言处理 1000 n\n结巴分词 1000 n\n", encoding="utf-8")
    v = build_text_view("zh", "zh", ZH, tok, user_dict=str(d))
    check_view(v)
    words = [v.token_text(s, e).strip() for s, e in v.word_spans()]
    assert "自然语言处理" in words and "结巴分词" in words
    with pytest.raises(FileNotFoundError, match="user dictionary"):
        build_text_view("zh", "zh", ZH, tok, user_dict=str(tmp_path / "missing.dict"))


@needs_jieba
def test_jieba_cache_in_codept_cache():
    seg = segment.segmenter()
    assert Path(seg.tmp_dir) == ctok.cache_dir() / "jieba"
    assert (Path(seg.tmp_dir) / "jieba.cache").is_file()


def test_stdlib_rst(tok):
    p = Path(sysconfig.get_paths()["stdlib"]) / "email" / "architecture.rst"
    if not p.is_file():
        pytest.skip(f"{p} not shipped with this interpreter")
    (doc,) = [d for d in read_file(p) if isinstance(d, TextDoc)]
    assert "::" not in doc.text and "====" not in doc.text
    v = build_text_view(doc.path, doc.lang, doc.text, tok)
    check_view(v)
    assert len(v.paragraphs) > 10 and len(v.sentences) > len(v.paragraphs)


def _man_pages(n: int) -> list[str]:
    if shutil.which("man") is None:
        pytest.skip("no 'man' executable")
    pages = sorted(glob.glob("/usr/share/man/man1/*.1.gz"))
    if not pages:
        pytest.skip("no man pages under /usr/share/man/man1")
    prefer = [p for p in pages if os.path.basename(p).split(".")[0] in {"ls", "cp", "mv", "rm", "cat"}]
    return (prefer + pages)[:n]


def test_man_pages(tok):
    docs = [d for p in _man_pages(4) for d in read_file(p) if isinstance(d, TextDoc)]
    assert docs
    for d in docs:
        assert "\x08" not in d.text and "\x1b" not in d.text
        v = build_text_view(d.path, d.lang, d.text, tok)
        check_view(v)
        assert len(v.paragraphs) >= 3


def test_nodejs_docs(tok):
    files = sorted(glob.glob("/usr/share/doc/nodejs/api/*.md"))
    if not files:
        pytest.skip("no Node.js API docs under /usr/share/doc/nodejs/api")
    docs = [d for f in files[:3] for d in read_file(f) if isinstance(d, TextDoc)]
    for d in docs:
        assert "```" not in d.text and "<!--" not in d.text
        check_view(build_text_view(d.path, d.lang, d.text, tok))


@needs_jieba
def test_arrow_round_trip(tok):
    views = [build_text_view(f"{n}.__doc__", "text", d, tok) for n, d in docstrings()[:4]]
    views.append(build_text_view("zh", "zh", ZH, tok))
    views.append(build_text_view("empty", "text", "", tok))
    table = views_to_table(views)
    assert table.schema == TEXT_ARROW_SCHEMA
    sink = io.BytesIO()  # through the IPC format, as prepare writes shards
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    back = table_to_views(pa.ipc.open_stream(sink.getvalue()).read_all())
    assert back == views
    assert all(b.sentences.shape[1:] == (2,) and b.words.dtype == np.int32 for b in back)
    assert views[0] != views[1]


@needs_jieba
def test_pair_view_round_trip(tok):
    p = build_pair_view("cat.po#3", "text", "Print version information and exit.", "zh", "打印版本信息并退出。", tok)
    assert (p.src_lang, p.tgt_lang) == ("text", "zh") and p.src.path == p.tgt.path == "cat.po#3"
    check_view(p.src)
    check_view(p.tgt)
    table = pairs_to_table([p, p])
    assert table.schema == PAIR_ARROW_SCHEMA and "src_words" in table.column_names
    back = table_to_pairs(table)
    assert back == [p, p] and isinstance(back[0], PairView)


def test_bad_lang_rejected(tok):
    with pytest.raises(ValueError, match="lang='English'"):
        build_text_view("x", "English", "Hello.", tok)


def test_word_spans_rejects_non_contiguous():
    assert word_spans(np.array([0, 0, -1, 1, 2, 2], dtype=np.int32)).tolist() == [[0, 2], [3, 4], [4, 6]]
    with pytest.raises(ValueError, match="contiguous"):
        word_spans(np.array([0, 1, 0]))
    with pytest.raises(ValueError, match="contiguous"):
        word_spans(np.array([0, -1, 0]))


def test_validate_names_the_rule(tok):
    v = build_text_view("v", "text", "One sentence. Two sentences.", tok).validate()
    import dataclasses

    bad = dataclasses.replace(v, sentences=v.sentences[:1])
    with pytest.raises(ValueError, match="sentences must be non-empty token ranges tiling"):
        bad.validate()
    bad = dataclasses.replace(v, words=np.full(len(v), -1, dtype=np.int32))
    with pytest.raises(ValueError, match="non-space text has word -1"):
        bad.validate()
    bad = dataclasses.replace(v, words=v.words.astype(np.int64))
    with pytest.raises(ValueError, match="words has dtype int64"):
        bad.validate()


@pytest.mark.parametrize("code,want", [("en_US.UTF-8", "text"), ("C", "text"), ("zh_TW", "zh"), ("zh-Hans", "zh"),
                                       ("de_DE@euro", "de"), ("pt_BR", "pt"), ("text", "text"), ("fil", "fil")])
def test_normalise_lang(code, want):
    assert segment.normalise_lang(code) == want


def test_normalise_lang_rejects():
    with pytest.raises(ValueError, match="'123'"):
        segment.normalise_lang("123")


def test_guess_lang():
    assert segment.guess_lang(ZH) == "zh"
    assert segment.guess_lang(docstrings()[0][1]) == "text"
    assert segment.guess_lang("これは日本語の文です。") == "ja"


@needs_jieba
def test_char_level_breaks():
    t = "First para. Still first!\n  \n\nSecond 中文。第二句？End"
    para = segment.paragraph_breaks(t)
    assert para.tolist() == [t.index("!") + 1]
    sent = segment.sentence_breaks(t)
    assert [t[a:b] for a, b in zip([0, *sent.tolist()], [*sent.tolist(), len(t)])] == [
        "First para.", " Still first!", "\n  \n\nSecond 中文。", "第二句？", "End"]
    words = segment.segment_words(t)  # never crossing a break, whitespace in none
    covered = np.zeros(len(t), dtype=int)
    for a, b in words.tolist():
        covered[a:b] += 1
        assert not any(a < x < b for x in sent.tolist())
    assert all((covered[i] == 1) == (not c.isspace()) for i, c in enumerate(t))
