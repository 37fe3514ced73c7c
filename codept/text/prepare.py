"""``codept prepare-text``: natural-language corpora -> TextViews / PairViews on disk + a manifest.

Same rules as ``codept prepare`` (codept.prepare), for the text objectives:
1. Inputs (codept.text.readers.discover): plain text, Markdown, reStructuredText, man pages, and
   parallel pairs from jsonl / TSV / gettext .mo/.po. Every file is accounted for: viewed (with its
   document or pair count) or skipped with a reason; entries dropped inside a kept file are counted
   per reason in its manifest row.
2. Cache key = sha256 of the codept version and text-pipeline source code, the tokenizer, the
   segmenter (jieba version + user dictionary), the settings and every input's path and content.
3. One killable worker call per file (codept.parallel.isolated_map): read -> redact (on by default)
   -> build_doc; results are settled in input order.
4. Output: ``DIR/text`` (TextView rows) and ``DIR/pairs`` (PairView rows), each a dataset that
   ``datasets.load_from_disk`` opens; ``manifest.jsonl``, ``summary.json``, then ``DONE``.
Cost: ~ build_text_view time / workers (about tokenize-only x 1.5, see benchmarks/bench_text.py).
Sources that name nothing that exists are an error (``NothingToPrepare``): nothing is cached.
Not covered: dedup of text documents, sharding across machines, the stat-only cache check and the
build lock (the code path has them); the key still reads every file once before the build.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

from codept import __version__
from codept.data.redact import redact
from codept.data.jobs import NothingToPrepare, ShardWriter, fresh_folder, key_bytes
from codept.data.jobs import progress as progress_bar
from codept.text.build import build_doc
from codept.text.readers import PairDoc, Skip, TextDoc, discover, read_file
from codept.text.readers import fingerprint as readers_fingerprint
from codept.text.segment import segmenter_fingerprint
from codept.text.view import PAIR_ARROW_SCHEMA, TEXT_ARROW_SCHEMA, PairView
from codept.tokenizer import cache_dir, default_tokenizer_dir, load_tokenizer, tokenizer_fingerprint


@dataclass(frozen=True)
class TextConfig:
    lang: str | None = None  # force the language of text documents (default: guessed per document)
    pair_langs: tuple[str, str] | None = None  # (src, tgt) for pair files that do not name them
    user_dict: str | None = None  # jieba user dictionary for Chinese word boundaries
    min_src_words: int = 3  # parallel pairs with fewer source words are dropped (counted)
    max_bytes: int = 8_000_000
    redact: bool = True
    timeout: float = 120.0  # per file, enforced by killing the worker
    workers: int = 0


def _init(tokenizer_dir: str, cfg: dict):
    cfg = dict(cfg)
    if cfg["pair_langs"] is not None:
        cfg["pair_langs"] = tuple(cfg["pair_langs"])
    return load_tokenizer(tokenizer_dir), TextConfig(**cfg)


def _one_file(state, item):
    """Worker: one (path, kind) -> (text records, pair records, skip counts, redaction counts)."""
    tok, cfg = state
    path, kind = item
    texts, pairs = [], []
    skips: Counter = Counter()
    redacted: Counter = Counter()
    for doc in read_file(path, kind, lang=cfg.lang, pair_langs=cfg.pair_langs, max_bytes=cfg.max_bytes,
                         min_src_words=cfg.min_src_words):
        if isinstance(doc, Skip):
            skips[doc.reason] += doc.count
            continue
        if cfg.redact:
            if isinstance(doc, TextDoc):
                text, c = redact(doc.text)
                doc = TextDoc(doc.path, doc.lang, text)
            else:
                src, c = redact(doc.src)
                tgt, c2 = redact(doc.tgt)
                c.update(c2)
                doc = PairDoc(doc.path, doc.src_lang, doc.tgt_lang, src, tgt)
            redacted.update(c)
        view = build_doc(doc, tok, user_dict=cfg.user_dict)
        (pairs if isinstance(view, PairView) else texts).append(view.to_record())
    return texts, pairs, dict(skips), dict(redacted)


def _key(files: list[tuple[str, str]], skipped: list[Skip], cfg: TextConfig, tokenizer_dir: Path) -> str:
    h = hashlib.sha256()
    h.update(f"codept {__version__} text\n".encode())
    pkg = Path(__file__).resolve().parent.parent
    data = [pkg / "data" / f"{m}.py" for m in ("redact", "sources", "jobs", "viewrows")]
    for f in sorted([*pkg.glob("text/*.py"), *data]):
        if f.is_file():
            h.update(f.read_bytes())
    h.update(tokenizer_fingerprint(load_tokenizer(tokenizer_dir)).encode())
    h.update(segmenter_fingerprint(cfg.user_dict).encode())
    h.update(readers_fingerprint())  # markdown-it-py / docutils / polib versions: a new parser, new text
    d = asdict(cfg)
    d.pop("workers")
    h.update(json.dumps(d, sort_keys=True).encode())
    for path, kind in files:
        h.update(key_bytes(f"{path}\0{kind}\0"))
        try:
            h.update(hashlib.sha256(Path(path).read_bytes()).digest())
        except OSError as e:
            h.update(f"unreadable:{e.errno}".encode())
    for s in skipped:
        h.update(key_bytes(f"skip\0{s.path}\0{s.reason}"))
    return h.hexdigest()[:20]


def prepare_text(sources: list[str], out: Path | None = None, tokenizer_dir: Path | None = None,
                 cfg: TextConfig = TextConfig(), force: bool = False, progress: bool = True) -> dict:
    t0 = time.time()
    if not sources:
        raise ValueError("prepare-text needs at least one source (text/markdown/rst/man files, .jsonl/.tsv/.mo/.po)")
    tokenizer_dir = Path(tokenizer_dir) if tokenizer_dir else default_tokenizer_dir()
    files, skipped = discover(sources)
    if not files and all(s.reason == "not_found" for s in skipped):
        raise NothingToPrepare(f"nothing to prepare: no source exists ({', '.join(map(str, sources[:5]))}); "
                               "every source must be an existing file or directory")
    key = _key(files, skipped, cfg, tokenizer_dir)
    out = Path(out) if out else cache_dir() / "text" / key
    if (out / "DONE").is_file() and not force:
        old = json.loads((out / "summary.json").read_text())
        if old.get("cache_key") == key:
            return {**old, "cached": True}
    fresh_folder(out)
    for sub in ("text", "pairs"):
        (out / sub).mkdir()
    writers = {"text": ShardWriter(out / "text", TEXT_ARROW_SCHEMA), "pairs": ShardWriter(out / "pairs", PAIR_ARROW_SCHEMA)}
    from codept.parallel import isolated_map

    workers = cfg.workers or os.cpu_count() or 1
    results: dict[int, tuple] = {}
    totals: Counter = Counter()
    reasons: Counter = Counter()
    inner: Counter = Counter()
    redacted: Counter = Counter()
    bar = progress_bar(len(files), progress)
    nxt = 0
    with open(out / "manifest.jsonl", "w") as manifest:
        for s in skipped:
            manifest.write(json.dumps({"path": s.path, "status": "skipped", "reason": s.reason, "detail": s.detail}) + "\n")
            reasons[s.reason] += 1

        def settle(i: int, res) -> None:
            path, kind = files[i]
            row = {"path": path, "kind": kind}
            if res[0] == "ok":
                texts, pairs, skips, red = res[1]
                for r in texts:
                    writers["text"].write(r)
                for r in pairs:
                    writers["pairs"].write(r)
                totals["documents"] += len(texts)
                totals["pairs"] += len(pairs)
                totals["tokens"] += sum(len(r["input_ids"]) for r in texts)
                totals["tokens"] += sum(len(r["src_input_ids"]) + len(r["tgt_input_ids"]) for r in pairs)
                inner.update(skips)
                redacted.update(red)
                row.update(status="viewed", documents=len(texts), pairs=len(pairs), dropped=skips, redacted=red)
                if not texts and not pairs:
                    row.update(status="skipped", reason="no_documents")
                    reasons["no_documents"] += 1
                else:
                    totals["viewed"] += 1
            else:
                row.update(status="skipped", reason=res[1], detail=res[2])
                reasons[res[1]] += 1
            manifest.write(json.dumps(row) + "\n")
            bar(1)

        for i, ok, value in isolated_map(_one_file, files, workers=workers, timeout=cfg.timeout, init=_init,
                                         init_args=(str(tokenizer_dir), asdict(cfg))):
            results[i] = ("ok", value) if ok else ("skip", value[0], value[1].splitlines()[0] if value[1] else "")
            while nxt in results:
                settle(nxt, results.pop(nxt))
                nxt += 1
    for name, w in writers.items():
        w.close(f"{key}-{name}")
    bar(0, close=True)
    summary = {
        "cache_key": key, "out": str(out), "tokenizer": str(tokenizer_dir),
        "inputs": len(files) + len(skipped), "viewed": totals["viewed"], "skipped": dict(sorted(reasons.items())),
        "documents": totals["documents"], "pairs": totals["pairs"], "tokens": totals["tokens"],
        "dropped_inside_files": dict(sorted(inner.items())), "redacted": dict(sorted(redacted.items())),
        "seconds": round(time.time() - t0, 2), "workers": workers,
    }
    assert summary["viewed"] + sum(reasons.values()) == summary["inputs"], "an input was lost"
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "DONE").write_text(key + "\n")
    return {**summary, "cached": False}


def main(args) -> int:
    cfg = TextConfig(lang=args.lang, pair_langs=tuple(args.pair_langs) if args.pair_langs else None,
                     user_dict=args.user_dict, min_src_words=args.min_src_words, redact=not args.no_redact,
                     workers=args.workers)
    try:
        s = prepare_text([str(x) for x in args.sources], out=args.out, tokenizer_dir=args.tokenizer, cfg=cfg,
                         force=args.force)
    except NothingToPrepare as e:
        print(f"codept prepare-text: error: {e}", file=sys.stderr)
        return 2
    print(f"codept prepare-text: {s['viewed']}/{s['inputs']} files viewed"
          + (" (cached)" if s["cached"] else f" in {s['seconds']}s") + f": {s['documents']:,} documents, "
          f"{s['pairs']:,} pairs, {s['tokens']:,} tokens")
    print("  skipped: " + (", ".join(f"{k} {v}" for k, v in s["skipped"].items()) or "none"))
    print("  dropped inside files: " + (", ".join(f"{k} {v}" for k, v in s["dropped_inside_files"].items()) or "none"))
    print("  redacted: " + (", ".join(f"{k} {v}" for k, v in s["redacted"].items()) or "none"))
    print(f"  -> {s['out']}/text, {s['out']}/pairs")
    return 0
