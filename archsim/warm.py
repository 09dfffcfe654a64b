"""Compile the channel kernels a job needs into numba's on-disk cache ahead of the job (issue 26, cold start).

A fresh clone has an empty numba cache, and the first simulation then spends about a minute of CPU compiling the
channel kernel (README "Measured speed", "Cold start"). `make setup` starts this module in the background as soon
as numba is installed, so the compile overlaps the rest of the installation; `make demo` and `make test` wait for
it (`--wait`) instead of compiling the same kernel a second time. It needs only numpy, numba and PyYAML, and
runs from the source tree before the package itself is installed.

  python -m archsim.warm [pimgpt] [trace] [general] [--lock FILE]   compile those kernels (default: pimgpt)
  python -m archsim.warm --wait [--lock FILE]             wait until a running warm-up has finished

Each kernel is compiled by building the smallest MemorySystem of the same kernel variant and state types as
the job's and loading its kernel (MemorySystem.load_kernel), so the job finds it in the cache; a second process
compiles the kernel's largest helpers meanwhile (HELPERS), which puts the machine's second core to work on it.
The lock file is held while compiling; waiting takes it once. A warm-up that fails leaves the job to compile as
it would anyway.
"""
from __future__ import annotations

import argparse
import fcntl
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

DEFAULT_LOCK = ".venv/warm.lock"


def _pimgpt():
    """PIM-GPT (and `make demo`): one PIM stream per channel on GDDR6-AiM, the stream-only kernel."""
    from archsim.dram.spec import load_spec
    from archsim.engine.reuse import StreamChannels

    return StreamChannels(load_spec("GDDR6_AiM_16Gbps", overrides={"org.channels": 1}), memo=False).ms


def _trace():
    """DRAM trace runs: one FR-FCFS source, one row buffer (the lean kernel)."""
    from archsim.dram.controller import ControllerConfig
    from archsim.dram.spec import load_spec
    from archsim.engine.channel import MemorySystem

    return MemorySystem(load_spec("DDR4_3200AA_x8_8Gb"), ControllerConfig(), requests=1)


def _general():
    """Every other device set (rw sources beside streams, ports, several rw sources: T3, NeuPIMs' baselines,
    most of the test suite): the general kernel."""
    from archsim.dram.controller import ControllerConfig
    from archsim.dram.spec import load_spec
    from archsim.engine.channel import MemorySystem

    return MemorySystem(load_spec("DDR4_3200AA_x8_8Gb"), ControllerConfig(), requests=1, kernel="general")


KERNELS: dict[str, Callable[[], Any]] = {"pimgpt": _pimgpt, "trace": _trace, "general": _general}

# The kernel's largest helpers (each compiled in its own numba pipeline, and cached, when the kernel's type
# inference first meets it; benchmarks/compile_profile.py), in the reverse of the order the kernel meets them, with
# their argument kinds: S = state, T = tables, C = controller fields, i = int64, a = 1-d int64 array. A second
# process compiles them from the end while the first types the kernel from the start, and the first then loads
# from numba's cache those the second has finished (numba's compiler lock is per process, so the two run on two
# cores). A wrong entry only costs the second process time: the kernel compiles what it does not find cached.
HELPERS = (("_rw_row_after_col", "STCiiia"), ("_serve_request", "STCiiiiii"), ("_stream_cand", "STCiiiia"),
           ("_rw_cands", "STCiiia"), ("_issue", "STCiiiiiii"), ("_refresh_want", "STCii"), ("_intake", "STCi"),
           ("_offer", "STCi"))
# The stream-only kernel compiles none of the rw and port helpers (channel._rw_part), and meets _intake,
# _refresh_want and _issue within its first ~5 s, before a second process could have them: it gets only those it
# meets late (given to the second process, _issue & co. cost 11 s of CPU more than one process alone).
STREAM_HELPERS = (("_complete", "Siii"), ("_stream_cand", "STCiiiia"), ("_at_boundary", "SCii"))


def helpers_of(ms) -> list[tuple[Any, str]]:
    """(numba dispatcher, argument kinds) of each helper the second process compiles for MemorySystem `ms`."""
    from archsim.engine import channel

    plan = STREAM_HELPERS if ms.kernel == "stream" else HELPERS
    return [(getattr(getattr(channel, name), "impl", getattr(channel, name)), args) for name, args in plan]


def compile_helpers(ms) -> None:
    """Compile HELPERS for the state types of MemorySystem `ms` (into numba's cache)."""
    import numba
    from numba import types

    kinds = {"S": numba.typeof(ms.S), "T": numba.typeof(ms.tables), "C": numba.typeof(ms.cf), "i": types.int64,
             "a": types.Array(types.int64, 1, "C")}
    for fn, args in helpers_of(ms):
        fn.compile(tuple(kinds[k] for k in args))


def warm(names: list[str], helpers: bool = True) -> dict[str, float]:
    """Compile (or load) each named kernel; returns {name: seconds}. `helpers`: compile its largest helpers in a
    second process meanwhile (when the kernel is not cached yet)."""
    import subprocess

    out = {}
    for name in names:
        t0 = time.perf_counter()
        ms = KERNELS[name]()
        child = None
        if helpers and ms.kernel_cached() is False:
            child = subprocess.Popen([sys.executable, "-m", "archsim.warm", "--helpers-of", name])
        try:
            ms.load_kernel()
        finally:
            if child is not None:
                child.wait()
        out[name] = time.perf_counter() - t0
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m archsim.warm", description=__doc__.splitlines()[0])
    ap.add_argument("kernels", nargs="*", default=["pimgpt"],
                    help="which jobs' kernels to compile (default: pimgpt, what `make demo` runs)")
    ap.add_argument("--wait", action="store_true", help="only wait for a running warm-up to finish")
    ap.add_argument("--lock", default=DEFAULT_LOCK, help=f"lock file held while compiling (default {DEFAULT_LOCK})")
    ap.add_argument("--helpers-of", choices=list(KERNELS), help=argparse.SUPPRESS)   # the second process of warm()
    a = ap.parse_args(argv)
    if a.helpers_of:
        compile_helpers(KERNELS[a.helpers_of]())
        return 0
    lock = Path(a.lock)
    if a.wait:
        if lock.exists():
            with lock.open("a") as fh:
                fcntl.flock(fh, fcntl.LOCK_EX)
        return 0
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        t0 = time.process_time()
        took = warm(a.kernels or ["pimgpt"])
        print("archsim.warm: " + ", ".join(f"{k} {s:.1f} s" for k, s in took.items())
              + f" ({time.process_time() - t0:.1f} s CPU)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
