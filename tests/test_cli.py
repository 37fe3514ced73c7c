"""The ``codept`` command line as a new user meets it: every option documented, and bad input (missing
paths, folders for files, files for folders, non-run folders, wrong numbers) ends in one clear line
and exit status 2, never a traceback, and never replaces a user's file."""

from __future__ import annotations

import argparse

import pytest
import torch

from codept import tokenizer as ctok
from codept.cli import build_parser, main
from codept.data.sources import stdlib_root


def _actions(parser: argparse.ArgumentParser, path: str):
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sub in a.choices.items():
                yield from _actions(sub, f"{path} {name}")
        elif not isinstance(a, argparse._HelpAction):
            yield path, a


def test_every_option_has_help():
    missing = [f"{path} {a.option_strings or a.dest}" for path, a in _actions(build_parser(), "codept") if not a.help]
    assert not missing, missing


def test_num_shards_help_names_the_content_hash():
    (shards,) = [a for path, a in _actions(build_parser(), "codept") if path == "codept prepare"
                 and "--num-shards" in a.option_strings]
    assert "content hash" in shards.help and "path" not in shards.help


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("tok")
    ctok.train_tokenizer(sorted(stdlib_root().glob("json/*.py")), out, vocab_size=600)
    return out


@pytest.fixture
def files(tmp_path):
    (tmp_path / "folder").mkdir()
    (tmp_path / "notes.txt").write_text("hello\n")
    (tmp_path / "nul.py").write_bytes(b"x = 1\x00\n")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "latest").write_text("step00000004\n")  # names a checkpoint that is not there
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "rank0.pt").write_bytes(b"not a torch file")
    return tmp_path


def _cli(argv: list[str], capsys) -> tuple[int, str]:
    try:
        rc = main([str(a) for a in argv])
    except SystemExit as e:  # argparse's usage errors
        rc = e.code
    return rc, capsys.readouterr().err


BAD = [  # (argv with {d} for the test folder, what the one-line error must say)
    (["view", "{d}/missing.py"], "missing.py: no such file"),
    (["view", "{d}/folder"], "not a file (a folder)"),
    (["view", "{d}/notes.txt"], "no language for this file name; pass --lang"),
    (["view", "{d}/nul.py", "--tokenizer", "{tok}"], "nul.py: binary: NUL byte"),
    (["view", "{d}/notes.txt", "--lang", "klingon"], "--lang 'klingon': no such grammar"),
    (["view", "{d}/nul.py", "--tokenizer", "{d}/folder"], "no tokenizer.json there"),
    (["export", "{d}/missing", "--out", "{d}/hf"], "missing: no such folder; expected a run folder"),
    (["export", "{d}/notes.txt", "--out", "{d}/hf"], "notes.txt: not a folder"),
    (["export", "{d}/folder", "--out", "{d}/hf"], "folder: no `latest` and no rank0.pt"),
    (["export", "{d}/run", "--out", "{d}/hf"], "its `latest` names 'step00000004', which has no rank0.pt"),
    (["export", "{d}/ckpt", "--out", "{d}/hf"], "rank0.pt: not a readable torch checkpoint"),
    (["export", "{d}/ckpt", "--out", "{d}/notes.txt"], "notes.txt: exists and is not a folder"),
    (["prepare", "{d}/missing.py", "--out", "{d}/views"], "nothing to prepare"),
    (["prepare", "{d}/nul.py", "--out", "{d}/notes.txt"], "notes.txt: exists and is not a folder"),
    (["prepare", "{d}/nul.py", "--out", "{d}"], "and no DONE; this output folder is replaced whole"),
    (["prepare-text", "{d}/notes.txt", "--out", "{d}"], "and no DONE; this output folder is replaced whole"),
    (["prepare", "--workers", "-3"], "argument --workers: -3 must be >= 0"),
    (["prepare", "--max-bytes", "1MB"], "argument --max-bytes: '1MB' is not an integer"),
    (["prepare", "--near-dedup", "1.5"], "1.5 must be in [0, 1)"),
    (["prepare", "--num-shards", "0"], "argument --num-shards: 0 must be >= 1"),
    (["prepare", "--timeout", "0"], "argument --timeout: 0 must be > 0"),
    (["prepare", "--tokenizer", "{d}/missing"], "argument --tokenizer: "),
    (["prepare-text", "{d}/notes.txt", "--user-dict", "{d}/missing.txt"], "missing.txt: no such file"),
    (["tokenizer", "train", "{d}/missing", "--out", "{d}/tok"], "missing: no such file or folder"),
    (["tokenizer", "train", "{d}/notes.txt", "--out", "{d}/tok", "--vocab-size", "300"], "--vocab-size 300 must exceed"),
    (["grammar", "check", "klingon"], "unknown language(s) ['klingon']"),
    (["probe", "build", "{d}/missing.py", "--out", "{d}/probe"], "nothing to prepare"),
    (["probe", "run", "--model", "{d}/folder", "--probe", "{d}/folder"], "not a probe folder"),
    (["probe", "run", "--model", "bm25", "--probe", "{d}/folder", "--pool", "1"], "argument --pool: 1 must be >= 2"),
    (["probe", "build", "{d}/nul.py", "--out", "{d}/notes.txt"], "notes.txt: exists and is not a folder"),
    (["probe", "build", "{d}/nul.py", "--out", "{d}/p", "--tokenizer", "{d}/missing"], "no tokenizer.json there"),
    (["corpora", "fetch", "{d}/notes.txt", "--only", "numpy"], "notes.txt: exists and is not a folder"),
]


@pytest.mark.parametrize("argv,message", BAD, ids=[" ".join(a[:2]) + f" #{i}" for i, (a, _) in enumerate(BAD)])
def test_bad_input_is_one_clear_line(argv, message, files, tok_dir, capsys):
    rc, err = _cli([a.format(d=files, tok=tok_dir) for a in argv], capsys)
    assert rc == 2, err
    assert message in err and "Traceback" not in err, err
    assert (files / "notes.txt").read_text() == "hello\n"  # an output path never replaces a file
    assert (files / "nul.py").is_file()  # nor a folder of the user's files


def test_prepare_reuses_its_own_output_folder(files, tok_dir, capsys):
    out = files / "views"
    out.mkdir()  # empty: fine
    for _ in range(2):  # the second run finds DONE: an earlier codept output, fine too
        rc, err = _cli(["prepare", stdlib_root() / "json" / "tool.py", "--out", out, "--tokenizer", tok_dir,
                        "--workers", "1"], capsys)
        assert rc == 0, err
    assert (out / "DONE").is_file()


def test_view_prints_a_stdlib_file(tok_dir, capsys):
    rc = main(["view", str(stdlib_root() / "json" / "tool.py"), "--tokenizer", str(tok_dir)])
    out = capsys.readouterr().out
    assert rc == 0 and "[python]" in out and "ident def" in out and "function 'main'" in out


def test_export_of_a_checkpoint_not_written_by_the_recipe(files, capsys):
    torch.save({"client_state": {"stream": {}}}, files / "ckpt" / "rank0.pt")
    rc, err = _cli(["export", files / "ckpt", "--out", files / "hf"], capsys)
    assert rc == 2 and "no model config in the client state" in err and not (files / "hf").exists()


def test_export_of_a_checkpoint_missing_its_weights(files, capsys):
    torch.save({"client_state": {"model": {"vocab_size": 600}, "tokenizer": "x"}}, files / "ckpt" / "rank0.pt")
    rc, err = _cli(["export", files / "ckpt", "--out", files / "hf"], capsys)
    assert rc == 2 and "no model states (mp_rank_00_model_states.pt" in err


def test_help_runs_for_every_command(capsys):
    for argv in (["--help"], ["prepare", "--help"], ["export", "--help"], ["probe", "run", "--help"]):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 0
    assert "--num-shards" in capsys.readouterr().out
