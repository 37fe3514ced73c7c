"""Character-level segmentation of natural-language text: paragraphs, sentences and words.

Everything here works on a decoded ``str`` and returns character offsets (NumPy int64); the text
view (codept.text.build) converts them to token coordinates. Nothing depends on a tokenizer.

1. Paragraph breaks (:func:`paragraph_breaks`): a run of whitespace containing a blank line
   (``\\n``, optional spaces, ``\\n``). The break is placed right after the last non-space character
   before the run, so the blank lines belong to the next paragraph (byte-level BPE tokens carry
   their leading whitespace, so a break there never cuts a token).
2. Sentence breaks (:func:`sentence_breaks`), a small rule-based splitter, every paragraph break
   included (a sentence never crosses a paragraph):
   a. English and other space-separated scripts: ``.``, ``!``, ``?`` (a run of them, then closing
      quotes/brackets) followed by whitespace and more text. No break when the next character is a
      lowercase letter (``e.g. the``, ``etc. and``), when the word before ``.`` is a known
      abbreviation (:data:`ABBREVIATIONS`: ``Mr.``, ``Dr.``, ``e.g.``, ``i.e.``, ``vs.``, ...), a
      single letter (initials: ``J. Smith``) or dotted (``U.S.``), or a numbering abbreviation
      before a digit (``No. 5``, ``Fig. 3``). Decimals (``3.14``) never match (no space after).
   b. Chinese/Japanese full-width ``。！？；`` (then closing quotes/brackets), no space needed.
   A break sits right after the last character of the terminator run, like a paragraph break.
3. Words (:func:`segment_words`), one regex pass; a word running over a sentence break (only
   possible for punctuation runs after full-width terminators, "。”（") is cut there, so no word
   crosses a break:
   a. a run of Han characters (CJK ideographs) is cut into words by jieba (dictionary + HMM for
      unknown words; a user dictionary can be given); for ``lang="ja"`` each Han character is a word;
   b. a run of other word characters (letters, digits, ``_``, common combining marks), joined over
      single inner apostrophes, hyphens and periods: ``don't``, ``state-of-the-art``, ``3.14``,
      ``os.path``, ``e.g`` are one word each;
   c. a run of punctuation/symbols (``--``, ``...``, ``(``, ``。``) is one word;
   d. whitespace belongs to no word.
   Every non-whitespace character belongs to exactly one word.

jieba: one ``jieba.Tokenizer`` per user dictionary per process, created lazily (never passed
through ``datasets.map``), its cache file in ``codept.tokenizer.cache_dir()/"jieba"`` (jieba's
default is ``/tmp``). :func:`segmenter_fingerprint` names everything that changes word boundaries
(jieba version, user dictionary content) for cache keys.

Cost: one regex pass plus jieba on Han runs (jieba: roughly 0.5-1 MB/s of Chinese on one
core; English never loads jieba). Not covered: word segmentation of Thai/Lao/Khmer/Myanmar (a
space-less run is one "word"), Japanese kana (a kana run is one word), Korean morphology;
sentence splitting of abbreviations not in the list that precede a capitalised word ("Inc. The" and
"Acme Inc. Is" are split alike), quotations spanning sentences, and ASCII ``;``.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import threading
from pathlib import Path

import numpy as np

HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
KANA = "\u3040-\u30ff\u31f0-\u31ff"
# combining marks that Python's \w does not include (Latin diacritics, Hebrew/Arabic points,
# Indic and Thai vowel signs): without them a word in those scripts would break at every mark
_MARKS = ("\u0300-\u036f\u0483-\u0489\u0591-\u05bd\u05bf\u05c1\u05c2\u05c4\u05c5\u05c7\u0610-\u061a"
          "\u064b-\u065f\u0670\u06d6-\u06dc\u06df-\u06e4\u06e7\u06e8\u06ea-\u06ed\u0900-\u0903\u093a-\u094f"
          "\u0951-\u0957\u0962\u0963\u0981-\u0983\u09bc-\u09d7\u0a01-\u0a03\u0a3c-\u0a51\u0a81-\u0a83"
          "\u0abc-\u0acd\u0b01-\u0b03\u0b3c-\u0b57\u0b82\u0bbe-\u0bcd\u0c00-\u0c04\u0c3e-\u0c56"
          "\u0c81-\u0c83\u0cbc-\u0cd6\u0d00-\u0d03\u0d3b-\u0d57\u0e31\u0e34-\u0e3a\u0e47-\u0e4e"
          "\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f")
_W = rf"(?:[^\W{HAN}]|[{_MARKS}])"  # a word character that is not Han
WORD_RE = re.compile(rf"(?P<han>[{HAN}]+)|{_W}+(?:['’.\-]{_W}+)*|(?:(?![{_MARKS}])[^\w\s])+")
_WORD_FAST = re.compile(rf"(?P<han>[{HAN}]+)|[^\W{HAN}]+(?:['’.\-][^\W{HAN}]+)*|[^\w\s]+")  # text without marks
_MARKS_RE = re.compile(f"[{_MARKS}]")
HAN_RE = re.compile(f"[{HAN}]")
KANA_RE = re.compile(f"[{KANA}]")

_CLOSERS = "\"'”’)\\]}»」』）》〕】"
_EN_END = re.compile(rf"[.!?]+[{_CLOSERS}]*(?=\s+(\S))")
_ZH_END = re.compile(rf"[。！？；]+[{_CLOSERS}]*")
_PARA = re.compile(r"\s*\n[^\S\n]*\n\s*")

# lowercased, without the final period; never end a sentence
ABBREVIATIONS = frozenset(
    "mr mrs ms mx dr prof rev hon gen col lt sgt capt sr jr st mt vs v e.g i.e cf viz al approx ca resp "
    "dept univ est min max".split())
# end a sentence unless a digit follows ("No. 5", "Fig. 3", "pp. 12")
NUMBERING = frozenset("no nos fig figs eq eqs vol vols p pp ch chap sec sect art op tab ex".split())
_DOTTED = re.compile(r"(?:[^\W\d_]\.)+[^\W\d_]")
_LEADING = re.compile(rf"^[(\[{{\"'“‘{_CLOSERS}]+")


def paragraph_breaks(text: str) -> np.ndarray:
    """Char offsets (K,) int64 where a paragraph ends and the next begins (0 < offset < len)."""
    out = [m.start() for m in _PARA.finditer(text) if m.start() > 0 and m.end() < len(text)]
    return np.asarray(out, dtype=np.int64)


def _ends_sentence(text: str, m: re.Match) -> bool:
    """Decide one English candidate: terminator run m, next non-space char m.group(1)."""
    nxt = m.group(1)
    if nxt.islower():  # "e.g. the", "etc. and", "... but"
        return False
    if text[m.start()] != "." or m.group(0).startswith(".."):
        return True  # "!", "?" and ellipses end a sentence before a non-lowercase word
    # the whitespace-delimited chunk before the period, without opening quotes/brackets
    head = text[max(0, m.start() - 64) : m.start()]
    if not head or head[-1].isspace():
        return True
    chunk = _LEADING.sub("", head.split()[-1])
    word = chunk.lower()
    if word in ABBREVIATIONS:
        return False
    if word in NUMBERING and nxt.isdigit():
        return False
    if len(chunk) == 1 and chunk.isalpha() and chunk.isupper():  # an initial: "J. Smith"
        return False
    return _DOTTED.fullmatch(chunk) is None  # "U.S", "e.g" written with other letters


def first_sentence_break(text: str) -> int | None:
    """``sentence_breaks(text)[0]``, None when there is none; reads the text no further than the
    first candidate of each rule (a summary needs only the first sentence)."""
    n, best = len(text), None
    for m in _PARA.finditer(text):
        if m.start() > 0 and m.end() < n:
            best = m.start()
            break
    for m in _EN_END.finditer(text):
        if best is not None and m.end() >= best:
            break
        if _ends_sentence(text, m):
            best = m.end()
            break
    last = None
    for m in _ZH_END.finditer(text):
        if best is not None and m.end() >= best:
            break
        last = len(text.rstrip()) if last is None else last
        if 0 < m.end() < last:
            best = m.end()
            break
    return best


def sentence_breaks(text: str, paragraphs: np.ndarray | None = None) -> np.ndarray:
    """Sorted unique char offsets (K,) int64 where a sentence ends; includes every paragraph break."""
    last = len(text.rstrip())
    out = [m.end() for m in _EN_END.finditer(text) if _ends_sentence(text, m)]
    out += [m.end() for m in _ZH_END.finditer(text) if 0 < m.end() < last]
    para = paragraph_breaks(text) if paragraphs is None else paragraphs
    return np.union1d(np.asarray(out, dtype=np.int64), para.astype(np.int64))


# -- words -----------------------------------------------------------------------------------------

_SEGMENTERS: dict[str, object] = {}
_LOCK = threading.Lock()


def jieba_cache_dir() -> Path:
    from codept.tokenizer import cache_dir

    return cache_dir() / "jieba"


def segmenter(user_dict: str | None = None):
    """The process-wide jieba tokenizer for `user_dict` (a path or None), created on first use."""
    key = str(Path(user_dict).resolve()) if user_dict else ""
    seg = _SEGMENTERS.get(key)
    if seg is not None:
        return seg
    with _LOCK:
        if key in _SEGMENTERS:
            return _SEGMENTERS[key]
        import logging

        try:
            import jieba
        except ImportError as e:
            raise ImportError("Han text needs jieba for word boundaries: pip install 'jieba>=0.42'") from e

        jieba.setLogLevel(logging.WARNING)  # "Building prefix dict ..." on every worker otherwise
        seg = jieba.Tokenizer()
        d = jieba_cache_dir()
        d.mkdir(parents=True, exist_ok=True)
        seg.tmp_dir = str(d)
        seg.initialize()
        if key:
            if not Path(key).is_file():
                raise FileNotFoundError(f"jieba user dictionary {user_dict!r} is not a file "
                                        "(one word per line: 'word [freq] [tag]')")
            seg.load_userdict(key)
        _SEGMENTERS[key] = seg
        return seg


def segmenter_fingerprint(user_dict: str | None = None) -> str:
    """Hash of everything that changes word boundaries: jieba's version, the user dictionary."""
    import jieba

    h = hashlib.sha256(f"jieba={jieba.__version__}".encode())
    if user_dict:
        h.update(Path(user_dict).read_bytes())
    return h.hexdigest()[:16]


def _han_words(run: str, start: int, lang: str, user_dict: str | None, out: list) -> None:
    if lang == "ja":  # jieba's dictionary is Chinese: one word per kanji
        out.extend((start + i, start + i + 1) for i in range(len(run)))
        return
    pos = start
    for w in segmenter(user_dict).cut(run, HMM=True):
        out.append((pos, pos + len(w)))
        pos += len(w)
    if pos != start + len(run):  # jieba must return a partition of its input
        raise RuntimeError(f"jieba returned {pos - start} chars for a Han run of {len(run)}: {run[:40]!r}")


def segment_words(text: str, lang: str = "text", *, user_dict: str | None = None,
                  breaks: np.ndarray | None = None) -> np.ndarray:
    """Word char ranges (W, 2) int64 [start, end), in order, never crossing a break in `breaks`
    (sentence breaks by default). Whitespace is in no word; every other char is in exactly one."""
    if breaks is None:
        breaks = sentence_breaks(text)
    rx = WORD_RE if _MARKS_RE.search(text) else _WORD_FAST  # the mark-aware pattern is ~2x slower
    if HAN_RE.search(text) is None:
        spans = [m.span() for m in rx.finditer(text)]
    else:
        spans = []
        for m in rx.finditer(text):
            if m.lastgroup == "han":
                _han_words(m.group(), m.start(), lang, user_dict, spans)
            else:
                spans.append(m.span())
    w = np.fromiter(itertools.chain.from_iterable(spans), dtype=np.int64, count=2 * len(spans)).reshape(-1, 2)
    if len(breaks) and len(w):
        # a punctuation run can run over a break that needs no space ("。”（"): cut it there
        k = np.searchsorted(breaks, w[:, 0], side="right")
        cross = (k < len(breaks)) & (breaks[np.minimum(k, len(breaks) - 1)] < w[:, 1])
        if cross.any():
            pieces = []
            for i, (s, e) in enumerate(w.tolist()):
                if not cross[i]:
                    pieces.append((s, e))
                    continue
                cuts = [b for b in breaks[k[i] :].tolist() if b < e]
                pieces.extend(zip([s, *cuts], [*cuts, e]))
            w = np.asarray(pieces, dtype=np.int64).reshape(-1, 2)
    return w


def count_words(text: str) -> int:
    """Words with at least one letter (for filters such as 'the source has >= 3 words'); each Han
    character counts as one word here (cheap, no jieba)."""
    return len(_LETTER_WORD.findall(text)) + len(HAN_RE.findall(text))


_LETTER_WORD = re.compile(rf"[^\W\d_{HAN}][^\W{HAN}]*(?:['’\-][^\W{HAN}]+)*")


def guess_lang(text: str) -> str:
    """'zh' when Han characters make >= 30% of the non-space characters (and kana < 5%), 'ja' when
    kana make >= 5%, else 'text' (English or unspecified). Other languages must be given."""
    n = sum(1 for c in text[:20000] if not c.isspace())
    if n == 0:
        return "text"
    sample = text[:20000]
    kana = len(KANA_RE.findall(sample))
    if kana >= 0.05 * n:
        return "ja"
    return "zh" if len(HAN_RE.findall(sample)) >= 0.3 * n else "text"


_LANG_ALIASES = {"en": "text", "eng": "text", "english": "text", "c": "text", "posix": "text",
                 "zho": "zh", "chi": "zh", "cmn": "zh", "chinese": "zh"}
LANG_RE = re.compile(r"text|[a-z]{2,3}")


def normalise_lang(code: str) -> str:
    """Locale or language name -> the view's ``lang``: English -> 'text' (the tokenizer's
    ``<lang_text>``), any Chinese -> 'zh', else the lowercase primary ISO 639 subtag
    ('de_DE.UTF-8@euro' -> 'de', 'pt_BR' -> 'pt'). Raises ValueError for anything else."""
    primary = re.split(r"[_\-.@]", code.strip(), maxsplit=1)[0].lower()
    primary = _LANG_ALIASES.get(primary, primary)
    if not LANG_RE.fullmatch(primary):
        raise ValueError(f"language {code!r}: expected 'text' or an ISO 639 code / locale such as "
                         "'en', 'zh_CN', 'de'")
    return primary
