"""Text-view throughput on about 1 MB of real English, one core, one process.

Corpus, first found: man pages (/usr/share/man/man1, rendered once, not timed), the Node.js API
docs (/usr/share/doc/nodejs/api/*.md), else the standard library's module docstrings repeated.
Measures, on the same documents in the same run:
  tokenize-only   codept.structure.view.tokenize (ids + offsets as arrays): the floor
  text view       codept.text.build.build_text_view (tokenize + paragraphs, sentences, words, alignment)
and prints MB/s and tokens/s of each, the view's stage breakdown, and last:
  text view/tokenize time ratio: X
Usage: python benchmarks/bench_text.py [--mb 1.0] [--repeat 3] [--tokenizer DIR]
"""

from __future__ import annotations

import argparse
import glob
import os

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import importlib  # noqa: E402
import pkgutil  # noqa: E402
import time  # noqa: E402

from codept.structure.view import tokenize  # noqa: E402
from codept.text.build import build_text_view  # noqa: E402
from codept.text.items import TextDoc  # noqa: E402
from codept.text.readers import read_file  # noqa: E402
from codept.tokenizer import default_tokenizer_dir, load_tokenizer  # noqa: E402


def corpus(limit: int) -> tuple[str, list[TextDoc]]:
    sources = [("man pages", sorted(glob.glob("/usr/share/man/man1/*.1.gz"))),
               ("Node.js docs", sorted(glob.glob("/usr/share/doc/nodejs/api/*.md")))]
    for name, files in sources:
        docs, n = [], 0
        for f in files:
            for d in read_file(f):
                if isinstance(d, TextDoc) and d.lang == "text":
                    docs.append(d)
                    n += len(d.text.encode())
            if n >= limit:
                return name, docs
    docs, n = [], 0
    mods = sorted(m.name for m in pkgutil.iter_modules() if not m.name.startswith("_"))
    while n < limit:
        for m in mods:
            try:
                doc = importlib.import_module(m).__doc__
            except Exception:  # noqa: BLE001 - some modules refuse to import here; skip them
                continue
            if doc and doc.strip():
                docs.append(TextDoc(m, "text", doc))
                n += len(doc.encode())
        if not docs:
            raise SystemExit("no English text found")
    return "stdlib docstrings", docs


def best_of(repeat: int, fn) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tokenizer", default=None)
    args = ap.parse_args()
    tok = load_tokenizer(args.tokenizer or default_tokenizer_dir())
    name, docs = corpus(int(args.mb * 1e6))
    mb = sum(len(d.text.encode()) for d in docs) / 1e6
    n_tok = sum(len(tokenize(tok, d.text)[0]) for d in docs)
    print(f"corpus: {name}, {len(docs)} documents, {mb:.2f} MB, {n_tok:,} tokens")

    t_tok = best_of(args.repeat, lambda: [tokenize(tok, d.text) for d in docs])
    stats: list[dict] = []
    t_view = best_of(args.repeat, lambda: stats.__setitem__(slice(None), [
        build_text_view(d.path, d.lang, d.text, tok).stats for d in docs]))
    for label, t in (("tokenize-only", t_tok), ("text view", t_view)):
        print(f"{label:14s} {mb / t:6.2f} MB/s  {n_tok / t / 1e6:5.2f} M tok/s")
    parts = {k: sum(s[k] for s in stats) for k in ("tokenize_s", "segment_s", "align_s")}
    print("  stages: " + ", ".join(f"{k[:-2]} {v:.2f}s" for k, v in parts.items()))
    words = sum(s["words"] for s in stats)
    print(f"  words {words:,}  joined by BPE tokens {sum(s['char_words'] for s in stats) - words:,}")
    print(f"text view/tokenize time ratio: {t_view / t_tok:.2f}")


if __name__ == "__main__":
    main()
