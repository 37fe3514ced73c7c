"""What the text readers yield, and the two helpers they share.

:class:`TextDoc` (a document), :class:`PairDoc` (a translation pair), :class:`Skip` (a file or the
entries of a file not kept, with a stable reason; ``count > 1`` aggregates entries), ``Item`` (any of
them); :func:`input_bytes` (a file's bytes within ``max_bytes``, ``.gz`` decompressed) and
:func:`_refusals` (one aggregated Skip for the includes or commands a reader refused). Below every
reader module (codept.text.readers, codept.text.man, codept.text.records), so each imports it
downward and none imports codept.text.readers.

Cost: frozen dataclasses; input_bytes reads at most ``max_bytes + 1`` bytes. Limits: input_bytes
reads the file whole (the line-at-a-time reading of jsonl/TSV is codept.text.records'); a refusal
Skip shows the first three refused names only.
"""

from __future__ import annotations

import gzip
import io
import zlib
from dataclasses import dataclass
from typing import Iterator

from codept.data.jobs import SkipFile, printable
from codept.data.sources import read_bytes


@dataclass(frozen=True)
class TextDoc:
    path: str
    lang: str
    text: str


@dataclass(frozen=True)
class PairDoc:
    path: str
    src_lang: str
    tgt_lang: str
    src: str
    tgt: str


@dataclass(frozen=True)
class Skip:
    path: str
    reason: str
    detail: str = ""
    count: int = 1


Item = TextDoc | PairDoc | Skip


def input_bytes(path: str, max_bytes: int, data: bytes | None = None) -> bytes:
    """A file's content, ``.gz`` decompressed, at most ``max_bytes + 1`` bytes (SkipFile too_large /
    unreadable as codept.data.sources.read_bytes). `data`: the file's bytes as read from disk by the
    caller (prepare-text reads each input once, in its main process); None: read them here."""
    if data is None:
        return read_bytes(path, max_bytes)
    if len(data) > max_bytes:
        raise SkipFile("too_large", f"{len(data)} bytes > max_bytes={max_bytes}")
    if not path.endswith(".gz"):
        return data
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as f:
            return f.read(max_bytes + 1)
    except (OSError, EOFError, zlib.error) as e:
        raise SkipFile("unreadable", f"{type(e).__name__}: {e}") from e


def _refusals(path: str, found: list[tuple[str, str]], reason: str, what: str) -> Iterator[Skip]:
    """One aggregated Skip for the includes (or commands) a reader refused: the count and the first few."""
    if found:
        shown = "; ".join(f"{name} {printable(arg)[:200]}".strip() for name, arg in found[:3])
        yield Skip(path, reason, f"{what}: {shown}" + (" ..." if len(found) > 3 else ""),
                   len(found))
