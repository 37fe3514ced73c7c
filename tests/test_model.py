"""The transformer: attention paths agree, the one attention rule holds, presets build."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from codept.attention import visible
from codept.data.collate import collate
from codept.data.pack import pack
from codept.model import transformer as T
from model_data import SEQ, real_examples


@pytest.fixture(scope="module")
def examples(byte_tok):
    return real_examples(byte_tok)


@pytest.fixture(scope="module")
def batch(examples):
    rows = pack(examples, SEQ, pad_id=0)
    assert len(rows) >= 2 and any(r["segment_ids"].max() >= 2 for r in rows)
    assert any((r["segment_ids"] == 0).any() for r in rows)  # padding present
    return collate(rows)


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return T.Transformer(T.tiny()).eval()


def test_mask_is_the_rule(batch):
    seg, pre = batch["segment_ids"], batch["prefix"]
    got = T.visibility(seg, pre).numpy()
    want = visible(seg.numpy(), pre.numpy())
    real = seg.numpy() != 0
    assert (got[real] == want[real]).all()
    pad_b, pad_q = np.nonzero(~real)
    assert (got[pad_b, pad_q].sum(-1) == 1).all() and got[pad_b, pad_q, pad_q].all()  # padding sees itself only


def test_reference_equals_sdpa(model, batch):
    with torch.no_grad():
        ref = model.encode(batch, attention="reference")
        fast = model.encode(batch, attention="sdpa")
    assert torch.isfinite(ref).all() and torch.isfinite(fast).all()  # padding rows: no NaN
    assert (ref - fast).abs().max().item() < 1e-5


@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
def test_reference_equals_flex(model, batch):
    pytest.importorskip("torch.nn.attention.flex_attention")
    try:
        with torch.no_grad():
            flex = model.encode(batch, attention="flex")
    except Exception as e:  # flex needs a backend this build lacks
        pytest.skip(f"flex attention unavailable: {e}")
    with torch.no_grad():
        ref = model.encode(batch, attention="reference")
    assert (ref - flex).abs().max().item() < 1e-5


def test_packed_document_equals_document_alone(model, batch, examples):
    """Packing changes nothing a document computes: positions restart, other documents are invisible."""
    with torch.no_grad():
        packed = model.encode(batch)
        seg = batch["segment_ids"]
        for b in range(seg.shape[0]):
            for s in range(1, int(seg[b].max()) + 1):
                idx = torch.nonzero(seg[b] == s).squeeze(1)
                ids = batch["input_ids"][b, idx][None]
                alone = model(ids, prefix=batch["prefix"][b, idx][None])
                assert (alone[0] - packed[b, idx]).abs().max().item() < 1e-5


def test_other_document_cannot_change_a_token(model, batch):
    seg = batch["segment_ids"]
    b = int(torch.nonzero(seg.max(1).values >= 2)[0])
    other = seg[b] == 2
    changed = dict(batch, input_ids=batch["input_ids"].clone())
    changed["input_ids"][b, other] = (changed["input_ids"][b, other] + 7) % 300 + 100
    with torch.no_grad():
        h0, h1 = model.encode(batch), model.encode(changed)
    assert torch.equal(h0[b, ~other], h1[b, ~other])  # bit-identical outside document 2
    assert (h0[b, other] - h1[b, other]).abs().max() > 1e-3
    assert torch.equal(h0[:b], h1[:b]) and torch.equal(h0[b + 1:], h1[b + 1:])


def _perturbed(model, prefix: torch.Tensor | None, j: int) -> torch.Tensor:
    """Which positions' outputs change when token j changes: (T,) bool."""
    ids = torch.arange(150, 170)[None]
    ids2 = ids.clone()
    ids2[0, j] = 300
    pre = None if prefix is None else prefix[None]
    with torch.no_grad():
        d = (model(ids, prefix=pre) - model(ids2, prefix=pre)).abs().amax(-1)[0]
    return d > 1e-6


def test_bidirectional_causal_prefix(model):
    t = 20
    pos = torch.arange(t)
    assert _perturbed(model, torch.ones(t, dtype=torch.bool), 10).all()  # bidirectional: everyone sees 10
    assert torch.equal(_perturbed(model, torch.zeros(t, dtype=torch.bool), 10), pos >= 10)  # causal
    pre = pos < 12  # prefix-LM: tokens 0..11 are the prefix
    assert _perturbed(model, pre, 10).all()  # a prefix token is visible to every query
    assert torch.equal(_perturbed(model, pre, 15), pos >= 15)  # a target token only to later ones
    assert _perturbed(model, None, 10).all()  # no prefix + causal=False: bidirectional
    causal = T.Transformer(T.tiny(causal=True)).eval()
    causal.load_state_dict(model.state_dict())
    assert torch.equal(_perturbed(causal, None, 10), pos >= 10)  # no prefix + causal=True: decoder


def test_gradients_flow_and_train_mode(batch):
    torch.manual_seed(0)
    m = T.Transformer(T.tiny(dropout=0.1, attention_dropout=0.1, checkpointing=True)).train()
    h = m.encode(batch)
    real = batch["segment_ids"] != 0
    (h[real] ** 2).mean().backward()
    for name, p in m.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
        if name != "embed.types.weight":  # only type 0 is ever used
            assert p.grad.abs().sum() > 0, name


def test_presets_and_config():
    for name, preset in T.PRESETS.items():
        cfg = preset()
        with torch.device("meta"):
            m = T.Transformer(cfg)
        assert m.num_parameters() > 0, name
    with torch.device("meta"):
        n = T.Transformer(T.small_1xh200()).num_parameters()
    assert 115e6 < n < 135e6  # ~125 M, BERT-base shape
    assert T.tiny(vocab_size=999).vocab_size == 999
    with pytest.raises(TypeError, match="no fields"):
        T.tiny(hiden=3)
    with pytest.raises(ValueError, match="divisible"):
        T.tiny(hidden=30)
    with pytest.raises(ValueError, match="attention"):
        T.tiny(attention="fast")
    m = T.Transformer(T.tiny())
    assert m.flops_per_token(128) > 6 * m.num_parameters(embeddings=False)


def test_zero_residual_init_starts_as_the_identity_and_trains(batch):
    """residual_init="zero": every block's output projections start at 0, so the encoder's output is
    the embedding layer's (a bag of token + position vectors); one optimizer step makes them non-zero."""
    torch.manual_seed(0)
    m = T.Transformer(T.tiny(residual_init="zero")).eval()
    emb = m.embed(batch["input_ids"], batch["positions"])
    torch.testing.assert_close(m.encode(batch), emb, rtol=0, atol=1e-6)
    for block in m.blocks:
        assert not block.attn.out.weight.any() and not block.down.weight.any()
        assert block.attn.q.weight.abs().sum() > 0 and block.up.weight.abs().sum() > 0  # the rest: BERT's init
    m.train()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
    real = batch["segment_ids"] != 0
    m.encode(batch)[real][:, 0].sum().backward()  # any loss that depends on the hidden states
    opt.step()
    assert all(block.attn.out.weight.any() and block.down.weight.any() for block in m.blocks)
    assert not torch.allclose(m.eval().encode(batch), emb)
    with pytest.raises(ValueError, match="residual_init"):
        T.tiny(residual_init="fixup")
