"""Whole-process speed of `archsim trace FILE --quiet`: interpreter start, imports, trace parsing, address
decode, engine setup, kernel, statistics and exit, as a user runs it.

Writes 2 M-line Ramulator load/store text traces (`LD|ST 0x..`) of the same cases as bench_dram.py (the same
generator, seed, 80 % reads, random over 2 GiB or a sequential stream; DDR4-3200 one channel, HBM2 eight
pseudo-channel-mode channels; mapping RoBaRaCoCh) to a temporary directory, runs

    archsim trace FILE --quiet --preset P --channels C --address-mapping RoBaRaCoCh

once to warm numba's cache, then K times as a subprocess, and reports per case the median wall time and the
median CPU time (user + system of the child, from wait4: less sensitive than wall time to other load on a
shared machine), M requests/s from each, and peak RSS. A further run of the same work in one child process,
with timers, gives the breakdown (`archsim.systems.dram_trace.system.run_trace`'s extra["timings_s"] plus imports;
"start+exit" is that child's wall time minus its own measured time: interpreter start-up and teardown).

Warm caches are numba's and Python's: before timing, the measured checkout's (and the baseline's) modules are
compiled to bytecode (`compileall`), as an installed package has them. Otherwise, with PYTHONDONTWRITEBYTECODE
set (it is, on this machine), every run compiled each archsim module whose .pyc was stale from source again.
The traces are written by a child process: a child's peak RSS (wait4's ru_maxrss) counts the memory of the
process it was forked from, so this process stays small.

    .venv/bin/python benchmarks/bench_trace_cli.py [--requests N] [--repeat K] [--cases a,b] [--dir DIR]
                                                   [--json FILE]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT, ROOT / "benchmarks"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from bench_dram import CASES, _setup, _trace, add_case_args, case_names, compile_bytecode  # noqa: E402  (the same cases and traces as the kernel benchmark)

PHASES = ["start+exit", "imports", "setup", "read", "check", "decode", "engine_setup", "kernel", "stats", "cli"]
PHASE_HELP = {
    "start+exit": "interpreter start-up and teardown (child wall time minus its own timers)",
    "imports": "numpy, archsim's CLI and the trace-run modules (numba included)",
    "setup": "preset YAML -> DramSpec, controller config",
    "read": "file read + parse to arrays (includes numba's one-time initialisation, ~0.1 s, paid by the first "
            "compiled function a process runs)",
    "check": "capacity check and constant-field warnings",
    "decode": "address mapping decode",
    "engine_setup": "MemorySystem tables and state, enqueue of every request",
    "kernel": "the channel engine's run (includes loading it from numba's cache)",
    "stats": "statistics, energy, per-channel table",
    "cli": "argument parsing and the rest of `archsim trace` around run_trace",
}

# The breakdown child: `archsim trace ...` through archsim.cli.main as the command runs it, with run_trace
# wrapped to keep its Result (its extra["timings_s"]). The imports come first here, to time them, so the
# garbage collector is paused for them as `archsim trace` pauses it around its own (lazy) imports.
_BREAKDOWN = r"""
import gc, json, sys, time
t0, c0 = time.perf_counter(), time.process_time()
gc.disable()
import numpy
import archsim.cli, archsim.commands.trace
import archsim.systems.dram_trace.system as dt
gc.enable()
t1, c1 = time.perf_counter(), time.process_time()
box = {}
run_trace = dt.run_trace
def keep(*args, **kwargs):
    box["result"] = r = run_trace(*args, **kwargs)
    return r
dt.run_trace = keep
code = archsim.cli.main(sys.argv[1:])
t2, c2 = time.perf_counter(), time.process_time()
r = box["result"]
wall, cpu = r.extra["timings_s"], r.extra["cpu_s"]
out = {"wall": {"imports": t1 - t0, **wall, "cli": (t2 - t1) - sum(wall.values())},
       "cpu": {"imports": c1 - c0, **cpu, "cli": (c2 - c1) - sum(cpu.values())},
       "internal_wall": t2 - t0, "internal_cpu": c2 - c0, "cycles": r.stats["cycles"]}
print(json.dumps(out))
sys.exit(code)
"""


def _cli(path: Path, preset: str, channels: int) -> list[str]:
    return ["trace", str(path), "--quiet", "--preset", preset, "--channels", str(channels),
            "--address-mapping", "RoBaRaCoCh"]


def _timed(cmd: list[str], env: dict | None = None) -> tuple[float, float, float, str]:
    """(wall s, CPU s = user + sys, peak RSS MiB, stdout) of one child process (stdout/stderr to files, so
    the child is reaped by wait4 here, which gives its own resource usage)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=out, stderr=err, cwd=str(ROOT), env=env)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if p.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed (exit {p.returncode}):\n{err.read().decode()}")
        return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024, out.read().decode()


def _trace_path(directory: Path, name: str, requests: int) -> Path:
    return directory / f"{name}-{requests}.trace"


def write_traces(directory: Path, names: list[str], requests: int) -> None:
    """The cases' traces as Ramulator load/store text files (kept if already there)."""
    from archsim.dram.trace import write_trace

    for name in names:
        preset, channels, kind = CASES[name]
        spec, _ = _setup(preset, channels)
        path = _trace_path(directory, name, requests)
        if not path.exists():
            write_trace(_trace(spec, kind, requests), path, fmt="ramulator")


def _write_traces_in_child(directory: Path, names: list[str], requests: int) -> dict[str, Path]:
    """write_traces in a child process (this one stays small: see the module docstring); the traces' paths."""
    subprocess.run([sys.executable, str(Path(__file__).resolve()), "--_write-traces", "--dir", str(directory),
                    "--requests", str(requests), "--cases", ",".join(names)], check=True)
    return {name: _trace_path(directory, name, requests) for name in names}


def _stats(cmd: list[str], env: dict | None, out: Path) -> dict:
    """The run's stats (--json), without the simulator's own timings (wall_s, sim_compile_s, ...): what must
    not change between checkouts."""
    from archsim.results import without_timings

    _timed([*cmd, "--json", str(out)], env)
    return without_timings(json.loads(out.read_text())["stats"])


def run_case(name: str, path: Path, requests: int, repeat: int, breakdown: bool = True,
             baseline: str | None = None) -> dict:
    preset, channels, kind = CASES[name]
    archsim = str(Path(sys.executable).with_name("archsim"))
    cli = _cli(path, preset, channels)
    cmd = [archsim, *cli]
    base_env = {**os.environ, "PYTHONPATH": baseline} if baseline else None
    # warm-up (numba's cache of each checkout is then loaded, not compiled), and the results to compare
    stats = _stats(cmd, None, path.with_suffix(".this.json"))
    base_stats = _stats(cmd, base_env, path.with_suffix(".base.json")) if baseline else None
    runs, base_runs = [], []
    for _ in range(repeat):   # interleaved, so both checkouts see the same machine load
        runs.append(_timed(cmd))
        if baseline:
            base_runs.append(_timed(cmd, base_env))
    wall = statistics.median(r[0] for r in runs)
    cpu = statistics.median(r[1] for r in runs)
    extra = {}
    if baseline:
        extra = {"baseline": baseline, "baseline_same_stats": base_stats == stats,
                 "baseline_wall_s": statistics.median(r[0] for r in base_runs),
                 "baseline_cpu_s": statistics.median(r[1] for r in base_runs),
                 "baseline_peak_rss_MiB": max(r[2] for r in base_runs)}
    if breakdown:
        b_wall, b_cpu, _, b_out = _timed([sys.executable, "-c", _BREAKDOWN, *cli])
        got = json.loads(b_out.strip().splitlines()[-1])
        parts, cpu_parts = got["wall"], got["cpu"]
        parts["start+exit"] = b_wall - got["internal_wall"]
        # CPU before the child's first timer (interpreter start-up) and after its last (teardown)
        cpu_parts["start+exit"] = b_cpu - got["internal_cpu"]
    else:
        b_wall = b_cpu = float("nan")
        parts = {k: float("nan") for k in PHASES}
        cpu_parts = dict(parts)
    return {
        "case": name, "preset": preset, "channels": channels, "trace": kind, "requests": requests,
        "bytes": path.stat().st_size, "repeat": repeat, "command": "archsim " + " ".join(cli),
        "wall_s": wall, "wall_s_all": [r[0] for r in runs], "cpu_s": cpu, "cpu_s_all": [r[1] for r in runs],
        "requests_per_s": requests / wall, "requests_per_cpu_s": requests / cpu,
        "peak_rss_MiB": max(r[2] for r in runs), "cycles": stats["cycles"],
        "breakdown_s": {k: parts[k] for k in PHASES}, "breakdown_cpu_s_by_phase": {k: cpu_parts[k] for k in PHASES},
        "breakdown_wall_s": b_wall, "breakdown_cpu_s": b_cpu,
        "stats": stats, **extra,
    }


def _fmt(rows: list[dict], load: tuple[float, float, float]) -> str:
    head = ["case", "requests", "wall s (median)", "M req/s", "CPU s (median)", "M req/CPU s", "peak RSS MiB",
            "cycles"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        lines.append("| " + " | ".join([
            r["case"], f"{r['requests']:,}", f"{r['wall_s']:.2f}", f"{r['requests_per_s'] / 1e6:.2f}",
            f"{r['cpu_s']:.2f}", f"{r['requests_per_cpu_s'] / 1e6:.2f}", f"{r['peak_rss_MiB']:.0f}",
            f"{r['cycles']:,}"]) + " |")
    if any("baseline" in r for r in rows):
        lines += ["", f"Baseline (the checkout in {rows[0].get('baseline')}, run through PYTHONPATH, interleaved "
                  "with the runs above):", ""]
        head = ["case", "wall s", "M req/s", "CPU s", "M req/CPU s", "peak RSS MiB", "same stats",
                "CPU speed-up"]
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for r in rows:
            lines.append("| " + " | ".join([
                r["case"], f"{r['baseline_wall_s']:.2f}", f"{r['requests'] / r['baseline_wall_s'] / 1e6:.2f}",
                f"{r['baseline_cpu_s']:.2f}", f"{r['requests'] / r['baseline_cpu_s'] / 1e6:.2f}",
                f"{r['baseline_peak_rss_MiB']:.0f}", "yes" if r["baseline_same_stats"] else "**NO**",
                f"{r['baseline_cpu_s'] / r['cpu_s']:.2f}x"]) + " |")
    timed = [r for r in rows if not math.isnan(r["breakdown_wall_s"])]   # (none with --no-breakdown)
    if timed:
        lines += ["", "Breakdown (s, one further run with timers, wall and CPU per phase; the run's total in the "
                  "last column):", ""]
        head = ["case", "", *PHASES, "sum", "total"]
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for r in timed:
            for label, b, total in (("wall", r["breakdown_s"], r["breakdown_wall_s"]),
                                    ("CPU", r["breakdown_cpu_s_by_phase"], r["breakdown_cpu_s"])):
                lines.append("| " + " | ".join([r["case"], label, *(f"{b[k]:.3f}" for k in PHASES),
                                                 f"{sum(b.values()):.2f}", f"{total:.2f}"]) + " |")
        lines += ["", *(f"- {k}: {v}" for k, v in PHASE_HELP.items())]
    lines += ["", f"Load average before the run (1, 5, 15 min): {load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f} "
              f"on {os.cpu_count()} CPUs"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_case_args(ap)
    ap.add_argument("--dir", help="keep the generated traces here (default: a temporary directory)")
    ap.add_argument("--no-breakdown", action="store_true", help="skip the timed breakdown run")
    ap.add_argument("--baseline", metavar="DIR",
                    help="also time another checkout of archsim (e.g. `git worktree add DIR <commit>`; its numba "
                    "cache warms on the first run), run through PYTHONPATH=DIR with this venv, interleaved with "
                    "this checkout's runs, and check its stats are the same")
    ap.add_argument("--_write-traces", action="store_true", help=argparse.SUPPRESS)   # (the child of main)
    args = ap.parse_args(argv)
    names = case_names(ap, args)
    if args._write_traces:
        write_traces(Path(args.dir), names, args.requests)
        return 0
    load = os.getloadavg()
    if args.baseline and not (Path(args.baseline) / "archsim" / "cli.py").is_file():
        ap.error(f"--baseline {args.baseline}: not an archsim checkout (no archsim/cli.py)")
    with tempfile.TemporaryDirectory(prefix="archsim-bench-cli-") as tmp:
        directory = Path(args.dir) if args.dir else Path(tmp)
        directory.mkdir(parents=True, exist_ok=True)
        paths = _write_traces_in_child(directory, names, args.requests)
        compile_bytecode(ROOT)
        if args.baseline:
            compile_bytecode(Path(args.baseline))
        rows = []
        for n in names:
            r = run_case(n, paths[n], args.requests, args.repeat, breakdown=not args.no_breakdown,
                         baseline=str(Path(args.baseline).resolve()) if args.baseline else None)
            rows.append(r)
            print(f"{n}: wall {r['wall_s']:.2f} s ({r['requests_per_s'] / 1e6:.2f} M req/s), CPU {r['cpu_s']:.2f} s "
                  f"({r['requests_per_cpu_s'] / 1e6:.2f} M req/CPU s)", file=sys.stderr, flush=True)
    print(_fmt(rows, load))
    if args.json:
        Path(args.json).write_text(json.dumps({"cases": rows, "loadavg": load, "cpu_count": os.cpu_count(),
                                               "python": sys.version.split()[0]}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
