"""The ``dataflow`` objective and the multi-target pointer head (MultiPointerHead)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from codept.data.collate import collate
from codept.data.pack import pack
from codept.data.sources import read_source, stdlib_files
from codept.data.stream import Mixture, PackedStream, Source
from codept.objectives import build
from codept.objectives.dataflow import use_targets
from codept.objectives.render import Vocab
from codept.structure.view import build_view

SRC = "def f(n):\n    x = 0\n    while n:\n        if n: x = 1\n        else: x = 2\n        n = x\n    return x\n"


@pytest.fixture(scope="module")
def vocab(small_tok):
    return Vocab.from_tokenizer(small_tok)


@pytest.fixture(scope="module")
def code_views(small_tok):
    return [build_view(str(p), "python", read_source(p), small_tok) for p in stdlib_files()[40:56]
            if p.stat().st_size > 2000]


def test_use_targets_lists_every_reaching_definition(small_tok):
    v = build_view("f.py", "python", SRC, small_tok)
    uses, targets = use_targets(v, 4)
    names = [v.names[v.idents[r, 2]] + "@" + str(v.text[: v.offsets[v.idents[r, 0], 0]].count("\n") + 1)
             for r in range(len(v.idents))]
    start_to_name = {int(v.idents[r, 0]): names[r] for r in range(len(v.idents))}
    got = {names[u]: sorted(start_to_name[t] for t in row if t >= 0) for u, row in zip(uses.tolist(), targets.tolist())}
    assert got["x@7"] == ["x@2", "x@4", "x@5"]  # zero iterations, then either branch
    assert got["n@3"] == ["n@1", "n@6"]  # the loop back edge


def test_objective_records_are_masked_uses_pointing_at_definitions(small_tok, vocab):
    v = build_view("f.py", "python", SRC, small_tok)
    ex = build("dataflow", vocab, rate=1.0, p_none=0.0)(v, np.random.default_rng(0))
    ptr = ex.pointers["dataflow"]
    assert ptr.shape[1] == 5 and len(ptr) == len(use_targets(v, 4)[0])
    assert np.all(ex.input_ids[ptr[:, 0]] == vocab.mask_id)
    for row in ptr.tolist():  # every target is the first token of a definition (role 0)
        for t in row[1:]:
            if t >= 0:
                r = np.flatnonzero(v.idents[:, 0] == t)
                assert len(r) and v.idents[r[0], 3] == 0
    ex2 = build("dataflow", vocab, rate=1.0, p_none=0.0)(v, np.random.default_rng(0))
    assert np.array_equal(ex.input_ids, ex2.input_ids) and np.array_equal(ptr, ex2.pointers["dataflow"])
    assert np.array_equal(v.input_ids, build_view("f.py", "python", SRC, small_tok).input_ids)  # not mutated


def test_pointer_labels_survive_packing(small_tok, vocab):
    obj = build("dataflow", vocab, rate=1.0, p_none=0.0)
    exs = [obj(build_view("f.py", "python", SRC, small_tok), np.random.default_rng(i)) for i in range(3)]
    rows = pack(exs, 256, pad_id=0)
    batch = collate(rows)
    ptr = batch["ptr.dataflow"]  # (B, K, 5)
    seg = batch["segment_ids"]
    ids = batch["input_ids"]
    n = 0
    for b in range(ptr.shape[0]):
        for rec in ptr[b].tolist():
            if rec[0] < 0:
                continue
            n += 1
            assert ids[b, rec[0]] == vocab.mask_id
            for t in rec[1:]:
                if t >= 0:
                    assert seg[b, t] == seg[b, rec[0]]  # same document after re-indexing
    assert n == sum(len(e.pointers["dataflow"]) for e in exs)


def test_multi_pointer_loss_accepts_any_target():
    from codept.model import transformer as T
    from codept.model.heads import MultiPointerHead

    torch.manual_seed(0)
    m = T.Transformer(T.tiny(vocab_size=100))
    head = MultiPointerHead(m, label="dataflow")
    h = torch.randn(1, 6, m.config.hidden)
    seg = torch.ones(1, 6, dtype=torch.long)
    one = {"segment_ids": seg, "ptr.dataflow": torch.tensor([[[5, 1, -1]]])}
    two = {"segment_ids": seg, "ptr.dataflow": torch.tensor([[[5, 1, 3]]])}
    l1, n1 = head(h, one)
    l2, n2 = head(h, two)
    assert n1.item() == n2.item() == 1
    assert l2.item() < l1.item()  # more acceptable targets: more probability mass, lower loss
    # the two-target loss is -log(p1 + p3) of the single-target scores
    p = torch.softmax(torch.cat([(head.query(h)[0, 5] @ head.key(h)[0].T) / m.config.hidden ** 0.5,
                                 head.none.reshape(1)]), -1)
    assert abs(l2.item() + torch.log(p[1] + p[3]).item()) < 1e-4
    none = {"segment_ids": seg, "ptr.dataflow": torch.tensor([[[5, -1, -1], [-1, -1, -1]]])}
    ln, nn_ = head(h, none)
    assert nn_.item() == 1 and abs(ln.item() + torch.log(p[-1]).item()) < 1e-4
    met = head(h, two, metrics=True)
    assert met.count.item() == 1 and met.correct.item() == int(p[:6].argmax().item() in (1, 3) and p[:6].max() > p[-1])


def _train(objective, views, heads, vocab_size, steps=40, seq=256):
    from codept.model import transformer as T
    from codept.model.pretrainer import Pretrainer, build_head

    torch.manual_seed(0)
    m = T.Transformer(T.tiny(vocab_size=vocab_size, max_positions=seq))
    model = Pretrainer(m, {h: build_head(h, m) for h in heads})
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    src = Source("s", len(views), lambda i, rng, ctx: objective(views[i], rng, ctx), salt=3,
                 get=views.__getitem__, context=True)
    stream = PackedStream(Mixture([src], [1.0], seed=0), seq_len=seq, pad_id=0, buffer=32)
    losses = {h: [] for h in heads}
    for rows in stream.batches(8):
        out = model(collate(rows))
        loss = sum(ls / n.clamp(min=1) for ls, n in out.values())
        opt.zero_grad()
        loss.backward()
        opt.step()
        for h, (ls, n) in out.items():
            losses[h].append(float(ls.detach() / n.clamp(min=1)))
        if len(losses[heads[0]]) == steps:
            return losses


@pytest.mark.slow
def test_dataflow_loss_falls(code_views, small_tok, vocab):
    ls = _train(build("dataflow", vocab), code_views, ["dataflow"], small_tok.get_vocab_size())["dataflow"]
    first, last = np.mean(ls[:5]), np.mean(ls[-5:])
    assert last < first - 0.5, (first, last)


def test_multi_pointer_parameters_are_never_0_dim():
    """DeepSpeed broadcasts every parameter as bytes at start-up; a 0-dim one makes it fail."""
    from codept.model import transformer as T
    from codept.model.pretrainer import build_head

    head = build_head("dataflow", T.Transformer(T.tiny(vocab_size=100)))
    assert all(p.dim() > 0 for p in head.parameters())
    for p in head.parameters():
        p.data.view(torch.uint8)  # what deepspeed.runtime.engine._broadcast_model does


def test_multi_pointer_count_matches_n_valid(small_tok, vocab):
    """target_counts (the trainer's normaliser, fixed before the forward) must equal n_valid."""
    from codept.model import transformer as T
    from codept.model.pretrainer import build_head, target_counts

    obj = build("dataflow", vocab, rate=1.0)
    exs = [obj(build_view("f.py", "python", SRC, small_tok), np.random.default_rng(i)) for i in range(3)]
    batch = collate(pack(exs, 256, pad_id=0))
    m = T.Transformer(T.tiny(vocab_size=small_tok.get_vocab_size(), max_positions=256))
    head = build_head("dataflow", m)
    _, n = head(m.encode(batch), batch)
    assert target_counts(batch, {"dataflow": head})["dataflow"] == int(n) == sum(len(e.pointers["dataflow"]) for e in exs)
