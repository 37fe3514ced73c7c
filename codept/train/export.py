"""``codept export CKPT --out DIR``: a training checkpoint -> a folder transformers loads.

1. CKPT is a run folder (its ``latest`` names the checkpoint) or a checkpoint folder itself
   (:func:`checkpoint_folder`; anything else is a FileNotFoundError naming the path and what was
   expected).
2. The model config and tokenizer folder come from the checkpoint's rank-0 client state (written by
   recipes/pretrain_code.py); the weights from DeepSpeed's files (:func:`module_state`): ZeRO
   stages 0-2 keep the module whole in ``mp_rank_00_model_states.pt``, read with torch alone, so
   exporting or probing such a checkpoint never imports deepspeed; only ZeRO-3 partitions
   (``zero_pp_rank_<r>_mp_rank_00_model_states.pt``, no whole file) are gathered by DeepSpeed
   (codept.train.engine.consolidated_state_dict).
3. The encoder (and its MLM head) are written by codept.model.hf.export: config.json (BertConfig),
   model.safetensors and the tokenizer files; ``transformers.AutoModel.from_pretrained(DIR)`` gives
   the same hidden states as the trained encoder.
Errors: a missing or unreadable checkpoint file is a FileNotFoundError / ValueError naming the file;
:func:`main` prints it on one line and returns 2.
Not covered: checkpoints not written by the recipe (no model config in their client state).
"""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import torch

from codept.model import hf
from codept.model.pretrainer import build_head
from codept.model.transformer import ModelConfig, Transformer
from codept.train import checkpoint

EXPECTED = "a run folder (with `latest`) or a checkpoint folder (with rank0.pt) written by recipes/pretrain_code.py"


def checkpoint_folder(ckpt: str | Path) -> Path:
    """The checkpoint folder of a run folder (``ckpt/<latest>``) or of a checkpoint folder itself."""
    ckpt = Path(ckpt)
    if not ckpt.is_dir():
        raise FileNotFoundError(f"{ckpt}: {'not a folder' if ckpt.exists() else 'no such folder'}; expected {EXPECTED}")
    tag = checkpoint.latest_tag(ckpt)
    tag_dir = ckpt / tag if tag else ckpt
    if not (tag_dir / "rank0.pt").is_file():
        what = f"its `latest` names {tag!r}, which has no rank0.pt" if tag else "no `latest` and no rank0.pt"
        raise FileNotFoundError(f"{ckpt}: {what}; expected {EXPECTED}")
    return tag_dir


def _load(path: Path) -> dict:
    if not path.is_file():
        raise FileNotFoundError(f"{path}: missing (an incomplete checkpoint?)")
    try:
        return torch.load(path, map_location="cpu", weights_only=False)
    except (RuntimeError, pickle.UnpicklingError, EOFError, AttributeError) as e:
        raise ValueError(f"{path}: not a readable torch checkpoint ({type(e).__name__}: {e})") from None


def module_state(tag_dir: Path) -> dict[str, torch.Tensor]:
    """The full fp32 module state of a checkpoint folder; DeepSpeed is imported for ZeRO-3 only."""
    whole = tag_dir / "mp_rank_00_model_states.pt"  # stages 0-2; ZeRO-3: zero_pp_rank_<r>_mp_rank_00_...
    if not whole.is_file() and not any(tag_dir.glob("zero_pp_rank_*_mp_rank_00_model_states.pt")):
        raise FileNotFoundError(f"{tag_dir}: no model states (mp_rank_00_model_states.pt, or ZeRO-3's "
                                "zero_pp_rank_*_mp_rank_00_model_states.pt): an incomplete checkpoint?")
    module = _load(whole).get("module") if whole.is_file() else None
    if module and all(t.numel() > 0 for t in module.values()):
        return {k: v.float() for k, v in module.items()}
    from codept.train.engine import consolidated_state_dict  # ZeRO-3: partitions, DeepSpeed gathers them

    return {k: v.detach() for k, v in consolidated_state_dict(tag_dir).items()}  # its tensors require grad


def load_trained(ckpt: str | Path) -> tuple[Transformer, torch.nn.Module | None, Path]:
    """(encoder, MLM head or None, tokenizer folder) of a recipe checkpoint."""
    tag_dir = checkpoint_folder(ckpt)
    client = _load(tag_dir / "rank0.pt").get("client_state", {})
    if "model" not in client:
        raise ValueError(f"{tag_dir}: no model config in the client state (not written by recipes/pretrain_code.py)")
    cfg = ModelConfig(**client["model"])
    model = Transformer(cfg)
    state = module_state(tag_dir)
    enc = {k[len("model."):]: v for k, v in state.items() if k.startswith("model.")}
    missing, unexpected = model.load_state_dict(enc, strict=False)
    if missing or unexpected:
        raise ValueError(f"{tag_dir}: weights do not match the saved config: missing {missing[:5]}, unexpected {unexpected[:5]}")
    head = build_head("mlm", model)
    hs = {k[len("heads.mlm."):]: v for k, v in state.items() if k.startswith("heads.mlm.")}
    head_ok = bool(hs) and not head.load_state_dict({**head.state_dict(), **hs}, strict=False).unexpected_keys
    return model.eval(), (head.eval() if head_ok else None), Path(client["tokenizer"])


def main(args) -> int:
    try:  # hf.export checks the tokenizer and what BERT can hold before it writes anything
        model, head, tok_dir = load_trained(args.ckpt)
        out = hf.export(model, args.tokenizer or tok_dir, args.out, mlm_head=head)
    except (FileNotFoundError, ValueError) as e:
        print(f"codept export: error: {e}", file=sys.stderr)
        return 2
    print(f"exported {model.num_parameters():,} parameters ({'with' if head else 'without'} MLM head) -> {out}")
    return 0
