"""``codept export CKPT --out DIR``: a training checkpoint -> a folder transformers loads.

1. CKPT is a run folder (its ``latest`` names the checkpoint) or a checkpoint folder itself.
2. The model config and tokenizer folder come from the checkpoint's rank-0 client state (written by
   recipes/pretrain_code.py); the weights from DeepSpeed's files, gathered for ZeRO-3
   (codept.train.engine.consolidated_state_dict).
3. The encoder (and its MLM head) are written by codept.model.hf.export: config.json (BertConfig),
   model.safetensors and the tokenizer files; ``transformers.AutoModel.from_pretrained(DIR)`` gives
   the same hidden states as the trained encoder.
Not covered: checkpoints not written by the recipe (no model config in their client state).
"""

from __future__ import annotations

from pathlib import Path

import torch

from codept.model import hf
from codept.model.heads import build_head
from codept.model.transformer import ModelConfig, Transformer
from codept.train import checkpoint


def load_trained(ckpt: str | Path) -> tuple[Transformer, torch.nn.Module | None, Path]:
    """(encoder, MLM head or None, tokenizer folder) of a recipe checkpoint."""
    from codept.train.engine import consolidated_state_dict

    ckpt = Path(ckpt)
    tag = checkpoint.latest_tag(ckpt)
    tag_dir = ckpt / tag if tag else ckpt
    rank0 = tag_dir / "rank0.pt"
    if not rank0.is_file():
        raise FileNotFoundError(f"{ckpt}: neither a run folder with `latest` nor a checkpoint folder (no {rank0})")
    client = torch.load(rank0, map_location="cpu", weights_only=False)["client_state"]
    if "model" not in client:
        raise ValueError(f"{tag_dir}: no model config in the client state (not written by recipes/pretrain_code.py)")
    cfg = ModelConfig(**client["model"])
    model = Transformer(cfg)
    state = consolidated_state_dict(tag_dir)
    enc = {k[len("model."):]: v for k, v in state.items() if k.startswith("model.")}
    missing, unexpected = model.load_state_dict(enc, strict=False)
    if missing or unexpected:
        raise ValueError(f"{tag_dir}: weights do not match the saved config: missing {missing[:5]}, unexpected {unexpected[:5]}")
    head = build_head("mlm", model)
    hs = {k[len("heads.mlm."):]: v for k, v in state.items() if k.startswith("heads.mlm.")}
    head_ok = bool(hs) and not head.load_state_dict({**head.state_dict(), **hs}, strict=False).unexpected_keys
    return model.eval(), (head.eval() if head_ok else None), Path(client["tokenizer"])


def main(args) -> int:
    model, head, tok_dir = load_trained(args.ckpt)
    out = hf.export(model, args.tokenizer or tok_dir, args.out, mlm_head=head)
    print(f"exported {model.num_parameters():,} parameters ({'with' if head else 'without'} MLM head) -> {out}")
    return 0
