"""TextView and PairView: natural-language documents in token coordinates, and their Arrow form.

The text counterpart of codept.structure.view.CodeView, aligned to the same ``tokenizers.Tokenizer``
the same way (``codept.structure.view.tokenize``: ids without special tokens, untrimmed char
offsets). One document, T tokens:

  path        str            where it came from (``file``, ``file#entry`` for catalogs/jsonl lines)
  lang        str            'text' (English or unspecified), 'zh', or another ISO 639 code
  text        str            the document (markup already stripped by codept.text.readers)
  input_ids   (T,)   int32   token ids
  offsets     (T, 2) int32   char offsets into ``text``; they tile it (the tokens of one multi-byte
                             character share that character's offsets)
  words       (T,)   int32   word id per token, -1 for whitespace-only tokens; ids are 0, 1, 2, ...
                             in order and the tokens of a word are contiguous (whole-word masking:
                             ``word_spans()`` gives the (W, 2) token ranges for select.whole_spans)
  sentences   (N, 2) int32   token ranges [start, end) of sentences; they tile [0, T) in order
  paragraphs  (P, 2) int32   token ranges of paragraphs; they tile [0, T); every paragraph
                             boundary is a sentence boundary (NSP/SOP take sentence pairs, and
                             paragraph-aware sampling never needs to re-split)

A parallel pair (TLM) is a :class:`PairView`: two TextViews, ``src`` and ``tgt``, each tokenized on
its own (no separator, no language tag: the objective adds them), sharing the pair's ``path``.
Arrow: one row per view; 2-D arrays flattened row-major (like CodeView); a pair row prefixes the
columns of each side with ``src_`` / ``tgt_``.

Not covered here: how the views are built (codept.text.build) and read (codept.text.readers).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from codept.data.viewrows import TokenText, arrays_from_record, to_record, to_table

_NONSPACE = re.compile(r"\S+")

# array field -> (dtype, width; 0 = 1-D)
_ARRAYS = {
    "input_ids": (np.int32, 0),
    "offsets": (np.int32, 2),
    "words": (np.int32, 0),
    "sentences": (np.int32, 2),
    "paragraphs": (np.int32, 2),
}

_TEXT_FIELDS = [
    ("path", pa.string()),
    ("lang", pa.string()),
    ("text", pa.large_string()),
    *((name, pa.list_(pa.int32())) for name in _ARRAYS),
]
TEXT_ARROW_SCHEMA = pa.schema(_TEXT_FIELDS)
PAIR_ARROW_SCHEMA = pa.schema(
    [("path", pa.string())]
    + [(f"{side}_{name}", t) for side in ("src", "tgt") for name, t in _TEXT_FIELDS if name != "path"]
)


@dataclass(eq=False)
class TextView(TokenText):
    path: str
    lang: str
    text: str
    input_ids: np.ndarray
    offsets: np.ndarray
    words: np.ndarray
    sentences: np.ndarray
    paragraphs: np.ndarray
    stats: dict = field(default_factory=dict, compare=False)

    # the schema, written once (codept.data.viewrows): what codept.views reads and to_table writes
    KIND = "text"
    KEY = "path"
    SPLIT = "text"  # held out by content: the same split wherever the corpus lies, duplicates together
    ARRAYS = _ARRAYS
    SCHEMA = TEXT_ARROW_SCHEMA
    DERIVED = ()

    def __len__(self) -> int:
        return len(self.input_ids)

    def __eq__(self, other) -> bool:
        if not isinstance(other, TextView):
            return NotImplemented
        return (self.path, self.lang, self.text) == (other.path, other.lang, other.text) and all(
            np.array_equal(getattr(self, k), getattr(other, k)) for k in _ARRAYS)


    @property
    def n_words(self) -> int:
        return int(self.words.max()) + 1 if len(self.words) and self.words.max() >= 0 else 0

    def word_spans(self) -> np.ndarray:
        """(W, 2) int64 token ranges [start, end) of words 0..W-1."""
        return word_spans(self.words)

    def validate(self) -> "TextView":
        """Check every structural invariant (vectorised, O(T + chars)); raise ValueError naming the
        first broken rule. Returns self."""
        T, n = len(self.input_ids), len(self.text)
        for name, (dtype, width) in _ARRAYS.items():
            a = getattr(self, name)
            shape_ok = a.ndim == 1 if width == 0 else (a.ndim == 2 and a.shape[1] == width)
            if a.dtype != dtype or not shape_ok:
                raise ValueError(f"{self.path}: {name} has dtype {a.dtype} shape {a.shape}; rule: {np.dtype(dtype)} "
                                 f"{'(T,)' if width == 0 else f'(N, {width})'}")
        if len(self.offsets) != T or len(self.words) != T:
            raise ValueError(f"{self.path}: {len(self.offsets)} offsets / {len(self.words)} words for {T} tokens")
        if T == 0:
            if len(self.sentences) or len(self.paragraphs):
                raise ValueError(f"{self.path}: an empty view has no sentences or paragraphs")
            return self
        off = self.offsets
        tiles = (off[1:, 0] == off[:-1, 1]) | ((off[1:, 0] == off[:-1, 0]) & (off[1:, 1] == off[:-1, 1]))
        if off[0, 0] != 0 or off[-1, 1] != n or not tiles.all():
            raise ValueError(f"{self.path}: token offsets must tile the text [0, {n})")
        for name in ("sentences", "paragraphs"):
            r = getattr(self, name)
            if (len(r) == 0 or r[0, 0] != 0 or r[-1, 1] != T or not np.all(r[:, 1] > r[:, 0])
                    or not np.array_equal(r[1:, 0], r[:-1, 1])):
                raise ValueError(f"{self.path}: {name} must be non-empty token ranges tiling [0, {T}) in order")
        if not np.isin(self.paragraphs[:, 0], self.sentences[:, 0]).all():
            raise ValueError(f"{self.path}: every paragraph boundary must be a sentence boundary")
        word_spans(self.words)  # dense ids, contiguous runs
        # tokens without a non-space character, and only those, have no word
        nonspace = np.zeros(n + 1, dtype=np.int64)
        for m in _NONSPACE.finditer(self.text):
            nonspace[m.start() + 1 : m.end() + 1] = 1
        cum = np.cumsum(nonspace)
        has_text = cum[off[:, 1]] - cum[off[:, 0]] > 0
        if np.any((self.words < 0) & has_text):
            raise ValueError(f"{self.path}: a token with non-space text has word -1")
        spans = word_spans(self.words)
        inner_ws = ~has_text & (self.words >= 0)
        if inner_ws.any() and not np.all(
                (spans[self.words[inner_ws], 0] < np.flatnonzero(inner_ws))
                & (np.flatnonzero(inner_ws) < spans[self.words[inner_ws], 1] - 1)):
            raise ValueError(f"{self.path}: a whitespace-only token may only carry a word id inside that word")
        return self

    # -- Arrow ------------------------------------------------------------------------------------
    def to_record(self) -> dict:
        return to_record(self)

    @classmethod
    def from_record(cls, rec: dict) -> "TextView":
        return cls(path=rec["path"], lang=rec["lang"], text=rec["text"], **arrays_from_record(rec, _ARRAYS))


@dataclass(eq=False)
class PairView:
    """A translation pair: ``src`` and ``tgt`` are complete TextViews with the pair's path."""

    path: str
    src: TextView
    tgt: TextView

    # the schema: each side a TextView's columns prefixed src_ / tgt_, one path (codept.data.viewrows)
    KIND = "pair"
    KEY = "path"
    SPLIT = "src_text"  # held out by the source side: a source sentence never straddles the split
    SIDES = ("src", "tgt")
    ARRAYS = {f"{side}_{k}": w for side in SIDES for k, w in _ARRAYS.items()}
    SCHEMA = PAIR_ARROW_SCHEMA
    DERIVED = ()

    @property
    def src_lang(self) -> str:
        return self.src.lang

    @property
    def tgt_lang(self) -> str:
        return self.tgt.lang

    def __eq__(self, other) -> bool:
        if not isinstance(other, PairView):
            return NotImplemented
        return self.path == other.path and self.src == other.src and self.tgt == other.tgt

    def to_record(self) -> dict:
        rec = {"path": self.path}
        for side, v in (("src", self.src), ("tgt", self.tgt)):
            for k, x in v.to_record().items():
                if k != "path":
                    rec[f"{side}_{k}"] = x
        return rec

    @classmethod
    def from_record(cls, rec: dict) -> "PairView":
        sides = {}
        for side in ("src", "tgt"):
            sub = {k[len(side) + 1 :]: v for k, v in rec.items() if k.startswith(side + "_")}
            sides[side] = TextView.from_record({**sub, "path": rec["path"]})
        return cls(path=rec["path"], **sides)


def word_spans(words: np.ndarray) -> np.ndarray:
    """Per-token word ids (T,) (-1 = none, ids 0..W-1 each on a contiguous run) -> (W, 2) int64
    token ranges. Raises ValueError when a word's tokens are not contiguous."""
    w = np.asarray(words)
    idx = np.flatnonzero(w >= 0)
    if len(idx) == 0:
        return np.zeros((0, 2), dtype=np.int64)
    ids = w[idx]
    first = np.concatenate([[True], ids[1:] != ids[:-1]])
    starts = idx[first]
    last = np.concatenate([ids[1:] != ids[:-1], [True]])
    ends = idx[last] + 1
    if not (np.array_equal(ids[first], np.arange(len(starts)))
            and np.array_equal(ends - starts, np.bincount(ids, minlength=len(starts)))):
        raise ValueError("word ids must be 0, 1, 2, ... in token order, each on one contiguous run of tokens "
                         "without -1 inside")
    return np.stack([starts, ends], axis=1).astype(np.int64)


def views_to_table(views: list[TextView]) -> pa.Table:
    return to_table(views, TextView)  # the one writer (codept.data.viewrows)


def table_to_views(table: pa.Table) -> list[TextView]:
    return [TextView.from_record(r) for r in table.to_pylist()]


def pairs_to_table(pairs: list[PairView]) -> pa.Table:
    return to_table(pairs, PairView)


def table_to_pairs(table: pa.Table) -> list[PairView]:
    return [PairView.from_record(r) for r in table.to_pylist()]
