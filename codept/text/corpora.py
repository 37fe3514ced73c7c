"""Text corpora every machine of this project has, written as plain-text folders for prepare-text,
and a BPE tokenizer trained (and cached) on each.

1. :func:`english_docs`: English documentation that every Python interpreter ships: every
   standard-library docstring (module, class, function; read with ``ast``, nothing imported) of at
   least ``min_words`` words as one document, plus the 79 ``pydoc_data.topics`` help topics.
   Slim images have no man pages, so these are the default English text.
2. :func:`catalog_docs`: the translations of the gettext catalogs of one locale
   (``/usr/share/locale/<locale>/LC_MESSAGES/*.mo``) as monolingual documents: one document per
   catalog, one paragraph per message, in catalog order (a Chinese corpus: ``zh_CN``).
3. :func:`catalogs`: the catalog files of some locales (symlinked duplicates dropped), the parallel
   en-xx pairs of prepare-text's ``.mo`` reader.
4. :func:`tokenizer_for`: codept.tokenizer.train_tokenizer on a corpus's files, cached under
   ``cache_dir()/tokenizers/<name>-<vocab>-<key>``; the key covers the vocabulary size, the specials,
   every file's path and content and the tokenizer code (never stale). Concurrent callers each train
   into a temp folder and rename it (the results are identical).
Folders are written once under ``cache_dir()/corpora/<name>-<key>`` (the key: interpreter version,
this module's code, the inputs' paths and sizes) with a ``DONE`` marker, atomically renamed.
Cost: english_docs ~3 s (ast over the stdlib); catalog_docs well under a second per locale;
tokenizer training a few seconds on a few MB. Not covered: corpora that need a download
(codept.data.fetch fetches those), de-duplication across documents.
"""

from __future__ import annotations

import ast
import gettext
import hashlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from codept.tokenizer import cache_dir, special_tokens

LOCALE_DIR = Path("/usr/share/locale")


def module_docstrings(path: Path) -> list[tuple[str, str]]:
    """(name, docstring) of a Python file: ``__module__`` first, then classes and functions in source
    order (qualified names made unique by line number); [] when the file does not parse."""
    try:
        tree = ast.parse(path.read_bytes())
    except (SyntaxError, ValueError, OSError):
        return []
    out = [("__module__", ast.get_docstring(tree) or "")]
    nodes = [n for n in ast.walk(tree) if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]
    nodes.sort(key=lambda n: (n.lineno, n.col_offset))
    out += [(f"{n.name}_L{n.lineno}", ast.get_docstring(n) or "") for n in nodes]
    return [(name, d.strip()) for name, d in out if d and d.strip()]


def _cached_folder(name: str, key_parts: list, write) -> Path:
    code = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()
    key = hashlib.sha256(json.dumps([sys.version, code, key_parts]).encode()).hexdigest()[:16]
    out = cache_dir() / "corpora" / f"{name}-{key}"
    if (out / "DONE").is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=".tmp-"))
    try:
        n = write(tmp)
        (tmp / "DONE").write_text(json.dumps({"documents": n}) + "\n")
        try:
            os.rename(tmp, out)
        except OSError:  # another process won the race; its folder is identical
            pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def english_docs(min_words: int = 40) -> Path:
    """A folder of .txt documents: every stdlib docstring (module, class or function) of at least
    `min_words` words as a document of its own (``modules/<module>.<name>.txt``), and the pydoc_data
    topics (``topics/<name>.txt``). One docstring per document keeps sentence order meaningful:
    docstrings of neighbouring functions follow no order, so concatenating them would make a share
    of SOP pairs unanswerable."""
    from codept.data.sources import stdlib_files

    files = stdlib_files()

    def write(folder: Path) -> int:
        n = 0
        (folder / "modules").mkdir()
        (folder / "topics").mkdir()
        root = Path(os.path.commonpath([str(f) for f in files]))
        for f in files:
            stem = str(f.relative_to(root).with_suffix("")).replace(os.sep, "__")
            for name, doc in module_docstrings(f):
                if len(doc.split()) >= min_words:
                    (folder / "modules" / f"{stem}.{name}.txt").write_text(doc + "\n")
                    n += 1
        from pydoc_data.topics import topics

        for name, text in sorted(topics.items()):
            (folder / "topics" / f"{name}.txt").write_text(text.strip() + "\n")
            n += 1
        return n

    return _cached_folder("english", [min_words, [(str(f), f.stat().st_size) for f in files]], write)


def catalogs(locales: tuple[str, ...] = ("de", "zh_CN")) -> list[Path]:
    """The .mo catalogs of `locales` (sorted; symlinks to another catalog dropped)."""
    out = []
    for loc in locales:
        d = LOCALE_DIR / loc / "LC_MESSAGES"
        out += sorted(p for p in d.glob("*.mo") if not p.is_symlink()) if d.is_dir() else []
    return out


def catalog_docs(locale: str = "zh_CN", min_chars: int = 200, side: str = "msgstr") -> Path:
    """One document per catalog of `locale`: its translated messages (``side="msgid"``: the English
    originals), one paragraph each."""
    if side not in ("msgstr", "msgid"):
        raise ValueError(f"side={side!r}: expected 'msgstr' (translations) or 'msgid' (English originals)")
    files = catalogs((locale,))
    if not files:
        raise FileNotFoundError(f"no gettext catalogs under {LOCALE_DIR / locale / 'LC_MESSAGES'}")

    def write(folder: Path) -> int:
        n = 0
        for f in files:
            try:
                cat = gettext.GNUTranslations(open(f, "rb"))._catalog  # msgid -> msgstr
            except (OSError, ValueError, LookupError, UnicodeDecodeError):
                continue
            msgs = [" ".join((v if side == "msgstr" else (k[0] if isinstance(k, tuple) else k).split("\x04")[-1]).split())
                    for k, v in cat.items() if k and (not isinstance(k, tuple) or k[1] == 0)]
            text = "\n\n".join(m for m in msgs if m)
            if len(text) >= min_chars:
                (folder / f"{f.stem}.txt").write_text(text + "\n")
                n += 1
        return n

    return _cached_folder(f"catalogs-{locale}-{side}", [min_chars, [(str(f), f.stat().st_size) for f in files]], write)


def text_files(folders: list[Path]) -> list[Path]:
    """The .txt files of `folders`, sorted (the tokenizer's training input)."""
    return sorted(p for d in folders for p in Path(d).rglob("*.txt"))


def tokenizer_for(name: str, files: list[Path], vocab_size: int) -> Path:
    """A BPE trained on `files`, cached by their content (module docstring, step 4)."""
    from codept import tokenizer as tok_mod

    h = hashlib.sha256(json.dumps([vocab_size, special_tokens()]).encode())
    h.update(Path(tok_mod.__file__).read_bytes())
    for f in files:
        h.update(str(f).encode() + b"\0" + Path(f).read_bytes())
    return tok_mod.cached_tokenizer(cache_dir() / "tokenizers" / f"{name}-{vocab_size}-{h.hexdigest()[:16]}",
                                    files, vocab_size)
