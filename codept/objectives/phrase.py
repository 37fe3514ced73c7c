"""``phrase``: ERNIE-style phrase and entity masking on text views: each phrase masked whole.

1. Words: the TextView's ``words`` (select.runs), as for ``wwm``.
2. Phrases and entities, as char ranges, widened to the whole words they touch:
   * a user lexicon (``lexicon``: a UTF-8 file, one entity or phrase per line), matched in the text
     longest first (Latin entries only at word boundaries);
   * Chinese (view.lang == "zh"): jieba's part-of-speech tags (jieba.posseg over the segmenter of
     codept.text.segment) -- named entities (nr person, ns place, nt organisation, nz other proper
     noun) and noun chunks: a maximal run of >= 2 words tagged adjective / distinguishing /
     numeral / measure / noun ending in a noun (``北京 故宫``, ``高速 铁路``);
   * other text: a run of >= 2 capitalised words (``New York City``) -- a cheap proper-noun chunk.
   Overlaps are resolved left to right (the earlier, then longer, unit wins).
3. Units = the phrases plus every word outside them; selection (select.disjoint_units, ``first``)
   takes phrases before single words until ``rate`` (15%) of the tokens is spent, so the budget
   goes to phrases whenever the document has enough of them.
4. Render 80/10/10 per unit; labels under ``labels["mlm"]``.
Cost: English O(T) + one regex pass; Chinese adds jieba.posseg (~0.1-0.3 MB/s on one core), memoised
per document text (an LRU of 2048 documents: later epochs pay nothing). Not covered: a statistical
chunker for English (no POS tagger is a dependency), entities in code views.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from codept.data.example import Example
from codept.objectives import render, select
from codept.objectives.spec import Objective

ENTITY_TAGS = ("nr", "ns", "nt", "nz")
CHUNK_TAGS = ("a", "b", "m", "q", "n", "vn", "an")  # jieba tags (prefix match for n*) allowed inside a chunk
_CAPS = re.compile(r"\b[A-Z][\w'’-]*(?:[ \t]+[A-Z][\w'’-]*)+")


@dataclass(frozen=True)
class Config:
    rate: float = 0.15
    p_mask: float = 0.8
    p_random: float = 0.1
    lexicon: str = ""  # path of a user lexicon (one entity / phrase per line); "" = none
    pos_chunks: bool = True  # Chinese: jieba part-of-speech entities and noun chunks

    def __post_init__(self):
        if not 0.0 < self.rate <= 1.0:  # 0 selects no token: every example without labels
            raise ValueError(f"rate={self.rate}: must be in (0, 1] (0 selects no token: nothing to learn)")
        for name in ("p_mask", "p_random"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name}={getattr(self, name)}: must be in [0, 1]")
        if self.p_mask + self.p_random > 1.0:
            raise ValueError(f"p_mask + p_random = {self.p_mask + self.p_random}: must be <= 1")


@lru_cache(maxsize=8)
def lexicon_pattern(path: str):
    """One regex alternating the lexicon's entries, longest first; None for an empty lexicon."""
    try:
        entries = {line.strip() for line in open(path, encoding="utf-8")}
    except OSError as e:
        raise FileNotFoundError(f"phrase: lexicon={path!r} cannot be read ({e}); one entry per line") from None
    entries = sorted((e for e in entries if e), key=lambda e: (-len(e), e))
    if not entries:
        return None
    alt = "|".join(rf"\b{re.escape(e)}\b" if e[0].isascii() and e[-1].isascii() else re.escape(e) for e in entries)
    return re.compile(alt)


def _is_chunk_tag(flag: str) -> bool:
    return flag in CHUNK_TAGS or flag.startswith("n")


def zh_phrases(text: str, user_dict: str | None = None) -> list[tuple[int, int]]:
    """Char ranges of jieba's entities and noun chunks in `text` (memoised per text)."""
    key = (text, user_dict)
    hit = _ZH_CACHE.get(key)
    if hit is not None:
        _ZH_CACHE.move_to_end(key)
        return hit
    import jieba.posseg

    from codept.text.segment import segmenter

    tok = jieba.posseg.POSTokenizer(segmenter(user_dict))
    out, pos, run = [], 0, []  # run: (start, end, flag) of the current chunk candidate
    for w in tok.cut(text, HMM=True):
        s, e = pos, pos + len(w.word)
        pos = e
        if w.flag in ENTITY_TAGS and len(w.word) > 1:
            out.append((s, e))
        if _is_chunk_tag(w.flag) and w.word.strip():
            run.append((s, e, w.flag))
            continue
        _close_chunk(run, out)
        run = []
    _close_chunk(run, out)
    _ZH_CACHE[key] = out
    if len(_ZH_CACHE) > 2048:
        _ZH_CACHE.popitem(last=False)
    return out


def _close_chunk(run: list, out: list) -> None:
    """A chunk is the run cut after its last noun, when >= 2 words remain."""
    while run and not (run[-1][2].startswith("n") or run[-1][2] == "vn"):
        run = run[:-1]
    if len(run) >= 2:
        out.append((run[0][0], run[-1][1]))


_ZH_CACHE: OrderedDict = OrderedDict()


def phrase_chars(view, cfg: Config) -> list[tuple[int, int]]:
    """Char ranges of the view's lexicon entries, POS chunks (zh) or capitalised runs (others)."""
    out = []
    if cfg.lexicon:
        rx = lexicon_pattern(cfg.lexicon)
        if rx is not None:
            out += [m.span() for m in rx.finditer(view.text)]
    if view.lang == "zh":
        if cfg.pos_chunks:
            out += zh_phrases(view.text)
    else:
        out += [m.span() for m in _CAPS.finditer(view.text)]
    return out


def phrase_units(view, cfg: Config) -> tuple[np.ndarray, np.ndarray]:
    """(U, 2) token ranges: phrases widened to whole words, then every word outside them; and (U,)
    bool, True for the phrases."""
    words = select.runs(view.words)
    chars = phrase_chars(view, cfg)
    if not chars or len(words) == 0:
        return words, np.zeros(len(words), bool)
    off = np.asarray(view.offsets)
    c = np.asarray(chars, dtype=np.int64)
    # tokens touched: first token ending after the start .. last token starting before the end
    t0 = np.searchsorted(off[:, 1], c[:, 0], side="right")
    t1 = np.searchsorted(off[:, 0], c[:, 1], side="left")
    # widen to whole words: the word of the first and last touched token with a word
    ws = np.searchsorted(words[:, 1], t0, side="right")  # first word ending after t0
    we = np.searchsorted(words[:, 0], t1, side="left") - 1  # last word starting before t1
    ok = (t1 > t0) & (ws <= we) & (we >= 0) & (ws < len(words))
    ws, we = ws[ok], we[ok]
    ph = np.unique(np.stack([ws, we], axis=1), axis=0)
    ph = ph[ph[:, 1] > ph[:, 0]]  # a phrase is >= 2 words (single-word entities stay words)
    ph = ph[np.lexsort((-(ph[:, 1] - ph[:, 0]), ph[:, 0]))]
    end = np.maximum.accumulate(ph[:, 1]) if len(ph) else ph[:, 1]
    ph = ph[np.concatenate([[True], ph[1:, 0] > end[:-1]])] if len(ph) else ph
    inside = np.zeros(len(words) + 1, dtype=np.int64)
    np.add.at(inside, ph[:, 0], 1)
    np.add.at(inside, ph[:, 1] + 1, -1)
    free = np.cumsum(inside)[: len(words)] == 0
    units = np.concatenate([np.stack([words[ph[:, 0], 0], words[ph[:, 1], 1]], axis=1), words[free]])
    first = np.concatenate([np.ones(len(ph), bool), np.zeros(int(free.sum()), bool)])
    order = np.argsort(units[:, 0], kind="stable")
    return units[order], first[order]


def build(vocab: render.Vocab, cfg: Config = Config()):
    if cfg.lexicon:
        lexicon_pattern(cfg.lexicon)  # a missing lexicon fails at build time, not mid-run

    def phrase(view, rng: np.random.Generator, ctx=None) -> Example:
        ids = np.asarray(view.input_ids)
        units, first = phrase_units(view, cfg)
        chosen = select.disjoint_units(units, vocab.candidates(ids), cfg.rate, rng, first=first)
        new, labels = render.bert_80_10_10(ids, chosen, vocab, rng, cfg.p_mask, cfg.p_random)
        return Example(new, np.ones(len(ids), dtype=bool), labels={"mlm": labels})

    return phrase


OBJECTIVE = Objective("phrase", build, Config, heads=("mlm",), views=("text",))
