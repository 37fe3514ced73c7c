"""The wiring every pretraining recipe shares (recipes/pretrain_code.py, and the text recipe of issue
13): settings checked before any work, the objective mixture as streams, the optimizer-step loop,
held-out validation of every head, logs, and an exit path that never leaks.

1. :func:`configure` parses every ``key=value`` setting with the ONE parser
   (codept.train.config.parse_settings) and checks what depends on the mixture: ``data.mixture``
   names registered objectives with finite weights > 0, each at most once; ``objective.<name>.*``
   only for objectives of the mixture; ``loss.<head>`` only for heads the mixture trains, not all 0.
   It runs before the process group and before prepare: a bad setting costs seconds, not a prepare.
2. :func:`guarded` runs a recipe's main: a :class:`~codept.train.config.ConfigError` is printed once
   (by rank 0, or by the process the launcher calls rank 0 before the group exists), without a
   traceback, and the process exits 2; on every exit path this rank's DeepSpeed ``/dev/shm`` buffer
   file is deleted (codept.train.engine.init_distributed deletes it already once all ranks mapped it).
3. :func:`streams` builds one source per mixture entry (``view_source`` of the objective with its
   command-line settings, salt = position + 1); :func:`packed` the rank's Mixture + PackedStream.
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
import difflib
import json
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from codept.data.collate import collate
from codept.data.stream import Mixture, PackedStream
from codept.data.views import view_source
from codept.model.pretrainer import HEADS, target_counts
from codept.objectives import HEADS_OF, LOSS_WEIGHTS_OF, MODEL_OF, OBJECTIVES, VIEWS_OF
from codept.objectives import build as build_objective
from codept.train import checkpoint
from codept.train import engine as E
from codept.train.config import ConfigError, RunConfig, Settings, parse_settings


@dataclass(frozen=True)
class ValConfig:
    """Held-out validation (``val.<field>=value`` overrides)."""

    every: int = 50  # optimizer steps between validations (0 = only at the end)
    rows: int = 32  # packed held-out rows per rank, built once (micro-batches of micro_batch_rows)
    seed: int = 1234  # seed of the validation stream: fixed, so runs of different seeds see the same rows
    holdout: float = 0.1  # share of a text corpus's documents held out (by path hash, codept.data.views.Views.split);
    #                       code corpora use the probe split (probe.holdout)

    def __post_init__(self):
        if self.every < 0 or self.rows < 1:
            raise ValueError(f"every={self.every}, rows={self.rows}: need every >= 0 and rows >= 1")
        if not 0.0 <= self.holdout < 1.0:
            raise ValueError(f"holdout={self.holdout}: must be in [0, 1)")


# ------------------------------------------------------------------------------------------------
# 1. settings


CORPUS_SEP = "@"


def objective_of(key: str) -> str:
    """``"mlm@text"`` -> ``"mlm"`` (a mixture key names an objective and, optionally, its corpus)."""
    return key.partition(CORPUS_SEP)[0]


def corpus_of(key: str) -> str:
    """``"mlm@text"`` -> ``"text"``; a key without a corpus reads the recipe's first (default) corpus."""
    return key.partition(CORPUS_SEP)[2] or "code"


def parse_mixture(spec: str, corpora: dict[str, str] | None = None) -> list[tuple[str, float]]:
    """``"mlm:1,code_doc:2,mlm@text:1"`` -> [(key, weight)]; ``corpora`` maps the recipe's corpus names
    to their view kinds (default {"code": "code"}): an objective must read that kind
    (codept.objectives.VIEWS_OF). ConfigError naming the entry and the rule."""
    corpora = corpora or {"code": "code"}
    out: list[tuple[str, float]] = []
    for entry in filter(None, (e.strip() for e in spec.split(","))):
        key, colon, raw = entry.partition(":")
        name, corpus = objective_of(key), corpus_of(key)
        if name not in OBJECTIVES:
            close = difflib.get_close_matches(name, list(OBJECTIVES), n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise ConfigError(f"data.mixture={spec!r}: unknown objective {name!r}{hint} (registered: "
                              f"{', '.join(OBJECTIVES)})")
        if corpus not in corpora:
            raise ConfigError(f"data.mixture={spec!r}: {key!r} names corpus {corpus!r}; this recipe has "
                              f"{', '.join(corpora)} (write objective{CORPUS_SEP}corpus)")
        if corpora[corpus] not in VIEWS_OF[name]:
            raise ConfigError(f"data.mixture={spec!r}: {name} reads {'/'.join(VIEWS_OF[name])} views, corpus "
                              f"{corpus!r} holds {corpora[corpus]} views")
        try:
            w = float(raw) if colon else 1.0
        except ValueError:
            raise ConfigError(f"data.mixture={spec!r}: weight {raw!r} of {key} is not a number") from None
        if not (math.isfinite(w) and w > 0):
            raise ConfigError(f"data.mixture={spec!r}: weight {raw!r} of {key} must be finite and > 0 "
                              "(drop the objective instead of weighing it 0)")
        if key in dict(out):
            raise ConfigError(f"data.mixture={spec!r}: {key} appears twice (give it one weight)")
        out.append((key, w))
    if not out:
        raise ConfigError(f"data.mixture={spec!r}: name at least one objective as name:weight")
    return out


def corpora_used(mixture: list[tuple[str, float]]) -> list[str]:
    """The corpora the mixture reads, in first-use order."""
    return list(dict.fromkeys(corpus_of(k) for k, _ in mixture))


def heads_of(mixture: list[tuple[str, float]]) -> list[str]:
    """The heads the mixture trains, sorted (codept.objectives.HEADS_OF)."""
    return sorted({h for key, _ in mixture for h in HEADS_OF[objective_of(key)]})


def row_settings(name: str, cfg, given: dict, seq_len: int) -> dict:
    """The settings of a whole-in-row objective at rows of ``seq_len``: ``given``, plus a grouping
    budget not given lowered to ``default_row_share`` x seq_len, plus, when one indivisible example
    (``unit_tokens``) is longer than the row, the caps of ``fit_unit`` that were not given. A given
    value that cannot fit is a ConfigError naming it."""
    out = dict(given)
    n = given.get("max_tokens", cfg().max_tokens)
    share = getattr(cfg, "default_row_share", 0.0)  # a budget, not a shape: fit a share of the row
    if share and "max_tokens" not in given and n > int(share * seq_len):
        out["max_tokens"] = int(share * seq_len)
    elif n > seq_len:
        raise ConfigError(f"objective.{name}.max_tokens={n} > seq_len={seq_len}: packing would split "
                          f"its examples; set objective.{name}.max_tokens<={seq_len}")
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
              corpora: dict[str, str] | None = None) -> tuple[Settings, list[tuple[str, float]]]:
    """(settings, mixture) of a recipe: ``sections`` maps prefixes to the preset's dataclasses and
    must hold ``data`` (with a ``mixture`` field); ``corpora`` as for :func:`parse_mixture`; see the
    module docstring, step 1."""
    objectives = {name: o.config for name, o in OBJECTIVES.items()}
    s = parse_settings(items, run, sections, objectives, list(HEADS))
    mixture = parse_mixture(s.sections["data"].mixture, corpora)
    names = [objective_of(k) for k, _ in mixture]
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
    return s, mixture


def launched_rank() -> int:
    """This process's rank as the launcher set it (RANK), before or without a process group."""
    return int(os.environ.get("RANK", "0") or 0)


def main_first(build: Callable[[bool], object], is_main: bool):
    """``build(progress)`` on rank 0 first (with a progress bar), then, after a barrier, on the other
    ranks, which find rank 0's cached result (prepare, tokenizers, probes are keyed by content)."""
    out = build(True) if is_main else None
    E.barrier()
    return out if is_main else build(False)


def guarded(main: Callable[[list[str]], int], argv: list[str]) -> int:
    """``main(argv)``; a ConfigError -> its message printed once (rank 0), exit code 2. This rank's
    /dev/shm buffer file is deleted on every exit path."""
    try:
        return main(argv)
    except ConfigError as e:
        if launched_rank() == 0:
            print(f"error: {e}", file=sys.stderr, flush=True)
        return 2
    finally:
        E.remove_shm_files()


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
        out.append(view_source(by_corpus[corpus_of(key)], obj, key, salt=i + 1))
    return out


def packed(sources: list, mixture, seed: int, world, seq_len: int, pad_id: int, buffer: int,
           long: str = "split", rows: str = "packed") -> PackedStream:
    """This rank's packed stream over ``sources`` with the mixture's weights (``long``, ``rows``:
    the document strategies of codept.data.pack.pack)."""
    mix = Mixture(sources, [w for _, w in mixture], seed=seed, rank=world.rank, world=world.world_size)
    return PackedStream(mix, seq_len=seq_len, pad_id=pad_id, buffer=buffer, long=long, rows=rows)


# ------------------------------------------------------------------------------------------------
# 4. validation


@dataclass
class Validation:
    """Fixed held-out micro-batches of this rank, or why there are none."""

    batches: list
    docs: int
    skipped: str = ""

    def summary(self, last: dict | None, step: int | None) -> dict:
        if self.skipped:
            return {"skipped": self.skipped}
        heads = sorted({k.split("/")[1] for k in (last or {})})
        per_head = {h: {"loss": _round(last[f"val/{h}/loss"]), "acc": _round(last[f"val/{h}/acc"]),
                        "n": int(last[f"val/{h}/n"])} for h in heads}
        return {"step": step, "docs": self.docs, "rows_per_rank": sum(len(b["segment_ids"]) for b in self.batches),
                **per_head}


def _round(v: float):
    return None if v != v else round(v, 4)  # nan (no record) -> null in JSON


def validation_batches(held_views, mixture, vocab, settings: dict, world, run: RunConfig, val: ValConfig,
                       pad_id: int, buffer: int, long: str = "split", rows_mode: str = "packed") -> Validation:
    """The rank's fixed validation micro-batches (module docstring, step 4); built once."""
    by_corpus = held_views if isinstance(held_views, dict) else {"code": held_views}
    counts = {c: 0 if by_corpus.get(c) is None else len(by_corpus[c]) for c in corpora_used(mixture)}
    n = sum(counts.values())
    short = {c: k for c, k in counts.items() if k < world.world_size}
    if short:
        return Validation([], n, skipped=f"held-out documents per corpus {short} for {world.world_size} ranks: "
                                         "raise probe.holdout (code) or val.holdout (text) to validate")
    stream = packed(streams(held_views, mixture, vocab, settings), mixture, val.seed, world, run.seq_len,
                    pad_id, buffer, long, rows_mode)
    rows = [next(stream) for _ in range(val.rows)]
    step = run.micro_batch_rows
    return Validation([collate(rows[i:i + step]) for i in range(0, len(rows), step)], n)


def validate(engine, validation: Validation, heads: list[str]) -> dict:
    """``val/<head>/loss|acc|n`` over all ranks; {} when validation is skipped (a collective)."""
    if validation.skipped:
        return {}
    return E.evaluate(engine, validation.batches, heads)


# ------------------------------------------------------------------------------------------------
# 5. the step loop


def _forward(engine, batch):
    return engine(batch)


def set_horizon(stream, rows_per_rank: int) -> int:
    """Give the stream's Mixture a horizon (its rank-local mixture steps of the whole run), so that
    ``ctx.progress`` moves from 0 to 1 over the run (schedules: scheduled sampling, a falling [MASK]
    share); without one every objective saw progress 0. Estimated as ``rows_per_rank`` x the
    documents per row of buffer 0 packed at progress 0: a pure function of the data and settings, so
    a resumed run computes the same horizon. A horizon already set is kept. Returns it."""
    m = getattr(stream, "mixture", None)
    if m is None:  # not a PackedStream over a Mixture: nothing to set
        return 0
    if not m.horizon and rows_per_rank > 0:
        rows = len(stream.rows_of_buffer(0))
        m.horizon = max(1, round(rows_per_rank * stream.buffer / max(rows, 1)))
    return m.horizon


def train(engine, stream, run: RunConfig, *, start: int, heads: list[str], weights: dict, log: "Log",
          hooks: list[tuple[int, Callable[[int], None]]], client_state: Callable[[], dict]) -> int:
    """Optimizer steps ``start .. run.steps``; returns the tokens this rank trained on. ``hooks``:
    (every, fn(step)) run after steps that are multiples of ``every`` (> 0), except the last (the
    recipe evaluates at the end itself). Checkpoints every ``run.save_every`` steps and at the end."""
    k = engine.gradient_accumulation_steps()
    set_horizon(stream, run.steps * k * run.micro_batch_rows)
    tokens = 0
    for step in range(start, run.steps):
        micro = [collate([next(stream) for _ in range(run.micro_batch_rows)]) for _ in range(k)]
        tokens += sum(int((b["segment_ids"] > 0).sum()) for b in micro)
        scalars = E.train_step(engine, micro, _forward, heads=heads, weights=weights,
                               count_fn=lambda b: target_counts(b, engine.module.heads))
        log.step(step + 1, scalars)
        for every, fn in hooks:
            if every and (step + 1) % every == 0 and step + 1 < run.steps:
                fn(step + 1)
        if (run.save_every and (step + 1) % run.save_every == 0) or step + 1 == run.steps:
            checkpoint.save(engine, run.out_dir, step + 1, client_state(), config=run, keep_last=run.keep_last)
    return tokens


# ------------------------------------------------------------------------------------------------
# 6. logs


class Log:
    """Rank 0 only: progress bar, TensorBoard scalars, losses.jsonl / eval.jsonl (line-buffered), a
    loss-curve PNG with a validation panel at the end."""

    def __init__(self, out_dir: str, enabled: bool, total: int, start: int):
        self.enabled, self.out = enabled, Path(out_dir)
        self.losses: list[tuple[int, float]] = []
        self.val: list[tuple[int, dict]] = []
        if not enabled:
            return
        from tqdm import tqdm

        self.out.mkdir(parents=True, exist_ok=True)
        self.bar = tqdm(total=total, initial=start, unit="step", mininterval=2.0)
        self.jsonl = open(self.out / "losses.jsonl", "a", buffering=1)  # line-buffered: kill -9 safe
        self.eval = open(self.out / "eval.jsonl", "a", buffering=1)
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
        """Evaluation scalars (TensorBoard + eval.jsonl); ``val/*`` ones also feed the plot's panel."""
        if not self.enabled or not scalars:
            return
        if any(k.startswith("val/") for k in scalars):
            self.val.append((step, {k: v for k, v in scalars.items() if k.endswith("/loss")}))
        self.eval.write(json.dumps({"step": step, **scalars}) + "\n")
        if self.tb is not None:
            for k, v in scalars.items():
                self.tb.add_scalar(k, v, step)
        shown = {k: v for k, v in scalars.items() if not k.endswith("/n")}
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
