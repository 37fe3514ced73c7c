"""The hostile suite: snippets that try to escape or exhaust the sandbox, and what counts as contained.

Each :class:`Case` is a program plus a check of its :class:`~codept.exec.sandbox.Result`;
:func:`run_case` adds the invariants every case must meet:
  1. the run ends within its wall-clock limit + 0.5 s;
  2. no process of the sandbox is alive afterwards: none in its pid namespace (the runner's
     check) and, as root, none of the sandbox uid (0 survivors);
  3. host canaries are untouched: a file with known bytes (not deleted, not changed) and a
     folder that must stay empty (nothing created);
  4. a TCP listener on the host's loopback received no connection;
  5. no secret of the launching process's environment shows in the program's output.
Used by tests/test_exec_hostile.py (CI) and benchmarks/bench_exec.py (the table). Cost: ~35 runs,
most ~0.1 s, the ones that must be killed ~1 s each. Not covered: kernel exploits, side channels
(timing, /proc/cpuinfo), resource use of other sandboxes running at the same time.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from codept.exec import sandbox

SECRET = "codept-hostile-secret-7f3a"  # placed in the launching environment by run_suite


@dataclass(frozen=True)
class Case:
    name: str
    code: str  # formatted with canary, folder, port
    check: Callable[[sandbox.Result], str | None]  # a problem, or None when contained
    timeout: float = 1.0


def _out_has(want: str = "CONTAINED") -> Callable[[sandbox.Result], str | None]:
    return lambda r: None if want in r.stdout else f"expected {want!r} in stdout, got {r.stdout[-200:]!r} / {r.stderr[-200:]!r}"


def _status(*ok: str) -> Callable[[sandbox.Result], str | None]:
    return lambda r: None if r.status in ok else f"status {r.status} ({r.signal or r.exit_code}), expected {ok}"


def _fails(stmt: str) -> str:
    """A program that prints CONTAINED when `stmt` raises (any exception), ESCAPED otherwise."""
    return f"try:\n    {stmt}\n    print('ESCAPED')\nexcept BaseException as e:\n    print('CONTAINED', type(e).__name__)\n"


def _fill(path_expr: str, cap_mb: int) -> str:
    """Write 1 MiB blocks until an error; CONTAINED when the total stays within cap_mb."""
    return ("import os\nn = 0\ntry:\n    f = " + path_expr + "\n    while n < 4096:\n"
            "        os.write(f, b'x' * (1 << 20)); n += 1\nexcept BaseException as e:\n    pass\n"
            f"print('CONTAINED' if n <= {cap_mb} else 'ESCAPED', n)\n")


# The folders on the way to the interpreter's prefixes (a venv's and its base's: python -S reports
# the base as sys.prefix) exist inside, each holding only the next folder of that way: way[d] = the
# names inside d that lead to a prefix.
_PREFIX_PATHS = ("import os, sys\nway = {{}}\n"
                 "for top in {{os.path.dirname(os.path.dirname(sys.executable)), sys.prefix, sys.base_prefix}}:\n"
                 "    while top != '/':\n"
                 "        way.setdefault(os.path.dirname(top), set()).add(os.path.basename(top)); top = os.path.dirname(top)\n")

L = sandbox.Limits()
CASES = [
    Case("fork_bomb", "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n", _status("timeout", "signal", "error")),
    Case("thread_bomb", "import threading, time\nwhile True:\n    threading.Thread(target=time.sleep, args=(100,)).start()\n", _status("timeout", "error", "signal")),
    Case("memory_bomb", _fails("x = bytearray(1 << 34)"), _out_has()),
    Case("memory_grow", "import mmap\nchunks = []\ntry:\n    while True:\n        chunks.append(mmap.mmap(-1, 64 << 20))\nexcept (MemoryError, OSError):\n"
         f"    print('CONTAINED' if len(chunks) * 64 <= {L.memory_mb} else 'ESCAPED', len(chunks))\n", _out_has(), timeout=2.0),
    Case("memfd", _fill("os.memfd_create('x')", L.file_mb), _out_has()),
    Case("memfd_mmap", "import os, mmap\nfd = os.memfd_create('y')\n" + _fails("os.ftruncate(fd, 1 << 32); m = mmap.mmap(fd, 1 << 32); m[:] = b'x' * (1 << 32)"), _out_has()),
    Case("shm_fill", _fill("os.open('/dev/shm/fill', os.O_WRONLY | os.O_CREAT)", L.shm_mb), _out_has()),
    Case("shm_many_files", "import os\nn = 0\ntry:\n    while n < 200:\n        f = os.open(f'/dev/shm/f{{n}}', os.O_WRONLY | os.O_CREAT); os.write(f, b'x' * (1 << 20)); os.close(f); n += 1\n"
         f"except OSError:\n    pass\nprint('CONTAINED' if n <= {L.shm_mb} else 'ESCAPED', n)\n", _out_has()),
    Case("disk_fill", "import os\nn = 0\ntry:\n    while n < 400:\n        f = os.open(f'/tmp/f{{n}}', os.O_WRONLY | os.O_CREAT); os.write(f, b'x' * (1 << 20)); os.close(f); n += 1\n"
         f"except OSError:\n    pass\nprint('CONTAINED' if n <= {L.tmp_mb} else 'ESCAPED', n)\n", _out_has()),
    Case("infinite_loop", "while True:\n    pass\n", _status("timeout")),
    Case("c_level_loop", "sum(range(10 ** 11))\n", _status("timeout")),
    Case("ignored_signals", "import signal\nfor s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGALRM, signal.SIGXCPU):\n"
         "    signal.signal(s, signal.SIG_IGN)\nwhile True:\n    pass\n", _status("timeout", "signal")),
    Case("sleep_forever", "import time\ntime.sleep(10 ** 6)\n", _status("timeout")),
    Case("self_stop", "import os, signal\nos.kill(os.getpid(), signal.SIGSTOP)\n", _status("timeout", "signal")),
    Case("double_fork_daemon", "import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
         "        time.sleep(30)\n        open('{canary}', 'w').write('daemon')\n    os._exit(0)\nprint('parent done')\n", _status("ok")),
    Case("daemon_ignores_sighup", "import os, signal, time\nif os.fork() == 0:\n    signal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
         "    os.setsid()\n    time.sleep(30)\n    os._exit(0)\n", _status("ok")),
    Case("net_loopback", _fails("import socket; s = socket.create_connection(('127.0.0.1', {port}), timeout=0.5); s.send(b'x')"), _out_has()),
    Case("net_udp", _fails("import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b'x', ('127.0.0.1', {port})); s.connect(('10.255.255.1', 9))"), _out_has()),
    Case("name_lookup", _fails("import socket; socket.getaddrinfo('localhost', 80)"), _out_has()),
    Case("read_shadow", _fails("open('/etc/shadow').read()"), _out_has()),
    Case("list_etc", _fails("import os; os.listdir('/etc')"), _out_has()),
    Case("host_paths", _PREFIX_PATHS + "seen = [p for p in ('/work', '/root/.ssh', '/home', '/var', '/etc', '{folder}') if os.path.exists(p) and p not in way]\n"
         "print('CONTAINED' if not seen else 'ESCAPED', seen)\n", _out_has()),
    Case("prefix_parents_empty", _PREFIX_PATHS + "extra = {{d: sorted(set(os.listdir(d)) - way[d]) for d in way if d not in ('/', '/tmp') and not d.startswith('/usr')}}\n"
         "extra = {{d: e for d, e in extra.items() if e}}\nprint('CONTAINED' if not extra else 'ESCAPED', extra)\n", _out_has()),
    Case("env_secret", "import os\nprint(dict(os.environ))\nprint('CONTAINED')\n", _out_has()),
    Case("proc_environ", "import os\nfound = []\nfor p in os.listdir('/proc'):\n    try:\n        d = open(f'/proc/{{p}}/environ', 'rb').read()\n"
         "    except Exception:\n        continue\n    found.append(d.decode('latin-1'))\nprint(found)\nprint('CONTAINED')\n", _out_has()),
    Case("write_host_file", _fails("open('{canary}', 'w').write('pwned')"), _out_has()),
    Case("delete_host_file", _fails("import os; os.remove('{canary}')"), _out_has()),
    Case("create_host_file", _fails("open('{folder}/new', 'w').write('x')"), _out_has()),
    Case("write_usr", _fails("open('/usr/codept_pwned', 'w').write('x')"), _out_has()),
    Case("write_root", _fails("open('/codept_pwned', 'w').write('x')"), _out_has()),
    Case("subprocess_spawn", "import os, subprocess\nr = subprocess.run(['/bin/sh', '-c', 'id -u; cat /etc/shadow'], capture_output=True, text=True)\n"
         "print('CONTAINED' if r.stdout.split()[0] != '0' and r.returncode != 0 else 'ESCAPED', r.stdout.split())\n", _out_has()),
    Case("setuid_root", _fails("import os; os.setuid(0)"), _out_has()),
    Case("output_flood", "import sys\nwhile True:\n    sys.stdout.write('y' * 65536)\n",
         lambda r: None if len(r.stdout) <= L.output_cap and r.stdout_bytes <= L.file_mb * sandbox.MiB else f"stdout {r.stdout_bytes} bytes"),
    Case("stderr_flood", "import os\nwhile True:\n    os.write(2, b'z' * 65536)\n",
         lambda r: None if len(r.stderr) <= L.output_cap and r.stderr_bytes <= L.file_mb * sandbox.MiB else f"stderr {r.stderr_bytes} bytes"),
    Case("recursion_bomb", "import sys\nsys.setrecursionlimit(10 ** 8)\ndef f(n):\n    return f(n + 1)\nf(0)\n", _status("signal", "error", "timeout")),
    Case("ctypes_segfault", "import ctypes\nctypes.string_at(0)\n", _status("signal")),
    Case("fd_exhaustion", "import os\nfds = []\ntry:\n    while True:\n        fds.append(os.open('/dev/null', os.O_RDONLY))\nexcept OSError:\n"
         f"    print('CONTAINED' if len(fds) <= {L.files} else 'ESCAPED', len(fds))\n", _out_has()),
    Case("kill_everything", "import os, signal\ntry:\n    os.kill(-1, signal.SIGKILL)\nexcept OSError:\n    pass\nprint('CONTAINED')\n", _out_has()),
    Case("pid_namespace", "import os\npids = [p for p in os.listdir('/proc') if p.isdigit()]\nprint('CONTAINED' if len(pids) <= 3 else 'ESCAPED', pids)\n", _out_has()),
    Case("mount_tmpfs", "import ctypes, ctypes.util\nlibc = ctypes.CDLL(None, use_errno=True)\n"
         "r = libc.mount(b'none', b'/usr', b'tmpfs', 0, None)\nprint('CONTAINED' if r != 0 else 'ESCAPED', ctypes.get_errno())\n", _out_has()),
    Case("tiocsti", _fails("import fcntl, termios; fcntl.ioctl(0, termios.TIOCSTI, b'x')"), _out_has()),
    # a user namespace of its own (root over its own mounts: mount a tmpfs over /usr there) by
    # unshare, by clone, and by a 32-bit syscall (int 0x80: i386's unshare) past a 64-bit filter
    Case("user_namespace", "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
         "r = libc.unshare(0x10000000 | 0x00020000)\nm = libc.mount(b'none', b'/usr', b'tmpfs', 0, None) if r == 0 else -1\n"
         "print('CONTAINED' if r != 0 and m != 0 else 'ESCAPED', r, m, ctypes.get_errno())\n", _out_has()),
    Case("user_namespace_clone", "import ctypes, os, signal\nlibc = ctypes.CDLL(None, use_errno=True)\n"
         "libc.syscall.restype = ctypes.c_long\nnr = {{'x86_64': 56, 'aarch64': 220}}.get(os.uname().machine)\n"
         "pid = libc.syscall(nr, 0x10000000 | signal.SIGCHLD, 0, 0, 0, 0) if nr else -1\n"
         "if pid == 0:\n    os._exit(0)\nif pid > 0:\n    os.waitpid(pid, 0)\n"
         "print('CONTAINED' if pid < 0 else 'ESCAPED', pid)\n", _out_has()),
    Case("user_namespace_i386", "import mmap, ctypes, os\n"
         "if os.uname().machine != 'x86_64':\n    print('CONTAINED not x86_64')\n    raise SystemExit\n"
         "code = bytes([0xb8, 0x36, 0x01, 0, 0, 0xbb, 0, 0, 0, 0x10, 0xcd, 0x80, 0xc3])  # mov eax,310; mov ebx,NEWUSER; int 0x80; ret\n"
         "buf = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)\nbuf.write(code)\n"
         "addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))\nr = ctypes.CFUNCTYPE(ctypes.c_int)(addr)()\n"
         "print('CONTAINED' if r != 0 else 'ESCAPED', r)\n", _out_has()),
]


def _listener() -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    s.setblocking(False)
    return s


def run_case(case: Case, workdir: Path, uid: int = sandbox.SANDBOX_UID) -> dict:
    """One case in a fresh sandbox with fresh host canaries: a row of the suite's table."""
    canary, folder = workdir / f"{case.name}.canary", workdir / f"{case.name}.empty"
    canary.write_bytes(b"canary")
    folder.mkdir()
    lis = _listener()
    os.environ["CODEPT_HOSTILE_SECRET"] = SECRET
    try:
        code = case.code.format(canary=canary, folder=folder, port=lis.getsockname()[1])
        r = sandbox.run_python(["-c", code], sandbox.Limits(timeout=case.timeout), uid=uid)
        time.sleep(0.05)
        problems = [p for p in (case.check(r), *_invariants(case, r, canary, folder, lis, uid)) if p]
    finally:
        os.environ.pop("CODEPT_HOSTILE_SECRET", None)
        lis.close()
    return {"case": case.name, "status": r.status, "detail": r.signal or r.exit_code, "seconds": round(r.duration_s, 3),
            "limit": case.timeout, "survivors": r.survivors + len(_left(uid)),
            "host_touched": not (canary.exists() and canary.read_bytes() == b"canary" and not any(folder.iterdir())),
            "contained": not problems, "problems": problems}


def _invariants(case, r, canary: Path, folder: Path, lis: socket.socket, uid: int):
    yield None if r.duration_s <= case.timeout + 0.5 else f"ran {r.duration_s:.2f} s, limit {case.timeout} + 0.5"
    yield None if r.survivors == 0 and not _left(uid) else f"{r.survivors} survivors, {len(_left(uid))} left"
    yield None if canary.exists() and canary.read_bytes() == b"canary" else "host canary changed"
    yield None if not any(folder.iterdir()) else "file created on the host"
    try:
        lis.accept()
        yield "the host's loopback listener got a connection"
    except BlockingIOError:
        yield None
    yield None if SECRET not in r.stdout + r.stderr else "launcher's environment secret leaked"


def _left(uid: int) -> list[int]:
    """Processes of the sandbox uid after the run (as root: that uid owns nothing else; as a normal
    user the sandbox shares the caller's uid and the runner's pid-namespace check is the one)."""
    return [p for p in sandbox.processes_of(uid) if not sandbox._zombie(p)] if os.geteuid() == 0 else []


def run_suite(workdir: Path) -> list[dict]:
    return [run_case(c, workdir) for c in CASES]
