"""``codept export CKPT --out DIR --format sentence-transformers``: a folder ``SentenceTransformer(DIR)``
loads, giving the vectors of codept's probe encoding (codept.probe.run.embed_with_codept).

1. The encoder as the BertModel folder of codept.model.hf.export (config.json, model.safetensors, the
   tokenizer) at the folder's root: it is also an ``AutoModel`` folder.
2. What the probe does, as sentence-transformers modules (the files sentence-transformers 6 writes,
   written here without importing it): ``modules.json`` = Transformer (the root) -> Pooling (mean
   over the attention mask, prompt tokens included) -> Normalize (L2).
   ``sentence_bert_config.json``: ``processing_kwargs.text.add_special_tokens`` = whether the run's
   code_doc framed its sides (codept.objectives.code_doc.framed_of: the tokenizer's [CLS] / [SEP]
   inside the cut, as transformers truncates; false for a run with ``frame="none"`` or older than
   the setting, whose probe encodes bare texts), ``query_length`` = the probe's query cut (64 tokens) and ``document_length`` = its code
   cut (``probe.max_len``, 256 by default): ``encode_query`` / ``encode_document`` truncate as the
   probe does.
   ``config_sentence_transformers.json``: ``prompts`` {"query": query prefix, "document": code
   prefix} (the code_doc objective's ``query_prefix`` / ``code_prefix``, codept.objectives.code_doc
   .prefixes_of: "" when the run had none), which ``encode_query`` / ``encode_document`` prepend as
   strings, like the probe; similarity cosine.
3. README.md: the model card of codept.train.card (training data, mixture, steps, validation and
   probe tables) with the sentence-transformers usage and the encoding settings.
Test: tests/test_st_export.py (max abs difference to the probe's vectors <= 1e-5, prefixes applied).
Cost: one write of the weights. Not covered: causal (decoder) runs (refused: the probe encodes
bidirectionally, BertModel cannot be made causal by a setting); sentence-transformers < 6 (the
``processing_kwargs`` / per-task lengths are 6.x settings); Matryoshka truncation (pass
``truncate_dim`` when loading: the vectors are then cut, then re-normalised by you).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from codept.model import hf

QUERY_MAX_LEN = 64  # codept.probe.run: Probe.evaluate_codept / CodeptEncoder's query cut
ST_VERSION = "6.2.0"  # the layout written (sentence-transformers' own save, checked by the test)


@dataclass(frozen=True)
class Encoding:
    """How codept's probe turns a text into a vector: what the folder reproduces."""

    query_prefix: str = ""
    code_prefix: str = ""
    query_max_len: int = QUERY_MAX_LEN
    code_max_len: int = 256
    pooling: str = "mean"
    normalize: bool = True
    frame: bool = False  # the tokenizer's framing ([CLS] .. [SEP]) around every text, inside the cut


def encoding_of(config: dict) -> Encoding:
    """The probe encoding of a run from its recorded flat settings (``probe.max_len``, code_doc's
    prefixes and framing)."""
    from codept.objectives.code_doc import framed_of, prefixes_of

    q, c = prefixes_of(config)
    return Encoding(query_prefix=q, code_prefix=c, code_max_len=int(config.get("probe.max_len") or 256),
                    frame=framed_of(config))


def _write(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2) + "\n")


def export(model, tokenizer_dir, out_dir, enc: Encoding = Encoding()) -> Path:
    """Write the sentence-transformers folder of ``model`` (a codept Transformer) with ``enc``."""
    cfg = model.config
    if cfg.causal:
        raise ValueError("--format sentence-transformers: the model is causal (config causal=True); the probe "
                         "encodes bidirectionally and a BertModel folder cannot be causal: export a bidirectional encoder")
    n = cfg.max_positions
    if enc.query_max_len > n or enc.code_max_len > n:
        enc = Encoding(**{**asdict(enc), "query_max_len": min(enc.query_max_len, n), "code_max_len": min(enc.code_max_len, n)})
    out = hf.export(model, tokenizer_dir, out_dir)
    _write(out / "modules.json", [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.base.modules.transformer.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.sentence_transformer.modules.pooling.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.base.modules.normalize.Normalize"}])
    _write(out / "sentence_bert_config.json", {
        "transformer_task": "feature-extraction", "modality_config": {"text": {"method": "forward", "method_output_name": "last_hidden_state"}},
        "module_output_name": "token_embeddings", "processing_kwargs": {"text": {"add_special_tokens": enc.frame}},
        "query_length": enc.query_max_len, "document_length": enc.code_max_len})
    _write(out / "1_Pooling" / "config.json", {"embedding_dimension": cfg.hidden, "pooling_mode": enc.pooling,
                                               "include_prompt": True})
    _write(out / "2_Normalize" / "config.json", {"module_input_name": "sentence_embedding",
                                                 "module_output_name": "sentence_embedding"})
    _write(out / "config_sentence_transformers.json", {
        "__version__": {"sentence_transformers": ST_VERSION}, "model_type": "SentenceTransformer",
        "prompts": {"query": enc.query_prefix, "document": enc.code_prefix}, "default_prompt_name": None,
        "similarity_fn_name": "cosine"})
    return out


def card_section(enc: Encoding) -> list[str]:
    """The model card's sentence-transformers usage and encoding table (markdown lines)."""
    return ["## Use with sentence-transformers", "",
            "```python", "from sentence_transformers import SentenceTransformer",
            "model = SentenceTransformer(DIR)",
            "q = model.encode_query([\"Return the sum of two numbers.\"])  # the query prompt prepended",
            "c = model.encode_document([\"def add(a, b):\\n    return a + b\\n\"])  # the document prompt prepended",
            "scores = model.similarity(q, c)  # cosine", "```", "",
            "The vectors equal codept's probe encoding (`codept probe run --model CKPT`; max abs difference "
            "<= 1e-5, tests/test_st_export.py) only through `encode_query` / `encode_document` (or "
            "`prompt_name=\"query\"` / `\"document\"` with the matching length): they apply the prefix and the cut.", "",
            "| setting | value |", "|---|---|",
            f"| query prefix (prompt `query`) | {json.dumps(enc.query_prefix)} |",
            f"| code prefix (prompt `document`) | {json.dumps(enc.code_prefix)} |",
            f"| query / code tokens (prefix included) | {enc.query_max_len} / {enc.code_max_len} |",
            f"| pooling | {enc.pooling} over the tokens, prefix{' and the tokenizer framing ([CLS] / [SEP])' if enc.frame else ''} "
            f"included{'' if enc.frame else '; no [CLS] / [SEP] added'} |",
            f"| normalisation | {'L2 (cosine = dot product)' if enc.normalize else 'none'} |", ""]
