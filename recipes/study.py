"""The study in one command: ``python recipes/ablate.py --study NAME [--steps N] [--seeds 0 1 2]``.

A study is a list of QUESTIONS; a question is a few ROWS (a recipe, a mixture and its settings) that
differ only in what the question asks, each trained with every seed at the same budget, and read by
the probes that answer it. Every row x seed is one short run of recipes/pretrain_code.py (or
recipes/pretrain_text.py for the text questions), then:
  structure.json  ``codept probe structure`` on its final checkpoint (codept.probe.structure: node
                  kind, def/use, same binding, dataflow edge on networkx files, never trained on;
                  word boundary on Node.js API docs for text rows), every layer, control tasks;
  summary.json    the recipe's own summary (code-search MRR in-domain / cross-project, held-out loss).
The UNTRAINED row of a question is the same shape freshly initialised with each seed (no training).
Rows are cached: a run whose summary.json exists is not trained again and a structure.json is
reused, so a study survives across sessions (``--max-minutes``: stop launching new runs after that
long; run the same command again to go on). Output in ``--out`` (default runs/study/<NAME>):
<question>.md (a table: each probe's accuracy at its dev-chosen layer and selectivity, mean ± 95%
Student-t half-width over the seeds, and the code-search MRR), <question>.png (the same as bars
with the intervals), study.json, README.md (every question's table, what is missing and the command
that finishes it).

Studies (:data:`STUDIES`): ``budget`` (mlm vs untrained at one budget: which budget separates them),
``defaults`` (the questions that decide the default mixture: code_doc alone vs + each code objective;
mlm vs ar; each structure objective vs mlm on its matching probe), ``full`` (defaults plus token vs
whole-word vs span vs syntax_span masking, 80/10/10 vs all-[MASK], static vs dynamic masking, NSP vs
SOP), ``smoke`` (two rows, for the tests).
Cost: rows x seeds x (one run + 15-70 s of probes: every networkx file, 4 windows of 256 tokens, ~500 k
tokens; the untrained row once per seed); at 100 steps of debug_cpu with model.layers=2 on 2
CPU ranks a run is ~1 minute (ar ~2).
Not covered: fine-tuned evaluation of every row (``codept probe finetune`` on a row's folder does
it), studies over several corpora.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "recipes"))

from ablate import run_in  # noqa: E402

CODE_PROBES = ("node_kind", "def_use", "same_binding", "dataflow_edge")
MATCHING = {"syntax_span": "node_kind", "ident_rtd": "same_binding", "dataflow": "dataflow_edge",
            "dataflow_edge": "dataflow_edge"}  # structure objective -> the probe it should teach


@dataclass(frozen=True)
class Row:
    name: str
    items: tuple = ()  # recipe settings (data.mixture=..., objective.x.y=...)
    recipe: str = "code"  # "code" (pretrain_code.py), "text" (pretrain_text.py), "untrained"
    attention: str = "bi"  # the structural probes' attention (causal for ar)


@dataclass(frozen=True)
class Question:
    name: str
    ask: str
    rows: tuple
    probes: tuple = CODE_PROBES
    untrained: bool = True


def _m(mix: str, *extra: str, name: str = "", attention: str = "bi", recipe: str = "code") -> Row:
    return Row(name or mix.replace(":1", "").replace(",", "+").replace("@text", ""), (f"data.mixture={mix}", *extra),
               recipe, attention)


MLM, AR = _m("mlm:1"), _m("ar:1", attention="causal")
STRUCTURE = tuple(_m(f"{o}:1") for o in MATCHING)
Q_CODE_DOC = Question("code_doc_plus", "code_doc alone vs code_doc + each code objective (1:1 per document)",
                      (_m("code_doc:1"),) + tuple(_m(f"code_doc:1,{o}:1") for o in ("mlm", *MATCHING)), untrained=True)
Q_MLM_AR = Question("mlm_vs_ar", "MLM vs AR (causal LM; probed with causal attention)", (MLM, AR))
Q_STRUCT = Question("structure_vs_mlm", "each structure objective vs mlm on its matching probe "
                    f"({', '.join(f'{k}: {v}' for k, v in MATCHING.items())})", (MLM,) + STRUCTURE)
Q_MASKING = Question("masking_units", "token vs whole-word vs SpanBERT span vs syntax_span masking",
                     (MLM, _m("wwm:1"), _m("span:1"), _m("syntax_span:1")))
Q_RENDER = Question("mask_render", "80/10/10 vs all-[MASK] for code (CodeSage)",
                    (MLM, _m("mlm:1", "objective.mlm.p_mask=1.0", "objective.mlm.p_random=0.0", name="mlm_all_mask")))
Q_STATIC = Question("static_masking", "static (one mask per document) vs dynamic masking",
                    (MLM, _m("mlm:1", "objective.mlm.static=true", name="mlm_static")))
Q_NSP = Question("nsp_vs_sop", "NSP vs SOP (English; word-boundary probe)",
                 (_m("nsp@text:1", recipe="text"), _m("sop@text:1", recipe="text")), probes=("word_boundary",))
Q_BUDGET = Question("budget", "does mlm separate from the untrained encoder at this budget?", (MLM,))
STUDIES = {
    "smoke": (Question("smoke", "two rows at a tiny budget (tests)", (MLM, _m("code_doc:1"))),),
    "budget": (Q_BUDGET,),
    "defaults": (Q_CODE_DOC, Q_MLM_AR, Q_STRUCT),
    "full": (Q_CODE_DOC, Q_MLM_AR, Q_STRUCT, Q_MASKING, Q_RENDER, Q_STATIC, Q_NSP),
}
BASE = {"code": ["model.layers=2", "val.every=0", "probe.every=0"], "text": ["val.every=0"]}
SCRIPT = {"code": "recipes/pretrain_code.py", "text": "recipes/pretrain_text.py"}
TEXT_SOURCE = "/usr/share/doc/nodejs/api"  # English never trained on by english_cpu (stdlib docstrings)


def structure_cfg(study: str):
    """The structural probes' caps: the same for every row of a study (smoke: tiny, for the tests)."""
    from codept.probe.structure import StructureConfig

    if study == "smoke":
        return StructureConfig(files=8, windows=1, max_train=200, max_test=100, iters=5, boot=10)
    # every networkx file (556), 4 windows of 256 tokens (debug_cpu's seq_len): ~500 k tokens, so the pair
    # tasks (balanced within strata, harness 3) reach ~1,500 test pairs; at 64 files x 2 windows dataflow_edge
    # had 40 / 30 / 72 fit / dev / test pairs and same_binding 152 / 138 / 350 (SE 0.06-0.07 per run)
    return StructureConfig(files=600, windows=4, max_train=3000, max_test=1500, iters=50, boot=200)


def _structure(folder: Path, row: Row, seed: int, like: Path | None, cfg) -> dict:
    """structure.json of a trained run folder, or of the untrained shape of ``like`` (cached)."""
    from dataclasses import replace

    from codept.probe.structure import run_structure

    f = folder / "structure.json"
    if f.is_file():
        return json.loads(f.read_text())
    cfg = replace(cfg, seed=seed, attention=row.attention)
    text = row.recipe == "text"
    res = run_structure("random" if like else str(folder), "" if text else "networkx",
                        TEXT_SOURCE if text else "", cfg, like=str(like) if like else "")
    folder.mkdir(parents=True, exist_ok=True)
    f.write_text(json.dumps(res, indent=2) + "\n")
    return res


def run_row(row: Row, seed: int, steps: int, out: Path, ranks: int, extra: list[str]) -> Path:
    folder = out / "runs" / f"{row.name}@seed={seed}"
    items = [*BASE[row.recipe], *row.items, f"steps={steps}", f"seed={seed}", *extra]
    run_in(SCRIPT[row.recipe], f"{row.name} seed {seed}", folder, ranks, items)
    return folder


def _interval(values: list[float]) -> dict:
    from codept.probe.finetune import t_interval

    return t_interval(values) if values else {"mean": float("nan"), "half95": None, "n": 0, "values": []}


def collect(q: Question, cells: dict) -> dict:
    """{row: {probe: {acc, selectivity}: interval, "mrr": {...}}} over the seeds that are done."""
    out = {}
    for row, runs in cells.items():
        r = {}
        for p in q.probes:
            acc = [s["structure"]["tasks"][p]["acc"] for s in runs if "acc" in s["structure"]["tasks"].get(p, {})]
            sel = [s["structure"]["tasks"][p]["selectivity"] for s in runs if "acc" in s["structure"]["tasks"].get(p, {})]
            lay = [s["structure"]["tasks"][p]["layer"] for s in runs if "acc" in s["structure"]["tasks"].get(p, {})]
            r[p] = {"acc": _interval(acc), "selectivity": _interval(sel), "layers": lay}
        for probe in ("in_domain", "cross_project"):
            vals = [s["summary"]["probe_mrr"][probe]["model"] for s in runs
                    if s.get("summary") and probe in s["summary"].get("probe_mrr", {})]
            r[f"mrr_{probe}"] = _interval(vals)
        out[row] = r
    return out


def separated(a: dict, b: dict) -> bool:
    """Two intervals (t_interval dicts) whose 95% intervals do not overlap (a conservative test)."""
    if not a["n"] or not b["n"] or a["half95"] is None or b["half95"] is None:
        return False
    return abs(a["mean"] - b["mean"]) > a["half95"] + b["half95"]


def separates(res: dict, row: str = "mlm", ref: str = "untrained") -> list[str]:
    """The probes on which ``row``'s accuracy interval is above ``ref``'s, not overlapping."""
    if row not in res or ref not in res:
        return []
    return [p for p, v in res[row].items() if isinstance(v, dict) and "acc" in v
            and separated(v["acc"], res[ref][p]["acc"]) and v["acc"]["mean"] > res[ref][p]["acc"]["mean"]]


def _fmt(iv: dict) -> str:
    if not iv["n"]:
        return "-"
    return f"{iv['mean']:.3f}" + (f" ± {iv['half95']:.3f}" if iv["half95"] is not None else "") + f" (n={iv['n']})"


def table(q: Question, res: dict, steps: int) -> str:
    head = "| row | " + " | ".join(f"{p} acc | {p} sel" for p in q.probes)
    code = q.probes != ("word_boundary",)
    head += " | code search in-domain | cross-project |" if code else " |"
    lines = [f"## {q.name}: {q.ask}", "", f"{steps} steps per run; mean ± 95% t-interval over training seeds "
             "(n = seeds done); acc = probe test accuracy at its dev-chosen layer, sel = selectivity (acc - "
             "Hewitt & Liang control)", "", head, "|" + "---|" * (1 + 2 * len(q.probes) + (2 if code else 0))]
    for row, r in res.items():
        cells = [f"{_fmt(r[p]['acc'])} | {_fmt(r[p]['selectivity'])}" for p in q.probes]
        tail = f" | {_fmt(r['mrr_in_domain'])} | {_fmt(r['mrr_cross_project'])} |" if code else " |"
        lines.append(f"| {row} | " + " | ".join(cells) + tail)
    return "\n".join(lines) + "\n"


def plot(q: Question, res: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    rows = list(res)
    fig, ax = plt.subplots(figsize=(1.6 + 1.3 * len(q.probes) * max(1, len(rows)) / 3, 3.4))
    width = 0.8 / max(1, len(rows))
    for j, row in enumerate(rows):
        means = [res[row][p]["acc"]["mean"] for p in q.probes]
        errs = [res[row][p]["acc"]["half95"] or 0.0 for p in q.probes]
        ax.bar(np.arange(len(q.probes)) + (j - (len(rows) - 1) / 2) * width, means, width, yerr=errs, capsize=2,
               label=row)
    ax.set_xticks(np.arange(len(q.probes)), q.probes)
    ax.set_ylim(0, 1)
    ax.set_ylabel("probe test accuracy (95% CI over seeds)")
    ax.set_title(q.name)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description="the study: questions x rows x seeds, probed (recipes/study.py)")
    ap.add_argument("--study", required=True, choices=sorted(STUDIES))
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--max-minutes", type=float, default=0.0, help="stop launching runs after this long (0 = no limit)")
    ap.add_argument("--only", nargs="*", default=[], help="only these questions")
    ap.add_argument("overrides", nargs="*", help="key=value passed to every run")
    args = ap.parse_args(argv)
    out = args.out or REPO / "runs" / "study" / args.study
    questions = [q for q in STUDIES[args.study] if not args.only or q.name in args.only]
    cfg = structure_cfg(args.study)
    t0, stopped, report = time.time(), False, {}
    for q in questions:
        cells: dict = {}
        for seed in args.seeds:
            first = None
            for row in q.rows:
                folder = out / "runs" / f"{row.name}@seed={seed}"
                if not (folder / "summary.json").is_file() and args.max_minutes and (time.time() - t0) / 60 > args.max_minutes:
                    stopped = True
                    continue
                folder = run_row(row, seed, args.steps, out, args.ranks, args.overrides)
                summary = json.loads((folder / "summary.json").read_text())
                cells.setdefault(row.name, []).append({"seed": seed, "summary": summary,
                                                       "structure": _structure(folder, row, seed, None, cfg)})
                first = first or (folder, row)
            if q.untrained and first is not None:
                u = Row("untrained", recipe=first[1].recipe)
                cells.setdefault("untrained", []).append(
                    {"seed": seed, "summary": None,
                     "structure": _structure(out / "runs" / f"untrained-{first[0].name}", u, seed, first[0], cfg)})
        res = collect(q, cells)
        out.mkdir(parents=True, exist_ok=True)
        md = table(q, res, args.steps)
        if q.untrained and "untrained" in res:
            md += ("\nSeparated from the untrained encoder (95% intervals apart): " + "; ".join(
                f"{row}: {', '.join(separates(res, row)) or 'none'}" for row in res if row != "untrained") + "\n")
        (out / f"{q.name}.md").write_text(md)
        plot(q, res, out / f"{q.name}.png")
        report[q.name] = {"ask": q.ask, "rows": res, "missing": [f"{r.name}@seed={s}" for r in q.rows for s in args.seeds
                                                                   if r.name not in cells or s not in [c["seed"] for c in cells[r.name]]]}
        print(md, flush=True)
    (out / "study.json").write_text(json.dumps({"study": args.study, "steps": args.steps, "seeds": args.seeds,
                                                "questions": report}, indent=2) + "\n")
    missing = {q: r["missing"] for q, r in report.items() if r["missing"]}
    cmd = f"python recipes/ablate.py --study {args.study} --steps {args.steps} --seeds {' '.join(map(str, args.seeds))}"
    readme = [f"# study {args.study} ({args.steps} steps, seeds {args.seeds})", ""]
    readme += [f"{(out / (q + '.md')).read_text()}\n![{q}]({q}.png)\n" for q in report]
    readme += ([f"Missing runs: {missing}. Finish with `{cmd} --out {out}`."] if missing else ["Complete."])
    (out / "README.md").write_text("\n".join(readme) + "\n")
    if stopped:
        print(f"[study] stopped after {args.max_minutes} min; run again to go on: {cmd} --out {out}", flush=True)
    return 0
