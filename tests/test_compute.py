"""Issue 25's compute path: varlen attention equals the dense reference on every regime's mask rule
(fp32 and bf16), flash-attn's dispatch, sparse heads equal dense ones (loss, gradients, metrics),
activation checkpointing changes no gradient, and the run switches are checked before any work.

Tolerances (stated here once, asserted below):
  fp32  hidden states and losses within 1e-5 (absolute, LayerNorm'd states of size ~1) of the
        reference path; gradients within 1e-5 of the largest gradient entry.
  bf16  (torch.autocast on the CPU) hidden states within 1e-3 of the fp32 reference, and no more than
        1.25 x the dense sdpa path's own bf16 error (measured: 2.3e-4 to 3.4e-4 for both paths, equal
        to two digits, on every regime; fp32: <= 7.2e-7 for both).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from codept.data.collate import collate
from codept.data.example import IGNORE
from codept.data.pack import pack
from codept.data.sources import stdlib_files
from codept.model import transformer as T
from codept.model.pretrainer import Pretrainer, build_head
from codept.objectives import HEADS_OF, build
from codept.objectives.render import Vocab

FP32_TOL, BF16_TOL = 1e-5, 1e-3


@pytest.fixture(scope="module")
def vocab(default_tok):
    return Vocab.from_tokenizer(default_tok)


LENGTHS = (60, 150, 90, 300, 40, 120, 75, 200, 55, 100, 35, 80)  # tokens: rows of 128 hold several, or a part


@pytest.fixture(scope="module")
def views(default_tok):
    """Real documents: the first LENGTHS[i] tokens of 12 stdlib modules."""
    files = [f for f in stdlib_files() if f.stat().st_size > 3000][:len(LENGTHS)]
    return [SimpleNamespace(input_ids=np.array(default_tok.encode(f.read_text(errors="replace")[:4000]).ids[:n], np.int32))
            for f, n in zip(files, LENGTHS)]


def rows_of(name: str, vocab, views, seq: int = 128, n: int = 6, **cfg) -> dict:
    """A padded batch of ``n`` packed rows of objective ``name`` over real documents."""
    if name in ("glm", "plm"):
        cfg.setdefault("max_tokens", seq)  # whole examples in a row (their masks need them whole)
    obj = build(name, vocab, **cfg)
    exs = [obj(v, np.random.default_rng([0, 0, i])) for i, v in enumerate(views)]
    exs = [x for e in exs for x in (e if isinstance(e, list) else [e])]  # glm: every window of a read
    return collate(pack([e for e in exs if e is not None], seq, vocab.pad_id)[:n])


def net_of(name: str, vocab, attention: str, seed: int = 0, **model) -> Pretrainer:
    torch.manual_seed(seed)
    m = T.Transformer(T.tiny(vocab_size=vocab.size, block_positions=name == "glm", attention=attention, **model))
    return Pretrainer(m, {h: build_head(h, m) for h in HEADS_OF[name]})


# Every regime's mask rule on real packed rows: (objective, the rule its rows exercise)
RULES = {
    "mlm": "bidirectional",  # prefix all True: one SDPA call per group, no mask
    "ar": "causal",  # prefix all False, row order: is_causal
    "unilm": "prefix",  # bidirectional / left-to-right / seq2seq documents mixed in one batch
    "glm": "prefix",  # part A visible to all, part B causal; 2-D positions
    "plm": "two-stream",  # content stream: the order rule; query stream: the strict order rule
    "electra": "bidirectional",  # the generator's encoder too
}


def _kinds(batch: dict) -> set:
    return set(T.documents(batch["segment_ids"], batch["prefix"], batch.get("order")).kinds)


def test_rows_exercise_each_mask_kind(vocab, views):
    """The real rows below do reach every branch of the varlen path: several documents per row,
    padding, and each mask kind."""
    b = rows_of("unilm", vocab, views)
    assert (b["segment_ids"].max(1).values >= 2).any() and (b["segment_ids"] == 0).any()
    assert _kinds(b) == {"full", "causal", "mask"}
    assert _kinds(rows_of("mlm", vocab, views)) == {"full"}
    assert _kinds(rows_of("ar", vocab, views)) == {"causal"}
    plm = rows_of("plm", vocab, views)
    assert _kinds(plm) == {"mask"}
    assert T.documents(plm["segment_ids"], plm["prefix"], plm["order"], strict=True).kinds == {"mask"}


def _grads(net) -> dict:
    return {n: p.grad.clone() for n, p in net.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("name", list(RULES))
def test_varlen_equals_reference_fp32(name, vocab, views):
    """Per regime: hidden states (both streams for plm), every head's loss and count, and every
    gradient of the varlen path equal the reference path's (the dense masked softmax)."""
    b = rows_of(name, vocab, views)
    out, grads, hidden = {}, {}, {}
    for path in ("reference", "varlen"):
        net = net_of(name, vocab, path)
        torch.manual_seed(1)  # ELECTRA samples: the same draws on both paths
        res = net(b)
        sum(s / n.clamp(min=1) for s, n in res.values()).backward()
        out[path], grads[path] = {h: (float(s.detach()), int(n)) for h, (s, n) in res.items()}, _grads(net)
        with torch.no_grad():
            if name == "plm":
                hidden[path] = torch.cat(net.model.two_stream(b, net.heads["plm"].query))
            else:
                hidden[path] = net.model.encode(b)
    assert (hidden["varlen"] - hidden["reference"]).abs().max() < FP32_TOL, RULES[name]
    for h, (loss, n) in out["varlen"].items():
        ref, n_ref = out["reference"][h]
        assert n == n_ref > 0
        assert abs(loss - ref) <= FP32_TOL * max(1.0, abs(ref)), (h, loss, ref)
    assert grads["varlen"].keys() == grads["reference"].keys()
    scale = max(float(g.abs().max()) for g in grads["reference"].values())
    for k, g in grads["varlen"].items():
        assert (g - grads["reference"][k]).abs().max() <= FP32_TOL * scale, k


@pytest.mark.parametrize("name", ["mlm", "ar", "unilm", "plm"])
def test_varlen_bf16_is_as_close_as_dense(name, vocab, views):
    """Under bf16 autocast the varlen path is as close to the fp32 reference as the dense sdpa path."""
    b = rows_of(name, vocab, views)
    net = net_of(name, vocab, "reference").eval()

    def states(path, bf16):
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            if name == "plm":
                return torch.cat(net.model.two_stream(b, net.heads["plm"].query, attention=path)).float()
            return net.model.encode(b, attention=path).float()

    ref = states("reference", False)
    dense = (states("sdpa", True) - ref).abs().max()
    varlen = (states("varlen", True) - ref).abs().max()
    # plm: the query stream starts from w's raw scale (no embedding LayerNorm), so its states are the
    # bf16 attention output itself: ~2 bf16 ulps at |g| ~3 (measured 0.0053 on both paths), not 1e-3
    tol = 1e-2 if name == "plm" else BF16_TOL
    assert varlen < tol and varlen <= 1.25 * dense + 1e-6, (RULES[name], float(varlen), float(dense))


def test_explicit_orders_and_prefixes_on_one_document_rows(vocab, views):
    """The `order` rule with random factorisation orders, causal and prefix-LM masks on rows that are
    each ONE whole document (the varlen path's no-gather case) and on a partial prefix."""
    ids = torch.tensor(np.stack([v.input_ids[:96] for v in views if len(v.input_ids) >= 96][:4]).astype(np.int64))
    b, t = ids.shape
    g = torch.Generator().manual_seed(0)
    base = {"input_ids": ids, "segment_ids": torch.ones_like(ids), "positions": torch.arange(t).expand(b, t)}
    cases = {"bidirectional": torch.ones(b, t, dtype=torch.bool), "causal": torch.zeros(b, t, dtype=torch.bool),
             "prefix": torch.arange(t).expand(b, t) < torch.tensor([[10], [40], [0], [95]])}
    torch.manual_seed(0)
    m = T.Transformer(T.tiny(vocab_size=vocab.size)).eval()
    with torch.no_grad():
        for rule, pre in cases.items():
            for order in (None, torch.stack([torch.randperm(t, generator=g) for _ in range(b)])):
                batch = {**base, "prefix": pre, **({} if order is None else {"order": order})}
                ref = m.encode(batch, attention="reference")
                assert (m.encode(batch, attention="varlen") - ref).abs().max() < FP32_TOL, (rule, order is None)
                query = torch.randn(m.config.hidden, generator=g)  # both streams: the strict rule too
                ref = torch.cat(m.two_stream(batch, query, attention="reference"))
                got = torch.cat(m.two_stream(batch, query, attention="varlen"))
                assert (got - ref).abs().max() < FP32_TOL, (rule, order is None, "two-stream")


def test_padding_free_layout_gives_the_same_states(vocab, views):
    """codept.data.collate's varlen layout (one (1, N) sequence, cu_seqlens) through the varlen path
    equals the padded batch's states at the real tokens."""
    exs = [build("unilm", vocab)(v, np.random.default_rng([0, 0, i])) for i, v in enumerate(views)]
    rows = pack(exs, 128, vocab.pad_id)[:4]
    padded, flat = collate(rows), collate(rows, varlen=True)
    docs = T.documents(flat["segment_ids"], flat["prefix"])
    assert np.array_equal(np.r_[docs.starts, flat["input_ids"].shape[1]], flat["cu_seqlens"].numpy())
    torch.manual_seed(0)
    m = T.Transformer(T.tiny(vocab_size=vocab.size, max_positions=512)).eval()
    with torch.no_grad():
        want = m.encode(padded, attention="reference")[padded["segment_ids"] > 0]
        got = m.encode(flat, attention="varlen")[0]
    assert (got - want).abs().max() < FP32_TOL


def test_varlen_refuses_a_split_document():
    seg = torch.tensor([[1, 1, 2, 2, 1, 0]])
    with pytest.raises(ValueError, match="contiguous run"):
        T.documents(seg, torch.ones(1, 6, dtype=torch.bool))


def test_flash_attn_dispatch_and_its_layout(vocab, views):
    """flash-attn is not installed here: the varlen path picks it only when it is there, on CUDA, in
    bf16/fp16 and with one mask kind it has; a stand-in with flash_attn_varlen_func's signature
    (per-document SDPA over the (N, H, D) tokens and int32 cu_seqlens) checks what the path hands it."""
    b = rows_of("mlm", vocab, views)
    docs = T.documents(b["segment_ids"], b["prefix"])
    mixed = T.documents(*(lambda u: (u["segment_ids"], u["prefix"]))(rows_of("unilm", vocab, views)))
    fn = object()
    pick = T.varlen_kernel
    assert T._flash_varlen() is None  # not installed in this environment
    assert pick(docs, "cuda", torch.bfloat16, 64, fn) == "flash_attn"
    assert pick(docs, "cuda", torch.bfloat16, 64, None) == "sdpa"  # not installed
    assert pick(docs, "cpu", torch.bfloat16, 64, fn) == "sdpa"
    assert pick(docs, "cuda", torch.float32, 64, fn) == "sdpa"  # flash-attn has no fp32
    assert pick(docs, "cuda", torch.bfloat16, 320, fn) == "sdpa"
    assert pick(mixed, "cuda", torch.bfloat16, 64, fn) == "sdpa"  # prefix-LM documents: a mask flash lacks
    calls = []

    def flash_varlen(q, k, v, cu_q, cu_k, max_q, max_k, dropout_p=0.0, causal=False):
        calls.append((cu_q.dtype, int(max_q), causal))
        assert q.dim() == 3 and cu_q.dtype == torch.int32 and int(cu_q[-1]) == q.shape[0] and torch.equal(cu_q, cu_k)
        ys = [torch.nn.functional.scaled_dot_product_attention(*(x[s:e].transpose(0, 1) for x in (q, k, v)),
                                                               is_causal=causal).transpose(0, 1)
              for s, e in zip(cu_q[:-1].tolist(), cu_q[1:].tolist())]
        return torch.cat(ys)

    q, k, v = (torch.randn(*b["input_ids"].shape, 4, 8) for _ in range(3))
    orig = T.varlen_kernel
    try:
        T.varlen_kernel = lambda *a: "flash_attn"  # as on a GPU with flash-attn
        got = T.varlen_attend(q, k, v, docs, flash=flash_varlen)
    finally:
        T.varlen_kernel = orig
    want = T.varlen_attend(q, k, v, docs)
    assert calls == [(torch.int32, int(docs.lengths.max()), False)]
    assert (got - want).abs().max() < FP32_TOL


# ------------------------------------------------------------------------------------------------
# sparse heads: logits only at the targets, the same loss, gradients and metrics as the dense head

TOKEN_HEADS = {"mlm": "mlm", "ar": "lm", "electra": "rtd", "plm": "plm", "glm": "glm"}


@pytest.mark.parametrize("name", list(TOKEN_HEADS))
def test_sparse_head_equals_dense_head(name, vocab, views):
    """Each token-level head projected at its targets only equals the same head projected at every
    position then selected (the dense head): loss, count, metrics and every gradient, fp32."""
    b = rows_of(name, vocab, views)
    head = TOKEN_HEADS[name]
    out, grads = {}, {}
    for sparse in (True, False):
        net = net_of(name, vocab, "varlen")
        net.heads[head].sparse = sparse
        torch.manual_seed(1)
        s, n = net(b)[head]
        (s / n.clamp(min=1)).backward()
        s = s.detach()
        net.eval()
        with torch.no_grad():
            torch.manual_seed(1)
            out[sparse] = (float(s), int(n), net(b, metrics=True)[head])
        grads[sparse] = _grads(net)
    (s1, n1, m1), (s0, n0, m0) = out[True], out[False]
    assert n1 == n0 > 0 and abs(s1 - s0) <= 1e-6 * max(1.0, abs(s0))
    assert int(m1.correct) == int(m0.correct) and int(m1.count) == int(m0.count)
    if m1.extra is not None:
        assert torch.equal(m1.extra, m0.extra)
    scale = max(float(g.abs().max()) for g in grads[False].values())
    for k, g in grads[True].items():
        assert (g - grads[False][k]).abs().max() <= 1e-6 * scale, k


def test_sparse_head_projects_only_the_targets(vocab, views):
    """What makes it sparse: the vocabulary projection sees N_targets rows, not B * T."""
    b = rows_of("mlm", vocab, views)
    net = net_of("mlm", vocab, "varlen")
    seen = []
    hook = net.heads["mlm"].dense.register_forward_hook(lambda m, i, o: seen.append(i[0].shape[0]))
    net(b)
    hook.remove()
    assert seen == [int((b["labels.mlm"] != IGNORE).sum())] and seen[0] < 0.25 * b["input_ids"].numel()


# ------------------------------------------------------------------------------------------------
# activation checkpointing


def test_checkpointing_changes_no_gradient(vocab, views):
    b = rows_of("unilm", vocab, views)
    grads = {}
    for ckpt in (False, True):
        net = net_of("unilm", vocab, "varlen", checkpointing=ckpt).train()
        s, n = net(b)["mlm"] if "mlm" in net.heads else next(iter(net(b).values()))
        (s / n.clamp(min=1)).backward()
        grads[ckpt] = _grads(net)
    for k, g in grads[True].items():
        assert torch.equal(g, grads[False][k]), k


# ------------------------------------------------------------------------------------------------
# torch.compile


def test_compiled_pretrainer_equals_eager(vocab, views):
    """The Pretrainer traced by dynamo + AOT autograd (backend aot_eager: the graphs and graph breaks
    torch.compile makes, without inductor's codegen, which takes minutes here) gives the eager loss
    and gradients on batches with different target counts (the dynamic-shape recompile) and on the
    varlen path's eager islands."""
    batches = [rows_of(name, vocab, views) for name in ("mlm", "unilm")]
    assert int((batches[0]["labels.mlm"] != IGNORE).sum()) != int((batches[1]["labels.mlm"] != IGNORE).sum())
    eager, compiled = net_of("mlm", vocab, "varlen"), net_of("mlm", vocab, "varlen")
    compiled.compile(backend="aot_eager")
    for b in batches:
        got = {}
        for key, net in (("eager", eager), ("compiled", compiled)):
            s, n = net(b)["mlm"]
            (s / n).backward()
            got[key] = (float(s.detach()), _grads(net))
            net.zero_grad(set_to_none=True)
        assert abs(got["eager"][0] - got["compiled"][0]) <= FP32_TOL * got["eager"][0]
        for k, g in got["eager"][1].items():
            assert (g - got["compiled"][1][k]).abs().max() <= FP32_TOL * max(1e-3, float(g.abs().max())), k


# ------------------------------------------------------------------------------------------------
# the run switches, checked before any work (codept.train.loop.configure)


def test_run_switches_are_checked_before_any_work(monkeypatch, tmp_path):
    import sys
    from pathlib import Path

    from codept.train.config import RunConfig, derive, precision_of
    from codept.train.settings import ConfigError

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "recipes"))
    import pretrain_code as CODE

    base = ["model.hidden=64", "model.heads=2", "data.mixture=mlm:1"]
    s, _ = CODE.configure("debug_cpu", base + ["compile=true", "precision=bf16_autocast", "model.checkpointing=true",
                                               "model.attention=varlen"])
    assert s.run.compile and s.sections["model"].checkpointing and s.sections["model"].attention == "varlen"
    for items, key in [(["compile=maybe"], "compile"), (["precision=bf17"], "precision"),
                       (["model.attention=fast"], "attention"), (["model.attention=flex"], "attention_dropout")]:
        with pytest.raises(ConfigError) as e:
            CODE.configure("debug_cpu", base + items)
        assert key in str(e.value), (items, str(e.value))
    monkeypatch.setenv("PATH", str(tmp_path))  # no C++ compiler: inductor could not build CPU kernels
    monkeypatch.delenv("CXX", raising=False)
    with pytest.raises(ConfigError, match="compile=true: torch.compile on CPU .* no compiler"):
        CODE.configure("debug_cpu", base + ["compile=true"])
    # bf16 autocast is DeepSpeed's torch_autocast (fp32 weights); bf16 (bf16 weights) turns it off again
    ds = derive(RunConfig(precision="bf16_autocast", ds_config="zero2_bf16"), 1).ds_config
    assert ds["torch_autocast"] == {"enabled": True, "dtype": "bfloat16"} and not ds["bf16"]["enabled"]
    assert precision_of(ds) == "bf16_autocast"
    engine_only = {k: v for k, v in ds.items() if k not in ("train_batch_size", "train_micro_batch_size_per_gpu",
                                                            "gradient_accumulation_steps", "gradient_clipping")}
    ds = derive(RunConfig(precision="bf16"), 1, engine_only).ds_config
    assert ds["bf16"]["enabled"] and not ds["torch_autocast"]["enabled"] and precision_of(ds) == "bf16"
    assert "torch_autocast" not in derive(RunConfig(precision="fp32"), 1).ds_config
