"""codept's packed stream in Hugging Face's Trainer: ``python examples/hf_trainer.py [--steps 20]``.

1. prepare views of some standard-library files (cached by content; ``--sources DIR`` for your own
   code) with codept's default tokenizer;
2. ``codept.loader.hf_dataset``: the recipes' packed stream as a ``datasets.IterableDataset``
   (``--buffers`` packed buffers in shards that DataLoader workers share, every row once). It is
   built for rank 0 of 1 on every process: under torchrun / accelerate, the Trainer (accelerate)
   splits it across processes itself;
3. ``codept.loader.HFCollator``: ``input_ids``, ``position_ids`` restarting per document, the 4-D
   per-document ``attention_mask`` (a 2-D one would let packed documents see each other) and
   ``labels`` (``labels.mlm``);
4. a ``BertForMaskedLM`` of codept's ``tiny`` shape (codept.model.hf.bert_config) trained by
   ``Trainer``; ``remove_unused_columns=False`` keeps codept's columns for the collator.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from codept.data.sources import stdlib_files  # noqa: E402
from codept.loader import HFCollator, hf_dataset  # noqa: E402
from codept.model import transformer as T  # noqa: E402
from codept.model.hf import bert_config  # noqa: E402
from codept.objectives.render import Vocab  # noqa: E402
from codept.prepare import load_views, prepare  # noqa: E402
from codept.tokenizer import default_tokenizer_dir, load_tokenizer  # noqa: E402


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sources", nargs="*", help="files / folders to prepare (default: --files stdlib files)")
    ap.add_argument("--files", type=int, default=60)
    ap.add_argument("--mixture", default="mlm:1", help="objectives whose labels feed one HF head (mlm, wwm, span, ...)")
    ap.add_argument("--label", default="mlm", help="the labels.<label> column given to the model as `labels`")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=8, help="rows per device and step")
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--buffers", type=int, default=64, help="packed buffers the dataset holds")
    ap.add_argument("--workers", type=int, default=2, help="DataLoader worker processes")
    ap.add_argument("--out", default="runs/hf_trainer")
    args = ap.parse_args(argv)

    from transformers import BertForMaskedLM, Trainer, TrainingArguments

    tok_dir = default_tokenizer_dir()
    sources = args.sources or [str(p) for p in stdlib_files()[: args.files]]
    views = load_views(prepare(sources, tokenizer_dir=tok_dir, progress=False)["out"])
    vocab = Vocab.from_tokenizer(load_tokenizer(tok_dir))
    data = hf_dataset(views, args.mixture, vocab, args.seq_len, buffers=args.buffers, rank=0, world=1)

    config = bert_config(T.tiny(vocab_size=vocab.size, max_positions=args.seq_len), "BertForMaskedLM")
    model = BertForMaskedLM(config)
    targs = TrainingArguments(output_dir=args.out, max_steps=args.steps, per_device_train_batch_size=args.batch,
                              learning_rate=1e-3, warmup_steps=0, logging_steps=1, save_strategy="no",
                              report_to=[], remove_unused_columns=False, dataloader_num_workers=args.workers,
                              use_cpu=True, seed=0)
    trainer = Trainer(model=model, args=targs, train_dataset=data, data_collator=HFCollator(args.label))
    result = trainer.train()
    print(f"trained {result.global_step} steps, loss {result.training_loss:.4f}", flush=True)
    return {"steps": result.global_step, "loss": result.training_loss,
            "losses": [h["loss"] for h in trainer.state.log_history if "loss" in h]}


if __name__ == "__main__":
    main()
