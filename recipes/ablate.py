"""Objective ablation: several short runs of recipes/pretrain_code.py that differ only in the objective
mixture (and optionally the starting point), then one probe table comparing them.

  python recipes/ablate.py [--mixtures mlm:1 mlm:1,syntax_span:1 ...] [--steps 200] [--ranks 2]
                           [--init-from DIR] [--out runs/ablate] [key=value ...]
  python recipes/ablate.py --mixtures mlm:1 ar:1 unilm:1 glm:1 plm:1 electra:1 --steps 40 model.layers=2
                           (the MLM-vs-AR table of docs/ablations.md; any registered objective works)
  python recipes/ablate.py --steps 100 model.layers=2 val.every=0 --mixtures code_doc:1 \
                           "code_doc:1 objective.code_doc.hard_negatives=true objective.code_doc.max_code_tokens=96" \
                           "code_doc:1 seed=1"

A run is a mixture optionally followed (in the same argument, space-separated) by key=value settings of
that run only: an objective's setting (``objective.syntax_span.max_unit_tokens=32``), a second seed
(``seed=1``); its folder and table label name them (``code_doc1@seed=1``).

Each run: ``deepspeed --num_gpus RANKS recipes/pretrain_code.py data.mixture=M out_dir=OUT/<name>
steps=STEPS probe.every=0 [key=value ...]`` (same preset, seed, data, steps and probes: only the
mixture differs). A run whose ``summary.json`` exists is not repeated (delete the folder to redo it).
Output: OUT/ablation.md (MRR per probe: in-domain = held-out stdlib files, cross-project = networkx;
BM25 and a random-init encoder as reference rows; final loss; held-out loss/accuracy per head) and
OUT/ablation.json. Every run's settings are checked with the recipe's parser before the first launch.
Cost: the sum of the runs (about 4-5 minutes each on 2 CPU cores at the default 200 steps; ~1 minute
at 100 steps with model.layers=2, 2 for ar, whose head scores every token).
The study (several questions, rows x seeds, structural probes, 95% intervals, a table and a PNG per
question, resumable): ``python recipes/ablate.py --study budget|defaults|full [--steps N] [--seeds ...]``
(recipes/study.py).
Limits: one seed per mixture — differences of a few MRR points are within seed noise at this scale;
the losses of different mixtures are not comparable (different targets).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXED = ("data.mixture=", "out_dir=", "steps=")  # set by the ablation itself
DEFAULT_MIXTURES = ["mlm:1", "mlm:1,syntax_span:1", "mlm:1,syntax_span:1,code_doc:1", "code_doc:1"]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parse_run(spec: str) -> tuple[str, list[str]]:
    """``"MIXTURE [key=value ...]"`` -> (mixture, the run's own settings); refuses what the ablation sets."""
    mixture, *own = spec.split()
    if not mixture or "=" in mixture:
        raise SystemExit(f"[ablate] run {spec!r}: must start with a mixture (objective:weight,...), then key=value "
                         "settings (settings of every run go before --mixtures, which takes the rest of the line)")
    for item in own:
        if "=" not in item or item.startswith(FIXED):
            raise SystemExit(f"[ablate] run {spec!r}: {item!r} must be key=value and not one of {FIXED}")
    return mixture, own


def run_name(spec: str) -> str:
    """Folder name of a run: ``mlm:1,code_doc:1 seed=1`` -> ``mlm1+code_doc1@seed=1``."""
    mixture, own = parse_run(spec)
    tail = ""
    for item in own:
        key, value = item.split("=", 1)
        tail += f"@{key.rsplit('.', 1)[-1]}={value}"
    return mixture.replace(":", "").replace(",", "+") + tail


def merge(common: list[str], own: list[str]) -> list[str]:
    """``key=value`` items of every run, then a run's own: a key of both takes the run's value (the
    recipe refuses a key given twice)."""
    out = dict(item.split("=", 1) for item in common)
    out.update(item.split("=", 1) for item in own)
    return [f"{k}={v}" for k, v in out.items()]


def run_items(spec: str, args) -> list[str]:
    """The recipe settings of one run: the ablation's, every run's (``key=value`` after the options),
    the run's own (the later win)."""
    mixture, own = parse_run(spec)
    return merge([f"data.mixture={mixture}", f"steps={args.steps}", "probe.every=0", *args.overrides], own)


def run_one(spec: str, out: Path, args) -> dict:
    items = run_items(spec, args)
    if args.init_from:
        items += ["--init-from", args.init_from]
    return run_in("recipes/pretrain_code.py", spec, out, args.ranks, items)


def run_in(script: str, label: str, out: Path, ranks: int, items: list[str]) -> dict:
    """One launch of `script` with ``out_dir=out`` and `items`; its summary.json (cached: a run whose
    summary exists is not repeated). Also used by recipes/ablate_text.py."""
    summary = out / "summary.json"
    if summary.is_file():
        return json.loads(summary.read_text())
    port = _port()
    exe = Path(sys.executable).with_name("deepspeed")
    launcher = [str(exe)] if exe.exists() else [sys.executable, "-m", "deepspeed.launcher.runner"]
    cmd = [*launcher, "--num_gpus", str(ranks), "--master_port", str(port), script, f"out_dir={out}", *items]
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"), "TOKENIZERS_PARALLELISM": "false"}
    print(f"[ablate] {label}: {' '.join(cmd[3:])}", flush=True)
    out.mkdir(parents=True, exist_ok=True)
    try:
        with open(out / "run.log", "w") as log:
            r = subprocess.run(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    finally:
        for f in glob.glob(f"/dev/shm/deepspeed_allreduce_buffer_{os.getuid()}_*_{port}_*"):
            os.unlink(f)
    if r.returncode != 0 or not summary.is_file():
        raise SystemExit(f"[ablate] run {label!r} failed (exit {r.returncode}); see {out / 'run.log'}")
    return json.loads(summary.read_text())


def _val_cell(summary: dict) -> str:
    """Held-out loss / accuracy per head of a run's summary (``val``), e.g. ``mlm 6.12/0.14``."""
    val = summary.get("val") or {}
    if "skipped" in val:
        return "skipped"
    return ", ".join(f"{h} {v['loss']}/{v['acc']}" for h, v in sorted(val.items()) if isinstance(v, dict) and "loss" in v)


def table(results: dict[str, dict]) -> str:
    probes = sorted({p for s in results.values() for p in s["probe_mrr"]})
    head = "| run | " + " | ".join(f"{p} MRR" for p in probes) + " | final loss | val loss/acc per head | wall s | train tok/s |"
    lines = [head, "|" + "---|" * (len(probes) + 5)]
    for name, s in results.items():
        cells = [f"{s['probe_mrr'].get(p, {}).get('model', float('nan')):.3f}" for p in probes]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {s['loss_last']} | {_val_cell(s)} | "
                     f"{s.get('seconds', '')} | {s.get('train_tokens_per_s', '')} |")
    any_run = next(iter(results.values()))
    for spec in ("bm25", "random"):
        if all(spec in any_run["probe_mrr"].get(p, {}) for p in probes):
            cells = [f"{any_run['probe_mrr'][p][spec]:.3f}" for p in probes]
            lines.append(f"| *{spec}* | " + " | ".join(cells) + " | | | | |")
    pools = ", ".join(f"{p}: {any_run['probe_mrr'][p]['pairs']} pairs, pool {any_run['probe_mrr'][p]['pool']}"
                      for p in probes)
    return "\n".join(lines) + f"\n\n{pools}; {any_run['steps']} steps, preset {any_run['preset']}.\n"


def check_settings(args) -> None:
    """Parse every run's settings with the recipe's own parser (codept.train.loop.configure) before
    any launch: a bad override or mixture stops the ablation in seconds with the parser's message."""
    sys.path.insert(0, str(REPO / "recipes"))
    from codept.train.settings import ConfigError
    from pretrain_code import configure

    names = [run_name(spec) for spec in args.mixtures]
    if len(set(names)) < len(names):
        raise SystemExit(f"[ablate] two runs share a folder name: {sorted({n for n in names if names.count(n) > 1})}")
    for spec in args.mixtures:
        try:
            configure("debug_cpu", run_items(spec, args))
        except ConfigError as e:
            raise SystemExit(f"[ablate] run {spec!r}: {e}") from None


def main(argv: list[str]) -> int:
    if any(a == "--study" or a.startswith("--study=") for a in argv):  # the study in one command (recipes/study.py)
        import study

        return study.main(argv)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mixtures", nargs="+", default=DEFAULT_MIXTURES)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--init-from", default="")
    ap.add_argument("--out", type=Path, default=REPO / "runs" / "ablate")
    ap.add_argument("overrides", nargs="*", help="passed to every run (key=value, model.x=, data.x=, probe.x=)")
    args = ap.parse_args(argv)
    if any(o.startswith(FIXED) for o in args.overrides):
        raise SystemExit("data.mixture, out_dir and steps are set by the ablation itself")
    check_settings(args)  # every run's settings, before the first launch
    results = {}
    for spec in args.mixtures:
        results[spec] = run_one(spec, args.out / run_name(spec), args)
    md = table(results)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "ablation.md").write_text(md)
    (args.out / "ablation.json").write_text(json.dumps(results, indent=2) + "\n")
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
