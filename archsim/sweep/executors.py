"""Where sweep points run: local worker processes or a Dask distributed cluster.

Workers only compute; they send the Result back and the parent process writes the store, so the results
directory has a single writer and a remote cluster needs no shared file system.
"""
from __future__ import annotations

import importlib
import logging
import os
import socket
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any

from archsim.errors import UserError

Task = dict[str, Any]  # {"point_hash", "config", "seed", "imports", "import_paths"}
Outcome = dict[str, Any]  # run_point's return value
Event = tuple[Task, Outcome] | None  # None = nothing finished lately (lets the caller redraw progress)

TICK_S = 0.25


def run_point(task: Task) -> Outcome:
    """Run one point in a worker. Never raises: a failure is returned as data with its traceback."""
    t0 = time.perf_counter()
    where = {"host": socket.gethostname(), "pid": os.getpid()}
    try:
        for path in reversed(task.get("import_paths", [])):
            if path not in sys.path:
                sys.path.insert(0, path)
        for module in task.get("imports", []):
            importlib.import_module(module)
        from archsim.api import run

        result = run(task["config"], task["seed"])
        stats, df, manifest = (getattr(result, name, None) for name in ("stats", "df", "manifest"))
        import pandas as pd

        if not isinstance(stats, dict) or not isinstance(df, pd.DataFrame):
            raise TypeError(f"system {task['config'].get('system')!r} returned {type(result).__name__}, "
                            "not an archsim.results.Result (stats dict + DataFrame)")
        return {"ok": True, "stats": stats, "df": df, "manifest": dict(manifest or {}),
                "elapsed_s": time.perf_counter() - t0, **where}
    except Exception as exc:
        return failure_outcome(exc, traceback.format_exc(), elapsed_s=time.perf_counter() - t0, **where)


def failure_outcome(exc: BaseException, tb: str, **extra: Any) -> Outcome:
    return {"ok": False, "error_type": type(exc).__name__, "error": str(exc) or type(exc).__name__,
            "user_error": isinstance(exc, UserError), "traceback": tb, **extra}


def default_jobs() -> int:
    try:
        return len(os.sched_getaffinity(0))  # respects CPU affinity / container limits
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


class LocalExecutor:
    """A pool of worker processes on this machine."""

    def __init__(self, jobs: int):
        self.jobs = jobs

    def _context(self, imports: list[str]) -> Any:
        import multiprocessing as mp

        # fork is cheapest (workers inherit imported modules) but unsafe once other threads exist, e.g.
        # when a Dask client lives in the same process; then fall back to forkserver.
        method = "fork" if threading.active_count() == 1 and "fork" in mp.get_all_start_methods() else "forkserver"
        if method not in mp.get_all_start_methods():  # pragma: no cover - not on Linux/macOS
            method = "spawn"
        ctx = mp.get_context(method)
        if method == "forkserver":  # import the heavy modules once in the server, not in every worker
            ctx.set_forkserver_preload(["archsim.sweep.executors", "archsim.api", "pandas", "pyarrow.parquet",
                                        *imports])
        return ctx

    def run(self, tasks: list[Task]) -> Iterator[Event]:
        from concurrent.futures.process import BrokenProcessPool

        imports = list(tasks[0].get("imports", [])) if tasks else []
        pool = ProcessPoolExecutor(max_workers=self.jobs, mp_context=self._context(imports))
        try:
            futures: dict[Future[Outcome], Task] = {pool.submit(run_point, t): t for t in tasks}
            pending = set(futures)
            while pending:
                done, pending = wait(pending, timeout=TICK_S, return_when=FIRST_COMPLETED)
                if not done:
                    yield None
                for fut in done:
                    try:
                        outcome = fut.result()
                    except BrokenProcessPool as exc:
                        outcome = failure_outcome(exc, traceback.format_exc(), error="a worker process died "
                                                  "(killed or crashed) while this point was queued or running")
                    yield futures[fut], outcome
        except BaseException:  # Ctrl-C or the caller stopped early: do not wait for queued points
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown(wait=True)


class DaskExecutor:
    """Points as tasks on a Dask distributed cluster (a given scheduler, or a LocalCluster of `jobs` workers)."""

    def __init__(self, jobs: int, scheduler: str | None = None):
        self.jobs = jobs
        self.scheduler = scheduler

    def run(self, tasks: list[Task]) -> Iterator[Event]:
        import distributed

        cluster = None
        if self.scheduler:
            _probe(self.scheduler)
        try:
            if self.scheduler:
                client = distributed.Client(self.scheduler, timeout="15s")
            else:
                cluster = distributed.LocalCluster(n_workers=self.jobs, threads_per_worker=1, processes=True,
                                                   dashboard_address=None, silence_logs=logging.ERROR)
                client = distributed.Client(cluster)
        except (OSError, TimeoutError) as exc:
            if cluster is not None:
                cluster.close()
            what = f"connect to the Dask scheduler {self.scheduler!r}" if self.scheduler else "start a Dask LocalCluster"
            raise UserError(f"cannot {what}: {exc}") from None
        try:
            run_id = uuid.uuid4().hex[:8]
            futures = {client.submit(run_point, t, key=f"archsim-point-{t['point_hash']}-{run_id}", pure=False): t
                       for t in tasks}
            done_iter = distributed.as_completed(list(futures))
            while not done_iter.is_empty():
                if not done_iter.has_ready():
                    time.sleep(TICK_S)
                    yield None
                    continue
                for fut in done_iter.next_batch(block=False):
                    try:
                        outcome = fut.result()
                    except Exception as exc:  # e.g. KilledWorker: the worker died running this point
                        outcome = failure_outcome(exc, traceback.format_exc())
                    fut.release()
                    yield futures[fut], outcome
        finally:
            client.close()
            if cluster is not None:
                cluster.close()


def _probe(address: str) -> None:
    """Fail in seconds, not after the client's connect timeout, when nothing listens at a tcp:// address."""
    if not address.startswith("tcp://"):
        return  # tls://, ucx:// ...: let distributed connect
    host, _, port = address[len("tcp://"):].rstrip("/").rpartition(":")
    if not host or not port.isdigit():
        raise UserError(f"--scheduler {address!r}: expected tcp://HOST:PORT")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=5).close()
    except OSError as exc:
        raise UserError(f"cannot connect to the Dask scheduler {address!r}: {exc}") from None
