"""reports/dram_trace_cycles/make_report.py -o DIR (issue 27 item 11): a run with small settings writes its
report where it is told and leaves the shipped reproduction alone."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import yaml

from archsim.sweep import run_sweep

ROOT = Path(__file__).resolve().parent.parent
REPORT = ROOT / "reports" / "dram_trace_cycles"


def test_make_report_writes_into_the_given_folder(tmp_path):
    body = yaml.safe_load((ROOT / "sweeps" / "dram_trace_cycles.yaml").read_text())
    body["base"]["trace"]["requests"] = 300                      # a small version of the shipped sweep
    body["axes"] = [{"points": [body["axes"][0]["points"][0]]},
                    {"grid": {"trace.kind": ["stream"], "controller.active_buffer": [False, True]}}]
    sweep = tmp_path / "small.yaml"
    sweep.write_text(yaml.safe_dump(body))
    assert run_sweep(sweep, tmp_path / "res", jobs=1, progress=False).succeeded == 2
    shipped = (REPORT / "README.md").read_bytes()
    spec = importlib.util.spec_from_file_location("dram_trace_cycles_report", REPORT / "make_report.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main([str(tmp_path / "res"), "-o", str(tmp_path / "out")])
    text = (tmp_path / "out" / "README.md").read_text()
    assert "DDR4_3200AA_x8_8Gb, 1 rank | stream" in text, text[:2000]
    assert (REPORT / "README.md").read_bytes() == shipped
