"""``codept prepare``: a corpus -> CodeViews on disk (a Hugging Face dataset) + a manifest of every input.

1. Inputs (codept.data.records): files, directories, globs, jsonl/parquet rows, saved HF datasets,
   and from Python a (streaming) ``datasets.IterableDataset``; with no sources, the running
   interpreter's standard library. Every input is a Record (to view) or a Skip with a reason, in
   input order. Sources that name nothing that exists are an error (:class:`NothingToPrepare`):
   no folder is made, nothing is cached.
2. Cache check first, from names and ``stat`` only (``records.list_sources``): an index entry
   (``<cache>/views/index/<listing key>.json``, or ``listing.json`` inside a ``--out`` folder) maps the listing (settings + the files that decide the
   records) to the content key of its last build and to the stat key (the same files' device, inode,
   size, mtime_ns, ctime_ns) it was built from. An equal stat key and a complete folder: served
   without reading any input. Any change of stat (or a listing written while files were still
   changing: *racy*, see records) falls back to hashing: if a complete folder exists for the
   listing, one hash pass computes the content key and reuses it when equal; otherwise the build
   below hashes while it reads. Never served stale: the content key decides, stat only short-cuts
   it when no file can have changed unseen.
3. Content key (unchanged semantics) = sha256 of the codept version and view-building source code,
   every grammar's fingerprint (language.toml + queries + wheel version), the tokenizer's JSON, the
   settings and every input's origin, language and content (names hashed as their bytes on disk,
   also when they are not UTF-8).
4. One build per node: an exclusive ``flock`` on a lock file next to the output folder
   (codept.data.jobs.build_lock); the other ranks wait, then find the folder in the cache check.
   A default-folder build is written to ``views/.build-<listing key>`` and renamed to
   ``views/<content key>`` when done.
5. Build, one read per input: the main process reads each input once (at most ``max_bytes + 1``
   bytes), hashes it into the key, decides its shard (``sha1(normalised content) mod N``: exact
   copies land on one machine) and exact duplicates (codept.data.dedup), and hands the bytes to a
   killable worker (codept.parallel): filters (size, binary, UTF-8, empty) -> redaction
   (codept.data.redact) -> optional MinHash signature -> build_view (a language without a grammar:
   build_token_view, tokens and offsets only; ``tokens_only=False`` / ``--structure-only`` skips
   those inputs as unknown_language instead; the manifest marks them ``tokens_only`` and the summary
   counts them per language). A file that hangs, crashes or
   exhausts its worker's memory limit becomes a skip (``timeout`` / ``worker_crash`` /
   ``too_much_memory``). Near-duplicates are decided in input order in the main process, so the
   result does not depend on the number of workers.
6. Output, in input order: Arrow shards with ``Dataset.save_to_disk`` metadata
   (``datasets.load_from_disk(DIR)`` opens them memory-mapped; :func:`load_views`),
   ``manifest.jsonl`` (one row per input, streamed), ``summary.json``, and ``DONE`` last.
   The listing and stat keys use quick settings (grammar files and wheel stats, no query compiled),
   so a cache hit costs no grammar load; the content key keeps the full grammar fingerprint.
Why not ``datasets.map(num_proc)``: it can neither kill a hung worker nor survive one that segfaults,
and a parser fed hostile input can do both. Cost: a cache hit ~ one ``stat`` per input; a build ~
view building / workers + one read of the inputs; a stat change on unchanged inputs ~ one read;
memory bounded by the per-input dedup hashes and the in-flight inputs, not by the corpus.
Object storage (codept.data.remote): a source may be an fsspec URL (``s3://bucket/src/``, an object,
a prefix, a ``.jsonl`` / ``.parquet`` object), listed with the store's ETags for the cache check
and read object by object in the main process; ``out`` may be a URL: the folder is built in the
local cache, then uploaded (DONE last; skipped when the URL already holds the same DONE).
Not covered: near-dedup across machines (each shard dedups its own records); a cache hit for a
stream (a dataset object has no listing: it is read and built again, and the folder for an equal
content key is kept); locks across machines sharing one network cache folder (see codept.data.jobs).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections import Counter
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Iterator

from codept import __version__, languages
from codept.data.dedup import ExactDedup, NearDedup, content_hash, minhash_signature
from codept.data.jobs import (  # noqa: F401  (SHARD_ROWS, ShardWriter: their old home)
    SHARD_ROWS,
    JobCache,
    NothingToPrepare,
    ShardWriter,
    build_lock,
    fresh_folder,
    hexkey,
    is_complete,
    key_bytes,
    load_dataset,
    mark_done,
    printable,
    publish,
    served,
)
from codept.data import remote
from codept.data.engines import EXECUTORS, view_map
from codept.data.jobs import progress as progress_bar
from codept.data.records import Record, Skip, iter_records, list_sources, record_text
from codept.data.redact import redact
from codept.data.sources import stdlib_files
from codept.structure import grammar, kinds
from codept.structure.view import ARROW_SCHEMA, build_token_view, build_view
from codept.tokenizer import cache_dir, default_tokenizer_dir, load_tokenizer, tokenizer_fingerprint


@dataclass(frozen=True)
class PrepareConfig:
    max_bytes: int = 1_000_000  # larger inputs are skipped as too_large
    max_depth: int = 1500  # deeper syntax trees are skipped as too_deep
    timeout: float = 20.0  # per input, enforced by killing the worker (tree-sitter's own in-process
    # bound leaks memory in py-tree-sitter 0.26, see codept.structure.grammar.parse)
    workers: int = 0  # 0 = all cores
    num_shards: int = 1  # split the inputs over this many machines by a stable content hash
    shard_index: int = 0  # the part this machine prepares
    redact: bool = True  # replace secrets and PII (codept.data.redact)
    dedup: bool = True  # drop exact duplicates (normalised content hash)
    near_dedup: float = 0.0  # MinHash Jaccard threshold for near-duplicates; 0 = off
    num_perm: int = 128  # MinHash permutations
    shingle: int = 5  # words per MinHash shingle
    worker_memory: int = 0  # address-space limit per worker in bytes; 0 = 80% of RAM / workers, -1 = none
    fields: bool = False  # object fields (self.x, this.x) as identifiers with comesFromField edges
    tokens_only: bool = True  # a language without a grammar: token-only views (False: skip unknown_language)
    executor: str = "local"  # where the per-input work runs: local | ray (codept.data.engines)
    ray_address: str = ""  # executor='ray': a running cluster (ray://host:10001, auto); "" = RAY_ADDRESS or a local one

    def __post_init__(self):
        if not 0 <= self.shard_index < self.num_shards:
            raise ValueError(f"shard_index={self.shard_index} not in [0, num_shards={self.num_shards})")
        if not 0.0 <= self.near_dedup < 1.0:
            raise ValueError(f"near_dedup={self.near_dedup} must be in [0, 1) (0 = off)")
        if self.executor not in EXECUTORS:
            raise ValueError(f"executor={self.executor!r}: expected one of {EXECUTORS}")
        if self.worker_memory < -1:
            raise ValueError(f"worker_memory={self.worker_memory} must be bytes > 0, 0 (derived) or -1 (none)")


def shard_of(key: str, num_shards: int) -> int:
    """Stable across machines and Python runs (sha1, not hash())."""
    return int.from_bytes(hashlib.sha1(key_bytes(key)).digest()[:8], "big") % num_shards


def _sources(sources: list) -> list:
    return list(sources) if sources else [str(p) for p in stdlib_files()]


def _read(rec: Record, max_bytes: int) -> tuple[bytes | None, tuple[str, str] | None]:
    """The one read of an input: (at most max_bytes + 1 bytes, or None; a refusal (reason, detail))."""
    if rec.content is not None:
        raw = rec.content if isinstance(rec.content, bytes) else rec.content.encode("utf-8", "surrogatepass")
        return raw, None
    if remote.is_url(rec.path):  # an object in a store (codept.data.remote)
        try:
            return remote.read_bytes(rec.path, max_bytes), None
        except grammar.SkipFile as e:
            return None, (e.reason, e.detail)
    try:
        with open(rec.path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            raw = f.read(max_bytes + 1)
    except OSError as e:
        return None, ("unreadable", f"{type(e).__name__}: {e}")
    return raw, (("too_large", f"{size} bytes > max_bytes={max_bytes}") if size > max_bytes else None)


# -- workers -------------------------------------------------------------------------------------


def _init_worker(tokenizer_dir: str, cfg: dict):
    return load_tokenizer(tokenizer_dir), PrepareConfig(**cfg)


VIEW_BYTES_FACTOR = 250  # peak worker memory / input bytes: 2.4 GB for a 10 MB .py, 7.5 GB for a 30 MB .js


def _check_memory(n_bytes: int) -> None:
    """Refuse an input whose view would not fit under the worker's memory limit (before trying)."""
    from codept.parallel import memory_headroom

    room = memory_headroom()
    if room is not None and n_bytes * VIEW_BYTES_FACTOR > room:
        raise grammar.SkipFile("too_much_memory", f"{n_bytes} bytes need ~{n_bytes * VIEW_BYTES_FACTOR >> 20} MiB "
                               f"to view ({VIEW_BYTES_FACTOR}x), {max(room, 0) >> 20} MiB left under the worker limit")


def _view_one(state, item):
    """Worker body: (index, Record) -> (index, 'ok', record, stats) or (index, 'skip', reason, detail)."""
    tok, cfg = state
    idx, rec = item
    try:
        text = record_text(rec, cfg.max_bytes)
        _check_memory(len(rec.content) if rec.content is not None else len(text))
        redacted: Counter = Counter()
        if cfg.redact:
            text, redacted = redact(text)
        sig = minhash_signature(text, cfg.num_perm, cfg.shingle) if cfg.near_dedup else None
        if languages.has_grammar(rec.lang):
            v = build_view(printable(rec.path), rec.lang, text, tok, max_depth=cfg.max_depth, fields=cfg.fields)
        else:  # a language without a grammar (codept.data.records, tokens_only)
            v = build_token_view(printable(rec.path), rec.lang, text, tok)
    except grammar.SkipFile as e:
        return idx, "skip", e.reason, e.detail
    stats = {
        "bytes": v.stats["bytes"],
        "tokens": len(v),
        "has_error": v.has_error,
        "spans": Counter(v.spans[:, 2].tolist()),
        "idents": len(v.idents),
        "bindings": len(set(v.idents[:, 4].tolist())),
        "functions": len(v.functions),
        "documented": int((v.functions[:, 5] >= 0).sum()),
        "redacted": dict(redacted),
        "signature": sig,
        "tokens_only": bool(v.stats.get("tokens_only")),
    }
    return idx, "ok", v.to_record(), stats


load_views = load_dataset  # prepared views as one memory-mapped datasets.Dataset (codept.data.jobs)


# -- keys and the cache check --------------------------------------------------------------------


def _code_fingerprint() -> bytes:
    """The code that turns an input into a view, so a development checkout never serves stale views."""
    pkg = Path(__file__).resolve().parent
    h = hashlib.sha256()
    data = [pkg / "data" / f"{m}.py" for m in ("sources", "records", "redact", "dedup", "jobs", "viewrows")]
    text = [pkg / "text" / f"{m}.py" for m in ("segment", "markup")]  # doc summaries (structure/summary.py) use them
    for f in sorted([*pkg.glob("structure/*.py"), *data, *text, pkg / "prepare.py", pkg / "tokenizer.py"]):
        if f.is_file():
            h.update(f.read_bytes())
    return h.digest()


def _settings(cfg: PrepareConfig, tokenizer_dir: Path):
    """sha256 state after everything but the inputs (the start of every key)."""
    h = hashlib.sha256()
    h.update(f"codept {__version__}\n".encode())
    h.update(_code_fingerprint())
    h.update(grammar.grammars_fingerprint().encode())
    h.update(tokenizer_fingerprint(load_tokenizer(tokenizer_dir)).encode())
    cfg_d = asdict(cfg)
    for k in ("workers", "executor", "ray_address"):
        cfg_d.pop(k)  # where the work runs does not change the output
    if not cfg_d["worker_memory"]:
        cfg_d.pop("worker_memory")  # the machine-derived default: keys stay those of earlier versions
    if not cfg_d["fields"]:
        cfg_d.pop("fields")  # the default: as before the option existed
    if cfg_d["tokens_only"]:
        cfg_d.pop("tokens_only")  # the default: the inputs' languages (hashed per input) decide the output
    h.update(json.dumps(cfg_d, sort_keys=True).encode())
    return h


def _quick_settings(cfg: PrepareConfig, tokenizer_dir: Path):
    """The settings for the listing and stat keys, without compiling a grammar (1-2 s of a cache hit):
    the grammar folders' bytes and the stat of each grammar wheel's files (an upgrade rewrites them)
    instead of grammar.grammars_fingerprint. The content key keeps the full fingerprint."""
    import importlib.util

    h = hashlib.sha256(f"codept {__version__} quick\n".encode())
    h.update(_code_fingerprint())
    for f in sorted([*languages.grammars_dir().glob("*/*"), languages.grammars_dir() / languages.TOKENS_ONLY_FILE]):
        if f.is_file() and f.suffix in (".toml", ".scm"):
            h.update(key_bytes(str(f.relative_to(languages.grammars_dir()))) + b"\0" + f.read_bytes())
            if f.name == "language.toml":
                mods = ["tree_sitter", languages.language(f.parent.name).module]
                for spec in filter(None, (importlib.util.find_spec(m) for m in mods if m)):
                    for loc in spec.submodule_search_locations or [spec.origin]:
                        for g in sorted(Path(loc).rglob("*")) if Path(loc).is_dir() else [Path(loc)]:
                            st = g.stat()
                            h.update(key_bytes(f"{g}\0{st.st_size} {st.st_mtime_ns}\n"))
    h.update(tokenizer_fingerprint(load_tokenizer(tokenizer_dir)).encode())
    h.update(json.dumps(asdict(cfg), sort_keys=True).encode())
    return h


def _missing(sources: list) -> NothingToPrepare:
    shown = ", ".join(printable(str(s)) for s in sources[:5]) + (" ..." if len(sources) > 5 else "")
    return NothingToPrepare(f"nothing to prepare: no source exists ({shown}); every source must be an existing "
                            "file, directory, glob with matches, data file or dataset")


# -- the job -------------------------------------------------------------------------------------


def prepare(sources: list, out: Path | None = None, tokenizer_dir: Path | None = None,
            cfg: PrepareConfig = PrepareConfig(), force: bool = False, progress: bool = True) -> dict:
    """Build (or reuse) the views of `sources`; returns the summary dict (also in summary.json).
    `sources`: paths/globs/data files (str or PathLike) and/or ``datasets`` dataset objects.
    Refused (codept.parallel.UnguardedMain) from a script's top level outside ``if __name__ ==
    "__main__":``, whose spawned workers would re-run it (a cache hit too: it would hang on a miss)."""
    from codept.parallel import check_main_guard

    check_main_guard("codept.prepare.prepare()")
    if out is not None and remote.is_url(str(out)):  # built in the local cache, then uploaded
        return remote.uploaded(prepare(sources, None, tokenizer_dir, cfg, force, progress), str(out))
    out = remote.local_path(str(out)) if out is not None else None
    t0 = time.time()
    tokenizer_dir = Path(tokenizer_dir) if tokenizer_dir else default_tokenizer_dir()
    sources = _sources(sources)
    listing = list_sources(sources, cfg.tokens_only)
    if not listing.exists and not listing.streamed:
        raise _missing(sources)
    quick = _quick_settings(cfg, tokenizer_dir)
    cache = JobCache(listing, hexkey(quick, listing.entries), hexkey(quick, listing.stats), Path(out) if out else None,
                     cache_dir() / "views")
    if not force and (hit := cache.stat_hit()):
        return hit
    lock_on = cache.build_folder()
    settings = _settings(cfg, tokenizer_dir)
    with build_lock(lock_on):
        if not force and (hit := cache.stat_hit() or _hash_hit(sources, cfg, settings, cache)):
            return hit
        summary = _build(sources, cfg, settings, cache, tokenizer_dir, progress, t0, force)
    return summary


def _hash_hit(sources: list, cfg: PrepareConfig, settings, cache: JobCache) -> dict | None:
    """Stat changed but a complete folder exists: one hash pass says whether the content did."""
    if cache.listing.streamed or cache.candidate() is None:
        return None
    planner = _Planner(cfg, settings.copy())
    for item in iter_records(sources, cfg.tokens_only):
        planner.take(item)
    key = planner.key()
    hit = served(cache.folder(key), key)
    if hit is not None:
        cache.remember(key)
    return hit


class _Planner:
    """The main process's part, input by input in order: hash into the key, shard, exact dedup."""

    def __init__(self, cfg: PrepareConfig, h):
        self.cfg, self.h, self.exact, self.n = cfg, h, ExactDedup(), 0

    def key(self) -> str:
        return self.h.hexdigest()[:20]

    def _mine(self, shard_key: str) -> bool:
        return self.cfg.num_shards == 1 or shard_of(shard_key, self.cfg.num_shards) == self.cfg.shard_index

    def take(self, item: Record | Skip) -> tuple[str, object]:
        """-> ('other', None) | ('settled', (skip, reason, detail)) | ('view', Record with its bytes)."""
        self.n += 1
        if isinstance(item, Skip):
            self.h.update(key_bytes(f"skip\0{item.origin}\0{item.reason}\0"))
            return ("settled", ("skip", item.reason, item.detail)) if self._mine(item.origin) else ("other", None)
        cfg = self.cfg
        raw, refused = _read(item, cfg.max_bytes)
        self.h.update(key_bytes(f"{item.origin}\0{item.lang}\0"))
        self.h.update(hashlib.sha256(raw).digest() if raw is not None else b"unreadable")
        digest = content_hash(raw) if raw is not None else None
        kept = None
        if cfg.dedup and raw is not None and len(raw) <= cfg.max_bytes and raw.strip():  # empty: own reason
            kept = self.exact.check_hash(digest, item.origin)
        if not self._mine(digest or item.origin):
            return "other", None
        if refused is not None:
            return "settled", ("skip", *refused)
        if kept is not None:
            return "settled", ("skip", "duplicate", f"same content as {kept}")
        return "view", replace(item, content=raw)


class _Tally:
    """Settles results in input order: manifest rows, Arrow rows, per-language counts."""

    def __init__(self, folder: Path, near: NearDedup | None, bar):
        self.writer = ShardWriter(folder, ARROW_SCHEMA)
        self.manifest = open(folder / "manifest.jsonl", "w")
        self.near, self.bar = near, bar
        self.totals: Counter = Counter()
        self.reasons: Counter = Counter()
        self.redacted: Counter = Counter()
        self.spans: Counter = Counter()
        self.per_lang: dict[str, Counter] = {}

    def settle(self, meta: tuple[str, str, str], res: tuple) -> None:
        origin, path, lang = meta
        row = {"origin": origin, "path": path, "lang": lang or None}
        if res[0] == "ok" and self.near is not None:
            kept = self.near.check_signature(res[2]["signature"], origin)
            if kept is not None:
                res = ("skip", "near_duplicate", f"similar to {kept}")
        lc = self.per_lang.setdefault(lang or "unknown", Counter())
        if res[0] == "ok":
            self._viewed(row, lc, res[1], res[2])
        else:
            row.update(status="skipped", reason=res[1], detail=res[2])
            self.reasons[res[1]] += 1
            lc[f"skipped:{res[1]}"] += 1
        self.manifest.write(json.dumps(row) + "\n")
        self.bar(1)

    def _viewed(self, row: dict, lc: Counter, rec: dict, st: dict) -> None:
        self.writer.write(rec)
        row.update(status="viewed", bytes=st["bytes"], tokens=st["tokens"], has_error=st["has_error"])
        if st.get("tokens_only"):
            row["tokens_only"] = True  # a language without a grammar: no structure fields
            lc["tokens_only"] += 1
        if st["redacted"]:
            row["redacted"] = st["redacted"]
            self.redacted.update(st["redacted"])
        lc["viewed"] += 1
        lc["tokens"] += st["tokens"]
        lc["bytes"] += st["bytes"]
        lc["with_syntax_errors"] += st["has_error"]
        for k in ("idents", "bindings", "functions", "documented"):
            self.totals[k] += st[k]
        self.spans.update(st["spans"])

    def viewed(self) -> int:
        return sum(c["viewed"] for c in self.per_lang.values())

    def summary(self) -> dict:
        return {
            "viewed": self.viewed(),
            "tokens_only": sum(c["tokens_only"] for c in self.per_lang.values()),  # of viewed: no grammar
            "skipped": dict(sorted(self.reasons.items())),
            "redacted": dict(sorted(self.redacted.items())),
            "per_lang": {k: dict(v) for k, v in sorted(self.per_lang.items())},
            "tokens": sum(c["tokens"] for c in self.per_lang.values()),
            "bytes": sum(c["bytes"] for c in self.per_lang.values()),
            "spans": {list(kinds.SPAN_KINDS)[k]: n for k, n in sorted(self.spans.items())},
            **dict(self.totals),
        }


def _build(sources: list, cfg: PrepareConfig, settings, cache: JobCache, tokenizer_dir: Path, progress: bool,
           t0: float, force: bool) -> dict:
    """Read every input once, view the new ones in workers, write the folder; returns the summary."""
    from codept.parallel import WorkersFailing, default_memory_limit

    folder = fresh_folder(cache.build_folder())
    workers = cfg.workers or os.cpu_count() or 1
    memory = cfg.worker_memory if cfg.worker_memory else default_memory_limit(workers)
    planner = _Planner(cfg, settings.copy())
    near = NearDedup(cfg.near_dedup, cfg.num_perm, cfg.shingle) if cfg.near_dedup else None
    bar = progress_bar(None, progress)
    tally = _Tally(folder, near, bar)
    results: dict[int, tuple] = {}  # finished, waiting for their turn in input order
    meta: dict[int, tuple[str, str, str]] = {}  # index -> (origin, path, lang) of unsettled inputs
    planned: list[int] = []  # indices of this shard, in input order
    sent: list[int] = []  # input index of every record handed to the workers, in order

    def work() -> Iterator[tuple[int, Record]]:
        for i, item in enumerate(iter_records(sources, cfg.tokens_only)):
            what, value = planner.take(item)
            if what == "other":
                bar(1)
                continue
            planned.append(i)
            meta[i] = (item.origin, item.path, getattr(item, "lang", ""))
            if what == "settled":
                results[i] = value
            else:
                sent.append(i)
                yield i, value

    pos = 0  # next index of `planned` to settle

    def drain() -> None:
        nonlocal pos
        while pos < len(planned) and planned[pos] in results:
            tally.settle(meta.pop(planned[pos]), results.pop(planned[pos]))
            pos += 1

    ran: dict = {}
    for k, ok, value in view_map(cfg.executor, _view_one, work(), workers=workers, timeout=cfg.timeout,
                                 init=_init_worker, init_args=(str(tokenizer_dir), asdict(cfg)),
                                 memory_limit=memory, address=cfg.ray_address, info=ran):
        if ok:
            i, status, a, b = value
            results[i] = (status, a, b) if status == "skip" else ("ok", a, b)
        else:  # the worker crashed, hung, ran out of memory or raised: a recorded skip, never a crash of the job
            results[sent[k]] = ("skip", value[0], value[1].splitlines()[0] if value[1] else "")
        drain()
    drain()  # inputs settled without a worker after the last result
    tally.manifest.close()
    key = planner.key()
    n_shards = tally.writer.close(key)
    bar(0, close=True)
    final = cache.folder(key)
    summary = {
        "cache_key": key, "out": str(final), "tokenizer": str(tokenizer_dir), "inputs": len(planned),
        **tally.summary(),
        "shards": n_shards,
        "shard": f"{cfg.shard_index} of {cfg.num_shards} ({len(planned)} of {planner.n} inputs)",
        "seconds": round(time.time() - t0, 2),
        "workers": ran.get("workers", workers),
        **({"executor": cfg.executor} if cfg.executor != "local" else {}),
    }
    assert summary["viewed"] + sum(tally.reasons.values()) == len(planned), "an input was lost"
    (folder / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    if planner.n == 0:
        raise NothingToPrepare(f"nothing to prepare: the sources gave no input at all; {folder} is left without DONE")
    if summary["viewed"] == 0 and tally.reasons["worker_crash"]:  # a broken environment, not a result to cache
        raise WorkersFailing(f"no input was viewed and {tally.reasons['worker_crash']} crashed their worker; "
                             f"{folder} is left without DONE (see its manifest.jsonl) and will be rebuilt")
    mark_done(folder, summary)
    if cache.out is None:
        publish(folder, final, replace=force)
    cache.remember(key)
    return {**summary, "cached": False}


def _lang_line(lang: str, c: dict) -> str:
    skipped = ", ".join(f"{k.split(':', 1)[1]} {n}" for k, n in sorted(c.items()) if k.startswith("skipped:"))
    kind = " (tokens only)" if c.get("tokens_only") else ""
    return (f"{lang}{kind}: {c.get('viewed', 0)} viewed, {c.get('tokens', 0):,} tokens, "
            f"{c.get('with_syntax_errors', 0)} with syntax errors" + (f", skipped {skipped}" if skipped else ""))


def format_summary(s: dict) -> str:
    lines = [
        f"codept prepare: {s['viewed']}/{s['inputs']} inputs viewed"
        + (f" ({s['tokens_only']} as tokens only: no grammar)" if s.get("tokens_only") else "")
        + (" (cached)" if s.get("cached") else f" in {s['seconds']}s with {s['workers']} workers"),
        f"  tokens {s['tokens']:,}  bytes {s['bytes']:,}  identifiers {s.get('idents', 0):,}  "
        f"bindings {s.get('bindings', 0):,}  definitions {s.get('functions', 0):,} "
        f"({s.get('documented', 0):,} documented)",
        "  skipped: " + (", ".join(f"{k} {v}" for k, v in s["skipped"].items()) or "none"),
        "  redacted: " + (", ".join(f"{k} {v}" for k, v in s.get("redacted", {}).items()) or "none"),
        "  per language: " + "; ".join(_lang_line(k, v) for k, v in s["per_lang"].items()),
        "  spans: " + ", ".join(f"{k} {v:,}" for k, v in s["spans"].items()),
        f"  -> {s['out']}",
    ]
    return "\n".join(lines)


def _error(e: Exception) -> int:
    import sys

    print(f"codept prepare: error: {e}", file=sys.stderr)
    return 2


def main(args) -> int:
    try:
        cfg = PrepareConfig(max_bytes=args.max_bytes, max_depth=args.max_depth, timeout=args.timeout,
                            workers=args.workers, num_shards=args.num_shards, shard_index=args.shard_index,
                            redact=not args.no_redact, dedup=not args.no_dedup, near_dedup=args.near_dedup,
                            worker_memory=int(getattr(args, "worker_memory", 0) or 0),
                            fields=bool(getattr(args, "fields", False)),
                            tokens_only=not getattr(args, "structure_only", False),
                            executor=getattr(args, "executor", "local"), ray_address=getattr(args, "ray_address", ""))
    except ValueError as e:  # a bad setting: the message names it
        return _error(e)
    try:
        summary = prepare([str(s) for s in args.sources], out=args.out, tokenizer_dir=args.tokenizer, cfg=cfg,
                          force=args.force)
    except (NothingToPrepare, ValueError) as e:  # ValueError: an unusable URL (its package, its scheme)
        return _error(e)
    print(format_summary(summary))
    return 0
