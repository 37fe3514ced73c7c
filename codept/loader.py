"""Your own training loop on codept's data: a torch IterableDataset, an HF ``datasets`` adapter and a
collator with the per-document 4-D attention mask that Hugging Face models need.

    ds = packed_dataset(views, "mlm:1,syntax_span:1", vocab, seq_len=256)   # this rank's stream
    loader = DataLoader(ds, batch_size=16, num_workers=2, collate_fn=HFCollator("mlm"))
    for batch in loader: BertForMaskedLM(...)(**batch).loss.backward()

1. :func:`packed_dataset` builds the recipes' stream (codept.train.loop.streams / packed: the same
   mixture rule, objectives and packing) for ONE rank: ``rank``/``world`` given, else
   torch.distributed's when it is initialised, else the launcher's ``RANK``/``WORLD_SIZE``, else 0/1.
   Ranks read disjoint buffers of one stream (codept.data.stream, 5: rank r of n packs buffers
   r, r + n, ...; below, "buffer" counts this rank's buffers).
2. :class:`PackedDataset` (a torch IterableDataset over a PackedStream) shards by WHOLE buffers
   over DataLoader workers: worker w of W packs buffers start + w, start + w + W, ... (each buffer
   is a pure function of its index), so the union over workers x ranks holds every row of the
   ranks' streams exactly once; with ``buffers=N`` it ends after buffers [start, start + N).
   Every iteration starts again at buffer ``start`` (the same rows and masks): for more data, a
   later ``start`` or no ``buffers`` limit, not a second pass.
   Rows are dicts of NumPy arrays (codept.data.pack); batch them with codept.data.collate.collate
   (codept's own model) or :class:`HFCollator`.
3. :func:`hf_dataset`: the same rows as a ``datasets.IterableDataset`` (finite: ``buffers``), in
   ``shards`` shards (shard s = buffers k with k mod shards = s), which datasets hands to DataLoader
   workers; a worker iterates its shards one after the other, hence finite.
4. :class:`HFCollator`: rows -> ``input_ids``, ``position_ids`` (restarting per document),
   ``token_type_ids`` (when the rows carry types), ``attention_mask`` (B, 1, T, T) and ``labels``.
   The mask is codept's one rule (codept.model.transformer.visibility: same document, and key before
   query or in the prefix; a padding query sees only itself, so no softmax row is empty), as an
   additive float mask (0 visible, dtype min hidden; eager and SDPA attention both take it) or a
   bool mask (True visible; SDPA). transformers passes a 4-D mask through unchanged. A 2-D mask
   (``segment_ids > 0``) would let every token see every document of its row.
   ``labels`` = ``labels.<label>``; for a causal head (HEADS[label] with causal=True, e.g. "lm")
   the first token of every document is set to -100, because an HF causal LM shifts the labels
   itself and would otherwise predict a document's first token from the previous document.
Cost: packing as in the recipes; the collator builds a (B, T, T) mask per batch (T = 512: 1 MB per
row in float32). Not covered: resuming a DataLoader mid-run (PackedStream.state_dict with
PackedStream.iter_loader does that for codept's loop; here ``start`` restarts at a buffer); objectives whose
batches need more than these columns (pointer and pair heads, GLM's 2-D positions, XLNet's orders
are codept-model only: HFCollator refuses rows with ``block_positions``/``order``/``langs``).
"""

from __future__ import annotations

import os
from typing import Iterator

import numpy as np
import torch
import torch.utils.data as tud

from codept.data.collate import collate
from codept.data.example import IGNORE
from codept.data.stream import PackedStream

HF_UNSUPPORTED = ("block_positions", "order", "langs")  # columns a BERT-style HF model has no input for


def world_of(rank: int | None = None, world: int | None = None) -> tuple[int, int]:
    """(rank, world): the given ones, else torch.distributed's, else RANK / WORLD_SIZE, else (0, 1)."""
    if rank is not None or world is not None:
        if rank is None or world is None:
            raise ValueError(f"rank={rank}, world={world}: give both or neither")
        return int(rank), int(world)
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return int(os.environ.get("RANK", "0") or 0), int(os.environ.get("WORLD_SIZE", "1") or 1)


class PackedDataset(tud.IterableDataset):
    """A rank's PackedStream as a torch IterableDataset, sharded over DataLoader workers by buffer
    (module docstring, 2). ``buffers``: None = endless, N = buffers [start, start + N) only."""

    def __init__(self, stream: PackedStream, buffers: int | None = None, start: int = 0,
                 heads: tuple[str, ...] = ()):
        if buffers is not None and buffers < 1:
            raise ValueError(f"buffers={buffers}: give None (endless) or a count >= 1")
        if start < 0:
            raise ValueError(f"start={start}: a buffer index must be >= 0")
        self.stream, self.buffers, self.start = stream, buffers, start
        self.heads = tuple(heads)  # the model heads the rows' labels train (codept.objectives.HEADS_OF)

    def __iter__(self) -> Iterator[dict]:
        info = tud.get_worker_info()
        w, nw = (info.id, info.num_workers) if info else (0, 1)
        return _rows(self.stream, _buffer_range(self.start + w, self._end(), nw))

    def _end(self) -> int | float:
        return float("inf") if self.buffers is None else self.start + self.buffers


def _buffer_range(start: int, stop: int | float, step: int) -> Iterator[int]:
    """start, start + step, ... below stop (which may be infinite)."""
    k = start
    while k < stop:
        yield k
        k += step


def _rows(stream: PackedStream, ks) -> Iterator[dict]:
    """The rows of this rank's buffers ``ks`` (positions in its plan) of ``stream``, in order."""
    for k in ks:
        yield from stream.rows_of_buffer(stream.buffer_at(k))


def packed_dataset(views, mixture: str, vocab, seq_len: int, *, seed: int = 0, buffer: int = 256,
                   objectives: dict | None = None, rank: int | None = None, world: int | None = None,
                   buffers: int | None = None, start: int = 0, long: str = "split",
                   rows: str = "packed") -> PackedDataset:
    """The recipes' packed stream for this rank as a :class:`PackedDataset` (module docstring, 1).
    ``views``: prepared views (a folder, Views, or {corpus: views} for ``objective@corpus`` keys);
    ``mixture``: ``"mlm:1,syntax_span:2"``; ``objectives``: {name: {field: value}} overrides."""
    stream, heads = _stream(views, mixture, vocab, seq_len, seed, buffer, objectives, rank, world, long, rows)
    return PackedDataset(stream, buffers=buffers, start=start, heads=heads)


def _stream(views, mixture, vocab, seq_len, seed, buffer, objectives, rank, world, long, rows):
    """(this rank's PackedStream, the heads the mixture trains)."""
    from types import SimpleNamespace

    from codept.views import open_views
    from codept.train import loop as L  # the recipes' mixture rule and streams

    r, n = world_of(rank, world)
    by_corpus = {name: open_views(v) for name, v in (views.items() if isinstance(views, dict) else [("code", views)])}
    mix = L.parse_mixture(mixture, {name: v.kind for name, v in by_corpus.items()})
    stream = L.packed(L.streams(by_corpus, mix, vocab, objectives or {}), mix, seed,
                      SimpleNamespace(rank=r, world_size=n), seq_len, vocab.pad_id, buffer, long, rows)
    return stream, L.heads_of(mix)


def hf_dataset(views, mixture: str, vocab, seq_len: int, *, buffers: int, shards: int = 8, seed: int = 0,
               buffer: int = 256, objectives: dict | None = None, rank: int | None = None,
               world: int | None = None, start: int = 0):
    """The same rows as :func:`packed_dataset` as a ``datasets.IterableDataset`` of ``buffers``
    buffers in ``shards`` shards (module docstring, 3). Rows keep their NumPy arrays and codept's
    column names (``labels.mlm``): with HF Trainer pass ``remove_unused_columns=False`` and
    :class:`HFCollator`."""
    import datasets

    if buffers < 1 or shards < 1:
        raise ValueError(f"buffers={buffers}, shards={shards}: both must be >= 1")
    ds = packed_dataset(views, mixture, vocab, seq_len, seed=seed, buffer=buffer, objectives=objectives,
                        rank=rank, world=world, buffers=buffers, start=start)
    shards = min(shards, buffers)

    def gen(shard: list[int]):
        for s in shard:
            yield from _rows(ds.stream, range(start + s, start + buffers, shards))

    return datasets.IterableDataset.from_generator(gen, gen_kwargs={"shard": list(range(shards))})


def _causal(label: str) -> bool:
    from codept.model.pretrainer import HEADS

    make = HEADS.get(label)
    return bool(getattr(make, "keywords", {}).get("causal", False))


class HFCollator:
    """Rows (codept.data.pack) -> the keyword arguments of a transformers BERT-style model
    (module docstring, 4). ``label``: the ``labels.<label>`` column given as ``labels`` (None: the
    rows' only labels column, or no labels when they have none); ``mask``: "float" (additive,
    ``dtype``) or "bool"."""

    def __init__(self, label: str | None = None, mask: str = "float", dtype: torch.dtype = torch.float32):
        if mask not in ("float", "bool"):
            raise ValueError(f"mask={mask!r}: expected 'float' (additive, eager and SDPA) or 'bool' (SDPA)")
        self.label, self.mask, self.dtype = label, mask, dtype

    def __call__(self, rows: list[dict]) -> dict[str, torch.Tensor]:
        bad = sorted({k for r in rows for k in r if k in HF_UNSUPPORTED})
        if bad:
            raise ValueError(f"rows carry {bad}, which a BERT-style transformers model has no input for: "
                             "train such objectives with codept's own model (codept.data.collate)")
        b = collate(rows)
        out = {"input_ids": b["input_ids"], "position_ids": b["positions"],
               "attention_mask": self.attention_mask(b["segment_ids"], b["prefix"])}
        if "types" in b:
            out["token_type_ids"] = b["types"]
        label = self._label(b)
        if label is not None:
            labels = b[f"labels.{label}"].clone()
            if _causal(label):  # HF shifts: token t is predicted from t-1; never across documents
                seg = b["segment_ids"]
                first = torch.ones_like(seg, dtype=torch.bool)
                first[:, 1:] = seg[:, 1:] != seg[:, :-1]
                labels[first | (seg == 0)] = IGNORE
            out["labels"] = labels
        return out

    def _label(self, batch: dict) -> str | None:
        have = sorted(k[len("labels."):] for k in batch if k.startswith("labels."))
        if self.label is not None:
            if self.label not in have:
                raise KeyError(f"label={self.label!r}: the rows carry labels {have}")
            return self.label
        if len(have) > 1:
            raise ValueError(f"the rows carry labels {have}: name the one HF's `labels` should be (label=...)")
        return have[0] if have else None

    def attention_mask(self, segment_ids: torch.Tensor, prefix: torch.Tensor) -> torch.Tensor:
        """(B, 1, T, T): codept's rule (module docstring, 4) as float (0 / dtype min) or bool."""
        from codept.model.transformer import visibility

        vis = visibility(segment_ids, prefix)[:, None]  # (B, 1, T, T) [b, h, q, k]
        if self.mask == "bool":
            return vis
        hidden = torch.tensor(torch.finfo(self.dtype).min, dtype=self.dtype)
        return torch.where(vis, torch.zeros((), dtype=self.dtype), hidden)
