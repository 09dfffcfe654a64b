"""`archsim rtl lint|test|synth`: the tooling around the RTL blocks."""
from __future__ import annotations

import shutil

import pytest

from archsim.cli import main
from archsim.commands.rtl import blocks

needs = lambda tool: pytest.mark.skipif(shutil.which(tool) is None, reason=f"{tool} is not on PATH")  # noqa: E731


def test_blocks_are_the_rtl_files():
    assert {"pim_cmd_decoder", "pim_cmd_sequencer", "dual_rowbuf_arbiter"} <= set(blocks())


@pytest.mark.rtl
@needs("verilator")
def test_lint_every_block(capsys):
    assert main(["rtl", "lint"]) == 0
    out = capsys.readouterr().out
    assert all(f"{b}" in out for b in blocks()) and "FAILED" not in out


@pytest.mark.rtl
@needs("yosys")
def test_synth_reports_cell_counts(tmp_path, capsys):
    assert main(["rtl", "synth", "pim_cmd_decoder", "-o", str(tmp_path)]) == 0
    csv = (tmp_path / "synth.csv").read_text().splitlines()
    assert csv[0] == "block,cells,flip_flops,wires"
    block, cells, flops, _ = csv[1].split(",")
    assert block == "pim_cmd_decoder" and int(cells) > int(flops) > 0
    assert "| `pim_cmd_decoder` |" in (tmp_path / "README.md").read_text()


def test_unknown_block_is_a_user_error(capsys):
    assert main(["rtl", "lint", "no_such_block"]) == 2
    err = capsys.readouterr().err
    assert "no_such_block" in err and "pim_cmd_decoder" in err and "Traceback" not in err
