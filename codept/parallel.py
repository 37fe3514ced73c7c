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
0. Refused before any worker starts (:class:`UnguardedMain`): a call from the top level of a script
   run without ``if __name__ == "__main__":``. ``spawn`` re-runs the main script in every worker, so
   each would call it again (``prepare`` waited forever on the parent's build lock). Found from the
   stack: the main module's outermost frame, its current line, and whether that line lies inside
   such an ``if`` in the script's syntax tree (one parse per script, cached).
5. A broken pool is an error, not a skip per item: if ``init`` raises in a worker, or the first
   ``max_initial_crashes`` items all crash their workers before any item succeeds (a killed or
   misconfigured environment, not bad input), :class:`WorkersFailing` is raised with the cause.
6. Memory: with ``memory_limit`` (bytes) a worker sets its soft ``RLIMIT_DATA`` to it after ``init``
   (heap, anonymous mappings and thread stacks of the whole worker, tokenizer and grammars
   included; not the shared libraries, so the bound does not grow with reserved-but-unused address
   space the way ``RLIMIT_AS`` does). An item that runs into it gets ``MemoryError`` from malloc
   and is reported as ``too_much_memory``; so is a worker killed by SIGABRT under a limit (native
   code, Rust's allocator in tokenizers, aborts on a failed allocation: a heuristic, since another
   native abort would read the same); :func:`memory_headroom` lets ``fn`` refuse an item it
   estimates too big before trying. :func:`default_memory_limit` splits 80% of
   the machine's RAM over the workers, so all of them at their limit cannot take the host down.
Cost: a spawn (~1 s of imports) per worker and per replacement; pickling of each result and item.
Not covered: retries; a limit on memory shared between workers (use cgroups for that).
"""

from __future__ import annotations

import ast
import multiprocessing as mp
import os
import resource
import sys
import time
import traceback
from functools import lru_cache
from multiprocessing.connection import wait
from typing import Any, Callable, Iterable, Iterator


class WorkersFailing(RuntimeError):
    """The worker processes cannot do any work (init fails, or every item so far crashed a worker)."""


class UnguardedMain(RuntimeError):
    """Worker processes were asked for from the top level of a script without a ``__main__`` guard."""


@lru_cache(maxsize=8)
def _guarded_lines(path: str, mtime_ns: int) -> tuple[tuple[int, int], ...] | None:
    """(first, last) lines of each ``if __name__ == "__main__":`` body at the top level of the
    script `path` (either operand order); None when it cannot be parsed."""
    try:
        tree = ast.parse(open(path, "rb").read(), path)
    except (OSError, SyntaxError, ValueError):
        return None

    def is_guard(test) -> bool:
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.In))):
            return False
        sides = [test.left, *test.comparators]
        names = any(isinstance(x, ast.Name) and x.id == "__name__" for x in sides)
        values = [x.value for x in sides if isinstance(x, ast.Constant)]
        values += [e.value for x in sides if isinstance(x, (ast.Tuple, ast.List, ast.Set)) for e in x.elts
                   if isinstance(e, ast.Constant)]
        return names and "__main__" in values

    return tuple((n.body[0].lineno, n.body[-1].end_lineno) for n in tree.body if isinstance(n, ast.If) and is_guard(n.test))


def check_main_guard(what: str) -> None:
    """Raise :class:`UnguardedMain` when called (through any depth of calls) from the top level of
    the main script outside ``if __name__ == "__main__":`` while that script would be re-run by
    ``spawn`` (a file run as ``python script.py``; not ``-c``, a REPL, or ``-m pkg`` of a
    ``__main__.py``, which spawn does not re-run). A spawned worker re-running such a script would
    start the same work again instead of serving items."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    spec = getattr(main, "__spec__", None)
    if not path or (spec is not None and spec.name.split(".")[-1] == "__main__"):
        return
    frame = sys._getframe(1)
    top = None
    while frame is not None:  # the outermost frame running the main module's own top-level code
        if frame.f_globals is main.__dict__ and frame.f_code.co_name == "<module>":
            top = frame
        frame = frame.f_back
    if top is None:
        return
    try:
        guarded = _guarded_lines(os.path.abspath(path), os.stat(path).st_mtime_ns)
    except OSError:
        return
    line = top.f_lineno
    if guarded is None or any(a <= line <= b for a, b in guarded):
        return
    raise UnguardedMain(
        f"{what} was called at the top level of {path} (line {line}) outside `if __name__ == \"__main__\":`. "
        "Its worker processes start with 'spawn', which re-runs that script in every worker: each would "
        "start the same job again and wait forever (on the build lock) instead of working. Put the "
        "call under `if __name__ == \"__main__\":`.")


def default_memory_limit(workers: int, share: float = 0.8) -> int:
    """``share`` of physical RAM split evenly over ``workers`` (bytes)."""
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return int(ram * share / max(1, workers))


def _limit_memory(limit: int) -> None:
    if limit > 0:
        _, hard = resource.getrlimit(resource.RLIMIT_DATA)
        resource.setrlimit(resource.RLIMIT_DATA, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))


def memory_headroom() -> int | None:
    """Bytes left under this process's soft RLIMIT_DATA (None: no limit, or not Linux)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_DATA)
    if soft == resource.RLIM_INFINITY:
        return None
    try:
        with open("/proc/self/status") as f:
            used = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmData:"))
    except (OSError, StopIteration, ValueError):
        return None
    return soft - used


def _serve(conn, init, init_args, fn, memory_limit: int = 0) -> None:
    try:
        state = init(*init_args) if init else None
        _limit_memory(memory_limit)
        conn.send(("ready",))  # from here on a SIGABRT under a memory limit reads as too_much_memory
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
        except MemoryError:  # the frames that held the memory are gone: the worker lives on
            conn.send((idx, False, ("too_much_memory", f"over the worker memory limit of {memory_limit >> 20} MiB")))
        except Exception as e:  # reported, the worker lives on
            conn.send((idx, False, (type(e).__name__, f"{e}\n{traceback.format_exc(limit=3)}")))


def _crash(code: int | None, memory_limit: int) -> tuple[str, str]:
    """A dead worker's reason. Under a memory limit, SIGABRT is native code (Rust's allocator in
    tokenizers) aborting on a failed allocation: ``too_much_memory``; anything else ``worker_crash``."""
    if memory_limit > 0 and code == -6:
        return "too_much_memory", f"worker aborted (a native allocation failed) under the limit of {memory_limit >> 20} MiB"
    limit = f" (memory limit {memory_limit >> 20} MiB)" if memory_limit > 0 else ""
    return "worker_crash", f"worker exited with code {code}{limit}"


class _Worker:
    def __init__(self, ctx, init, init_args, fn, memory_limit: int = 0):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child, init, init_args, fn, memory_limit), daemon=True)
        self.proc.start()
        child.close()
        self.task: int | None = None
        self.started = 0.0
        self.warm = False  # has returned a result: start-up imports are done
        self.ready = False  # init finished and the memory limit is set

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
    memory_limit: int = 0,
) -> Iterator[tuple[int, bool, Any]]:
    """Yield (index, ok, result-or-(reason, detail)) for every item. `fn(state, item)` must be a
    module-level function; `state` is what `init(*init_args)` returned in that worker.
    `memory_limit`: bytes of RLIMIT_DATA per worker (0 or less: none)."""
    check_main_guard("a codept job with worker processes (prepare, prepare-text)")
    ctx = mp.get_context("spawn")
    todo = enumerate(items)  # pulled lazily: only `workers` items are in flight at any time
    nxt = next(todo, None)
    if nxt is None:
        return
    pool = [_Worker(ctx, init, init_args, fn, memory_limit) for _ in range(max(1, workers))]
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
                        yield w.task, False, _crash(code, memory_limit if w.ready else 0)
                        w.kill()
                        pool[i] = _Worker(ctx, init, init_args, fn, memory_limit)
                        continue
                    if msg == ("ready",):
                        w.ready = True
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
                    pool[i] = _Worker(ctx, init, init_args, fn, memory_limit)
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
