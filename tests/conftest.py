"""Shared test fixtures: real tokenizers trained in-process on real code (no network)."""

from __future__ import annotations

import os

import pytest
from tokenizers import pre_tokenizers, trainers

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from codept import tokenizer as ctok  # noqa: E402
from codept.data.sources import stdlib_files  # noqa: E402


@pytest.fixture(scope="session")
def byte_tok():
    """Byte-level tokenizer without merges: one token per byte, ids stable across machines, so
    golden outputs are literal arrays (ASCII: token index == character index)."""
    tok = ctok._new_tokenizer()
    specials = ctok.special_tokens()
    trainer = trainers.BpeTrainer(vocab_size=len(specials) + 256, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(["x"], trainer=trainer)
    assert tok.get_vocab_size() == len(specials) + 256
    return tok


@pytest.fixture(scope="session")
def small_tok(tmp_path_factory):
    """A real BPE (vocab 2000) trained on 40 stdlib files."""
    out = tmp_path_factory.mktemp("tok")
    ctok.train_tokenizer(stdlib_files()[:40], out, vocab_size=2000)
    return ctok.load_tokenizer(out)


@pytest.fixture(scope="session")
def default_tok():
    """The default tokenizer of `codept prepare` (trained on the stdlib once, cached)."""
    return ctok.load_tokenizer(ctok.default_tokenizer_dir())
