"""Instruction mix of the compiled channel kernel (the `lean` variant every trace run takes).

Compiles the kernel in a child process with an empty numba cache (numba can only show the machine code of a
function it compiled in this process), takes the assembly of `advance` for the lean variant's signature and
counts, inside the kernel function itself (not numba's Python wrapper): instructions, instructions that touch
the stack (`(%rsp)`: values LLVM could not keep in registers), integer multiplies (index arithmetic of
multi-dimensional arrays) and `sar $63` sign masks (the form LLVM gives numba's negative-index wrap-around).

    .venv/bin/python benchmarks/kernel_asm.py [--wrap]

--wrap compiles with numba's wrap-around left on (archsim/engine/nowrap.py not applied), for comparison.
Takes ~1 minute (one cold compile).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_CHILD = r"""
import json, re, sys
import numba
from archsim.engine import channel, nowrap
if sys.argv[1] == "wrap":
    nowrap._TAGS.clear()                 # (after channel registered itself) numba's own index fix-up everywhere
from archsim.systems.dram_trace.system import run_trace
run_trace({"kind": "random", "requests": 64}, preset="HBM2_2Gbps_PC", channels=8)
lean = channel._VARIANT_DTYPES[channel.KERNEL_VARIANTS.index("lean")]      # State.variant's dtype names the variant
asm = next(a for sig, a in channel.advance.inspect_asm().items() if dict(zip(sig[0].fields, sig[0].types))["variant"].dtype == numba.from_dtype(lean))
asm = asm.splitlines()
start = next(i for i, ln in enumerate(asm) if re.match(r"^_ZN7archsim6engine7channel7advance", ln))
end = next(i for i, ln in enumerate(asm) if i > start and re.match(r"^_ZN7cpython", ln))
body = [ln for ln in asm[start:end] if re.match(r"^\s+[a-z]", ln)]
print(json.dumps({
    "instructions": len(body),
    "stack_operands": sum("(%rsp)" in ln for ln in body),
    "imul": sum(bool(re.match(r"^\s+imul", ln)) for ln in body),
    "sign_masks": sum(bool(re.match(r"^\s+sarq\s+\$63", ln)) for ln in body),
}))
"""


def measure(wrap: bool) -> dict:
    with tempfile.TemporaryDirectory(prefix="archsim-asm-cache-") as d:
        env = {**os.environ, "NUMBA_CACHE_DIR": d}
        res = subprocess.run([sys.executable, "-c", _CHILD, "wrap" if wrap else "nowrap"], capture_output=True,
                             text=True, env=env, cwd=str(ROOT))
    if res.returncode != 0:
        raise SystemExit(res.stderr)
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wrap", action="store_true", help="compile with numba's negative-index wrap-around")
    args = ap.parse_args()
    got = measure(args.wrap)
    print(f"lean channel kernel ({'with' if args.wrap else 'without'} wrap-around):")
    for k, v in got.items():
        print(f"  {k:16s} {v:6d}")


if __name__ == "__main__":
    main()
