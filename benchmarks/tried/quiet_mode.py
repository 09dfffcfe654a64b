"""The quiet-cycle skip (quiet_skip.patch) against the base, with the skip on and off in the patched tree: which part
of the patched kernel's time is the skip's work and which is its code being compiled into the kernel.

Each round runs three child processes in a rotating order: this checkout (the base), the patched tree with the skip
on, and the patched tree with it turned off by `channel.set_quiet(False)` (its code compiled in, never called). Each
child makes a warm-up run and then times the first 4 layers of NeuPIMs' GPT3-7B batch-512 iteration: the kernel's
CPU time (inside `MemorySystem.advance`, compile excluded) and the run's. Prints the medians and the per-round ratios.

    git worktree add /tmp/tried ecb3349 && git -C /tmp/tried apply benchmarks/tried/quiet_skip.patch
    .venv/bin/python benchmarks/tried/quiet_mode.py /tmp/tried [--rounds 10]

(Warm both trees first: the first run in a tree compiles its kernel, ~2 minutes.)
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_CHILD = r"""
import json, sys, time
from archsim.engine import channel, compiling, memory
if sys.argv[1] != "base":
    channel.set_quiet(sys.argv[1] == "on")
from archsim import api
made, kernel = [], [0.0]
real_init, real_advance = memory.MemorySystem.__init__, memory.MemorySystem.advance
def init(self, *a, **k):
    real_init(self, *a, **k)
    made.append(self)
def advance(self, *a, **k):
    c0, k0 = time.thread_time(), compiling.compile_seconds()
    try:
        return real_advance(self, *a, **k)
    finally:
        kernel[0] += max(time.thread_time() - c0 - (compiling.compile_seconds() - k0), 0.0)
memory.MemorySystem.__init__, memory.MemorySystem.advance = init, advance
api.run({"system": "neupims", "model": "gpt3-7b", "batch": 64, "layers": 1, "dataset": "sharegpt"})   # warm-up
made.clear()
kernel[0] = 0.0
c0 = time.process_time()
r = api.run({"system": "neupims", "model": "gpt3-7b", "batch": 512, "layers": 4, "dataset": "sharegpt"})
print(json.dumps({"run_cpu": time.process_time() - c0, "kernel_cpu": kernel[0],
                  "cycles": int(r.stats["simulated_cycles"]),
                  "skips": sum(int(m.S.quiet_skips.sum()) for m in made if hasattr(m.S, "quiet_skips"))}))
"""


def _run(tree: Path, mode: str) -> dict:
    out = subprocess.run([sys.executable, "-c", _CHILD, mode], cwd=tree, env=dict(os.environ, PYTHONPATH=str(tree)),
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("patched", type=Path, help="a tree with quiet_skip.patch applied")
    ap.add_argument("--rounds", type=int, default=10)
    args = ap.parse_args()
    trees = {"base": ROOT, "on": args.patched, "off": args.patched}
    rows: dict[str, list[dict]] = {m: [] for m in trees}
    orders = (("base", "on", "off"), ("on", "off", "base"), ("off", "base", "on"))
    for i in range(args.rounds):
        for mode in orders[i % 3]:
            rows[mode].append(_run(trees[mode], mode))
    if len({r["cycles"] for rs in rows.values() for r in rs}) != 1:
        sys.exit("quiet_mode.py: the runs simulated different cycles")
    for mode, rs in rows.items():
        k = [r["kernel_cpu"] for r in rs]
        print(f"{mode:4s} kernel CPU median {statistics.median(k):.2f} s ({min(k):.2f}-{max(k):.2f}), run CPU median "
              f"{statistics.median(r['run_cpu'] for r in rs):.2f} s, cycles skipped {rs[0]['skips']:,}")
    for a, b in (("off", "base"), ("on", "off"), ("on", "base")):
        ratios = sorted(x["kernel_cpu"] / y["kernel_cpu"] for x, y in zip(rows[a], rows[b], strict=True))
        print(f"kernel CPU {a} / {b}, per round: median {statistics.median(ratios):.3f} "
              f"({ratios[0]:.3f}-{ratios[-1]:.3f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
