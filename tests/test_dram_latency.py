"""Planning latencies come from the constraint rows the kernel enforces (archsim.dram.latency): equal to the
JEDEC expressions on every shipped preset, moved by a timing override like the engine is, and an error (not a
fallback value) on a standard without the row."""
from __future__ import annotations

import pytest

from archsim.dram import latency
from archsim.dram.spec import load_spec, preset_names
from archsim.engine.memory import MemorySystem
from archsim.errors import ConfigError


@pytest.mark.parametrize("preset", preset_names())
def test_closed_row_read_is_act_to_read_plus_read_latency(preset):
    spec = load_spec(preset)
    t = spec.timing
    # (GDDR7's read data counts from the second cycle of its two-cycle RD)
    assert latency.closed_row_read(spec) == t["nRCDRD"] + t["nCL"] + t["nBL"] + (spec.standard == "GDDR7")


def test_a_timing_override_moves_the_planning_latency_with_the_engine():
    base = load_spec("HBM2_2Gbps_PC")
    slow = load_spec("HBM2_2Gbps_PC", {"timing.nRCDRD": base.timing["nRCDRD"] + 7})
    assert latency.closed_row_read(slow) == latency.closed_row_read(base) + 7
    # the engine serves a read of a closed row in exactly that time (idle channel, no refresh)
    for spec in (base, slow):
        ms = MemorySystem(spec, {"refresh": "none"}, log=False, requests=4)
        (rid,) = ms.enqueue_requests(ms.add_port("mem"), channel=0, bank=0, row=5, column=0)
        ms.run()
        assert int(ms.S.r_done[rid] - ms.S.r_enq[rid]) == latency.closed_row_read(spec)


def test_neupims_pim_estimates_read_the_pim_rows():
    spec = load_spec("NeuPIMs_HBM2_Dual")
    t = spec.timing
    assert latency.gap(spec, "COMP", "COMP") == t["nCOMP"]
    # a G_ACT opens the four banks of a group, a whole four-activate window (NewtonSim timing.cc:396-401)
    assert latency.level_gap(spec, "G_ACT", "G_ACT", "rank") == t["nFAW"]
    assert latency.gap(spec, "PIM_PRE", "G_ACT") == t["nRP"]


@pytest.mark.parametrize("preset,level", [("NeuPIMs_HBM2_Dual", "rank"), ("HBM2_2Gbps_Newton", "pseudochannel"),
                                          ("HBM3_6400Mbps_Newton", "sid")])
def test_the_activation_window_level_is_the_standards_own(preset, level):
    """The Newton extension's rank rows land on each base standard's level of the four-activate window."""
    spec = load_spec(preset)
    assert latency.widest_level(spec, "G_ACT", "G_ACT") == level
    assert latency.level_gap(spec, "G_ACT", "G_ACT", level) == spec.timing["nFAW"]
    with pytest.raises(ConfigError, match="no row above bank, bankgroup from RD to PRE"):     # tRTP: a bank's
        latency.widest_level(load_spec("DDR4_3200AA_x8_8Gb"), "RD", "PRE")


def test_a_missing_row_is_an_error_not_a_fallback():
    spec = load_spec("DDR4_3200AA_x8_8Gb")
    with pytest.raises(ConfigError, match="no command COMP"):
        latency.gap(spec, "COMP", "COMP")
    with pytest.raises(ConfigError, match="no row from REFab to WR"):
        latency.gap(spec, "REFab", "WR")
    with pytest.raises(ConfigError, match="no window row from RD to RD"):
        latency.window(spec, "RD", "RD")
