"""Exact multi-command steps (docs/channel-engine.md, "Runs"): the channel kernel's time with runs on and off in
one process, on the systems whose streams they serve, and the results of both (they must be equal).

Cases (each run with runs off, then on, then off, then on; the median of each side):
  * pimgpt: PIM-GPT decode of `--tokens` GPT-2 XL tokens with the op memo off (every op simulated on the stream
    kernel; the memo, on by default, leaves the kernel ~0.1 s per 64 tokens whatever it does);
  * pimgpt-refresh: the same with refresh on (runs stop before each refresh falls due);
  * neupims: NeuPIMs GPT3-7B decode, batch `--batch`, first `--layers` layer(s) (PIM stream beside the NPU's
    DMA requests: runs only while the DMA has nothing queued on a channel).

    .venv/bin/python benchmarks/bench_runs.py [--tokens 16] [--batch 64] [--layers 1] [--cases a,b] [--json FILE]

Reported per case and side: the kernel's CPU seconds (the thread's CPU time inside MemorySystem.advance,
compile excluded), the commands runs issued (their first command excluded), the simulated results.
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


def _cases(a) -> dict:
    return {
        "pimgpt": {"system": "pimgpt", "model": "gpt2-xl", "tokens": a.tokens, "memo": False},
        "pimgpt-refresh": {"system": "pimgpt", "model": "gpt2-xl", "tokens": a.tokens, "memo": False,
                           "refresh": True},
        "neupims": {"system": "neupims", "model": "gpt3-7b", "batch": a.batch, "dataset": "sharegpt",
                    "layers": a.layers},
    }


def _timing(stat: str) -> bool:
    """A stat that measures the simulator (wall or kernel seconds), not the simulated system."""
    return "wall" in stat or "kernel" in stat or stat.endswith("_per_s")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=16)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--cases", default="pimgpt,pimgpt-refresh,neupims")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)

    from archsim import api
    from archsim.engine import channel, compiling, memory

    made: list = []
    kernel_cpu = [0.0]
    advance, init = memory.MemorySystem.advance, memory.MemorySystem.__init__

    def timed_advance(self, *args, **kw):
        c0, k0 = time.thread_time(), compiling.compile_seconds()
        try:
            return advance(self, *args, **kw)
        finally:
            kernel_cpu[0] += max(time.thread_time() - c0 - (compiling.compile_seconds() - k0), 0.0)

    def noted_init(self, *args, **kw):
        init(self, *args, **kw)
        made.append(self)

    memory.MemorySystem.advance = timed_advance
    memory.MemorySystem.__init__ = noted_init
    cases = _cases(a)
    out: dict = {}
    for name in a.cases.split(","):
        run = cases[name]
        api.run(dict(run, **({"tokens": 1} if "tokens" in run else {"layers": 1, "batch": 2})))   # compile/load
        sides: dict = {"off": [], "on": []}
        for _ in range(a.rounds):
            for side in ("off", "on"):
                channel.set_runs(side == "on")
                made.clear()
                kernel_cpu[0] = 0.0
                r = api.run(run)
                sides[side].append({"kernel_cpu_s": kernel_cpu[0],
                                    "run_cmds": int(sum(int(m.S.run_cmds.sum()) for m in made)),
                                    "commands": int(sum(int(m.S.cmd_count.sum()) for m in made)),
                                    "stats": repr({k: v for k, v in r.stats.items()       # (repr: nan == nan)
                                                   if isinstance(v, int | float) and not _timing(k)})})
        channel.set_runs(True)
        same = all(x["stats"] == sides["off"][0]["stats"] for x in sides["off"] + sides["on"])
        off = statistics.median(x["kernel_cpu_s"] for x in sides["off"])
        on = statistics.median(x["kernel_cpu_s"] for x in sides["on"])
        out[name] = {"run": run, "kernel_cpu_off_s": off, "kernel_cpu_on_s": on, "on_over_off": on / off,
                     "commands": sides["on"][0]["commands"], "run_cmds": sides["on"][0]["run_cmds"],
                     "results_same": same, "sides": sides}
    print("| case | kernel CPU s, runs off | runs on | on / off | commands | issued by runs | results |")
    print("|---|---|---|---|---|---|---|")
    for name, o in out.items():
        print(f"| {name} | {o['kernel_cpu_off_s']:.3f} | {o['kernel_cpu_on_s']:.3f} | {o['on_over_off']:.3f} | "
              f"{o['commands']:,} | {o['run_cmds']:,} | {'same' if o['results_same'] else 'DIFFER'} |")
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
