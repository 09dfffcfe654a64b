"""Interleaved before/after speed of the channel kernel: this checkout against a baseline checkout.

On this shared 2-core machine the same command's wall time moves 2-3x with other jobs' load, so a before/after
claim needs both sides run in turns (round 1 baseline first, round 2 this checkout first, ...) and CPU times
beside wall times. Each round runs, in a fresh process per side (`PYTHONPATH` and working directory = that
checkout; every benchmark script is this checkout's, copied into the baseline first, so both sides are measured
the same way):

  * bench_dram.py --_child CASE (one timed simulate_trace per case): the kernel's CPU and wall seconds;
  * bench_neupims.py --layers L --serving-iterations 0: one decode iteration's first L layers, the kernel's CPU;
  * bench_pimgpt.py (--pimgpt): GPT-2 XL tokens end to end, CPU seconds and the kernel's wall seconds.

Simulated cycles and commands are printed beside the times (they must be equal: a refactor moves no result).
The baseline keeps its own numba cache in its directory: make it once (`git worktree add DIR REV`, or
`git archive REV | tar -x -C DIR`) and reuse it, or its first round compiles every kernel variant it runs.

    .venv/bin/python benchmarks/before_after.py BASELINE_DIR [--rounds 3] [--cases hbm2-random,hbm2-stream,ddr4-random]
                                                [--requests 2000000] [--neupims-layers 1] [--pimgpt] [--json FILE]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run(side: Path, args: list[str], json_out: Path | None) -> dict:
    env = dict(os.environ, PYTHONPATH=str(side))
    res = subprocess.run([sys.executable, *args], cwd=str(side), env=env, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise SystemExit(f"{side}: {' '.join(args)} failed:\n{res.stdout[-2000:]}{res.stderr[-2000:]}")
    if json_out is not None:
        return json.loads(json_out.read_text())
    return json.loads(res.stdout.strip().splitlines()[-1])


# per benchmark: (figure name, key in its JSON) for times, then the results that must not move
FIGURES = {
    "dram": (("kernel CPU s", "kernel_cpu_s"), ("kernel wall s", "kernel_s")),
    "neupims": (("kernel CPU s", "iteration_kernel_cpu_s"), ("kernel wall s", "iteration_kernel_s")),
    "pimgpt": (("CPU s", "n_tokens_cpu_s"), ("kernel wall s", "kernel_s")),
}
RESULTS = {"dram": ("cycles", "commands"), "neupims": ("iteration_simulated_cycles", "iteration_dram_commands"),
           "pimgpt": ("commands_simulated", "sim_latency_per_token_s")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("baseline", type=Path, help="a checkout of the revision to compare with")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cases", default="hbm2-random,hbm2-stream,ddr4-random", help="bench_dram.py cases ('' none)")
    ap.add_argument("--requests", type=int, default=2_000_000)
    ap.add_argument("--neupims-layers", type=int, default=1, help="0 skips NeuPIMs")
    ap.add_argument("--pimgpt", action="store_true", help="also PIM-GPT decode (bench_pimgpt.py, 1024 tokens)")
    ap.add_argument("--json", metavar="FILE", help="also write every run's figures")
    a = ap.parse_args(argv)
    base = a.baseline.resolve()
    if not (base / "archsim").is_dir():
        ap.error(f"{base}: not an archsim checkout (no archsim/ directory)")
    if a.rounds < 1:
        ap.error("--rounds must be >= 1")
    shutil.copytree(ROOT / "benchmarks", base / "benchmarks", dirs_exist_ok=True)
    sides = {"before": base, "after": ROOT}
    jobs = [(f"dram {c}", "dram", ["benchmarks/bench_dram.py", "--_child", c, "--requests", str(a.requests),
                                    "--repeat", "1"], False) for c in a.cases.split(",") if c]
    if a.neupims_layers:
        jobs.append((f"neupims {a.neupims_layers} layer(s)", "neupims",
                     ["benchmarks/bench_neupims.py", "--layers", str(a.neupims_layers), "--serving-iterations", "0"],
                     True))
    if a.pimgpt:
        jobs.append(("pimgpt gpt2-xl 1024 tokens", "pimgpt", ["benchmarks/bench_pimgpt.py"], True))
    got: dict[str, dict[str, list[dict]]] = {name: {"before": [], "after": []} for name, *_ in jobs}
    with tempfile.TemporaryDirectory(prefix="archsim-before-after-") as tmp:
        for r in range(a.rounds):
            for name, _kind, args, wants_json in jobs:
                for side in (("before", "after") if r % 2 == 0 else ("after", "before")):
                    out = Path(tmp) / f"{side}.json"
                    extra = ["--json", str(out)] if wants_json else []
                    got[name][side].append(_run(sides[side], args + extra, out if wants_json else None))
                    print(f"round {r + 1}: {name}, {side} done", file=sys.stderr, flush=True)
    lines = ["| benchmark | figure | before (median) | after (median) | after / before | runs before | runs after |",
             "|---|---|---|---|---|---|---|"]
    for name, kind, _args, _ in jobs:
        runs = got[name]
        for label, key in FIGURES[kind]:
            b = [x[key] for x in runs["before"]]
            f = [x[key] for x in runs["after"]]
            mb, mf = statistics.median(b), statistics.median(f)
            lines.append(f"| {name} | {label} | {mb:.3f} | {mf:.3f} | {mf / mb:.3f} | "
                         f"{', '.join(f'{x:.3f}' for x in b)} | {', '.join(f'{x:.3f}' for x in f)} |")
        same = all(x[k] == runs["before"][0][k] for k in RESULTS[kind] for x in runs["before"] + runs["after"])
        lines.append(f"| {name} | results ({', '.join(RESULTS[kind])}) | "
                     f"{', '.join(str(runs['before'][0][k]) for k in RESULTS[kind])} | "
                     f"{'same' if same else 'DIFFER'} | | | |")
    print("\n".join(lines))
    if a.json:
        Path(a.json).write_text(json.dumps(got, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
