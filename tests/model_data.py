"""Packed batches of real code for the model tests (test_model.py, test_heads.py)."""

from __future__ import annotations

import numpy as np

from codept.data.example import IGNORE, Example
from codept.data.sources import stdlib_files

SEQ = 128


def real_examples(tok, n: int = 7, seed: int = 0) -> list[Example]:
    """Documents cut from real stdlib files, with bidirectional, causal and prefix-LM masks, MLM and
    LM labels, a per-document scalar and (src, dst) pointer pairs."""
    rng = np.random.default_rng(seed)
    files = [f for f in stdlib_files() if f.stat().st_size > 4000][:n]  # real, non-trivial modules
    out = []
    for i, f in enumerate(files):
        ids = np.array(tok.encode(f.read_text(encoding="utf-8", errors="replace")).ids, dtype=np.int32)
        n_tok = int(rng.integers(20, 70))
        ids = ids[:n_tok]
        kind = i % 3
        prefix = np.ones(len(ids), bool) if kind == 0 else np.zeros(len(ids), bool)
        if kind == 2:
            prefix[: len(ids) // 2] = True  # prefix-LM
        mlm = np.where(rng.random(len(ids)) < 0.15, ids, IGNORE).astype(np.int32)
        lm = ids.copy() if kind != 0 else np.full(len(ids), IGNORE, np.int32)
        src = rng.integers(0, len(ids), 4)
        dst = np.where(rng.random(4) < 0.25, -1, rng.integers(0, len(ids), 4))
        out.append(Example(ids, prefix, labels={"mlm": mlm, "lm": lm}, pointers={"edge": np.stack([src, dst], 1)},
                           scalars={"sop": int(rng.integers(0, 2)), "pair": i}))
    return out


def write_run(run, model, tok_dir, tag: str = "step00000004", config: dict | None = None, step: int | None = None):
    """A checkpoint folder of `model` laid out as codept.train.checkpoint + DeepSpeed (ZeRO 0-2) write
    it: ``run/latest`` -> ``tag`` with ``rank0.pt`` (client state; ``config``: the recorded flat
    settings, ``step``) and the model states; returns `run`."""
    import dataclasses

    import torch

    (run / tag).mkdir(parents=True)
    extra = {k: v for k, v in (("config", config), ("step", step)) if v is not None}
    torch.save({"client_state": {"model": dataclasses.asdict(model.config), "tokenizer": str(tok_dir)}, **extra},
               run / tag / "rank0.pt")
    torch.save({"module": {f"model.{k}": v for k, v in model.state_dict().items()}},
               run / tag / "mp_rank_00_model_states.pt")
    (run / "latest").write_text(tag)
    return run
