"""Ranks deal whole buffers of one global stream, and a stream saved by N ranks resumes on M ranks
with no row lost or repeated (codept.data.stream.resplit, issue 23.6)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from codept.data.example import IGNORE, Example
from codept.data.sources import stdlib_files
from codept.data.stream import Mixture, PackedStream, Source, resplit

SEQ, BUFFER = 64, 4


@pytest.fixture(scope="module")
def docs():
    """Real code: stdlib files cut into chunks of 12 lines, as byte ids (lengths 20 .. 900: rows of
    several short chunks, long chunks split over rows, so buffers pack into different row counts)."""
    out = []
    for p in stdlib_files()[:12]:
        lines = p.read_text(encoding="utf-8", errors="replace").splitlines(keepends=True)
        for i in range(0, len(lines), 12):
            b = "".join(lines[i:i + 12]).encode()[:900]
            if len(b) >= 20:
                out.append(np.frombuffer(b, np.uint8).astype(np.int32) + 5)
    assert len(out) > 200
    return out


def source(docs):
    def make(index, rng):
        ids = docs[index]
        sel = rng.random(len(ids)) < 0.15
        return Example(input_ids=np.where(sel, 4, ids).astype(np.int32), prefix=np.ones(len(ids), bool),
                       labels={"mlm": np.where(sel, ids, IGNORE).astype(np.int32)})

    return Source("stdlib", len(docs), make)


def stream(docs, rank=0, world=1, seed=3):
    return PackedStream(Mixture([source(docs)], [1.0], seed=seed), SEQ, 0, buffer=BUFFER, rank=rank, world=world)


def take(s: PackedStream, n: int) -> list[tuple[int, int]]:
    """n rows of s, each named by (buffer, index of the row in its buffer)."""
    out = []
    for _ in range(n):
        next(s)
        out.append((s.k, s.taken - 1))
    return out


def test_ranks_deal_whole_buffers_of_one_stream(docs):
    one = stream(docs)
    rows = {k: one.rows_of_buffer(k) for k in range(6)}
    assert len({len(r) for r in rows.values()}) > 1, "buffers should pack into different row counts"
    for r in range(2):
        s = stream(docs, r, 2)
        got = [next(s) for _ in range(len(rows[r]) + len(rows[r + 2]))]
        want = rows[r] + rows[r + 2]
        assert all(np.array_equal(a["input_ids"], b["input_ids"]) for a, b in zip(got, want))


@pytest.mark.parametrize("plan", [(2, 1), (1, 2), (2, 3), (3, 2, 1)])
def test_resplit_loses_no_row_and_repeats_none(docs, plan):
    """N ranks take the same number of rows each (one rank may be a buffer ahead of another), save;
    resplit to M ranks, which take more; (again). Every row taken is taken once, every buffer below
    the last frontier reached by all is taken whole."""
    taken: list[tuple[int, int]] = []
    states = None
    for world, per_rank in zip(plan, (61, 47, 53)):
        ranks = [stream(docs, r, world) for r in range(world)]
        if states is not None:
            new = resplit(states, world)
            for s, st in zip(ranks, new):
                s.load_state_dict(st)
        for s in ranks:
            taken += take(s, per_rank)
        states = [s.state_dict() for s in ranks]
    assert len(taken) == len(set(taken)), "a row was taken twice"
    one = stream(docs)
    done = min(st["buffer"] for st in states)  # every buffer below it is finished on every plan
    assert done >= 4
    want = {(k, i) for k in range(done) for i in range(len(one.rows_of_buffer(k)))}
    assert want <= set(taken), f"rows lost: {sorted(want - set(taken))[:5]}"
    # the last ranks go on with rows nobody took
    for s in ranks:
        assert not set(take(s, 11)) & set(taken)


def test_resume_on_the_same_world_is_exact(docs):
    full = stream(docs, 1, 2)
    ref = [next(full) for _ in range(90)]
    s = stream(docs, 1, 2)
    for _ in range(33):
        next(s)
    t = stream(docs, 1, 2)
    t.load_state_dict(s.state_dict())
    assert all(np.array_equal(next(t)["input_ids"], r["input_ids"]) for r in ref[33:])
    with pytest.raises(ValueError, match="resplit"):
        stream(docs, 0, 1).load_state_dict(s.state_dict())


def test_resplit_refuses_what_it_cannot_honour(docs):
    legacy = [PackedStream(Mixture([source(docs)], [1.0], seed=3, rank=r, world=2), SEQ, 0, buffer=BUFFER)
              for r in range(2)]
    with pytest.raises(ValueError, match="layout 1 for rank 0 of 2.*cannot be re-split"):
        resplit([s.state_dict() for s in legacy], 1)
    states = [stream(docs, r, 2).state_dict() for r in range(2)]
    with pytest.raises(ValueError, match="one state of each"):
        resplit(states[:1], 1)
    with pytest.raises(ValueError, match="seeds"):
        resplit([states[0], stream(docs, 1, 2, seed=4).state_dict()], 1)
    # a one-rank state of before layout 2 (no plan) is the same stream: it re-splits
    old = {"buffer": 3, "taken": 2, "seed": 3, "rank": 0, "world": 1}
    got = resplit([old], 2)
    assert got[0]["queue"] == [[3, 2]] and got[0]["frontier"] == 4 and got[1]["queue"] == []
    s = stream(docs)
    s.load_state_dict(old)
    assert (s.k, s.taken) == (3, 2)


def test_loader_workers_follow_the_plan(docs):
    states = [stream(docs, r, 2) for r in range(2)]
    for s in states:
        take(s, 19)
    new = resplit([s.state_dict() for s in states], 3)
    ref = stream(docs, 2, 3)
    ref.load_state_dict(new[2])
    want = [next(ref) for _ in range(40)]
    for workers in (0, 2):
        s = stream(docs, 2, 3)
        s.load_state_dict(new[2])
        got = list(itertools.islice(s.iter_loader(workers), 40))
        assert all(np.array_equal(a["input_ids"], b["input_ids"]) for a, b in zip(got, want)), workers
        assert s.state_dict() == ref.state_dict()
