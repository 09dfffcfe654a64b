"""Where sweep points run: local worker processes or a Dask distributed cluster.

Workers only compute; they send the Result back and the parent process writes the store, so the results
directory has a single writer and a remote cluster needs no shared file system.
"""
from __future__ import annotations

import contextlib
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
        from archsim.commands.common import compile_seconds, with_compile_time

        c0 = compile_seconds()
        result = with_compile_time(run(task["config"], task["seed"]), c0)
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


class WorkerDied(RuntimeError):
    """The worker process running a point ended without returning its outcome."""


class LocalExecutor:
    """Worker processes on this machine, one point at a time each.

    Not a concurrent.futures pool: there, one worker that dies (OOM killer, a crash in compiled code, a
    stray SIGKILL) breaks the pool and fails every queued point. Here each worker has its own pipe, so a dead
    worker fails only the point it was running, and a fresh worker takes its place. Workers die with the
    sweep (archsim.sweep.executors.die_with_parent), so a killed sweep leaves nothing running."""

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
        from multiprocessing.connection import wait as wait_ready

        imports = list(tasks[0].get("imports", [])) if tasks else []
        ctx = self._context(imports)
        queue = list(reversed(tasks))
        workers: list[_Worker] = []
        try:
            for _ in range(min(self.jobs, len(tasks))):
                workers.append(_Worker(ctx))
            for w in workers:
                w.give(queue.pop())
            while any(w.task is not None for w in workers):
                busy = [w for w in workers if w.task is not None]
                ready = wait_ready([h for w in busy for h in (w.conn, w.proc.sentinel)], timeout=TICK_S)
                if not ready:
                    yield None
                    continue
                for w in busy:
                    if w.conn not in ready and w.proc.sentinel not in ready:
                        continue
                    task, outcome = w.task, w.receive()
                    if outcome is None:     # the worker died: this point fails, a new worker takes its place
                        why = w.death()
                        outcome = failure_outcome(WorkerDied(why), "", pid=w.proc.pid)
                        w.close()
                        workers[workers.index(w)] = w = _Worker(ctx)
                    w.task = None
                    if queue:
                        w.give(queue.pop())
                    yield task, outcome
        finally:   # normal end, Ctrl-C or the caller stopped early: do not wait for queued points
            for w in workers:
                w.close()


class _Worker:
    """One worker process and the pipe it receives tasks and returns outcomes on."""

    def __init__(self, ctx: Any):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker_main, args=(child, os.getpid()), daemon=True,
                                name="archsim-sweep-worker")
        self.proc.start()
        child.close()
        self.task: Task | None = None

    def give(self, task: Task) -> None:
        self.task = task
        self.conn.send(task)

    def receive(self) -> Outcome | None:
        """The outcome, or None if the worker died before sending one."""
        try:
            if self.conn.poll():
                return self.conn.recv()
        except (EOFError, OSError):
            pass
        return None

    def death(self) -> str:
        self.proc.join(timeout=5)
        code = self.proc.exitcode
        how = (f"killed by signal {-code}" + (" (SIGKILL: out of memory, or killed)" if code == -9 else "")
               if code is not None and code < 0 else f"exited with code {code}")
        return f"the worker process running this point died ({how}); the other points are not affected"

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.conn.close()
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(timeout=5)


def _worker_main(conn: Any, sweep_pid: int) -> None:
    """A worker's loop: run the tasks it receives until it gets None or the pipe closes."""
    import signal

    die_with_parent(sweep_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C is the sweep's to handle (it stops the workers)
    from archsim.sweep.store import release_inherited_locks

    release_inherited_locks()    # the results directory's lock belongs to the sweep process only
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        try:
            conn.send(run_point(task))
        except (BrokenPipeError, OSError):
            return


PR_SET_PDEATHSIG = 1


def die_with_parent(sweep_pid: int) -> None:
    """Make this worker end when the sweep process ends, however it ends (SIGKILL included).

    Linux: prctl(PR_SET_PDEATHSIG, SIGKILL) makes the kernel kill us when our parent exits. Everywhere (and
    for a forkserver child, whose parent is the server): a daemon thread checks every half second that the
    sweep process is still there and that we were not re-parented."""
    import signal

    parent = os.getppid()
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):  # pragma: no cover - no libc prctl: the thread below still works
            pass

    def gone() -> bool:
        if os.getppid() != parent:
            return True
        try:
            os.kill(sweep_pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:   # pragma: no cover - alive, another user's (pid reuse)
            return False
        return False

    if gone():   # the sweep ended before prctl took effect
        os._exit(1)

    def watch() -> None:
        while not gone():
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="archsim-parent-watch", daemon=True).start()


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
