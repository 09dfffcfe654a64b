"""Compile the channel kernels a job needs into numba's on-disk cache ahead of the job (issue 26, cold start).

A fresh clone has an empty numba cache, and the first simulation then spends about a minute of CPU compiling the
channel kernel (docs/performance.md, "Cold start"). `make setup` starts this module in the background as soon
as numba is installed, so the compile overlaps the rest of the installation; `make demo` and `make test` wait for
it (`--wait`) instead of compiling the same kernel a second time. It needs only numpy, numba and PyYAML, and
runs from the source tree before the package itself is installed.

  python -m archsim.warm [NAME ...] [--jobs N] [--lock FILE]   compile those kernels (default: pimgpt)
  python -m archsim.warm --wait [--lock FILE]                  wait until a running warm-up has finished

NAME is a key of KERNELS: pimgpt, trace, general, neupims (its shallow request window: neupims-shallow), npu_pim, and
pimgpt-threads / general-threads / trace-threads (the threaded forms, `advance_shard`, of the stream, general
and lean kernels). Each kernel is compiled by building the smallest MemorySystem of the same kernel variant
and state types as the job's and loading its kernel (MemorySystem.load_kernel), so the job finds it in the
cache. One kernel: a second process compiles the kernel's largest helpers meanwhile (HELPERS), which puts the
machine's second core to work on it. Several kernels (`make test` warms every one the suite compiles): they
are compiled side by side, one process per kernel variant and at most --jobs (default: every core) at a time,
so no two processes compile the same helpers. The lock file is held while compiling; waiting takes it once. A
warm-up that fails leaves the job to compile as it would anyway.
"""
from __future__ import annotations

import argparse
import fcntl
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

DEFAULT_LOCK = ".venv/warm.lock"


def _pimgpt(threads: int = 1):
    """PIM-GPT (and `make demo`): one PIM stream per channel on GDDR6-AiM, the stream-only kernel."""
    from archsim.dram.spec import load_spec
    from archsim.engine.memory import MemorySystem
    from archsim.engine.reuse import StreamChannels

    spec = load_spec("GDDR6_AiM_16Gbps", overrides={"org.channels": threads})
    if threads == 1:
        return StreamChannels(spec, memo=False).ms
    return MemorySystem(spec, {"refresh": "none"}, sources=[{"name": "pim", "kind": "stream"}], threads=threads)


def _trace(threads: int = 1):
    """DRAM trace runs: one FR-FCFS source, one row buffer (the lean kernel)."""
    from archsim.dram.controller import ControllerConfig
    from archsim.dram.spec import load_spec
    from archsim.engine.memory import MemorySystem

    return MemorySystem(load_spec("DDR4_3200AA_x8_8Gb", overrides={"org.channels": threads}), ControllerConfig(),
                        requests=1, threads=threads)


def _general(threads: int = 1):
    """Every other device set (rw sources beside streams, ports, several rw sources: T3, NeuPIMs' baselines,
    most of the test suite): the general kernel."""
    from archsim.dram.controller import ControllerConfig
    from archsim.dram.spec import load_spec
    from archsim.engine.memory import MemorySystem

    return MemorySystem(load_spec("DDR4_3200AA_x8_8Gb", overrides={"org.channels": threads}), ControllerConfig(),
                        requests=1, kernel="general", threads=threads)


def _neupims(threads: int = 1, request_queue: int = 4096, preset: str = "NeuPIMs_HBM2_Dual",
             arbitration: str = "priority"):
    """NeuPIMs: a PIM stream beside the NPU's rw source, PIM first, on banks with two row buffers, under the
    mappings' deep request window (pim_dual_deep); `request_queue=32`: the shallow window's kernel (pim_dual);
    NeuPIMs_HBM2_Single under `blocked` arbitration: its NPU+PIM baseline (system npu_pim, pim_blocked_deep)."""
    from archsim.dram.spec import load_spec
    from archsim.engine.memory import MemorySystem

    ctrl = {"refresh": "allbank", "read_queue": request_queue, "write_queue": request_queue}
    return MemorySystem(load_spec(preset, overrides={"org.channels": threads}),
                        ctrl, sources=[{"name": "pim", "kind": "stream"}, {"name": "npu", "kind": "rw"}],
                        arbitration=arbitration, stream_refresh="wait", requests=1, threads=threads)


# name -> builder of the smallest MemorySystem running that kernel. "X-threads": the same kernel variant on two
# channels with two threads, whose warm-up also compiles the threaded form (advance_shard, _replay_completions;
# engine.threads > 1, which tests/test_engine_threads.py runs on the stream, the general and the lean kernel).
KERNELS: dict[str, Callable[[], Any]] = {"pimgpt": _pimgpt, "trace": _trace, "general": _general, "neupims": _neupims,
                                         "neupims-shallow": lambda: _neupims(request_queue=32),
                                         "npu_pim": lambda: _neupims(preset="NeuPIMs_HBM2_Single",
                                                                     arbitration="blocked"),
                                         "pimgpt-threads": lambda: _pimgpt(threads=2),
                                         "general-threads": lambda: _general(threads=2),
                                         "trace-threads": lambda: _trace(threads=2)}

# The kernel's largest helpers (each compiled in its own numba pipeline, and cached, when the kernel's type
# inference first meets it; benchmarks/compile_profile.py), with their argument kinds: S = state, T = tables,
# C = controller fields, i = int64, a / A = 1-d / 2-d int64 array (a: the same type as C). A second process
# compiles them, in the order given, while the first types the kernel. Each helper is claimed by the process that
# starts it first (`_claim`): the second skips one the first has claimed, and the first waits for one the second
# has claimed and then loads it from numba's cache (`waiting_for_helpers`), so none is compiled twice and the
# first waits at most for the rest of one helper (numba's compiler lock is per process: the two run on two
# cores). A wrong entry only costs time: the kernel compiles what it does not find cached.
# Measured cold on the idle machine (2026-11-29, one process, benchmarks/compile_profile.py and the helpers' start
# times): every kernel types its own code for ~4.5 s, then meets its helpers, then spends the rest in its own
# pipeline (stream ~18 s, general ~40 s), which no second process can share. The rw kernels (general, lean and
# the NeuPIMs variants alike) meet _offer, _intake and _refresh_want in their first ~11 s, before a second process
# could have finished them, so the first keeps those; the second starts at _issue (met at ~11 s, ~6 s to compile)
# and goes on in the order the kernel meets the rest, _stream_run (which calls _issue) last. Left to the first as
# well: the overload bodies with no dispatcher of their own (_cq_step, _cq_step_skipped, _returns_*) and _is_rw
# (typed with a literal).
HELPERS = (("_issue", "STCiiiiiii"), ("_at_boundary", "SCii"), ("_rw_cands", "STCiiia"), ("_stream_cand", "STCiiiia"),
           ("_arbitrate", "SCiAiai"), ("_serve_request", "STCiiiiii"), ("_rw_row_after_col", "STCiiia"),
           ("_stream_run", "STCiiii"))
# The stream-only kernel (`make demo`'s) compiles none of the rw and port helpers (channel._rw_part); it meets
# _issue at ~8 s.
STREAM_HELPERS = (("_issue", "STCiiiiiii"), ("_at_boundary", "SCii"), ("_stream_cand", "STCiiiia"),
                  ("_arbitrate", "SCiAiai"), ("_free_entry", "Sii"), ("_complete", "Siii"), ("_stream_run", "STCiiii"))


def _claim(done: Path, name: str) -> bool:
    """Claim helper `name` for this process (True), unless the other one has (False): an exclusive create."""
    try:
        os.close(os.open(done / f"{name}.claim", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        return True
    except FileExistsError:
        return False


def helpers_of(ms) -> list[tuple[Any, str]]:
    """(numba dispatcher, argument kinds) of each helper the second process compiles for MemorySystem `ms`."""
    from archsim.engine import channel

    plan = STREAM_HELPERS if ms.kernel == "stream" else HELPERS
    return [(getattr(getattr(channel, name), "impl", getattr(channel, name)), args) for name, args in plan]


def compile_helpers(ms, done: Path | None = None) -> None:
    """Compile the helpers of `helpers_of(ms)` for the state types of MemorySystem `ms` (into numba's cache). With
    `done` (the second process of `warm`): only those it claims first, touching `done / <name>` after each."""
    import numba
    from numba import types

    kinds = {"S": numba.typeof(ms.S), "T": numba.typeof(ms.tables), "C": numba.typeof(ms.cf), "i": types.int64,
             "a": types.Array(types.int64, 1, "C"), "A": types.Array(types.int64, 2, "C")}
    for fn, args in helpers_of(ms):
        if done is not None and not _claim(done, fn.py_func.__name__):
            continue                        # the first process met it first and compiles it
        fn.compile(tuple(kinds[k] for k in args))
        if done is not None:
            (done / fn.py_func.__name__).touch()


class waiting_for_helpers:
    """While in effect (a `with` block in the first process), the first numba compile of one of `names` claims it;
    if the second process has claimed it already, it waits until that one has touched `done / <name>` (compiled
    and cached it) or has exited. Then it goes on as numba's own: it loads the cached one, or compiles it."""

    def __init__(self, child: Any, done: Path, names: set[str]):
        self.child, self.done, self.names = child, done, names

    def __enter__(self):
        from numba.core import dispatcher

        self._real = real = dispatcher.Dispatcher.compile
        child, done, names = self.child, self.done, self.names

        def compile_after_helper(disp, sig):
            name = disp.py_func.__name__
            if name in names and disp.py_func.__module__ == "archsim.engine.channel":
                names.discard(name)           # once: later calls are numba's own
                if not _claim(done, name):
                    while not (done / name).exists() and child.poll() is None:
                        time.sleep(0.02)
            return real(disp, sig)

        dispatcher.Dispatcher.compile = compile_after_helper
        return self

    def __exit__(self, *exc):
        from numba.core import dispatcher

        dispatcher.Dispatcher.compile = self._real
        return False


def _compile(ms) -> None:
    """Load (or compile) MemorySystem `ms`'s kernel, and its threaded form if it runs on threads."""
    ms.load_kernel(threaded=True)


def warm(names: list[str], helpers: bool = True, jobs: int = 1) -> dict[str, float]:
    """Compile (or load) each named kernel; returns {name: seconds}. `helpers`: compile its largest helpers in a
    second process meanwhile (when the kernel is not cached yet). jobs > 1 and several names: side by side
    instead (warm_side_by_side)."""
    import subprocess

    if jobs > 1 and len(names) > 1:
        return warm_side_by_side(names, jobs)
    out = {}
    for name in names:
        t0 = time.perf_counter()
        ms = KERNELS[name]()
        if not (helpers and ms.kernel_cached() is False):
            _compile(ms)
        else:
            with tempfile.TemporaryDirectory(prefix="archsim-warm-") as done:
                child = subprocess.Popen([sys.executable, "-m", "archsim.warm", "--helpers-of", name,
                                          "--helpers-done", done])
                try:
                    with waiting_for_helpers(child, Path(done), {fn.py_func.__name__ for fn, _ in helpers_of(ms)}):
                        _compile(ms)
                finally:
                    child.wait()
        out[name] = time.perf_counter() - t0
    return out


def variant_groups(names: list[str]) -> list[list[str]]:
    """`names` grouped by kernel variant, in the order given: a kernel and its threaded form ("X-threads") type
    the same helpers, so one process compiles both, one after the other, and the second loads them cached."""
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(name.removesuffix("-threads"), []).append(name)
    return list(groups.values())


def warm_side_by_side(names: list[str], jobs: int) -> dict[str, float]:
    """Compile the kernels of `names` in child processes, one per kernel variant (variant_groups), at most `jobs`
    at a time, in the order given (put the longest first); returns {group: seconds}. numba's compiler lock is
    per process, so each child has a core to itself."""
    import subprocess

    pending = variant_groups(names)
    running: list[tuple[str, float, subprocess.Popen]] = []
    out: dict[str, float] = {}
    t0 = said = time.monotonic()
    while pending or running:
        if time.monotonic() - said >= HEARTBEAT_S and running:
            said = time.monotonic()
            print(f"archsim.warm: compiling {', '.join(r[0] for r in running)} ({said - t0:.0f} s; {len(out)} of "
                  f"{len(out) + len(running) + len(pending)} kernel variants done)", file=sys.stderr, flush=True)
        while pending and len(running) < jobs:
            group = pending.pop(0)
            proc = subprocess.Popen([sys.executable, "-m", "archsim.warm", "--one-process", *group])
            running.append((" ".join(group), time.perf_counter(), proc))
        time.sleep(0.1)
        for item in [r for r in running if r[2].poll() is not None]:
            running.remove(item)
            out[item[0]] = time.perf_counter() - item[1]
            if item[2].returncode:        # the job then compiles it itself: say so, do not stop the others
                print(f"archsim.warm: warming {item[0]} failed (exit {item[2].returncode})", file=sys.stderr)
    return out


HEARTBEAT_S = 10.0     # the longest a wait or a compile goes without a line (issue 35, `make setup` / `make test`)


def _lock_saying(fh: Any, waiting_for: str) -> None:
    """Take the lock on `fh`; while another process holds it, say so every HEARTBEAT_S seconds."""
    t0 = time.monotonic()
    said = t0 - HEARTBEAT_S
    while True:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            now = time.monotonic()
            if now - said >= HEARTBEAT_S:
                print(f"archsim.warm: {waiting_for} ({now - t0:.0f} s)", file=sys.stderr, flush=True)
                said = now
            time.sleep(0.2)


def _cpu_seconds() -> float:
    """CPU seconds of this process and of its finished child processes."""
    import resource

    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + kids.ru_utime + kids.ru_stime


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m archsim.warm", description=__doc__.splitlines()[0])
    ap.add_argument("kernels", nargs="*", default=["pimgpt"],
                    help="which jobs' kernels to compile (default: pimgpt, what `make demo` runs)")
    ap.add_argument("--wait", action="store_true", help="only wait for a running warm-up to finish")
    ap.add_argument("--lock", default=DEFAULT_LOCK, help=f"lock file held while compiling (default {DEFAULT_LOCK})")
    ap.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)),
                    help="several kernels: how many processes compile them side by side (default: every core)")
    ap.add_argument("--helpers-of", choices=list(KERNELS), help=argparse.SUPPRESS)   # the second process of warm()
    ap.add_argument("--helpers-done", default=None, help=argparse.SUPPRESS)          # where it marks each one done
    ap.add_argument("--one-process", action="store_true", help=argparse.SUPPRESS)   # a child of warm_side_by_side()
    a = ap.parse_args(argv)
    unknown = [k for k in a.kernels if k not in KERNELS]
    if unknown:
        ap.error(f"unknown kernel {unknown[0]!r}; allowed: {', '.join(KERNELS)}")
    if a.helpers_of:
        compile_helpers(KERNELS[a.helpers_of](), Path(a.helpers_done) if a.helpers_done else None)
        return 0
    if a.one_process:
        warm(a.kernels, helpers=False)
        return 0
    lock = Path(a.lock)
    if a.wait:
        if lock.exists():
            with lock.open("a") as fh:
                _lock_saying(fh, f"waiting for the channel kernel compile started at set-up (log: "
                                 f"{lock.with_name('warm.log')})")
        return 0
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("a") as fh:
        _lock_saying(fh, "waiting for another warm-up of the channel kernels to finish")
        t0 = _cpu_seconds()
        took = warm(a.kernels or ["pimgpt"], jobs=a.jobs)
        print("archsim.warm: " + ", ".join(f"{k} {s:.1f} s" for k, s in took.items())
              + f" ({_cpu_seconds() - t0:.1f} s CPU, its child processes included)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
