"""Whole-process speed of `archsim trace` beside the reference simulators it reproduces, on the same trace files.

For HBM2 (eight 128-bit channels) random and stream traces (reports/dram_fidelity/run_cases.py's generator: 80 %
reads, 64-B lines over 4 GiB, seed 0), at each request count, times as a user runs them (a fresh process each,
interpreter start-up, trace parsing and exit included; CPU = user + system of the child, from wait4):

  * DRAMsim3 (its HBM2_8Gb_x128.ini, reports/dram_fidelity/dramsim3_driver.cc run on the DRAMsim3 trace file)
    beside `archsim trace` on that file with DRAMsim3's device and layout under
    `--set controller.convention=dramsim3` (case dramsim3-KIND-N), and with archsim's default controller
    (case default@dramsim3-KIND-N);
  * Ramulator 2.1 (run_cases.py's Python driver: HBM12 controller, FRFCFS, its LoadStoreTrace front end) beside
    `archsim trace` on the Ramulator trace file with Ramulator's device and layout under
    `--set controller.convention=ramulator2` (case ramulator2-KIND-N), and with the default controller
    (case default@ramulator2-KIND-N).

Each archsim run and its reference run alternate (A B A B ...; `--repeat` pairs) and every ratio is taken pair by
pair (reference time / archsim time: above 1, archsim is faster), then the median. Both simulators' cycles are
recorded; under a convention they must agree within the fidelity report's tolerance (make_report.TOL_CYCLES).

The references are built outside this repository (reports/dram_fidelity/README.md); this benchmark only runs them,
from the directories given (or the environment variables ARCHSIM_DRAMSIM3, ARCHSIM_RAMULATOR2 and
ARCHSIM_RAMULATOR2_PYTHON). A reference not given, or not built there, is skipped with a line saying so, and its
cases are recorded as skipped (no figure).

    .venv/bin/python benchmarks/bench_vs_reference.py [--requests 200000,2000000] [--kinds random,stream]
        [--repeat 3] [--dramsim3 DIR] [--ramulator2 DIR --ramulator2-python PY] [--dir DIR]
        [--json FILE] [--csv FILE]
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIDELITY = ROOT / "reports" / "dram_fidelity"
for p in (ROOT, ROOT / "benchmarks", FIDELITY):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import run_cases  # noqa: E402  (the fidelity cases' devices, traces and reference drivers: one source)
from bench_dram import compile_bytecode  # noqa: E402

DEVICE = "HBM2 8ch"
KINDS = ("random", "stream")


def archsim_command(reference: str, trace: Path, convention: str | None, json_out: Path) -> list[str]:
    """`archsim trace` on the reference's device, layout and trace file (run_cases.py's, as the fidelity report
    runs it), under `convention` (None: archsim's default controller)."""
    dev = run_cases.DEVICES[DEVICE]
    if reference == "dramsim3":
        preset, overrides = run_cases.D3_DEVICE[DEVICE]
        mapping = run_cases.D3_MAPPING[DEVICE]
    else:
        preset, overrides = dev["preset_ramulator2"], dev["overrides"]
        mapping = run_cases.ram_mapping(dev)
    cmd = [str(Path(sys.executable).with_name("archsim")), "trace", str(trace), "--quiet", "--preset", preset,
           "--channels", str(dev["channels"]), "--address-mapping", mapping, "--json", str(json_out)]
    for key, value in overrides.items():
        cmd += ["--set", f"dram.{key}={value}"]
    if convention:
        cmd += ["--set", f"controller.convention={convention}"]
    return cmd


def timed(cmd: list[str], env: dict | None = None) -> tuple[float, float, str]:
    """(wall s, CPU s = user + system, stdout) of one child process, reaped by wait4 for its own usage."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=str(ROOT))
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        code = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if code != 0:
            raise SystemExit(f"{' '.join(cmd)} failed (exit {code}):\n{err.read().decode()[-3000:]}")
        return wall, ru.ru_utime + ru.ru_stime, out.read().decode()


class DRAMsim3:
    """DRAMsim3 through the fidelity report's driver (compiled against its library, once, into `work`)."""
    name = "dramsim3"

    def __init__(self, root: Path, work: Path):
        self.exe = run_cases.build_dramsim3_driver(root, work)
        self.config = run_cases.dramsim3_config(run_cases.DEVICES[DEVICE], root, work)
        self.stats = work / "dramsim3_stats"
        self.stats.mkdir(exist_ok=True)

    def command(self, traces: dict[str, Path]) -> tuple[list[str], dict | None]:
        return [str(self.exe), str(self.config), str(traces["dramsim3"]), str(self.stats)], None

    @staticmethod
    def cycles(stdout: str) -> int:
        return int(json.loads(stdout.strip().splitlines()[-1])["end_cycle"])


class Ramulator2:
    """Ramulator 2.1 through run_cases.py's Python driver (its `python` must import the built module)."""
    name = "ramulator2"

    def __init__(self, root: Path, python: str):
        self.root, self.python = root, python
        self.dev = run_cases.DEVICES[DEVICE]

    def command(self, traces: dict[str, Path]) -> tuple[list[str], dict | None]:
        cfg = {**self.dev["ram"], "trace": str(traces["ramulator"])}
        env = {**os.environ, "PYTHONPATH": str(self.root / "python")}
        return [self.python, "-c", run_cases.RAM_DRIVER, json.dumps(cfg)], env

    def cycles(self, stdout: str) -> int:
        stats = json.loads(stdout.strip().splitlines()[-1])["stats"]
        ticks = max(c["cycles"] for c in run_cases.ramulator_controller_stats(stats))
        return int(ticks // self.dev.get("ticks_per_cycle", 1))


def references(args: argparse.Namespace, work: Path) -> tuple[list, list[str]]:
    """The references found at the given paths, and a line for each one skipped."""
    found, skipped = [], []
    if not args.dramsim3:
        skipped.append("DRAMsim3 skipped: no --dramsim3 DIR (or ARCHSIM_DRAMSIM3)")
    elif not (Path(args.dramsim3) / "libdramsim3.so").is_file():
        skipped.append(f"DRAMsim3 skipped: {args.dramsim3} has no built libdramsim3.so")
    else:
        found.append(DRAMsim3(Path(args.dramsim3), work))
    if not args.ramulator2:
        skipped.append("Ramulator 2.1 skipped: no --ramulator2 DIR (or ARCHSIM_RAMULATOR2)")
    else:
        probe = subprocess.run([args.ramulator2_python, "-c", "import ramulator"], capture_output=True,
                               env={**os.environ, "PYTHONPATH": str(Path(args.ramulator2) / "python")})
        if probe.returncode != 0:
            skipped.append(f"Ramulator 2.1 skipped: {args.ramulator2_python} cannot import ramulator from "
                           f"{args.ramulator2}/python")
        else:
            found.append(Ramulator2(Path(args.ramulator2), args.ramulator2_python))
    return found, skipped


def run_pair(ref, convention: str | None, kind: str, requests: int, traces: dict[str, Path], repeat: int,
             work: Path) -> dict:
    """archsim (under `convention`, None the default controller) and the reference in turns, `repeat` pairs."""
    trace = traces["dramsim3" if ref.name == "dramsim3" else "ramulator"]
    a_json = work / f"archsim-{ref.name}-{convention}-{kind}-{requests}.json"
    a_cmd = archsim_command(ref.name, trace, convention, a_json)
    r_cmd, r_env = ref.command(traces)
    timed(a_cmd)                        # warm-up: numba's cache loaded, the trace file in the page cache
    a_runs, r_runs, r_cycles = [], [], None
    for _ in range(repeat):
        a_runs.append(timed(a_cmd)[:2])
        wall, cpu, out = timed(r_cmd, r_env)
        r_runs.append((wall, cpu))
        r_cycles = ref.cycles(out)
    a_cycles = int(json.loads(a_json.read_text())["stats"]["cycles"])
    tag = convention or "default@" + ref.name
    from make_report import TOL_CYCLES

    rec = {
        "case": f"{tag}-{kind}-{requests // 1000}K" if requests < 1_000_000 else f"{tag}-{kind}-{requests // 10**6}M",
        "reference": ref.name, "controller": convention or "default", "kind": kind, "requests": requests,
        "repeat": repeat, "archsim_command": " ".join(a_cmd), "reference_command": " ".join(r_cmd[:2]) + " ...",
        "archsim_wall_s": statistics.median(r[0] for r in a_runs), "archsim_cpu_s": statistics.median(r[1] for r in a_runs),
        "reference_wall_s": statistics.median(r[0] for r in r_runs),
        "reference_cpu_s": statistics.median(r[1] for r in r_runs),
        "cpu_ratio": statistics.median(r[1] / a[1] for a, r in zip(a_runs, r_runs, strict=True)),
        "wall_ratio": statistics.median(r[0] / a[0] for a, r in zip(a_runs, r_runs, strict=True)),
        "archsim_cpu_s_all": [a[1] for a in a_runs], "reference_cpu_s_all": [r[1] for r in r_runs],
        "archsim_cycles": a_cycles, "reference_cycles": r_cycles,
        "cycles_error": a_cycles / r_cycles - 1,
    }
    # (the default controller is not meant to match the reference: its cycles are context)
    rec["cycles_agree"] = abs(rec["cycles_error"]) <= TOL_CYCLES if convention else None
    return rec


COLUMNS = ["case", "archsim_cpu_s", "reference_cpu_s", "cpu_ratio", "archsim_wall_s", "reference_wall_s",
           "wall_ratio", "archsim_cycles", "reference_cycles", "cycles_error", "cycles_agree"]


def table(rows: list[dict], load: tuple[float, float, float]) -> str:
    head = ["case", "archsim CPU s", "reference CPU s", "CPU ratio", "archsim wall s", "reference wall s",
            "wall ratio", "archsim cycles", "reference cycles", "cycles error"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        lines.append("| " + " | ".join([
            r["case"], f"{r['archsim_cpu_s']:.2f}", f"{r['reference_cpu_s']:.2f}", f"{r['cpu_ratio']:.2f}x",
            f"{r['archsim_wall_s']:.2f}", f"{r['reference_wall_s']:.2f}", f"{r['wall_ratio']:.2f}x",
            f"{r['archsim_cycles']:,}", f"{r['reference_cycles']:,}", f"{100 * r['cycles_error']:+.2f} %"]) + " |")
    lines += ["", f"Load average before the runs (1, 5, 15 min): {load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f} on "
              f"{os.cpu_count()} CPUs. Ratio: the reference's time / archsim's, per pair, median."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", default="200000,2000000", help="comma-separated request counts")
    ap.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated subset of {', '.join(KINDS)}")
    ap.add_argument("--repeat", type=int, default=3, help="timed pairs per case (after one warm-up run)")
    ap.add_argument("--dramsim3", default=os.environ.get("ARCHSIM_DRAMSIM3"),
                    help="DRAMsim3 source tree with its built libdramsim3.so (env ARCHSIM_DRAMSIM3)")
    ap.add_argument("--ramulator2", default=os.environ.get("ARCHSIM_RAMULATOR2"),
                    help="Ramulator 2.1 source tree with its built Python module (env ARCHSIM_RAMULATOR2)")
    ap.add_argument("--ramulator2-python", default=os.environ.get("ARCHSIM_RAMULATOR2_PYTHON", sys.executable),
                    help="a Python that imports Ramulator 2.1 (env ARCHSIM_RAMULATOR2_PYTHON)")
    ap.add_argument("--controllers", default="convention,default",
                    help="archsim controllers to run beside each reference: convention (the reference's), default")
    ap.add_argument("--dir", help="keep the traces and the DRAMsim3 driver here (default: a temporary directory)")
    ap.add_argument("--json", metavar="FILE", help="write the cases as JSON")
    ap.add_argument("--csv", metavar="FILE", help="write the cases as CSV")
    args = ap.parse_args(argv)
    kinds = args.kinds.split(",")
    if set(kinds) - set(KINDS):
        ap.error(f"--kinds: unknown {sorted(set(kinds) - set(KINDS))}; allowed: {', '.join(KINDS)}")
    controllers = args.controllers.split(",")
    if set(controllers) - {"convention", "default"}:
        ap.error(f"--controllers: unknown {sorted(set(controllers) - {'convention', 'default'})}; allowed: "
                 "convention, default")
    load = os.getloadavg()
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="archsim-bench-vs-ref-") as tmp:
        work = Path(args.dir) if args.dir else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        refs, skipped = references(args, work)
        for line in skipped:
            print(line, file=sys.stderr, flush=True)
        compile_bytecode(ROOT)
        for requests in (int(n) for n in args.requests.split(",")):
            traces = run_cases.write_traces(work, requests, seed=0)
            for kind in kinds:
                for ref in refs:
                    for ctrl in controllers:
                        rec = run_pair(ref, ref.name if ctrl == "convention" else None, kind, requests,
                                       traces[kind], args.repeat, work)
                        rows.append(rec)
                        print(f"{rec['case']}: archsim CPU {rec['archsim_cpu_s']:.2f} s, {ref.name} "
                              f"{rec['reference_cpu_s']:.2f} s ({rec['cpu_ratio']:.2f}x), cycles "
                              f"{rec['archsim_cycles']} / {rec['reference_cycles']}", file=sys.stderr, flush=True)
    print(table(rows, load))
    meta = {"loadavg": load, "cpu_count": os.cpu_count(), "skipped": skipped, "device": DEVICE}
    if args.json:
        Path(args.json).write_text(json.dumps({"cases": rows, **meta}, indent=2) + "\n")
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
            w.writeheader()
            w.writerows(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
