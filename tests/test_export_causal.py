"""``codept export`` of a causal (ar) run: a decoder folder whose generate() gives codept's greedy
tokens, a tokenizer with the model's real length that never turns text into special ids, and a
model card from the run's recorded settings and summary.json. The run is a real (short) training
of a tiny model on ar rows of stdlib views, laid out as the recipe's checkpoints are."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from codept.cli import main as cli
from codept.data.collate import collate
from codept.data.sources import stdlib_files
from codept.loader import packed_dataset
from codept.model import regimes
from codept.model import transformer as T
from codept.model.pretrainer import Pretrainer, build_head
from codept.objectives.render import Vocab
from codept.prepare import load_views, prepare
from codept.tokenizer import default_tokenizer_dir, load_tokenizer, n_special, special_tokens

STEPS = 60


def write_run(run: Path, net: Pretrainer, tok_dir: Path, config: dict, summary: dict | None) -> Path:
    tag = f"step{STEPS:08d}"
    (run / tag).mkdir(parents=True)
    torch.save({"step": STEPS, "client_state": {"model": dataclasses.asdict(net.model.config), "tokenizer": str(tok_dir)},
                "config": config}, run / tag / "rank0.pt")
    torch.save({"module": net.state_dict()}, run / tag / "mp_rank_00_model_states.pt")
    (run / "latest").write_text(tag)
    if summary is not None:
        (run / "summary.json").write_text(json.dumps(summary))
    return run


@pytest.fixture(scope="module")
def ar_run(tmp_path_factory):
    tok_dir = default_tokenizer_dir()
    views = load_views(prepare([str(p) for p in stdlib_files()[:30]], tokenizer_dir=tok_dir, progress=False)["out"])
    vocab = Vocab.from_tokenizer(load_tokenizer(tok_dir))
    rows = list(packed_dataset(views, "ar:1", vocab, 128, buffer=16, rank=0, world=1, buffers=1))
    batch = collate(rows[:8])
    torch.manual_seed(0)
    model = T.Transformer(T.tiny(vocab_size=vocab.size, causal=True))
    net = Pretrainer(model, {"lm": build_head("lm", model)})
    opt = torch.optim.AdamW(net.parameters(), lr=3e-3)
    for _ in range(STEPS):  # a little training, so that greedy decoding is not one constant token
        loss, n = net(batch)["lm"]
        opt.zero_grad()
        (loss / n).backward()
        opt.step()
    net.eval()
    config = {"data.mixture": "ar:1", "data.sources": "", "steps": STEPS, "seq_len": 128, "global_batch_rows": 16,
              "lr": 3e-3, "schedule": "constant"}
    summary = {"preset": "debug_cpu", "steps": STEPS, "tokens_trained": 123456, "loss_first": 9.7, "loss_last": 6.1,
               "val": {"step": STEPS, "docs": 7, "rows_per_rank": 32, "lm": {"loss": 6.25, "acc": 0.131, "n": 4000},
                       "by_objective": {"ar": {"lm": {"loss": 6.25, "acc": 0.131, "n": 4000}}}},
               "probe_mrr": {"in_domain": {"pairs": 90, "pool": 90, "model": 0.0812, "bm25": 0.41}}}
    run = write_run(tmp_path_factory.mktemp("ar") / "run", net, tok_dir, config, summary)
    prompts = batch["input_ids"][:4, :16]  # real code the model was trained on: it continues it
    assert (batch["segment_ids"][:4, :40] == 1).all()
    return net, run, tok_dir, prompts


def test_export_of_an_ar_run_generates_codepts_greedy_tokens(ar_run, tmp_path, capsys):
    from transformers import AutoModelForCausalLM

    net, run, _, prompts = ar_run
    assert cli(["export", str(run), "--out", str(tmp_path / "hf")]) == 0
    assert "decoder with its causal LM head" in capsys.readouterr().out
    hf = AutoModelForCausalLM.from_pretrained(tmp_path / "hf").eval()
    assert type(hf).__name__ == "BertLMHeadModel" and hf.config.is_decoder
    ours = regimes.greedy(net.model, net.heads["lm"], prompts, 24)
    theirs = hf.generate(prompts, attention_mask=torch.ones_like(prompts), max_new_tokens=24, do_sample=False,
                         pad_token_id=0)
    assert torch.equal(ours, theirs)
    assert len(set(ours[:, 16:].flatten().tolist())) > 3, "greedy decoding is one token: the test has no power"


def _texts_with_special_strings() -> list[str]:
    """Real text: site-packages files that contain "<mask>", and a stdlib file with every special
    token string of codept's tokenizer written into it."""
    import transformers

    root = Path(transformers.__file__).parent
    found = []
    for f in sorted(root.rglob("*.py")):
        text = f.read_text(encoding="utf-8", errors="replace")
        if "<mask>" in text:
            found.append(text)
        if len(found) == 3:
            break
    assert found, "no transformers source file contains <mask>"
    lines = next(f for f in stdlib_files() if f.stat().st_size > 20000).read_text(encoding="utf-8").splitlines()
    specials = special_tokens()
    mixed = "\n".join(f"{line} {specials[i % len(specials)]}" for i, line in enumerate(lines))
    assert all(s in mixed for s in specials)
    return found + [mixed, "".join(specials)]


def test_exported_tokenizer_keeps_text_as_text_and_knows_the_model_length(ar_run, tmp_path):
    from transformers import AutoTokenizer

    net, run, tok_dir, _ = ar_run
    assert cli(["export", str(run), "--out", str(tmp_path / "hf")]) == 0
    tok = AutoTokenizer.from_pretrained(tmp_path / "hf")
    assert tok.model_max_length == net.model.config.max_positions == 128
    ours = load_tokenizer(tok_dir)
    k = n_special(ours)
    for text in _texts_with_special_strings():
        ids = tok(text)["input_ids"]
        assert ids == ours.encode(text).ids
        assert min(ids) >= k, f"text produced special id {min(ids)}"
    assert len(tok("x = 1\n" * 400, truncation=True)["input_ids"]) == 128
    assert tok.mask_token_id == ours.token_to_id("<mask>")  # special ids come from the tokenizer's attributes


def test_model_card_has_data_mixture_steps_and_tables(ar_run, tmp_path):
    _, run, _, _ = ar_run
    assert cli(["export", str(run), "--out", str(tmp_path / "hf")]) == 0
    card = (tmp_path / "hf" / "README.md").read_text()
    for want in ("BertLMHeadModel", "AutoModelForCausalLM", "| mixture | ar:1 |", f"| steps | {STEPS} |",
                 "standard library", "| lm | 6.25 | 0.131 | 4000 |", "| ar/lm | 6.25 | 0.131 | 4000 |", "| in_domain | 0.41 | 0.0812 | 90 | 90 |",
                 "| objectives training the `lm` head | ar |"):
        assert want in card, f"{want!r} not in the card:\n{card}"


def test_head_choice(ar_run, tmp_path, capsys):
    net, run, tok_dir, _ = ar_run
    assert cli(["export", str(run), "--out", str(tmp_path / "a"), "--head", "mlm"]) == 2
    assert "--head mlm: the checkpoint holds no trained 'mlm' head (it has ['lm'])" in capsys.readouterr().err
    assert cli(["export", str(run), "--out", str(tmp_path / "b"), "--head", "none"]) == 0
    assert json.loads((tmp_path / "b" / "config.json").read_text())["architectures"] == ["BertModel"]
    both = Pretrainer(net.model, {"lm": net.heads["lm"], "mlm": build_head("mlm", net.model)})
    run2 = write_run(tmp_path / "both", both, tok_dir, {"data.mixture": "ar:1,mlm:1"}, None)
    assert cli(["export", str(run2), "--out", str(tmp_path / "c")]) == 2
    assert "pass --head mlm" in capsys.readouterr().err
    assert cli(["export", str(run2), "--out", str(tmp_path / "c"), "--head", "mlm"]) == 0
    card = (tmp_path / "c" / "README.md").read_text()
    assert "BertForMaskedLM" in card and "No summary.json" in card and "| objectives training the `mlm` head | mlm |" in card
