"""Results are data: every run returns a tidy DataFrame plus a manifest (DESIGN.md principle 7)."""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd


def config_hash(config: dict[str, Any]) -> str:
    """Stable short hash of a resolved config (key order does not matter)."""
    blob = json.dumps(config, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def make_manifest(kind: str, config: dict[str, Any], seed: int | None = None, **extra: Any) -> dict[str, Any]:
    from archsim import __version__

    return {
        "archsim_version": __version__,
        "kind": kind,
        "config": config,
        "config_hash": config_hash(config),
        "seed": seed,
        **extra,
    }


@dataclass
class Result:
    """Outcome of one simulation.

    stats:    flat dict of headline numbers (cycles, seconds, bandwidth, energy ...)
    df:       tidy table, one row per phase/op/unit/component
    manifest: archsim version, resolved config, config hash, seed
    """

    stats: dict[str, Any]
    df: pd.DataFrame
    manifest: dict[str, Any]
    extra: dict[str, Any] = field(default_factory=dict)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)  # further tidy tables, e.g. "timeline"

    def to_json_dict(self) -> dict[str, Any]:
        out = {
            "stats": self.stats,
            "table": json.loads(self.df.to_json(orient="records")),
            "manifest": self.manifest,
        }
        if self.tables:
            out["tables"] = {name: json.loads(t.to_json(orient="records")) for name, t in self.tables.items()}
        return out

    def write_json(self, path: str | Path) -> None:
        atomic_write_text(path, json.dumps(self.to_json_dict(), indent=2, default=_json_default) + "\n")

    def write_csv(self, path: str | Path) -> None:
        atomic_write_text(path, self.df.to_csv(index=False))


def _json_default(obj: Any) -> Any:
    try:
        import numpy as np

        if isinstance(obj, np.integer):
            return int(obj)
        if isinstance(obj, np.floating):
            return float(obj)
        if isinstance(obj, np.ndarray):
            return obj.tolist()
    except ImportError:  # pragma: no cover
        pass
    return str(obj)


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write via a temp file in the same directory + rename, so no half-written file is ever visible."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
