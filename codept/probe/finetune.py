"""``codept probe finetune --model M [--probe P ...]``: pretrain, then fine-tune: an encoder is trained
for a fixed budget with the contrastive code-search loss on (doc, code) pairs of TRAINING projects,
then scored on held-out projects' probes (the comparison CodeBERT and GraphCodeBERT report).

Rows of one run (each under the same protocol, every number in results.json):
  the model          fine-tuned, one run per seed;
  random-init        the same shape and tokenizer freshly initialised (seed = the fine-tune seed),
                     fine-tuned the same way (``--no-random`` to skip);
  references         zero-shot, not fine-tuned: ``bm25`` and any ``--reference`` model (e.g.
                     all-MiniLM-L6-v2), scored by the same evaluation.
Protocol (:class:`FinetuneConfig`, all of it in the output):
  1. Training pairs: ``--train`` is a probe folder (``codept probe build``) of training projects, or
     ``stdlib`` (default): the pairs of this interpreter's standard library OUTSIDE the in-domain
     hold-out (codept.probe.split, ``holdout`` 0.1: the files the default in-domain probe holds).
     Pairs whose normalised query or code also occurs in an evaluation probe are dropped (counted).
  2. Steps: ``steps`` optimizer steps of ``batch`` pairs, drawn without replacement per epoch in a
     seeded order; query tokens cut at ``query_len``, code at ``code_len``, both framed as the model's
     tokenizer frames text; mean-pooled states, cosine / ``temperature``; loss = symmetric InfoNCE
     over the in-batch candidates (query -> code and code -> query, mean of both). AdamW (lr,
     weight decay 0.01, betas 0.9/0.999), linear warm-up over ``warmup`` of the steps then linear
     decay to 0; dropout off; gradient norm clipped at 1.
  3. Evaluation: each probe (``--probe``; default the recipe's two: in-domain = held-out stdlib files,
     cross-project = networkx) with seeded pools of ``pool`` candidates (codept.probe.metrics), at most
     ``max_queries`` queries per language; MRR, nDCG@10 (one relevant code: 1 / log2(1 + rank) within
     the top 10), R@1/5/10; pessimistic ties.
  4. Intervals: across seeds, mean and a 95% Student-t interval (``seeds`` >= 2); per seed, a 95%
     percentile bootstrap over queries (``boot`` resamples). Both are in results.md.
Cost: steps x batch x (query_len + code_len) tokens of forward + backward (debug_cpu encoder, 32
pairs of 32 + 128 tokens: ~0.5-1 s per step on one core) per seed and row, plus one forward per probe
text. Not covered: hard negatives, cross-encoders, the CodeSearchNet / AdvTest splits themselves
(read them with ``codept probe bench``), larger batches than memory allows (no gradient caching).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from codept.argtypes import int_at_least, out_folder
from codept.probe import Pair, load_pairs
from codept.probe import metrics as M

HARNESS = "codept.probe.finetune 1"


@dataclass(frozen=True)
class FinetuneConfig:
    steps: int = 150
    batch: int = 32  # pairs per step (in-batch negatives: batch - 1 per query)
    lr: float = 1e-4
    warmup: float = 0.1  # share of the steps
    weight_decay: float = 0.01
    temperature: float = 0.05
    query_len: int = 32
    code_len: int = 128
    seeds: tuple = (0, 1, 2)
    pool: int = 1000
    max_queries: int = 1000
    boot: int = 1000
    holdout: float = 0.1  # the in-domain hold-out the stdlib training pairs avoid

    def __post_init__(self):
        if self.steps < 0 or self.batch < 2 or self.lr <= 0 or not 0 <= self.warmup < 1:
            raise ValueError(f"steps={self.steps} (>= 0), batch={self.batch} (>= 2), lr={self.lr} (> 0), "
                             f"warmup={self.warmup} (in [0, 1)): out of range")
        if not self.seeds:
            raise ValueError("seeds: give at least one")
        if self.temperature <= 0 or self.query_len < 4 or self.code_len < 8 or self.pool < 2:
            raise ValueError(f"temperature={self.temperature} (> 0), query_len={self.query_len} (>= 4), "
                             f"code_len={self.code_len} (>= 8), pool={self.pool} (>= 2): out of range")


# ---------------------------------------------------------------------------------------------
# 1. pairs


def stdlib_training_pairs(holdout: float) -> tuple[list[Pair], dict]:
    """Pairs of the stdlib files outside the in-domain hold-out (the default tokenizer's views; pairs
    are text, so any model can train on them)."""
    from codept.prepare import load_views, prepare
    from codept.probe.build import _pairs_per_lang
    from codept.probe.split import split_views
    from codept.tokenizer import default_tokenizer_dir

    summary = prepare([], tokenizer_dir=default_tokenizer_dir(), progress=False)
    views = load_views(summary["out"])
    train, held = split_views(views, holdout)
    pairs, _ = _pairs_per_lang(views.select(train))
    return pairs, {"source": "stdlib", "files": int(len(train)), "held_out_files": int(len(held)), "holdout": holdout}


def decontaminate(train: list[Pair], probes: dict[str, list[Pair]]) -> tuple[list[Pair], int]:
    """``train`` without pairs whose normalised query or whitespace-free code occurs in a probe."""
    from codept.probe.query import normalize_query

    def body(s: str) -> str:
        return "".join(s.split())

    qs = {normalize_query(p.query) for ps in probes.values() for p in ps}
    bs = {body(p.code) for ps in probes.values() for p in ps}
    kept = [p for p in train if normalize_query(p.query) not in qs and body(p.code) not in bs]
    return kept, len(train) - len(kept)


# ---------------------------------------------------------------------------------------------
# 2. training


def _batch(enc, texts: list[str], max_len: int, device):
    import torch

    ids = enc.encode(texts, max_len)
    t = max(1, max(len(x) for x in ids))
    x = torch.full((len(ids), t), enc.config.pad_id, dtype=torch.long)
    m = torch.zeros((len(ids), t), dtype=torch.bool)
    for r, row in enumerate(ids):
        x[r, : len(row)] = torch.tensor(row, dtype=torch.long)
        m[r, : len(row)] = True
    return x.to(device), m.to(device)


def embed(enc, texts: list[str], max_len: int, device="cpu", batch_size: int = 64, grad: bool = False):
    """(N, C) L2-normalised mean-pooled final states (a tensor; with grad when ``grad``)."""
    import torch

    from codept.probe.encoders import mean_pool

    model = enc.model
    out = []
    ctx = torch.enable_grad() if grad else torch.inference_mode()
    with ctx:
        for s in range(0, len(texts), batch_size):
            x, m = _batch(enc, texts[s:s + batch_size], max_len, device)
            h = model(x, m.long(), prefix=torch.ones_like(m))
            out.append(torch.nn.functional.normalize(mean_pool(h, m).float(), dim=-1))
    return torch.cat(out) if out else torch.zeros(0, enc.config.hidden)


def lr_at(step: int, cfg: FinetuneConfig) -> float:
    """Linear warm-up over ceil(warmup x steps) steps, then linear decay to 0 at ``steps``."""
    w = math.ceil(cfg.warmup * cfg.steps)
    if step < w:
        return cfg.lr * (step + 1) / w
    return cfg.lr * max(0.0, (cfg.steps - step) / max(1, cfg.steps - w))


def finetune(enc, pairs: list[Pair], cfg: FinetuneConfig, seed: int, device="cpu", log=None) -> dict:
    """Fine-tune ``enc.model`` in place; returns {"loss_first", "loss_last" (mean of the first / last
    tenth), "seconds", "epochs"}."""
    import torch

    model = enc.model.to(device).train()
    for mod in model.modules():  # dropout off (module docstring, step 2)
        if isinstance(mod, torch.nn.Dropout):
            mod.p = 0.0
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    rng = np.random.default_rng([seed, 22])
    order, k, losses = rng.permutation(len(pairs)), 0, []
    t0 = time.perf_counter()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for step in range(cfg.steps):
            if k + cfg.batch > len(order):
                order, k = rng.permutation(len(pairs)), 0
            idx = order[k:k + cfg.batch]
            k += cfg.batch
            q = embed(enc, [pairs[i].query for i in idx], cfg.query_len, device, len(idx), grad=True)
            c = embed(enc, [pairs[i].code for i in idx], cfg.code_len, device, len(idx), grad=True)
            s = q @ c.T / cfg.temperature  # (B, B)
            y = torch.arange(len(idx), device=s.device)
            loss = 0.5 * (torch.nn.functional.cross_entropy(s, y) + torch.nn.functional.cross_entropy(s.T, y))
            for g in opt.param_groups:
                g["lr"] = lr_at(step, cfg)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            losses.append(float(loss.detach()))
            if log and (step + 1) % max(1, cfg.steps // 5) == 0:
                log(f"  step {step + 1}/{cfg.steps} loss {np.mean(losses[-10:]):.3f}")
    model.eval()
    n = max(1, len(losses) // 10)
    return {"loss_first": round(float(np.mean(losses[:n])), 4) if losses else None,
            "loss_last": round(float(np.mean(losses[-n:])), 4) if losses else None,
            "seconds": round(time.perf_counter() - t0, 1), "epochs": round(cfg.steps * cfg.batch / max(1, len(pairs)), 2)}


# ---------------------------------------------------------------------------------------------
# 3-4. evaluation and intervals


def ndcg10(r: np.ndarray) -> np.ndarray:
    """Per-query nDCG@10 with one relevant item at 1-based rank r."""
    r = np.asarray(r, dtype=np.float64)
    return np.where(r <= 10, 1.0 / np.log2(1.0 + r), 0.0)


def rank_metrics(r: np.ndarray) -> dict:
    r = np.asarray(r)
    return {"mrr": float(np.mean(1.0 / r)), "ndcg10": float(ndcg10(r).mean()),
            **{f"r{k}": float(np.mean(r <= k)) for k in M.KS}, "n": int(len(r))}


def probe_ranks(score_prepare, pairs: list[Pair], cfg: FinetuneConfig) -> dict[str, np.ndarray]:
    """Ranks per language of pools of ``cfg.pool`` candidates (``score_prepare(queries, codes) ->
    score_fn``), at most ``max_queries`` pairs per language (seeded subset, seed 0)."""
    from codept.probe.run import _by_lang, _subsample

    out = {}
    for lang, idx in _by_lang(pairs).items():
        idx = idx[_subsample(len(idx), cfg.max_queries, 0)]
        sub = [pairs[i] for i in idx]
        fn = score_prepare([p.query for p in sub], [p.code for p in sub])
        out[lang] = M.score_pools(fn, M.pools(len(sub), cfg.pool, 0), cfg.pool)
    return out


def bootstrap_ci(r: np.ndarray, boot: int, seed: int = 0) -> dict:
    """95% percentile intervals of MRR and nDCG@10 over ``boot`` resamples of the queries."""
    rng = np.random.default_rng([seed, 33])
    draws = rng.integers(0, len(r), size=(boot, len(r)))
    rr, nd = (1.0 / r)[draws].mean(1), ndcg10(r)[draws].mean(1)
    return {"mrr": [float(np.percentile(rr, 2.5)), float(np.percentile(rr, 97.5))],
            "ndcg10": [float(np.percentile(nd, 2.5)), float(np.percentile(nd, 97.5))]}


def t_interval(values: list[float]) -> dict:
    """Mean and 95% Student-t half-width over seeds (None for one seed)."""
    from statistics import mean, stdev

    t95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}
    n = len(values)
    half = t95.get(n - 1, 1.96) * stdev(values) / math.sqrt(n) if n > 1 else None
    return {"mean": float(mean(values)), "half95": half, "n": n, "values": [float(v) for v in values]}


def score_encoder(enc, probes: dict[str, list[Pair]], cfg: FinetuneConfig, device="cpu") -> dict:
    """{probe: {metrics over all languages, "ci" (bootstrap), "by_lang"}} of a dense encoder."""
    from codept.probe.run import dense_scorer

    def prepare(q, c):
        return dense_scorer(embed(enc, q, cfg.query_len, device).cpu().numpy(),
                            embed(enc, c, cfg.code_len, device).cpu().numpy())

    return {name: _summary(probe_ranks(prepare, pairs, cfg), cfg) for name, pairs in probes.items()}


def _summary(ranks: dict[str, np.ndarray], cfg: FinetuneConfig) -> dict:
    allr = np.concatenate(list(ranks.values()))
    return {**rank_metrics(allr), "ci": bootstrap_ci(allr, cfg.boot),
            "by_lang": {k: rank_metrics(v) for k, v in ranks.items()},
            "pool": {k: int(min(len(v), cfg.pool)) for k, v in ranks.items()}}


def score_reference(spec: str, probes: dict[str, list[Pair]], cfg: FinetuneConfig) -> dict:
    """A zero-shot reference (bm25, or any `codept probe run` model) under the same evaluation."""
    from codept.probe.run import build_scorer

    scorer = build_scorer(spec, max_len=cfg.code_len, query_max_len=cfg.query_len, device="cpu")
    return {"desc": scorer.desc,
            "probes": {n: _summary(probe_ranks(scorer.prepare, ps, cfg), cfg) for n, ps in probes.items()}}


# ---------------------------------------------------------------------------------------------
# the command


def default_probe_dirs(holdout: float) -> dict[str, Path]:
    """The recipe's default probes (codept.probe.defaults): in-domain stdlib hold-out + networkx."""
    from codept.prepare import load_views, prepare
    from codept.probe.defaults import ProbeConfig, default_probes
    from codept.tokenizer import default_tokenizer_dir

    summary = prepare([], tokenizer_dir=default_tokenizer_dir(), progress=False)
    return default_probes(load_views(summary["out"]), summary["cache_key"], summary["out"], ProbeConfig(holdout=holdout))


def run_finetune(model: str, probe_dirs: dict[str, Path], train: str = "stdlib", cfg: FinetuneConfig = FinetuneConfig(),
                 random: bool = True, references: tuple = ("bm25",), tokenizer=None, log=None, like: str = "") -> dict:
    """results.json dict (module docstring); ``like``: with model ``random``, the model whose shape and
    tokenizer it copies (then no second random row)."""
    from codept.probe.encoders import load_encoder

    log = log or (lambda s: None)
    t0 = time.perf_counter()
    probes = {n: load_pairs(d) for n, d in probe_dirs.items()}
    if train == "stdlib":
        pairs, train_meta = stdlib_training_pairs(cfg.holdout)
    else:
        pairs, train_meta = load_pairs(train), {"source": str(Path(train).resolve())}
    pairs, dropped = decontaminate(pairs, probes)
    if len(pairs) < cfg.batch:
        raise ValueError(f"--train {train}: {len(pairs)} training pairs after decontamination < batch={cfg.batch}")
    train_meta.update(pairs=len(pairs), dropped_as_in_probes=dropped)
    rows = {}
    random = random and not model.startswith("random")  # a random model's random-init row is itself
    specs = [("random" if model == "random" else "model", model)] + ([("random", "random")] if random else [])
    for row, spec in specs:
        runs = []
        for seed in cfg.seeds:
            ref = load_encoder(like or model, tokenizer=tokenizer) if spec == "random" else None
            enc = load_encoder(spec, like=ref, seed=seed, tokenizer=tokenizer)
            log(f"[finetune] {row} seed {seed}: {cfg.steps} steps of {cfg.batch} pairs")
            fit = finetune(enc, pairs, cfg, seed, log=log)
            runs.append({"seed": seed, "train": fit, "probes": score_encoder(enc, probes, cfg)})
            log(f"[finetune] {row} seed {seed}: " + ", ".join(f"{n} MRR {r['mrr']:.3f}" for n, r in runs[-1]["probes"].items()))
        rows[row] = {"desc": enc.desc, "runs": runs, "summary": {
            n: {m: t_interval([r["probes"][n][m] for r in runs]) for m in ("mrr", "ndcg10")} for n in probes}}
    zero_shot = {}
    for spec in references:
        log(f"[finetune] zero-shot reference {spec}")
        zero_shot[Path(spec).name if "/" in spec else spec] = score_reference(spec, probes, cfg)
    return {"harness": HARNESS, "protocol": asdict(cfg), "train": train_meta,
            "probes": {n: {"dir": str(Path(d).resolve()), "pairs": len(probes[n])} for n, d in probe_dirs.items()},
            "finetuned": rows, "zero_shot": zero_shot, "seconds": round(time.perf_counter() - t0, 1)}


def _cell(s: dict) -> str:
    return f"{s['mean']:.3f}" + (f" ± {s['half95']:.3f}" if s["half95"] is not None else "")


def markdown(result: dict) -> str:
    p, names = result["protocol"], list(result["probes"])
    lines = [f"# fine-tune protocol ({result['harness']})", "",
             f"{p['steps']} steps x {p['batch']} pairs, AdamW lr {p['lr']} (warm-up {p['warmup']:.0%}, linear decay), "
             f"wd {p['weight_decay']}, temperature {p['temperature']}, query/code tokens {p['query_len']}/{p['code_len']}, "
             f"seeds {list(p['seeds'])}; training pairs: {result['train']['pairs']} ({result['train']['source']}); "
             "fine-tuned rows: mean ± 95% t-interval over seeds; zero-shot rows: [95% bootstrap over queries]", "",
             "| row | " + " | ".join(f"{n} MRR | {n} nDCG@10" for n in names) + " |",
             "|---|" + "---|---|" * len(names)]
    for row, r in result["finetuned"].items():
        cells = [f"{_cell(r['summary'][n]['mrr'])} | {_cell(r['summary'][n]['ndcg10'])}" for n in names]
        lines.append(f"| {row} ({r['desc']['kind']}) fine-tuned | " + " | ".join(cells) + " |")
    for name, r in result["zero_shot"].items():
        cells = []
        for n in names:
            s = r["probes"][n]
            cells.append(f"{s['mrr']:.3f} [{s['ci']['mrr'][0]:.3f}, {s['ci']['mrr'][1]:.3f}] | "
                         f"{s['ndcg10']:.3f} [{s['ci']['ndcg10'][0]:.3f}, {s['ci']['ndcg10'][1]:.3f}]")
        lines.append(f"| {name} zero-shot | " + " | ".join(cells) + " |")
    any_row = next(iter(result["finetuned"].values()), None)
    if any_row:
        s = any_row["runs"][0]["probes"]
        lines += ["", "pools: " + "; ".join(f"{n}: {s[n]['n']} queries, pool " + ", ".join(f"{k} {v}" for k, v in s[n]["pool"].items())
                                           for n in names)]
        for row, r in result["finetuned"].items():
            lines.append(f"- {row}: per seed MRR " + "; ".join(
                f"s{x['seed']} " + ", ".join(f"{n} {x['probes'][n]['mrr']:.3f}" for n in names) +
                f" (loss {x['train']['loss_first']} -> {x['train']['loss_last']}, {x['train']['seconds']} s)"
                for x in r["runs"]))
    return "\n".join(lines) + "\n"


def add_arguments(p: argparse.ArgumentParser) -> None:
    d = FinetuneConfig()
    p.add_argument("--model", required=True, help="a codept run/checkpoint folder, a transformers BERT/RoBERTa "
                   "folder, or random:PRESET")
    p.add_argument("--probe", nargs="+", default=[], help="evaluation probe folders (codept probe build) of held-out "
                   "projects; default: the recipe's in-domain (held-out stdlib files) and cross-project (networkx)")
    p.add_argument("--train", default="stdlib", help="training pairs: a probe folder of training projects, or "
                   "'stdlib' (the stdlib outside the in-domain hold-out; default)")
    helps = {"steps": "optimizer steps", "batch": "pairs per step (in-batch negatives)", "query_len": "query tokens",
             "code_len": "code tokens", "pool": "candidates per pool", "max_queries": "queries per language",
             "boot": "bootstrap resamples over queries", "lr": "peak learning rate (AdamW)",
             "warmup": "share of the steps warming up", "weight_decay": "AdamW weight decay",
             "temperature": "InfoNCE temperature"}
    for f in ("steps", "batch", "query_len", "code_len", "pool", "max_queries", "boot"):
        p.add_argument(f"--{f.replace('_', '-')}", type=int_at_least(1 if f != "steps" else 0), default=getattr(d, f),
                       help=f"{helps[f]} (default {getattr(d, f)})")
    for f in ("lr", "warmup", "weight_decay", "temperature"):
        p.add_argument(f"--{f.replace('_', '-')}", type=float, default=getattr(d, f), help=f"{helps[f]} (default {getattr(d, f)})")
    p.add_argument("--seeds", type=int, nargs="+", default=list(d.seeds), help="fine-tune seeds (default 0 1 2)")
    p.add_argument("--no-random", action="store_true", help="skip the random-init row")
    p.add_argument("--like", default="", help="with --model random: the model whose shape and tokenizer to copy")
    p.add_argument("--reference", nargs="*", default=["bm25"], help="zero-shot rows (bm25, any `probe run` model)")
    p.add_argument("--tokenizer", help="tokenizer folder for a codept checkpoint (default: its own)")
    p.add_argument("--out", type=out_folder, help="output folder (default runs/finetune/<model name>)")


def main(args) -> int:
    try:
        cfg = FinetuneConfig(**{f: getattr(args, f) for f in ("steps", "batch", "query_len", "code_len", "pool",
                                                               "max_queries", "boot", "lr", "warmup", "weight_decay",
                                                               "temperature")}, seeds=tuple(args.seeds))
        dirs = ({Path(d).name: Path(d) for d in args.probe} if args.probe else default_probe_dirs(cfg.holdout))
        result = run_finetune(args.model, dirs, args.train, cfg, not args.no_random, tuple(args.reference),
                              args.tokenizer, log=lambda s: print(s, file=sys.stderr, flush=True), like=args.like)
    except (ValueError, FileNotFoundError) as e:
        print(f"codept probe finetune: {e}", file=sys.stderr)
        return 2
    out = args.out or Path("runs/finetune") / Path(args.model).name.replace(":", "-")
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / "results.md").write_text(markdown(result))
    print(markdown(result))
    print(f"-> {out}/results.json, results.md ({result['seconds']} s)")
    return 0
