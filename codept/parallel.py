"""Run a function over many inputs in killable worker processes.

Parsing untrusted code can hang (pathological grammars states, giant files) or crash the interpreter
(native stack overflow). ``isolated_map`` keeps that out of the main process:

1. ``workers`` processes are started with the ``spawn`` method (``fork`` after the Rust tokenizer
   has started threads can deadlock); each runs ``init(*init_args)`` once, then serves items.
2. The parent pulls items lazily from the iterable, sends one at a time to each idle worker and
   waits on all pipes at once (memory: only in-flight items, never the whole input).
3. A worker that exceeds ``timeout`` seconds on an item is killed (SIGKILL) and replaced; a worker
   that dies (segfault, OOM kill) is replaced. Either way the item is reported as failed with a
   reason (``timeout`` / ``worker_crash``), never lost and never retried.
4. Results are yielded as ``(index, ok, value)`` in completion order; ``ok`` False means ``value``
   is ``(reason, detail)``. An exception raised by ``fn`` is caught in the worker and reported as
   ``(type name, message)`` unless ``fn`` handles it.
5. A broken pool is an error, not a skip per item: if ``init`` raises in a worker, or the first
   ``max_initial_crashes`` items all crash their workers before any item succeeds (a killed or
   misconfigured environment, not bad input), :class:`WorkersFailing` is raised with the cause.
Cost: a spawn (~1 s of imports) per worker and per replacement; pickling of each result.
Not covered: memory limits (use the OS: cgroups / ulimit), retries.
"""

from __future__ import annotations

import multiprocessing as mp
import time
import traceback
from multiprocessing.connection import wait
from typing import Any, Callable, Iterable, Iterator


class WorkersFailing(RuntimeError):
    """The worker processes cannot do any work (init fails, or every item so far crashed a worker)."""


def _serve(conn, init, init_args, fn) -> None:
    try:
        state = init(*init_args) if init else None
    except Exception as e:  # told to the parent with its first task, which raises WorkersFailing
        conn.send(("init_failed", f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=5)}"))
        try:
            conn.recv()  # stay alive until the parent has sent a task (a send to a dead pipe would fail)
        except (EOFError, OSError):
            pass
        return
    while True:
        msg = conn.recv()
        if msg is None:
            return
        idx, item = msg
        try:
            conn.send((idx, True, fn(state, item)))
        except Exception as e:  # reported, the worker lives on
            conn.send((idx, False, (type(e).__name__, f"{e}\n{traceback.format_exc(limit=3)}")))


class _Worker:
    def __init__(self, ctx, init, init_args, fn):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child, init, init_args, fn), daemon=True)
        self.proc.start()
        child.close()
        self.task: int | None = None
        self.started = 0.0
        self.warm = False  # has returned a result: start-up imports are done

    def kill(self) -> None:
        self.proc.kill()
        self.proc.join()
        self.conn.close()


def isolated_map(
    fn: Callable[[Any, Any], Any],
    items: Iterable[Any],
    *,
    workers: int,
    timeout: float,
    init: Callable[..., Any] | None = None,
    init_args: tuple = (),
    startup_timeout: float = 120.0,
    max_initial_crashes: int = 8,
) -> Iterator[tuple[int, bool, Any]]:
    """Yield (index, ok, result-or-(reason, detail)) for every item. `fn(state, item)` must be a
    module-level function; `state` is what `init(*init_args)` returned in that worker."""
    ctx = mp.get_context("spawn")
    todo = enumerate(items)  # pulled lazily: only `workers` items are in flight at any time
    nxt = next(todo, None)
    if nxt is None:
        return
    pool = [_Worker(ctx, init, init_args, fn) for _ in range(max(1, workers))]
    succeeded, crashed = False, 0
    try:
        while nxt is not None or any(w.task is not None for w in pool):
            for w in pool:
                if w.task is None and nxt is not None:
                    idx, item = nxt
                    w.conn.send((idx, item))
                    w.task, w.started = idx, time.monotonic()
                    nxt = next(todo, None)
            busy = [w for w in pool if w.task is not None]
            ready = wait([w.conn for w in busy], timeout=0.5)
            now = time.monotonic()
            for i, w in enumerate(pool):
                if w.task is None:
                    continue
                if w.conn in ready:
                    try:
                        msg = w.conn.recv()
                    except (EOFError, OSError):
                        w.proc.join(5)
                        code = w.proc.exitcode
                        crashed += 1
                        if not succeeded and crashed >= max_initial_crashes:
                            raise WorkersFailing(
                                f"the first {crashed} items all crashed their worker processes (last exit "
                                f"code {code}) and none succeeded: the environment kills the workers "
                                "(memory limit? /dev/shm?), not bad input") from None
                        yield w.task, False, ("worker_crash", f"worker exited with code {code}")
                        w.kill()
                        pool[i] = _Worker(ctx, init, init_args, fn)
                        continue
                    if len(msg) == 2:  # ("init_failed", traceback)
                        raise WorkersFailing(f"worker initialisation failed: {msg[1]}")
                    idx, ok, value = msg
                    w.task, w.warm, succeeded = None, True, True
                    yield idx, ok, value
                # the first item of a fresh worker also pays for its start-up imports
                elif now - w.started > timeout + (0 if w.warm else startup_timeout):
                    yield w.task, False, ("timeout", f"no result after {timeout:g}s")
                    w.kill()
                    pool[i] = _Worker(ctx, init, init_args, fn)
    finally:
        for w in pool:
            try:
                if w.task is None:
                    w.conn.send(None)
            except OSError:
                pass
        for w in pool:
            w.proc.join(timeout=2)
            if w.proc.is_alive():
                w.kill()
