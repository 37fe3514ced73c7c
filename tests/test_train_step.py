"""codept.train.engine.train_step in-process, against a fake engine with DeepSpeed's semantics
(backward divides by gradient_accumulation_steps, gradients accumulate, one rank): the scaling, the
multi-head weighting and the error paths. The real multi-rank DeepSpeed check is
tests/test_train_ds.py::test_loss_normalisation_and_steps."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest
import torch

from codept.data.example import IGNORE
from codept.train import engine as E

_spec = importlib.util.spec_from_file_location("ds_worker", Path(__file__).with_name("ds_worker.py"))
W = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(W)


class FakeEngine:
    """DeepSpeed engine semantics on one rank: backward(loss) -> (loss / k).backward(); step() counts."""

    def __init__(self, model: torch.nn.Module, k: int):
        self.module, self.k, self.steps = model, k, 0
        self.device, self.dp_world_size, self.data_parallel_group = torch.device("cpu"), 1, None

    def __call__(self, *a, **kw):
        return self.module(*a, **kw)

    def gradient_accumulation_steps(self):
        return self.k

    def backward(self, loss):
        (loss / self.k).backward()

    def step(self):
        self.steps += 1

    def get_lr(self):
        return [0.1]

    def get_global_grad_norm(self):
        return None


@pytest.fixture(autouse=True)
def one_rank(monkeypatch):
    monkeypatch.setattr(E.dist, "all_reduce", lambda t, group=None, **kw: None)  # SUM over one rank
    monkeypatch.setattr(E.dist, "get_rank", lambda *a, **kw: 0)


def _batches():
    return W.norm_batches(0) + W.norm_batches(1)  # 4 micro-batches: 41, 3, 0, 17 valid tokens


def test_step_gradient_is_the_token_mean_over_all_micro_batches():
    mbs = _batches()
    ref = W.TinyLM(seed=0, dropout=0.0)
    outs = [W.lm_loss(ref, b)["lm"] for b in mbs]
    (sum(o[0] for o in outs) / sum(o[1] for o in outs)).backward()

    model = W.TinyLM(seed=0, dropout=0.0)
    eng = FakeEngine(model, k=len(mbs))
    logs = E.train_step(eng, mbs, W.lm_loss)
    assert eng.steps == 4 and logs["n.lm"] == 61 and math.isfinite(logs["loss"])
    assert logs["loss"] == pytest.approx(float(sum(o[0] for o in outs).detach()) / 61, rel=1e-6)
    for (n, p), (_, q) in zip(model.named_parameters(), ref.named_parameters()):
        torch.testing.assert_close(p.grad, q.grad, atol=1e-7, rtol=1e-5, msg=n)


def _two_heads(model, batch):
    logits = model(batch["input_ids"]).float()
    out = {}
    for h in ("a", "b"):
        lab = batch[f"labels.{h}"]
        out[h] = (torch.nn.functional.cross_entropy(logits.reshape(-1, W.VOCAB), lab.reshape(-1), ignore_index=IGNORE,
                                                    reduction="sum"), int((lab != IGNORE).sum()))
    return out


def test_heads_are_normalised_separately_and_weighted():
    mbs = []
    for b in _batches()[:2]:
        mbs.append({"input_ids": b["input_ids"], "labels.a": b["labels.lm"],
                    "labels.b": torch.where(b["labels.lm"] == IGNORE, b["input_ids"], IGNORE)})
    model = W.TinyLM(seed=0, dropout=0.0)
    logs = E.train_step(FakeEngine(model, 2), mbs, _two_heads, weights={"a": 1.0, "b": 0.5})
    ref = W.TinyLM(seed=0, dropout=0.0)
    outs = [_two_heads(ref, b) for b in mbs]
    mean = {h: float(sum(o[h][0] for o in outs).detach()) / sum(o[h][1] for o in outs) for h in ("a", "b")}
    assert logs["loss.a"] == pytest.approx(mean["a"], rel=1e-6)
    assert logs["loss.b"] == pytest.approx(mean["b"], rel=1e-6)
    assert logs["loss"] == pytest.approx(mean["a"] + 0.5 * mean["b"], rel=1e-6)
    assert logs["n.a"] + logs["n.b"] == 2 * 2 * 32


def test_a_head_with_no_valid_token_in_the_step_is_nan_and_ignored():
    mbs = [b for b in _batches() if int((b["labels.lm"] != IGNORE).sum()) == 0]
    logs = E.train_step(FakeEngine(W.TinyLM(0, 0.0), len(mbs)), mbs, W.lm_loss)
    assert math.isnan(logs["loss.lm"]) and logs["loss"] == 0.0 and logs["n.lm"] == 0


def test_wrong_number_of_micro_batches_is_refused():
    with pytest.raises(ValueError, match="got 4 micro-batches but .*gradient_accumulation_steps=2"):
        E.train_step(FakeEngine(W.TinyLM(0, 0.0), 2), _batches(), W.lm_loss)


def test_head_count_disagreeing_with_count_fn_is_refused():
    def off_by_one(model, batch):
        s, n = W.lm_loss(model, batch)["lm"]
        return {"lm": (s, n + 1)}

    with pytest.raises(ValueError, match=r"n_valid over the step differ from count_fn's counts"):
        E.train_step(FakeEngine(W.TinyLM(0, 0.0), 4), _batches(), off_by_one)


def test_uncounted_head_is_refused():
    def extra(model, batch):
        return {**W.lm_loss(model, batch), "other": (torch.zeros((), requires_grad=True), 0)}

    with pytest.raises(ValueError, match="head 'other' that count_fn did not count"):
        E.train_step(FakeEngine(W.TinyLM(0, 0.0), 4), _batches(), extra)


def test_label_counts():
    b = {"input_ids": torch.zeros(2, 3), "labels.mlm": torch.tensor([[1, IGNORE, 2], [IGNORE] * 3]),
         "labels.rtd": torch.tensor([[0, 1, 0], [1, 1, IGNORE]])}
    assert E.label_counts(b) == {"mlm": 2, "rtd": 5}


def _a_b_batches():
    mbs = []
    for b in _batches()[:2]:
        mbs.append({"input_ids": b["input_ids"], "labels.a": b["labels.lm"],
                    "labels.b": torch.where(b["labels.lm"] == IGNORE, b["input_ids"], IGNORE)})
    return mbs


def _grads(model):
    return {n: p.grad.clone() for n, p in model.named_parameters()}


def _head_mean_grads(mbs, h):
    """Gradient of head h's token mean over the step alone (the reference, one process)."""
    ref = W.TinyLM(seed=0, dropout=0.0)
    outs = [_two_heads(ref, b)[h] for b in mbs]
    (sum(o[0] for o in outs) / sum(o[1] for o in outs)).backward()
    return _grads(ref)


@pytest.mark.parametrize("wa,wb", [(0.0, 1.0), (2.5, 0.0), (0.3, 1.7)])
def test_head_weights_reach_the_gradient_exactly(wa, wb):
    """total loss = sum_h w_h * S_h / N_h: the applied gradient is w_a * grad(mean_a) + w_b * grad(mean_b);
    a weight of 0 leaves no trace of its head in the gradient."""
    mbs = _a_b_batches()
    model = W.TinyLM(seed=0, dropout=0.0)
    logs = E.train_step(FakeEngine(model, 2), mbs, _two_heads, weights={"a": wa, "b": wb})
    ga, gb = _head_mean_grads(mbs, "a"), _head_mean_grads(mbs, "b")
    for n, g in _grads(model).items():
        torch.testing.assert_close(g, wa * ga[n] + wb * gb[n], atol=1e-7, rtol=1e-5, msg=n)
    assert logs["loss"] == pytest.approx(wa * logs["loss.a"] + wb * logs["loss.b"], rel=1e-12)
    assert math.isfinite(logs["loss.a"]) and math.isfinite(logs["loss.b"])  # still logged when weighed 0


@pytest.mark.parametrize("weights,match", [({"c": 1.0}, r"heads \['c'\] that the step does not train"),
                                           ({"a": -1.0}, r"\{'a': -1.0\}: each must be finite and >= 0"),
                                           ({"b": float("nan")}, "finite and >= 0")])
def test_bad_head_weights_are_refused_before_any_forward(weights, match):
    model = W.TinyLM(seed=0, dropout=0.0)
    with pytest.raises(ValueError, match=match):
        E.train_step(FakeEngine(model, 2), _a_b_batches(), _two_heads, weights=weights)
    assert all(p.grad is None for p in model.parameters())


def test_evaluate_reports_per_head_loss_and_accuracy_in_eval_mode(byte_tok):
    from codept.data.collate import collate
    from codept.data.pack import pack
    from codept.model import pretrainer as P
    from codept.model import transformer as T
    from model_data import SEQ, real_examples

    rows = pack(real_examples(byte_tok), SEQ, pad_id=0)
    batches = [collate(rows[:2]), collate(rows[2:])]
    torch.manual_seed(0)
    m = T.Transformer(T.configure(T.tiny(), dropout=0.3))
    net = P.Pretrainer(m, {"mlm": P.build_head("mlm", m), "rtd": P.build_head("rtd", m)}).train()
    logs = E.evaluate(FakeEngine(net, 1), batches, ["mlm", "rtd"])
    assert net.training  # mode restored
    net.eval()
    with torch.no_grad():
        outs = [net(b, metrics=True)["mlm"] for b in batches]
    s, n, c, k = (sum(float(o[i]) for o in outs) for i in range(4))
    assert logs["val/mlm/loss"] == pytest.approx(s / n, rel=1e-9) and logs["val/mlm/acc"] == pytest.approx(c / k)
    assert logs["val/mlm/n"] == n > 0
    assert math.isnan(logs["val/rtd/loss"]) and math.isnan(logs["val/rtd/acc"])  # no rtd labels here
    assert E.evaluate(FakeEngine(net, 1), batches, ["mlm", "rtd"])["val/mlm/loss"] == logs["val/mlm/loss"]


@pytest.mark.parametrize("name,backend,want", [("zero2", "gloo", "adamw"), ("zero2_bf16", "nccl", "adamw_fused"),
                                               ("zero3", "nccl", "adamw_fused"),
                                               ("zero3_offload", "nccl", "cpu_adam"),
                                               ("zero3_offload", "gloo", "cpu_adam")])
def test_optimizer_kind_fused_on_gpu_ranks_cpu_adam_when_offloaded(name, backend, want):
    from codept.train import config as C
    from codept.train.optim import optimizer_kind

    assert optimizer_kind(C.load_engine_json(name), backend) == want



def test_binary_head_reports_f1_and_auc_on_the_replaced_class(byte_tok):
    """Issue 28.5: an RTD head's accuracy sits at the share of original tokens; validation also
    reports precision, recall, F1 and AUC on the replaced class, from sums that add over batches
    and ranks (codept.model.heads.binary_counts), equal to sklearn's on the head's own scores."""
    from sklearn.metrics import f1_score, roc_auc_score

    from codept.data.collate import collate
    from codept.data.pack import pack
    from codept.model import pretrainer as P
    from codept.model import transformer as T
    from model_data import SEQ, real_examples

    rows = pack(real_examples(byte_tok), SEQ, pad_id=0)
    batches = [collate(rows[:2]), collate(rows[2:])]
    g = torch.Generator().manual_seed(0)
    for b in batches:  # 20% replaced, IGNORE on padding
        b["labels.rtd"] = torch.where(b["segment_ids"] > 0, (torch.rand(b["segment_ids"].shape, generator=g) < 0.2).long(),
                                      torch.full_like(b["segment_ids"], -100))
    torch.manual_seed(0)
    m = T.Transformer(T.tiny())
    net = P.Pretrainer(m, {"rtd": P.build_head("rtd", m)})
    logs = E.evaluate(FakeEngine(net, 1), batches, ["rtd"])
    net.eval()
    ys, ms = [], []
    with torch.no_grad():
        for b in batches:
            h, head = net.model.encode(b), net.heads["rtd"]
            valid = b["labels.rtd"] != -100
            logit = head.out(torch.nn.functional.gelu(head.dense(h[valid])))
            ys.append(b["labels.rtd"][valid])
            ms.append(logit[:, 1] - logit[:, 0])
    y, margin = torch.cat(ys).numpy(), torch.cat(ms).numpy()
    assert logs["val/rtd/f1"] == pytest.approx(f1_score(y, margin > 0), rel=1e-9)
    assert logs["val/rtd/auc"] == pytest.approx(roc_auc_score(y, margin), abs=2e-3)  # margins binned by 1/16
    assert 0 < logs["val/rtd/recall"] < 1 and logs["val/rtd/acc"] == pytest.approx(float(((margin > 0) == y).mean()))
    assert set(logs) == {f"val/rtd/{k}" for k in ("loss", "acc", "n", "precision", "recall", "f1", "auc")}
