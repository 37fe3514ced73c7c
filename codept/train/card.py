"""The model card (README.md) that ``codept export`` writes next to the exported weights.

1. What was exported: the folder's architecture and how to load it, the checkpoint and its step,
   the model's shape and parameters.
2. How it was trained, from the checkpoint's recorded settings (codept.train.checkpoint ``config``:
   the run's flat settings, or at least its RunConfig): training data (``data.sources`` /
   ``data.corpora`` / ``data.text``, the default being this interpreter's stdlib), mixture
   (``data.mixture``) and the objectives that trained the exported head, steps, rows, learning rate.
   A setting the checkpoint did not record is written as "not recorded", never guessed.
3. Results, from the run folder's ``summary.json`` (written by the recipe at the end of the run):
   tokens trained, loss first/last, the held-out validation table (``val``: loss / acc / n per head,
   and per objective where the summary has them) and the code-search probe table (``probe_mrr``). A
   summary of another step than the exported checkpoint's (an intermediate checkpoint) is named
   as such, and its tables are left out.
Cost: reading two small JSON files. Not covered: evaluation the run did not do (the card reports,
it does not measure).
"""

from __future__ import annotations

import json
from pathlib import Path

PREFIX_LM = ("t5_span", "ident_mask", "exec_trace")  # objectives that train the causal head as a prefix-LM
DEFAULT_DATA = "the running interpreter's standard library (recipes/pretrain_code.py's default)"

LOADERS = {
    "lm": ("BertLMHeadModel: a decoder (causal self-attention, KV cache) with its causal LM head",
           "AutoModelForCausalLM", "model.generate(**tok(prompt, return_tensors='pt'), max_new_tokens=32, do_sample=False)"),
    "mlm": ("BertForMaskedLM: a bidirectional encoder with its MLM head", "AutoModelForMaskedLM",
            "model(**tok(text, return_tensors='pt')).logits"),
    "none": ("BertModel: the bidirectional encoder (codept trains no pooler: transformers initialises it "
             "at random)", "AutoModel", "model(**tok(text, return_tensors='pt')).last_hidden_state"),
}


def _objective(key: str) -> str:
    return key.split(":")[0].strip().partition("@")[0]


def _table(header: list[str], rows: list[list]) -> list[str]:
    fmt = lambda v: "" if v is None else f"{v:.4g}" if isinstance(v, float) else str(v)  # noqa: E731
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + \
           ["| " + " | ".join(fmt(v) for v in r) + " |" for r in rows]


def _val_rows(val: dict, prefix: str = "") -> list[list]:
    """Rows (name, loss, acc, n) of a summary's ``val`` section, nested sections flattened."""
    rows = []
    for k, v in val.items():
        if isinstance(v, dict) and "loss" in v:
            rows.append([prefix + k, v.get("loss"), v.get("acc"), v.get("n")])
        elif isinstance(v, dict):  # per objective ("by_objective": {key: {head: ...}}): rows "key/head"
            rows.extend(_val_rows(v, prefix if k == "by_objective" else f"{prefix}{k}/"))
    return rows


def _summary(run_dir: Path) -> dict:
    try:
        return json.loads((run_dir / "summary.json").read_text())
    except (OSError, ValueError):
        return {}


def model_card(t: dict, kind: str, out: Path, usage: list[str] | None = None) -> str:
    """README.md text for the export of ``t`` (codept.train.export.trained) with head ``kind``;
    ``usage``: markdown lines of another way to load it (the sentence-transformers export's), put
    before the transformers snippet."""
    from codept.objectives import HEADS_OF

    model, cfg, config = t["model"], t["model"].config, t["config"]
    run_dir = Path(t["tag_dir"]).parent
    summary = _summary(run_dir)
    step = t.get("step")
    arch, auto, call = LOADERS[kind]
    rec = lambda key: config.get(key, "not recorded")  # noqa: E731
    mixture = config.get("data.mixture") or summary.get("mixture")
    lines = [f"# {Path(out).name}: a codept model", "",
             f"Exported by `codept export` from `{t['tag_dir']}` (step {step if step is not None else 'not recorded'}).",
             "", f"**{arch}**; {model.num_parameters():,} parameters: hidden {cfg.hidden}, {cfg.layers} layers, "
             f"{cfg.heads} heads, intermediate {cfg.intermediate}, vocabulary {cfg.vocab_size}, "
             f"{cfg.max_positions} positions (the tokenizer's `model_max_length`).", "",
             *(usage or []), "```python", f"from transformers import AutoTokenizer, {auto}",
             f"tok = AutoTokenizer.from_pretrained(DIR)\nmodel = {auto}.from_pretrained(DIR).eval()", call, "```", "",
             "The tokenizer keeps text as text: a literal `<mask>`, `<pad>` or `<sentinel_3>` in the input is "
             "encoded as characters, never as a special id (`split_special_tokens`), as in codept's own encoding; "
             "take special ids from the tokenizer (`tok.mask_token_id`). Packed input (several documents in one "
             "row) needs codept.loader.HFCollator's 4-D per-document attention mask.", "", "## Training", ""]
    data = [x for x in (config.get("data.sources"), config.get("data.corpora"), config.get("data.text")) if x]
    train = [["training data", ", ".join(map(str, data)) if data else
              (DEFAULT_DATA if "data.sources" in config else "not recorded")],
             ["mixture", mixture or "not recorded in the checkpoint"],
             ["steps", config.get("steps", summary.get("steps", "not recorded"))],
             ["rows per step x tokens", f"{rec('global_batch_rows')} x {rec('seq_len')}"],
             ["learning rate, schedule", f"{rec('lr')}, {rec('schedule')}"],
             ["init from", config.get("init_from") or summary.get("init_from") or "random init"],
             ["preset", summary.get("preset", "not recorded")]]
    if mixture and kind != "none":
        objs = sorted({_objective(e) for e in mixture.split(",") if e.strip()})
        feeding = [o for o in objs if kind in HEADS_OF.get(o, ())]
        train.append([f"objectives training the `{kind}` head", ", ".join(feeding) or "none"])
    lines += _table(["", ""], train)
    if kind == "lm" and mixture and any(_objective(e) in PREFIX_LM for e in mixture.split(",")):
        lines += ["", f"Note: {', '.join(PREFIX_LM)} train the causal head as a prefix-LM (bidirectional over "
                  "the input, causal over the targets). This decoder is causal over the prompt too, so "
                  "`generate()` gives codept's causal greedy decoding, not that prefix-LM conditioning."]
    lines += ["", "## Results", ""]
    if not summary:
        lines.append(f"No summary.json in `{run_dir}` (the run did not finish, or the checkpoint was moved).")
    elif step is not None and summary.get("steps") not in (None, step):
        lines.append(f"`{run_dir}/summary.json` reports step {summary.get('steps')}; this export is step {step}: "
                     "its tables are not this model's and are left out.")
    else:
        lines += _table(["", ""], [["tokens trained", summary.get("tokens_trained")],
                                   ["loss, first / last tenth", f"{summary.get('loss_first')} / {summary.get('loss_last')}"]])
        val = summary.get("val") or {}
        rows = _val_rows(val)
        lines += ["", f"Held-out validation (step {val.get('step', '?')}, {val.get('docs', '?')} documents):", ""]
        lines += _table(["head", "loss", "acc", "n"], rows) if rows else [f"skipped: {val.get('skipped', 'no rows')}"]
        probes = summary.get("probe_mrr") or {}
        if probes:
            cols = sorted({c for r in probes.values() for c in r})
            lines += ["", "Code-search probes (MRR; `model` = this model, others = baselines):", ""]
            lines += _table(["probe"] + cols, [[name] + [r.get(c) for c in cols] for name, r in probes.items()])
    return "\n".join(lines) + "\n"
