"""Speed benchmark of the Duplex system (archsim.systems.duplex.system): one representative serving run.

Case (issue #11's target: <= 2 minutes wall): Mixtral 8x7B on 4 Duplex devices, 1,000 requests of
(L_in, L_out) = (4096, 512), closed loop, max batch 128, continuous batching over all 32 layers, Logic-PIM
operators timed on the channel engine (pim_timing engine).

    .venv/bin/python benchmarks/bench_duplex.py [--requests N] [--json FILE] [--pim-timing engine|roofline]

Reported: wall_s (whole run incl. request generation, compile of each distinct stage, engine simulations),
engine_wall_s (time inside the channel kernel), engine streams simulated, iterations, and the simulated
throughput / TBT so a speed change that alters results is visible.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--pim-timing", default="engine", choices=["engine", "roofline"])
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    from archsim.systems.duplex.system import DuplexRun

    cfg = {"model": "mixtral-8x7b", "device": "duplex", "requests": args.requests, "input_len": 4096,
           "output_len": 512, "max_batch": 128, "pim_timing": args.pim_timing}
    t0 = time.perf_counter()
    s = DuplexRun(cfg).run().stats
    wall = time.perf_counter() - t0
    out = {"case": "mixtral-8x7b duplex 4 devices (4096, 512) batch 128", "requests": args.requests,
           "pim_timing": args.pim_timing, "wall_s": round(wall, 2), "engine_wall_s": round(s["engine_wall_s"], 2),
           "engine_streams_simulated": s["engine_streams_simulated"], "iterations": s["iterations"],
           "throughput_tokens_per_s": round(s["throughput_tokens_per_s"], 1),
           "tbt_p50_ms": round(s["tbt_p50_s"] * 1e3, 3)}
    print(json.dumps(out, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
