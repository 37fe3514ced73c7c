"""`codept prepare` against a tokenize-only prepare, and its peak memory as the corpus grows 10x.

Same files, same run, one worker process each:
  tokenize-only  read + decode + tokenize (ids, offsets) + write Arrow: the floor of any prepare
  codept prepare the whole job (views in a killable worker, manifest, Arrow shards)
Then a second `codept prepare` of the same unchanged corpus into the same folder (a cache hit: the
time to decide that nothing changed), then peak RSS (main process and worker, from getrusage) of `codept prepare` on the corpus and on a
10x corpus (10 copies of every file, each made distinct by a leading comment so nothing dedups),
each run in a fresh interpreter.
The time ratio is the median over --repeat repeats of (prepare / tokenize-only), the two run back to
back in each repeat with their order flipping (a shared machine's slow spells then hit both sides).
Usage: python benchmarks/bench_prepare.py [--files N] [--scale 10] [--workers 1] [--repeat 3]
Last lines: `cache hit: S s`, `prepare/tokenize time ratio: X` and `peak RSS 10x/1x: Y`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pyarrow as pa  # noqa: E402

from codept.data.sources import read_source, stdlib_files  # noqa: E402
from codept.structure.grammar import SkipFile  # noqa: E402
from codept.structure.view import tokenize  # noqa: E402
from codept.tokenizer import default_tokenizer_dir, load_tokenizer  # noqa: E402

RUN = """
import json, resource, sys, time
from codept.prepare import PrepareConfig, prepare
t = time.perf_counter()
s = prepare([sys.argv[1]], out=sys.argv[2], tokenizer_dir=sys.argv[3], cfg=PrepareConfig(workers=int(sys.argv[4])),
            force=sys.argv[5] == "force", progress=False)
print(json.dumps({"seconds": time.perf_counter() - t, "viewed": s["viewed"], "tokens": s["tokens"],
                  "cached": s["cached"],
                  "rss_main_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "rss_worker_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
"""


def make_corpus(files: list[Path], dest: Path, copies: int) -> None:
    for c in range(copies):
        d = dest / f"copy{c:02d}"
        d.mkdir(parents=True)
        for i, f in enumerate(files):
            (d / f"{i:04d}_{f.name}").write_bytes(f"# copy {c}\n".encode() + f.read_bytes())


def run_prepare(src: Path, out: Path, tok_dir: Path, workers: int, force: bool = True) -> dict:
    r = subprocess.run([sys.executable, "-c", RUN, str(src), str(out), str(tok_dir), str(workers),
                        "force" if force else "reuse"],
                       capture_output=True, text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=0, help="first N stdlib files (0 = all)")
    ap.add_argument("--scale", type=int, default=10)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    tok_dir = default_tokenizer_dir()
    tok = load_tokenizer(tok_dir)
    files = stdlib_files()[: args.files or None]
    tmp = Path(tempfile.mkdtemp(prefix="codept-bench-"))
    try:
        make_corpus(files, tmp / "x1", 1)
        src = sorted((tmp / "x1").rglob("*.py"))

        def tokenize_only() -> float:
            t = time.perf_counter()
            schema = pa.schema([("input_ids", pa.list_(pa.int32())), ("offsets", pa.list_(pa.int32()))])
            with pa.ipc.new_stream(str(tmp / "tok.arrow"), schema) as w:
                for p in src:
                    try:
                        ids, off = tokenize(tok, read_source(p))
                    except SkipFile:
                        continue
                    w.write_table(pa.table({"input_ids": [ids], "offsets": [off.reshape(-1).astype("int32")]},
                                           schema=schema))
            return time.perf_counter() - t

        runs = []  # (tokenize-only seconds, prepare result)
        for r in range(args.repeat):
            if r % 2 == 0:
                t_tok = tokenize_only()
                one = run_prepare(tmp / "x1", tmp / "out1", tok_dir, args.workers)
            else:
                one = run_prepare(tmp / "x1", tmp / "out1", tok_dir, args.workers)
                t_tok = tokenize_only()
            if r == 0:
                hit = run_prepare(tmp / "x1", tmp / "out1", tok_dir, args.workers, force=False)
                assert hit["cached"], "the unchanged corpus was rebuilt"
            shutil.rmtree(tmp / "out1")
            runs.append((t_tok, one))
        ratios = sorted(o["seconds"] / t for t, o in runs)
        one = runs[0][1]
        print(f"corpus: {len(src)} files, {one['tokens']:,} tokens; {args.workers} worker(s)")
        print(f"tokenize-only  {min(t for t, _ in runs):7.2f} s  (best of {args.repeat})")
        print(f"codept prepare {min(o['seconds'] for _, o in runs):7.2f} s  (views of {one['viewed']} files)")
        print(f"cache hit: {hit['seconds']:.2f} s  (same corpus again, nothing changed)")
        print(f"per-repeat prepare/tokenize ratios: {' '.join(f'{x:.2f}' for x in ratios)}")
        make_corpus(files, tmp / f"x{args.scale}", args.scale)
        big = run_prepare(tmp / f"x{args.scale}", tmp / "outN", tok_dir, args.workers)
        print(f"{args.scale}x corpus     {big['seconds']:7.2f} s  ({big['tokens']:,} tokens)")
        for k in ("rss_main_mb", "rss_worker_mb"):
            print(f"peak RSS {k[4:-3]:<6} 1x {one[k]:7.1f} MB   {args.scale}x {big[k]:7.1f} MB")
        peak1 = one["rss_main_mb"] + one["rss_worker_mb"]
        peakn = big["rss_main_mb"] + big["rss_worker_mb"]
        print(f"prepare/tokenize time ratio: {ratios[len(ratios) // 2]:.2f}")
        print(f"peak RSS {args.scale}x/1x: {peakn / peak1:.2f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
