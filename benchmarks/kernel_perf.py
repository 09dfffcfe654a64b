"""Where a NeuPIMs iteration's CPU samples fall inside the compiled channel kernel (issue 38): `perf record` over one
run, with the kernel's machine code named for perf.

numba loads a cached kernel as object code that perf cannot name (its samples show as bare JIT addresses). This
script runs the iteration under `perf record` with a hook that keeps every object numba loads and, at exit, writes
perf's map file (/tmp/perf-PID.map: each defined function's address and size, from `nm` on the object). It prints
the share of samples per function (numba's helpers are inlined into `advance`, so it is nearly all one function)
and, inside the kernel function, per 1 KiB block of its code, the hottest blocks first, with the cumulative share:
a flat tail says no one piece of the kernel dominates. The object of the kernel is kept (--keep DIR) for
`objdump -d --start-address=OFFSET` on a block.

Needs `perf` (linux-tools) with permission to sample this process. Run:
    .venv/bin/python benchmarks/kernel_perf.py [--layers 2] [--batch 512] [--blocks 15] [--keep DIR]
"""
from __future__ import annotations

import argparse
import bisect
import collections
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_CHILD = r"""
import atexit, os, subprocess, sys, tempfile
import numba.core.codegen as cg
keep = sys.argv[3]
objs = []
real = cg.CPUCodeLibrary._set_compiled_object
def record(self, value):
    objs.append((self, bytes(value)))
    return real(self, value)
cg.CPUCodeLibrary._set_compiled_object = record

def write_map():
    rows = []
    for i, (lib, data) in enumerate(objs):
        path = os.path.join(keep, f"object{i}.o")
        with open(path, "wb") as f:
            f.write(data)
        syms = []
        for ln in subprocess.run(["nm", "-S", "--defined-only", path], capture_output=True, text=True).stdout.splitlines():
            p = ln.split()
            if len(p) == 4 and p[2] in "tT":
                syms.append((int(p[0], 16), int(p[1], 16), p[3]))
        base = None
        for value, size, name in syms:
            try:
                addr = lib.get_pointer_to_function(name)
            except Exception:
                addr = 0
            if addr:
                base = addr - value
                break
        if base is None:
            continue
        rows += [(base + value, size, name, path, value) for value, size, name in syms]
    with open(f"/tmp/perf-{os.getpid()}.map", "w") as f:
        for addr, size, name, _, _ in sorted(rows):
            f.write(f"{addr:x} {size:x} {name[:200]}\n")
    with open(os.path.join(keep, "symbols.tsv"), "w") as f:
        for addr, size, name, path, value in sorted(rows):
            f.write(f"{addr}\t{size}\t{name}\t{path}\t{value}\n")
atexit.register(write_map)

from archsim import api
api.run({"system": "neupims", "model": "gpt3-7b", "layers": 1, "batch": 2, "refresh": False})   # cached kernels
api.run({"system": "neupims", "model": "gpt3-7b", "batch": int(sys.argv[1]), "layers": int(sys.argv[2]),
         "dataset": "sharegpt"})
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--blocks", type=int, default=15, help="hottest 1 KiB blocks of the kernel to list")
    ap.add_argument("--keep", default=None, help="directory to keep the kernel's object code and symbols in")
    args = ap.parse_args()
    if shutil.which("perf") is None:
        sys.exit("kernel_perf.py: `perf` is not installed (linux-tools)")
    keep = Path(args.keep or tempfile.mkdtemp(prefix="archsim-perf-"))
    keep.mkdir(parents=True, exist_ok=True)
    data = keep / "perf.data"
    subprocess.run(["perf", "record", "-q", "-F", "1999", "-o", str(data), sys.executable, "-c", _CHILD,
                    str(args.batch), str(args.layers), str(keep)], check=True, cwd=ROOT)
    syms = []
    for ln in (keep / "symbols.tsv").read_text().splitlines():
        addr, size, name, path, value = ln.split("\t")
        syms.append((int(addr), int(size), name, path, int(value)))
    ips = [int(x.split()[0], 16) for x in subprocess.run(
        ["perf", "script", "-i", str(data), "-F", "ip"], capture_output=True, text=True, check=True).stdout.split("\n")
        if x.strip()]
    per_sym = collections.Counter()
    kernel = max((s for s in syms if "7channel7advance" in s[2] and not s[2].startswith("_ZN7cpython")),
                 key=lambda s: s[1])
    blocks = collections.Counter()
    starts = sorted(syms)
    keys = [s[0] for s in starts]
    for ip in ips:
        i = bisect.bisect_right(keys, ip) - 1
        if i >= 0 and starts[i][0] <= ip < starts[i][0] + starts[i][1]:
            per_sym[starts[i][2]] += 1
            if starts[i] == kernel:
                blocks[(ip - kernel[0] + kernel[4]) // 1024] += 1
        else:
            per_sym["(not the JIT code: Python, numpy, the OS)"] += 1
    total = len(ips)
    print(f"NeuPIMs GPT3-7B batch {args.batch}, {args.layers} layers: {total:,} samples at 1999 Hz")
    print("| function | share |\n|---|---|")
    for name, n in per_sym.most_common(6):
        short = "channel kernel `advance`" if name == kernel[2] else name[:70]
        print(f"| {short} | {100 * n / total:.1f} % |")
    n_kernel = per_sym[kernel[2]]
    print(f"\nInside the kernel ({kernel[1]:,} bytes of code; offsets in {kernel[3]}): its hottest 1 KiB blocks")
    print("| block (offset) | share of the kernel's samples | cumulative |\n|---|---|---|")
    acc = 0
    for blk, n in blocks.most_common(args.blocks):
        acc += n
        print(f"| {blk * 1024:#x} | {100 * n / n_kernel:.1f} % | {100 * acc / n_kernel:.1f} % |")
    print(f"\n{len(blocks)} blocks hold samples; object code and symbols kept in {keep}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
