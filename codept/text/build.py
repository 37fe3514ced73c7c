"""Build TextViews and PairViews: one document (or translation pair) -> token ids + word,
sentence and paragraph structure in token coordinates.

:func:`build_text_view`:
  1. tokenize once (``codept.structure.view.tokenize``: ids, untrimmed char offsets that tile the text);
  2. char-level breaks (codept.text.segment): paragraphs, then sentences (which include them);
  3. char-level words inside each sentence (regex; jieba for Han runs);
  4. words -> tokens: a token's word is the word of its first non-space character; a token whose
     characters reach into later words (a BPE merge across a word boundary, e.g. two jieba words
     inside one token) joins those words into one unit, so all tokens of a unit share one id and
     every token has exactly one id; whitespace-only tokens get -1 (also vectorised);
  5. breaks -> tokens: a break at char ``b`` falls before the first token starting at or after ``b``
     (a token straddling ``b`` stays in the earlier unit); ranges that come out empty are dropped, so
     sentences and paragraphs tile [0, T) and every one holds a non-whitespace token.
:func:`build_pair_view`: the same for each side of a pair, independently.

Cost: tokenization dominates English (see :func:`bench` / the report: ~1-2 MB/s on one core
including tokenization); Chinese adds jieba (~0.5-1 MB/s). Not covered: sub-word structure
(morphemes), sentence boundaries that fall inside a BPE token (the token stays in the earlier
sentence), documents larger than memory (readers cap their size).
"""

from __future__ import annotations

import time

import numpy as np

from codept.data.viewrows import tokenize
from codept.text import segment
from codept.text.view import PairView, TextView


def _check_lang(lang: str) -> None:
    if not isinstance(lang, str) or not segment.LANG_RE.fullmatch(lang):
        raise ValueError(f"lang={lang!r}: must be 'text' or a lowercase ISO 639 code such as 'zh', 'de' "
                         "(codept.text.segment.normalise_lang converts locales)")


def token_words(text: str, words: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Per-token word ids (T,) int32 from word char ranges (W, 2) and token offsets (T,) x 2.

    Ids are dense (0, 1, ...) in token order; -1 marks tokens without a word character."""
    n, T = len(text), len(starts)
    if T == 0:
        return np.zeros(0, dtype=np.int32)
    W = len(words)
    # covered[c]: char c is inside a word (non-whitespace)
    delta = np.bincount(words[:, 0], minlength=n + 1).astype(np.int32)
    delta -= np.bincount(words[:, 1], minlength=n + 1).astype(np.int32)
    covered = np.cumsum(delta[:n], dtype=np.int32) > 0
    pos = np.arange(n, dtype=np.int32)  # int32 per char: ~17 bytes/char in all here
    # next covered char at or after c (n if none), last covered char at or before c (-1 if none)
    nxt = np.empty(n + 1, dtype=np.int32)
    nxt[:n] = np.minimum.accumulate(np.where(covered, pos, np.int32(n))[::-1])[::-1]
    nxt[n] = n
    prv = np.maximum.accumulate(np.where(covered, pos, np.int32(-1)))
    s = starts.astype(np.int64)
    e = ends.astype(np.int64)
    has = (e > s) & (nxt[np.minimum(s, n)] < e)
    first_c = nxt[np.minimum(s[has], n)]
    last_c = prv[e[has] - 1]
    f = np.searchsorted(words[:, 0], first_c, side="right") - 1  # word containing the char
    l = np.searchsorted(words[:, 0], last_c, side="right") - 1
    # word j joins word j-1 when some token reaches from a word < j into j
    d = np.bincount(f + 1, minlength=W + 1) - np.bincount(l + 1, minlength=W + 1)
    joined = np.cumsum(d[:W]) > 0
    unit = np.cumsum(~joined) - 1
    out = np.full(T, -1, dtype=np.int64)
    out[has] = unit[f]
    # a whitespace-only token between two tokens of one unit belongs to it (keeps units contiguous)
    idx = np.arange(T)
    last_seen = np.maximum.accumulate(np.where(out >= 0, idx, -1))
    next_seen = np.minimum.accumulate(np.where(out >= 0, idx, T)[::-1])[::-1]
    gap = (out < 0) & (last_seen >= 0) & (next_seen < T)
    gi = idx[gap]
    same = out[last_seen[gi]] == out[next_seen[gi]]
    out[gi[same]] = out[last_seen[gi[same]]]
    return out.astype(np.int32)


def breaks_to_ranges(breaks: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Char breaks (K,) + token starts (T,) -> (N, 2) int32 token ranges tiling [0, T), none empty."""
    T = len(starts)
    if T == 0:
        return np.zeros((0, 2), dtype=np.int32)
    cut = np.searchsorted(starts, breaks, side="left")
    b = np.unique(np.concatenate([[0], cut, [T]]))
    return np.stack([b[:-1], b[1:]], axis=1).astype(np.int32)


def build_text_view(path: str, lang: str, text: str, tokenizer, *, user_dict: str | None = None) -> TextView:
    """The TextView of one document. ``user_dict``: a jieba user dictionary (path) for Han text."""
    _check_lang(lang)
    t0 = time.perf_counter()
    ids, off = tokenize(tokenizer, text)
    t1 = time.perf_counter()
    para = segment.paragraph_breaks(text)
    sent = segment.sentence_breaks(text, para)
    words_c = segment.segment_words(text, lang, user_dict=user_dict, breaks=sent)
    t2 = time.perf_counter()
    words = token_words(text, words_c, off[:, 0], off[:, 1])
    sentences = breaks_to_ranges(sent, off[:, 0])
    paragraphs = breaks_to_ranges(para, off[:, 0])
    t3 = time.perf_counter()
    return TextView(
        path=path, lang=lang, text=text, input_ids=ids, offsets=off.astype(np.int32), words=words,
        sentences=sentences, paragraphs=paragraphs,
        # char_words - words = words joined by BPE tokens that straddle a word boundary
        stats={"chars": len(text), "tokens": len(ids), "char_words": len(words_c),
               "words": int(words.max()) + 1 if len(words) else 0,
               "tokenize_s": t1 - t0, "segment_s": t2 - t1, "align_s": t3 - t2},
    )


def build_pair_view(path: str, src_lang: str, src: str, tgt_lang: str, tgt: str, tokenizer, *,
                    user_dict: str | None = None) -> PairView:
    """A translation pair: each side is a TextView of its own (same path). A side in a code language
    (codept.text.records.pair_lang: 'python', 'java', ...) is built by the English rules, which the
    pair objectives never read, and then named by its language (codept.objectives.translate)."""
    from codept.languages import available_languages

    sides = []
    for lang, text in ((src_lang, src), (tgt_lang, tgt)):
        code = lang in available_languages()
        view = build_text_view(path, "text" if code else lang, text, tokenizer, user_dict=user_dict)
        if code:
            view.lang = lang
        sides.append(view)
    return PairView(path=path, src=sides[0], tgt=sides[1])


def build_doc(doc, tokenizer, *, user_dict: str | None = None) -> TextView | PairView:
    """A reader's TextDoc or PairDoc (codept.text.items) -> its view."""
    from codept.text.items import PairDoc, TextDoc

    if isinstance(doc, TextDoc):
        return build_text_view(doc.path, doc.lang, doc.text, tokenizer, user_dict=user_dict)
    if isinstance(doc, PairDoc):
        return build_pair_view(doc.path, doc.src_lang, doc.src, doc.tgt_lang, doc.tgt, tokenizer,
                               user_dict=user_dict)
    raise TypeError(f"build_doc takes a TextDoc or PairDoc, got {type(doc).__name__}")
