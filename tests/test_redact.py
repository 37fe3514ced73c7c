"""Secret/PII redaction: planted secrets in real stdlib code are removed and counted, the code still
parses, ordinary code (versions, loopback, slices, C++ scopes, placeholders) is left alone, and the
whole standard library redacts only what is plausibly personal."""

from __future__ import annotations

import ast
from collections import Counter

import pytest

from codept.data.redact import looks_random, redact
from codept.data.sources import stdlib_files, stdlib_root

PEM_BODY = ("MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
            "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n"
            "LxoS2tFczGkPLPgizskuemMghRniWaoLcyehkd3qqGElvW/VDL5AaWTg0nLVkjRo\n"
            "9z+40RQzuVaE8AkAFmxZzow3x+VJYKdjykkJ0iT9wCS0DRTXu269V264Vf/3jvre")
SECRETS = {  # kind -> (planted Python line(s), the secret text that must disappear)
    "aws_access_key": ('AWS_ACCESS_KEY_ID = "AKIAQ3EGRRLSCJ7D4XNP"', "AKIAQ3EGRRLSCJ7D4XNP"),
    "github_token": ('GH = "ghp_' + "R8x2Lq9ZtW4mVb7Nc3Kd6Hf1Jg5Ps0Ya2Ue4" + '"', "R8x2Lq9ZtW4mVb7Nc3Kd6Hf1Jg5Ps0Ya2Ue4"),
    "slack_token": ('SLACK = "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOp"', "xoxb-123456789012"),
    "google_api_key": ('MAPS = "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"', "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"),
    "bearer_token": ('HEADERS = {"Authorization": "Bearer mF9B5f41JqM8e2xYvQ7kLp3Zt6Rw"}', "mF9B5f41JqM8e2xYvQ7kLp3Zt6Rw"),
    "jwt": ('JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"',
            "dozjgNryP4J3jVmNHl0w5N"),
    "key_assignment": ('db_password = "Tr0ub4dor&3xQ9!zLm"\nconfig = {"api_secret": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzq8Tx3mB2d"}',
                       "Tr0ub4dor&3xQ9!zLm"),
    "private_key": (f'SERVER_KEY = """-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----"""',
                    "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun"),
    "email": ("# Maintainer: Jane Roe <jane.roe@corp-mail.co.uk>", "jane.roe@corp-mail.co.uk"),
    "ipv4": ('UPSTREAM = ("52.94.236.248", 443)', "52.94.236.248"),
    "ipv6": ('MIRROR = "2a00:1450:4001:81c::200e"', "2a00:1450:4001:81c::200e"),
    "slack_webhook": ('HOOK = "https://hooks.slack.com/services/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"',
                      "B08N3J1LS2K/Ab12Cd34Ef56Gh78Ij90Kl12"),
}
PLANTED = Counter({k: 1 for k in SECRETS} | {"key_assignment": 2})

KEEP = [  # ordinary code that must come out unchanged
    'HOST, ANY = "127.0.0.1", "0.0.0.0"',
    '__version__ = "1.2.3"',
    'VERSION = "10.20.30.40"',
    'PRIVATE_NET, DOC_NET = "10.1.2.3", "192.0.2.10"',
    'DNS = "8.8.8.8"',
    'CIDR = "52.94.0.0/22"',
    'OID = ObjectIdentifier("2.5.29.17")',
    "# see RFC 7231 section 7.1.1.1 and HTML 8.2.4.44",
    'LOOPBACK6, DOC6 = "::1", "2001:db8::1"',
    "odd = data[1::2]",
    'CXX = "std::vector<int>::iterator"',
    'MAC, TIME = "00:1a:2b:3c:4d:5e", "12:34:56"',
    'CONTACT = "joe@example.com"',
    'ICON = "icon@2x.png"',
    'api_key = "your-api-key-here"',
    'password = "${DB_PASSWORD}"',
    'token = "%(token)s-%(user)s"',
    'secret_key_class = "HiggsAudioV2TokenizerModel"',
    'tokenizer_name = "bert-base-uncased-v2"',
    'key_sha256 = "16b791a1e04886ccbbb4d448d6ff791267dc458ae599475d08d5cced29d11614"',
    'cache_key = "module.sub.Attr2"',
    'AWS_DOC = "AKIAIOSFODNN7EXAMPLE"',
    'TEMPLATE = "-----BEGIN PRIVATE KEY-----\\n%s\\n-----END PRIVATE KEY-----"',
    "key_path = os.path.join(base, 'keys/server2.pem')",
]


def test_planted_secrets_in_stdlib_code_are_removed_and_counted():
    original = (stdlib_root() / "textwrap.py").read_text()
    lines = original.split("\n")
    cut = next(i for i, line in enumerate(lines) if line.startswith("import "))  # after the imports
    block = [line for src, _ in SECRETS.values() for line in src.split("\n")]
    planted = "\n".join(lines[:cut + 1] + block + KEEP[:3] + lines[cut + 1:])
    out, counts = redact(planted)
    _, base = redact(original)  # the file's own PII (its author's email)
    assert base == Counter({"email": 1})
    assert counts == base + PLANTED
    for kind, (_, secret) in SECRETS.items():
        assert secret not in out, kind
    assert "wJalrXUtnFEMI" not in out
    ast.parse(out)  # still Python
    for kept in KEEP[:3]:
        assert kept in out
    assert 'AWS_ACCESS_KEY_ID = "<KEY>"' in out and 'db_password = "<KEY>"' in out
    assert '"Authorization": "Bearer <KEY>"' in out and 'UPSTREAM = ("<IP>", 443)' in out
    assert "# Maintainer: Jane Roe <<EMAIL>>" in out
    assert ('"""-----BEGIN RSA PRIVATE KEY-----\n<PRIVATE_KEY>\n-----END RSA PRIVATE KEY-----"""') in out
    assert redact(out) == (out, Counter())  # idempotent: tokens are never re-matched


@pytest.mark.parametrize("line", KEEP)
def test_ordinary_code_is_kept(line):
    assert redact(line) == (line, Counter())


@pytest.mark.parametrize("text,expected,kind", [
    # private keys split into concatenated string pieces: syntax between pieces survives
    ('K = ("-----BEGIN PRIVATE KEY-----\\n"\n     "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLez\\n" +\n'
     '     "VTLw7onLRnrq0/IzW7yW\\n"\n     "-----END PRIVATE KEY-----\\n")',
     'K = ("-----BEGIN PRIVATE KEY-----\\n"\n     "<PRIVATE_KEY>\\n" +\n     "\\n"\n     "-----END PRIVATE KEY-----\\n")',
     "private_key"),
    ('k = "-----BEGIN EC PRIVATE KEY-----\\nMHcCAQEEIIrYSSNQFaA2Hwf1duRSxKtLYX5CB04fSeQ6tF1aY\\nAwEHoUQD\\n'
     '-----END EC PRIVATE KEY-----\\n"',
     'k = "-----BEGIN EC PRIVATE KEY-----\\n<PRIVATE_KEY>\\n-----END EC PRIVATE KEY-----\\n"', "private_key"),
    ("// -----BEGIN OPENSSH PRIVATE KEY-----\n// b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n// QyNTUxOQAAACDmBSXsd1\n"
     "// -----END OPENSSH PRIVATE KEY-----",
     "// -----BEGIN OPENSSH PRIVATE KEY-----\n// <PRIVATE_KEY>\n// -----END OPENSSH PRIVATE KEY-----", "private_key"),
    ("-----BEGIN PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePz\nVTLw7onLRnrq0/IzW7yW\n",  # truncated
     "-----BEGIN PRIVATE KEY-----\n<PRIVATE_KEY>\n", "private_key"),
    ("export GITHUB_SECRET=Zx9q8W7e6R5t4Y3u2I1oP0aS  # ci", "export GITHUB_SECRET=<KEY>  # ci", "key_assignment"),
    ("apiKey := `Zx9q8W7e6R5t4Y3u2I1oP0aS`", "apiKey := `<KEY>`", "key_assignment"),
    ("'auth_token' => 'Zx9q8W7e6R5t4Y3u2I1oP0aS',", "'auth_token' => '<KEY>',", "key_assignment"),
    ('x = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"', 'x = "sk_live_<KEY>"', "stripe_key"),
    ("mail me: jane.doe@corp-mail.co.uk.", "mail me: <EMAIL>.", "email"),
    ("ping 2606:4700:4700::1111 now", "ping <IP> now", "ipv6"),
])
def test_formats(text, expected, kind):
    assert redact(text) == (expected, Counter({kind: 1}))


@pytest.mark.parametrize("text", [
    "xAKIAQ3EGRRLSCJ7D4XNP",  # inside a longer word
    "private_key: PKCS7PrivateKeyTypes,",  # a type annotation, not a value
    "key: transformer.layers.0.input_layernorm.weight, shape: torch.Size([4256])",
    "KEY_INFO = pkcs8_priv_key_info_st",  # bare identifier in code
    'h = "Bearer " + token',
    "c = a@self.proj(x)",
])
def test_code_lookalikes_are_kept(text):
    assert redact(text) == (text, Counter())


@pytest.mark.parametrize("text,expected", [
    # a word merely containing "ver" (server, driver, convert) is no version context
    ('SERVER_IP = "93.184.216.34"', 'SERVER_IP = "<IP>"'),
    ("# server 104.16.132.229", "# server <IP>"),
    ('driver_addr = "93.184.216.34"', 'driver_addr = "<IP>"'),
    ("convert IP addr string (123.45.67.89)", "convert IP addr string (<IP>)"),
    ('verify("93.184.216.34")', 'verify("<IP>")'),
])
def test_ipv4_after_words_containing_ver_is_redacted(text, expected):
    assert redact(text) == (expected, Counter({"ipv4": 1}))


@pytest.mark.parametrize("text", [
    "version 1.2.3.4", '__version__ = "3.11.0.1"', 'MIN_VER = "93.184.216.34"', 'pythonVersion = "93.184.216.34"',
    "release: 93.184.216.34", "RFC 104.16.132.229", 'driver_addr = "10.1.2.3"',  # the last: private, kept
])
def test_version_contexts_are_kept(text):
    assert redact(text) == (text, Counter())


@pytest.mark.parametrize("text", [
    # kernel releases: 4 parts and a -suffix, or after "kernel" (they were redacted as IPs)
    "5.15.167.4-microsoft-standard", "Linux box 6.6.87.2-microsoft-standard-WSL2 #1 SMP", 'uname = "4.19.128.1-generic"',
    "kernel 5.15.153.1",
    # object identifiers written bare
    '"2.5.29.17"', 'ED25519 = "1.3.101.112"', "EV_POLICY = '2.23.140.1'", "1.3.6.1.4.1", "1.3.6.1.4.1.311.60.2.1.3",
    "snmpwalk -v2c host 1.3.6.1.2.1.1",
    # numbers with thousands separators
    "1,234,567", "1.234.567", "1,234,567,890", "12.345.678,90 EUR", "a total of 1.150.200.100,50",
    "€ 1.150.200.100", "1.150.200.100 EUR", "1.150.200.100 bytes", "$1.150.200.100",
])
def test_versions_oids_and_numbers_are_not_ips(text):
    assert redact(text) == (text, Counter())


@pytest.mark.parametrize("text,expected,n", [
    # the other direction: the same shapes as hosts stay redacted
    ("52.95.110.1-52.95.110.255", "<IP>-<IP>", 2),  # a range: '-' and a digit
    ("ssh 151.101.129.140", "ssh <IP>", 1), ("151.101.129.140:443", "<IP>:443", 1),
    ("http://151.101.129.140/x", "http://<IP>/x", 1), ("1.150.200.100", "<IP>", 1),  # no amount context
    ("host 1.150.200.100, port 22", "host <IP>, port 22", 1),  # ', ' is no decimal comma
])
def test_host_shapes_stay_redacted(text, expected, n):
    assert redact(text) == (expected, Counter({"ipv4": n}))


@pytest.mark.parametrize("text,expected", [
    ("https://hooks.slack.com/services/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",
     "https://hooks.slack.com/services/<KEY>"),
    ('curl -X POST -d @msg.json "https://hooks.slack.com/services/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"',
     'curl -X POST -d @msg.json "https://hooks.slack.com/services/<KEY>"'),
    ("SLACK_URL=https://hooks.slack.com/workflows/T01ABCDEF/A02BCDEFG/412345678901234567/abcDEF123ghiJKL456mno",
     "SLACK_URL=https://hooks.slack.com/workflows/<KEY>"),
])
def test_slack_webhooks_are_redacted(text, expected):
    assert redact(text) == (expected, Counter({"slack_webhook": 1}))


def test_slack_documentation_webhook_is_kept():
    text = "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX"
    assert redact(text) == (text, Counter())


@pytest.mark.parametrize("text,expected", [
    ("http://admin:hunter2@localhost/", "http://admin:<KEY>@localhost/"),  # no TLD: no email either
    ("postgres://user:pass@host/db", "postgres://user:<KEY>@host/db"),
    ('DSN = "postgresql+psycopg2://app:Xy7q@db:5432/app"', 'DSN = "postgresql+psycopg2://app:<KEY>@db:5432/app"'),
    ("redis://:s3cr3t@cache:6379/0", "redis://:<KEY>@cache:6379/0"),
    ("https://bob:pw@shop.corp-mail.co.uk/x", "https://bob:<KEY>@shop.corp-mail.co.uk/x"),  # was an "email"
])
def test_url_passwords_are_redacted(text, expected):
    assert redact(text) == (expected, Counter({"url_password": 1}))


@pytest.mark.parametrize("text", [
    'u = "http://%s:%s@%s/" % (user, pw, host)', 'f"postgres://{user}:{pw}@{host}/db"',
    "amqp://guest:${RABBIT_PW}@rabbit//", "http://u:***@h/", "http://[2001:db8::1]:8080/x", "http://localhost:8080/a",
])
def test_url_templates_are_kept(text):
    assert redact(text) == (text, Counter())


def test_looks_random():
    assert looks_random("Zx9q8W7e6R5t4Y3u2I1oP0aS") and looks_random("wJalrXUtnFEMI/K7MDENG/bPxRfiCYzq8Tx3mB2d")
    assert looks_random("a9a67ae6c371fcf4a9a67ae6c371fcf4")  # 32 hex: a key or a digest
    assert not looks_random("a9a67ae6c371fcf4")  # 16 hex: mostly ids and short hashes
    for v in ["HiggsAudioV2TokenizerModel", "_COSMOS3_EDGE_DROPPED_KEYS", "src/main/java/com/example2",
              "short1A", "aaaaaaaaaaaaaaaaaaaa1", "0123456789abcdefABCD", "https://host/a1b2c3d4e5f6g7"]:
        assert not looks_random(v), v


def test_stdlib_redactions_are_plausible():
    """The default corpus: only author/contact emails and a docstring's example IP are redacted,
    and every redacted file still parses."""
    total: Counter = Counter()
    changed = 0
    for f in stdlib_files():
        text = f.read_text(encoding="utf-8")
        out, counts = redact(text)
        total += counts
        if counts:
            changed += 1
            ast.parse(out, filename=str(f))
            assert "<EMAIL>" in out or "<IP>" in out
    assert set(total) <= {"email", "ipv4"}, total  # no keys, tokens or private keys in the stdlib
    assert 50 <= total["email"] <= 400 and total["ipv4"] <= 5, total
    assert changed < len(stdlib_files()) // 4
