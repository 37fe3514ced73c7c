"""HOW to corrupt selected tokens. Pure functions; inputs are never modified.

``bert_80_10_10`` (BERT, kept by RoBERTa and CodeBERT): of the selected units, 80% become <mask>,
10% a random ordinary token, 10% stay as they are; labels hold the original ids at every selected
token (the model must also recover kept and replaced tokens) and IGNORE elsewhere. The draw is per
unit: a whole span is masked, replaced or kept together. Random replacements are drawn uniformly from the
ordinary (non-special) ids of :class:`Vocab` (never a special token).
``t5_sentinels``: T5 span corruption (each noise span -> one sentinel in the inputs; the targets list
each sentinel followed by what it hides, then <eos>). ``scheduled_mask_share``: the [MASK] share of
80/10/10 at a training progress (mlm's schedule).
Cost: O(T). Not covered: GLM blanks, identifier renaming (their objectives' files).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from codept.data.example import IGNORE


MASK_TOKENS = ("<mask>", "[MASK]")  # codept/RoBERTa/CodeBERT, BERT/MiniLM
PAD_TOKENS = ("<pad>", "[PAD]")
# role -> the token texts that play it, first match wins (codept's BPE, BERT WordPiece, RoBERTa BPE, T5)
ROLE_TOKENS = {
    "cls": ("<cls>", "[CLS]", "<s>"),
    "sep": ("<sep>", "[SEP]", "</s>"),
    "bos": ("<bos>", "<s>", "[CLS]"),
    "eos": ("<eos>", "</s>", "[SEP]"),
    "unk": ("<unk>", "[UNK]"),
    "sop": ("<sop>",),  # GLM: start of a span in part B
    "eop": ("<eop>",),  # GLM: end of a span
}
_SENTINEL = re.compile(r"<(?:sentinel|extra_id)_(\d+)>")
_LANG_TAG = re.compile(r"<lang_([^>]+)>")


@dataclass(frozen=True)
class Vocab:
    """What selection and rendering need to know about a tokenizer: its size, which ids are special
    (never selected, never drawn as a random replacement) and the mask and padding ids. Works for
    codept's BPE (specials at [0, n_special)) and for any ``tokenizers`` vocabulary whose special
    tokens are registered as such (BERT WordPiece: [PAD]=0, [UNK]=100, [CLS]=101, [SEP]=102,
    [MASK]=103; RoBERTa BPE: <s>=0, <pad>=1, </s>=2, <unk>=3, <mask>=50264)."""

    size: int
    special_ids: tuple[int, ...]
    mask_id: int
    pad_id: int = 0
    roles: tuple[tuple[str, int], ...] = ()  # (role, id) of ROLE_TOKENS found: cls, sep, bos, eos, unk, sop, eop
    sentinel_ids: tuple[int, ...] = ()  # T5-style sentinels in order (<sentinel_0>, ... / <extra_id_0>, ...)
    lang_tags: tuple[tuple[str, int], ...] = ()  # (language, id) of every <lang_X> tag
    # the tokenizers.Tokenizer (from_tokenizer): encodes a setting's text once at build time (code_doc's
    # prefixes); never used per example, not compared (two Vocabs of one vocabulary are equal)
    tokenizer: object = field(default=None, repr=False, compare=False)
    _roles: dict = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        ids = (self.mask_id, self.pad_id, *self.special_ids, *(i for _, i in self.roles), *self.sentinel_ids,
               *(i for _, i in self.lang_tags))
        bad = [i for i in ids if not 0 <= i < self.size]
        if bad:
            raise ValueError(f"Vocab: ids {bad[:5]} outside [0, {self.size})")
        object.__setattr__(self, "_roles", dict(self.roles))

    def encode(self, text: str, what: str = "text") -> np.ndarray:
        """(n,) int32 ids of ``text`` without framing tokens (special tokens spelled in it stay text);
        ValueError naming ``what`` when this Vocab was built without a tokenizer."""
        if self.tokenizer is None:
            raise ValueError(f"{what}={text!r} needs the tokenizer, and this Vocab has none (build it with "
                             "Vocab.from_tokenizer)")
        return np.asarray(self.tokenizer.encode(text, add_special_tokens=False).ids, dtype=np.int32)

    def framing(self) -> tuple[np.ndarray, np.ndarray]:
        """(ids before, ids after) the tokenizer's post-processor frames a text with (codept.tokenizer
        .framing: [CLS] / [SEP] for BERT's WordPiece, none for codept's BPE); none without a tokenizer."""
        from codept.tokenizer import framing

        pre, post = framing(self.tokenizer) if self.tokenizer is not None else ([], [])
        return np.asarray(pre, dtype=np.int32), np.asarray(post, dtype=np.int32)

    def id_of(self, role: str) -> int:
        """The id of a special role (``cls``, ``sep``, ``bos``, ``eos``, ``unk``, ``sop``, ``eop``);
        an error naming the tokens looked for when the tokenizer has none."""
        if role not in ROLE_TOKENS:
            raise KeyError(f"unknown special role {role!r}; roles: {sorted(ROLE_TOKENS)}")
        if role not in self._roles:
            raise ValueError(f"the tokenizer has no {role} token (looked for {ROLE_TOKENS[role]} among its special tokens)")
        return self._roles[role]

    def sentinel(self, i: int) -> int:
        """The id of sentinel i (T5 span corruption, identifier masking)."""
        if not 0 <= i < len(self.sentinel_ids):
            raise ValueError(f"sentinel {i} requested but the tokenizer has {len(self.sentinel_ids)} sentinels "
                             "(<sentinel_i> / <extra_id_i>)")
        return self.sentinel_ids[i]

    def lang_id(self, lang: str) -> int:
        """The id of the <lang_X> tag of `lang`."""
        tags = dict(self.lang_tags)
        if lang not in tags:
            raise ValueError(f"the tokenizer has no <lang_{lang}> tag; it has {sorted(tags)}")
        return tags[lang]

    @classmethod
    def contiguous(cls, size: int, n_special: int, mask_id: int, pad_id: int = 0) -> "Vocab":
        """Specials at [0, n_special) (codept's own tokenizers)."""
        return cls(size=size, special_ids=tuple(range(n_special)), mask_id=mask_id, pad_id=pad_id)

    @classmethod
    def from_tokenizer(cls, tok) -> "Vocab":
        """From a ``tokenizers.Tokenizer``: every added token marked special is special."""
        added = tok.get_added_tokens_decoder()
        specials = tuple(sorted(i for i, t in added.items() if t.special))
        by_text = {t.content: i for i, t in added.items()}
        mask = next((by_text[m] for m in MASK_TOKENS if m in by_text), None)
        if mask is None:
            raise ValueError(f"the tokenizer has no mask token (looked for {MASK_TOKENS} among its added tokens)")
        pad = next((by_text[m] for m in PAD_TOKENS if m in by_text), 0)
        special_text = {t.content: i for i, t in added.items() if t.special}
        found = {role: next((special_text[t] for t in texts if t in special_text), None)
                 for role, texts in ROLE_TOKENS.items()}
        roles = tuple((role, i) for role, i in found.items() if i is not None)
        sentinels = sorted((int(m.group(1)), i) for t, i in special_text.items() if (m := _SENTINEL.fullmatch(t)))
        langs = tuple(sorted((m.group(1), i) for t, i in special_text.items() if (m := _LANG_TAG.fullmatch(t))))
        return cls(size=tok.get_vocab_size(), special_ids=specials, mask_id=mask, pad_id=pad, roles=roles,
                   sentinel_ids=tuple(i for _, i in sentinels), lang_tags=langs, tokenizer=tok)

    @cached_property
    def is_special(self) -> np.ndarray:
        """(size,) bool"""
        out = np.zeros(self.size, dtype=bool)
        out[list(self.special_ids)] = True
        return out

    @cached_property
    def ordinary_ids(self) -> np.ndarray:
        """Ids a random replacement may take, ascending."""
        return np.flatnonzero(~self.is_special)

    @property
    def n_special(self) -> int:
        return len(self.special_ids)

    def candidates(self, ids: np.ndarray) -> np.ndarray:
        """(T,) bool: tokens an objective may select (not special)."""
        return ~self.is_special[ids]

    def random_ordinary(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """n ids drawn uniformly from the ordinary vocabulary."""
        ordinary = self.ordinary_ids
        return ordinary[rng.integers(0, len(ordinary), size=n)]


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
    out[rand] = vocab.random_ordinary(rng, len(rand))
    return out, labels


def tokens_as_units(selected: np.ndarray) -> np.ndarray:
    """A boolean (T,) selection as single-token units (K, 2)."""
    idx = np.flatnonzero(selected)
    return np.stack([idx, idx + 1], axis=1)


def unit_tokens(units: np.ndarray) -> np.ndarray:
    """The token indices covered by units (K, 2), in order."""
    lengths = units[:, 1] - units[:, 0]
    return np.repeat(units[:, 0], lengths) + (np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths))


def scheduled_mask_share(p_mask: float, final: float | None, start: float, progress: float) -> float:
    """The [MASK] share of 80/10/10 at training progress `progress` in [0, 1]: ``p_mask`` until
    `start`, then linearly down to `final` at progress 1 (the study's advice against the
    pretrain / fine-tune mismatch: fewer [MASK] late in training). The share taken from [MASK] goes to
    "kept as is"; the random share is unchanged. ``final=None``: no schedule."""
    if final is None or progress <= start:
        return p_mask
    return p_mask + (final - p_mask) * min(1.0, (progress - start) / (1.0 - start))


def t5_sentinels(ids: np.ndarray, noise: np.ndarray, vocab: Vocab) -> tuple[np.ndarray, np.ndarray]:
    """T5 span corruption of `ids` by the (T,) noise mask: (inputs, targets). inputs: every noise span
    replaced by one sentinel (sentinel_0, sentinel_1, ... in order); targets: each sentinel followed
    by the tokens it hides, then <eos> when the tokenizer has one. O(T), vectorised."""
    start = noise.copy()
    start[1:] &= ~noise[:-1]
    n_spans = int(start.sum())
    if n_spans > len(vocab.sentinel_ids):
        vocab.sentinel(n_spans - 1)  # raises: names the sentinel count
    sent = np.asarray(vocab.sentinel_ids[:n_spans], dtype=ids.dtype)
    keep = ~noise | start
    inputs = ids.copy()
    inputs[start] = sent
    inputs = inputs[keep]
    hid = np.flatnonzero(noise)
    pos = np.arange(len(hid)) + np.cumsum(start[hid])  # each hidden token after its span's sentinel
    eos = vocab._roles.get("eos")
    targets = np.empty(len(hid) + n_spans + (eos is not None), dtype=ids.dtype)
    targets[pos] = ids[hid]
    targets[pos[start[hid]] - 1] = sent
    if eos is not None:
        targets[-1] = eos
    return inputs, targets


def group_sizes(lens: list[int], max_tokens: int) -> list[int]:
    """Sizes of the groups of consecutive units of lengths `lens`, at most `max_tokens` tokens each
    (a longer unit alone); 0 = one each. code_doc's pairs and nsp / sop's walked pairs group by it
    into multi-part Examples."""
    if max_tokens == 0:
        return [1] * len(lens)
    out, size, n = [], 0, 0
    for x in lens:
        if size and n + x > max_tokens:
            out.append(size)
            size, n = 0, 0
        size += 1
        n += x
    return out + [size] if size else out
