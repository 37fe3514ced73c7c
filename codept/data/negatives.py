"""Mined hard negatives stored beside prepared code views: the sidecar ``VIEWS/negatives/<name>/``.

``codept mine-negatives VIEWS --miner bm25|MODEL`` (codept.probe.mine) writes it once per corpus;
``code_doc negatives=mined miner=<name>`` (codept.objectives.code_doc) reads it. This module is the
format only (pure NumPy + JSON, no scorer), so the objectives floor can read what the probe floor
writes.

Layout of ``VIEWS/negatives/<name>/``:
  negatives.npz   the arrays below (np.savez, no pickle)
  summary.json    the views key it was mined for, the miner and its settings, every count
  DONE            written last: the sidecar's own key (views key + miner + settings), so a killed
                  mining run never looks complete and an equal request is served without work
Arrays (Q queries = documented definitions with a summary, K = the ``k`` kept per query):
  paths      (P,) str     the view paths named below, sorted (a view's path is its key in the folder)
  q_path     (Q,) int32   the query's view (index into paths); ``q_row`` (Q,) int32 its row of
                          ``view.functions``; queries sorted by (q_path, q_row)
  pos_score  (Q,) float32 the miner's score of the query's own code
  neg_path, neg_row (Q, K) int32   the kept negatives, best first (-1: fewer than K kept)
  neg_span   (Q, K, 2) int32       their definitions' token ranges [start, end) (checked when read)
  neg_score  (Q, K) float32
Validity: the sidecar is read only while the folder's ``DONE`` still holds the views key it was
mined for (:class:`StaleNegatives` otherwise: the views changed, mine again); a missing sidecar is
:class:`NoNegatives`, naming the folder and the command that makes it.
Cost: reading = one np.load of ~20 bytes x K per query (stdlib, 7 k queries, K 8: ~1.2 MB) plus a
dict of the paths; :meth:`MinedNegatives.of_view` is a binary search per view.
Not covered: views folders that cannot be written (the sidecar lives inside the folder), views
opened from a table or a dataset that no prepared folder holds (nothing to read the sidecar from).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np

SIDECAR = "negatives"  # VIEWS/<SIDECAR>/<name>/
ARRAYS = ("paths", "q_path", "q_row", "pos_score", "neg_path", "neg_row", "neg_span", "neg_score")


class NegativesError(ValueError):
    """Mined negatives that cannot be used: the message names the folder and what to run."""


class NoNegatives(NegativesError):
    """No (complete) sidecar of that name beside the views."""


class StaleNegatives(NegativesError):
    """A sidecar mined for other views than the folder holds now."""


def sidecar_dir(views_dir: str | Path, name: str) -> Path:
    return Path(views_dir) / SIDECAR / name


def views_key(views_dir: str | Path) -> str:
    """The content key in the folder's ``DONE`` (codept.data.jobs.mark_done): what the views are."""
    done = Path(views_dir) / "DONE"
    if not done.is_file():
        raise NoNegatives(f"{views_dir}: not a complete prepared views folder (no DONE marker)")
    return done.read_text().strip()


def command(views_dir: str | Path, name: str) -> str:
    """The command that mines the sidecar `name` of `views_dir` (named in every error)."""
    miner = "bm25" if name == "bm25" else "MODEL_DIR"
    return f"codept mine-negatives {views_dir} --miner {miner}" + ("" if name in ("bm25",) else f" --name {name}")


def available(views_dir: str | Path) -> list[str]:
    """Names of the complete sidecars beside the views."""
    root = Path(views_dir) / SIDECAR
    return sorted(p.name for p in root.iterdir() if (p / "DONE").is_file()) if root.is_dir() else []


def complete(views_dir: str | Path, name: str, key: str | None = None) -> bool:
    """A finished sidecar `name` (for the sidecar key `key`, when given)."""
    done = sidecar_dir(views_dir, name) / "DONE"
    return done.is_file() and (key is None or done.read_text().strip() == key)


def write(views_dir: str | Path, name: str, arrays: dict, summary: dict, key: str) -> Path:
    """Write the sidecar `name` (a temporary folder renamed over the old one; DONE last)."""
    missing = [a for a in ARRAYS if a not in arrays]
    if missing:
        raise ValueError(f"negatives sidecar: arrays {missing} missing")
    if not name or "/" in name or name.startswith("."):
        raise ValueError(f"negatives name {name!r}: a plain folder name expected (letters, digits, ._-)")
    final = sidecar_dir(views_dir, name)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.parent / f".tmp-{name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    np.savez(tmp / "negatives.npz", **{a: np.asarray(arrays[a]) for a in ARRAYS})
    (tmp / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (tmp / "DONE").write_text(key + "\n")
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    return final


def read_summary(views_dir: str | Path, name: str) -> dict:
    return json.loads((sidecar_dir(views_dir, name) / "summary.json").read_text())


class MinedNegatives:
    """The sidecar `name` of one views folder, checked against the folder's current views key."""

    def __init__(self, views_dir: str | Path, name: str):
        self.views_dir, self.name = Path(views_dir), name
        here = sidecar_dir(views_dir, name)
        if not (here / "DONE").is_file():
            have = available(views_dir)
            raise NoNegatives(f"code_doc negatives='mined': no mined negatives {name!r} beside the views in "
                              f"{views_dir} ({'sidecars there: ' + ', '.join(have) if have else 'none mined'}); "
                              f"make them with `{command(views_dir, name)}`")
        self.summary = json.loads((here / "summary.json").read_text())
        now = views_key(views_dir)
        if self.summary.get("views_key") != now:
            raise StaleNegatives(f"code_doc negatives='mined': the negatives in {here} were mined for views "
                                 f"{self.summary.get('views_key')}, and {views_dir} now holds views {now}; "
                                 f"mine them again: `{command(views_dir, name)}`")
        with np.load(here / "negatives.npz", allow_pickle=False) as z:
            a = {k: z[k] for k in ARRAYS}
        self.paths = [str(p) for p in a["paths"].tolist()]
        self._path_id = {p: i for i, p in enumerate(self.paths)}
        self.q_path, self.q_row = a["q_path"].astype(np.int64), a["q_row"].astype(np.int64)
        self.neg_path, self.neg_row, self.neg_span = a["neg_path"], a["neg_row"], a["neg_span"]
        self.neg_score, self.pos_score = a["neg_score"], a["pos_score"]
        self._key = self.q_path * (1 << 32) + self.q_row  # sorted: the queries' order

    def __len__(self) -> int:
        return len(self.q_path)

    def of(self, path: str, row: int) -> list[tuple[str, int, int, int]]:
        """The kept negatives of the definition `row` of view `path`, best first: (path, function
        row, start token, end token) each; [] when it was no query (or none was kept)."""
        pid = self._path_id.get(path)
        if pid is None:
            return []
        k = pid * (1 << 32) + int(row)
        i = int(np.searchsorted(self._key, k))
        if i == len(self._key) or self._key[i] != k:
            return []
        out = []
        for p, r, (s, e) in zip(self.neg_path[i].tolist(), self.neg_row[i].tolist(), self.neg_span[i].tolist()):
            if p >= 0:
                out.append((self.paths[p], r, s, e))
        return out
