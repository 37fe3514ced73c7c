"""The one place that converts between UTF-8 byte, character and token offsets.

tree-sitter reports UTF-8 byte offsets; ``tokenizers`` reports character (code point) offsets;
objectives work in token indices. All conversions are vectorised NumPy.

1. ``byte_to_char``: for ASCII text the identity; otherwise a lookup table built from the UTF-8 lead
   bytes (``char_of_byte[b]`` = index of the character containing byte ``b``; ``len(bytes)`` maps to
   ``len(text)``). Cost O(bytes) once per non-ASCII file.
2. ``char_to_byte``: the inverse, from the cumulative UTF-8 length of each character.
3. ``char_span_to_tokens``: token offsets from ``tokenizers`` (untrimmed, so they tile the text) ->
   the smallest token range ``[t0, t1)`` covering a character range; by binary search.
4. ``token_anchor``: the character a token "stands for": its first non-whitespace character (a
   byte-level BPE token such as ``" foo"`` carries the preceding space).

Not covered: grapheme clusters (a character here is a code point, like Python's ``str``).
"""

from __future__ import annotations

import numpy as np

_WHITESPACE = np.zeros(128, dtype=bool)
_WHITESPACE[[9, 10, 11, 12, 13, 32]] = True


def byte_to_char_table(data: bytes) -> np.ndarray | None:
    """Table mapping byte offset (0..len(data)) -> char offset; None when data is ASCII (identity)."""
    if data.isascii():
        return None
    b = np.frombuffer(data, dtype=np.uint8)
    is_lead = (b & 0xC0) != 0x80  # a character starts at every non-continuation byte
    table = np.empty(len(b) + 1, dtype=np.int64)
    table[:-1] = np.cumsum(is_lead) - 1
    table[-1] = int(is_lead.sum())
    # a byte offset inside a character (never produced by tree-sitter) maps to that character
    return table


def byte_to_char(offsets: np.ndarray, table: np.ndarray | None) -> np.ndarray:
    offsets = np.asarray(offsets, dtype=np.int64)
    return offsets if table is None else table[offsets]


def char_to_byte(text: str, offsets: np.ndarray) -> np.ndarray:
    """Char offsets (0..len(text)) -> UTF-8 byte offsets."""
    offsets = np.asarray(offsets, dtype=np.int64)
    if text.isascii():
        return offsets
    cps = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    width = 1 + (cps >= 0x80) + (cps >= 0x800) + (cps >= 0x10000)
    cum = np.zeros(len(cps) + 1, dtype=np.int64)
    np.cumsum(width, out=cum[1:])
    return cum[offsets]


def char_span_to_tokens(tok_starts: np.ndarray, tok_ends: np.ndarray, start: np.ndarray, end: np.ndarray):
    """Smallest token range [t0, t1) whose tokens overlap the char range [start, end).

    ``tok_starts``/``tok_ends`` must be sorted (they are for tokenizer offsets). An empty result
    (t0 >= t1) means no token overlaps the range.
    """
    t0 = np.searchsorted(tok_ends, start, side="right")  # first token ending after `start`
    t1 = np.searchsorted(tok_starts, end, side="left")  # tokens starting before `end`
    return t0, np.where(np.asarray(end) > np.asarray(start), t1, t0)  # an empty range covers nothing


def token_anchor(text: str, tok_starts: np.ndarray, tok_ends: np.ndarray) -> np.ndarray:
    """Char offset of each token's first non-whitespace char, -1 for all-whitespace tokens.

    Byte-level BPE pre-tokenization attaches at most one leading space to a word token and keeps
    longer whitespace runs as tokens of their own, so checking the first two characters suffices.
    """
    n = len(text)
    codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    ws = np.zeros(n + 1, dtype=bool)
    ascii_ = codes < 128
    ws[:n][ascii_] = _WHITESPACE[codes[ascii_]]
    ws[n] = True
    s = np.asarray(tok_starts, dtype=np.int64)
    e = np.asarray(tok_ends, dtype=np.int64)
    anchor = s.copy()
    lead_ws = ws[np.minimum(s, n)]
    anchor[lead_ws] += 1
    bad = (anchor >= e) | ws[np.minimum(anchor, n)]
    anchor[bad] = -1
    return anchor
