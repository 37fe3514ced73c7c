"""codept.loader (your own loop) and PackedStream.iter_loader, on prepared stdlib views:
workers x ranks see every row exactly once, HF models on HFCollator's 4-D mask see each packed
document as if it were alone, iter_loader's workers survive a low open-file limit."""

from __future__ import annotations

import collections
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
import torch.utils.data as tud

from codept.data.example import IGNORE
from codept.data.sources import stdlib_files
from codept.loader import HFCollator, hf_dataset, packed_dataset
from codept.model.heads import LMHead
from codept.model import transformer as T
from codept.objectives.render import Vocab
from codept.prepare import load_views, prepare
from codept.tokenizer import default_tokenizer_dir, load_tokenizer


@pytest.fixture(scope="module")
def prepared():
    """Views of 30 stdlib files with the default tokenizer (cached; the same as tests/test_examples.py's)."""
    tok = default_tokenizer_dir()
    s = prepare([str(p) for p in stdlib_files()[:30]], tokenizer_dir=tok, progress=False)
    return load_views(s["out"]), Vocab.from_tokenizer(load_tokenizer(tok)), (s["out"], tok)


def _digest(row: dict) -> bytes:
    return b"".join(k.encode() + np.ascontiguousarray(row[k]).tobytes() for k in sorted(row))


def _as_is(x):
    return x


def test_workers_x_ranks_yield_every_row_once(prepared):
    views, vocab, _ = prepared
    got, want = collections.Counter(), collections.Counter()
    for rank in (0, 1):
        ds = packed_dataset(views, "mlm:1,syntax_span:1", vocab, 128, buffer=16, rank=rank, world=2, buffers=5)
        assert (ds.stream.rank, ds.stream.world, ds.stream.mixture.world) == (rank, 2, 1)
        loader = tud.DataLoader(ds, batch_size=None, num_workers=2, collate_fn=_as_is,
                                multiprocessing_context="fork")
        got.update(_digest(r) for r in loader)
        want.update(_digest(r) for k in range(rank, 10, 2) for r in ds.stream.rows_of_buffer(k))
    # (a window without any label is the same row in every epoch: equal multisets, not sets)
    assert got == want, f"{sum(got.values())} rows from 2 ranks x 2 workers, {sum(want.values())} expected, " \
                        f"{sum(1 for v in got.values() if v > 1)} seen twice"


def test_rank_from_the_launcher_environment(prepared, monkeypatch):
    views, vocab, _ = prepared
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    ds = packed_dataset(views, "mlm:1", vocab, 128, buffer=8)
    assert (ds.stream.rank, ds.stream.world) == (1, 2)
    with pytest.raises(ValueError, match="rank=0, world=None"):
        packed_dataset(views, "mlm:1", vocab, 128, rank=0)


def test_hf_dataset_workers_yield_every_row_once(prepared):
    views, vocab, _ = prepared
    ds = hf_dataset(views, "mlm:1", vocab, 128, buffer=16, buffers=6, shards=4, rank=0, world=1)
    got = collections.Counter(_digest(r) for r in tud.DataLoader(ds, batch_size=None, num_workers=2,
                                                                  collate_fn=_as_is))
    ref = packed_dataset(views, "mlm:1", vocab, 128, buffer=16, rank=0, world=1).stream
    want = collections.Counter(_digest(r) for k in range(6) for r in ref.rows_of_buffer(k))
    assert got == want


def _multi_doc_rows(views, vocab, mixture: str, n: int = 4) -> list[dict]:
    ds = packed_dataset(views, mixture, vocab, 128, buffer=32, rank=0, world=1, buffers=2)
    rows = [r for r in ds if r["segment_ids"].max() >= 3]
    assert len(rows) >= n, "too few rows with 3+ documents"
    return rows[:n]


def _bert(vocab_size: int, decoder: bool, attn: str):
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=128, is_decoder=decoder,
                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, attn_implementation=attn)
    return BertModel(cfg).eval()


@pytest.mark.parametrize("mixture,decoder", [("mlm:1", False), ("ar:1", True)])
@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_hf_bert_on_the_4d_mask_sees_each_document_alone(prepared, mixture, decoder, attn):
    views, vocab, _ = prepared
    rows = _multi_doc_rows(views, vocab, mixture)
    batch = HFCollator(mask="bool" if attn == "sdpa" else "float")(rows)
    assert batch["attention_mask"].shape == (4, 1, 128, 128)
    model = _bert(vocab.size, decoder, attn)
    with torch.no_grad():
        packed = model(**{k: v for k, v in batch.items() if k != "labels"}).last_hidden_state
        leaky = model(input_ids=batch["input_ids"], position_ids=batch["position_ids"],
                      attention_mask=(torch.from_numpy(np.stack([r["segment_ids"] for r in rows])) > 0).long()
                      ).last_hidden_state
        worst = leak = 0.0
        for i, r in enumerate(rows):
            for s in range(1, int(r["segment_ids"].max()) + 1):
                at = np.flatnonzero(r["segment_ids"] == s)
                ids = torch.from_numpy(r["input_ids"][at].astype(np.int64))[None]
                alone = model(input_ids=ids).last_hidden_state[0]  # (n, C): no mask, positions 0..n-1
                worst = max(worst, (packed[i, at] - alone).abs().max().item())
                leak = max(leak, (leaky[i, at] - alone).abs().max().item())
    assert worst < 1e-4, f"a packed document's states differ from the document alone by {worst:.3g}"
    assert leak > 1e-2, f"the 2-D mask did not leak ({leak:.3g}): the comparison has no power"


def test_causal_labels_never_cross_documents(prepared):
    views, vocab, _ = prepared
    rows = _multi_doc_rows(views, vocab, "ar:1")
    batch = HFCollator()(rows)  # the rows' only labels: labels.lm, a causal head
    labels, seg = batch["labels"], torch.from_numpy(np.stack([r["segment_ids"] for r in rows]))
    first = torch.ones_like(seg, dtype=torch.bool)
    first[:, 1:] = seg[:, 1:] != seg[:, :-1]
    assert (labels[first] == IGNORE).all()
    # HF's causal LM scores labels[:, 1:] from positions [:, :-1]: exactly codept's LMHead targets
    from codept.data.collate import collate

    head = LMHead(T.Transformer(T.tiny(vocab_size=vocab.size)), label="lm", causal=True)
    assert int((labels[:, 1:] != IGNORE).sum()) == head.count(collate(rows)) > 0


def test_collator_refuses_what_bert_cannot_take(prepared):
    views, vocab, _ = prepared
    rows = _multi_doc_rows(views, vocab, "mlm:1,ar:1", n=2)
    with pytest.raises(ValueError, match=r"labels \['lm', 'mlm'\]"):
        HFCollator()(rows)
    with pytest.raises(KeyError, match="label='sop'"):
        HFCollator("sop")(rows)
    glm = packed_dataset(prepared[0], "glm:1", vocab, 128, buffer=8, rank=0, world=1, buffers=1)
    with pytest.raises(ValueError, match="block_positions"):
        HFCollator()(list(glm)[:2])


ITER_LOADER = """
import itertools, resource, sys
from codept.loader import packed_dataset
from codept.objectives.render import Vocab
from codept.prepare import load_views
from codept.tokenizer import load_tokenizer
resource.setrlimit(resource.RLIMIT_NOFILE, (256, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
views, vocab = load_views(sys.argv[1]), Vocab.from_tokenizer(load_tokenizer(sys.argv[2]))
make = lambda: packed_dataset(views, "mlm:1", vocab, 128, buffer=128, rank=0, world=1).stream
ref = list(itertools.islice(make(), 300))
got = list(itertools.islice(make().iter_loader(2), 300))
assert all(type(r["input_ids"]).__name__ == "ndarray" for r in got)
assert all((a[k] == b[k]).all() for a, b in zip(ref, got) for k in a)
assert not [m for m in sys.modules if m.split(".")[0] == "deepspeed"], "a user's loop imported deepspeed"
print("rows", len(got))
"""


def test_iter_loader_two_workers_under_a_low_open_file_limit(prepared):
    """Before the fix: OSError [Errno 24] Too many open files in the workers' feeder thread, then a hang.
    The same process checks that codept.loader's path never imports deepspeed."""
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(ITER_LOADER), *map(str, prepared[2])],
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 0 and "rows 300" in r.stdout, r.stderr[-2000:]
