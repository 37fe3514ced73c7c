"""Text readers side by side: the hand-written Markdown/reST/.po readers (benchmarks/baseline_readers.py,
frozen from d79c4e8) vs the maintained parsers the text readers now use (markdown-it-py, docutils: codept.text.prose;
polib: codept.text.records).

What it measures, per format, on the same files, interleaved file by file (CPU time, one process):
1. speed: MB of input per CPU second;
2. cleanliness: leftover markup in the output (roles, directives, ``**``, backticks, ``[x](y)``, HTML
   tags, ...) counted by regex, next to the same counts in the reference (markup that is really text);
3. words vs a reference rendering of the same file: Sphinx's own HTML of the Python docs for reST, Node's
   own HTML of its API docs for Markdown (prose only: code blocks, tables, signatures, generated metadata
   removed); precision = output words found in the reference, recall = reference words found in the output
   (multisets of lowercased \\w+ tokens);
4. failures: exceptions and empty outputs;
5. .po: the .mo catalogs of this machine turned into .po by ``msgunfmt`` (GNU gettext, an independent
   tool), parsed by both; entries compared with the stdlib ``gettext`` reading of the .mo (the reference).

Measured 2026-12-01 (2 shared cores, nice'd; docutils 0.19, markdown-it-py 4.3.0, polib 1.2.0):

| format (corpus)                 | reader         | MB/CPU s | words kept (recall) | words not in ref | markup left (ref) |
|---------------------------------|----------------|---------:|--------------------:|-----------------:|------------------:|
| reST (496 Python docs, 11.0 MB) | hand-written   |    11.87 |              97.29% |            0.54% |        344 (261)  |
|                                 | docutils       |     0.83 |              97.75% |            0.19% |        273 (261)  |
| Markdown (64 Node docs, 3.5 MB) | hand-written   |    11.16 |              99.49% |            1.61% |         74 (46)   |
|                                 | markdown-it-py |     3.51 |              99.81% |            0.06% |         47 (46)   |
| .po (400 catalogs, 21.2 MB)     | hand-written   |    32.01 | 192678/192678 entries equal to the .mo            |
|                                 | polib          |     8.51 | 192675/192678 (one bash message, 3 catalogs: `\a` left undecoded) |

No failures and no empty outputs for any reader. Both .po readers also return 315 <inttypes.h>
system-dependent messages (``%<PRIdMAX>``) that the stdlib's .mo reading does not expose (not counted as
wrong above). Regex counts are noisy for C-like prose (``char *p`` looks like ``*em*``): compare each
reader's count with the reference's count of the same pattern, not with zero.

Inputs (Debian): ``apt-get download python3.11-doc && dpkg-deb -x python3.11-doc_*.deb /tmp/pydoc``;
``/usr/share/doc/nodejs/api`` (package nodejs-doc); ``/usr/share/locale/*/LC_MESSAGES/*.mo`` + msgunfmt.
Usage: ``python benchmarks/bench_readers.py [--limit N] [--po-limit N]``. Prints a table.
Not covered: man pages, plain text, jsonl/TSV (no parser choice there); a reference for .po edge cases
(fuzzy, obsolete, previous msgid) beyond what msgunfmt writes (tests/test_text_readers.py covers those).
"""

from __future__ import annotations

import argparse
import gettext
import glob
import html.parser
import io
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import baseline_readers as hand  # noqa: E402
from codept.text import prose, readers, records  # noqa: E402

PYDOC = "/tmp/pydoc/usr/share/doc/python3.11/html"
NODEDOC = "/usr/share/doc/nodejs/api"

MARKUP = {
    "role :x:`": re.compile(r":[\w:.+-]+:`"),
    "directive ..x::": re.compile(r"\.\. [\w:.+-]+::"),
    "**": re.compile(r"\*\*"),
    "*em*": re.compile(r"(?<![\w*])\*[^\s*][^*\n]*?\*(?![\w*])"),
    "backtick": re.compile(r"`"),
    "[x](y)": re.compile(r"\[[^\]\n]+\]\([^)\s]*\)"),
    "html tag": re.compile(r"</?(?:a|b|br|code|div|em|i|img|li|p|pre|span|strong|sup|table|td|tr|ul)\b[^<>]*>"),
    "|subst|": re.compile(r"(?<![^\s(])\|[\w-]+\|(?![^\s.,;:)])"),  # not a type union {a|b|c}
    ">>>": re.compile(r">>>"),
    "# heading": re.compile(r"(?m)^#{1,6} "),
}
WORD = re.compile(r"\w+")


class _Prose(html.parser.HTMLParser):
    """Text of one element (by id or class) of an HTML page, minus the subtrees that are not prose."""

    def __init__(self, root: tuple[str, str], drop_tags: set[str], drop_classes: set[str]):
        super().__init__(convert_charrefs=True)
        self.root, self.drop_tags, self.drop_classes = root, drop_tags, drop_classes
        self.stack: list[tuple[str, bool, bool]] = []  # (tag, inside root, dropped)
        self.out: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        inside, dropped = self.stack[-1][1:] if self.stack else (False, False)
        inside = inside or a.get(self.root[0]) == self.root[1] or self.root[1] in (a.get(self.root[0]) or "").split()
        classes = set((a.get("class") or "").split())
        dropped = dropped or tag in self.drop_tags or bool(classes & self.drop_classes)
        if tag not in ("br", "img", "hr", "meta", "link", "input", "wbr"):
            self.stack.append((tag, inside, dropped))

    def handle_endtag(self, tag):
        if any(t == tag for t, _, _ in self.stack):  # a stray end tag closes nothing
            while self.stack.pop()[0] != tag:
                pass

    def handle_data(self, data):
        if self.stack and self.stack[-1][1] and not self.stack[-1][2]:
            self.out.append(data)


def prose_of(html_path: str, root, drop_tags, drop_classes) -> str:
    p = _Prose(root, drop_tags, drop_classes)
    p.feed(Path(html_path).read_text(encoding="utf-8", errors="replace"))
    return " ".join(p.out)


def sphinx_reference(path: str) -> str:
    return prose_of(path, ("class", "body"), {"pre", "table", "script", "style"},
                    {"highlight", "headerlink", "toctree-wrapper", "versionmodified", "sig"})


def node_reference(path: str) -> str:
    return prose_of(path, ("id", "apicontent"), {"pre", "table", "script", "style", "details"},
                    {"api_metadata", "changelog", "mark", "copy-button", "srclinks"})


def pairs_rst(limit: int | None):
    src = sorted(glob.glob(f"{PYDOC}/_sources/**/*.rst.txt", recursive=True))
    out = [(s, f"{PYDOC}/{s[len(PYDOC) + 10:-8]}.html") for s in src]
    return _sample([(s, h) for s, h in out if os.path.exists(h)], limit)


def pairs_md(limit: int | None):
    src = sorted(glob.glob(f"{NODEDOC}/*.md"))
    return _sample([(s, s[:-3] + ".html") for s in src if os.path.exists(s[:-3] + ".html")], limit)


def _sample(xs, limit):
    if not limit or len(xs) <= limit:
        return xs
    step = len(xs) / limit
    return [xs[int(i * step)] for i in range(limit)]


class Tally:
    def __init__(self):
        self.cpu = 0.0
        self.bytes = 0
        self.fail = 0
        self.empty = 0
        self.markup: Counter = Counter()
        self.words = 0
        self.hit = 0
        self.fail_examples: list[str] = []

    def add(self, fn, text: str, ref_words: Counter, name: str):
        t0 = time.process_time()
        try:
            out = fn(text)
        except Exception as e:  # noqa: BLE001 - a crash is a measured outcome here
            self.cpu += time.process_time() - t0
            self.fail += 1
            self.fail_examples.append(f"{name}: {type(e).__name__}: {str(e)[:80]}")
            return
        self.cpu += time.process_time() - t0
        self.bytes += len(text.encode())
        self.empty += not out.strip()
        for k, rx in MARKUP.items():
            self.markup[k] += len(rx.findall(out))
        w = Counter(WORD.findall(out.lower()))
        self.words += sum(w.values())
        self.hit += sum((w & ref_words).values())


def bench_markup(name, pairs, ref_fn, fns):
    tallies = {k: Tally() for k in fns}
    ref_markup: Counter = Counter()
    ref_total = 0
    for src, ref_html in pairs:
        text = Path(src).read_text(encoding="utf-8")
        ref = ref_fn(ref_html)
        for k, rx in MARKUP.items():
            ref_markup[k] += len(rx.findall(ref))
        rw = Counter(WORD.findall(ref.lower()))
        ref_total += sum(rw.values())
        for k, fn in fns.items():
            tallies[k].add(fn, text, rw, Path(src).name)
    print(f"\n## {name}: {len(pairs)} files, {tallies[next(iter(fns))].bytes / 1e6:.2f} MB, "
          f"reference {ref_total} words")
    cols = list(fns)
    row = lambda label, vals: print(f"| {label:<22} | " + " | ".join(f"{v:>14}" for v in vals) + " |")  # noqa: E731
    row("", cols + ["reference"])
    row("---", ["---"] * (len(cols) + 1))
    row("MB / CPU s", [f"{t.bytes / 1e6 / max(t.cpu, 1e-9):.2f}" for t in tallies.values()] + [""])
    row("failures / empty", [f"{t.fail} / {t.empty}" for t in tallies.values()] + [""])
    row("words out", [t.words for t in tallies.values()] + [ref_total])
    row("precision (in ref)", [f"{t.hit / max(t.words, 1):.4f}" for t in tallies.values()] + [""])
    row("recall (of ref)", [f"{t.hit / max(ref_total, 1):.4f}" for t in tallies.values()] + [""])
    for k in MARKUP:
        row(f"markup {k}", [t.markup[k] for t in tallies.values()] + [ref_markup[k]])
    row("markup total", [sum(t.markup.values()) for t in tallies.values()] + [sum(ref_markup.values())])
    for k, t in tallies.items():
        for e in t.fail_examples[:3]:
            print(f"  {k} failure: {e}")
    return tallies


# -- .po ----------------------------------------------------------------------------------------------


def mo_reference(path: str) -> Counter:
    t = gettext.GNUTranslations(io.BytesIO(Path(path).read_bytes()))
    return Counter((k, v) for k, v in records._mo_entries(t._catalog) if k)


def po_hand(text: str) -> Counter:
    return Counter((e.msgid, (e.msgstr or {}).get(0, "")) for e in hand.parse_po(text) if e.msgid and not e.fuzzy)


def po_polib(text: str) -> Counter:
    po = records._po_catalog(text)
    return Counter((e.msgid, e.msgstr or e.msgstr_plural.get(0, "")) for e in po
                   if e.msgid and not e.obsolete and not e.fuzzy)


def bench_po(limit: int | None):
    mos = _sample(sorted(glob.glob("/usr/share/locale/*/LC_MESSAGES/*.mo")), limit)
    tmp = Path(tempfile.mkdtemp(prefix="bench_po_"))
    fns = {"hand-written": po_hand, "polib": po_polib}
    stats = {k: Counter() for k in fns}
    cpu = Counter()
    nbytes = n_ref = 0
    for i, mo in enumerate(mos):
        po = tmp / f"{i}.po"
        r = subprocess.run(["msgunfmt", "--no-wrap", "-o", str(po), mo], capture_output=True)
        if r.returncode != 0 or not po.exists():
            continue
        try:
            ref = mo_reference(mo)
        except (OSError, UnicodeError, LookupError):  # a catalog gettext itself cannot read: no reference
            continue
        text = records._decode_po(str(po), po.read_bytes())  # msgunfmt writes the catalog's charset
        nbytes += len(text.encode())
        n_ref += sum(ref.values())
        for k, fn in fns.items():
            t0 = time.process_time()
            try:
                got = fn(text)
            except Exception:  # noqa: BLE001
                stats[k]["failures"] += 1
                continue
            finally:
                cpu[k] += time.process_time() - t0
            stats[k]["entries"] += sum(got.values())
            stats[k]["match"] += sum((got & ref).values())
            stats[k]["wrong"] += sum((got - ref).values())
            stats[k]["missing"] += sum((ref - got).values())
        po.unlink()
    print(f"\n## .po (msgunfmt of {len(mos)} .mo files): {nbytes / 1e6:.2f} MB, reference {n_ref} entries")
    for k in fns:
        s = stats[k]
        print(f"| {k:<13} | {nbytes / 1e6 / max(cpu[k], 1e-9):6.2f} MB/CPU s | failures {s['failures']} | "
              f"entries {s['entries']} | equal to .mo {s['match']} | wrong {s['wrong']} | missing {s['missing']} |")
    return stats


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--limit", type=int, default=None, help="files per markup format (evenly spaced); all by default")
    ap.add_argument("--po-limit", type=int, default=400, help=".mo catalogs to convert and compare")
    a = ap.parse_args(argv)
    print(f"versions: {readers.fingerprint().decode()}")
    if os.path.isdir(f"{PYDOC}/_sources"):
        bench_markup("reST (Python 3.11 docs, vs Sphinx HTML)", pairs_rst(a.limit), sphinx_reference,
                     {"hand-written": hand.rst_to_text, "docutils": prose.rst_to_text})
    else:
        print(f"\n## reST: skipped, {PYDOC}/_sources missing (see the module docstring)")
    if os.path.isdir(NODEDOC):
        bench_markup("Markdown (Node.js API docs, vs Node HTML)", pairs_md(a.limit), node_reference,
                     {"hand-written": hand.markdown_to_text, "markdown-it-py": prose.markdown_to_text})
    else:
        print(f"\n## Markdown: skipped, {NODEDOC} missing")
    bench_po(a.po_limit)


if __name__ == "__main__":
    main()
