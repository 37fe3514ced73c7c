"""Cross-lingual retrieval of finished tlm_cpu-style runs, side by side, from their last checkpoints.

  python recipes/xling_retrieval.py runs/tlm_cpu runs/tlm_cpu_mono [--pool 1000] [--seed 0] [--layers]

For each run folder: rebuild the model from the preset's shape with the run's overrides
(``summary.json``: preset, overrides, vocab), load the weights of the checkpoint ``latest`` names
(DeepSpeed's ``mp_rank_00_model_states.pt``), open the run's held-out pairs (its prepare-text folder:
``--views``, the summary's ``views``, else found by preparing again (cached); the held-out split is
by content hash, ``val.holdout``, so a pair is held out in every folder that holds it) and score
retrieval with codept.text.retrieval.retrieval (its docstring: pools, raw and per-language centered
cosine, BM25 over the same tokens, ties):
  mixed        one pool of ``pool`` pairs of all target languages (the recipe's summary metric)
  per language one pool of ``pool`` pairs per target language: candidates share the query's target
               language, so a language-wide offset of the embeddings (language ids, script) cannot
               rank a whole language above the true target
``--layers``: the same per-language pools scored on the mean-pooled embedding output and every
block (a diagnostic; the bar is the final layer). Chance MRR with N candidates is H_N / N.
With several runs: the paired difference of the first run minus each other one, per pool and score,
mean ± standard error over the same queries (per-query reciprocal ranks).
Output: Markdown tables on stdout and ``<run>/retrieval.json``. Cost: 2 single-side forwards per
pooled or reference pair per run (~9 k sides at pool 1000: well under a minute on one core).
Not covered: runs whose model shape was changed outside the summary's overrides.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "recipes"))

from codept.views import open_views  # noqa: E402
from codept.model import transformer as T  # noqa: E402
from codept.objectives.render import Vocab  # noqa: E402
from codept.text.retrieval import chance, retrieval  # noqa: E402
from codept.tokenizer import load_tokenizer  # noqa: E402


def _settings(summary: dict):
    import pretrain_text as R

    keep = [x for x in summary.get("overrides", []) if not x.startswith("out_dir=")]
    return R.configure(summary["preset"], keep)[0]


def load_model(run: Path, settings, vocab_size: int) -> T.Transformer:
    model = T.Transformer(T.configure(settings.sections["model"], vocab_size=vocab_size))
    step = (run / "latest").read_text().strip()
    state = torch.load(run / step / "mp_rank_00_model_states.pt", map_location="cpu", weights_only=True)["module"]
    model.load_state_dict({k[6:]: v for k, v in state.items() if k.startswith("model.")})
    return model.eval()


def evaluate(run: Path, pool: int, seed: int, views: str | None = None, layers: bool = False) -> dict:
    import pretrain_text as R
    from codept.text.prepare import prepare_text

    s = json.loads((run / "summary.json").read_text())
    settings = _settings(s)
    tok = load_tokenizer(s["tokenizer"])
    vocab = Vocab.from_tokenizer(tok)
    folder = views or s.get("views")
    if folder is None:  # a summary from before the recipe recorded its views: prepare (cached) finds them
        text, pairs_src, _ = R.corpus_sources(settings.sections["data"])
        folder = prepare_text(text + pairs_src, tokenizer_dir=Path(s["tokenizer"]), progress=False)["out"]
    _, held = open_views(folder, kind="pair").split(settings.sections["val"].holdout)
    model = load_model(run, settings, vocab.size)
    max_side = R._tlm_config(settings).max_side
    out = retrieval(model, held, R._tlm_table(settings), vocab, "cpu", pool=pool, max_side=max_side, seed=seed,
                    layers=layers, per_query=True)
    out.update(views=str(folder), overrides=s.get("overrides"), steps=s.get("steps"))
    per = {lang: p.pop("rr") for lang, p in out["pools"].items()}
    (run / "retrieval.json").write_text(json.dumps(out, indent=2) + "\n")
    return {**out, "per_query": per}


def paired(a: dict, b: dict) -> dict:
    """{pool: {score: (mean of a - b, its standard error, n)}} over the same queries (per-query
    reciprocal ranks of two runs); pools whose queries differ (other pairs) are left out."""
    out = {}
    for lang, pa in a["per_query"].items():
        pb = b["per_query"].get(lang)
        if pb is None or pa["paths"] != pb["paths"]:
            continue
        out[lang] = {}
        for score in ("raw", "centered"):
            d = np.asarray(pa[score]) - np.asarray(pb[score])
            out[lang][score] = (float(d.mean()), float(d.std(ddof=1) / np.sqrt(len(d))), len(d))
    return out


def tables(rows: dict[str, dict]) -> str:
    langs = sorted({x for v in rows.values() for x in v["pools"]})
    lines = ["| run | mixed raw | mixed centered | " + " | ".join(f"en-{x} raw | en-{x} centered" for x in langs) + " |",
             "|---|---|---|" + "---|---|" * len(langs)]
    for name, v in rows.items():
        cells = [f"{v['pools'][x]['raw']:.4f} | {v['pools'][x]['centered']:.4f}" for x in langs]
        lines.append(f"| {name} | {v['mrr']:.4f} | {v['centered']:.4f} | " + " | ".join(cells) + " |")
    first = next(iter(rows.values()))
    lex = [f"{first['pools'][x]['bm25']:.4f} | " for x in langs if "bm25" in first["pools"][x]]
    if len(lex) == len(langs):
        lines.append("| BM25 over the same BPE ids | | | " + " | ".join(lex) + " |")
    lines.append(f"| chance | {first['chance']:.4f} | | " + " | ".join(f"{first['pools'][x]['chance']:.4f} | " for x in langs) + " |")
    sizes = ", ".join(f"en-{x} {first['pools'][x]['n']}" for x in langs)
    lines.append(f"\npools: {sizes}, mixed {first['n']}; "
                 f"centroids from {first['reference']} reference pairs ({first['centroids']})")
    if all("layers_raw" in v["pools"][x] for v in rows.values() for x in langs):
        k = len(first["pools"][langs[0]]["layers_raw"])
        names = ["embeddings"] + [f"block {i}" for i in range(1, k)]
        lines += ["", "| run | pool | " + " | ".join(names) + " |", "|---|---|" + "---|" * k]
        for name, v in rows.items():
            for x in langs:
                p = v["pools"][x]
                lines.append(f"| {name} | en-{x} raw | " + " | ".join(f"{a:.4f}" for a in p["layers_raw"]) + " |")
                lines.append(f"| {name} | en-{x} centered | " + " | ".join(f"{a:.4f}" for a in p["layers_centered"]) + " |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--pool", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--layers", action="store_true", help="also score every layer (a diagnostic)")
    ap.add_argument("--views", default=None, help="the runs' prepare-text folder (default: the summary's, else prepare)")
    args = ap.parse_args(argv)
    if args.pool < 2:
        ap.error(f"--pool {args.pool}: need at least 2 candidates")
    torch.set_grad_enabled(False)
    rows = {str(r): evaluate(r, args.pool, args.seed, args.views, args.layers) for r in args.runs}
    print(tables(rows))
    print(f"\nchance MRR at {args.pool} candidates: {chance(args.pool):.4f}")
    names = list(rows)
    for other in names[1:]:  # paired differences: the first run minus each other one, same queries
        for lang, scores in paired(rows[names[0]], rows[other]).items():
            cells = ", ".join(f"{k} {m:+.4f} ± {se:.4f}" for k, (m, se, n) in scores.items())
            print(f"{names[0]} - {other}, en-{lang} ({scores['raw'][2]} queries): {cells}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
