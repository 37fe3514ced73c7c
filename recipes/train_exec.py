"""Train ``exec_lines`` (or ``exec_values``) on a trace folder from ``codept trace``, on CPU, and
report the falling loss and held-out accuracy next to the majority-class baseline.

  codept trace stdlib --out /tmp/traces
  python recipes/train_exec.py --traces /tmp/traces --steps 300 --out /tmp/train_exec

Algorithm:
  1. Views (codept.views.open_views, ``--docstrings examples``: each docstring shown as its
     doctest examples only) of every ``--traces`` folder, default stdlib tokenizer. Views whose source
     starts with ``--only`` (default ``stdlib:``) are split by source item (a module is wholly train
     or held out); ``--extra`` (comma-separated prefixes, e.g. ``pkg:,humaneval:``) adds views of
     other sources to TRAINING only: the held-out evaluation stays on ``--only`` sources.
  2. ``--dev`` (share of the training ``--only`` sources, by an independent hash) is set aside to
     pick the checkpoint: every ``eval_every`` steps its accuracy is measured and the best step's
     weights are kept (early stopping; the held-out fold is never looked at before the end).
  3. Each step draws ``batch`` training views (rng seeded by (seed, step)), applies the objective,
     packs the examples into rows of ``seq_len`` (codept.data.pack; long units split) and collates
     them; the Pretrainer's head gives (loss_sum, n); AdamW on loss_sum / n.
  4. After training: held-out accuracy per held-out source of the dev-picked weights (``model``)
     and of the last step (``model_last``). Baselines, fitted on TRAINING labels only and scored on
     the same held-out labels: ``majority`` (the most frequent class) and ``first_token`` (the most
     frequent class of the line's first token), each fitted on all training views (``[train]``)
     and, with ``--extra``, on the ``--only`` part alone (``[train_only]``); plus the held-out's
     own majority (an oracle no model could know in advance).
  5. ``--folds N``: every fold (each ``--only`` source held out once); pooled accuracy of each arm
     with a standard error from resampling held-out SOURCES (``--bootstrap``; the labels of one
     module are not independent), and model minus each baseline (difference, SE, 95% interval,
     share of resamples where the model is not above).
Output: ``<out>/train_exec.json`` (config, per fold: loss curve, dev evaluations, per-source
counts; the pooled summary, also printed). Measured (2026-12-01, 5 folds over 32 stdlib modules, +1,640
``pkg:`` training units, 150 steps x 8, dev-picked): pooled held-out 0.403 / 0.360 / 0.371 (seeds 0-2)
vs 0.340 majority, 0.342 first-token lookup (450 steps, seed 0: 0.388); the 95% interval over modules
includes 0 against the majority class; stdlib alone 0.306 (docs/results.md, "Execution").
Cost: about 45-80 s per fold on 2 threads at those settings. Not covered: distributed training,
checkpoints (use recipes/pretrain_code.py for those once a ``data.`` setting for traces exists).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

from codept.data.collate import collate
from codept.data.example import IGNORE
from codept.data.pack import pack
from codept.exec.views import split_by_source
from codept.model.pretrainer import Pretrainer, build_head
from codept.model.transformer import ModelConfig, Transformer
from codept.objectives import HEADS_OF, build
from codept.objectives.render import Vocab
from codept.tokenizer import default_tokenizer_dir, load_tokenizer
from codept.views import open_views


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--traces", type=Path, nargs="+", required=True, help="finished `codept trace` folders")
    p.add_argument("--objective", default="exec_lines", choices=("exec_lines", "exec_values"))
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch", type=int, default=16, help="views per step")
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--eval-every", type=int, default=50)
    p.add_argument("--only", default="stdlib:", help="source prefix of the views split into train / held out ('' = all)")
    p.add_argument("--extra", default="", help="comma-separated source prefixes of views added to TRAINING only "
                                                 "(e.g. pkg:,humaneval:)")
    p.add_argument("--fold", type=int, default=0, help="which held-out fold (sources hashed into 1/held-out folds)")
    p.add_argument("--held-out", type=float, default=0.2, help="share of sources held out per fold")
    p.add_argument("--folds", type=int, default=0, help="cross-validate: run folds 0..N-1 (held out 1/N each); 0 = one fold")
    p.add_argument("--dev", type=float, default=0.2, help="share of the TRAINING --only sources set aside to pick the "
                                                           "checkpoint (early stopping); 0 = the last step")
    p.add_argument("--docstrings", default="examples", choices=("examples", "full"),
                   help="what the model reads of each docstring: its doctest examples only, or all of it")
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--bootstrap", type=int, default=2000, help="resamples of held-out sources for standard errors")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="torch threads (1: no oversubscription on a shared box)")
    a = p.parse_args(argv)
    if not 0 <= a.dev < 1:
        p.error(f"--dev={a.dev}: must be in [0, 1)")
    if a.folds == 1 or a.folds < 0:
        p.error(f"--folds={a.folds}: need 0 (one fold) or >= 2")
    return a


def batches(views, objective, pad_id: int, seq_len: int, rng: np.random.Generator):
    examples = [e for v in views if (e := objective(v, rng)) is not None]
    return pack(examples, seq_len, pad_id) if examples else []


def evaluate(model: Pretrainer, head: str, rows: list[dict], chunk: int = 16) -> dict:
    model.eval()
    loss = n = correct = count = 0.0
    with torch.no_grad():
        for i in range(0, len(rows), chunk):
            m = model(collate(rows[i : i + chunk]), metrics=True)[head]
            loss, n = loss + float(m.loss_sum), n + float(m.n_valid)
            correct, count = correct + float(m.correct), count + float(m.count)
    model.train()
    return {"loss": loss / max(n, 1), "acc": correct / max(count, 1), "n": int(count), "correct": int(correct)}


def labelled(rows: list[dict], field: str) -> tuple[np.ndarray, np.ndarray]:
    """(token ids, labels) at every labelled position of `rows` (exec_lines: a line's first token)."""
    if not rows:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    ids = np.concatenate([r["input_ids"][r[field] != IGNORE] for r in rows]).astype(np.int64)
    return ids, np.concatenate([r[field][r[field] != IGNORE] for r in rows]).astype(np.int64)


def fit_baselines(rows_by_name: dict[str, list[dict]], field: str) -> dict:
    """Predictors fitted on TRAINING rows only, one per (name, kind): ``majority`` (the most frequent
    class) and ``first_token`` (the most frequent class of the line's first token; unseen tokens get
    the majority class). Each is a function token ids -> predicted classes."""
    out = {}
    for name, rows in rows_by_name.items():
        toks, labs = labelled(rows, field)
        values, counts = np.unique(labs, return_counts=True)
        major = int(values[np.argmax(counts)])
        table = {}
        for t in np.unique(toks):
            v, c = np.unique(labs[toks == t], return_counts=True)
            table[int(t)] = int(v[np.argmax(c)])
        out[f"majority[{name}]"] = lambda ids, m=major: np.full(len(ids), m)
        out[f"first_token[{name}]"] = lambda ids, t=table, m=major: np.array([t.get(int(i), m) for i in ids])
    return out


def bootstrap(per_source: dict[str, dict], arms: list[str], draws: int, seed: int) -> dict:
    """Pooled accuracy of each arm over held-out sources, with its standard error from resampling
    SOURCES (labels of one module are not independent), and each arm minus ``arms[0]``."""
    names = sorted(per_source)
    n = np.array([per_source[s]["n"] for s in names], dtype=np.float64)
    c = {a: np.array([per_source[s][a] for s in names], dtype=np.float64) for a in arms}
    idx = np.random.default_rng([seed, 99]).integers(0, len(names), size=(draws, len(names)))
    nb = n[idx].sum(1)
    acc = {a: c[a][idx].sum(1) / nb for a in arms}
    out = {"sources": len(names), "labels": int(n.sum())}
    for a in arms:
        out[a] = {"acc": round(float(c[a].sum() / n.sum()), 4), "se": round(float(acc[a].std()), 4)}
    for a in arms[1:]:
        d = acc[arms[0]] - acc[a]
        point = float((c[arms[0]].sum() - c[a].sum()) / n.sum())
        out[f"{arms[0]} - {a}"] = {"diff": round(point, 4), "se": round(float(d.std()), 4),
                                   "ci95": [round(float(np.quantile(d, 0.025)), 4), round(float(np.quantile(d, 0.975)), 4)],
                                   "p_not_above": round(float((d <= 0).mean()), 4)}
    return out


def main(argv=None) -> int:
    args = parse(argv)
    tok = load_tokenizer(default_tokenizer_dir())
    vocab = Vocab.from_tokenizer(tok)
    views, skipped = [], 0
    for folder in args.traces:
        v = open_views(folder, kind="trace", tokenizer=tok, docstrings=args.docstrings)
        views, skipped = views + list(v), skipped + v.skipped
    extras = tuple(p for p in args.extra.split(",") if p)
    pool = [v for v in views if v.source.startswith(args.only)]
    extra = [v for v in views if v.source.startswith(extras) and not v.source.startswith(args.only)] if extras else []
    folds = range(args.folds) if args.folds else [args.fold]
    held_out = 1 / args.folds if args.folds else args.held_out
    logs = []
    for fold in folds:
        train, val = split_by_source(pool, held_out, fold)
        dev = []
        if args.dev:
            train, dev = split_by_source(train, args.dev, 0, salt="dev")
        if not train or not val:
            print(f"train_exec: fold {fold}: {len(train)} train, {len(val)} held-out views: need both", file=sys.stderr)
            return 2
        logs.append({"fold": fold, "skipped": skipped, **run_fold(args, vocab, train, extra, dev, val)})
    args.out.mkdir(parents=True, exist_ok=True)
    summary = cv_summary(logs, args)
    (args.out / "train_exec.json").write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()},
                                                          "summary": summary, "folds": logs}, indent=1) + "\n")
    print(json.dumps(summary))
    return 0


def cv_summary(logs: list[dict], args) -> dict:
    """Pooled over folds (every held-out source once): the model at the dev-picked step and at the
    last step, and every baseline, each with a standard error over held-out sources."""
    per_source = {s: d for l in logs for s, d in l["per_source"].items()}
    has_last = all("model_last" in d for d in per_source.values())
    arms = ["model"] + (["model_last"] if has_last else []) + sorted(logs[0]["baselines"]) + ["held_out_majority"]
    out = bootstrap(per_source, arms, args.bootstrap, args.seed)
    out["folds"] = len(logs)
    out["per_fold"] = [{"fold": l["fold"], "train_views": l["train_views"], "extra_views": l["extra_views"],
                        "dev_views": l["dev_views"], "val_views": l["val_views"], "picked_step": l["picked_step"],
                        "model": round(l["model_acc"], 3), **{k: round(v, 3) for k, v in l["baselines"].items()}}
                       for l in logs]
    out["train_loss_first10_last10"] = [(round(float(np.mean(l["losses"][:10])), 3), round(float(np.mean(l["losses"][-10:])), 3))
                                        for l in logs]
    return out


def run_fold(args, vocab: Vocab, train: list, extra: list, dev: list, val: list) -> dict:
    objective = build(args.objective, vocab)
    head = HEADS_OF[args.objective][0]
    field = f"labels.{args.objective}"
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    cfg = ModelConfig(vocab_size=vocab.size, hidden=args.hidden, layers=args.layers, heads=4,
                      intermediate=2 * args.hidden, max_positions=args.seq_len, pad_id=vocab.pad_id,
                      dropout=args.dropout, attention_dropout=args.dropout)
    net = Transformer(cfg)
    model = Pretrainer(net, {head: build_head(head, net)})
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    pack_of = lambda vs, salt: batches(vs, objective, vocab.pad_id, args.seq_len, np.random.default_rng([args.seed, salt]))
    sources = sorted({v.source for v in val})
    val_rows = {s: pack_of([v for v in val if v.source == s], 1) for s in sources}
    dev_rows = pack_of(dev, 3)
    fit_on = {"train": pack_of(train + extra, 2)}
    if extra:
        fit_on["train_only"] = pack_of(train, 2)  # the --only part of training alone
    predictors = fit_baselines(fit_on, field)
    per_source = {}
    for s, rows in val_rows.items():
        toks, labs = labelled(rows, field)
        per_source[s] = {"n": int(len(labs)), **{k: int((p(toks) == labs).sum()) for k, p in predictors.items()},
                         "held_out_majority": int(np.bincount(labs).max()) if len(labs) else 0}
    n_val = sum(d["n"] for d in per_source.values())
    base = {k: sum(d[k] for d in per_source.values()) / max(n_val, 1) for k in predictors}
    log = {"train_views": len(train), "extra_views": len(extra), "dev_views": len(dev), "val_views": len(val),
           "val_sources": sources, "baselines": base, "losses": [], "evals": []}
    print(f"{len(train)} train (+{len(extra)} extra) / {len(dev)} dev / {len(val)} held-out views, {n_val} held-out "
          f"labels; baselines " + ", ".join(f"{k} {v:.3f}" for k, v in base.items()), flush=True)
    train = train + extra
    best, best_key, picked = None, None, args.steps
    t0 = time.time()
    for step in range(1, args.steps + 1):
        rng = np.random.default_rng([args.seed, 0, step])
        pick = [train[i] for i in rng.choice(len(train), size=min(args.batch, len(train)), replace=False)]
        loss_sum, n = model(collate(batches(pick, objective, vocab.pad_id, args.seq_len, rng)))[head]
        loss = loss_sum / n.clamp(min=1)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        log["losses"].append(round(float(loss.detach()), 4))
        if dev_rows and (step % args.eval_every == 0 or step == args.steps):
            ev = {"step": step, "dev": evaluate(model, head, dev_rows), "seconds": round(time.time() - t0, 1)}
            log["evals"].append(ev)
            key = (ev["dev"]["acc"], -ev["dev"]["loss"])
            if best_key is None or key > best_key:  # ties: the earlier step
                best_key, picked = key, step
                best = {k: v.detach().clone() for k, v in model.state_dict().items()}
            print(f"step {step}: train loss {np.mean(log['losses'][-args.eval_every:]):.3f}  dev loss "
                  f"{ev['dev']['loss']:.3f} acc {ev['dev']['acc']:.3f}  {ev['seconds']} s", flush=True)

    def score(name):
        for s, rows in val_rows.items():
            per_source[s][name] = evaluate(model, head, rows)["correct"] if rows else 0

    if best is not None:  # the held-out set is scored only here, after training: never used to pick
        score("model_last")
        model.load_state_dict(best)
    score("model")
    log.update(per_source=per_source, picked_step=picked,
               model_acc=sum(d["model"] for d in per_source.values()) / max(n_val, 1))
    print(f"held-out: model (step {picked}) {log['model_acc']:.3f}"
          + (f", last step {sum(d['model_last'] for d in per_source.values()) / max(n_val, 1):.3f}" if best is not None else ""),
          flush=True)
    return log


if __name__ == "__main__":
    sys.exit(main())
