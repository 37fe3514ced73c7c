"""HOW to corrupt selected tokens. Pure functions; inputs are never modified.

``bert_80_10_10`` (BERT, kept by RoBERTa and CodeBERT): of the selected units, 80% become <mask>,
10% a random ordinary token, 10% stay as they are; labels hold the original ids at every selected
token (the model must also recover kept and replaced tokens) and IGNORE elsewhere. The draw is per
unit: a whole span is masked, replaced or kept together. Random replacements are drawn from the
ordinary vocabulary ``[n_special, vocab_size)`` (never a special token).
Cost: O(T). Not covered: sentinel rendering (T5/GLM), identifier renaming (later objectives).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from codept.data.example import IGNORE


@dataclass(frozen=True)
class Vocab:
    """What rendering needs to know about the tokenizer."""

    size: int
    n_special: int
    mask_id: int
    pad_id: int = 0

    @classmethod
    def from_tokenizer(cls, tok) -> "Vocab":
        from codept.tokenizer import n_special

        return cls(size=tok.get_vocab_size(), n_special=n_special(tok), mask_id=tok.token_to_id("<mask>"),
                   pad_id=tok.token_to_id("<pad>"))


def bert_80_10_10(ids: np.ndarray, units: np.ndarray, vocab: Vocab, rng: np.random.Generator,
                  p_mask: float = 0.8, p_random: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
    """Corrupt the token ranges `units` (K, 2) of `ids`; returns (new ids, labels)."""
    out = ids.copy()
    labels = np.full(len(ids), IGNORE, dtype=np.int32)
    if len(units) == 0:
        return out, labels
    lengths = units[:, 1] - units[:, 0]
    tok = np.repeat(units[:, 0], lengths) + (np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths))
    r = np.repeat(rng.random(len(units)), lengths)  # one draw per unit
    labels[tok] = ids[tok]
    masked = tok[r < p_mask]
    out[masked] = vocab.mask_id
    rand = tok[(r >= p_mask) & (r < p_mask + p_random)]
    out[rand] = rng.integers(vocab.n_special, vocab.size, size=len(rand))
    return out, labels


def tokens_as_units(selected: np.ndarray) -> np.ndarray:
    """A boolean (T,) selection as single-token units (K, 2)."""
    idx = np.flatnonzero(selected)
    return np.stack([idx, idx + 1], axis=1)
