"""Where the NeuPIMs report keeps a run: a file named by the CONTENT of its configuration, not by the names in it.

A run's config names its inputs (mapping `neupims_code`, NPU preset, DRAM preset and standard, model, dataset);
a name keeps its meaning only while its file does. The key is the hash of the resolved config (the system's
defaults filled in) together with the content digest of every input file it names, and of the files those name
in turn (archsim.inputs.input_digests, which a resumed sweep or study checks its stored points with too). So
editing a mapping, a preset or a trace gives its runs a new key and they are re-run, where a key on the names
reused the stale run; a comment in a YAML file changes no key.

Code changes are not in the key, and nothing re-makes a run when the simulator changes: after such a change re-run
the scripts into a fresh folder (`-o DIR`) and compare the tables, then replace runs/ (tests/test_neupims_run_cache.py
re-runs one committed run to catch a change that moves it).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from archsim import registry
from archsim.inputs import input_digests
from archsim.results import config_hash


def run_key(cfg: dict[str, Any]) -> str:
    """The run's cache key: the resolved config and the content of every input file it names."""
    resolved = registry.resolve_config(cfg)
    return config_hash({"config": resolved, "inputs": input_digests(resolved)})


def run_path(runs: Path, cfg: dict[str, Any], suffix: str = ".json") -> Path:
    return runs / f"{cfg['system']}-{run_key(cfg)}{suffix}"
