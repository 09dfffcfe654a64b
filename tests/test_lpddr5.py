"""LPDDR5 (issue 39): the split activate as one two-cycle ACT whose rows run from its first cycle
(`timings_from: first`), against DDR5's two-cycle ACT whose rows run from its last; the bad value of the key."""
from __future__ import annotations

from pathlib import Path

import pytest

from archsim.dram.spec import load_spec
from archsim.errors import ConfigError
from archsim.systems.dram_trace.system import run_trace


def _latency(spec, level: str, prev: str, nxt: str) -> int:
    return max(c["latency"] for c in spec.constraints
               if (c["level_name"], c["prev_name"], c["next_name"]) == (level, prev, nxt) and not c["sibling"])


def test_activate_rows_run_from_act1_and_the_bus_is_held_two_cycles():
    lp = load_spec("LPDDR5_6400_x16_16Gb")
    t = lp.timing
    assert _latency(lp, "bank", "ACT", "RD") == t["nRCD"]            # from ACT-1: no command-cycle shift
    assert _latency(lp, "bank", "PRE", "ACT") == t["nRP"]            # (DDR5: nRP - 1)
    assert _latency(lp, "bank", "ACT", "PRE") == t["nRAS"]           # (DDR5: nRAS + 1)
    assert _latency(lp, "channel", "ACT", "RD") == 2                 # ACT-2 holds the bus the next cycle
    ddr5 = load_spec("DDR5_4800AN_x8_16Gb")
    assert _latency(ddr5, "bank", "ACT", "PRE") == ddr5.timing["nRAS"] + 1  # from the second cycle
    assert _latency(ddr5, "bank", "PRE", "ACT") == ddr5.timing["nRP"] - 1


def test_lpddr5_specific_rows():
    lp = load_spec("LPDDR5_6400_x16_16Gb")
    t = lp.timing
    assert _latency(lp, "rank", "PREA", "ACT") == t["nRPab"] > t["nRP"]
    assert _latency(lp, "rank", "PREA", "REFab") == t["nRP"]
    assert _latency(lp, "bankgroup", "WR", "RD") == t["nCWL"] + t["nBL_max"] + t["nWTRL"]
    assert _latency(lp, "channel", "RD", "WR") == t["nCL"] + t["nBL"] + 2 - t["nCWL"]


def test_closed_bank_read_is_act_then_rd_after_nrcd(make_trace, assert_log_clean):
    spec = load_spec("LPDDR5_6400_x16_16Gb")
    t = spec.timing
    r = run_trace(make_trace(spec, [{"bankgroup": 1, "bank": 1, "row": 5, "column": 3}]), preset=spec,
                  controller={"refresh": "none"}, log=True)
    log = r.extra["command_log"].df
    assert list(log.command) == ["ACT", "RD"]
    assert int(log.cycle.iloc[1] - log.cycle.iloc[0]) == t["nRCD"]
    assert r.stats["read_latency_mean_cycles"] == t["nRCD"] + t["nCL"] + t["nBL"]
    assert_log_clean(r)


def test_timings_from_must_be_first_or_last(tmp_path):
    std = tmp_path / "mine.yaml"
    std.write_text("name: MINE\nextends: lpddr5\ntimings_from: middle\n")
    preset = tmp_path / "p.yaml"
    shipped = Path(__file__).parents[1] / "archsim/presets/dram/LPDDR5_6400_x16_16Gb.yaml"
    preset.write_text(shipped.read_text().replace("standard: lpddr5", f"standard: {std}"))
    with pytest.raises(ConfigError, match="timings_from.*first or last"):
        load_spec(preset)
