"""benchmarks/bench_vs_reference.py: archsim's command lines are the fidelity report's cases, and a reference that
is not there is skipped, saying so, with no figure recorded for it."""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_vs_reference as bench  # noqa: E402
import run_cases  # noqa: E402  (reports/dram_fidelity, put on the path by the benchmark)


def _value(cmd: list[str], flag: str) -> str:
    return cmd[cmd.index(flag) + 1]


def test_archsim_runs_the_reference_device_layout_and_convention(tmp_path):
    d3 = bench.archsim_command("dramsim3", tmp_path / "t.d3trace", "dramsim3", tmp_path / "o.json")
    assert _value(d3, "--preset") == run_cases.D3_DEVICE[bench.DEVICE][0]
    assert _value(d3, "--address-mapping") == run_cases.D3_MAPPING[bench.DEVICE]
    assert "controller.convention=dramsim3" in d3 and _value(d3, "--json") == str(tmp_path / "o.json")
    ram = bench.archsim_command("ramulator2", tmp_path / "t.trace", None, tmp_path / "o.json")
    dev = run_cases.DEVICES[bench.DEVICE]
    assert _value(ram, "--preset") == dev["preset_ramulator2"]
    assert _value(ram, "--address-mapping") == run_cases.ram_mapping(dev)
    assert not any(a.startswith("controller.convention") for a in ram)     # the default controller


def test_absent_references_are_skipped_and_say_so(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(bench, "compile_bytecode", lambda root: None)
    out = tmp_path / "out.json"
    code = bench.main(["--requests", "1000", "--kinds", "random", "--repeat", "1", "--dir", str(tmp_path),
                       "--dramsim3", str(tmp_path / "none"), "--ramulator2", str(tmp_path / "none"),
                       "--json", str(out)])
    assert code == 0
    data = json.loads(out.read_text())
    assert data["cases"] == []
    assert len(data["skipped"]) == 2 and all("skipped" in s for s in data["skipped"])
    err = capsys.readouterr().err
    assert "DRAMsim3 skipped" in err and "Ramulator 2.1 skipped" in err
