"""``codept probe build``: code-search probe pairs (query, code) from any corpus, decontaminated.

A pair is one documented function or method: the query is the first sentence of its doc, cleaned
per language; the code (the candidate a model must retrieve) is the definition with that doc cut
out, name and signature kept. Works on the views of ``codept prepare`` (the ``functions`` rows of
a view: kind, definition, name and doc token ranges), so it covers every language with a grammar;
the only per-language code is the query cleaning (codept.probe.query: comment syntax and doc-markup
conventions).

1. Inputs -> views: ``prepare(SRC...)`` (cached by content); only the ``path``, ``lang``, ``text``,
   ``offsets`` and ``functions`` columns are read (:func:`iter_doc_views`: codept.views.open_views
   with ``columns=``, no Python lists of token ids).
2. Every function/method (classes are not pairs) -> a candidate pair, filters counted per language:
   ``other_lang`` (``--lang``), ``no_doc``, ``short_query`` (fewer than ``min_query_words`` words
   after cleaning, "" included), ``short_body`` (fewer than ``min_body_lines`` non-blank lines once
   the doc is removed), then ``duplicate_query``: every pair whose normalised query occurs more than
   once in its language is dropped (the query cannot tell them apart: overloads, copied docs), and
   ``duplicate_code``: every remaining pair whose normalised code (as for decontamination) occurs more
   than once (identical getters, copied helpers: a pool must not hold two identical candidates).
3. Decontamination (:class:`Contamination`) against training views. Each ``--exclude`` is a prepared
   folder (with its DONE marker; used as it is, whatever its cache key), ``stdlib`` (this
   interpreter's standard library, as ``prepare([])``) or any source ``prepare`` reads (prepared
   first, cached). A pair goes if its normalised query is the cleaned first sentence of any
   documented definition there (``query_in_training``) or its normalised body (doc removed, all
   whitespace removed, so re-indented copies match) is that of any training function
   (``body_in_training``); a pair may count in both. Both are 8-byte blake2b hashes in sorted NumPy
   arrays: 16 bytes per training function. probe.json also says how many pairs each exclude hits.
4. Output: ``save_pairs`` -> ``pairs.jsonl`` sorted by (lang, path, start) + ``probe.json`` (meta:
   sources, prepare counts and skipped inputs, per-language counts of every filter, decontamination).

Doc positions (from ``grammars/<lang>/tags.scm``): a Python docstring is the first statement of the
body (inside the definition: cut out with its line); Java/JS/PHP ``/** */``, Go ``//`` runs and
Ruby ``#`` runs precede the definition (the candidate is then just the definition range).
Query cleaning (comment syntax, doc markup, first sentence, the function's own name dropped) is
codept.probe.query (``clean_query``, ``normalize_query``).

Cost: prepare (cached) + one pass over the needed columns (~3 s for 15k files); per definition ~60 us
for the candidate and ~180 us per doc for cleaning (measured on 2 busy cores): a training corpus of
250k definitions (OpenJDK 17, 200 MB) is read for decontamination in ~1 min. Memory: the pairs, plus
16 bytes per definition of the training data (~1 GB peak RSS for OpenJDK, mostly the mapped Arrow).
Not covered: renamed or semantically equal copies (decontamination is exact after whitespace
removal), near-duplicate queries ("Return the x" and "Returns the x" differ), doc comments that
tags.scm does not attach (a blank line between doc and definition), functions defined in call
arguments (``factory(..., () => {})``: not tagged), test functions are kept (filter by name if a
probe must exclude them), languages whose docs follow other conventions than codept.probe.query
knows (they get the generic cleaning).
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from codept.argtypes import int_at_least, out_folder, tokenizer_path
from codept.probe import Pair, save_pairs
from codept.probe.query import clean_query, normalize_query
from codept.structure.kinds import DEFINITION_KINDS
from codept.views import open_views

PAIR_KINDS = frozenset(i for i, k in enumerate(DEFINITION_KINDS) if k in ("function", "method"))
VIEW_COLUMNS = ["path", "lang", "text", "offsets", "functions"]
FILTERS = ("other_lang", "no_doc", "short_query", "short_body", "duplicate_query", "duplicate_code")
MAX_SKIPS_IN_META = 1000  # skipped inputs listed in probe.json (all are in the prepare manifest)


# -- candidates ----------------------------------------------------------------------------------


def iter_doc_views(dataset) -> Iterator:
    """The CodeViews of a prepared views dataset (``load_views``), reading only the columns pairs need."""
    return iter(open_views(dataset, kind="code", columns=VIEW_COLUMNS))


def _views(views) -> Iterable:
    """Views as given, or those of a datasets.Dataset (:func:`iter_doc_views`)."""
    return iter_doc_views(views) if hasattr(views, "column_names") else views


def _stripped_range(text: str, s: int, e: int) -> tuple[int, int]:
    """Char range [s, e) without its leading/trailing whitespace (BPE tokens carry the space before)."""
    while s < e and text[s].isspace():
        s += 1
    while e > s and text[e - 1].isspace():
        e -= 1
    return s, e


def _def_range(view, row) -> tuple[int, int]:
    return _stripped_range(view.text, *view.char_range(int(row[1]), int(row[2])))


def _parts_without_doc(view, row) -> list[tuple[int, int]]:
    """Char ranges of the definition `row` of `view` that remain once its doc is cut out."""
    text = view.text
    cs, ce = _def_range(view, row)
    if row[5] < 0:
        return [(cs, ce)]
    ds, de = _stripped_range(text, *view.char_range(int(row[5]), int(row[6])))
    if not (cs <= ds and de <= ce):  # a doc before the definition: not in its range
        return [(cs, ce)]
    ls = max(text.rfind("\n", cs, ds) + 1, cs)
    le = text.find("\n", de, ce)
    le = ce if le < 0 else le
    if not text[ls:ds].strip() and text[de:le].strip() in ("", ";"):  # alone on its line(s): cut the lines
        return [(cs, ls), (min(le + 1, ce), ce)]
    m = re.match(r"[ \t]*;?[ \t]*", text[de:le])  # shares a line with code: cut it and a following `;`
    return [(cs, ds), (de + m.end(), ce)]


def code_without_doc(view, row) -> str:
    """The definition `row` (a row of ``view.functions``) of `view` with its doc removed, dedented.

    A doc inside the definition (Python's docstring statement) is cut out with its line (or, when it
    shares the line with other code, with a following ``;``); a doc before the definition (comments)
    is simply not in the definition's range. Name and signature are kept (Python decorators are
    outside the definition node, Java annotations and modifiers inside)."""
    text = view.text
    parts = _parts_without_doc(view, row)
    cs = parts[0][0]
    # indent the first line as it stands in the file (columns before the definition become
    # spaces, tabs stay tabs) so that dedent removes the common indentation of all lines
    line_start = text.rfind("\n", 0, cs) + 1
    lead = "".join(c if c == "\t" else " " for c in text[line_start:cs])
    code = lead + "".join(text[a:b] for a, b in parts)
    return textwrap.dedent(code).strip("\n").rstrip()


def _body_lines(code: str) -> int:
    return sum(1 for line in code.split("\n") if line.strip())


# -- pairs ---------------------------------------------------------------------------------------


def _pairs_per_lang(views, *, min_query_words: int = 3, min_body_lines: int = 3,
                    langs: Iterable[str] | None = None) -> tuple[list[Pair], dict[str, Counter]]:
    langs = set(langs) if langs else None
    counts: dict[str, Counter] = {}
    pairs: list[Pair] = []
    for view in _views(views):
        c = counts.setdefault(view.lang, Counter())
        fns = view.functions
        fns = fns[np.isin(fns[:, 0], list(PAIR_KINDS))]
        documented = fns[fns[:, 5] >= 0]
        if langs is not None and view.lang not in langs:
            c["other_lang"] += len(documented)
            continue
        c["functions"] += len(fns)
        c["documented"] += len(documented)
        c["no_doc"] += len(fns) - len(documented)
        for row in documented:
            name = view.token_text(int(row[3]), int(row[4])).strip()
            query = clean_query(view.token_text(int(row[5]), int(row[6])), view.lang, name)
            if len(query.split()) < min_query_words:
                c["short_query"] += 1
                continue
            code = code_without_doc(view, row)
            if _body_lines(code) < min_body_lines:
                c["short_body"] += 1
                continue
            pairs.append(Pair(lang=view.lang, path=view.path, name=name, query=query, code=code,
                              start=_def_range(view, row)[0]))
    # ambiguous: every pair whose (lang, query) occurs more than once goes, then every remaining
    # pair whose (lang, code) does (getters, copies: the pool would hold identical candidates)
    kept = pairs
    keys = (("duplicate_query", lambda p: normalize_query(p.query)), ("duplicate_code", lambda p: body_key(p.code)))
    for reason, key in keys:
        n = Counter((p.lang, key(p)) for p in kept)
        rest = []
        for p in kept:
            if n[(p.lang, key(p))] > 1:
                counts[p.lang][reason] += 1
            else:
                rest.append(p)
        kept = rest
    kept.sort(key=lambda p: (p.lang, p.path, p.start))
    for p in kept:
        counts[p.lang]["pairs"] += 1
    return kept, counts


def _total(per_lang: dict[str, Counter]) -> Counter:
    total: Counter = Counter()
    for c in per_lang.values():
        total.update(c)
    return total


def pairs_from_views(views, *, min_query_words: int = 3, min_body_lines: int = 3,
                     langs: Iterable[str] | None = None) -> tuple[list[Pair], Counter]:
    """Pairs of every documented function/method of `views` (CodeViews or a prepared
    views dataset), sorted by (lang, path, start), and the counts: ``functions``, ``documented``,
    ``pairs`` and one per filter (``other_lang``, ``no_doc``, ``short_query``, ``short_body``,
    ``duplicate_query``, ``duplicate_code``)."""
    pairs, per_lang = _pairs_per_lang(views, min_query_words=min_query_words, min_body_lines=min_body_lines,
                                      langs=langs)
    return pairs, _total(per_lang)


# -- decontamination -----------------------------------------------------------------------------


def _hash(s: str) -> int:
    return int.from_bytes(hashlib.blake2b(s.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little")


def body_key(code: str) -> int:
    """8-byte hash of a definition's text with all whitespace removed."""
    return _hash(re.sub(r"\s+", "", code))


def query_key(query: str) -> int | None:
    q = normalize_query(query)
    return _hash(q) if q else None


class Contamination:
    """What training data contains: hashes of normalised queries and of normalised bodies.

    ``add_view`` takes every definition of a view: the cleaned first sentence of each documented one
    (functions, methods and classes) and the body of each function/method. Sorted unique uint64
    arrays after ``freeze`` (done on first use): 8 bytes per distinct query/body."""

    def __init__(self) -> None:
        self._q: list[int] = []
        self._b: list[int] = []
        self.queries = np.zeros(0, np.uint64)
        self.bodies = np.zeros(0, np.uint64)
        self.views = 0

    def add_view(self, view) -> None:
        self.views += 1
        for row in view.functions:
            if row[5] >= 0:
                name = view.token_text(int(row[3]), int(row[4]))
                k = query_key(clean_query(view.token_text(int(row[5]), int(row[6])), view.lang, name))
                if k is not None:
                    self._q.append(k)
            if int(row[0]) in PAIR_KINDS:  # = body_key(code_without_doc(view, row)), without the dedent
                self._b.append(body_key("".join(view.text[a:b] for a, b in _parts_without_doc(view, row))))
        if len(self._q) + len(self._b) > 1_000_000:
            self.freeze()

    def freeze(self) -> "Contamination":
        if self._q or self._b:
            self.queries = np.union1d(self.queries, np.array(self._q, dtype=np.uint64))
            self.bodies = np.union1d(self.bodies, np.array(self._b, dtype=np.uint64))
            self._q, self._b = [], []
        return self

    @classmethod
    def from_views(cls, views) -> "Contamination":
        """From CodeViews or a prepared views dataset."""
        c = cls()
        for v in _views(views):
            c.add_view(v)
        return c.freeze()

    def update(self, other: "Contamination") -> "Contamination":
        self.freeze(), other.freeze()
        self.queries = np.union1d(self.queries, other.queries)
        self.bodies = np.union1d(self.bodies, other.bodies)
        self.views += other.views
        return self

    @staticmethod
    def _has(arr: np.ndarray, key: int | None) -> bool:
        if key is None or not len(arr):
            return False
        i = int(np.searchsorted(arr, np.uint64(key)))
        return i < len(arr) and int(arr[i]) == key

    def has_query(self, query: str) -> bool:
        self.freeze()
        return self._has(self.queries, query_key(query))

    def has_body(self, code: str) -> bool:
        self.freeze()
        return self._has(self.bodies, body_key(code))

    def summary(self) -> dict:
        self.freeze()
        return {"views": self.views, "queries": int(len(self.queries)), "bodies": int(len(self.bodies))}


def _decontaminate_per_lang(pairs: list[Pair], contamination: Contamination) -> tuple[list[Pair], dict[str, Counter]]:
    kept, counts = [], {}
    for p in pairs:
        c = counts.setdefault(p.lang, Counter())
        q, b = contamination.has_query(p.query), contamination.has_body(p.code)
        c["query_in_training"] += q
        c["body_in_training"] += b
        if q or b:
            c["dropped"] += 1
        else:
            kept.append(p)
    return kept, counts


def decontaminate(pairs: list[Pair], contamination: Contamination) -> tuple[list[Pair], Counter]:
    """Pairs whose query and body are both absent from the training data, and the counts
    ``query_in_training``, ``body_in_training`` (a pair may count in both) and ``dropped``."""
    kept, per_lang = _decontaminate_per_lang(pairs, contamination)
    total = _total(per_lang)
    for k in ("query_in_training", "body_in_training", "dropped"):
        total.setdefault(k, 0)
    return kept, total


# -- the job -------------------------------------------------------------------------------------

STDLIB = "stdlib"  # --exclude stdlib: the running interpreter's standard library, as `prepare([])`


def _prepare(sources: list[str], progress: bool, **kw) -> dict:
    from codept.prepare import prepare

    return prepare(list(sources), progress=progress, **kw)


def exclusion_views(src: str, progress: bool = True, **kw):
    """(views dataset, description) of one ``--exclude``: a prepared folder (with DONE), ``stdlib``,
    or any source ``codept prepare`` reads (prepared here first, cached)."""
    from codept.prepare import load_views

    p = Path(src)
    if (p / "DONE").is_file():
        return load_views(p), {"source": src, "out": str(p)}
    if src == STDLIB and not p.exists():
        s = _prepare([], progress, **kw)
    else:
        s = _prepare([src], progress, **kw)
    return load_views(s["out"]), {"source": src, "out": s["out"], "inputs": s["inputs"], "viewed": s["viewed"]}


def _skips(out: str | Path) -> list[dict]:
    rows = []
    path = Path(out) / "manifest.jsonl"
    if path.is_file():
        with open(path) as f:
            for line in f:
                r = json.loads(line)
                if r.get("status") != "viewed":
                    rows.append({k: r.get(k) for k in ("origin", "reason", "detail")})
    return rows



def _decontaminated(pairs: list[Pair], per_lang: dict[str, Counter], contamination: Contamination,
                    excluded: list[dict]) -> tuple[list[Pair], dict]:
    """Decontaminate `pairs`, fold the counts into `per_lang`; the counting part of probe.json."""
    before = len(pairs)
    pairs, decon = _decontaminate_per_lang(pairs, contamination)
    for lang, c in decon.items():
        per_lang[lang].update(c)
        per_lang[lang]["pairs"] -= c["dropped"]
    total = _total(per_lang)
    return pairs, {
        "pairs": len(pairs),
        "per_lang": {lang: {k: int(v) for k, v in sorted(c.items())} for lang, c in sorted(per_lang.items())},
        "filters": {k: int(total[k]) for k in FILTERS},
        "decontamination": {
            "exclude": excluded,
            "pairs_before": before,
            "query_in_training": int(total["query_in_training"]),
            "body_in_training": int(total["body_in_training"]),
            "dropped": int(total["dropped"]),
        },
    }


def build_probe(sources: list[str], out: str | Path, *, exclude: Iterable[str] = (), langs: Iterable[str] | None = None,
                min_query_words: int = 3, min_body_lines: int = 3, progress: bool = True,
                tokenizer_dir: str | Path | None = None, cfg=None) -> dict:
    """Prepare `sources`, make pairs, decontaminate them against every `exclude`, write the probe
    folder `out`; returns the meta written to ``probe.json``. `tokenizer_dir`, `cfg`: passed to
    ``prepare`` (they only decide which cache folder is used; pairs do not depend on tokens)."""
    from codept.prepare import load_views

    t0 = time.time()
    kw = {k: v for k, v in (("tokenizer_dir", tokenizer_dir), ("cfg", cfg)) if v is not None}
    langs = sorted(set(langs)) if langs else None
    summary = _prepare([str(s) for s in sources], progress, **kw)
    pairs, per_lang = _pairs_per_lang(load_views(summary["out"]), min_query_words=min_query_words,
                                      min_body_lines=min_body_lines, langs=langs)
    contamination = Contamination()
    excluded = []
    for src in exclude:
        ds, desc = exclusion_views(str(src), progress, **kw)
        c = Contamination.from_views(ds)
        hits = Counter((c.has_query(p.query), c.has_body(p.code)) for p in pairs)
        excluded.append({**desc, **c.summary(), "query_hits": sum(n for (q, _), n in hits.items() if q),
                         "body_hits": sum(n for (_, b), n in hits.items() if b)})
        contamination.update(c)
    pairs, meta = _decontaminated(pairs, per_lang, contamination, excluded)
    skips = _skips(summary["out"])
    meta = {
        "sources": [str(s) for s in sources],
        "langs": langs,
        "settings": {"min_query_words": min_query_words, "min_body_lines": min_body_lines},
        "prepare": {"out": summary["out"], "cache_key": summary.get("cache_key"), "inputs": summary["inputs"],
                    "viewed": summary["viewed"], "skipped": summary.get("skipped", {})},
        "skipped_inputs": skips[:MAX_SKIPS_IN_META],
        "skipped_inputs_total": len(skips),
        **meta,
        "seconds": round(time.time() - t0, 2),
    }
    save_pairs(pairs, out, meta)
    return meta


def format_meta(meta: dict) -> str:
    lines = [f"codept probe build: {meta['pairs']} pairs from {meta['prepare']['viewed']}/{meta['prepare']['inputs']} "
             f"inputs in {meta['seconds']}s"]
    for ex in meta["decontamination"]["exclude"]:
        hits = f"; shares {ex['query_hits']} queries, {ex['body_hits']} bodies" if "query_hits" in ex else ""
        lines.append(f"  exclude {ex['source']}: {ex['views']} files, {ex['queries']:,} queries, "
                     f"{ex['bodies']:,} bodies{hits}")
    for lang, c in meta["per_lang"].items():
        drops = ", ".join(f"{k} {c[k]}" for k in (*FILTERS, "query_in_training", "body_in_training") if c.get(k))
        lines.append(f"  {lang}: {c.get('documented', 0)} documented of {c.get('functions', 0)} functions, "
                     f"{c.get('pairs', 0)} pairs kept; dropped: {drops or 'none'}")
    skipped = meta["prepare"]["skipped"]
    if skipped:
        lines.append("  skipped inputs: " + ", ".join(f"{k} {v}" for k, v in skipped.items()))
    return "\n".join(lines)


def add_arguments(parser) -> None:
    parser.add_argument("sources", nargs="+", help="files, directories, globs, jsonl/parquet, saved HF datasets "
                        "(anything `codept prepare` reads)")
    parser.add_argument("--out", required=True, type=out_folder, help="probe folder (pairs.jsonl, probe.json)")
    parser.add_argument("--exclude", nargs="+", action="extend", default=[], metavar="SRC",
                        help="training data to decontaminate against: a prepared folder, `stdlib`, or any source")
    parser.add_argument("--lang", nargs="+", action="extend", dest="langs", metavar="L",
                        help="only these languages (default: all)")
    parser.add_argument("--min-query-words", type=int_at_least(0), default=3,
                        help="drop pairs whose query (the docstring summary) has fewer words (default 3)")
    parser.add_argument("--min-body-lines", type=int_at_least(0), default=3,
                        help="non-blank lines of code, doc removed")
    parser.add_argument("--tokenizer", type=tokenizer_path, help="tokenizer of the prepare cache to use (default: the default)")


def main(args) -> int:
    meta = build_probe(args.sources, args.out, exclude=args.exclude, langs=args.langs,
                       min_query_words=args.min_query_words, min_body_lines=args.min_body_lines,
                       tokenizer_dir=args.tokenizer, progress=sys.stderr.isatty())
    print(format_meta(meta))
    print(f"  -> {args.out}")
    return 0
