"""The probes a training run evaluates by default, built once and cached, and their baselines.

Two probes, each reported for every model (codept.probe.run):
  in_domain      held-out FILES of the training corpus (codept.probe.split: a content hash puts
                 ``holdout`` of the files aside; training never sees them), decontaminated against
                 the training files;
  cross_project  a project never seen in training: by default ``networkx``, the graph library torch
                 depends on, so it is installed next to the toolkit wherever codept runs; decontaminated
                 against the whole prepared training corpus.
:func:`default_probes` builds both into ``~/.cache/codept/probes/<key>/`` where the key hashes the
training views' cache key, the split, the project's location and version and this module's
settings; a finished folder is never rebuilt, concurrent builders rename temp folders atomically.
:func:`baseline` scores BM25 / a random-init encoder on a probe once and caches results.json next to
the pairs (they depend on the pairs and the seed only).
Cost: first build of the networkx probe ~10-20 s (prepare of ~300 files, cached) plus the in-domain
split (one hash of every training file); later runs read two small jsonl files. Not covered: probes
for languages the training corpus lacks (pass another ``project``; ``codept probe build`` for any).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from codept.probe import load_pairs


@dataclass(frozen=True)
class ProbeConfig:
    """Recipe settings (``probe.<field>=value`` overrides)."""

    holdout: float = 0.1  # share of training files held out for the in-domain probe (0 = no in-domain probe)
    project: str = "networkx"  # cross-project probe: an installed package name or a source path ("" = none)
    every: int = 50  # optimizer steps between cheap probes during training (0 = only at the end)
    queries: int = 200  # queries per language of the cheap probe
    final_queries: int = 1000  # queries per language of the final probe
    pool: int = 1000  # candidates per pool (the CodeSearchNet convention)
    baselines: str = "bm25,random"  # scored once per probe (cached) for the summary table
    max_len: int = 256  # code tokens per candidate
    structure_every: int = 0  # optimizer steps between structural probes of the live model (0 = never;
    #                           codept.probe.structure on the held-out files, cheap caps: ~5-15 s on CPU)
    structure_files: int = 32  # held-out files the structural probes read (half probe-train, half test)

    def __post_init__(self):
        if not 0.0 <= self.holdout < 1.0:
            raise ValueError(f"holdout={self.holdout}: must be in [0, 1) (0 = no in-domain probe)")
        if self.every < 0:
            raise ValueError(f"every={self.every}: must be >= 0 (0 = only at the end)")
        if self.structure_every < 0 or self.structure_files < 4:
            raise ValueError(f"structure_every={self.structure_every} (>= 0, 0 = never), structure_files="
                             f"{self.structure_files} (>= 4): out of range")
        for name, lo in (("queries", 1), ("final_queries", 1), ("pool", 2), ("max_len", 8)):
            if getattr(self, name) < lo:
                raise ValueError(f"{name}={getattr(self, name)}: must be >= {lo}")


def check_sources(cfg: ProbeConfig) -> None:
    """What the settings name exists, before any work: the cross-project probe's project (a path or an
    installed package) and each baseline (codept.probe.run.model_kind; ``random:PRESET`` a model
    preset). ValueError naming the setting and the rule."""
    from codept.probe.run import model_kind, random_preset

    if cfg.project:
        try:
            project_dir(cfg.project)
        except FileNotFoundError as e:
            raise ValueError(f"project={cfg.project!r}: {e} ('' = no cross-project probe)") from None
    for spec in filter(None, cfg.baselines.split(",")):
        try:
            model_kind(spec)
        except ValueError as e:
            raise ValueError(f"baselines={cfg.baselines!r}: {spec}: {e}") from None
        if spec.startswith("random:"):
            from codept.model import config as T  # the presets, without torch (settings are checked before it)

            if random_preset(spec) not in T.PRESETS:
                raise ValueError(f"baselines={cfg.baselines!r}: {spec}: unknown model preset (known: "
                                 f"{', '.join(sorted(T.PRESETS))})")


def project_dir(project: str) -> Path:
    """An installed package's folder (``networkx``) or a path."""
    p = Path(project)
    if p.exists():
        return p.resolve()
    spec = importlib.util.find_spec(project)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"probe project {project!r} is neither a path nor an installed package")
    return Path(list(spec.submodule_search_locations)[0]).resolve()


def _version(project: str) -> str:
    try:
        from importlib.metadata import version

        return version(project)
    except Exception:  # a path, or a package without metadata
        return ""


def _cache_root() -> Path:
    from codept.tokenizer import cache_dir

    return cache_dir() / "probes"


def _cached(key_parts: dict, build) -> Path:
    """The folder for `key_parts`, built by ``build(tmp_dir)`` unless it is already complete."""
    key = hashlib.sha256(json.dumps(key_parts, sort_keys=True).encode()).hexdigest()[:16]
    out = _cache_root() / key
    if (out / "probe.json").is_file() and (out / "pairs.jsonl").is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=out.parent))
    try:
        build(tmp)
        (tmp / "key.json").write_text(json.dumps(key_parts, indent=2, sort_keys=True) + "\n")
        try:
            os.rename(tmp, out)
        except OSError:  # another process finished first: theirs is identical
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def default_probes(views, views_key: str, views_out: str, cfg: ProbeConfig, progress: bool = False) -> dict[str, Path]:
    """{"in_domain": dir, "cross_project": dir} (each only when configured), built or found in the cache.
    `views`: the prepared training corpus (datasets.Dataset of views), `views_key`/`views_out`: its
    prepare cache key and folder."""
    from codept.probe.build import build_probe
    from codept.probe.split import SALT, in_domain_probe

    settings = {"min_query_words": 3, "min_body_lines": 3, "module": 1}
    probes = {}
    if cfg.holdout > 0:
        parts = {"kind": "in_domain", "views": views_key, "holdout": cfg.holdout, "salt": SALT, **settings}
        probes["in_domain"] = _cached(parts, lambda d: in_domain_probe(views, cfg.holdout, d))
    if cfg.project:
        src = project_dir(cfg.project)
        parts = {"kind": "cross_project", "project": str(src), "version": _version(cfg.project),
                 "exclude": views_key, **settings}
        probes["cross_project"] = _cached(parts, lambda d: build_probe([str(src)], d, exclude=[views_out],
                                                                       progress=progress))
    return probes


def _spec_key(spec: str) -> str:
    """The cache name of a baseline spec. A random-init encoder is keyed by its preset's whole
    ModelConfig too: change the preset (e.g. its init) and the baseline is scored again."""
    from codept.probe.run import random_preset

    key = spec.replace(":", "_")
    if spec == "random" or spec.startswith("random:"):
        from codept.model import config as T

        preset = random_preset(spec)
        if preset in T.PRESETS:
            key += "-" + hashlib.sha256(repr(T.PRESETS[preset]()).encode()).hexdigest()[:12]
    return key


def baseline(probe_dir: Path, spec: str, cfg: ProbeConfig) -> dict:
    """results.json of ``spec`` ("bm25", "random", any --model value) on a probe, computed once."""
    from codept.probe.run import build_scorer, run_probe, write_results

    out = Path(probe_dir) / "results" / f"baseline-{_spec_key(spec)}-q{cfg.final_queries}-p{cfg.pool}"
    f = out / "results.json"
    if f.is_file():
        return json.loads(f.read_text())
    scorer = build_scorer(spec, max_len=cfg.max_len, device="cpu")
    result = run_probe(scorer, load_pairs(probe_dir), pool_size=cfg.pool, seed=0, max_queries=cfg.final_queries)
    write_results(result, out)
    return result


def mrr_by_lang(result: dict, protocol: str = "pool") -> dict[str, float]:
    """{lang: MRR} of a results.json dict."""
    return {r["lang"]: r["mrr"] for r in result["rows"] if r["protocol"] == protocol}


def settings(cfg: ProbeConfig) -> dict:
    return asdict(cfg)
