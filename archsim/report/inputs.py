"""Report inputs: sweep results directories and single-run JSON files (as written by `--json`)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from archsim.errors import UserError

META = ("run", "source", "point_hash", "config_hash", "seed")


@dataclass
class Source:
    """One input of a report. `stats` has one row per run, `table` the runs' tidy rows; both carry `run`."""

    kind: str  # "sweep" or "run"
    path: Path
    name: str
    stats: pd.DataFrame
    table: pd.DataFrame
    axis_keys: list[str] = field(default_factory=list)
    metrics: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> {"expr", "baseline"}
    failures: list[dict[str, Any]] = field(default_factory=list)
    n_points: int = 1
    version: str = "?"

    @property
    def stat_columns(self) -> list[str]:
        skip = set(META) | set(self.axis_keys) | set(self.metrics)
        return [c for c in self.stats.columns if c not in skip]


def load_inputs(paths: list[str | Path]) -> list[Source]:
    if not paths:
        raise UserError("report: give at least one sweep results directory or run JSON file")
    sources = [_load_one(Path(p)) for p in paths]
    names = [s.name for s in sources]
    for i, s in enumerate(sources):  # unique names: figure files and single-run labels must not collide
        if names.count(s.name) > 1:
            s.name = f"{s.name}-{i + 1}"
            if s.kind == "run":
                s.stats["run"] = s.table["run"] = s.name
        for frame in (s.stats, s.table):
            frame["source"] = s.name
    return sources


def _load_one(path: Path) -> Source:
    if path.is_dir():
        return _load_sweep(path)
    if path.is_file():
        return _load_run(path)
    raise UserError(f"{path}: no such sweep results directory or run JSON file")


def _load_sweep(path: Path) -> Source:
    from archsim.sweep import load_failures, load_manifest, load_results
    from archsim.sweep.spec import format_value

    manifest = load_manifest(path)
    stats, table = load_results(path)
    axis_keys = list(manifest.get("axis_keys", []))
    short = short_keys(axis_keys)
    labels: dict[str, str] = {}
    for entry in manifest["points"]:
        labels[entry["point_hash"]] = ", ".join(f"{short.get(k, k)}={format_value(v)}"
                                                for k, v in entry["axes"].items()) or "base"
    stats, table = _free(stats, ("run", "source")), _free(table, ("run", "source"))
    stats.insert(0, "run", stats["point_hash"].map(labels).astype(str) if len(stats) else [])
    table["run"] = table["point_hash"].map(labels).astype(str) if len(table) else []
    stats.insert(1, "source", manifest["name"])
    table["source"] = manifest["name"]
    return Source("sweep", path, manifest["name"], stats, table, axis_keys=axis_keys,
                  metrics=dict(manifest.get("metrics") or {}), failures=load_failures(path),
                  n_points=len(manifest["points"]), version=str(manifest.get("archsim_version", "?")))


def _load_run(path: Path) -> Source:
    from archsim.config import MAX_RESULT_BYTES, read_json

    data = read_json(path, "run result (--json output)", MAX_RESULT_BYTES)
    if not isinstance(data, dict) or not isinstance(data.get("stats"), dict) or not isinstance(data.get("table"), list):
        raise UserError(f"{path}: not an archsim run result (expected a JSON object with `stats`, `table` and "
                        "`manifest`, as written by --json)")
    manifest = data.get("manifest") if isinstance(data.get("manifest"), dict) else {}
    name = path.stem
    row: dict[str, Any] = {"run": name, "source": name, "config_hash": manifest.get("config_hash"), "seed": manifest.get("seed")}
    stats = pd.DataFrame([{**row, **{k: v for k, v in data["stats"].items() if k not in row}}])
    table = pd.DataFrame.from_records(data["table"]) if data["table"] else pd.DataFrame()
    # Named extra tables (e.g. a per-unit timeline) join the run's tidy rows; each figure picks its columns.
    extra = [pd.DataFrame.from_records(rows).assign(table=name)
             for name, rows in (data.get("tables") or {}).items() if rows]
    if extra:
        table = pd.concat([table.assign(table="main"), *extra], ignore_index=True)
    table = _free(table, ("run", "source", "config_hash"))
    table["run"] = name
    table["source"] = name
    table["config_hash"] = manifest.get("config_hash")
    return Source("run", path, name, stats, table, version=str(manifest.get("archsim_version", "?")))


def _free(frame: pd.DataFrame, names: tuple[str, ...]) -> pd.DataFrame:
    """Rename result columns that clash with the report's own columns to result.<name>."""
    return frame.rename(columns={c: f"result.{c}" for c in names if c in frame.columns})


def short_keys(keys: list[str]) -> dict[str, str]:
    """Shortest trailing part of each dotted key that is still unique (hw.channels -> channels), for labels."""
    out: dict[str, str] = {}
    for key in keys:
        parts = key.split(".")
        for n in range(1, len(parts) + 1):
            cand = ".".join(parts[-n:])
            if sum(1 for k in keys if k == cand or k.endswith("." + cand)) == 1:
                out[key] = cand
                break
        else:
            out[key] = key
    return out
