"""Deduplication: exact (normalised content hash) and near-duplicate (MinHash LSH, datasketch).

Both keep the FIRST occurrence in stream order and report later copies, naming the origin of the kept
copy, so a manifest can say ``duplicate`` / ``near_duplicate`` of what. Stream order is
deterministic (``codept.data.records``), so the kept copy is too.

Exact (``ExactDedup``, always available):
1. ``normalize``: newlines unified to ``\\n``, trailing whitespace stripped from every line, leading
   and trailing blank lines dropped (indentation and inner blank lines kept: they can matter).
2. ``content_hash`` = sha256 of the normalised UTF-8 text (hex); ``ExactDedup`` remembers the first
   16 bytes of each (collision chance ~n^2 / 2^129: none in practice) with the kept copy's origin.
Cost: one pass over the text (~100 MB/s); memory ~190 bytes per unique document with a 45-character
origin (measured; 10M documents ~2 GB). For larger corpora shard by ``content_hash``: copies then
land in the same shard and exact dedup stays exact across shards.

Near-duplicate (``NearDedup``, needs the optional ``datasketch`` package: ``pip install codept[dedup]``):
1. ``words``: identifier-split, lower-cased words: ``getUserName``, ``get_user_name`` and
   ``GetUserName`` all give ``get user name``; digits are words; punctuation and whitespace are
   dropped, so re-indenting or reformatting changes nothing.
2. Shingles: every run of ``shingle`` (5) consecutive words; a document shorter than that is one
   shingle. A document with no word at all is never a near-duplicate (exact dedup covers it).
3. A MinHash signature of the shingle set (``num_perm`` permutations, fixed ``seed``: the same
   text gives the same signature in every process and run with the same datasketch version).
4. ``MinHashLSH`` (bands x rows chosen by datasketch for ``threshold``) returns candidate earlier
   documents; a candidate counts only if the signatures' estimated Jaccard similarity is
   >= ``threshold`` (LSH alone lets some lower pairs through). The most similar candidate, ties to
   the earliest, is reported; a document that is not a near-duplicate is inserted.
Cost: ~1 sha1 hash per shingle (~1 word) plus a (num_perm x shingles) min over uint32/uint64 arrays:
~1-3 MB/s of code per core for the signature (``minhash_signature`` is a pure function, run it in
worker processes and pass the signature to ``NearDedup.check_signature`` in the main process);
LSH query/insert ~50 us. Memory ~3 KB per kept document (band tables, the stored signature and the
origin; measured with datasketch 2.0): 1M documents ~3 GB. Beyond that use datasketch's Redis
storage or a dedicated tool (e.g. text-dedup).
Does NOT cover: near-duplicates across separately prepared shards (each shard dedups on its own),
chains (a document is compared with KEPT documents only: with A kept and B dropped as its near-copy,
C near B but not near A is kept), semantic
clones (renamed identifiers with different words, reordered functions beyond shingle overlap), and
it is probabilistic: a pair near the threshold may go either way (but always the same way for the
same inputs and datasketch version).
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections import Counter

import numpy as np

# Letter/digit runs; ASCII runs are split further at case changes (HTTPServer -> HTTP Server,
# getX -> get X) and digits; a run with non-ASCII letters (café, 变量) stays one word.
RUN_RE = re.compile(r"[^\W_]+")
SUBWORD_RE = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


def _text(content: str | bytes) -> str:
    return content.decode("utf-8", "replace") if isinstance(content, bytes) else content


def normalize(content: str | bytes) -> str:
    """Unify newlines, strip trailing whitespace per line, drop leading/trailing blank lines and a
    leading byte-order mark."""
    text = _text(content).removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    return "\n".join(line.rstrip() for line in text.split("\n")).strip("\n")


def content_hash(content: str | bytes) -> str:
    """sha256 (hex) of the normalised text: equal for copies differing only in newlines, trailing
    space or a byte-order mark."""
    return hashlib.sha256(normalize(content).encode("utf-8", "surrogatepass")).hexdigest()


class ExactDedup:
    """First occurrence of each normalised content is kept; ``check`` names the kept copy of a repeat."""

    def __init__(self) -> None:
        self._first: dict[bytes, str] = {}
        self.counts: Counter = Counter()  # kept, duplicate

    def check_hash(self, digest: str, origin: str = "") -> str | None:
        """``digest`` from ``content_hash``: None if new (now remembered), else the kept copy's origin."""
        key = bytes.fromhex(digest)[:16]
        first = self._first.get(key)
        if first is None:
            self._first[key] = origin
            self.counts["kept"] += 1
            return None
        self.counts["duplicate"] += 1
        return first

    def check(self, content: str | bytes, origin: str = "") -> str | None:
        return self.check_hash(content_hash(content), origin)

    def seen(self, content: str | bytes) -> bool:
        """True if an equal (normalised) content came before; the first occurrence gives False."""
        return self.check(content) is not None


def words(content: str | bytes) -> list[str]:
    """Identifier-split, lower-cased words of the text (punctuation and whitespace dropped)."""
    out: list[str] = []
    for run in RUN_RE.findall(_text(content)):
        out.extend(SUBWORD_RE.findall(run) if run.isascii() else (run,))
    return [w.lower() for w in out]


def shingles(content: str | bytes, k: int = 5) -> set[bytes]:
    """The set of k-word shingles (one shingle if fewer than k words, none if no words)."""
    w = words(content)
    if len(w) <= k:
        return {" ".join(w).encode()} if w else set()
    return {" ".join(w[i:i + k]).encode() for i in range(len(w) - k + 1)}


@functools.lru_cache(maxsize=8)
def _template(num_perm: int, seed: int):
    from datasketch import MinHash

    return MinHash(num_perm=num_perm, seed=seed)


def minhash_signature(content: str | bytes, num_perm: int = 128, shingle: int = 5, seed: int = 1) -> np.ndarray | None:
    """(num_perm,) MinHash values of the shingle set, or None for a text without words. Pure and
    deterministic: safe to compute in worker processes."""
    sh = shingles(content, shingle)
    if not sh:
        return None
    m = _template(num_perm, seed).copy()
    m.update_batch(sorted(sh))
    return np.asarray(m.hashvalues).copy()


class NearDedup:
    """MinHash LSH near-duplicate filter; ``check`` names the kept copy a document nearly repeats."""

    def __init__(self, threshold: float = 0.85, num_perm: int = 128, shingle: int = 5, seed: int = 1):
        try:
            from datasketch import MinHashLSH
        except ImportError as e:
            raise ImportError("near-duplicate removal needs datasketch: pip install 'codept[dedup]'") from e
        if not 0.0 < threshold < 1.0:
            raise ValueError(f"threshold={threshold} must be in (0, 1)")
        if shingle < 1 or num_perm < 2:
            raise ValueError(f"shingle={shingle} must be >= 1 and num_perm={num_perm} >= 2")
        self.threshold, self.num_perm, self.shingle, self.seed = threshold, num_perm, shingle, seed
        self._lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
        self._sigs: list[np.ndarray] = []  # kept signatures, by key
        self._origins: list[str] = []
        self.counts: Counter = Counter()  # kept, near_duplicate, no_words

    def signature(self, content: str | bytes) -> np.ndarray | None:
        return minhash_signature(content, self.num_perm, self.shingle, self.seed)

    def check_signature(self, sig: np.ndarray | None, origin: str = "") -> str | None:
        """None if new (now indexed) or word-less, else the origin of the most similar kept copy."""
        if sig is None:
            self.counts["no_words"] += 1
            return None
        if len(sig) != self.num_perm:
            raise ValueError(f"signature has {len(sig)} values, this NearDedup uses num_perm={self.num_perm}")
        m = self._minhash(sig)
        best, best_j = None, -1.0
        for key in sorted(self._lsh.query(m)):
            j = float(np.mean(self._sigs[key] == sig))  # estimated Jaccard similarity
            if j >= self.threshold and j > best_j:
                best, best_j = key, j
        if best is not None:
            self.counts["near_duplicate"] += 1
            return self._origins[best]
        self._lsh.insert(len(self._sigs), m)
        self._sigs.append(sig)
        self._origins.append(origin)
        self.counts["kept"] += 1
        return None

    def check(self, content: str | bytes, origin: str = "") -> str | None:
        return self.check_signature(self.signature(content), origin)

    def seen(self, content: str | bytes) -> bool:
        """True if a kept earlier document is within the Jaccard threshold of this one."""
        return self.check(content) is not None

    def _minhash(self, sig: np.ndarray):
        from datasketch import MinHash

        t = _template(self.num_perm, self.seed)
        kw = {"scheme": t.scheme} if hasattr(t, "scheme") else {}  # datasketch >= 2.0
        return MinHash(num_perm=self.num_perm, seed=self.seed, hashvalues=sig, permutations=t.permutations, **kw)
