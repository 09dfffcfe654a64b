"""Where the channel kernel's steps go in a NeuPIMs iteration (issue 38): how many scheduling steps it takes for its
DRAM commands, how many of them issue nothing, and how much walking the deep-window scan does.

Copies this checkout's `archsim/` to a temporary directory, adds counters to the copy's kernel (textual edits at
named places of archsim/engine/channel.py and state.py; the script stops with the place's name if one is missing), compiles it
there in its own numba cache (a cold compile, 2-4 minutes), runs NeuPIMs' batch iteration (GPT3-7B, ShareGPT) on it
and prints the counts. The checkout itself is not touched; the counters change no result (the script checks the
simulated cycles and DRAM commands against an uncounted run of this checkout).

Counted:
* steps: `_step` calls (a channel stepped at a cycle), and commands issued (`_issue` calls, refresh included);
* steps that issued nothing, and of those the ones in the cycle right after the channel's previous issue;
* the ordered scan (`_rw_cands_ordered`): its calls, the (queue, class, group) lists it visits with entries, the
  lists none of whose entries is ready, and the entries it passes over as not ready (their cached cycle later).

Run: .venv/bin/python benchmarks/kernel_steps.py [--layers 2] [--batch 512]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# (file, place, old text, new text) in the copy; counters live in S.progress[2:4] (unused slots of an observer
# field), in S.run_cmds[0:6] (the runs' count: a NeuPIMs iteration has no runs, it stays 0) and in a field the copy
# adds, each channel's last cycle with an issue
EDITS = [
    ("state.py", "the runs' count field",
     """    F("run_cmds", I64, ("ch",), 0,""",
     """    F("last_issue", I64, ("ch",), -2, "observer", "(kernel_steps.py) the channel's last step with an issue"),
    F("run_cmds", I64, ("ch",), 0,"""),
    ("channel.py", "the ordered scan's group loop",
     """    for cls in range(2):
        best = INF
        for g in range(S.ord_n.shape[2]):
            n = S.ord_n[qi, cls, g]
            for kk in range(n):""",
     """    S.run_cmds[2] += 1
    for cls in range(2):
        best = INF
        for g in range(S.ord_n.shape[2]):
            n = S.ord_n[qi, cls, g]
            if n > 0:
                S.run_cmds[3] += 1
            none_ready = n > 0
            for kk in range(n):"""),
    ("channel.py", "the ordered scan's not-ready entry",
     """                if tc > clk:
                    # not ready: its timing was found later than now and timing only moves later
                    nxt = min(nxt, tc)
                    continue
                if ref_check:
                    if _ref_blocked(S, T, CF, ch, c, bl):
                        continue
                t = _earliest_coarse(S, T, ch, c, bl, coarse)""",
     """                if tc > clk:
                    # not ready: its timing was found later than now and timing only moves later
                    nxt = min(nxt, tc)
                    S.run_cmds[0] += 1
                    continue
                if ref_check:
                    if _ref_blocked(S, T, CF, ch, c, bl):
                        continue
                t = _earliest_coarse(S, T, ch, c, bl, coarse)"""),
    ("channel.py", "the ordered scan's ready entry",
     """                nxt = min(nxt, t)
                if t <= clk:
                    if S.cand_seq[q, b] < best:""",
     """                nxt = min(nxt, t)
                if t <= clk:
                    none_ready = False
                    if S.cand_seq[q, b] < best:"""),
    ("channel.py", "the ordered scan's end",
     """                    break
    out[8] = nxt


@_call
def _update_dirty""",
     """                    break
            if none_ready:
                S.run_cmds[1] += 1
    out[8] = nxt


@_call
def _update_dirty"""),
    ("channel.py", "_issue's start",
     """    B = T.banks
    gb0 = ch * B
    # --- timing (forward form""",
     """    B = T.banks
    gb0 = ch * B
    S.progress[3] += 1
    # --- timing (forward form"""),
    ("channel.py", "advance's step call",
     """        for ch in range(nch):
            if S.wake[ch] <= clk:
                S.wake[ch] = _step(S, T, CF, ch, clk, cand, run_limit)""",
     """        for ch in range(nch):
            if S.wake[ch] <= clk:
                S.progress[2] += 1
                i0 = S.progress[3]
                S.wake[ch] = _step(S, T, CF, ch, clk, cand, run_limit)
                if S.progress[3] == i0:
                    S.run_cmds[4] += 1
                    if S.last_issue[ch] == clk - 1:
                        S.run_cmds[5] += 1
                else:
                    S.last_issue[ch] = clk"""),
]

_CHILD = r"""
import json, sys
from archsim import api
from archsim.engine import memory
made = []
real = memory.MemorySystem.__init__
def init(self, *a, **k):
    real(self, *a, **k)
    made.append(self)
memory.MemorySystem.__init__ = init
r = api.run({"system": "neupims", "model": "gpt3-7b", "batch": int(sys.argv[1]), "layers": int(sys.argv[2]),
             "dataset": "sharegpt"})
st = r.tables["stages"]
out = {"cycles": int(r.stats["simulated_cycles"]),
       "commands": int(sum(st[c].sum() for c in st.columns if c.startswith("n_")))}
if len(sys.argv) > 3:
    ms = max(made, key=lambda m: int(m.S.progress[3]))       # the iteration's device set (the one that issued)
    S = ms.S
    out.update(kernel=ms.kernel, channels=int(S.run_cmds.shape[0]), steps=int(S.progress[2]),
               issued=int(S.progress[3]), empty_steps=int(S.run_cmds[4]), empty_after_issue=int(S.run_cmds[5]),
               scans=int(S.run_cmds[2]), lists_visited=int(S.run_cmds[3]), lists_none_ready=int(S.run_cmds[1]),
               entries_not_ready=int(S.run_cmds[0]))
print(json.dumps(out))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=512)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="archsim-steps-") as tmp:
        shutil.copytree(ROOT / "archsim", Path(tmp) / "archsim",
                        ignore=shutil.ignore_patterns("__pycache__", "*.nbi", "*.nbc"))
        for entry in ROOT.iterdir():          # the data the package reads beside itself (mappings/, workloads/, ...)
            if entry.name not in ("archsim", ".git", ".venv"):
                (Path(tmp) / entry.name).symlink_to(entry)
        for name, place, old, new in EDITS:
            path = Path(tmp) / "archsim" / "engine" / name
            src = path.read_text()
            if src.count(old) != 1:
                sys.exit(f"kernel_steps.py: {place} is not where this script expects it in archsim/engine/{name} "
                         "(the kernel changed): update EDITS")
            path.write_text(src.replace(old, new))
        env = dict(os.environ, PYTHONPATH=tmp, NUMBA_CACHE_DIR=str(Path(tmp) / "numba"))
        run = [sys.executable, "-c", _CHILD, str(args.batch), str(args.layers)]
        child = subprocess.run(run + ["count"], env=env, cwd=tmp, capture_output=True, text=True)
        if child.returncode != 0:
            sys.exit(f"kernel_steps.py: the counted run failed:\n{child.stderr[-3000:]}")
        counted = json.loads(child.stdout.splitlines()[-1])
        if counted["steps"] == 0:
            sys.exit("kernel_steps.py: the counted copy did not run (no step counted)")
    plain = json.loads(subprocess.run(run, check=True, capture_output=True, text=True, cwd=ROOT,
                                      env=dict(os.environ, PYTHONPATH=str(ROOT))).stdout.splitlines()[-1])
    if (plain["cycles"], plain["commands"]) != (counted["cycles"], counted["commands"]):
        sys.exit(f"kernel_steps.py: the counted kernel simulated {counted['cycles']} cycles and "
                 f"{counted['commands']} commands, this checkout {plain['cycles']} and {plain['commands']}")
    c = counted
    rows = [("kernel variant", c["kernel"]), ("simulated cycles", c["cycles"]), ("DRAM commands", c["commands"]),
            ("channel steps", c["steps"]), ("commands issued (refresh included)", c["issued"]),
            ("steps that issued nothing", c["empty_steps"]),
            ("... in the cycle after the channel's previous issue", c["empty_after_issue"]),
            ("ordered scans", c["scans"]), ("lists visited (with entries)", c["lists_visited"]),
            ("... with no ready entry", c["lists_none_ready"]), ("entries passed over as not ready", c["entries_not_ready"])]
    print(f"NeuPIMs GPT3-7B batch {args.batch}, {args.layers} layers (ShareGPT), channel kernel counts")
    print("| count | value |\n|---|---|")
    for name, v in rows:
        print(f"| {name} | {v:,} |" if isinstance(v, int) else f"| {name} | {v} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
