"""``codept prepare``: a corpus -> CodeViews on disk (Arrow shards) + a manifest of every input.

1. Discover inputs (codept.data.sources): files with a grammar's extension; everything else is a
   recorded skip. With no sources, the running interpreter's standard library.
2. Cache key = sha256 of the codept version and view-building source code, every grammar's fingerprint (language.toml + queries +
   wheel version), the tokenizer's JSON, the prepare settings and every input's path and content.
   A complete folder for that key is reused; anything else is rebuilt (never served stale).
3. Views are built in killable worker processes (codept.parallel): a file that hangs or crashes a
   worker becomes a skip with reason ``timeout``/``worker_crash``, the job goes on.
4. Views are written in path order (independent of the number of workers) to Arrow stream shards
   with the metadata of ``Dataset.save_to_disk``: ``datasets.load_from_disk(DIR)`` opens them
   memory-mapped (:func:`load_views`); then
   ``manifest.jsonl`` (one row per input: viewed or skipped with reason) and ``summary.json``;
   ``DONE`` is written last, so a killed job never leaves a folder that looks complete.
Cost: ~view building time / workers. Not covered yet (data-pipeline issue): jsonl/parquet/HF
inputs, dedup, redaction, natural-language inputs, multi-machine sharding.
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

import pyarrow as pa

from codept import __version__
from codept.data.sources import discover, read_source, stdlib_files
from codept.structure import grammar, kinds
from codept.structure.view import ARROW_SCHEMA, build_view
from codept.tokenizer import cache_dir, default_tokenizer_dir, load_tokenizer, tokenizer_fingerprint

SHARD_ROWS = 2000


@dataclass(frozen=True)
class PrepareConfig:
    max_bytes: int = 1_000_000  # larger files are skipped as too_large
    max_depth: int = 1500  # deeper syntax trees are skipped as too_deep
    parse_timeout: float = 10.0  # in-process parse bound (tree-sitter progress callback)
    timeout: float = 20.0  # whole-file bound enforced by killing the worker
    workers: int = 0  # 0 = all cores
    num_shards: int = 1  # split the inputs over this many machines by a stable hash of their path
    shard_index: int = 0  # the part this machine prepares

    def __post_init__(self):
        if not 0 <= self.shard_index < self.num_shards:
            raise ValueError(f"shard_index={self.shard_index} not in [0, num_shards={self.num_shards})")


def in_shard(path: str, num_shards: int, shard_index: int) -> bool:
    """Stable across machines and Python runs (sha1 of the path as given, not hash())."""
    if num_shards == 1:
        return True
    return int.from_bytes(hashlib.sha1(path.encode()).digest()[:8], "big") % num_shards == shard_index


def _init_worker(tokenizer_dir: str, cfg: dict):
    return load_tokenizer(tokenizer_dir), PrepareConfig(**cfg)


def _view_one(state, item):
    """Worker body: one (path, lang) -> ('ok', record, stats) or ('skip', reason, detail)."""
    tok, cfg = state
    path, lang = item
    try:
        text = read_source(path, cfg.max_bytes)
        v = build_view(path, lang, text, tok, timeout_s=cfg.parse_timeout, max_depth=cfg.max_depth)
    except grammar.SkipFile as e:
        return ("skip", e.reason, e.detail)
    stats = {
        "bytes": v.stats["bytes"],
        "tokens": len(v),
        "has_error": v.has_error,
        "spans": Counter(v.spans[:, 2].tolist()),
        "idents": len(v.idents),
        "bindings": len(set(v.idents[:, 4].tolist())),
        "functions": len(v.functions),
        "documented": int((v.functions[:, 5] >= 0).sum()),
    }
    return ("ok", v.to_record(), stats)


def cache_key(files: list[tuple[str, str]], tokenizer_dir: Path, cfg: PrepareConfig) -> str:
    h = hashlib.sha256()
    h.update(f"codept {__version__}\n".encode())
    # the code that turns a file into a view, so a development checkout never serves stale views
    pkg = Path(__file__).resolve().parent
    for f in sorted([*pkg.glob("structure/*.py"), pkg / "data" / "sources.py", pkg / "prepare.py"]):
        h.update(f.read_bytes())
    h.update(grammar.grammars_fingerprint().encode())
    h.update(tokenizer_fingerprint(load_tokenizer(tokenizer_dir)).encode())
    cfg_d = asdict(cfg)
    cfg_d.pop("workers")  # does not change the output
    h.update(json.dumps(cfg_d, sort_keys=True).encode())
    for path, lang in files:
        h.update(f"{path}\0{lang}\0".encode())
        try:
            with open(path, "rb") as f:
                h.update(hashlib.sha256(f.read(cfg.max_bytes + 1)).digest())
        except OSError as e:
            h.update(f"unreadable:{e.errno}".encode())
    return h.hexdigest()[:20]


def prepare(sources: list[str], out: Path | None = None, tokenizer_dir: Path | None = None,
            cfg: PrepareConfig = PrepareConfig(), force: bool = False, progress: bool = True) -> dict:
    """Build (or reuse) the views of `sources`; returns the summary dict (also in summary.json)."""
    t0 = time.time()
    if sources:
        files, skipped = discover(sources)
    else:
        files, skipped = [(str(p), "python") for p in stdlib_files()], []
    n_all = len(files)
    files = [f for f in files if in_shard(f[0], cfg.num_shards, cfg.shard_index)]
    skipped = [s for s in skipped if in_shard(s[0], cfg.num_shards, cfg.shard_index)]
    tokenizer_dir = Path(tokenizer_dir) if tokenizer_dir else default_tokenizer_dir()
    key = cache_key(files, tokenizer_dir, cfg)
    out = Path(out) if out else cache_dir() / "views" / key
    if (out / "DONE").is_file() and not force:
        old = json.loads((out / "summary.json").read_text())
        if old.get("cache_key") == key:
            old["cached"] = True
            return old
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)

    workers = cfg.workers or os.cpu_count() or 1
    from codept.parallel import isolated_map

    results: dict[int, tuple] = {}
    manifest = [None] * len(files)
    totals: Counter = Counter()
    spans: Counter = Counter()
    per_lang: dict[str, Counter] = {}
    shard, shard_rows, n_shards, next_row = None, 0, 0, 0
    buf: list[dict] = []
    bar = _progress(len(files), progress)

    def flush(end_shard: bool = False) -> None:
        nonlocal shard, shard_rows, n_shards
        if buf:
            if shard is None:
                shard = pa.ipc.new_stream(str(out / f"data-{n_shards:05d}.arrow.tmp"), ARROW_SCHEMA)
                n_shards += 1
            shard.write_table(pa.Table.from_pylist(buf, schema=ARROW_SCHEMA))
            shard_rows += len(buf)
            buf.clear()
        if shard is not None and (end_shard or shard_rows >= SHARD_ROWS):
            shard.close()
            shard, shard_rows = None, 0

    def write(rec: dict) -> None:
        buf.append(rec)
        if len(buf) >= 64:
            flush()

    for idx, ok, value in isolated_map(_view_one, files, workers=workers, timeout=cfg.timeout,
                                       init=_init_worker, init_args=(str(tokenizer_dir), asdict(cfg))):
        path, lang = files[idx]
        if not ok:  # the worker crashed, hung or raised: a recorded skip, never a crash of the job
            value = ("skip", value[0], value[1].splitlines()[0] if value[1] else "")
        results[idx] = value
        bar(1)
        while next_row in results:  # write in input order, whatever order workers finish in
            status, a, b = results.pop(next_row)
            path, lang = files[next_row]
            lc = per_lang.setdefault(lang, Counter())
            if status == "ok":
                write(a)
                st = b
                manifest[next_row] = {"path": path, "lang": lang, "status": "viewed",
                                      "bytes": st["bytes"], "tokens": st["tokens"], "has_error": st["has_error"]}
                lc["viewed"] += 1
                lc["tokens"] += st["tokens"]
                lc["bytes"] += st["bytes"]
                lc["with_syntax_errors"] += st["has_error"]
                for k in ("idents", "bindings", "functions", "documented"):
                    totals[k] += st[k]
                spans.update(st["spans"])
            else:
                manifest[next_row] = {"path": path, "lang": lang, "status": "skipped", "reason": a, "detail": b}
                lc[f"skipped:{a}"] += 1
            next_row += 1
    flush(end_shard=True)
    bar(0, close=True)

    rows = [m for m in manifest] + [
        {"path": p, "lang": None, "status": "skipped", "reason": r, "detail": ""} for p, r in skipped
    ]
    with open(out / "manifest.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    elapsed = time.time() - t0
    n_bytes = sum(c["bytes"] for c in per_lang.values())
    summary = {
        "cache_key": key,
        "out": str(out),
        "tokenizer": str(tokenizer_dir),
        "inputs": len(rows),
        "viewed": sum(c["viewed"] for c in per_lang.values()),
        "skipped": dict(Counter(r["reason"] for r in rows if r["status"] == "skipped")),
        "per_lang": {k: dict(v) for k, v in sorted(per_lang.items())},
        "tokens": sum(c["tokens"] for c in per_lang.values()),
        "bytes": n_bytes,
        "spans": {list(kinds.SPAN_KINDS)[k]: n for k, n in sorted(spans.items())},
        **dict(totals),
        "shards": n_shards,
        "shard": f"{cfg.shard_index} of {cfg.num_shards} ({len(files)} of {n_all} files)",
        "seconds": round(elapsed, 2),
        "workers": workers,
    }
    assert summary["viewed"] + sum(summary["skipped"].values()) == summary["inputs"]
    _write_hf_metadata(out, n_shards, key)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "DONE").write_text(key + "\n")
    summary["cached"] = False
    return summary


def _write_hf_metadata(out: Path, n_shards: int, fingerprint: str) -> None:
    """Name the shards and write state.json / dataset_info.json as ``Dataset.save_to_disk`` does,
    so ``datasets.load_from_disk(out)`` opens the folder (memory-mapped, no copy)."""
    import datasets

    names = []
    for i in range(n_shards):
        name = f"data-{i:05d}-of-{n_shards:05d}.arrow"
        os.replace(out / f"data-{i:05d}.arrow.tmp", out / name)
        names.append({"filename": name})
    if not n_shards:  # an empty dataset still loads
        name = "data-00000-of-00001.arrow"
        with pa.ipc.new_stream(str(out / name), ARROW_SCHEMA) as w:
            w.write_table(ARROW_SCHEMA.empty_table())
        names.append({"filename": name})
    datasets.DatasetInfo(features=datasets.Features.from_arrow_schema(ARROW_SCHEMA)).write_to_directory(str(out))
    state = {"_data_files": names, "_fingerprint": fingerprint, "_format_columns": None, "_format_kwargs": {},
             "_format_type": None, "_output_all_columns": False, "_split": None}
    (out / "state.json").write_text(json.dumps(state, indent=2) + "\n")


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


def _progress(total: int, enabled: bool):
    from tqdm import tqdm

    bar = tqdm(total=total, unit="file", disable=not enabled, mininterval=1.0)

    def update(n: int, close: bool = False) -> None:
        bar.update(n)
        if close:
            bar.close()

    return update


def format_summary(s: dict) -> str:
    lines = [
        f"codept prepare: {s['viewed']}/{s['inputs']} files viewed"
        + (" (cached)" if s.get("cached") else f" in {s['seconds']}s with {s['workers']} workers"),
        f"  tokens {s['tokens']:,}  bytes {s['bytes']:,}  identifiers {s.get('idents', 0):,}  "
        f"bindings {s.get('bindings', 0):,}  definitions {s.get('functions', 0):,} "
        f"({s.get('documented', 0):,} documented)",
        "  skipped: " + (", ".join(f"{k} {v}" for k, v in sorted(s["skipped"].items())) or "none"),
        "  per language: " + "; ".join(
            f"{k}: {v.get('viewed', 0)} viewed, {v.get('tokens', 0):,} tokens, {v.get('with_syntax_errors', 0)} with syntax errors"
            for k, v in s["per_lang"].items()),
        "  spans: " + ", ".join(f"{k} {v:,}" for k, v in s["spans"].items()),
        f"  -> {s['out']}",
    ]
    return "\n".join(lines)


def main(args) -> int:
    cfg = PrepareConfig(max_bytes=args.max_bytes, max_depth=args.max_depth, timeout=args.timeout,
                        workers=args.workers, num_shards=args.num_shards, shard_index=args.shard_index)
    summary = prepare([str(s) for s in args.sources], out=args.out, tokenizer_dir=args.tokenizer, cfg=cfg,
                      force=args.force)
    print(format_summary(summary))
    return 0
