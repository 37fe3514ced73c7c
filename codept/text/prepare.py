"""``codept prepare-text``: natural-language corpora -> TextViews / PairViews on disk + a manifest.

Same rules as ``codept prepare`` (codept.prepare), for the text objectives:
1. Inputs (codept.text.readers.discover): plain text, Markdown, reStructuredText, man pages, and
   parallel pairs from jsonl / TSV / gettext .mo/.po. Every file is accounted for: viewed (with its
   document or pair count) or skipped with a reason; entries dropped inside a kept file are counted
   per reason in its manifest row.
2. Cache check first, from names and ``stat`` only, with the code prepare's pieces
   (codept.data.jobs.JobCache; the listing of codept.data.records.add_file_stats): the listing (the
   settings + every discovered file and skip) keys an index entry (``<cache>/text/index/<listing
   key>.json``, or ``listing.json`` inside ``--out``) holding the content key of its last build and
   the stat key (device, inode, size, mtime_ns, ctime_ns of each file) it was built from. Equal
   stat key + complete folder: served without reading an input. A stat change (or a racy listing)
   falls back to one hash pass when a complete folder exists, else to the build.
3. Content key = sha256 of the codept version and text-pipeline source code, the tokenizer, the
   segmenter (jieba version + user dictionary), the parser versions, the settings and every input's
   path (its bytes on disk, also when not UTF-8), kind and content.
4. One build per node: an exclusive ``flock`` next to the output folder (codept.data.jobs.build_lock);
   a second process waits, then finds the folder in the cache check. A default-folder build is
   written to ``<cache>/text/.build-<listing key>`` and renamed to ``<cache>/text/<content key>``.
5. Build, one read per input: the main process reads each file once (at most ``max_bytes + 1``
   bytes), hashes it into the key and hands the bytes to a killable worker (codept.parallel.
   isolated_map): read_file(data=...) -> redact (on by default) -> build_doc; results are settled
   in input order.
6. Output: ``DIR/text`` (TextView rows) and ``DIR/pairs`` (PairView rows), each a dataset that
   ``datasets.load_from_disk`` opens; ``manifest.jsonl``, ``summary.json``, then ``DONE``.
Cost: a cache hit ~ one ``stat`` per input; a build ~ build_text_view time / workers (about
tokenize-only x 1.5, see benchmarks/bench_text.py) + one read of the inputs.
Sources that name nothing that exists are an error (``NothingToPrepare``): nothing is cached.
Not covered: dedup of text documents, sharding across machines.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import sys
import time
import zlib
from collections import Counter
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Iterator

from codept import __version__
from codept.data import remote
from codept.data.redact import redact
from codept.data.jobs import (
    JobCache,
    NothingToPrepare,
    ShardWriter,
    SkipFile,
    build_lock,
    fresh_folder,
    hexkey,
    key_bytes,
    mark_done,
    printable,
    publish,
    served,
)
from codept.data.jobs import progress as progress_bar
from codept.data.records import Listing, add_file_stats
from codept.text.build import build_doc
from codept.text.items import PairDoc, Skip, TextDoc
from codept.text.readers import discover, read_file
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
    max_bytes: int = 8_000_000  # the largest document / catalog file and the longest jsonl or TSV line
    # (a pair file has no size limit: it is read in chunks of whole lines, CHUNK_BYTES each)
    rst_line_limit: int = 10_000  # reST lines longer than this are kept as plain text, unparsed
    redact: bool = True
    timeout: float = 120.0  # per file (per chunk of a pair file), enforced by killing the worker
    workers: int = 0

    def __post_init__(self):
        for name, low in (("min_src_words", 0), ("max_bytes", 1), ("rst_line_limit", 1), ("workers", 0)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise ValueError(f"{name}={v!r} must be an integer >= {low}")
        if not (isinstance(self.timeout, (int, float)) and self.timeout > 0):
            raise ValueError(f"timeout={self.timeout!r} must be a number of seconds > 0")


CHUNK_BYTES = 4 << 20  # a jsonl / TSV file goes to the workers in chunks of whole lines of about this size


def _init(tokenizer_dir: str, cfg: dict):
    cfg = dict(cfg)
    if cfg["pair_langs"] is not None:
        cfg["pair_langs"] = tuple(cfg["pair_langs"])
    return load_tokenizer(tokenizer_dir), TextConfig(**cfg)


def _one_file(state, item):
    """Worker: one (path, kind, bytes read by the main process, first line of a chunk or None, lines
    over max_bytes the main process cut out) -> (text records, pair records, skip counts, redaction
    counts). Paths in the views are printable (a name that is not UTF-8 as ``bad\\xffname``)."""
    tok, cfg = state
    path, kind, data, first_line, overlong = item
    texts, pairs = [], []
    skips: Counter = Counter()
    if overlong:
        skips["too_large"] += overlong
    redacted: Counter = Counter()
    for doc in read_file(path, kind, lang=cfg.lang, pair_langs=cfg.pair_langs, max_bytes=cfg.max_bytes,
                         min_src_words=cfg.min_src_words, rst_line_limit=cfg.rst_line_limit, data=data,
                         first_line=first_line):
        if isinstance(doc, Skip):
            skips[doc.reason] += doc.count
            continue
        doc = replace(doc, path=printable(doc.path))
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


def _settings(cfg: TextConfig, tokenizer_dir: Path):
    """sha256 state of everything but the inputs: codept's version and text-pipeline code, the
    tokenizer, the segmenter, the parser versions and the settings (no input read)."""
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
    return h


def _listing(files: list[tuple[str, str]], skipped: list[Skip], infos: dict) -> Listing:
    """Names and ``stat`` of the inputs (codept.data.records.add_file_stats), no content read; an
    object's line is the store's size, ETag and time, from discovery's listing (`infos`)."""
    out = Listing()
    out.entries += [f"skip\0{s.path}\0{s.reason}" for s in skipped]
    out.exists = any(s.reason != "not_found" for s in skipped)
    add_file_stats(out, [f for f, _ in files if not remote.is_url(f)], time.time_ns())
    for f in (f for f, _ in files if remote.is_url(f)):
        out.exists = True
        out.entries.append(f"file\0{f}")
        out.stats.append(f"{f}\0{infos.get(f) or remote.stat_line(f)}")
    return out


def _read(path: str, max_bytes: int) -> tuple[bytes | None, tuple[str, str] | None]:
    """The one read of an input: (its bytes on disk, at most max_bytes + 1, or None; a refusal)."""
    if remote.is_url(path):
        try:
            return remote.read_bytes(path, max_bytes), None
        except SkipFile as e:
            return None, (e.reason, e.detail)
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            raw = f.read(max_bytes + 1)
    except OSError as e:
        return None, ("unreadable", f"{type(e).__name__}: {e}")
    return raw, (("too_large", f"{size} bytes > max_bytes={max_bytes}") if size > max_bytes else None)


def _line_chunks(path: str, chunk_bytes: int, max_line: int) -> Iterator[tuple[int, bytes, int, bool]]:
    """A jsonl / TSV file (``.gz`` decompressed) read once, in blocks, as chunks of whole lines:
    (lines before the chunk, its bytes, lines over `max_line` cut out of it, last chunk?). An over-long
    line is never held whole: it becomes an empty line (counted) and the rest of it is read past.
    At least one chunk per file (an empty file: one empty chunk)."""
    buf, overlong, skipping, line0 = bytearray(), 0, False, 0
    ready: tuple | None = None
    raw = remote.open_binary(path) if remote.is_url(path) else open(path, "rb")
    with raw, (gzip.GzipFile(fileobj=raw) if path.endswith(".gz") else raw) as f:
        while block := f.read(chunk_bytes):
            if skipping:
                nl = block.find(b"\n")
                if nl < 0:
                    continue
                block, skipping = block[nl + 1:], False
            buf += block
            last = buf.rfind(b"\n")
            if len(buf) - (last + 1) > max_line:  # an unfinished line already over the limit
                del buf[last + 1:]
                buf += b"\n"
                overlong, skipping, last = overlong + 1, True, len(buf) - 1
            if last + 1 >= chunk_bytes:
                if ready is not None:
                    yield (*ready, False)
                ready = (line0, bytes(buf[: last + 1]).removesuffix(b"\n"), overlong)
                line0 += buf.count(b"\n", 0, last + 1)
                del buf[: last + 1]
                overlong = 0
    if buf or ready is None:
        if len(buf) > max_line:
            buf, overlong = bytearray(), overlong + 1
        if ready is not None:
            yield (*ready, False)
        ready = (line0, bytes(buf).removesuffix(b"\n"), overlong)
    yield (*ready, True)


class _Planner:
    """The main process's part, input by input in path order: read once, hash into the content key."""

    def __init__(self, cfg: TextConfig, settings):
        self.cfg, self.h = cfg, settings.copy()

    def key(self) -> str:
        return self.h.hexdigest()[:20]

    def take(self, path: str, kind: str) -> Iterator[tuple[str, object, bool]]:
        """The parts of one input: ('settled', (reason, detail), last) or ('view', worker item, last).
        A document or catalog is one part (its bytes, at most max_bytes + 1); a jsonl / TSV file is
        one part per chunk of whole lines (no size limit)."""
        self.h.update(key_bytes(f"{path}\0{kind}\0"))
        if kind in ("jsonl", "tsv"):
            try:
                for line0, data, overlong, last in _line_chunks(path, CHUNK_BYTES, self.cfg.max_bytes):
                    self.h.update(hashlib.sha256(data).digest() + f"{line0} {overlong}".encode())
                    yield "view", (path, kind, data, line0, overlong), last
            except (OSError, EOFError, zlib.error) as e:
                self.h.update(b"unreadable")
                yield "settled", ("unreadable", f"{type(e).__name__}: {e}"), True
            return
        raw, refused = _read(path, self.cfg.max_bytes)
        self.h.update(hashlib.sha256(raw).digest() if raw is not None else b"unreadable")
        if refused is not None:
            yield "settled", refused, True
        else:
            yield "view", (path, kind, raw, None, 0), True

    def skips(self, skipped: list[Skip]) -> None:
        for s in skipped:
            self.h.update(key_bytes(f"skip\0{s.path}\0{s.reason}"))


def prepare_text(sources: list[str], out: Path | None = None, tokenizer_dir: Path | None = None,
                 cfg: TextConfig = TextConfig(), force: bool = False, progress: bool = True) -> dict:
    """Build (or reuse) the text and pair views of `sources`; returns the summary (also summary.json).
    The cache check, the lock and the one read per input are those of ``codept prepare``
    (codept.data.jobs.JobCache, build_lock; see the module docstring)."""
    from codept.parallel import check_main_guard

    check_main_guard("codept.text.prepare.prepare_text()")
    if out is not None and remote.is_url(str(out)):  # built in the local cache, then uploaded
        return remote.uploaded(prepare_text(sources, None, tokenizer_dir, cfg, force, progress), str(out))
    out = remote.local_path(str(out)) if out is not None else None
    t0 = time.time()
    if not sources:
        raise ValueError("prepare-text needs at least one source (text/markdown/rst/man files, .jsonl/.tsv/.mo/.po)")
    tokenizer_dir = Path(tokenizer_dir) if tokenizer_dir else default_tokenizer_dir()
    infos: dict[str, str] = {}  # object URL -> stat line, from the prefix listing (no request per object)
    files, skipped = discover(sources, infos)
    if not files and all(s.reason == "not_found" for s in skipped):
        raise NothingToPrepare(f"nothing to prepare: no source exists "
                               f"({', '.join(printable(str(s)) for s in sources[:5])}); "
                               "every source must be an existing file or directory")
    listing = _listing(files, skipped, infos)
    settings = _settings(cfg, tokenizer_dir)
    cache = JobCache(listing, hexkey(settings, listing.entries), hexkey(settings, listing.stats),
                     Path(out) if out else None, cache_dir() / "text")
    if not force and (hit := cache.stat_hit()):
        return hit
    with build_lock(cache.build_folder()):
        if not force and (hit := cache.stat_hit() or _hash_hit(files, skipped, cfg, settings, cache)):
            return hit
        return _build(files, skipped, cfg, settings, cache, tokenizer_dir, progress, t0, force)


def _hash_hit(files, skipped, cfg: TextConfig, settings, cache: JobCache) -> dict | None:
    """Stat changed but a complete folder exists: one hash pass says whether the content did."""
    if cache.candidate() is None:
        return None
    planner = _Planner(cfg, settings)
    for path, kind in files:
        for _ in planner.take(path, kind):
            pass
    planner.skips(skipped)
    key = planner.key()
    hit = served(cache.folder(key), key)
    if hit is not None:
        cache.remember(key)
    return hit


def _build(files, skipped, cfg: TextConfig, settings, cache: JobCache, tokenizer_dir: Path, progress: bool,
           t0: float, force: bool) -> dict:
    """Read every input once (main process), view it in a worker, settle in path order, write the folder."""
    from codept.parallel import isolated_map

    folder = fresh_folder(cache.build_folder())
    for sub in ("text", "pairs"):
        (folder / sub).mkdir()
    writers = {"text": ShardWriter(folder / "text", TEXT_ARROW_SCHEMA),
               "pairs": ShardWriter(folder / "pairs", PAIR_ARROW_SCHEMA)}
    workers = cfg.workers or os.cpu_count() or 1
    planner = _Planner(cfg, settings)
    results: dict[int, tuple] = {}  # part index -> result, until its turn in input order
    parts: list[tuple[int, bool]] = []  # part index -> (file index, last part of its file?)
    sent: list[int] = []  # part index of every item handed to the workers, in order
    totals: Counter = Counter()
    reasons: Counter = Counter()
    inner: Counter = Counter()
    redacted: Counter = Counter()
    bar = progress_bar(len(files), progress)
    nxt = 0
    manifest = open(folder / "manifest.jsonl", "w")
    for s in skipped:
        manifest.write(json.dumps({"path": s.path, "status": "skipped", "reason": s.reason, "detail": s.detail}) + "\n")
        reasons[s.reason] += 1
    acc: dict = {}  # the file being settled: its counts over its parts so far

    def settle(p: int, res) -> None:
        """Part p's result; the file's manifest row when its last part is settled."""
        i, last = parts[p]
        a = acc.setdefault("row", {"documents": 0, "pairs": 0, "dropped": Counter(), "redacted": Counter(),
                                   "failed": []})
        if res[0] == "ok":
            texts, pairs, skips, red = res[1]
            for r in texts:
                writers["text"].write(r)
            for r in pairs:
                writers["pairs"].write(r)
            a["documents"] += len(texts)
            a["pairs"] += len(pairs)
            totals["tokens"] += sum(len(r["input_ids"]) for r in texts)
            totals["tokens"] += sum(len(r["src_input_ids"]) + len(r["tgt_input_ids"]) for r in pairs)
            a["dropped"].update(skips)
            a["redacted"].update(red)
        else:  # a refused input, or a part whose worker hung, crashed or raised
            a["failed"].append((res[1], res[2]))
        if not last:
            return
        acc.clear()
        path, kind = files[i]
        row = {"path": path, "kind": kind}
        if a["failed"] and (len(a["failed"]) > 1 or a["documents"] or a["pairs"] or a["dropped"]):
            for reason, _ in a["failed"]:  # a chunk of a pair file lost: counted inside the file
                a["dropped"][f"chunk_{reason}"] += 1
            a["failed"] = []
        if a["failed"]:
            (reason, detail), = a["failed"]
            row.update(status="skipped", reason=reason, detail=detail)
            reasons[reason] += 1
        else:
            dropped, red = dict(sorted(a["dropped"].items())), dict(sorted(a["redacted"].items()))
            row.update(status="viewed", documents=a["documents"], pairs=a["pairs"], dropped=dropped, redacted=red)
            inner.update(dropped)
            redacted.update(red)
            totals["documents"] += a["documents"]
            totals["pairs"] += a["pairs"]
            if not a["documents"] and not a["pairs"]:
                row.update(status="skipped", reason="no_documents")
                reasons["no_documents"] += 1
            else:
                totals["viewed"] += 1
        manifest.write(json.dumps(row) + "\n")
        bar(1)

    def work():
        for i, (path, kind) in enumerate(files):
            for what, value, last in planner.take(path, kind):
                parts.append((i, last))
                if what == "settled":
                    results[len(parts) - 1] = ("skip", *value)
                else:
                    sent.append(len(parts) - 1)
                    yield value

    def drain() -> None:
        nonlocal nxt
        while nxt in results:
            settle(nxt, results.pop(nxt))
            nxt += 1

    for k, ok, value in isolated_map(_one_file, work(), workers=workers, timeout=cfg.timeout, init=_init,
                                     init_args=(str(tokenizer_dir), asdict(cfg))):
        results[sent[k]] = ("ok", value) if ok else ("skip", value[0], value[1].splitlines()[0] if value[1] else "")
        drain()
    drain()  # inputs settled without a worker after the last result
    manifest.close()
    planner.skips(skipped)
    key = planner.key()
    for name, w in writers.items():
        w.close(f"{key}-{name}")
    bar(0, close=True)
    final = cache.folder(key)
    summary = {
        "cache_key": key, "out": str(final), "tokenizer": str(tokenizer_dir),
        "inputs": len(files) + len(skipped), "viewed": totals["viewed"], "skipped": dict(sorted(reasons.items())),
        "documents": totals["documents"], "pairs": totals["pairs"], "tokens": totals["tokens"],
        "dropped_inside_files": dict(sorted(inner.items())), "redacted": dict(sorted(redacted.items())),
        "seconds": round(time.time() - t0, 2), "workers": workers,
    }
    assert summary["viewed"] + sum(reasons.values()) == summary["inputs"], "an input was lost"
    mark_done(folder, summary)
    if cache.out is None:
        publish(folder, final, replace=force)
    cache.remember(key)
    return {**summary, "cached": False}


def main(args) -> int:
    try:
        cfg = TextConfig(lang=args.lang, pair_langs=tuple(args.pair_langs) if args.pair_langs else None,
                         user_dict=args.user_dict, min_src_words=args.min_src_words, redact=not args.no_redact,
                         workers=args.workers, max_bytes=args.max_bytes, rst_line_limit=args.rst_line_limit,
                         timeout=args.timeout)
    except ValueError as e:  # a bad setting: the message names it
        print(f"codept prepare-text: error: {e}", file=sys.stderr)
        return 2
    try:
        s = prepare_text([str(x) for x in args.sources], out=args.out, tokenizer_dir=args.tokenizer, cfg=cfg,
                         force=args.force)
    except (NothingToPrepare, ValueError) as e:  # ValueError: an unusable URL (its package, its scheme)
        print(f"codept prepare-text: error: {e}", file=sys.stderr)
        return 2
    print(f"codept prepare-text: {s['viewed']}/{s['inputs']} files viewed"
          + (" (cached)" if s["cached"] else f" in {s['seconds']}s") + f": {s['documents']:,} documents, "
          f"{s['pairs']:,} pairs, {s['tokens']:,} tokens")
    print("  skipped: " + (", ".join(f"{k} {v}" for k, v in s["skipped"].items()) or "none"))
    print("  dropped inside files: " + (", ".join(f"{k} {v}" for k, v in s["dropped_inside_files"].items()) or "none"))
    print("  redacted: " + (", ".join(f"{k} {v}" for k, v in s["redacted"].items()) or "none"))
    print(f"  -> {printable(s['out'])}/text, {printable(s['out'])}/pairs")
    return 0
