"""codept.languages: the language table from grammars/*/language.toml, read without tree-sitter."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from codept import languages


def test_every_folder_reads_and_names_itself():
    names = languages.available_languages()
    assert {"go", "java", "javascript", "php", "python", "ruby"} <= set(names)
    for n in names:
        lang = languages.language(n)
        assert lang.name == n and lang.path.parent.name == n
        assert lang.extensions and all(e.startswith(".") and e == e.lower() for e in lang.extensions)
        assert lang.line_comment and lang.scope_order in languages.SCOPE_ORDERS


@pytest.mark.parametrize("name,lang", [
    ("python", "python"), ("Python", "python"), ("PY", "python"), (" py ", "python"), ("python3", "python"),
    ("js", "javascript"), ("node", "javascript"), ("golang", "go"), ("rb", "ruby"), ("PHP8", "php"),
    ("cobol", None), ("", None), (None, None), (3, None),
])
def test_canonical_language_reads_the_aliases_of_each_toml(name, lang):
    assert languages.canonical_language(name) == lang


def test_every_alias_and_extension_belongs_to_its_toml():
    aliases, exts = languages.alias_map(), languages.extension_map()
    for n in languages.available_languages():
        lang = languages.language(n)
        assert all(aliases[a] == n for a in (n, *lang.aliases))
        assert all(exts[e] == n for e in lang.extensions)
    assert languages.language_for_path("a/B.PY") == "python" and languages.language_for_path("Makefile") is None


@pytest.fixture
def two_langs(tmp_path, monkeypatch):
    for n in ("python", "ruby"):
        shutil.copytree(languages.grammars_dir() / n, tmp_path / n)
    monkeypatch.setenv("CODEPT_GRAMMARS", str(tmp_path))
    yield tmp_path
    languages.clear_cache()


def _edit(path, old, new):
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    languages.clear_cache()


def test_a_claimed_alias_or_extension_is_refused_naming_both(two_langs):
    assert languages.available_languages() == ["python", "ruby"]
    _edit(two_langs / "ruby" / "language.toml", 'aliases = ["rb"]', 'aliases = ["rb", "PY"]')
    with pytest.raises(ValueError, match="alias 'py' claimed by both python and ruby"):
        languages.alias_map()
    _edit(two_langs / "ruby" / "language.toml", '".rake"', '".pyi"')
    with pytest.raises(ValueError, match="extension .pyi claimed by both python and ruby"):
        languages.extension_map()


@pytest.mark.parametrize("old,new,match", [
    ('name = "ruby"', 'name = "rubby"', "name='rubby' differs from its folder 'ruby'"),
    ('scope_order = "sequential"', 'scope_order = "lexical"', "scope_order='lexical', expected"),
    ('".rake"', '"rake"', r"extensions \['rake'\] must start with a dot"),
    ('aliases = ["rb"]', "aliases = [1]", "aliases=\\[1\\] must be a non-empty string"),
    ('line_comment = "#"', "", r"missing keys \['line_comment'\]"),
    ('name = "ruby"', 'name = "ruby', "not valid TOML"),
])
def test_a_broken_toml_names_the_file_and_the_rule(two_langs, old, new, match):
    _edit(two_langs / "ruby" / "language.toml", old, new)
    with pytest.raises(ValueError, match=match) as e:
        languages.language("ruby")
    assert "ruby/language.toml" in str(e.value)
    with pytest.raises(ValueError, match="no language 'rust'"):
        languages.language("rust")


def test_the_ground_floor_loads_no_tree_sitter():
    """codept.data.*, codept.tokenizer and codept.languages answer language questions from TOML."""
    code = (
        "import importlib, pkgutil, sys, codept.data\n"
        "for m in pkgutil.iter_modules(codept.data.__path__): importlib.import_module('codept.data.' + m.name)\n"
        "import codept.tokenizer, codept.languages as L\n"
        "from codept.data.records import canonical_language\n"
        "assert canonical_language('golang') == 'go' and L.language_for_path('x.rb') == 'ruby'\n"
        "codept.tokenizer.special_tokens()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'tree_sitter' or m.startswith('codept.structure')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
