"""`archsim rtl`: the Verilog control blocks in rtl/ - lint (Verilator), co-simulation tests (cocotb + Icarus,
the simulator's own classes as golden models) and synthesis statistics (Yosys cell counts, an area proxy)."""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

from archsim import paths
from archsim.errors import UserError


def _rtl_dir() -> Path:
    d = paths.REPO_ROOT / "rtl"
    if not d.is_dir():
        raise UserError("rtl/ not found: `archsim rtl` works in a checkout of the archsim repository")
    return d


def blocks() -> list[str]:
    """Top-level blocks: one module per rtl/*.v file, named like the file."""
    return sorted(p.stem for p in _rtl_dir().glob("*.v"))


def _pick(names: list[str] | None) -> list[str]:
    have = blocks()
    for n in names or []:
        if n not in have:
            raise UserError(f"rtl block {n!r}: not in rtl/; blocks: {', '.join(have)}")
    return list(names) if names else have


def _need(tool: str) -> str:
    exe = shutil.which(tool)
    if exe is None:
        raise UserError(f"{tool} is not on PATH; `make tools` installs it from the OS packages")
    return exe


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("rtl", help="RTL blocks in rtl/: lint, co-simulation tests, synthesis statistics",
                              description="The Verilog control blocks in rtl/ (one module per file).")
    p.set_defaults(func=lambda args: (p.print_help(), 0)[1])
    sub = p.add_subparsers(dest="rtl_command", metavar="ACTION")
    lint = sub.add_parser("lint", help="verilator --lint-only -Wall on each block")
    lint.add_argument("block", nargs="*", help="blocks (default: all)")
    lint.set_defaults(func=run_lint)
    test = sub.add_parser("test", help="the cocotb benches of the blocks (tests/rtl, Icarus), via pytest")
    test.add_argument("block", nargs="*", help="blocks (default: all)")
    test.add_argument("--slow", action="store_true", help="also the slow benches (e.g. mutation sweeps)")
    test.set_defaults(func=run_test)
    syn = sub.add_parser("synth", help="Yosys generic synthesis: cell counts per block (an area proxy)")
    syn.add_argument("block", nargs="*", help="blocks (default: all)")
    syn.add_argument("-o", "--out", metavar="DIR", help="also write DIR/README.md and DIR/synth.csv")
    syn.set_defaults(func=run_synth)


def run_lint(args: argparse.Namespace) -> int:
    exe = _need("verilator")
    rtl = _rtl_dir()
    bad = 0
    for b in _pick(args.block):
        proc = subprocess.run([exe, "--lint-only", "-Wall", f"-I{rtl / 'include'}", str(rtl / f"{b}.v")],
                              capture_output=True, text=True)
        ok = proc.returncode == 0
        print(f"{b:<24} {'clean' if ok else 'FAILED'}")
        if not ok:
            bad += 1
            sys.stdout.write(proc.stdout + proc.stderr)
    return 1 if bad else 0


def run_test(args: argparse.Namespace) -> int:
    _need("iverilog")
    tests = paths.REPO_ROOT / "tests" / "rtl"
    if not tests.is_dir():
        raise UserError("tests/rtl not found: `archsim rtl test` works in a checkout of the archsim repository")
    files = [tests / f"test_{b}.py" for b in _pick(args.block)]
    files = [str(f) for f in files if f.exists()]
    marker = "rtl" if args.slow else "rtl and not slow"
    cmd = [sys.executable, "-m", "pytest", "-q", "-m", marker, *(files or [str(tests)])]
    return subprocess.run(cmd, cwd=paths.REPO_ROOT).returncode


def synth_stats(block: str) -> dict[str, int]:
    """{"cells": n, "wires": n, "<cell type>": n, ...} of a generic Yosys synthesis of `block`."""
    exe = _need("yosys")
    rtl = _rtl_dir()
    script = f"read_verilog -I{rtl / 'include'} {rtl / f'{block}.v'}; synth -top {block}; stat"
    proc = subprocess.run([exe, "-q", "-p", script.replace("; stat", "; tee -q -o /dev/stdout stat")],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise UserError(f"yosys failed on rtl/{block}.v:\n{proc.stderr[-2000:]}")
    out: dict[str, int] = {}
    for line in proc.stdout.splitlines():
        m = re.match(r"\s+Number of (cells|wires):\s+(\d+)", line)
        if m:
            out[m.group(1)] = int(m.group(2))
        m = re.match(r"\s+(\$\S+)\s+(\d+)", line)
        if m:
            out[m.group(1)] = int(m.group(2))
    if "cells" not in out:
        raise UserError(f"yosys printed no statistics for rtl/{block}.v")
    return out


def run_synth(args: argparse.Namespace) -> int:
    from archsim.output import check_writable

    check_writable(args.out, folder=True)     # before minutes of synthesis
    rows = []
    for b in _pick(args.block):
        s = synth_stats(b)
        flops = sum(v for k, v in s.items() if "DFF" in k)
        rows.append({"block": b, "cells": s["cells"], "flip_flops": flops, "wires": s.get("wires", 0)})
        print(f"{b:<24} {s['cells']:>7} cells  {flops:>6} flip-flops  {s.get('wires', 0):>7} wires")
    if args.out:
        from archsim import __version__
        from archsim.results import atomic_write_text

        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        csv = "block,cells,flip_flops,wires\n" + "".join(
            f"{r['block']},{r['cells']},{r['flip_flops']},{r['wires']}\n" for r in rows)
        atomic_write_text(out / "synth.csv", csv)
        table = "\n".join(f"| `{r['block']}` | {r['cells']:,} | {r['flip_flops']:,} | {r['wires']:,} |" for r in rows)
        atomic_write_text(out / "README.md", (
            "# RTL blocks: synthesis statistics\n\n"
            f"Generated by `archsim rtl synth -o {args.out}` (archsim {__version__}): Yosys generic synthesis "
            "(`synth -top <block>`, no technology library), so cell counts are an area proxy for comparing "
            "blocks and versions, not gates of a real process. Parameters at their defaults (the GDDR6-AiM "
            "timing table for `pim_cmd_sequencer`; the NeuPIMs_HBM2_Dual table, dual mode, for "
            "`dual_rowbuf_arbiter`).\n\n"
            "| block | cells | flip-flops | wires |\n|---|---|---|---|\n" + table + "\n"))
        print(f"wrote {out / 'README.md'}")
    return 0
