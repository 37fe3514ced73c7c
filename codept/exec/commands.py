"""The ``codept exec run`` and ``codept trace`` subcommands (argument parsing only; the work is in
sandbox.py and job.py). ``add_cli(sub)`` registers both on the top-level subparsers."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _cmd_exec_run(args) -> int:
    from codept.exec import sandbox

    try:
        limits = sandbox.Limits(timeout=args.timeout, memory_mb=args.memory_mb)
        r = sandbox.run_script(args.file, limits, unsafe_no_sandbox=args.unsafe_no_sandbox)
    except (ValueError, sandbox.SandboxUnavailable) as e:
        print(f"codept exec run: {e}", file=sys.stderr)
        return 2
    print(json.dumps({"file": str(args.file), **r.to_json()}, indent=2))
    return 0


def _cmd_trace(args) -> int:
    from codept.exec.job import main

    return main(args)


def add_cli(sub) -> None:
    px = sub.add_parser("exec", help="run code in the OS sandbox").add_subparsers(dest="sub", required=True)
    pr = px.add_parser("run", help="run one Python file in the sandbox; print a JSON result")
    pr.add_argument("file", type=Path, help="the Python file to run")
    pr.add_argument("--timeout", type=float, default=5.0, help="wall-clock seconds before a kill (default 5)")
    pr.add_argument("--memory-mb", type=int, default=1024, help="address-space limit (default 1024)")
    pr.add_argument("--unsafe-no-sandbox", action="store_true",
                    help="run WITHOUT isolation (rlimits and the kill only): trusted code only")
    pr.set_defaults(fn=_cmd_exec_run)

    pt = sub.add_parser("trace", help="offline job: run doctests/HumanEval in the sandbox, record traces")
    pt.add_argument("sources", nargs="+", help="'stdlib', 'humaneval', 'pkg:NAME' (an installed package's doctests), .py files or folders")
    pt.add_argument("--out", required=True, type=Path, help="output folder of the trace shards")
    pt.add_argument("--workers", type=int, default=0, help="parallel sandboxes (default: all cores)")
    pt.add_argument("--timeout", type=float, default=30.0, help="wall-clock seconds per sandbox run")
    pt.add_argument("--repeat", type=int, default=2, help="runs per item; units that differ are dropped")
    pt.add_argument("--mutate", type=int, default=0, help="mutants per HumanEval problem (default 0)")
    pt.add_argument("--force", action="store_true", help="redo shards that are already done")
    pt.add_argument("--quiet", action="store_true", help="no progress bar")
    pt.add_argument("--unsafe-no-sandbox", action="store_true", help="trusted code only: no isolation")
    pt.set_defaults(fn=_cmd_trace)
