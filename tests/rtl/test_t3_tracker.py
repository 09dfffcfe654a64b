"""RTL checks for the T3 tracker: cocotb co-simulation of rtl/t3_tracker.v against archsim's Tracker model
(Icarus), and Verilator lint at the default and the bench parameters."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
RTL = HERE.parents[1] / "rtl"
BENCH = {"ENTRIES": 4, "KEY_BITS": 5, "OVF_BITS": 3}

needs_iverilog = pytest.mark.skipif(shutil.which("iverilog") is None, reason="iverilog is not on PATH")
needs_verilator = pytest.mark.skipif(shutil.which("verilator") is None, reason="verilator is not on PATH")


@pytest.mark.rtl
@needs_iverilog
def test_tracker_matches_python_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cocotb_tools.runner import get_runner

    monkeypatch.syspath_prepend(str(HERE))
    runner = get_runner("icarus")
    build_dir = tmp_path / "sim_build"
    runner.build(sources=[RTL / "t3_tracker.v"], hdl_toplevel="t3_tracker", build_dir=build_dir, always=True,
                 parameters=BENCH, timescale=("1ns", "1ps"), log_file=tmp_path / "build.log")
    log = tmp_path / "sim.log"
    try:
        runner.test(hdl_toplevel="t3_tracker", test_module="tb_t3_tracker", build_dir=build_dir, test_dir=tmp_path,
                    extra_env={"ARCHSIM_TB_SEED": "12", "ARCHSIM_TB_ENTRIES": str(BENCH["ENTRIES"]),
                               "ARCHSIM_TB_KEY_BITS": str(BENCH["KEY_BITS"]),
                               "ARCHSIM_TB_OVF_BITS": str(BENCH["OVF_BITS"])},
                    log_file=log)
    except SystemExit as exc:
        tail = log.read_text(errors="replace")[-4000:] if log.exists() else "(no log)"
        pytest.fail(f"cocotb bench failed (exit {exc.code}):\n{tail}")
    results = "".join(p.read_text() for p in tmp_path.glob("*result*.xml"))
    assert "<failure" not in results and results.count("<testcase") == 3


@pytest.mark.rtl
@needs_verilator
@pytest.mark.parametrize("params", [{}, BENCH])
def test_tracker_lints_clean(params: dict, tmp_path: Path) -> None:
    args = [f"-G{k}={v}" for k, v in params.items()]
    proc = subprocess.run(["verilator", "--lint-only", "-Wall", *args, str(RTL / "t3_tracker.v")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
