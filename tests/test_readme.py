"""The README as a user's guide: short, its two commands the ones CI runs, its objectives table the
registry's, and every relative link in it and in docs/ pointing at a file and heading that exist."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
INSTALL = 'pip install torch==2.13.0 && pip install -e ".[dev]" && deepspeed --num_gpus 2 recipes/pretrain_code.py'
TEST = "python -m pytest -q"


def _table_script():
    spec = importlib.util.spec_from_file_location("objectives_table", REPO / "docs" / "objectives_table.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _code_blocks(text: str) -> list[str]:
    return [b.strip() for b in re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S)]


def test_readme_is_short():
    n = len(README.read_text(encoding="utf-8").splitlines())
    assert n < 350, f"README.md has {n} lines; the user's guide stays under 350 (measurements go to docs/)"


def test_the_two_commands_are_what_ci_runs():
    """.ci/run installs 'exactly as README.md says' and ends with its test command: both must hold."""
    blocks = _code_blocks(README.read_text(encoding="utf-8"))
    assert blocks[0] == INSTALL and blocks[1] == TEST, blocks[:2]
    ci = [ln.strip() for ln in (REPO / ".ci" / "run").read_text().splitlines()
          if ln.strip() and not ln.lstrip().startswith("#")]
    installs = [ln for ln in ci if ln.startswith("python -m pip install")]
    assert installs[:2] == ["python -m pip install -q torch==2.13.0", 'python -m pip install -q -e ".[dev]"'], installs
    assert ci[-1] == TEST, ci[-1]


def test_objectives_table_is_the_registry():
    from codept.objectives import OBJECTIVES

    mod = _table_script()
    text = README.read_text(encoding="utf-8")
    assert mod.current(text) == mod.block(), "run: python docs/objectives_table.py --write README.md"
    names = re.findall(r"^\| `([a-z0-9_]+)` \|", mod.current(text), flags=re.M)
    assert sorted(names) == sorted(OBJECTIVES), (sorted(set(OBJECTIVES) - set(names)), sorted(set(names) - set(OBJECTIVES)))


def test_objectives_table_refuses_an_undocumented_objective(monkeypatch):
    import codept.objectives as O

    mod = _table_script()
    monkeypatch.setitem(O.OBJECTIVES, "new_one", O.OBJECTIVES["mlm"])
    try:
        mod.rows()
    except SystemExit as e:
        assert "new_one" in str(e)
    else:
        raise AssertionError("an objective without family and paper made a row")


def _slugs(md: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped (but - and _), spaces -> -, -N for repeats."""
    out, seen, fence = set(), {}, False
    for line in md.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fence = not fence
        m = re.match(r"^(#{1,6}) (.*)$", line)
        if fence or not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", m.group(2).strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def test_links_resolve():
    pages = [README, *sorted((REPO / "docs").glob("*.md"))]
    bad = []
    for page in pages:
        text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue  # http(s), mailto
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                bad.append(f"{page.relative_to(REPO)}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in _slugs(dest):
                bad.append(f"{page.relative_to(REPO)}: {target} (no such heading)")
    assert not bad, "\n".join(bad)


def _layout_entries() -> dict[str, str]:
    """docs/architecture.md's Layout block: folder or file name -> the words of its entry."""
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = re.search(r"## Layout\n\n```\n(.*?)```", text, flags=re.S).group(1)
    entries, key, parent = {}, None, ""
    for line in block.splitlines():
        m = re.match(r"^( {0,2})(\S+)(.*)$", line)
        if m:
            if not m.group(1):
                parent = m.group(2) if m.group(2).endswith("/") else ""
            key = (parent if m.group(1) else "") + m.group(2)
            entries[key] = m.group(3)
        elif key:
            entries[key] += " " + line.strip()
    return entries


def test_architecture_layout_lists_every_module():
    """The Layout of docs/architecture.md names every module of codept/ and every recipe, in its folder's
    entry: a new or moved module fails here until the page says where it is."""
    entries = _layout_entries()
    missing = []
    for f in sorted((REPO / "codept").rglob("*.py")):
        rel = f.relative_to(REPO / "codept")
        if f.name == "__init__.py":
            continue
        if len(rel.parts) == 1:
            if f"codept/{f.name}" not in entries:
                missing.append(f"codept/{rel}")
            continue
        entry = entries.get(f"codept/{rel.parts[0]}/", "")
        if not re.search(rf"\b{re.escape(f.stem)}\b", entry):
            missing.append(f"codept/{rel}")
    for f in sorted((REPO / "recipes").glob("*.py")):
        if not re.search(rf"\b{re.escape(f.stem)}\b", entries.get("recipes/", "")):
            missing.append(f"recipes/{f.name}")
    assert not missing, f"docs/architecture.md's Layout does not name: {missing}"


def test_headline_numbers_come_from_the_reports():
    """Every number of the README's headline table stands in a report page (results, benchmarks,
    ablations, evidence, search, languages): the one table summarises measurements, it makes none."""
    text = README.read_text(encoding="utf-8")
    table = text.split("## Headline results", 1)[1].split("\n## ", 1)[0]
    reports = "".join((REPO / "docs" / f"{p}.md").read_text(encoding="utf-8")
                      for p in ("results", "benchmarks", "ablations", "evidence", "search", "languages")
                      if (REPO / "docs" / f"{p}.md").exists())
    rows = [r for r in table.splitlines() if r.startswith("| ") and not r.startswith("| question")]
    assert len(rows) >= 5, rows
    missing = sorted({n for r in rows for n in re.findall(r"\d+(?:\.\d+)?%?", r.rsplit("](", 1)[0])
                      if not re.search(rf"(?<![\d.]){re.escape(n)}(?!\d)", reports)})
    assert not missing, f"headline numbers found in no report page: {missing}"
