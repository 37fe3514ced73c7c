"""``translate``: TLM over user-supplied parallel code (jsonl) and doc <-> code pairs."""

from __future__ import annotations

import json

import numpy as np
import pytest

from codept.data.example import IGNORE
from codept.objectives import build
from codept.objectives.render import Vocab
from codept.objectives.translate import doc_code_pairs, pairs_table, read_code_pairs
from codept.structure.view import build_view

PY = "def add(a, b):\n    return a + b\n"
JAVA = "int add(int a, int b) {\n    return a + b;\n}\n"


def test_code_pairs_from_jsonl_train_tlm(tmp_path, small_tok):
    path = tmp_path / "pairs.jsonl"
    path.write_text(json.dumps({"lang_a": "python", "code_a": PY, "lang_b": "java", "code_b": JAVA}) + "\n\n")
    pairs = read_code_pairs(path, small_tok)
    assert len(pairs) == 1 and pairs[0].src.lang == "python" and pairs[0].tgt.lang == "java"
    vocab = Vocab.from_tokenizer(small_tok)
    ex = build("translate", vocab, src_rate=0.5, tgt_rate=0.5)(pairs[0], np.random.default_rng(0))
    langs = set(ex.langs.tolist())
    assert langs == {2, 3}  # python = 2, java = 3 in the table text,python,java,...
    assert (ex.labels["mlm"] != IGNORE).sum() > 0
    assert ex.parts is None  # one attention segment: each side sees the other
    table = pairs_table(pairs)
    assert table.num_rows == 1


@pytest.mark.parametrize("line, rule", [
    ("not json", r"pairs.jsonl:1: not JSON"),
    (json.dumps({"lang_a": "python", "code_a": PY}), r"pairs.jsonl:1: expected an object with string fields"),
    (json.dumps({"lang_a": "cobol", "code_a": PY, "lang_b": "java", "code_b": JAVA}),
     r"pairs.jsonl:1: lang_a='cobol' is not in the language table"),
])
def test_bad_jsonl_names_the_line_and_rule(tmp_path, small_tok, line, rule):
    path = tmp_path / "pairs.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(ValueError, match=rule):
        read_code_pairs(path, small_tok)


def test_doc_code_pairs_from_views(small_tok):
    src = 'def add(a, b):\n    """Add two numbers."""\n    return a + b\n\n\ndef sub(a, b):\n    """Subtract b."""\n    return a - b\n'
    pairs = doc_code_pairs([build_view("t.py", "python", src, small_tok)], small_tok)
    docs = sorted(small_tok.decode(p.src.input_ids.tolist()) for p in pairs)
    assert docs == ["Add two numbers.", "Subtract b."]
    assert all(p.src.lang == "text" and p.tgt.lang == "python" for p in pairs)
    assert all("return" in small_tok.decode(p.tgt.input_ids.tolist()) for p in pairs)
    ex = build("translate", Vocab.from_tokenizer(small_tok))(pairs[0], np.random.default_rng(1))
    assert set(ex.langs.tolist()) == {1, 2}
