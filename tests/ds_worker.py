"""A tiny DeepSpeed training job for the tests in tests/test_train_*.py, launched as

    deepspeed --num_gpus 2 --master_port P tests/ds_worker.py --mode train --out DIR [--set key=value ...]

with DS_ACCELERATOR=cpu, OMP_NUM_THREADS=1 and TORCH_EXTENSIONS_DIR set (see tests/test_train_ds.py).
It trains a stand-in model (embedding + hidden layer + linear LM head with dropout, per-token logits,
one head "lm" returning (loss_sum, n_valid)) on a real codept PackedStream of synthetic documents,
exactly the way the recipe will: codept.train.engine / codept.train.checkpoint, nothing else.

Modes:
  train  run cfg.steps optimizer steps from `latest` (if any), save every cfg.save_every, append one
         JSON line per step {"step", "loss", "lr"} to OUT/<--log> (rank 0), write OUT/final.json
         (sha256 of the gathered parameters) at the end.
  norm   one optimizer step on fixed micro-batches with UNEQUAL valid-token counts (norm_batches),
         dump the logged loss, the reduced gradients and the parameters after the step to OUT/norm.pt
         (rank 0), then --extra_steps ordinary steps whose losses go to OUT/<--log>.
Data options: --rows/--long (codept.data.pack), --record NAME (each rank logs the documents of
every step's rows to OUT/NAME-rank<r>.jsonl), --dump_load (the weights and Adam moments right after
the resume to OUT/load.pt).
Fault injection (tests only): --die_in_save STEP makes rank 1 write half of its first DeepSpeed file
of that save and SIGKILL itself; --step_sleep S slows steps so an outside kill lands mid-run.
The module level defines the model and data only (no deepspeed import), so tests import it for the
single-process reference.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from codept.data.example import IGNORE, Example

VOCAB, DIM, MASK_ID, PAD_ID = 64, 32, 4, 0


class TinyLM(torch.nn.Module):
    """Stand-in for codept/model: token ids (B, T) -> per-token logits (B, T, VOCAB)."""

    def __init__(self, seed: int = 0, dropout: float = 0.1):
        super().__init__()
        with torch.random.fork_rng():  # init independent of the global RNG state
            torch.manual_seed(seed)
            self.emb = torch.nn.Embedding(VOCAB, DIM)
            self.hidden = torch.nn.Linear(DIM, DIM)
            self.head = torch.nn.Linear(DIM, VOCAB)
        self.drop = torch.nn.Dropout(dropout)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        h = self.drop(self.emb(input_ids))  # (B, T, C)
        h = h + torch.tanh(self.hidden(h))
        return self.head(h)  # (B, T, V)


def lm_loss(model, batch: dict) -> dict:
    """Head 'lm': (sum of token cross-entropies over labels != IGNORE, number of such tokens)."""
    logits = model(batch["input_ids"])
    labels = batch["labels.lm"]
    loss_sum = F.cross_entropy(logits.reshape(-1, VOCAB).float(), labels.reshape(-1), ignore_index=IGNORE,
                               reduction="sum")
    return {"lm": (loss_sum, int((labels != IGNORE).sum()))}


# ------------------------------------------------------------------------------------------------
# data


def make_doc(index: int, rng: np.random.Generator) -> Example:
    """Synthetic document: a noisy arithmetic sequence (learnable), 15% of tokens masked."""
    n = int(rng.integers(6, 40))
    start, stride = int(rng.integers(5, VOCAB)), int(rng.integers(1, 4))
    ids = (start + stride * np.arange(n)) % (VOCAB - 5) + 5
    sel = rng.random(n) < 0.15
    labels = np.where(sel, ids, IGNORE).astype(np.int32)
    inp = np.where(sel, MASK_ID, ids).astype(np.int32)
    return Example(input_ids=inp, prefix=np.ones(n, bool), labels={"lm": labels})


def make_doc_tagged(index: int, rng: np.random.Generator) -> Example:
    """:func:`make_doc` carrying its document index (``scalar.doc`` of the rows: which examples a
    rank trained on)."""
    ex = make_doc(index, rng)
    ex.scalars = {"doc": index}
    return ex


def make_stream(seed: int, rank: int, world: int, seq_len: int, rows: str = "packed", long: str = "split",
                tagged: bool = False):
    """The job's one stream of synthetic documents, buffers dealt to the ranks (codept.data.stream, 5)."""
    from codept.data.stream import Mixture, PackedStream, Source

    src = Source("synthetic", 4000, make_doc_tagged if tagged else make_doc)
    return PackedStream(Mixture([src], [1.0], seed=seed), seq_len, PAD_ID, buffer=16, rank=rank, world=world,
                        rows=rows, long=long)


def norm_batches(rank: int, k: int = 2, rows: int = 2, seq_len: int = 32) -> list[dict]:
    """Fixed micro-batches for rank `rank` with deliberately unequal valid counts, one empty."""
    valid = {(0, 0): 41, (0, 1): 3, (1, 0): 0, (1, 1): 17}
    out = []
    for j in range(k):
        g = torch.Generator().manual_seed(1000 * rank + j)
        ids = torch.randint(5, VOCAB, (rows, seq_len), generator=g)
        labels = torch.full((rows, seq_len), IGNORE, dtype=torch.long)
        pos = torch.randperm(rows * seq_len, generator=g)[: valid[(rank % 2, j)]]
        labels.view(-1)[pos] = ids.view(-1)[pos]
        out.append({"input_ids": ids, "labels.lm": labels})
    return out


# ------------------------------------------------------------------------------------------------
# job


def _params_sha(params: dict) -> str:
    h = hashlib.sha256()
    for n in sorted(params):
        h.update(n.encode())
        h.update(params[n].float().numpy().tobytes())  # bf16 has no numpy dtype; the upcast is exact
    return h.hexdigest()


def _die_in_save(engine, step: int):
    """Rank 1: on the save of `step`, write half of the first DeepSpeed file, then SIGKILL."""
    ce = engine.checkpoint_engine
    orig = ce.save

    def save(state_dict, path):
        if f"step{step:08d}" in str(path):
            orig(state_dict, path)
            size = os.path.getsize(path)
            with open(path, "r+b") as f:
                f.truncate(size // 2)
            print(f"ds_worker: rank 1 dies in the save of step {step} ({path})", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        orig(state_dict, path)

    ce.save = save


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--local_rank", type=int, default=0)  # appended by the deepspeed launcher
    p.add_argument("--mode", choices=("train", "norm"), default="train")
    p.add_argument("--out", required=True)
    p.add_argument("--set", nargs="*", default=[], help="RunConfig overrides key=value")
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--extra_steps", type=int, default=0)
    p.add_argument("--step_sleep", type=float, default=0.0)
    p.add_argument("--die_in_save", type=int, default=-1)
    p.add_argument("--log", default="losses.jsonl", help="per-step losses file under --out (rank 0)")
    p.add_argument("--rows", default="packed", choices=("packed", "document"), help="codept.data.pack rows=")
    p.add_argument("--long", default="split", help="codept.data.pack long=")
    p.add_argument("--dump_load", action="store_true", help="after the resume, rank 0 saves the gathered "
                   "weights and Adam moments to OUT/load.pt")
    p.add_argument("--record", default="", help="each rank appends the documents of every step's rows to "
                   "OUT/<record>-rank<r>.jsonl")
    a = p.parse_args(argv)

    from codept.data.collate import collate
    from codept.train import checkpoint as ckpt
    from codept.train import engine as E
    from codept.train.config import RunConfig
    from codept.train.settings import override

    out = Path(a.out)
    cfg = override(RunConfig(seq_len=32, micro_batch_rows=2, global_batch_rows=8, steps=12, lr=1e-2,
                             warmup_steps=2, out_dir=str(out / "ckpt")), a.set)
    world = E.init_distributed()
    ckpt.seed_all(cfg.seed)
    model = TinyLM(seed=cfg.seed, dropout=0.0 if a.mode == "norm" else a.dropout)
    eng = E.build_engine(model, cfg, world)
    ckpt.seed_all(cfg.seed, world.rank)
    k = eng.codept_plan.grad_accum
    if a.die_in_save >= 0 and world.rank == 1:
        _die_in_save(eng, a.die_in_save)
    losses = open(out / a.log, "a", buffering=1) if world.rank == 0 else None

    start, resume = 0, None
    if a.mode == "norm":
        box = {}
        logs = E.train_step(eng, norm_batches(world.rank), lm_loss,
                            before_step=lambda e: box.update(grads=E.full_grads(e)))
        params = E.full_params(eng)
        # ZeRO-3 keeps a 1/world shard of each partitioned parameter in p.ds_tensor
        local = sum(p.ds_tensor.numel() if hasattr(p, "ds_tensor") else p.numel() for p in model.parameters())
        if world.rank == 0:
            torch.save({"logs": logs, "grads": box["grads"], "params": params, "k": k,
                        "stage": eng.zero_optimization_stage(), "local_numel": local,
                        "numel": sum(v.numel() for v in params.values()),
                        "plan": eng.codept_plan.ds_config}, out / "norm.pt")
        start, steps = 1, 1 + a.extra_steps
    else:
        resume = ckpt.load(eng, cfg.out_dir)
        if resume is not None:
            start = resume.step
            if world.rank == 0:
                print(f"ds_worker: resumed from {resume.path} at step {start} (saved by {resume.world} ranks)",
                      flush=True)
                print("\n".join(resume.changes), flush=True)
        steps = cfg.steps

    if a.dump_load:
        params, moments = E.full_params(eng), E.full_optimizer_states(eng)  # collectives
        if world.rank == 0:
            torch.save({"params": params, "moments": moments}, out / "load.pt")
    stream = make_stream(cfg.seed, world.rank, world.world_size, cfg.seq_len, a.rows, a.long, bool(a.record))
    if resume is not None:
        stream.load_state_dict(resume.stream_state(world.rank, world.world_size))
    rows = ckpt.resume_iterator(stream.iter_loader(0), resume)
    if resume is not None and resume.rng is None:  # another world size: reseeded, after the iterator drew
        ckpt.seed_all(cfg.seed, world.rank, resume.step)
    record = open(out / f"{a.record}-rank{world.rank}.jsonl", "a", buffering=1) if a.record else None
    for step in range(start, steps):
        micro = [collate([next(rows) for _ in range(cfg.micro_batch_rows)]) for _ in range(k)]
        if record:
            docs = [int(d) for b in micro for d in b["scalar.doc"].flatten().tolist() if d >= 0]
            record.write(json.dumps({"step": step + 1, "rank": world.rank, "docs": docs}) + "\n")
        logs = E.train_step(eng, micro, lm_loss)
        if losses:
            losses.write(json.dumps({"step": step + 1, "loss": logs["loss"], "lr": logs["lr"]}) + "\n")
        if a.step_sleep:
            time.sleep(a.step_sleep)
        if a.mode == "train" and cfg.save_every and (step + 1) % cfg.save_every == 0:
            ckpt.save(eng, cfg.out_dir, step + 1, {"stream": stream.state_dict()}, config=cfg,
                      keep_last=cfg.keep_last)
    params = E.full_params(eng)
    moments = E.full_optimizer_states(eng)
    if world.rank == 0:
        (out / "final.json").write_text(json.dumps({"sha256": _params_sha(params), "steps": steps,
                                                    "optim_sha256": _params_sha(moments)}))
    E.shutdown()
    return 0


if __name__ == "__main__":
    code = main()
    from codept.train import engine as E

    E.exit_process(code)
