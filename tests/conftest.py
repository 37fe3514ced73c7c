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
    golden outputs are literal arrays (ASCII: token index == character index). Its language tags
    are the first six languages' (not every grammar's), so adding a language moves no golden id."""
    tok = ctok._new_tokenizer()
    specials = ctok.special_tokens(["go", "java", "javascript", "php", "python", "ruby"])
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


def require_sandbox() -> None:
    """Skip the calling test, with the sandbox's own reason, when the OS sandbox of codept.exec does
    not work here; with CODEPT_REQUIRE_SANDBOX=1 (.ci/run sets it) FAIL instead: there a skip would
    hide the whole execution feature (it once did, in every virtualenv, behind 54 skips)."""
    from codept.exec import sandbox

    try:
        sandbox.check_sandbox()
    except sandbox.SandboxUnavailable as e:
        if os.environ.get("CODEPT_REQUIRE_SANDBOX") == "1":
            pytest.fail(f"CODEPT_REQUIRE_SANDBOX=1 but no OS sandbox here: {e}", pytrace=False)
        pytest.skip(f"no OS sandbox here: {e}")


@pytest.fixture(scope="session")
def bwrap():
    """The OS sandbox works here (else skipped, or failed in CI: :func:`require_sandbox`)."""
    require_sandbox()
