"""Online throughput of every registered objective against Hugging Face's MLM collator, one core.

Same corpus (the prepared views of the running interpreter's standard library), same run, repeats
interleaved (contenders rotate their order each repeat, so a slow spell of the host hits all alike):
  <objective>          codept.data.views.view_source over the prepared folder -> objective ->
                       best-fit pack -> collate to tensors (rows of --seq): every registered objective
  mlm old-hop          the same mlm stream with the pre-columnar source (each Arrow row -> Python
                       lists -> CodeView), kept as the measured baseline of the typed sources
  mlm in-memory        views already built in memory (the ceiling of the data path)
  hf lists             transformers' DataCollatorForLanguageModeling (mlm 0.15) on lists of dicts
                       of Python ints, rows of --seq cut from the same token sequences
  hf tensors           the same collator on pre-padded tensors (its fastest path)
Tokens/s counts delivered (non-padding) tokens of the collated batches. The verdict lines give each
objective's median ratio to "hf lists" and "hf tensors" over the repeats.
Usage: python benchmarks/bench_objectives.py [--seq 512] [--batch 32] [--batches 24] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from codept.data.collate import collate  # noqa: E402
from codept.data.stream import Mixture, PackedStream, Source  # noqa: E402
from codept.data.views import open_views, view_source  # noqa: E402
from codept.objectives import OBJECTIVES, build  # noqa: E402
from codept.objectives.render import Vocab  # noqa: E402
from codept.prepare import load_views, prepare  # noqa: E402
from codept.tokenizer import default_tokenizer_dir, load_tokenizer  # noqa: E402


def codept_run(source: Source, seq: int, batch: int, batches: int, pad_id: int) -> tuple[int, float]:
    stream = PackedStream(Mixture([source], [1.0], seed=0), seq_len=seq, pad_id=pad_id, buffer=256)
    t = time.perf_counter()
    tokens = 0
    for rows in stream.batches(batch):
        b = collate(rows)
        tokens += int((b["segment_ids"] > 0).sum())
        batches -= 1
        if batches == 0:
            break
    return tokens, time.perf_counter() - t


def hf_run(collator, examples: list, batch: int, batches: int) -> tuple[int, float]:
    t = time.perf_counter()
    tokens = 0
    for i in range(batches):
        chunk = examples[(i * batch) % len(examples):][:batch]
        out = collator(chunk)
        tokens += int(out["input_ids"].numel())
    return tokens, time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--batches", type=int, default=24, help="batches per contender and repeat")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(1)
    from transformers import AutoTokenizer, DataCollatorForLanguageModeling
    from codept.structure.view import CodeView

    tok_dir = default_tokenizer_dir()
    summary = prepare([], tokenizer_dir=tok_dir, progress=False)
    ds = load_views(summary["out"])
    views = open_views(ds)
    vocab = Vocab.from_tokenizer(load_tokenizer(tok_dir))
    memory = [views[i] for i in range(len(views))]
    mlm = build("mlm", vocab)
    runs = {name: view_source(views, build(name, vocab), name) for name in OBJECTIVES}
    runs["mlm old-hop"] = Source("old", len(ds), lambda i, rng: mlm(CodeView.from_record(ds[i]), rng))
    runs["mlm in-memory"] = Source("mem", len(memory), lambda i, rng: mlm(memory[i], rng))

    hf_tok = AutoTokenizer.from_pretrained(str(tok_dir))
    collator = DataCollatorForLanguageModeling(hf_tok, mlm=True, mlm_probability=0.15)
    flat = np.concatenate([np.asarray(v.input_ids) for v in memory])
    n = len(flat) // args.seq
    cut = flat[: n * args.seq].reshape(n, args.seq)
    lists = [{"input_ids": r.tolist()} for r in cut]
    tensors = [{"input_ids": torch.from_numpy(r.astype(np.int64))} for r in cut]

    names = list(runs) + ["hf lists", "hf tensors"]
    rates: dict[str, list[float]] = {k: [] for k in names}
    print(f"{len(views)} views, {len(flat):,} tokens; rows of {args.seq}, batches of {args.batch}, "
          f"{args.batches} batches x {args.repeats} repeats, one thread")
    for r in range(args.repeats):
        order = names[r % len(names):] + names[: r % len(names)]
        for name in order:
            if name == "hf lists":
                tokens, sec = hf_run(collator, lists, args.batch, args.batches)
            elif name == "hf tensors":
                tokens, sec = hf_run(collator, tensors, args.batch, args.batches)
            else:
                tokens, sec = codept_run(runs[name], args.seq, args.batch, args.batches, vocab.pad_id)
            rates[name].append(tokens / sec)
    med = {k: float(np.median(v)) for k, v in rates.items()}
    print(f"{'contender':<16} {'M tok/s (median)':>17} {'min':>6} {'max':>6} {'/hf lists':>10} {'/hf tensors':>12}")
    for k in names:
        v = rates[k]
        print(f"{k:<16} {med[k] / 1e6:>17.2f} {min(v) / 1e6:>6.2f} {max(v) / 1e6:>6.2f} "
              f"{np.median([a / b for a, b in zip(v, rates['hf lists'])]):>10.2f} "
              f"{np.median([a / b for a, b in zip(v, rates['hf tensors'])]):>12.2f}")


if __name__ == "__main__":
    main()
