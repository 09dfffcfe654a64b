"""Simulator speed of T3 (issue #12 target: one TP-8 T-NLG FC-2 sublayer, fused, all devices, cycle-accurate
memory, <= 60 s wall on the 2-core machine). Not a timed test.

Measures in one process: JIT/cache load of the channel kernel (a tiny run), then the fused T3 sublayer with
every device's memory simulated (`devices=all`), then the same with the one-device symmetry model, both on the
preset's exact driver, then the one-device run on the windowed driver (`--window`, 64 cycles; issue 34 made
the exact one the preset's), and prints wall times, simulated requests per wall second and the simulated
sublayer times.

Run: .venv/bin/python benchmarks/bench_t3.py [--tokens 1024] [--config t3] [--window 64] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import time


def main() -> None:
    from archsim.systems.t3.params import load_params
    from archsim.systems.t3.shapes import SublayerShape, sublayer_shape
    from archsim.systems.t3.sim import CONFIGS, simulate_sublayer
    from archsim.workload.spec import load_model

    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=1024)
    ap.add_argument("--config", default="t3", choices=CONFIGS)
    ap.add_argument("--window", type=int, default=64, help="the windowed driver's window for the last row (0: skip)")
    ap.add_argument("--json")
    args = ap.parse_args()
    params = load_params()
    t0 = time.perf_counter()
    simulate_sublayer(params, SublayerShape("warm", 128, 128, 512), 2, args.config)
    jit_s = time.perf_counter() - t0
    shape = sublayer_shape(load_model("t-nlg"), "fc2_fwd", 8, args.tokens)
    out = {"tokens": args.tokens, "config": args.config, "jit_and_warmup_s": jit_s}
    runs = [("all", "all", None), ("one", "one", None)]
    if args.window:
        runs.append((f"one, window {args.window}", "one", args.window))
    for name, devices, window in runs:
        t0 = time.perf_counter()
        run = simulate_sublayer(params, shape, 8, args.config, devices=devices, window_cycles=window)
        wall = time.perf_counter() - t0
        reqs = sum(ms.n_req for ms in run.memories)
        out[name] = {"wall_s": wall, "requests": reqs, "requests_per_s": reqs / wall,
                        "sublayer_us": run.sublayer_s * 1e6, "gemm_us": run.gemm_cycles * run.spec.tCK_s * 1e6,
                        "rs_end_us": run.rs_end_cycles * run.spec.tCK_s * 1e6}
    print("| devices | wall s | requests | K req/s | simulated sublayer us | GEMM us | RS end us |")
    print("|---|---|---|---|---|---|---|")
    for name, _, _ in runs:
        r = out[name]
        print(f"| {name} | {r['wall_s']:.1f} | {r['requests']} | {r['requests_per_s'] / 1e3:.0f} | "
              f"{r['sublayer_us']:.1f} | {r['gemm_us']:.1f} | {r['rs_end_us']:.1f} |")
    print(f"JIT / cache load and warm-up: {jit_s:.1f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
