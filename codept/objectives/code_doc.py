"""``code_doc``: code <-> docstring alignment, a bi-encoder contrastive pair (CodeSearchNet style).

1. Candidates: the view's definitions (CodeView.functions) of the configured kinds (functions and
   methods by default) that have a doc and keep at least one token of code once the doc is removed.
   None when there is no candidate (the stream drops None: codept.data.stream.PackedStream). A
   stream source never reads a view that cannot give a pair (``keep``: no candidate, or for
   "summary" none whose doc has a summary; whole-corpus arrays, counted in ``Source.skipped`` as
   ``no_documented_definition``: 43% of the stdlib's views); mined negatives keep every view.
2. ``pairs=0`` (default): every candidate whose doc gives a doc side (below), in a random order;
   one read of a file feeds all its documented definitions (a file used to give one pair per read:
   23 k delivered tokens/s for 2 M read). ``pairs=n``: at most n of them. ``pairs=1``: one pair,
   the single-pair path: pick one uniformly; for "summary", if its doc gives no summary, the next of
   the others in a random order that does. Consecutive pairs are grouped into one multi-part
   Example of at most ``max_tokens`` tokens (a longer pair alone), returned as a list: every side
   stays its own part (its own segment of the row, positions from 0, its own pair key), so the
   model sees each pair exactly as when it was an Example of its own; only the row layout changes
   (a group is packed whole, pairs of one file share a row). Why: the per-Example validation and
   packing dominated a ~76-token pair. ``max_tokens=0``: one Example per pair. Unless given, the
   recipes lower it to half the row (groups of a whole row leave a gap of half a pair per row:
   stdlib rows of 256 were 80% full with groups of 256, 97.6% with 128, 98.1% one pair each; rows of
   512 90% / 98.6%), and they refuse a given max_tokens > seq_len.
3. Part 0 = the doc side, cut to its first ``max_doc_tokens``. ``doc="summary"`` (default): the
   doc's tokens that overlap its first sentence (codept.structure.summary.summary_tokens, computed
   once when the view is built: the view's ``summaries`` field, read here as an index slice; per
   read only when ``max_doc_tokens`` > SUMMARY_CAP, the field's cut; from the first word
   character to the first sentence or paragraph break of codept.text.segment, a leading repeat of
   the function's name dropped as Go writes it; Javadoc / JSDoc / PHPDoc / YARD tags and HTML
   handled as the probe handles them), without the whitespace / quote / comment-marker tokens that
   hold a newline, open a line or open or close the doc: what a code-search query looks like
   (codept.probe.query.clean_query; exact agreement after normalisation, on 40-80 files of each
   demo corpus: go 0.98, java 0.92, javascript 0.99, php 1.00, python 0.98, ruby 0.91). No pair
   (None) when no candidate's doc has a word, or each opens with a doctest.
   ``doc="raw"``: every token of the doc as written (quotes / comment markers included). Part 1 =
   the definition's tokens without the doc's tokens (Python: the
   docstring inside the body; brace languages: the doc precedes the definition, nothing to remove),
   cut to its first ``max_code_tokens``. A BPE token straddling the doc's edge belongs to the doc.
4. A pair is two parts of a multi-part Example (codept.data.example ``parts``): packing keeps them
   in one row as two segments that cannot attend to each other; prefix all True (bidirectional).
   Scalar ``pair`` = [2 * pid, 2 * pid + 1] with pid a random 62-bit id (side 0 = doc, side 1 =
   code), the key codept.model.heads.ContrastiveHead matches; two pairs of one batch share a pid
   with probability ~ n^2 / 2^63.
5. ``negatives``: unmatched parts in each pair's row, with fresh pair ids (so the contrastive
   head scores them as candidates of every pair and matches them to nothing; docs/search.md
   "Mined hard negatives" has the ablation). ``"none"`` (default): none. ``"same_file"`` (the
   old ``hard_negatives=True``, still accepted as its spelling): the doc side of another
   definition of the same file, and this definition's code side with that definition's name in
   place of its own (the study's hard negatives: a near-identical function is not a match); needs
   another documented definition in the file, else the pair has none. ``"mined"``: the code sides
   of ``mined_per_pair`` definitions drawn uniformly from the negatives ``codept mine-negatives``
   kept for this definition (BM25 or a teacher encoder over the whole corpus, false negatives
   filtered: codept.probe.mine), read from the sidecar ``negatives/<miner>/`` beside the prepared
   folder the views came from (codept.data.negatives; loaded and checked against the folder's
   content key when the stream source is made: a missing or stale sidecar is an error naming the
   folder and the command). A negative in a file the source does not hold (a held-out file, a
   token-only view) is passed over (``ctx.find``), so the held-out probe files never reach the
   training rows; a pair with no usable negative has none.
6. Prefixes (``query_prefix`` / ``code_prefix``, "" by default): the prefix's tokens (encoded once at
   build time, Vocab.encode) open every doc / code side, negatives included, inside the side's cut
   (prefix + the first max_doc_tokens - len(prefix) tokens). The probes (codept.probe.run:
   prefix + text as one string, then the cut) and the sentence-transformers export (its prompts)
   apply the same strings; where BPE merges across the join, the training ids (prefix alone, then
   the file's tokens) can differ from the probe's at that one boundary token. ``frame="tokenizer"``
   (default): each side, negatives included, is framed as the tokenizer's post-processor frames a
   text (Vocab.framing: [CLS] side [SEP] for BERT's WordPiece, nothing for codept's BPE), the framing
   inside the cut; the probes and the export frame the same way (:func:`framed_of`, from the run's
   recorded setting). Why: all-MiniLM-L6-v2 was trained on framed texts; unframed, its zero-shot MRR
   drops 0.04-0.09 per language and a continued run stayed below the framed zero-shot row on PHP
   (docs/results.md "Why PHP drops"). With prefixes or framing the per-pair path serves (the default
   path has neither). The loss settings (``symmetric``,
   ``temperature``, ``temperature_schedule``, ``temperature_start``, ``matryoshka``, ``grad_cache``)
   configure the contrastive head (:func:`head_options`, codept.model.heads.ContrastiveHead;
   ``grad_cache``: codept.model.gradcache, negatives from the whole optimizer step).
7. Optional MLM on the code part (``mlm_rate`` > 0: select.random_tokens + render.bert_80_10_10,
   labels ``mlm``, IGNORE on the doc part). Off by default: no ``mlm`` labels at all.
Cost: O(F + the kept tokens) NumPy work per document, no string work (with the field; a regex pass
per doc otherwise), one Example per group (benchmarks/bench_code_objectives.py). The default path
(summaries field, no MLM, no negatives) computes every pair's sides of a read as index ranges and
gathers all their tokens at once, each group's Example a slice of it; MLM and negatives build
each pair's sides (``_pair``), the reference the default path equals (tests). ``pairs=1`` on
the default path reads each view's candidates, summary ranges and definition fields from the
source's index (``prepare``: one NumPy pass over the corpus's functions and summaries columns at
source creation, ~40 bytes per candidate), then gathers one pair's tokens; called without a
context it derives the same from the view (tests: the same Examples and draws).
Not covered: the whitespace the removed docstring leaves behind (an empty line stays in the code);
negatives beyond the micro-step of all ranks (the head's limit); the summary's limits
(codept.structure.summary). "summary" against "raw" was measured (single process, 16 rows of 256, 200 steps,
zero residual init, full protocol): in-domain 0.193 vs 0.181, networkx 0.095 vs 0.086. The 32 / 128
token cuts were measured: against 64 / 192, more pairs fit a row (more in-batch negatives) and a
200-step code_doc-only run scored higher on both default probes (cheap protocol, in-domain 0.19 vs
0.14, networkx 0.14 vs 0.13; random 0.08 / 0.13). A pair (with negatives: the pair and its negative
parts) must fit a row, ``unit_tokens()`` <= seq_len: unless a cap is given, recipes lower
max_code_tokens to fit (``fit_unit``), else they refuse the setting.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from codept.data import negatives as N
from codept.data.example import IGNORE, Example
from codept.objectives import render, select
from codept.objectives.spec import Objective
from codept.structure.kinds import DEFINITION_KINDS
from codept.structure.summary import SUMMARY_CAP, summary_tokens  # noqa: F401 (summary_tokens re-exported)

PID_BITS = 62  # 2 * pid + 1 < 2**63: the pair keys fit int64
SMALL = 24  # candidates(): up to this many definitions, one Python pass (the same rows as eligible())
_UNIT_PATH = False  # tests: True makes the default path build per-pair units too (the reference of the fast path)
DOC_MODES = ("summary", "raw")
NEGATIVES = ("none", "same_file", "mined")
FRAMES = ("tokenizer", "none")  # frame: each side framed as the tokenizer's post-processor frames a text | bare
TEMPERATURE_SCHEDULES = ("fixed", "learned", "linear")  # codept.model.heads.TEMPERATURE_SCHEDULES (a test pins them equal)


@dataclass(frozen=True)
class Config:
    max_doc_tokens: int = 32  # doc side: at most this many tokens
    doc: str = "summary"  # "summary": the doc's first sentence without markers | "raw": the doc as written
    max_code_tokens: int = 128  # code side: the definition's first tokens (signature first)
    mlm_rate: float = 0.0  # share of code-side tokens masked for the mlm head; 0 = no mlm labels
    kinds: tuple[str, ...] = ("function", "method")  # DEFINITION_KINDS eligible ("class" too if wanted)
    pairs: int = 0  # pairs per read of a file: 0 = every eligible definition (a list); 1 = one pair
    negatives: str = "none"  # none | same_file (another definition's doc + this code with its name) | mined
    hard_negatives: bool = False  # the old spelling of negatives="same_file" (True sets it)
    miner: str = "bm25"  # negatives="mined": the sidecar VIEWS/negatives/<miner>/ of `codept mine-negatives`
    mined_per_pair: int = 1  # negatives="mined": code negatives per pair, drawn from the kept ones
    max_tokens: int = 256  # pairs of one read grouped into Examples of at most this many tokens; 0 = one per pair
    # search settings (docs/search.md): prefixes in training, probes and the sentence-transformers export
    query_prefix: str = ""  # prepended to the doc side (a query), e.g. "query: "; its tokens count in max_doc_tokens
    code_prefix: str = ""  # prepended to the code side (and the negative code), e.g. "code: "; counts in max_code_tokens
    frame: str = "tokenizer"  # tokenizer: every side [CLS] .. [SEP] as the tokenizer frames a text (none for codept's BPE) | none
    # the contrastive head's loss (codept.model.heads.ContrastiveHead)
    symmetric: bool = True  # mean of query->code and code->query InfoNCE; False = query->code only
    temperature: float = 0.05  # the (final) temperature
    temperature_schedule: str = "fixed"  # fixed | learned (1/t a parameter, from 1/temperature) | linear
    temperature_start: float = 0.1  # linear: the temperature at step 0, moved linearly to `temperature`
    matryoshka: tuple[int, ...] = ()  # embedding sizes: loss = mean over them (+ the full width); probe MRR per size
    grad_cache: bool = False  # GradCache: negatives from every micro-batch of the step (all ranks), memory of one
    whole_in_row: ClassVar[bool] = True  # a group is packed whole: recipes check max_tokens <= seq_len
    default_row_share: ClassVar[float] = 0.5  # unless given, recipes lower max_tokens to seq_len / 2

    unit_fields: ClassVar[tuple] = ("max_doc_tokens", "max_code_tokens")  # the caps unit_tokens reads

    def _code_parts(self) -> int:
        """Code sides of one pair's unit: its own, plus its negatives' (same_file: one, and one doc)."""
        return 1 + (self.mined_per_pair if self.negatives == "mined" else self.negatives == "same_file")

    def unit_tokens(self) -> int:
        """The longest indivisible piece: one pair, with its negative parts (recipes check <= seq_len)."""
        docs = 2 if self.negatives == "same_file" else 1
        return self.max_doc_tokens * docs + self.max_code_tokens * self._code_parts()

    def fit_unit(self, seq_len: int) -> dict:
        """Settings that make unit_tokens() fit seq_len: the code cut lowered (recipes apply them
        unless a cap was given); {} when no code cut can."""
        docs = 2 if self.negatives == "same_file" else 1
        per = (seq_len - self.max_doc_tokens * docs) // self._code_parts()
        return {"max_code_tokens": per} if 1 <= per < self.max_code_tokens else {}

    def __post_init__(self):
        if self.max_doc_tokens < 1 or self.max_code_tokens < 1:
            raise ValueError(f"max_doc_tokens={self.max_doc_tokens}, max_code_tokens={self.max_code_tokens}: "
                             "both must be >= 1")
        if self.doc not in DOC_MODES:
            raise ValueError(f"code_doc doc={self.doc!r}: expected one of {DOC_MODES}")
        if self.frame not in FRAMES:
            raise ValueError(f"code_doc frame={self.frame!r}: expected one of {FRAMES} (tokenizer: each side framed "
                             "as the tokenizer's post-processor frames a text, [CLS] .. [SEP] for BERT's WordPiece)")
        if self.negatives not in NEGATIVES:
            raise ValueError(f"code_doc negatives={self.negatives!r}: expected one of {NEGATIVES}")
        if self.hard_negatives:  # the old spelling of same_file
            if self.negatives not in ("none", "same_file"):
                raise ValueError(f"code_doc hard_negatives=true (the old spelling of negatives='same_file') "
                                 f"contradicts negatives={self.negatives!r}: give negatives alone")
            object.__setattr__(self, "negatives", "same_file")
        if isinstance(self.mined_per_pair, bool) or not isinstance(self.mined_per_pair, int) or self.mined_per_pair < 1:
            raise ValueError(f"code_doc mined_per_pair={self.mined_per_pair!r}: an integer >= 1 expected")
        if not isinstance(self.miner, str) or not self.miner or "/" in self.miner or self.miner.startswith("."):
            raise ValueError(f"code_doc miner={self.miner!r}: the name of a sidecar VIEWS/negatives/<name>/ "
                             "(`codept mine-negatives` prints it; 'bm25' for --miner bm25)")
        if not 0.0 <= self.mlm_rate <= 1.0:
            raise ValueError(f"mlm_rate={self.mlm_rate} must be in [0, 1]")
        if self.max_tokens < 0:
            raise ValueError(f"code_doc max_tokens={self.max_tokens}: must be >= 0 (0 = one Example per pair)")
        if self.pairs < 0:
            raise ValueError(f"code_doc pairs={self.pairs}: must be >= 0 (0 = every documented definition)")
        if not (self.temperature > 0 and self.temperature_start > 0):
            raise ValueError(f"code_doc temperature={self.temperature}, temperature_start={self.temperature_start}: "
                             "both must be > 0")
        if self.temperature_schedule not in TEMPERATURE_SCHEDULES:
            raise ValueError(f"code_doc temperature_schedule={self.temperature_schedule!r}: expected one of "
                             f"{TEMPERATURE_SCHEDULES}")
        sizes = list(self.matryoshka)
        if any(not isinstance(d, int) or isinstance(d, bool) or d < 1 for d in sizes) or len(set(sizes)) != len(sizes):
            raise ValueError(f"code_doc matryoshka={self.matryoshka!r}: distinct integer sizes >= 1 expected "
                             "(each at most the model's hidden width)")
        for name in ("query_prefix", "code_prefix"):
            if not isinstance(getattr(self, name), str):
                raise ValueError(f"code_doc {name}={getattr(self, name)!r}: must be a string")
        unknown = [k for k in self.kinds if k not in DEFINITION_KINDS]
        if unknown or not self.kinds:
            raise ValueError(f"code_doc kinds {list(self.kinds)}: each must be one of {list(DEFINITION_KINDS)}")


def head_options(cfg: Config) -> dict[str, dict]:
    """The contrastive head's settings from the objective's (codept.train.loop.build_model passes them)."""
    return {"contrastive": {"symmetric": cfg.symmetric, "temperature": cfg.temperature,
                            "temperature_schedule": cfg.temperature_schedule,
                            "temperature_start": cfg.temperature_start, "matryoshka": tuple(cfg.matryoshka),
                            "grad_cache": cfg.grad_cache}}


def prefixes_of(settings: dict) -> tuple[str, str]:
    """(query prefix, code prefix) of a run's recorded flat settings (codept.train.resume.flat:
    ``objective.code_doc.query_prefix`` / ``code_prefix``); "" for a setting not recorded (a run
    without code_doc, or older than the setting). What the probes and the exports apply."""
    return (str(settings.get("objective.code_doc.query_prefix") or ""),
            str(settings.get("objective.code_doc.code_prefix") or ""))


def framed_of(settings: dict) -> bool:
    """Whether a run's code_doc sides were framed (recorded ``objective.code_doc.frame`` =
    "tokenizer"): the probes and the sentence-transformers export then frame each text the same way.
    False for a setting not recorded (a run without code_doc, or older than the setting: bare sides)."""
    return settings.get("objective.code_doc.frame") == "tokenizer"


def candidates(functions: np.ndarray, kind_ids: np.ndarray, allowed: np.ndarray | None = None) -> np.ndarray:
    """Rows of `functions` (F, 7) eligible for a pair: kind allowed, a non-empty doc, and code left
    after the doc's tokens are removed from the definition. ``allowed``: the kind look-up table of
    `kind_ids` (:func:`allowed_kinds`), built once by a caller that asks for every read."""
    f = functions.reshape(-1, 7)
    if not len(f):
        return np.zeros(0, dtype=np.intp)
    allowed = allowed_kinds(kind_ids) if allowed is None else allowed
    if len(f) <= SMALL:  # a few rows: a Python pass beats ~10 NumPy calls of ~1 us each (half the views)
        top = len(allowed) - 1
        return np.array([i for i, (k, s, e, _, _, ds, de) in enumerate(f.tolist())
                         if allowed[min(max(k, 0), top)] and 0 <= ds < de and e - s > max(min(e, de) - max(s, ds), 0)],
                        dtype=np.intp)
    return np.flatnonzero(eligible(f, allowed))


def eligible(f: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """The mask of :func:`candidates` over definition rows `f` (F, 7), of one view or of a corpus."""
    kind, s, e, ds, de = f[:, 0], f[:, 1], f[:, 2], f[:, 5], f[:, 6]
    overlap = np.maximum(np.minimum(e, de) - np.maximum(s, ds), 0)  # np.clip costs more on a few rows
    return allowed[np.minimum(np.maximum(kind, 0), len(allowed) - 1)] & (ds >= 0) & (de > ds) & (e - s > overlap)


def allowed_kinds(kind_ids: np.ndarray) -> np.ndarray:
    """A look-up table over kind ids (np.isin costs more on a few rows): True at `kind_ids`, and one
    False slot past the known kinds that every larger (unknown) id is clamped onto."""
    allowed = np.zeros(len(DEFINITION_KINDS) + 1, dtype=bool)
    allowed[np.asarray(kind_ids, dtype=np.int64)] = True
    return allowed


def code_ranges(row, n_tokens: int, max_code_tokens: int) -> list[tuple[int, int]]:
    """Token ranges [a, b) of the code side of definition `row` (a row of ``functions``: kind, start,
    end, name start, name end, doc start, doc end) in a view of `n_tokens` tokens: the definition
    without its doc's tokens, cut to its first `max_code_tokens` (what ``_code_side`` gathers; the
    miner, codept.probe.mine, scores the same text)."""
    _, s, e, _, _, ds, de = (int(x) for x in row)
    s, e, m = min(s, n_tokens), min(e, n_tokens), max_code_tokens
    a, b = max(ds, s), min(de, e)  # the doc's tokens inside the definition (Python), else empty
    if b <= a:
        return [(s, min(e, s + m))]
    head = min(a - s, m)
    return [(s, s + head), (b, b + min(e - b, m - head))] if head < m else [(s, s + head)]


@dataclass
class _Unit:
    """One pair before it becomes (part of) an Example: its sides (doc, code[, negative doc, negative
    code]), their pair keys, and the MLM labels of those sides (None without MLM)."""

    sides: list
    keys: list
    mlm: list | None

    def __len__(self) -> int:
        return sum(len(x) for x in self.sides)


@dataclass(frozen=True)
class _Index:
    """code_doc.prepare's look-ups over a source's views: view i's candidates are entries
    off[i]:off[i + 1], each with its row, summary range [lo, hi) into ``tok`` (token indices) and
    definition fields (start, end, doc start, doc end)."""

    off: np.ndarray
    rows: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    fields: np.ndarray
    tok: np.ndarray


def _groups(units: list[_Unit], max_tokens: int) -> list[list[_Unit]]:
    """Consecutive units in groups of at most `max_tokens` tokens (a longer unit alone); 0 = one each."""
    out, j = [], 0
    for g in render.group_sizes([len(u) for u in units], max_tokens):
        out.append(units[j: j + g])
        j += g
    return out


def _as_example(group: list[_Unit]) -> Example:
    """One multi-part Example of the group's pairs: every side its own part, its key its scalar."""
    sides = [x for u in group for x in u.sides]
    lens = [len(x) for x in sides]
    n = sum(lens)
    labels = {"mlm": np.concatenate([x for u in group for x in u.mlm])} if group[0].mlm else {}
    return Example(np.concatenate(sides).astype(np.int32, copy=False), np.ones(n, dtype=bool), labels=labels,
                   scalars={"pair": [k for u in group for k in u.keys]},
                   parts=np.repeat(np.arange(len(sides), dtype=np.int32), lens))


def build(vocab: render.Vocab, cfg: Config = Config()):
    kind_ids = np.array([DEFINITION_KINDS.index(k) for k in cfg.kinds], dtype=np.int64)
    allowed = allowed_kinds(kind_ids)
    from_view = cfg.doc == "summary" and cfg.max_doc_tokens <= SUMMARY_CAP  # the view's summaries field serves
    none = np.zeros(0, dtype=np.int32)
    qp = vocab.encode(cfg.query_prefix, "objective.code_doc.query_prefix") if cfg.query_prefix else none
    cp = vocab.encode(cfg.code_prefix, "objective.code_doc.code_prefix") if cfg.code_prefix else none
    head, tail = vocab.framing() if cfg.frame == "tokenizer" else (none, none)
    for name, ids, cap in (("query_prefix", qp, "max_doc_tokens"), ("code_prefix", cp, "max_code_tokens")):
        if len(ids) + len(head) + len(tail) >= getattr(cfg, cap):
            framing = f" (+ {len(head) + len(tail)} of framing)" if len(head) + len(tail) else ""
            raise ValueError(f"code_doc {name}={getattr(cfg, name)!r} is {len(ids)} tokens{framing}, and {cap}="
                             f"{getattr(cfg, cap)} must leave room for text after it")
    extra = len(qp) + len(cp) + len(head) + len(tail)  # prefixes or framing: the per-pair path builds the sides
    fast = from_view and cfg.mlm_rate == 0 and cfg.negatives == "none" and not extra and not _UNIT_PATH  # _fast_examples serves
    sidecars: dict[tuple, list] = {}  # the source's folders -> their MinedNegatives (negatives="mined")

    def mined_of(source) -> list:
        """The sidecars of the folders `source`'s views came from, loaded and checked once."""
        if source.folders not in sidecars:
            if not source.folders:
                raise N.NoNegatives(f"code_doc negatives='mined': source {source.name!r} was not read from a "
                                    "prepared views folder, so there is no sidecar of mined negatives beside it "
                                    "(open the views with codept.views.open_views(FOLDER))")
            sidecars[source.folders] = [N.MinedNegatives(f, cfg.miner) for f in source.folders]
        return sidecars[source.folders]

    def with_prefix(ids: np.ndarray, text: np.ndarray, cap: int, fill: int | None = None) -> np.ndarray:
        """The framing's head, the prefix's ids, the text's first tokens, the framing's tail: at most
        ``cap`` in all (the probe and the sentence-transformers export cut ``prefix + text`` and frame
        it the same way). ``fill``: labels, the head and tail get it (the prefix's come as ``ids``)."""
        h, t = (head, tail) if fill is None else (np.full(len(head), fill), np.full(len(tail), fill))
        if not (len(ids) or len(h) or len(t)):
            return text
        return np.concatenate([h, ids, text[: cap - len(ids) - len(h) - len(t)], t]).astype(text.dtype, copy=False)

    def code_doc(view, rng: np.random.Generator, ctx=None) -> Example | list[Example] | None:
        index = ctx.source.prepared if ctx is not None else None
        if isinstance(index, _Index):  # pairs=1 on the default path, candidates found once (prepare)
            return _indexed_one(view, index, ctx.index, rng)
        funcs = np.asarray(view.functions)
        if fast and cfg.pairs == 1:  # no source index (called without a context): this view's own
            summ = np.asarray(view.summaries)
            return _indexed_one(view, _index(funcs, [funcs.size // 7], summ, [summ.size // 2]), 0, rng)
        cand = candidates(funcs, kind_ids, allowed)
        if len(cand) == 0:
            return None
        if cfg.pairs == 1:
            return _one_pair(view, funcs, cand, rng, ctx)
        order = rng.permutation(cand)
        if fast:
            return _fast_examples(view, funcs, order, rng)
        docs = _doc_sides(view, funcs, order)  # row -> doc side, only rows with one
        rows = [r for r in order.tolist() if r in docs][: cfg.pairs or None]
        if not rows:
            return None
        pids = rng.integers(0, 2**PID_BITS, size=len(rows), dtype=np.int64).tolist()
        units = []
        for row, pid in zip(rows, pids):
            u = _pair(view, funcs, row, docs[row], pid, rng)
            if cfg.negatives == "same_file":
                u = _with_negatives(view, funcs, row, u, docs, rng)
            elif cfg.negatives == "mined":
                u = _with_mined(view, row, u, rng, ctx)
            units.append(u)
        return [_as_example(g) for g in _groups(units, cfg.max_tokens)]

    def _one_pair(view, funcs, cand, rng, ctx) -> Example | None:
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
                u = _pair(view, funcs, row, doc, pid, rng)
                if cfg.negatives == "same_file":
                    u = _with_negatives(view, funcs, row, u, _doc_sides(view, funcs, cand), rng)
                elif cfg.negatives == "mined":
                    u = _with_mined(view, row, u, rng, ctx)
                return _as_example([u])
        return None  # no doc with a word: no pair (the stream drops None)

    def _single(ids: np.ndarray, doc: np.ndarray, definition, pid: int) -> Example:
        """The Example of one pair: the doc side, then the code of `definition` (a functions row)."""
        code = [ids[a:b] for a, b in code_ranges(definition, len(ids), cfg.max_code_tokens)]
        tokens = np.concatenate([doc, *code]).astype(np.int32, copy=False)
        parts = np.ones(len(tokens), dtype=np.int32)
        parts[:len(doc)] = 0
        return Example(tokens, np.ones(len(tokens), dtype=bool), scalars={"pair": [2 * pid, 2 * pid + 1]}, parts=parts)

    def _indexed_one(view, index: "_Index", i: int, rng) -> Example | None:
        """``_one_pair`` on the default path (summaries field, no MLM, no negatives, no prefixes),
        view i's candidates, summary ranges and definition fields read from an index (the source's,
        :func:`prepare`, or the view's own): the same rng draws (pick, pair id, the fallback order
        only if the pick has no summary) and Example (test_code_doc: test_fast_path_is_the_unit_path,
        test_prepared_index_gives_the_same_stream)."""
        a, b = int(index.off[i]), int(index.off[i + 1])
        if b == a:
            return None
        pick = int(rng.integers(b - a))
        pid = int(rng.integers(0, 2**PID_BITS, dtype=np.int64))
        j = a + pick
        if index.hi[j] <= index.lo[j]:  # no summary: the others in random order, the first with one
            rows = index.rows[a:b]
            pos = a + rows.searchsorted(rng.permutation(np.delete(rows, pick)))
            ok = np.flatnonzero(index.hi[pos] > index.lo[pos])
            if not len(ok):
                return None
            j = int(pos[ok[0]])
        lo, hi = int(index.lo[j]), int(index.hi[j])
        ids = np.asarray(view.input_ids)
        s_, e_, ds, de = index.fields[j].tolist()
        return _single(ids, ids[index.tok[lo:min(hi, lo + cfg.max_doc_tokens)]], (0, s_, e_, 0, 0, ds, de), pid)

    def _summary_ranges(view, rows: np.ndarray):
        """The view's summaries (K, 2) (function row, token index; by row) and, per row, the range
        [lo, hi) of its summary tokens, cut to max_doc_tokens (empty: no doc side)."""
        summ = np.asarray(view.summaries).reshape(-1, 2)
        lo = np.searchsorted(summ[:, 0], rows, side="left")
        return summ, lo, np.minimum(np.searchsorted(summ[:, 0], rows, side="right"), lo + cfg.max_doc_tokens)

    def _fast_examples(view, funcs, order: np.ndarray, rng) -> list[Example] | None:
        """The default path (doc sides from the view's summaries field, no MLM, no negatives) without
        per-pair arrays: the same pairs, groups, keys and rng draws as ``_pair`` + ``_as_example``,
        computed as index arithmetic over all pairs of the read, then one gather of every side's
        tokens; each group's Example is slices of it (test_code_doc: test_fast_path_is_the_unit_path)."""
        ids = np.asarray(view.input_ids)
        summ, lo, hi = _summary_ranges(view, order)
        keep = hi > lo  # rows whose doc gives a (non-empty) doc side, in the order drawn
        rows = order[keep][: cfg.pairs or None]
        if not len(rows):
            return None
        pids = rng.integers(0, 2**PID_BITS, size=len(rows), dtype=np.int64).tolist()
        lo, hi = lo[keep][: len(rows)], hi[keep][: len(rows)]
        f = funcs[rows].astype(np.int64).reshape(-1, 7)
        n, m = len(ids), cfg.max_code_tokens
        s, e, ds, de = (np.minimum(f[:, c], n) for c in (1, 2, 5, 6))  # slicing clamps to the view's end
        a, b = np.maximum(ds, s), np.minimum(de, e)  # the doc's tokens inside the definition (Python), else empty
        inside = b > a
        # code side (as _code_side): ids[s:a][:m] then ids[b:e] up to m in all; without a doc inside, ids[s:e][:m]
        head = np.where(inside, np.minimum(a - s, m), np.minimum(e - s, m))
        tail = np.where(inside, np.minimum(e - b, m - head), 0)
        doc = hi - lo
        lens = (doc + head + tail).tolist()
        # pieces in row order (doc, code head, code tail per pair) as ranges of a virtual source: the
        # summaries' token indices (0..K-1), then the view's tokens (K + i)
        k = len(summ)
        p_start = np.stack([lo, k + s, k + b], axis=1).ravel()
        p_len = np.stack([doc, head, tail], axis=1).ravel()
        total = sum(lens)
        v = np.repeat(p_start - (np.cumsum(p_len) - p_len), p_len) + np.arange(total)
        tokens = ids[np.where(v < k, summ[np.minimum(v, k - 1), 1], v - k)].astype(np.int32, copy=False)
        prefix = np.ones(total, dtype=bool)
        side_len = np.stack([doc, head + tail], axis=1).ravel()
        groups = render.group_sizes(lens, cfg.max_tokens)
        first = np.repeat(np.cumsum([0, *groups[:-1]]) * 2, [2 * g for g in groups])  # first side of its group
        parts = np.repeat((np.arange(len(side_len)) - first).astype(np.int32), side_len)
        keys = [x for pid in pids for x in (2 * pid, 2 * pid + 1)]
        out, j, t = [], 0, 0
        for g in groups:
            t1 = t + sum(lens[j: j + g])
            out.append(Example(tokens[t:t1], prefix[t:t1], scalars={"pair": keys[2 * j: 2 * (j + g)]}, parts=parts[t:t1]))
            j, t = j + g, t1
        return out

    def _doc_sides(view, funcs, rows: np.ndarray) -> dict:
        """{row: doc side} for the `rows` whose doc gives one (non-empty), in the order of `rows`."""
        if not from_view:
            return {r: d for r in rows.tolist() if len(d := _doc_side(view, funcs, r))}
        summ, lo, hi = _summary_ranges(view, rows)
        ids = np.asarray(view.input_ids)
        tok = summ[:, 1]
        return {r: ids[tok[a:b]] for r, a, b in zip(rows.tolist(), lo.tolist(), hi.tolist()) if b > a}

    def _doc_side(view, funcs, row: int) -> np.ndarray:
        ids = np.asarray(view.input_ids)
        _, s, e, ns, ne, ds, de = funcs[row].tolist()
        if cfg.doc != "summary":
            return ids[ds:de][: cfg.max_doc_tokens]
        if from_view:
            return _doc_sides(view, funcs, np.array([row])).get(row, ids[:0])
        off = np.asarray(view.offsets).reshape(-1, 2)
        name = view.text[off[ns, 0]: off[ne - 1, 1]].strip() if ne > ns else ""
        # 2x the kept tokens are read: the markers dropped inside a summary never need more
        return ids[summary_tokens(view.text, off, ds, de, name, view.lang, 2 * cfg.max_doc_tokens + 8)][: cfg.max_doc_tokens]

    def _code_side(view, funcs, row: int, name_ids: np.ndarray | None = None) -> np.ndarray:
        """The definition's tokens without its doc's, cut; `name_ids` replace its name's tokens."""
        ids = np.asarray(view.input_ids)
        _, s, e, ns, ne, ds, de = funcs[row].tolist()
        a, b = max(ds, s), min(de, e)  # the doc's tokens inside the definition (Python), else empty
        if name_ids is None:  # the pair's own code side: one or two slices, only the kept tokens read
            parts = code_ranges(funcs[row], len(ids), cfg.max_code_tokens)
            return ids[parts[0][0]:parts[0][1]] if len(parts) == 1 else np.concatenate([ids[x:y] for x, y in parts])
        keep = np.ones(e - s, dtype=bool)
        keep[a - s : max(b - s, 0)] = False
        toks = ids[s:e]
        if s <= ns < ne <= e:
            toks = np.concatenate([toks[: ns - s], name_ids, toks[ne - s:]])
            keep = np.concatenate([keep[: ns - s], np.ones(len(name_ids), bool), keep[ne - s:]])
        return toks[keep][: cfg.max_code_tokens]

    def _pair(view, funcs, row: int, doc: np.ndarray, pid: int, rng) -> _Unit:
        code = _code_side(view, funcs, row)
        doc = with_prefix(qp, doc, cfg.max_doc_tokens)
        mlm = None
        if cfg.mlm_rate > 0:
            chosen = select.random_tokens(vocab.candidates(code), cfg.mlm_rate, rng)
            code, lab = render.bert_80_10_10(code, render.tokens_as_units(chosen), vocab, rng)
            lab = with_prefix(np.full(len(cp), IGNORE, dtype=lab.dtype), lab, cfg.max_code_tokens, IGNORE)  # prefix, frame: no label
            mlm = [np.full(len(doc), IGNORE, dtype=np.int32), lab]
        return _Unit([doc, with_prefix(cp, code, cfg.max_code_tokens)], [2 * pid, 2 * pid + 1], mlm)

    def _with_negatives(view, funcs, row: int, u: _Unit, docs: dict, rng) -> _Unit:
        """`u` plus up to two unmatched parts in its row (fresh pair ids, so the contrastive head
        scores them as candidates of every pair and matches them to none): another definition's doc
        of the same file (a doc-side candidate), and this definition's code with the name of another
        definition of the file (a code-side candidate)."""
        others = [r for r in docs if r != row]
        if not others:
            return u
        other = others[int(rng.integers(len(others)))]
        ids = np.asarray(view.input_ids)
        _, _, _, ns, ne, _, _ = funcs[other].tolist()
        neg_doc = with_prefix(qp, docs[other], cfg.max_doc_tokens)
        neg_code = with_prefix(cp, _code_side(view, funcs, row, ids[ns:ne]), cfg.max_code_tokens)
        mlm = u.mlm and [*u.mlm, np.full(len(neg_doc) + len(neg_code), IGNORE, np.int32)]  # negatives: no MLM labels
        q, r = (int(x) for x in rng.integers(0, 2**PID_BITS, size=2, dtype=np.int64))
        return _Unit([*u.sides, neg_doc, neg_code], [*u.keys, 2 * q, 2 * r + 1], mlm)

    def _with_mined(view, row: int, u: _Unit, rng, ctx) -> _Unit:
        """`u` plus the code sides of up to ``mined_per_pair`` of the definition's mined negatives
        (fresh pair ids, code side keys), tried in a random order; a negative the source does not
        hold (``ctx.find`` None: a held-out or token-only file) or whose definition moved is passed over."""
        if ctx is None:
            raise ValueError("code_doc negatives='mined' reads other documents of its source: call it from a "
                             "stream source (codept.views.view_source)")
        refs = next((r for m in mined_of(ctx.source) if (r := m.of(view.path, row))), [])
        sides = []
        for k in (rng.permutation(len(refs)).tolist() if refs else []):
            if len(sides) == cfg.mined_per_pair:
                break
            path, r, s, e = refs[k]
            j = ctx.find(path)
            if j is None:
                continue
            other = ctx.document(j)
            f = np.asarray(other.functions).reshape(-1, 7)
            if r >= len(f) or int(f[r, 1]) != s or int(f[r, 2]) != e:
                continue
            sides.append(with_prefix(cp, _code_side(other, f, r), cfg.max_code_tokens))
        if not sides:
            return u
        keys = [2 * int(q) + 1 for q in rng.integers(0, 2**PID_BITS, size=len(sides), dtype=np.int64)]
        mlm = u.mlm and [*u.mlm, *(np.full(len(x), IGNORE, np.int32) for x in sides)]  # negatives: no MLM labels
        return _Unit([*u.sides, *sides], [*u.keys, *keys], mlm)

    def bind(source) -> None:
        """negatives="mined": load and check the sidecars beside the source's folders now (a missing
        or stale one is an error before any example is drawn)."""
        if cfg.negatives == "mined":
            mined_of(source)

    def _index(funcs: np.ndarray, counts, entries: np.ndarray | None, per_view) -> "_Index":
        """The look-ups of views whose functions (counts[v] rows each, (F, 7) flat) and summaries
        (per_view[v] entries, (K, 2) flat; None: no summaries field) are concatenated in view order:
        every eligible definition's row, summary range (None without the field) and fields."""
        funcs, counts = funcs.reshape(-1, 7), np.asarray(counts, dtype=np.int64)
        ok = eligible(funcs, allowed)
        owner = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
        local = np.arange(len(funcs), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
        off = np.concatenate([[0], np.cumsum(np.bincount(owner[ok], minlength=len(counts)))])
        lo = hi = tok = None
        if entries is not None:
            entries = entries.reshape(-1, 2)
            key = (owner[ok] << 32) + local[ok]  # (view, row): sorted, as the summaries' (view, row) keys are
            skey = (np.repeat(np.arange(len(per_view), dtype=np.int64), per_view) << 32) + entries[:, 0]
            lo, hi, tok = skey.searchsorted(key, "left"), skey.searchsorted(key, "right"), entries[:, 1].astype(np.int64)
        return _Index(off=off, rows=local[ok], lo=lo, hi=hi, fields=funcs[ok][:, [1, 2, 5, 6]], tok=tok)

    def _corpus_index(views) -> "_Index | None":
        """:func:`_index` over every view of `views` (whole-corpus arrays, no view object); None
        without the functions column. Summaries only for doc="summary" from the view's field."""
        got = views.ragged("functions")
        if got is None:
            return None
        summ = views.ragged("summaries") if from_view else None
        return _index(*got, *(summ if summ is not None else (None, None)))

    def keep(views) -> tuple[np.ndarray | None, str]:
        """Which views can ever give a pair (codept.views.view_source reads only those): one with an
        eligible definition whose doc has a summary (doc="summary" from the view's field), or with an
        eligible definition (the other doc modes, whose empty docs are rare and found per read).
        None (read every view) without the columns, and with mined negatives, whose code sides may
        come from files without any doc."""
        index = _corpus_index(views) if cfg.negatives != "mined" else None
        if index is None:
            return None, ""
        has = np.ones(len(index.rows), dtype=bool) if index.lo is None else index.hi > index.lo
        c = np.concatenate([[0], np.cumsum(has)])
        return c[index.off[1:]] > c[index.off[:-1]], "no_documented_definition"

    def prepare(views) -> "_Index | None":
        """The single-pair default path's look-ups for every served view (:func:`_index`). None on
        the other paths, or without the columns. Cost: one pass of NumPy over the functions and
        summaries columns; memory ~40 bytes per candidate plus 8 per summary token."""
        index = _corpus_index(views) if fast and cfg.pairs == 1 else None
        return index if index is not None and index.lo is not None else None

    code_doc.bind = bind
    code_doc.keep = keep
    code_doc.prepare = prepare
    return code_doc


# its optional MLM on the code side (mlm_rate > 0) also feeds "mlm" when that head is built for another objective
OBJECTIVE = Objective("code_doc", build, Config, heads=("contrastive",), views=("code",), head_options=head_options,
                      structure=True)
