"""``codept mine-negatives VIEWS --miner bm25|MODEL``: hard negatives for ``code_doc``, mined once per
prepared corpus and filtered for false negatives, stored beside the views (codept.data.negatives).

1. Queries and documents, the sides code_doc trains with: a query is a definition code_doc would
   pair (codept.objectives.code_doc.candidates: functions and methods with a doc, code left once the
   doc is cut) whose doc gives a summary, its text the summary tokens the view holds (the
   ``summaries`` field, cut to ``max_doc_tokens``); a document is every definition of those kinds
   with code (documented or not), its text the code side (definition without the doc, cut to
   ``max_code_tokens``: codept.objectives.code_doc.code_ranges). Per language: a query's candidates
   are the documents of its language, its own code (the positive) among them.
2. Scores: the probe's scorers (codept.probe.run.build_scorer: ``bm25``, BM25 over identifier-split
   words, IDF of the language's documents; a transformers folder or a codept run: cosine of mean-pooled
   L2-normalised embeddings; ``bm25+MODEL``: the probe's hybrid), one (queries x documents) block of
   ``block`` queries at a time.
3. Per query: the ``range_max`` best-scored documents other than the positive (ties: the earlier
   document), each put in ONE bucket, first rule that holds:
     duplicate_code   its code equals the positive's once all whitespace is removed (codept.probe.build.body_key)
     same_signature   same name and same first line (the signature, normalised) as the positive
     margin           scored within the margin of the positive: s > p - relative_margin * |p|
                      (NV-Retriever's TopK-PercPos: 0.05 = drop above 95 % of the positive) or, with
                      ``margin``, s > p - margin (sentence-transformers' absolute_margin)
     below_min_score  s <= min_score (BM25 0 = not one shared word: no hard negative)
     kept             the first ``k`` left, best first
     beyond_k         the rest
   so every candidate considered is accounted for (summary.json: per language and in all). The
   summary also gives the miner's own MRR of the positive over the whole language (ties pessimistic)
   and the queries left without a negative.
4. Output: ``VIEWS/negatives/<name>/`` (name = ``bm25``, or the model folder's slug, or ``--name``),
   keyed by the views' content key (DONE) + the miner (its description and its files' sizes and
   times) + the settings: an equal request is served as it is, a changed one mined again; code_doc
   refuses a sidecar whose views key is not the folder's.
Cost: BM25 ~ one index per language + one sparse look-up per query (stdlib, 7.2 k queries x 17 k
documents: measured in docs/search.md); a dense teacher = one forward per query and document plus a
matmul; memory one (block x documents) float64 score block. Not covered: cross-language negatives
(each language alone), negatives between several prepared folders (each folder is mined alone),
candidates beyond ``range_max``, a teacher that is a cross-encoder (only bi-encoders / BM25).
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from codept.argtypes import int_at_least
from codept.data import negatives as N
from codept.objectives.code_doc import candidates, code_ranges
from codept.structure.kinds import DEFINITION_KINDS

BUCKETS = ("kept", "duplicate_code", "same_signature", "margin", "below_min_score", "beyond_k")
COLUMNS = ["path", "lang", "text", "offsets", "functions", "summaries"]


@dataclass(frozen=True)
class MineConfig:
    k: int = 8  # negatives kept per query
    range_max: int = 50  # best-scored candidates considered per query (the positive excluded)
    relative_margin: float = 0.05  # drop s > p - relative_margin * |p| (NV-Retriever TopK-PercPos 0.95)
    margin: float | None = None  # also drop s > p - margin (absolute); None = off
    min_score: float = 0.0  # drop s <= min_score
    max_doc_tokens: int = 32  # the query: the summary's first tokens (code_doc's default cut)
    max_code_tokens: int = 128  # a document: the code side's first tokens (code_doc's default cut)
    kinds: tuple[str, ...] = ("function", "method")
    block: int = 256  # queries scored at a time

    def __post_init__(self):
        for name in ("k", "range_max", "max_doc_tokens", "max_code_tokens", "block"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"mine-negatives {name}={v!r}: an integer >= 1 expected")
        if self.range_max < self.k:
            raise ValueError(f"mine-negatives range_max={self.range_max} < k={self.k}: at least k candidates "
                             "must be considered")
        if not 0.0 <= self.relative_margin < 1.0:
            raise ValueError(f"mine-negatives relative_margin={self.relative_margin}: must be in [0, 1) "
                             "(0.05 drops candidates above 95% of the positive's score)")
        if self.margin is not None and not self.margin >= 0:
            raise ValueError(f"mine-negatives margin={self.margin}: must be >= 0 (or None: off)")
        bad = [x for x in self.kinds if x not in DEFINITION_KINDS]
        if bad or not self.kinds:
            raise ValueError(f"mine-negatives kinds {list(self.kinds)}: each must be one of {list(DEFINITION_KINDS)}")


# -- queries and documents -----------------------------------------------------------------------


def _norm_line(code: str) -> str:
    """The first non-blank line, whitespace collapsed: the signature stand-in."""
    for line in code.split("\n"):
        if line.strip():
            return " ".join(line.split())
    return ""


@dataclass
class Corpus:
    """One language's documents (code sides) and queries (summaries) of a views folder."""

    lang: str
    doc_view: list  # per document: index of its view (into paths)
    doc_row: list  # its row of view.functions
    doc_span: list  # (start, end) definition tokens
    doc_text: list
    doc_body: list  # body_key of the code text
    doc_sig: list  # (name, first line)
    q_doc: list  # per query: its own document (the positive)
    q_text: list


def corpora(views, cfg: MineConfig) -> tuple[list[str], dict[str, Corpus], Counter]:
    """(view paths, language -> Corpus, counts of definitions seen / queries / documents / skips)."""
    from codept.probe.build import body_key

    kind_ids = np.array([DEFINITION_KINDS.index(k) for k in cfg.kinds], dtype=np.int64)
    allowed = np.zeros(len(DEFINITION_KINDS), dtype=bool)
    allowed[kind_ids] = True
    paths, out, c = [], {}, Counter()
    for vi, v in enumerate(views):
        paths.append(v.path)
        funcs = np.asarray(v.functions).reshape(-1, 7)
        if not len(funcs):
            continue
        cp = out.setdefault(v.lang, Corpus(v.lang, [], [], [], [], [], [], [], []))
        n_tok = len(v.offsets)
        summ = np.asarray(v.summaries).reshape(-1, 2)
        queries = set(candidates(funcs, kind_ids).tolist())
        off = np.asarray(v.offsets).reshape(-1, 2)
        for r, f in enumerate(funcs.tolist()):
            if not (0 <= f[0] < len(allowed) and allowed[f[0]]):
                continue
            c["definitions"] += 1
            ranges = code_ranges(f, n_tok, cfg.max_code_tokens)
            if not sum(b - a for a, b in ranges):
                c["no_code"] += 1
                continue
            code = "".join(v.token_text(a, b) for a, b in ranges)
            d = len(cp.doc_view)
            cp.doc_view.append(vi)
            cp.doc_row.append(r)
            cp.doc_span.append((f[1], f[2]))
            cp.doc_text.append(code)
            cp.doc_body.append(body_key(code))
            cp.doc_sig.append((v.token_text(f[3], f[4]).strip(), _norm_line(code)))
            if r not in queries:
                continue
            lo, hi = np.searchsorted(summ[:, 0], [r, r + 1]) if len(summ) else (0, 0)
            toks = summ[lo:min(hi, lo + cfg.max_doc_tokens), 1]
            query = "".join(v.text[off[t, 0]:off[t, 1]] for t in toks.tolist()).strip()
            if not query:
                c["no_summary"] += 1
                continue
            cp.q_doc.append(d)
            cp.q_text.append(query)
    out = {k: v for k, v in sorted(out.items()) if v.doc_view}
    c["documents"] = sum(len(x.doc_view) for x in out.values())
    c["queries"] = sum(len(x.q_doc) for x in out.values())
    return paths, out, c


# -- filtering -----------------------------------------------------------------------------------


def filter_block(scores: np.ndarray, pos: np.ndarray, body: np.ndarray, sig: np.ndarray, cfg: MineConfig):
    """Candidates of a block of queries: ``scores`` (B, D) over the language's documents, ``pos`` (B,)
    each query's own document, ``body`` / ``sig`` (D,) int keys (equal = same code / same signature).
    Returns (top (B, R) document indices best first, their scores (B, R), bucket (B, R) indices into
    BUCKETS, positive scores (B,), positive ranks (B,) among all D, ties pessimistic)."""
    s = np.asarray(scores, dtype=np.float64)
    b, d = s.shape
    rows = np.arange(b)
    ps = s[rows, pos]
    others = s.copy()
    others[rows, pos] = -np.inf
    rank = 1 + (others >= ps[:, None]).sum(axis=1)  # pessimistic: a tie ranks above the positive
    r = min(cfg.range_max, d - 1)
    if r <= 0:
        z = np.zeros((b, 0), np.int64)
        return z, z.astype(np.float64), z, ps, rank
    part = np.argpartition(-others, r - 1, axis=1)[:, :r]
    psc = np.take_along_axis(others, part, axis=1)
    order = np.lexsort((part, -psc), axis=-1)  # best first, ties to the earlier document
    top, sc = np.take_along_axis(part, order, axis=1), np.take_along_axis(psc, order, axis=1)
    dup = body[top] == body[pos][:, None]
    same = (sig[top] == sig[pos][:, None]) & ~dup
    thr = ps - cfg.relative_margin * np.abs(ps)
    if cfg.margin is not None:
        thr = np.minimum(thr, ps - cfg.margin)
    rest = ~dup & ~same
    close = rest & (sc > thr[:, None])
    low = rest & ~close & (sc <= cfg.min_score)
    ok = rest & ~close & ~low
    kept = ok & (np.cumsum(ok, axis=1) <= cfg.k)
    bucket = np.select([kept, dup, same, close, low], [0, 1, 2, 3, 4], default=5)
    return top, sc, bucket, ps, rank


def _ids(keys: list) -> np.ndarray:
    """Equal keys -> equal small ints."""
    seen: dict = {}
    return np.array([seen.setdefault(x, len(seen)) for x in keys], dtype=np.int64)


# -- the job -------------------------------------------------------------------------------------


def _miner_fingerprint(spec: str) -> list:
    """Sizes and times of the miner's files (a model folder; its parts for bm25+MODEL): a retrained
    teacher at the same path is a new miner."""
    out = []
    for part in spec.split("+"):
        p = Path(part)
        if p.is_dir():
            out += [[f.name, f.stat().st_size, f.stat().st_mtime_ns] for f in sorted(p.iterdir()) if f.is_file()]
    return out


def mine(views_dir: str | Path, miner: str = "bm25", cfg: MineConfig = MineConfig(), name: str | None = None,
         force: bool = False, device: str | None = None, batch_size: int = 64, progress: bool = False) -> dict:
    """Mine the sidecar of `views_dir` (module docstring); returns its summary (``cached`` True when an
    equal sidecar was already there)."""
    from codept.probe.run import build_scorer, model_kind
    from codept.views import open_views

    views_dir = Path(views_dir)
    key_now = N.views_key(views_dir)  # NoNegatives: not a complete views folder
    if miner.startswith("random"):
        raise ValueError(f"--miner {miner!r}: a random encoder mines no hard negatives; give bm25, a "
                         "transformers folder, a codept run or bm25+MODEL")
    model_kind(miner)  # ValueError naming the value for anything else
    scorer = build_scorer(miner, device=device, batch_size=batch_size, max_len=max(256, cfg.max_code_tokens),
                          query_max_len=64)
    name = name or scorer.slug
    settings = {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(cfg).items() if k != "block"}
    key = hashlib.sha256(json.dumps([key_now, miner, scorer.desc, _miner_fingerprint(miner), settings],
                                    sort_keys=True, default=str).encode()).hexdigest()[:20]
    if not force and N.complete(views_dir, name, key):
        return {**N.read_summary(views_dir, name), "cached": True}
    t0 = time.time()
    views = open_views(views_dir, kind="code", columns=COLUMNS)
    paths, by_lang, counts = corpora(views, cfg)
    uniq = sorted(set(paths))
    pid_of = {p: i for i, p in enumerate(uniq)}
    path_id = [pid_of[p] for p in paths]  # view index -> index into the sidecar's sorted paths
    rows = []  # per query: (path id, row, pos score, [(path id, row, s, e, score)])
    per_lang: dict[str, Counter] = {}
    rr_all = []
    t_score = 0.0
    for lang, cp in by_lang.items():
        lc = per_lang.setdefault(lang, Counter(queries=len(cp.q_doc), documents=len(cp.doc_view)))
        if not cp.q_doc:
            continue
        t1 = time.time()
        fn = scorer.prepare(cp.q_text, cp.doc_text)
        body, sig = _ids(cp.doc_body), _ids(cp.doc_sig)
        all_docs = np.arange(len(cp.doc_view))
        q_doc = np.asarray(cp.q_doc, dtype=np.int64)
        rr = []
        for q0 in range(0, len(q_doc), cfg.block):
            qi = np.arange(q0, min(q0 + cfg.block, len(q_doc)))
            top, sc, bucket, ps, rank = filter_block(fn(qi, all_docs), q_doc[qi], body, sig, cfg)
            rr.append(1.0 / rank)
            lc["considered"] += top.size
            for j, b in enumerate(BUCKETS):
                lc[b] += int((bucket == j).sum())
            lc["positive_top1"] += int((rank == 1).sum())
            for x, d in enumerate(q_doc[qi].tolist()):
                kept = [(path_id[cp.doc_view[t]], cp.doc_row[t], *cp.doc_span[t], score)
                        for t, score, bk in zip(top[x].tolist(), sc[x].tolist(), bucket[x].tolist()) if bk == 0]
                lc["no_negative"] += not kept
                rows.append((path_id[cp.doc_view[d]], cp.doc_row[d], float(ps[x]), kept))
        lc["mrr"] = round(float(np.concatenate(rr).mean()), 4)
        rr_all += rr
        t_score += time.time() - t1
        if progress:
            print(f"  {lang}: {lc['queries']} queries x {lc['documents']} documents, {lc['kept']} kept",
                  file=sys.stderr, flush=True)
    rows.sort(key=lambda r: (r[0], r[1]))
    q, k = len(rows), cfg.k
    arrays = {"paths": np.array(uniq, dtype=str) if uniq else np.zeros(0, dtype="<U1"),
              "q_path": np.array([r[0] for r in rows], dtype=np.int32), "q_row": np.array([r[1] for r in rows], dtype=np.int32),
              "pos_score": np.array([r[2] for r in rows], dtype=np.float32),
              "neg_path": np.full((q, k), -1, np.int32), "neg_row": np.full((q, k), -1, np.int32),
              "neg_span": np.full((q, k, 2), -1, np.int32), "neg_score": np.full((q, k), np.nan, np.float32)}
    for i, r in enumerate(rows):
        for j, (p, row, s, e, score) in enumerate(r[3]):
            arrays["neg_path"][i, j], arrays["neg_row"][i, j] = p, row
            arrays["neg_span"][i, j] = (s, e)
            arrays["neg_score"][i, j] = score
    total = Counter()
    for lc in per_lang.values():
        total.update({x: v for x, v in lc.items() if x != "mrr"})
    missing = total["considered"] - sum(total[b] for b in BUCKETS)
    if missing:  # every candidate is in one bucket (filter_block): a bug if not
        raise AssertionError(f"mine-negatives: {missing} candidates in no bucket")
    summary = {"views": str(views_dir), "views_key": key_now, "name": name, "miner": miner, "miner_desc": scorer.desc,
               "settings": settings, "key": key, "definitions": counts["definitions"],
               "documents": counts["documents"], "queries": counts["queries"],
               "skipped": {x: counts[x] for x in ("no_code", "no_summary") if counts[x]},
               "candidates": {b: total[b] for b in ("considered", *BUCKETS)},
               "queries_without_negative": total["no_negative"],
               "miner_mrr": round(float(np.concatenate(rr_all).mean()), 4) if rr_all else None,
               "per_lang": {lang: dict(lc) for lang, lc in per_lang.items()},
               "seconds": {"total": round(time.time() - t0, 2), "scoring": round(t_score, 2)}}
    N.write(views_dir, name, arrays, summary, key)
    return {**summary, "cached": False}


def format_summary(s: dict) -> str:
    c = s["candidates"]
    fn = c["duplicate_code"] + c["same_signature"] + c["margin"]
    lines = [f"codept mine-negatives: {s['queries']:,} queries x {s['documents']:,} documents ({s['miner']}"
             f"{', cached' if s.get('cached') else ''}); miner MRR {s['miner_mrr']}",
             f"  candidates considered {c['considered']:,}: kept {c['kept']:,}, false negatives dropped {fn:,} "
             f"(duplicate_code {c['duplicate_code']:,}, same_signature {c['same_signature']:,}, margin {c['margin']:,}), "
             f"below_min_score {c['below_min_score']:,}, beyond_k {c['beyond_k']:,}",
             f"  queries without a negative {s['queries_without_negative']:,}"
             + (f"; skipped {s['skipped']}" if s["skipped"] else ""),
             f"  -> {N.sidecar_dir(s['views'], s['name'])}",
             f"  train with: objective.code_doc.negatives=mined objective.code_doc.miner={s['name']}"]
    return "\n".join(lines)


def _float_at_least_0(value: str) -> float:
    import argparse

    try:
        x = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number") from None
    if not x >= 0:
        raise argparse.ArgumentTypeError(f"{value} must be >= 0")
    return x


def add_arguments(parser) -> None:
    d = MineConfig()
    parser.add_argument("views", type=Path, help="a prepared code views folder (`codept prepare` output, with DONE)")
    parser.add_argument("--miner", default="bm25", help="bm25 | a transformers folder (a teacher, e.g. "
                        "all-MiniLM-L6-v2) | a codept run | bm25+MODEL (default bm25)")
    parser.add_argument("--name", help="the sidecar's name, VIEWS/negatives/NAME (default: bm25 or the model's folder name); "
                        "code_doc reads it as objective.code_doc.miner=NAME")
    parser.add_argument("--k", type=int_at_least(1), default=d.k, help=f"negatives kept per query (default {d.k})")
    parser.add_argument("--range-max", type=int_at_least(1), default=d.range_max,
                        help=f"best-scored candidates considered per query (default {d.range_max})")
    parser.add_argument("--relative-margin", type=_float_at_least_0, default=d.relative_margin,
                        help="drop candidates scored above (1 - M) x the positive's score as false negatives "
                             f"(default {d.relative_margin}: NV-Retriever's 95%%)")
    parser.add_argument("--margin", type=_float_at_least_0, default=None,
                        help="also drop candidates scored above the positive's score minus this (default: off)")
    parser.add_argument("--min-score", type=float, default=d.min_score,
                        help=f"drop candidates scored at or below this (default {d.min_score}: BM25 0 = no shared word)")
    parser.add_argument("--max-doc-tokens", type=int_at_least(1), default=d.max_doc_tokens,
                        help=f"the query: the summary's first tokens (default {d.max_doc_tokens}, code_doc's)")
    parser.add_argument("--max-code-tokens", type=int_at_least(1), default=d.max_code_tokens,
                        help=f"a document: the code side's first tokens (default {d.max_code_tokens}, code_doc's)")
    parser.add_argument("--device", help="the teacher's device (default: cuda when there is one)")
    parser.add_argument("--batch-size", type=int_at_least(1), default=64, help="the teacher's batch size (default 64)")
    parser.add_argument("--force", action="store_true", help="mine again even when an equal sidecar is there")


def main(args) -> int:
    """The command; a bad input raises ValueError / FileNotFoundError naming it (codept.cli prints it)."""
    cfg = MineConfig(k=args.k, range_max=args.range_max, relative_margin=args.relative_margin, margin=args.margin,
                     min_score=args.min_score, max_doc_tokens=args.max_doc_tokens, max_code_tokens=args.max_code_tokens)
    if not args.views.is_dir():
        raise FileNotFoundError(f"{args.views}: no such views folder")
    summary = mine(args.views, args.miner, cfg, name=args.name, force=args.force, device=args.device,
                   batch_size=args.batch_size, progress=sys.stderr.isatty())
    print(format_summary(summary))
    return 0
