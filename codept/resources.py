"""Where codept's data folders are, in a checkout and in an installed wheel: ONE rule for all of them.

The repository keeps ``grammars/``, ``ds_configs/`` and ``recipes/`` at the top level (next to the
``codept`` package), so that adding a language is a folder, not a Python change. A wheel maps them
into the package (setup.py: ``codept.grammars`` <- ``grammars/``, ...), so an installed codept finds
them wherever it runs:

1. :func:`folder` ``(name)``: ``codept/<name>`` when it exists (an installed wheel), else
   ``<repo>/<name>`` next to the package (a checkout, an editable install, PYTHONPATH).
2. :func:`recipe` ``(name)``: the path of ``recipes/<name>.py`` for a launcher
   (``deepspeed --num_gpus 2 "$(codept recipe pretrain_code)" ...``); FileNotFoundError listing the
   recipes there.
Users: codept.languages.grammars_dir (which also honours ``$CODEPT_GRAMMARS``), codept.train.config
(ds_configs), the ``codept recipe`` command. Cost: one ``stat``. Not covered: zipped installs (a
wheel must be unpacked to run: tree-sitter queries and recipes are read as files).
"""

from __future__ import annotations

from pathlib import Path

SHIPPED = ("grammars", "ds_configs", "recipes")  # the top-level folders a wheel carries (setup.py)
_PKG = Path(__file__).resolve().parent


def folder(name: str) -> Path:
    """The folder ``name`` (one of :data:`SHIPPED`) of this installation (module docstring, 1)."""
    if name not in SHIPPED:
        raise ValueError(f"folder {name!r}: codept ships {SHIPPED}")
    inside = _PKG / name
    return inside if inside.is_dir() else _PKG.parent / name


def recipe(name: str) -> Path:
    """``recipes/<name>.py`` (``name`` with or without ``.py``)."""
    path = folder("recipes") / (name if name.endswith(".py") else f"{name}.py")
    if not path.is_file():
        have = sorted(p.stem for p in folder("recipes").glob("*.py"))
        raise FileNotFoundError(f"recipe {name!r}: no {path} (recipes: {', '.join(have) or 'none'})")
    return path
