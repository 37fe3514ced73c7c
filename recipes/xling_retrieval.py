"""Cross-lingual retrieval of finished tlm_cpu-style runs, side by side, from their last checkpoints.

  python recipes/xling_retrieval.py runs/tlm_cpu runs/tlm_cpu_mono [--pool 1000] [--seed 0]

For each run folder: rebuild the model from the preset's shape (``summary.json``: preset, vocab), load
the weights of the checkpoint ``latest`` names (DeepSpeed's ``mp_rank_00_model_states.pt``), open
the run's held-out pairs (its prepare-text folder: ``--views``, the summary's ``views``, else found by
preparing again (cached); the same path-hash split, ``val.holdout`` 0.2), and score retrieval two
ways (codept.text.retrieval):
  mixed        one pool of ``pool`` pairs of all target languages (the recipe's summary metric)
  per language one pool of ``pool`` pairs per target language: candidates share the query's target
               language, so a language-wide offset of the embeddings (language ids, script) cannot
               rank a whole language above the true target
Chance MRR with N candidates is H_N / N (0.0075 at N = 1000), printed alongside.
Output: a Markdown table on stdout and ``<run>/retrieval.json``. Cost: 2 x pool x languages
single-side forwards per run. Not covered: runs with settings other than the preset's shape.
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

from codept.data.views import open_views  # noqa: E402
from codept.model import transformer as T  # noqa: E402
from codept.objectives.render import Vocab  # noqa: E402
from codept.text.retrieval import embed, mrr_of, side_example  # noqa: E402
from codept.tokenizer import load_tokenizer  # noqa: E402


def load_model(run: Path, preset: str, vocab_size: int) -> T.Transformer:
    import pretrain_text as R

    settings, _ = R.configure(preset, [])
    model = T.Transformer(T.configure(settings.sections["model"], vocab_size=vocab_size))
    step = (run / "latest").read_text().strip()
    state = torch.load(run / step / "mp_rank_00_model_states.pt", map_location="cpu", weights_only=False)["module"]
    model.load_state_dict({k[6:]: v for k, v in state.items() if k.startswith("model.")})
    return model.eval()


def chance(n: int) -> float:
    return float(np.sum(1.0 / np.arange(1, n + 1)) / n)


def score(model, pairs, table, vocab, idx: np.ndarray) -> float:
    chosen = [pairs[int(i)] for i in idx]
    sep = vocab.id_of("sep")
    src = embed(model, [side_example(p.src, sep, table[p.src.lang], 62) for p in chosen], vocab.pad_id, "cpu")
    tgt = embed(model, [side_example(p.tgt, sep, table[p.tgt.lang], 62) for p in chosen], vocab.pad_id, "cpu")
    return float(mrr_of(src @ tgt.T).mean())


def evaluate(run: Path, pool: int, seed: int, views: str | None = None) -> dict:
    import pretrain_text as R

    s = json.loads((run / "summary.json").read_text())
    settings, _ = R.configure(s["preset"], [])
    table = R._tlm_table(settings)
    tok = load_tokenizer(s["tokenizer"])
    vocab = Vocab.from_tokenizer(tok)
    data = settings.sections["data"]
    from codept.text.prepare import prepare_text

    folder = views or s.get("views")
    if folder is None:  # a summary from before the recipe recorded its views: prepare (cached) finds them
        text, pairs_src, _ = R.corpus_sources(data)
        folder = prepare_text(text + pairs_src, tokenizer_dir=Path(s["tokenizer"]), progress=False)["out"]
    _, held = open_views(folder, kind="pair").split(settings.sections["val"].holdout)
    model = load_model(run, s["preset"], vocab.size)
    langs = np.array([held[i].tgt.lang for i in range(len(held))])
    rng = np.random.default_rng(seed)
    mixed = rng.permutation(len(held))[:pool]
    out = {"mixed": {"mrr": round(score(model, held, table, vocab, mixed), 4), "n": len(mixed)}}
    for lang in sorted(set(langs.tolist())):
        idx = np.random.default_rng(seed).permutation(np.flatnonzero(langs == lang))[:pool]
        out[lang] = {"mrr": round(score(model, held, table, vocab, idx), 4), "n": len(idx), "chance": round(chance(len(idx)), 4)}
    (run / "retrieval.json").write_text(json.dumps(out, indent=2) + "\n")
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--pool", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--views", default=None, help="the runs' prepare-text folder (default: the summary's, else prepare)")
    args = ap.parse_args(argv)
    torch.set_grad_enabled(False)
    rows = {str(r): evaluate(r, args.pool, args.seed, args.views) for r in args.runs}
    langs = sorted({k for v in rows.values() for k in v if k != "mixed"})
    print("| run | mixed pool MRR | " + " | ".join(f"en-{x} MRR (pool)" for x in langs) + " |")
    print("|---|---|" + "---|" * len(langs))
    for name, v in rows.items():
        cells = [f"{v[x]['mrr']:.4f} ({v[x]['n']})" for x in langs]
        print(f"| {name} | {v['mixed']['mrr']:.4f} ({v['mixed']['n']}) | " + " | ".join(cells) + " |")
    print(f"\nchance MRR at 1000 candidates: {chance(1000):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
