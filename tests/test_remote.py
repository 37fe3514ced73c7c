"""Object storage (issue 23.2): prepare from ``s3://`` URLs and to them, against a real S3 API
(moto's server on loopback, reached through s3fs as any S3 endpoint is: ``AWS_ENDPOINT_URL``).
The views from the bucket equal the views from the local folder; the cache check uses the store's
ETags; rows stream from jsonl.gz and parquet objects; an output URL gets the folder, DONE last.
"""

from __future__ import annotations

import gzip
import json
import shutil
import sysconfig
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from codept.data import remote
from codept.data.sources import stdlib_root
from codept.prepare import PrepareConfig, prepare
from codept.tokenizer import train_tokenizer
from codept.views import open_views

BUCKET = "codept-corpus"


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """A moto S3 server on 127.0.0.1 (a real HTTP S3 API), the bucket, and the env an S3 client reads."""
    from moto.server import ThreadedMotoServer

    mp = pytest.MonkeyPatch()
    mp.setenv("AWS_ACCESS_KEY_ID", "testing")
    mp.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    mp.setenv("AWS_DEFAULT_REGION", "us-east-1")
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    mp.setenv("AWS_ENDPOINT_URL", f"http://{host}:{port}")
    import fsspec

    fsspec.filesystem("s3").clear_instance_cache()
    fs = fsspec.filesystem("s3", skip_instance_cache=True)
    fs.mkdir(BUCKET)
    yield fs
    server.stop()
    mp.undo()


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    """A local corpus: the stdlib's json package, a Makefile (token-only), a file of no language."""
    root = tmp_path_factory.mktemp("corpus") / "src"
    shutil.copytree(stdlib_root() / "json", root, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(sysconfig.get_makefile_filename(), root / "Makefile")
    (root / "notes.md").write_text("# notes\n")
    return root


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("tok")
    train_tokenizer(sorted(stdlib_root().glob("json/*.py")), out, vocab_size=800)
    return out


def _put_folder(fs, root: Path, prefix: str) -> None:
    for p in sorted(root.rglob("*")):
        if p.is_file():
            fs.put_file(str(p), f"{BUCKET}/{prefix}/{p.relative_to(root).as_posix()}")


def _views(folder) -> dict:
    """name -> every field of the view but its path (a URL there, a local path here)."""
    out = {}
    for v in open_views(folder):
        rec = v.to_record()
        out[Path(rec.pop("path")).name] = rec
    return out


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        np.array_equal(np.asarray(a[k][f]), np.asarray(b[k][f])) if isinstance(a[k][f], (list, np.ndarray))
        else a[k][f] == b[k][f] for k in a for f in a[k])


def test_prepare_from_s3_equals_the_local_folder(s3, local, tok_dir, tmp_path):
    _put_folder(s3, local, "src")
    cfg = PrepareConfig(workers=1)
    url = f"s3://{BUCKET}/src/"
    a = prepare([url], out=tmp_path / "from_s3", tokenizer_dir=tok_dir, cfg=cfg, progress=False)
    b = prepare([str(local)], out=tmp_path / "from_disk", tokenizer_dir=tok_dir, cfg=cfg, progress=False)
    assert a["viewed"] == b["viewed"] == 6 and a["tokens_only"] == 1 and a["skipped"] == b["skipped"] == {"unknown_language": 1}
    assert a["tokens"] == b["tokens"] and a["per_lang"] == b["per_lang"]
    va, vb = _views(tmp_path / "from_s3"), _views(tmp_path / "from_disk")
    assert _same(va, vb) and len(va) == 6
    rows = [json.loads(x) for x in (tmp_path / "from_s3" / "manifest.jsonl").read_text().splitlines()]
    assert all(r["origin"].startswith(f"file:s3://{BUCKET}/src/") for r in rows)
    assert {Path(r["path"]).name: r["status"] for r in rows} == {
        Path(r["path"]).name: r["status"] for r in map(json.loads, (tmp_path / "from_disk" / "manifest.jsonl").read_text().splitlines())}
    # the cache check asks the store (ETag, size, time): unchanged -> served; a changed object -> rebuilt
    again = prepare([url], out=tmp_path / "from_s3", tokenizer_dir=tok_dir, cfg=cfg, progress=False)
    assert again.get("cached") and again["cache_key"] == a["cache_key"]
    s3.pipe_file(f"{BUCKET}/src/tool.py", b'def main():\n    """Run it."""\n    return 1\n')
    changed = prepare([url], out=tmp_path / "from_s3", tokenizer_dir=tok_dir, cfg=cfg, progress=False, force=False)
    assert not changed.get("cached") and changed["cache_key"] != a["cache_key"]
    assert "def main" in _views(tmp_path / "from_s3")["tool.py"]["text"]


def test_rows_stream_from_objects_and_the_output_goes_to_a_url(s3, tok_dir, tmp_path):
    files = sorted(stdlib_root().glob("json/*.py"))
    rows = [{"content": f.read_text(), "lang": "python", "path": f.name} for f in files]
    s3.pipe_file(f"{BUCKET}/rows/a.jsonl.gz", gzip.compress("".join(json.dumps(r) + "\n" for r in rows).encode()))
    t = pa.table({"content": [r["content"] for r in rows], "language": ["Python"] * len(rows),
                  "max_stars_repo_path": [f"x/{r['path']}" for r in rows]})
    local_pq = tmp_path / "b.parquet"
    pq.write_table(t, local_pq, row_group_size=2)
    s3.put_file(str(local_pq), f"{BUCKET}/rows/b.parquet")
    out_url = f"s3://{BUCKET}/views/json"
    s = prepare([f"s3://{BUCKET}/rows/a.jsonl.gz", f"s3://{BUCKET}/rows/b.parquet"], out=out_url,
                tokenizer_dir=tok_dir, cfg=PrepareConfig(workers=1, dedup=False), progress=False)
    assert s["out"] == out_url and s["viewed"] == 2 * len(files) and Path(s["local"]).is_dir()
    keys = sorted(k.split("/views/json/", 1)[1] for k in s3.find(f"{BUCKET}/views/json"))
    local_files = sorted(p.relative_to(s["local"]).as_posix() for p in Path(s["local"]).rglob("*") if p.is_file())
    assert keys == local_files and "DONE" in keys and "manifest.jsonl" in keys
    got = tmp_path / "downloaded"
    s3.get(f"{BUCKET}/views/json/", str(got), recursive=True)
    assert _same(_views(got), _views(s["local"]))
    # a second run: the local cache serves it, and the URL already holds the same DONE (no upload)
    before = s3.info(f"{BUCKET}/views/json/DONE")["LastModified"]
    again = prepare([f"s3://{BUCKET}/rows/a.jsonl.gz", f"s3://{BUCKET}/rows/b.parquet"], out=out_url,
                    tokenizer_dir=tok_dir, cfg=PrepareConfig(workers=1, dedup=False), progress=False)
    assert again.get("cached") and s3.info(f"{BUCKET}/views/json/DONE")["LastModified"] == before


def test_urls_are_told_apart_and_errors_name_the_rule(s3, tok_dir, tmp_path):
    assert remote.is_url("s3://b/k") and remote.is_url("hf://datasets/x") and not remote.is_url("file:///tmp/x")
    assert not remote.is_url("C:\\src") and not remote.is_url("src/a.py") and remote.local_path("file:///tmp/x") == "/tmp/x"
    with pytest.raises(ValueError, match="nosuch"):
        remote.filesystem("nosuch://bucket/key")
    from codept.prepare import NothingToPrepare

    with pytest.raises(NothingToPrepare, match="no source exists"):
        prepare([f"s3://{BUCKET}/no/such/prefix/"], out=tmp_path / "o", tokenizer_dir=tok_dir,
                cfg=PrepareConfig(workers=1), progress=False)


def test_prepare_text_from_and_to_s3_equals_the_local_folder(s3, tok_dir, tmp_path, capsys):
    """`codept prepare-text s3://... --out s3://...`: the text and pair views equal those of the same
    files on disk; a jsonl.gz of pairs is read in chunks from the object; a second run is served."""
    import textwrap

    from codept.cli import main

    src = tmp_path / "text"
    src.mkdir()
    (src / "json.txt").write_text(json.__doc__)
    (src / "wrap.md").write_text("# textwrap\n\n" + textwrap.__doc__ + "\n")
    (src / "pairs.jsonl.gz").write_bytes(gzip.compress("".join(json.dumps(
        {"src": f"Open the file number {i} for reading", "tgt": f"Öffne die Datei Nummer {i} zum Lesen",
         "src_lang": "en", "tgt_lang": "de"}) + "\n" for i in range(30)).encode()))
    (src / "image.png").write_bytes(b"\x89PNG\r\n")
    _put_folder(s3, src, "text")
    out_url = f"s3://{BUCKET}/views/text"
    assert main(["prepare-text", f"s3://{BUCKET}/text/", "--out", out_url, "--tokenizer", str(tok_dir),
                 "--workers", "1"]) == 0
    assert main(["prepare-text", str(src), "--out", str(tmp_path / "disk"), "--tokenizer", str(tok_dir),
                 "--workers", "1"]) == 0
    got = tmp_path / "downloaded"
    s3.get(f"{out_url}/", str(got), recursive=True)
    for kind in ("text", "pairs"):
        a = [v.to_record() for v in open_views(got / kind)]
        b = [v.to_record() for v in open_views(tmp_path / "disk" / kind)]
        assert len(a) == len(b) > 0 and [Path(r.pop("path")).name for r in a] == [Path(r.pop("path")).name for r in b]
        assert all(_same({0: x}, {0: y}) for x, y in zip(a, b))
    rows = [json.loads(x) for x in (got / "manifest.jsonl").read_text().splitlines()]
    assert {Path(r["path"]).name: r.get("reason") for r in rows}["image.png"] == "unknown_format"
    capsys.readouterr()
    assert main(["prepare-text", f"s3://{BUCKET}/text/", "--out", out_url, "--tokenizer", str(tok_dir)]) == 0
    assert "(cached)" in capsys.readouterr().out
    assert main(["prepare-text", "nosuch://bucket/x", "--tokenizer", str(tok_dir)]) == 2
    assert "nosuch" in capsys.readouterr().err


def test_recipe_settings_take_urls_only_where_prepare_reads_them():
    from codept.train.loop import ConfigError, check_paths

    check_paths("data.sources", f"s3://{BUCKET}/src/,{stdlib_root() / 'json'}")
    with pytest.raises(ConfigError, match="data.traces=.*a URL; this setting reads local folders"):
        check_paths("data.traces", f"s3://{BUCKET}/traces", urls=False)
    with pytest.raises(ConfigError, match="no such file or folder"):
        check_paths("data.sources", "/no/such/folder")
