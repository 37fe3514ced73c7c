"""A model's shape and behaviour without torch: :class:`ModelConfig` (every field documented), its
presets (plain functions named for size and hardware) and the names of the registered heads.

codept.model.transformer (the model) and codept.model.pretrainer (the heads) import torch; a recipe's
settings are checked before any work, and importing torch alone costs seconds (3-4 s on a shared
2-core machine), so what the settings check reads lives here. codept.model.transformer re-exports
every name of this module; tests/test_user_paths.py checks that the settings check imports no torch
and that HEAD_NAMES are codept.model.pretrainer.HEADS.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

# the heads of codept.model.pretrainer.HEADS, by name (a test keeps the two equal)
HEAD_NAMES = ("mlm", "lm", "rtd", "sop", "nsp", "edge", "dataflow", "dataflow_edge", "contrastive", "sbo", "glm",
              "plm", "gen", "exec_lines", "exec_values")

ATTENTION_PATHS = ("reference", "sdpa", "flex", "varlen")
OPTIONAL_INPUTS = ("types", "langs", "block_positions", "order")  # batch columns beyond the four always there
RESIDUAL_INITS = ("normal", "zero")


@dataclass(frozen=True)
class ModelConfig:
    """Shape and behaviour of a :class:`Transformer`; every field maps onto a transformers.BertConfig
    field (codept.model.hf) except ``causal``, ``attention``, ``checkpointing`` and ``residual_init``
    (an initialisation choice: the weights it produces export like any others)."""

    vocab_size: int = 16384  # token ids [0, vocab_size); >= the tokenizer's size (BertConfig.vocab_size)
    hidden: int = 768  # C, model width (hidden_size)
    layers: int = 12  # L, transformer blocks (num_hidden_layers)
    heads: int = 12  # H, attention heads; hidden % heads == 0 (num_attention_heads)
    intermediate: int = 3072  # MLP width (intermediate_size)
    max_positions: int = 512  # rows of the position table: every position id must be < this
    type_vocab_size: int = 2  # BERT's token-type table, indexed by a batch's ``types`` (0 without them)
    n_langs: int = 0  # rows of a language-embedding table (XLM) indexed by ``langs``; 0 = no table.
    #                   BERT has no such table: a model with one is refused by the HF export
    block_positions: bool = False  # a second position table indexed by ``block_positions`` (GLM's
    #                   2-D positions); BERT has none: refused by the HF export
    dropout: float = 0.1  # on embeddings, attention output and MLP output (hidden_dropout_prob)
    attention_dropout: float = 0.1  # on attention probabilities (attention_probs_dropout_prob)
    layer_norm_eps: float = 1e-12  # every LayerNorm (layer_norm_eps)
    init_std: float = 0.02  # normal init of linear and embedding weights (initializer_range)
    residual_init: str = "normal"  # "normal" (BERT) | "zero": each block's attention-output and MLP-down
    #                                weights start at 0, so every block is the identity at init
    pad_id: int = 0  # the tokenizer's padding id (pad_token_id); never attended to (segment 0)
    causal: bool = False  # what a batch WITHOUT `prefix` means: False = bidirectional, True = causal.
    #                       A batch prefix always wins: the one rule, not the config, decides.
    attention: str = "sdpa"  # default attention path: "reference" | "sdpa" | "flex" | "varlen"
    checkpointing: bool = False  # recompute each block in backward (activation checkpointing)

    def __post_init__(self):
        for name in ("vocab_size", "hidden", "layers", "heads", "intermediate", "max_positions", "type_vocab_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"ModelConfig.{name}={getattr(self, name)} must be >= 1")
        if self.n_langs < 0:
            raise ValueError(f"ModelConfig.n_langs={self.n_langs} must be >= 0 (0 = no language table)")
        if self.hidden % self.heads:
            raise ValueError(f"hidden={self.hidden} is not divisible by heads={self.heads}")
        if self.residual_init not in RESIDUAL_INITS:
            raise ValueError(f"residual_init={self.residual_init!r}: expected one of {RESIDUAL_INITS}")
        if self.attention not in ATTENTION_PATHS:
            raise ValueError(f"attention={self.attention!r}: expected one of {ATTENTION_PATHS}")
        if self.attention == "flex" and self.attention_dropout > 0:
            raise ValueError(f"attention='flex' has no attention dropout (attention_dropout={self.attention_dropout}): "
                             "set attention_dropout=0 or pick attention='varlen' or 'sdpa'")
        for name in ("dropout", "attention_dropout"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(f"ModelConfig.{name}={getattr(self, name)} must be in [0, 1)")
        for name in ("layer_norm_eps", "init_std"):
            if not getattr(self, name) > 0:
                raise ValueError(f"ModelConfig.{name}={getattr(self, name)} must be > 0")
        if not 0 <= self.pad_id < self.vocab_size:
            raise ValueError(f"ModelConfig.pad_id={self.pad_id} must be a token id in [0, vocab_size={self.vocab_size})")


def configure(cfg: ModelConfig, **overrides) -> ModelConfig:
    """`cfg` with fields replaced; an unknown key is an error that lists the known ones."""
    known = {f.name for f in dataclasses.fields(ModelConfig)}
    bad = sorted(set(overrides) - known)
    if bad:
        raise TypeError(f"ModelConfig has no fields {bad}; it has {sorted(known)}")
    return dataclasses.replace(cfg, **overrides)


# Presets: plain functions named for size and hardware; keyword overrides (e.g. the tokenizer's vocab_size).
def tiny(**overrides) -> ModelConfig:
    """Unit tests: 2 layers of width 32, no dropout (outputs are deterministic)."""
    base = ModelConfig(vocab_size=512, hidden=32, layers=2, heads=4, intermediate=64, max_positions=128,
                       dropout=0.0, attention_dropout=0.0)
    return configure(base, **overrides)


def debug_cpu(**overrides) -> ModelConfig:
    """A few CPU minutes with a falling loss: ~7.4 M parameters at vocab 16384 (4.2 M of them embeddings).

    Zero residual init: at init the encoder is a bag of token + position vectors, and a few hundred
    code_doc steps from there keep matching words across projects. Measured (code_doc, one
    process, 16 rows of 256, 200 steps, networkx / in-domain MRR, full protocol): BERT init 0.067 /
    0.173, zero init 0.086 / 0.181 (seed 0) and 0.087 / 0.164 (seed 1); untrained: 0.064 / 0.061
    and 0.071 / 0.069. The larger presets keep BERT's init (not measured)."""
    base = ModelConfig(vocab_size=16384, hidden=256, layers=4, heads=4, intermediate=1024, max_positions=512,
                       residual_init="zero")
    return configure(base, **overrides)


def small_1xh200(**overrides) -> ModelConfig:
    """BERT-base / CodeBERT shape on one H200: 12 x 768, ~125 M parameters at vocab 50304."""
    base = ModelConfig(vocab_size=50304, hidden=768, layers=12, heads=12, intermediate=3072, max_positions=512)
    return configure(base, **overrides)


def base_8xh200(**overrides) -> ModelConfig:
    """BERT-large shape for 8 H200s: 24 x 1024, 16 heads, 1024 positions, ~355 M parameters at vocab 50304."""
    base = ModelConfig(vocab_size=50304, hidden=1024, layers=24, heads=16, intermediate=4096, max_positions=1024)
    return configure(base, **overrides)


PRESETS = {"tiny": tiny, "debug_cpu": debug_cpu, "small_1xh200": small_1xh200, "base_8xh200": base_8xh200}
