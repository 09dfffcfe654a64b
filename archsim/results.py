"""Results are data: every run returns a tidy DataFrame plus a manifest (version, resolved config, hash, seed)."""
from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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


class _Table:
    """Result.df: a DataFrame, or given as a list of row dicts and made a DataFrame on first access, so a
    run whose table nobody reads (e.g. `archsim trace` without --csv/--json) never imports pandas, which
    takes longer to import than a short trace takes to simulate."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = f"_{name}"

    def __get__(self, obj: Any, objtype: type | None = None) -> pd.DataFrame:
        if obj is None:
            raise AttributeError(self.slot)  # no class-level default (dataclasses asks)
        value = obj.__dict__[self.slot]
        if isinstance(value, list):
            import pandas as pd

            value = obj.__dict__[self.slot] = pd.DataFrame(value)
        return value

    def __set__(self, obj: Any, value: Any) -> None:
        obj.__dict__[self.slot] = value



# the simulator's own timings: seconds it spent, and rates over them (not results of the simulation); a
# comparison of two runs' results leaves them out (tests/test_determinism.py, benchmarks/config_equivalence.py)
TIMING_KEYS = ("wall_s", "sim_wall_s", "sim_kernel_s", "sim_compile_s", "kernel_wall_s", "cycles_per_s")


def without_timings(value: Any) -> Any:
    """A result's JSON data (or any part of it) without the simulator's own timings, at any depth."""
    if isinstance(value, dict):
        return {k: without_timings(v) for k, v in value.items()
                if not (k in TIMING_KEYS or k.endswith(("_wall_s", "_compile_s")))}
    if isinstance(value, list):
        return [without_timings(v) for v in value]
    return value

def records_as_pandas_writes(rows: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """The rows `json.loads(pd.DataFrame(rows).to_json(orient="records"))` gives, without importing pandas
    (which takes longer to import than a short trace run takes to simulate), for the plain tables runs make:
    every row with the same keys in the same order, each column all int, all str, or numbers with a float
    among them (pandas makes that column float64 and writes each value rounded to 10 decimals,
    `pandas_json_float`). None for anything else (the caller then asks pandas)."""
    if not rows:
        return None
    keys = list(rows[0])
    if any(list(row) != keys for row in rows):
        return None
    columns = {}
    for key in keys:
        values = [row[key] for row in rows]
        kinds = {type(v) for v in values}
        if kinds == {int} and all(-(1 << 63) <= v < (1 << 63) for v in values):
            columns[key] = values
        elif kinds == {str}:
            columns[key] = values
        elif float in kinds and kinds <= {int, float} and all(
                math.isfinite(v) if type(v) is float else abs(v) <= 1 << 53 for v in values):
            columns[key] = [pandas_json_float(float(v)) for v in values]
        else:
            return None
    return [{key: columns[key][i] for key in keys} for i in range(len(rows))]


def pandas_json_float(value: float) -> float:
    """A finite float as pandas' to_json (double_precision=10) writes it, read back: below 1e16 and not
    below 1e-15 (in magnitude) the fraction rounded to 10 decimals (exactly half-way: up when the truncated
    fraction is odd or 0, as pandas' bundled ultrajson rounds), otherwise 10 significant digits. tests/test_results_json.py holds it to pandas on many values."""
    neg = value < 0
    mag = -value if neg else value
    if mag > 1e16 - 1 or (mag != 0 and mag < 1e-15):
        return float(f"{value:.10g}")
    whole = int(mag)
    scaled = (mag - whole) * 1e10
    frac = int(scaled)
    rest = scaled - frac
    if rest > 0.5 or (rest == 0.5 and (frac == 0 or frac & 1)):
        frac += 1
    if frac >= 10**10:
        whole, frac = whole + 1, 0
    out = float(f"{whole}.{frac:010d}")
    return -out if neg else out


@dataclass
class Result:
    """Outcome of one simulation.

    stats:    flat dict of headline numbers (cycles, seconds, bandwidth, energy ...)
    df:       tidy table, one row per phase/op/unit/component (may be passed as a list of row dicts;
              it is a DataFrame when read)
    manifest: archsim version, resolved config, config hash, seed
    """

    stats: dict[str, Any]
    df: pd.DataFrame = _Table()  # type: ignore[assignment]
    manifest: dict[str, Any]
    extra: dict[str, Any] = field(default_factory=dict)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)  # further tidy tables, e.g. "timeline"

    def to_json_dict(self) -> dict[str, Any]:
        rows = self.__dict__.get("_df")
        table = records_as_pandas_writes(rows) if isinstance(rows, list) else None
        out = {
            "stats": self.stats,
            "table": json.loads(self.df.to_json(orient="records")) if table is None else table,
            "manifest": self.manifest,
        }
        if self.tables:
            out["tables"] = {name: json.loads(t.to_json(orient="records")) for name, t in self.tables.items()}
        return out

    def write_json(self, path: str | Path) -> None:
        """Write stats, table(s) and manifest as JSON; path "-" writes to standard output."""
        text = json.dumps(self.to_json_dict(), indent=2, default=_json_default) + "\n"
        if str(path) == "-":
            import sys

            sys.stdout.write(text)
            return
        atomic_write_text(path, text)

    def write_csv(self, path: str | Path) -> None:
        atomic_write_text(path, self.df.to_csv(index=False))


def load_result(path: str | Path) -> Result:
    """Read a run written by `Result.write_json` (`--json FILE`) back into a Result: stats, df (the
    "table" rows), manifest and the named extra tables. `extra` (in-memory objects) is not saved, so it
    comes back empty. Raises UserError naming the file for missing files and anything else."""
    from archsim.config import MAX_RESULT_BYTES, read_json
    from archsim.errors import UserError

    path = Path(path)
    data = read_json(path, "result file", MAX_RESULT_BYTES)
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a JSON object with stats, table and manifest (as written by --json)")
    for key, kind in (("stats", dict), ("table", list), ("manifest", dict)):
        if not isinstance(data.get(key), kind):
            got = "missing" if key not in data else f"a {type(data[key]).__name__}"
            raise UserError(f"{path}: {key}: {got}; expected a JSON {'object' if kind is dict else 'array'} "
                            "(files written by --json have stats, table and manifest)")
    tables = data.get("tables") or {}
    if not isinstance(tables, dict) or not all(isinstance(v, list) for v in tables.values()):
        raise UserError(f"{path}: tables: expected an object of name -> array of rows")
    import pandas as pd

    return Result(stats=data["stats"], df=pd.DataFrame.from_records(data["table"]), manifest=data["manifest"],
                  tables={name: pd.DataFrame.from_records(rows) for name, rows in tables.items()})


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


def umask() -> int:
    """The process's file-mode creation mask (read without changing it for longer than two calls)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def file_mode() -> int:
    """Permissions a newly created file gets under the user's umask (0o644 under umask 022)."""
    return 0o666 & ~umask()


def dir_mode() -> int:
    """Permissions a newly created directory gets under the user's umask (0o755 under umask 022)."""
    return 0o777 & ~umask()


def temp_file(path: Path) -> tuple[int, str]:
    """An open temp file next to `path` (same directory, so os.replace is atomic), with the permissions
    the umask gives a normal file; tempfile.mkstemp alone would leave it 0600. Returns (fd, name)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.fchmod(fd, file_mode())
    return fd, tmp


def temp_dir(path: Path, tag: str = "") -> Path:
    """A new directory next to `path` with the permissions the umask gives (mkdtemp alone: 0700)."""
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.{tag}", suffix=".tmp"))
    tmp.chmod(dir_mode())
    return tmp


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write through archsim.output.write_bytes (the one output writer): atomic temp file + rename for a
    regular file, in place for a device or pipe, through a symlink; the umask decides a new file's mode."""
    from archsim.output import write_bytes

    write_bytes(path, data)


def atomic_write_text(path: str | Path, text: str) -> None:
    """atomic_write_bytes of UTF-8 text."""
    atomic_write_bytes(path, text.encode("utf-8"))
