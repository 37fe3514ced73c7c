"""``t5_span``: T5 span corruption as ONE sequence in the one model (a prefix-LM).

1. Windows: a document longer than ``length`` allows is cut into windows of ``n`` tokens, the
   largest n whose corrupted form fits ``length`` tokens (n - noise + spans inputs, noise + spans + 1
   targets), from a random phase so boundaries move every epoch; every window becomes one example
   (``all_windows``, default: one read of the view serves the whole document) or only one random
   window does. An example longer than a row would be split by packing, its targets cut from their
   inputs (at rows of 128 with length 512: 92% of English examples, 98% of their target tokens):
   unless ``length`` is given, the recipes lower it to seq_len, and they refuse a given length >
   seq_len (codept.train.loop.row_settings).
2. Noise (select.t5_noise_mask, seqio's random_spans_noise_mask): round(0.15 n) noise atoms in
   round(noise / 3) spans (at most the tokenizer's sentinel count), span and gap lengths from a
   uniformly random segmentation. An atom is a token, or the run of byte-level tokens of one
   character (they share its offsets): spans never cut a character.
3. Render (render.t5_sentinels): inputs = the window with each span replaced by <sentinel_i>;
   targets = <sentinel_0> span_0 <sentinel_1> span_1 ... <eos>.
4. Example = inputs + targets: prefix True on the inputs (bidirectional), False on the targets
   (causal under the one attention rule: a target sees every input and the targets before it);
   ``labels["lm"]`` = the target ids (UNshifted; the "lm" head predicts token t from state t-1 of the
   same document, so the first sentinel is predicted from the last input token), IGNORE on the inputs.
Cost: O(T) NumPy. Not covered: T5's separate encoder-decoder (codept has one transformer), the
tokenizer-free lengths T5 tuned (inputs 512 -> targets 114) -- here one packed row holds both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from codept.data.example import IGNORE, Example
from codept.objectives import render, select
from codept.objectives.spec import Objective


@dataclass(frozen=True)
class Config:
    density: float = 0.15  # share of tokens in noise spans
    mean_span: float = 3.0  # mean noise-span length in tokens
    length: int = 512  # longest example (inputs + targets), in tokens; unless given, recipes lower it to seq_len
    all_windows: bool = True  # a long document gives one example per window (False: one random window)
    whole_in_row: ClassVar[bool] = True  # a split example loses its inputs: recipes check length <= seq_len
    row_field: ClassVar[str] = "length"  # the setting recipes fit to the row (codept.train.loop.row_settings)
    default_row_share: ClassVar[float] = 1.0  # unless given, length = min(length, seq_len)

    def __post_init__(self):
        if not 0.0 < self.density < 1.0 or self.mean_span < 1 or self.length < 8:
            raise ValueError(f"t5_span: density={self.density} must be in (0, 1), mean_span={self.mean_span} >= 1, "
                             f"length={self.length} >= 8")


def corrupted_length(n: int, density: float, mean_span: float, max_spans: int) -> int:
    """Tokens of inputs + targets for a window of n tokens (+1: <eos>)."""
    noise = min(max(int(round(n * density)), 1), n - 1)
    spans = min(max(int(round(noise / mean_span)), 1), max_spans, noise, n - noise)
    return n + 2 * spans + 1


def window_length(length: int, cfg: Config, max_spans: int) -> int:
    """The largest window n whose corrupted example fits `length` tokens."""
    n = length
    while n > 2 and corrupted_length(n, cfg.density, cfg.mean_span, max_spans) > length:
        n -= 1
    return n


def atoms(offsets: np.ndarray) -> np.ndarray:
    """(T,) atom id per token: byte-level tokens of one character share its offsets and form one
    atom, so a noise span never cuts a character (a Han character is 1-3 BPE tokens)."""
    new = np.ones(len(offsets), dtype=bool)
    np.not_equal(offsets[1:, 0], offsets[:-1, 0], out=new[1:])  # offsets tile the text: starts decide
    return np.cumsum(new) - 1


def build(vocab: render.Vocab, cfg: Config = Config()):
    max_spans = len(vocab.sentinel_ids)
    if max_spans == 0:
        raise ValueError("t5_span needs sentinel tokens (<sentinel_i> / <extra_id_i>) in the tokenizer; it has none")
    n_max = window_length(cfg.length, cfg, max_spans)

    def corrupt(ids: np.ndarray, offsets: np.ndarray, rng: np.random.Generator) -> Example | None:
        if len(ids) < 2:
            return None
        atom = atoms(offsets)
        noise = select.t5_noise_mask(int(atom[-1]) + 1, cfg.density, cfg.mean_span, rng, max_spans)[atom]
        noise &= vocab.candidates(ids)  # a special token in the text is never hidden
        inputs, targets = render.t5_sentinels(ids, noise, vocab)
        prefix = np.concatenate([np.ones(len(inputs), bool), np.zeros(len(targets), bool)])
        labels = np.concatenate([np.full(len(inputs), IGNORE, np.int32), targets.astype(np.int32)])
        return Example(np.concatenate([inputs, targets]), prefix, labels={"lm": labels})

    def t5_span(view, rng: np.random.Generator, ctx=None) -> Example | list[Example] | None:
        ids, off = np.asarray(view.input_ids), np.asarray(view.offsets)
        if len(ids) <= n_max:
            return corrupt(ids, off, rng)
        if not cfg.all_windows:
            start = int(rng.integers(0, len(ids) - n_max + 1))
            return corrupt(ids[start:start + n_max], off[start:start + n_max], rng)
        first = int(rng.integers(1, n_max + 1))  # the phase: the first window's length
        starts = [0, *range(first, len(ids), n_max)]
        out = [corrupt(ids[a:b], off[a:b], rng) for a, b in zip(starts, [*starts[1:], len(ids)])]
        return [e for e in out if e is not None]

    return t5_span


# the targets after the corrupted input, causal
OBJECTIVE = Objective("t5_span", build, Config, heads=("lm",), views=("code", "text"))
