"""The ``codept`` command line.

  codept prepare [SRC...] [--out DIR]       views of a corpus (default: this Python's stdlib), summary
  codept prepare-text SRC... [--out DIR]    text/markdown/rst/man documents and parallel pairs -> views
  codept tokenizer train SRC... --out DIR   byte-level BPE with codept's special tokens
  codept export CKPT --out DIR              a training checkpoint -> a transformers model folder (+ README.md card);
                                            --format sentence-transformers: a SentenceTransformer folder
  codept probe build SRC... --out DIR [--exclude PREPARED...]
                                            code-search probe pairs, decontaminated against training data
  codept probe run --model M --probe DIR    MRR / R@k of a model (checkpoint, transformers folder, bm25, random)
  codept probe structure --model M          structural probes (node kind, def/use, binding, dataflow) per layer
  codept probe finetune --model M --probe P fine-tune on training projects' pairs, MRR / nDCG@10 on held-out ones
  codept probe bench --model M --data PATH  CodeSearchNet jsonl / BEIR-CoIR folder: nDCG@10, MRR, recall@k
  codept mine-negatives VIEWS --miner bm25|MODEL
                                            code_doc's hard negatives, false negatives filtered, beside the views
  codept grammar check [LANG...]            run the caret-annotated fixtures of grammars/<lang>/
  codept recipe NAME                        print the path of recipes/NAME.py (installed or checkout), for
                                            deepspeed --num_gpus 2 "$(codept recipe pretrain_code)" key=value ...
  codept view FILE [--tokenizer DIR]        print the view of one file (debugging a grammar)
  codept corpora list                       the demo-corpus registry (pip/npm/apt, pinned)
  codept corpora fetch DEST [--only NAME ...] [--role ROLE ...]
                                            download real corpora outside any git repo; DEST/corpora.json

Bad input ends in one line ``codept <command>: error: <what and the rule>`` and exit status 2, never
a traceback: paths, tokenizer folders, output folders and numbers are checked by argparse types
(codept.argtypes: ``existing_file``, ``tokenizer_path``, ``out_folder``, ``int_at_least``) before any
work; what only a command can find out (a file it cannot read, an unknown language, a folder that
is no checkpoint, nothing to prepare) is raised as :class:`CommandError` or one of the input errors
in :data:`INPUT_ERRORS` and printed by :func:`main`. Not covered: errors of the libraries below
(tokenizers, datasets, torch) on inputs that pass these checks still end in their traceback.
  codept exec run FILE.py [--timeout S]     run one file in the bubblewrap sandbox, print a JSON result
  codept trace SRC... --out DIR             sandboxed execution traces (stdlib doctests, humaneval, .py)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from codept.argtypes import (existing_file, existing_path, int_at_least, jaccard, out_folder, positive_float,
                             replaceable_folder, tokenizer_path)
from codept.data.jobs import NothingToPrepare, SkipFile
from codept.parallel import WorkersFailing


class CommandError(Exception):
    """A bad input found by a command: printed as ``codept <command>: error: <message>``, exit 2."""


INPUT_ERRORS = (CommandError, SkipFile, NothingToPrepare)  # printed without a traceback, exit 2


# ---- commands -------------------------------------------------------------------------------------


def _cmd_tokenizer_train(args) -> int:
    from codept.tokenizer import iter_training_files, special_tokens, train_tokenizer

    floor = len(special_tokens()) + 256
    if args.vocab_size <= floor:
        raise CommandError(f"--vocab-size {args.vocab_size} must exceed {floor} ({floor - 256} special tokens "
                           "+ 256 bytes)")
    files = iter_training_files(args.sources)
    if not files:
        raise CommandError(f"no training files (code or .txt/.md/.rst, at most 1 MiB each) under "
                           f"{[str(s) for s in args.sources]}")
    summary = train_tokenizer(files, args.out, vocab_size=args.vocab_size, min_frequency=args.min_frequency)
    print(f"tokenizer: {summary['vocab_size']} tokens ({summary['n_special']} special) from "
          f"{summary['files']} files, {len(summary['skipped'])} skipped -> {args.out}/tokenizer.json")
    return 0


def _cmd_grammar_check(args) -> int:
    from codept.structure.fixtures import check_language
    from codept.languages import available_languages

    if not available_languages():  # checking nothing is no pass
        from codept.languages import grammars_dir

        raise CommandError(f"no grammars/<lang>/language.toml under {grammars_dir()}: nothing to check")
    unknown = sorted(set(args.langs) - set(available_languages()))
    if unknown:
        raise CommandError(f"unknown language(s) {unknown}; grammars/ has {available_languages()}")
    bad = 0
    for lang in args.langs or available_languages():
        results = check_language(lang)
        n = sum(r.n_checks for r in results)
        fails = [f for r in results for f in r.failures]
        print(f"{lang}: {len(results)} fixtures, {n} assertions, {len(fails)} failures")
        for f in fails:
            print("  " + f)
        bad += len(fails) + (len(results) == 0)
    return 1 if bad else 0


def _cmd_view(args) -> int:
    from codept.data.sources import read_source
    from codept.languages import available_languages, language_for_path
    from codept.structure.kinds import DEFINITION_KINDS, ROLES, SPAN_KINDS
    from codept.structure.view import build_view
    from codept.tokenizer import default_tokenizer_dir, load_tokenizer

    lang = args.lang or language_for_path(args.file)
    if lang is None:
        raise CommandError(f"{args.file}: no language for this file name; pass --lang (one of {available_languages()})")
    if lang not in available_languages():
        raise CommandError(f"--lang {lang!r}: no such grammar; grammars/ has {available_languages()}")
    tok = load_tokenizer(args.tokenizer or default_tokenizer_dir())
    try:
        source = read_source(args.file)
    except SkipFile as e:  # binary, not UTF-8, unreadable: the reason prepare would record
        raise CommandError(f"{args.file}: {e}") from None
    v = build_view(str(args.file), lang, source, tok)
    kinds = list(SPAN_KINDS)
    print(f"{v.path} [{v.lang}] {len(v)} tokens, has_error={v.has_error}")
    for s, e, k in v.spans.tolist():
        print(f"  span {kinds[k]:<10} [{s}:{e}) {v.token_text(s, e)[:60]!r}")
    for s, e, n, r, b in v.idents.tolist():
        print(f"  ident {ROLES[r]:<4} b={b:<4} {v.names[n]!r}")
    for k, s, e, ns, ne, ds, de in v.functions.tolist():
        doc = v.token_text(ds, de)[:50] if ds >= 0 else None
        print(f"  {DEFINITION_KINDS[k]} {v.token_text(ns, ne).strip()!r} doc={doc!r}")
    return 0


def _cmd_recipe(args) -> int:
    from codept.resources import recipe

    try:
        print(recipe(args.name))
    except FileNotFoundError as e:
        raise CommandError(str(e)) from None
    return 0


def _cmd_prepare(args) -> int:
    from codept.prepare import main as prepare_main

    return prepare_main(args)


def _cmd_export(args) -> int:
    from codept.train.export import main as export_main

    return export_main(args)


def _cmd_prepare_text(args) -> int:
    from codept.text.prepare import main as text_main

    return text_main(args)


def _cmd_probe_build(args) -> int:
    from codept.probe.build import main as build_main

    return build_main(args)


def _cmd_probe_run(args) -> int:
    from codept.probe.run import main as run_main

    return run_main(args)


def _cmd_probe_structure(args) -> int:
    from codept.probe.structure import main as structure_main

    return structure_main(args)


def _cmd_probe_bench(args) -> int:
    from codept.probe.formats import main as bench_main

    return bench_main(args)


def _cmd_mine_negatives(args) -> int:
    from codept.probe.mine import main as mine_main

    try:
        return mine_main(args)
    except (ValueError, FileNotFoundError) as e:  # a bad folder, miner or setting: the message names it
        raise CommandError(str(e)) from None


def _cmd_probe_finetune(args) -> int:
    from codept.probe.finetune import main as finetune_main

    return finetune_main(args)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="codept", description="Structure-aware pretraining data for code models.")
    sub = p.add_subparsers(dest="cmd", required=True)

    pp = sub.add_parser("prepare", help="build views of a corpus and print a summary")
    pp.add_argument("sources", nargs="*", help="files, directories, globs, .jsonl/.parquet files with content+lang "
                    "columns, or saved HF datasets (default: this interpreter's stdlib)")
    pp.add_argument("--out", type=replaceable_folder, help="output folder (default: a cache folder keyed by content hash)")
    pp.add_argument("--tokenizer", type=tokenizer_path,
                    help="tokenizer folder (default: BPE trained on the stdlib, cached)")
    pp.add_argument("--workers", type=int_at_least(0), default=0, help="worker processes (default 0: all cores)")
    pp.add_argument("--max-bytes", type=int_at_least(1), default=1_000_000,
                    help="skip files larger than this many bytes (default 1,000,000)")
    pp.add_argument("--timeout", type=positive_float, default=20.0,
                    help="seconds per file before it is skipped (default 20)")
    pp.add_argument("--max-depth", type=int_at_least(1), default=1500,
                    help="skip files whose syntax tree is deeper (default 1500)")
    pp.add_argument("--force", action="store_true", help="rebuild even when the cache is complete")
    pp.add_argument("--no-redact", action="store_true", help="keep secrets/PII (default: redact them)")
    pp.add_argument("--no-dedup", action="store_true", help="keep exact duplicates (default: drop them)")
    pp.add_argument("--structure-only", action="store_true",
                    help="skip files in a language without a grammar as unknown_language (default: view them "
                         "as tokens only, grammars/tokens_only.toml; structure objectives skip those views)")
    pp.add_argument("--fields", action="store_true",
                    help="object fields (self.x, this.x) as identifiers with comesFromField dataflow edges")
    pp.add_argument("--near-dedup", type=jaccard, default=0.0, metavar="JACCARD",
                    help="drop near-duplicates above this MinHash Jaccard similarity, e.g. 0.85 (default: off)")
    pp.add_argument("--worker-memory", type=int_at_least(-1), default=0, metavar="BYTES",
                    help="memory limit per worker process; an input over it is skipped as too_much_memory "
                         "(default 0: 80%% of RAM split over the workers; -1: no limit)")
    pp.add_argument("--executor", choices=("local", "ray"), default="local",
                    help="where the per-file work runs: local worker processes, or tasks on a Ray cluster "
                         "(same views, manifest and cache key; codept.data.engines)")
    pp.add_argument("--ray-address", default="", metavar="ADDR",
                    help="--executor ray: a running cluster (ray://host:10001, auto; default: RAY_ADDRESS, "
                         "else a local Ray instance for this job)")
    pp.add_argument("--num-shards", type=int_at_least(1), default=1,
                    help="machines sharing the corpus; a file goes to the shard of its content hash, so "
                         "duplicates meet on one machine (default 1)")
    pp.add_argument("--shard-index", type=int_at_least(0), default=0,
                    help="which of --num-shards this machine prepares (0-based, default 0)")
    pp.set_defaults(fn=_cmd_prepare)

    pe = sub.add_parser("export", help="a training checkpoint -> a folder transformers.AutoModel loads")
    pe.add_argument("ckpt", type=Path, help="run folder (uses its `latest`) or a checkpoint folder")
    pe.add_argument("--out", required=True, type=out_folder, help="the transformers folder to write")
    pe.add_argument("--tokenizer", type=tokenizer_path, help="tokenizer folder (default: the one the run used)")
    pe.add_argument("--head", choices=("auto", "mlm", "lm", "none"), default="auto",
                    help="the head the folder carries: lm = a decoder (AutoModelForCausalLM), mlm = an encoder "
                         "with its MLM head, none = the encoder alone; auto = the run's one trained LM head")
    pe.add_argument("--format", choices=("transformers", "sentence-transformers"), default="transformers",
                    help="transformers (default): an AutoModel folder; sentence-transformers: also a folder "
                         "SentenceTransformer(DIR) loads, with the probe's mean pooling, L2 normalisation and "
                         "code_doc's query / code prefixes as its prompts (encode_query / encode_document)")
    pe.set_defaults(fn=_cmd_export)

    px = sub.add_parser("prepare-text", help="natural-language corpora -> text/pair views on disk")
    px.add_argument("sources", nargs="+", help="text/markdown/rst/man files or directories, .jsonl/.tsv/.mo/.po pairs")
    px.add_argument("--out", type=replaceable_folder, help="output folder (default: a cache folder keyed by content hash)")
    px.add_argument("--tokenizer", type=tokenizer_path,
                    help="tokenizer folder (default: BPE trained on the stdlib, cached)")
    px.add_argument("--lang", help="language of the text documents (default: guessed; 'zh' for Chinese)")
    px.add_argument("--pair-langs", nargs=2, metavar=("SRC", "TGT"), help="languages of pair files that do not say")
    px.add_argument("--user-dict", type=existing_file, help="jieba user dictionary for Chinese word boundaries")
    px.add_argument("--min-src-words", type=int_at_least(0), default=3,
                    help="drop pairs whose source side has fewer words (default 3)")
    px.add_argument("--max-bytes", type=int_at_least(1), default=8_000_000,
                    help="the largest document or catalog file, and the longest jsonl/TSV line, in bytes; "
                         "larger ones are counted skips too_large (default 8,000,000; a jsonl/TSV file "
                         "itself has no size limit: it is read in chunks of whole lines)")
    px.add_argument("--rst-line-limit", type=int_at_least(1), default=10_000, metavar="CHARS",
                    help="reST lines longer than this are kept as plain text, not parsed (docutils' parse "
                         "is quadratic in a line's inline markup); counted as long_line_unparsed "
                         "(default 10,000)")
    px.add_argument("--timeout", type=positive_float, default=120.0,
                    help="seconds per file (per chunk of a jsonl/TSV file) before it is skipped (default 120)")
    px.add_argument("--no-redact", action="store_true", help="keep secrets/PII (default: redact them)")
    px.add_argument("--workers", type=int_at_least(0), default=0, help="worker processes (default 0: all cores)")
    px.add_argument("--force", action="store_true", help="rebuild even when the cache is complete")
    px.set_defaults(fn=_cmd_prepare_text)

    pt = sub.add_parser("tokenizer", help="tokenizer commands").add_subparsers(dest="sub", required=True)
    tt = pt.add_parser("train", help="train a byte-level BPE on code/text")
    tt.add_argument("sources", nargs="+", type=existing_path,
                    help="files or folders (code and .txt/.md/.rst files under them, at most 1 MiB each)")
    tt.add_argument("--out", required=True, type=out_folder, help="folder for tokenizer.json and its config")
    tt.add_argument("--vocab-size", type=int_at_least(1), default=16384,
                    help="tokens in the vocabulary, specials and 256 bytes included (default 16384)")
    tt.add_argument("--min-frequency", type=int_at_least(1), default=2,
                    help="least count of a pair to be merged (default 2)")
    tt.set_defaults(fn=_cmd_tokenizer_train)

    pg = sub.add_parser("grammar", help="grammar commands").add_subparsers(dest="sub", required=True)
    gc = pg.add_parser("check", help="run the annotated fixtures of grammars/<lang>/fixtures")
    gc.add_argument("langs", nargs="*", help="languages to check (default: every grammars/<lang>/)")
    gc.set_defaults(fn=_cmd_grammar_check)

    prc = sub.add_parser("recipe", help="print the path of a recipe script (to launch it with deepspeed)")
    prc.add_argument("name", help="pretrain_code, pretrain_text, train_exec, ...")
    prc.set_defaults(fn=_cmd_recipe)

    pv = sub.add_parser("view", help="print the view of one file")
    pv.add_argument("file", type=existing_file, help="the source file to view")
    pv.add_argument("--lang", help="grammar to parse it with (default: from the file extension)")
    pv.add_argument("--tokenizer", type=tokenizer_path,
                    help="tokenizer folder (default: BPE trained on the stdlib, cached)")
    pv.set_defaults(fn=_cmd_view)

    from codept.probe import build as probe_build
    from codept.probe import run as probe_run

    pr = sub.add_parser("probe", help="code-search probes").add_subparsers(dest="sub", required=True)
    pb = pr.add_parser("build", help="(docstring, code) pairs from a corpus, decontaminated")
    probe_build.add_arguments(pb)
    pb.set_defaults(fn=_cmd_probe_build)
    prun = pr.add_parser("run", help="score a model on a probe: MRR, R@1/5/10, JSON + markdown + PNG")
    probe_run.add_arguments(prun)
    prun.set_defaults(fn=_cmd_probe_run)
    from codept.probe import finetune as probe_finetune
    from codept.probe import structure as probe_structure

    pst = pr.add_parser("structure", help="structural probes of every layer's frozen states, with control tasks")
    probe_structure.add_arguments(pst)
    pst.set_defaults(fn=_cmd_probe_structure)
    pft = pr.add_parser("finetune", help="fine-tune an encoder on training projects' pairs, score held-out probes")
    probe_finetune.add_arguments(pft)
    pft.set_defaults(fn=_cmd_probe_finetune)
    from codept.probe import formats as probe_formats

    pbe = pr.add_parser("bench", help="score a model on a CodeSearchNet jsonl or BEIR/CoIR folder: nDCG@10, MRR, recall@k")
    probe_formats.add_arguments(pbe)
    pbe.set_defaults(fn=_cmd_probe_bench)

    from codept.probe import mine as probe_mine

    pmn = sub.add_parser("mine-negatives", help="hard negatives for code_doc (BM25 or a teacher), false negatives "
                         "filtered, stored beside the views")
    probe_mine.add_arguments(pmn)
    pmn.set_defaults(fn=_cmd_mine_negatives)

    from codept.data.fetch import add_cli as add_corpora_cli

    add_corpora_cli(sub)
    from codept.exec.commands import add_cli as add_exec_cli

    add_exec_cli(sub)
    return p


def _command_name(args) -> str:
    return " ".join(["codept", args.cmd] + ([args.sub] if getattr(args, "sub", None) else []))


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.fn(args)
    except INPUT_ERRORS as e:
        print(f"{_command_name(args)}: error: {e}", file=sys.stderr)
        return 2
    except WorkersFailing as e:
        print(f"{_command_name(args)}: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
