"""codept's packed stream in a plain PyTorch loop: ``python examples/own_loop.py [--steps 20]``.

1. prepare views of some standard-library files (cached by content; ``--sources DIR`` for your own
   code) with codept's default tokenizer;
2. ``codept.loader.packed_dataset``: the recipes' stream (objectives x views, exact mixture,
   best-fit packing) for this rank, a torch IterableDataset sharded over DataLoader workers by
   buffer (every row once, whatever ``--workers`` is; under torchrun each rank reads its own
   documents: RANK / WORLD_SIZE);
3. codept's own model and heads (codept.model: the mask comes from segment_ids / prefix, the loss
   of every head is a sum and a count) trained with torch's AdamW, one micro-batch per step.
For an HF model instead, see examples/hf_trainer.py (codept.loader.HFCollator: the 4-D mask).
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

from codept.data.collate import collate  # noqa: E402
from codept.data.sources import stdlib_files  # noqa: E402
from codept.loader import packed_dataset  # noqa: E402
from codept.model import transformer as T  # noqa: E402
from codept.model.pretrainer import Pretrainer, build_head  # noqa: E402
from codept.objectives.render import Vocab  # noqa: E402
from codept.prepare import load_views, prepare  # noqa: E402
from codept.tokenizer import default_tokenizer_dir, load_tokenizer  # noqa: E402


def main(argv=None) -> float:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sources", nargs="*", help="files / folders to prepare (default: --files stdlib files)")
    ap.add_argument("--files", type=int, default=60)
    ap.add_argument("--mixture", default="mlm:1,syntax_span:1")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=8, help="rows per step")
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--workers", type=int, default=2, help="DataLoader worker processes")
    ap.add_argument("--lr", type=float, default=1e-3)
    args = ap.parse_args(argv)

    tok_dir = default_tokenizer_dir()
    sources = args.sources or [str(p) for p in stdlib_files()[: args.files]]
    views = load_views(prepare(sources, tokenizer_dir=tok_dir, progress=False)["out"])
    vocab = Vocab.from_tokenizer(load_tokenizer(tok_dir))

    data = packed_dataset(views, args.mixture, vocab, args.seq_len)
    loader = DataLoader(data, batch_size=args.batch, num_workers=args.workers, collate_fn=collate)

    torch.manual_seed(0)
    model = T.Transformer(T.tiny(vocab_size=vocab.size, max_positions=args.seq_len))
    net = Pretrainer(model, {h: build_head(h, model) for h in data.heads})  # the heads the mixture trains
    opt = torch.optim.AdamW(net.parameters(), lr=args.lr)
    loss = torch.zeros(())
    for step, batch in zip(range(1, args.steps + 1), loader):
        out = net(batch)  # {head: (loss_sum, n_valid)}
        loss = sum(s / n.clamp(min=1) for s, n in out.values())  # each head's token mean
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"step {step} loss {loss.item():.4f} " + " ".join(f"{h}={int(n)}" for h, (_, n) in out.items()),
              flush=True)
    return loss.item()


if __name__ == "__main__":
    main()
