"""``codept prepare``: a corpus -> CodeViews on disk (a Hugging Face dataset) + a manifest of every input.

1. Inputs (codept.data.records): files, directories, globs, jsonl/parquet rows, saved HF datasets;
   with no sources, the running interpreter's standard library. Every input is a Record (to view)
   or a Skip with a reason, in input order.
2. Plan (main process, one streaming pass): the bytes of every record are hashed for the cache key;
   with ``--num-shards N`` a record belongs to shard ``sha1(normalised content) mod N`` (so exact
   copies land on one machine and exact dedup stays exact across machines); exact duplicates
   (normalised content hash, codept.data.dedup) are marked here, before any work is spent on them.
3. Cache key = sha256 of the codept version and view-building source code, every grammar's
   fingerprint (language.toml + queries + wheel version), the tokenizer's JSON, the settings and every
   input's origin, language and content. A complete folder for the key is reused; anything else is
   rebuilt (never served stale).
4. Views are built in killable worker processes (codept.parallel): read + filters (size, binary,
   UTF-8, empty) -> redaction of secrets/PII (codept.data.redact, on by default) -> optional MinHash
   signature -> build_view. A file that hangs or crashes a worker becomes a skip (``timeout`` /
   ``worker_crash``); the job goes on. Near-duplicates are decided in input order in the main
   process, so the result does not depend on the number of workers.
5. Output, in input order: Arrow shards with ``Dataset.save_to_disk`` metadata
   (``datasets.load_from_disk(DIR)`` opens them memory-mapped; :func:`load_views`),
   ``manifest.jsonl`` (one row per input, streamed: viewed or skipped with reason, redaction counts),
   ``summary.json``, and ``DONE`` last, so a killed job never leaves a folder that looks complete.
Why not ``datasets.map(num_proc)``: it can neither kill a hung worker nor survive one that segfaults,
and a parser fed hostile input can do both. Cost: ~ view building / workers + one read of the
inputs for the plan; memory bounded by the plan's per-input hashes, not by the corpus.
Not covered: near-dedup across machines (each shard dedups its own records).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator

import pyarrow as pa

from codept import __version__
from codept.data.jobs import SHARD_ROWS, ShardWriter, progress as progress_bar  # noqa: F401
from codept.data.dedup import ExactDedup, NearDedup, content_hash, minhash_signature
from codept.data.records import Record, Skip, iter_records, record_text
from codept.data.redact import redact
from codept.data.sources import stdlib_files
from codept.structure import grammar, kinds
from codept.structure.view import ARROW_SCHEMA, build_view
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

    def __post_init__(self):
        if not 0 <= self.shard_index < self.num_shards:
            raise ValueError(f"shard_index={self.shard_index} not in [0, num_shards={self.num_shards})")
        if not 0.0 <= self.near_dedup < 1.0:
            raise ValueError(f"near_dedup={self.near_dedup} must be in [0, 1) (0 = off)")


def shard_of(key: str, num_shards: int) -> int:
    """Stable across machines and Python runs (sha1, not hash())."""
    return int.from_bytes(hashlib.sha1(key.encode()).digest()[:8], "big") % num_shards


def _items(sources: list[str]) -> Iterator[Record | Skip]:
    return iter_records(sources if sources else [str(p) for p in stdlib_files()])


def _raw(rec: Record, max_bytes: int) -> bytes | None:
    if rec.content is None:
        try:
            with open(rec.path, "rb") as f:
                return f.read(max_bytes + 1)
        except OSError:
            return None
    return rec.content if isinstance(rec.content, bytes) else rec.content.encode("utf-8", "surrogatepass")


# -- workers -------------------------------------------------------------------------------------


def _init_worker(tokenizer_dir: str, cfg: dict):
    return load_tokenizer(tokenizer_dir), PrepareConfig(**cfg)


def _view_one(state, item):
    """Worker body: (index, Record) -> (index, 'ok', record, stats) or (index, 'skip', reason, detail)."""
    tok, cfg = state
    idx, rec = item
    try:
        text = record_text(rec, cfg.max_bytes)
        redacted: Counter = Counter()
        if cfg.redact:
            text, redacted = redact(text)
        sig = minhash_signature(text, cfg.num_perm, cfg.shingle) if cfg.near_dedup else None
        v = build_view(rec.path, rec.lang, text, tok, max_depth=cfg.max_depth)
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
    }
    return idx, "ok", v.to_record(), stats


# -- output --------------------------------------------------------------------------------------


def load_views(*outs: str | Path):
    """Prepared views as one memory-mapped ``datasets.Dataset`` (rows: CodeView.to_record()).
    Several folders (the shards of a multi-machine prepare) are read as one dataset."""
    import datasets

    parts = []
    for out in outs:
        out = Path(out)
        if not (out / "DONE").is_file():
            raise FileNotFoundError(f"{out} is not a complete prepared dataset (no DONE marker)")
        parts.append(datasets.load_from_disk(str(out)))
    return parts[0] if len(parts) == 1 else datasets.concatenate_datasets(parts)


# -- the job -------------------------------------------------------------------------------------


def _code_fingerprint() -> bytes:
    """The code that turns an input into a view, so a development checkout never serves stale views."""
    pkg = Path(__file__).resolve().parent
    h = hashlib.sha256()
    data = [pkg / "data" / f"{m}.py" for m in ("sources", "records", "redact", "dedup")]
    for f in sorted([*pkg.glob("structure/*.py"), *data, pkg / "prepare.py", pkg / "tokenizer.py"]):
        h.update(f.read_bytes())
    return h.digest()


def _plan(sources: list[str], cfg: PrepareConfig, tokenizer_dir: Path) -> tuple[str, dict, int]:
    """One pass over the inputs: (cache key, {index: duplicate-of origin}, number of inputs).
    Inputs of other shards are left out of both (their index is simply never planned)."""
    h = hashlib.sha256()
    h.update(f"codept {__version__}\n".encode())
    h.update(_code_fingerprint())
    h.update(grammar.grammars_fingerprint().encode())
    h.update(tokenizer_fingerprint(load_tokenizer(tokenizer_dir)).encode())
    cfg_d = asdict(cfg)
    cfg_d.pop("workers")  # does not change the output
    h.update(json.dumps(cfg_d, sort_keys=True).encode())
    exact = ExactDedup()
    dups: dict[int, str] = {}
    n = 0
    for i, item in enumerate(_items(sources)):
        n = i + 1
        if isinstance(item, Skip):
            h.update(f"skip\0{item.origin}\0{item.reason}\0".encode())
            continue
        raw = _raw(item, cfg.max_bytes)
        h.update(f"{item.origin}\0{item.lang}\0".encode())
        h.update(hashlib.sha256(raw).digest() if raw is not None else b"unreadable")
        if cfg.dedup and raw is not None and len(raw) <= cfg.max_bytes and raw.strip():  # empty: own reason
            kept = exact.check_hash(content_hash(raw), item.origin)
            if kept is not None:
                dups[i] = kept
    return h.hexdigest()[:20], dups, n


def _in_shard(item: Record | Skip, cfg: PrepareConfig) -> bool:
    if cfg.num_shards == 1:
        return True
    if isinstance(item, Skip):
        return shard_of(item.origin, cfg.num_shards) == cfg.shard_index
    raw = _raw(item, cfg.max_bytes)
    return shard_of(content_hash(raw) if raw is not None else item.origin, cfg.num_shards) == cfg.shard_index


def prepare(sources: list[str], out: Path | None = None, tokenizer_dir: Path | None = None,
            cfg: PrepareConfig = PrepareConfig(), force: bool = False, progress: bool = True) -> dict:
    """Build (or reuse) the views of `sources`; returns the summary dict (also in summary.json)."""
    t0 = time.time()
    tokenizer_dir = Path(tokenizer_dir) if tokenizer_dir else default_tokenizer_dir()
    key, dups, n_inputs = _plan(sources, cfg, tokenizer_dir)
    out = Path(out) if out else cache_dir() / "views" / key
    if (out / "DONE").is_file() and not force:
        old = json.loads((out / "summary.json").read_text())
        if old.get("cache_key") == key:
            old["cached"] = True
            return old
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)

    from codept.parallel import WorkersFailing, isolated_map

    workers = cfg.workers or os.cpu_count() or 1
    near = NearDedup(cfg.near_dedup, cfg.num_perm, cfg.shingle) if cfg.near_dedup else None
    writer = ShardWriter(out, ARROW_SCHEMA)
    manifest = open(out / "manifest.jsonl", "w")
    results: dict[int, tuple] = {}  # finished, waiting for their turn in input order
    meta: dict[int, tuple[str, str, str]] = {}  # index -> (origin, path, lang) of in-flight inputs
    totals: Counter = Counter()
    reasons: Counter = Counter()
    redacted: Counter = Counter()
    spans: Counter = Counter()
    per_lang: dict[str, Counter] = {}
    planned: list[int] = []  # indices of this shard, in input order
    sent: list[int] = []  # input index of every record handed to the workers, in order
    bar = progress_bar(n_inputs, progress)

    def work() -> Iterator[tuple[int, Record]]:
        """Records to view; skips, duplicates and other shards' inputs are settled on the way."""
        for i, item in enumerate(_items(sources)):
            if not _in_shard(item, cfg):
                bar(1)
                continue
            planned.append(i)
            if isinstance(item, Skip):
                meta[i] = (item.origin, item.path, "")
                results[i] = ("skip", item.reason, item.detail)
            elif i in dups:
                meta[i] = (item.origin, item.path, item.lang)
                results[i] = ("skip", "duplicate", f"same content as {dups[i]}")
            else:
                meta[i] = (item.origin, item.path, item.lang)
                sent.append(i)
                yield i, item

    def settle(i: int, res: tuple) -> None:
        origin, path, lang = meta.pop(i)
        row = {"origin": origin, "path": path, "lang": lang or None}
        status = res[0]
        if status == "ok" and near is not None:
            kept = near.check_signature(res[2]["signature"], origin)
            if kept is not None:
                status, res = "skip", ("skip", "near_duplicate", f"similar to {kept}")
        lc = per_lang.setdefault(lang or "unknown", Counter())
        if status == "ok":
            rec, st = res[1], res[2]
            writer.write(rec)
            row.update(status="viewed", bytes=st["bytes"], tokens=st["tokens"], has_error=st["has_error"])
            if st["redacted"]:
                row["redacted"] = st["redacted"]
                redacted.update(st["redacted"])
            lc["viewed"] += 1
            lc["tokens"] += st["tokens"]
            lc["bytes"] += st["bytes"]
            lc["with_syntax_errors"] += st["has_error"]
            for k in ("idents", "bindings", "functions", "documented"):
                totals[k] += st[k]
            spans.update(st["spans"])
        else:
            row.update(status="skipped", reason=res[1], detail=res[2])
            reasons[res[1]] += 1
            lc[f"skipped:{res[1]}"] += 1
        manifest.write(json.dumps(row) + "\n")
        bar(1)

    pos = 0  # next index of `planned` to settle

    def drain() -> None:
        nonlocal pos
        while pos < len(planned) and planned[pos] in results:
            settle(planned[pos], results.pop(planned[pos]))
            pos += 1

    for k, ok, value in isolated_map(_view_one, work(), workers=workers, timeout=cfg.timeout,
                                     init=_init_worker, init_args=(str(tokenizer_dir), asdict(cfg))):
        if ok:
            i, status, a, b = value
            results[i] = (status, a, b) if status == "skip" else ("ok", a, b)
        else:  # the worker crashed, hung or raised: a recorded skip, never a crash of the job
            results[sent[k]] = ("skip", value[0], value[1].splitlines()[0] if value[1] else "")
        drain()
    drain()  # inputs settled without a worker after the last result
    manifest.close()
    n_shards = writer.close(key)
    bar(0, close=True)

    viewed = sum(c["viewed"] for c in per_lang.values())
    summary = {
        "cache_key": key,
        "out": str(out),
        "tokenizer": str(tokenizer_dir),
        "inputs": len(planned),
        "viewed": viewed,
        "skipped": dict(sorted(reasons.items())),
        "redacted": dict(sorted(redacted.items())),
        "per_lang": {k: dict(v) for k, v in sorted(per_lang.items())},
        "tokens": sum(c["tokens"] for c in per_lang.values()),
        "bytes": sum(c["bytes"] for c in per_lang.values()),
        "spans": {list(kinds.SPAN_KINDS)[k]: n for k, n in sorted(spans.items())},
        **dict(totals),
        "shards": n_shards,
        "shard": f"{cfg.shard_index} of {cfg.num_shards} ({len(planned)} of {n_inputs} inputs)",
        "seconds": round(time.time() - t0, 2),
        "workers": workers,
    }
    assert viewed + sum(reasons.values()) == len(planned), "an input was lost"
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    if viewed == 0 and reasons["worker_crash"]:  # a broken environment, not a result worth caching
        raise WorkersFailing(f"no input was viewed and {reasons['worker_crash']} crashed their worker; "
                             f"{out} is left without DONE (see its manifest.jsonl) and will be rebuilt")
    (out / "DONE").write_text(key + "\n")
    summary["cached"] = False
    return summary


def _lang_line(lang: str, c: dict) -> str:
    skipped = ", ".join(f"{k.split(':', 1)[1]} {n}" for k, n in sorted(c.items()) if k.startswith("skipped:"))
    return (f"{lang}: {c.get('viewed', 0)} viewed, {c.get('tokens', 0):,} tokens, "
            f"{c.get('with_syntax_errors', 0)} with syntax errors" + (f", skipped {skipped}" if skipped else ""))


def format_summary(s: dict) -> str:
    lines = [
        f"codept prepare: {s['viewed']}/{s['inputs']} inputs viewed"
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


def main(args) -> int:
    cfg = PrepareConfig(max_bytes=args.max_bytes, max_depth=args.max_depth, timeout=args.timeout,
                        workers=args.workers, num_shards=args.num_shards, shard_index=args.shard_index,
                        redact=not args.no_redact, dedup=not args.no_dedup, near_dedup=args.near_dedup)
    summary = prepare([str(s) for s in args.sources], out=args.out, tokenizer_dir=args.tokenizer, cfg=cfg,
                      force=args.force)
    print(format_summary(summary))
    return 0
