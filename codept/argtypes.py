"""argparse types shared by every ``codept`` subcommand: a bad value is a usage error (exit 2) that
names the value and the rule, raised while the command line is parsed, before any work.

``existing_file``, ``existing_path``, ``tokenizer_path`` (a folder with tokenizer.json, or the file),
``out_folder`` (absent or a folder: an output path never replaces a file), ``replaceable_folder``
(also empty or an earlier codept output: a job that replaces its folder whole never deletes a user's
files), ``int_at_least(lo)``,
``positive_float``, ``jaccard`` (in [0, 1)). Each checks only what the value itself says (a path's
kind, a number's range); whether a folder holds what a command needs is the command's check.
Cost: one stat per path. Imports only argparse and pathlib, so any layer may use it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from codept.data.jobs import foreign_folder


def existing_file(value: str) -> Path:
    p = Path(value)
    if not p.exists():
        raise argparse.ArgumentTypeError(f"{value}: no such file")
    if not p.is_file():
        raise argparse.ArgumentTypeError(f"{value}: not a file (a {'folder' if p.is_dir() else 'special file'})")
    return p


def existing_path(value: str) -> Path:
    if not Path(value).exists():
        raise argparse.ArgumentTypeError(f"{value}: no such file or folder")
    return Path(value)


def tokenizer_path(value: str) -> Path:
    p = Path(value)
    if not (p / "tokenizer.json" if p.is_dir() else p).is_file():
        raise argparse.ArgumentTypeError(f"{value}: no tokenizer.json there (expected a folder written by "
                                         "`codept tokenizer train` or a transformers model, or a tokenizer.json)")
    return p


def out_folder(value: str) -> Path:
    p = Path(value)
    if p.exists() and not p.is_dir():
        raise argparse.ArgumentTypeError(f"{value}: exists and is not a folder (an output folder is created or "
                                         "reused, never put in place of a file)")
    return p


def replaceable_folder(value: str) -> Path | str:
    """An output folder that a job replaces whole (``codept prepare``, ``prepare-text``): absent, empty,
    or an earlier codept output (it holds ``DONE``, or the job mark of a build that was killed); never a
    folder of the user's own files (:func:`codept.data.jobs.fresh_folder` refuses them too). An
    object-store URL (``s3://bucket/views``) is kept as it is: the job builds locally and uploads."""
    from codept.data.remote import is_url

    if is_url(value):
        return value
    p = out_folder(value)
    why = foreign_folder(p) if p.is_dir() else None
    if why:
        raise argparse.ArgumentTypeError(why)
    return p


def int_at_least(lo: int):
    def parse(value: str) -> int:
        try:
            n = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{value!r} is not an integer") from None
        if n < lo:
            raise argparse.ArgumentTypeError(f"{n} must be >= {lo}")
        return n

    parse.__name__ = f"integer >= {lo}"
    return parse


def _number(value: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number") from None


def positive_float(value: str) -> float:
    x = _number(value)
    if not x > 0:
        raise argparse.ArgumentTypeError(f"{value} must be > 0")
    return x


def jaccard(value: str) -> float:
    x = _number(value)
    if not 0 <= x < 1:
        raise argparse.ArgumentTypeError(f"{value} must be in [0, 1) (0 = off)")
    return x
