"""In-process pieces of codept.train.checkpoint: manifests catch truncated / corrupt / missing files,
`latest` parsing, atomic writes, RNG capture/restore and the order resume_iterator restores it in.
The multi-rank save/load paths run for real in tests/test_train_ds.py."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch

from codept.train import checkpoint as ckpt
from codept.train.config import RunConfig


def _manifest(tmp_path, names):
    files = {}
    for n in names:
        p = tmp_path / n
        p.write_bytes(n.encode() * 100)
        files[n] = {"size": p.stat().st_size, "sha256": ckpt.sha256_file(p)}
    return {"rank": 1, "files": files}


def test_check_files_catches_missing_truncated_and_corrupt(tmp_path):
    m = _manifest(tmp_path, ["a.pt", "b.pt", "c.pt"])
    assert ckpt.check_files(tmp_path, m, hashes=True) == []
    (tmp_path / "a.pt").unlink()
    with open(tmp_path / "b.pt", "r+b") as f:
        f.truncate(10)
    data = bytearray((tmp_path / "c.pt").read_bytes())
    data[0] ^= 1
    (tmp_path / "c.pt").write_bytes(bytes(data))
    problems = ckpt.check_files(tmp_path, m, hashes=True)
    assert any("a.pt: missing" in p for p in problems)
    assert any("b.pt: 10 bytes" in p for p in problems)
    assert any("c.pt: sha256 differs" in p for p in problems)
    assert len(ckpt.check_files(tmp_path, m, hashes=False)) == 2  # same size: only the hash sees c.pt


def test_latest_tag(tmp_path):
    assert ckpt.latest_tag(tmp_path) is None
    ckpt._atomic_write_bytes(tmp_path / "latest", b"step00000008")
    assert ckpt.latest_tag(tmp_path) == "step00000008"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest"]  # no temp file left
    (tmp_path / "latest").write_text("../elsewhere")
    with pytest.raises(ValueError, match="not a checkpoint tag"):
        ckpt.latest_tag(tmp_path)


def test_read_manifests(tmp_path):
    for r in (0, 1):
        (tmp_path / f"rank{r}.json").write_text(json.dumps({"rank": r}))
    (tmp_path / "rank1.json.tmp123").write_text("partial")
    assert sorted(ckpt.read_manifests(tmp_path)) == [0, 1]


def test_rng_capture_restore_round_trip():
    ckpt.seed_all(3, rank=1)
    state = ckpt.capture_rng()
    a = (random.random(), np.random.rand(), torch.rand(3))
    random.random(), np.random.rand(), torch.rand(5)  # move on
    ckpt.restore_rng(state)
    b = (random.random(), np.random.rand(), torch.rand(3))
    assert a[0] == b[0] and a[1] == b[1] and torch.equal(a[2], b[2])


def test_seed_all_differs_by_rank():
    ckpt.seed_all(0, 0)
    x = torch.rand(4)
    ckpt.seed_all(0, 1)
    assert not torch.equal(x, torch.rand(4))


class _DrawsOnIter:
    """Like a torch DataLoader: creating the iterator draws from torch's global RNG."""

    def __iter__(self):
        torch.empty((), dtype=torch.int64).random_()
        return iter(range(100))


def test_resume_iterator_restores_rng_after_the_iterator_draws():
    torch.manual_seed(0)
    saved = ckpt.capture_rng()
    expect = torch.rand(3)
    resume = ckpt.Resume(step=4, tag="step00000004", path=None, client_state={}, rng=saved)
    torch.manual_seed(123)
    it = ckpt.resume_iterator(_DrawsOnIter(), resume)
    assert torch.equal(torch.rand(3), expect)  # the iterator's draw happened before the restore
    assert list(it)[:3] == [0, 1, 2]  # the first item is not lost


def test_resume_config_changes():
    saved = json.loads(json.dumps(RunConfig(lr=1e-3, betas=(0.9, 0.98)).to_dict()))
    r = ckpt.Resume(step=1, tag="t", path=None, client_state={}, rng={}, config=saved)
    assert r.config_changes(RunConfig(lr=1e-3, betas=(0.9, 0.98))) == {}
    changed = r.config_changes(RunConfig(lr=2e-3, betas=(0.9, 0.98), steps=5))
    assert changed == {"lr": (1e-3, 2e-3), "steps": (1000, 5)}


def test_tag_for_sorts_by_step():
    tags = [ckpt.tag_for(s) for s in (4, 12, 100, 8)]
    assert sorted(tags) == [ckpt.tag_for(s) for s in (4, 8, 12, 100)]
    assert all(ckpt.TAG_RE.match(t) for t in tags)


def test_prune_keeps_the_newest_and_the_current(tmp_path):
    for s in (4, 8, 12, 16):
        (tmp_path / ckpt.tag_for(s)).mkdir()
    (tmp_path / "other").mkdir()
    ckpt._prune(tmp_path, 2, ckpt.tag_for(16))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other", ckpt.tag_for(12), ckpt.tag_for(16)]
