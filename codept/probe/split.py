"""The deterministic held-out split shared by training and the in-domain probe.

A file is held out when a hash of its normalised content falls below ``fraction``:
1. ``codept.data.dedup.content_hash``: sha256 of the text with newlines unified, trailing spaces and
   leading/trailing blank lines dropped (the same normalisation as exact dedup, so exact copies of a
   file are always on the same side);
2. ``u = blake2b(salt + "\\0" + that hash, 8 bytes) / 2**64``, uniform in [0, 1);
3. held out iff ``u < fraction``.
The decision depends on the content and the salt only: never on paths, input order, the number of
files, machines or workers, so every machine and every run (training, ``in_domain_probe``) agree;
a larger fraction holds out a superset of a smaller one's files (same salt).

``split_views(dataset, fraction)`` applies it to a prepared views dataset (``codept.prepare.load_views``),
reading only the ``text`` column in Arrow batches; ``in_domain_probe`` builds a probe from the
held-out views, decontaminated against the rest (codept.probe.build).
Cost: one sha256 pass over the text (~0.5-1 GB/s) plus the column read; memory: the two index
arrays (8 bytes per file). Not covered: near-copies (a file edited by one character lands anywhere;
run prepare with ``--near-dedup`` first if that matters), function-level leakage between files (the
probe's decontamination removes shared queries and bodies), and views prepared with different
redaction settings (the text that is hashed is the redacted one: keep the prepare settings equal).
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import numpy as np

from codept.data.dedup import content_hash

SALT = "codept-probe"


def _check(fraction: float) -> None:
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction={fraction} must be in [0, 1]")


def held_out_score(text: str | bytes, salt: str = SALT) -> float:
    """Uniform in [0, 1), a function of the normalised content and `salt` only."""
    h = hashlib.blake2b(f"{salt}\0{content_hash(text)}".encode(), digest_size=8).digest()
    return int.from_bytes(h, "big") / 2.0**64


def held_out(text: str | bytes, fraction: float, salt: str = SALT) -> bool:
    """True if the file with this content belongs to the held-out part (``fraction`` of files)."""
    _check(fraction)
    return held_out_score(text, salt) < fraction


def split_views(dataset, fraction: float, salt: str = SALT, batch_size: int = 1024) -> tuple[np.ndarray, np.ndarray]:
    """(train_indices, heldout_indices), int64 row indices of a prepared views dataset (any dataset
    with a ``text`` column), both ascending."""
    _check(fraction)
    held = np.zeros(len(dataset), dtype=bool)
    i = 0
    for t in dataset.select_columns(["text"]).with_format("arrow").iter(batch_size=batch_size):
        for text in t.column("text").to_pylist():
            held[i] = held_out_score(text, salt) < fraction
            i += 1
    idx = np.arange(len(dataset), dtype=np.int64)
    return idx[~held], idx[held]


def in_domain_probe(views_dataset, fraction: float, out: str | Path, *, salt: str = SALT, langs=None,
                    min_query_words: int = 3, min_body_lines: int = 3) -> dict:
    """A probe folder `out` from the held-out views of `views_dataset`, decontaminated against its
    training views (the rest); returns the meta written to ``probe.json``."""
    from codept.probe import save_pairs
    from codept.probe.build import Contamination, _decontaminated, _pairs_per_lang

    t0 = time.time()
    train, heldout = split_views(views_dataset, fraction, salt)
    pairs, per_lang = _pairs_per_lang(views_dataset.select(heldout), min_query_words=min_query_words,
                                      min_body_lines=min_body_lines, langs=langs)
    contamination = Contamination.from_views(views_dataset.select(train))
    excluded = [{"source": "training split", **contamination.summary()}]
    pairs, meta = _decontaminated(pairs, per_lang, contamination, excluded)
    meta = {
        "sources": sorted({str(Path(f["filename"]).parent) for f in getattr(views_dataset, "cache_files", [])}),
        "langs": sorted(langs) if langs else None,
        "settings": {"min_query_words": min_query_words, "min_body_lines": min_body_lines},
        "split": {"fraction": fraction, "salt": salt, "train": int(len(train)), "heldout": int(len(heldout))},
        **meta,
        "seconds": round(time.time() - t0, 2),
    }
    save_pairs(pairs, out, meta)
    return meta
