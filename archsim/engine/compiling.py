"""Channel-kernel compiles: each announced once on stderr (a cold compile takes minutes of CPU), and their
seconds counted apart from simulation time (results report them as `sim_compile_s`; `MemorySystem.wall_s` and
the op engine's kernel time exclude them). One place for the plain kernel and its threaded form.
"""
from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from typing import Any

# Expected cold-compile time of one kernel variant, as measured on this project's 2-core machine with
# benchmarks/compile_profile.py (docs/performance.md, cold start): 35-55 s of CPU idle (issue 26: the stream
# kernel 35-37 s, the general one 54 s); under a load average of 9-11 (issue 35) the CPU time itself grows (the
# cores are shared: stream 75 s, lean 125 s, general and pim_dual in README) and the wall time is 4-8 times it.
COMPILE_RANGE = "35-55 s idle, 75-190 s under load"
COMPILE_EXPECTED = (f"{COMPILE_RANGE} of CPU per kernel variant (docs/performance.md, cold start), and a wall "
                    "time several times that on a busy machine")
_COMPILE_S = [0.0]          # seconds this process spent loading or compiling channel kernels
_ANNOUNCED: set[Any] = set()


def compile_seconds() -> float:
    """Seconds this process has spent loading or compiling channel kernels so far."""
    return _COMPILE_S[0]


def clock() -> tuple[float, float]:
    """The start of a span of simulation time (`sim_seconds`): the wall clock and the compile seconds so far."""
    return time.perf_counter(), _COMPILE_S[0]


def sim_seconds(start: tuple[float, float]) -> float:
    """Wall seconds since `start` (clock()) less the seconds spent meanwhile compiling or loading channel kernels:
    the simulation time results report (`wall_s`, `sim_kernel_s`), a first run's compile apart (`sim_compile_s`)."""
    t0, c0 = start
    return time.perf_counter() - t0 - (_COMPILE_S[0] - c0)


def cached(dispatcher: Any, sig: tuple) -> bool | None:
    """Whether `dispatcher` (a numba function) is compiled for `sig` in this process or in numba's on-disk
    cache; None if unknown (numba's cache internals changed): then no notice is printed."""
    try:
        if tuple(sig) in dispatcher.overloads:
            return True
        dispatcher.targetctx.refresh()
        key = dispatcher._cache._index_key(sig, dispatcher.targetctx.codegen())
        return key in dispatcher._cache._cache_file._load_index()
    except Exception:   # noqa: BLE001  (a notice is a courtesy; never fail a run for it)
        return None


def compile(dispatcher: Any, sig: tuple, what: str | None = "the channel kernel for this configuration",
            note: str | None = None) -> Any:
    """`dispatcher` compiled (or loaded from numba's cache) for `sig`; a cold compile is announced first (one
    line naming `what`, once per signature and process; what=None: a helper too small to announce) and every
    second spent here is counted in compile_seconds()."""
    t0 = time.perf_counter()
    if what is not None and cached(dispatcher, sig) is False and (dispatcher, sig) not in _ANNOUNCED \
            and not os.environ.get("ARCHSIM_NO_COMPILE_NOTICE"):
        _ANNOUNCED.add((dispatcher, sig))
        where = getattr(getattr(dispatcher, "_cache", None), "_cache_path", "numba's cache")
        print(f"archsim: compiling {what}, {COMPILE_EXPECTED} (once: {note or f'it is cached in {where}'})",
              file=sys.stderr, flush=True)
        with ticker(what):
            out = dispatcher.compile(sig)
    else:
        out = dispatcher.compile(sig)
    _COMPILE_S[0] += time.perf_counter() - t0
    return out


TICK_S = 1.0


@contextlib.contextmanager
def ticker(what: str, stream: Any = None) -> Iterator[None]:
    """While the block runs (a cold compile), a status line on a terminal redrawn every TICK_S: wall time and
    this process's CPU time so far beside what to expect, so a compile that takes minutes under load is seen
    to go on (archsim.progress conventions: none under --quiet, CI=true or without a TTY; the run's own
    progress line waits meanwhile)."""
    from archsim import progress

    stream = stream or sys.stderr
    if not progress.wanted(stream=stream):
        yield
        return
    c0 = time.process_time()

    def text(wall: float) -> str:
        return (f"  compiling {what}: {wall:.0f} s elapsed, {time.process_time() - c0:.0f} s of CPU "
                f"({COMPILE_RANGE} of CPU expected)")

    with progress.held(), progress.ticker(text, stream, TICK_S, delay_s=TICK_S, name="archsim-compile"):
        yield
