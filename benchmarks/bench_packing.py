"""Packing utilisation on real function-level code at seq 512, against padding baselines.

Documents: every top-level function/method/class (codept view `functions`) of the running
interpreter's standard library, tokenized with the default tokenizer. Same documents, same run:
  pad-to-max      one document per row of seq_len (truncated)
  pad-to-longest  batches of --batch documents in corpus order, padded to the batch's longest
  best-fit pack   codept.data.pack (documents over seq_len split into windows)
Utilisation = real tokens / tokens computed on. Also checks zero cross-document attention on the
packed rows with the reference rule (codept.attention), and prints packing throughput.
Usage: python benchmarks/bench_packing.py [--seq 512] [--batch 32] [--files N]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from codept.attention import visible
from codept.data.example import Example
from codept.data.pack import pack, utilisation
from codept.data.sources import read_source, stdlib_files
from codept.structure.grammar import SkipFile
from codept.structure.view import build_view
from codept.tokenizer import default_tokenizer_dir, load_tokenizer


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--files", type=int, default=0)
    ap.add_argument("--buffer", type=int, default=1024, help="documents packed together")
    args = ap.parse_args()
    tok = load_tokenizer(default_tokenizer_dir())
    docs = []
    for p in stdlib_files()[: args.files or None]:
        try:
            v = build_view(str(p), "python", read_source(p), tok)
        except SkipFile:
            continue
        end = -1
        for s, e in sorted(v.functions[:, 1:3].tolist()):
            if s >= end:  # top-level units only: no nested duplicates
                docs.append(v.input_ids[s:e])
                end = e
    lengths = np.array([len(d) for d in docs])
    L = args.seq
    print(f"documents: {len(docs):,} top-level definitions, {lengths.sum():,} tokens, "
          f"median {int(np.median(lengths))}, {np.mean(lengths > L):.1%} longer than {L}")

    real = np.minimum(lengths, L).sum()
    pad_max = real / (len(docs) * L)
    longest = sum(min(int(lengths[i : i + args.batch].max()), L) * len(lengths[i : i + args.batch])
                  for i in range(0, len(docs), args.batch))
    pad_longest = real / longest

    exs = [Example(d, np.ones(len(d), bool)) for d in docs]
    t = time.perf_counter()
    rows = []
    for i in range(0, len(exs), args.buffer):
        rows.extend(pack(exs[i : i + args.buffer], L, pad_id=0))
    dt = time.perf_counter() - t
    packed = utilisation(rows)
    cross = 0
    for r in rows[:200]:
        m = visible(r["segment_ids"], r["prefix"])
        q, k = np.nonzero(m)
        cross += int(np.sum(r["segment_ids"][q] != r["segment_ids"][k]))
    print(f"pad-to-max     utilisation {pad_max:6.1%}")
    print(f"pad-to-longest utilisation {pad_longest:6.1%}  (batches of {args.batch})")
    print(f"best-fit pack  utilisation {packed:6.1%}  ({len(rows):,} rows, buffer {args.buffer} docs, "
          f"{lengths.sum() / dt / 1e6:.1f} M tok/s packing)")
    print(f"cross-document attention pairs in 200 packed rows: {cross}")
    print(f"packed/pad-to-longest utilisation ratio: {packed / pad_longest:.2f}")


if __name__ == "__main__":
    main()
