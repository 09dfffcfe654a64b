"""Ramulator-style closed-form tests of the DRAM simulator: smoke runs of every preset (the independent
checker accepts every command log), unloaded latencies, streaming peak bandwidth per data bus, the
refresh penalty and HBM pseudo-channel bandwidth (Ramulator issues #42/#104: HBM PC bandwidth bugs)."""
from __future__ import annotations

import numpy as np
import pytest

from archsim.dram.spec import load_spec, preset_names, standard_command_cycles, standard_timings_from
from archsim.dram.trace import Trace
from archsim.systems.dram_trace.system import run_trace

PRESETS = preset_names()

# Streaming mapping (MSB..LSB): channel, pseudo-channel, then bank group lowest above them, then column.
# tCCD_L > tBL (e.g. HBM3 nCCDL 4 > nBL 2, DDR4 8 > 4): back-to-back bursts to one bank group cannot fill
# the data bus, so consecutive bursts of a pseudo-channel must alternate bank groups (nCCDS = nBL).
STREAM_MAPPING = "RoRaBaCoBgPcCh"


def _stream_trace(spec, n: int, stride_accesses: int = 1) -> Trace:
    addr = np.arange(n, dtype=np.uint64) * np.uint64(spec.access_bytes * stride_accesses)
    return Trace(addr=addr, is_write=np.zeros(n, dtype=bool), arrive=np.full(n, -1, dtype=np.int64),
                 source="stream", fmt="synthetic")


def _stream_controller(spec, **extra):
    # frontend_width >= data buses so the one-request-per-cycle frontend is not the limit. read_queue 64:
    # the queue is per channel (shared by its pseudo-channels) and must look further ahead than a row switch
    # (nRP + nRCDRD = 57 cycles on HBM3, at one burst per cycle per channel); with the default 32 entries
    # HBM3 streams at ~93 % of peak, each row conflict leaving a ~26-cycle bubble on both data buses.
    # (HBM4: nRP + nRCDRD = 72 cycles, so the queue grows with the row switch: 1.1 x the requests it spans)
    t, pcs = spec.timing, spec.counts[1]
    look = round(1.1 * (t["nRP"] + t["nRCDRD"]) * pcs / t["nBL"])
    return {"refresh": "none", "mapping": STREAM_MAPPING, "read_queue": max(64, look),
            "frontend_width": spec.counts[0] * spec.counts[1], **extra}


def _bus_utilisation(spec, result) -> np.ndarray:
    """Per data bus (channel, pseudo-channel): bytes read / (cycles x peak bytes per cycle)."""
    log = result.extra["command_log"].df
    reads = log[log.command.isin(["RD", "RDA"])].groupby(["channel", "pseudochannel"]).size()
    assert len(reads) == spec.counts[0] * spec.counts[1], "every data bus must be used"
    per_cycle_peak = spec.access_bytes / spec.timing["nBL"]
    return reads.to_numpy() * spec.access_bytes / (result.stats["cycles"] * per_cycle_peak)


# ------------------------------------------------------------------------------------------------
# smoke


@pytest.mark.parametrize("kind", ["random", "stream"])
@pytest.mark.parametrize("preset", PRESETS)
def test_smoke_every_preset_checker_accepts(preset, kind, assert_log_clean):
    spec = load_spec(preset)
    r = run_trace({"kind": kind, "requests": 1500, "read_fraction": 0.7, "seed": 3,
                   "span_bytes": min(spec.capacity_bytes, 1 << 28)}, preset=preset, log=True)
    assert r.stats["requests"] == 1500 and r.stats["cycles"] > 0
    assert assert_log_clean(r) >= 1500
    raw = r.extra["raw"]
    assert (raw["req_done"] > raw["req_enq"]).all() and (raw["req_enq"] >= 0).all()


@pytest.mark.parametrize("ctrl", [{"row_policy": "closed"}, {"refresh": "perbank"},
                                  {"read_queue": 4, "write_queue": 4}])
@pytest.mark.parametrize("preset", ["DDR4_3200AA_x8_8Gb", "HBM3_6400Mbps"])
def test_smoke_controller_options(preset, ctrl, assert_log_clean):
    spec = load_spec(preset)
    if ctrl.get("refresh", "allbank") not in spec.refresh_modes:      # DDR4: no per-bank refresh
        from archsim.errors import ConfigError

        with pytest.raises(ConfigError, match="does not support"):
            run_trace({"kind": "random", "requests": 10}, preset=preset, controller=ctrl)
        return
    r = run_trace({"kind": "random", "requests": 1500, "seed": 5, "span_bytes": min(spec.capacity_bytes, 1 << 28)},
                  preset=preset, controller=ctrl, log=True)
    assert_log_clean(r)


# ------------------------------------------------------------------------------------------------
# unloaded latency


def _act_shift(spec) -> int:
    """Cycles a row to the ACT loses: its command cycles beyond the first, where the standard's timings run from
    a command's last cycle (DDR5, GDDR7; LPDDR5's split activate runs from its first: none)."""
    std = str(spec.raw.get("standard", ""))
    if standard_timings_from(std) == "first":
        return 0
    return standard_command_cycles(std).get("ACT", 1) - 1



def _read_latency(spec) -> int:
    """nCL + nBL; GDDR7's read data counts from the second cycle of its two-cycle RD (+1)."""
    return spec.timing["nCL"] + spec.timing["nBL"] + (spec.standard == "GDDR7")


def _single(spec, reqs, make_trace, **ctrl):
    return run_trace(make_trace(spec, reqs), preset=spec, controller={"refresh": "none", **ctrl}, log=True)


@pytest.mark.parametrize("preset", PRESETS)
def test_unloaded_read_latency_closed_bank(preset, make_trace, assert_log_clean):
    """One read to a closed bank: ACT, RD after nRCDRD, data after nCL + nBL."""
    spec = load_spec(preset)
    t = spec.timing
    r = _single(spec, [{"bankgroup": min(1, spec.counts[3] - 1), "bank": 1, "row": 5, "column": 3}], make_trace)
    raw = r.extra["raw"]
    rd = _read_latency(spec)
    assert int(raw["req_done"][0] - raw["req_enq"][0]) == t["nRCDRD"] + rd
    assert r.stats["read_latency_mean_cycles"] == t["nRCDRD"] + rd
    assert list(r.extra["command_log"].df.command) == ["ACT", "RD"]
    assert_log_clean(r)


@pytest.mark.parametrize("preset", PRESETS)
def test_unloaded_latency_row_hit_and_conflict(preset, make_trace):
    """A later read to the open row costs nCL + nBL; to another row of the bank nRP + nRCDRD + nCL + nBL
    (arrivals far apart so nRAS / nRTP have expired)."""
    spec = load_spec(preset)
    t = spec.timing
    reqs = [{"bank": 2, "row": 5, "column": 1}, {"bank": 2, "row": 5, "column": 9, "arrive": 1000},
            {"bank": 2, "row": 6, "column": 0, "arrive": 2000}]
    r = _single(spec, reqs, make_trace)
    lat = r.extra["raw"]["req_done"] - r.extra["raw"]["req_enq"]
    # (a PRE is one command cycle, an ACT two on DDR5 and GDDR7: PRE -> ACT is nRP - 1 there, docs/channel-engine.md)
    rd, pre_act = _read_latency(spec), t["nRP"] - _act_shift(spec)
    assert lat.tolist() == [t["nRCDRD"] + rd, rd, pre_act + t["nRCDRD"] + rd]
    assert r.extra["raw"]["req_kind"].tolist() == [1, 0, 2]  # miss, hit, conflict


@pytest.mark.parametrize("preset", PRESETS)
def test_unloaded_write_latency(preset, make_trace):
    spec = load_spec(preset)
    t = spec.timing
    r = _single(spec, [{"bank": 1, "row": 3, "write": True}], make_trace)
    raw = r.extra["raw"]
    assert int(raw["req_done"][0] - raw["req_enq"][0]) == t["nRCDWR"] + t["nCWL"] + t["nBL"]


# ------------------------------------------------------------------------------------------------
# streaming bandwidth


@pytest.mark.parametrize("preset", PRESETS)
def test_streaming_reads_reach_peak_per_data_bus(preset, assert_log_clean):
    """Closed form: peak of one data bus = access_bytes / (nBL x tCK). Every channel (and every
    pseudo-channel of HBM) must sustain >= 95 % of it on a sequential read stream."""
    spec = load_spec(preset)
    buses = spec.counts[0] * spec.counts[1]
    r = run_trace(_stream_trace(spec, 2000 * buses), preset=spec, controller=_stream_controller(spec), log=True)
    util = _bus_utilisation(spec, r)
    assert util.min() >= 0.95, f"per-bus utilisation {util.min():.3f} .. {util.max():.3f}"
    # the stats agree with the closed form over all buses
    peak = spec.access_bytes / (spec.timing["nBL"] * spec.tCK_s) * buses
    assert r.stats["peak_bandwidth_GBps"] == pytest.approx(peak / 1e9)
    assert r.stats["bandwidth_pct_of_peak"] >= 95.0
    assert_log_clean(r)


@pytest.mark.parametrize("preset", [p for p in PRESETS if load_spec(p).counts[1] > 1])
def test_hbm_pseudochannels_double_channel_bandwidth(preset):
    """Ramulator #42/#104: HBM pseudo-channels are independent data buses, so a channel streaming over
    both of its pseudo-channels moves 2x the bytes per cycle of one pseudo-channel alone."""
    spec = load_spec(preset).with_channels(1)
    pcs = spec.counts[1]
    n = 4000
    both = run_trace(_stream_trace(spec, n), preset=spec, controller=_stream_controller(spec))
    # with one channel, the pseudo-channel bits are the lowest above the offset: a stride of `pcs`
    # accesses keeps every request on pseudo-channel 0
    one = run_trace(_stream_trace(spec, n // pcs, stride_accesses=pcs), preset=spec,
                    controller=_stream_controller(spec))
    bw_both = both.stats["bandwidth_GBps"]
    bw_one = one.stats["bandwidth_GBps"]
    assert bw_both / bw_one == pytest.approx(pcs, rel=0.05)
    per_pc_peak = spec.peak_bw_per_bus_bytes_per_s / 1e9
    assert bw_one >= 0.95 * per_pc_peak
    assert bw_both >= 0.95 * pcs * per_pc_peak


def test_hbm2_pseudochannel_mode_matches_legacy_channel_bandwidth():
    """HBM2: a 128-bit legacy channel (64 B bursts) and two 64-bit pseudo-channels (32 B bursts each)
    have the same peak per channel, and streaming reaches it in both modes."""
    legacy = load_spec("HBM2_2Gbps_Legacy").with_channels(1)
    pc = load_spec("HBM2_2Gbps_PC").with_channels(1)
    assert legacy.peak_bw_bytes_per_s == pytest.approx(pc.peak_bw_bytes_per_s)
    n_bytes = 4000 * 64
    r_legacy = run_trace(_stream_trace(legacy, n_bytes // legacy.access_bytes), preset=legacy,
                         controller=_stream_controller(legacy))
    r_pc = run_trace(_stream_trace(pc, n_bytes // pc.access_bytes), preset=pc, controller=_stream_controller(pc))
    assert r_pc.stats["bandwidth_GBps"] == pytest.approx(r_legacy.stats["bandwidth_GBps"], rel=0.03)


# ------------------------------------------------------------------------------------------------
# refresh


@pytest.mark.parametrize("preset", PRESETS)
def test_allbank_refresh_costs_nrfc_over_nrefi(preset, assert_log_clean):
    """Streaming for 10 x nREFI with all-bank refresh loses about nRFC/nREFI of the time. Lower bound:
    nRFC/nREFI (the rank is blocked that long per interval) minus 0.5 % for the partial last interval;
    upper bound: Ramulator's refresh penalty (nRTP + nRP + nRFC + nRCDRD) / nREFI (drain the open rows,
    PREA, REFab, re-open) plus 0.5 %."""
    spec = load_spec(preset).with_channels(1)
    t = spec.timing
    pcs = spec.counts[1]
    n = pcs * 10 * t["nREFI"] // t["nBL"]
    trace = _stream_trace(spec, n)
    base = run_trace(trace, preset=spec, controller=_stream_controller(spec))
    ref = run_trace(trace, preset=spec, controller=_stream_controller(spec, refresh="allbank"), log=True)
    loss = 1 - base.stats["cycles"] / ref.stats["cycles"]
    # with several ranks (stack IDs) on a data bus, the queue may serve another rank while one refreshes: at
    # least the share of the refreshing rank (HBM4's long nRFC shows it)
    low = t["nRFC"] / t["nREFI"] / (1 if spec.counts[2] == 1 or t["nRFC"] < 0.1 * t["nREFI"] else spec.counts[2]) - 0.005
    high = (t["nRTP"] + t["nRP"] + t["nRFC"] + t["nRCDRD"]) / t["nREFI"] + 0.005
    assert low <= loss <= high, f"loss {loss:.4f} not in [{low:.4f}, {high:.4f}]"
    refs = ref.stats["commands"]["REFab"]
    ranks = spec.counts[1] * spec.counts[2]
    k = ref.stats["cycles"] // t["nREFI"]
    # a refresh that fell due fewer than nRTP + nRP cycles before the run ended may still have been draining
    # its rows (HBM2_2Gbps_PC_Ramulator2 ends 3 cycles after its 11th due)
    draining = ref.stats["cycles"] - k * t["nREFI"] < t["nRTP"] + t["nRP"]
    allowed = {ranks * k, ranks * (k + 1)} | ({ranks * (k - 1)} if draining else set())
    assert refs in allowed, f"{refs} REFab in {ref.stats['cycles']} cycles (nREFI {t['nREFI']}, {ranks} nodes)"
    assert_log_clean(ref)
