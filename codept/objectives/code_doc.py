"""``code_doc``: code <-> docstring alignment, a bi-encoder contrastive pair (CodeSearchNet style).

1. Candidates: the view's definitions (CodeView.functions) of the configured kinds (functions and
   methods by default) that have a doc and keep at least one token of code once the doc is removed.
   None when there is no candidate (the stream drops None: codept.data.stream.PackedStream).
2. ``pairs=0`` (default): every candidate whose doc gives a doc side (below), in a random order,
   one Example each, returned as a list (the stream packs them like separate documents): one read
   of a file feeds all its documented definitions (a file used to give one pair per read: 23 k
   delivered tokens/s for 2 M read). ``pairs=n``: at most n of them. ``pairs=1``: one Example, the
   single-pair path: pick one uniformly; for "summary", if its doc gives no summary, the next of
   the others in a random order that does.
3. Part 0 = the doc side, cut to its first ``max_doc_tokens``. ``doc="summary"`` (default): the
   doc's tokens that overlap its first sentence (:func:`summary_tokens`: from the first word
   character to the first sentence or paragraph break of codept.text.segment, a leading repeat of
   the function's name dropped as Go writes it; Javadoc / JSDoc / PHPDoc / YARD tags and HTML
   handled as the probe handles them), without the whitespace / quote / comment-marker tokens that
   hold a newline, open a line or open or close the doc: what a code-search query looks like
   (codept.probe.build.clean_query; exact agreement after normalisation, on 40-80 files of each
   demo corpus: go 0.98, java 0.92, javascript 0.99, php 1.00, python 0.98, ruby 0.91). No pair
   (None) when no candidate's doc has a word, or each opens with a doctest.
   ``doc="raw"``: every token of the doc as written (quotes / comment markers included). Part 1 =
   the definition's tokens without the doc's tokens (Python: the
   docstring inside the body; brace languages: the doc precedes the definition, nothing to remove),
   cut to its first ``max_code_tokens``. A BPE token straddling the doc's edge belongs to the doc.
4. One multi-part Example (codept.data.example ``parts``): packing keeps both parts in one row as
   two segments that cannot attend to each other; prefix all True (bidirectional). Scalar ``pair``
   = [2 * pid, 2 * pid + 1] with pid a random 62-bit id (side 0 = doc, side 1 = code), the key
   codept.model.heads.ContrastiveHead matches; two pairs of one batch share a pid with probability
   ~ n^2 / 2^63.
5. ``hard_negatives``: each pair's row also holds two unmatched parts with fresh pair ids (so the
   contrastive head scores them as candidates and matches them to nothing): the doc side of
   another definition of the same file, and this definition's code side with that definition's
   name in place of its own (the study's hard negatives: a near-identical function is not a match).
   Needs another documented definition in the file; without one the pair has no negatives.
6. Optional MLM on the code part (``mlm_rate`` > 0: select.random_tokens + render.bert_80_10_10,
   labels ``mlm``, IGNORE on the doc part). Off by default: no ``mlm`` labels at all.
Cost: O(F + T_def) per document, plus one regex pass over the picked doc's text for "summary".
Not covered: the whitespace the removed docstring leaves behind (an empty line stays in the code);
negatives beyond the micro-step of all ranks (the head's limit); Python roles inside the summary
(``:func:`x``` stays as tokens); ``{@link X label}`` keeps ``X label`` where the probe keeps only
the label; HTML entities stay; dropping a markup token that carries a space glues the words around
it (``a <b>bar`` -> ``abar``: the BPE ids of ``bar`` and `` bar`` differ); a doc whose first
sentence is a signature line. "summary" against "raw" was measured (single process, 16 rows of 256, 200 steps,
zero residual init, full protocol): in-domain 0.193 vs 0.181, networkx 0.095 vs 0.086. The 32 / 128
token cuts were measured: against 64 / 192, more pairs fit a row (more in-batch negatives) and a
200-step code_doc-only run scored higher on both default probes (cheap protocol, in-domain 0.19 vs
0.14, networkx 0.14 vs 0.13; random 0.08 / 0.13). Packing must use
seq_len >= max_doc_tokens + max_code_tokens or the code side is truncated (codept.data.pack).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from codept.data.example import IGNORE, Example
from codept.objectives import render, select
from codept.structure.kinds import DEFINITION_KINDS
from codept.text import markup
from codept.text.segment import sentence_breaks

PID_BITS = 62  # 2 * pid + 1 < 2**63: the pair keys fit int64
DOC_MODES = ("summary", "raw")
_WORD = re.compile(r"\w")
_MARKER_ONLY = re.compile(r"[\s*/#'\"`]*")  # whitespace, quotes and comment markers only
_STRING_PREFIX = re.compile(r"\s*[rRbBuU]{1,2}(?=[\"'])")  # r\"\"\"...: the prefix is not a word
_LINE_LEAD = re.compile(r"[ \t]*(?:[*/#]+[ \t]*)?")  # a doc line's indentation and comment marker
_BLOCK_TAG = re.compile(r"\n" + _LINE_LEAD.pattern + "@[A-Za-z!]")  # a line opening with @param, @return, ...


@dataclass(frozen=True)
class Config:
    max_doc_tokens: int = 32  # doc side: at most this many tokens
    doc: str = "summary"  # "summary": the doc's first sentence without markers | "raw": the doc as written
    max_code_tokens: int = 128  # code side: the definition's first tokens (signature first)
    mlm_rate: float = 0.0  # share of code-side tokens masked for the mlm head; 0 = no mlm labels
    kinds: tuple[str, ...] = ("function", "method")  # DEFINITION_KINDS eligible ("class" too if wanted)
    pairs: int = 0  # pairs per read of a file: 0 = every eligible definition (a list); 1 = one pair
    hard_negatives: bool = False  # add another definition's doc and this code with another's name

    def __post_init__(self):
        if self.max_doc_tokens < 1 or self.max_code_tokens < 1:
            raise ValueError(f"max_doc_tokens={self.max_doc_tokens}, max_code_tokens={self.max_code_tokens}: "
                             "both must be >= 1")
        if self.doc not in DOC_MODES:
            raise ValueError(f"code_doc doc={self.doc!r}: expected one of {DOC_MODES}")
        if not 0.0 <= self.mlm_rate <= 1.0:
            raise ValueError(f"mlm_rate={self.mlm_rate} must be in [0, 1]")
        if self.pairs < 0:
            raise ValueError(f"code_doc pairs={self.pairs}: must be >= 0 (0 = every documented definition)")
        unknown = [k for k in self.kinds if k not in DEFINITION_KINDS]
        if unknown or not self.kinds:
            raise ValueError(f"code_doc kinds {list(self.kinds)}: each must be one of {list(DEFINITION_KINDS)}")


def candidates(functions: np.ndarray, kind_ids: np.ndarray) -> np.ndarray:
    """Rows of `functions` (F, 7) eligible for a pair: kind allowed, a non-empty doc, and code left
    after the doc's tokens are removed from the definition."""
    f = functions.reshape(-1, 7).astype(np.int64)
    s, e, ds, de = f[:, 1], f[:, 2], f[:, 5], f[:, 6]
    overlap = np.clip(np.minimum(e, de) - np.maximum(s, ds), 0, None)
    ok = np.isin(f[:, 0], kind_ids) & (ds >= 0) & (de > ds) & (e - s - overlap > 0)
    return np.flatnonzero(ok)


def summary_tokens(text: str, offsets: np.ndarray, ds: int, de: int, name: str = "", lang: str = "",
                   limit: int | None = None) -> np.ndarray:
    """Token indices (K,) int64 in [ds, de) of the doc's summary: the tokens overlapping the chars
    from the doc's first word character to its first sentence break (codept.text.segment, paragraph
    breaks included), minus the tokens made only of whitespace, quotes and comment markers that
    hold a newline, open a line, or open or close the doc (inside a line they stay: 'the "call"
    list'). A leading `name` (the documented function's name: "// Foo returns ...") is skipped.
    For `lang` in codept.text.markup.LANGS (java, javascript, php, ruby), as the probe's query
    cleaner reads such docs: the markup opening the doc is skipped (:func:`_first_text_word`), a
    line opening with a block tag (``@param``) or block HTML (``<p>``) ends the summary, and
    tokens holding only inline-tag / HTML markup (``{@code``, its ``}``, ``<b>``), or markup and
    punctuation (``}.``), are dropped.
    Empty when the doc has no word character, only tags, or opens with a doctest (``>>>``).
    ``limit``: only the first `limit` tokens from the summary's start are read (the caller keeps
    fewer: a long docstring's sentence search need not run to its end)."""
    empty = np.zeros(0, dtype=np.int64)
    off = np.asarray(offsets).reshape(-1, 2)
    c0, c1 = int(off[ds, 0]), int(off[de - 1, 1])
    doc = text[c0:c1]
    prefix = _STRING_PREFIX.match(doc)
    m = _WORD.search(doc, prefix.end() if prefix else 0)
    if m is None or ">>>" in doc[: m.start()]:  # no words, or a doc that opens with a doctest
        return empty
    html = lang in markup.LANGS
    first = _first_text_word(text, c0, c0 + m.start(), c1, lang) if html else c0 + m.start()
    if first is None:
        return empty
    start = first - c0
    if name and doc.startswith(name, start) and doc[start + len(name): start + len(name) + 1].isspace():
        start += len(name) + 1
    stop = len(doc)
    if limit is not None:
        first_tok = ds + int(np.searchsorted(off[ds:de, 1], c0 + start, side="right"))
        stop = min(stop, int(off[min(de - 1, first_tok + limit), 1]) - c0)
    breaks = sentence_breaks(doc[start:stop])
    end = start + (int(breaks[0]) if len(breaks) else stop - start)
    if html:  # Javadoc / JSDoc / PHPDoc / YARD: a block tag (@param) or block HTML (<p>) ends the text
        for stop in (_BLOCK_TAG.search(doc, start, end), markup.HTML_BLOCK.search(doc, start, end)):
            end = stop.start() if stop else end
    o = off[ds:de] - c0
    idx = ds + np.flatnonzero((o[:, 1] > start) & (o[:, 0] < end))
    masked = _markup_mask(doc, end) if html else None
    keep = []
    for i in idx.tolist():
        a, b = int(off[i, 0]), int(off[i, 1])
        lo, hi = max(a - c0, start), min(b - c0, end)
        if masked is not None and (masked[lo:hi].any() or hi < b - c0):
            # a token holding markup or running past the summary: kept for the text beside it, and
            # beside markup only for a word ("}." and ">," go, "e}" stays)
            rest = "".join(ch for ch, mk in zip(doc[lo:hi], masked[lo:hi]) if not mk).strip()
            if not rest or (masked[lo:hi].any() and not _WORD.search(rest)):
                continue
        if _MARKER_ONLY.fullmatch(text, a, b):
            tok = text[a:b]
            line_start = text.rfind("\n", 0, a) + 1
            if "\n" in tok or a < c0 + start or b >= c1 or not text[max(line_start, c0 + start):a].strip():
                continue  # blank, opening / closing quotes, or a line's comment marker
        keep.append(i)
    return np.asarray(keep, dtype=np.int64)


def _first_text_word(text: str, begin: int, pos: int, end: int, lang: str) -> int | None:
    """For a doc text[begin:end] with markup (codept.text.markup.LANGS): `pos` (its first word
    character), or the first word after the markup that opens the doc, as the probe's query cleaner
    reads it: HTML tags (``<p>``) and inline-tag names (``{@code`` of ``{@code x}``) are skipped;
    block tags opening a line are skipped in Ruby (YARD's ``@api private``, with their indented
    continuation lines), give the tag's text for ``@description`` / ``@summary``, and otherwise
    mean no summary (a Javadoc with no text before its tags). None when nothing is left."""
    while True:
        skip = _markup_at(text, begin, pos)
        if skip is None and pos > 0 and text[pos - 1] == "@":
            line = text.rfind("\n", 0, pos) + 1
            if _LINE_LEAD.match(text, line).end() == pos - 1:  # a block tag opens the line
                if lang == "ruby":
                    skip = _tag_block_end(text, pos, end, tag_col=pos - 1 - line)
                elif described := markup.DESCRIPTION_TAG.match(text, pos - 1):
                    skip = described.end()
                else:
                    return None
        if skip is None:
            return pos
        m = _WORD.search(text, skip, end)
        if m is None:
            return None
        pos = m.start()


def _tag_block_end(text: str, pos: int, end: int, tag_col: int) -> int:
    """Where a YARD tag starting at its line's column `tag_col` ends: the start of the first later
    line that is not blank and not indented deeper than the tag (`end` if none)."""
    nxt = text.find("\n", pos, end)
    while nxt >= 0:
        line = nxt + 1
        lead = _LINE_LEAD.match(text, line, end).end()
        nxt = text.find("\n", line, end)
        if text[lead : nxt if nxt >= 0 else end].strip() and lead - line <= tag_col:
            return lead
    return end


def _markup_at(text: str, begin: int, pos: int) -> int | None:
    """The end of the HTML tag or inline-tag opening (``{@code ``) that starts at or after `begin`
    and holds the word character at `pos`, or None."""
    if pos - 2 >= begin and text[pos - 2 : pos] == "{@":
        return markup.INLINE_TAG_OPEN.match(text, pos - 2).end()
    lt = text.rfind("<", begin, pos)
    if lt < 0 or ">" in text[lt:pos]:
        return None
    tag = markup.HTML_BLOCK.match(text, lt) or markup.HTML_INLINE.match(text, lt)
    return tag.end() if tag else None


def _markup_mask(doc: str, end: int) -> np.ndarray:
    """(len(doc),) bool: the chars of doc[:end] that are markup: inline-tag openings (``{@code ``)
    with their closing ``}``, and HTML tags."""
    mask = np.zeros(len(doc), dtype=bool)
    for m in markup.INLINE_TAG_OPEN.finditer(doc, 0, end):
        mask[m.start() : m.end()] = True
        close = doc.find("}", m.end(), end)
        if close >= 0:
            mask[close] = True
    for m in markup.HTML_INLINE.finditer(doc, 0, end):
        mask[m.start() : m.end()] = True
    return mask


def build(vocab: render.Vocab, cfg: Config = Config()):
    kind_ids = np.array([DEFINITION_KINDS.index(k) for k in cfg.kinds], dtype=np.int64)

    def code_doc(view, rng: np.random.Generator, ctx=None) -> Example | list[Example] | None:
        funcs = np.asarray(view.functions)
        cand = candidates(funcs, kind_ids)
        if len(cand) == 0:
            return None
        if cfg.pairs == 1:
            return _one_pair(view, funcs, cand, rng)
        order = rng.permutation(cand).tolist()
        docs = {row: d for row in order if len(d := _doc_side(view, funcs, row))}
        out = []
        for row in order:
            if row not in docs:
                continue
            pid = int(rng.integers(0, 2**PID_BITS, dtype=np.int64))
            ex = _example(view, funcs, row, docs[row], pid, rng)
            if cfg.hard_negatives:
                ex = _with_negatives(view, funcs, row, ex, docs, rng)
            out.append(ex)
            if len(out) == cfg.pairs:
                break
        return out or None

    def _one_pair(view, funcs, cand, rng) -> Example | None:
        """The single-pair path (``pairs=1``): one definition drawn uniformly, falling back to the
        others in random order when its doc gives no summary."""
        pick = int(rng.integers(len(cand)))
        pid = int(rng.integers(0, 2**PID_BITS, dtype=np.int64))
        def rows():  # the picked definition, then (drawn only if needed) the others in random order
            yield int(cand[pick])
            if cfg.doc == "summary":
                yield from rng.permutation(np.delete(cand, pick)).tolist()

        for row in rows():  # the first definition whose doc has a summary
            doc = _doc_side(view, funcs, row)
            if len(doc):
                return _example(view, funcs, row, doc, pid, rng)
        return None  # no doc with a word: no pair (the stream drops None)

    def _doc_side(view, funcs, row: int) -> np.ndarray:
        ids = np.asarray(view.input_ids)
        _, s, e, ns, ne, ds, de = (int(x) for x in funcs[row])
        if cfg.doc != "summary":
            return ids[ds:de][: cfg.max_doc_tokens]
        off = np.asarray(view.offsets).reshape(-1, 2)
        name = view.text[off[ns, 0]: off[ne - 1, 1]].strip() if ne > ns else ""
        # 2x the kept tokens are read: the markers dropped inside a summary never need more
        return ids[summary_tokens(view.text, off, ds, de, name, view.lang, 2 * cfg.max_doc_tokens + 8)][: cfg.max_doc_tokens]

    def _code_side(view, funcs, row: int, name_ids: np.ndarray | None = None) -> np.ndarray:
        """The definition's tokens without its doc's, cut; `name_ids` replace its name's tokens."""
        ids = np.asarray(view.input_ids)
        _, s, e, ns, ne, ds, de = (int(x) for x in funcs[row])
        keep = np.ones(e - s, dtype=bool)
        keep[max(ds, s) - s : max(min(de, e) - s, 0)] = False  # the doc's tokens inside the definition
        toks = ids[s:e]
        if name_ids is not None and s <= ns < ne <= e:
            toks = np.concatenate([toks[: ns - s], name_ids, toks[ne - s:]])
            keep = np.concatenate([keep[: ns - s], np.ones(len(name_ids), bool), keep[ne - s:]])
        return toks[keep][: cfg.max_code_tokens]

    def _example(view, funcs, row: int, doc: np.ndarray, pid: int, rng) -> Example:
        code = _code_side(view, funcs, row)
        labels = {}
        if cfg.mlm_rate > 0:
            chosen = select.random_tokens(vocab.candidates(code), cfg.mlm_rate, rng)
            code, lab = render.bert_80_10_10(code, render.tokens_as_units(chosen), vocab, rng)
            labels["mlm"] = np.concatenate([np.full(len(doc), IGNORE, dtype=np.int32), lab])
        n = len(doc) + len(code)
        parts = np.repeat(np.array([0, 1], dtype=np.int32), [len(doc), len(code)])
        return Example(np.concatenate([doc, code]).astype(np.int32), np.ones(n, dtype=bool), labels=labels,
                       scalars={"pair": [2 * pid, 2 * pid + 1]}, parts=parts)

    def _with_negatives(view, funcs, row: int, ex: Example, docs: dict, rng) -> Example:
        """`ex` plus up to two unmatched parts in its row (fresh pair ids, so the contrastive head
        scores them as candidates of every pair and matches them to none): another definition's doc
        of the same file (a doc-side candidate), and this definition's code with the name of another
        definition of the file (a code-side candidate)."""
        others = [r for r in docs if r != row]
        if not others:
            return ex
        other = others[int(rng.integers(len(others)))]
        ids = np.asarray(view.input_ids)
        _, _, _, ns, ne, _, _ = (int(x) for x in funcs[other])
        neg_doc = docs[other]
        neg_code = _code_side(view, funcs, row, ids[ns:ne])
        if cfg.mlm_rate > 0:  # the negatives carry no MLM labels
            ex.labels["mlm"] = np.concatenate([ex.labels["mlm"], np.full(len(neg_doc) + len(neg_code), IGNORE, np.int32)])
        q, r = (int(x) for x in rng.integers(0, 2**PID_BITS, size=2, dtype=np.int64))
        n = len(ex) + len(neg_doc) + len(neg_code)
        parts = np.concatenate([ex.parts, np.full(len(neg_doc), 2, np.int32), np.full(len(neg_code), 3, np.int32)])
        return Example(np.concatenate([ex.input_ids, neg_doc, neg_code]).astype(np.int32), np.ones(n, dtype=bool),
                       labels=ex.labels, scalars={"pair": [*ex.scalars["pair"], 2 * q, 2 * r + 1]}, parts=parts)

    return code_doc
