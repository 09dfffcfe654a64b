"""Duplex hardware: the HBM3-Duplex bank bundles on the channel engine, the Logic-PIM timer, its roofline,
the bundle-conflict check and the functional GEMM. (Every constraint row of the hbm3_duplex standard also
gets its tight gate, illegal at t-1 and legal at t, in tests/test_dram_checker.py, which covers all presets.)"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.dram.checker import check_log
from archsim.dram.spec import load_spec
from archsim.energy import dram_action_energy_pj
from archsim.engine.memory import MemorySystem
from archsim.pim.logic_pim import (
    LogicPimConfig,
    LogicPimTimer,
    Segment,
    _bank_ids,
    bundle_bandwidth_bytes_per_s,
    bundle_bank,
    bundle_conflicts,
    bundle_of_bank,
    bundle_stream,
    compute_cycles_per_rdbd,
    external_bandwidth_bytes_per_s,
    gemm_functional,
    roofline_seconds,
)

SPEC = load_spec("HBM3_Duplex")
ONE = load_spec("HBM3_Duplex", overrides={"org.channels": 1})


@pytest.fixture(scope="module")
def timer():
    return LogicPimTimer(max_sim_rows=64)


def test_bundles_are_8_banks_2_per_bank_group_4_per_pseudochannel():
    lv = SPEC.levels.index("bundle")
    node = SPEC.node_of[:, lv]
    pch = SPEC.node_of[:, SPEC.levels.index("pseudochannel")]
    bg = SPEC.node_of[:, SPEC.levels.index("bankgroup")]
    for b in np.unique(node):
        banks = np.nonzero(node == b)[0]
        assert len(banks) == 8
        assert len(np.unique(pch[banks])) == 1
        assert np.bincount(bg[banks] - bg[banks].min()).tolist() == [2, 2, 2, 2]
    assert len(np.unique(node)) == 4 * SPEC.channels * SPEC.counts[1]
    spaces = bundle_of_bank(SPEC)
    assert [int(spaces[bundle_bank(SPEC, 3, 1, s)]) for s in range(4)] == [0, 1, 2, 3]


def test_bandwidths_and_op_b():
    cfg = LogicPimConfig.load()
    ext = external_bandwidth_bytes_per_s(SPEC) * 5
    assert ext == pytest.approx(3.41e12, rel=0.01)                     # H100 class, 5 stacks
    assert bundle_bandwidth_bytes_per_s(SPEC) == pytest.approx(4 * external_bandwidth_bytes_per_s(SPEC))
    assert cfg.flops_per_s == pytest.approx(21.3e12, rel=0.01)         # 32 x 512 MACs at 650 MHz
    assert cfg.flops_per_s / bundle_bandwidth_bytes_per_s(SPEC) == pytest.approx(8, rel=0.05)


def test_energy_per_bit_of_the_two_paths():
    e = dram_action_energy_pj(SPEC)
    assert e["RD"] / (32 * 8) == pytest.approx(3.48)
    assert e["RDBD"] / (8 * 32 * 8) == pytest.approx(1.81)
    assert e["ACT"] == pytest.approx(909, rel=1e-6)
    assert e["ACTBD"] == pytest.approx(8 * 909, rel=1e-6)


def _run(cmds_by_source, xpu_requests=None, refresh="none"):
    sources = [{"name": s, "kind": "stream"} for s in cmds_by_source]
    if xpu_requests is not None:
        sources.append({"name": "xpu", "kind": "rw"})
    ms = MemorySystem(ONE, {"refresh": refresh}, sources=sources, arbitration="frfcfs", log=True)
    for name, (cmd, bank, row, col) in cmds_by_source.items():
        ms.enqueue_stream(name, 0, cmd, bank, row=row, column=col)
    if xpu_requests is not None:
        port = ms.add_port("xpu")
        bank, row, col = xpu_requests
        ms.enqueue_requests(port, 0, bank, row, col, 0, np.arange(len(bank)), -1)
    ms.run()
    log = ms.command_log()
    bad = check_log(ONE, log)
    assert not bad, "\n".join(str(v) for v in bad[:5])
    return log


def _stream(segments, pch=0, m=1):
    cmd, bank, row, col, _ = bundle_stream(ONE, LogicPimConfig.load(), segments, 0, pch, stack=SPEC)
    return cmd, bank, row, col


def test_bundle_reads_every_tccd_l_and_the_tsvs_carry_one_bundle_per_pseudochannel():
    log = _run({"pim0": _stream([Segment(0, 2, 1), Segment(1, 2, 1)], pch=0)})
    rd = log[log.command == "RDBD"]
    gaps = np.diff(rd.cycle.to_numpy())
    assert gaps.min() == ONE.timing["nCCDL"]          # never closer than tCCD_L on one pseudo-channel
    # both pseudo-channels of the channel stream at once: their reads interleave at full rate each
    log2 = _run({"pim0": _stream([Segment(0, 2, 1)], pch=0), "pim1": _stream([Segment(0, 2, 1)], pch=1)})
    per = [log2[(log2.command == "RDBD") & (log2.pseudochannel == p)].cycle.to_numpy() for p in (0, 1)]
    assert all(np.diff(p).min() == ONE.timing["nCCDL"] for p in per)
    assert abs(int(per[0][-1]) - int(per[1][-1])) <= ONE.timing["nCCDL"]


def test_logic_pim_path_is_4x_the_xpu_path_on_a_long_stream(timer):
    rows = 48
    t = timer.time([Segment(0, rows // 2, 1), Segment(1, rows // 2, 1)])
    per_pch = rows * 8192 / (t.cycles * SPEC.tCK_s)
    ext_per_pch = external_bandwidth_bytes_per_s(SPEC) / 32
    assert 0.85 * 4 * ext_per_pch <= per_pch <= 4 * ext_per_pch
    # one space only: the bundle's own precharge and activate sit between its rows (no other bundle to
    # overlap them with), so it is measurably slower
    t1 = timer.time([Segment(0, rows, 1)])
    assert t1.cycles > 1.15 * t.cycles


def test_gemm_modules_pace_the_stream(timer):
    rows = 16
    mem = timer.time([Segment(0, rows, 1)]).cycles
    c32 = compute_cycles_per_rdbd(SPEC, timer.cfg, 32)
    slow = timer.time([Segment(0, rows, 32)]).cycles
    assert slow == pytest.approx(rows * 32 * c32, rel=0.03)     # compute bound: Op/B 32 > 8
    assert slow > 2.5 * mem                                        # 4.1x the read cadence, minus row overheads
    assert timer.time([Segment(0, rows, 2)]).cycles == pytest.approx(mem, rel=0.02)   # memory bound


def test_linear_extension_matches_a_full_simulation():
    """Streams longer than max_sim_rows are extended from two simulated sizes; refresh makes the stream only
    roughly periodic, so the extension is checked against the full simulation (measured error < 1 %)."""
    small = LogicPimTimer(max_sim_rows=256)
    full = LogicPimTimer(max_sim_rows=100_000)
    segs = [Segment(0, 350, 1), Segment(1, 350, 4)]
    a, b = small.time(segs), full.time(segs)
    assert a.cycles == pytest.approx(b.cycles, rel=0.015)
    assert a.counts["RDBD"] == b.counts["RDBD"]


@settings(max_examples=8, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(1, 6), st.integers(0, 40)), min_size=1, max_size=3))
def test_engine_time_is_never_below_the_roofline(segs):
    timer = _SHARED
    segments = [Segment(s, r, m) for s, r, m in segs]
    t = timer.time(segments).cycles * SPEC.tCK_s
    nbytes = sum(s.rows for s in segments) * 8192 * 32                 # per stack
    flops = sum(2 * s.m * s.rows * 8192 // 2 for s in segments) * 32
    assert t >= roofline_seconds(SPEC, timer.cfg, flops, nbytes) * 0.999


_SHARED = LogicPimTimer(max_sim_rows=64)


def test_xpu_on_other_bundles_runs_beside_logic_pim_without_conflicts():
    """Co-processing layout: Logic-PIM streams spaces 0 and 1 while the xPU reads rows of spaces 2 and 3 of
    the same pseudo-channel; the checker passes and no xPU command touches a held bundle."""
    pim = _stream([Segment(0, 3, 1), Segment(1, 3, 1)])
    xbanks = np.array([bundle_bank(ONE, 0, 0, 2 + i % 2, bankgroup=i // 2 % 4) for i in range(64)])
    log = _run({"pim0": pim}, xpu_requests=(xbanks, np.full(64, 5), np.arange(64) % 32))
    assert (log.source == "xpu").sum() > 64
    assert bundle_conflicts(ONE, log, ("pim0",), ("xpu",)) == []


def test_conflict_check_finds_an_xpu_access_to_a_held_bundle():
    pim = _stream([Segment(0, 3, 1)])
    xbanks = np.array([bundle_bank(ONE, 0, 0, 0, bankgroup=1)] * 8)        # inside the PIM's bundle
    log = _run({"pim0": pim}, xpu_requests=(xbanks, np.full(8, 1), np.arange(8)))
    assert bundle_conflicts(ONE, log, ("pim0",), ("xpu",))
    # and the conflict rows keep the two paths a bank-group column cycle apart on that bundle
    lv = ONE.levels.index("bundle")
    x = log[(log.source == "xpu") & log.command.isin(["RD", "RDA"])]
    p = log[log.command == "RDBD"]
    assert len(x) == 8
    xb = ONE.node_of[_bank_ids(ONE, x), lv]
    pb = ONE.node_of[_bank_ids(ONE, p), lv]
    pc = p.cycle.to_numpy()
    for c, b in zip(x.cycle, xb, strict=True):
        before, after = pc[(pb == b) & (pc <= c)], pc[(pb == b) & (pc >= c)]
        assert not len(before) or c - before.max() >= ONE.timing["nCCDL"]
        assert not len(after) or after.min() - c >= ONE.timing["nCCDL"]


def test_functional_gemm_matches_numpy():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 64)).astype(np.float32)
    w = rng.standard_normal((64, 48)).astype(np.float32)
    ref = x.astype(np.float16).astype(np.float64) @ w.astype(np.float16).astype(np.float64)
    for split in ("columns", "rows"):
        np.testing.assert_allclose(gemm_functional(x, w, 5, split), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("arbitration,refresh", [("frfcfs", "allbank"), ("priority", "perbank"),
                                                 ("frfcfs", "none")])
def test_kernel_matches_the_reference_scheduler_on_bundle_streams(arbitration, refresh):
    """hbm3_duplex is the first standard with a group level (bundles): the numba kernel and the independent
    reference scheduler agree cycle for cycle on Logic-PIM streams of both pseudo-channels beside xPU reads
    and writes to the bundles the layout leaves to the xPU, under refresh."""
    from archsim.engine.reference import ReferenceController

    # all-bank refresh every 600 ns so the short run sees several; per-bank refresh at the preset's tREFI (at
    # 600 ns a bank of every bundle would always be inside its nRFCpb and no ACTBD could ever issue)
    over = {"org.channels": 1, **({"timing.tREFI_ns": 600} if refresh == "allbank" else {})}
    spec = load_spec("HBM3_Duplex", overrides=over)
    logs = []
    for cls in (MemorySystem, ReferenceController):
        eng = cls(spec, controller={"refresh": refresh}, sources=[{"name": "pim0", "kind": "stream"},
                  {"name": "pim1", "kind": "stream"}, {"name": "xpu", "kind": "rw"}],
                  arbitration=arbitration, log=True)
        rows = {"none": 2, "allbank": 8, "perbank": 12}[refresh]
        for p, segs in ((0, [Segment(0, rows, 1), Segment(1, rows, 1)]), (1, [Segment(2, rows + 1, 1)])):
            cmd, bank, row, col, _ = bundle_stream(spec, LogicPimConfig.load(), segs, 0, p, stack=SPEC)
            eng.enqueue_stream(f"pim{p}", 0, cmd, bank, row=row, column=col)
        port = eng.add_port("xpu")
        r = np.random.default_rng(7)
        n = 48
        space = bundle_of_bank(spec)
        pch = np.arange(spec.banks_per_channel) // (spec.banks_per_channel // 2)
        free = np.nonzero(((pch == 0) & (space >= 2)) | ((pch == 1) & (space != 2)))[0]
        banks = r.choice(free, n)
        eng.enqueue_requests(port, 0, banks, r.integers(0, 4, n), r.integers(0, 32, n), r.integers(0, 2, n),
                             np.sort(r.integers(0, 300, n)), -1)
        eng.run()
        logs.append(eng.command_log().reset_index(drop=True))
    a, b = logs
    cols = ["cycle", "command", "pseudochannel", "rank", "bankgroup", "bank", "row", "column", "source"]
    assert len(a) == len(b)
    assert (a[cols].astype(str).to_numpy() == b[cols].astype(str).to_numpy()).all()
    assert not check_log(spec, a)
    assert (a.command == "RDBD").sum() == (3 * rows + 1) * 32
    assert (a.command.isin(["REFab", "REFpb"])).sum() >= (0 if refresh == "none" else 2)
