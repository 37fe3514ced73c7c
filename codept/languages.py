"""Languages: the table read from every ``grammars/<lang>/language.toml``, without tree-sitter.

One folder describes a language (grammars/README.md lists every key). This module reads the
settings that the ground floor needs -- names, file extensions, aliases, comment syntax -- so that
``codept.data`` and ``codept.tokenizer`` know the languages without loading a grammar;
``codept.structure.grammar`` (the one tree-sitter module) reads the same :class:`Language` and adds
the compiled grammar and queries.

1. :func:`available_languages`: the folders of ``grammars_dir()`` holding a ``language.toml``
   (a glob; no file is read).
2. :func:`language` reads and checks one ``language.toml``: required keys, ``name`` equal to the
   folder, ``scope_order`` one of two values, extensions starting with a dot, lists of strings;
   a broken file is a ValueError naming the file and the rule.
3. :func:`extension_map` and :func:`alias_map` join every language: an extension, and a lower-case
   name or alias, may belong to one language only (ValueError naming both claimants).
4. :func:`language_for_path` and :func:`canonical_language` answer from those maps.
5. Token-only languages (no grammar): ``grammars/tokens_only.toml`` lists languages by name with
   their extensions, file names (``Makefile``) and aliases; :func:`view_language_for_path` and
   :func:`view_language` answer with a grammar language first, then a token-only one. A dataset
   row's tag that names neither is a token-only language under its normalised name (lower case,
   blanks as ``_``) when that matches ``TAG_RULE`` (The Stack's 600+ tags: ``Jupyter Notebook`` ->
   ``jupyter_notebook``); else None. A name, alias, extension or file name claimed by a grammar and
   by that file is a ValueError naming both. :func:`has_grammar` tells the two kinds apart.

Cost: one TOML read per language, cached per grammars folder for the life of the process (edit a
language.toml and call :func:`clear_cache`, as tests do). Not covered: languages told apart by
content rather than extension (``.h`` is C here, whatever the file holds), shebang detection,
guessing a token-only language from content.
"""

from __future__ import annotations

import functools
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

REQUIRED_KEYS = ("module", "extensions", "line_comment", "scope_order")
SCOPE_ORDERS = ("hoisted", "sequential")
TOKENS_ONLY_FILE = "tokens_only.toml"  # in grammars_dir(): the languages viewed without a grammar
TAG_RULE = re.compile(r"[a-z0-9][a-z0-9_+#.-]{0,39}")  # a token-only language name (normalised tag)


@dataclass(frozen=True)
class Language:
    """One language's settings from its language.toml (grammars/README.md documents each key)."""

    name: str
    path: Path  # the language.toml
    wheel: str  # PyPI distribution of the grammar, pinned in pyproject.toml
    module: str  # its import name
    function: str  # attribute of `module` returning the language pointer
    argument: str | None  # passed to `function` when set (a package holding many grammars)
    extensions: tuple[str, ...]  # lower case, with the dot
    aliases: tuple[str, ...]  # lower case
    line_comment: tuple[str, ...]
    doc_comment_prefixes: tuple[str, ...]
    doc_skip_kinds: tuple[str, ...]  # node kinds between a doc comment and its definition (attributes)
    scope_order: str
    unsupported_span_kinds: tuple[str, ...]


def grammars_dir() -> Path:
    """``$CODEPT_GRAMMARS``, else codept's ``grammars/`` folder (codept.resources.folder: inside an
    installed wheel, or next to the package in a checkout)."""
    from codept.resources import folder

    env = os.environ.get("CODEPT_GRAMMARS")
    return Path(env) if env else folder("grammars")


def available_languages() -> list[str]:
    """Sorted names of the folders of ``grammars_dir()`` that hold a language.toml."""
    return _available(grammars_dir())


def _available(root: str | Path) -> list[str]:
    return sorted(p.parent.name for p in Path(root).glob("*/language.toml"))


def language(name: str) -> Language:
    """The settings of ``grammars/<name>/``; ValueError naming the file and the broken rule."""
    return _language(str(grammars_dir()), name)


def clear_cache() -> None:
    """Forget every language.toml read (for a process that edits one)."""
    _language.cache_clear()
    _maps.cache_clear()
    _token_maps.cache_clear()


def extension_map() -> dict[str, str]:
    """File extension (with dot, lower case) -> language name, from every language.toml."""
    return _maps(str(grammars_dir()))[0]


def alias_map() -> dict[str, str]:
    """Lower-case name or alias -> language name, from every language.toml."""
    return _maps(str(grammars_dir()))[1]


def language_for_path(path: str | os.PathLike) -> str | None:
    """The language whose extensions include `path`'s suffix (case-insensitive), or None."""
    return extension_map().get(Path(path).suffix.lower())


def canonical_language(name: object) -> str | None:
    """``"Python"``, ``"py"``, ``" golang "`` -> a language of ``grammars/``, or None."""
    if not isinstance(name, str):
        return None
    return alias_map().get(name.strip().lower())


def has_grammar(name: str) -> bool:
    """True when ``grammars/<name>/language.toml`` exists: the language gets full structure."""
    return name in _maps(str(grammars_dir()))[2]


def token_languages() -> list[str]:
    """Sorted names of the token-only languages of ``grammars/tokens_only.toml``."""
    return sorted(set(_token_maps(str(grammars_dir()))[2].values()))


def view_language_for_path(path: str | os.PathLike) -> str | None:
    """A grammar language by extension, else a token-only one by file name or extension, else None."""
    lang = language_for_path(path)
    if lang is not None:
        return lang
    exts, files, _ = _token_maps(str(grammars_dir()))
    p = Path(path)
    return files.get(p.name) or exts.get(p.suffix.lower())


def view_language(tag: object) -> str | None:
    """A row's language tag -> a grammar language (names, aliases), else a token-only language of
    tokens_only.toml (names, aliases), else the normalised tag when it matches TAG_RULE, else None."""
    if not isinstance(tag, str):
        return None
    lang = canonical_language(tag)
    if lang is not None:
        return lang
    key = tag.strip().lower()
    named = _token_maps(str(grammars_dir()))[2].get(key)
    if named:
        return named
    norm = re.sub(r"\s+", "_", key)
    return norm if TAG_RULE.fullmatch(norm) else None


def _strings(cfg: dict, key: str, where: Path, default=()) -> tuple[str, ...]:
    v = cfg.get(key, default)
    v = [v] if isinstance(v, str) else v
    if not isinstance(v, (list, tuple)) or not all(isinstance(x, str) and x for x in v):
        raise ValueError(f"{where}: {key}={cfg.get(key)!r} must be a non-empty string or a list of them")
    return tuple(v)


@functools.lru_cache(maxsize=None)
def _language(root: str, name: str) -> Language:
    path = Path(root) / name / "language.toml"
    if not path.is_file():
        raise ValueError(f"no language {name!r}: {path} missing; available: {_available(root)}")
    try:
        with open(path, "rb") as f:
            cfg = tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"{path}: not valid TOML: {e}") from e
    missing = [k for k in REQUIRED_KEYS if k not in cfg]
    if missing:
        raise ValueError(f"{path}: missing keys {missing}")
    if cfg.get("name", name) != name:
        raise ValueError(f"{path}: name={cfg['name']!r} differs from its folder {name!r}")
    if cfg["scope_order"] not in SCOPE_ORDERS:
        raise ValueError(f"{path}: scope_order={cfg['scope_order']!r}, expected hoisted or sequential")
    exts = tuple(e.lower() for e in _strings(cfg, "extensions", path))
    bad = [e for e in exts if not e.startswith(".")]
    if bad:
        raise ValueError(f"{path}: extensions {bad} must start with a dot")
    arg = cfg.get("argument")
    if arg is not None and not isinstance(arg, str):
        raise ValueError(f"{path}: argument={arg!r} must be a string")
    return Language(
        name=name,
        path=path,
        wheel=cfg.get("wheel", cfg["module"].replace("_", "-")),
        module=cfg["module"],
        function=cfg.get("function", "language"),
        argument=arg,
        extensions=exts,
        aliases=tuple(a.lower() for a in _strings(cfg, "aliases", path)),
        line_comment=_strings(cfg, "line_comment", path),
        doc_comment_prefixes=_strings(cfg, "doc_comment_prefixes", path),
        doc_skip_kinds=_strings(cfg, "doc_skip_kinds", path),
        scope_order=cfg["scope_order"],
        unsupported_span_kinds=_strings(cfg, "unsupported_span_kinds", path),
    )


@functools.lru_cache(maxsize=None)
def _maps(root: str) -> tuple[dict[str, str], dict[str, str], frozenset]:
    exts: dict[str, str] = {}
    names: dict[str, str] = {}
    available = _available(root)
    for name in available:
        lang = _language(root, name)
        for e in lang.extensions:
            if exts.setdefault(e, name) != name:
                raise ValueError(f"extension {e} claimed by both {exts[e]} and {name}")
        for a in (name, *lang.aliases):
            if names.setdefault(a, name) != name:
                raise ValueError(f"name or alias {a!r} claimed by both {names[a]} and {name}")
    return exts, names, frozenset(available)


@functools.lru_cache(maxsize=None)
def _token_maps(root: str) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """(extension -> language, file name -> language, lower-case name or alias -> language) of
    tokens_only.toml; {} for each without the file. Checked against the grammars' own maps."""
    path = Path(root) / TOKENS_ONLY_FILE
    if not path.is_file():
        return {}, {}, {}
    try:
        with open(path, "rb") as f:
            cfg = tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"{path}: not valid TOML: {e}") from e
    g_exts, g_names, _ = _maps(root)
    exts: dict[str, str] = {}
    files: dict[str, str] = {}
    names: dict[str, str] = {}
    for name, table in cfg.items():
        if not (isinstance(table, dict) and TAG_RULE.fullmatch(name)):
            raise ValueError(f"{path}: [{name}] must be a table named by the rule {TAG_RULE.pattern}")
        unknown = sorted(set(table) - {"extensions", "filenames", "aliases"})
        if unknown:
            raise ValueError(f"{path}: [{name}] has unknown keys {unknown} (extensions, filenames, aliases)")
        where = f"{path} [{name}]"
        for kind, keys, own, theirs in (
                ("extension", tuple(e.lower() for e in _strings(table, "extensions", where)), exts, g_exts),
                ("file name", _strings(table, "filenames", where), files, {}),
                ("name or alias", (name, *(a.lower() for a in _strings(table, "aliases", where))), names, g_names)):
            for k in keys:
                if kind == "extension" and not k.startswith("."):
                    raise ValueError(f"{where}: extension {k!r} must start with a dot")
                other = theirs.get(k) or (own[k] if own.get(k, name) != name else None)
                if other:
                    raise ValueError(f"{kind} {k!r} claimed by both {other} and {name} ({path})")
                own[k] = name
    return exts, files, names
