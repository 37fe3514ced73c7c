"""Issue 29.1: a text reader reads its input and nothing else. Each surface that can name another file
(man ``.so``/``.mso``/``.nx``/``.cf``/... and their indirect spellings, mdoc ``.Bd -file``, groff
``.sy``/``.pso``; reST ``include``/``raw``/``csv-table :file:``/``literalinclude``; MyST include fences
and HTML server-side includes in Markdown; a .po whose text is a path) gets a planted file outside
the corpus whose content must not appear in any document, and the include is recorded as a skip."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import datasets
import pytest

from codept.data.sources import stdlib_files
from codept.text.items import Skip, TextDoc
from codept.text.readers import read_file
from codept.text.view import TextView

SECRET = "PLANTED_OUTSIDE_7f3a9c"

needs_groff = pytest.mark.skipif(shutil.which("groff") is None, reason="no 'groff' executable")


@pytest.fixture()
def planted(tmp_path):
    """(corpus folder, the planted file outside it)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "secret.txt"
    secret.write_text(f"{SECRET} line one\n{SECRET} line two\n")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    return corpus, secret


def _read(path: Path) -> tuple[str, list[Skip]]:
    items = list(read_file(path))
    text = "\n".join(i.text for i in items if isinstance(i, TextDoc))
    return text, [i for i in items if isinstance(i, Skip)]


def _page(body: str) -> str:
    return f".TH X 1\n.SH NAME\nx \\- a test page\n.SH DESCRIPTION\nBefore the request.\n{body}\nAfter the request.\n"


MAN_FILE_CASES = {
    "so": ".so {s}",
    "so_relative": ".so ../outside/secret.txt",
    "so_quote_control": "'so {s}",
    "so_spaced": ".   so {s}",
    "mso": ".mso {s}",
    "nx": ".nx {s}",
    "cf": ".cf {s}",
    "trf": ".trf {s}",
    "hpf": ".hpf {s}",
    "do_so": ".do so {s}",
    "control_char": ".cc !\n!so {s}\n!cc .",
    "escape_char": ".ec !\n!.so {s}\n.ec",
    "alias": ".als inc so\n.inc {s}",
    "rename": ".rn so inc\n.inc {s}",
    "string": ".ds zz so\n.\\*(zz {s}",
    "macro": ".de mm\n.so \\\\$1\n..\n.mm {s}",
}


@needs_groff
@pytest.mark.parametrize("case", sorted(MAN_FILE_CASES))
def test_man_page_reads_no_other_file(planted, case):
    corpus, secret = planted
    page = corpus / f"{case}.1"
    page.write_text(_page(MAN_FILE_CASES[case].format(s=secret)))
    text, skips = _read(page)
    assert SECRET not in text
    assert "Before the request." in text and "After the request." in text  # the rest of the page is kept
    assert [s.reason for s in skips] == ["include_refused"], skips


@needs_groff
def test_mdoc_display_file_and_so_link_page(planted):
    corpus, secret = planted
    mdoc = corpus / "md.1"
    mdoc.write_text(f".Dd January 1, 2020\n.Dt MD 1\n.Os\n.Sh NAME\n.Nm md\n.Nd a test page\n.Sh DESCRIPTION\n"
                    f"Before the display.\n.Bd -literal -file {secret}\n.Ed\nAfter the display.\n")
    text, skips = _read(mdoc)
    assert SECRET not in text and "After the display." in text
    assert [s.reason for s in skips] == ["include_refused"]
    link = corpus / "link.1"  # a page that is only a link to another page: recorded, no document
    link.write_text(f".so {secret}\n")
    text, skips = _read(link)
    assert text == "" and {s.reason for s in skips} == {"include_refused", "no_documents"}
    assert str(secret) in next(s.detail for s in skips if s.reason == "include_refused")


@needs_groff
def test_man_page_runs_no_command_and_sees_no_environment(planted, monkeypatch):
    corpus, secret = planted
    proof = corpus.parent / "ran"
    monkeypatch.setenv("CODEPT_TEST_TOKEN", SECRET)
    page = corpus / "cmd.1"
    page.write_text(_page(f".sy touch {proof}\n.pso cat {secret}\n.open f {proof}\n"
                          "Env: \\V[CODEPT_TEST_TOKEN] \\V[HOME]."))
    text, skips = _read(page)
    assert SECRET not in text and not proof.exists()
    assert str(Path.home()) not in text.replace("Env: .", "")
    (s,) = skips
    assert s.reason == "command_refused" and s.count == 3 and ".sy touch" in s.detail


RST_CASES = {
    "include": ".. include:: {s}",
    "include_literal": ".. include:: {s}\n   :literal:",
    "raw_file": ".. raw:: html\n   :file: {s}",
    "csv_table_file": ".. csv-table:: Table\n   :file: {s}",
    "csv_table_url": ".. csv-table:: Table\n   :url: file://{s}",
    "literalinclude": ".. literalinclude:: {s}\n   :lines: 1-2",
}


@pytest.mark.parametrize("case", sorted(RST_CASES))
def test_rst_reads_no_other_file(planted, case):
    corpus, secret = planted
    doc = corpus / f"{case}.rst"
    doc.write_text(f"Title\n=====\n\nBefore the directive.\n\n{RST_CASES[case].format(s=secret)}\n\nAfter the directive.\n")
    text, skips = _read(doc)
    assert SECRET not in text and "After the directive." in text
    (s,) = skips
    assert s.reason == "include_refused", s
    assert str(secret) in s.detail


def test_rst_images_are_not_read(planted):
    corpus, secret = planted
    doc = corpus / "img.rst"
    doc.write_text(f"Before.\n\n.. image:: {secret}\n   :scale: 50\n\n.. figure:: {secret}\n\n   The caption.\n\n"
                   ".. raw:: html\n\n   <b>inline raw</b>\n\nAfter.\n")
    text, skips = _read(doc)
    assert SECRET not in text and "The caption." in text and "inline raw" not in text
    assert [s.reason for s in skips] == ["raw_refused"]


def test_markdown_includes_are_recorded_not_read(planted):
    corpus, secret = planted
    doc = corpus / "inc.md"
    doc.write_text(f"# Title\n\nBefore.\n\n```{{include}} {secret}\n```\n\n```{{literalinclude}} {secret}\n```\n\n"
                   f"<!--#include file=\"{secret}\" -->\n\nAfter <!--#include virtual=\"{secret}\" -->.\n")
    text, skips = _read(doc)
    assert SECRET not in text and "After" in text
    (s,) = skips
    assert s.reason == "include_refused" and s.count == 4 and str(secret) in s.detail


def test_po_whose_text_is_a_path_is_not_opened(planted):
    corpus, secret = planted
    po = corpus / "de.po"
    po.write_text(f"{secret}\n")  # polib opens its argument when it names a file
    items = list(read_file(po))
    assert all(SECRET not in json.dumps(i.__dict__) for i in items)
    assert [i.reason for i in items] == ["no_documents"] or items[0].reason == "bad_catalog", items


@needs_groff
def test_prepare_text_views_hold_nothing_from_outside(planted, tmp_path):
    """End to end: every surface in one corpus; no TextView holds the planted file, and the manifest
    records each include."""
    from codept.text.prepare import TextConfig, prepare_text
    from codept.tokenizer import train_tokenizer

    corpus, secret = planted
    (corpus / "a.1").write_text(_page(f".so {secret}"))
    (corpus / "b.rst").write_text(f"Before.\n\n.. include:: {secret}\n\nAfter.\n")
    (corpus / "c.md").write_text(f"Before.\n\n```{{include}} {secret}\n```\n\nAfter.\n")
    (corpus / "d.txt").symlink_to(secret)
    train_tokenizer(stdlib_files()[:10], tmp_path / "tok", vocab_size=600)
    s = prepare_text([str(corpus)], out=tmp_path / "out", tokenizer_dir=tmp_path / "tok",
                     cfg=TextConfig(workers=1), progress=False)
    rows = datasets.load_from_disk(str(tmp_path / "out" / "text"))
    assert len(rows) == s["documents"] == 3
    assert not any(SECRET in TextView.from_record(r).text for r in rows)
    assert s["dropped_inside_files"].get("include_refused") == 3
    manifest = [json.loads(x) for x in (tmp_path / "out" / "manifest.jsonl").read_text().splitlines()]
    assert [r["reason"] for r in manifest if r["status"] == "skipped"] == ["symlink_outside_input"]
    assert all(r["dropped"] == {"include_refused": 1} for r in manifest if r["status"] == "viewed"), manifest


def test_symlink_out_of_the_corpus_is_not_read(planted, tmp_path):
    """A link inside the corpus to a file outside it is a skip naming the target; a link within the
    corpus, and a link named as a source itself, are read."""
    from codept.text.readers import discover

    corpus, secret = planted
    (corpus / "real.txt").write_text("A real file. It stays.\n")
    (corpus / "leak.txt").symlink_to(secret)
    (corpus / "sub").mkdir()
    (corpus / "sub" / "up.md").symlink_to(tmp_path / "outside" / "secret.txt")
    (corpus / "inside.txt").symlink_to(corpus / "real.txt")
    files, skips = discover([str(corpus)])
    assert [os.path.basename(f) for f, _ in files] == ["inside.txt", "real.txt"]
    assert [(os.path.basename(s.path), s.reason) for s in skips] == [
        ("leak.txt", "symlink_outside_input"), ("up.md", "symlink_outside_input")]
    assert str(secret) in skips[0].detail
    files, skips = discover([str(corpus / "leak.txt")])  # named by the user: read
    assert len(files) == 1 and not skips
