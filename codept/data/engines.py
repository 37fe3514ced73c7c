"""Where prepare's per-input work runs: this machine, or a Ray cluster the user already operates.

``view_map(executor, fn, items, ...)`` has the contract of :func:`codept.parallel.isolated_map`:
(index, ok, result-or-(reason, detail)) for every item, in any order; the caller settles results in
input order, so the output does not depend on the executor.

* ``local``: :func:`codept.parallel.isolated_map`, spawned workers on this machine.
* ``ray``: the items go in batches (at most BATCH_ITEMS inputs or BATCH_BYTES of content) as Ray
  tasks of one CPU each; each task runs the same ``isolated_map`` with one spawned worker, so a
  parser that crashes, hangs or runs out of memory is the same per-input skip as on the local path
  (``worker_crash``, ``timeout``, ``too_much_memory``), never a lost task. At most 2 x the cluster's
  CPUs batches are in flight (the driver's memory is bounded by them). ``address``: a running
  cluster (``ray://host:10001``, ``auto``, or ``RAY_ADDRESS``); none: a local Ray instance is started
  for the job and stopped after it. A task the cluster itself loses (a node gone, after Ray's own
  retries) makes each of its inputs a ``worker_crash`` skip naming the error.

This module is the only import site of ``ray``. Cost per batch: one task, one spawned worker (~0.3 s
start-up: imports and the tokenizer), the batch's bytes shipped to the task and its views back
through Ray's object store. Not covered: the inputs are read, planned (content key, exact dedup,
near-dedup's LSH index over the whole corpus) and written by the driver, so the driver's disk or
network bounds the job (for a corpus larger than one machine reads, combine with
``--num-shards N --shard-index I``, one driver per part); codept must be installed on every node.
"""

from __future__ import annotations

import contextlib
import os
import sys
import types
from typing import Any, Callable, Iterable, Iterator

from codept import parallel
from codept.parallel import WorkersFailing, default_memory_limit

EXECUTORS = ("local", "ray")
BATCH_ITEMS = 256  # inputs per Ray task: amortises the task's worker start-up (~0.3 s)
BATCH_BYTES = 8 << 20  # content bytes per Ray task: bounds what one task holds


def view_map(executor: str, fn: Callable, items: Iterable, *, workers: int, timeout: float,
             init: Callable, init_args: tuple, memory_limit: int, address: str = "",
             info: dict | None = None) -> Iterator[tuple[int, bool, Any]]:
    """``isolated_map`` on `executor` (see the module docstring). `workers`, `memory_limit`: those of
    the local path; on Ray one worker per task and, for ``memory_limit=0``, each node's own derived
    limit (80% of its RAM over its CPUs). `info`: gets ``workers``, the CPUs the job ran on."""
    if info is not None:
        info["workers"] = workers
    if executor == "local":
        return parallel.isolated_map(fn, items, workers=workers, timeout=timeout, init=init, init_args=init_args,
                                     memory_limit=memory_limit)
    if executor == "ray":
        return _ray_map(fn, items, timeout=timeout, init=init, init_args=init_args, memory_limit=memory_limit,
                        address=address, info=info if info is not None else {})
    raise ValueError(f"executor={executor!r}: expected one of {EXECUTORS}")


def _ray():
    try:
        import ray
    except ImportError as e:
        raise ValueError(f"executor='ray' needs ray (pip install 'codept[ray]'): {e}") from None
    return ray


def _run_batch(fn, batch: list, timeout: float, init, init_args: tuple, memory_limit: int) -> list:
    """One Ray task: the batch's items through isolated_map with one worker; (index, ok, value)."""
    keys = [k for k, _ in batch]
    limit = memory_limit if memory_limit else default_memory_limit(os.cpu_count() or 1)
    with _plain_main():
        return [(keys[j], ok, value) for j, ok, value in
                parallel.isolated_map(fn, [item for _, item in batch], workers=1, timeout=timeout, init=init,
                                      init_args=init_args, memory_limit=limit)]


@contextlib.contextmanager
def _plain_main():
    """Spawn re-imports the parent's ``__main__`` in the child: in a Ray worker that is Ray's
    default_worker.py, which would import ray into every view worker (measured: 846 modules instead
    of 144, VmData 41 MB instead of 16, RSS 70 MB instead of 16, all under the worker's memory limit).
    The task's workers start with an empty ``__main__`` instead (a Ray worker runs one task at a
    time: nothing else sees the swap)."""
    main = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = main


def _batches(items: Iterable, max_items: int, max_bytes: int) -> Iterator[list]:
    batch, size = [], 0
    for k, item in enumerate(items):
        batch.append((k, item))
        size += _size(item)
        if len(batch) >= max_items or size >= max_bytes:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def _size(item) -> int:
    content = getattr(item[-1], "content", None) if isinstance(item, tuple) else None
    return len(content) if isinstance(content, (bytes, str)) else 0


def _ray_map(fn, items, *, timeout, init, init_args, memory_limit, address, info) -> Iterator[tuple[int, bool, Any]]:
    ray = _ray()
    own = not ray.is_initialized()
    if own:
        import logging

        try:
            ray.init(address=address or None, include_dashboard=False, log_to_driver=False,
                     logging_level=logging.WARNING, configure_logging=True)
        except (ConnectionError, RuntimeError, ValueError) as e:  # no cluster there, a bad address
            raise ValueError(f"executor='ray', ray_address={address!r}: cannot start or join a Ray cluster: "
                             f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from None
    try:
        task = ray.remote(num_cpus=1)(_run_batch)
        info["workers"] = max(1, int(ray.cluster_resources().get("CPU", 1)))
        limit = 2 * info["workers"]
        todo = _batches(items, BATCH_ITEMS, BATCH_BYTES)
        pending: dict = {}
        while True:
            while len(pending) < limit and (batch := next(todo, None)) is not None:
                pending[task.remote(fn, batch, timeout, init, init_args, memory_limit)] = [k for k, _ in batch]
            if not pending:
                return
            done, _ = ray.wait(list(pending), num_returns=1)
            keys = pending.pop(done[0])
            try:
                yield from ray.get(done[0])
            except ray.exceptions.RayTaskError as e:
                if isinstance(e.cause, WorkersFailing):  # the environment kills workers: not one bad input
                    raise WorkersFailing(str(e.cause)) from None
                raise
            except ray.exceptions.RayError as e:  # the cluster lost the task (a node, the object store)
                for k in keys:
                    yield k, False, ("worker_crash", f"ray: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
    finally:
        if own:
            ray.shutdown()
