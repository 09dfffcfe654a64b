"""RTL checks for the PIM ISA: cocotb co-simulation of rtl/pim_cmd_decoder.v against the Python decoder
(Icarus), and Verilator lint of the decoder and of every generated ISA header."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from archsim import isa as isa_mod

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
RTL = REPO / "rtl"
INCLUDE = RTL / "include"

needs_iverilog = pytest.mark.skipif(
    shutil.which("iverilog") is None, reason="iverilog (Icarus Verilog) is not on PATH"
)
needs_verilator = pytest.mark.skipif(shutil.which("verilator") is None, reason="verilator is not on PATH")


@pytest.mark.rtl
@needs_iverilog
def test_decoder_matches_python_golden_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cocotb_tools.runner import get_runner

    # The runner passes sys.path to the simulator's Python as PYTHONPATH; the bench module lives here.
    monkeypatch.syspath_prepend(str(HERE))
    runner = get_runner("icarus")
    build_dir = tmp_path / "sim_build"
    runner.build(
        sources=[RTL / "pim_cmd_decoder.v"],
        includes=[INCLUDE],
        hdl_toplevel="pim_cmd_decoder",
        build_dir=build_dir,
        always=True,
        timescale=("1ns", "1ps"),
        log_file=tmp_path / "build.log",
    )
    log = tmp_path / "sim.log"
    try:
        runner.test(
            hdl_toplevel="pim_cmd_decoder",
            test_module="tb_pim_cmd_decoder",
            build_dir=build_dir,
            test_dir=tmp_path,
            extra_env={"ARCHSIM_TB_ISA": "pim", "ARCHSIM_TB_SEED": "20240", "ARCHSIM_TB_WORDS": "3000"},
            log_file=log,
        )
    except SystemExit as exc:  # the runner exits when a cocotb test fails; show why instead
        tail = log.read_text(errors="replace")[-4000:] if log.exists() else "(no log)"
        pytest.fail(f"cocotb bench failed (exit {exc.code}):\n{tail}")


def _verilator_lint(args: list[str], cwd: Path) -> None:
    proc = subprocess.run(
        ["verilator", "--lint-only", "-Wall", *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, f"verilator lint failed:\n{proc.stdout}\n{proc.stderr}"


@pytest.mark.rtl
@needs_verilator
def test_decoder_lints_clean(tmp_path: Path) -> None:
    _verilator_lint([f"-I{INCLUDE}", str(RTL / "pim_cmd_decoder.v")], cwd=tmp_path)


@pytest.mark.rtl
@needs_verilator
@pytest.mark.parametrize("name", isa_mod.shipped_isas())
def test_generated_header_lints_clean(name: str, tmp_path: Path) -> None:
    # Every shipped header must compile and its decode macro must be lint-clean, even for ISAs that no
    # hand-written RTL block includes yet.
    spec = isa_mod.load(name)
    p = spec.name.upper()
    top = f"{spec.name}_isa_lint"
    (tmp_path / f"{top}.v").write_text(f"""\
`default_nettype none
`include "{isa_mod.header_filename(spec)}"
module {top} (
    input  wire [`{p}_WORD_BITS-1:0] instr,
    output reg  [`{p}_NUM_INSTRS-1:0] op_oh,
    output reg  [`{p}_NUM_UNITS-1:0] unit_oh,
    output reg  [`{p}_NUM_FIELDS-1:0] fields_used,
    output wire bad
);
    reg [`{p}_WORD_BITS-1:0] used_bits;
    always @(*) begin
        `{p}_ISA_DECODE(instr[`{p}_OPCODE_MSB:`{p}_OPCODE_LSB], op_oh, unit_oh, fields_used, used_bits)
    end
    assign bad = ~|op_oh | (|(instr & ~used_bits));
endmodule
`default_nettype wire
""")
    _verilator_lint([f"-I{INCLUDE}", f"{top}.v"], cwd=tmp_path)
