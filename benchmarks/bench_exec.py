"""Sandbox overhead per run (median) and traces per second per core; optionally the hostile table.

  python benchmarks/bench_exec.py [--runs 40] [--items 16] [--hostile]

1. Overhead: ``python -I -S -c pass`` three ways, interleaved, ``runs`` times each: bare
   (subprocess, no limits), rlimits only (codept's unsafe path: prlimit + kill), and the full
   bubblewrap sandbox. Overhead = median(sandbox) - median(bare), the bar is <= 100 ms.
2. Throughput: the trace job on the first ``items`` stdlib doctest modules with ONE worker
   (per core), repeat 1 and repeat 2 (the default determinism check): units/s, line events/s.
3. ``--hostile``: the hostile suite (codept.exec.hostile) as a markdown table.
Measured (2026-12-01, root, bwrap 0.8.0, 2 shared cores under load 6-10): bare python 14-28 ms,
rlimits only 22-30 ms, sandbox 67-82 ms median: overhead 53-54 ms (p90 of the sandbox 225-467 ms
under load); one worker: 31-32 units/s at repeat 1, 15-25 units/s at repeat 2 (1.2-1.6 k line
events/s); hostile suite 40/40 contained, 0 survivors, 0 host changes (also as uid 1000, unprivileged).
Those sandbox runs used /usr's python 3.11.2 (the pyenv prefix was unreachable; fixed, LAYOUT 3). After
the fix, same interpreter in both arms, under the CPU lock (--runs 30 --items 8): bare 7.0 ms, sandbox
17.5 ms median (p90 20.6): overhead 10.5 ms; one worker 135 units/s at repeat 1, 72 at repeat 2.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from codept.exec import hostile, job, sandbox
from codept.exec.inputs import stdlib_items


def overhead(runs: int) -> dict:
    times = {"bare": [], "rlimits": [], "sandbox": []}
    for _ in range(runs):
        t = time.monotonic()
        subprocess.run([sys.executable, "-I", "-S", "-c", "pass"], check=True)
        times["bare"].append(time.monotonic() - t)
        r = sandbox.run_python(["-c", "pass"], unsafe_no_sandbox=True)
        times["rlimits"].append(r.duration_s)
        r = sandbox.run_python(["-c", "pass"])
        assert r.status == "ok", r
        times["sandbox"].append(r.duration_s)
    med = {k: statistics.median(v) * 1000 for k, v in times.items()}
    return {**{f"{k}_ms": round(v, 1) for k, v in med.items()}, "overhead_ms": round(med["sandbox"] - med["bare"], 1),
            "p90_sandbox_ms": round(sorted(times["sandbox"])[int(0.9 * runs)] * 1000, 1)}


def throughput(n_items: int, repeat: int) -> dict:
    items = stdlib_items()[:n_items]
    with tempfile.TemporaryDirectory() as d:
        t = time.monotonic()
        s = job.run_job(items, Path(d), job.TraceConfig(repeat=repeat), sandbox.Limits(timeout=30), workers=1,
                        show_progress=False)
        dt = time.monotonic() - t
        steps = sum(len(r["lines"]) for r in job.read_rows(Path(d)))
    return {"repeat": repeat, "items": s["items"], "units": s["units"], "kept": s["kept"], "seconds": round(dt, 1),
            "units_per_s": round(s["units"] / dt, 2), "items_per_s": round(s["items"] / dt, 2),
            "line_events_per_s": round(steps / dt), "dropped": s["dropped"]}


def hostile_table() -> str:
    with tempfile.TemporaryDirectory() as d:
        rows = hostile.run_suite(Path(d))
    out = ["| case | status | seconds (limit) | survivors | host touched | contained |", "|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['case']} | {r['status']} {r['detail'] or ''} | {r['seconds']} ({r['limit']}) | "
                   f"{r['survivors']} | {'yes' if r['host_touched'] else 'no'} | {'yes' if r['contained'] else 'NO: ' + '; '.join(r['problems'])} |")
    n_bad = sum(not r["contained"] for r in rows)
    out.append(f"\n{len(rows)} cases, {n_bad} escapes/problems, {sum(r['survivors'] for r in rows)} survivors, "
               f"{sum(r['host_touched'] for r in rows)} host changes")
    return "\n".join(out)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=40)
    p.add_argument("--items", type=int, default=16)
    p.add_argument("--hostile", action="store_true")
    a = p.parse_args()
    sandbox.check_sandbox()
    print("overhead:", overhead(a.runs))
    for repeat in (1, 2):
        print("throughput (1 worker):", throughput(a.items, repeat))
    if a.hostile:
        print(hostile_table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
