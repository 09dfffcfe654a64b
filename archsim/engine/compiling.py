"""Channel-kernel compiles: each announced once on stderr (a cold compile takes minutes of CPU), and their
seconds counted apart from simulation time (results report them as `sim_compile_s`; `MemorySystem.wall_s` and
the op engine's kernel time exclude them). One place for the plain kernel and its threaded form.
"""
from __future__ import annotations

import os
import sys
import time
from typing import Any

# Expected cold-compile time of one kernel variant, as measured on this project's 2-core machine: 61 s idle
# (issue 26), 2 min with a few other jobs running, 10 min under a load average of 10 (a trace run, 597 s).
COMPILE_EXPECTED = "about 35-60 s of CPU (README \"Measured speed\", cold start), several times that in wall time under load"
_COMPILE_S = [0.0]          # seconds this process spent loading or compiling channel kernels
_ANNOUNCED: set[Any] = set()


def compile_seconds() -> float:
    """Seconds this process has spent loading or compiling channel kernels so far."""
    return _COMPILE_S[0]


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
    out = dispatcher.compile(sig)
    _COMPILE_S[0] += time.perf_counter() - t0
    return out
