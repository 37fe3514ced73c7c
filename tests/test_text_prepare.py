"""`codept prepare-text` on real text that every machine has: stdlib reST docs and module docstrings."""

from __future__ import annotations

import json
import sysconfig
from pathlib import Path

import datasets

from codept.data.sources import stdlib_files
from codept.text.prepare import TextConfig, prepare_text
from codept.text.view import PairView, TextView
from codept.tokenizer import train_tokenizer


def test_prepare_text_documents_pairs_and_manifest(tmp_path):
    train_tokenizer(stdlib_files()[:20], tmp_path / "tok", vocab_size=1200)
    src = tmp_path / "src"
    src.mkdir()
    import json as _json
    import textwrap

    (src / "json.txt").write_text(_json.__doc__ + "\n\nWrite to admin@example-corp.net for help.\n")
    (src / "wrap.md").write_text("# textwrap\n\n" + textwrap.__doc__ + "\n\n```python\nx = 1\n```\n")
    rst = Path(sysconfig.get_paths()["stdlib"]) / "email" / "architecture.rst"
    if rst.is_file():
        (src / "arch.rst").write_text(rst.read_text())
    (src / "pairs.jsonl").write_text("\n".join(json.dumps(r) for r in [
        {"src": "Open the file for reading", "tgt": "Öffne die Datei zum Lesen", "src_lang": "en", "tgt_lang": "de"},
        {"src": "Too short", "tgt": "Zu kurz", "src_lang": "en", "tgt_lang": "de"},
    ]) + "\n")
    (src / "de.po").write_text('msgid ""\nmsgstr ""\n"Language: de\\n"\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
                              'msgid "Save the &current file"\nmsgstr "Die aktuelle Datei &speichern"\n\n'
                              'msgid "Quit"\nmsgstr "Beenden"\n')
    (src / "image.png").write_bytes(b"\x89PNG\r\n")
    s = prepare_text([str(src)], out=tmp_path / "out", tokenizer_dir=tmp_path / "tok",
                     cfg=TextConfig(workers=2), progress=False)
    rows = [json.loads(x) for x in (tmp_path / "out" / "manifest.jsonl").read_text().splitlines()]
    assert len(rows) == s["inputs"] == len(list(src.iterdir()))
    by = {Path(r["path"]).name: r for r in rows}
    assert by["image.png"]["reason"] == "unknown_format"
    assert by["pairs.jsonl"]["pairs"] == 2
    assert by["de.po"]["pairs"] == 1 and by["de.po"]["dropped"] == {"short_source": 1}
    assert s["redacted"].get("email") == 1
    text = datasets.load_from_disk(str(tmp_path / "out" / "text"))
    pairs = datasets.load_from_disk(str(tmp_path / "out" / "pairs"))
    assert len(text) == s["documents"] >= 2 and len(pairs) == 3
    v = TextView.from_record(text[0])
    assert len(v.sentences) > 1 and len(v.paragraphs) >= 1
    p = PairView.from_record(pairs[0])
    assert p.tgt.text == "Die aktuelle Datei speichern"  # accelerator `&` removed
    again = prepare_text([str(src)], out=tmp_path / "out", tokenizer_dir=tmp_path / "tok",
                         cfg=TextConfig(workers=2), progress=False)
    assert again["cached"] and again["cache_key"] == s["cache_key"]


def test_text_path_imports_no_tree_sitter():
    """Layering: reading a .txt and preparing text need no grammar (a subprocess: a clean sys.modules)."""
    import subprocess
    import sys

    code = ("import codept.text.readers, codept.text.prepare, codept.data.jobs, sys; "
            "from codept.text.readers import read_file; "
            "assert 'tree_sitter' not in sys.modules, 'tree_sitter imported'")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_skipfile_has_one_home():
    from codept.data import jobs
    from codept.structure import grammar
    from codept.text import readers

    assert grammar.SkipFile is jobs.SkipFile is readers.SkipFile
