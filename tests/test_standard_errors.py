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


@pytest.mark.parametrize("cycles,key,allowed", [
    ("{ZAP: 2}", "command_cycles.ZAP", "known: ACT, PRE"),
    ("{ACT: 0}", "command_cycles.ACT", "an integer >= 1"),
    ("{ACT: 1.5}", "command_cycles.ACT", "an integer >= 1"),
    ("[ACT, 2]", "command_cycles", "a mapping {command: cycles}"),
])
def test_bad_command_cycles(tmp_path, cycles, key, allowed):
    """Issue 39: a standard's multi-cycle commands (half cycles are not modelled: archsim's clock is the CK)."""
    data = _preset(tmp_path, f"name: mine\nextends: hbm2\ncommand_cycles: {cycles}\n")
    with pytest.raises(ConfigError) as e:
        load_spec(data)
    msg = str(e.value)
    assert "mystd.yaml" in msg and key in msg and allowed in msg and "\n" not in msg


def test_command_cycles_shift_the_rows(tmp_path):
    """A two-cycle ACT: rows from it gain a cycle, rows to it lose one, and it holds the row bus two cycles
    (HBM2 has separate row and column buses, so only row commands wait for it)."""
    data = _preset(tmp_path, "name: mine\nextends: hbm2\ncommand_cycles: {ACT: 2}\n")
    spec, base = load_spec(data), load_spec("HBM2_2Gbps_PC")

    def lat(s, level, p, f):
        return max(r["latency"] for r in s.constraints if (r["level_name"], r["prev_name"], r["next_name"]) == (level, p, f))

    t = base.timing
    assert lat(spec, "bank", "ACT", "RD") == t["nRCDRD"] + 1
    assert lat(spec, "bank", "PRE", "ACT") == t["nRP"] - 1
    assert lat(spec, "bank", "ACT", "ACT") == t["nRC"]
    assert lat(spec, "channel", "ACT", "PRE") == 2
    assert not [r for r in spec.constraints if r["level_name"] == "channel" and r["prev_name"] == "ACT"
                and r["next_name"] == "RD"]
