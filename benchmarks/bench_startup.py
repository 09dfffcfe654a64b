"""Start-up cost of the commands an architect waits on before anything is simulated (issue 38 item 4): the help
of every registered system, a bad-input error of every system, `archsim --help`, and a 1,000-request trace with
a warm numba cache. Each is a child process, as a user runs it; the figure is its CPU time (user + system, from
wait4: less sensitive than wall time to other load on this shared machine), the median of K runs.

    .venv/bin/python benchmarks/bench_startup.py [--repeat K] [--json FILE]

Targets (benchmarks/targets.yaml): <= 0.3 s of CPU for `--help` and for an error, <= 0.6 s for the trace. The
modules are compiled to bytecode first (`compileall`), as an installed package has them. A last row measures
numba's floor (import it, call one function from its warm cache): what any command that runs a kernel pays.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_dram import compile_bytecode  # noqa: E402

ARCHSIM = [sys.executable, "-m", "archsim.cli"]
# one bad value per system: a key every system's schema checks before it resolves anything else
BAD_INPUT = {"dram-trace": "channels=0", "pimgpt": "tokens=0", "neupims": "batch=0", "npu_pim": "batch=0",
             "npu_only": "batch=0", "gpu_only": "batch=0", "gpu_roofline": "batch=0", "duplex": "requests=0",
             "t3": "tp=1", "t3_decode": "batch=0", "gemm": "m=0"}
TRACE_REQUESTS = 1000
# numba's own start-up: import it and call one function from its warm on-disk cache, the least any command that
# runs a kernel pays (numba refreshes its typing and target registries before the first cached load)
NUMBA_FLOOR = """import numba, numpy
@numba.njit(cache=True)
def f(a):
    return a.sum()
f(numpy.ones(3))
"""


def cpu_seconds(cmd: list[str], expect: int = 0) -> tuple[float, float]:
    """(CPU s = user + sys, wall s) of one child process, which must exit with `expect`."""
    with tempfile.TemporaryFile() as out:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=str(ROOT))
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        code = os.waitstatus_to_exitcode(status)
        if code != expect:
            out.seek(0)
            raise SystemExit(f"{' '.join(cmd)}: exit {code}, expected {expect}:\n{out.read().decode()[-2000:]}")
        return ru.ru_utime + ru.ru_stime, wall


def measure(cmd: list[str], repeat: int, expect: int = 0) -> dict:
    runs = [cpu_seconds(cmd, expect) for _ in range(repeat)]
    return {"cpu_s": statistics.median(c for c, _ in runs), "wall_s": statistics.median(w for _, w in runs)}


def systems() -> list[str]:
    from archsim import registry

    return registry.names()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5, help="runs per command (the median is reported)")
    ap.add_argument("--json", help="write the figures as JSON")
    args = ap.parse_args(argv)
    compile_bytecode()
    names = systems()
    missing = sorted(set(names) - set(BAD_INPUT))
    if missing:
        raise SystemExit(f"no bad input declared for systems {missing}: add one to BAD_INPUT")
    rows = [{"command": "archsim --help", **measure([*ARCHSIM, "--help"], args.repeat)}]
    for name in names:
        rows.append({"command": f"archsim run --system {name} --help", "kind": "help", "system": name,
                     **measure([*ARCHSIM, "run", "--system", name, "--help"], args.repeat)})
    for name in names:
        rows.append({"command": f"archsim run --system {name} --set {BAD_INPUT[name]}", "kind": "error",
                     "system": name,
                     **measure([*ARCHSIM, "run", "--system", name, "--set", BAD_INPUT[name]], args.repeat, expect=2)})
    trace = [*ARCHSIM, "trace", f"synthetic:random:{TRACE_REQUESTS}", "--quiet"]
    cpu_seconds(trace)                 # warms numba's cache of the trace kernel
    rows.append({"command": " ".join(["archsim", *trace[3:]]), "kind": "trace", **measure(trace, args.repeat)})
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "numba_floor.py"
        script.write_text(NUMBA_FLOOR, encoding="utf-8")
        floor = [sys.executable, str(script)]
        cpu_seconds(floor)             # warms its cache
        rows.append({"command": "numba floor: import numba, one cached function", "kind": "floor",
                     **measure(floor, args.repeat)})
    out = {"repeat": args.repeat, "rows": rows,
           "help_cpu_s_max": max(r["cpu_s"] for r in rows if r.get("kind") == "help"),
           "error_cpu_s_max": max(r["cpu_s"] for r in rows if r.get("kind") == "error"),
           "trace_1000_cpu_s": next(r["cpu_s"] for r in rows if r.get("kind") == "trace"),
           "numba_floor_cpu_s": rows[-1]["cpu_s"], "load_average": os.getloadavg()}
    width = max(len(r["command"]) for r in rows)
    print(f"{'command':<{width}}  {'CPU s':>6}  {'wall s':>6}   (median of {args.repeat}; load "
          f"{out['load_average'][0]:.1f})")
    for r in rows:
        print(f"{r['command']:<{width}}  {r['cpu_s']:6.2f}  {r['wall_s']:6.2f}")
    print(f"slowest help {out['help_cpu_s_max']:.2f} s, slowest error {out['error_cpu_s_max']:.2f} s, "
          f"1,000-request trace {out['trace_1000_cpu_s']:.2f} s of CPU (numba's floor {out['numba_floor_cpu_s']:.2f} s)")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
