"""Deterministic, resumable, rank-sharded streams of packed rows.

Everything is a pure function of (seed, rank, world, step): no hidden iterator state, so a stream
restored from ``state_dict()`` yields exactly the rows the uninterrupted one would, and the number
of loader workers changes nothing.

1. A :class:`Source` is a dataset of ``n`` documents plus ``make(index, rng) -> Example | None``
   (or a list of Examples: several from one document, packed like any others)
   (load the view, apply an objective). Each epoch ``e`` a source shuffles its indices with
   ``default_rng([seed, e, salt, 0])``; rank ``r`` of ``world`` takes every world-th index from
   position ``r``: ranks see disjoint documents within an epoch.
2. Every random draw for a document comes from ``default_rng([seed, epoch, index, salt])``: the same
   (seed, epoch, index) gives the same example, a new epoch new masks (dynamic masking). A source
   with ``context=True`` also gets a :class:`Context`: partner draws from the same rng, and the
   run's progress at this mixture step (step / ``horizon``, taken at the first step of each block
   of ``quantum`` steps: a recipe sets quantum = the packing buffer, whose rows are shuffled together
   and trained at about the same time), so schedules stay exact on resume.
   The generators of a buffer are seeded together (codept.data.seeds: the same generators, bit
   for bit, for a quarter of the cost).
3. A :class:`Mixture` interleaves sources with exact proportions: at step ``i`` it picks the source
   whose count lags its weight most (``w_c * (i + 1) - count_c``, ties to the first), so after any
   ``n`` steps every count is within 1 of ``n * w_c``. A source's own position is its count.
4. :class:`PackedStream` packs consecutive buffers of ``buffer`` mixture steps (codept.data.pack) into
   rows, shuffled by ``default_rng([seed, k, 0, 1, 1])`` (best-fit creates the rows of the longest
   documents first; unshuffled, one objective could fill whole micro-batches); buffer ``k`` depends
   on nothing but ``k``.
5. Ranks (``PackedStream(..., rank=r, world=W)``): ONE global mixture, its buffers dealt whole:
   rank r trains buffers r, r + W, r + 2W, ... Each rank builds only its own buffers (the same
   work per rank as sharding documents), and buffer k is the same rows whatever W is, so the
   position of the whole job is rank-independent: the set of buffers done plus, for the ones in
   flight, the rows taken. A rank's plan is a queue of (buffer, rows already taken) pairs, then
   ``frontier + r + j * W`` for j = 0, 1, ...; its state is (plan, position in it, rows taken).
   :func:`resplit` turns the states of all N ranks into states for M ranks (resume on another
   world size): every buffer in flight continues at its row, every buffer below the new frontier
   that no rank started is queued whole, the queue is dealt round-robin, and the new ranks
   continue from the frontier: no row is lost or repeated. (Ranks take the same rows per step but
   buffers pack into different row counts, so rank r may be a buffer ahead of rank r + 1: the
   frontier is ragged, hence the queue.)
   ``loader(workers)`` hands whole buffers to torch DataLoader workers (plan position p -> worker
   p mod workers); DataLoader returns worker items round-robin, i.e. in plan order, whatever the
   worker count is. A buffer travels as pickled NumPy rows (``collate_fn`` keeps them as they are):
   DataLoader's default conversion made every row array a torch tensor shared through its own file
   descriptor, and a buffer of 256 mlm documents on the stdlib ran past ``ulimit -n 1024`` ("Too
   many open files", then a hang).
   (``Mixture(rank=, world=)`` shards documents instead, the layout of streams saved before
   issue 23.6, stream state ``layout`` 1: exact on resume, but only on the same world size.)
Cost: pack time per buffer + the sources' ``make``; :func:`resplit`: O(ranks + buffers in flight).
Not covered: weights that change mid-run (a new mixture = a new stream), sources that grow while
training; a re-split run does not draw the rows in the order a run of M ranks from the start would
(the same rows, dealt otherwise).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np

from codept.data import seeds
from codept.data.example import Example
from codept.data.pack import pack


def example_rng(seed: int, epoch: int, index: int, salt: int) -> np.random.Generator:
    """The generator of one example; :meth:`Mixture.examples` makes the same ones many at a time."""
    return np.random.default_rng([seed, epoch, index, salt])


@dataclass(frozen=True)
class Source:
    """``make(index, rng)`` -> the example of document `index`; with ``context=True`` it is called as
    ``make(index, rng, ctx)`` (:class:`Context`), and ``get(i)`` returns document i for partner draws."""

    name: str
    n: int
    make: Callable[..., Example | list | None]
    salt: int = 0  # distinguishes sources that share documents (e.g. two objectives on one corpus)
    get: Callable[[int], Any] | None = None  # document i (a view), for Context.partner
    context: bool = False  # make takes a third argument, the Context
    find: Callable[[str], int | None] | None = None  # the index of the document with this key (a view's path), None if absent
    folders: tuple = ()  # the prepared folders the documents were read from (sidecars beside them: mined negatives)
    skipped: dict = field(default_factory=dict)  # documents left out before any read: {reason: count} (codept.views.view_source)
    prepared: Any = None  # what the objective computed once over all documents (codept.views.view_source), or None


@dataclass(frozen=True)
class Context:
    """What an objective may know beyond its own document, all of it a function of the stream state.

    index, epoch: the document and epoch this example is drawn for; progress: the share of the run
    done at this mixture step (step / horizon of the Mixture, capped at 1; 0 without a horizon), for
    schedules such as lowering the [MASK] share late in training; n: documents in the source."""

    source: Source
    index: int
    epoch: int
    progress: float
    seed: int = 0  # the stream's seed (static masking keys its draws on (seed, index, salt), not the epoch)

    @property
    def n(self) -> int:
        return self.source.n

    def partner(self, rng: np.random.Generator) -> tuple[int, Any]:
        """(index, document) of another document of the source, uniformly, drawn with `rng` (pass
        the example's own rng: the draw is then a pure function of (seed, epoch, index))."""
        src = self.source
        if src.get is None or src.n < 2:
            raise ValueError(f"source {src.name!r} cannot draw a partner: it has {src.n} documents"
                             + ("" if src.get else " and no get()"))
        j = int(rng.integers(0, src.n - 1))
        j += j >= self.index  # every other document, never this one
        return j, src.get(j)

    def document(self, i: int) -> Any:
        """Document i of the source (e.g. a neighbour of the same file)."""
        if self.source.get is None:
            raise ValueError(f"source {self.source.name!r} has no get()")
        return self.source.get(i)

    def find(self, key: str) -> int | None:
        """The index of the source's document whose key (a view's path) is `key`; None when the
        source does not hold it (e.g. a held-out file, absent from the training source)."""
        if self.source.find is None:
            raise ValueError(f"source {self.source.name!r} cannot look documents up by key (no find())")
        return self.source.find(key)


class Mixture:
    """Rank-local sequence of (source, epoch, index) with exact proportions (see module docstring)."""

    def __init__(self, sources: list[Source], weights: list[float], seed: int, rank: int = 0, world: int = 1,
                 horizon: int = 0, quantum: int = 1):
        if len(sources) != len(weights) or not sources:
            raise ValueError(f"{len(sources)} sources but {len(weights)} weights")
        if any(w <= 0 for w in weights):
            raise ValueError(f"weights must be positive, got {weights}")
        if not 0 <= rank < world:
            raise ValueError(f"rank={rank} not in [0, world={world})")
        for s in sources:
            if s.n < world:
                raise ValueError(f"source {s.name!r} has {s.n} documents, fewer than world={world} ranks")
        total = float(sum(weights))
        self.sources, self.weights = sources, [w / total for w in weights]
        self.seed, self.rank, self.world = seed, rank, world
        if horizon < 0:
            raise ValueError(f"horizon={horizon}: the run's mixture steps per rank must be >= 0 (0 = no progress)")
        self.horizon = horizon  # rank-local mixture steps of the whole run, for Context.progress
        if quantum < 1:
            raise ValueError(f"quantum={quantum}: progress moves every quantum >= 1 mixture steps")
        self.quantum = quantum  # progress is that of the first step of each block of `quantum` steps
        self._perm_cache: dict[tuple[int, int], np.ndarray] = {}
        zero = [0] * len(sources)
        self._checkpoints: dict[int, list[int]] = {0: zero}  # counts before step k*_CK
        self._cursor = (0, zero)  # (step, counts before it): sequential access is O(1)

    _CK = 4096

    def _choose(self, i: int, counts: list[int]) -> int:
        deficit = [w * (i + 1) - c for w, c in zip(self.weights, counts)]
        return max(range(len(deficit)), key=lambda j: (deficit[j], -j))

    def _counts_before(self, step: int) -> list[int]:
        if len(self.sources) == 1:  # one source: it takes every step
            return [step]
        cur, counts = self._cursor
        if not cur <= step < cur + self._CK:  # random access: restart from a checkpoint
            k = max(c for c in self._checkpoints if c <= step)
            cur, counts = k, self._checkpoints[k]
        counts = list(counts)
        for i in range(cur, step):
            counts[self._choose(i, counts)] += 1
            if (i + 1) % self._CK == 0:
                self._checkpoints.setdefault(i + 1, list(counts))
        self._cursor = (step, counts)
        return counts

    def schedule(self, step: int) -> tuple[int, int]:
        """(source id, that source's rank-local position) at mixture step `step`."""
        counts = self._counts_before(step)
        c = self._choose(step, counts)
        return c, counts[c]

    def locate(self, step: int) -> tuple[Source, int, int]:
        """(source, epoch, document index) at mixture step `step`."""
        c, pos = self.schedule(step)
        src = self.sources[c]
        per_rank = len(range(self.rank, src.n, self.world))
        epoch, j = divmod(pos, per_rank)
        return src, epoch, int(self._perm(c, epoch)[self.rank + j * self.world])

    def _perm(self, c: int, epoch: int) -> np.ndarray:
        key = (c, epoch)
        if key not in self._perm_cache:
            if len(self._perm_cache) > 8:
                self._perm_cache.clear()
            src = self.sources[c]
            self._perm_cache[key] = np.random.default_rng([self.seed, epoch, src.salt, 0]).permutation(src.n)
        return self._perm_cache[key]

    def example(self, step: int) -> Example | None:
        return self.examples(step, step + 1)[0]

    def examples(self, start: int, stop: int) -> list:
        """The examples of mixture steps [start, stop), each ``make(index, rng[, ctx])`` with its
        (seed, epoch, index, salt) generator; the generators are seeded together (codept.data.seeds)."""
        located = [self.locate(step) for step in range(start, stop)]
        rngs = seeds.generators([(self.seed, epoch, index, src.salt) for src, epoch, index in located])
        out = []
        for step, (src, epoch, index), rng in zip(range(start, stop), located, rngs):
            if not src.context:
                out.append(src.make(index, rng))
                continue
            progress = min(1.0, step // self.quantum * self.quantum / self.horizon) if self.horizon else 0.0
            out.append(src.make(index, rng, Context(src, index, epoch, progress, self.seed)))
        return out


def _as_is(item):
    """DataLoader collate_fn that keeps a worker's item as it is (NumPy rows, pickled through the
    pipe) instead of converting each array to a tensor shared by file descriptor."""
    return item


class PackedStream:
    """Rows of ``seq_len`` packed from buffers of ``buffer`` mixture steps; resumable exactly, also on
    another world size (:func:`resplit`). ``rank``/``world``: this rank's share of the buffers
    (module docstring, 5); the mixture is then the job's one global mixture (world 1)."""

    def __init__(self, mixture: Mixture, seq_len: int, pad_id: int, buffer: int = 256, long: str = "split",
                 rows: str = "packed", rank: int = 0, world: int = 1):
        self.mixture, self.seq_len, self.pad_id, self.buffer, self.long = mixture, seq_len, pad_id, buffer, long
        self.rows = rows  # codept.data.pack.pack: 'packed' (best-fit) or 'document' (one per row)
        if not 0 <= rank < world:
            raise ValueError(f"rank={rank} not in [0, world={world})")
        if world > 1 and mixture.world > 1:
            raise ValueError(f"world={world} with a Mixture of world={mixture.world}: shard by one of them "
                             "(PackedStream deals whole buffers of one global Mixture; give the Mixture world=1)")
        self.rank, self.world = rank, world
        self.queue: list[tuple[int, int]] = []  # (buffer, rows an earlier run took) before the frontier
        self.frontier = 0  # buffers >= frontier: this rank's are frontier + rank + j * world
        self.pos = 0  # position in this rank's plan (queue, then frontier + rank + j * world)
        self.taken = 0  # rows of the current buffer already yielded
        self._rows: list[dict] | None = None

    @property
    def layout(self) -> int:
        """1: documents sharded by the Mixture (same world size only); 2: buffers dealt (resplit)."""
        return 1 if self.mixture.world > 1 else 2

    def buffer_at(self, pos: int) -> int:
        """The buffer at position ``pos`` of this rank's plan."""
        q = len(self.queue)
        return self.queue[pos][0] if pos < q else self.frontier + self.rank + (pos - q) * self.world

    def _start_at(self, pos: int) -> int:
        return self.queue[pos][1] if pos < len(self.queue) else 0

    @property
    def k(self) -> int:
        """The current buffer."""
        return self.buffer_at(self.pos)

    def rows_of_buffer(self, k: int) -> list[dict]:
        exs = self.mixture.examples(k * self.buffer, (k + 1) * self.buffer)
        # an objective may return several examples of one document (code_doc: every documented definition)
        exs = [x for e in exs for x in (e if isinstance(e, list) else (e,)) if x is not None]
        rows = pack(exs, self.seq_len, self.pad_id, self.long, self.rows)
        # best-fit emits the longest documents' rows first: shuffle the rows of the buffer (seeded by
        # the buffer, not by the rank it is dealt to) so that every micro-batch mixes objectives and lengths
        m = self.mixture
        order = np.random.default_rng([m.seed, k, m.rank, m.world, 1]).permutation(len(rows))
        return [rows[i] for i in order]

    def state_dict(self) -> dict:
        return {"layout": self.layout, "buffer": self.k, "taken": self.taken, "seed": self.mixture.seed,
                "rank": self.rank if self.layout == 2 else self.mixture.rank,
                "world": self.world if self.layout == 2 else self.mixture.world,
                "pos": self.pos, "queue": [list(x) for x in self.queue], "frontier": self.frontier}

    def load_state_dict(self, state: dict) -> None:
        """Restore a state of this stream's own (seed, rank, world); another world size's states go
        through :func:`resplit` first."""
        own = self.state_dict()
        if own["layout"] == 2 and int(state["world"]) == 1:
            state = _normal(state)  # one rank: both layouts are the same stream
        mine = (own["layout"], own["seed"], own["rank"], own["world"])
        theirs = (int(state.get("layout", 1)), state["seed"], state["rank"], state["world"])
        if mine != theirs:
            raise ValueError(f"stream state is for (layout, seed, rank, world)={theirs}, this stream is {mine}"
                             + ("; a state of another world size goes through codept.data.stream.resplit"
                                if mine[:2] == theirs[:2] and mine[3] != theirs[3] else ""))
        if theirs[0] == 1:  # a buffer index and the rows taken of it (the Mixture shards the documents)
            self.queue, self.frontier, self.pos = [], int(state["buffer"]), 0
        else:
            self.queue = [(int(b), int(t)) for b, t in state["queue"]]
            self.frontier, self.pos = int(state["frontier"]), int(state["pos"])
        self.taken, self._rows = int(state["taken"]), None

    def _advance(self) -> None:
        self.pos += 1
        self.taken, self._rows = self._start_at(self.pos), None

    def __iter__(self) -> Iterator[dict]:
        return self

    def __next__(self) -> dict:
        while True:
            if self._rows is None:
                self._rows = self.rows_of_buffer(self.k)
            if self.taken < len(self._rows):
                row = self._rows[self.taken]
                self.taken += 1
                return row
            self._advance()

    def batches(self, rows_per_batch: int) -> Iterator[list[dict]]:
        while True:
            yield [next(self) for _ in range(rows_per_batch)]

    def loader(self, workers: int):
        """A torch DataLoader yielding (plan position, rows) of the current buffer, then the next
        ones, built by `workers` processes, in plan order. Consume it with :meth:`iter_loader`."""
        import torch.utils.data as tud

        stream = self

        class _Buffers(tud.IterableDataset):
            def __iter__(self):
                info = tud.get_worker_info()
                w, nw = (info.id, info.num_workers) if info else (0, 1)
                pos = stream.pos + w
                while True:
                    yield pos, stream.rows_of_buffer(stream.buffer_at(pos))
                    pos += nw

        return tud.DataLoader(_Buffers(), batch_size=None, num_workers=workers, collate_fn=_as_is,
                              persistent_workers=False, multiprocessing_context="fork" if workers else None)

    def iter_loader(self, workers: int) -> Iterator[dict]:
        """Like iterating the stream itself, with buffers built by `workers` loader processes; keeps
        ``state_dict()`` exact."""
        for pos, rows in self.loader(workers):
            assert pos == self.pos, f"loader returned plan position {pos}, expected {self.pos}"
            while self.taken < len(rows):
                row = rows[self.taken]
                self.taken += 1
                yield row
            self._advance()


def _normal(state: dict) -> dict:
    """A layout-2 state (plan, position, rows taken) of ``state``; one of layout 1 only when it is of
    one rank (then both layouts are the same stream). ValueError otherwise."""
    if int(state.get("layout", 1)) == 2:
        return state
    if int(state["world"]) != 1:
        raise ValueError(f"stream state of layout 1 for rank {state['rank']} of {state['world']}: documents "
                         "sharded per rank by the Mixture (streams saved before issue 23.6) depend on the "
                         "world size and cannot be re-split; resume with the world size that saved it")
    return {"layout": 2, "seed": state["seed"], "rank": 0, "world": 1, "queue": [], "frontier": int(state["buffer"]),
            "pos": 0, "taken": int(state["taken"]), "buffer": int(state["buffer"])}


def resplit(states: list[dict], world: int) -> list[dict]:
    """The stream states of ``world`` ranks continuing the job whose N ranks saved ``states`` (one per
    rank, any order), so that no row is lost or repeated (module docstring, 5):
    1. each old rank's unfinished plan entries (the current buffer at its rows taken, the queue after
       it) are pending; so is every buffer below the new frontier F' that no old rank started, where
       F' = max over old ranks r of the first buffer of r's arithmetic part it has not started;
    2. the pending entries, sorted by buffer, are dealt round-robin: new rank r' queues entries
       r', r' + M, ...; it then continues with F' + r' + j * M.
    ValueError naming the rule for states that cannot be re-split: layout 1 (documents sharded per
    rank by the Mixture), mixed seeds or world sizes, missing or repeated ranks."""
    if world < 1:
        raise ValueError(f"world={world}: need at least one rank")
    if not states:
        raise ValueError("resplit: no stream states given")
    states = [_normal(s) for s in states]
    n = len(states)
    if sorted(int(s["rank"]) for s in states) != list(range(n)) or {int(s["world"]) for s in states} != {n}:
        raise ValueError(f"resplit: states of ranks {sorted(s['rank'] for s in states)} with world sizes "
                         f"{sorted({s['world'] for s in states})}: need one state of each of the N ranks")
    seeds = {s["seed"] for s in states}
    if len(seeds) != 1:
        raise ValueError(f"resplit: states of seeds {sorted(seeds)}: one job has one seed")
    frontiers = {int(s["frontier"]) for s in states}
    if len(frontiers) != 1:
        raise ValueError(f"resplit: states with frontiers {sorted(frontiers)}: one job has one frontier")
    f = frontiers.pop()
    pending: list[tuple[int, int]] = []
    first_new = {}  # old rank -> first buffer of its arithmetic part it has not started
    for s in states:
        r, pos, taken = int(s["rank"]), int(s["pos"]), int(s["taken"])
        queue = [(int(b), int(t)) for b, t in s["queue"]]
        for p in range(pos, len(queue)):
            pending.append((queue[p][0], taken if p == pos else queue[p][1]))
        j = 0
        if pos >= len(queue):  # in its arithmetic part: buffer j is in flight
            j = pos - len(queue)
            pending.append((f + r + j * n, taken))
            j += 1
        first_new[r] = f + r + j * n
    new_f = max(first_new.values())
    for r, b in first_new.items():  # never started, below the new frontier
        pending.extend((k, 0) for k in range(b, new_f, n))
    pending.sort()
    if len({b for b, _ in pending}) != len(pending):
        raise ValueError(f"resplit: a buffer is in flight on two ranks ({pending}): the states are not of one job")
    seed = seeds.pop()
    out = []
    for r in range(world):
        queue = pending[r::world]
        out.append({"layout": 2, "seed": seed, "rank": r, "world": world, "queue": [list(x) for x in queue],
                    "frontier": new_f, "pos": 0, "taken": queue[0][1] if queue else 0,
                    "buffer": queue[0][0] if queue else new_f + r})
    return out
