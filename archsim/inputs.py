"""The input files a resolved config names, by content: what a resumed sweep and the NeuPIMs report's run cache
compare to tell a result made from today's files from one made before an edit.

A config names its inputs (a mapping, an NPU / DRAM / ASIC / T3 / Duplex preset and the standard it names, a
model, a dataset, a trace file); a name keeps its meaning only while its file does. `input_digests(resolved)`
gives the SHA-256 of every file a value of the resolved config names, and of the files those name in turn (a
standard's `extends` and `include`, a preset's `standard`, T3's `ring`, the Duplex devices' `dram`), by path; a
YAML or JSON file by its parsed data (a comment or a layout change is no change of the input).

A value is looked up as a path, then as a shipped file of its key's kind (NAMED_FOLDERS: `mapping` in mappings/,
`model` in workloads/models, `npu`, `asic`, `gpu`, `ring`, `device_preset` in their archsim/presets/ folder,
`preset` a DRAM preset or (T3's `preset`, the GEMM system's `npu.preset`) a preset of another kind, `standard`
under archsim/presets/dram/standards; in a YAML file `extends` beside it, `include`'s keys in
standards/extensions). A named `dataset` is its histograms or its folder of NeuPIMs snapshots in
workloads/datasets. A controller convention (`convention`, or a NeuPIMs mapping's `npu_controller`, which picks
one) names archsim/presets/controller_conventions.yaml, whose entry fills that controller's keys. A value no file
answers to (an address-mapping scheme such as RoBaRaCoCh, a synthetic trace) names no input.

Code is no input: a change of the simulator changes no digest.
"""
from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from archsim import paths
from archsim.dram.controller import CONVENTIONS_FILE
from archsim.preset_kinds import kind

SUFFIXES = (".yaml", ".yml", ".json", ".csv", ".jsonl")
PRESETS = paths.PACKAGE_DIR / "presets"
DRAM_PRESETS = PRESETS / "dram"
STANDARDS = DRAM_PRESETS / "standards"

CONVENTION_KEYS = ("convention", "npu_controller")
# config key -> the folders (searched recursively, by file stem) a name under that key is looked up in
NAMED_FOLDERS: dict[str, tuple[str | Path | tuple[str, str], ...]] = {
    "mapping": ("mappings",), "model": (("workloads", "models"),),
    "npu": ("npu",), "asic": ("asic",), "gpu": ("baseline",), "ring": ("interconnect",), "device_preset": ("duplex",),
    "preset": (DRAM_PRESETS, "npu", "t3"),
    "memory_preset": (DRAM_PRESETS,), "dram": (DRAM_PRESETS,),   # T3's memory; the Duplex devices' DRAM
    "standard": (STANDARDS,), "include": (STANDARDS / "extensions",),
}
NAMING_KEYS = (*NAMED_FOLDERS, "dataset", "trace", "extends", *CONVENTION_KEYS)
NEUPIMS_SNAPSHOTS = {"neupims_clb": "clb", "neupims_rr": "rr"}   # dataset name -> its folder of snapshots


def _folder(where: str | Path | tuple[str, str]) -> Path:
    """A NAMED_FOLDERS entry as a directory: a path, a shipped folder (mappings/, workloads/...), or a preset
    kind of archsim.preset_kinds."""
    if isinstance(where, Path):
        return where
    if isinstance(where, tuple):
        return paths.shipped_dir(where[0]).joinpath(*where[1:])
    return paths.shipped_dir(where) if where == "mappings" else kind(where).directory


@lru_cache(maxsize=64)
def _listing(folder: Path) -> tuple[Path, ...]:
    return tuple(sorted(p.resolve() for p in folder.rglob("*") if p.is_file() and p.suffix in SUFFIXES))


def _in(folder: Path, name: str, prefix: bool = False) -> tuple[Path, ...]:
    """Files of `folder` (recursively) whose stem is `name` (or, with `prefix`, starts with `name`_)."""
    return tuple(p for p in _listing(folder) if p.stem == name or (prefix and p.stem.startswith(f"{name}_")))


def _files_of(key: str, name: str, parent: Path | None) -> tuple[Path, ...]:
    """The files (absolute, resolved) the value `name` of config key `key` names: a path, else the shipped files
    of its kind."""
    if key in CONVENTION_KEYS:      # a convention's controller keys come from the one conventions file
        return (CONVENTIONS_FILE.resolve(),)
    as_path = Path(name).expanduser()
    if len(name) < 256 and as_path.is_file():
        return (as_path.resolve(),)
    return _shipped_files(key, name, parent)


@lru_cache(maxsize=4096)
def _shipped_files(key: str, name: str, parent: Path | None) -> tuple[Path, ...]:
    """The shipped files (or, for `extends`, the files beside `parent`) a name under `key` stands for."""
    if key == "dataset":        # a named dataset: its histograms; a set of NeuPIMs' snapshots: its folder
        folder = paths.shipped_dir("workloads") / "datasets"
        if name in NEUPIMS_SNAPSHOTS:
            return _in(folder / "neupims_traces" / NEUPIMS_SNAPSHOTS[name], "", prefix=True)
        return _in(folder, name, prefix=True)
    if key == "extends":
        return _in(parent, name) if parent is not None else ()
    return tuple(p for where in NAMED_FOLDERS.get(key, ()) for p in _in(_folder(where), name))


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


def _run_defaults(resolved: dict[str, Any]) -> dict[str, Any]:
    """The file names a run falls back to for top-level keys its resolved config leaves out: the defaults its
    system's schema documents for them (dram-trace's `preset`, Duplex's `device_preset` are optional keys the
    resolver does not fill)."""
    system = resolved.get("system")
    documented = _documented_names(system) if isinstance(system, str) else {}
    return {k: v for k, v in documented.items() if k not in resolved}


@lru_cache(maxsize=64)
def _documented_names(system: str) -> dict[str, str]:
    """The file names system `system`'s schema documents as defaults of its top-level file-naming keys."""
    from archsim import registry, schema

    cls = registry.schema_of(system)
    if cls is None:
        return {}
    return {k.path: k.default for k in schema.keys(cls) if k.path in NAMING_KEYS and isinstance(k.default, str)}


def input_digests(resolved: dict[str, Any]) -> dict[str, str]:
    """The content digest of every file the resolved config names (or its system falls back to), and of the
    files those YAML files name (transitively), by path (repository-relative for the shipped files, else
    absolute), sorted by path."""
    out: dict[str, str] = {}
    todo = [(key, name, None) for key, name in _named({**_run_defaults(resolved), **resolved})]
    while todo:
        key, name, parent = todo.pop()
        for path in _files_of(key, name, parent):
            rel = str(path.relative_to(paths.REPO_ROOT)) if path.is_relative_to(paths.REPO_ROOT) else str(path)
            if rel in out:
                continue
            stat = path.stat()
            out[rel], named = _read(path, stat.st_mtime_ns, stat.st_size)
            todo.extend((k, n, path.parent) for k, n in named)
    return dict(sorted(out.items()))


def changed_files(recorded: dict[str, str], current: dict[str, str]) -> list[str]:
    """The paths whose digest differs between two input_digests, or that only one of them has."""
    return sorted(p for p in recorded.keys() | current.keys() if recorded.get(p) != current.get(p))
