"""Every registered objective, in every config variant that changes its code path, through the REAL
stream path: real views (code views built from stdlib files and the grammars' fixtures in six
languages, text / pair views built by codept.text.build, trace views from trace rows) in a
codept.views.view_source (a Source with context=True and get=), a Mixture with a horizon (so
ctx.progress moves), a PackedStream, two collated batches, and a forward + backward of a tiny
Pretrainer with the objective's heads (codept.objectives.HEADS_OF).

Why: unit tests that hand an objective a stub Context / view can agree with the stub and not with
the stream (ident_rtd's partner source used ``ctx.partner(rng)`` as a view; Context.partner returns
``(index, view)``, and its stub returned the view). Here nothing is a stand-in: the Context, the
partner draws, the read-only columnar views, packing and collate are the ones training uses.

Trace views: built by codept.exec.views.view_of from trace rows written here (the rows `codept
trace` writes: code, per-line counts, per-line state deltas), as tests/test_exec_train.py does, so
no sandbox is needed; the tracer itself is tested in tests/test_exec_trace.py.

The VARIANTS table is hand-written; test_variant_table_covers_every_option fails when an objective
or a bool / str / tuple-of-str / optional field of a Config is in neither VARIANTS nor NOT_PATH, or
when a string-choice field has an allowed value no variant uses.
"""

from __future__ import annotations

import dataclasses
import types
import typing

import numpy as np
import pytest
import torch

from codept.data.collate import collate
from codept.data.sources import read_source, stdlib_files
from codept.data.stream import Mixture, PackedStream, Source
from codept.views import view_source
from codept.model import transformer as T
from codept.model.pretrainer import Pretrainer, build_head
from codept.objectives import HEADS_OF, MODEL_OF, OBJECTIVES, VIEWS_OF, build
from codept.objectives import ar, code_doc, dataflow, dataflow_edge, nsp, wwm
from codept.objectives.render import Vocab

SEQ = 256  # row length
ROWS = 4  # rows per batch
LEXICON = "<lexicon>"  # replaced by the path of a lexicon file written by the fixture

# objective -> [(variant id, Config overrides, {"heads": extra heads, "empty": heads allowed no
# target, "fields": extra batch fields that must be present, "check": a CHECKS entry the two batches
# must pass, "same": may give the defaults' rows, "long": a multi-part example may exceed the row:
# code_doc's unit with hard negatives is up to 2 x (32 + 128) tokens, and codept.data.pack cuts a
# multi-part example to its first seq_len tokens (the negative code side loses its tail)})].
# The first variant is the defaults.
VARIANTS: dict[str, list[tuple[str, dict, dict]]] = {
    "mlm": [("default", {}, {}),
            ("static", {"static": True}, {}),
            ("p_mask_final", {"p_mask_final": 0.2, "schedule_start": 0.0}, {})],
    "syntax_span": [("default", {}, {"fields": ("ptr.span",)}),
                    ("kinds", {"kinds": ("identifier", "call", "expression")}, {}),
                    ("weights", {"weights": ("identifier=2", "block=0")}, {}),
                    ("max_unit_tokens", {"max_unit_tokens": 8}, {})],
    "code_doc": [("default", {}, {}),
                 ("doc_raw", {"doc": "raw"}, {}),
                 ("hard_negatives", {"hard_negatives": True}, {"check": "unmatched_parts", "long": True}),
                 ("same_file", {"negatives": "same_file"}, {"check": "unmatched_parts", "long": True}),
                 ("pairs_1", {"pairs": 1}, {}),
                 ("pairs_1_hard_negatives", {"pairs": 1, "hard_negatives": True},
                  {"check": "unmatched_parts", "long": True}),
                 ("pairs_2_one_each", {"pairs": 2, "max_tokens": 0}, {}),
                 # > SUMMARY_CAP: the summary read per call, not from the view's field; the same doc
                 # sides as the defaults while no summary exceeds 32 tokens
                 ("long_summary", {"max_doc_tokens": 96}, {"same": True}),
                 ("kinds_class", {"kinds": ("function", "method", "class")}, {}),
                 ("prefixes", {"query_prefix": "query: ", "code_prefix": "code: "}, {}),
                 # codept's BPE frames nothing: the default's rows (the framed sides: tests/test_search.py)
                 ("frame_none", {"frame": "none"}, {"same": True}),
                 ("mlm_rate", {"mlm_rate": 0.15}, {"heads": ("mlm",)})],
    "ar": [("default", {}, {}),
           ("linear", {"schedule": "linear"}, {"fields": ("labels.sample",)}),
           ("exponential", {"schedule": "exponential"}, {"fields": ("labels.sample",)}),
           ("inverse_sigmoid", {"schedule": "inverse_sigmoid"}, {"fields": ("labels.sample",)})],
    "unilm": [("default", {}, {}),
              ("bidirectional", {"left_to_right": 0.0, "seq2seq": 0.0}, {}),
              ("left_to_right", {"bidirectional": 0.0, "seq2seq": 0.0}, {}),
              ("seq2seq", {"bidirectional": 0.0, "left_to_right": 0.0}, {})],
    "glm": [("default", {}, {"fields": ("block_positions",)}),
            ("one_window", {"all_windows": False}, {"fields": ("block_positions",)})],
    "plm": [("default", {}, {"fields": ("order",)})],
    "electra": [("default", {}, {}),
                ("80_10_10", {"p_mask": 0.8, "p_random": 0.1}, {})],
    "nsp": [("default", {}, {"fields": ("types",)}),
            ("random_negatives_only", {"p_negative": 1.0}, {"check": "nsp_all_1"}),
            ("same_document", {"negatives": "same_document"}, {}),
            ("same_document_negatives_only", {"negatives": "same_document", "p_negative": 1.0},
             {"check": "nsp_all_1"}),
            ("no_mlm", {"mlm_rate": 0.0}, {"empty": ("mlm",)}),
            ("one_pair_per_read", {"walk": False}, {}),
            ("walk_same_document", {"negatives": "same_document"}, {}),
            ("short_pairs_grouped", {"max_tokens": 64}, {}),
            ("short_pairs_one_example_each", {"max_tokens": 64, "group_tokens": 1}, {})],
    "sop": [("default", {}, {"fields": ("types",)}),
            ("always_swapped", {"p_swap": 1.0}, {"check": "sop_all_1"}),
            ("no_mlm", {"mlm_rate": 0.0}, {"empty": ("mlm",)}),
            ("one_pair_per_read", {"walk": False}, {}),
            ("short_pairs_grouped", {"max_tokens": 64}, {}),
            ("short_pairs_one_example_each", {"max_tokens": 64, "group_tokens": 1}, {})],
    "tlm": [("default", {}, {"fields": ("langs",)}),
            ("not_joint", {"joint": False}, {}),
            ("swapped", {"p_swap": 1.0}, {})],
    "wwm": [("default", {}, {}),
            ("ident", {"code_units": "ident"}, {}),
            ("subwords", {"subwords": True}, {}),
            ("ident_subwords", {"code_units": "ident", "subwords": True}, {})],
    "phrase": [("default", {}, {}),
               ("lexicon", {"lexicon": LEXICON}, {}),
               ("no_pos_chunks", {"pos_chunks": False}, {})],
    "span": [("default", {}, {})],
    "t5_span": [("default", {}, {}),
                ("one_window", {"all_windows": False}, {})],
    "exec_lines": [("default", {}, {}),
                   ("min_labels", {"min_labels": 5}, {})],
    "exec_values": [("default", {}, {}),
                    ("80_10_10", {"p_mask": 0.8, "p_random": 0.1, "rate": 1.0}, {})],
    "exec_trace": [("default", {}, {}),
                   ("short", {"max_trace_tokens": 8}, {})],
    "dataflow": [("default", {}, {}),
                 ("visible_uses", {"mask_uses": False}, {}),
                 ("mlm", {"mlm": True}, {"heads": ("mlm",)}),
                 ("nonlocal", {"kinds": "nonlocal"}, {}),
                 ("all_kinds", {"kinds": "all"}, {})],
    "dataflow_edge": [("default", {}, {"check": "negatives"}),
                      ("comes_from", {"kinds": "comes_from"}, {"check": "negatives"}),
                      # few computedFrom anchors per file: at rate 0.2 whether the first two batches hold
                      # one was chance (a dataflow fix moved them out); every anchor asked about
                      ("computed_from", {"kinds": "computed_from", "rate": 1.0}, {"check": "negatives"}),
                      ("nonlocal", {"kinds": "nonlocal"}, {"check": "negatives"}),
                      ("all_kinds", {"kinds": "all"}, {"check": "negatives"}),
                      ("all_easy", {"p_hard": 0.0}, {"check": "negatives"}),
                      ("all_hard", {"p_hard": 1.0}, {"check": "negatives"})],
    "ident_rtd": [("default", {}, {"check": "renamed"}),
                  ("one_occurrence", {"consistent": False}, {"check": "renamed"}),
                  ("partner", {"source": "partner"}, {"check": "renamed"}),
                  ("partner_one_occurrence", {"source": "partner", "consistent": False},
                   {"check": "renamed"})],
    "ident_mask": [("default", {}, {}),
                   ("one_window", {"windows": 1}, {}),
                   ("two_windows", {"windows": 2}, {})],
    "translate": [("default", {}, {"fields": ("langs",)}),
                  ("not_joint", {"joint": False}, {})],
}


def _scalars(batches, key):
    return torch.cat([b[key][b[key] != -100] for b in batches if key in b])


def _matched(batch) -> int:
    from codept.model.heads import ContrastiveHead

    # the head's own count (it reads only the field), without a model: the head now sizes itself from one
    return ContrastiveHead.count(types.SimpleNamespace(field="scalar.pair"), batch) if "scalar.pair" in batch else 0


CHECKS = {  # what the variant must visibly do in the two batches
    "renamed": lambda bs: any(bool((b["labels.rtd"] == 1).any()) for b in bs),
    "negatives": lambda bs: any(bool((b["ptr.dataflow_edge"][..., 2] >= 0).any()) for b in bs),
    "nsp_all_1": lambda bs: len(s := _scalars(bs, "scalar.nsp")) > 0 and bool((s == 1).all()),
    "unmatched_parts": lambda bs: any(int((b["scalar.pair"] != -100).sum()) > 2 * _matched(b) for b in bs),
    "sop_all_1": lambda bs: len(s := _scalars(bs, "scalar.sop")) > 0 and bool((s == 1).all()),
}

# (objective, field) -> why no variant changes it
NOT_PATH = {
    ("tlm", "languages"): "the language table: which language ids the pairs get, one code path whatever it holds",
    ("translate", "languages"): "the language table (as tlm's): data, not a code path",
    # code_doc's loss settings reach the contrastive head (code_doc.heads), never the stream's rows;
    # tests/test_search.py and tests/test_gradcache.py run each of them through a real model
    ("code_doc", "symmetric"): "a loss setting of the contrastive head: the stream's rows do not depend on it",
    ("code_doc", "temperature_schedule"): "a loss setting of the contrastive head (as symmetric)",
    ("code_doc", "matryoshka"): "a loss setting of the contrastive head (as symmetric)",
    ("code_doc", "grad_cache"): "how the head computes the same loss (as symmetric)",
    # negatives="mined" needs a mined sidecar beside a prepared folder: tests/test_mined_negatives.py
    # runs it (and `miner`, which names the sidecar) through the stream and the contrastive head
    ("code_doc", "miner"): "names the sidecar of negatives='mined' (tests/test_mined_negatives.py)",
}

# (objective, string field) -> its allowed values: every one must be used by a variant
CHOICES = {
    ("code_doc", "negatives"): ("none", "same_file"),  # "mined": tests/test_mined_negatives.py (needs a sidecar)
    ("code_doc", "doc"): code_doc.DOC_MODES,
    ("code_doc", "frame"): code_doc.FRAMES,
    ("ar", "schedule"): ar.SCHEDULES,
    ("nsp", "negatives"): nsp.NEGATIVES,
    ("wwm", "code_units"): wwm.CODE_UNITS,
    ("dataflow_edge", "kinds"): tuple(dataflow_edge.KINDS),
    ("dataflow", "kinds"): tuple(dataflow.KINDS),
    ("ident_rtd", "source"): ("file", "partner"),
}

# Settings every variant gets: what a recipe sets for a row of SEQ tokens (examples that must stay
# whole fit the row; codept.train.loop.configure).
ROW_SETTINGS = {
    "t5_span": {"length": SEQ},
    "ident_mask": {"length": SEQ, "target_room": 64},
    "code_doc": {"max_tokens": SEQ // 2},
    "nsp": {"max_tokens": SEQ},  # BERT: pairs fill the row
    "sop": {"max_tokens": SEQ},
}

# -- views ---------------------------------------------------------------------------------------

ZH = ("人工智能是计算机科学的一个分支。北京大学的研究人员开发了新的机器翻译系统。"
      "这个系统可以把中文句子翻译成英文。高速铁路连接了北京和上海。"
      "研究人员在国际会议上介绍了他们的成果。\n\n"
      "机器学习需要大量的训练数据。深度神经网络在图像识别方面取得了很大的进步。")
DE = ("Die Datei wird zum Lesen geöffnet. Danach liest das Programm jede Zeile. Am Ende wird die Datei "
      "geschlossen. Fehler werden in das Protokoll geschrieben.")
PAIRS = [("Open the file for reading", "de", "Öffne die Datei zum Lesen"),
         ("Save the current file to disk", "zh", "将当前文件保存到磁盘"),
         ("Could not read the configuration file", "de", "Die Konfigurationsdatei konnte nicht gelesen werden"),
         ("The New York office closed early", "zh", "纽约办公室提前关门了")]
JAVA_ADD = "class M {\n    int add(int a, int b) {\n        int c = a + b;\n        return c;\n    }\n}\n"
PY_ADD = "def add(a, b):\n    c = a + b\n    return c\n"

# trace rows as `codept trace` writes them (code, {line: count}, [[line, {name: repr}], ...])
LOOP = ("def f(n):\n    '''\n    >>> f(4)\n    6\n    '''\n    t = 0\n    for i in range(n):\n        t += i\n"
        "    return t\n")
GUARD = "def g(x):\n    if x < 0:\n        raise ValueError(x)\n    y = [x, x * 2]\n    return y\n"
WALK = ("def walk(d):\n    out = {}\n    for k, v in sorted(d.items()):\n        if isinstance(v, int):\n"
        "            out[k] = v + 1\n        else:\n            out[k] = str(v)\n    return out\n")
TRACE_ROWS = [
    ("loop", LOOP, {6: 1, 7: 5, 8: 4, 9: 1},
     [[6, {"n": "4", "t": "0"}], [7, {"i": "0"}], [8, {}], [7, {"i": "1"}], [8, {"t": "1"}], [7, {"i": "2"}],
      [8, {"t": "3"}], [7, {"i": "3"}], [8, {"t": "6"}], [9, {}]]),
    ("guard", GUARD, {2: 1, 4: 1, 5: 1}, [[2, {"x": "3"}], [4, {"y": "[3, 6]"}], [5, {}]]),
    ("walk", WALK, {2: 1, 3: 3, 4: 2, 5: 1, 7: 1, 8: 1},
     [[2, {"d": "{'a': 1, 'b': 'x'}", "out": "{}"}], [3, {"k": "'a'", "v": "1"}], [4, {}],
      [5, {"out": "{'a': 2}"}], [3, {"k": "'b'", "v": "'x'"}], [4, {}], [7, {"out": "{'a': 2, 'b': 'x'}"}],
      [8, {}]]),
    ("guard_raise", GUARD, {2: 1, 3: 1}, [[2, {"x": "-1"}], [3, {}]]),
]


@pytest.fixture(scope="module")
def vocab(small_tok):
    return Vocab.from_tokenizer(small_tok)


@pytest.fixture(scope="module")
def corpora(small_tok, tmp_path_factory):
    """kind -> the views tables / lists an objective reads (one source each), and the lexicon path."""
    from codept.exec import views as exec_views
    from codept.objectives.translate import code_pair_view, doc_code_pairs, pairs_table
    from codept import languages
    from codept.structure.view import build_view, views_to_table
    from codept.text.build import build_pair_view, build_text_view
    from codept.text.view import pairs_to_table, views_to_table as text_table

    py = [p for p in stdlib_files() if 3000 < p.stat().st_size < 9000 and p.name[0] != "_"][:4]
    code = [build_view(str(p), "python", read_source(p), small_tok) for p in py]
    for lang in ("java", "go", "javascript", "php", "ruby"):  # the grammars' own fixtures: real code
        for f in sorted((languages.grammars_dir() / lang / "fixtures").iterdir()):
            if f.stem.lower() in ("flow", "scopes"):
                code.append(build_view(str(f), lang, f.read_text(encoding="utf-8"), small_tok))
    import argparse
    import json
    import textwrap

    text = [build_text_view(f"en{i}", "text", d, small_tok) for i, d in
            enumerate((argparse.__doc__, json.__doc__, textwrap.__doc__ + "\n" + textwrap.dedent.__doc__))]
    text += [build_text_view("zh0", "zh", ZH, small_tok), build_text_view("de0", "de", DE, small_tok)]
    pairs = [build_pair_view(f"p{i}", "text", s, lang, t, small_tok) for i, (s, lang, t) in enumerate(PAIRS)]
    code_pairs = doc_code_pairs([v for v in code if v.lang == "python"], small_tok)[:6]
    code_pairs += [code_pair_view("add#0", "python", PY_ADD, "java", JAVA_ADD, small_tok)]
    traces = [exec_views.view_of({"id": f"m::{n}", "source": f"m{i % 2}", "code": c,
                                  "counts": {str(k): v for k, v in counts.items()}, "states": states}, small_tok)
              for i, (n, c, counts, states) in enumerate(TRACE_ROWS)]
    assert all(t is not None and len(t.value_units) for t in traces)
    lexicon = tmp_path_factory.mktemp("lexicon") / "lexicon.txt"
    lexicon.write_text("command line\nregular expression\n机器翻译\nJSON\n", encoding="utf-8")
    return {"code": views_to_table(code), "text": text_table(text), "pair": pairs_to_table(pairs),
            "code_pair": pairs_table(code_pairs), "trace": traces, "lexicon": str(lexicon)}


def source_of(kind: str, name: str, objective, corpora: dict) -> Source:
    if kind == "trace":  # no Arrow table for trace views: a Source over the list, as the exec recipe builds
        vs = corpora["trace"]
        return Source(name, len(vs), lambda i, rng, ctx: objective(vs[i], rng, ctx), salt=3,
                      get=vs.__getitem__, context=True)
    if kind == "pair" and name == "translate":  # code <-> code and doc <-> code pairs (its languages)
        kind = "code_pair"
    return view_source(corpora[kind], objective, name, salt=3)


def _resolve(overrides: dict, corpora: dict) -> dict:
    return {k: corpora["lexicon"] if v == LEXICON else v for k, v in overrides.items()}


def cases():
    for name, variants in VARIANTS.items():
        for vid, overrides, extra in variants:
            for kind in VIEWS_OF.get(name, ()):
                yield pytest.param(name, overrides, extra, kind, id=f"{name}[{vid}]-{kind}")


@pytest.mark.parametrize("name, overrides, extra, kind", list(cases()))
def test_objective_through_the_stream_trains_its_heads(name, overrides, extra, kind, corpora, vocab):
    overrides = _resolve(overrides, corpora)
    settings = {**ROW_SETTINGS.get(name, {}), **overrides}
    objective = build(name, vocab, **settings)
    cfg = OBJECTIVES[name].config(**settings)
    src = source_of(kind, name, objective, corpora)
    stream = PackedStream(Mixture([src], [1.0], seed=11, horizon=2 * src.n), SEQ, vocab.pad_id, buffer=src.n)
    if getattr(OBJECTIVES[name].config, "whole_in_row", False) and not extra.get("long"):  # packing would cut it
        for step in range(2 * src.n):
            ex = stream.mixture.example(step)
            for e in ex if isinstance(ex, list) else [ex]:
                assert e is None or len(e) <= SEQ, f"{name} {settings}: an example of {len(e)} > {SEQ} tokens"
    it = stream.batches(ROWS)
    batches = [collate(next(it)), collate(next(it))]

    torch.manual_seed(0)
    n_langs = len(cfg.table()) + 1 if hasattr(cfg, "table") else 0
    model = T.Transformer(T.tiny(vocab_size=vocab.size, max_positions=SEQ, n_langs=n_langs,
                                 **MODEL_OF.get(name, {})))
    names = tuple(HEADS_OF[name]) + tuple(extra.get("heads", ()))
    heads = {h: build_head(h, model) for h in names}
    trainer = Pretrainer(model, heads)
    counts = dict.fromkeys(names, 0)
    for b in batches:
        check_pointers(b)
        check_cloze_labels(b, vocab)
        for f in extra.get("fields", ()):
            assert f in b, f"{name}: batch lacks {f} ({sorted(b)})"
        out = trainer(b)
        total = 0
        for h, (loss, n) in out.items():
            assert torch.isfinite(loss).all(), f"{name}: head {h} loss {loss}"
            counts[h] += int(n)
            total = total + loss
        total.backward()
        bad = [p for p, w in trainer.named_parameters()
               if w.grad is not None and not torch.isfinite(w.grad).all()]
        assert not bad, f"{name}: non-finite gradients in {bad[:5]}"
        trainer.zero_grad()
    for h in names:
        if h in extra.get("empty", ()):
            assert counts[h] == 0, f"{name}: head {h} got {counts[h]} targets with {overrides}"
            continue
        field = heads[h].field
        assert any(field in b for b in batches), f"{name}: no batch has {field} (head {h}): {sorted(batches[0])}"
        assert counts[h] > 0, f"{name} {overrides} on {kind}: head {h} got no target in two batches"
    if "check" in extra:
        assert CHECKS[extra["check"]](batches), f"{name} {overrides} on {kind}: fails {extra['check']}"


def check_cloze_labels(batch: dict, vocab) -> None:
    """Masked-token labels (mlm, gen, exec_values) are ordinary ids: a special token is never a
    cloze target (glm / lm targets may be <eop>, <eos>, sentinels)."""
    special = torch.from_numpy(vocab.is_special)
    for k in ("labels.mlm", "labels.gen", "labels.exec_values"):
        if k in batch:
            lab = batch[k][batch[k] != -100]
            assert not bool(special[lab].any()), f"{k}: special ids {lab[special[lab]][:5].tolist()} are targets"


def check_pointers(batch: dict) -> None:
    """Every pointer entry is a token of the record's own document (ptr_seg) in its row."""
    seg = batch["segment_ids"]
    for k, ptr in batch.items():
        if not k.startswith("ptr."):
            continue
        own = batch[f"ptr_seg.{k[4:]}"]  # (B, K), 0 = padding
        rec = ptr.flatten(2) if ptr.dim() > 2 else ptr[..., None]  # (B, K, m)
        assert rec.numel() == 0 or int(rec.max()) < seg.shape[1], k
        rows = torch.arange(seg.shape[0])[:, None, None].expand_as(rec)
        at = seg[rows, rec.clamp(min=0)]
        live = (rec >= 0) & (own[..., None] > 0)
        assert bool((at[live] == own[..., None].expand_as(rec)[live]).all()), f"{k}: a pointer leaves its document"
        assert not bool(((rec >= 0) & (own[..., None] == 0)).any()), f"{k}: a padding record points somewhere"


def rows_of(name: str, overrides: dict, kind: str, corpora: dict, vocab) -> list[dict]:
    """The rows of the first two buffers of the objective's stream (no model)."""
    objective = build(name, vocab, **{**ROW_SETTINGS.get(name, {}), **overrides})
    src = source_of(kind, name, objective, corpora)
    stream = PackedStream(Mixture([src], [1.0], seed=11, horizon=2 * src.n), SEQ, vocab.pad_id, buffer=src.n)
    return stream.rows_of_buffer(0) + stream.rows_of_buffer(1)


def _same(a: list[dict], b: list[dict]) -> bool:
    return len(a) == len(b) and all(x.keys() == y.keys() and all(np.array_equal(x[k], y[k]) for k in x)
                                    for x, y in zip(a, b))


@pytest.mark.parametrize("name", list(VARIANTS))
def test_every_variant_changes_the_stream(name, corpora, vocab):
    """A variant that yields the default's rows on every view kind is an option the stream never
    reaches (or a table entry that tests nothing)."""
    base = {kind: rows_of(name, {}, kind, corpora, vocab) for kind in VIEWS_OF[name]}
    for vid, overrides, extra in VARIANTS[name][1:]:
        if extra.get("same"):
            continue
        same = [_same(rows_of(name, _resolve(overrides, corpora), kind, corpora, vocab), base[kind])
                for kind in VIEWS_OF[name]]
        assert not all(same), f"{name}[{vid}] {overrides}: the same rows as the defaults on {VIEWS_OF[name]}"


# -- the table covers every option ----------------------------------------------------------------


def _path_fields(config) -> dict[str, object]:
    """{field: type} of the Config fields that are bool, str, tuple of str, or optional."""
    hints = typing.get_type_hints(config)
    out = {}
    for f in dataclasses.fields(config):
        t = hints[f.name]
        args = typing.get_args(t)
        if t in (bool, str) or typing.get_origin(t) is tuple or type(None) in args:
            out[f.name] = t
    return out


def test_variant_table_covers_every_option():
    missing = sorted(set(OBJECTIVES) - set(VARIANTS))
    assert not missing, f"objectives without a row in VARIANTS: {missing}"
    assert not set(VARIANTS) - set(OBJECTIVES)
    problems = []
    for name, o in OBJECTIVES.items():
        config = o.config
        default = config()
        used: dict[str, list] = {}
        for _, overrides, _ in VARIANTS[name]:
            for k, v in overrides.items():
                used.setdefault(k, []).append(v)
        for field, t in _path_fields(config).items():
            if (name, field) in NOT_PATH:
                continue
            d = getattr(default, field)
            values = used.get(field, [])
            if not any(v != d for v in values):
                problems.append(f"{name}.{field}: no variant sets a value other than the default {d!r} "
                                f"(add one to VARIANTS or a reason to NOT_PATH)")
            if t is str:
                choices = CHOICES.get((name, field))
                if choices is None:
                    try:
                        config(**{field: "\x00not-a-choice"})
                    except ValueError:
                        problems.append(f"{name}.{field} is validated (a choice): list its values in CHOICES")
                    continue
                left = set(choices) - set(values) - {d}
                if left:
                    problems.append(f"{name}.{field}: no variant uses {sorted(left)}")
    for (name, field), _ in {**NOT_PATH, **CHOICES}.items():
        if field not in {f.name for f in dataclasses.fields(OBJECTIVES[name].config)}:
            problems.append(f"{name}.{field}: listed but not a field of its Config")
    assert not problems, "\n".join(problems)


def test_every_variant_builds():
    """Each override is a real, valid setting of its objective's Config (unknown keys are a TypeError)."""
    for name, variants in VARIANTS.items():
        for _, overrides, _ in variants:
            OBJECTIVES[name].config(**{**ROW_SETTINGS.get(name, {}), **_resolve(overrides, {"lexicon": "x.txt"})})


def test_every_objective_in_one_mixture(corpora, vocab):
    """All objectives (defaults) on all their view kinds in ONE mixture, as a multi-objective recipe
    runs them: rows of different objectives share batches (collate fills the fields a row lacks),
    every head of the union is built, staged regimes (scheduled sampling, ELECTRA's generator, the
    two streams) run on batches that hold other objectives' rows too."""
    sources, names = [], []
    for i, name in enumerate(VARIANTS):
        objective = build(name, vocab, **ROW_SETTINGS.get(name, {}))
        for kind in VIEWS_OF[name]:
            src = source_of(kind, name, objective, corpora)
            sources.append(dataclasses.replace(src, name=f"{name}@{kind}", salt=i))
            names.append(name)
    stream = PackedStream(Mixture(sources, [1.0] * len(sources), seed=2, horizon=200), SEQ, vocab.pad_id,
                          buffer=2 * len(sources))
    torch.manual_seed(0)
    model = T.Transformer(T.tiny(vocab_size=vocab.size, max_positions=SEQ, n_langs=8, block_positions=True))
    heads = {h: build_head(h, model) for h in sorted({h for n in names for h in HEADS_OF[n]})}
    trainer = Pretrainer(model, heads)
    counts = dict.fromkeys(heads, 0)
    rows = stream.rows_of_buffer(0)  # every example of the first buffer once
    for k in range(0, len(rows), 16):
        b = collate(rows[k:k + 16])
        check_pointers(b)
        out = trainer(b)
        for h, (loss, n) in out.items():
            assert torch.isfinite(loss).all(), f"head {h}: loss {loss}"
            counts[h] += int(n)
        sum(loss for loss, _ in out.values()).backward()
        trainer.zero_grad()
    assert all(counts.values()), f"heads without targets in the first buffer: {counts}"
