"""codept.probe.build / query / split: query cleaning per language, candidates without their doc, filters,
decontamination of planted copies, the deterministic held-out split, probe folders round-tripping."""

from __future__ import annotations

import argparse
import json
import textwrap

import datasets
import numpy as np
import pytest

from codept.data.sources import stdlib_files
from codept.prepare import PrepareConfig, load_views, prepare
from codept.probe import Pair, load_pairs
from codept.probe.build import (
    Contamination,
    add_arguments,
    build_probe,
    code_without_doc,
    decontaminate,
    main,
    pairs_from_views,
)
from codept.probe.query import clean_query, normalize_query
from codept.probe.split import held_out, in_domain_probe, split_views
from codept.structure.view import build_view
from codept.tokenizer import train_tokenizer

# -- query cleaning ------------------------------------------------------------------------------


CASES = [
    # Go: the leading name goes, directives and Deprecated paragraphs too, doc links keep their text
    ("go", "Keys", "// Keys returns a new slice containing the set of map keys.\n// The order is unspecified.",
     "returns a new slice containing the set of map keys."),
    ("go", "typ", "// typ is the locally instantiated type of T. T==typ(T) if f is not an instantiation.",
     "is the locally instantiated type of T."),
    ("go", "NewReader", "// Deprecated: use [bytes.NewReader] instead.\n//\n// NewReader makes a reader of [io.Reader] b.",
     "makes a reader of io.Reader b."),
    ("go", "fast", "//go:noinline\n// fast copies `n` bytes, e.g. a page, without checks.\n//\n// More.",
     "copies n bytes, e.g. a page, without checks."),
    ("go", "Walk", "/*\nWalk traverses the tree in depth-first order\nand calls fn for each node.\n*/",
     "traverses the tree in depth-first order and calls fn for each node."),
    ("go", "selection", "// selection returns a *Selection for f.info.Selections[selector]; see [types.Selection].",
     "returns a *Selection for f.info.Selections[selector]; see types.Selection."),
    ("go", "CommandContext", "// CommandContext is like exec.CommandContext, but:\n//   - skips t if unsupported\n"
     "//   - sends SIGQUIT instead.", "is like exec.CommandContext, but:"),
    ("go", "contains", "// TODO(adonovan): make this a method.\n//\n// contains(pos) reports whether pos is in f.",
     "reports whether pos is in f."),
    # Javadoc: block tags end it, inline tags become their text, HTML goes, entities unescaped
    ("java", "observableList",
     "/**\n     * Constructs an {@code ObservableList} backed by the {@link java.util.List#add(Object) given list}.\n"
     "     * Mutations are reported.<br>\n     * @param list a list\n     * @return the list\n     */",
     "Constructs an ObservableList backed by the given list."),
    ("java", "rotate", "/**\n * Rotates the list by {@link #distance}; fires <b>one</b> &amp; only one change<p>\n"
     " * notification. More text.\n * @param list the list\n */", "Rotates the list by distance; fires one & only one change"),
    ("java", "get", "/**\n     * {@inheritDoc}\n     *\n     * @throws Error if it fails\n     */", ""),
    ("java", "size", "/** Returns the size as a {@code List<String>} entry count i.e. never negative */",
     "Returns the size as a List<String> entry count i.e. never negative"),
    ("java", "parse", "/**\n * Parses a size, e.g. 10kb or 3mb, into bytes. Throws otherwise.\n */",
     "Parses a size, e.g. 10kb or 3mb, into bytes."),
    ("java", "computeRenderRoot", "/*******************************\n *  Culling Related Methods    *\n"
     " ******************************/", "Culling Related Methods"),
    # JSDoc: tags, markdown code, @description, [label]{@link}
    ("javascript", "checkCallExpression",
     "/**\n\t\t * Checks the given `CallExpression` node for `.indexOf(NaN)` and `.lastIndexOf(NaN)`.\n"
     "\t\t * @param {ASTNode} node The node to check.\n\t\t * @returns {void}\n\t\t */",
     "Checks the given CallExpression node for .indexOf(NaN) and .lastIndexOf(NaN)."),
    ("javascript", "owner", "/**\n * @description Gets the [user name]{@link User#name} of the session owner\n"
     " * @returns {string} the name\n */", "Gets the user name of the session owner"),
    ("javascript", "asArray", "/**\n * Wraps the value in an Array if it isn't already one.\n * @template T\n */",
     "Wraps the value in an Array if it isn't already one."),
    ("javascript", "getFlags", "/**\n * Gets flags of a regular expression created by RegExp()\n * Examples:\n"
     " *     new RegExp(\".\") // => \"\"\n */", "Gets flags of a regular expression created by RegExp()"),
    # PHPDoc
    ("php", "remove_subject_prefix", "/**\n     * Clean the subject from reply and forward prefix\n     * \n"
     "     * @param string $subject Subject to clean\n     * @return string Cleaned subject\n     */",
     "Clean the subject from reply and forward prefix"),
    ("php", "getSearch", "/**\n     * Return the {@link Horde_Search search handler} that should be used.\n     */",
     "Return the search handler that should be used."),
    ("php", "untag", "/**\n     * {@inheritdoc}\n     */", ""),
    # Ruby: YARD tags (leading ones skipped), rdoc +code+, :nodoc:, call-seq, =begin/=end
    ("ruby", "unescape_path", "# Unescapes the **path** component of a URI.  See Rack::Utils.unescape for\n"
     "    # unescaping query parameters or form components.", "Unescapes the path component of a URI."),
    ("ruby", "snippet_for", "# @api private\n        #\n        # Create a snippet from a line of code.\n        #\n"
     "        # @param error_line [String] file name with line number (i.e.\n        #   'foo_spec.rb:12')",
     "Create a snippet from a line of code."),
    ("ruby", "session?", "# Returns +true+ when the +env+ hash holds a <tt>rack.session</tt>.\n# @return [Boolean]",
     "Returns true when the env hash holds a rack.session."),
    ("ruby", "secret", "# :nodoc:\n# Internal helper that nobody should call.", ""),
    ("ruby", "each_pair", "# :call-seq:\n#   hash.each_pair {|key, value| block } -> hash\n#\n"
     "# Calls the block once for each key in the hash.", "Calls the block once for each key in the hash."),
    ("ruby", "legacy", "=begin\nLooks up the legacy handler for a route\nin the table.\n=end",
     "Looks up the legacy handler for a route in the table."),
    ("ruby", "puts", "## * puts must be called with a single argument that responds to to_s.",
     "must be called with a single argument that responds to to_s."),
    ("ruby", "append_after", "# Adds +block+ to the end of the after hooks, in contrast to {#after} or {Hooks#run}.",
     "Adds block to the end of the after hooks, in contrast to after or Hooks#run."),
    # Python: reST fields, Google and numpy sections, doctests, roles, string prefixes, signatures
    ("python", "shortest", '"""Compute the :func:`shortest path <nx.shortest_path>` length between ``source`` and\n'
     '    :class:`~networkx.Graph` nodes\n    :param G: graph\n    :returns: int\n    """',
     "Compute the shortest path length between source and Graph nodes"),
    ("python", "fetch", '"""Fetch rows from the bigtable\n    Args:\n        keys: the keys\n    """',
     "Fetch rows from the bigtable"),
    ("python", "degree", '"""\n    Compute the degree centrality for nodes\n    Parameters\n    ----------\n'
     '    G : graph\n    """', "Compute the degree centrality for nodes"),
    ("python", "add", "r'''Add two numbers\n    >>> add(1, 2)\n    3\n    '''", "Add two numbers"),
    ("python", "lower", '"""S.lower() -> str\n\n    Return a copy of S converted to lowercase."""',
     "Return a copy of S converted to lowercase."),
    ("python", "ask", "u'Is this graph a DAG? It is checked by DFS.'", "Is this graph a DAG?"),
    ("python", "scale", '"""Multiply by 1.5 (i.e. grow) the node sizes.  Then redraw."""',
     "Multiply by 1.5 (i.e. grow) the node sizes."),
    ("python", "f", '""""""', ""),
    ("python", "g", '""":param x: only fields\n"""', ""),
]


@pytest.mark.parametrize("lang,name,doc,expect", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_clean_query(lang, name, doc, expect):
    assert clean_query(doc, lang, name) == expect


def test_normalize_query():
    assert normalize_query("Returns the `Foo`-bar, e.g. 3 items!") == "returns the foo bar e g 3 items"
    assert normalize_query("  Grüße  an 名前. ") == "grüße an 名前"


# -- candidates ----------------------------------------------------------------------------------

PY_CLASS = '''\
class Graph:
    """A graph."""

    def degree(self, n):
        """Return the degree of node n.

        :param n: a node
        """
        nbrs = self._adj[n]
        return len(nbrs) + (n in nbrs)

    def one_liner(self): return 1
'''


def test_code_without_doc_python(byte_tok):
    v = build_view("g.py", "python", PY_CLASS, byte_tok)
    rows = {v.token_text(r[3], r[4]).strip(): r for r in v.functions}
    code = code_without_doc(v, rows["degree"])
    assert code == "def degree(self, n):\n    nbrs = self._adj[n]\n    return len(nbrs) + (n in nbrs)"
    assert code_without_doc(v, rows["one_liner"]) == "def one_liner(self): return 1"


def test_code_without_doc_docstring_shares_a_line(byte_tok):
    v = build_view("g.py", "python", 'def f(x): "Doc of f."; return x\n', byte_tok)
    assert code_without_doc(v, v.functions[0]) == "def f(x): return x"


# -- end to end on small real files in six languages --------------------------------------------

FILES = {
    "graph.py": '''\
"""Tiny graph helpers."""


def shortest_path_length(adj, source, target):
    """Return the number of edges on a shortest path from source to target.

    Parameters
    ----------
    adj : dict
    """
    seen, frontier, depth = {source}, [source], 0
    while frontier:
        if target in frontier:
            return depth
        frontier = [m for n in frontier for m in adj[n] if m not in seen]
        seen.update(frontier)
        depth += 1
    return -1


def undocumented(adj):
    total = 0
    for n in adj:
        total += len(adj[n])
    return total


def tiny(adj):
    """Count the nodes of the graph."""
    return len(adj)


def terse(adj):
    """Edges."""
    out = []
    for n in adj:
        out.extend((n, m) for m in adj[n])
    return out


class Walker:
    """Walks graphs."""

    def walk(self, adj, start):
        """Yield every node reachable from start in BFS order.

        Args:
            adj: the adjacency dict
        """
        queue, seen = [start], {start}
        while queue:
            n = queue.pop(0)
            yield n
            for m in adj[n]:
                if m not in seen:
                    seen.add(m)
                    queue.append(m)

    def walk_again(self, adj, start):
        """Yield every node reachable from start in BFS order."""
        for n in self.walk(adj, start):
            yield n
        return None
''',
    "Stack.java": '''\
package demo;

import java.util.ArrayList;

/** A stack of ints. */
public class Stack {
    private final ArrayList<Integer> items = new ArrayList<>();

    /**
     * Pushes {@code value} on top of the stack and returns the new size.
     * <p>Never fails.
     * @param value the value
     * @return the size
     */
    public int push(int value) {
        items.add(value);
        int n = items.size();
        return n;
    }
}
''',
    "cursor.js": '''\
/**
 * Advances the cursor by `n` tokens and returns the new position.
 * @param {Cursor} cursor The cursor.
 * @param {number} n How far.
 * @returns {number} The position.
 */
function advance(cursor, n) {
\tcursor.pos += n;
\tcursor.moved = true;
\treturn cursor.pos;
}

module.exports = { advance };
''',
    "keys.go": '''\
package maps

// Keys returns a new slice containing the set of map keys.
// The order is unspecified.
func Keys(m map[string]int) []string {
\tkeys := make([]string, 0, len(m))
\tfor k := range m {
\t\tkeys = append(keys, k)
\t}
\treturn keys
}
''',
    "utils.rb": '''\
module Utils
  # Escapes the +path+ for use in a URI.  Spaces become %20.
  #
  # @param path [String]
  def escape_path(path)
    path = path.to_s
    path.gsub(" ", "%20")
  end
end
''',
    "mailer.php": '''\
<?php

class Mailer
{
    /**
     * Clean the subject from reply and forward prefixes.
     *
     * @param string $subject Subject to clean
     */
    public function clean($subject)
    {
        $subject = trim($subject);
        return preg_replace('/^(re|fwd?):\\s*/i', '', $subject);
    }
}
''',
}

EXPECTED = {  # name -> (lang, query)
    "shortest_path_length": ("python", "Return the number of edges on a shortest path from source to target."),
    "push": ("java", "Pushes value on top of the stack and returns the new size."),
    "advance": ("javascript", "Advances the cursor by n tokens and returns the new position."),
    "Keys": ("go", "returns a new slice containing the set of map keys."),
    "escape_path": ("ruby", "Escapes the path for use in a URI."),
    "clean": ("php", "Clean the subject from reply and forward prefixes."),
}


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("tok")
    train_tokenizer(stdlib_files()[:10], out, vocab_size=1000)
    return out


CFG = PrepareConfig(workers=1)


def write(root, files):
    root.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (root / name).write_text(text)
    return root


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write(tmp_path_factory.mktemp("corpus") / "src", FILES)


@pytest.fixture(scope="module")
def built(corpus, tok_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("probe")
    meta = build_probe([str(corpus)], out, tokenizer_dir=tok_dir, cfg=CFG, progress=False)
    return out, meta


def test_pairs_six_languages(built):
    out, meta = built
    pairs = load_pairs(out)
    assert {p.name: (p.lang, p.query) for p in pairs} == EXPECTED
    assert [(p.lang, p.path, p.start) for p in pairs] == sorted((p.lang, p.path, p.start) for p in pairs)
    by = {p.name: p for p in pairs}
    # the candidate keeps name and signature, loses the doc
    assert by["shortest_path_length"].code.startswith("def shortest_path_length(adj, source, target):\n    seen, ")
    assert '"""' not in by["shortest_path_length"].code
    assert by["push"].code.startswith("public int push(int value) {") and "/**" not in by["push"].code
    assert by["Keys"].code.startswith("func Keys(m map[string]int) []string {") and "//" not in by["Keys"].code
    assert by["escape_path"].code == 'def escape_path(path)\n  path = path.to_s\n  path.gsub(" ", "%20")\nend'
    assert by["clean"].code.startswith("public function clean($subject)\n{\n    $subject = trim")
    assert by["advance"].code.endswith("\treturn cursor.pos;\n}")
    src = FILES["Stack.java"]
    assert src[by["push"].start:].startswith("public int push")


def test_meta_counts(built):
    out, meta = built
    assert json.loads((out / "probe.json").read_text()) == meta
    py = meta["per_lang"]["python"]
    # undocumented -> no_doc; "Edges." -> short_query; tiny -> short_body (1 line); walk/walk_again -> duplicate
    assert (py["functions"], py["documented"], py["no_doc"], py["short_query"], py["short_body"],
            py["duplicate_query"], py["pairs"]) == (6, 5, 1, 1, 1, 2, 1)
    assert meta["filters"] == {"other_lang": 0, "no_doc": 1, "short_query": 1, "short_body": 1, "duplicate_query": 2,
                               "duplicate_code": 0}
    assert meta["pairs"] == 6 == sum(c["pairs"] for c in meta["per_lang"].values())
    assert meta["prepare"]["inputs"] == meta["prepare"]["viewed"] == 6
    assert meta["decontamination"]["dropped"] == 0


def test_filters_and_lang_option(corpus, tok_dir):
    views = load_views(prepare([str(corpus)], tokenizer_dir=tok_dir, cfg=CFG, progress=False)["out"])
    pairs, c = pairs_from_views(views, langs=["go", "ruby"])
    assert sorted(p.name for p in pairs) == ["Keys", "escape_path"]
    assert c["other_lang"] == 8 and c["pairs"] == 2  # python 5 + java, js, php 1 each: documented elsewhere
    pairs, c = pairs_from_views(views, min_query_words=1, min_body_lines=1, langs=["python"])
    assert {p.name for p in pairs} == {"shortest_path_length", "tiny", "terse"} and c["duplicate_query"] == 2
    pairs, c = pairs_from_views(views, min_body_lines=20, langs=["python"])
    assert pairs == [] and c["short_body"] == 4


def test_duplicate_code_dropped(tmp_path, tok_dir):
    body = "    def size(self):\n        {doc}\n        n = len(self.items)\n        return n\n\n"
    files = {"a.py": "class A:\n" + body.format(doc='"""Return the size of the first stack."""'),
             "b.py": "class B:\n" + body.format(doc='"""Number of items held by the stack."""'),
             "c.py": "class C:\n" + body.format(doc='"""Number of items held by the stack."""').replace("n =", "m = n =")}
    views = load_views(prepare([str(write(tmp_path / "src", files))], tokenizer_dir=tok_dir, cfg=CFG,
                               progress=False)["out"])
    pairs, c = pairs_from_views(views)
    # b and c share their query (both go first); then a's code is unique in what is left
    assert (c["duplicate_query"], c["duplicate_code"], [p.path[-4:] for p in pairs]) == (2, 0, ["a.py"])
    files["c.py"] = files["c.py"].replace("Number of items held by the stack", "Count the elements we hold")
    views = load_views(prepare([str(write(tmp_path / "src2", files))], tokenizer_dir=tok_dir, cfg=CFG,
                               progress=False)["out"])
    pairs, c = pairs_from_views(views)
    assert (c["duplicate_query"], c["duplicate_code"], [p.path[-4:] for p in pairs]) == (0, 2, ["c.py"])


TRAIN = {
    # the body of shortest_path_length, re-indented (2 spaces, tabs) with another docstring
    "copy.py": textwrap.indent(textwrap.dedent('''\
        def shortest_path_length(adj, source, target):
          """BFS distance (a different docstring)."""
          seen, frontier, depth = {source}, [source], 0
          while frontier:
            if target in frontier:
              return depth
            frontier = [m for n in frontier for m in adj[n] if m not in seen]
            seen.update(frontier)
            depth +=  1
          return -1
        '''), ""),
    # the same doc as Keys on another body
    "other.go": "package other\n\n// Keys returns a new slice containing the set of map keys.\n"
                "func Keys(m map[int]bool) []int {\n\treturn nil\n}\n",
}


def test_decontamination_drops_planted_copies(corpus, tok_dir, tmp_path):
    train = write(tmp_path / "train", TRAIN)
    out = tmp_path / "probe"
    meta = build_probe([str(corpus)], out, exclude=[str(train)], tokenizer_dir=tok_dir, cfg=CFG, progress=False)
    names = {p.name for p in load_pairs(out)}
    assert names == set(EXPECTED) - {"shortest_path_length", "Keys"}
    d = meta["decontamination"]
    assert (d["query_in_training"], d["body_in_training"], d["dropped"], d["pairs_before"]) == (1, 1, 2, 6)
    assert meta["per_lang"]["go"]["query_in_training"] == 1 and meta["per_lang"]["python"]["body_in_training"] == 1
    assert d["exclude"][0]["views"] == 2
    # a prepared folder as --exclude, and the functions directly, give the same result
    s = prepare([str(train)], tokenizer_dir=tok_dir, cfg=CFG, progress=False)
    meta2 = build_probe([str(corpus)], tmp_path / "probe2", exclude=[s["out"]], tokenizer_dir=tok_dir, cfg=CFG,
                        progress=False)
    assert meta2["decontamination"]["dropped"] == 2
    pairs, _ = pairs_from_views(load_views(meta["prepare"]["out"]))
    kept, c = decontaminate(pairs, Contamination.from_views(load_views(s["out"])))
    assert {p.name for p in kept} == names and c == {"query_in_training": 1, "body_in_training": 1, "dropped": 2}
    kept, c = decontaminate(pairs, Contamination())
    assert kept == pairs and c["dropped"] == 0


def test_roundtrip_and_cli(built, corpus, tok_dir, tmp_path, capsys):
    out, meta = built
    pairs = load_pairs(out)
    assert all(isinstance(p, Pair) for p in pairs) and len(pairs) == meta["pairs"]
    assert load_pairs(out, langs=["go"]) == [p for p in pairs if p.lang == "go"]
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args([str(corpus), "--out", str(tmp_path / "cli"), "--lang", "go", "ruby",
                              "--tokenizer", str(tok_dir)])
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "go: 1 documented of 1 functions, 1 pairs kept" in text
    assert [p.name for p in load_pairs(tmp_path / "cli")] == ["Keys", "escape_path"]


# -- held-out split ------------------------------------------------------------------------------


def stdlib_texts(n: int) -> list[str]:
    """Up to `n` non-empty stdlib files (the empty __init__.py files are one content)."""
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in stdlib_files()[:n]]
    return [t for t in texts if t.strip()]


def test_held_out_deterministic_and_fraction():
    texts = stdlib_texts(600)
    assert len(texts) >= 300
    a = [held_out(t, 0.2) for t in texts]
    assert a == [held_out(t, 0.2) for t in texts]  # deterministic
    # content only: newline style / trailing spaces do not move a file; another salt does
    assert [held_out(t.replace("\n", "\r\n") + "  \n", 0.2) for t in texts[:50]] == a[:50]
    assert [held_out(t, 0.2, salt="other") for t in texts] != a
    frac, n = np.mean(a), len(texts)
    assert abs(frac - 0.2) < 4 * np.sqrt(0.2 * 0.8 / n), frac
    smaller = [held_out(t, 0.1) for t in texts]
    assert all(b <= x for b, x in zip(smaller, a))  # nested: 10% is inside 20%
    assert not any(held_out(t, 0.0) for t in texts[:20]) and all(held_out(t, 1.0) for t in texts[:20])
    with pytest.raises(ValueError, match="fraction"):
        held_out("x", 1.5)


def test_split_views_matches_held_out():
    texts = stdlib_texts(200)
    ds = datasets.Dataset.from_dict({"text": texts, "path": [f"p{i}" for i in range(len(texts))]})
    train, held = split_views(ds, 0.3, batch_size=7)
    assert held.tolist() == [i for i, t in enumerate(texts) if held_out(t, 0.3)]
    assert sorted(train.tolist() + held.tolist()) == list(range(len(texts)))


def test_in_domain_probe(tmp_path, tok_dir):
    # 40 documented Go functions, one file each; a training-side file repeats the body of a held-out
    # one under another doc: that pair is dropped by the decontamination against the training part
    files = {f"f{i}.go": f"package p\n\n// Sum{i} adds up the first {i} numbers of xs and returns it.\n"
             f"func Sum{i}(xs []int) int {{\n\ts := 0\n\tfor _, x := range xs[:{i}] {{\n\t\ts += x\n\t}}\n"
             f"\treturn s\n}}\n" for i in range(40)}
    victim = next(name for name, text in files.items() if held_out(text, 0.25))
    body = files[victim].split("\n", 3)[3]
    copy = next(t for t in (f"package q\n\n// Total, version {k}.\n{body}" for k in range(100)) if not held_out(t, 0.25))
    files["copy.go"] = copy
    src = write(tmp_path / "src", files)
    ds = load_views(prepare([str(src)], tokenizer_dir=tok_dir, cfg=CFG, progress=False)["out"])
    train, held = split_views(ds, 0.25)
    assert 0 < len(held) < 20
    meta = in_domain_probe(ds, 0.25, tmp_path / "probe")
    pairs = load_pairs(tmp_path / "probe")
    held_paths = {ds[int(i)]["path"] for i in held}
    assert {p.path for p in pairs} == held_paths - {str(src / victim)} and len(pairs) == len(held) - 1
    assert meta["split"] == {"fraction": 0.25, "salt": "codept-probe", "train": len(train), "heldout": len(held)}
    assert meta["decontamination"]["exclude"][0]["views"] == len(train)
    assert (meta["decontamination"]["body_in_training"], meta["decontamination"]["dropped"]) == (1, 1)
