"""The tracer: runs INSIDE the sandbox (``python -s -S -c <this file>``), stdlib only, never imported by training.

It reads one task (JSON) on stdin and writes one JSON line per traced unit to the side channel fd
``$CODEPT_RESULT_FD`` (flushed after each unit, so a kill keeps the units before it). Tasks:
  {"kind": "doctests", "module": NAME, "path": P, "source": SRC|null, "site": BOOL}   import the
      module by name (with "site": this interpreter's read-only site-packages appended to sys.path), or
      run SRC as module NAME with file name P (corpus files: the sandbox sees no host file),
      find its doctests (doctest.DocTestFinder), and for each one attached to a function, method or
      class of that file run it (doctest.DocTestRunner, ELLIPSIS) while tracing that object's lines.
  {"kind": "program", "name": N, "code": SRC, "driver": SRC}  exec `code` (file name "<code>") then
      `driver` (HumanEval's tests + check(entry_point)) in one namespace, tracing the lines of <code>.
  {"kind": "probe"}  one line {"version", "prefix", "site"} (:func:`interpreter_info`): the sandbox's
      preflight compares it with the same call on the host.
Algorithm (sys.settrace):
  1. The global trace function returns a local one only for frames of the traced file whose line lies
     inside the unit's line range; other frames (the stdlib, the driver) run untraced.
  2. On each "line" event at line L of a traced frame: append L (relative to the unit's first line)
     to the line sequence, count it, and record the state after the frame's previous line: the
     locals whose repr changed since the frame's last snapshot (repr capped at ``repr_cap`` chars,
     addresses `0x...` blanked so reprs are deterministic; a repr that raises gives
     ``<repr error: Type>``; tracing is off while a repr runs, so an evil __repr__ is not traced).
     "return" closes the previous line's state the same way.
  3. Caps: ``max_steps`` line events per unit (then tracing stops for it, ``truncated``), a
     per-unit alarm of ``unit_timeout`` seconds (the sandbox's wall clock kills C-level loops).
Output per unit: name, code, first_line, lines, counts, states [[line, {var: repr}]], output
(doctest report / captured stdout, capped), attempted/failed examples, error (exception type or
"timeout"), truncated. Not covered: threads (settrace is per thread), generators' lines are
attributed to the unit only when they are defined inside it, C extensions.
The program can write to the side fd itself; the parent validates the schema, but a program that
forges its own trace only poisons its own labels (the kernel sandbox, not this file, is the boundary).
"""

import doctest
import importlib
import inspect
import io
import json
import linecache
import os
import re
import signal
import sys
import types

ADDR = re.compile(r"0x[0-9a-fA-F]{4,}")


class UnitTimeout(BaseException):
    pass


def safe_repr(v, cap):
    try:
        r = repr(v)
    except BaseException as e:  # an evil __repr__: report, never propagate
        return f"<repr error: {type(e).__name__}>"
    if not isinstance(r, str):
        return "<repr error: not str>"
    r = ADDR.sub("0x?", r)
    return r if len(r) <= cap else r[: cap - 3] + "..."


class Recorder:
    """Line sequence, counts and state deltas of one unit (see the module docstring, step 2)."""

    def __init__(self, filename, first, last, max_steps, repr_cap):
        self.filename, self.first, self.last = filename, first, last
        self.max_steps, self.repr_cap = max_steps, repr_cap
        self.lines, self.counts, self.states = [], {}, []
        self.truncated = False
        self._prev, self._seen = {}, {}  # frame id -> previous line / last reprs

    def global_trace(self, frame, event, arg):
        code = frame.f_code
        if event == "call" and code.co_filename == self.filename and self.first <= frame.f_lineno <= self.last:
            return self.local_trace
        return None

    def local_trace(self, frame, event, arg):
        if self.truncated:
            return None
        key = id(frame)
        if event in ("line", "return") and key in self._prev:
            self._snapshot(frame, key)
        if event == "line":
            rel = frame.f_lineno - self.first
            self.lines.append(rel)
            self.counts[rel] = self.counts.get(rel, 0) + 1
            self._prev[key] = rel
            if len(self.lines) >= self.max_steps:
                self.truncated = True
        elif event == "return":
            self._prev.pop(key, None)
            self._seen.pop(key, None)
        return self.local_trace

    def _snapshot(self, frame, key):
        seen = self._seen.setdefault(key, {})
        delta = {}
        for name, value in list(frame.f_locals.items()):
            r = safe_repr(value, self.repr_cap)
            if seen.get(name) != r:
                seen[name] = delta[name] = r
        self.states.append([self._prev[key], delta])

    def record(self):
        return {"lines": self.lines, "counts": {str(k): v for k, v in sorted(self.counts.items())},
                "states": self.states, "truncated": self.truncated}


def _alarm(signum, frame):
    raise UnitTimeout()


def traced(rec, fn, seconds):
    """Run fn() under rec's trace and an alarm; the error name or None."""
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    sys.settrace(rec.global_trace)
    try:
        fn()
        return None
    except UnitTimeout:
        return "timeout"
    except BaseException as e:
        return type(e).__name__
    finally:
        sys.settrace(None)
        signal.setitimer(signal.ITIMER_REAL, 0)


def import_module(task):
    """The module by name (stdlib), or built from ``source`` text under the file name ``path``
    (a corpus file: no host file is visible in the sandbox; linecache serves inspect the source)."""
    if task.get("source") is None:
        if task.get("site"):  # python -S left site-packages off sys.path; no .pth file is run
            sys.path += [p for p in site_packages() if p not in sys.path]
        return importlib.import_module(task["module"])
    path, src = task["path"], task["source"]
    linecache.cache[path] = (len(src), None, src.splitlines(True), path)
    mod = types.ModuleType(task["module"])
    mod.__file__ = path
    sys.modules[task["module"]] = mod
    exec(compile(src, path, "exec"), mod.__dict__)
    return mod


def _venv_config():
    """(venv prefix, include-system-site-packages) of the pyvenv.cfg beside this interpreter's
    executable or one folder up (where ``site`` looks), or None outside a virtual environment."""
    exe_dir = os.path.dirname(os.path.abspath(sys.executable))
    for folder in (exe_dir, os.path.dirname(exe_dir)):
        cfg = os.path.join(folder, "pyvenv.cfg")
        if os.path.isfile(cfg):
            system = False
            with open(cfg, encoding="utf-8", errors="replace") as f:
                for line in f:
                    key, eq, value = line.partition("=")
                    if eq and key.strip().lower() == "include-system-site-packages":
                        system = value.strip().lower() == "true"
            return os.path.dirname(exe_dir), system
    return None


def site_packages():
    """The site-packages folders of this interpreter, computed without running ``site`` (under
    ``python -S`` a venv's sys.prefix is still the base prefix: site.venv() is what moves it, and no
    .pth file may run) and without its distribution patches (Debian's site.getsitepackages answers
    by whether site.venv() ran, so the host and the sandbox would disagree). A venv: its own
    ``lib/pythonX.Y/site-packages``, then the base's folders when its pyvenv.cfg includes system
    site-packages; otherwise (a base install, a conda prefix) sys.prefix's. A base prefix's folders
    are ``site-packages`` and Debian's ``dist-packages``. Existing folders only."""
    ver = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    libdirs = list(dict.fromkeys((sys.platlibdir, "lib")))

    def own(prefix):
        return [os.path.join(prefix, lib, ver, "site-packages") for lib in libdirs]

    def base(prefix):
        return own(prefix) + [os.path.join(prefix, "local", "lib", ver, "dist-packages"),
                              os.path.join(prefix, "lib", "python3", "dist-packages"),
                              os.path.join(prefix, "lib", ver, "dist-packages")]

    venv = _venv_config()
    if venv is None:
        paths = base(sys.prefix) + base(sys.exec_prefix)
    else:
        paths = own(venv[0]) + (base(sys.base_prefix) + base(sys.base_exec_prefix) if venv[1] else [])
    return [p for p in dict.fromkeys(paths) if os.path.isdir(p)]


def interpreter_info():
    """What identifies this interpreter and its packages: version, prefix (the venv's inside one, as
    ``site`` would set it) and :func:`site_packages`."""
    venv = _venv_config()
    return {"version": sys.version, "prefix": venv[0] if venv else sys.prefix, "site": site_packages()}


def resolve(mod, name):
    obj = mod
    for part in filter(None, name.split(".")):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def doctest_units(task, emit, cfg):
    mod = import_module(task)
    filename = getattr(mod, "__file__", "") or ""  # = co_filename of its code
    finder = doctest.DocTestFinder(recurse=True, exclude_empty=True)
    for test in sorted(finder.find(mod, task["module"]), key=lambda t: t.name):
        if not test.examples:
            continue
        obj = resolve(mod, test.name[len(task["module"]):])
        obj = inspect.unwrap(obj) if callable(obj) else obj
        if not (inspect.isfunction(obj) or inspect.isclass(obj)):
            continue
        try:
            src, first = inspect.getsourcelines(obj)
            if inspect.getsourcefile(obj) != filename:
                continue
        except (OSError, TypeError):
            continue
        rec = Recorder(filename, first, first + len(src) - 1, cfg["max_steps"], cfg["repr_cap"])
        report = io.StringIO()
        runner = doctest.DocTestRunner(verbose=False, optionflags=doctest.ELLIPSIS)
        err = traced(rec, lambda: runner.run(test, out=report.write, clear_globs=True), cfg["unit_timeout"])
        emit({"name": test.name, "code": "".join(src), "first_line": first, **rec.record(),
              "attempted": runner.tries, "failed": runner.failures, "error": err,
              "output": report.getvalue()[: cfg["output_cap"]]})


def program_unit(task, emit, cfg):
    code, driver = task["code"], task.get("driver", "")
    n_lines = code.count("\n") + 1
    rec = Recorder("<code>", 1, n_lines, cfg["max_steps"], cfg["repr_cap"])
    ns = {"__name__": "__codept__"}
    out = io.StringIO()

    def run():
        old = sys.stdout
        sys.stdout = out
        try:
            exec(compile(code, "<code>", "exec"), ns)
            if driver:
                exec(compile(driver, "<driver>", "exec"), ns)
        finally:
            sys.stdout = old

    err = traced(rec, run, cfg["unit_timeout"])
    emit({"name": task["name"], "code": code, "first_line": 1, **rec.record(), "attempted": 1,
          "failed": int(err is not None), "error": err, "output": out.getvalue()[: cfg["output_cap"]]})


def main():
    task = json.loads(sys.stdin.read())
    side = os.fdopen(int(os.environ["CODEPT_RESULT_FD"]), "w", encoding="utf-8")
    cfg = {"max_steps": 2000, "repr_cap": 64, "unit_timeout": 2.0, "output_cap": 2000, **task.get("caps", {})}

    def emit(unit):
        side.write(json.dumps(unit, ensure_ascii=False) + "\n")
        side.flush()

    if task["kind"] == "probe":
        emit(interpreter_info())
        return
    sys.setrecursionlimit(cfg.get("recursion", 1000))
    (doctest_units if task["kind"] == "doctests" else program_unit)(task, emit, cfg)
    side.write(json.dumps({"done": True}) + "\n")
    side.flush()


if __name__ == "__main__":
    main()
