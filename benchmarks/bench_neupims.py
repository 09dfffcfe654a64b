"""Simulator speed of the NeuPIMs system (issue #9 targets on this 2-core machine, after JIT):
  * one decode iteration of GPT3-7B at batch 512 (TP 4, ShareGPT lengths), all 32 layers, cycle-accurate:
    <= 30 s wall (the NeuPIMs C++ simulator: 2-7 min for ONE layer of one iteration, ~2.5-5 k cycles/s);
  * 100 iterations of continuous batching: <= 10 min;
  * SCALE-Sim-class GEMM timing: an 8 x 4096 x 4096 GEMM on a 128 x 128 array (tile model) <= 0.1 s.

Prints a Markdown table (simulated cycles per wall second next to wall time); --json writes the numbers. CPU
times are given beside wall times: on a shared machine other jobs inflate wall time, not CPU time. The
iteration's CPU time splits into the channel kernel's (the thread's CPU time inside `MemorySystem.advance`,
compile excluded) and the Python driver's (the rest). The benchmark measures through public entry points only,
so it runs unchanged against an older checkout for a before/after (PYTHONPATH=that checkout).

Run: .venv/bin/python benchmarks/bench_neupims.py [--batch 512] [--layers 32] [--serving-iterations 100]
     [--mapping FILE] (--serving-iterations 0 skips the serving run, --no-iteration the batch iteration; --layers N
     simulates only the first N layers, --serving-layers N only those of every serving iteration, the whole model's
     times taken from them by NeuPIMs' stage formula: the way to a quick whole-model serving run,
     docs/performance.md; --mapping: the batch iteration's mapping policy)
"""
from __future__ import annotations

import argparse
import json
import resource
import time


def iteration(api, run: dict, kernel_cpu: list[float], out: dict) -> None:
    """Time one decode iteration (wall, CPU, the kernel's CPU) into `out`."""
    t0 = time.perf_counter()
    cpu0 = time.process_time()
    kernel_cpu[0] = 0.0
    r = api.run(run)
    out["iteration_wall_s"] = time.perf_counter() - t0
    out["iteration_cpu_s"] = time.process_time() - cpu0
    out["iteration_simulated_cycles"] = r.stats["simulated_cycles"]
    out["iteration_cycles_per_s"] = r.stats["simulated_cycles"] / out["iteration_wall_s"]
    out["iteration_kernel_s"] = float(r.df["kernel_wall_s"].sum())
    out["iteration_kernel_cpu_s"] = kernel_cpu[0]
    out["iteration_python_cpu_s"] = out["iteration_cpu_s"] - out["iteration_kernel_cpu_s"]
    st = r.tables["stages"]
    out["iteration_dram_commands"] = int(sum(st[c].sum() for c in st.columns if c.startswith("n_")))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="gpt3-7b")
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--layers", type=int, default=None)
    ap.add_argument("--mapping", default=None, help="the batch iteration's mapping policy (default: the system's), "
                    "e.g. a copy of mappings/neupims.yaml with another request_queue")
    ap.add_argument("--serving-iterations", type=int, default=100)
    ap.add_argument("--serving-batch", type=int, default=64)
    ap.add_argument("--no-iteration", action="store_true", help="skip the batch iteration (time serving only)")
    ap.add_argument("--serving-layers", type=int, default=None,
                    help="layers simulated per serving iteration (default: --layers, else every layer)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    from archsim import api
    from archsim.engine import compiling, memory

    kernel_cpu = [0.0]
    advance = memory.MemorySystem.advance

    def timed_advance(self, *a, **k):       # the kernel's CPU time, whichever driver calls it
        c0, k0 = time.thread_time(), compiling.compile_seconds()
        try:
            return advance(self, *a, **k)
        finally:
            kernel_cpu[0] += max(time.thread_time() - c0 - (compiling.compile_seconds() - k0), 0.0)
    memory.MemorySystem.advance = timed_advance
    from archsim.npu import load_npu_config, schedule_gemm
    from archsim.npu.systolic import overlap_timeline

    out = {}
    # JIT / cache load: a tiny run compiles (or loads) the channel kernel
    t0 = time.perf_counter()
    api.run({"system": "neupims", "model": args.model, "layers": 1, "batch": 2, "refresh": False})
    out["jit_and_tiny_run_s"] = time.perf_counter() - t0

    cfg = load_npu_config("neupims_npu")
    t0 = time.perf_counter()
    tl = overlap_timeline(schedule_gemm(cfg, 8, 4096, 4096))
    out["gemm_8x4096x4096_s"] = time.perf_counter() - t0
    out["gemm_8x4096x4096_cycles"] = tl.total_cycles

    run = {"system": "neupims", "model": args.model, "batch": args.batch, "dataset": "sharegpt"}
    if args.layers:
        run["layers"] = args.layers
    if args.mapping:
        run["mapping"] = args.mapping
    if not args.no_iteration:
        iteration(api, run, kernel_cpu, out)

    if args.serving_iterations:
        srv = {"system": "neupims", "model": args.model, "mode": "serving", "batch": args.serving_batch,
               "requests": args.serving_batch, "max_iterations": args.serving_iterations, "dataset": "alpaca"}
        if args.serving_layers or args.layers:
            srv["layers"] = args.serving_layers or args.layers
        out["serving_layers"] = srv.get("layers", "all")
        t0 = time.perf_counter()
        cpu0 = time.process_time()
        try:
            s = api.run(srv)
            out["serving_iterations"] = s.stats["iterations"]
        except Exception as exc:   # max_iterations reached before every request finished: time what ran
            out["serving_note"] = str(exc)
        out["serving_wall_s"] = time.perf_counter() - t0
        out["serving_cpu_s"] = time.process_time() - cpu0
    out["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    print("| measurement | value |\n|---|---|")
    for k, v in out.items():
        print(f"| {k} | {v:,.3f} |" if isinstance(v, float) else f"| {k} | {v} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
