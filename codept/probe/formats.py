"""``codept probe bench --model M --data PATH``: users' own benchmarks in the standard formats, read
from a local path (nothing is downloaded), scored with the same models as ``codept probe run``.

Formats (``--format auto`` tells them apart by what is on disk):
  csn    CodeSearchNet jsonl (a ``.jsonl`` / ``.jsonl.gz`` file or a folder of them): one function per
         line with ``docstring`` (or ``docstring_tokens``), ``code`` (or ``code_tokens``), ``language``,
         ``func_name``, ``path``. Query = the docstring's tokens joined by spaces when present (as
         CodeBERT's code-search scripts read it), else the docstring's first paragraph; candidate =
         ``code`` with the docstring's text cut out (CSN's Python ``code`` contains it), else the code
         tokens joined. Scored as ``codept probe run`` scores its probes: per language, seeded pools of
         ``--pool`` candidates (1,000: the CodeSearchNet convention), one relevant code per query.
  beir   a BEIR / CoIR folder: ``corpus.jsonl`` ({_id, title, text}), ``queries.jsonl`` ({_id, text}),
         ``qrels/<split>.tsv`` (query-id, corpus-id, score; a header line). Every query is ranked
         against the WHOLE corpus; a document is relevant when its qrels score is > 0, and the gain
         of nDCG is that score.
Metrics (harness :data:`HARNESS`; harnesses disagree on ties and cut-offs, so it is named in every
output): nDCG@10 with linear gain and log2(rank + 1) discount, the ideal DCG from the query's qrels
(trec_eval / pytrec_eval ``ndcg_cut_10``, as BEIR); MRR over the full ranking (1 / rank of the first
relevant document) and MRR@10; recall@k = relevant documents in the top k / relevant documents, k in
1, 5, 10, 100. Ties are broken PESSIMISTICALLY (a relevant document after every tied irrelevant one;
lower gains first), like codept.probe.metrics; trec_eval breaks ties by document id, so exact ties
can make the two differ. Queries without any relevant document are skipped and counted.
Cost: one embedding per text plus a (block x corpus) score matrix per block of queries; BM25 one
index of the corpus. Not covered: downloading the data sets, BEIR's ``title`` weighting (title and
text are joined with a space), multi-field CSN variants (AdvTest's normalised identifiers are read
as they are).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import sys
import time
from pathlib import Path

import numpy as np

from codept.argtypes import int_at_least, out_folder
from codept.probe import Pair

HARNESS = "codept.probe.formats 1 (nDCG@10 trec_eval-style linear gain; pessimistic ties)"
KS = (1, 5, 10, 100)


def _open(path: Path):
    return gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else open(path, encoding="utf-8")


def _jsonl(path: Path, what: str):
    with _open(path) as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as e:
                    raise ValueError(f"{path}:{n}: not a JSON line ({e.msg}); expected {what}") from None


def read_csn(path: str | Path) -> tuple[list[Pair], dict]:
    """Pairs of CodeSearchNet jsonl files (a file or a folder of ``*.jsonl[.gz]``) and counts of what
    was skipped (no query or no code)."""
    p = Path(path)
    files = sorted([*p.glob("*.jsonl"), *p.glob("*.jsonl.gz")]) if p.is_dir() else [p]
    if not files or not all(f.is_file() for f in files):
        raise FileNotFoundError(f"{path}: no CodeSearchNet .jsonl / .jsonl.gz file there")
    pairs, skipped = [], {"no_query": 0, "no_code": 0}
    for f in files:
        for row in _jsonl(f, "a CodeSearchNet record (docstring, code, language)"):
            doc = row.get("docstring") or ""
            q = " ".join(row["docstring_tokens"]) if row.get("docstring_tokens") else doc.strip().split("\n\n")[0]
            code = row.get("code") or " ".join(row.get("code_tokens") or [])
            if doc and doc in code:
                code = code.replace(doc, "", 1)
            if not q.strip():
                skipped["no_query"] += 1
            elif not code.strip():
                skipped["no_code"] += 1
            else:
                pairs.append(Pair(lang=row.get("language", "unknown"), path=row.get("path", str(f)),
                                  name=row.get("func_name", ""), query=" ".join(q.split()), code=code))
    return pairs, {"files": [str(f) for f in files], "pairs": len(pairs), "skipped": skipped}


def read_beir(folder: str | Path, split: str = "test") -> tuple[dict, dict, dict]:
    """(corpus {id: text}, queries {id: text}, qrels {query id: {doc id: score}}) of a BEIR/CoIR folder."""
    d = Path(folder)
    need = [d / "corpus.jsonl", d / "queries.jsonl", d / "qrels" / f"{split}.tsv"]
    missing = [str(x.relative_to(d)) for x in need if not x.is_file()]
    if missing:
        raise FileNotFoundError(f"{folder}: not a BEIR/CoIR folder for split {split!r}: missing {missing}")
    corpus = {str(r["_id"]): " ".join(x for x in (r.get("title", ""), r.get("text", "")) if x)
              for r in _jsonl(need[0], "{_id, title, text}")}
    queries = {str(r["_id"]): r.get("text", "") for r in _jsonl(need[1], "{_id, text}")}
    qrels: dict[str, dict[str, float]] = {}
    with open(need[2], encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t"))
    for n, row in enumerate(rows, 1):
        if n == 1 and row and not row[-1].lstrip("-").replace(".", "", 1).isdigit():
            continue  # the header line
        if len(row) < 3:
            raise ValueError(f"{need[2]}:{n}: expected query-id, corpus-id, score (tab-separated), got {row}")
        qrels.setdefault(row[0], {})[row[1]] = float(row[2])
    return corpus, queries, qrels


def query_metrics(scores: np.ndarray, gains: np.ndarray) -> dict:
    """Metrics of one query: ``scores`` (C,) over the corpus, ``gains`` (C,) its qrels scores (0 =
    not relevant). Pessimistic ties: among equal scores, lower gains rank first."""
    order = np.lexsort((gains, -scores))  # by score descending, then gain ascending
    g = gains[order]
    rel = g > 0
    first = int(np.argmax(rel)) + 1 if rel.any() else 0
    disc = 1.0 / np.log2(np.arange(2, 12))
    dcg = float((g[:10] * disc[: len(g[:10])]).sum())
    ideal = np.sort(gains[gains > 0])[::-1][:10]
    idcg = float((ideal * disc[: len(ideal)]).sum())
    out = {"ndcg10": dcg / idcg if idcg > 0 else 0.0, "mrr": 1.0 / first if first else 0.0,
           "mrr10": 1.0 / first if 0 < first <= 10 else 0.0}
    n_rel = int(rel.sum())
    out.update({f"recall{k}": float(rel[:k].sum()) / n_rel for k in KS})
    return out


def evaluate_beir(scorer, corpus: dict, queries: dict, qrels: dict, block: int = 256) -> dict:
    """Mean metrics of a codept.probe.run.Scorer over the queries that have a relevant document."""
    ids = list(corpus)
    pos = {d: i for i, d in enumerate(ids)}
    qids = [q for q in qrels if q in queries and any(s > 0 and d in pos for d, s in qrels[q].items())]
    skipped = {"no_relevant_document": sum(1 for q in qrels if q not in qids), "not_in_qrels": sum(1 for q in queries if q not in qrels)}
    fn = scorer.prepare([queries[q] for q in qids], [corpus[d] for d in ids])
    cand = np.arange(len(ids))
    per = []
    for s in range(0, len(qids), block):
        qi = np.arange(s, min(s + block, len(qids)))
        S = np.asarray(fn(qi, cand), dtype=np.float64)
        for row, i in enumerate(qi):
            gains = np.zeros(len(ids))
            for d, g in qrels[qids[i]].items():
                if d in pos and g > 0:
                    gains[pos[d]] = g
            per.append(query_metrics(S[row], gains))
    mean = {k: float(np.mean([m[k] for m in per])) if per else float("nan") for k in (per[0] if per else {})}
    return {**mean, "queries": len(per), "corpus": len(ids), "skipped": skipped}


def run_bench(model: str, data: str, fmt: str = "auto", split: str = "test", pool: int = 1000, seed: int = 0,
              max_queries: int | None = None, **scorer_kw) -> dict:
    from codept.probe.run import build_scorer

    p = Path(data)
    if fmt == "auto":
        fmt = "beir" if (p / "corpus.jsonl").is_file() else "csn"
    t0 = time.perf_counter()
    scorer = build_scorer(model, device=scorer_kw.pop("device", "cpu"), **scorer_kw)
    if fmt == "beir":
        corpus, queries, qrels = read_beir(p, split)
        res = {"format": "beir", "split": split, "protocol": "full corpus",
               "metrics": evaluate_beir(scorer, corpus, queries, qrels)}
    elif fmt == "csn":
        from codept.probe.finetune import FinetuneConfig, probe_ranks, rank_metrics

        pairs, meta = read_csn(p)
        if not pairs:
            raise ValueError(f"{data}: no usable CodeSearchNet record (skipped: {meta['skipped']})")
        cfg = FinetuneConfig(pool=pool, max_queries=max_queries or 10**9)
        ranks = probe_ranks(scorer.prepare, pairs, cfg)
        allr = np.concatenate(list(ranks.values()))
        res = {"format": "csn", "read": meta, "protocol": f"seeded pools of {pool} (seed {seed}) per language",
               "metrics": {**rank_metrics(allr), "by_lang": {k: {**rank_metrics(v), "pool": int(min(len(v), pool))}
                                                             for k, v in ranks.items()}}}
    else:
        raise ValueError(f"--format {fmt!r}: expected auto, csn or beir")
    return {"harness": HARNESS, "data": str(p.resolve()), "model": scorer.desc, "slug": scorer.slug, **res,
            "seconds": round(time.perf_counter() - t0, 2)}


def markdown(r: dict) -> str:
    m = r["metrics"]
    keys = [k for k in ("ndcg10", "mrr", "mrr10", "r1", "r5", "r10", *(f"recall{k}" for k in KS)) if k in m]
    n = m.get("queries", m.get("n"))
    return "\n".join([f"# {r['slug']} on {r['data']} ({r['format']}, {r['protocol']})", "", f"harness: {r['harness']}", "",
                      "| " + " | ".join(keys) + " | queries |", "|" + "---|" * (len(keys) + 1),
                      "| " + " | ".join(f"{m[k]:.4f}" for k in keys) + f" | {n} |"]) + "\n"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="as for `codept probe run`: bm25, random, a transformers folder, "
                   "a codept checkpoint, bm25+MODEL")
    p.add_argument("--data", required=True, help="a CodeSearchNet .jsonl[.gz] file or folder, or a BEIR/CoIR folder")
    p.add_argument("--format", choices=["auto", "csn", "beir"], default="auto",
                   help="auto: beir when DATA/corpus.jsonl exists, else csn")
    p.add_argument("--split", default="test", help="BEIR qrels split (qrels/<split>.tsv)")
    p.add_argument("--pool", type=int_at_least(2), default=1000, help="CSN: candidates per pool")
    p.add_argument("--max-queries", type=int_at_least(1), help="CSN: at most this many pairs per language")
    p.add_argument("--max-len", type=int_at_least(8), default=256, help="tokens kept per document / code")
    p.add_argument("--out", type=out_folder, help="write results.json and results.md there")


def main(args) -> int:
    try:
        r = run_bench(args.model, args.data, args.format, args.split, args.pool, 0, args.max_queries,
                      max_len=args.max_len)
    except (ValueError, FileNotFoundError) as e:
        print(f"codept probe bench: {e}", file=sys.stderr)
        return 2
    print(markdown(r))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "results.json").write_text(json.dumps(r, indent=2) + "\n")
        (args.out / "results.md").write_text(markdown(r))
    return 0
