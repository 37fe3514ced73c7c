"""Secret and PII redaction: ``redact(text) -> (new_text, Counter of kinds)``, on by default in prepare.

Replacement tokens keep code parseable where the secret sat in a string or a comment (the usual
case): ``<EMAIL>``, ``<IP>``, ``<KEY>``, and for PEM private keys the BEGIN/END lines are kept and
the body becomes ``<PRIVATE_KEY>``. Names, quotes and prefixes around a value are kept
(``password = "<KEY>"``, ``Bearer <KEY>``).

Algorithm (one pass per kind, in this order, so an earlier replacement is never re-matched):
1. ``private_key``: ``-----BEGIN <X >PRIVATE KEY-----`` ... ``-----END <X >PRIVATE KEY-----``: the
   stretch from the first to the last base64 run becomes ``<PRIVATE_KEY>``; when the body is split
   into quoted string pieces (``"MIIE...\\n" +``), each run is removed instead and the first becomes
   the token, so quotes and concatenation survive. A BEGIN line with no END: the base64 lines that
   follow it. A body with no 16+ character base64 run (a ``%s`` template) is kept.
2. Known token formats -> ``<KEY>``: AWS access key ids (``AKIA``/``ASIA`` + 16), GitHub tokens
   (``ghp_ gho_ ghu_ ghs_ ghr_`` + 36+, ``github_pat_``), Slack (``xox[abposr]-``; webhook URLs
   ``hooks.slack.com/services/<KEY>``, also ``/workflows/``, ``/triggers/``), Google API keys
   (``AIza`` + 35), Stripe (``sk_live_``/``rk_live_``/``pk_live_``), JSON Web Tokens (``eyJ..``),
   and the token after ``Bearer``. Kept: documentation examples (``AKIAIOSFODNN7EXAMPLE``,
   ``ghp_xxxxxx..``, Slack's ``T00000000/B00000000/XXXXXXXX..``).
3. ``key_assignment``: a name containing key/token/secret/passw(or)d/pwd/credential (not
   tokenizer, keyword, public_key, *_sha256, hash, ...) assigned (``=``, ``:``, ``=>``, ``:=``) a
   quoted value, or a bare value in a config-like line (``NAME=value`` alone on its line, as in
   .env/YAML/ini), that ``looks_random``: >= 16 chars mixing letters with digits or both cases,
   entropy >= 3 bits/char, letter/digit/case changes between >= 25% of neighbouring characters,
   < 60% of it in word-like runs; hex strings and UUIDs from 32 hex digits; never a placeholder
   (``your_api_key_here``, ``xxxx``, ``${VAR}``, ``%s``), dotted name, path or URL.
4. ``url_password``: the password of a URL's user info (``scheme://user:PASSWORD@host``, any host:
   ``localhost``, a bare name, an IP) -> ``<KEY>``, whatever it looks like (``hunter2``, ``pass``);
   the user name and host are kept. Kept: templates (``${PW}``, ``{pw}``, ``%s``, ``***``, ``xxx``).
5. ``email``: ``local@domain.tld``; kept: reserved documentation/test domains (RFC 2606/6761:
   example.com/.net/.org, ``*.example``, ``*.test``, ``*.invalid``, ``*.localhost``), "domains"
   ending in a file extension (``icon@2x.png``, ``model@v2.pkl``), matches followed by ``(``
   (``a@self.f(x)``) and local parts without a letter.
6. ``ipv4``: dotted quads not inside a longer dotted number (OIDs, versions ``1.2.3.4.5``) and not
   followed by ``/prefix`` (CIDR networks are kept: not a person's address); kept: non-global
   addresses (private, loopback ``127.0.0.1``, unspecified ``0.0.0.0``, link-local, documentation
   ``192.0.2.x``/``198.51.100.x``/``203.0.113.x``, reserved, shared), multicast, well-known public
   resolvers (8.8.8.8, 1.1.1.1, ...), quads whose first three parts are single digits
   (``7.1.4.34``, ``8.2.4.44``: versions and spec sections far more often than hosts), and quads
   right after the word version/ver/v/release/section/rfc/oid/identifier/kernel on the same line, the
   word standing alone or as a camelCase part (``__version__ = "10.2.30.4"``, ``ObjectIdentifier("2.5.29.17")``;
   not ``SERVER_IP``, ``# server``, ``driver_addr``, ``convert``), quads followed by ``-`` and a
   letter (kernel releases ``5.15.167.4-microsoft-standard``, ``-generic``; a range ``a.b.c.d-e.f.g.h``
   is still two IPs), quads in the object-identifier arcs 1.0, 1.2, 1.3, 2.5 and 2.23
   (``2.5.29.17`` subjectAltName, ``1.3.101.112`` Ed25519, ``2.23.140.1``: five /16 networks never
   redacted, a trade-off for OIDs written bare), and numbers with thousands separators: three-digit
   groups (``1.150.200.100``) with a decimal comma after (``,50``), a currency sign or code or a unit
   word next to them (``€ 1.150.200.100``, ``1.150.200.100 EUR``, ``... bytes``). Three-part
   versions (``"1.2.3"``, ``1.234.567``) and longer dotted numbers are never IPs.
7. ``ipv6``: only global unicast (``2000::/3``) addresses with >= 4 written groups that
   ``ipaddress`` accepts, not followed by ``/prefix``; so ``Foo::bar``, ``x[1::2]``, ``::1``,
   ``fe80::``, ``2001:db8::`` (documentation), times ``12:34:56`` and MAC addresses never match.

Measured (tests/test_redact.py keeps these honest): on the CPython 3.11 standard library as
prepared by default (601 files, 11 MB) 161 emails (author and contact addresses), 2 IPv4s
(``123.45.67.89`` in two docstrings of socket.py; the one after "convert" was kept while "ver"
matched inside words) and nothing else; on 270 MB of installed packages (numpy,
transformers, moto, cryptography, ...) 378 emails, 9 IPv4s and 6 key assignments: every IPv4 and
key assignment and a sample of the emails inspected, all plausible (public addresses in examples,
service tokens in test mocks, a test Hugging Face token). Adding ``url_password`` (2026-12, 22,570
files of installed packages): 34 URL passwords, all documentation or test URLs (``user:pass@host``,
``postgres:postgres@localhost``), 7 of them formerly counted as emails (``pass@host.com``); one
look-alike (``github://org:repo@sha``).
Cost: ~10 regex scans anchored on literals (Python's re skips quickly to a literal prefix, so
look-behinds come after it), ~20 MB/s on code (stdlib: ~0.6 s). Pure function, safe in workers.
Does NOT cover: names, phone numbers, street addresses, URL passwords without a scheme
(``user:pw@host`` alone is caught only as an "email"), secrets split across concatenated strings, short or low-entropy
passwords (``password = "hunter2"``), ~2% of random 16-20 character values (they look like
words by chance; <= 0.2% from 32 characters), public IPs in a version/section context, secrets in
comparisons (``token == "..."``), encoded or obfuscated secrets, non-ASCII domain names. Redaction is best effort: a tuned trade-off between missed secrets and mangled code.
"""

from __future__ import annotations

import ipaddress
import math
import re
import string
from collections import Counter
from collections.abc import Callable

EMAIL, IP, KEY, PRIVATE_KEY = "<EMAIL>", "<IP>", "<KEY>", "<PRIVATE_KEY>"


def _splice(text: str, edits: list[tuple[int, int, str]]) -> str:
    """Apply non-overlapping, sorted (start, end, replacement) edits."""
    if not edits:
        return text
    out, pos = [], 0
    for a, b, r in edits:
        out += [text[pos:a], r]
        pos = b
    out.append(text[pos:])
    return "".join(out)


# Speed note: Python's re scans fast for a pattern that starts with a literal or a character set, and
# slowly (every position) for one that starts with a look-behind. Patterns therefore start with their
# most specific literal and check what precedes it with a fixed-width look-behind placed after it.

# ---- 1. PEM private keys -------------------------------------------------------------------------
PEM_BEGIN_RE = re.compile(r"-----BEGIN (?P<label>[A-Z0-9 ]{0,40}?)PRIVATE KEY-----")
PEM_OPEN_BODY_RE = re.compile(r"(?:[ \t]*(?:\r?\n|\\[nr])[ \t]*[A-Za-z0-9+/=]{16,})+")  # base64 lines
# base64 runs: not the n of a \n escape, at least one alphanumeric (a lone + joins strings in JS)
B64_RUN_RE = re.compile(r"(?<!\\)[A-Za-z0-9+/=]*[A-Za-z0-9][A-Za-z0-9+/=]*")
PEM_MAX_BODY = 16384


def _pem_body(body: str) -> str:
    """Body -> key material replaced by one <PRIVATE_KEY>. With no quote between the first and the
    last base64 run (a file, a comment block, one string literal), that whole stretch becomes the
    token; otherwise (string pieces joined by quotes and + or \\) each run is removed and the first
    becomes the token, so the syntax between them stays. A body without a run of 16+ base64
    characters is no key (a template such as ``%s``) and is returned unchanged."""
    runs = list(B64_RUN_RE.finditer(body))
    if not any(r.end() - r.start() >= 16 for r in runs):
        return body
    first, last = runs[0], runs[-1]
    if not any(q in body[first.end():last.start()] for q in "\"'`"):
        return body[:first.start()] + PRIVATE_KEY + body[last.end():]
    return _splice(body, [(r.start(), r.end(), PRIVATE_KEY if i == 0 else "") for i, r in enumerate(runs)])


def _redact_pem(text: str, counts: Counter) -> str:
    if "PRIVATE KEY-----" not in text:
        return text
    edits, pos = [], 0
    for m in PEM_BEGIN_RE.finditer(text):
        if m.start() < pos:
            continue  # inside the block just redacted
        end = text.find(f"-----END {m['label']}PRIVATE KEY-----", m.end(), m.end() + PEM_MAX_BODY)
        if end < 0:  # truncated block: the base64 lines right after BEGIN
            o = PEM_OPEN_BODY_RE.match(text, m.end())
            end = o.end() if o else m.end()
        body = text[m.end():end]
        new = _pem_body(body)
        if new != body:  # else no key material (an empty template)
            counts["private_key"] += 1
            edits.append((m.end(), end, new))
            pos = end
    return _splice(text, edits)


# ---- 2. known token formats ------------------------------------------------------------------
TOKEN_PATTERNS: list[tuple[str, re.Pattern]] = [
    # (kind, pattern whose group "v" is replaced; the look-behind after the prefix = word boundary).
    # Stripe and Bearer keep their prefix (``sk_live_<KEY>``, ``Bearer <KEY>``), the others go whole.
    ("aws_access_key", re.compile(r"(?P<v>(?:AKIA|ASIA)(?<![A-Za-z0-9]....)[A-Z0-9]{16})(?![A-Za-z0-9])")),
    ("github_token", re.compile(r"(?P<v>gh[pousr]_(?<![A-Za-z0-9_]....)[A-Za-z0-9]{36,255}"
                                r"|github_pat_(?<![A-Za-z0-9_]...........)[A-Za-z0-9_]{22,255})")),
    ("slack_token", re.compile(r"(?P<v>xox[abposr]-(?<![A-Za-z0-9].....)[A-Za-z0-9-]{10,250})")),
    # the URL is the credential: whoever has it can post; the host and /services/ are kept
    ("slack_webhook", re.compile(r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<v>[A-Za-z0-9_-]{6,64}"
                                 r"(?:/[A-Za-z0-9_-]{6,64}){1,3})")),
    ("google_api_key", re.compile(r"(?P<v>AIza(?<![A-Za-z0-9]....)[0-9A-Za-z_-]{35})(?![A-Za-z0-9_-])")),
    ("stripe_key", re.compile(r"k_live_(?<=[spr]k_live_)(?<![A-Za-z0-9]........)(?P<v>[0-9A-Za-z]{16,250})")),
    ("jwt", re.compile(r"(?P<v>eyJ(?<![A-Za-z0-9_-]...)[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})")),
    ("bearer_token", re.compile(r"earer(?<=[Bb]earer)(?<![A-Za-z0-9_].earer)[ \t]+"
                                r"(?P<v>[A-Za-z0-9._~+/-]{16,}=*)(?![A-Za-z0-9._~+/=-])")),
]


DOC_EXAMPLE_RE = re.compile(r"example|x{6}|X{6}", re.I)  # AKIAIOSFODNN7EXAMPLE (AWS docs), ghp_xxxxxx...


def _redact_tokens(text: str, counts: Counter) -> str:
    for kind, pat in TOKEN_PATTERNS:
        edits = [(m.start("v"), m.end("v"), KEY) for m in pat.finditer(text)
                 if not DOC_EXAMPLE_RE.search(m["v"]) and (kind != "bearer_token" or looks_random(m["v"]))]
        counts[kind] += len(edits)
        text = _splice(text, edits)
    return text


# ---- 3. key-like names assigned random-looking values -------------------------------------------
# Anchored at the operator (fast); the name before it is checked by _secret_name. A bare (unquoted)
# value counts only in a config-like line: NAME at the line start, the value at its end.
ASSIGN_RE = re.compile(
    r"(?::=|=>|[=:])[ \t]*(?:(?P<q>[\"'`])(?P<v>[^\"'`\s\\,;(){}\[\]<>]{16,512})(?P=q)"  # quoted value
    r"|(?P<bare>[A-Za-z0-9+/=_.~-]{16,512})(?=[ \t]*(?:$|#)))",  # bare value (env, YAML, ini)
    re.M)
NAME_BEFORE_RE = re.compile(r"(?P<name>[A-Za-z0-9_.-]{1,80})[\"']?[ \t]*$")
LINE_START_RE = re.compile(r"(?:^|\n)[ \t]*(?:export[ \t]+|-[ \t]+)?$")
SECRET_WORD_RE = re.compile(r"key|token|secret|passw(?:or)?d|pwd|credential", re.I)
NOT_SECRET_NAME_RE = re.compile(  # names with a secret word that hold no secret
    r"tokeni[sz]|keyword|keyboard|keystroke|keymap|keycode|keyframe|monkey|donkey|turkey|hockey|jockey"
    r"|public|sha\d|md5|hash|digest|checksum|fingerprint", re.I)
PLACEHOLDER_RE = re.compile(
    r"your|example|sample|dummy|placeholder|changeme|redacted|xxxx|\*\*\*|[<>{}%$#]|\.\.\.|"
    r"0123456789|abcdef|123456|000000|(.)\1{5}", re.I)
HEX_ID_RE = re.compile(r"[0-9a-fA-F]+(?:-[0-9a-fA-F]+)*")  # digests, UUIDs
DOTTED_NAME_RE = re.compile(r"[A-Za-z_]\w*(?:\.\w+)+")
WORD_RE = re.compile(r"[A-Z]?[a-z]{3,}|[A-Z]{3,}(?![a-z])")
VOWEL_RE = re.compile(r"[aeiouyAEIOUY]")


def shannon_entropy(s: str) -> float:
    """Bits per character of the character distribution of ``s``."""
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values()) if n else 0.0


def _char_class(c: str) -> int:
    return 0 if c.islower() else 1 if c.isupper() else 2 if c.isdigit() else 3


def class_transitions(s: str) -> float:
    """Share of neighbouring alphanumerics of different classes (lower/upper/digit), separators
    ignored: ~0.6 for random base62, <= 0.3 for CamelCase or snake_case names."""
    s = "".join(c for c in s if c.isalnum())
    return sum(_char_class(a) != _char_class(b) for a, b in zip(s, s[1:])) / max(1, len(s) - 1)


def word_fraction(s: str) -> float:
    """Share of characters in word-like runs (Capitalised/lower/UPPER runs of 3+ with a vowel)."""
    return sum(len(w) for w in WORD_RE.findall(s) if VOWEL_RE.search(w)) / max(1, len(s))


def looks_random(v: str) -> bool:
    """A credential-like value: >= 16 chars mixing letters with digits or both cases, high entropy,
    neither words (``HiggsAudioV2TokenizerModel``, ``src/main/java2``) nor a placeholder, dotted name,
    path or URL. Hex strings and
    UUIDs count from 32 hex digits (shorter ones are mostly ids and short hashes).
    Measured: misses ~2% of random 16-20 char base62 strings, <= 0.2% of 32+ char ones."""
    if len(v) < 16 or PLACEHOLDER_RE.search(v):
        return False
    digit, lower, upper = (any(f(c) for c in v) for f in (str.isdigit, str.islower, str.isupper))
    if not ((digit and (lower or upper)) or (lower and upper)):
        return False
    if HEX_ID_RE.fullmatch(v):
        return len(v.replace("-", "")) >= 32
    if DOTTED_NAME_RE.fullmatch(v) or "://" in v or v[0] in "/.~":
        return False  # module.attr names, URLs, absolute and relative paths (other paths are wordy)
    return shannon_entropy(v) >= 3.0 and class_transitions(v) >= 0.25 and word_fraction(v) < 0.6


def _secret_name(text: str, op_start: int, bare: bool) -> bool:
    lo = max(0, op_start - 90)
    n = NAME_BEFORE_RE.search(text, lo, op_start)
    if not n or not SECRET_WORD_RE.search(n["name"]) or NOT_SECRET_NAME_RE.search(n["name"]):
        return False
    return not bare or bool(LINE_START_RE.search(text, max(0, n.start() - 20), n.start()) or n.start() == 0)


def _redact_assignments(text: str, counts: Counter) -> str:
    edits = []
    for m in ASSIGN_RE.finditer(text):
        g = "v" if m["v"] is not None else "bare"
        if looks_random(m[g]) and _secret_name(text, m.start(), g == "bare"):
            edits.append((m.start(g), m.end(g), KEY))
    counts["key_assignment"] += len(edits)
    return _splice(text, edits)


# ---- 4. passwords in URLs ------------------------------------------------------------------------
# Anchored at "://"; the user name (kept) runs to the first ":", the password to the "@" before the
# host. Any host: ``localhost``, a bare name, an IP (the TLD-less cases the email pass cannot see).
URL_PASSWORD_RE = re.compile(
    r"://(?<=[A-Za-z0-9]://)[^\s:/?#@\"'`<>]{0,64}:(?P<v>[^\s/?#@\"'`<>]{1,128})@(?=[\w\[])")
URL_TEMPLATE_RE = re.compile(r"\$\{?\w*\}?|\{[^{}]*\}|%(?:\(\w+\))?s|\*+|[xX]+")  # ${PW}, {pw}, %s, ***


def _redact_url_passwords(text: str, counts: Counter) -> str:
    if "://" not in text:
        return text
    edits = [(m.start("v"), m.end("v"), KEY) for m in URL_PASSWORD_RE.finditer(text)
             if not URL_TEMPLATE_RE.fullmatch(m["v"])]
    counts["url_password"] += len(edits)
    return _splice(text, edits)


# ---- 5. emails -----------------------------------------------------------------------------------
# Anchored at "@"; the local part is read backwards by _local_start.
EMAIL_AT_RE = re.compile(
    r"@(?P<domain>(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+(?P<tld>[A-Za-z]{2,24}))"
    r"(?![A-Za-z0-9-]|\s*\()")
LOCAL_CHARS = frozenset(string.ascii_letters + string.digits + "._%+-")
RESERVED_DOMAIN_RE = re.compile(r"(?:^|\.)(?:example\.(?:com|net|org)|example|test|invalid|localhost)$", re.I)
FILE_TLDS = frozenset(
    "png jpg jpeg gif svg webp ico bmp tif tiff pdf js mjs ts jsx tsx css scss less py pyc pyi rb go java class "
    "php html htm json xml yml yaml toml ini cfg txt md rst c h cc cpp hpp rs so dll dylib exe jar map lock "
    "pkl pickle npy npz bin gz tgz tar zip whl egg jit".split())


def _local_start(text: str, at: int) -> int | None:
    """Start of the email local part ending at ``at`` (1-64 chars, starting alphanumeric, with a
    letter), or None."""
    i = at
    while i > 0 and at - i <= 64 and text[i - 1] in LOCAL_CHARS:
        i -= 1
    if at - i > 64:
        return None
    while i < at and not text[i].isalnum():
        i += 1
    return i if i < at and any(c.isalpha() for c in text[i:at]) else None


def _redact_emails(text: str, counts: Counter) -> str:
    if "@" not in text:
        return text
    edits, pos = [], 0
    for m in EMAIL_AT_RE.finditer(text):
        start = _local_start(text, m.start())
        if (start is None or start < pos or RESERVED_DOMAIN_RE.search(m["domain"])
                or m["tld"].lower() in FILE_TLDS):
            continue
        edits.append((start, m.end(), EMAIL))
        pos = m.end()
    counts["email"] += len(edits)
    return _splice(text, edits)


# ---- 6-7. IP addresses ---------------------------------------------------------------------------
OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
IPV4_TAIL_RE = re.compile(rf"\.(?<=\d\.){OCTET}\.{OCTET}\.{OCTET}(?!\.?\w|/\d)")  # at the first dot; not a CIDR
FIRST_OCTET_RE = re.compile(rf"(?<![\w.]){OCTET}$")
SECTION_LIKE_RE = re.compile(r"\d\.\d\.\d\.")  # 7.1.4.34, 8.2.4.44: versions and section numbers
# A version, spec section or OID word (not a host) shortly before the quad. The word must stand
# alone: at a word start (after a non-letter, so ``__version__`` and ``min_ver`` count) or at a
# camelCase hump (``pythonVersion``, ``ObjectIdentifier``), and end before a lower-case letter; so
# ``SERVER_IP``, ``server``, ``driver_addr``, ``void`` and ``verify`` are no version context.
VERSION_WORD = (r"(?:(?<![A-Za-z])|(?<=[a-z])(?=[A-Z]))"
                r"(?i:versions?|ver|release|v|section|sect|§|rfc|oid|identifier|kernel)(?![a-z])")
VERSION_CONTEXT_RE = re.compile(VERSION_WORD + r"[\w\"' ]{0,20}[=:( ]*[\"']?v?$")
PUBLIC_RESOLVERS = frozenset({"8.8.8.8", "8.8.4.4", "1.1.1.1", "1.0.0.1", "9.9.9.9", "149.112.112.112",
                              "208.67.222.222", "208.67.220.220"})
# 2000::/3 written out: the first group is 4 hex digits starting with 2 or 3 (so scanning starts only there)
IPV6_RE = re.compile(r"[23][0-9A-Fa-f]{3}(?<![\w:.]....)(?::[0-9A-Fa-f]{0,4}){2,7}(?![\w:]|\.\w|/\d)")
GLOBAL_UNICAST_V6 = ipaddress.ip_network("2000::/3")


def _line_before(text: str, pos: int, n: int = 40) -> str:
    start = max(text.rfind("\n", max(0, pos - n), pos) + 1, pos - n, 0)
    return text[start:pos]


OID_ARCS_RE = re.compile(r"(?:1\.[023]|2\.5|2\.23)\.")  # iso standard / member-body / org; joint ds, intl orgs
RELEASE_SUFFIX_RE = re.compile(r"-[A-Za-z]")  # 5.15.167.4-microsoft-standard, -generic, -aws
THOUSANDS_RE = re.compile(r"\d{1,3}(?:\.\d{3}){3}")  # 1.150.200.100: the shape of a number >= 10^9
CURRENCY = r"[$€£¥]|(?:EUR|USD|GBP|CHF|JPY|eur|usd)\b"
AMOUNT_AFTER_RE = re.compile(
    r",\d|[ \t]?(?:" + CURRENCY + r"|%|(?i:euros?|dollars?|bytes|bits|rows|records|items|units|people|"
    r"inhabitants|users|views|downloads|copies|tons?|km|kg)\b)")
AMOUNT_BEFORE_RE = re.compile(r"(?:" + CURRENCY + r")[ \t]?$")


def _keep_ipv4(v: str, before: str, after: str) -> bool:
    ip = ipaddress.IPv4Address(v)
    return (not ip.is_global or ip.is_multicast or v in PUBLIC_RESOLVERS or bool(SECTION_LIKE_RE.match(v))
            or bool(VERSION_CONTEXT_RE.search(before)) or bool(RELEASE_SUFFIX_RE.match(after))
            or bool(OID_ARCS_RE.match(v))
            or (THOUSANDS_RE.fullmatch(v) is not None and bool(AMOUNT_AFTER_RE.match(after) or AMOUNT_BEFORE_RE.search(before))))


def _redact_ipv4(text: str, counts: Counter) -> str:
    edits = []
    for m in IPV4_TAIL_RE.finditer(text):
        first = FIRST_OCTET_RE.search(text, max(0, m.start() - 3), m.start())
        if first is None:
            continue
        v = text[first.start():m.end()]
        if not _keep_ipv4(v, _line_before(text, first.start()), text[m.end():m.end() + 12]):
            edits.append((first.start(), m.end(), IP))
    counts["ipv4"] += len(edits)
    return _splice(text, edits)


def _redact_ipv6(text: str, counts: Counter) -> str:
    edits = []
    for m in IPV6_RE.finditer(text):
        v = m[0]
        if sum(1 for g in v.split(":") if g) < 4:
            continue  # too little written out to tell from code
        try:
            ip = ipaddress.IPv6Address(v)
        except ValueError:
            continue
        if ip in GLOBAL_UNICAST_V6 and ip.is_global:
            edits.append((m.start(), m.end(), IP))
    counts["ipv6"] += len(edits)
    return _splice(text, edits)


PASSES: list[Callable[[str, Counter], str]] = [
    _redact_pem, _redact_tokens, _redact_assignments, _redact_url_passwords, _redact_emails,
    _redact_ipv4, _redact_ipv6,
]


def redact(text: str) -> tuple[str, Counter]:
    """``text`` with secrets and PII replaced by tokens, and how many of each kind were replaced
    (kinds with zero matches are absent)."""
    counts: Counter = Counter()
    for p in PASSES:
        text = p(text, counts)
    return text, +counts
