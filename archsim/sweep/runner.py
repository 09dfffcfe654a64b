"""run_sweep: expand a sweep, skip finished points, run the rest in parallel, store each as it finishes."""
from __future__ import annotations

import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from archsim.errors import UserError
from archsim.inputs import changed_files
from archsim.sweep.executors import DaskExecutor, LocalExecutor, Task, default_jobs, failure_outcome
from archsim.sweep.spec import Point, Sweep, load_sweep
from archsim.sweep.store import ResultsStore

EXECUTORS = ("local", "dask")


@dataclass
class FailedPoint:
    point_hash: str
    label: str
    error: str  # "ErrorType: message"
    record: Path  # failures/<point_hash>.json


@dataclass
class SweepOutcome:
    name: str
    results_dir: Path
    total: int  # points in the sweep
    skipped: int  # already finished before this run
    succeeded: int  # finished by this run
    unchecked: int = 0  # of skipped: stored without their input files' digests, so not checked against them
    failed: list[FailedPoint] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failed


def progress_wanted(stream: IO[str]) -> bool:
    """A live progress bar only on a terminal and never under CI=true."""
    ci = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")
    return not ci and hasattr(stream, "isatty") and stream.isatty()


class Progress:
    """One redrawn status line: points done / failed / ETA."""

    def __init__(self, name: str, total: int, enabled: bool, stream: IO[str] | None = None):
        self.name, self.total, self.enabled = name, total, enabled
        self.stream = stream or sys.stderr
        self.t0 = time.monotonic()
        self._last = 0.0
        self.done = self.failed = 0

    def update(self, done: int, failed: int, force: bool = False) -> None:
        self.done, self.failed = done, failed
        now = time.monotonic()
        if not self.enabled or (not force and now - self._last < 0.1):
            return
        self._last = now
        finished = done + failed
        elapsed = now - self.t0
        eta = "--:--" if not finished else _clock(elapsed / finished * (self.total - finished))
        width = shutil.get_terminal_size((80, 20)).columns
        tail = f" {finished}/{self.total} points  {failed} failed  {_clock(elapsed)} elapsed  ETA {eta}"
        bar_w = max(10, min(40, width - len(tail) - len(self.name) - 6))
        filled = int(bar_w * finished / self.total) if self.total else bar_w
        line = f"{self.name} [{'#' * filled}{'.' * (bar_w - filled)}]{tail}"
        self.stream.write("\r" + line[: width - 1].ljust(width - 1))
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.update(self.done, self.failed, force=True)
            self.stream.write("\n")
            self.stream.flush()


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def run_sweep(
    sweep: str | Path | Sweep,
    out_dir: str | Path | None = None,
    *,
    jobs: int | None = None,
    executor: str = "local",
    scheduler: str | None = None,
    force: bool = False,
    progress: bool | None = None,
) -> SweepOutcome:
    """Run every unfinished point of `sweep` (a sweep file or a loaded Sweep) into `out_dir`.

    out_dir defaults to results/<sweep name>/. jobs defaults to all usable cores (local) or that many
    LocalCluster workers (dask without a scheduler). executor is "local" or "dask"; scheduler is a Dask
    scheduler address such as tcp://host:8786. force reruns finished points; without it a finished point
    whose input files changed since it ran (a mapping, a preset, a trace: archsim.inputs) runs again.
    progress=None shows a bar only on a terminal outside CI. All input checks happen before any point runs (UserError).
    """
    _check_run_options(executor, scheduler, jobs)
    if not isinstance(sweep, Sweep):
        sweep = load_sweep(sweep)
    # metrics against the systems' declared stats names, before anything is written or run
    declared = bool(sweep.metrics) and _check_declared_metric_columns(sweep)
    root = Path(out_dir) if out_dir is not None else Path("results") / sweep.name
    store = ResultsStore(root)
    t0 = time.monotonic()
    store.check_owner(sweep, force)  # before lock() creates .lock in a directory that is not ours
    with store.lock():
        store.prepare(sweep, force=force)
        unchecked: list[Point] = []     # finished points stored without their inputs' digests
        todo = [p for p in sweep.points if force or not _finished(store, p, unchecked)]
        if unchecked:
            print(f"archsim: {root}: kept {len(unchecked)} finished point(s) stored without the digests of their "
                  "input files (by an older archsim), unchecked against today's files; --force re-runs them",
                  file=sys.stderr)
        outcome = SweepOutcome(sweep.name, root, total=len(sweep.points), skipped=len(sweep.points) - len(todo),
                               succeeded=0, unchecked=len(unchecked))
        pending = {p.point_hash for p in todo}
        done = [p for p in sweep.points if p.point_hash not in pending]
        if done and sweep.metrics and not declared:
            _check_metric_columns(sweep, store, done[0])   # resuming: the stored points show the columns
        if todo:
            n = min(jobs or default_jobs(), len(todo))
            pool = DaskExecutor(jobs or default_jobs(), scheduler) if executor == "dask" else LocalExecutor(n)
            bar = Progress(sweep.name, len(todo), progress if progress is not None else progress_wanted(sys.stderr))
            _run_points(sweep, store, todo, pool, bar, outcome, checked=bool(done) or declared)
    outcome.wall_s = time.monotonic() - t0
    return outcome


def _check_run_options(executor: str, scheduler: str | None, jobs: int | None) -> None:
    if executor not in EXECUTORS:
        raise UserError(f"unknown executor {executor!r}; allowed: {', '.join(EXECUTORS)}")
    if scheduler and executor != "dask":
        raise UserError("--scheduler needs --executor dask")
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
        raise UserError(f"--jobs must be an integer >= 1, got {jobs!r}")


def _run_points(sweep: Sweep, store: ResultsStore, todo: list[Point], pool: Any, bar: Progress,
                outcome: SweepOutcome, checked: bool) -> None:
    """Run `todo` on `pool`, storing each result as it arrives; `checked`: the metrics' columns are known to
    exist (declared, or seen in a stored point), else the first finished point shows them."""
    by_hash = {p.point_hash: p for p in todo}
    events = pool.run([_task(sweep, p) for p in todo])
    try:
        for event in events:
            if event is not None:
                task, result = event
                point = by_hash[task["point_hash"]]
                _store(store, point, result, outcome)
                if not checked and sweep.metrics and store.is_done(point.point_hash):
                    # the first finished point shows the system's stats columns: a metric naming
                    # another column stops the sweep now, not after every point ran
                    checked = True
                    _check_metric_columns(sweep, store, point)
            bar.update(outcome.succeeded, len(outcome.failed))
    finally:
        events.close()  # stops the workers now if we leave early (Ctrl-C, a store error)
        bar.close()


def _finished(store: ResultsStore, point: Point, unchecked: list[Point]) -> bool:
    """A point counts as done only if its stored files are whole and were made from today's input files; a
    corrupt or partial one, or one whose input files changed since (archsim.inputs), is removed (and said so)
    so that it runs again. One stored without its inputs' digests is kept and added to `unchecked`."""
    if not store.is_done(point.point_hash):
        return False
    problem = store.verified(point.point_hash)
    if problem is None:
        recorded = store.recorded_inputs(point.point_hash)
        if recorded is None:
            unchecked.append(point)
            return True
        changed = changed_files(recorded, point.inputs)
        if not changed:
            return True
        problem = f"input file(s) changed since it ran: {', '.join(changed)}"
    print(f"archsim: sweep point {point.point_hash} ({point.label()}): {problem}; running it again",
          file=sys.stderr)
    store.discard(point.point_hash)
    return False


# stats columns every stored point has besides the system's own (archsim.sweep.store.point_columns, and the
# compile time the worker adds: archsim.sweep.executors.run_point)
POINT_COLUMNS = ("point_hash", "config_hash", "seed", "sim_compile_s")


def _check_declared_metric_columns(sweep: Sweep) -> bool:
    """Check every column a metric names against the stats names its points' systems declare
    (archsim.registry, `stats=`), before any point runs. False (nothing checked) if a system declares none:
    then the first finished point's columns are checked instead."""
    from archsim import registry
    from archsim.errors import nearest

    declared: dict[str, tuple[str, ...]] = {}      # system -> its stats names and patterns
    for system in dict.fromkeys(point.config["system"] for point in sweep.points):
        names = registry.stats_names(system)
        if names is None:
            return False
        declared[system] = names
    allowed = {*POINT_COLUMNS, *sweep.axis_keys, *(n for names in declared.values() for n in names)}
    for name, metric in sweep.metrics.items():
        for col in (*metric.names, *metric.baseline_names):
            bare = col.removeprefix("result.")      # a stat renamed because an axis of its name differs
            if col in allowed or registry.declares(allowed, bare):
                continue
            exact = sorted(n for n in allowed if "*" not in n)
            hint = nearest(col, exact)
            systems = ", ".join(repr(s) for s in sorted(declared))
            raise UserError(f"{sweep.source}: metrics.{name}.expr: {col!r} is not a stats column of system "
                            f"{systems}" + (f"; did you mean {', '.join(hint)}?" if hint else
                                            f"; columns: {', '.join(sorted(allowed))}"))
    return True


def _check_metric_columns(sweep: Sweep, store: ResultsStore, point: Point) -> None:
    """Every column a metric names must be a stats column of the system (as a stored point has them)."""
    import pyarrow.parquet as pq

    from archsim.errors import nearest

    columns = set(pq.read_schema(store.stats_path(point.point_hash)).names)
    for name, metric in sweep.metrics.items():
        for col in (*metric.names, *metric.baseline_names):
            if col not in columns:
                hint = nearest(col, sorted(columns))
                raise UserError(f"{sweep.source}: metrics.{name}.expr: {col!r} is not a stats column of system "
                                f"{point.config.get('system')!r}"
                                + (f"; did you mean {', '.join(hint)}?" if hint else
                                   f"; columns: {', '.join(sorted(columns))}"))


def _task(sweep: Sweep, point: Point) -> Task:
    return {"point_hash": point.point_hash, "config": point.config, "seed": point.seed,
            "imports": sweep.imports, "import_paths": sweep.import_paths}


def _store(store: ResultsStore, point: Point, result: dict[str, Any], outcome: SweepOutcome) -> None:
    if result.get("ok"):
        try:
            store.write_point(point, result["stats"], result["df"], result["manifest"])
            outcome.succeeded += 1
            return
        except Exception as exc:  # e.g. a column pyarrow cannot store: record it, keep the sweep going
            import traceback

            result = failure_outcome(exc, traceback.format_exc(),
                                     error=f"result could not be stored as parquet: {exc}")
    record = {k: v for k, v in result.items() if k not in ("ok", "stats", "df", "manifest")}
    path = store.write_failure(point, record)
    outcome.failed.append(FailedPoint(point.point_hash, point.label(),
                                      f"{result.get('error_type', 'Error')}: {result.get('error', '')}", path))
