"""Byte-level BPE tokenizers for code and text, with every special token the objectives need.

1. Special tokens come first, so they own ids ``[0, n_special)``: objectives never select an id below
   ``n_special`` (see :func:`n_special`). The set is fixed here, not per run: pad, unk, cls, sep, mask,
   bos, eos, GLM's sop/eop, 100 T5-style sentinels, one ``<lang_X>`` tag per language in
   ``grammars/`` plus ``text`` and ``zh``, and 32 reserved tokens for objectives still to come.
2. Training (``tokenizers`` BpeTrainer over a ByteLevel pre-tokenizer, no prefix space) reads files in
   sorted order; the same files and settings give a byte-identical ``tokenizer.json``.
3. The output folder loads with ``transformers.PreTrainedTokenizerFast.from_pretrained`` /
   ``AutoTokenizer`` (``tokenizer_config.json`` names the special tokens).

Offsets: the post-processor keeps untrimmed offsets so a file's token offsets tile its text exactly
(the space before a word belongs to the word's token); codept.structure.offsets relies on that.
Cost: ~7 s for a 32k vocabulary on 12 MB (one core). Not covered: SentencePiece/unigram models,
Chinese-specific pre-tokenization (later issue: whole-word masking takes word boundaries from jieba).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterable, Iterator

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

BASE_SPECIALS = ["<pad>", "<unk>", "<cls>", "<sep>", "<mask>", "<bos>", "<eos>", "<sop>", "<eop>"]
N_SENTINELS = 100
N_RESERVED = 32
EXTRA_LANG_TAGS = ["text", "zh"]
DEFAULT_VOCAB_SIZE = 16384
TEXT_EXTENSIONS = (".txt", ".md", ".rst")
MAX_TRAIN_FILE_BYTES = 1 << 20


def lang_tag(lang: str) -> str:
    return f"<lang_{lang}>"


def sentinel(i: int) -> str:
    return f"<sentinel_{i}>"


def special_tokens(languages: Iterable[str] | None = None) -> list[str]:
    """All special tokens, in id order."""
    if languages is None:
        from codept.languages import available_languages

        languages = available_languages()
    langs = sorted(set(languages)) + EXTRA_LANG_TAGS
    return (
        BASE_SPECIALS
        + [sentinel(i) for i in range(N_SENTINELS)]
        + [lang_tag(x) for x in langs]
        + [f"<reserved_{i}>" for i in range(N_RESERVED)]
    )


def n_special(tok: Tokenizer) -> int:
    """Number of leading special ids; every id below it is special."""
    return sum(1 for t in tok.get_added_tokens_decoder().values() if t.special)


def framing(tok: Tokenizer) -> tuple[list[int], list[int]]:
    """(ids before, ids after) the tokenizer's post-processor puts around one text, found by encoding
    one word with and without special tokens: ([CLS], [SEP]) for BERT's WordPiece (all-MiniLM-L6-v2),
    (<s>, </s>) for RoBERTa's BPE, ([], []) for codept's own BPE (a ByteLevel post-processor)."""
    bare = tok.encode("x", add_special_tokens=False).ids
    full = tok.encode("x", add_special_tokens=True).ids
    for i in range(len(full) - len(bare) + 1):
        if full[i:i + len(bare)] == bare:
            return full[:i], full[i + len(bare):]
    return [], []


def _new_tokenizer() -> Tokenizer:
    tok = Tokenizer(models.BPE(unk_token=None, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok


def iter_training_files(sources: Iterable[str | os.PathLike]) -> list[Path]:
    """Files under `sources` with a known code or text extension, sorted, each at most 1 MiB."""
    from codept.languages import extension_map

    exts = set(extension_map()) | set(TEXT_EXTENSIONS)
    out: set[Path] = set()
    for src in sources:
        p = Path(src)
        if p.is_file():
            out.add(p)
        elif p.is_dir():
            out.update(f for f in p.rglob("*") if f.suffix.lower() in exts and f.is_file())
        else:
            raise FileNotFoundError(f"tokenizer source {src!r} is neither a file nor a directory")
    return sorted(f for f in out if f.stat().st_size <= MAX_TRAIN_FILE_BYTES)


def _read_texts(files: list[Path], stats: dict) -> Iterator[str]:
    for f in files:
        try:
            yield f.read_bytes().decode("utf-8").removeprefix("\ufeff")  # a BOM is no text
            stats["files"] += 1
        except (OSError, UnicodeDecodeError) as e:
            stats["skipped"].append((str(f), type(e).__name__))


def train_tokenizer(files: list[Path], out_dir: str | os.PathLike, vocab_size: int = DEFAULT_VOCAB_SIZE,
                    min_frequency: int = 2) -> dict:
    """Train on `files` (in the given order) and save to `out_dir`; returns a summary dict."""
    specials = special_tokens()
    if vocab_size <= len(specials) + 256:
        raise ValueError(f"vocab_size={vocab_size} must exceed {len(specials)} specials + 256 bytes")
    tok = _new_tokenizer()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    stats: dict = {"files": 0, "skipped": []}
    tok.train_from_iterator(_read_texts(files, stats), trainer=trainer)
    if stats["files"] == 0:
        raise ValueError("no readable UTF-8 training files")
    summary = {
        "vocab_size": tok.get_vocab_size(),
        "n_special": len(specials),
        "files": stats["files"],
        "skipped": stats["skipped"],
    }
    save_tokenizer(tok, out_dir, summary)
    return summary


def save_tokenizer(tok: Tokenizer, out_dir: str | os.PathLike, meta: dict) -> None:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": 1 << 20,
        "pad_token": "<pad>",
        "unk_token": "<unk>",
        "cls_token": "<cls>",
        "sep_token": "<sep>",
        "mask_token": "<mask>",
        "bos_token": "<bos>",
        "eos_token": "<eos>",
        "clean_up_tokenization_spaces": False,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
    (out / "codept_tokenizer.json").write_text(json.dumps(meta, indent=2) + "\n")


def load_tokenizer(path: str | os.PathLike) -> Tokenizer:
    p = Path(path)
    f = p / "tokenizer.json" if p.is_dir() else p
    if not f.is_file():
        raise FileNotFoundError(f"no tokenizer.json at {path}")
    tok = Tokenizer.from_file(str(f))
    tok.encode_special_tokens = True  # "<mask>" written in source code is text, not a special id
    tok.no_truncation()  # a model's tokenizer.json may truncate/pad (MiniLM: 128); views need every token
    tok.no_padding()
    return tok


def tokenizer_fingerprint(tok: Tokenizer) -> str:
    return hashlib.sha256(tok.to_str().encode()).hexdigest()


def cache_dir() -> Path:
    return Path(os.environ.get("CODEPT_CACHE", Path.home() / ".cache" / "codept"))


def default_tokenizer_dir(vocab_size: int = DEFAULT_VOCAB_SIZE) -> Path:
    """A BPE trained on the running interpreter's standard library, built once and cached.

    Safe under concurrent callers (several ranks): each trains into a temp folder and renames it.
    """
    from codept.data.sources import stdlib_files

    files = stdlib_files()
    code = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()  # the training code: never stale
    key = hashlib.sha256(
        json.dumps([vocab_size, special_tokens(), [str(f) for f in files], code]).encode()
    ).hexdigest()[:16]
    return cached_tokenizer(cache_dir() / "tokenizers" / f"stdlib-{vocab_size}-{key}", files, vocab_size)


def cached_tokenizer(out: Path, files: list[Path], vocab_size: int) -> Path:
    """``out`` holding a BPE trained on `files` (the caller's key names the folder): trained once, into
    a temp folder renamed into place, so concurrent callers (several ranks) are safe."""
    if (out / "tokenizer.json").is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=".tmp-"))
    try:
        train_tokenizer(files, tmp, vocab_size=vocab_size)
        try:
            os.rename(tmp, out)
        except OSError:  # another process won the race; its result is identical
            pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out
