"""Outputs pinned before the speed work on glm, nsp, sop, ident_mask, code_doc pairs=1 and the stream.

Each objective's Examples for given rngs, and the packed rows of a stream (which draws every rng),
are hashed field by field (dtypes and shapes included) and compared with the digests the code
produced before that work. Inputs are generated here (English-like text, Python files) and
tokenized with the byte-level tokenizer, so the ids and the digests do not depend on the machine or
the interpreter's version. A change that alters an output on purpose updates its digest in the same
commit and says why.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import numpy as np
import pytest

from codept.data.stream import Context, Mixture, PackedStream, Source, example_rng
from codept.views import open_views, view_source
from codept.objectives import build
from codept.objectives.render import Vocab
from codept.structure.view import build_view, views_to_table
from codept.text.build import build_text_view
from codept.text.view import views_to_table as text_table

sys.path.insert(0, str(Path(__file__).parent))
from test_code_doc import _digest, _golden_source  # noqa: E402

WORDS = ("the of a value buffer token parse tree reads returns when each node list which field "
         "input output first last line file name stream error state model data row is not and").split()


def _text(seed: int, sentences: int) -> str:
    """English-like paragraphs: sentences of 3-24 words, paragraphs of 1-6 sentences."""
    rng = np.random.default_rng(seed)
    out, para = [], []
    for _ in range(sentences):
        s = " ".join(WORDS[i] for i in rng.integers(0, len(WORDS), size=int(rng.integers(3, 25))))
        para.append(s.capitalize() + rng.choice([".", ".", ".", "?", "!"]))
        if rng.random() < 0.25:
            out.append(" ".join(para))
            para = []
    return "\n\n".join(out + [" ".join(para)]).strip()


def _python(seed: int, n_defs: int) -> str:
    """A Python file of functions and a class: parameters, locals, nested scopes, builtins, globals."""
    rng = np.random.default_rng(seed)
    names = [f"{w}_{j}" for j, w in enumerate(WORDS)]
    out = ["import os\nLIMIT = 10\n\n"]
    for i in range(n_defs):
        args = [names[int(k)] for k in rng.choice(len(names), size=int(rng.integers(0, 4)), replace=False)]
        body = [f"    total = {len(args)}\n"]
        for j in range(int(rng.integers(1, 8))):
            v = names[int(rng.integers(len(names)))]
            src = args[j % len(args)] if args else "LIMIT"
            body.append(f"    {v} = len(str({src})) + total\n    total += {v}\n")
        if i % 3 == 0:
            body.append("    def inner(k):\n        return k + total\n    total = inner(total)\n")
        doc = f'    """{_text(seed * 100 + i, 1)}"""\n' if i % 2 == 0 else ""
        out.append(f"def fn_{i}({', '.join(args)}):\n{doc}{''.join(body)}    return total\n\n")
    out.append("class Box:\n    def put(self, item):\n        self.item = item\n        return os.path.join(item)\n")
    return "".join(out)


@pytest.fixture(scope="module")
def text_views(byte_tok):
    return [build_text_view(f"gen{i}.txt", "text", _text(i, 8 + 9 * i), byte_tok) for i in range(8)]


@pytest.fixture(scope="module")
def code_views(byte_tok):
    views = [build_view("golden.py", "python", _golden_source(), byte_tok)]
    return views + [build_view(f"gen{i}.py", "python", _python(i, 4 + 3 * i), byte_tok) for i in range(5)]


def _outputs(obj, views, seeds=range(4)) -> list:
    src = Source("pins", len(views), lambda i, rng, ctx: None, get=views.__getitem__, context=True)
    out = []
    for i, v in enumerate(views):
        for s in seeds:
            got = obj(v, np.random.default_rng([i, s]), Context(src, i, s, 0.0))
            out += got if isinstance(got, list) else [got]
    return out


PINS = {  # name -> (objective, settings, corpus, digest before the speed work)
    "glm": ("glm", {"all_windows": False}, "text", "e76681ddcec00ee1"),
    "glm_512": ("glm", {"max_tokens": 512, "rate": 0.3, "all_windows": False}, "text", "33900a8c8a4bfc81"),
    "glm_code": ("glm", {"max_tokens": 128, "all_windows": False}, "code", "c4d10738565a47b8"),
    "nsp": ("nsp", {"max_tokens": 64, "walk": False}, "text", "05f45873588fe5db"),
    "nsp_same": ("nsp", {"negatives": "same_document", "max_tokens": 128, "walk": False}, "text", "f1df996647ef9e09"),
    "nsp_no_mlm": ("nsp", {"mlm_rate": 0.0, "short_seq_prob": 0.5, "max_tokens": 64, "walk": False}, "text", "6dc60627c1bccdb6"),
    "sop": ("sop", {"max_tokens": 64, "walk": False}, "text", "934d8b9871eb08f2"),
    "sop_256": ("sop", {"max_tokens": 256, "p_swap": 0.3, "walk": False}, "text", "47d950b53d93c5ab"),
    "ident_mask": ("ident_mask", {}, "code", "e6d921c70496dc39"),
    "ident_mask_128": ("ident_mask", {"length": 128, "target_room": 32, "rate": 0.6}, "code", "6b15d1e814a6aa03"),
    "ident_mask_1": ("ident_mask", {"length": 160, "windows": 1, "target_room": 96}, "code", "73b361d7cb1e9326"),
    "code_doc_1": ("code_doc", {"pairs": 1}, "code", "a934d9d0114c929e"),
}


@pytest.mark.parametrize("name", sorted(PINS))
def test_objective_outputs_are_pinned(byte_tok, text_views, code_views, name):
    obj_name, kw, corpus, want = PINS[name]
    out = _outputs(build(obj_name, Vocab.from_tokenizer(byte_tok), **kw), text_views if corpus == "text" else code_views)
    assert sum(e is not None for e in out) >= 10
    assert _digest(out) == want, name


def _rows_digest(rows) -> str:
    h = hashlib.sha256()
    for r in rows:
        for k in sorted(r):
            a = np.asarray(r[k])
            h.update(f"{k}:{a.dtype.str}:{a.shape};".encode())
            h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:16]


def test_stream_rows_are_pinned(byte_tok, text_views, code_views):
    """Rows of a 3-source mixture (prepared-view tables, Context partners, several examples per
    read) over 3 buffers: every rng the stream draws and every packed column is in the digest."""
    vocab = Vocab.from_tokenizer(byte_tok)
    code, text = open_views(views_to_table(code_views)), open_views(text_table(text_views))
    sources = [view_source(code, build("code_doc", vocab, max_tokens=128), "cd", salt=1),
               view_source(text, build("nsp", vocab, max_tokens=64, walk=False), "nsp", salt=2),
               view_source(code, build("glm", vocab, max_tokens=128, all_windows=False), "glm", salt=3)]
    stream = PackedStream(Mixture(sources, [1.0, 2.0, 1.0], seed=5), seq_len=128, pad_id=vocab.pad_id, buffer=8)
    rows = [next(stream) for _ in range(80)]
    assert stream.k >= 2
    assert _rows_digest(rows) == "ffd89646150d5363"


def test_generators_are_numpys_default_rng():
    """codept.data.seeds.generators (the stream's buffer-at-once seeding) gives numpy's
    default_rng(key) for every key: states, draws and spawned children; values past 32 bits and
    keys of other lengths fall back to it."""
    from codept.data.seeds import generators

    rs = np.random.default_rng(0)
    keys = [tuple(int(x) for x in rs.integers(0, 2**32, 4)) for _ in range(500)]
    keys += [(0, 0, 0, 0), (2**32 - 1,) * 4, (5, 3, 1234, 7)] + [(0, e, i, 3) for e in range(2) for i in range(50)]
    for k, g in zip(keys, generators(keys)):
        r = np.random.default_rng(list(k))
        assert r.bit_generator.state == g.bit_generator.state and r.random() == g.random(), k
    for odd in [(2**32, 0, 0, 1), (2**70, 1, 2, 3), (1, 2, 3)]:
        assert generators([odd])[0].bit_generator.state == np.random.default_rng(list(odd)).bit_generator.state
    a, b = generators([(1, 2, 3, 4)])[0], np.random.default_rng([1, 2, 3, 4])
    for _ in range(2):  # a second spawn gives new children, as numpy's does
        assert [c.random() for c in a.spawn(2)] == [c.random() for c in b.spawn(2)]
    with pytest.raises(ValueError):
        generators([(-1, 0, 0, 0)])
    assert example_rng(5, 3, 1234, 7).bit_generator.state == generators([(5, 3, 1234, 7)])[0].bit_generator.state


def _render_blanks_loop(ids, spans, order, vocab):
    """glm.render_blanks as it was written before the speed work (a loop over the spans): the reference."""
    from codept.data.example import IGNORE, Example

    sop, eop = vocab.id_of("sop"), vocab.id_of("eop")
    keep = np.ones(len(ids), dtype=bool)
    for s, e in spans:
        keep[s + 1:e] = False
    a = ids.copy()
    a[spans[:, 0]] = vocab.mask_id
    a = a[keep]
    mask_pos = np.cumsum(keep)[spans[:, 0]] - 1
    b_in, b_lab, b_pos, b_blk = [], [], [], []
    for j in order:
        s, e = spans[j]
        b_in.append(np.r_[sop, ids[s:e]])
        b_lab.append(np.r_[ids[s:e], eop])
        b_pos.append(np.full(e - s + 1, mask_pos[j]))
        b_blk.append(np.arange(1, e - s + 2))
    cat = lambda xs: np.concatenate(xs) if xs else np.zeros(0, np.int64)  # noqa: E731
    n_a, n_b = len(a), sum(len(x) for x in b_in)
    return Example(input_ids=np.r_[a, cat(b_in)].astype(np.int32), prefix=np.r_[np.ones(n_a, bool), np.zeros(n_b, bool)],
                   labels={"glm": np.r_[np.full(n_a, IGNORE), cat(b_lab)].astype(np.int32)},
                   positions=np.r_[np.arange(n_a), cat(b_pos)].astype(np.int32),
                   block_positions=np.r_[np.zeros(n_a), cat(b_blk)].astype(np.int32))


def test_glm_blanks_equal_the_loop_reference(byte_tok, text_views):
    """Spans at the edges, of length 1, adjacent, none, one covering all: the index arithmetic of
    glm.render_blanks equals the per-span loop it replaced."""
    from codept.objectives.glm import render_blanks

    vocab = Vocab.from_tokenizer(byte_tok)
    rng = np.random.default_rng(0)
    ids = np.asarray(text_views[3].input_ids)[:60]
    cases = [np.zeros((0, 2), np.int64), np.array([[0, 1]]), np.array([[0, 60]]), np.array([[0, 3], [3, 4], [59, 60]])]
    for _ in range(200):
        cuts = np.sort(rng.choice(np.arange(61), size=2 * int(rng.integers(1, 8)), replace=False))
        cases.append(cuts.reshape(-1, 2))
    for spans in cases:
        order = rng.permutation(len(spans))
        assert _digest([render_blanks(ids, spans, order, vocab)]) == _digest([_render_blanks_loop(ids, spans, order, vocab)])


def _ident_mask_reference(vocab, rate=0.3, length=512, target_room=96, windows=0):
    """ident_mask as it was written before the speed work (per window: occurrences, set
    differences, a dict of sentinels by start): the reference of the per-read version."""
    from codept.data.example import IGNORE, Example
    from codept.objectives.ident_rtd import occurrences
    from codept.structure.kinds import ROLE_FREE

    sentinels = np.asarray(vocab.sentinel_ids, dtype=np.int64)
    eos, room = vocab.id_of("eos"), length - target_room

    def render(ids, idents, binding, picked, lo, hi, room):
        targets, sentinel_at, used = [], {}, 0
        for i, b in enumerate(picked.tolist()):
            rows = np.flatnonzero(binding == b)
            s0, e0 = int(idents[rows[0], 0]), int(idents[rows[0], 1])
            name = ids[s0:e0]
            if used + 1 + len(name) > room:
                break
            targets += [sentinels[i:i + 1], name]
            used += 1 + len(name)
            for r in rows.tolist():
                sentinel_at[int(idents[r, 0])] = (int(idents[r, 1]), int(sentinels[i]))
        pieces, at = [], lo
        for s in sorted(sentinel_at):
            e, sid = sentinel_at[s]
            pieces += [ids[at:s], np.array([sid], ids.dtype)]
            at = e
        pieces.append(ids[at:hi])
        tgt = np.concatenate(targets) if targets else np.zeros(0, np.int64)
        return np.concatenate(pieces), tgt.astype(np.int64)

    def window(view, ids, idents, lo, hi, rng):
        inside = (idents[:, 0] >= lo) & (idents[:, 1] <= hi)
        rows = np.flatnonzero(inside)
        if len(rows) == 0:
            return None
        clean, _ = occurrences(view, rows)
        binding = idents[:, 4]
        bad = np.unique(np.concatenate([binding[~inside], binding[rows][~clean | (idents[rows, 3] == ROLE_FREE)]]))
        ok = np.setdiff1d(np.unique(binding[rows]), bad)
        if len(ok) == 0:
            return None
        k = min(len(sentinels), max(1, int(round(rate * len(ok)))))
        picked = rng.permutation(ok)[:k]
        inputs, targets = render(ids, idents[rows], binding[rows], picked, lo, hi, target_room - 1)
        targets = np.append(targets, eos)
        prefix = np.concatenate([np.ones(len(inputs), bool), np.zeros(len(targets), bool)])
        labels = np.concatenate([np.full(len(inputs), IGNORE, np.int64), targets])
        return Example(np.concatenate([inputs, targets]).astype(ids.dtype), prefix, labels={"lm": labels})

    def ident_mask(view, rng, ctx=None):
        ids, idents = np.asarray(view.input_ids), np.asarray(view.idents)
        if len(idents) == 0 or len(ids) == 0:
            return None
        if windows == 1 or len(ids) <= room:
            lo = int(rng.integers(0, len(ids) - room + 1)) if len(ids) > room else 0
            return window(view, ids, idents, lo, min(len(ids), lo + room), rng)
        shift = int(rng.integers(room))
        starts = [0] + list(range(shift or room, len(ids), room))
        out = [ex for lo, hi in zip(starts, starts[1:] + [len(ids)])
               if (ex := window(view, ids, idents, lo, hi, rng)) is not None]
        return (out[: windows] if windows else out) or None

    return ident_mask


@pytest.mark.parametrize("kw", [{}, {"length": 128, "target_room": 24, "rate": 0.8}, {"length": 200, "windows": 1, "target_room": 96},
                                {"length": 256, "windows": 2, "rate": 1.0, "target_room": 96}, {"length": 96, "target_room": 8}])
def test_ident_mask_equals_the_per_window_reference(small_tok, kw):
    """ident_mask (bindings qualified once per read, occurrences replaced as index arithmetic) gives
    the Examples of the per-window version it replaced, on real stdlib files (several seeds each)."""
    from codept.data.sources import read_source, stdlib_files
    from codept.structure.grammar import SkipFile

    vocab = Vocab.from_tokenizer(small_tok)
    new, old = build("ident_mask", vocab, **kw), _ident_mask_reference(vocab, **kw)
    n = 0
    for p in stdlib_files()[100:124]:
        try:
            v = build_view(str(p), "python", read_source(p), small_tok)
        except SkipFile:
            continue
        for seed in range(3):
            a, b = new(v, np.random.default_rng([seed, 1])), old(v, np.random.default_rng([seed, 1]))
            a, b = (a if isinstance(a, list) else [a]), (b if isinstance(b, list) else [b])
            assert _digest(a) == _digest(b), (p.name, seed)
            n += sum(x is not None for x in a)
    assert n >= 20


def _truncate_pair_loop(a, b, budget, rng):
    """segments.truncate_pair as it was written before the speed work (one step per trimmed token)."""
    (a0, a1), (b0, b1) = a, b
    while (a1 - a0) + (b1 - b0) > budget:
        front = rng.random() < 0.5
        if a1 - a0 > b1 - b0:
            a0, a1 = (a0 + 1, a1) if front else (a0, a1 - 1)
        else:
            b0, b1 = (b0 + 1, b1) if front else (b0, b1 - 1)
    return (a0, a1), (b0, b1)


def test_truncate_pair_equals_the_loop_it_replaced():
    """Long pairs are trimmed at once (nsp@zh spent 28% of its time in the loop): same ranges and the
    same rng state after, for sides of 1-400 tokens and budgets of 2-500 (excess above and below the
    vectorised path's threshold)."""
    from codept.objectives.segments import truncate_pair

    g = np.random.default_rng(0)
    for _ in range(3000):
        la, lb, budget, seed = (int(x) for x in g.integers([1, 1, 2, 0], [400, 400, 500, 1 << 30]))
        a, b = (5, 5 + la), (1000, 1000 + lb)
        r1, r2 = np.random.default_rng(seed), np.random.default_rng(seed)
        assert truncate_pair(a, b, budget, r1) == _truncate_pair_loop(a, b, budget, r2)
        assert r1.random() == r2.random()


@pytest.mark.parametrize("kw", [{}, {"max_tokens": 64, "rate": 0.3, "mean_span": 1.5}])
def test_glm_all_windows_equal_render_blanks_per_window(byte_tok, text_views, code_views, kw):
    """glm's every-window path (spans drawn and rendered for all windows of a read at once) gives,
    for each window, render_blanks of that window's spans and part-B order; the windows tile the
    document; each window's spans cover its select.budget and hold no special token."""
    from codept.objectives import glm as G

    vocab = Vocab.from_tokenizer(byte_tok)
    cfg = G.Config(**kw)
    width = int((cfg.max_tokens - 2) / (1 + 2 * cfg.rate))
    seen = 0
    for v in [*text_views, *code_views]:
        ids = np.asarray(v.input_ids)
        if len(ids) <= width:
            continue
        for seed in range(3):
            rng = np.random.default_rng(seed)
            first = int(rng.integers(1, width + 1))
            starts = np.array([0, *range(first, len(ids), width)], np.int64)
            st, en, win, order = G.sample_windows(starts, len(ids), cfg.rate, cfg.mean_span, rng)
            got = G.build(vocab, cfg)(v, np.random.default_rng(seed))
            assert len(got) == len(starts)
            cand = vocab.candidates(ids)
            bounds = [*starts.tolist(), len(ids)]
            for w, ex in enumerate(got):
                a, b = bounds[w], bounds[w + 1]
                m = win == w
                clean = np.array([cand[x:y].all() for x, y in zip(st[m], en[m])], bool)
                assert (en[m] - st[m]).sum() in (int(cfg.rate * (b - a)), int(cfg.rate * (b - a)) + 1)
                idx = np.flatnonzero(m)
                keep = idx[clean]
                loc = np.array([int(np.searchsorted(keep, i)) for i in order if i in set(keep.tolist())], np.int64)
                spans = np.stack([st[keep] - a, en[keep] - a], 1) if len(keep) else np.zeros((0, 2), np.int64)
                ref = G.render_blanks(ids[a:b], spans, loc, vocab)
                assert _digest([ex]) == _digest([ref]), (v.path, seed, w)
                assert len(ex) <= cfg.max_tokens
                seen += 1
    assert seen > 100
