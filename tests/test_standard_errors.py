"""Bad input in a user's DRAM standard: one line naming the file, the key and the allowed values."""
from __future__ import annotations

import pytest

from archsim.dram.spec import load_spec
from archsim.errors import ConfigError


def _preset(tmp_path, standard_text: str) -> dict:
    std = tmp_path / "mystd.yaml"
    std.write_text(standard_text)
    base = load_spec("HBM2_2Gbps_PC").raw
    return {**base, "standard": str(std), "name": "mine"}


def test_command_without_effect(tmp_path):
    data = _preset(tmp_path, "name: mine\nextends: hbm2\ncommands:\n  ZAP: {scope: bank, bus: row}\n")
    with pytest.raises(ConfigError) as e:
        load_spec(data)
    msg = str(e.value)
    assert "mystd.yaml" in msg and "commands.ZAP.effect" in msg and "open, close, read" in msg and "\n" not in msg


def test_unknown_level_in_a_row(tmp_path):
    data = _preset(tmp_path, "name: mine\nextends: hbm2\nconstraints:\n  - [stack, [ACT], [ACT], 3]\n")
    with pytest.raises(ConfigError) as e:
        load_spec(data)
    msg = str(e.value)
    assert "mystd.yaml" in msg and "level" in msg and "'stack'" in msg
    assert "channel, pseudochannel, bankgroup, bank" in msg


def test_row_buffer_that_does_not_exist(tmp_path):
    data = _preset(tmp_path, "name: mine\nextends: hbm2\ncommands:\n"
                   "  PACT: {scope: bank, bus: row, effect: open, buffer: pim}\n")
    with pytest.raises(ConfigError) as e:
        load_spec(data)
    msg = str(e.value)
    assert "mystd.yaml" in msg and "commands.PACT.buffer" in msg and "row buffers of" in msg and "mem" in msg


def test_replace_without_a_base_row(tmp_path):
    data = _preset(tmp_path, "name: mine\nextends: hbm2\nconstraints:\n"
                   "  - {level: bank, preceding: [ACT], following: [WR], latency: 3, replace: true}\n")
    with pytest.raises(ConfigError, match="replace: no earlier row"):
        load_spec(data)


def test_replace_swaps_the_base_row(tmp_path):
    data = _preset(tmp_path, "name: mine\nextends: hbm2\nconstraints:\n"
                   "  - {level: bank, preceding: [ACT], following: [RD, RDA], latency: 3, replace: true}\n")
    spec = load_spec(data)
    rows = [r for r in spec.constraints if r["level_name"] == "bank" and r["prev_name"] == "ACT"
            and r["next_name"] == "RD"]
    assert [r["latency"] for r in rows] == [3]


def test_refresh_mode_the_standard_lacks():
    from archsim.engine.memory import MemorySystem

    spec = load_spec("DDR4_3200AA_x8_8Gb")
    with pytest.raises(ConfigError, match="perbank"):
        MemorySystem(spec, {"refresh": "perbank"})
