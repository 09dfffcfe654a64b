"""Trace-file parsing speed (archsim.dram.trace.read_trace) and the start-up time of the `archsim` process.

Generates text traces of N requests (default 2 M, 80 % reads) in the common formats, then times, best of K:

  read_s      read_trace(path): file read (+ gunzip) + parse, as `archsim trace FILE` calls it
  fast_s      the numba byte-level parser alone on the file's bytes (first call excluded: cache load)
  general_s   the general numpy parser alone on the same bytes (the fallback, and the only parser before)

and reports M lines/s for each. --startup also times `python -X importtime -c "import archsim.cli"`,
`archsim trace --help` and the imports a trace run needs, in fresh processes.

    .venv/bin/python benchmarks/bench_trace_parse.py [--requests N] [--repeat K] [--cases a,b] [--startup]
                                                     [--dir DIR] [--json FILE]
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SPAN_BYTES = 2 << 30
READ_FRACTION = 0.8


def _addresses(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    if kind == "random":
        return rng.integers(0, SPAN_BYTES // 64, size=n, dtype=np.uint64) * np.uint64(64)
    return np.arange(n, dtype=np.uint64) * np.uint64(64)


def _lines(case: str, n: int) -> bytes:
    """The text of case `case` with n requests (a few seconds for 2 M)."""
    rng = np.random.default_rng(0)
    fmt, kind, *extra = case.split("-")
    addr = _addresses(kind, n, rng).tolist()
    write = (rng.random(n) >= READ_FRACTION).tolist()
    if fmt == "ram":
        lines = [f"ST 0x{a:x}" if w else f"LD 0x{a:x}" for a, w in zip(addr, write, strict=True)]
        if "bubbles" in extra:  # a bubble count on a third of the lines
            bub = rng.integers(0, 20, size=n).tolist()
            has = (rng.random(n) < 1 / 3).tolist()
            lines = [f"{b} {line}" if h else line for b, h, line in zip(bub, has, lines, strict=True)]
    else:
        prefix = "" if "no0x" in extra else "0x"
        lines = [f"{prefix}{a:x} {'WRITE' if w else 'READ'} {2 * i}"
                 for i, (a, w) in enumerate(zip(addr, write, strict=True))]
    return ("\n".join(lines) + "\n").encode()


CASES = ["ram-stream", "ram-random", "ram-random-bubbles", "d3-stream", "d3-random", "d3-random-no0x",
         "ram-random-gz"]


def _best(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def bench_parse(cases: list[str], n: int, repeat: int, directory: Path) -> list[dict]:
    from archsim.dram import trace as T

    rows = []
    for case in cases:
        gz = case.endswith("-gz")
        base = case.removesuffix("-gz")
        path = directory / (f"{case}-{n}.trace" + (".gz" if gz else ""))
        if not path.exists():
            text = _lines(base, n)
            path.write_bytes(gzip.compress(text, 6) if gz else text)
        data = T._read_bytes(path, str(path))
        tr = T.read_trace(path)  # warm-up (numba cache load); also checks the fast path was taken
        assert len(tr) == n, (case, len(tr))
        row = {"case": case, "requests": n, "bytes": len(data), "parser": tr.parser}
        row["read_s"] = _best(lambda p=path: T.read_trace(p), repeat)
        row["fast_s"] = _best(lambda d=data: T._read_fast(d, "bench"), repeat)
        row["general_s"] = _best(lambda d=data: T._read_general(d, "bench"), repeat)
        for k in ("read", "fast", "general"):
            row[f"{k}_Mlines_s"] = n / row[f"{k}_s"] / 1e6
        rows.append(row)
        print(f"{case:20s} {len(data) / 1e6:6.1f} MB  parser={row['parser']:7s}  "
              f"read_trace {row['read_s']:.3f} s ({row['read_Mlines_s']:.1f} M lines/s)  "
              f"fast {row['fast_s']:.3f} s ({row['fast_Mlines_s']:.1f} M/s)  "
              f"general {row['general_s']:.3f} s ({row['general_Mlines_s']:.2f} M/s)", flush=True)
    return rows


def _run(cmd: list[str], repeat: int, env: dict | None = None) -> float:
    return _best(lambda: subprocess.run(cmd, check=True, capture_output=True, env=env), repeat)


def _import_ms(stmt: str) -> tuple[float, list[tuple[int, str]]]:
    """Cumulative import time (ms) of a fresh `python -X importtime -c stmt`, and the 8 costliest
    top-level imports."""
    err = subprocess.run([sys.executable, "-X", "importtime", "-c", stmt], check=True, capture_output=True,
                         text=True).stderr
    top = []
    for line in err.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit() and not parts[2].startswith("  "):
            top.append((int(parts[1]), parts[2].strip()))
    total = sum(us for us, _ in top) / 1e3
    return total, sorted(top, reverse=True)[:8]


def bench_startup(repeat: int) -> dict:
    from bench_dram import compile_bytecode  # (this script's folder is on sys.path)

    compile_bytecode()
    exe = Path(sys.executable).with_name("archsim")
    out = {}
    for label, stmt in [("import archsim.cli", "import archsim.cli"),
                        ("imports of a trace run",
                         "import archsim.cli, archsim.commands.trace, archsim.systems.dram_trace.system, archsim.dram.trace")]:
        ms, top = _import_ms(stmt)
        out[label] = ms
        print(f"{label:28s} {ms:7.1f} ms   largest: " + ", ".join(f"{name} {us / 1e3:.0f}" for us, name in top))
    out["archsim trace --help"] = _run([str(exe), "trace", "--help"], repeat) * 1e3
    print(f"{'archsim trace --help':28s} {out['archsim trace --help']:7.1f} ms (best of {repeat})")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=2_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, from {','.join(CASES)}")
    ap.add_argument("--startup", action="store_true", help="also time process start-up and imports")
    ap.add_argument("--dir", help="where the generated traces are kept (default: a new temporary directory)")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    cases = [c for c in args.cases.split(",") if c]
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        ap.error(f"unknown case {unknown[0]!r}; expected one of {', '.join(CASES)}")
    tmp = None
    if args.dir:
        directory = Path(args.dir)
        directory.mkdir(parents=True, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="archsim-bench-trace-")
        directory = Path(tmp.name)
    results: dict = {"cpu_count": os.cpu_count()}
    try:
        results["parse"] = bench_parse(cases, args.requests, args.repeat, directory)
        if args.startup:
            results["startup"] = bench_startup(args.repeat)
    finally:
        if tmp is not None:
            tmp.cleanup()
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
