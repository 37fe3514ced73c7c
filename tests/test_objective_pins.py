"""Outputs pinned before the speed work on glm, nsp, sop, ident_mask, code_doc pairs=1 and the stream.

Each objective's Examples for given rngs, and the packed rows of a stream (which draws every rng),
are hashed field by field (dtypes and shapes included) and compared with the digests the code
produced before that work. Inputs are generated here (English-like text, Python files) and
tokenized with the byte-level tokenizer, so the ids and the digests do not depend on the machine or
the interpreter's version. A change that alters an output on purpose updates its digest in the same
commit and says why.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import numpy as np
import pytest

from codept.data.stream import Context, Mixture, PackedStream, Source, example_rng
from codept.data.views import open_views, view_source
from codept.objectives import build
from codept.objectives.render import Vocab
from codept.structure.view import build_view, views_to_table
from codept.text.build import build_text_view
from codept.text.view import views_to_table as text_table

sys.path.insert(0, str(Path(__file__).parent))
from test_code_doc import _digest, _golden_source  # noqa: E402

WORDS = ("the of a value buffer token parse tree reads returns when each node list which field "
         "input output first last line file name stream error state model data row is not and").split()


def _text(seed: int, sentences: int) -> str:
    """English-like paragraphs: sentences of 3-24 words, paragraphs of 1-6 sentences."""
    rng = np.random.default_rng(seed)
    out, para = [], []
    for _ in range(sentences):
        s = " ".join(WORDS[i] for i in rng.integers(0, len(WORDS), size=int(rng.integers(3, 25))))
        para.append(s.capitalize() + rng.choice([".", ".", ".", "?", "!"]))
        if rng.random() < 0.25:
            out.append(" ".join(para))
            para = []
    return "\n\n".join(out + [" ".join(para)]).strip()


def _python(seed: int, n_defs: int) -> str:
    """A Python file of functions and a class: parameters, locals, nested scopes, builtins, globals."""
    rng = np.random.default_rng(seed)
    names = [f"{w}_{j}" for j, w in enumerate(WORDS)]
    out = ["import os\nLIMIT = 10\n\n"]
    for i in range(n_defs):
        args = [names[int(k)] for k in rng.choice(len(names), size=int(rng.integers(0, 4)), replace=False)]
        body = [f"    total = {len(args)}\n"]
        for j in range(int(rng.integers(1, 8))):
            v = names[int(rng.integers(len(names)))]
            src = args[j % len(args)] if args else "LIMIT"
            body.append(f"    {v} = len(str({src})) + total\n    total += {v}\n")
        if i % 3 == 0:
            body.append("    def inner(k):\n        return k + total\n    total = inner(total)\n")
        doc = f'    """{_text(seed * 100 + i, 1)}"""\n' if i % 2 == 0 else ""
        out.append(f"def fn_{i}({', '.join(args)}):\n{doc}{''.join(body)}    return total\n\n")
    out.append("class Box:\n    def put(self, item):\n        self.item = item\n        return os.path.join(item)\n")
    return "".join(out)


@pytest.fixture(scope="module")
def text_views(byte_tok):
    return [build_text_view(f"gen{i}.txt", "text", _text(i, 8 + 9 * i), byte_tok) for i in range(8)]


@pytest.fixture(scope="module")
def code_views(byte_tok):
    views = [build_view("golden.py", "python", _golden_source(), byte_tok)]
    return views + [build_view(f"gen{i}.py", "python", _python(i, 4 + 3 * i), byte_tok) for i in range(5)]


def _outputs(obj, views, seeds=range(4)) -> list:
    src = Source("pins", len(views), lambda i, rng, ctx: None, get=views.__getitem__, context=True)
    out = []
    for i, v in enumerate(views):
        for s in seeds:
            got = obj(v, np.random.default_rng([i, s]), Context(src, i, s, 0.0))
            out += got if isinstance(got, list) else [got]
    return out


PINS = {  # name -> (objective, settings, corpus, digest before the speed work)
    "glm": ("glm", {}, "text", "e76681ddcec00ee1"),
    "glm_512": ("glm", {"max_tokens": 512, "rate": 0.3}, "text", "33900a8c8a4bfc81"),
    "glm_code": ("glm", {"max_tokens": 128}, "code", "c4d10738565a47b8"),
    "nsp": ("nsp", {}, "text", "05f45873588fe5db"),
    "nsp_same": ("nsp", {"negatives": "same_document", "max_tokens": 128}, "text", "f1df996647ef9e09"),
    "nsp_no_mlm": ("nsp", {"mlm_rate": 0.0, "short_seq_prob": 0.5}, "text", "6dc60627c1bccdb6"),
    "sop": ("sop", {}, "text", "934d8b9871eb08f2"),
    "sop_256": ("sop", {"max_tokens": 256, "p_swap": 0.3}, "text", "47d950b53d93c5ab"),
    "ident_mask": ("ident_mask", {}, "code", "e6d921c70496dc39"),
    "ident_mask_128": ("ident_mask", {"length": 128, "target_room": 32, "rate": 0.6}, "code", "6b15d1e814a6aa03"),
    "ident_mask_1": ("ident_mask", {"length": 160, "windows": 1}, "code", "73b361d7cb1e9326"),
    "code_doc_1": ("code_doc", {"pairs": 1}, "code", "a934d9d0114c929e"),
}


@pytest.mark.parametrize("name", sorted(PINS))
def test_objective_outputs_are_pinned(byte_tok, text_views, code_views, name):
    obj_name, kw, corpus, want = PINS[name]
    out = _outputs(build(obj_name, Vocab.from_tokenizer(byte_tok), **kw), text_views if corpus == "text" else code_views)
    assert sum(e is not None for e in out) >= 10
    assert _digest(out) == want, name


def _rows_digest(rows) -> str:
    h = hashlib.sha256()
    for r in rows:
        for k in sorted(r):
            a = np.asarray(r[k])
            h.update(f"{k}:{a.dtype.str}:{a.shape};".encode())
            h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:16]


def test_stream_rows_are_pinned(byte_tok, text_views, code_views):
    """Rows of a 3-source mixture (prepared-view tables, Context partners, several examples per
    read) over 3 buffers: every rng the stream draws and every packed column is in the digest."""
    vocab = Vocab.from_tokenizer(byte_tok)
    code, text = open_views(views_to_table(code_views)), open_views(text_table(text_views))
    sources = [view_source(code, build("code_doc", vocab, max_tokens=128), "cd", salt=1),
               view_source(text, build("nsp", vocab), "nsp", salt=2),
               view_source(code, build("glm", vocab, max_tokens=128), "glm", salt=3)]
    stream = PackedStream(Mixture(sources, [1.0, 2.0, 1.0], seed=5), seq_len=128, pad_id=vocab.pad_id, buffer=8)
    rows = [next(stream) for _ in range(80)]
    assert stream.k >= 2
    assert _rows_digest(rows) == "ffd89646150d5363"


def test_example_rng_is_numpys():
    """The stream's per-example generator is numpy's default_rng([seed, epoch, index, salt])."""
    for seed, epoch, index, salt in [(0, 0, 0, 0), (5, 3, 1234, 7), (2**32 - 1, 2**32, 2**40 + 3, 1)]:
        a, b = example_rng(seed, epoch, index, salt), np.random.default_rng([seed, epoch, index, salt])
        assert a.bit_generator.state == b.bit_generator.state
