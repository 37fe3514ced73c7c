"""Which folder a run writes, and whether it may resume the run already there: checked before the
process group, from plain JSON.

A run's settings are recorded flat in every checkpoint manifest (``rank<r>.json``; :func:`flat`):
``{"seq_len": 128, "model.hidden": 64, "data.mixture": "mlm:1", "objective.mlm.rate": 0.15,
"loss.mlm": 1.0, "init_from": null, ...}`` -- every RunConfig field, every field of every section,
the whole Config of every objective of the mixture (defaults included, so spelling a default out
is no change) and the loss weight of every head. :func:`plan` compares them with this run's:
1. No ``latest`` in the folder: a fresh run.
2. Only settings of :data:`MAY_CHANGE` differ (the recipe adds its own): they change no training
   draw and no update of the steps already taken -- how many steps, how often to save, keep,
   validate and probe, what the evaluations score. The run resumes with them applied, each change
   logged (``steps``: the learning-rate schedule and the objectives' progress then run to the new
   last step).
3. Any other difference changes the data, the model or the optimisation: a resumed run would not be
   the run it continues (before this check, ``lr=0.5`` on resume was silently ignored and
   ``seq_len=64`` applied to a run saved with 128). With ``out_dir=`` given: a ConfigError naming
   every differing setting with its old and new value. Without it (the preset's default folder,
   e.g. the README's second command after the first): the run writes the first numbered folder
   ``<out_dir>-2``, ``-3``, ... that is free or holds a run of the same settings (so the same
   command run again resumes its own folder), and says so.
4. ``steps`` below the checkpoint's step counts as such a difference (a run cannot go back).
5. The same settings and the checkpoint at ``steps`` with its summary.json written: the run is
   finished; nothing to do (it used to "resume" with 0 tokens and overwrite summary.json and the
   loss plot).
Cost: one small JSON read per folder looked at. Not covered: resuming on another world size
(codept.train.checkpoint refuses it); checkpoints of an older codept record the RunConfig only,
so only its fields are compared.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path

from codept.train.settings import ConfigError, Settings, split_item

# settings a resume may change: what each changes (none changes a step already taken or a draw)
MAY_CHANGE = {
    "steps": "the last step (the lr schedule and the objectives' progress run to it)",
    "save_every": "how often checkpoints are saved",
    "keep_last": "how many checkpoints are kept",
    "log_every": "how often scalars are logged",
    "val.every": "how often validation runs",
    "val.rows": "the validation rows (evaluation only)",
    "val.seed": "the validation rows (evaluation only)",
    "probe.every": "how often the cheap probe runs",
    "probe.queries": "the cheap probe (evaluation only)",
    "probe.final_queries": "the final probe (evaluation only)",
    "probe.pool": "the probes' pools (evaluation only)",
    "probe.baselines": "the probes' reference rows (evaluation only)",
    "probe.max_len": "the probes' candidate length (evaluation only)",
    "probe.project": "the cross-project probe (evaluation only)",
}
SKIP = {"out_dir"}  # the folder itself: never compared (the same run may be named by another path)
MAX_NUMBERED = 1000


def _jsonable(v):
    return json.loads(json.dumps(v, default=str))


def flat(settings: Settings, mixture: list, init_dir) -> dict:
    """The run's settings as one flat JSON dict (module docstring); what checkpoints record."""
    from codept.objectives import OBJECTIVES
    from codept.train.mixture import heads_of, objective_of

    out = dict(settings.run.to_dict())
    for prefix, cfg in settings.sections.items():
        out.update({f"{prefix}.{k}": v for k, v in dataclasses.asdict(cfg).items()})
    for name in sorted({objective_of(k) for k, _ in mixture}):
        cfg = OBJECTIVES[name].config(**settings.objectives.get(name, {}))
        out.update({f"objective.{name}.{k}": v for k, v in dataclasses.asdict(cfg).items()})
    out.update({f"loss.{h}": settings.loss.get(h, 1.0) for h in heads_of(mixture)})
    out["init_from"] = str(init_dir) if init_dir else None
    return _jsonable(out)


def saved(out_dir: str | Path) -> tuple[int, dict] | None:
    """(step, recorded settings) of the checkpoint ``out_dir/latest`` names; None without one.
    ConfigError when ``latest`` names a checkpoint whose rank-0 manifest is missing or unreadable."""
    from codept.train.checkpoint import latest_tag

    out = Path(out_dir)
    try:
        tag = latest_tag(out)
    except ValueError as e:
        raise ConfigError(f"out_dir={out}: {e}") from None
    if tag is None:
        return None
    manifest = out / tag / "rank0.json"
    try:
        m = json.loads(manifest.read_text())
        return int(m["step"]), dict(m.get("config") or {})
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ConfigError(f"out_dir={out}: latest names {tag}, but {manifest} is missing or unreadable "
                          f"({type(e).__name__}): the checkpoint is incomplete; restore it, or delete "
                          f"{out / 'latest'} to start the run over") from None


def changes(then: dict, now: dict) -> dict[str, tuple]:
    """{setting: (saved, now)} for every recorded setting that differs (settings one side lacks:
    an older checkpoint records fewer, and those are not compared)."""
    return {k: (then[k], now[k]) for k in sorted(set(then) & set(now) - SKIP) if then[k] != now[k]}


@dataclass(frozen=True)
class Plan:
    out_dir: str
    applied: dict  # {setting: (saved, now)} of MAY_CHANGE settings changed on resume
    step: int = 0  # the checkpoint's step (0: a fresh run)
    finished: bool = False  # the same run already finished: nothing to do
    note: str = ""  # a line for the user (another folder chosen)


def _verdict(out: Path, now: dict, may_change: dict) -> tuple[str, dict, dict, int]:
    """(verdict, blocking changes, applied changes, checkpoint step) for running `now` in `out`;
    verdict: "fresh", "resume", "finished" or "other" (a run of other settings is there)."""
    found = saved(out)
    if found is None:
        return "fresh", {}, {}, 0
    step, then = found
    diff = changes(then, now)
    blocking = {k: v for k, v in diff.items() if k not in may_change}
    applied = {k: v for k, v in diff.items() if k in may_change}
    if now.get("steps", step) < step:  # a run cannot go back
        blocking["steps"] = (f"{then.get('steps', step)} (checkpoint at step {step})", now["steps"])
    if blocking:
        return "other", blocking, {}, step
    if not applied and step >= now.get("steps", step) and (out / "summary.json").is_file():
        return "finished", {}, {}, step
    return "resume", {}, applied, step


def _describe(blocking: dict) -> str:
    return ", ".join(f"{k} {old!r} -> {new!r}" for k, (old, new) in blocking.items())


def _check_creatable(out_dir: str) -> None:
    """The folder can be made: its nearest existing ancestor is a folder this process may write in
    (else the run failed at its first log line, after the process group and prepare)."""
    parent = Path(out_dir).expanduser().absolute()
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise ConfigError(f"out_dir={out_dir}: {parent} is a file, so the folder cannot be made")
    if not (Path(out_dir).exists() or os.access(parent, os.W_OK | os.X_OK)):
        raise ConfigError(f"out_dir={out_dir}: {parent} is not writable, so the folder cannot be made")


def plan(out_dir: str, given: bool, now: dict, may_change: dict | None = None) -> Plan:
    """Where this run writes and what it resumes (module docstring); ConfigError when ``out_dir``
    was given and holds a run of other settings."""
    may_change = {**MAY_CHANGE, **(may_change or {})}
    if not out_dir:
        raise ConfigError("out_dir='': name the run's output folder (an empty one would write into the "
                          "current folder)")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"out_dir={out_dir}: exists and is not a folder")
    _check_creatable(out_dir)
    verdict, blocking, applied, step = _verdict(out, now, may_change)
    if verdict == "other" and given:
        raise ConfigError(f"out_dir={out_dir} holds a run (checkpoint at step {step}) of other settings: "
                          f"{_describe(blocking)}; resuming it with them would not continue that run exactly: "
                          "keep its settings, or give another out_dir")
    note = ""
    if verdict == "other":  # the preset's default folder: the first numbered one that is free or ours
        first = blocking
        for n in range(2, MAX_NUMBERED + 2):
            candidate = Path(f"{out_dir}-{n}")
            if candidate.exists() and not candidate.is_dir():
                continue
            verdict, _, applied, step = _verdict(candidate, now, may_change)
            if verdict != "other":
                break
        else:
            raise ConfigError(f"out_dir={out_dir} and {out_dir}-2 .. -{MAX_NUMBERED + 1} hold runs of other "
                              "settings: give out_dir=")
        note = (f"out_dir: {out_dir} holds a run of other settings ({_describe(first)}); this run uses "
                f"{candidate} (give out_dir= to choose the folder)")
        out_dir = str(candidate)
    return Plan(out_dir, applied, step, verdict == "finished", note)


def out_dir_given(items: list[str]) -> bool:
    """Whether the command line names ``out_dir=`` (else the preset's default folder is used)."""
    return any(split_item(x)[0] == "out_dir" for x in items)
