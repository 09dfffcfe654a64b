"""The results store of a sweep: one directory; every file is written atomically (temp file + rename).

    DIR/manifest.json                      archsim version, the sweep file, the expanded points with hashes
    DIR/points/<point_hash>.stats.parquet  one row: the point's columns + the Result's stats
    DIR/points/<point_hash>.parquet        the Result's table + the point's columns. Written last, so its
                                           presence means "finished". The Result's manifest is kept in the
                                           file's metadata (key b"archsim.result_manifest"), and the content
                                           digest of each input file the point's config names, by path (key
                                           b"archsim.inputs", archsim.inputs.input_digests), which a resume
                                           compares with today's files (absent: stored by an archsim that
                                           did not record them).
    DIR/failures/<point_hash>.json         error and traceback of a failed point (removed once it succeeds)
    DIR/.lock                              flock-ed while a sweep writes here (the kernel drops it on kill);
                                           it names its holder (pid, host, start time, command)

Point columns are `point_hash`, `config_hash`, `seed` and one column per axis key path. A result column
with one of those names is dropped if it only repeats the point's value, else kept as `result.<name>`.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from archsim.errors import UserError
from archsim.results import atomic_write_text, temp_file
from archsim.sweep.metrics import compute_metrics, encode_cell, metric_from_dict

if TYPE_CHECKING:
    from archsim.sweep.spec import Point, Sweep

MANIFEST_KIND = "archsim-sweep"
META_COLUMNS = ("point_hash", "config_hash", "seed")
RESULT_MANIFEST_KEY = b"archsim.result_manifest"
INPUTS_KEY = b"archsim.inputs"
_OWN_ENTRIES = {"manifest.json", "points", "failures", ".lock"}


def _json(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=False, default=_json_default) + "\n"


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "item"):  # numpy scalars
        return obj.item()
    if hasattr(obj, "tolist"):
        return obj.tolist()
    return str(obj)


def point_columns(point: Point) -> dict[str, Any]:
    cols: dict[str, Any] = {"point_hash": point.point_hash, "config_hash": point.config_hash, "seed": point.seed}
    for key, value in point.axes.items():
        cols[key] = encode_cell(value)
    return cols


def _scalar(value: Any) -> Any:
    if hasattr(value, "item") and getattr(value, "ndim", 0) == 0:
        value = value.item()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return json.dumps(value, sort_keys=True, default=_json_default)


def _join(df: pd.DataFrame, point_cols: dict[str, Any], *, point_first: bool) -> pd.DataFrame:
    # Systems often echo their config (e.g. stats["preset"]); an echo equal to the axis value is redundant.
    clash = [c for c in df.columns if c in point_cols]
    same = [c for c in clash if all(_scalar(v) == point_cols[c] for v in df[c])]
    df = df.drop(columns=same).rename(columns={c: f"result.{c}" for c in clash if c not in same})
    extra = pd.DataFrame({k: [v] * len(df) for k, v in point_cols.items()}, index=df.index)
    return pd.concat([extra, df] if point_first else [df, extra], axis=1)


def _atomic_parquet(df: pd.DataFrame, path: Path, metadata: dict[bytes, bytes] | None = None) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(df, preserve_index=False)
    if metadata:
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), **metadata})
    fd, tmp = temp_file(path)      # permissions as the umask gives (mkstemp alone: 0600)
    os.close(fd)
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class ResultsStore:
    """Reads and writes one sweep's results directory."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.points_dir = self.root / "points"
        self.failures_dir = self.root / "failures"
        self.manifest_path = self.root / "manifest.json"

    def table_path(self, point_hash: str) -> Path:
        return self.points_dir / f"{point_hash}.parquet"

    def stats_path(self, point_hash: str) -> Path:
        return self.points_dir / f"{point_hash}.stats.parquet"

    def failure_path(self, point_hash: str) -> Path:
        return self.failures_dir / f"{point_hash}.json"

    def is_done(self, point_hash: str) -> bool:
        # The table file is renamed into place after the stats file, so it alone marks completion.
        return self.table_path(point_hash).is_file()

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the directory for one writer, so cleaning temp files cannot race another sweep.

        An flock on DIR/.lock, which the kernel drops when the holder dies however it dies; worker processes
        close their inherited copy at once (release_inherited_locks), so only the sweep process holds it.
        The file names its holder (pid, host, start time, command), so a refusal says who holds the
        directory, and a run that finds the record of a holder that is gone says it takes over."""
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.root / ".lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                owner = _read_owner(fd)
                who = f" (pid {owner.get('pid')} on {owner.get('host')}, since {owner.get('started')})" if owner else ""
                raise UserError(f"{self.root}: another archsim sweep is writing to this results directory{who}; "
                                "wait for it or stop it") from None
            previous = _read_owner(fd)
            if previous and previous.get("pid") != os.getpid():
                print(f"archsim: {self.root}: taking over the lock of sweep pid {previous.get('pid')} on "
                      f"{previous.get('host')} (started {previous.get('started')}), which is no longer running",
                      file=sys.stderr)
            _write_owner(fd)
            _HELD.add(fd)
            try:
                yield
            finally:
                _HELD.discard(fd)
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, 0)     # a clean end leaves no owner record behind
        finally:
            os.close(fd)

    def verified(self, point_hash: str) -> str | None:
        """None if the point's stored files are complete, readable parquet; else why not (the caller re-runs
        it). Reads only each file's footer (schema, row counts), so a resume of many points stays quick."""
        import pyarrow.parquet as pq

        for path in (self.stats_path(point_hash), self.table_path(point_hash)):
            try:
                meta = pq.read_metadata(path)
            except FileNotFoundError:
                return f"{path.name} is missing"
            except Exception as exc:   # truncated, overwritten, not parquet
                return f"{path.name} is unreadable ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"
            if path == self.stats_path(point_hash) and meta.num_rows != 1:
                return f"{path.name} has {meta.num_rows} rows, not 1"
        return None

    def recorded_inputs(self, point_hash: str) -> dict[str, str] | None:
        """The input digests the finished point was run with (Point.inputs); None if it was stored without
        them (by an older archsim). Reads only the table file's footer."""
        import pyarrow.parquet as pq

        recorded = (pq.read_metadata(self.table_path(point_hash)).metadata or {}).get(INPUTS_KEY)
        return None if recorded is None else json.loads(recorded)

    def discard(self, point_hash: str) -> None:
        """Remove a point's stored files (before it is run again)."""
        for path in (self.table_path(point_hash), self.stats_path(point_hash)):
            path.unlink(missing_ok=True)

    def check_owner(self, sweep: Sweep, force: bool = False) -> None:
        """Refuse a directory holding another sweep's results (unless force) or files that are not ours."""
        if self.manifest_path.is_file():
            old = load_manifest(self.root)
            if old.get("name") != sweep.name and not force:
                raise UserError(f"{self.root}: holds results of sweep {old.get('name')!r}, not {sweep.name!r}; "
                                "choose another -o directory or pass --force")
        elif self.root.is_dir():
            strangers = sorted(p.name for p in self.root.iterdir() if p.name not in _OWN_ENTRIES)
            if strangers:
                raise UserError(f"{self.root}: not an archsim results directory (no manifest.json) and not empty "
                                f"(contains {', '.join(strangers[:5])}); choose another -o directory")

    def prepare(self, sweep: Sweep, force: bool = False) -> None:
        """Under the lock: check ownership, drop temp files of killed runs, write manifest.json."""
        self.check_owner(sweep, force)
        self.points_dir.mkdir(parents=True, exist_ok=True)
        self.failures_dir.mkdir(parents=True, exist_ok=True)
        for folder in (self.root, self.points_dir, self.failures_dir):
            for tmp in folder.glob(".*.tmp"):
                if not tmp.is_dir():    # a directory is an interrupted report's staging area (not ours)
                    tmp.unlink(missing_ok=True)
        atomic_write_text(self.manifest_path, _json(build_manifest(sweep)))

    def write_point(self, point: Point, stats: dict[str, Any], df: pd.DataFrame,
                    result_manifest: dict[str, Any]) -> None:
        cols = point_columns(point)
        stats_df = _join(pd.DataFrame([{k: _scalar(v) for k, v in stats.items()}]), cols, point_first=True)
        table = _join(df.reset_index(drop=True), cols, point_first=False)
        meta = {RESULT_MANIFEST_KEY: json.dumps(result_manifest, sort_keys=True, default=_json_default).encode(),
                INPUTS_KEY: json.dumps(point.inputs, sort_keys=True).encode()}
        _atomic_parquet(stats_df, self.stats_path(point.point_hash))
        _atomic_parquet(table, self.table_path(point.point_hash), meta)
        self.failure_path(point.point_hash).unlink(missing_ok=True)

    def write_failure(self, point: Point, failure: dict[str, Any]) -> Path:
        from archsim import __version__

        record = {
            "point_hash": point.point_hash,
            "config_hash": point.config_hash,
            "seed": point.seed,
            "axes": point.axes,
            "label": point.label(),
            "archsim_version": __version__,
            **failure,
            "config": point.config,
        }
        path = self.failure_path(point.point_hash)
        atomic_write_text(path, _json(record))
        return path


# lock file descriptors this process holds (a forked worker closes its copies: release_inherited_locks)
_HELD: set[int] = set()


def release_inherited_locks() -> None:
    """In a forked worker: close the copies of the parent's lock descriptors, so that only the sweep
    process holds the results directory (its death frees the directory even if a worker lingers)."""
    for fd in list(_HELD):
        with contextlib.suppress(OSError):
            os.close(fd)
    _HELD.clear()


def _read_owner(fd: int) -> dict[str, Any]:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        data = os.read(fd, 4096)
        owner = json.loads(data) if data.strip() else {}
    except (OSError, ValueError):
        return {}
    return owner if isinstance(owner, dict) else {}


def _write_owner(fd: int) -> None:
    import datetime
    import socket

    owner = {"pid": os.getpid(), "host": socket.gethostname(),
             "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
             "command": " ".join(sys.argv)[:500]}
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, (json.dumps(owner) + "\n").encode())


def build_manifest(sweep: Sweep) -> dict[str, Any]:
    from archsim import __version__

    return {
        "kind": MANIFEST_KIND,
        "format": 1,
        "archsim_version": __version__,
        "name": sweep.name,
        "sweep_file": sweep.source,
        "sweep_text": sweep.text,
        "sweep": sweep.data,
        "base_seed": sweep.base_seed,
        "seed_by": sweep.seed_by,
        "base_overrides": sweep.base_overrides,
        "imports": sweep.imports,
        "axis_keys": sweep.axis_keys,
        "metrics": {name: m.to_dict() for name, m in sweep.metrics.items()},
        "points": [
            {"index": p.index, "point_hash": p.point_hash, "config_hash": p.config_hash, "seed": p.seed,
             "axes": p.axes, "config": p.config}
            for p in sweep.points
        ],
    }


def load_manifest(root: str | Path) -> dict[str, Any]:
    path = Path(root) / "manifest.json"
    if not path.is_file():
        raise UserError(f"{root}: not a sweep results directory (no manifest.json)")
    try:
        manifest = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("kind") != MANIFEST_KIND:
        raise UserError(f"{path}: not an archsim sweep manifest")
    return manifest


def _read(path: Path) -> pd.DataFrame:
    try:
        return pd.read_parquet(path)
    except Exception as exc:  # a file we did not write (the store only ever renames complete files)
        raise UserError(f"{path}: unreadable point file ({exc}); delete it and rerun the sweep") from None


def _concat(frames: list[pd.DataFrame], columns: list[str]) -> pd.DataFrame:
    frames = [f for f in frames if len(f)]
    if not frames:
        return pd.DataFrame(columns=columns)
    return pd.concat(frames, ignore_index=True)


def load_results(results_dir: str | Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Combine a sweep's finished points: (stats, one row per point with metrics; table, all points' rows).

    Rows follow the manifest's point order. Points not finished (failed, or never run) are absent.
    """
    store = ResultsStore(results_dir)
    manifest = load_manifest(results_dir)
    axis_keys = list(manifest.get("axis_keys", []))
    columns = list(META_COLUMNS) + axis_keys
    stats_frames, table_frames = [], []
    for entry in manifest["points"]:
        ph = entry["point_hash"]
        if store.is_done(ph) and store.stats_path(ph).is_file():
            stats_frames.append(_read(store.stats_path(ph)))
            table_frames.append(_read(store.table_path(ph)))
    stats = _concat(stats_frames, columns)
    table = _concat(table_frames, columns)
    metrics = {name: metric_from_dict(name, spec) for name, spec in (manifest.get("metrics") or {}).items()}
    if metrics and len(stats):
        stats = compute_metrics(stats, metrics, axis_keys)
    return stats, table


def load_failures(results_dir: str | Path) -> list[dict[str, Any]]:
    """Failure records of the manifest's points that are not finished."""
    store = ResultsStore(results_dir)
    manifest = load_manifest(results_dir)
    out = []
    for entry in manifest["points"]:
        ph = entry["point_hash"]
        path = store.failure_path(ph)
        if path.is_file() and not store.is_done(ph):
            try:
                out.append(json.loads(path.read_text()))
            except json.JSONDecodeError:
                out.append({"point_hash": ph, "error": f"unreadable failure record {path}"})
    return out
