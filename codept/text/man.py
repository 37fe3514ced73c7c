"""Man pages -> a document: roff source rendered by groff with every request that reads a file or
runs a command removed, read through codept.text.readers (:func:`codept.text.readers.read_file`).

Man pages (``name.N[suffix][.gz|.bz2|.xz|.zst]``, e.g. ``ls.1.gz``) are decompressed here, rendered by
groff as ``MANWIDTH=80 man --nh --nj`` renders them (the same text on 81 of 82 sampled system
pages; man itself follows ``.so`` to any file), overstrike and SGR codes removed, the header and
footer lines dropped; unindented lines (NAME, DESCRIPTION) become headings. groff reads only the
page (:func:`render_man`): the page on stdin, in an empty folder, a minimal environment, safer
mode, and the requests that read a file (``.so``, ``.mso``, ``.nx``, ``.cf``, ``.trf``, ``.hpf``,
``.psbb``) or run a command (``.sy``, ``.pso``, ``.pi``, ``.open``) removed before the page, so
no spelling reaches them; each call is recorded (``include_refused`` / ``command_refused``, with
the target). A page that is only ``.so other.1`` (a link) gives no document. Language from the path
(``/usr/share/man/zh_CN/...`` -> 'zh', :func:`man_lang`).

Cost: one groff process per page, ~50-100 ms each (plus one per macro package, once per process).
Limits: without ``groff`` every page is a skip ``man_unavailable``; a ``.zst`` page needs ``zstd``;
a render over ``man_timeout_s`` is a skip ``man_timeout``; pages over ``max_bytes`` (after
decompression too) are skips ``too_large``.
"""

from __future__ import annotations

import functools
import gzip
import os
import re
import shutil
import subprocess
from collections import Counter
from typing import Iterator

from codept.data.jobs import SkipFile
from codept.text.items import Item, TextDoc, _refusals
from codept.text.prose import _blocks, _indent, _join
from codept.text.segment import guess_lang, normalise_lang

MAN_TIMEOUT_S = 20.0

_OVERSTRIKE = re.compile(r".\x08")
_SGR = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_MAN_LOCALE = re.compile(r"/man/([a-z]{2,3}(?:_[A-Z]{2})?)(?:\.[\w-]+)?(?:@\w+)?/man[^/]*/[^/]+$")


def man_lang(path: str) -> str | None:
    """Language from a man page's locale directory (``.../man/zh_CN/man1/x.1.gz`` -> 'zh')."""
    m = _MAN_LOCALE.search(path)
    return normalise_lang(m.group(1)) if m else None


def man_to_text(rendered: str) -> str:
    """Output of ``man -Tutf8`` -> paragraphs (header/footer dropped, headings separate)."""
    text = _SGR.sub("", _OVERSTRIKE.sub("", rendered))
    lines = text.splitlines()
    nonblank = [i for i, x in enumerate(lines) if x.strip()]
    if len(nonblank) > 2:  # "LS(1)  User Commands  LS(1)" ... "GNU coreutils 9.1  2022  LS(1)"
        lines = lines[nonblank[0] + 1 : nonblank[-1]]
    paras: list[list[str]] = []
    for block in _blocks(lines):
        cur: list[str] = []
        for line in block:
            if _indent(line) == 0:  # section heading
                if cur:
                    paras.append(cur)
                paras.append([line])
                cur = []
            else:
                cur.append(line)
        if cur:
            paras.append(cur)
    return _join(paras)


# groff requests that read a file (the page would put /etc/passwd into a document) and those that run a
# command or write a file (groff's safer mode refuses these; removed as well). Removed with ``.rm``
# after the macro package is loaded and before the page, so no spelling (``.cc``, ``.als``, ``.do``,
# a string holding the name) reaches them: a removed request cannot be named again.
MAN_FILE_REQUESTS = ("so", "soquiet", "mso", "msoquiet", "nx", "cf", "trf", "hpf", "hpfa", "psbb")
MAN_COMMAND_REQUESTS = ("sy", "pso", "pi", "open", "opena")
_MAN_REQUEST = re.compile(r"^[.'][ \t]*(" + "|".join(MAN_FILE_REQUESTS + MAN_COMMAND_REQUESTS) + r")(?![^ \t\n])[ \t]*(.*)$",
                          re.M)
_MAN_NAMES = "|".join(MAN_FILE_REQUESTS + MAN_COMMAND_REQUESTS)
_MAN_ALIAS = re.compile(rf"^[.'][ \t]*(?:rn[ \t]+({_MAN_NAMES})|als[ \t]+\S+[ \t]+({_MAN_NAMES}))(?![^ \t\n])", re.M)
_MAN_UNDEFINED = re.compile(rf"warning: macro '({_MAN_NAMES})' not defined")
# --nh --nj of man-db, and the requests removed; the macro package (-man or -mdoc) is loaded before it
MAN_PRELUDE = (".nh\n.de hy\n..\n.na\n.de ad\n..\n.rm " + " ".join(MAN_FILE_REQUESTS + MAN_COMMAND_REQUESTS) + "\n")
_MDOC = re.compile(r"^\.[ \t]*Dd\b", re.M)
_MAN_TH = re.compile(r"^\.[ \t]*TH\b", re.M)


def _man_source(path: str, data: bytes) -> str:
    """A man page's bytes (compressed by its name's suffix) -> its roff text (UTF-8, else Latin-1 as
    man-db falls back to)."""
    import bz2
    import lzma

    name = path.lower()
    try:
        if name.endswith(".gz"):
            data = gzip.decompress(data)
        elif name.endswith(".bz2"):
            data = bz2.decompress(data)
        elif name.endswith((".xz", ".lzma")):
            data = lzma.decompress(data)
        elif name.endswith(".zst"):
            exe = shutil.which("zstd")
            if exe is None:
                raise SkipFile("unreadable", "a .zst man page needs the 'zstd' executable on PATH")
            r = subprocess.run([exe, "-dcq"], input=data, capture_output=True, timeout=60)
            if r.returncode != 0:
                raise SkipFile("unreadable", f"zstd -d: rc={r.returncode}")
            data = r.stdout
    except (OSError, EOFError, ValueError, lzma.LZMAError) as e:
        raise SkipFile("unreadable", f"{type(e).__name__}: {e}") from e
    if b"\0" in data[:8192]:
        raise SkipFile("binary", "NUL byte in the first 8 KiB")
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def man_requests(src: str, warnings: str = "") -> list[tuple[str, str]]:
    """(request, argument) of every call of a request of MAN_FILE_REQUESTS or MAN_COMMAND_REQUESTS in
    `src`: lines that call one directly (``.so x``, ``'so x``), rename or alias one (``.rn so x``,
    ``.als x so``), and, from groff's stderr (`warnings`, ``-wmac``), the calls of a removed request
    spelled any other way (``.do so``, ``.cc !`` + ``!so``, a string holding its name): argument '?'."""
    found = [(m.group(1), m.group(2).strip()) for m in _MAN_REQUEST.finditer(src)]
    found += [(m.group(1) or m.group(2), "(renamed or aliased)") for m in _MAN_ALIAS.finditer(src)]
    direct = Counter(name for name, _ in found)
    warned = Counter(m.group(1) for m in _MAN_UNDEFINED.finditer(warnings))
    for name, n in sorted(warned.items()):
        found += [(name, "(spelled indirectly)")] * max(0, n - direct[name])
    return found


@functools.lru_cache(maxsize=None)
def _man_package(exe: str, kind: str) -> str:
    """The groff macro package that loads the man (or mdoc) macros at once. ``-man`` and ``-mdoc`` of
    groff 1.22 go through andoc.tmac, which loads the real package with ``.mso`` at the page's first
    ``.TH``, after the prelude removed ``mso``: name the package itself (an-old.tmac in groff 1.22,
    an.tmac from 1.23 on) so it is loaded before the prelude."""
    for name in (("an-old", "an") if kind == "man" else ("mdoc",)):
        r = subprocess.run([exe, "-m", name, "-Tutf8"], input=b"", capture_output=True, timeout=30,
                           env={"PATH": os.environ.get("PATH", os.defpath)})
        if r.returncode == 0:
            return name
    return "an" if kind == "man" else "mdoc"


def render_man(src: str, timeout_s: float = MAN_TIMEOUT_S) -> tuple[str, str]:
    """roff source of a man page -> (groff's -Tutf8 output, its warnings): 80 columns as
    ``MANWIDTH=80 man --nh --nj`` renders (no hyphenation or justification).

    groff runs on stdin (so a page has no name to resolve a relative path against) in an empty
    working folder, with a minimal environment (``\\V`` reads no secret), in safer mode (groff's
    default), with tbl; the file-reading and command-running requests are removed (MAN_PRELUDE).
    Non-ASCII characters are passed as ``\\[uXXXX]`` escapes (what preconv does)."""
    import tempfile

    exe = shutil.which("groff")
    if exe is None:
        raise SkipFile("man_unavailable", "no 'groff' executable on PATH")
    macros = _man_package(exe, "mdoc" if _MDOC.search(src) and not _MAN_TH.search(src) else "man")
    body = "".join(c if ord(c) < 128 else f"\\[u{ord(c):04X}]" for c in src)
    env = {"PATH": os.path.dirname(exe), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "GROFF_NO_SGR": "1"}
    with tempfile.TemporaryDirectory(prefix="codept-man-") as cwd:
        try:
            r = subprocess.run([exe, "-Tutf8", "-t", "-wmac", "-m", macros, "-rLL=78n", "-rLT=78n", "-"],
                               input=(MAN_PRELUDE + body + "\n").encode("ascii"), capture_output=True,
                               timeout=timeout_s, env=env, cwd=cwd)
        except subprocess.TimeoutExpired as e:
            raise SkipFile("man_timeout", f"groff ran over {timeout_s}s") from e
        except OSError as e:
            raise SkipFile("man_failed", f"{type(e).__name__}: {e}") from e
    if r.returncode != 0:
        raise SkipFile("man_failed", f"rc={r.returncode}: {r.stderr.decode('utf-8', 'replace')[-200:].strip()}")
    try:
        return r.stdout.decode("utf-8"), r.stderr.decode("utf-8", "replace")
    except UnicodeDecodeError as e:
        raise SkipFile("bad_utf8", f"groff output: invalid UTF-8 at byte {e.start}") from e


def _read_man(path: str, lang: str | None, timeout_s: float, max_bytes: int, data: bytes | None) -> Iterator[Item]:
    if shutil.which("groff") is None:
        raise SkipFile("man_unavailable", "no 'groff' executable on PATH")
    if data is None:
        try:
            size = os.path.getsize(path)
            if size > max_bytes:
                raise SkipFile("too_large", f"{size} bytes > max_bytes={max_bytes}")
            with open(path, "rb") as f:
                data = f.read(max_bytes + 1)
        except OSError as e:
            raise SkipFile("unreadable", f"{type(e).__name__}: {e}") from e
    src = _man_source(path, data)
    if len(src) > max_bytes:
        raise SkipFile("too_large", f"> max_bytes={max_bytes} after decompression")
    out, warnings = render_man(src, timeout_s)
    refused = man_requests(src, warnings)
    body = man_to_text(out)
    if re.search(r"\w", body):  # a page that is only ``.so other.1`` renders an empty header: "()"
        yield TextDoc(path, lang or man_lang(path) or guess_lang(body), body)
    yield from _refusals(path, [(f".{req}", arg) for req, arg in refused if req in MAN_FILE_REQUESTS],
                        "include_refused", "groff request that reads a file, not followed")
    yield from _refusals(path, [(f".{req}", arg) for req, arg in refused if req in MAN_COMMAND_REQUESTS],
                        "command_refused", "groff request that runs a command or writes a file, not run")
