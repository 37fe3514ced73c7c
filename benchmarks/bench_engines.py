"""`codept prepare --executor ray` against the local executor: throughput per worker, same files.

Each repeat runs, in a fresh interpreter each and in flipping order, the same prepare (forced: a
full build) with `--executor local --workers W` and `--executor ray` on a local Ray instance of W
CPUs; the ray run also reports its instance's start-up (ray.init) separately. Both builds must give
the same content key (checked). Reported: files/s per worker for each, and the ratio ray/local
(median over --repeat), with and without Ray's start-up.
Usage: python benchmarks/bench_engines.py [--files N] [--workers 2] [--repeat 3]
Last line: `ray/local files/s per worker: X (Y without Ray start-up)`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

RUN = """
import json, sys, time
from codept.prepare import PrepareConfig, prepare
if __name__ == "__main__":
    ex, src, out, tok, workers = sys.argv[1:6]
    t0 = time.perf_counter()
    init = 0.0
    if ex == "ray":
        import logging, ray
        ray.init(num_cpus=int(workers), include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
        init = time.perf_counter() - t0
    s = prepare([src], out=out, tokenizer_dir=tok, cfg=PrepareConfig(workers=int(workers), executor=ex),
                force=True, progress=False)
    total = time.perf_counter() - t0
    if ex == "ray":
        ray.shutdown()
    print(json.dumps({"seconds": total, "init": init, "viewed": s["viewed"], "inputs": s["inputs"],
                      "key": s["cache_key"], "workers": s["workers"]}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=600)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    from codept.data.sources import stdlib_files
    from codept.tokenizer import default_tokenizer_dir

    tmp = Path(tempfile.mkdtemp(prefix="bench_engines_"))
    src = tmp / "src"
    for i, f in enumerate(stdlib_files()[: args.files]):
        (src / f"{i:05d}_{f.name}").parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(f, src / f"{i:05d}_{f.name}")
    tok = str(default_tokenizer_dir())
    env = {**os.environ, "OMP_NUM_THREADS": "1", "RAYON_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    rows: dict[str, list[dict]] = {"local": [], "ray": []}
    for r in range(args.repeat):
        for ex in (("local", "ray") if r % 2 == 0 else ("ray", "local")):
            out = subprocess.run([sys.executable, "-c", RUN, ex, str(src), str(tmp / f"out_{ex}"), tok, str(args.workers)],
                                 capture_output=True, text=True, env=env, check=True).stdout.strip().splitlines()[-1]
            rows[ex].append(json.loads(out))
            d = rows[ex][-1]
            print(f"repeat {r} {ex:5s}: {d['seconds']:.2f} s ({d['init']:.2f} s Ray start-up), {d['viewed']} of "
                  f"{d['inputs']} viewed, {d['workers']} workers")
    keys = {d["key"] for v in rows.values() for d in v}
    assert len(keys) == 1, f"the executors gave different content keys: {keys}"
    n = rows["local"][0]["inputs"]

    def per_worker(d: dict, startup: bool = True) -> float:
        return n / (d["seconds"] - (0 if startup else d["init"])) / args.workers

    loc = statistics.median(per_worker(d) for d in rows["local"])
    ray_all = statistics.median(per_worker(d) for d in rows["ray"])
    ray_run = statistics.median(per_worker(d, startup=False) for d in rows["ray"])
    print(f"local files/s per worker: {loc:.1f}; ray: {ray_all:.1f} ({ray_run:.1f} without start-up); same content key")
    print(f"ray/local files/s per worker: {ray_all / loc:.2f} ({ray_run / loc:.2f} without Ray start-up)")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
