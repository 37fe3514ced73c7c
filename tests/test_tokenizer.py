"""The BPE tokenizer: deterministic, special tokens first, loadable by transformers."""

from __future__ import annotations

import subprocess
import sys

from codept import tokenizer as ctok
from codept.data.sources import stdlib_files

CODE = "def f(x):\n    return x  # <mask> stays text\n"


def test_training_is_deterministic_and_specials_come_first(tmp_path):
    files = stdlib_files()[:25]
    a, b = tmp_path / "a", tmp_path / "b"
    ctok.train_tokenizer(files, a, vocab_size=1500)
    ctok.train_tokenizer(files, b, vocab_size=1500)
    assert (a / "tokenizer.json").read_bytes() == (b / "tokenizer.json").read_bytes()
    tok = ctok.load_tokenizer(a)
    specials = ctok.special_tokens()
    assert ctok.n_special(tok) == len(specials)
    for i, s in enumerate(specials):
        assert tok.token_to_id(s) == i
    for lang in ("python", "java", "javascript", "go", "ruby", "php", "text"):
        assert tok.token_to_id(ctok.lang_tag(lang)) is not None
    assert tok.token_to_id(ctok.sentinel(99)) is not None
    assert min(tok.encode(CODE, add_special_tokens=False).ids) >= len(specials)
    assert tok.decode(tok.encode(CODE, add_special_tokens=False).ids) == CODE


def test_transformers_loads_it(tmp_path):
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    ctok.train_tokenizer(stdlib_files()[:25], tmp_path, vocab_size=1500)
    ours = ctok.load_tokenizer(tmp_path)
    for cls in (PreTrainedTokenizerFast, AutoTokenizer):
        hf = cls.from_pretrained(str(tmp_path))
        assert hf.mask_token == "<mask>" and hf.pad_token_id == 0
        assert hf.convert_tokens_to_ids("<mask>") == ours.token_to_id("<mask>")
        text = "x = foo(bar) + 1\n"
        assert hf(text, add_special_tokens=False)["input_ids"] == ours.encode(text, add_special_tokens=False).ids


def test_cli_train(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for i, f in enumerate(stdlib_files()[:10]):
        (src / f"m{i}.py").write_bytes(f.read_bytes())
    (src / "notes.md").write_text("# Notes\nSome *text* here.\n")
    r = subprocess.run([sys.executable, "-m", "codept.cli", "tokenizer", "train", str(src), "--out",
                        str(tmp_path / "tok"), "--vocab-size", "800"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "11 files" in r.stdout
    assert ctok.load_tokenizer(tmp_path / "tok").get_vocab_size() == 800
