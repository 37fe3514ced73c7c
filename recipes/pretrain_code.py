"""Pretrain a code encoder: ``deepspeed --num_gpus 2 recipes/pretrain_code.py [--preset NAME] [key=value ...]``.

With no arguments (preset ``debug_cpu``) it prepares the running interpreter's standard library
(cached), trains (cached) a tokenizer, trains a small encoder with the default code-objective mixture
(``code_doc``: code <-> docstring contrastive pairs; see DataConfig) on the launched ranks (gloo on CPU, NCCL on GPUs) for a few minutes, and prints
a summary. Steps:
  1. join the process group; rank 0 prepares the views (codept.prepare, cached), the others wait;
  2. one stream per rank: objectives x views, exact mixture, best-fit packing (codept.data.stream);
  3. model + heads (codept.model), DeepSpeed engine with batch/optimizer/schedule derived from the
     RunConfig (codept.train.config / engine); resume from ``out_dir/latest`` if present;
  4. each optimizer step: k micro-batches of ``micro_batch_rows`` rows, loss normalised over the
     whole step (codept.train.engine.train_step); checkpoints with the stream state and RNG;
  5. code-search probes (codept.probe.defaults): in-domain = held-out files of the training corpus (never
     trained on), cross-project = networkx; a cheap probe every ``probe.every`` steps is logged as
     ``eval/mrr_<lang>`` (cross-project) and ``eval/in_domain/mrr_<lang>``; the final probe compares
     the model with BM25 and a random-init encoder (cached baselines);
  6. rank 0 logs (progress bar, TensorBoard scalars, loss-curve PNG) and prints the summary.
Overrides: RunConfig fields (``steps=200``), model fields with ``model.`` (``model.layers=2``), data
settings with ``data.`` (``data.mixture=mlm:2,syntax_span:1``), probe settings with ``probe.``
(``probe.every=0``, ``probe.project=``); unknown keys are refused.
Continued pretraining: ``--init-from DIR`` starts from a transformers BERT/RoBERTa encoder folder
(config.json, weights, tokenizer.json), e.g. all-MiniLM-L6-v2: its shape and tokenizer replace the
preset's (views are prepared with that tokenizer, cached separately), its MLM head is loaded when the
folder has one. Model overrides may then change only dropout, attention path and checkpointing.
Multi-node: ``deepspeed --hostfile hosts recipes/pretrain_code.py --preset base_8xh200`` (README).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")  # 2 ranks on 2 cores: no thread oversubscription
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402

from codept.data.collate import collate  # noqa: E402
from codept.data.stream import Mixture, PackedStream  # noqa: E402
from codept.data.views import view_source  # noqa: E402
from codept.model import transformer as T  # noqa: E402
from codept.model.heads import Pretrainer, build_head, target_counts  # noqa: E402
from codept.model.hf import init_from, load_mlm_head  # noqa: E402
from codept.objectives import HEADS_OF  # noqa: E402
from codept.objectives import build as build_objective  # noqa: E402
from codept.objectives.render import Vocab  # noqa: E402
from codept.probe import load_pairs  # noqa: E402
from codept.probe.defaults import ProbeConfig, baseline, default_probes  # noqa: E402
from codept.probe.run import Probe  # noqa: E402
from codept.probe.split import split_views  # noqa: E402
from codept.prepare import load_views, prepare  # noqa: E402
from codept.tokenizer import default_tokenizer_dir, load_tokenizer  # noqa: E402
from codept.train import checkpoint  # noqa: E402
from codept.train import engine as E  # noqa: E402
from codept.train.config import RunConfig, override  # noqa: E402


@dataclasses.dataclass(frozen=True)
class DataConfig:
    # objective:weight,... (codept.objectives.OBJECTIVES). The default is what the default probes reward:
    # measured on debug_cpu, 200 steps, 2 ranks (README "Probes"), mlm + syntax_span leave mean-pooled
    # states below a random-init encoder on both probes and pull a code_doc mixture down with them
    # (mlm:1,syntax_span:1,code_doc:200: 0.04 / 0.05 at step 100, cheap protocol, against 0.13 / 0.11
    # for code_doc alone). Pass data.mixture=mlm:1,syntax_span:1 for the token-level objectives.
    mixture: str = "code_doc:1"
    sources: str = ""  # comma-separated prepare sources; empty = this interpreter's stdlib
    buffer: int = 256  # documents packed together (codept.data.pack)


# -- presets: plain functions named for size and hardware ----------------------------------------


def debug_cpu():
    # 8 rows per rank and micro-step: ~20 code_doc pairs per rank, ~40 candidates with both ranks'
    run = RunConfig(seq_len=256, micro_batch_rows=8, global_batch_rows=16, steps=200, lr=1e-3, warmup_steps=20,
                    schedule="cosine", ds_config="zero2", precision="fp32", out_dir="runs/debug_cpu",
                    save_every=100, keep_last=2, log_every=10)
    return run, T.debug_cpu(), DataConfig()


def small_1xh200():
    run = RunConfig(seq_len=512, micro_batch_rows=64, global_batch_rows=256, steps=20000, lr=6e-4,
                    warmup_steps=1000, ds_config="zero2_bf16", out_dir="runs/small_1xh200", save_every=1000,
                    keep_last=3, log_every=50)
    return run, T.small_1xh200(attention="sdpa"), DataConfig(buffer=2048)


def base_8xh200():
    run = RunConfig(seq_len=1024, micro_batch_rows=32, global_batch_rows=2048, steps=100000, lr=4e-4,
                    warmup_steps=4000, ds_config="zero2_bf16", out_dir="runs/base_8xh200", save_every=2000,
                    keep_last=3, log_every=100)
    return run, T.base_8xh200(attention="sdpa"), DataConfig(buffer=4096)


PRESETS = {"debug_cpu": debug_cpu, "small_1xh200": small_1xh200, "base_8xh200": base_8xh200}


def configure(preset: str, items: list[str]):
    """(RunConfig, ModelConfig, DataConfig, ProbeConfig) of a preset with key=value overrides applied."""
    if preset not in PRESETS:
        raise SystemExit(f"unknown preset {preset!r}; presets: {sorted(PRESETS)}")
    run, model, data = PRESETS[preset]()
    probe = ProbeConfig()
    prefixes = ("model.", "data.", "probe.")
    run = override(run, [x for x in items if not x.startswith(prefixes)])
    cast = {"int": int, "float": float, "bool": lambda v: v.lower() in ("1", "true", "yes"), "str": str}
    out = []
    for prefix, cfg in zip(prefixes, (model, data, probe)):
        kw = dict(x[len(prefix):].split("=", 1) for x in items if x.startswith(prefix))
        types = {f.name: str(f.type) for f in dataclasses.fields(cfg)}
        bad = sorted(set(kw) - set(types))
        if bad:
            raise SystemExit(f"unknown override keys {[prefix + k for k in bad]}; {prefix[:-1]} has {sorted(types)}")
        out.append(dataclasses.replace(cfg, **{k: cast[types[k]](v) for k, v in kw.items()}))
    model, data, probe = out
    return run, T.configure(model), data, probe


# -- the run -------------------------------------------------------------------------------------


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="debug_cpu", choices=sorted(PRESETS))
    ap.add_argument("--local_rank", type=int, default=0, help="set by the deepspeed launcher")
    ap.add_argument("--init-from", default="", metavar="DIR",
                    help="a transformers BERT/RoBERTa folder to continue pretraining from (with its tokenizer)")
    ap.add_argument("overrides", nargs="*", help="key=value (RunConfig), model.key=value, data.key=value")
    args = ap.parse_args(argv)
    run, model_cfg, data, pcfg = configure(args.preset, args.overrides)
    init_dir = Path(args.init_from).resolve() if args.init_from else None
    if init_dir is not None:
        shape = {"vocab_size", "hidden", "layers", "heads", "intermediate", "max_positions", "type_vocab_size"}
        bad = sorted(shape & {x[6:].split("=", 1)[0] for x in args.overrides if x.startswith("model.")})
        if bad:
            raise SystemExit(f"--init-from {init_dir}: the model's shape comes from its config.json; drop {bad}")
        if not (init_dir / "config.json").is_file() or not (init_dir / "tokenizer.json").is_file():
            raise SystemExit(f"--init-from {init_dir}: needs config.json and tokenizer.json (a transformers folder)")

    world = E.init_distributed()
    is_main = world.rank == 0
    t_start = time.time()

    # 1. data: rank 0 prepares (cached by content hash), the others then find the finished folder
    sources = [s for s in data.sources.split(",") if s]
    if is_main:
        tok_dir = init_dir or default_tokenizer_dir()
        summary = prepare(sources, tokenizer_dir=tok_dir, progress=True)
    E.barrier()
    if not is_main:
        tok_dir = init_dir or default_tokenizer_dir()
        summary = prepare(sources, tokenizer_dir=tok_dir, progress=False)
    views = load_views(summary["out"])
    tokenizer = load_tokenizer(tok_dir)
    vocab = Vocab.from_tokenizer(tokenizer)

    # code-search probes: rank 0 builds them (cached), then every rank holds the same pairs
    if is_main:
        probe_dirs = default_probes(views, summary["cache_key"], summary["out"], pcfg, progress=True)
    E.barrier()
    if not is_main:
        probe_dirs = default_probes(views, summary["cache_key"], summary["out"], pcfg)
    if pcfg.holdout > 0:
        views = views.select(split_views(views, pcfg.holdout)[0])  # train on the other files only
    cheap = {n: Probe.from_pairs(load_pairs(d), pcfg.pool, 0, max_queries=pcfg.queries) for n, d in probe_dirs.items()}
    if init_dir is None and model_cfg.vocab_size != vocab.size:
        model_cfg = T.configure(model_cfg, vocab_size=vocab.size)

    # 2. one stream per rank
    mixture = [(name, float(w)) for name, w in (item.split(":") for item in data.mixture.split(","))]
    unknown = sorted({name for name, _ in mixture} - set(HEADS_OF))
    if unknown:
        raise SystemExit(f"data.mixture: unknown objectives {unknown}; registered: {sorted(HEADS_OF)}")
    head_names = sorted({h for name, _ in mixture for h in HEADS_OF[name]})  # the heads the mixture trains
    srcs = [view_source(views, build_objective(name, vocab), name, salt=i + 1) for i, (name, _) in enumerate(mixture)]
    stream = PackedStream(Mixture(srcs, [w for _, w in mixture], seed=run.seed, rank=world.rank,
                                  world=world.world_size), seq_len=run.seq_len, pad_id=vocab.pad_id, buffer=data.buffer)

    # 3. model, heads, engine, resume
    checkpoint.seed_all(run.seed, 0)  # identical initial weights on every rank
    if init_dir is None:
        model = T.Transformer(model_cfg)
        net = Pretrainer(model, {h: build_head(h, model) for h in head_names})
        head_loaded = False
    else:
        keep = {k: getattr(model_cfg, k) for k in ("dropout", "attention_dropout", "attention", "checkpointing")}
        model, model_cfg = init_from(init_dir, **keep)
        if model_cfg.vocab_size < vocab.size or run.seq_len > model_cfg.max_positions:
            raise SystemExit(f"--init-from {init_dir}: vocab {model_cfg.vocab_size} < tokenizer {vocab.size} "
                             f"or seq_len {run.seq_len} > max_positions {model_cfg.max_positions}")
        net = Pretrainer(model, {h: build_head(h, model) for h in head_names})
        head_loaded = "mlm" in net.heads and load_mlm_head(init_dir, net.heads["mlm"])
    checkpoint.seed_all(run.seed, world.rank)  # distinct dropout streams per rank
    engine = E.build_engine(net, run, world)
    resume = checkpoint.load(engine, run.out_dir)
    start = 0
    if resume is not None:
        start = resume.step
        stream.load_state_dict(resume.client_state["stream"])
        checkpoint.restore_rng(resume.rng)  # the stream draws from numpy Generators only: restore now
    k = engine.gradient_accumulation_steps()

    def loss_fn(eng, batch):
        return eng(batch)

    # 4. train
    log = _Log(run.out_dir, is_main, total=run.steps, start=start)
    t_train = time.time()
    tokens = 0
    for step in range(start, run.steps):
        micro = [collate([next(stream) for _ in range(run.micro_batch_rows)]) for _ in range(k)]
        tokens += sum(int((b["segment_ids"] > 0).sum()) for b in micro)
        scalars = E.train_step(engine, micro, loss_fn, heads=head_names,
                               count_fn=lambda b: target_counts(b, engine.module.heads))
        log.step(step + 1, scalars)
        if pcfg.every and (step + 1) % pcfg.every == 0 and step + 1 < run.steps:
            log.scalars(step + 1, probe_scalars(cheap, engine, tokenizer, pcfg))
        if (run.save_every and (step + 1) % run.save_every == 0) or step + 1 == run.steps:
            client = {"stream": stream.state_dict(), "model": dataclasses.asdict(model_cfg), "tokenizer": str(tok_dir)}
            checkpoint.save(engine, run.out_dir, step + 1, client, config=run, keep_last=run.keep_last)
    tokens_all = sum(E.all_gather_object(tokens))
    train_seconds = time.time() - t_train

    # 5. final probe: the model (every rank runs the forward: ZeRO-3 gathers parameters) and baselines
    table = {}
    for name, d in probe_dirs.items():
        full = Probe.from_pairs(load_pairs(d), pcfg.pool, 0, max_queries=pcfg.final_queries)
        ours = full.evaluate_codept(engine.module.model, tokenizer, max_len=pcfg.max_len, device=engine.device)
        # per probe: pairs, pool size, and each scorer's MRR (overall, and per language when several)
        row = {"pairs": len(full), "pool": min(pcfg.pool, len(full)), "model": round(ours["mrr"], 4)}
        if len(ours["by_lang"]) > 1:
            row.update({f"model_{lang}": round(r["mrr"], 4) for lang, r in ours["by_lang"].items()})
        if is_main:
            for spec in filter(None, pcfg.baselines.split(",")):
                result = baseline(d, spec, pcfg)
                row[spec] = round(result["overall"]["pool"]["mrr"], 4)
        table[name] = row
        log.scalars(run.steps, {f"eval/{name}/mrr": ours["mrr"]})
    seconds = time.time() - t_start

    # 6. summary
    if is_main:
        log.close()
        first, last = log.first_last()
        result = {
            "preset": args.preset, "ranks": world.world_size, "steps": run.steps, "resumed_from": start,
            "params": model.num_parameters(), "train_views": len(views), "init_from": str(init_dir) if init_dir else None,
            "mlm_head_loaded": head_loaded, "views": summary["viewed"], "tokens_trained": tokens_all,
            "train_tokens_per_s": round(tokens_all / max(train_seconds, 1e-9)), "seconds": round(seconds, 1),
            "loss_first": first, "loss_last": last, "probe_mrr": table, "out_dir": run.out_dir,
            "loss_curve": str(Path(run.out_dir) / "loss.png"),
        }
        (Path(run.out_dir) / "summary.json").write_text(json.dumps(result, indent=2) + "\n")
        print(json.dumps(result, indent=2))
    E.shutdown()
    return 0


def probe_scalars(probes: dict, engine, tokenizer, pcfg: ProbeConfig) -> dict:
    """Cheap probe of the live model: ``eval/mrr_<lang>`` (cross-project), ``eval/<probe>/mrr_<lang>``."""
    out = {}
    for name, probe in probes.items():
        r = probe.evaluate_codept(engine.module.model, tokenizer, max_len=pcfg.max_len, device=engine.device)
        prefix = "eval/" if name == "cross_project" else f"eval/{name}/"
        out.update({f"{prefix}mrr_{lang}": v["mrr"] for lang, v in r["by_lang"].items()})
    return out


class _Log:
    """Rank 0 only: progress bar, TensorBoard scalars, losses.jsonl, a loss-curve PNG at the end."""

    def __init__(self, out_dir: str, enabled: bool, total: int, start: int):
        self.enabled, self.out = enabled, Path(out_dir)
        self.losses: list[tuple[int, float]] = []
        if not enabled:
            return
        from tqdm import tqdm

        self.out.mkdir(parents=True, exist_ok=True)
        self.bar = tqdm(total=total, initial=start, unit="step", mininterval=2.0)
        self.jsonl = open(self.out / "losses.jsonl", "a")
        try:
            from torch.utils.tensorboard import SummaryWriter

            self.tb = SummaryWriter(str(self.out / "tb"))
        except ImportError:  # tensorboard not installed: scalars still go to losses.jsonl
            self.tb = None

    def step(self, step: int, scalars: dict) -> None:
        if not self.enabled:
            return
        self.losses.append((step, scalars["loss"]))
        self.jsonl.write(json.dumps({"step": step, **scalars}) + "\n")
        if self.tb is not None:
            for k, v in scalars.items():
                self.tb.add_scalar(f"train/{k}", v, step)
        self.bar.set_postfix(loss=f"{scalars['loss']:.3f}", lr=f"{scalars['lr']:.1e}")
        self.bar.update(1)

    def scalars(self, step: int, scalars: dict) -> None:
        """Evaluation scalars (TensorBoard + eval.jsonl)."""
        if not self.enabled:
            return
        with open(self.out / "eval.jsonl", "a") as f:
            f.write(json.dumps({"step": step, **scalars}) + "\n")
        if self.tb is not None:
            for k, v in scalars.items():
                self.tb.add_scalar(k, v, step)
        self.bar.write(f"step {step}: " + " ".join(f"{k}={v:.3f}" for k, v in scalars.items()))

    def first_last(self) -> tuple[float | None, float | None]:
        if not self.losses:
            return None, None
        n = max(1, len(self.losses) // 10)  # mean of the first and last tenth: robust to noise
        mean = lambda xs: round(sum(v for _, v in xs) / len(xs), 4)  # noqa: E731
        return mean(self.losses[:n]), mean(self.losses[-n:])

    def close(self) -> None:
        self.bar.close()
        self.jsonl.close()
        if self.tb is not None:
            self.tb.close()
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            return
        steps, losses = zip(*self.losses) if self.losses else ((), ())
        fig, ax = plt.subplots(figsize=(6, 3.5))
        ax.plot(steps, losses)
        ax.set_xlabel("optimizer step")
        ax.set_ylabel("loss (token mean over the step)")
        ax.set_title("codept pretraining")
        fig.tight_layout()
        fig.savefig(self.out / "loss.png", dpi=100)
        plt.close(fig)


if __name__ == "__main__":
    E.exit_process(main(sys.argv[1:]))  # after E.shutdown(): no interpreter teardown (engine.exit_process)
