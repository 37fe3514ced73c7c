"""``codept trace SRC... --out DIR``: the offline labelling job (the only place corpus code runs).

Algorithm:
  1. Items (codept.exec.inputs): stdlib modules with doctests, installed packages' modules with
     doctests (``pkg:NAME``), .py files / folders, HumanEval (+ optional mutants). Sorted by key, cut into shards of ``shard_items`` items.
  2. The job key hashes the interpreter version, the sandbox limits and layout
     (sandbox.Limits.digest), the tracer's source and the caps; every row carries the interpreter
     version and the sandbox digest.
  3. Each item runs ``repeat`` times (default 2), each time in a fresh sandbox, in a thread pool
     of ``workers`` (threads suffice: the work is in the sandboxes; worker i runs as its own uid, so
     one item's fork bomb cannot use up another's process limit). A unit (one doctest / program)
     is kept only when every run gives identical labels (lines, counts, states, output, error);
     otherwise it is flagged ``nondeterministic`` and dropped. Units that timed out, and items whose
     sandbox ended badly (timeout, signal, error before any unit), are dropped and counted.
  4. A shard is written as ``shards/NNNNN.jsonl`` (rows) + ``NNNNN.manifest.jsonl`` (one line per
     item: status and unit counts) + ``NNNNN.done`` (the job key and the item digests), each via an
     atomic rename, ``.done`` last. Resume: a shard whose ``.done`` matches is skipped; ``--force``
     redoes all. ``summary.json`` adds every shard up: every input is accounted for.
Cost: repeat x (sandbox ~50 ms + the module's import and doctests) per item; see
benchmarks/bench_exec.py for traces/s. Not covered: distributing shards over machines (give each
machine its own --out and a disjoint SRC list), items whose doctests need the network or a display.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import queue
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from codept.exec import sandbox
from codept.exec.inputs import Item, resolve_sources
from codept.exec.views import read_rows  # noqa: F401 (the reader of this job's folders; its old home)

TRACER = Path(__file__).with_name("tracer.py")
LABEL_FIELDS = ("lines", "counts", "states", "output", "error", "attempted", "failed", "truncated")
UNIT_FIELDS = ("name", "code", "first_line") + LABEL_FIELDS


@dataclass(frozen=True)
class TraceConfig:
    repeat: int = 2  # runs per item; a unit is kept only when all agree
    shard_items: int = 16
    max_steps: int = 2000  # line events per unit
    repr_cap: int = 64  # chars of a value's repr
    unit_timeout: float = 2.0  # seconds per unit (alarm inside the sandbox)
    output_cap: int = 2000

    def __post_init__(self):
        for name, low in (("repeat", 1), ("shard_items", 1), ("max_steps", 1), ("repr_cap", 8), ("output_cap", 0)):
            if getattr(self, name) < low:
                raise ValueError(f"trace setting {name}={getattr(self, name)}: must be >= {low}")
        if not self.unit_timeout > 0:
            raise ValueError(f"trace setting unit_timeout={self.unit_timeout}: must be > 0")

    def caps(self) -> dict:
        return {"max_steps": self.max_steps, "repr_cap": self.repr_cap, "unit_timeout": self.unit_timeout,
                "output_cap": self.output_cap}


def python_version() -> str:
    return f"{platform.python_implementation()} {platform.python_version()}"


def job_key(cfg: TraceConfig, limits: sandbox.Limits, unsafe: bool) -> str:
    h = hashlib.sha256()
    for part in (python_version(), limits.digest(), TRACER.read_bytes(), json.dumps(asdict(cfg), sort_keys=True),
                 str(unsafe)):
        h.update(part if isinstance(part, bytes) else part.encode())
    return h.hexdigest()[:16]


def run_item(item: Item, cfg: TraceConfig, limits: sandbox.Limits, uid: int, unsafe: bool = False):
    """(rows, manifest line) of one item (module docstring, step 3)."""
    task = json.dumps({**item.task, "caps": cfg.caps()}).encode()
    runs, results = [], []
    for _ in range(cfg.repeat):
        r = sandbox.run_python(["-c", TRACER.read_text()], limits, task, uid=uid, unsafe_no_sandbox=unsafe)
        results.append(r)
        runs.append(_units(r.side))
    man = {"key": item.key, "status": results[0].status, "exit_code": results[0].exit_code,
           "signal": results[0].signal, "seconds": round(sum(r.duration_s for r in results), 3),
           "survivors": sum(r.survivors for r in results), "stderr": results[0].stderr[-300:]}
    if any(r.status != "ok" for r in results) and not all(runs):
        man.update(units=0, kept=0, dropped={"sandbox_" + results[0].status: 1})
        return [], man
    rows, dropped = _agree(item, runs, limits, uid)
    man.update(units=len(runs[0]), kept=len(rows), dropped=dropped)
    return rows, man


def _units(side: bytes) -> dict[str, dict]:
    """name -> unit from the side channel; malformed lines are ignored, fields checked."""
    out = {}
    for line in side.decode("utf-8", "replace").splitlines():
        try:
            u = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(u, dict) and all(k in u for k in UNIT_FIELDS) and isinstance(u["name"], str):
            out[u["name"]] = {k: u[k] for k in UNIT_FIELDS}
    return out


def _agree(item: Item, runs: list[dict], limits: sandbox.Limits, uid: int):
    rows, dropped = [], {}
    for name, unit in runs[0].items():
        same = all(name in r and all(r[name][k] == unit[k] for k in LABEL_FIELDS) for r in runs[1:])
        reason = ("timeout" if unit["error"] == "timeout" else None) or (None if same else "nondeterministic")
        if reason:
            dropped[reason] = dropped.get(reason, 0) + 1
            continue
        rows.append({"id": f"{item.key}::{name}", "source": item.key, **unit,
                     "python": python_version(), "sandbox": limits.digest()})
    return rows, dropped


def _write(path: Path, lines: list[dict]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for x in lines:
            f.write(json.dumps(x, ensure_ascii=False) + "\n")
    os.replace(tmp, path)


def _shard_done(shards: Path, i: int, key: str, digests: list[str]) -> bool:
    done = shards / f"{i:05d}.done"
    return done.exists() and json.loads(done.read_text()) == {"key": key, "items": digests}


def run_job(items: list[Item], out: Path, cfg: TraceConfig, limits: sandbox.Limits, workers: int = 1,
            force: bool = False, show_progress: bool = True, unsafe: bool = False) -> dict:
    from codept.data.jobs import progress

    if not unsafe:
        sandbox.check_sandbox()
    items = sorted(items, key=lambda it: it.key)
    key = job_key(cfg, limits, unsafe)
    shards = out / "shards"
    shards.mkdir(parents=True, exist_ok=True)
    groups = [items[i : i + cfg.shard_items] for i in range(0, len(items), cfg.shard_items)]
    uids = queue.Queue()
    for w in range(max(1, workers)):
        uids.put(sandbox.SANDBOX_UID + w)
    bar = progress(len(items), show_progress, unit="item")
    resumed = 0
    with ThreadPoolExecutor(max(1, workers)) as pool:
        for i, group in enumerate(groups):
            digests = [it.digest for it in group]
            if not force and _shard_done(shards, i, key, digests):
                resumed += 1
                bar(len(group))
                continue
            results = list(pool.map(lambda it: _with_uid(uids, it, cfg, limits, unsafe), group))
            _write(shards / f"{i:05d}.jsonl", [row for rows, _ in results for row in rows])
            _write(shards / f"{i:05d}.manifest.jsonl", [man for _, man in results])
            (shards / f"{i:05d}.done").write_text(json.dumps({"key": key, "items": digests}))
            bar(len(group))
    bar(0, close=True)
    for stale in sorted(shards.glob("*.done")):  # shards of an earlier, longer item list
        if int(stale.stem) >= len(groups):
            for suffix in (".jsonl", ".manifest.jsonl", ".done"):
                (shards / f"{stale.stem}{suffix}").unlink(missing_ok=True)
    summary = summarize(out, len(groups), key, limits, cfg, unsafe)
    summary["resumed_shards"] = resumed
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def _with_uid(uids: queue.Queue, item: Item, cfg, limits, unsafe):
    uid = uids.get()
    try:
        return run_item(item, cfg, limits, uid, unsafe)
    finally:
        uids.put(uid)


def summarize(out: Path, n_shards: int, key: str, limits, cfg, unsafe: bool) -> dict:
    mans = [json.loads(l) for i in range(n_shards) for l in (out / "shards" / f"{i:05d}.manifest.jsonl").open()]
    dropped: dict[str, int] = {}
    for m in mans:
        for k, v in m["dropped"].items():
            dropped[k] = dropped.get(k, 0) + v
    by_status: dict[str, int] = {}
    for m in mans:
        by_status[m["status"]] = by_status.get(m["status"], 0) + 1
    units = sum(m["units"] for m in mans)
    return {"key": key, "python": python_version(), "sandbox": "none" if unsafe else limits.digest(),
            "limits": asdict(limits), "trace": asdict(cfg), "items": len(mans), "items_by_status": by_status,
            "units": units, "kept": sum(m["kept"] for m in mans), "dropped": dropped,
            "survivors": sum(m["survivors"] for m in mans), "shards": n_shards}


def main(args) -> int:
    try:
        items, skipped = resolve_sources(args.sources, mutate=args.mutate)
    except FileNotFoundError as e:
        print(f"codept trace: {e}", file=sys.stderr)
        return 2
    if not items:
        print(f"codept trace: nothing to trace in {args.sources} ({len(skipped)} files without doctests)", file=sys.stderr)
        return 2
    try:
        limits, cfg = sandbox.Limits(timeout=args.timeout), TraceConfig(repeat=args.repeat)
        if args.workers < 0 or args.mutate < 0:
            raise ValueError(f"--workers={args.workers} / --mutate={args.mutate}: must be >= 0")
        s = run_job(items, args.out, cfg, limits, workers=args.workers or os.cpu_count(),
                    force=args.force, show_progress=not args.quiet, unsafe=args.unsafe_no_sandbox)
    except (ValueError, sandbox.SandboxUnavailable) as e:
        print(f"codept trace: {e}", file=sys.stderr)
        return 2
    (args.out / "skipped.jsonl").write_text("".join(json.dumps({"path": p, "reason": r}) + "\n" for p, r in skipped))
    print(f"trace: {s['items']} items ({s['items_by_status']}), {s['units']} units, {s['kept']} kept, "
          f"dropped {s['dropped']}, {len(skipped)} files without doctests, {s['survivors']} survivors "
          f"-> {args.out} (python {s['python']}, sandbox {s['sandbox']})")
    return 0
