"""``codept probe run --model M --probe DIR``: score a model on code-search probe pairs, per language.

Each pair's query (doc first sentence) must find its own code among candidates (codept.probe.metrics:
pessimistic ranks, MRR, R@1/5/10, seeded pools of ``--pool`` candidates and/or the whole language
corpus). ``--model`` picks the scorer (:func:`build_scorer`):
  bm25          BM25 (bm25s, Lucene variant, k1=1.2, b=0.75) over identifier-split words
                (:func:`words`: snake_case and camelCase split, lower-cased, punctuation, single
                letters and a small English stopword list dropped; same for query and code; CJK
                characters are words of their own). IDF comes from the CANDIDATE SET being ranked:
                one index per pool ("pool"), one per language corpus ("corpus"), so BM25 sees the same
                collection the dense models rank and the number is comparable with published
                1,000-candidate results.
  DIR/config.json  any transformers AutoModel + AutoTokenizer folder, offline (HF_HUB_OFFLINE=1),
                incl. `codept export` output; ``--pooling mean|cls`` (default mean over real tokens).
  DIR/latest, DIR/rank0.pt   a codept training checkpoint (run folder or checkpoint folder), loaded by
                codept.train.export.load_trained; mean pooling over real tokens (:func:`embed_with_codept`).
  random[:PRESET]  a randomly initialised codept Transformer (preset debug_cpu by default, seeded by
                ``--seed``) with the default codept tokenizer: the floor an untrained encoder gets.
  bm25+M        hybrid: each query's BM25 row and M's cosine row are z-normalised over the candidates
                being ranked (mean 0, std 1; a constant row becomes 0) and summed as
                alpha * z(bm25) + (1 - alpha) * z(M), ``--alpha`` 0.5 by default.
Dense encoders embed queries (truncated to ``--query-max-len`` tokens) and codes (``--max-len``) once
per language, batched under torch.inference_mode in length order, L2-normalised float32; scores are
cosines. Output (``--out``, default ``DIR/results/<model-slug>/``): results.json (one row per language
x protocol: mrr, r1, r5, r10, n, pool_size, seed, seconds = that language's encoding time + that
protocol's scoring time; plus the model description and query-weighted overall rows), results.md
and results.png (MRR per language). :func:`compare` tabulates several results.json side by side.

Training-time API: ``Probe.from_pairs(pairs, pool_size, seed, max_queries)`` fixes the pools once;
``probe.evaluate_embeddings(q_emb, c_emb)`` or ``probe.evaluate_codept(model, tokenizer)`` (which calls
:func:`embed_with_codept`: eval mode, restored afterwards) return the metrics, per language and overall.
Cost: dense = one forward per text (MiniLM on 16 CPU cores: ~1-2 ms per code of 256 tokens) plus a
(Q, C) matmul; BM25 = one index per pool (~0.1 s per 1,000 codes) plus one sparse lookup per query.
Prefixes: a codept checkpoint's queries and codes get the query / code prefixes its code_doc objective
trained with (``objective.code_doc.query_prefix`` / ``code_prefix``, prepended as strings).
Not covered: cross-encoders / rerankers, prefixes for transformers folders (use the sentence-transformers
export's prompts), multi-GPU inference.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np

from codept.argtypes import int_at_least, out_folder, tokenizer_path
from codept.probe import Pair, load_pairs
from codept.probe import metrics as M

DEFAULT_POOL = 1000
STOPWORDS = frozenset(
    "a an the of to in on at for from by with and or not no is are was were be been being it its this that "
    "these those as if then than which what when who whose will would can could should may might must do "
    "does did has have had into onto over under about after before via etc eg ie".split()
)
GENERIC_DIR_NAMES = {"model", "models", "hf", "export", "exported", "checkpoint", "ckpt", "final", "out"}

# ---------------------------------------------------------------------------------------------
# BM25

_CAMEL_1 = re.compile(r"([a-z0-9])([A-Z])")  # fooBar -> foo Bar
_CAMEL_2 = re.compile(r"([A-Z]+)([A-Z][a-z])")  # HTTPServer -> HTTP Server
_WORD = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]|[^\W_\u3400-\u9fff\uf900-\ufaff]+")


def words(text: str) -> list[str]:
    """Identifier-split lower-case words of a query or code: ``parseHTTPHeader_v2`` -> parse http
    header v2. Single-character words (except CJK) and stopwords are dropped."""
    text = _CAMEL_2.sub(r"\1 \2", _CAMEL_1.sub(r"\1 \2", text))
    out = []
    for w in _WORD.findall(text):
        w = w.lower()
        if (len(w) > 1 or "\u3400" <= w <= "\ufaff") and w not in STOPWORDS:
            out.append(w)
    return out


class BM25Scorer:
    """score_fn over fixed query/code word lists; indexes each distinct candidate set once (cached:
    the last one, which is what pool-by-pool and block-by-block scoring reuse)."""

    def __init__(self, queries: Sequence[str], codes: Sequence[str], k1: float = 1.2, b: float = 0.75):
        self.q = [words(t) for t in queries]
        self.c = [words(t) for t in codes]
        self.k1, self.b = k1, b
        self._key: bytes | None = None
        self._index = None

    def _retriever(self, cand: np.ndarray):
        import bm25s

        key = np.asarray(cand, dtype=np.int64).tobytes()
        if key != self._key:
            r = bm25s.BM25(k1=self.k1, b=self.b, method="lucene")
            r.index([self.c[j] for j in cand], show_progress=False)
            self._key, self._index = key, r
        return self._index

    def __call__(self, qi: np.ndarray, ci: np.ndarray) -> np.ndarray:
        r = self._retriever(ci)
        vocab = r.vocab_dict
        s = np.zeros((len(qi), len(ci)), dtype=np.float32)
        for row, i in enumerate(qi):
            ids = [vocab[w] for w in self.q[i] if w in vocab]
            if ids:  # no shared word: a row of zeros, every candidate tied (pessimistic rank)
                s[row] = r.get_scores_from_ids(ids)
        return s


# ---------------------------------------------------------------------------------------------
# dense encoders


def _l2(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def _embed_ids(ids: list[list[int]], forward: Callable, pad_id: int, batch_size: int, device) -> np.ndarray:
    """Pooled, L2-normalised embeddings (N, C) float32 of token-id lists, in input order. Batches are
    taken in decreasing length (little padding); ``forward(input_ids, mask) -> (B, C)``."""
    import torch

    order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
    out: list[np.ndarray | None] = [None] * len(ids)
    with torch.inference_mode():
        for s in range(0, len(order), batch_size):
            idx = order[s : s + batch_size]
            t = max(1, max(len(ids[i]) for i in idx))
            x = torch.full((len(idx), t), pad_id, dtype=torch.long)
            m = torch.zeros((len(idx), t), dtype=torch.bool)
            for r, i in enumerate(idx):
                x[r, : len(ids[i])] = torch.tensor(ids[i], dtype=torch.long)
                m[r, : len(ids[i])] = True
            emb = forward(x.to(device), m.to(device)).float().cpu().numpy()  # (B, C)
            for r, i in enumerate(idx):
                out[i] = emb[r]
    if not ids:
        return np.zeros((0, 0), np.float32)
    return _l2(np.stack(out))


def _pool(h, mask, pooling: str):
    """(B, T, C) hidden states -> (B, C): mean over real tokens or the first token."""
    if pooling == "cls":
        return h[:, 0]
    m = mask.unsqueeze(-1).to(h.dtype)  # (B, T, 1)
    return (h * m).sum(1) / m.sum(1).clamp(min=1)


def _model_device(model):
    try:
        return next(model.parameters()).device
    except StopIteration:
        return "cpu"


def embed_with_codept(model, tokenizer, texts: Sequence[str], max_len: int = 256, batch_size: int = 64,
                      device=None, pooling: str = "mean", prefix: str = "", frame: bool = False) -> np.ndarray:
    """(N, C) L2-normalised float32 embeddings of ``texts`` with a codept Transformer (or anything with
    its ``encode(batch)``) and a ``tokenizers.Tokenizer``. ``prefix`` (a query or code prefix,
    codept.objectives.code_doc) is prepended to every text as a string before tokenisation, and the
    tokens of ``prefix + text`` are truncated to min(max_len, max_positions), as sentence-transformers
    applies its prompts (codept.train.st_export: the same vectors). ``frame``: the tokens are framed as
    the tokenizer's post-processor frames a text (codept.tokenizer.framing: [CLS] .. [SEP] for BERT's
    WordPiece), the framing inside the cut, as a code_doc run with ``frame="tokenizer"`` trained
    (codept.objectives.code_doc.framed_of) and as transformers' truncation keeps it. The batch is one
    bidirectional document per row (segment 1 on real tokens, 0 on padding; prefix = not config.causal). The model is put in eval mode and its previous
    mode restored, so the training loop can call this on its live model."""
    import torch

    cfg = model.config
    device = device if device is not None else _model_device(model)
    from codept.tokenizer import framing

    pre, post = framing(tokenizer) if frame else ([], [])
    n = min(max_len, cfg.max_positions) - len(pre) - len(post)
    ids = [pre + e.ids[:n] + post for e in tokenizer.encode_batch([prefix + t for t in texts], add_special_tokens=False)]

    def forward(x, m):
        b, t = x.shape
        batch = {"input_ids": x, "segment_ids": m.long(),
                 "positions": torch.arange(t, device=x.device).expand(b, t),
                 "prefix": torch.full((b, t), not cfg.causal, dtype=torch.bool, device=x.device)}
        return _pool(model.encode(batch), m, pooling)

    was = model.training
    model.eval()
    try:
        return _embed_ids(ids, forward, cfg.pad_id, batch_size, device)
    finally:
        model.train(was)


class CodeptEncoder:
    """A codept Transformer + tokenizers.Tokenizer as a dense encoder."""

    def __init__(self, model, tokenizer, desc: dict, max_len: int = 256, query_max_len: int = 64,
                 batch_size: int = 64, device: str = "cpu", pooling: str = "mean", query_prefix: str = "",
                 code_prefix: str = "", frame: bool = False):
        self.model, self.tok, self.desc, self.frame = model.to(device).eval(), tokenizer, desc, frame
        self.max_len, self.query_max_len, self.batch_size, self.device = max_len, query_max_len, batch_size, device
        self.pooling, self.query_prefix, self.code_prefix = pooling, query_prefix, code_prefix

    def embed(self, texts: Sequence[str], query: bool) -> np.ndarray:
        return embed_with_codept(self.model, self.tok, texts, self.query_max_len if query else self.max_len,
                                 self.batch_size, self.device, self.pooling,
                                 self.query_prefix if query else self.code_prefix, self.frame)


class HFEncoder:
    """A transformers AutoModel + AutoTokenizer folder as a dense encoder (offline)."""

    def __init__(self, path: str | Path, pooling: str = "mean", max_len: int = 256, query_max_len: int = 64,
                 batch_size: int = 64, device: str = "cpu"):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        from transformers import AutoModel, AutoTokenizer

        self.tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        self.model = AutoModel.from_pretrained(str(path), local_files_only=True).to(device).eval()
        cfg = self.model.config
        limit = getattr(cfg, "max_position_embeddings", None) or max_len
        if getattr(cfg, "model_type", "") in ("roberta", "xlm-roberta", "camembert"):
            limit -= 2  # positions start at padding_idx + 1
        self.limit = limit
        self.pooling, self.batch_size, self.device = pooling, batch_size, device
        self.max_len, self.query_max_len = max_len, query_max_len
        pad = self.tok.pad_token_id
        self.pad_id = pad if pad is not None else 0
        self.desc = {"kind": "transformers", "path": str(Path(path).resolve()), "model_type": cfg.model_type,
                     "pooling": pooling, "max_len": max_len, "query_max_len": query_max_len,
                     "parameters": sum(p.numel() for p in self.model.parameters())}

    def embed(self, texts: Sequence[str], query: bool) -> np.ndarray:
        n = min(self.query_max_len if query else self.max_len, self.limit)
        ids = self.tok(list(texts), truncation=True, max_length=n)["input_ids"]

        def forward(x, m):
            return _pool(self.model(input_ids=x, attention_mask=m.long()).last_hidden_state, m, self.pooling)

        return _embed_ids(ids, forward, self.pad_id, self.batch_size, self.device)


def dense_scorer(q_emb: np.ndarray, c_emb: np.ndarray):
    """score_fn of cosine similarities (rows are already L2-normalised)."""

    def fn(qi: np.ndarray, ci: np.ndarray) -> np.ndarray:
        return q_emb[qi] @ c_emb[ci].T  # (Q, C)

    return fn


def _z(s: np.ndarray) -> np.ndarray:
    s = np.asarray(s, dtype=np.float64)
    sd = s.std(axis=1, keepdims=True)
    return np.where(sd > 0, (s - s.mean(axis=1, keepdims=True)) / np.where(sd > 0, sd, 1.0), 0.0)


def hybrid_scorer(a, b, alpha: float = 0.5):
    """alpha * z(a) + (1 - alpha) * z(b), each row z-normalised over the candidates being ranked."""

    def fn(qi, ci):
        return alpha * _z(a(qi, ci)) + (1.0 - alpha) * _z(b(qi, ci))

    return fn


# ---------------------------------------------------------------------------------------------
# model specs -> scorers


@dataclass
class Scorer:
    """What ``--model`` resolved to: ``prepare(queries, codes) -> score_fn`` for one language."""

    slug: str
    desc: dict
    prepare: Callable[[Sequence[str], Sequence[str]], M.ScoreFn]


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._+-]+", "-", text).strip("-") or "model"


def _dir_slug(p: Path) -> str:
    p = p.resolve()
    name = p.name
    if name.lower() in GENERIC_DIR_NAMES or re.fullmatch(r"step\d+", name):
        name = f"{p.parent.name}-{name}"
    return _slug(name)


def model_kind(spec: str) -> str:
    """'bm25' | 'random' | 'transformers' | 'codept' | 'hybrid' for a ``--model`` value."""
    if spec == "bm25":
        return "bm25"
    if spec == "random" or spec.startswith("random:"):
        return "random"
    if spec.startswith("bm25+"):
        return "hybrid"
    p = Path(spec)
    if (p / "config.json").is_file():
        return "transformers"
    if (p / "latest").is_file() or (p / "rank0.pt").is_file():
        return "codept"
    if p.exists():
        raise ValueError(f"--model {spec}: a folder with neither config.json (transformers) nor latest/rank0.pt "
                         "(codept checkpoint)")
    raise ValueError(f"--model {spec!r}: expected bm25, random[:PRESET], bm25+MODEL, a transformers folder "
                     "or a codept checkpoint folder")


def _dense(enc, slug: str) -> Scorer:
    def prepare(queries, codes):
        return dense_scorer(enc.embed(queries, query=True), enc.embed(codes, query=False))

    return Scorer(slug, enc.desc, prepare)


def random_preset(spec: str) -> str:
    """The model preset of a ``random[:PRESET]`` spec (debug_cpu when none is named)."""
    return spec.split(":", 1)[1] if ":" in spec else "debug_cpu"


def random_model(preset: str = "debug_cpu", seed: int = 0, tokenizer_dir: str | Path | None = None):
    """(Transformer, tokenizers.Tokenizer, tokenizer folder) with a seeded random init; vocab_size = the
    tokenizer's. The global torch RNG is left untouched."""
    import torch

    from codept.model import transformer as T
    from codept.tokenizer import default_tokenizer_dir, load_tokenizer

    if preset not in T.PRESETS:
        raise ValueError(f"random:{preset}: unknown preset; known {sorted(T.PRESETS)}")
    tok_dir = Path(tokenizer_dir) if tokenizer_dir else default_tokenizer_dir()
    tok = load_tokenizer(tok_dir)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = T.Transformer(T.PRESETS[preset](vocab_size=tok.get_vocab_size()))
    return model.eval(), tok, tok_dir


def build_scorer(spec: str, *, pooling: str = "mean", max_len: int = 256, query_max_len: int = 64,
                 batch_size: int = 64, device: str | None = None, seed: int = 0, alpha: float = 0.5,
                 tokenizer: str | Path | None = None) -> Scorer:
    """Resolve a ``--model`` value (see the module docstring) into a :class:`Scorer`."""
    kind = model_kind(spec)
    if device is None:
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    common = dict(max_len=max_len, query_max_len=query_max_len, batch_size=batch_size, device=device)
    if kind == "bm25":
        desc = {"kind": "bm25", "impl": "bm25s", "k1": 1.2, "b": 0.75, "idf": "per candidate set"}
        return Scorer("bm25", desc, lambda q, c: BM25Scorer(q, c))
    if kind == "hybrid":
        inner = build_scorer(spec[len("bm25+"):], pooling=pooling, seed=seed, tokenizer=tokenizer, **common)
        desc = {"kind": "hybrid", "alpha": alpha, "bm25": {"k1": 1.2, "b": 0.75}, "model": inner.desc}

        def prepare(q, c):
            return hybrid_scorer(BM25Scorer(q, c), inner.prepare(q, c), alpha)

        return Scorer(f"bm25+{inner.slug}", desc, prepare)
    if kind == "transformers":
        enc = HFEncoder(spec, pooling=pooling, **common)
        return _dense(enc, _dir_slug(Path(spec)))
    if kind == "random":
        preset = random_preset(spec)
        model, tok, tok_dir = random_model(preset, seed, tokenizer)
        desc = {"kind": "random", "preset": preset, "seed": seed, "tokenizer": str(tok_dir), "pooling": pooling,
                "max_len": max_len, "query_max_len": query_max_len, "parameters": model.num_parameters()}
        return _dense(CodeptEncoder(model, tok, desc, pooling=pooling, **common), f"random-{preset}-s{seed}")
    enc = codept_encoder(spec, pooling=pooling, tokenizer=tokenizer, **common)  # a codept checkpoint
    return _dense(enc, enc.slug)


def codept_encoder(spec: str, *, pooling: str = "mean", max_len: int = 256, query_max_len: int = 64,
                   batch_size: int = 64, device: str = "cpu", tokenizer: str | Path | None = None) -> CodeptEncoder:
    """The probe's encoder of a codept checkpoint (run or checkpoint folder): its model, tokenizer and
    the query / code prefixes and the framing its code_doc objective trained with ("" / none when not
    recorded)."""
    from codept.objectives.code_doc import framed_of, prefixes_of
    from codept.tokenizer import load_tokenizer
    from codept.train import checkpoint
    from codept.train.export import trained

    t = trained(spec)
    model, tok_dir = t["model"], Path(tokenizer) if tokenizer else t["tokenizer"]
    query_prefix, code_prefix = prefixes_of(t["config"])
    frame = framed_of(t["config"])
    p = Path(spec)
    tag = checkpoint.latest_tag(p)
    desc = {"kind": "codept", "path": str(p.resolve()), "tag": tag or p.name, "tokenizer": str(tok_dir),
            "pooling": pooling, "max_len": max_len, "query_max_len": query_max_len,
            "query_prefix": query_prefix, "code_prefix": code_prefix, "frame": frame,
            "config": dataclasses.asdict(model.config), "parameters": model.num_parameters()}
    enc = CodeptEncoder(model, load_tokenizer(tok_dir), desc, max_len=max_len, query_max_len=query_max_len,
                        batch_size=batch_size, device=device, pooling=pooling, query_prefix=query_prefix,
                        code_prefix=code_prefix, frame=frame)
    enc.slug = _dir_slug(p) + (f"-{tag}" if tag else "")
    return enc


# ---------------------------------------------------------------------------------------------
# the training-time API


def _by_lang(pairs: Sequence[Pair]) -> dict[str, np.ndarray]:
    out: dict[str, list[int]] = {}
    for i, p in enumerate(pairs):
        out.setdefault(p.lang, []).append(i)
    return {k: np.asarray(v, dtype=np.int64) for k, v in sorted(out.items())}


def _subsample(n: int, k: int | None, seed: int) -> np.ndarray:
    if k is None or n <= k:
        return np.arange(n)
    return np.sort(np.random.default_rng([seed, 1]).choice(n, size=k, replace=False))


def _overall(per_lang: dict[str, dict]) -> dict:
    """Query-weighted mean of per-language metrics (each language ranked within itself)."""
    n = sum(r["n_queries"] for r in per_lang.values())
    out = {k: (sum(r[k] * r["n_queries"] for r in per_lang.values()) / n if n else float("nan"))
           for k in ("mrr", "r1", "r5", "r10")}
    return {**out, "n_queries": n}


class Probe:
    """Fixed pools over a set of pairs, for cheap repeated evaluation during training.

    Pools are drawn per language (a query only competes with codes of its own language), from
    :func:`codept.probe.metrics.pools` with ``seed``; with ``max_queries`` each language keeps a seeded
    subset of at most that many pairs first (so the cost is bounded by languages x max_queries)."""

    def __init__(self, pairs: Sequence[Pair], pool_size: int = DEFAULT_POOL, seed: int = 0):
        self.pairs = list(pairs)
        self.pool_size, self.seed = pool_size, seed
        self.queries = [p.query for p in self.pairs]
        self.codes = [p.code for p in self.pairs]
        self.langs = _by_lang(self.pairs)  # lang -> global indices
        # per language: global-index pools and their candidate sets, fixed once
        self.pools = {lang: [idx[p] for p in M.pools(len(idx), pool_size, seed)] for lang, idx in self.langs.items()}

    @classmethod
    def from_pairs(cls, pairs: Sequence[Pair], pool_size: int = DEFAULT_POOL, seed: int = 0,
                   max_queries: int | None = None) -> "Probe":
        keep: list[Pair] = []
        for lang, idx in _by_lang(pairs).items():
            keep += [pairs[i] for i in idx[_subsample(len(idx), max_queries, seed)]]
        return cls(keep, pool_size, seed)

    def __len__(self) -> int:
        return len(self.pairs)

    def evaluate_scores(self, score_fn: M.ScoreFn) -> dict:
        """Metrics of a score_fn over GLOBAL indices: {mrr, r1, r5, r10, n_queries, by_lang: {...}}."""
        per = {}
        for lang, pl in self.pools.items():
            r = M.score_pools(score_fn, pl, self.pool_size)
            per[lang] = {**M.summarize(r), "pool_size": int(min(len(self.langs[lang]), self.pool_size))}
        return {**_overall(per), "by_lang": per}

    def evaluate_embeddings(self, q_emb, c_emb, dims: Sequence[int] = ()) -> dict:
        """q_emb, c_emb (N, C) in pair order (any float array / tensor); cosine similarity. ``dims``
        (Matryoshka sizes): also the metrics on the first d dimensions, re-normalised, as ``by_dim``
        {d: {mrr, r1, r5, r10, n_queries}} (ValueError for a size outside [1, C])."""
        q, c = (_l2(np.asarray(x.detach().float().cpu() if hasattr(x, "detach") else x)) for x in (q_emb, c_emb))
        if q.shape[0] != len(self) or c.shape[0] != len(self):
            raise ValueError(f"embeddings {q.shape} / {c.shape} for {len(self)} pairs")
        out = self.evaluate_scores(dense_scorer(q, c))
        bad = [d for d in dims if not 0 < d <= q.shape[1]]
        if bad:
            raise ValueError(f"Matryoshka sizes {bad}: each must be in [1, {q.shape[1]}] (the embedding width)")
        if dims:
            out["by_dim"] = {int(d): {k: v for k, v in self.evaluate_scores(dense_scorer(_l2(q[:, :d]), _l2(c[:, :d]))).items()
                                      if k != "by_lang"} for d in dims}
        return out

    def evaluate_codept(self, model, tokenizer, max_len: int = 256, query_max_len: int = 64,
                        batch_size: int = 64, device=None, query_prefix: str = "", code_prefix: str = "",
                        dims: Sequence[int] = (), frame: bool = False) -> dict:
        """Embed with a live codept model (:func:`embed_with_codept`, the prefixes and framing code_doc
        trains with) and evaluate (``dims``: :meth:`evaluate_embeddings`)."""
        q = embed_with_codept(model, tokenizer, self.queries, query_max_len, batch_size, device, prefix=query_prefix,
                              frame=frame)
        c = embed_with_codept(model, tokenizer, self.codes, max_len, batch_size, device, prefix=code_prefix, frame=frame)
        return self.evaluate_embeddings(q, c, dims)


# ---------------------------------------------------------------------------------------------
# the command


def run_probe(scorer: Scorer, pairs: Sequence[Pair], protocols: Iterable[str] = ("pool",),
              pool_size: int = DEFAULT_POOL, seed: int = 0, max_queries: int | None = None,
              log=None) -> dict:
    """Score ``scorer`` on ``pairs`` per language and protocol; the results.json dict."""
    protocols = list(protocols)
    for p in protocols:
        if p not in M.PROTOCOLS:
            raise ValueError(f"protocol {p!r}: expected one of {M.PROTOCOLS}")
    t_all = time.perf_counter()
    rows = []
    for lang, idx in _by_lang(pairs).items():
        idx = idx[_subsample(len(idx), max_queries, seed)]
        sub = [pairs[i] for i in idx]
        t0 = time.perf_counter()
        fn = scorer.prepare([p.query for p in sub], [p.code for p in sub])
        t_enc = time.perf_counter() - t0
        for proto in protocols:
            t1 = time.perf_counter()
            r = M.evaluate(fn, len(sub), proto, pool_size, seed)
            secs = t_enc + time.perf_counter() - t1
            rows.append({"lang": lang, "protocol": proto, "mrr": r["mrr"], "r1": r["r1"], "r5": r["r5"],
                         "r10": r["r10"], "n": r["n_queries"], "pool_size": r["pool_size"], "seed": seed,
                         "seconds": round(secs, 3)})
            if log:
                log(f"{scorer.slug} {lang:<10} {proto:<6} MRR {r['mrr']:.3f} R@1 {r['r1']:.3f} R@10 {r['r10']:.3f} "
                    f"n={r['n_queries']} pool={r['pool_size']} ({secs:.1f}s)")
    overall = {}
    for proto in protocols:
        sel = [r for r in rows if r["protocol"] == proto]
        o = _overall({r["lang"]: {**r, "n_queries": r["n"]} for r in sel})
        overall[proto] = {**{k: o[k] for k in ("mrr", "r1", "r5", "r10")}, "n": o["n_queries"]}
        overall[proto]["macro_mrr"] = float(np.mean([r["mrr"] for r in sel])) if sel else float("nan")
    return {"model": scorer.desc, "slug": scorer.slug, "pool_size": pool_size, "seed": seed,
            "protocols": protocols, "max_queries": max_queries, "rows": rows, "overall": overall,
            "seconds": round(time.perf_counter() - t_all, 3)}


def markdown(result: dict) -> str:
    """One model's results as a markdown table (a row per language x protocol, then overall)."""
    lines = [f"# {result['slug']}", "",
             f"seed {result['seed']}, pool {result['pool_size']}, {result['seconds']:.1f} s", "",
             "| lang | protocol | MRR | R@1 | R@5 | R@10 | n | candidates | s |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        lines.append(f"| {r['lang']} | {r['protocol']} | {r['mrr']:.3f} | {r['r1']:.3f} | {r['r5']:.3f} | "
                     f"{r['r10']:.3f} | {r['n']} | {r['pool_size']} | {r['seconds']:.1f} |")
    for proto, o in result["overall"].items():
        lines.append(f"| **all** (query-weighted) | {proto} | {o['mrr']:.3f} | {o['r1']:.3f} | {o['r5']:.3f} | "
                     f"{o['r10']:.3f} | {o['n']} | | |")
    return "\n".join(lines) + "\n"


def plot(result: dict, path: str | Path) -> Path:
    """Bar chart of MRR per language (one bar group per protocol)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    langs = sorted({r["lang"] for r in result["rows"]})
    protos = result["protocols"]
    width = 0.8 / max(1, len(protos))
    fig, ax = plt.subplots(figsize=(max(4.0, 1.2 * len(langs) + 1), 3.5))
    for j, proto in enumerate(protos):
        vals = {r["lang"]: r["mrr"] for r in result["rows"] if r["protocol"] == proto}
        xs = np.arange(len(langs)) + (j - (len(protos) - 1) / 2) * width
        bars = ax.bar(xs, [vals.get(lang, 0.0) for lang in langs], width, label=proto)
        ax.bar_label(bars, fmt="%.2f", fontsize=7)
    ax.set_xticks(np.arange(len(langs)), langs)
    ax.set_ylim(0, 1)
    ax.set_ylabel("MRR")
    ax.set_title(f"{result['slug']} (pool {result['pool_size']}, seed {result['seed']})")
    if len(protos) > 1:
        ax.legend()
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def write_results(result: dict, out: str | Path) -> Path:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    (out / "results.md").write_text(markdown(result))
    plot(result, out / "results.png")
    return out


def compare(result_files: Sequence[str | Path], protocol: str = "pool", metric: str = "mrr") -> str:
    """Markdown table: one row per results.json (model), one column per language, plus the
    query-weighted overall and the unweighted mean over languages; "-" where a model lacks a language."""
    results = [json.loads(Path(f).read_text()) for f in result_files]
    langs = sorted({r["lang"] for res in results for r in res["rows"] if r["protocol"] == protocol})
    head = f"| model | {' | '.join(langs)} | all | mean |"
    lines = [f"{metric.upper() if metric == 'mrr' else metric} ({protocol} protocol)", "", head,
             "|" + "---|" * (len(langs) + 3)]
    for res in results:
        vals = {r["lang"]: r[metric] for r in res["rows"] if r["protocol"] == protocol}
        cells = [f"{vals[lang]:.3f}" if lang in vals else "-" for lang in langs]
        o = res.get("overall", {}).get(protocol, {})
        allv = f"{o[metric]:.3f}" if metric in o else "-"
        mean = f"{np.mean(list(vals.values())):.3f}" if vals else "-"
        lines.append(f"| {res['slug']} | {' | '.join(cells)} | {allv} | {mean} |")
    return "\n".join(lines) + "\n"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="bm25 | random[:PRESET] | a transformers folder | a codept "
                   "checkpoint (run folder with `latest`, or a checkpoint folder) | bm25+MODEL (hybrid)")
    p.add_argument("--probe", required=True, type=Path, help="probe folder with pairs.jsonl (codept probe build)")
    p.add_argument("--pool", type=int_at_least(2), default=DEFAULT_POOL, help="candidates per pool (default 1000)")
    p.add_argument("--seed", type=int, default=0, help="pool permutation (and random-model init) seed")
    p.add_argument("--protocol", choices=["pool", "corpus", "both"], default="pool",
                   help="seeded pools, every query against the whole language corpus, or both")
    p.add_argument("--out", type=out_folder, help="output folder (default: PROBE/results/<model-slug>/)")
    p.add_argument("--lang", nargs="+", help="only these languages")
    p.add_argument("--pooling", choices=["mean", "cls"], default="mean",
                   help="embedding of a text: mean over real tokens, or the first token (default mean)")
    p.add_argument("--max-len", type=int_at_least(1), default=256, help="code tokens kept per candidate")
    p.add_argument("--query-max-len", type=int_at_least(1), default=64, help="query tokens kept")
    p.add_argument("--batch-size", type=int_at_least(1), default=64, help="texts per forward pass (default 64)")
    p.add_argument("--device", help="torch device (default: cuda if available, else cpu)")
    p.add_argument("--alpha", type=float, default=0.5, help="BM25 weight of a bm25+MODEL hybrid")
    p.add_argument("--max-queries", type=int_at_least(1), help="at most this many pairs per language (seeded subset)")
    p.add_argument("--tokenizer", type=tokenizer_path, help="tokenizer folder for random/codept models (default: theirs)")
    p.add_argument("--name", help="model slug for the output folder and tables (default: from --model)")


def main(args) -> int:
    try:
        pairs = load_pairs(args.probe, args.lang)
    except FileNotFoundError as e:
        print(e, file=sys.stderr)
        return 2
    if not pairs:
        print(f"{args.probe}: no pairs" + (f" for languages {args.lang}" if args.lang else ""), file=sys.stderr)
        return 2
    try:
        scorer = build_scorer(args.model, pooling=args.pooling, max_len=args.max_len,
                              query_max_len=args.query_max_len, batch_size=args.batch_size, device=args.device,
                              seed=args.seed, alpha=args.alpha, tokenizer=args.tokenizer)
    except (ValueError, FileNotFoundError) as e:
        print(e, file=sys.stderr)
        return 2
    if args.name:
        scorer.slug = _slug(args.name)
    protocols = list(M.PROTOCOLS) if args.protocol == "both" else [args.protocol]
    result = run_probe(scorer, pairs, protocols, args.pool, args.seed, args.max_queries,
                       log=lambda s: print(s, file=sys.stderr, flush=True))
    result["probe"] = str(Path(args.probe).resolve())
    out = write_results(result, args.out or Path(args.probe) / "results" / scorer.slug)
    print(markdown(result))
    print(f"-> {out}/results.json, results.md, results.png")
    return 0
