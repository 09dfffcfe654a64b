"""Compile the channel kernels a job needs into numba's on-disk cache ahead of the job (issue 26, cold start).

A fresh clone has an empty numba cache, and the first simulation then spends about a minute of CPU compiling the
channel kernel (README "Measured speed", "Cold start"). `make setup` starts this module in the background as soon
as numba is installed, so the compile overlaps the rest of the installation; `make demo` and `make test` wait for
it (`--wait`) instead of compiling the same kernel a second time. It needs only numpy, numba and PyYAML, and
runs from the source tree before the package itself is installed.

  python -m archsim.warm [pimgpt] [trace] [--lock FILE]   compile those kernels (default: pimgpt)
  python -m archsim.warm --wait [--lock FILE]                       wait until a running warm-up has finished

Each kernel is compiled by building the smallest MemorySystem of the same kernel variant and state types as
the job's and loading its kernel (MemorySystem.load_kernel), so the job finds it in the cache. The lock file is
held while compiling; waiting takes it once. A warm-up that fails leaves the job to compile as it would anyway.
"""
from __future__ import annotations

import argparse
import fcntl
import sys
import time
from collections.abc import Callable
from pathlib import Path

DEFAULT_LOCK = ".venv/warm.lock"


def _pimgpt() -> None:
    """PIM-GPT (and `make demo`): one PIM stream per channel on GDDR6-AiM, the general kernel."""
    from archsim.dram.spec import load_spec
    from archsim.engine.reuse import StreamChannels

    StreamChannels(load_spec("GDDR6_AiM_16Gbps", overrides={"org.channels": 1}), memo=False).ms.load_kernel()


def _trace() -> None:
    """DRAM trace runs: one FR-FCFS source, one row buffer (the lean kernel)."""
    from archsim.dram.controller import ControllerConfig
    from archsim.dram.spec import load_spec
    from archsim.engine.channel import MemorySystem

    MemorySystem(load_spec("DDR4_3200AA_x8_8Gb"), ControllerConfig(), requests=1).load_kernel()


KERNELS: dict[str, Callable[[], None]] = {"pimgpt": _pimgpt, "trace": _trace}


def warm(names: list[str]) -> dict[str, float]:
    """Compile (or load) each named kernel; returns {name: seconds}."""
    out = {}
    for name in names:
        t0 = time.perf_counter()
        KERNELS[name]()
        out[name] = time.perf_counter() - t0
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m archsim.warm", description=__doc__.splitlines()[0])
    ap.add_argument("kernels", nargs="*", default=["pimgpt"],
                    help="which jobs' kernels to compile (default: pimgpt, what `make demo` runs)")
    ap.add_argument("--wait", action="store_true", help="only wait for a running warm-up to finish")
    ap.add_argument("--lock", default=DEFAULT_LOCK, help=f"lock file held while compiling (default {DEFAULT_LOCK})")
    a = ap.parse_args(argv)
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
