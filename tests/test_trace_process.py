"""Issue #38: what a whole `archsim trace` process does beyond the simulation: no pandas import for --json,
the named system's config only, and an exit without the interpreter's teardown that still delivers every
output."""
from __future__ import annotations

import json
import subprocess
import sys

CLI = [sys.executable, "-m", "archsim.cli"]


def test_trace_json_imports_neither_pandas_nor_other_systems(tmp_path):
    out = tmp_path / "r.json"
    code = ("import sys; from archsim.cli import main; rc = main(['trace', 'synthetic:stream:300', '--quiet', "
            f"'--json', {str(out)!r}, '--set', 'controller.row_policy=closed']); "
            "print(sorted(m for m in sys.modules if m == 'pandas' or m.startswith('archsim.systems.'))); "
            "sys.exit(rc)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = json.loads(p.stdout.strip().replace("'", '"'))
    assert "pandas" not in loaded
    assert loaded and all(m.startswith("archsim.systems.dram_trace") for m in loaded), loaded
    assert json.loads(out.read_text())["stats"]["requests"] == 300


def test_trace_process_output_complete_through_pipes(tmp_path):
    """The process ends with os._exit after the command: its summary, its JSON on standard output and its
    files are all there, and the exit code is the command's."""
    p = subprocess.run(CLI + ["trace", "synthetic:random:500"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.strip().splitlines()
    assert len(lines) > 5 and any("500" in line for line in lines)
    p = subprocess.run(CLI + ["trace", "synthetic:random:500", "--json", "-", "--csv", str(tmp_path / "t.csv")],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["stats"]["requests"] == 500
    assert len((tmp_path / "t.csv").read_text().splitlines()) == 2   # header + one channel
    bad = subprocess.run(CLI + ["trace", str(tmp_path / "missing.trace")], capture_output=True, text=True)
    assert bad.returncode == 2 and "trace file not found" in bad.stderr
