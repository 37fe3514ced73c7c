"""Crash-safe checkpoints: DeepSpeed engine state + per-rank data-stream state, RNG and run config,
published by an atomic ``latest`` marker only once every rank's files are complete.

DeepSpeed alone (FINDINGS.md) lets rank 0 write ``latest`` before the other ranks finish, with no temp
file or fsync, and saves no RNG and no per-rank client state; a kill during a save then leaves
``latest`` naming a broken checkpoint. Layout written here::

    OUT/latest                      the tag, e.g. "step00000008" (same format as DeepSpeed's, so its
                                    tools such as zero_to_fp32.py read it)
    OUT/step00000008/               DeepSpeed's files (model states, zero_pp_rank_<r>_..._optim_states)
                     rank<r>.pt     this rank's client state (data-stream state_dict ...), RNG, config
                     rank<r>.json   this rank's manifest: size + sha256 of every file the rank wrote

:func:`save` (ALL ranks call it, like ``engine.save_checkpoint``):
  1. rank 0 draws a save id and broadcasts it; each rank deletes its own stale ``rank<r>.json``.
  2. ``engine.save_checkpoint(OUT, tag, save_latest=False)`` on every rank, with DeepSpeed's
     checkpoint engine wrapped to record which files THIS rank writes; each is fsynced.
  3. ``rank<r>.pt`` (temp + fsync + rename), then ``rank<r>.json`` listing size and sha256 of the rank's
     files and the save id (temp + fsync + rename, directory fsynced).
  4. Barrier. Rank 0 reads every ``rank<i>.json`` (i < world), checks the save id and that every
     listed file exists with its size, then writes ``latest.tmp``, fsyncs it, ``os.replace``s it onto
     ``latest`` and fsyncs ``OUT``. Optionally deletes all but the newest ``keep_last`` checkpoints.
  5. Rank 0's verdict is broadcast; every rank raises if it failed. A kill anywhere before the rename
     leaves ``latest`` on the previous complete checkpoint.
:func:`load` (all ranks): reads ``latest``; each rank checks every file's size and its own files'
sha256, then reads its own ``rank<r>.pt`` (failures gathered so all ranks raise together);
``engine.load_checkpoint``; returns a :class:`Resume` with the rank's client state and RNG.
On another world size (N ranks saved, M load; issue 23.6):
  1. the sha256 of old rank i's files is checked by new rank i mod M; every new rank reads every
     old ``rank<i>.pt`` (:attr:`Resume.peers`: the client states, e.g. for
     codept.data.stream.resplit through :meth:`Resume.stream_state`);
  2. ZeRO partitions the fp32 weights and Adam moments per rank, and DeepSpeed 0.19.8 refuses to
     load them on another data-parallel size ("Automatic adjustment of ZeRO's optimizer state
     partitioning with a new world size is not currently supported"; its ZeRO-1/2
     ``elastic_checkpoint`` path sits behind that check, and zero_to_fp32 keeps the weights only).
     So rank 0 converts the checkpoint once to a DeepSpeed universal checkpoint
     (deepspeed.checkpoint.ds_to_universal, in-process, one worker: one folder per parameter with
     its fp32 weights, exp_avg, exp_avg_sq and step, rank-independent) into ``OUT/<tag>/universal``
     (written under a temporary name, renamed when complete, reused by a later resume of the same
     save), and every rank loads it with ``checkpoint.load_universal`` set on its engine for the
     load only: weights, moments, step and lr schedule as saved (ZeRO 1, 2 and 3);
  3. the RNG is not restored (:attr:`Resume.rng` is None): N ranks' dropout streams do not map to
     M ranks; the caller reseeds (:func:`seed_all` with the step);
  4. :attr:`Resume.changes` says what changed, for the log.
  A checkpoint that cannot be honoured on M ranks is refused with the reason: DeepSpeed cannot
  convert it, or a stream state of layout 1 (codept.data.stream: documents sharded per rank). Every file is read with ``torch.load(weights_only=True)``: ``rank<r>.pt``
holds plain data and tensors only (RNG states as tensors, format 2), DeepSpeed's files are read
through its checkpoint engine with DeepSpeed's own few types allowed by name
(codept.train.engine.checkpoint_globals). A pickle planted in any of them is refused before it
runs, whatever the manifest says (the sha256 only catches damage, not an attacker who rewrites it).
Failures are :class:`CheckpointError` (one message, no traceback, in the recipes).

RNG must be restored AFTER the data iterator exists: creating a torch DataLoader iterator draws from
torch's global RNG, which the uninterrupted run did once at its start. :func:`resume_iterator` does it
in the right order (fetch the first item, then :func:`restore_rng`); call it, or ``restore_rng``
yourself at that moment, and before the first forward.

DeepSpeed's converter and its universal loader call ``torch.load(weights_only=False)``: while they
run, ``torch.load`` is replaced by the same allow-list load, so a planted pickle runs no code there
either.

Cost: one extra read of each rank's own files for the hash (about 1 GB/s); small JSON/torch files.
A world-size change: one conversion (reads every ZeRO file, writes 3 x fp32 model size to disk;
seconds for the CPU presets) on rank 0 while the others wait.
NOT covered: node-local (non-shared) checkpoint storage (rank 0 checks the other ranks' files on
disk), DeepSpeed's decoupled/async checkpoint engines (refused), NVMe offload and MoE checkpoints
on another world size (DeepSpeed's converter; refused with its error), a bit-exact continuation
across a world-size change (another reduction order, reseeded dropout).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import itertools
import json
import os
import random
import re
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np
import torch

from codept.data.sources import sha256_file

FORMAT = 2  # 2: rank files hold plain data and tensors only (1: RNG states as numpy objects)
# what a format-1 rank file needs unpickled besides plain data and tensors: numpy arrays (its numpy
# RNG state). Allowed by name; nothing else a pickle could call is (torch.load(weights_only=True)).
try:
    from numpy._core.multiarray import _reconstruct  # numpy 2
except ImportError:  # numpy 1
    from numpy.core.multiarray import _reconstruct
_FORMAT1_GLOBALS = [np.ndarray, np.dtype, type(np.dtype(np.uint32)), _reconstruct]


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be resumed (incomplete, corrupt, tampered with, another world size):
    the message names the file and the rule; recipes print it without a traceback
    (codept.train.loop.guarded)."""
TAG_RE = re.compile(r"^step(\d+)$")


def tag_for(step: int) -> str:
    return f"step{step:08d}"


# ------------------------------------------------------------------------------------------------
# RNG


def seed_all(seed: int, rank: int = 0, step: int = 0) -> None:
    """Seed python, numpy and torch (CPU + CUDA) from (seed, rank). Call with rank=0 on every rank
    before building the model (identical init everywhere; ZeRO-3 needs it), then with the real rank
    (distinct dropout streams per rank); ``step`` > 0: the streams of a run resumed at that step on
    another world size (:class:`Resume` ``rng`` None), distinct from those of the start."""
    s = int(np.random.SeedSequence([seed, rank] + ([step] if step else [])).generate_state(1)[0])
    random.seed(s)
    np.random.seed(s)
    torch.manual_seed(s)  # also seeds every CUDA device


def capture_rng() -> dict:
    """python's, numpy's and torch's global RNG states as plain data and tensors only (a rank file
    then loads with ``torch.load(weights_only=True)``: no pickled objects)."""
    version, keys, gauss = random.getstate()
    name, mt, pos, has_gauss, cached = np.random.get_state()
    state = {"python": {"version": version, "keys": torch.tensor(keys, dtype=torch.int64), "gauss": gauss},
             "numpy": {"name": str(name), "keys": torch.from_numpy(mt.astype(np.int64)), "pos": int(pos),
                       "has_gauss": int(has_gauss), "cached_gaussian": float(cached)},
             "torch": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state()  # the current device: one device per rank
    return state


def restore_rng(state: dict) -> None:
    """Restore what :func:`capture_rng` saved (see the module docstring for WHEN); also the format-1
    states of older checkpoints (python's tuple, numpy's tuple with an array)."""
    py, npy = state["python"], state["numpy"]
    if isinstance(py, dict):
        py = (py["version"], tuple(int(x) for x in py["keys"].tolist()), py["gauss"])
    if isinstance(npy, dict):
        npy = (npy["name"], npy["keys"].numpy().astype(np.uint32), npy["pos"], npy["has_gauss"],
               npy["cached_gaussian"])
    random.setstate(py)
    np.random.set_state(npy)
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"])


# ------------------------------------------------------------------------------------------------
# files


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)



def latest_tag(out: str | os.PathLike) -> str | None:
    p = Path(out) / "latest"
    if not p.is_file():
        return None
    tag = p.read_text().strip()
    if not tag or "/" in tag or tag in (".", ".."):
        raise ValueError(f"{p}: holds {tag!r}, not a checkpoint tag")
    return tag


def read_manifests(tag_dir: Path) -> dict[int, dict]:
    out = {}
    for p in tag_dir.glob("rank*.json"):
        m = re.fullmatch(r"rank(\d+)\.json", p.name)
        if m:
            out[int(m.group(1))] = json.loads(p.read_text())
    return out


def check_files(tag_dir: Path, manifest: dict, hashes: bool) -> list[str]:
    """Problems with the files a rank manifest lists (missing, wrong size, wrong sha256)."""
    bad = []
    for name, meta in manifest["files"].items():
        p = tag_dir / name
        if not p.is_file():
            bad.append(f"{p}: missing (rank {manifest['rank']} wrote it)")
        elif p.stat().st_size != meta["size"]:
            bad.append(f"{p}: {p.stat().st_size} bytes, manifest of rank {manifest['rank']} says {meta['size']}")
        elif hashes and sha256_file(p) != meta["sha256"]:
            bad.append(f"{p}: sha256 differs from the manifest of rank {manifest['rank']}")
    return bad


# ------------------------------------------------------------------------------------------------
# save


def _config_dict(config):
    if config is None:
        return None
    return config.to_dict() if hasattr(config, "to_dict") else dict(config)


def save(engine, out: str | os.PathLike, step: int, client_state: dict, *, config=None,
         keep_last: int = 0) -> Path:
    """Checkpoint after optimizer step ``step`` (all ranks call it; see the module docstring).
    ``client_state``: THIS rank's state, e.g. ``{"stream": stream.state_dict()}``; ``config``: the
    RunConfig (saved in every rank file and manifest). Returns the checkpoint folder. Saving a step
    that ``latest`` already names is a no-op (the state is the same by construction)."""
    from codept.train import engine as E  # here, not at the top: latest_tag & co. need no deepspeed

    out = Path(out)
    ce = engine.checkpoint_engine
    if ce.is_decoupled():
        raise ValueError(f"checkpoint engine {type(ce).__name__} is decoupled (async): codept.train.checkpoint "
                         "needs the files written when save_checkpoint returns; use the default torch engine")
    tag = tag_for(step)
    tag_dir = out / tag
    if latest_tag(out) == tag:
        E.barrier()
        return tag_dir
    r, world = E.rank(), E.world_size()
    save_id = E.broadcast_object(uuid.uuid4().hex if r == 0 else None)
    tag_dir.mkdir(parents=True, exist_ok=True)
    (tag_dir / f"rank{r}.json").unlink(missing_ok=True)

    # 2. DeepSpeed's files, recording which ones this rank writes
    written: list[Path] = []
    had_own = "save" in ce.__dict__
    orig = ce.save

    def recording_save(state_dict, path):
        orig(state_dict, path)
        written.append(Path(path))

    ce.save = recording_save
    try:
        engine.save_checkpoint(str(out), tag=tag, client_state={"codept_step": step}, save_latest=False)
    finally:
        if had_own:
            ce.save = orig
        else:
            del ce.save
    for p in written:
        _fsync_file(p)

    # 3. this rank's state and manifest
    cfg = _config_dict(config)
    own = tag_dir / f"rank{r}.pt"
    state = {"format": FORMAT, "step": step, "tag": tag, "rank": r, "world": world, "save_id": save_id,
             "client_state": client_state, "rng": capture_rng(), "config": cfg}
    tmp = own.with_name(own.name + ".tmp")
    torch.save(state, tmp)
    _fsync_file(tmp)
    os.replace(tmp, own)
    files = {}
    for p in [*written, own]:
        name = os.path.relpath(p, tag_dir)
        files[name] = {"size": p.stat().st_size, "sha256": sha256_file(p)}
    manifest = {"format": FORMAT, "step": step, "tag": tag, "rank": r, "world": world, "save_id": save_id,
                "files": files, "config": cfg}
    _atomic_write_bytes(tag_dir / f"rank{r}.json", json.dumps(manifest, indent=1, sort_keys=True).encode())

    # 4. all ranks done -> rank 0 verifies and publishes
    E.barrier()
    problems: list[str] = []
    if r == 0:
        manifests = read_manifests(tag_dir)
        for i in range(world):
            m = manifests.get(i)
            if m is None:
                problems.append(f"{tag_dir}/rank{i}.json missing")
            elif m["save_id"] != save_id:
                problems.append(f"{tag_dir}/rank{i}.json is from another save (id {m['save_id']} != {save_id})")
            else:
                problems += check_files(tag_dir, m, hashes=False)
        if not problems:
            _atomic_write_bytes(out / "latest", tag.encode())
            if keep_last:
                _prune(out, keep_last, tag)
    problems = E.broadcast_object(problems)
    E.barrier()
    if problems:
        raise RuntimeError(f"checkpoint {tag_dir} incomplete, `latest` not moved: " + "; ".join(problems))
    return tag_dir


def _prune(out: Path, keep_last: int, current: str) -> None:
    tags = sorted((int(m.group(1)), p) for p in out.iterdir() if p.is_dir() and (m := TAG_RE.match(p.name)))
    for _, p in tags[:-keep_last]:
        if p.name != current:
            shutil.rmtree(p, ignore_errors=True)


# ------------------------------------------------------------------------------------------------
# load


@dataclass
class Resume:
    step: int
    """Optimizer steps done; the next step to run is ``step`` (0-based) / ``step + 1`` (1-based)."""
    tag: str
    path: Path
    client_state: dict
    """This rank's client state as passed to :func:`save` (e.g. the data-stream state_dict)."""
    rng: dict
    """For :func:`restore_rng` / :func:`resume_iterator` (after the data iterator exists)."""
    config: dict | None = None
    world: int = 1
    """The world size that saved the checkpoint."""
    extra: dict = field(default_factory=dict)
    peers: list = field(default_factory=list)
    """On another world size: the client state of every rank that saved, by rank ([] otherwise)."""
    changes: list = field(default_factory=list)
    """Lines for the log: what a resume on another world size changed ([] otherwise)."""

    def stream_state(self, rank: int, world: int, key: str = "stream") -> dict:
        """This rank's data-stream state: its own on the same world size, else the saved ranks'
        states re-split for ``world`` ranks (codept.data.stream.resplit); CheckpointError when they
        cannot be (a stream of layout 1), the same on every rank."""
        if world == self.world:
            return self.client_state[key]
        from codept.data.stream import resplit

        try:
            return resplit([cs[key] for cs in self.peers], world)[rank]
        except (ValueError, KeyError) as e:
            raise CheckpointError(f"checkpoint {self.path} was saved by {self.world} ranks, this job has {world}: "
                                  f"its data stream cannot be re-split ({e})") from None

    def config_changes(self, config) -> dict:
        """{field: (saved, now)} for the fields that differ from the saved run config."""
        now, then = _config_dict(config) or {}, self.config or {}
        return {k: (then.get(k), v) for k, v in now.items()
                if k in then and _norm(then.get(k)) != _norm(v)} | {k: (then[k], None) for k in then if k not in now}


def _norm(v):
    return list(v) if isinstance(v, tuple) else v


def load(engine, out: str | os.PathLike) -> Resume | None:
    """Resume from ``OUT/latest`` (all ranks call it); None when there is no ``latest`` (fresh run).
    Raises CheckpointError on a world-size change and on incomplete, corrupt or tampered files (a
    rank file that is not plain data and tensors is refused before it is unpickled)."""
    from codept.train import engine as E

    out = Path(out)
    tag = latest_tag(out)
    if tag is None:
        return None
    tag_dir = out / tag
    r, world = E.rank(), E.world_size()
    manifests = read_manifests(tag_dir)
    if 0 not in manifests:
        raise CheckpointError(f"{out}/latest names {tag}, but {tag_dir}/rank0.json is missing")
    saved_world, save_id = manifests[0]["world"], manifests[0]["save_id"]
    other = saved_world != world  # another world size: module docstring, "On another world size"
    problems = []
    for i in range(saved_world):
        m = manifests.get(i)
        if m is None or m["save_id"] != save_id:
            problems.append(f"{tag_dir}/rank{i}.json missing or from another save")
        else:
            problems += check_files(tag_dir, m, hashes=(i % world == r) if other else (i == r))
    states: dict[int, dict] = {}
    if not problems:  # codept's own files, before anything of DeepSpeed's is read
        for i in range(saved_world) if other else [r]:
            try:
                st = read_rank_state(tag_dir / f"rank{i}.pt")
                if st["rank"] != i or st["save_id"] != save_id:
                    problems.append(f"{tag_dir}/rank{i}.pt is for rank {st['rank']} / save {st['save_id']}")
                states[i] = st
            except CheckpointError as e:
                problems.append(str(e))
    problems = [p for ps in E.all_gather_object(problems) for p in ps]  # every rank raises together
    if problems:
        raise CheckpointError(f"checkpoint {tag_dir} (named by {out}/latest) fails verification: "
                              + "; ".join(sorted(set(problems))))
    if not other:
        path = _load_deepspeed(engine, out, tag, E.checkpoint_globals())
        if path is None:
            raise CheckpointError(f"DeepSpeed could not load {tag_dir} (engine.load_checkpoint returned None)")
        E.barrier()
        state = states[r]
        return Resume(step=int(state["step"]), tag=tag, path=tag_dir, client_state=state["client_state"],
                      rng=state["rng"], config=state["config"], world=saved_world)
    changes = _load_other_world(engine, tag_dir, tag, save_id, saved_world, world)
    state = states[0]
    return Resume(step=int(state["step"]), tag=tag, path=tag_dir, client_state=None, rng=None,
                  config=state["config"], world=saved_world,
                  peers=[states[i]["client_state"] for i in range(saved_world)], changes=changes)


UNIVERSAL = "universal"  # OUT/<tag>/universal: the checkpoint as a DeepSpeed universal checkpoint


def _load_other_world(engine, tag_dir: Path, tag: str, save_id: str, saved_world: int, world: int) -> list[str]:
    """Steps 2 and 4 of "On another world size" (module docstring): the weights and optimizer state
    of ``tag_dir`` (saved by ``saved_world`` ranks) into ``engine`` (``world`` ranks); returns the
    log lines."""
    from codept.train import engine as E

    allowed = E.checkpoint_globals()
    stage = engine.zero_optimization_stage()
    if stage == 0:  # nothing partitioned: DeepSpeed's own files load on any world size
        path = _load_deepspeed(engine, tag_dir.parent, tag, allowed)
        if path is None:
            raise CheckpointError(f"DeepSpeed could not load {tag_dir} (engine.load_checkpoint returned None)")
        E.barrier()
        return [f"resume: world size {saved_world} -> {world}: weights and optimizer state as saved (no ZeRO "
                "partitioning)"]
    univ = tag_dir / UNIVERSAL
    error = ""
    if E.rank() == 0:
        error = convert_universal(tag_dir, save_id, allowed)
    error = E.broadcast_object(error)
    if error:
        raise CheckpointError(f"checkpoint {tag_dir} was saved by {saved_world} ranks, this job has {world}: "
                              f"DeepSpeed could not convert it to a universal checkpoint ({error}); resume with "
                              f"{saved_world} ranks")
    cfg = engine._config
    before = cfg.load_universal_checkpoint
    cfg.load_universal_checkpoint = True  # for this load only (DeepSpeed reads it at load time)
    try:
        with allow_listed_torch_load(allowed):
            path = _load_deepspeed(engine, univ, tag, allowed)
    finally:
        cfg.load_universal_checkpoint = before
    if path is None:
        raise CheckpointError(f"DeepSpeed could not load the universal checkpoint {univ / tag}")
    E.barrier()
    return [f"resume: world size {saved_world} -> {world}: ZeRO-{stage} weights and optimizer state "
            f"re-partitioned through the DeepSpeed universal checkpoint {univ}"]


def convert_universal(tag_dir: Path, save_id: str, allowed: list) -> str:
    """``tag_dir`` as a DeepSpeed universal checkpoint in ``tag_dir/universal/<tag>`` (rank 0; kept
    and reused for the same save id); '' on success, else DeepSpeed's error in one line."""
    univ = tag_dir / UNIVERSAL
    marker = univ / "codept_save_id"
    if marker.is_file() and marker.read_text().strip() == save_id:
        return ""
    from codept.train.engine import ds_to_universal  # the one deepspeed import site

    tmp = tag_dir / f"{UNIVERSAL}.tmp{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    args = argparse.Namespace(input_folder=str(tag_dir), output_folder=str(tmp / tag_dir.name),
                              num_extract_workers=1, num_merge_workers=1, keep_temp_folder=False, strict=True,
                              inject_missing_state=True)
    log = io.StringIO()
    try:
        with allow_listed_torch_load(allowed), contextlib.redirect_stdout(log):
            ds_to_universal().main(args)
    except Exception as e:  # DeepSpeed raises what it raises (AssertionError, ValueError, NotImplementedError ...)
        shutil.rmtree(tmp, ignore_errors=True)
        return f"{type(e).__name__}: {e}".splitlines()[0][:300]
    (tmp / "codept_save_id").write_text(save_id)
    shutil.rmtree(univ, ignore_errors=True)
    os.replace(tmp, univ)
    _fsync_dir(tag_dir)
    return ""


_TORCH_LOAD = torch.load  # the real one (allow_listed_torch_load replaces the attribute for a while)


@contextlib.contextmanager
def allow_listed_torch_load(allowed: list):
    """While inside: every ``torch.load`` (DeepSpeed's converter and universal loader pass
    ``weights_only=False``) is :func:`load_allowed`: plain data, tensors and the ``allowed`` types."""
    def load(f, map_location=None, *args, **kwargs):
        return load_allowed(f, allowed, map_location)

    torch.load = load
    try:
        yield
    finally:
        torch.load = _TORCH_LOAD


def _load_deepspeed(engine, out: Path, tag: str, allowed: list):
    """``engine.load_checkpoint`` with DeepSpeed's checkpoint engine reading every file by
    :func:`load_allowed` (DeepSpeed's own types `allowed` by name): a file that needs any other
    global is refused unread."""
    ce = engine.checkpoint_engine
    had_own = "load" in ce.__dict__
    orig = ce.load
    ce.load = lambda path, map_location=None: load_allowed(path, allowed, map_location)
    try:
        path, _ = engine.load_checkpoint(str(out), tag=tag, load_optimizer_states=True,
                                         load_lr_scheduler_states=True)
    finally:
        if had_own:
            ce.load = orig
        else:
            del ce.load
    return path


def load_allowed(path: str | os.PathLike, allowed: list = (), map_location="cpu"):
    """``torch.load(path, weights_only=True)`` with the classes `allowed` by name: plain data, tensors
    and those only, whatever a manifest says, so a planted pickle runs no code (CheckpointError
    naming the file)."""
    import pickle

    try:
        with torch.serialization.safe_globals(list(allowed)):
            return _TORCH_LOAD(path, map_location=map_location, weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, OSError, EOFError, ValueError, AttributeError) as e:
        lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
        planted = [ln for ln in lines if "GLOBAL" in ln]  # torch names the global it refused to call
        if planted:
            raise CheckpointError(f"{path}: holds more than plain data, tensors and the allowed types "
                                  f"({planted[0][:200]}), refused unread") from None
        detail = next((ln for ln in lines if ln.startswith("Unsupported")), lines[-1] if lines else type(e).__name__)
        raise CheckpointError(f"{path}: not a readable torch checkpoint ({detail[:200]})") from None


def load_plain(path: str | os.PathLike):
    """A file of codept's own (a rank file) by :func:`load_allowed`: plain data and tensors; format-1
    rank files (numpy RNG states) with numpy's array types allowed by name, nothing more."""
    return load_allowed(path, _FORMAT1_GLOBALS)


def read_rank_state(path: Path) -> dict:
    """A rank file (``rank<r>.pt``) of this checkpoint layout, by :func:`load_plain`."""
    state = load_plain(path)
    if not isinstance(state, dict) or not {"step", "rank", "save_id", "client_state", "rng"} <= set(state):
        raise CheckpointError(f"{path}: not a codept rank file (no step/rank/save_id/client_state/rng)")
    return state


def resume_iterator(iterable: Iterable, resume: Resume | None) -> Iterator:
    """Start ``iterable`` (creating, e.g., its DataLoader iterator, which draws from torch's RNG), fetch
    its first item, THEN restore the saved RNG; yields the first item and the rest. With
    ``resume=None`` it only starts the iterator, so fresh and resumed runs draw the same way."""
    it = iter(iterable)
    first = next(it)
    if resume is not None and resume.rng is not None:  # None: another world size (reseeded instead)
        restore_rng(resume.rng)
    return itertools.chain([first], it)
