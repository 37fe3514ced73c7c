"""The wiring every pretraining recipe shares (recipes/pretrain_code.py, and the text recipe of issue
13): settings checked before any work, the objective mixture as streams, the optimizer-step loop,
held-out validation of every head, logs, and an exit path that never leaks.

1. :func:`configure` parses every ``key=value`` setting with the ONE parser
   (codept.train.settings.parse_settings) and checks what depends on the mixture: ``data.mixture``
   names registered objectives with finite weights > 0, each at most once; ``objective.<name>.*``
   only for objectives of the mixture; ``loss.<head>`` only for heads the mixture trains, not all 0.
   It runs before the process group and before prepare: a bad setting costs seconds, not a prepare.
2. :func:`guarded` runs a recipe's main: a :class:`~codept.train.settings.ConfigError` is printed once
   (by rank 0, or by the process the launcher calls rank 0 before the group exists), without a
   traceback, and the process exits 2; on every exit path this rank's DeepSpeed ``/dev/shm`` buffer
   file is deleted (codept.train.engine.init_distributed deletes it already once all ranks mapped it).
3. :func:`streams` builds one source per mixture entry (``view_source`` of the objective with its
   command-line settings, salt = position + 1); an objective that reads the code structure gets
   the views of languages with a grammar only (:func:`structured`: token-only views counted, not
   read); :func:`packed` the rank's Mixture + PackedStream.
4. Validation (:func:`validation_batches`, :func:`validate`): the held-out documents are those of the
   probe split (codept.probe.split: a content hash, ``probe.holdout`` of the files, never trained
   on). From them a fixed stream (seed ``val.seed``, independent of the run's seed; epoch 0 onward,
   never shuffled again) is built ONCE per rank: ``val.rows`` packed rows in micro-batches of
   ``micro_batch_rows``, the same on every rank count-wise, kept in memory. Every ``val.every``
   optimizer steps and at the end, :func:`codept.train.engine.evaluate` reports ``val/<head>/loss``
   and ``val/<head>/acc`` over all ranks. No held-out documents (``probe.holdout=0``) or fewer than
   the ranks: validation is skipped and the reason recorded in the summary.
5. :func:`train` is the step loop: k micro-batches of ``micro_batch_rows`` rows, ``train_step`` with
   the per-head weights, ``log.step``, periodic hooks (cheap probes, validation), checkpoints.
6. :class:`Log` (rank 0): progress bar, TensorBoard, ``losses.jsonl`` and ``eval.jsonl`` written
   line-buffered (a kill -9 loses at most the line being written), a loss plot with a validation
   panel.
Cost: validation = ``val.rows / micro_batch_rows`` forward passes per rank each time (no backward);
building its rows once = packing ``val.rows`` rows of held-out documents.
Not covered: validation on another corpus than the training one's held-out files; early stopping;
per-language validation metrics.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from codept import languages
from codept.data.negatives import NegativesError
from codept.data.stream import Mixture, PackedStream
from codept.views import open_views, view_source
from codept.model.config import HEAD_NAMES
from codept.objectives import HEADS_OF, LOSS_WEIGHTS_OF, MODEL_OF, OBJECTIVES
from codept.objectives import build as build_objective
from codept.train.config import RunConfig
from codept.train.mixture import (CORPUS_SEP, corpora_used, corpus_of, heads_of,  # noqa: F401 (their old home)
                                  objective_of, parse_mixture)
from codept.train.optim import reschedule
from codept.train.settings import ConfigError, Settings, parse_settings

# torch is imported on first use, never by the settings check: a bad setting is refused in ~2 s
# (importing torch alone is 3-4 s on a shared 2-core machine, deepspeed 7 s); tests/test_layering.py


def _engine():
    """codept.train.engine, imported on first use: importing it imports deepspeed (seconds), which
    a run needs only once its settings passed (a bad setting is refused without it)."""
    from codept.train import engine

    return engine


def collate(rows):
    from codept.data.collate import collate as _collate

    return _collate(rows)


def _checkpoint_error() -> type:
    """codept.train.checkpoint.CheckpointError once that module is imported (none is raised before)."""
    module = sys.modules.get("codept.train.checkpoint")
    return module.CheckpointError if module is not None else ConfigError


@dataclass(frozen=True)
class ValConfig:
    """Held-out validation (``val.<field>=value`` overrides)."""

    every: int = 50  # optimizer steps between validations (0 = only at the end)
    rows: int = 32  # packed held-out rows per rank, built once (micro-batches of micro_batch_rows)
    seed: int = 1234  # seed of the validation stream: fixed, so runs of different seeds see the same rows
    holdout: float = 0.1  # share of a text corpus's documents held out (by content hash, codept.views.Views.split);
    #                       code corpora use the probe split (probe.holdout)

    def __post_init__(self):
        if self.every < 0:
            raise ValueError(f"every={self.every}: must be >= 0 (0 = only at the end)")
        if self.rows < 1:
            raise ValueError(f"rows={self.rows}: must be >= 1")
        if not 0.0 <= self.holdout < 1.0:
            raise ValueError(f"holdout={self.holdout}: must be in [0, 1)")
        if self.seed < 0:
            raise ValueError(f"seed={self.seed}: must be >= 0")


# ------------------------------------------------------------------------------------------------
# 1. settings


def row_settings(name: str, cfg, given: dict, seq_len: int) -> dict:
    """The settings of a whole-in-row objective at rows of ``seq_len``: ``given``, plus its row field
    (``row_field``: ``max_tokens`` unless the Config names another, e.g. t5_span's ``length``) not
    given lowered to ``default_row_share`` x seq_len, plus, when one indivisible example
    (``unit_tokens``) is longer than the row, the caps of ``fit_unit`` that were not given. A given
    value that cannot fit, or fitted settings the Config refuses, is a ConfigError naming them."""
    out = dict(given)
    key = getattr(cfg, "row_field", "max_tokens")
    n = given.get(key, getattr(cfg(), key))
    share = getattr(cfg, "default_row_share", 0.0)  # a budget, not a shape: fit a share of the row
    if share and key not in given and n > int(share * seq_len):
        out[key] = int(share * seq_len)
    elif n > seq_len:
        raise ConfigError(f"objective.{name}.{key}={n} > seq_len={seq_len}: packing would split "
                          f"its examples; set objective.{name}.{key}<={seq_len}")
    try:
        cfg(**out)
    except ValueError as e:
        raise ConfigError(f"objective.{name} at seq_len={seq_len} with {out}: {e}") from None
    if not hasattr(cfg, "unit_tokens"):
        return out
    cur = cfg(**out)  # a piece no grouping can shrink (code_doc: a pair and its negatives)
    if cur.unit_tokens() > seq_len:
        out.update({k: v for k, v in cur.fit_unit(seq_len).items() if k not in given})
        cur = cfg(**out)
    if (unit := cur.unit_tokens()) > seq_len:
        caps = ", ".join(f"{k}={getattr(cur, k)}" for k in cfg.unit_fields)
        raise ConfigError(f"objective.{name} with {caps}: one indivisible example is up to {unit} tokens > "
                          f"seq_len={seq_len}; packing would cut it ({name}'s Config.unit_tokens): "
                          "raise seq_len or lower those caps")
    return out


def configure(items: list[str], run: RunConfig, sections: dict,
              corpora: dict[str, str] | None = None,
              defaults: dict[str, dict] | None = None) -> tuple[Settings, list[tuple[str, float]]]:
    """(settings, mixture) of a recipe: ``sections`` maps prefixes to the preset's dataclasses and
    must hold ``data`` (with a ``mixture`` field); ``corpora`` as for :func:`parse_mixture`;
    ``defaults`` objective name -> settings the preset gives where ``items`` do not, for the
    objectives the mixture trains (checked like given ones); see the module docstring, step 1."""
    objectives = {name: o.config for name, o in OBJECTIVES.items()}
    s = parse_settings(items, run, sections, objectives, list(HEAD_NAMES))
    mixture = parse_mixture(s.sections["data"].mixture, corpora)
    names = [objective_of(k) for k, _ in mixture]
    for name, given in (defaults or {}).items():
        if name in names:
            s.objectives[name] = {**given, **s.objectives.get(name, {})}
    for name in names:  # GLM / PLM examples are whole (part B needs part A; an order needs its start)
        if getattr(objectives[name], "whole_in_row", False):
            fitted = row_settings(name, objectives[name], s.objectives.get(name, {}), s.run.seq_len)
            if fitted:
                s.objectives[name] = fitted
    extra = sorted(set(s.objectives) - set(names))
    if extra:
        raise ConfigError(f"objective settings for {extra}, which data.mixture={s.sections['data'].mixture!r} "
                          "does not train: add them to the mixture or drop the settings")
    heads = heads_of(mixture)
    untrained = sorted(set(s.loss) - set(heads))
    if untrained:
        raise ConfigError(f"loss weights for heads {untrained}, which data.mixture trains none of "
                          f"(its heads: {', '.join(heads)})")
    if all(s.loss.get(h, 1.0) == 0 for h in heads):
        raise ConfigError(f"loss weights {s.loss}: every head of the mixture weighs 0, nothing would train")
    for name in names:  # an objective's default weights (ELECTRA's lambda = 50) where none was given
        for h, w in LOSS_WEIGHTS_OF.get(name, {}).items():
            s.loss.setdefault(h, w)
        if MODEL_OF.get(name) and "model" in s.sections:  # what its batches need (GLM: block positions)
            s.sections["model"] = dataclasses.replace(s.sections["model"], **MODEL_OF[name])
    tables = {n: OBJECTIVES[n].config(**s.objectives.get(n, {})).table() for n in names
              if hasattr(OBJECTIVES[n].config, "table")}  # tlm, translate: a language id per side
    if tables and "model" in s.sections:
        need, widest = max((len(t) + 1, n) for n, t in tables.items())
        n_langs = s.sections["model"].n_langs
        if n_langs == 0:  # 0 = no table: one sized to the objectives' languages
            s.sections["model"] = dataclasses.replace(s.sections["model"], n_langs=need)
        elif n_langs < need:
            raise ConfigError(f"model.n_langs={n_langs}: {widest}'s languages {','.join(tables[widest])} need "
                              f"n_langs >= {need} (0 = a table of that size)")
    check_engine(s, names)
    for name in names:  # files an objective reads (phrase's lexicon), before the process group
        lexicon = getattr(OBJECTIVES[name].config(**s.objectives.get(name, {})), "lexicon", "")
        check_paths(f"objective.{name}.lexicon", lexicon, urls=False)
    model = s.sections.get("model")
    if model is not None and s.run.seq_len > model.max_positions:
        raise ConfigError(f"seq_len={s.run.seq_len} > model.max_positions={model.max_positions}: a row's "
                          "position ids must fit the position table")
    return s, mixture


# objectives whose staged forwards call head methods outside forward(), which ZeRO-3's parameter
# gathering does not hook (codept.model.regimes.refuse_partitioned): when they do it, by their Config
OUTSIDE_FORWARD = {"electra": lambda cfg: True, "ar": lambda cfg: cfg.schedule != "none"}


def check_engine(s: Settings, names: list[str]) -> None:
    """The engine settings, before any work: the ds_config exists and holds engine keys only, the
    global batch divides into micro-batches x the launched ranks (WORLD_SIZE; 1 without a
    launcher), no objective of the mixture needs a ZeRO stage the ds_config does not give, and
    ``compile=true`` has the compiler it needs."""
    from codept.train.config import derive, load_engine_json, zero_stage_of

    run = s.run
    try:
        engine_json = load_engine_json(run.ds_config)
    except (FileNotFoundError, ValueError) as e:
        raise ConfigError(f"ds_config={run.ds_config!r}: {e}") from None
    try:
        plan = derive(run, launched_world(), engine_json)
    except ValueError as e:
        key = "global_batch_rows" if run.global_batch_rows else "global_batch_tokens"
        raise ConfigError(f"{key}={getattr(run, key)} with {launched_world()} rank(s): {e}") from None
    if run.compile:
        from codept.train.config import compile_problem

        problem = compile_problem()
        if problem:
            raise ConfigError(f"compile=true: {problem}; set compile=false")
    if zero_stage_of(plan.ds_config) == 3:
        staged = [n for n in names if n in OUTSIDE_FORWARD
                  and OUTSIDE_FORWARD[n](OBJECTIVES[n].config(**s.objectives.get(n, {})))]
        if staged:
            raise ConfigError(f"data.mixture={s.sections['data'].mixture!r}: {', '.join(staged)} run a staged "
                              f"forward that ZeRO-3 does not support (ds_config={run.ds_config!r}, stage 3): use "
                              "a ZeRO stage <= 2 (zero_stage=2 or ds_config=zero2)")


def check_tokenizer(key: str, path: str, init_dir=None) -> None:
    """A tokenizer setting (``data.tokenizer=PATH``: a `codept tokenizer train` folder, a transformers
    folder with tokenizer.json, or the file), before any work: it loads and has the special tokens
    the objectives need (a mask token at least; codept.objectives.render.Vocab), and no --init-from
    brings its own. ConfigError naming the setting and the rule."""
    if not path:
        return
    if init_dir is not None:
        raise ConfigError(f"{key}={path}: --init-from {init_dir} brings its own tokenizer (its embeddings are "
                          f"indexed by it); drop one of the two")
    from codept.objectives.render import Vocab
    from codept.tokenizer import load_tokenizer

    try:
        Vocab.from_tokenizer(load_tokenizer(path))
    except FileNotFoundError:
        raise ConfigError(f"{key}={path}: no tokenizer.json there (expected a folder written by `codept "
                          "tokenizer train`, a transformers folder, or a tokenizer.json)") from None
    except Exception as e:  # tokenizers raises its own exception type for a malformed file
        raise ConfigError(f"{key}={path}: not a usable tokenizer ({type(e).__name__}: {e})") from None


def check_paths(key: str, value: str, urls: bool = True) -> None:
    """Each comma-separated path of the setting ``key=value`` exists: ConfigError naming the first
    that does not (before any work: prepare would fail on it after the process group). An
    object-store URL is left to prepare, which lists it (`urls`: the setting is a prepare input)."""
    from codept.data.remote import is_url

    for p in filter(None, (x.strip() for x in value.split(","))):
        if is_url(p) and not urls:
            raise ConfigError(f"{key}={value!r}: {p}: a URL; this setting reads local folders (download it first)")
        if not is_url(p) and not Path(p).expanduser().exists():
            raise ConfigError(f"{key}={value!r}: {p}: no such file or folder")


def launched_rank() -> int:
    """This process's rank as the launcher set it (RANK), before or without a process group."""
    return int(os.environ.get("RANK", "0") or 0)


def launched_world() -> int:
    """The job's rank count as the launcher set it (WORLD_SIZE), before or without a process group."""
    return int(os.environ.get("WORLD_SIZE", "1") or 1)


def main_first(build: Callable[[bool], object], is_main: bool):
    """``build(progress)`` on rank 0 first (with a progress bar), then, after a barrier, on the other
    ranks, which find rank 0's cached result (prepare, tokenizers, probes are keyed by content)."""
    out = build(True) if is_main else None
    _engine().barrier()
    return out if is_main else build(False)


PEER_WAIT_S = 30.0  # how long a rank other than 0 leaves rank 0 to report a refusal (see guarded)


def guarded(main: Callable[[list[str]], int], argv: list[str]) -> int:
    """``main(argv)``; a ConfigError -> its message printed once, exit code 2 (a CheckpointError: 3,
    codept.train.checkpoint: a checkpoint that cannot be resumed). Rank 0 prints it at
    once. Every rank checks the same settings, but a launcher (deepspeed, torchrun) stops all ranks
    as soon as ONE exits non-zero: a rank 1 that exited first used to get rank 0 killed before it had
    printed, and the message was lost. So another rank first waits up to ``PEER_WAIT_S``: the
    launcher stops it once rank 0 has exited; if it is still running then (rank 0 did not fail),
    it prints the message itself. This rank's /dev/shm buffer file is deleted on every exit path."""
    try:
        return main(argv)
    except (ConfigError, _checkpoint_error()) as e:
        if launched_rank() != 0 and launched_world() > 1:
            time.sleep(PEER_WAIT_S)
        print(f"error: {e}", file=sys.stderr, flush=True)
        return 2 if isinstance(e, ConfigError) else 3
    finally:
        engine = sys.modules.get("codept.train.engine")  # not imported: no process group, no buffer file
        if engine is not None:
            engine.remove_shm_files()


# ------------------------------------------------------------------------------------------------
# 3. streams


def streams(views, mixture: list[tuple[str, float]], vocab, settings: dict, wrap=None) -> list:
    """One source per mixture entry: the objective built with its ``objective.<name>.*`` settings over
    the views of its corpus (``views``: corpus name -> views, or the views of the default corpus).
    ``wrap(key, objective) -> objective``: a recipe's view transform (e.g. sentence shuffling)."""
    by_corpus = views if isinstance(views, dict) else {"code": views}
    out = []
    for i, (key, _) in enumerate(mixture):
        name = objective_of(key)
        obj = build_objective(name, vocab, **settings.get(name, {}))
        obj = wrap(key, obj) if wrap else obj
        docs = structured(by_corpus[corpus_of(key)], key, settings.get(name, {}))
        try:
            out.append(view_source(docs, obj, key, salt=i + 1))
        except NegativesError as e:  # code_doc negatives=mined: no / a stale sidecar (its message says what to run)
            raise ConfigError(f"{key}: {e}") from None
        if out[-1].skipped and launched_rank() == 0:  # views the objective can never use: never read
            why = ", ".join(f"{r} {n}" for r, n in out[-1].skipped.items())
            print(f"{key}: {sum(out[-1].skipped.values())} of {out[-1].n + sum(out[-1].skipped.values())} views "
                  f"not read: {why}", file=sys.stderr, flush=True)
    return out


def structured(views, key: str, overrides: dict):
    """The views of mixture entry `key`'s documents: all of them, or, for an objective that reads the
    code structure (codept.objectives.spec ``structure``), those of languages with a grammar; the
    token-only views left out are counted per language on stderr (rank 0). ValueError when none is left."""
    spec = OBJECTIVES[objective_of(key)]
    if not spec.needs_structure(spec.config(**overrides)):
        return views
    views = open_views(views)
    if views.kind != "code":
        return views
    langs = views.strings("lang")
    keep = np.array([languages.has_grammar(lang) for lang in langs], dtype=bool)
    if keep.all():
        return views
    left = Counter(lang for lang, k in zip(langs, keep.tolist()) if not k)
    what = ", ".join(f"{lang} {n}" for lang, n in sorted(left.items()))
    if not keep.any():
        raise ValueError(f"{key}: reads the code structure, and every one of its {len(langs)} views is token-only "
                         f"(no grammar: {what}); give it a corpus in a language of grammars/ "
                         f"({', '.join(languages.available_languages())})")
    if launched_rank() == 0:
        print(f"{key}: {int((~keep).sum())} of {len(langs)} views skipped: tokens_only (no grammar, no structure: "
              f"{what})", file=sys.stderr, flush=True)
    return views.select(np.flatnonzero(keep))


def packed(sources: list, mixture, seed: int, world, seq_len: int, pad_id: int, buffer: int,
           long: str = "split", rows: str = "packed") -> PackedStream:
    """This rank's packed stream over ``sources`` with the mixture's weights (``long``, ``rows``:
    the document strategies of codept.data.pack.pack): the job's one Mixture, its buffers dealt to
    the ranks (codept.data.stream, 5: resumable on another world size)."""
    mix = Mixture(sources, [w for _, w in mixture], seed=seed)
    return PackedStream(mix, seq_len=seq_len, pad_id=pad_id, buffer=buffer, long=long, rows=rows,
                        rank=world.rank, world=world.world_size)


# ------------------------------------------------------------------------------------------------
# 4. validation


@dataclass
class Validation:
    """This rank's fixed held-out micro-batches, per mixture entry (each objective alone on the held-out
    views of its corpus), or why there are none."""

    batches: dict  # mixture key -> micro-batches of that objective alone
    docs: int
    skipped: str = ""
    empty: dict = dataclasses.field(default_factory=dict)  # mixture key -> why it has no validation rows

    def summary(self, last: dict | None, step: int | None) -> dict:
        """{"step", "docs", "rows_per_rank", <head>: {loss, acc, n} over every objective training it,
        "by_objective": {key: {head: {loss, acc, n}} or {"no_rows": why}}, "no_labels": [key/head with
        n = 0]}: no objective's metrics are hidden in another's or missing silently."""
        if self.skipped:
            return {"skipped": self.skipped}
        last = last or {}

        def metrics(prefix: str) -> dict:
            return {"loss": _round(last[f"{prefix}/loss"]), "acc": _round(last[f"{prefix}/acc"]),
                    "n": int(last[f"{prefix}/n"])}

        heads = sorted({k.split("/")[1] for k in last if k.count("/") == 2})
        by_objective = {key: {"no_rows": why} for key, why in self.empty.items()}
        for key in self.batches:
            by_objective[key] = {h: metrics(f"val/{key}/{h}") for h in HEADS_OF[objective_of(key)]
                                 if f"val/{key}/{h}/n" in last}
        out = {"step": step, "docs": self.docs,
               "rows_per_rank": sum(len(b["segment_ids"]) for bs in self.batches.values() for b in bs),
               **{h: metrics(f"val/{h}") for h in heads}, "by_objective": by_objective}
        no_labels = [f"{key}/{h}" for key, m in by_objective.items() for h, v in m.items()
                     if isinstance(v, dict) and v["n"] == 0]
        if no_labels:
            out["no_labels"] = no_labels
        return out


def _round(v: float):
    return None if v != v else round(v, 4)  # nan (no record) -> null in JSON


def _fixed_rows(stream: PackedStream, n_rows: int, docs_per_rank: int) -> list[dict]:
    """The first ``n_rows`` rows of ``stream``, or [] when a whole epoch of this rank's documents
    gives none (an objective with nothing to say about these views: never loop forever)."""
    rows, empty_steps = [], 0
    while len(rows) < n_rows:
        got = stream.rows_of_buffer(stream.k)
        stream.pos += 1
        empty_steps = 0 if got else empty_steps + stream.buffer
        if empty_steps >= max(docs_per_rank, 1):
            return []
        rows += got[: n_rows - len(rows)]
    return rows


def validation_batches(held_views, mixture, vocab, settings: dict, world, run: RunConfig, val: ValConfig,
                       pad_id: int, buffer: int, long: str = "split", rows_mode: str = "packed") -> Validation:
    """The rank's fixed validation micro-batches (module docstring, step 4), per mixture entry: its
    objective alone over the held-out views of its corpus, ``val.rows`` rows; built once. An entry
    that gives no rows on some rank (e.g. code_doc on held-out files without docstrings) is reported
    as such on every rank (a collective: every rank must evaluate the same entries)."""
    by_corpus = held_views if isinstance(held_views, dict) else {"code": held_views}
    counts = {c: 0 if by_corpus.get(c) is None else len(by_corpus[c]) for c in corpora_used(mixture)}
    n = sum(counts.values())
    short = {c: k for c, k in counts.items() if k < world.world_size}
    if short:
        return Validation({}, n, skipped=f"held-out documents per corpus {short} for {world.world_size} ranks: "
                                         "raise probe.holdout (code) or val.holdout (text) to validate")
    step = run.micro_batch_rows
    out, empty = {}, {}
    for (key, _), src in zip(mixture, streams(held_views, mixture, vocab, settings)):
        stream = packed([src], [(key, 1.0)], val.seed, world, run.seq_len, pad_id, buffer, long, rows_mode)
        rows = _fixed_rows(stream, val.rows, len(range(world.rank, src.n, world.world_size)))
        out[key] = [collate(rows[i:i + step]) for i in range(0, len(rows), step)]
    have = _engine().all_gather_object({k: bool(b) for k, b in out.items()}) if world.world_size > 1 else [
        {k: bool(b) for k, b in out.items()}]
    for key in list(out):
        ranks = [r for r, h in enumerate(have) if not h[key]]
        if ranks:
            empty[key] = (f"{objective_of(key)} made no example from a whole epoch of the held-out "
                          f"{corpus_of(key)} views of rank(s) {ranks}")
            del out[key]
    return Validation(out, n, empty=empty)


def validate(engine, validation: Validation, heads: list[str]) -> dict:
    """``val/<head>/loss|acc|n`` over every objective, ``val/<key>/<head>/loss|acc|n`` per mixture
    entry, over all ranks; {} when validation is skipped (a collective)."""
    if validation.skipped:
        return {}
    E = _engine()
    total = {h: [0.0, 0.0, 0.0, 0.0] for h in heads}
    out = {}
    for key, batches in validation.batches.items():
        own = HEADS_OF[objective_of(key)]
        sums = E.evaluate_sums(engine, batches, own)
        for h, row in sums.items():
            out.update(E.metrics_of(f"val/{key}/{h}", row))
            total[h] = [a + b for a, b in zip(total[h] + [0.0] * (len(row) - len(total[h])), row)]  # + extra sums
    for h in heads:
        out.update(E.metrics_of(f"val/{h}", total[h]))
    return out


# ------------------------------------------------------------------------------------------------
# 5. the step loop


def _forward(engine, batch):
    return engine(batch)


def grad_cache(engine):
    """A codept.model.gradcache.GradCache over the head that asks for one (code_doc's
    ``grad_cache=true``), or None."""
    from codept.model.gradcache import GradCache

    names = [n for n, h in engine.module.heads.items() if getattr(h, "grad_cache", False)]
    return GradCache(engine.module, names[0]) if names else None


def set_horizon(stream, rows_per_rank: int) -> int:
    """Give the stream's Mixture a horizon, so that ``ctx.progress`` moves from 0 at the first
    optimizer step to 1 at the last (schedules: scheduled sampling, a falling [MASK] share); without
    one every objective saw progress 0. Progress moves once per packing buffer (Mixture.quantum =
    the buffer): a buffer's rows are shuffled together, so the rows of any one step come from the
    whole buffer. (Per mixture step, a run shorter than one buffer -- every CPU preset -- drew most
    of its first rows late in the schedule: the [MASK] share of step 1 was 0.47, not 0.80.) The run
    consumes about K = rows_per_rank x ranks / (rows of buffer 0 at progress 0) buffers of the
    job's one mixture (so K is the same on any world size of the same global batch); buffer k
    gets progress k / (K - 1) (horizon (K - 1) x buffer): a pure function of the data and settings,
    so a resumed run computes the same. A run within one buffer stays at progress 0 (lower data.buffer for a finer schedule). A horizon already set is kept. Returns it."""
    m = getattr(stream, "mixture", None)
    if m is None:  # not a PackedStream over a Mixture: nothing to set
        return 0
    if not m.horizon and rows_per_rank > 0:
        rows = len(stream.rows_of_buffer(0))
        # buffers of the whole job (the ranks share one mixture): the same on any world size
        buffers = max(1, math.ceil(rows_per_rank * getattr(stream, "world", 1) / max(rows, 1)))
        m.quantum = stream.buffer
        m.horizon = max(1, buffers - 1) * stream.buffer
    return m.horizon


def train(engine, stream, run: RunConfig, *, start: int, heads: list[str], weights: dict, log: "Log",
          hooks: list[tuple[int, Callable[[int], None]]], client_state: Callable[[], dict],
          config: dict | None = None) -> int:
    """Optimizer steps ``start .. run.steps``; returns the tokens this rank trained on. ``hooks``:
    (every, fn(step)) run after steps that are multiples of ``every`` (> 0), except the last (the
    recipe evaluates at the end itself). Checkpoints every ``run.save_every`` steps and at the end,
    recording ``config`` (the run's settings, codept.train.resume.flat; default the RunConfig)."""
    from codept.model.pretrainer import target_counts as _target_counts
    from codept.train import checkpoint

    k = engine.gradient_accumulation_steps()
    set_horizon(stream, run.steps * k * run.micro_batch_rows)
    tokens = 0
    cache = grad_cache(engine)
    forward = _forward if cache is None else (lambda e, b: cache.forward(e, b))
    for step in range(start, run.steps):
        for head in engine.module.heads.values():  # schedules that read the step (contrastive temperature)
            if hasattr(head, "set_progress"):
                head.set_progress(step / max(run.steps, 1))
        micro = [collate([next(stream) for _ in range(run.micro_batch_rows)]) for _ in range(k)]
        tokens += sum(int((b["segment_ids"] > 0).sum()) for b in micro)
        if cache is not None:  # the contrastive head's negatives: every micro-batch of the step
            cache.prepare([{k_: v.to(engine.device) if hasattr(v, "to") else v for k_, v in b.items()} for b in micro])
        scalars = _engine().train_step(engine, micro, forward, heads=heads, weights=weights,
                               count_fn=lambda b: _target_counts(b, engine.module.heads))
        log.step(step + 1, scalars)
        for every, fn in hooks:
            if every and (step + 1) % every == 0 and step + 1 < run.steps:
                fn(step + 1)
        if (run.save_every and (step + 1) % run.save_every == 0) or step + 1 == run.steps:
            checkpoint.save(engine, run.out_dir, step + 1, client_state(), config=config or run,
                            keep_last=run.keep_last)
    return tokens


# ------------------------------------------------------------------------------------------------
# 6. logs


def _val_losses(scalars: dict) -> dict:
    """The per-head validation losses (``val/<head>/loss``; not the per-objective ones)."""
    return {k: v for k, v in scalars.items() if k.startswith("val/") and k.endswith("/loss") and k.count("/") == 2}


class Log:
    """Rank 0 only: progress bar, TensorBoard scalars, losses.jsonl / eval.jsonl (line-buffered), a
    loss-curve PNG with a validation panel at the end. A resumed run (``start`` > 0) keeps the lines
    of steps up to ``start`` (those after it, of a job killed past its last checkpoint, are redone)
    and reads them back, so the plot and the first/last loss cover the whole run; a fresh run
    (``start`` 0) starts the files anew."""

    def __init__(self, out_dir: str, enabled: bool, total: int, start: int):
        self.enabled, self.out = enabled, Path(out_dir)
        self.losses: list[tuple[int, float]] = []
        self.val: list[tuple[int, dict]] = []
        if not enabled:
            return
        from tqdm import tqdm

        self.out.mkdir(parents=True, exist_ok=True)
        losses, evals = self._kept("losses.jsonl", start), self._kept("eval.jsonl", start)
        self.losses = [(d["step"], d["loss"]) for d in losses if "loss" in d]
        self.val = [(d["step"], _val_losses(d)) for d in evals if any(k.startswith("val/") for k in d)]
        self.bar = tqdm(total=total, initial=start, unit="step", mininterval=2.0)
        for name, kept in (("losses.jsonl", losses), ("eval.jsonl", evals)):  # temp + rename: kill-safe
            tmp = self.out / f".{name}.tmp"
            tmp.write_text("".join(json.dumps(d) + "\n" for d in kept))
            os.replace(tmp, self.out / name)
        self.jsonl = open(self.out / "losses.jsonl", "a", buffering=1)  # line-buffered: kill -9 safe
        self.eval = open(self.out / "eval.jsonl", "a", buffering=1)
        try:
            from torch.utils.tensorboard import SummaryWriter

            self.tb = SummaryWriter(str(self.out / "tb"))
        except ImportError:  # tensorboard not installed: scalars still go to losses.jsonl
            self.tb = None

    def _kept(self, name: str, start: int) -> list[dict]:
        """The records of ``name`` for steps <= start (none for a fresh run); a torn last line (kill -9
        while writing) is dropped."""
        path = self.out / name
        if not start or not path.is_file():
            return []
        out = []
        for line in path.read_text().splitlines():
            try:
                d = json.loads(line)
            except ValueError:
                continue
            if isinstance(d, dict) and isinstance(d.get("step"), int) and d["step"] <= start:
                out.append(d)
        return out

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
        """Evaluation scalars (TensorBoard + eval.jsonl); ``val/*`` ones also feed the plot's panel."""
        if not self.enabled or not scalars:
            return
        if any(k.startswith("val/") for k in scalars):
            self.val.append((step, _val_losses(scalars)))
        self.eval.write(json.dumps({"step": step, **scalars}) + "\n")
        if self.tb is not None:
            for k, v in scalars.items():
                self.tb.add_scalar(k, v, step)
        shown = {k: v for k, v in scalars.items() if not k.endswith("/n") and k.count("/") <= 2}
        self.bar.write(f"step {step}: " + " ".join(f"{k}={v:.3f}" for k, v in shown.items()))

    def first_last(self) -> tuple[float | None, float | None]:
        if not self.losses:
            return None, None
        n = max(1, len(self.losses) // 10)  # mean of the first and last tenth: robust to noise
        mean = lambda xs: round(sum(v for _, v in xs) / len(xs), 4)  # noqa: E731
        return mean(self.losses[:n]), mean(self.losses[-n:])

    def close(self) -> None:
        if not self.enabled:
            return
        self.bar.close()
        self.jsonl.close()
        self.eval.close()
        if self.tb is not None:
            self.tb.close()
        self.plot()

    def plot(self) -> None:
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            return
        fig, (ax, axv) = plt.subplots(1, 2, figsize=(10, 3.5))
        steps, losses = zip(*self.losses) if self.losses else ((), ())
        ax.plot(steps, losses)
        ax.set_xlabel("optimizer step")
        ax.set_ylabel("loss (token mean over the step)")
        ax.set_title("training")
        for key in sorted({k for _, d in self.val for k in d}):
            pts = [(s, d[key]) for s, d in self.val if key in d and d[key] == d[key]]
            if pts:
                axv.plot(*zip(*pts), marker="o", label=key.split("/")[1])
        axv.set_xlabel("optimizer step")
        axv.set_ylabel("held-out loss per head")
        axv.set_title("validation")
        if self.val:
            axv.legend()
        fig.tight_layout()
        fig.savefig(self.out / "loss.png", dpi=100)
        plt.close(fig)


# ------------------------------------------------------------------------------------------------
# 7. the run every recipe shares


@dataclass
class Corpora:
    """What a recipe's data step hands :func:`run` (called on every rank, after the process group)."""

    tokenizer_dir: Path
    train: dict  # corpus name -> training views
    held: dict  # corpus name -> held-out views (None: none)
    summary: dict = dataclasses.field(default_factory=dict)  # the recipe's own summary.json fields
    wrap: Callable | None = None  # wrap(key, objective): a view transform of the TRAINING stream only
    long: str = "split"  # document strategies of the training and validation streams (codept.data.pack)
    rows: str = "packed"
    state: object = None  # the recipe's own (its probes ...), for its hooks and final step


@dataclass(frozen=True)
class Recipe:
    """A pretraining recipe: its presets and the steps that are its own; :func:`run` does the rest."""

    presets: dict  # preset name -> function returning (RunConfig, ModelConfig, DataConfig[, {section: cfg}])
    default_preset: str
    configure: Callable  # (preset, items) -> (Settings, mixture); checks every setting, does no work
    corpora: Callable  # (Job) -> Corpora: prepare (rank 0 first), views, held-out split
    description: str = ""
    init_dir: Callable = lambda preset, given: Path(given).resolve() if given else None  # --init-from
    hooks: Callable = lambda job: []  # (Job) -> [(every, fn(step))]: periodic evaluations during training
    final: Callable = lambda job: {}  # (Job) -> summary fields: the recipe's evaluations after training
    may_change: dict = dataclasses.field(default_factory=dict)  # recipe settings a resume may change
    #                  (codept.train.resume.MAY_CHANGE): setting -> what it changes


@dataclass
class Job:
    """One run's state, filled in as :func:`run` proceeds; what the recipe's steps read."""

    preset: str
    overrides: list
    settings: Settings
    mixture: list
    init_dir: Path | None
    world: object = None  # codept.train.process.World
    corpora: Corpora | None = None
    tokenizer: object = None
    vocab: object = None
    model_cfg: object = None
    heads: list = dataclasses.field(default_factory=list)
    engine: object = None
    log: "Log | None" = None
    val: dict = dataclasses.field(default_factory=dict)  # the last validation's summary

    @property
    def run(self) -> RunConfig:
        return self.settings.run

    def section(self, name: str):
        return self.settings.sections[name]

    @property
    def is_main(self) -> bool:
        return self.world.rank == 0


INIT_SHAPE = ("vocab_size", "hidden", "layers", "heads", "intermediate", "max_positions", "type_vocab_size")


def check_init_from(init_dir: Path | None, items: list[str], seq_len: int) -> None:
    """--init-from DIR, before any work: a transformers folder with config.json and tokenizer.json whose
    model codept runs, no ``model.<shape>`` override (the shape is the folder's), rows that fit its
    positions and a tokenizer that fits its vocabulary. ConfigError naming what is wrong."""
    if init_dir is None:
        return
    bad = sorted(set(INIT_SHAPE) & {x[6:].split("=", 1)[0] for x in items if x.startswith("model.")})
    if bad:
        raise ConfigError(f"--init-from {init_dir}: the model's shape comes from its config.json; drop {bad}")
    if not (init_dir / "config.json").is_file() or not (init_dir / "tokenizer.json").is_file():
        raise ConfigError(f"--init-from {init_dir}: needs config.json and tokenizer.json (a transformers folder)")
    from tokenizers import Tokenizer

    from codept.model.hf import config_from_hf

    try:
        cfg, _ = config_from_hf(json.loads((init_dir / "config.json").read_text()))
        n_tok = Tokenizer.from_file(str(init_dir / "tokenizer.json")).get_vocab_size()
    except (ValueError, KeyError, TypeError, OSError, Exception) as e:  # tokenizers raises its own Exception
        raise ConfigError(f"--init-from {init_dir}: {type(e).__name__}: {e}") from None
    if cfg.vocab_size < n_tok or seq_len > cfg.max_positions:
        raise ConfigError(f"--init-from {init_dir}: vocab {cfg.vocab_size} < tokenizer {n_tok} or "
                          f"seq_len {seq_len} > max_positions {cfg.max_positions}")


def parse_args(recipe: Recipe, argv: list[str]):
    import argparse

    ap = argparse.ArgumentParser(description=recipe.description)
    ap.add_argument("--preset", default=recipe.default_preset, choices=sorted(recipe.presets))
    ap.add_argument("--local_rank", type=int, default=0, help="set by the deepspeed launcher")
    ap.add_argument("--init-from", default="", metavar="DIR",
                    help="a transformers BERT/RoBERTa folder to continue pretraining from (with its tokenizer)")
    ap.add_argument("overrides", nargs="*", help="key=value (RunConfig), <section>.key=value, "
                    "objective.<name>.<field>=value, loss.<head>=weight")
    return ap.parse_intermixed_args(argv)  # key=value items may come before and after --preset


def head_options(mixture, objective_settings: dict) -> dict[str, dict]:
    """{head: options} the mixture's objectives give their heads from their settings
    (codept.objectives.spec.Objective.head_options: code_doc -> the contrastive head's loss settings)."""
    out: dict[str, dict] = {}
    for name in sorted({objective_of(k) for k, _ in mixture}):
        obj = OBJECTIVES[name]
        if obj.head_options is not None:
            for head, opts in obj.head_options(obj.config(**objective_settings.get(name, {}))).items():
                out.setdefault(head, {}).update(opts)
    return out


def build_model(job: Job):
    """(Pretrainer, ModelConfig, whether a pretrained MLM head was loaded): a fresh transformer of the
    run's ModelConfig, or the --init-from folder's weights (its shape; the run's dropout, attention
    path and checkpointing), with the mixture's heads."""
    from codept.model import transformer as T
    from codept.model.pretrainer import Pretrainer, build_head

    if job.init_dir is None:
        model, model_cfg = T.Transformer(job.model_cfg), job.model_cfg
    else:
        from codept.model.hf import init_from

        keep = {k: getattr(job.model_cfg, k) for k in ("dropout", "attention_dropout", "attention", "checkpointing")}
        model, model_cfg = init_from(job.init_dir, **keep)
    options = head_options(job.mixture, job.settings.objectives)
    net = Pretrainer(model, {h: build_head(h, model, **options.get(h, {})) for h in job.heads})
    loaded = False
    if job.init_dir is not None and "mlm" in net.heads:
        from codept.model.hf import load_mlm_head

        loaded = load_mlm_head(job.init_dir, net.heads["mlm"])
    return net, model_cfg, loaded


def output_priors(net, job: Job, skip: tuple = ()) -> dict:
    """Start the fresh token-level heads' output biases at their targets' log frequencies
    (codept.model.pretrainer.init_output_priors), counted on the first global batch of a one-rank copy of
    the training stream: the same values on every rank. A resumed run overwrites them from its
    checkpoint. Returns {head: targets counted}."""
    from codept.model.pretrainer import init_output_priors

    run, c = job.run, job.corpora
    one = dataclasses.replace(job.world, rank=0, world_size=1)
    first = packed(streams(c.train, job.mixture, job.vocab, job.settings.objectives, wrap=c.wrap), job.mixture,
                   run.seed, one, run.seq_len, job.vocab.pad_id, job.section("data").buffer, c.long, c.rows)
    rows = run.global_batch_rows or run.global_batch_tokens // run.seq_len
    return init_output_priors(net, [collate([next(first) for _ in range(rows)])], skip=skip)


def settle(recipe: Recipe, argv: list[str]):
    """Step 0 of :func:`run`, before any work or process group: (Job, codept.train.resume.Plan,
    the settings checkpoints record). Every setting checked (the recipe's configure, --init-from,
    data.tokenizer); the output folder chosen and the run there compared (resume.plan); the folder
    choice and the changes a resume applies are printed once (rank 0)."""
    from codept.train import resume as R

    args = parse_args(recipe, argv)
    settings, mixture = recipe.configure(args.preset, args.overrides)
    init_dir = recipe.init_dir(args.preset, args.init_from)
    check_init_from(init_dir, args.overrides, settings.run.seq_len)
    check_tokenizer("data.tokenizer", getattr(settings.sections["data"], "tokenizer", ""), init_dir)
    recorded = R.flat(settings, mixture, init_dir)
    plan = R.plan(settings.run.out_dir, R.out_dir_given(args.overrides), recorded, recipe.may_change)
    if plan.out_dir != settings.run.out_dir:  # the default folder holds a run of other settings
        settings = dataclasses.replace(settings, run=dataclasses.replace(settings.run, out_dir=plan.out_dir))
    if launched_rank() == 0:
        why = {**R.MAY_CHANGE, **recipe.may_change}
        for line in [plan.note, *(f"resume: {k} {old!r} -> {new!r} ({why[k]})" for k, (old, new) in plan.applied.items())]:
            if line:
                print(line, file=sys.stderr, flush=True)
        if plan.finished:
            print(f"{plan.out_dir}: this run finished at step {plan.step} with these settings "
                  f"({Path(plan.out_dir) / 'summary.json'}); nothing to do", flush=True)
    return Job(args.preset, list(args.overrides), settings, mixture, init_dir), plan, recorded


def _streams(job: Job, recipe: Recipe):
    """Steps 1-2 of :func:`run`: the recipe's corpora, tokenizer, vocabulary, the run's ModelConfig
    sized to it; this rank's training stream and fixed validation rows."""
    from codept.model import transformer as T
    from codept.objectives.render import Vocab
    from codept.tokenizer import load_tokenizer

    run_cfg, data, s = job.run, job.section("data"), job.settings
    c = job.corpora = recipe.corpora(job)
    job.tokenizer = load_tokenizer(c.tokenizer_dir)
    job.vocab = vocab = Vocab.from_tokenizer(job.tokenizer)
    job.model_cfg = job.section("model")
    if job.init_dir is None and job.model_cfg.vocab_size != vocab.size:
        job.model_cfg = T.configure(job.model_cfg, vocab_size=vocab.size)
    job.heads = heads_of(job.mixture)
    stream = packed(streams(c.train, job.mixture, vocab, s.objectives, wrap=c.wrap), job.mixture, run_cfg.seed,
                    job.world, run_cfg.seq_len, vocab.pad_id, data.buffer, c.long, c.rows)
    validation = validation_batches(c.held, job.mixture, vocab, s.objectives, job.world, run_cfg,
                                    job.section("val"), vocab.pad_id, data.buffer, c.long, c.rows)
    return stream, validation


def _engine_and_resume(job: Job, stream, plan) -> tuple:
    """Step 3 of :func:`run`: model + heads, output priors, the engine (``job.engine``), resume.
    Returns (Pretrainer, MLM head loaded from --init-from, priors counted, first step)."""
    from codept.train import checkpoint

    E, run_cfg = _engine(), job.run
    checkpoint.seed_all(run_cfg.seed, 0)  # identical initial weights on every rank
    net, job.model_cfg, head_loaded = build_model(job)
    priors = output_priors(net, job, skip=("mlm",) if head_loaded else ())
    checkpoint.seed_all(run_cfg.seed, job.world.rank)  # distinct dropout streams per rank
    job.engine = E.build_engine(net, run_cfg, job.world)
    resume = checkpoint.load(job.engine, run_cfg.out_dir)
    if resume is None:
        return net, head_loaded, priors, 0
    if "steps" in plan.applied:  # the saved lr schedule decays to the old last step
        reschedule(job.engine, job.engine.codept_plan.schedule)
    stream.load_state_dict(resume.stream_state(job.world.rank, job.world.world_size))  # re-split if needed
    if resume.rng is not None:
        checkpoint.restore_rng(resume.rng)  # the stream draws from numpy Generators only: restore now
    else:  # another world size: N ranks' dropout streams do not map to M ranks
        checkpoint.seed_all(run_cfg.seed, job.world.rank, resume.step)
    if resume.changes and job.is_main:
        print("\n".join(world_change_lines(resume, job.engine.codept_plan, stream)), file=sys.stderr, flush=True)
    return net, head_loaded, priors, resume.step


def world_change_lines(resume, plan, stream) -> list[str]:
    """What a resume on another world size changed (the log): the checkpoint's own lines, the
    accumulation that keeps the global batch, the re-split stream, the reseeded dropout."""
    old_k = plan.global_rows // max(1, plan.micro_rows * resume.world)
    queued = len(getattr(stream, "queue", []))
    return [*resume.changes,
            f"resume: gradient accumulation {old_k} -> {plan.grad_accum} micro-batches of {plan.micro_rows} rows "
            f"(global batch {plan.global_rows} rows, as saved)",
            f"resume: data stream re-split from {resume.world} to {plan.world} ranks: rank 0 first finishes "
            f"{queued} buffer(s) in flight or not started, then buffers {getattr(stream, 'frontier', 0)} + r + "
            f"{plan.world} j (no row lost or repeated)",
            f"resume: dropout RNG reseeded from (seed, rank, step {resume.step}) on every rank"]


def run(recipe: Recipe, argv: list[str]) -> int:
    """One pretraining run of ``recipe`` (every recipe's main):
    0. settings parsed and checked, the output folder chosen and its run compared (:func:`settle`),
       before any work;
    1. join the process group; the recipe's corpora (rank 0 prepares first); tokenizer, vocabulary;
    2. one stream per rank over the training views; fixed held-out validation rows;
    3. model + heads (fresh, or --init-from), output priors of the fresh token-level heads,
       DeepSpeed engine, resume from ``out_dir/latest``;
    4. the step loop with validation every ``val.every`` steps and the recipe's hooks;
    5. validation at the end, the recipe's final evaluations;
    6. rank 0 writes and prints summary.json."""
    job, plan, recorded = settle(recipe, argv)
    if plan.finished:
        return 0
    E = _engine()
    job.world = E.init_distributed()
    t_start = time.time()
    stream, validation = _streams(job, recipe)
    net, head_loaded, priors, start = _engine_and_resume(job, stream, plan)

    # 4. train; the recipe's hooks, validation every val.every steps
    run_cfg, engine = job.run, job.engine
    job.log = log = Log(run_cfg.out_dir, job.is_main, total=run_cfg.steps, start=start)
    last_val: dict = {}

    def val_hook(step: int) -> None:
        last_val.clear()
        last_val.update(validate(engine, validation, job.heads))
        log.scalars(step, last_val)

    t_train = time.time()
    tokens = train(engine, stream, run_cfg, start=start, heads=job.heads, weights=job.settings.loss, log=log,
                   hooks=[*recipe.hooks(job), (job.section("val").every, val_hook)],
                   client_state=lambda: {"stream": stream.state_dict(), "model": dataclasses.asdict(job.model_cfg),
                                         "tokenizer": str(job.corpora.tokenizer_dir)}, config=recorded)
    tokens_all = sum(E.all_gather_object(tokens))
    train_seconds = time.time() - t_train

    # 5. validation at the end, the recipe's final evaluations (collectives: every rank)
    val_hook(run_cfg.steps)
    job.val = validation.summary(last_val, run_cfg.steps)
    silent = [f"{k} ({m['no_rows']})" for k, m in job.val.get("by_objective", {}).items() if "no_rows" in m]
    silent += [f"{x} (no labelled target in its rows)" for x in job.val.get("no_labels", [])]
    if job.is_main and silent:
        print("validation: nothing measured for " + "; ".join(silent), file=sys.stderr, flush=True)
    extra = recipe.final(job)

    # 6. summary
    if job.is_main:
        log.close()
        first, last = log.first_last()
        c = job.corpora
        result = {
            "preset": job.preset, "overrides": job.overrides, "ranks": job.world.world_size,
            "steps": run_cfg.steps, "resumed_from": start, "mixture": job.section("data").mixture,
            "params": net.model.num_parameters(), "init_from": str(job.init_dir) if job.init_dir else None,
            "mlm_head_loaded": head_loaded, "output_priors": priors, "tokenizer": str(c.tokenizer_dir),
            "vocab": job.vocab.size, "train_docs": {k: len(v) for k, v in c.train.items()},
            "held_docs": {k: 0 if v is None else len(v) for k, v in c.held.items()},
            **c.summary, "tokens_trained": tokens_all,
            "train_tokens_per_s": round(tokens_all / max(train_seconds, 1e-9)),
            "seconds": round(time.time() - t_start, 1), "loss_first": first, "loss_last": last,
            "loss_weights": {h: job.settings.loss.get(h, 1.0) for h in job.heads}, "val": job.val, **extra,
            "out_dir": run_cfg.out_dir, "loss_curve": str(Path(run_cfg.out_dir) / "loss.png"),
        }
        text = json.dumps(json_safe(result), indent=2, allow_nan=False)  # NaN is not JSON
        (Path(run_cfg.out_dir) / "summary.json").write_text(text + "\n")
        print(text)
    E.shutdown()
    return 0


def json_safe(obj):
    """`obj` with every non-finite float (a metric with no record) as None: strict JSON."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


def main(recipe: Recipe, argv: list[str] | None = None):
    """A recipe script's entry point: :func:`run` under :func:`guarded` (a bad setting: one message,
    exit 2), then leave without the interpreter teardown once the engine was used
    (codept.train.engine.exit_process)."""
    code = guarded(lambda a: run(recipe, a), sys.argv[1:] if argv is None else argv)
    engine = sys.modules.get("codept.train.engine")
    if engine is not None:
        engine.exit_process(code)
    sys.exit(code)
