"""Where a cold compile of the channel kernel spends its CPU time (issue 26 item 1, cold start).

Compiles the kernels archsim.warm names (default: pimgpt, the general kernel `make demo` runs) in a new, empty
NUMBA_CACHE_DIR in a child process and prints the CPU seconds of every numba compile of a function that took
more than --min seconds, nested as numba compiles them (a helper is compiled, in its own numba pipeline, when the
caller's type inference first meets it; the kernel `advance` inlines `_step`, `_cands` and `_issue_pick` at the
IR level, so their cost is the kernel's own). Everything compiles in that one process (without archsim.warm's
helper process, which would compile the largest helpers beside it). The environment passes through, so LLVM's optimisation level can be
compared with NUMBA_OPT=0..3 (numba's default is 3).

Run: .venv/bin/python benchmarks/compile_profile.py [pimgpt|trace] [--min 0.2]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

_CHILD = r"""
import sys, time
import numba.core.dispatcher as d
real, depth, rows = d.Dispatcher.compile, [0], []
def timed(self, sig):
    depth[0] += 1
    t0 = time.process_time()
    try:
        return real(self, sig)
    finally:
        depth[0] -= 1
        rows.append((depth[0], self.py_func.__name__, time.process_time() - t0))
d.Dispatcher.compile = timed
from archsim import warm
t0 = time.process_time()
warm.warm(sys.argv[2:], helpers=False)     # (one process: the helper process would hide its share)
total = time.process_time() - t0
shown = [r for r in rows if r[2] >= float(sys.argv[1])]
for dep, name, cpu in reversed(shown):        # callers finish after their callees: print callers first
    print(f"{'  ' * dep}{name:<28s}{cpu:7.1f} s CPU")
top = sum(cpu for dep, _, cpu in rows if dep == 1)
print(f"kernel's own pipeline (all minus the helpers it compiles): {sum(c for dep, _, c in rows if dep == 0) - top:.1f} s")
print(f"helpers compiled directly by the kernel: {top:.1f} s in {sum(1 for r in rows if r[0] == 1)} compile calls (most return an overload already compiled)")
print(f"total: {total:.1f} s CPU")
"""


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kernels", nargs="*", default=["pimgpt"])
    ap.add_argument("--min", type=float, default=0.2, help="show compiles of at least this many CPU seconds")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="numba-cold-") as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache, ARCHSIM_NO_COMPILE_NOTICE="1")
        subprocess.run([sys.executable, "-c", _CHILD, str(a.min), *a.kernels], env=env, check=True)


if __name__ == "__main__":
    main()
