"""syntax_span unit caps and kind weights (issue 16), measured on real views."""

from __future__ import annotations

import numpy as np
import pytest

from codept.data.example import IGNORE
from codept.data.sources import read_source, stdlib_files
from codept.objectives import build
from codept.objectives.render import Vocab
from codept.structure.kinds import SPAN_KIND_ID
from codept.structure.view import build_view


@pytest.fixture(scope="module")
def views(small_tok):
    return [build_view(str(p), "python", read_source(p), small_tok) for p in stdlib_files()[100:130]
            if p.stat().st_size > 2000]


def _units(ex) -> np.ndarray:
    return ex.pointers["span"][:, 1] - ex.pointers["span"][:, 0] + 1


def _stats(obj, views, seeds=3):
    lengths, masked_long, masked = [], 0, 0
    for s in range(seeds):
        for i, v in enumerate(views):
            n = _units(obj(v, np.random.default_rng([s, i])))
            lengths += n.tolist()
            masked += int(n.sum())
            masked_long += int(n[n > 100].sum())
    return np.mean(lengths), max(lengths), masked_long / masked


def test_cap_bounds_units_and_keeps_the_rate(small_tok, views):
    vocab = Vocab.from_tokenizer(small_tok)
    base, capped = build("syntax_span", vocab), build("syntax_span", vocab, max_unit_tokens=16)
    m0, x0, long0 = _stats(base, views)
    m1, x1, long1 = _stats(capped, views)
    print(f"uncapped: mean {m0:.1f} max {x0} share of masked tokens in units > 100: {long0:.3f}; "
          f"cap 16: mean {m1:.1f} max {x1} share {long1:.3f}")
    assert x1 <= 16 and long1 == 0 and x0 > 16
    rates = [(build("syntax_span", vocab, max_unit_tokens=16)(v, np.random.default_rng(i)).labels["mlm"] != IGNORE).mean()
             for i, v in enumerate(views)]
    assert 0.12 < np.mean(rates) < 0.16  # the 15% budget is still spent


def test_weights_shift_the_kind_mix(small_tok, views):
    vocab = Vocab.from_tokenizer(small_tok)

    def share(obj, kind):
        hits = tot = 0
        for i, v in enumerate(views):
            ex = obj(v, np.random.default_rng(i))
            sp = v.spans
            ends = {(int(s), int(e) - 1): int(k) for s, e, k in sp.tolist()}
            for s, e in ex.pointers["span"].tolist():
                tot += 1
                hits += ends.get((s, e)) == SPAN_KIND_ID[kind]
        return hits / tot

    plain = share(build("syntax_span", vocab), "identifier")
    weighted = share(build("syntax_span", vocab, weights=("identifier=0.1",)), "identifier")
    assert weighted < plain / 2, (plain, weighted)
    with pytest.raises(ValueError, match="weights entry 'calls=2'"):
        build("syntax_span", vocab, weights=("calls=2",))
    with pytest.raises(ValueError, match="max_unit_tokens=-1"):
        build("syntax_span", vocab, max_unit_tokens=-1)
