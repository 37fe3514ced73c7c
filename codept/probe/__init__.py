"""Code-search probes: (query, code) pairs from any corpus, decontaminated, and the runner that
scores a model on them (MRR, R@k) against BM25, random and any transformers encoder.

A probe folder holds:
  pairs.jsonl   one JSON object per pair (fields of :class:`Pair`), sorted by (lang, path, start)
  probe.json    how it was built: sources, per-language counts, every filter's drop counts,
                decontamination counts, skipped inputs with reasons
Submodules: ``build`` (pairs from views: filters, decontamination), ``query`` (query cleaning per language),
``split`` (the deterministic held-out split shared with training), ``run`` (encoders, pools,
metrics, reports).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path


@dataclass(frozen=True)
class Pair:
    lang: str
    path: str  # the source file (as recorded by prepare)
    name: str  # the function/method name
    query: str  # first sentence of the doc, cleaned per language
    code: str  # the definition with its doc removed
    start: int = 0  # char offset of the definition in its file (ordering, debugging)


def save_pairs(pairs: list[Pair], out: str | Path, meta: dict) -> Path:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "pairs.jsonl", "w", encoding="utf-8") as f:
        for p in pairs:
            f.write(json.dumps(asdict(p), ensure_ascii=False) + "\n")
    (out / "probe.json").write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n")
    return out


def load_pairs(probe_dir: str | Path, langs: list[str] | None = None) -> list[Pair]:
    path = Path(probe_dir) / "pairs.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{probe_dir} is not a probe folder (no pairs.jsonl); build one with `codept probe build`")
    names = {f.name for f in fields(Pair)}
    pairs = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            if langs is None or row["lang"] in langs:
                pairs.append(Pair(**{k: v for k, v in row.items() if k in names}))
    return pairs
