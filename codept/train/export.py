"""``codept export CKPT --out DIR [--head auto|mlm|lm|none] [--format transformers|sentence-transformers]``:
a training checkpoint -> a folder transformers loads (``--format sentence-transformers``: a folder
``SentenceTransformer(DIR)`` loads with the probe's pooling, normalisation and prefixes,
codept.train.st_export).

1. CKPT is a run folder (its ``latest`` names the checkpoint) or a checkpoint folder itself
   (:func:`checkpoint_folder`; anything else is a FileNotFoundError naming the path and what was
   expected).
2. The model config and tokenizer folder come from the checkpoint's rank-0 client state (written by
   recipes/pretrain_code.py); the weights from DeepSpeed's files (:func:`module_state`): ZeRO
   stages 0-2 keep the module whole in ``mp_rank_00_model_states.pt``, read with torch alone, so
   exporting or probing such a checkpoint never imports deepspeed; only ZeRO-3 partitions
   (``zero_pp_rank_<r>_mp_rank_00_model_states.pt``, no whole file) are gathered by DeepSpeed
   (codept.train.engine.consolidated_state_dict).
3. Which folder (:func:`choose_head`): the checkpoint's trained heads decide. A causal LM head
   (``lm``: trained by ar, t5_span, ident_mask, exec_trace) -> a DECODER, ``BertLMHeadModel`` with
   ``is_decoder=True``: ``AutoModelForCausalLM.from_pretrained(DIR).generate()`` continues text
   with codept.model.regimes.greedy's tokens. An MLM head (mlm, syntax_span, unilm, wwm, span, ...)
   -> ``BertForMaskedLM``; neither (code_doc, ...) -> ``BertModel``. A run with both asks for
   ``--head``. unilm trains the MLM head (cloze under bidirectional, causal and seq2seq masks), so it
   exports as an encoder: it has no next-token head. t5_span / ident_mask / exec_trace train the
   causal head as a PREFIX-LM (bidirectional over the input, causal over the targets); HF's decoder
   is causal everywhere, so its generate() equals codept's greedy (causal) decoding, not the
   prefix-LM conditioning those objectives trained (the model card says so).
4. codept.model.hf.export writes config.json, model.safetensors and the tokenizer (model_max_length =
   the model's max_positions; text never becomes a special id); codept.train.card writes README.md
   (training data, mixture, steps, validation and probe tables of the run's summary.json).
Errors: a missing or unreadable checkpoint file is a FileNotFoundError / ValueError naming the file;
:func:`main` prints it on one line and returns 2.
Not covered: checkpoints not written by the recipe (no model config in their client state);
exporting several heads into one folder (export twice with ``--head``).
"""

from __future__ import annotations

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
    """A checkpoint file of plain data and tensors (codept.train.checkpoint.load_plain: a pickle
    planted in it runs no code)."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: missing (an incomplete checkpoint?)")
    try:
        return checkpoint.load_plain(path)
    except checkpoint.CheckpointError as e:
        raise ValueError(f"not a readable codept checkpoint: {e}") from None


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


HEAD_KINDS = ("auto", "mlm", "lm", "none")
FORMATS = ("transformers", "sentence-transformers")


def trained(ckpt: str | Path) -> dict:
    """{"model", "heads" ({"mlm" | "lm": head}, the language-model heads the checkpoint holds),
    "tokenizer", "tag_dir", "config" (the checkpoint's recorded settings), "step"} of a recipe checkpoint."""
    tag_dir = checkpoint_folder(ckpt)
    rank0 = _load(tag_dir / "rank0.pt")
    client = rank0.get("client_state", {})
    if "model" not in client:
        raise ValueError(f"{tag_dir}: no model config in the client state (not written by recipes/pretrain_code.py)")
    cfg = ModelConfig(**client["model"])
    model = Transformer(cfg)
    state = module_state(tag_dir)
    enc = {k[len("model."):]: v for k, v in state.items() if k.startswith("model.")}
    missing, unexpected = model.load_state_dict(enc, strict=False)
    if missing or unexpected:
        raise ValueError(f"{tag_dir}: weights do not match the saved config: missing {missing[:5]}, unexpected {unexpected[:5]}")
    heads = {}
    for name in ("mlm", "lm"):
        head = build_head(name, model)
        hs = {k[len(f"heads.{name}."):]: v for k, v in state.items() if k.startswith(f"heads.{name}.")}
        if hs and not head.load_state_dict({**head.state_dict(), **hs}, strict=False).unexpected_keys:
            heads[name] = head.eval()
    return {"model": model.eval(), "heads": heads, "tokenizer": Path(client["tokenizer"]), "tag_dir": tag_dir,
            "config": rank0.get("config") or {}, "step": rank0.get("step")}


def load_trained(ckpt: str | Path) -> tuple[Transformer, torch.nn.Module | None, Path]:
    """(encoder, MLM head or None, tokenizer folder) of a recipe checkpoint."""
    t = trained(ckpt)
    return t["model"], t["heads"].get("mlm"), t["tokenizer"]


def choose_head(heads: dict, want: str = "auto") -> str:
    """"mlm", "lm" or "none": the head the folder carries (module docstring, 3). ValueError when
    ``want`` names a head the checkpoint lacks, or when ``auto`` meets both."""
    if want not in HEAD_KINDS:
        raise ValueError(f"--head {want!r}: expected one of {HEAD_KINDS}")
    if want == "auto":
        if len(heads) > 1:
            raise ValueError("the run trained an MLM head and a causal LM head: pass --head mlm (an encoder, "
                             "BertForMaskedLM) or --head lm (a decoder, BertLMHeadModel)")
        return next(iter(heads), "none")
    if want != "none" and want not in heads:
        raise ValueError(f"--head {want}: the checkpoint holds no trained {want!r} head "
                         f"(it has {sorted(heads) or 'none'})")
    return want


def main(args) -> int:
    from codept.train import card

    fmt = getattr(args, "format", None) or "transformers"
    try:  # hf.export checks the tokenizer and what BERT can hold before it writes anything
        if fmt not in FORMATS:
            raise ValueError(f"--format {fmt!r}: expected one of {FORMATS}")
        t = trained(args.ckpt)
        if fmt == "sentence-transformers":
            return _sentence_transformers(t, args)
        kind = choose_head(t["heads"], getattr(args, "head", None) or "auto")
        model, head = t["model"], t["heads"].get(kind)
        out = hf.export(model, args.tokenizer or t["tokenizer"], args.out,
                        mlm_head=head if kind == "mlm" else None, lm_head=head if kind == "lm" else None)
        (out / "README.md").write_text(card.model_card(t, kind, out))
    except (FileNotFoundError, ValueError) as e:
        print(f"codept export: error: {e}", file=sys.stderr)
        return 2
    what = {"mlm": "an encoder with its MLM head (BertForMaskedLM)", "lm": "a decoder with its causal LM head "
            "(BertLMHeadModel)", "none": "an encoder without a head (BertModel)"}[kind]
    print(f"exported {model.num_parameters():,} parameters as {what} -> {out}")
    return 0


def _sentence_transformers(t: dict, args) -> int:
    """``--format sentence-transformers``: the encoder alone (no LM head: sentence-transformers pools
    the last hidden states), with the probe's encoding (codept.train.st_export)."""
    from codept.train import card, st_export

    if (getattr(args, "head", None) or "auto") not in ("auto", "none"):
        raise ValueError(f"--head {args.head} with --format sentence-transformers: the folder holds the encoder "
                         "alone (pass --head none or leave it out)")
    enc = st_export.encoding_of(t["config"])
    out = st_export.export(t["model"], args.tokenizer or t["tokenizer"], args.out, enc)
    (out / "README.md").write_text(card.model_card(t, "none", out, usage=st_export.card_section(enc)))
    print(f"exported {t['model'].num_parameters():,} parameters as a sentence-transformers model (mean pooling, "
          f"L2, prompts query={enc.query_prefix!r} document={enc.code_prefix!r}) -> {out}")
    return 0
