"""Ablations on English text: short runs of recipes/pretrain_text.py that differ only in the objective.

  python recipes/ablate_text.py [--steps 400] [--ranks 2] [--out runs/ablate_text] [key=value ...]
  python recipes/ablate_text.py --mixtures [SPEC ...] [--steps 100] [--out runs/ablate_text_regimes]

Two modes. Default: the NSP-vs-SOP question (below). ``--mixtures``: the MLM-vs-AR question on English,
one run per SPEC (``"MIXTURE [key=value ...]"`` as in recipes/ablate.py; with no SPEC the six regimes
of REGIMES: mlm, ar, unilm, glm, plm, electra on ``@text``). Their held-out losses answer different
targets (masked tokens, next tokens, blanks, permuted tails, replaced tokens) and are not comparable
across rows, so every run's encoder is also scored by one probe that reads only the encoder
(:func:`doc_probe`): held-out continuation retrieval. Each held-out document (``val.holdout`` by content
hash, never trained on) of >= 2 * MIN_HALF tokens gives a pair: its first ``2 * half`` tokens
(``half`` <= MAX_HALF) cut in two; the first half's mean-pooled final states must retrieve the second
half among every pair's second half (pool = the eligible held-out documents; MRR; chance ~ H(n) / n).
Scored under bidirectional attention (as the code probes score every encoder) and under causal
attention (the attention an ``ar`` model was trained with). Reference rows: the untrained model of
the same config and seed (zero residual init: a bag of token + position vectors) and a lexical
tf-idf cosine over the same token ids. Cached per run in ``doc_probe.json``.

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
2 CPU cores; a regime run of 100 steps ~0.5-1 minute; the doc probe adds 2 x ~400 forward passes of
<= 63 tokens per run, seconds). Limits: one
seed per run; accuracies within ~2 standard errors are not distinguishable; the doc probe rewards
what mean pooling keeps (largely the words of a document), not what a fine-tuned model would learn.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "recipes"))

from ablate import FIXED, merge, parse_run, run_in, run_name  # noqa: E402

# the MLM-vs-AR regimes on English; glm / plm examples must fit one row (seq_len 128 in english_cpu)
REGIMES = ["mlm@text:1", "ar@text:1", "unilm@text:1", "glm@text:1 objective.glm.max_tokens=128",
           "plm@text:1 objective.plm.max_tokens=128", "electra@text:1"]
MIN_HALF, MAX_HALF = 16, 62  # doc probe: tokens per half (a document needs >= 2 * MIN_HALF)

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


def check_settings(runs: dict, steps: int, overrides: list[str]) -> dict:
    """Every run's settings parsed by the recipe's own parser before any launch: {name: Settings}."""
    from codept.train.settings import ConfigError
    from pretrain_text import configure

    out = {}
    for name, items in runs.items():
        try:
            out[name] = configure("english_cpu", merge([f"steps={steps}", *overrides], items))[0]
        except ConfigError as e:
            raise SystemExit(f"[ablate_text] run {name!r}: {e}") from None
    return out


# -- the doc probe: one metric that reads only the encoder ----------------------------------------


def doc_pairs(ids: list[np.ndarray], min_half: int = MIN_HALF, max_half: int = MAX_HALF) -> tuple[list, list]:
    """(first halves, second halves) of every document of >= 2 * min_half tokens: its first 2 * half
    tokens, half = min(len // 2, max_half), cut in the middle."""
    if min_half < 1 or max_half < min_half:
        raise ValueError(f"min_half={min_half}, max_half={max_half}: need 1 <= min_half <= max_half")
    a, b = [], []
    for x in ids:
        x = np.asarray(x)
        half = min(len(x) // 2, max_half)
        if half >= min_half:
            a.append(x[:half])
            b.append(x[half:2 * half])
    return a, b


def tfidf_mrr(a: list[np.ndarray], b: list[np.ndarray], vocab_size: int) -> np.ndarray:
    """(n,) reciprocal ranks of the lexical reference: tf-idf cosine over token ids (idf from the b side)."""
    from codept.text.retrieval import mrr_of

    def counts(xs):
        m = np.zeros((len(xs), vocab_size))
        for i, x in enumerate(xs):
            np.add.at(m[i], x, 1.0)
        return m

    qa, cb = counts(a), counts(b)
    idf = np.log((1 + len(b)) / (1 + (cb > 0).sum(0))) + 1
    qa, cb = qa * idf, cb * idf
    qa /= np.linalg.norm(qa, axis=1, keepdims=True).clip(1e-12)
    cb /= np.linalg.norm(cb, axis=1, keepdims=True).clip(1e-12)
    return mrr_of(qa @ cb.T)


def encoder_mrr(model, a: list[np.ndarray], b: list[np.ndarray], vocab, causal: bool) -> np.ndarray:
    """(n,) reciprocal ranks of the mean-pooled final states (codept.text.retrieval.embed), each half
    + [SEP] alone in its row, attention bidirectional or causal (prefix all False)."""
    import torch

    from codept.data.example import Example
    from codept.text.retrieval import embed, mrr_of

    sep = vocab.id_of("sep")

    def examples(xs):
        out = []
        for x in xs:
            ids = np.concatenate([x, [sep]]).astype(np.int32)
            out.append(Example(ids, np.full(len(ids), not causal)))
        return out

    device = torch.device("cpu")
    return mrr_of(embed(model, examples(a), vocab.pad_id, device) @ embed(model, examples(b), vocab.pad_id, device).T)


def doc_probe(run_dir: Path, views_dir: str, holdout: float, seed: int, references: bool = False) -> dict:
    """The doc probe of a finished run (its final checkpoint), cached in run_dir/doc_probe.json; with
    `references`, also the untrained model of the same config and seed and the tf-idf row."""
    cache = run_dir / "doc_probe.json"
    if cache.is_file():
        cached = json.loads(cache.read_text())
        if not references or "random" in cached:
            return cached
    from codept.views import open_views
    from codept.model import transformer as T
    from codept.objectives.render import Vocab
    from codept.tokenizer import load_tokenizer
    from codept.train import checkpoint
    from codept.train.export import load_trained

    model, _, tok_dir = load_trained(run_dir)
    vocab = Vocab.from_tokenizer(load_tokenizer(tok_dir))
    _, held = open_views(views_dir, kind="text").split(holdout)
    a, b = doc_pairs([held[i].input_ids for i in range(len(held))])
    if len(a) < 2:
        raise SystemExit(f"[ablate_text] doc probe of {run_dir}: {len(a)} held-out documents of >= {2 * MIN_HALF} tokens; need 2")
    r = lambda rr: round(float(np.mean(rr)), 4)  # noqa: E731
    out = {"n": len(a), "chance": r(1.0 / np.arange(1, len(a) + 1)),
           "bidirectional": r(encoder_mrr(model, a, b, vocab, causal=False)),
           "causal": r(encoder_mrr(model, a, b, vocab, causal=True))}
    if references:
        checkpoint.seed_all(seed, 0)  # the recipe's initial weights: same seed, same config
        fresh = T.Transformer(model.config).eval()
        out["random"] = {"bidirectional": r(encoder_mrr(fresh, a, b, vocab, causal=False)),
                         "causal": r(encoder_mrr(fresh, a, b, vocab, causal=True))}
        out["tfidf"] = r(tfidf_mrr(a, b, vocab.size))
    cache.write_text(json.dumps(out, indent=2) + "\n")
    return out


def regimes_table(results: dict[str, dict]) -> str:
    lines = ["| run | doc-probe MRR, bidirectional | doc-probe MRR, causal | held-out loss / acc (n) per head | "
             "final loss | wall s |", "|---|---|---|---|---|---|"]
    for name, s in results.items():
        val = s.get("val") or {}
        heads = ", ".join(f"{h} {m['loss']} / {m['acc']} ({m['n']})" for h, m in sorted(val.items())
                          if isinstance(m, dict) and "loss" in m)
        d = s["doc_probe"]
        lines.append(f"| {name} | {d['bidirectional']:.3f} | {d['causal']:.3f} | {heads} | {s['loss_last']} | {s['seconds']} |")
    ref = next((s["doc_probe"] for s in results.values() if "random" in s["doc_probe"]), None)
    if ref:
        lines.append(f"| *untrained (same config, seed)* | {ref['random']['bidirectional']:.3f} | "
                     f"{ref['random']['causal']:.3f} | | | |")
        lines.append(f"| *tf-idf over token ids* | {ref['tfidf']:.3f} | | | | |")
    any_run = next(iter(results.values()))
    d = any_run["doc_probe"]
    return ("\n".join(lines) + f"\n\ndoc probe: {d['n']} held-out documents (pool {d['n']}, chance MRR "
            f"{d['chance']:.3f}); {any_run['steps']} steps per run, preset {any_run['preset']}, held-out "
            f"documents: {any_run['held_docs']}.\n")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--out", type=Path, default=None, help="default runs/ablate_text (runs/ablate_text_regimes with --mixtures)")
    ap.add_argument("--mixtures", nargs="*", default=None, metavar="SPEC",
                    help="the regimes mode: one run per 'MIXTURE [key=value ...]' (no SPEC: REGIMES)")
    ap.add_argument("overrides", nargs="*", help="passed to every run (key=value, model.x=, data.x=, val.x=)")
    args = ap.parse_args(argv)
    if any(o.startswith(FIXED) for o in args.overrides):
        raise SystemExit("data.mixture, out_dir and steps are set by the ablation itself")
    regimes = args.mixtures is not None
    out = args.out or REPO / "runs" / ("ablate_text_regimes" if regimes else "ablate_text")
    if regimes:
        runs = {}
        for spec in args.mixtures or REGIMES:
            mixture, own = parse_run(spec)
            runs[spec] = [f"data.mixture={mixture}", *own]
        folders = {spec: out / run_name(spec) for spec in runs}
    else:
        runs, folders = RUNS, {name: out / name for name in RUNS}
    if len(set(folders.values())) < len(folders):
        raise SystemExit(f"[ablate_text] two runs share a folder: {sorted(map(str, folders.values()))}")
    settings = check_settings(runs, args.steps, args.overrides)
    results = {}
    for i, (name, items) in enumerate(runs.items()):
        results[name] = run_in("recipes/pretrain_text.py", name, folders[name], args.ranks,
                               merge([f"steps={args.steps}", *args.overrides], items))
        if regimes:
            st = settings[name]
            results[name]["doc_probe"] = doc_probe(folders[name], results[name]["views"], st.sections["val"].holdout,
                                                   st.run.seed, references=i == 0)
    md = regimes_table(results) if regimes else table(results)
    args.out = out
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "ablation.md").write_text(md)
    (args.out / "ablation.json").write_text(json.dumps(results, indent=2) + "\n")
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
