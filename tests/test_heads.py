"""Heads: (loss_sum, n_valid) with IGNORE handling, document-local causal shifting, the registry."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from codept.data.collate import collate
from codept.data.example import IGNORE
from codept.data.pack import pack
from codept.model import heads as H
from codept.model import pretrainer as P
from codept.model import transformer as T
from model_data import SEQ, real_examples


@pytest.fixture(scope="module")
def examples(byte_tok):
    return real_examples(byte_tok)


@pytest.fixture(scope="module")
def rows(examples):
    return pack(examples, SEQ, pad_id=0)


@pytest.fixture(scope="module")
def batch(rows):
    return collate(rows)


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return T.Transformer(T.tiny()).eval()


def test_registry():
    assert set(P.HEADS) == {"mlm", "lm", "rtd", "sop", "nsp", "edge", "contrastive", "sbo", "glm", "plm", "gen",
                            "exec_lines", "exec_values", "dataflow", "dataflow_edge"}
    m = T.Transformer(T.tiny())
    for name in P.HEADS:
        assert isinstance(P.build_head(name, m), torch.nn.Module)
    with pytest.raises(KeyError, match="unknown head"):
        P.build_head("mlmm", m)
    assert P.build_head("rtd", m, label="x", n_classes=3).out.out_features == 3


def test_mlm_loss_is_sum_over_valid_tokens(model, batch):
    head = P.build_head("mlm", model)
    hidden = model.encode(batch)
    loss_sum, n = head(hidden, batch)
    labels = batch["labels.mlm"]
    assert n.item() == int((labels != IGNORE).sum()) > 0
    full = F.cross_entropy(head.logits(hidden).flatten(0, 1), labels.flatten(), ignore_index=IGNORE)  # token mean
    assert abs(loss_sum.item() / n.item() - full.item()) < 1e-5
    # a label at an IGNOREd position changes nothing; tokens at IGNOREd positions don't count
    assert head.decoder_weight is model.embed.tokens.weight  # tied


def test_micro_batches_add_up(model, rows):
    """Sums and counts over micro-batches equal the full batch's: normalising by the global count
    gives the full-batch token mean whatever the split."""
    full = collate(rows)
    head = P.build_head("mlm", model)
    with torch.no_grad():
        ls, n = head(model.encode(full), full)
        parts = [collate(rows[i:i + 1]) for i in range(len(rows))]
        outs = [head(model.encode(p), p) for p in parts]
    assert sum(o[1].item() for o in outs) == n.item()
    assert abs(sum(o[0].item() for o in outs) - ls.item()) < 1e-3


def test_causal_shift_stays_inside_documents(model, rows, examples):
    batch = collate(rows)
    head = P.build_head("lm", model)
    tgt = head.targets(batch)
    seg, lab = batch["segment_ids"], batch["labels.lm"]
    b, t = seg.shape
    for i in range(b):
        for j in range(t):
            same = j + 1 < t and seg[i, j] != 0 and seg[i, j + 1] == seg[i, j]
            assert tgt[i, j].item() == (lab[i, j + 1].item() if same else IGNORE)
    # the packed loss is exactly the sum of each document's loss computed alone
    with torch.no_grad():
        ls, n = head(model.encode(batch), batch)
        alone_sum, alone_n = 0.0, 0
        for ex in examples:
            one = collate(pack([ex], SEQ, pad_id=0))
            s, c = head(model.encode(one), one)
            alone_sum, alone_n = alone_sum + s.item(), alone_n + c.item()
    causal_docs = [ex for ex in examples if (ex.labels["lm"] != IGNORE).any()]
    assert n.item() == alone_n == sum(len(ex) - 1 for ex in causal_docs)
    assert abs(ls.item() - alone_sum) < 1e-3


def test_token_classifier_ignores(model, batch):
    rtd = torch.where(batch["labels.mlm"] != IGNORE, 1, IGNORE)
    rtd[:, :5] = 0
    rtd[batch["segment_ids"] == 0] = IGNORE
    b = dict(batch, **{"labels.rtd": rtd})
    loss, n = P.build_head("rtd", model)(model.encode(b), b)
    assert n.item() == int((rtd != IGNORE).sum()) and torch.isfinite(loss)


def test_pair_classifier_reads_first_tokens(model, batch):
    seg = batch["segment_ids"]
    d = batch["scalar.sop"].shape[1]
    first = H.first_tokens(seg, d)
    for i in range(seg.shape[0]):
        for s in range(d):
            idx = torch.nonzero(seg[i] == s + 1)
            assert first[i, s].item() == (idx[0].item() if len(idx) else seg.shape[1])
            if len(idx):
                assert batch["positions"][i, first[i, s]].item() == 0
    head = P.build_head("sop", model)
    loss, n = head(model.encode(batch), batch)
    assert n.item() == int((batch["scalar.sop"] != IGNORE).sum()) == 7
    lab = batch["scalar.sop"].clone()
    lab[0, 0] = IGNORE
    loss2, n2 = head(model.encode(batch), dict(batch, **{"scalar.sop": lab}))
    assert n2.item() == n.item() - 1 and loss2.item() < loss.item()


def test_pointer_head(model, batch):
    ptr = batch["ptr.edge"]  # (B, K, 2), -1 padded
    head = P.build_head("edge", model)
    hidden = model.encode(batch)
    loss, n = head(hidden, batch)
    assert n.item() == int((ptr[..., 0] >= 0).sum()) == 7 * 4
    assert torch.isfinite(loss) and loss.item() > 0
    # by hand for one record: softmax over its document's tokens + "none"
    b, k = 0, 0
    src, dst = ptr[b, k].tolist()
    seg = batch["segment_ids"][b]
    cand = torch.nonzero(seg == seg[src]).squeeze(1)
    s = (head.query(hidden[b, src]) @ head.key(hidden[b, cand]).T) / hidden.shape[-1] ** 0.5
    s = torch.cat([s, head.none])
    target = (cand == dst).nonzero().item() if dst >= 0 else len(cand)
    one = dict(batch, **{"ptr.edge": ptr[:1, :1]}, segment_ids=batch["segment_ids"][:1])
    l1, n1 = head(hidden[:1], one)
    assert n1.item() == 1 and abs(l1.item() - F.cross_entropy(s[None], torch.tensor([target])).item()) < 1e-5
    with pytest.raises(ValueError, match=r"\(B, K, 2\)"):
        head(hidden, dict(batch, **{"ptr.edge": ptr[..., 0]}))


def test_contrastive_head(model, rows):
    batch = collate(rows)
    pair = batch["scalar.pair"].clone()  # document i of the examples carries value i
    # documents 0,1 -> pair 0 (side 0, 1); 2,3 -> pair 1; 4 -> side 0 of pair 2 with no partner; 5,6 unpaired
    remap = {0: 0, 1: 1, 2: 2, 3: 3, 4: 4, 5: IGNORE, 6: IGNORE}
    pair = pair.apply_(lambda v: remap.get(v, v))
    b = dict(batch, **{"scalar.pair": pair})
    head = P.build_head("contrastive", model)
    hidden = model.encode(b)
    loss, n = head(hidden, b)
    assert n.item() == 2 and torch.isfinite(loss)
    # identical embeddings on both sides of every pair and orthogonal otherwise: loss ~ 0
    c = hidden.shape[-1]
    fake = torch.zeros_like(hidden)
    seg = b["segment_ids"]
    for i in range(seg.shape[0]):
        for d in range(pair.shape[1]):
            v = pair[i, d].item()
            if v != IGNORE:
                fake[i, seg[i] == d + 1, (v // 2) % c] = 1.0
    l0, n0 = head(fake, b)
    assert n0.item() == 2 and l0.item() < 1e-6
    dup = pair.clone()
    dup[dup == 2] = 0  # pair id 0 twice on side 0
    with pytest.raises(ValueError, match="twice"):
        head(hidden, dict(b, **{"scalar.pair": dup}))


def test_pretrainer_all_heads_backward(batch):
    torch.manual_seed(0)
    m = T.Transformer(T.tiny())
    heads = {name: P.build_head(name, m) for name in ("mlm", "lm", "sop", "edge", "contrastive", "rtd")}
    model = P.Pretrainer(m, heads)
    out = model(batch)  # no labels.rtd in this batch: zero loss, zero count, still in the graph
    assert out["rtd"][1].item() == 0 and out["rtd"][0].item() == 0
    assert all(n.item() > 0 for name, (_, n) in out.items() if name != "rtd")
    total = sum(ls / n.clamp(min=1) for ls, n in out.values())
    total.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
    assert model.heads["mlm"].bias.grad.abs().sum() > 0 and model.heads["edge"].none.grad.abs() > 0


def test_empty_labels_give_zero_and_grads(model, batch):
    b = dict(batch, **{"labels.mlm": torch.full_like(batch["labels.mlm"], IGNORE)})
    head = P.build_head("mlm", model)
    hidden = model.encode(b)
    loss, n = head(hidden, b)
    assert loss.item() == 0 and n.item() == 0
    loss.backward()
    assert head.dense.weight.grad is not None and head.dense.weight.grad.abs().sum() == 0
    assert np.isfinite(loss.item())


# --- contrastive negatives across data-parallel ranks (2 gloo processes) -----------------------------


def _pair_batch(rank: int, step: int, c: int = 8):
    """One row of documents with pair keys: rank 0 has 3 pairs, rank 1 has 2 pairs + an unpaired doc;
    at step 1 rank 1's batch has no pair field at all."""
    g = torch.Generator().manual_seed(10 * rank + step)
    keys = [0, 1, 2, 3, 4, 5] if rank == 0 else [2 * 7, 2 * 7 + 1, 2 * 9 + 1, 2 * 9, IGNORE]
    seg = torch.tensor([[d + 1 for d in range(len(keys)) for _ in range(3)]])  # 3 tokens per document
    hidden = torch.randn(1, seg.shape[1], c, generator=g)
    batch = {"segment_ids": seg}
    if not (rank == 1 and step == 1):
        batch["scalar.pair"] = torch.tensor([keys])
    return hidden, batch


def _gather_worker(rank: int, world: int, port: int, out: str):
    import os

    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    head = H.ContrastiveHead(T.Transformer(T.tiny()), temperature=0.1)
    res = []
    for step in range(2):
        hidden, batch = _pair_batch(rank, step)
        hidden.requires_grad_(True)
        loss, n = head(hidden, batch)
        loss.backward()
        res.append((loss.item(), n.item(), hidden.grad.clone()))
    torch.save(res, f"{out}/rank{rank}.pt")
    dist.destroy_process_group()


def test_contrastive_negatives_gathered_across_ranks(tmp_path):
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(_gather_worker, args=(2, port, str(tmp_path)), nprocs=2, join=True)
    got = [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]
    head = H.ContrastiveHead(T.Transformer(T.tiny()), temperature=0.1)  # no process group: local only
    for step in range(2):
        hid = [_pair_batch(r, step)[0].requires_grad_(True) for r in range(2)]
        emb = [head.embed(h, _pair_batch(r, step)[1]) for r, h in enumerate(hid)]
        a = torch.cat([z[k % 2 == 0] for z, k in emb]); pa = torch.cat([k[k % 2 == 0] // 2 for z, k in emb])
        b = torch.cat([z[k % 2 == 1] for z, k in emb]); pb = torch.cat([k[k % 2 == 1] // 2 for z, k in emb])
        refs = []
        for r in range(2):  # reference: rank r's pairs against every rank's candidates, one process
            z, k = emb[r]
            mine = k[k % 2 == 0] // 2
            mine = mine[torch.isin(mine, k[k % 2 == 1] // 2)]
            ia = torch.nonzero(pa[:, None] == mine[None, :])[:, 0]  # rows of a / b of rank r's pairs
            ib = torch.nonzero(pb[:, None] == mine[None, :])[:, 0]
            refs.append(((F.cross_entropy(a[ia] @ b.T / 0.1, ib, reduction="sum")
                          + F.cross_entropy(b[ib] @ a.T / 0.1, ia, reduction="sum")) / 2, len(mine)))
        # the gradient each rank gets is that of the SUM of both ranks' losses (one big batch)
        grads = [g if g is not None else torch.zeros_like(h)
                 for g, h in zip(torch.autograd.grad(refs[0][0] + refs[1][0], hid, allow_unused=True), hid)]
        for r in range(2):
            loss, n, g = got[r][step]
            assert n == refs[r][1] and abs(loss - refs[r][0].item()) < 1e-4, (step, r, loss, refs[r][0].item())
            assert torch.allclose(g, grads[r], atol=1e-5)
            local = head(hid[r].detach(), _pair_batch(r, step)[1])[0]
            # more negatives, a larger loss than the local-only one (step 1: rank 1 sends none)
            assert local.item() < loss if step == 0 else abs(local.item() - loss) < 1e-4


# --- validation metrics: (loss_sum, n_valid, correct, count) from the same forward ------------------


def _with_rtd(batch):
    rtd = torch.where(batch["labels.mlm"] != IGNORE, 1, IGNORE)
    rtd[:, :5] = 0
    rtd[batch["segment_ids"] == 0] = IGNORE
    return dict(batch, **{"labels.rtd": rtd})


@pytest.mark.parametrize("name", ["mlm", "lm", "rtd", "sop", "edge"])
def test_metrics_loss_equals_training_loss_and_hits_are_argmax(model, batch, name):
    torch.manual_seed(1)
    head = P.build_head(name, model).eval()
    b = _with_rtd(batch)
    hidden = model.encode(b)
    loss, n = head(hidden, b)
    m = head(hidden, b, metrics=True)
    assert isinstance(m, H.Metrics) and m.loss_sum.item() == loss.item() and m.n_valid.item() == n.item() > 0
    assert m.count.item() == n.item()
    # the reference: top-1 of the head's own logits, recomputed by hand for two heads
    if name == "mlm":
        valid = b["labels.mlm"] != IGNORE
        want = int((head.logits(hidden[valid]).argmax(-1) == b["labels.mlm"][valid]).sum())
        assert m.correct.item() == want
    if name == "rtd":
        valid = b["labels.rtd"] != IGNORE
        logits = head.out(F.gelu(head.dense(hidden[valid])))
        assert m.correct.item() == int((logits.argmax(-1) == b["labels.rtd"][valid]).sum())
    assert 0 <= m.correct.item() <= m.count.item()


def test_metrics_of_a_perfect_mlm_head_are_all_correct(model, batch):
    head = P.build_head("mlm", model)
    with torch.no_grad():
        head.bias.zero_()
        head.bias[batch["labels.mlm"][batch["labels.mlm"] != IGNORE][0]] = 1e4  # always predicts one id
    m = head(model.encode(batch), batch, metrics=True)
    labels = batch["labels.mlm"][batch["labels.mlm"] != IGNORE]
    assert m.correct.item() == int((labels == labels[0]).sum()) and m.count.item() == len(labels)


def test_contrastive_metrics_retrieve_the_partner(model, rows):
    batch = collate(rows)
    remap = {0: 0, 1: 1, 2: 2, 3: 3, 4: 4, 5: IGNORE, 6: IGNORE}
    pair = batch["scalar.pair"].clone().apply_(lambda v: remap.get(v, v))
    b = dict(batch, **{"scalar.pair": pair})
    head = P.build_head("contrastive", model)
    hidden = model.encode(b)
    fake = torch.zeros_like(hidden)  # each pair on its own axis: the partner is the top-1 both ways
    seg = b["segment_ids"]
    for i in range(seg.shape[0]):
        for d in range(pair.shape[1]):
            v = pair[i, d].item()
            if v != IGNORE:
                fake[i, seg[i] == d + 1, (v // 2) % hidden.shape[-1]] = 1.0
    m = head(fake, b, metrics=True)
    assert (m.n_valid.item(), m.correct.item(), m.count.item()) == (2, 4, 4)
    assert m.loss_sum.item() == head(fake, b)[0].item()
    swapped = fake.clone()  # pair 0's code side now looks like pair 1: both its directions miss
    for i in range(seg.shape[0]):
        for d in range(pair.shape[1]):
            if pair[i, d].item() == 1:
                swapped[i, seg[i] == d + 1] = 0.0
                swapped[i, seg[i] == d + 1, 1 % hidden.shape[-1]] = 1.0
    assert head(swapped, b, metrics=True).correct.item() < 4


def test_pretrainer_metrics_cover_every_head(batch):
    torch.manual_seed(0)
    m = T.Transformer(T.tiny())
    model = P.Pretrainer(m, {n: P.build_head(n, m) for n in ("mlm", "contrastive", "rtd")}).eval()
    with torch.no_grad():
        out = model(batch, metrics=True)
        train = model(batch)
    assert set(out) == {"mlm", "contrastive", "rtd"} and all(isinstance(v, H.Metrics) for v in out.values())
    assert out["rtd"].count.item() == 0 and out["mlm"].count.item() > 0  # no labels.rtd: zeros
    assert all(out[h].loss_sum.item() == train[h][0].item() for h in out)
