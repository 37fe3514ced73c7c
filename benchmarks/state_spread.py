"""State spread: does an encoder still tell tokens apart? (the collapse check of docs/ablations.md)

    python benchmarks/state_spread.py RUN_OR_MODEL [MORE ...] [--functions 48] [--max-len 256] [--random]

1. Held-out functions: the running interpreter's standard library (codept.data.sources.stdlib_files,
   the recipes' default corpus), only files the in-domain split holds out (codept.probe.split.held_out
   at ``--holdout`` 0.1, the recipes' default: content-hashed, so never trained on), every function or
   method of at least 3 lines (``ast``; source order), at most 2 per file, the first ``--functions``.
2. Each model (codept.probe.encoders.load_encoder: a run or checkpoint folder, a transformers folder,
   ``random:PRESET``; ``--random`` adds a random-init encoder of the first model's shape) tokenizes each
   function without special tokens, cut to ``--max-len`` tokens, one function per row, bidirectional
   (the code-search probes' framing), in eval mode.
3. Spread of layer l = the per-dimension standard deviation of the states over all real tokens of all
   functions, averaged over the C dimensions; printed for the embeddings (layer 0) and every block; the
   last one is "the spread" (random init with post-LN: ~0.8; an encoder whose every token maps to one
   vector: ~0).
Cost: one forward over ~10 k tokens per model (debug_cpu: ~1-2 s on one core). Not covered: what the
heads read (the plm head reads XLNet's query stream, not these content states), pooled-embedding
similarity, other corpora.
"""

from __future__ import annotations

import argparse
import ast
import json

import numpy as np


def held_out_functions(n: int, holdout: float = 0.1, per_file: int = 2, min_lines: int = 3) -> list[str]:
    """The first ``n`` functions (source text) of the held-out stdlib files (module docstring, 1)."""
    from codept.data.jobs import SkipFile
    from codept.data.sources import read_source, stdlib_files
    from codept.probe.split import held_out

    out: list[str] = []
    for p in stdlib_files():
        try:
            text = read_source(p)
            tree = ast.parse(text)
        except (SkipFile, SyntaxError, ValueError, OSError):  # empty, binary, too large, not Python 3
            continue
        if not held_out(text, holdout):
            continue
        lines = text.splitlines(keepends=True)
        found = sorted((node.lineno, node.end_lineno) for node in ast.walk(tree)
                       if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                       and node.end_lineno - node.lineno + 1 >= min_lines)
        for start, end in found[:per_file]:
            out.append("".join(lines[start - 1:end]))
            if len(out) == n:
                return out
    if len(out) < n:
        raise ValueError(f"--functions {n}: only {len(out)} held-out functions of >= {min_lines} lines at holdout={holdout}")
    return out


def layer_spreads(encoder, texts: list[str], max_len: int) -> list[float]:
    """[spread of layer 0 (embeddings), 1, ..., L] over every real token of ``texts``."""
    import torch

    from codept.probe.encoders import layer_states

    cfg = encoder.config
    n = min(max_len, cfg.max_positions)
    ids = [e.ids[:n] for e in encoder.tokenizer.encode_batch(texts, add_special_tokens=False)]
    t = max(len(x) for x in ids)
    x = torch.full((len(ids), t), cfg.pad_id, dtype=torch.long)
    mask = torch.zeros((len(ids), t), dtype=torch.bool)
    for i, row in enumerate(ids):
        x[i, :len(row)] = torch.tensor(row)
        mask[i, :len(row)] = True
    with torch.no_grad():
        states = layer_states(encoder.model.eval(), x, mask)
    return [float(h[mask].double().std(0).mean()) for h in states]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="+", help="codept run/checkpoint folders, transformers folders, random:PRESET")
    ap.add_argument("--functions", type=int, default=48)
    ap.add_argument("--max-len", type=int, default=256)
    ap.add_argument("--holdout", type=float, default=0.1)
    ap.add_argument("--random", action="store_true", help="also a random-init encoder of the first model's shape")
    ap.add_argument("--json", action="store_true", help="one JSON line per model instead of the table")
    args = ap.parse_args(argv)

    import torch

    from codept.probe.encoders import load_encoder

    torch.set_num_threads(1)
    texts = held_out_functions(args.functions, args.holdout)
    encoders = [(m, load_encoder(m)) for m in args.models]
    if args.random:
        encoders.append(("random", load_encoder("random", like=encoders[0][1], seed=0)))
    for name, enc in encoders:
        s = layer_spreads(enc, texts, args.max_len)
        if args.json:
            print(json.dumps({"model": name, "spread": round(s[-1], 4), "layers": [round(v, 4) for v in s],
                              "functions": len(texts)}))
        else:
            print(f"{name}: spread {s[-1]:.4f}  (layers 0..{len(s) - 1}: {' '.join(f'{v:.3f}' for v in s)}; "
                  f"{len(texts)} held-out functions)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
