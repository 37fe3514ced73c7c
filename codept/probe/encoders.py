"""Any encoder as one codept Transformer + tokenizer, for the probes that read its states or train it
(``codept probe structure``, ``codept probe finetune``).

:func:`load_encoder` resolves a ``--model`` value:
  a codept run or checkpoint folder (``latest`` / ``rank0.pt``)   codept.train.export.load_trained;
  a transformers BERT/RoBERTa-family folder (config.json + tokenizer.json; ``codept export`` output,
  all-MiniLM-L6-v2, ...)                                          codept.model.hf.init_from;
  ``random``        the same shape as ``like`` (another loaded Encoder: its ModelConfig and tokenizer)
                    freshly initialised with ``seed`` (the shape's own init: BERT's normal(0, init_std),
                    zero residual outputs where the config says so);
  ``random:PRESET`` a codept preset (codept.model.transformer.PRESETS) with the default tokenizer.
So every model runs through the same forward, and "random-init of the same shape" is exact.
Framing: a text is framed as the folder's tokenizer frames it (its post-processor: all-MiniLM-L6-v2
puts [CLS] before and [SEP] after; codept's own BPE adds nothing), :attr:`Encoder.frame`.
:func:`layer_states` returns the states after the embeddings (layer 0) and after every block
(layers 1..L): the frozen inputs of the structural probes.
Cost: loading = reading the weights (MiniLM 90 MB: ~0.3 s). Not covered: decoder-only or
encoder-decoder folders (init_from refuses them), sentence-transformers' extra modules (Dense,
Normalize: the mean pooling of the probes stands in for them).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Encoder:
    model: object  # codept.model.transformer.Transformer (eval mode)
    tokenizer: object  # tokenizers.Tokenizer (encode_special_tokens on)
    tokenizer_dir: Path
    desc: dict  # what it is: kind, path, config, parameters (goes into every output)
    frame: tuple[list[int], list[int]] = ((), ())  # ids before / after a text (the tokenizer's framing)

    @property
    def config(self):
        return self.model.config

    def encode(self, texts: list[str], max_len: int) -> list[list[int]]:
        """Token ids of each text, framed, at most ``max_len`` (and the model's positions) in all."""
        pre, post = self.frame
        n = min(max_len, self.config.max_positions) - len(pre) - len(post)
        return [list(pre) + e.ids[:n] + list(post)
                for e in self.tokenizer.encode_batch(list(texts), add_special_tokens=False)]


def _desc(kind: str, model, **extra) -> dict:
    return {"kind": kind, **extra, "config": dataclasses.asdict(model.config), "parameters": model.num_parameters()}


def load_encoder(spec: str, *, like: Encoder | None = None, seed: int = 0, tokenizer: str | Path | None = None) -> Encoder:
    """The Encoder of a ``--model`` value (module docstring). ValueError / FileNotFoundError naming the
    value and what was expected."""
    import torch

    from codept.model import transformer as T
    from codept.tokenizer import default_tokenizer_dir, framing, load_tokenizer

    if spec == "random" or spec.startswith("random:"):
        preset = spec.partition(":")[2]
        if preset:
            if preset not in T.PRESETS:
                raise ValueError(f"--model {spec}: unknown preset {preset!r}; known {sorted(T.PRESETS)}")
            tok_dir = Path(tokenizer) if tokenizer else default_tokenizer_dir()
            tok = load_tokenizer(tok_dir)
            cfg, frame, shape_of = T.PRESETS[preset](vocab_size=tok.get_vocab_size()), ((), ()), f"preset {preset}"
        elif like is None:
            raise ValueError("--model random: random-init of WHICH shape? give another model to copy the shape "
                             "from (or random:PRESET)")
        else:
            tok_dir, tok, cfg, frame, shape_of = like.tokenizer_dir, like.tokenizer, like.config, like.frame, like.desc.get("path", "")
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = T.Transformer(cfg).eval()
        return Encoder(model, tok, Path(tok_dir), _desc("random", model, shape_of=shape_of, seed=seed), frame)
    p = Path(spec).expanduser()
    if not p.is_dir():
        raise FileNotFoundError(f"--model {spec}: no such folder (expected a codept run/checkpoint folder, a "
                                "transformers folder with config.json, random or random:PRESET)")
    if (p / "config.json").is_file():
        from codept.model.hf import init_from

        if not (p / "tokenizer.json").is_file():
            raise FileNotFoundError(f"--model {spec}: a transformers folder needs tokenizer.json (a fast tokenizer)")
        model, _ = init_from(p, dropout=0.0, attention_dropout=0.0)
        tok = load_tokenizer(p)
        return Encoder(model.eval(), tok, p.resolve(), _desc("transformers", model, path=str(p.resolve())), framing(tok))
    from codept.train import checkpoint
    from codept.train.export import load_trained

    model, _, tok_dir = load_trained(p)
    tok_dir = Path(tokenizer) if tokenizer else Path(tok_dir)
    tag = checkpoint.latest_tag(p)
    return Encoder(model.eval(), load_tokenizer(tok_dir), tok_dir,
                   _desc("codept", model, path=str(p.resolve()), tag=tag or p.name), ((), ()))


def layer_states(model, input_ids, mask, causal: bool = False) -> list:
    """[(B, T, C)] * (L + 1): the states after the embeddings and after every block, one document per
    row (``mask`` (B, T) bool: real tokens; the rest is padding, segment 0), bidirectional unless
    ``causal``."""
    import torch

    from codept.model.transformer import attention_mask

    b, t = input_ids.shape
    seg = mask.long()
    positions = torch.arange(t, device=input_ids.device).expand(b, t)
    prefix = torch.full((b, t), not causal, dtype=torch.bool, device=input_ids.device)
    path = model.config.attention if model.config.attention != "flex" else "sdpa"
    am = attention_mask(seg, prefix, None, path)
    x = model.embed(input_ids, positions)
    out = [x]
    for block in model.blocks:
        x = block(x, am, path)
        out.append(x)
    return out


def mean_pool(h, mask):
    """(B, T, C), (B, T) bool -> (B, C): mean over real tokens."""
    m = mask.unsqueeze(-1).to(h.dtype)
    return (h * m).sum(1) / m.sum(1).clamp(min=1)
