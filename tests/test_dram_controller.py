"""Controller command sequences (Ramulator-style `assert_commands`): row conflict / hit, closed-row policy,
write drain with watermarks, per-bank refresh round robin, FR-FCFS ordering. Every log is also re-checked by
the independent checker."""
from __future__ import annotations

import numpy as np
import pytest

from archsim.dram.spec import load_spec
from archsim.dram.trace import Trace
from archsim.systems.dram_trace.system import run_trace

DDR4 = "DDR4_3200AA_x8_8Gb"


def _run(spec, reqs, make_trace, **ctrl):
    return run_trace(make_trace(spec, reqs), preset=spec, controller={"refresh": "none", **ctrl}, log=True)


def _bank_cmds(result, bankgroup, bank, after=-1, channel=0):
    df = result.extra["command_log"].df
    sel = df[(df.channel == channel) & (df.bankgroup == bankgroup) & (df.bank == bank) & (df.cycle > after)]
    return list(zip(sel.command, sel.row, strict=True))


@pytest.mark.parametrize("preset", [DDR4, "HBM3_6400Mbps"])
def test_row_conflict_issues_pre_act_rd(preset, make_trace, assert_log_clean):
    spec = load_spec(preset)
    reqs = [{"bankgroup": 1, "bank": 2, "row": 5}, {"bankgroup": 1, "bank": 2, "row": 6, "arrive": 500}]
    r = _run(spec, reqs, make_trace)
    assert [c for c, _ in _bank_cmds(r, 1, 2)] == ["ACT", "RD", "PRE", "ACT", "RD"]
    assert _bank_cmds(r, 1, 2, after=499)[1:] == [("ACT", 6), ("RD", 6)]
    assert r.extra["raw"]["req_kind"].tolist() == [1, 2]
    assert_log_clean(r)


@pytest.mark.parametrize("preset", [DDR4, "HBM3_6400Mbps"])
def test_row_hit_issues_only_rd(preset, make_trace, assert_log_clean):
    spec = load_spec(preset)
    reqs = [{"bankgroup": 1, "bank": 2, "row": 5}, {"bankgroup": 1, "bank": 2, "row": 5, "column": 7, "arrive": 500}]
    r = _run(spec, reqs, make_trace)
    assert _bank_cmds(r, 1, 2, after=499) == [("RD", 5)]
    assert r.extra["command_log"].df.command.tolist() == ["ACT", "RD", "RD"]
    assert r.extra["raw"]["req_kind"].tolist() == [1, 0]
    assert_log_clean(r)


def test_closed_row_policy_auto_precharges(make_trace, assert_log_clean):
    spec = load_spec(DDR4)
    # a lone read: ACT, RDA; a lone write: ACT, WRA
    r = _run(spec, [{"bank": 1, "row": 5}, {"bank": 1, "row": 5, "write": True, "arrive": 500}], make_trace,
             row_policy="closed")
    assert [c for c, _ in _bank_cmds(r, 0, 1)] == ["ACT", "RDA", "ACT", "WRA"]
    # two queued hits to one row: the first is RD, the last hit closes the row with RDA
    reqs = [{"bank": 2, "row": 5, "column": c} for c in range(3)]
    r2 = _run(spec, reqs, make_trace, row_policy="closed")
    assert [c for c, _ in _bank_cmds(r2, 0, 2)] == ["ACT", "RD", "RD", "RDA"]
    assert "PRE" not in set(r.extra["command_log"].df.command) | set(r2.extra["command_log"].df.command)
    assert_log_clean(r)
    assert_log_clean(r2)


def _occupancy(enq_sorted: np.ndarray, issued_sorted: np.ndarray, t: int) -> int:
    """Queue entries at the moment a command issues in cycle t (requests are enqueued before the channel
    schedules in the same cycle, so those count; commands of cycle t itself do not)."""
    return int(np.searchsorted(enq_sorted, t, side="right") - np.searchsorted(issued_sorted, t, side="left"))


def test_write_drain_between_watermarks(assert_log_clean):
    """With reads always queued, writes wait until the write queue reaches the high watermark, then drain
    (no reads in between) down to exactly the low watermark."""
    spec = load_spec(DDR4)
    wq, hi, lo = 10, 8, 2   # watermarks 0.8 and 0.2 of 10 entries
    rng = np.random.default_rng(1)
    n = 600
    addr = rng.integers(0, spec.capacity_bytes // 64, n).astype(np.uint64) * np.uint64(64)
    is_write = np.arange(n) % 4 == 3   # random rows: reads are slow, so the read queue stays full
    trace = Trace(addr=addr, is_write=is_write, arrive=np.full(n, -1), source="t", fmt="synthetic")
    r = run_trace(trace, preset=spec, log=True, controller={
        "refresh": "none", "write_queue": wq, "write_high_watermark": hi / wq, "write_low_watermark": lo / wq})
    raw, log = r.extra["raw"], r.extra["command_log"].df
    col = log[log.command.isin(["RD", "WR"])]
    kinds, cycles = col.command.to_numpy(), col.cycle.to_numpy()
    w_enq, r_enq = np.sort(raw["req_enq"][is_write]), np.sort(raw["req_enq"][~is_write])
    w_iss, r_iss = cycles[kinds == "WR"], cycles[kinds == "RD"]
    runs = []
    i = 0
    while i < len(kinds):
        if kinds[i] == "WR":
            j = i
            while j + 1 < len(kinds) and kinds[j + 1] == "WR":
                j += 1
            runs.append((cycles[i], cycles[j]))
            i = j + 1
        else:
            i += 1
    assert len(runs) >= 10
    assert kinds[0] == "RD"
    for first, last in runs:
        if _occupancy(r_enq, r_iss, first) > 0:
            assert _occupancy(w_enq, w_iss, first) >= hi, "with reads waiting, a drain starts only at the high watermark"
        reads_waiting = _occupancy(r_enq, r_iss, last)
        after = _occupancy(w_enq, w_iss, last) - 1
        if reads_waiting > 0:
            assert after == lo, f"drain ending at cycle {last} left {after} writes (reads waiting)"
        else:
            assert after <= lo  # the trace's tail: no reads left, the controller may drain further
    assert sum(1 for first, last in runs if _occupancy(r_enq, r_iss, last) > 0) >= 10
    assert_log_clean(r)


@pytest.mark.parametrize("preset", ["GDDR6_14Gbps", "HBM3_6400Mbps"])
def test_perbank_refresh_round_robin_at_nrefipb(preset, assert_log_clean):
    """REFpb visits the banks of each rank in order, the k-th one falling due at (k+1) x nREFIpb; it issues
    no earlier, and no later than the time needed to close a just-opened bank (max(nRAS, nRCDWR + nWRPRE)
    + nRP)."""
    spec = load_spec(preset).with_channels(2)
    t = spec.timing
    rng = np.random.default_rng(2)
    n = 250
    addr = rng.integers(0, spec.capacity_bytes // spec.access_bytes, n).astype(np.uint64) * np.uint64(spec.access_bytes)
    trace = Trace(addr=addr, is_write=rng.random(n) < 0.3, arrive=np.arange(n) * 100, source="t", fmt="synthetic")
    r = run_trace(trace, preset=spec, controller={"refresh": "perbank"}, log=True)
    log = r.extra["command_log"].df
    end = r.stats["cycles"]
    slack = max(t["nRAS"], t["nRCDWR"] + t["nWRPRE"]) + t["nRP"]
    groups = log[log.command == "REFpb"].groupby(["channel", "pseudochannel", "rank"])
    assert len(groups) == spec.channels * spec.counts[1] * spec.counts[2]
    for _, g in groups:
        k = np.arange(len(g))
        assert len(g) >= end // t["nREFIpb"] - 1
        assert ((g.bankgroup * spec.counts[4] + g.bank).to_numpy() == k % spec.banks_per_rank).all()
        delay = g.cycle.to_numpy() - (k + 1) * t["nREFIpb"]
        assert delay.min() >= 0 and delay.max() <= slack, (delay.min(), delay.max(), slack)
    assert "REFab" not in set(log.command)
    assert_log_clean(r)


@pytest.mark.parametrize("hit_arrives", [2, 30])
def test_frfcfs_younger_row_hit_before_older_conflict(hit_arrives, make_trace, assert_log_clean):
    """A (row 5) opens the bank; B (row 6, older) conflicts; C (row 5, younger) hits. FR-FCFS serves C
    first; the PRE for B waits until no hit is queued. With C arriving at cycle 30 A is already served and
    B's PRE is only blocked by nRAS, so C still overtakes it."""
    spec = load_spec(DDR4)
    reqs = [{"bank": 3, "row": 5, "column": 0, "arrive": 0}, {"bank": 3, "row": 6, "column": 0, "arrive": 1},
            {"bank": 3, "row": 5, "column": 1, "arrive": hit_arrives}]
    r = _run(spec, reqs, make_trace)
    done = r.extra["raw"]["req_done"]
    assert done[0] < done[2] < done[1]
    # a PRE is logged with the row it closes (5), not the row the waiting request wants
    assert _bank_cmds(r, 0, 3) == [("ACT", 5), ("RD", 5), ("RD", 5), ("PRE", 5), ("ACT", 6), ("RD", 6)]
    assert r.extra["raw"]["req_kind"].tolist() == [1, 2, 0]
    assert_log_clean(r)


def test_frfcfs_oldest_first_among_row_hits(make_trace):
    """Among ready row hits the oldest goes first (FCFS tie-break)."""
    spec = load_spec(DDR4)
    reqs = [{"bank": 0, "row": 5, "column": c} for c in (9, 3, 7, 1)]
    r = _run(spec, reqs, make_trace)
    df = r.extra["command_log"].df
    assert df[df.command == "RD"].column.tolist() == [9, 3, 7, 1]
