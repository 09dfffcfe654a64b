"""The threaded channel engine (issue 26 item 2): speed with 1 and 2 threads, synchronisation points per
simulated microsecond and the scaling they imply, on NeuPIMs, PIM-GPT, Duplex, T3 and an 8-channel trace.

    .venv/bin/python benchmarks/bench_threads.py [--repeat 3] [--cases neupims,pimgpt,...] [--json FILE]

Per case, runs with 1 and 2 threads alternate (1, 2, 1, 2, ...: the machine is shared and its load drifts);
each run is a fresh process-level simulation after a warm-up run that compiles/loads the kernels. Reported:
  wall_s, cpu_s   medians over the repeats (cpu_s: CPU time of the whole process, every thread);
  speed-up        wall(1 thread) / wall(2 threads);
  regions / syncs per simulated us: from a 2-thread run with regions allowed from 1 cycle and one-thread
                  spans of one cycle (archsim/engine/threads.py REGION_MIN = SERIAL_SPAN_MAX = 1): every
                  coupling cycle is then one synchronisation point (all threads meet), so this counts the
                  scheme's synchronisation points per microsecond of simulated memory time (summed over the
                  case's MemorySystems);
  parallel share  the share of channel-kernel work inside parallel regions: shard kernel seconds / (shard
                  kernel seconds + one-thread kernel seconds), in that run; Amdahl then bounds the speed-up at
                  N cores by 1 / ((1 - p) + p / N), before any synchronisation cost;
  us_per_region   wall of one region in that run (hand-off, slower shard, merge); handoff_us: one hand-off to a
                  worker thread and back with nothing to do, the floor of that cost.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _neupims():
    from archsim import api

    api.run({"system": "neupims", "layers": 2})


def _pimgpt():
    from archsim.systems.pimgpt.system import run_pimgpt

    run_pimgpt("gpt2-small", tokens=4, baselines=[])


def _duplex():
    from archsim.systems.duplex.system import DuplexRun

    DuplexRun({"model": "mixtral-8x7b", "device": "duplex", "requests": 8, "input_len": 256, "output_len": 16,
               "max_batch": 8, "pim_timing": "engine"}).run()


def _t3():
    from archsim.systems.t3.params import load_params
    from archsim.systems.t3.shapes import sublayer_shape
    from archsim.systems.t3.sim import simulate_sublayer
    from archsim.workload.spec import load_model

    shape = sublayer_shape(load_model("t-nlg"), "fc2_fwd", 8, 256)
    simulate_sublayer(load_params(), shape, 8, "t3", devices="one")


def _trace():
    from archsim.dram.controller import ControllerConfig
    from archsim.dram.spec import load_spec
    from archsim.dram.trace import synthetic_trace
    from archsim.systems.dram_trace.system import simulate_trace

    spec = load_spec("HBM2_2Gbps_PC")           # 8 pseudo-channels
    tr = synthetic_trace("random", 200_000, read_fraction=0.8, span_bytes=2 << 30, access_bytes=spec.access_bytes,
                         seed=0)
    simulate_trace(spec, ControllerConfig(mapping="RoBaRaCoCh"), tr.addr, tr.is_write, tr.arrive)


CASES = {
    "neupims": ("NeuPIMs GPT3-7B batch 512, 2 layers", _neupims),
    "pimgpt": ("PIM-GPT gpt2-small, 4 tokens", _pimgpt),
    "duplex": ("Duplex mixtral-8x7b, 8 requests (256, 16)", _duplex),
    "t3": ("T3 t-nlg fc2_fwd, 256 tokens, one device", _t3),
    "trace": ("HBM2 8-channel random trace, 200 k requests", _trace),
}


def _timed_run(fn, threads: int) -> tuple[float, float, dict]:
    from archsim.engine import threads as th

    th.set_threads(threads)
    before = dict(th.TOTALS)
    t0, c0 = time.perf_counter(), time.process_time()
    fn()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return wall, cpu, {k: th.TOTALS[k] - before[k] for k in th.TOTALS}


def _sync_run(fn) -> dict:
    """A 2-thread run in which every coupling cycle is a synchronisation point (see the module docstring)."""
    from archsim.engine import threads as th

    saved = th.REGION_MIN, th.SERIAL_SPAN_MAX
    th.REGION_MIN, th.SERIAL_SPAN_MAX = 1, 1
    try:
        return _timed_run(fn, 2)[2]
    finally:
        th.REGION_MIN, th.SERIAL_SPAN_MAX = saved


def handoff_us(n: int = 20_000) -> float:
    """Wall microseconds of one hand-off to a worker thread and back (ThreadPoolExecutor submit + result of a
    function that does nothing), the floor of a region's cost in the coordinator."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        pool.submit(int).result()
        t0 = time.perf_counter()
        for _ in range(n):
            pool.submit(int).result()
        return 1e6 * (time.perf_counter() - t0) / n


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--no-sync-run", action="store_true", help="skip the synchronisation-point count")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    out = {}
    for name in a.cases.split(","):
        label, fn = CASES[name]
        _timed_run(fn, 2)                         # compile / load both kernels, fill caches
        _timed_run(fn, 1)
        runs = {1: [], 2: []}
        for _ in range(a.repeat):
            for n in (1, 2):
                runs[n].append(_timed_run(fn, n))
        r = {"case": label}
        for n in (1, 2):
            r[f"wall_s_{n}"] = statistics.median(x[0] for x in runs[n])
            r[f"cpu_s_{n}"] = statistics.median(x[1] for x in runs[n])
        r["speedup_2"] = r["wall_s_1"] / r["wall_s_2"]
        d = runs[2][-1][2]                        # what the coordinator did in a timed 2-thread run
        r["timed_regions"] = d["regions"]
        r["timed_region_cycle_share"] = d["region_cycles"] / max(1, d["region_cycles"] + d["serial_cycles"])
        if not a.no_sync_run:
            s = _sync_run(fn)
            us = s["sim_ps"] / 1e6
            r["sim_us"] = us
            r["syncs_per_us"] = (s["regions"] + s["serial_calls"]) / us if us else float("nan")
            r["mean_region_cycles"] = s["region_cycles"] / max(1, s["regions"])
            # wall per region: threads' hand-off, the slowest shard and the merge
            r["us_per_region"] = 1e6 * s["region_s"] / max(1, s["regions"])
            r["merge_us_per_region"] = 1e6 * s["merge_s"] / max(1, s["regions"])
            p = s["shard_s"] / max(1e-12, s["shard_s"] + s["serial_s"])
            r["parallel_share"] = p
            for cores in (2, 16, 64):
                r[f"amdahl_{cores}"] = 1 / ((1 - p) + p / cores)
        out[name] = r
        print(json.dumps({name: r}), flush=True)
    out["handoff_us"] = handoff_us()
    print(f"\none hand-off to a worker thread and back: {out['handoff_us']:.1f} us")
    print()
    print("| case | wall 1 thr s | wall 2 thr s | speed-up | CPU 1 thr s | CPU 2 thr s | syncs / sim us | "
          "mean region cycles | parallel share | Amdahl 16 | Amdahl 64 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in (v for v in out.values() if isinstance(v, dict)):
        sync = (f"{r['syncs_per_us']:.0f} | {r['mean_region_cycles']:.1f} | {r['parallel_share']:.2f} | "
                f"{r['amdahl_16']:.2f} | {r['amdahl_64']:.2f}") if "syncs_per_us" in r else "- | - | - | - | -"
        print(f"| {r['case']} | {r['wall_s_1']:.2f} | {r['wall_s_2']:.2f} | {r['speedup_2']:.2f} | "
              f"{r['cpu_s_1']:.2f} | {r['cpu_s_2']:.2f} | {sync} |")
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1) + "\n")
    return out


if __name__ == "__main__":
    main()
