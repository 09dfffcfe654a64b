"""Cold start (issue 26 item 1): a fresh clone's `make demo`, set-up included, with an empty numba cache.

Clones the repository at a commit into a temporary directory, then runs `make setup` and `make demo` there with
NUMBA_CACHE_DIR pointing at a new empty directory, and reports per phase the wall time and the CPU time (user +
system) of every process the phase started, background ones included: this process makes itself the
"subreaper" of its descendants (Linux prctl), so a process that `make setup` leaves running in the background
(the kernel warm-up, archsim/warm.py) is reaped, and counted, here. CPU time is the figure to compare on a
loaded machine; wall time is what a user waits on an idle one. uv gets a new empty cache too (UV_CACHE_DIR), so
every package is downloaded as on a fresh machine; pip's own cache (for a commit that installs with pip) is used
as it is.

`--first-runs` (issue 38 item 3): after `make demo`, wait for the set-up's background warm-up of the other
systems' kernels (its lock, .venv/warm-rest.lock), then run each system once, small, as a user's first run of it,
and report the seconds it spent compiling or loading channel kernels (its `sim_compile_s`), its wall and CPU time.

Run: .venv/bin/python benchmarks/bench_coldstart.py [--ref COMMIT] [--repeat N] [--keep DIR] [--first-runs]
                                                    [--json out.json]
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PR_SET_CHILD_SUBREAPER = 36


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _reap_orphans() -> None:
    """Wait for every descendant left running (reparented to this process as their subreaper)."""
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def _phase(cmd: list[str], cwd: Path, env: dict) -> dict:
    cpu0, t0 = _children_cpu(), time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return {"wall_s": wall, "cpu_s": _children_cpu() - cpu0, "stderr": proc.stderr}


# a small first run of every system: `archsim run` arguments
FIRST_RUNS: dict[str, list[str]] = {
    "pimgpt": ["--system", "pimgpt", "--model", "gpt2-small", "--tokens", "2"],
    "dram-trace": ["--system", "dram-trace", "--set", "trace.kind=random", "--set", "trace.requests=1000"],
    "neupims": ["--system", "neupims", "--set", "model=gpt3-small", "--set", "layers=1", "--batch", "2"],
    "npu_pim": ["--system", "npu_pim", "--set", "model=gpt3-small", "--set", "layers=1", "--batch", "2"],
    "npu_only": ["--system", "npu_only", "--set", "model=gpt3-small", "--set", "layers=1", "--batch", "2"],
    "gpu_only": ["--system", "gpu_only", "--set", "model=gpt3-small", "--set", "layers=1", "--batch", "2"],
    "duplex": ["--system", "duplex", "--set", "requests=2", "--set", "input_len=64", "--set", "output_len=2",
               "--set", "max_batch=2"],
    "t3": ["--system", "t3", "--set", "model=mega-gpt2", "--set", "sublayer=op_fwd", "--set", "tp=16",
           "--set", "tokens=256"],
    "gemm": ["--system", "gemm", "--set", "m=8", "--set", "k=16", "--set", "n=8", "--set", "memory=dram"],
}


def first_runs(clone: Path, env: dict) -> dict:
    """Each system's first run after the set-up's warm-ups: {system: {compile_s, wall_s, cpu_s}}."""
    py = str(clone / ".venv" / "bin" / "python")
    waited = _phase([py, "-m", "archsim.warm", "--wait", "--lock", ".venv/warm-rest.lock"], clone, env)
    out: dict = {"_warm_rest_wait_s": waited["wall_s"]}
    for name, args in FIRST_RUNS.items():
        result = clone / f"first-{name}.json"
        ph = _phase([str(clone / ".venv" / "bin" / "archsim"), "run", *args, "--quiet", "--json", str(result)],
                    clone, env)
        stats = json.loads(result.read_text())["stats"]
        out[name] = {"compile_s": stats.get("sim_compile_s", 0.0), "wall_s": ph["wall_s"], "cpu_s": ph["cpu_s"]}
        print(f"  first run of {name}: {out[name]['compile_s']:.1f} s compiling or loading kernels, "
              f"{ph['wall_s']:.1f} s wall, {ph['cpu_s']:.1f} s CPU", flush=True)
    return out


def cold_start(ref: str, work: Path, with_first_runs: bool = False) -> dict:
    clone = work / "clone"
    subprocess.run(["git", "clone", "--quiet", "--no-checkout", str(REPO), str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "checkout", "--quiet", ref], check=True)
    commit = subprocess.run(["git", "-C", str(clone), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, check=True).stdout.strip()
    env = dict(os.environ, NUMBA_CACHE_DIR=str(work / "numba-cache"), UV_CACHE_DIR=str(work / "uv-cache"))
    env.pop("VIRTUAL_ENV", None)
    cpu0, t0 = _children_cpu(), time.perf_counter()
    load0 = os.getloadavg()[0]
    setup = _phase(["make", "setup"], clone, env)
    demo = _phase(["make", "demo"], clone, env)
    total_wall = time.perf_counter() - t0
    _reap_orphans()                  # a background warm-up still running (it should not be) is counted too
    out = {"commit": commit, "setup_wall_s": setup["wall_s"], "setup_cpu_s": setup["cpu_s"],
           "demo_wall_s": demo["wall_s"], "demo_cpu_s": demo["cpu_s"], "total_wall_s": total_wall,
           "total_cpu_s": _children_cpu() - cpu0, "load_avg_1min_start": load0,
           "load_avg_1min_end": os.getloadavg()[0]}
    warm_log = clone / ".venv" / "warm.log"
    if warm_log.exists():
        out["warm_log"] = warm_log.read_text().strip().splitlines()[-1:]
    out["compile_notice_in_demo"] = "compiling the channel kernel" in demo["stderr"]
    if with_first_runs:
        out["first_runs"] = first_runs(clone, env)
    return out


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ref", default="HEAD", help="commit to clone (default HEAD of this checkout)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--keep", default=None, help="work in this directory (kept) instead of a temporary one")
    ap.add_argument("--json", dest="json_out", default=None)
    ap.add_argument("--first-runs", action="store_true",
                    help="then each system's first run after the background warm-up (issue 38 item 3)")
    a = ap.parse_args(argv)
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        print("warning: cannot become subreaper; background processes' CPU time is not counted", file=sys.stderr)
    runs = []
    for i in range(a.repeat):
        with tempfile.TemporaryDirectory(prefix="coldstart-", dir=a.keep) as tmp:
            r = cold_start(a.ref, Path(tmp), a.first_runs)
        runs.append(r)
        print(f"run {i + 1} ({r['commit']}): make setup {r['setup_wall_s']:.1f} s wall / {r['setup_cpu_s']:.1f} s CPU, "
              f"make demo {r['demo_wall_s']:.1f} s wall / {r['demo_cpu_s']:.1f} s CPU; total {r['total_wall_s']:.1f} s "
              f"wall, {r['total_cpu_s']:.1f} s CPU (load average {r['load_avg_1min_start']:.1f} -> "
              f"{r['load_avg_1min_end']:.1f}); compile notice in demo: {r['compile_notice_in_demo']}; "
              f"warm-up: {r.get('warm_log', ['-'])[0]}", flush=True)
    if a.json_out:
        Path(a.json_out).write_text(json.dumps(runs, indent=1))
    return runs


if __name__ == "__main__":
    main()
