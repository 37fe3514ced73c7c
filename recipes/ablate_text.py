"""The NSP-vs-SOP question of the study, answered with a table: short runs of recipes/pretrain_text.py
that differ only in the sentence-pair objective, each evaluated on held-out pairs of every kind.

  python recipes/ablate_text.py [--steps 400] [--ranks 2] [--out runs/ablate_text] [key=value ...]

Runs (same preset english_cpu, seed, corpus, tokenizer, steps; MLM at 15% on the same input in all):
  nsp_random         data.mixture=nsp@text:1                                   (BERT)
  nsp_same_document  data.mixture=nsp@text:1 objective.nsp.negatives=same_document
  sop                data.mixture=sop@text:1                                   (ALBERT)
Each run's summary holds ``pair_probes``: the accuracy of its pair head on held-out pairs of the three
kinds (random-document NSP pairs, same-document non-adjacent NSP pairs, SOP pairs; label 1 = "not
the coherent order"), with counts and standard errors. The study's claim to check: a head trained on
random-document negatives detects topic change (high on nsp_random) and stays near chance on the
same-topic kinds; SOP / same-document training transfers to coherence.
A run whose ``summary.json`` exists is not repeated (delete its folder to redo it); every run's
settings are checked with the recipe's parser before the first launch.
Output: OUT/ablation.md, OUT/ablation.json. Cost: the sum of the runs (~4 minutes each at 400 steps on
2 CPU cores). Limits: one seed per run; accuracies within ~2 standard errors are not distinguishable.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "recipes"))

from ablate import run_in  # noqa: E402

RUNS = {
    "nsp_random": ["data.mixture=nsp@text:1"],
    "nsp_same_document": ["data.mixture=nsp@text:1", "objective.nsp.negatives=same_document"],
    "sop": ["data.mixture=sop@text:1"],
}
KINDS = ("nsp_random", "nsp_same_document", "sop")


def table(results: dict[str, dict]) -> str:
    lines = ["| trained on | " + " | ".join(f"held-out {k} acc (n)" for k in KINDS) + " | val mlm acc | final loss |",
             "|" + "---|" * (len(KINDS) + 3)]
    for name, s in results.items():
        probes = next(iter(s["pair_probes"].values()), {})
        cells = [f"{probes[k]['acc']:.3f} ± {probes[k]['se']:.3f} ({probes[k]['n']})" if k in probes else "-"
                 for k in KINDS]
        mlm = (s.get("val") or {}).get("mlm", {}).get("acc")
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {mlm} | {s['loss_last']} |")
    any_run = next(iter(results.values()))
    return ("\n".join(lines) + f"\n\n± = one standard error; {any_run['steps']} steps per run, preset "
            f"{any_run['preset']}, held-out documents: {any_run['held_docs']}.\n")


def check_settings(runs: dict, steps: int, overrides: list[str]) -> None:
    from codept.train.config import ConfigError
    from pretrain_text import configure

    for name, items in runs.items():
        try:
            configure("english_cpu", [*items, f"steps={steps}", *overrides])
        except ConfigError as e:
            raise SystemExit(f"[ablate_text] run {name!r}: {e}") from None


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--out", type=Path, default=REPO / "runs" / "ablate_text")
    ap.add_argument("overrides", nargs="*", help="passed to every run (key=value, model.x=, data.x=, val.x=)")
    args = ap.parse_args(argv)
    if any(o.startswith(("data.mixture=", "out_dir=", "steps=")) for o in args.overrides):
        raise SystemExit("data.mixture, out_dir and steps are set by the ablation itself")
    check_settings(RUNS, args.steps, args.overrides)
    results = {}
    for name, items in RUNS.items():
        results[name] = run_in("recipes/pretrain_text.py", name, args.out / name, args.ranks,
                               [*items, f"steps={args.steps}", *args.overrides])
    md = table(results)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "ablation.md").write_text(md)
    (args.out / "ablation.json").write_text(json.dumps(results, indent=2) + "\n")
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
