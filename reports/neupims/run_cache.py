"""Where the NeuPIMs report keeps a run: a file named by the CONTENT of its configuration, not by the names in it.

A run's config names its inputs (mapping `neupims_code`, NPU preset, DRAM preset and standard, model, dataset);
a name keeps its meaning only while its file does. The key is the hash of the resolved config (the system's
defaults filled in) together with the SHA-256 of every file a value of that config names and of the files those
name in turn (a standard's `extends` and `include`, a preset's `standard`); a YAML or JSON file by its parsed
data (comments are no input). So editing a mapping, a preset or a
trace gives its runs a new key and they are re-run, where a key on the names reused the stale run.

A value is looked up as a path, then as a shipped file of its key's kind (`mapping` in mappings/, `npu`, `preset`,
`standard` and `gpu` under archsim/presets/, `model` in workloads/models, a named `dataset`'s histograms or snapshot
folder in workloads/datasets; in a YAML file `extends` beside it, `include`'s keys in standards/extensions). A
controller convention (`convention`, or a NeuPIMs mapping's `npu_controller`, which picks one) names
archsim/presets/controller_conventions.yaml, whose entry fills that controller's keys.

Code changes are not in the key, and nothing re-makes a run when the simulator changes: after such a change re-run
the scripts into a fresh folder (`-o DIR`) and compare the tables, then replace runs/ (tests/test_neupims_run_cache.py
re-runs one committed run to catch a change that moves it).
"""
from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from archsim import paths, registry
from archsim.dram.controller import CONVENTIONS_FILE
from archsim.results import config_hash

SUFFIXES = (".yaml", ".yml", ".json", ".csv", ".jsonl")
PRESETS = paths.PACKAGE_DIR / "presets"
STANDARDS = PRESETS / "dram" / "standards"


def _shipped(kind: str, *parts: str) -> Path:
    return paths.shipped_dir(kind).joinpath(*parts)


@lru_cache(maxsize=64)
def _listing(folder: Path) -> tuple[Path, ...]:
    return tuple(sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in SUFFIXES))


def _in(folder: Path, name: str, prefix: bool = False) -> list[Path]:
    """Files of `folder` (recursively) whose stem is `name` (or, with `prefix`, starts with `name`_)."""
    return [p for p in _listing(folder) if p.stem == name or (prefix and p.stem.startswith(f"{name}_"))]


def _files_of(key: str, name: str, parent: Path | None) -> list[Path]:
    """The files the value `name` of config key `key` names (a path, else the shipped files of its kind)."""
    if key in CONVENTION_KEYS:      # a convention's controller keys come from the one conventions file
        return [CONVENTIONS_FILE]
    as_path = Path(name).expanduser()
    if len(name) < 256 and as_path.is_file():
        return [as_path]
    if key == "dataset":        # a named dataset: its histograms; a set of NeuPIMs' snapshots: its folder
        folder = _shipped("workloads", "datasets")
        sets = {"neupims_clb": "clb", "neupims_rr": "rr"}
        return _in(folder / "neupims_traces" / sets[name], "", prefix=True) if name in sets else _in(
            folder, name, prefix=True)
    folder = {"mapping": paths.shipped_dir("mappings"), "model": _shipped("workloads", "models"),
              "npu": PRESETS / "npu", "preset": PRESETS / "dram", "gpu": PRESETS / "baselines",
              "standard": STANDARDS, "include": STANDARDS / "extensions",
              "extends": parent}.get(key)
    return _in(folder, name) if folder is not None else []


def _named(value: Any, key: str = ""):
    """(key, name) for every string of a config value that a file-naming key holds (a standard's `include`
    names its extensions by its keys)."""
    if isinstance(value, dict):
        for k, v in value.items():
            if k == "include" and isinstance(v, dict):
                yield from (("include", name) for name in v)
            else:
                yield from _named(v, k)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _named(v, key)
    elif isinstance(value, str) and key in NAMING_KEYS:
        yield key, value


CONVENTION_KEYS = ("convention", "npu_controller")
NAMING_KEYS = ("mapping", "model", "npu", "preset", "gpu", "standard", "dataset", "extends", *CONVENTION_KEYS)


def content_digest(suffix: str, data: bytes) -> str:
    """SHA-256 of a file's content: of its parsed data for YAML and JSON (a comment or a layout change is no
    change of the run's input), else of its bytes."""
    if suffix in (".yaml", ".yml", ".json"):
        data = json.dumps(yaml.safe_load(data), sort_keys=True, default=str, separators=(",", ":")).encode()
    return hashlib.sha256(data).hexdigest()


@lru_cache(maxsize=4096)
def _read(path: Path, mtime_ns: int, size: int) -> tuple[str, tuple[tuple[str, str], ...]]:
    """A file's content digest and the (key, name) pairs it names (YAML); cached while the file is unchanged."""
    data = path.read_bytes()
    named = tuple(_named(yaml.safe_load(data))) if path.suffix in (".yaml", ".yml") else ()
    return content_digest(path.suffix, data), named


def input_digests(resolved: dict[str, Any]) -> dict[str, str]:
    """The content digest of every file the resolved config names, and of the files those YAML files name
    (transitively), by repository-relative path."""
    out: dict[str, str] = {}
    todo = [(key, name, None) for key, name in _named(resolved)]
    while todo:
        key, name, parent = todo.pop()
        for path in _files_of(key, name, parent):
            path = path.resolve()
            rel = str(path.relative_to(paths.REPO_ROOT)) if path.is_relative_to(paths.REPO_ROOT) else str(path)
            if rel in out:
                continue
            stat = path.stat()
            out[rel], named = _read(path, stat.st_mtime_ns, stat.st_size)
            todo.extend((k, n, path.parent) for k, n in named)
    return dict(sorted(out.items()))


def run_key(cfg: dict[str, Any]) -> str:
    """The run's cache key: the resolved config and the content of every input file it names."""
    resolved = registry.resolve_config(cfg)
    return config_hash({"config": resolved, "inputs": input_digests(resolved)})


def run_path(runs: Path, cfg: dict[str, Any], suffix: str = ".json") -> Path:
    return runs / f"{cfg['system']}-{run_key(cfg)}{suffix}"
