"""Layering: a model checkpoint is probed and exported without importing deepspeed (the one import
site is codept/train/engine.py, needed only to train or to gather ZeRO-3 partitions)."""

from __future__ import annotations

import os
import subprocess
import sys

from codept import tokenizer as ctok
from codept.data.sources import stdlib_root
from codept.model import transformer as T
from model_data import write_run

PROBE_AND_EXPORT = """
import sys
from codept.probe import run as R
from codept.cli import main

run, hf = sys.argv[1], sys.argv[2]
scorer = R.build_scorer(run, device="cpu")
score = scorer.prepare(["add two numbers"], ["def add(a, b):\\n    return a + b\\n"])
assert score([0], [0]).shape == (1, 1)
assert main(["export", run, "--out", hf]) == 0
loaded = sorted(m for m in sys.modules if m.split(".")[0] == "deepspeed")
assert not loaded, loaded
print("no deepspeed")
"""


def _run_folder(tmp_path):
    """A checkpoint laid out as codept.train.checkpoint + DeepSpeed (ZeRO 0-2) write it."""
    tok_dir = tmp_path / "tok"
    ctok.train_tokenizer(sorted(stdlib_root().glob("json/*.py")), tok_dir, vocab_size=600)
    return write_run(tmp_path / "run", T.Transformer(T.tiny(vocab_size=600)), tok_dir)


def test_probe_and_export_load_a_model_without_deepspeed(tmp_path):
    run = _run_folder(tmp_path)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    r = subprocess.run([sys.executable, "-c", PROBE_AND_EXPORT, str(run), str(tmp_path / "hf")],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0 and "no deepspeed" in r.stdout, r.stderr[-3000:]
    assert (tmp_path / "hf" / "model.safetensors").is_file()


# -- the import graph: layers in one direction, no circles -------------------------------------------

import ast  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

PKG = Path(__file__).resolve().parents[1] / "codept"

# The floors of the house, lowest first (ARCHITECTURE.md "Three layers, one direction", made exact for
# the whole tree). A module may import its own floor and the floors below it, never one above; within
# a floor any import is allowed as long as it closes no circle. The most specific prefix decides.
LAYERS = [
    # 0 ground: arrays, rows, streams, packing, sources, jobs, the language table (TOML), the tokenizer
    ("ground", ["codept", "codept.resources", "codept.languages", "codept.argtypes", "codept.parallel", "codept.attention",
                "codept.tokenizer", "codept.data"]),
    # 1 the view builders, one per kind: code (tree-sitter), text, execution traces; the code prepare job
    ("builders", ["codept.structure", "codept.text", "codept.exec", "codept.prepare"]),
    # 2 the view kinds as one floor: schemas, open_views for every kind, the stream source of views
    ("views", ["codept.views"]),
    # 3 objectives (pure functions over views) and the model (torch), side by side
    ("objectives+model", ["codept.objectives", "codept.model"]),
    # 4 training: config, engine (deepspeed), checkpoints, the shared run
    ("train", ["codept.train"]),
    # 5 what reads models and views: probes and the user-loop loader
    ("eval", ["codept.probe", "codept.loader"]),
    # 6 the command line
    ("cli", ["codept.cli"]),
]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> int:
    best, floor = -1, None
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best:
                best, floor = len(p), i
    if floor is None:
        raise AssertionError(f"{module}: in no floor of LAYERS; add it to one")
    return floor


def import_graph() -> dict[str, dict[str, int]]:
    """module -> {imported codept module: line} from every import statement in the file, the lazy
    ones inside functions included (ast.walk). ``from pkg import name`` counts as an import of
    ``pkg.name`` when that is a module, else of ``pkg``; the implicit import of a parent package
    (running ``pkg/__init__.py`` before ``pkg.mod``) is not an edge."""
    files = {module_name(p): p for p in PKG.rglob("*.py")}

    def known(name: str) -> str | None:
        while name not in files and "." in name:
            name = name.rsplit(".", 1)[0]
        return name if name in files else None

    graph = {}
    for mod, path in files.items():
        pkg = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        edges = {}
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                    base = ".".join(up + ([node.module] if node.module else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
            for t in targets:
                k = known(t) if t.split(".")[0] == "codept" else None
                if k and k != mod:
                    edges.setdefault(k, node.lineno)
        graph[mod] = edges
    return graph


def upward_imports(graph) -> list[str]:
    return sorted(f"{m}:{line} imports {t} ({LAYERS[layer_of(t)][0]} above {LAYERS[layer_of(m)][0]})"
                  for m, edges in graph.items() for t, line in edges.items() if layer_of(t) > layer_of(m))


def circles(graph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]; counter[0] += 1; stack.append(root); on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]; counter[0] += 1; stack.append(w); on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop(); on.discard(w); comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_every_module_is_on_a_floor_and_no_import_runs_up():
    graph = import_graph()
    assert len(graph) >= 100 and "codept.structure.grammar" in graph["codept.prepare"]  # the walk sees the tree
    assert not upward_imports(graph), "\n".join(upward_imports(graph))


def test_no_import_circles():
    assert circles(import_graph()) == []


def test_the_checks_catch_what_they_forbid():
    """The two checks on a graph that breaks each rule (so neither passes vacuously)."""
    g = {"codept.data.pack": {"codept.structure.view": 3}, "codept.structure.view": {},
         "codept.train.loop": {"codept.train.resume": 1}, "codept.train.resume": {"codept.train.loop": 2}}
    assert upward_imports(g) == ["codept.data.pack:3 imports codept.structure.view (builders above ground)"]
    assert circles(g) == [["codept.train.loop", "codept.train.resume"]]


GROUND = """
import importlib, pkgutil, sys, codept.data
for m in pkgutil.iter_modules(codept.data.__path__):
    importlib.import_module('codept.data.' + m.name)
import codept.tokenizer
print(sorted(m for m in sys.modules if m.split('.')[0] == 'tree_sitter'
             or m.startswith(('codept.structure', 'codept.text', 'codept.views', 'codept.exec'))))
"""


def test_the_ground_floor_loads_no_view_builder():
    """Importing every codept.data module and codept.tokenizer loads no tree_sitter, codept.structure,
    codept.text (nor the floors above: views, exec)."""
    r = subprocess.run([sys.executable, "-c", GROUND], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "[]"
