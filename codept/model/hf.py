"""To and from transformers folders: export a codept encoder as a BERT folder, import BERT/RoBERTa.

export(model, tokenizer_dir, out_dir):
  1. config.json: a transformers.BertConfig with the model's shape (hidden_act "gelu", absolute
     positions), ``architectures`` BertForMaskedLM when an MLM head is given, else BertModel.
  2. model.safetensors: parameters renamed by :data:`HF_NAMES` (a plain rename, no reshaping), plus
     the MLM head as ``cls.predictions.*`` when given (its decoder is tied to the word embeddings).
  The token-type table is exported (BertModel's token_type_embeddings; pass token_type_ids). A model
  with a language table (n_langs > 0) or GLM's block positions is refused with the reason.
  3. The tokenizer files of ``tokenizer_dir`` copied (tokenizer.json, tokenizer_config.json, ...);
     tokenizer_config.json gets the model's ``model_max_length`` (its max_positions: codept's own
     tokenizer folder says 2^20, and pipelines then crash past the position table) and
     ``split_special_tokens: true``: source text that spells a special token (``<mask>``, ``<pad>``,
     ``<sentinel_3>``, ...) stays text, as in codept's own encoding (codept.tokenizer.load_tokenizer;
     124 of 16,356 site-packages files contain ``<mask>``). Special ids come from the tokenizer's
     attributes (``tokenizer.mask_token_id``), never from text: an HF fill-mask pipeline, which writes
     ``<mask>`` into its input text, cannot be used on such a folder.
  ``AutoModel.from_pretrained(out_dir)`` then gives the same last hidden states as the codept model
  on a single bidirectional document (tests/test_hf.py). The BERT pooler is not written: codept does
  not train one, so transformers initialises it at random (and says so) when loading.
export(..., lm_head=causal LMHead): a DECODER folder, ``BertLMHeadModel`` with ``is_decoder=True`` (causal
  self-attention, KV cache) and the head as ``cls.predictions``: ``AutoModelForCausalLM`` loads it and its
  greedy ``generate()`` gives the tokens of codept.model.regimes.greedy (tests/test_regimes.py).
export_generator(model, generator, ...): ELECTRA's generator (head "gen") as ``ElectraForMaskedLM``; the
  discriminator is the encoder itself (export(model, ...)).
init_from(hf_dir) -> (Transformer, ModelConfig):
  1. Read config.json; accept model_type bert, roberta, xlm-roberta with hidden_act "gelu", absolute
     positions, no decoder / cross-attention; anything else is refused with the offending value.
  2. Read model.safetensors (also sharded, or pytorch_model.bin), drop a "bert."/"roberta." prefix and
     the pooler / heads / buffers, rename by :data:`HF_NAMES`, load strictly (a missing or extra
     encoder weight is an error).
  3. RoBERTa position ids start at padding_idx + 1 = 2: rows [2:] of its position table become codept
     positions 0.. (max_positions = max_position_embeddings - 2), so hidden states match RoBERTa's for
     unpadded input.
load_mlm_head(hf_dir, head): the pretrained MLM head (BERT cls.predictions / RoBERTa lm_head), when present.
Cost: one read and one write of the weights. Not covered: ALBERT/ELECTRA/DeBERTa (factorised or
relative embeddings), models with another activation, exporting a RoBERTa-style position offset
(export always writes BERT), ZeRO-3 partitioned parameters (gather a full state dict first).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import torch

from codept.model.transformer import ModelConfig, Transformer

# codept parameter name -> transformers.BertModel name; "{i}" is the layer number.
HF_NAMES = {
    "embed.tokens.weight": "embeddings.word_embeddings.weight",
    "embed.positions.weight": "embeddings.position_embeddings.weight",
    "embed.types.weight": "embeddings.token_type_embeddings.weight",
    "embed.norm.weight": "embeddings.LayerNorm.weight",
    "embed.norm.bias": "embeddings.LayerNorm.bias",
    "blocks.{i}.attn.q.weight": "encoder.layer.{i}.attention.self.query.weight",
    "blocks.{i}.attn.q.bias": "encoder.layer.{i}.attention.self.query.bias",
    "blocks.{i}.attn.k.weight": "encoder.layer.{i}.attention.self.key.weight",
    "blocks.{i}.attn.k.bias": "encoder.layer.{i}.attention.self.key.bias",
    "blocks.{i}.attn.v.weight": "encoder.layer.{i}.attention.self.value.weight",
    "blocks.{i}.attn.v.bias": "encoder.layer.{i}.attention.self.value.bias",
    "blocks.{i}.attn.out.weight": "encoder.layer.{i}.attention.output.dense.weight",
    "blocks.{i}.attn.out.bias": "encoder.layer.{i}.attention.output.dense.bias",
    "blocks.{i}.attn_norm.weight": "encoder.layer.{i}.attention.output.LayerNorm.weight",
    "blocks.{i}.attn_norm.bias": "encoder.layer.{i}.attention.output.LayerNorm.bias",
    "blocks.{i}.up.weight": "encoder.layer.{i}.intermediate.dense.weight",
    "blocks.{i}.up.bias": "encoder.layer.{i}.intermediate.dense.bias",
    "blocks.{i}.down.weight": "encoder.layer.{i}.output.dense.weight",
    "blocks.{i}.down.bias": "encoder.layer.{i}.output.dense.bias",
    "blocks.{i}.mlp_norm.weight": "encoder.layer.{i}.output.LayerNorm.weight",
    "blocks.{i}.mlp_norm.bias": "encoder.layer.{i}.output.LayerNorm.bias",
}
# codept LMHead name -> BERT / RoBERTa MLM head name (the decoder weight is tied, never stored).
MLM_HEAD_NAMES = {
    "dense.weight": ("cls.predictions.transform.dense.weight", "lm_head.dense.weight"),
    "dense.bias": ("cls.predictions.transform.dense.bias", "lm_head.dense.bias"),
    "norm.weight": ("cls.predictions.transform.LayerNorm.weight", "lm_head.layer_norm.weight"),
    "norm.bias": ("cls.predictions.transform.LayerNorm.bias", "lm_head.layer_norm.bias"),
    "bias": ("cls.predictions.bias", "lm_head.bias"),
}
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
                   "vocab.txt", "vocab.json", "merges.txt", "sentencepiece.bpe.model", "spiece.model",
                   "tokenizer.model")
ROBERTA_TYPES = ("roberta", "xlm-roberta")
_LAYER = re.compile(r"\.(\d+)\.")


def hf_name(name: str) -> str:
    """codept parameter name -> BertModel name (KeyError for a name outside the encoder)."""
    m = _LAYER.search(name)
    return HF_NAMES[_LAYER.sub(".{i}.", name, count=1)].format(i=m.group(1)) if m else HF_NAMES[name]


def _from_hf() -> dict[str, str]:
    return {v: k for k, v in HF_NAMES.items()}


def codept_name(name: str) -> str:
    """BertModel name -> codept parameter name (KeyError for a name outside the encoder)."""
    m = _LAYER.search(name)
    inv = _from_hf()
    return inv[_LAYER.sub(".{i}.", name, count=1)].format(i=m.group(1)) if m else inv[name]


def bert_config(cfg: ModelConfig, architecture: str = "BertModel", decoder: bool = False):
    """The transformers.BertConfig describing `cfg` (``decoder``: causal self-attention, is_decoder)."""
    from transformers import BertConfig

    return BertConfig(is_decoder=decoder, add_cross_attention=False,
        vocab_size=cfg.vocab_size, hidden_size=cfg.hidden, num_hidden_layers=cfg.layers,
        num_attention_heads=cfg.heads, intermediate_size=cfg.intermediate, hidden_act="gelu",
        hidden_dropout_prob=cfg.dropout, attention_probs_dropout_prob=cfg.attention_dropout,
        max_position_embeddings=cfg.max_positions, type_vocab_size=cfg.type_vocab_size,
        initializer_range=cfg.init_std, layer_norm_eps=cfg.layer_norm_eps, pad_token_id=cfg.pad_id,
        position_embedding_type="absolute", architectures=[architecture],
    )


def refuse_unexportable(cfg: ModelConfig) -> None:
    """BERT holds tokens, positions and token types (exported); a table it has no place for is refused
    here, never silently dropped."""
    if cfg.n_langs:
        raise ValueError(f"the model has a language-embedding table (n_langs={cfg.n_langs}); transformers' BERT "
                         "has none, so exporting it would silently drop the language ids: not exported")
    if cfg.block_positions:
        raise ValueError("the model has a second (block) position table (GLM 2-D positions); transformers' BERT "
                         "has none: not exported")


def export(model: Transformer, tokenizer_dir: str | Path, out_dir: str | Path, mlm_head=None, lm_head=None) -> Path:
    """Write a folder that transformers.AutoModel / AutoTokenizer load (see module docstring).
    ``lm_head``: a causal codept LMHead (``causal=True``): the folder is then a decoder,
    ``BertLMHeadModel`` with ``is_decoder=True`` (causal self-attention, KV cache), whose
    ``generate()`` continues text as the codept model does (codept.model.regimes.greedy)."""
    if lm_head is not None:
        if mlm_head is not None or not getattr(lm_head, "causal", False):
            raise ValueError("lm_head must be a causal LMHead (causal=True) and excludes mlm_head: a folder is "
                             "an encoder with an MLM head or a decoder with a causal LM head")
        mlm_head = lm_head  # the same parameters (transform + tied decoder + bias): BERT's cls.predictions
    from safetensors.torch import save_file
    from tokenizers import Tokenizer

    refuse_unexportable(model.config)
    tokenizer_dir, out = Path(tokenizer_dir), Path(out_dir)
    tok_files = [tokenizer_dir / f for f in TOKENIZER_FILES if (tokenizer_dir / f).is_file()]
    if not tok_files:
        raise FileNotFoundError(f"no tokenizer files {TOKENIZER_FILES} in {tokenizer_dir}")
    if (tokenizer_dir / "tokenizer.json").is_file():
        n = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json")).get_vocab_size()
        if n > model.config.vocab_size:
            raise ValueError(f"tokenizer in {tokenizer_dir} has {n} tokens > model vocab_size={model.config.vocab_size}")
    out.mkdir(parents=True, exist_ok=True)
    state = {hf_name(k): v.detach().to("cpu", torch.float32).contiguous().clone() for k, v in model.state_dict().items()}
    if mlm_head is not None:
        head = mlm_head.state_dict()
        state.update({bert: head[ours].detach().to("cpu", torch.float32).contiguous().clone()
                      for ours, (bert, _) in MLM_HEAD_NAMES.items()})
    arch = "BertLMHeadModel" if lm_head is not None else "BertForMaskedLM" if mlm_head is not None else "BertModel"
    bert_config(model.config, arch, decoder=lm_head is not None).save_pretrained(out)
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    write_tokenizer(tok_files, out, model.config.max_positions)
    return out


def write_tokenizer(files: list[Path], out: Path, max_positions: int) -> None:
    """Copy the tokenizer ``files`` into ``out``; its tokenizer_config.json says the model's
    ``model_max_length`` and ``split_special_tokens`` (module docstring, 3)."""
    for f in files:
        shutil.copyfile(f, out / f.name)
    cfg_path = out / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text()) if cfg_path.is_file() else {}
    cfg.update(model_max_length=max_positions, split_special_tokens=True)
    cfg_path.write_text(json.dumps(cfg, indent=2) + "\n")


def export_generator(model: Transformer, generator, tokenizer_dir: str | Path, out_dir: str | Path) -> Path:
    """ELECTRA's generator (codept.model.regimes.Generator, head "gen") as a transformers
    ``ElectraForMaskedLM`` folder: the discriminator's embeddings (shared, width C) become its
    ``embedding_size``, the projection ``embeddings_project``, the blocks its encoder (BERT names),
    the head ``generator_predictions`` (dense -> GELU -> LayerNorm) and ``generator_lm_head``
    (tied to the word embeddings). AutoModelForMaskedLM then gives the generator's logits."""
    from safetensors.torch import save_file
    from transformers import ElectraConfig

    refuse_unexportable(model.config)
    tokenizer_dir, out = Path(tokenizer_dir), Path(out_dir)
    cfg, g = model.config, generator.config
    f32 = lambda t: t.detach().to("cpu", torch.float32).contiguous().clone()  # noqa: E731
    state = {f"electra.{hf_name('embed.' + k)}": f32(v) for k, v in model.embed.state_dict().items()}
    for k, v in generator.blocks.state_dict().items():  # "0.attn.q.weight" -> encoder.layer.0...
        state[f"electra.{hf_name('blocks.' + k)}"] = f32(v)
    state.update({"electra.embeddings_project.weight": f32(generator.project.weight),
                  "electra.embeddings_project.bias": f32(generator.project.bias),
                  "generator_predictions.dense.weight": f32(generator.dense.weight),
                  "generator_predictions.dense.bias": f32(generator.dense.bias),
                  "generator_predictions.LayerNorm.weight": f32(generator.norm.weight),
                  "generator_predictions.LayerNorm.bias": f32(generator.norm.bias),
                  "generator_lm_head.weight": f32(generator.decoder_weight),
                  "generator_lm_head.bias": f32(generator.bias)})
    out.mkdir(parents=True, exist_ok=True)
    ElectraConfig(
        vocab_size=cfg.vocab_size, embedding_size=cfg.hidden, hidden_size=g.hidden, num_hidden_layers=g.layers,
        num_attention_heads=g.heads, intermediate_size=g.intermediate, hidden_act="gelu",
        hidden_dropout_prob=g.dropout, attention_probs_dropout_prob=g.attention_dropout,
        max_position_embeddings=cfg.max_positions, type_vocab_size=cfg.type_vocab_size,
        initializer_range=cfg.init_std, layer_norm_eps=cfg.layer_norm_eps, pad_token_id=cfg.pad_id,
        position_embedding_type="absolute", architectures=["ElectraForMaskedLM"], tie_word_embeddings=True,
    ).save_pretrained(out)
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    write_tokenizer([tokenizer_dir / f for f in TOKENIZER_FILES if (tokenizer_dir / f).is_file()], out,
                    cfg.max_positions)
    return out


def _read_weights(hf_dir: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    if (hf_dir / "model.safetensors").is_file():
        return load_file(str(hf_dir / "model.safetensors"))
    if (hf_dir / "model.safetensors.index.json").is_file():
        shards = sorted(set(json.loads((hf_dir / "model.safetensors.index.json").read_text())["weight_map"].values()))
        return {k: v for s in shards for k, v in load_file(str(hf_dir / s)).items()}
    if (hf_dir / "pytorch_model.bin").is_file():
        return torch.load(hf_dir / "pytorch_model.bin", map_location="cpu", weights_only=True)
    raise FileNotFoundError(f"no model.safetensors(.index.json) or pytorch_model.bin in {hf_dir}")


def _strip(name: str) -> str:
    name = re.sub(r"^(bert|roberta)\.", "", name)
    return name.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta", "LayerNorm.bias")


def config_from_hf(hf: dict) -> tuple[ModelConfig, int]:
    """(ModelConfig, position offset) from a transformers config.json dict; refuses what codept cannot run."""
    kind = hf.get("model_type")
    if kind not in ("bert",) + ROBERTA_TYPES:
        raise ValueError(f"model_type={kind!r}: init_from supports bert, roberta, xlm-roberta")
    checks = {"hidden_act": (hf.get("hidden_act", "gelu"), "gelu"),
              "position_embedding_type": (hf.get("position_embedding_type", "absolute"), "absolute"),
              "is_decoder": (hf.get("is_decoder", False), False),
              "add_cross_attention": (hf.get("add_cross_attention", False), False)}
    for key, (got, want) in checks.items():
        if got != want:
            raise ValueError(f"{key}={got!r}: codept's transformer needs {want!r}")
    pad = hf.get("pad_token_id")
    pad = 0 if pad is None else int(pad)
    offset = pad + 1 if kind in ROBERTA_TYPES else 0  # RoBERTa: position ids start at padding_idx + 1
    cfg = ModelConfig(
        vocab_size=hf["vocab_size"], hidden=hf["hidden_size"], layers=hf["num_hidden_layers"],
        heads=hf["num_attention_heads"], intermediate=hf["intermediate_size"],
        max_positions=hf["max_position_embeddings"] - offset, type_vocab_size=hf.get("type_vocab_size", 2),
        dropout=hf.get("hidden_dropout_prob", 0.1), attention_dropout=hf.get("attention_probs_dropout_prob", 0.1),
        layer_norm_eps=hf.get("layer_norm_eps", 1e-12), init_std=hf.get("initializer_range", 0.02), pad_id=pad,
    )
    return cfg, offset


def init_from(hf_dir: str | Path, **overrides) -> tuple[Transformer, ModelConfig]:
    """A codept Transformer holding the encoder weights of a BERT/RoBERTa folder. `overrides` change
    non-shape settings (dropout, attention path, checkpointing)."""
    from codept.model.transformer import configure

    hf_dir = Path(hf_dir)
    cfg, offset = config_from_hf(json.loads((hf_dir / "config.json").read_text()))
    cfg = configure(cfg, **overrides)
    weights = {_strip(k): v for k, v in _read_weights(hf_dir).items()}
    state = {}
    for name, tensor in weights.items():
        if name.startswith(("embeddings.", "encoder.")) and not name.endswith(("position_ids", "token_type_ids")):
            state[codept_name(name)] = tensor.float()
    pos = state.get("embed.positions.weight")
    if pos is not None and offset:
        state["embed.positions.weight"] = pos[offset:]
    model = Transformer(cfg)
    model.load_state_dict(state, strict=True)
    return model, cfg


def load_mlm_head(hf_dir: str | Path, head) -> bool:
    """Copy a pretrained MLM head (BERT ``cls.predictions`` or RoBERTa ``lm_head``) into a codept
    LMHead; False when the folder has none (a bare BertModel)."""
    weights = _read_weights(Path(hf_dir))
    for style in (0, 1):
        names = {ours: pair[style] for ours, pair in MLM_HEAD_NAMES.items()}
        if all(n in weights for n in names.values()):
            head.load_state_dict({**head.state_dict(), **{o: weights[n].float() for o, n in names.items()}})
            return True
    return False
