"""Pretrain an encoder on natural-language text: MLM, SOP, NSP and TLM (XLM) under DeepSpeed.

  deepspeed --num_gpus 2 recipes/pretrain_text.py                      # english_cpu (MLM + SOP)
  deepspeed --num_gpus 2 recipes/pretrain_text.py --preset tlm_cpu     # MLM + TLM, en-de / en-zh
  deepspeed recipes/pretrain_text.py --preset chinese_cpu data.mixture=mlm@text:1 steps=100

The run is codept.train.loop.run, as for recipes/pretrain_code.py (settings checked before any work,
streams, fixed held-out validation, output priors, engine, resume, step loop, logs, summary); what
is this recipe's own:
1. Corpora (``data.corpus``; ``data.text`` / ``data.pairs`` replace them with your own prepare-text
   sources): ``english`` = the standard library's docstrings + pydoc_data topics
   (codept.text.corpora.english_docs); ``chinese`` = the zh_CN gettext catalogs' translations as
   documents (MLM only: catalog messages are sorted by msgid, so they have no sentence order); ``tlm`` = English docs + the de / zh_CN translations as monolingual text, and the
   en-de / en-zh_CN catalogs as parallel pairs. Each preset trains (and caches) a BPE on its own
   corpus (codept.text.corpora.tokenizer_for), or takes a model's with ``--init-from DIR``, or your own
   (``data.tokenizer=DIR``, e.g. of ``codept tokenizer train``).
2. prepare-text on rank 0 (cached by content hash), the others find the finished folder; held-out
   documents / pairs by content hash (``val.holdout``, codept.views.Views.split), never trained on.
3. Document strategies (``data.long``, ``data.rows``, ``data.shuffle_sentences``): documents longer
   than seq_len split, truncated or covered by sliding windows (``stride:S``, overlap counted in the
   summary); rows packed across documents (per-document attention) or one document per row;
   sentence shuffling within a document as a deliberate corruption (share of documents shuffled).
4. Train (codept.train.loop.train), validate every head on the held-out rows, and at the end:
   pair probes (heads nsp / sop: held-out accuracy on random-document NSP pairs, same-document NSP
   pairs and SOP pairs, label 1 = "not the coherent order", with its count and standard error) and,
   for pair corpora, cross-lingual retrieval MRR of held-out pairs (codept.text.retrieval: one pool
   per target language and a mixed one, raw and per-language centered, BM25 as the lexical reference).
Output: out_dir/summary.json (the overrides, validation table, pair probes, retrieval), losses.jsonl, eval.jsonl,
loss.png, TensorBoard. Cost (measured, 2 ranks): 1.7 steps/s on an otherwise idle 2-core machine
(english_cpu's 600 steps ~6 min + ~1 min setup); 900 steps took 19.7 min at load average ~15.
Not covered: whole-word masking for Chinese (the masking issue), downstream fine-tuning.
"""

from __future__ import annotations

import dataclasses
import math
import os
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")  # 2 ranks on 2 cores: no thread oversubscription
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402

from codept.data.pack import overlap_tokens, parse_long  # noqa: E402
from codept.model import config as T  # noqa: E402  (ModelConfig and presets; no torch before the settings check)
from codept.text import corpora as C  # noqa: E402
from codept.train import loop as L  # noqa: E402
from codept.train.config import RunConfig  # noqa: E402
from codept.train.settings import ConfigError  # noqa: E402

CORPORA = {"text": "text", "pairs": "pair"}  # corpus name -> view kind (objective@corpus)
CORPUS_NAMES = ("english", "chinese", "tlm")


@dataclasses.dataclass(frozen=True)
class DataConfig:
    mixture: str = "sop@text:1"  # objective@corpus:weight,... (sop/nsp carry MLM on the same input)
    corpus: str = "english"  # english | chinese | tlm (module docstring, step 1)
    text: str = ""  # prepare-text sources of the text corpus (comma-separated); empty = data.corpus's
    pairs: str = ""  # prepare-text sources of the pair corpus (.mo/.po/.tsv/.jsonl); empty = data.corpus's
    vocab_size: int = 8192  # BPE trained on the corpus (ignored with --init-from or data.tokenizer)
    tokenizer: str = ""  # a tokenizer folder (`codept tokenizer train SRC --out DIR`); empty = a BPE of the corpus
    buffer: int = 256  # documents packed together (codept.data.pack)
    long: str = "split"  # documents longer than seq_len: split | truncate | stride:S
    rows: str = "packed"  # packed (cross-document, per-document attention) | document (one per row)
    shuffle_sentences: float = 0.0  # share of training documents whose sentences are shuffled (corruption)
    probe_rows: int = 128  # held-out rows per rank for each pair probe (nsp/sop heads)
    retrieval_pool: int = 1000  # held-out pairs of the retrieval probe (candidates per query)

    def __post_init__(self):
        if self.corpus not in CORPUS_NAMES:
            raise ValueError(f"corpus={self.corpus!r}: expected one of {CORPUS_NAMES}")
        if not 0.0 <= self.shuffle_sentences <= 1.0:
            raise ValueError(f"shuffle_sentences={self.shuffle_sentences} must be in [0, 1]")
        if self.rows not in ("packed", "document"):
            raise ValueError(f"rows={self.rows!r}: expected 'packed' or 'document'")
        for name, lo in (("buffer", 1), ("probe_rows", 1), ("retrieval_pool", 2)):
            if getattr(self, name) < lo:
                raise ValueError(f"{name}={getattr(self, name)}: must be >= {lo}")


# -- presets: plain functions named for size and hardware ----------------------------------------


def _cpu_run(out: str, steps: int) -> RunConfig:
    return RunConfig(seq_len=128, micro_batch_rows=16, global_batch_rows=32, steps=steps, lr=1e-3, warmup_steps=30,
                     schedule="cosine", ds_config="zero2", precision="fp32", out_dir=out, save_every=0,
                     keep_last=1, log_every=10)


def _cpu_model(**kw) -> T.ModelConfig:
    # 4 x 128: ~1.9 M parameters (1.05 M of them the 8k embeddings); zero residual init as debug_cpu
    return T.configure(T.debug_cpu(), hidden=128, layers=4, heads=4, intermediate=512, max_positions=256, **kw)


def english_cpu():
    return _cpu_run("runs/english_cpu", 600), _cpu_model(), DataConfig()


def chinese_cpu():
    # MLM only: a .mo catalog stores its messages sorted by msgid, so consecutive messages follow no
    # discourse order and SOP on them would be unanswerable (pass data.mixture=... with your own
    # Chinese prose as data.text for SOP)
    return _cpu_run("runs/chinese_cpu", 400), _cpu_model(), DataConfig(corpus="chinese", mixture="mlm@text:1")


def tlm_cpu():
    # language ids: 1 + index in objective.tlm.languages (text,de,zh); 0 = none (monolingual MLM).
    # The mixture weighs examples, not tokens: a text document is ~830 tokens, a pair ~30, so at
    # mlm:tlm = 1:1 only 5.4% of the trained tokens were pairs. 1:16 gives pairs about half of the
    # tokens (XLM alternates MLM and TLM batches): 0.54 measured over 100 steps of rank 0.
    # 1000 steps (~4.5 min on 2 idle cores): at 400 both arms' retrieval is still near chance.
    return (_cpu_run("runs/tlm_cpu", 1000), _cpu_model(n_langs=4),
            DataConfig(corpus="tlm", mixture="mlm@text:1,tlm@pairs:16", retrieval_pool=1000))


# held-out: 20% of the documents / pairs by content hash; 128 rows per rank (~150 SOP pairs per rank:
# a standard error of ~0.03 on the accuracy over both ranks)
VAL = L.ValConfig(holdout=0.2, rows=128, every=100)
PRESETS = {"english_cpu": english_cpu, "chinese_cpu": chinese_cpu, "tlm_cpu": tlm_cpu}


def configure(preset: str, items: list[str]):
    """(Settings, mixture) of a preset with key=value overrides applied and checked (codept.train.loop)."""
    if preset not in PRESETS:
        raise ConfigError(f"--preset {preset!r}: unknown; presets: {sorted(PRESETS)}")
    run, model, data = PRESETS[preset]()
    settings, mixture = L.configure(items, run, {"model": model, "data": data, "val": VAL}, CORPORA)
    data = settings.sections["data"]
    try:
        parse_long(data.long, settings.run.seq_len)
    except ValueError as e:
        raise ConfigError(f"data.long={data.long!r}: {e}") from None
    L.check_tokenizer("data.tokenizer", data.tokenizer)
    L.check_paths("data.text", data.text)
    L.check_paths("data.pairs", data.pairs)
    from codept.tokenizer import special_tokens

    if data.vocab_size <= (least := len(special_tokens()) + 256):
        raise ConfigError(f"data.vocab_size={data.vocab_size}: the corpus's BPE needs more than {least} "
                          "(its special tokens + 256 bytes)")
    if "pairs" in L.corpora_used(mixture) and data.corpus != "tlm" and not data.pairs:
        raise ConfigError(f"data.mixture reads the pairs corpus, which data.corpus={data.corpus!r} lacks: "
                          "use data.corpus=tlm or give data.pairs=PATH[,PATH]")
    if "tlm" in {L.objective_of(k) for k, _ in mixture}:
        table, side = _tlm_table(settings), _tlm_config(settings).max_side
        if 2 * (side + 1) > settings.run.seq_len:  # the pair must stay whole in one row
            raise ConfigError(f"objective.tlm.max_side={side}: a pair of up to {2 * (side + 1)} tokens > "
                              f"seq_len={settings.run.seq_len}; set max_side <= {settings.run.seq_len // 2 - 1}")
        if settings.sections["model"].n_langs < len(table) + 1:
            raise ConfigError(f"model.n_langs={settings.sections['model'].n_langs}: tlm's languages "
                              f"{','.join(table)} need n_langs >= {len(table) + 1} (0 = none)")
    return settings, mixture


def _tlm_config(settings):
    from codept.objectives.tlm import Config as TlmConfig

    return dataclasses.replace(TlmConfig(), **settings.objectives.get("tlm", {}))


def _tlm_table(settings) -> dict[str, int]:
    return _tlm_config(settings).table()


# -- corpora ---------------------------------------------------------------------------------------


def corpus_sources(data: DataConfig) -> tuple[list[str], list[str], list[Path]]:
    """(text sources, pair sources, tokenizer training files) of the configured corpus."""
    if data.corpus == "english":
        folders = [C.english_docs()]
        pairs: list[str] = []
    elif data.corpus == "chinese":
        folders = [C.catalog_docs("zh_CN")]
        pairs = []
    else:
        folders = [C.english_docs(), C.catalog_docs("de"), C.catalog_docs("zh_CN")]
        pairs = [str(p) for p in C.catalogs(("de", "zh_CN"))]
    text = [x for x in data.text.split(",") if x] or [str(f) for f in folders]
    pairs = [x for x in data.pairs.split(",") if x] or pairs
    return text, pairs, C.text_files(folders)


def prepare_corpora(data: DataConfig, init_dir: Path | None, is_main: bool) -> tuple[Path, str]:
    """(tokenizer dir, prepare-text folder): rank 0 builds (cached), then the others find them."""
    from codept.text.prepare import prepare_text

    text, pairs, tok_files = corpus_sources(data)

    def build(progress: bool):
        tok = init_dir or (Path(data.tokenizer) if data.tokenizer
                           else C.tokenizer_for(data.corpus, tok_files, data.vocab_size))
        return tok, prepare_text(text + pairs, tokenizer_dir=tok, progress=progress)["out"]

    return L.main_first(build, is_main)


# -- document strategies ---------------------------------------------------------------------------


def shuffle_sentences(view, rng: np.random.Generator):
    """The view with its sentences in a random order (ids, offsets, word ids and sentence ranges moved
    together; ``text`` stays the original, so offsets point into it out of order). Paragraphs become
    one. A document of fewer than 2 sentences is returned as it is."""
    s = np.asarray(view.sentences)
    if len(s) < 2:
        return view
    order = rng.permutation(len(s))
    idx = np.concatenate([np.arange(a, b) for a, b in s[order]])
    lengths = (s[:, 1] - s[:, 0])[order]
    ends = np.cumsum(lengths)
    words = np.asarray(view.words)[idx]
    starts = (words >= 0) & np.r_[True, words[1:] != words[:-1]]  # a word's tokens stay contiguous
    new_words = np.where(words >= 0, np.cumsum(starts) - 1, -1)  # renumbered 0.. in the new order
    return dataclasses.replace(view, input_ids=np.asarray(view.input_ids)[idx], offsets=np.asarray(view.offsets)[idx],
                               words=new_words.astype(np.int32),
                               sentences=np.stack([ends - lengths, ends], axis=1).astype(np.int32),
                               paragraphs=np.array([[0, len(idx)]], dtype=np.int32))


def shuffler(share: float):
    """``wrap(key, objective)`` for codept.train.loop.streams: shuffle `share` of the text documents."""
    def wrap(key: str, objective):
        if share == 0 or L.corpus_of(key) != "text":
            return objective

        def shuffled(view, rng, ctx=None):
            return objective(shuffle_sentences(view, rng) if rng.random() < share else view, rng, ctx)
        return shuffled
    return wrap


# -- pair probes: the NSP-vs-SOP question ---------------------------------------------------------

PAIR_PROBES = {  # probe -> (objective, settings): label 1 = not the coherent order
    "nsp_random": ("nsp", {"negatives": "random", "mlm_rate": 0.0, "walk": False}),  # one pair per read
    "nsp_same_document": ("nsp", {"negatives": "same_document", "mlm_rate": 0.0, "walk": False}),
    "sop": ("sop", {"mlm_rate": 0.0, "walk": False}),
}


def pair_probes(engine, held_text, vocab, head: str, run: RunConfig, data: DataConfig, vcfg, world,
                max_tokens: int) -> dict:
    """Held-out accuracy of the pair head `head` on each kind of pair, built with the trained
    objective's ``max_tokens`` (a collective: every rank)."""
    from codept.data.collate import collate
    from codept.views import view_source
    from codept.objectives import build as build_objective
    from codept.train import engine as E

    out = {}
    for name, (obj_name, kw) in PAIR_PROBES.items():
        obj = build_objective(obj_name, vocab, max_tokens=max_tokens, **kw)

        def relabel(view, rng, ctx, obj=obj, src=obj_name):
            ex = obj(view, rng, ctx)
            if ex is not None:
                ex.scalars = {head: ex.scalars[src]}
            return ex

        stream = L.packed([view_source(held_text, relabel, name, salt=7)], [(name, 1.0)], vcfg.seed, world,
                          run.seq_len, vocab.pad_id, data.buffer)
        rows = [next(stream) for _ in range(data.probe_rows)]
        batches = [collate(rows[i:i + run.micro_batch_rows]) for i in range(0, len(rows), run.micro_batch_rows)]
        m = E.evaluate(engine, batches, [head])
        acc, n = m[f"val/{head}/acc"], int(m[f"val/{head}/n"])
        out[name] = {"acc": round(acc, 4), "n": n, "se": round(math.sqrt(max(acc * (1 - acc), 1e-12) / max(n, 1)), 4)}
    return out


# -- the recipe's own steps (codept.train.loop.run does the rest) -----------------------------------


def corpora(job: L.Job) -> L.Corpora:
    """The corpus's tokenizer and prepare-text views (rank 0 first); held-out documents / pairs by
    content hash (val.holdout); the document strategies of data.*."""
    from codept.views import open_views

    data, vcfg, run = job.section("data"), job.section("val"), job.run
    tok_dir, text_dir = prepare_corpora(data, job.init_dir, job.is_main)
    train, held = {}, {}
    for name in L.corpora_used(job.mixture):
        train[name], held[name] = open_views(text_dir, kind=CORPORA[name]).split(vcfg.holdout)
    return L.Corpora(tok_dir, train, held, wrap=shuffler(data.shuffle_sentences), long=data.long, rows=data.rows,
                     summary={"corpus": data.corpus, "views": str(text_dir),
                              "strategies": strategies(data, train, run.seq_len)})


def final(job: L.Job) -> dict:
    """Pair probes (nsp/sop heads), cross-lingual retrieval (pair corpora), standard errors of the
    validation accuracies."""
    from codept.text.retrieval import retrieval

    run, data, vcfg, world, held = job.run, job.section("data"), job.section("val"), job.world, job.corpora.held
    probes = {}
    for head in ("sop", "nsp"):
        if head in job.heads and held.get("text") is not None and len(held["text"]) >= world.world_size:
            size = job.settings.objectives.get(head, {}).get("max_tokens", run.seq_len)
            probes[head] = pair_probes(job.engine, held["text"], job.vocab, head, run, data, vcfg, world, size)
    retr = {}
    if held.get("pairs") is not None:
        retr = retrieval(job.engine.module.model, held["pairs"], _tlm_table(job.settings), job.vocab,
                         job.engine.device, pool=data.retrieval_pool,
                         max_side=job.settings.objectives.get("tlm", {}).get("max_side", 62))
    return {"val_se": standard_errors(job.val), "pair_probes": probes, "retrieval": retr}


def standard_errors(val: dict) -> dict:
    """sqrt(acc (1 - acc) / n) per head of the validation summary (n = labelled records)."""
    out = {}
    for head, m in val.items():
        if isinstance(m, dict) and m.get("acc") is not None and m.get("n"):
            out[head] = round(math.sqrt(m["acc"] * (1 - m["acc"]) / m["n"]), 4)
    return out


def strategies(data: DataConfig, corpora: dict, seq_len: int) -> dict:
    """The document strategies of the run; for stride windows the tokens repeated over the text corpus."""
    out = {"long": data.long, "rows": data.rows, "shuffle_sentences": data.shuffle_sentences}
    stride = parse_long(data.long, seq_len)
    if stride and "text" in corpora:
        views = corpora["text"]
        lengths = [len(views[i].input_ids) for i in range(len(views))]
        out["stride_overlap_tokens"] = sum(overlap_tokens(n, seq_len, stride) for n in lengths)
        out["text_tokens"] = sum(lengths)
    return out


RECIPE = L.Recipe(presets=PRESETS, default_preset="english_cpu", configure=configure, corpora=corpora,
                  description=__doc__.split("\n")[0], final=final)

if __name__ == "__main__":
    L.main(RECIPE)
