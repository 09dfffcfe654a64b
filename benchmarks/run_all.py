"""Run the speed benchmarks and print each figure beside its target (`make bench`; issue 26 item 4).

The targets live in benchmarks/targets.yaml (one place). Each benchmark runs once, as its own process, with
`--json` into a temporary file; a benchmark that fails is reported as such and the others still run.

    .venv/bin/python benchmarks/run_all.py [--only bench_t3.py,bench_duplex.py] [--json FILE]

Exit status: 0 when every benchmark ran (missed targets are reported, not errors: they are measurements), 1 when
one failed to run. The machine's load average is printed with the table: a loaded machine inflates wall times.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
_PICK = re.compile(r"^(\w+)\[(\w+)=([^\]]+)\]$")


def load_targets(path: Path = HERE / "targets.yaml") -> list[dict]:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def lookup(data: Any, at: str) -> Any:
    """The value at a dotted path; `name[key=value]` picks the entry of a list whose `key` is `value`."""
    for part in at.split("."):
        m = _PICK.match(part)
        if m:
            field, key, want = m.groups()
            data = next(e for e in data[field] if str(e.get(key)) == want)
        else:
            data = data[part]
    return data


def verdict(fig: dict, value: float | None) -> str:
    if value is None:
        return "not measured"
    if "max" in fig:
        return "met" if value <= fig["max"] else "NOT met"
    if "min" in fig:
        return "met" if value >= fig["min"] else "NOT met"
    return ""


def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "req/s":
        return f"{value / 1e6:.2f} M req/s"
    return f"{value:.3g} {unit}" if abs(value) < 1000 else f"{value:,.0f} {unit}"


def target_text(fig: dict) -> str:
    if "max" in fig:
        return "<= " + fmt(fig["max"], fig["unit"])
    if "min" in fig:
        return ">= " + fmt(fig["min"], fig["unit"])
    return ""


def run_bench(bench: dict, python: str) -> tuple[dict | None, float, str]:
    """(the benchmark's JSON or None, wall seconds, the tail of its stderr when it failed)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.json"
        cmd = [python, str(HERE / bench["script"]), *bench.get("args", []), "--json", str(out)]
        t0 = time.perf_counter()
        res = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        wall = time.perf_counter() - t0
        if res.returncode != 0 or not out.exists():
            return None, wall, "\n".join(res.stderr.strip().splitlines()[-3:])
        return json.loads(out.read_text(encoding="utf-8")), wall, ""


def rows_of(bench: dict, data: dict | None) -> list[dict]:
    rows = []
    for fig in bench["figures"]:
        try:
            value = float(lookup(data, fig["at"])) if data is not None else None
        except (KeyError, StopIteration, TypeError, ValueError):
            value = None
        rows.append({"benchmark": bench["script"], "figure": fig["name"], "value": value, "unit": fig["unit"],
                     "target": target_text(fig), "issue": fig.get("issue"), "verdict": verdict(fig, value)})
    return rows


def table(rows: list[dict]) -> str:
    lines = ["| figure | measured | target | issue | |", "|---|---|---|---|---|"]
    for r in rows:
        issue = f"#{r['issue']}" if r["issue"] else ""
        lines.append(f"| {r['figure']} | {fmt(r['value'], r['unit'])} | {r['target']} | {issue} | {r['verdict']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="comma-separated benchmark scripts (default: every one in targets.yaml)")
    ap.add_argument("--json", help="also write the rows here")
    a = ap.parse_args(argv)
    benches = load_targets()
    if a.only:
        want = set(a.only.split(","))
        unknown = want - {b["script"] for b in benches}
        if unknown:
            ap.error(f"--only: unknown {sorted(unknown)}; allowed: {[b['script'] for b in benches]}")
        benches = [b for b in benches if b["script"] in want]
    rows, failed = [], []
    for bench in benches:
        print(f"running {bench['script']} ...", file=sys.stderr, flush=True)
        data, wall, err = run_bench(bench, sys.executable)
        if data is None:
            failed.append(bench["script"])
            print(f"{bench['script']} failed after {wall:.0f} s:\n{err}", file=sys.stderr, flush=True)
        rows += rows_of(bench, data)
    print(table(rows))
    print(f"\nload average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
