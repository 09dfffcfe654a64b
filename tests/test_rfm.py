"""DDR5 refresh management (issue 39): `controller.rfm_threshold` issues an RFM to a rank once one of its banks
has opened that many rows (Ramulator 2.1's RFMManager), priced and timed like a refresh of nRFM cycles."""
from __future__ import annotations

import pytest

from archsim.dram.spec import load_spec
from archsim.energy import dram_action_energy_pj
from archsim.errors import ConfigError
from archsim.systems.dram_trace.system import run_trace

PRESET = "DDR5_4800AN_x8_16Gb_RFM"


def _conflicts(spec, n, bank=1, bankgroup=0, start=0):
    """n reads to one bank, each to another row: every one needs its own activate."""
    return [{"bankgroup": bankgroup, "bank": bank, "row": start + i, "arrive": 400 * i} for i in range(n)]


def _run(make_trace, reqs, **ctrl):
    """refresh off; the active buffer (as Ramulator's controller): a request whose ACT issued keeps its row until
    its column command, so an RFM falling due at that ACT waits for it (without it, the RFM closes the row and
    the request activates again, as before an all-bank refresh)."""
    spec = load_spec(PRESET)
    r = run_trace(make_trace(spec, reqs), preset=spec, controller={"refresh": "none", "active_buffer": True, **ctrl},
                  log=True)
    return spec, r, r.extra["command_log"].df


def test_the_thresholdth_activate_of_a_bank_brings_an_rfm(make_trace, assert_log_clean):
    spec, r, log = _run(make_trace, _conflicts(spec := load_spec(PRESET), 9), rfm_threshold=4)
    cmds = list(log.command)
    acts = [i for i, c in enumerate(cmds) if c == "ACT"]
    rfms = [i for i, c in enumerate(cmds) if c == "RFMab"]
    assert len(rfms) == 2                       # after the 4th and the 8th activate
    for k, i in enumerate(rfms):
        assert max(a for a in acts if a < i) == acts[4 * k + 3]
    # the open row is closed first (a PREA, as before an all-bank refresh), the next activate waits nRFM
    assert cmds[rfms[0] - 1] == "PREA"
    nxt = next(a for a in acts if a > rfms[0])
    # (exactly: DDR5's ACT takes two command cycles, logged at its first, so it may start nRFM - 1 after)
    assert log.cycle.iloc[nxt] - log.cycle.iloc[rfms[0]] == spec.timing["nRFM"] - 1
    assert r.stats["commands"]["RFMab"] == 2
    assert_log_clean(r)


def test_counts_are_per_bank_and_start_again_after_an_rfm(make_trace):
    # three activates in each of two banks of the rank: no bank reaches 4
    reqs = _conflicts(load_spec(PRESET), 3, bank=1) + _conflicts(load_spec(PRESET), 3, bank=2, start=100)
    _, r, _ = _run(make_trace, sorted(reqs, key=lambda q: q["arrive"]), rfm_threshold=4)
    assert r.stats["commands"]["RFMab"] == 0
    _, r, _ = _run(make_trace, _conflicts(load_spec(PRESET), 7), rfm_threshold=4)
    assert r.stats["commands"]["RFMab"] == 1   # 4 activates, an RFM, then only 3 more


def test_without_the_active_buffer_a_pending_rfm_closes_the_new_row(make_trace):
    _, r, log = _run(make_trace, _conflicts(load_spec(PRESET), 4), rfm_threshold=4, active_buffer=False)
    # ACT (the 4th), PREA, RFMab, ACT again, RD: the request's row is opened twice
    assert list(log.command[-5:]) == ["ACT", "PREA", "RFMab", "ACT", "RD"]
    assert r.stats["commands"]["ACT"] == 5


def test_threshold_zero_is_plain_ddr5(make_trace):
    _, r0, log0 = _run(make_trace, _conflicts(load_spec(PRESET), 9))
    _, r1, log1 = _run(make_trace, _conflicts(load_spec(PRESET), 9), rfm_threshold=100)
    assert r0.stats["commands"]["RFMab"] == 0 and log0.equals(log1)


def test_rfm_energy_is_a_refresh_of_nrfm_cycles():
    spec = load_spec(PRESET)
    e = dram_action_energy_pj(spec)
    assert e["RFMab"] == pytest.approx(e["REFab"] * spec.timing["nRFM"] / spec.timing["nRFC"])


def test_rfm_with_refresh_and_ramulator_order(make_trace, assert_log_clean):
    """With all-bank refresh as well (a short nREFI): both kinds issue, and the log passes the checker."""
    spec = load_spec(PRESET, overrides={"timing.nREFI": 2000})
    r = run_trace(make_trace(spec, _conflicts(spec, 12)), preset=spec, log=True,
                  controller={"refresh": "allbank", "rfm_threshold": 3})
    assert r.stats["commands"]["RFMab"] >= 3 and r.stats["commands"]["REFab"] >= 1
    assert_log_clean(r)


@pytest.mark.parametrize("preset,ctrl,match", [
    ("DDR5_4800AN_x8_16Gb", {"rfm_threshold": 80}, "no refresh-management command"),
    (PRESET, {"rfm_threshold": -1}, "rfm_threshold"),
    (PRESET, {"rfm_threshold": 80, "bank_command_queue": 8}, "bank_command_queue: 0"),
])
def test_bad_rfm_settings_are_refused(preset, ctrl, match):
    with pytest.raises(ConfigError, match=match):
        run_trace({"kind": "random", "requests": 10}, preset=preset, controller=ctrl)
