"""Parallel speed-up of `archsim sweep`: a CPU-bound sweep run with --jobs 1 and --jobs N.

    .venv/bin/python benchmarks/bench_sweep.py [--points 8] [--work-s 1.0] [--jobs 1 2]

Each point burns --work-s seconds of *CPU time* (the toy-roofline system from tests/sweep_fixtures.py), so
the speed-up measures real parallel work, including pool start-up and storing results. Target: >= 1.7x
with 2 jobs on 2 idle cores. Other load on the machine lowers the figure; the script prints the load average.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import sweep_fixtures  # noqa: E402,F401  (registers toy-roofline)
from sweep_fixtures import write_sweep  # noqa: E402

from archsim.sweep import load_results, run_sweep  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=8)
    ap.add_argument("--work-s", type=float, default=1.0, help="CPU seconds per point")
    ap.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    args = ap.parse_args(argv)

    body = {
        "name": "bench",
        "imports": ["sweep_fixtures"],
        "base": {"system": "toy-roofline", "work_s": args.work_s},
        "axes": [{"grid": {"gemv.rows": [256 * (i + 1) for i in range(args.points)]}}],
    }
    print(f"{args.points} points x {args.work_s:.2f} CPU s; {os.cpu_count()} CPUs; "
          f"load average {os.getloadavg()[0]:.2f}")
    walls: dict[int, float] = {}
    tables = []
    with tempfile.TemporaryDirectory() as tmp:
        path = write_sweep(tmp, body)
        for jobs in args.jobs:
            out = Path(tmp) / f"jobs{jobs}"
            t0 = time.perf_counter()
            outcome = run_sweep(path, out, jobs=jobs, progress=False)
            walls[jobs] = time.perf_counter() - t0
            assert outcome.succeeded == args.points and not outcome.failed
            tables.append(load_results(out)[0].drop(columns=["result.wall_s"], errors="ignore"))
            ideal = args.points * args.work_s / min(jobs, args.points)
            print(f"  --jobs {jobs}: {walls[jobs]:6.2f} s wall (ideal {ideal:.2f} s)")
    assert all(t.equals(tables[0]) for t in tables), "results differ between job counts"
    base = walls[args.jobs[0]]
    for jobs in args.jobs[1:]:
        print(f"speed-up --jobs {jobs} vs --jobs {args.jobs[0]}: {base / walls[jobs]:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
