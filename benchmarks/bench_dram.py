"""Throughput benchmark of the DRAM trace simulator (archsim.systems.dram_trace.system.simulate_trace).

Cases: DDR4-3200 one channel and HBM2 (pseudo-channel mode) eight channels, each on a random trace (uniform
over 2 GiB) and a sequential stream; 64 B requests (32 B on HBM2 pseudo-channels), 80 % reads, one request
offered per cycle, default controller (FR-FCFS, open row, all-bank refresh, 32-entry queues).

    .venv/bin/python benchmarks/bench_dram.py [--requests N] [--repeat K] [--json FILE] [--cases a,b]
                                              [--no-isolate]

Reported per case:
  compile_s       numba compile time of the channel kernel from scratch (a fresh process with an empty
                  numba cache directory), first call on a tiny trace
  first_call_s    first call of the cached channel kernel in a fresh process on a tiny trace: a cache
                  load, or compile + cache write when the cache was missing (column `cache` says which)
  wall_s          median of K timed `simulate_trace` calls: address-mapping decode + table setup + kernel;
                  trace generation and result statistics excluded. kernel_s: the kernel alone (median);
                  cpu_s: CPU time of the calling thread (median), less sensitive to other load on the machine;
                  kernel_cpu_s: its CPU time inside the kernel (MemorySystem.advance, compile excluded; median)
  cycles, cycles/s, req/s, cmd/s (commands issued per wall second), peak RSS (ru_maxrss of the process that
  ran the case; each case runs in its own process unless --no-isolate)
  simulated results: bandwidth GB/s, row-hit rate, mean read latency, and the cycle count of Ramulator 2.1's
  published runs of the same traces (only compared with the default 2 M requests).

"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

CASES = {
    "ddr4-random": ("DDR4_3200AA_x8_8Gb", 1, "random"),
    "ddr4-stream": ("DDR4_3200AA_x8_8Gb", 1, "stream"),
    "hbm2-random": ("HBM2_2Gbps_PC", 8, "random"),
    "hbm2-stream": ("HBM2_2Gbps_PC", 8, "stream"),
}
# Ramulator 2.1 on the same traces (2 M requests, 80 % reads), run by the project on this machine class (2 vCPU
# EPYC VM; Ramulator is not a dependency): its simulated cycles, FRFCFS, open row, all-bank refresh, RoBaRaCoCh.
RAMULATOR_CYCLES = {"ddr4-random": 18.26e6, "ddr4-stream": 12.37e6, "hbm2-random": 2.21e6, "hbm2-stream": 2.14e6}
RAMULATOR_REQUESTS = 2_000_000
SPAN_BYTES = 2 << 30
READ_FRACTION = 0.8


def _setup(preset: str, channels: int):
    from archsim.dram.controller import ControllerConfig
    from archsim.dram.spec import load_spec

    spec = load_spec(preset)
    if spec.channels != channels:
        spec = load_spec(spec.raw, overrides={"org.channels": channels})  # as run_trace(channels=...) does
    # Ramulator 2.1's mapping (its published runs use RoBaRaCoCh), not the preset's default
    return spec, ControllerConfig(mapping="RoBaRaCoCh")


def _trace(spec, kind: str, requests: int):
    from archsim.dram.trace import synthetic_trace

    return synthetic_trace(kind, requests, read_fraction=READ_FRACTION, span_bytes=SPAN_BYTES,
                           access_bytes=spec.access_bytes, seed=0)


def _cache_files() -> list[Path]:
    from archsim.engine import channel

    d = Path(channel.__file__).resolve().parent / "__pycache__"
    return sorted(d.glob("channel.advance-*.nbi")) if d.is_dir() else []


def measure_compile() -> dict:
    """Cold compile time of the channel kernel in a fresh process with an empty numba cache directory (the
    project's cache is neither read nor written)."""
    import tempfile

    code = ("import time; t0 = time.perf_counter(); from archsim.systems.dram_trace.system import run_trace; "
            "run_trace({'kind': 'random', 'requests': 64}); print(time.perf_counter() - t0)")
    with tempfile.TemporaryDirectory(prefix="archsim-bench-cache-") as d:
        env = {**os.environ, "NUMBA_CACHE_DIR": d}
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=str(ROOT))
    if res.returncode != 0:
        raise SystemExit(res.stderr)
    return {"compile_s": float(res.stdout.strip().splitlines()[-1]), "kernel": "archsim/engine/channel.py"}


def _count_kernel_cpu() -> list[float]:
    """The kernel's CPU time: the calling thread's CPU seconds inside MemorySystem.advance, compile excluded, summed
    into the returned cell (as benchmarks/bench_neupims.py; on a shared machine CPU time is what other jobs do not
    inflate)."""
    from archsim.engine import compiling, memory

    cpu = [0.0]
    advance = memory.MemorySystem.advance

    def timed_advance(self, *a, **k):
        c0, k0 = time.thread_time(), compiling.compile_seconds()
        try:
            return advance(self, *a, **k)
        finally:
            cpu[0] += max(time.thread_time() - c0 - (compiling.compile_seconds() - k0), 0.0)
    memory.MemorySystem.advance = timed_advance
    return cpu


def run_case(name: str, requests: int, repeat: int) -> dict:
    from archsim.systems.dram_trace import system

    kernel_cpu = _count_kernel_cpu()

    preset, channels, kind = CASES[name]
    spec, ctrl = _setup(preset, channels)
    cache = "hit" if _cache_files() else "miss (compiled, written)"
    tiny = _trace(spec, kind, 64)
    t0 = time.perf_counter()
    system.simulate_trace(spec, ctrl, tiny.addr, tiny.is_write, tiny.arrive)
    first_call = time.perf_counter() - t0

    tr = _trace(spec, kind, requests)
    walls, kernels, cpus, kernel_cpus = [], [], [], []
    raw = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        c0 = time.thread_time()
        kernel_cpu[0] = 0.0
        raw = system.simulate_trace(spec, ctrl, tr.addr, tr.is_write, tr.arrive)
        cpus.append(time.thread_time() - c0)
        walls.append(time.perf_counter() - t0)
        kernels.append(raw["wall_s"])
        kernel_cpus.append(kernel_cpu[0])
    wall = statistics.median(walls)
    kern = statistics.median(kernels)
    cycles = int(raw["end_cycle"])
    commands = int(raw["cmd_count"].sum())
    is_write = np.asarray(tr.is_write, dtype=bool)
    lat = (raw["req_done"] - raw["req_enq"])[~is_write]
    seconds = cycles * spec.tCK_s
    return {
        "case": name, "preset": preset, "channels": channels, "trace": kind, "requests": requests,
        "repeat": repeat, "cache": cache, "first_call_s": first_call,
        "wall_s": wall, "wall_s_min": min(walls), "wall_s_all": walls, "kernel_s": kern,
        "kernel_cpu_s": statistics.median(kernel_cpus), "cpu_s": statistics.median(cpus),
        "cycles": cycles, "cycles_per_s": cycles / wall, "requests_per_s": requests / wall,
        "kernel_requests_per_s": requests / kern, "commands": commands, "commands_per_s": commands / wall,
        "peak_rss_MiB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "bandwidth_GBps": requests * spec.access_bytes / seconds / 1e9,
        "peak_bandwidth_GBps": spec.peak_bw_bytes_per_s / 1e9,
        "row_hit_rate": float((raw["req_kind"] == 0).mean()),
        "read_latency_mean_cycles": float(lat.mean()) if lat.size else 0.0,
        "read_latency_mean_ns": float(lat.mean()) * spec.tCK_ps / 1000 if lat.size else 0.0,
        "ramulator_cycles": RAMULATOR_CYCLES[name] if requests == RAMULATOR_REQUESTS else None,
    }


def _run_isolated(name: str, requests: int, repeat: int) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--_child", name, "--requests", str(requests),
           "--repeat", str(repeat)]
    res = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=str(ROOT))
    if res.returncode != 0:
        sys.stderr.write(res.stdout + res.stderr)
        raise SystemExit(f"case {name} failed (exit {res.returncode})")
    return json.loads(res.stdout.strip().splitlines()[-1])


def _fmt_table(rows: list[dict], compile_info: dict) -> str:
    head = ["case", "requests", "wall s (median)", "kernel s", "kernel CPU s", "cpu s", "cycles", "Mcycles/s", "K req/s",
            "M cmd/s", "peak RSS MiB", "first call s", "BW GB/s (% peak)", "row-hit", "read lat cyc (ns)",
            "Ramulator 2.1 cycles (ours/theirs)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        ram = r["ramulator_cycles"]
        ram_s = f"{ram / 1e6:.2f} M ({r['cycles'] / ram:.3f})" if ram else "n/a"
        lines.append("| " + " | ".join([
            r["case"], f"{r['requests']:,}", f"{r['wall_s']:.3f}", f"{r['kernel_s']:.3f}", f"{r['kernel_cpu_s']:.3f}",
            f"{r['cpu_s']:.3f}",
            f"{r['cycles']:,}", f"{r['cycles_per_s'] / 1e6:.2f}", f"{r['requests_per_s'] / 1e3:.0f}",
            f"{r['commands_per_s'] / 1e6:.2f}", f"{r['peak_rss_MiB']:.0f}",
            f"{r['first_call_s']:.2f} ({r['cache'].split()[0]})",
            f"{r['bandwidth_GBps']:.2f} ({100 * r['bandwidth_GBps'] / r['peak_bandwidth_GBps']:.0f} %)",
            f"{r['row_hit_rate']:.3f}",
            f"{r['read_latency_mean_cycles']:.1f} ({r['read_latency_mean_ns']:.1f})", ram_s]) + " |")
    lines.append("")
    lines.append(f"Kernel {compile_info['kernel']}: JIT compile from scratch (empty cache, tiny trace, whole "
                 f"process) {compile_info['compile_s']:.1f} s")
    return "\n".join(lines)


def compile_bytecode(checkout: Path = ROOT) -> None:
    """Python's cache warm for benchmarks that time fresh processes: the checkout's modules compiled to bytecode,
    as an installed package has them (with PYTHONDONTWRITEBYTECODE set, as on this machine, every process
    would otherwise compile each module whose .pyc is stale again)."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(checkout / "archsim")], check=True)


def add_case_args(ap: argparse.ArgumentParser) -> None:
    """The options every trace benchmark shares (this one and bench_trace_cli.py)."""
    ap.add_argument("--requests", type=int, default=2_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cases", default=",".join(CASES), help=f"comma-separated subset of {', '.join(CASES)}")
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON")


def case_names(ap: argparse.ArgumentParser, args: argparse.Namespace) -> list[str]:
    """The --cases asked for, after checking them and --requests/--repeat (argparse errors otherwise)."""
    if args.requests < 1 or args.repeat < 1:
        ap.error("--requests and --repeat must be >= 1")
    names = [c.strip() for c in args.cases.split(",") if c.strip()]
    for n in names:
        if n not in CASES:
            ap.error(f"unknown case {n!r}; choose from {', '.join(CASES)}")
    return names


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_case_args(ap)
    ap.add_argument("--no-isolate", action="store_true",
                    help="run every case in this process (peak RSS is then cumulative)")
    ap.add_argument("--_child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    names = case_names(ap, args)
    if args._child:
        print(json.dumps(run_case(args._child, args.requests, args.repeat)))
        return 0
    compile_info = measure_compile()
    rows = []
    for n in names:
        r = (run_case(n, args.requests, args.repeat) if args.no_isolate
             else _run_isolated(n, args.requests, args.repeat))
        rows.append(r)
        print(f"{n}: {r['wall_s']:.3f} s, {r['requests_per_s'] / 1e3:.0f} K req/s", file=sys.stderr, flush=True)
    print(_fmt_table(rows, compile_info))
    if args.json:
        Path(args.json).write_text(json.dumps({"compile": compile_info, "cases": rows, "cpu_count": os.cpu_count(),
                                               "python": sys.version.split()[0]}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
