"""``translate``: code translation pairs through XLM's TLM (codept.objectives.tlm) -- parallel code
supplied by the user, and doc <-> code pairs cut from code views.

The objective is ``tlm`` with the code languages in its language table (``text`` for docs, then
the six grammars): both sides of a pair in one attention segment, each masked, so a masked token
of the Java side can be read off the Python side (or a docstring word off the code).
Its inputs are PairViews (codept.text.view), built here:
  1. :func:`read_code_pairs`: a jsonl file, one object a line with ``lang_a``, ``code_a``,
     ``lang_b``, ``code_b`` (e.g. python / java). A line that is not such an object, or names a
     language outside the table, is an error naming the file, the line number and the rule.
  2. :func:`doc_code_pairs`: every documented definition of code views -> (doc summary, code),
     with the summary and the cut of code_doc (codept.objectives.code_doc), languages ``text`` and
     the view's language.
``pairs_table`` stores them as a pair-views Arrow table (codept.text.view.pairs_to_table) for
codept.views.view_source. Cost: tokenization of both sides at build time; the objective O(T).
Not covered: fetching parallel corpora (the user supplies the jsonl); a prepare-text reader for the
jsonl (build the table with these functions, or add a reader to codept/text/records.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from codept.objectives import tlm
from codept.objectives.spec import Objective

def _languages() -> str:
    """``text``, the first six grammars (their ids as before), then every other grammar of grammars/."""
    from codept.languages import available_languages

    first = ["text", "python", "java", "javascript", "go", "ruby", "php"]
    return ",".join(first + [x for x in available_languages() if x not in first])


LANGUAGES = _languages()
_KEYS = ("lang_a", "code_a", "lang_b", "code_b")


@dataclass(frozen=True)
class Config(tlm.Config):
    languages: str = LANGUAGES
    max_side: int = 126  # code sides are longer than sentences


def build(vocab, cfg: Config = Config()):
    return tlm.build(vocab, cfg)


def code_pair_view(path: str, lang_a: str, a: str, lang_b: str, b: str, tokenizer):
    """A PairView whose sides may be code: a code side is built as a ``text`` TextView (words and
    sentences by the English rules, which the TLM never reads) and then named by its language."""
    from codept.text.build import build_text_view
    from codept.text.view import PairView

    sides = []
    for lang, text in ((lang_a, a), (lang_b, b)):
        v = build_text_view(path, "text", text, tokenizer)
        v.lang = lang
        sides.append(v)
    return PairView(path=path, src=sides[0], tgt=sides[1])


def read_code_pairs(path: str | Path, tokenizer, languages: str = LANGUAGES) -> list:
    """PairViews of a jsonl of parallel code (module docstring, 1)."""
    table = languages.split(",")
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{n}: not JSON ({e.msg})") from None
            if not isinstance(rec, dict) or any(not isinstance(rec.get(k), str) for k in _KEYS):
                raise ValueError(f"{path}:{n}: expected an object with string fields {list(_KEYS)}")
            for k in ("lang_a", "lang_b"):
                if rec[k] not in table:
                    raise ValueError(f"{path}:{n}: {k}={rec[k]!r} is not in the language table {table}")
            out.append(code_pair_view(f"{path}#{n}", rec["lang_a"], rec["code_a"], rec["lang_b"], rec["code_b"],
                                      tokenizer))
    return out


def doc_code_pairs(views, tokenizer, max_doc_tokens: int = 32, max_code_tokens: int = 128) -> list:
    """PairViews (doc summary in ``text``, code in the view's language) of every documented
    definition of `views`, as code_doc cuts them (module docstring, 2)."""
    from codept.objectives import code_doc
    from codept.objectives.render import Vocab

    obj = code_doc.build(Vocab.from_tokenizer(tokenizer), code_doc.Config(
        max_doc_tokens=max_doc_tokens, max_code_tokens=max_code_tokens, max_tokens=0))  # one Example per pair
    out = []
    for v in views:
        for j, ex in enumerate(obj(v, np.random.default_rng(0)) or []):
            b = ex.part_bounds()
            doc = tokenizer.decode(ex.input_ids[: b[1]].tolist()).strip().rstrip('"').strip()
            code = tokenizer.decode(ex.input_ids[b[1]: b[2]].tolist())
            out.append(code_pair_view(f"{v.path}#{j}", "text", doc, v.lang, code, tokenizer))
    return out


def pairs_table(pairs: list):
    from codept.text.view import pairs_to_table

    return pairs_to_table(pairs)


# TLM over code <-> code and doc <-> code pairs
OBJECTIVE = Objective("translate", build, Config, heads=("mlm",), views=("pair",))
