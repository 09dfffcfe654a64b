"""Directed, hand-checked tests of the reference scheduler (archsim.engine.reference) against
docs/channel-engine.md. Every expected cycle below is derived in the comments from the preset's timing
(DDR4-3200: nRCD 22, nRAS 52, nRP 22, nRTP 12, nCCDS 4, nCCDL 8, nRRDS 4, nCL 22, nCWL 16, nBL 4, nWR 24,
nWTRS 4); every log the reference emits must pass the independent checker.
"""
from __future__ import annotations

import numpy as np
import pytest

from archsim.dram.checker import check_log
from archsim.dram.spec import load_spec
from archsim.engine.reference import SEG_END, SEG_START, ReferenceController

DDR4 = load_spec("DDR4_3200AA_x8_8Gb")
T = DDR4.timing
RD_LAT = T["nCL"] + T["nBL"]
WR_LAT = T["nCWL"] + T["nBL"]


def run(spec, ref: ReferenceController) -> list[tuple[int, str, int, str]]:
    """Run, check the log with the independent checker, return (cycle, command, global bank, source) rows."""
    assert ref.run(max_cycles=100_000), "did not finish"
    log = ref.command_log()
    violations = check_log(spec, log)
    assert violations == [], [str(v) for v in violations[:5]]
    bank = np.zeros(len(log), dtype=np.int64)
    for col, n in zip(["channel", "pseudochannel", "rank", "bankgroup", "bank"], spec.counts, strict=True):
        bank = bank * n + log[col].to_numpy()
    return list(zip(log["cycle"].tolist(), log["command"].tolist(), bank.tolist(), log["source"].tolist(),
                    strict=True))


def requests(ref, port, items):
    """items: (bank, row, kind, arrive, tag) tuples, channel 0, column 0."""
    a = np.array(items, dtype=np.int64).reshape(-1, 5)
    ref.enqueue_requests(port, 0, a[:, 0], a[:, 1], 0, a[:, 2], a[:, 3], a[:, 4])


def cmds(log, names=None):
    return [(c, n, b) for c, n, b, _ in log if names is None or n in names]


def test_frfcfs_serves_row_hits_first():
    ref = ReferenceController(DDR4, {"refresh": "none"})
    p = ref.add_port()
    requests(ref, p, [(0, 1, 0, 0, -1), (0, 2, 0, 1, -1), (0, 1, 0, 2, -1)])
    log = run(DDR4, ref)
    # ACT row 1 at 0; RD (oldest hit, request 0) at nRCD; the younger hit (request 2) passes request 1 (a
    # conflict) nCCDL later; PRE at ACT + nRAS (> RD + nRTP); ACT row 2 nRP later; its RD nRCD after that
    rd2 = T["nRCD"] + T["nCCDL"]
    pre = max(T["nRAS"], rd2 + T["nRTP"])
    assert cmds(log) == [(0, "ACT", 0), (T["nRCD"], "RD", 0), (rd2, "RD", 0), (pre, "PRE", 0),
                         (pre + T["nRP"], "ACT", 0), (pre + T["nRP"] + T["nRCD"], "RD", 0)]
    assert ref.request_done.tolist() == [T["nRCD"] + RD_LAT, pre + T["nRP"] + T["nRCD"] + RD_LAT, rd2 + RD_LAT]
    assert ref.request_class.tolist() == [1, 2, 0]     # miss, conflict, hit


def test_write_drain_watermarks():
    """write_queue 4: high = 3, low = 1. Three writes and four reads arrive at 0: qlen_w >= high -> write mode
    first; after two WRs qlen_w = 1 <= low with reads waiting -> read mode; the last write waits until the
    read queue is empty."""
    ref = ReferenceController(DDR4, {"refresh": "none", "write_queue": 4, "write_high_watermark": 0.75,
                                     "write_low_watermark": 0.25})
    p = ref.add_port(width=8)
    requests(ref, p, [(4, 1, 0, 0, -1)] * 4 + [(0, 1, 1, 0, -1)] * 3)
    log = run(DDR4, ref)
    wr1 = T["nRCDWR"] if "nRCDWR" in T else T["nRCD"]
    wr2 = wr1 + T["nCCDL"]
    act4 = wr2 + 1                                        # read mode from the step after the 2nd WR
    rd1 = max(act4 + T["nRCD"], wr2 + T["nCWL"] + T["nBL"] + T["nWTRS"])   # ACT->RD, rank WR->RD
    rds = [rd1 + i * T["nCCDL"] for i in range(4)]
    rdwr = max(1, T["nCL"] + T["nBL"] + T["nRTRS"] - T["nCWL"])
    wr3 = max(rds[-1] + 1, rds[-1] + rdwr)                # write mode once the read queue is empty
    assert cmds(log) == ([(0, "ACT", 0), (wr1, "WR", 0), (wr2, "WR", 0), (act4, "ACT", 4)]
                         + [(c, "RD", 4) for c in rds] + [(wr3, "WR", 0)])


def test_closed_row_policy_auto_precharges_the_last_hit():
    ref = ReferenceController(DDR4, {"refresh": "none", "row_policy": "closed"})
    p = ref.add_port(width=2)
    requests(ref, p, [(0, 1, 0, 0, -1), (0, 1, 0, 0, -1), (0, 1, 0, 100, -1)])
    log = run(DDR4, ref)
    # two hits: RD (not the only hit), then RDA (the only one left); the third read finds the bank closed
    rda = T["nRCD"] + T["nCCDL"]
    act2 = max(100, rda + T["nRTP"] + T["nRP"], T["nRAS"] + T["nRP"])     # arrival, nRDAACT, nRC
    assert cmds(log) == [(0, "ACT", 0), (T["nRCD"], "RD", 0), (rda, "RDA", 0), (act2, "ACT", 0),
                         (act2 + T["nRCD"], "RDA", 0)]
    assert ref.request_class.tolist() == [1, 0, 1]


def test_refresh_at_nrefi_on_an_idle_device():
    spec = load_spec("DDR4_3200AA_x8_8Gb", overrides={"timing.nREFI": 1000})
    t = spec.timing
    ref = ReferenceController(spec, {"refresh": "allbank"})
    p = ref.add_port()
    # one read at 0 leaves its row open: the first refresh closes it (PREA) and refreshes nRP later; a read
    # arriving just after the second refresh waits nRFC for its ACT
    requests(ref, p, [(3, 1, 0, 0, -1), (3, 1, 0, 2010, -1)])
    log = run(spec, ref)
    act = 2000 + t["nRFC"]
    assert cmds(log) == [(0, "ACT", 3), (t["nRCD"], "RD", 3), (1000, "PREA", 0), (1000 + t["nRP"], "REFab", 0),
                         (2000, "REFab", 0), (act, "ACT", 3), (act + t["nRCD"], "RD", 3)]
    assert [s for *_, s in log][2:5] == ["refresh"] * 3


def test_per_bank_refresh_round_robin():
    spec = load_spec("DDR4_3200AA_x8_8Gb", overrides={"timing.nREFI": 1600})   # nREFIpb = 100
    t = spec.timing
    assert t["nREFIpb"] == 100
    ref = ReferenceController(spec, {"refresh": "perbank"})
    p = ref.add_port()
    requests(ref, p, [(1, 1, 0, 450, -1)])
    log = run(spec, ref)
    # REFpb every nREFIpb to banks 0, 1, 2, ...; the read to bank 1 waits nRFCpb after bank 1's refresh
    act = max(450, 200 + t["nRFCpb"])
    refs = [(100 * (i + 1), "REFpb", i) for i in range(act // 100)]
    assert cmds(log) == sorted(refs + [(act, "ACT", 1), (act + t["nRCD"], "RD", 1)])


def test_aim_all_bank_stream_issues_each_command_at_its_tight_gate():
    spec = load_spec("GDDR6_AiM_16Gbps", overrides={"org.channels": 1})
    t = spec.timing
    ref = ReferenceController(spec, {"refresh": "none"}, sources=[{"name": "pim", "kind": "stream"}])
    c = spec.cmd
    seq = ([(c("ACTAB"), 3, -1, SEG_START)] + [(c("MACAB"), 3, i, 0) for i in range(4)] + [(c("PREAB"), -1, -1, 0)]
           + [(c("RDMAC"), -1, j, 0) for j in range(2)] + [(c("ACTAB"), 4, -1, 0), (c("MACAB"), 4, 0, SEG_END)])
    a = np.array(seq)
    tags = np.where(a[:, 0] == c("RDMAC"), np.arange(len(a)), -1)
    ref.enqueue_stream("pim", 0, a[:, 0], 0, a[:, 1], a[:, 2], flags=a[:, 3], tag=tags)
    log = run(spec, ref)
    mac = [t["nRCDRDMAC"] + i * t["nCCDL"] for i in range(4)]        # ACTAB -> MACAB, then MACAB -> MACAB
    preab = max(t["nRAS"], mac[-1] + t["nRTP"])                       # ACTAB -> PREAB, MACAB -> PREAB
    rdmac = [mac[-1] + t["nMACRD"], mac[-1] + t["nMACRD"] + t["nBL"]]  # accumulator drain, then the burst
    actab2 = max(preab + t["nRP"], t["nRC"], 4 * t["nFAW"])          # nFAWAB = 4 nFAW binds
    assert cmds(log) == ([(0, "ACTAB", 0)] + [(m, "MACAB", 0) for m in mac] + [(preab, "PREAB", 0)]
                         + [(r, "RDMAC", 0) for r in rdmac] + [(actab2, "ACTAB", 0),
                                                               (actab2 + t["nRCDRDMAC"], "MACAB", 0)])
    assert ref.completions() == [(6, rdmac[0] + t["nCL"] + t["nBL"]), (7, rdmac[1] + t["nCL"] + t["nBL"])]


def test_aim_stream_restores_its_row_after_refresh():
    spec = load_spec("GDDR6_AiM_16Gbps", overrides={"org.channels": 1, "timing.nREFI": 600})
    t = spec.timing
    ref = ReferenceController(spec, {"refresh": "allbank"}, sources=[{"name": "pim", "kind": "stream"}])
    n = 300
    cmd = np.array([spec.cmd("ACTAB")] + [spec.cmd("MACAB")] * n)
    ref.enqueue_stream("pim", 0, cmd, 0, 3, np.r_[-1, np.arange(n) % spec.columns])
    log = run(spec, ref)
    macs = [c for c, name, _, _ in log if name == "MACAB"]
    before = [m for m in macs if m < 600]
    assert before == [t["nRCDRDMAC"] + 2 * i for i in range(len(before))] and before[-1] + t["nCCDL"] >= 600
    prea = max(600, before[-1] + t["nRTP"])            # refresh pending at nREFI: close (PREA), MACAB -> PREA
    refab = prea + t["nRP"]
    actab = refab + t["nRFC"]                          # the restore: the stream's last open again
    after = [x for x in log if x[0] >= 600]
    assert after[:4] == [(prea, "PREA", 0, "refresh"), (refab, "REFab", 0, "refresh"), (actab, "ACTAB", 0, "pim"),
                         (actab + t["nRCDRDMAC"], "MACAB", 0, "pim")]
    assert ref.command_log()["row"][ref.command_log()["command"] == "ACTAB"].tolist() == [3, 3]
    assert len(macs) == n


def test_dual_buffer_pim_stream_and_reads_share_banks():
    """HBM2_2Gbps_DualRB: PACT row 5 in every bank's pim buffer, COMP x3, RDRES, PPREA, while reads hit row 9
    of bank 0 through its mem buffer; a read of row 5 in bank 0 may only activate once the pim buffer let
    row 5 go (a row is never open in two buffers of one bank)."""
    spec = load_spec("HBM2_2Gbps_DualRB", overrides={"org.channels": 1})
    ref = ReferenceController(spec, {"refresh": "none"},
                              sources=[{"name": "mem", "kind": "rw"}, {"name": "pim", "kind": "stream"}])
    p = ref.add_port("mem", width=1)
    requests(ref, p, [(0, 9, 0, 0, -1), (0, 9, 0, 40, -1), (0, 9, 0, 80, -1), (0, 5, 0, 120, -1)])
    c = spec.cmd
    nb = spec.banks_per_channel
    stream = ([(c("PACT"), b, 5, -1) for b in range(nb)] + [(c("COMP"), 0, 5, i) for i in range(3)]
              + [(c("RDRES"), 0, -1, 0), (c("PPREA"), 0, -1, -1)])
    a = np.array(stream)
    ref.enqueue_stream("pim", 0, a[:, 0], a[:, 1], a[:, 2], a[:, 3])
    log = run(spec, ref)
    first_pact = min(x[0] for x in log if x[1] == "PACT")
    ppre = next(x[0] for x in log if x[1] == "PPREA")
    rd9 = [x[0] for x in log if x[1] == "RD" and x[0] < ppre]
    assert len(rd9) == 3 and rd9[-1] > first_pact          # the mem-buffer reads ran alongside the pim rows
    assert not [x for x in log if x[1] in ("PRE", "PREA") and x[3] == "pim"]   # the stream never closed mem
    acts = [x[0] for x in log if x[1] == "ACT"]
    # row 9 is activated after PACT bank 0 (the stream's open head reserves its banks); row 5 only after PPREA
    assert len(acts) == 2 and acts[0] == spec.timing["nRRDL"] and acts[1] > ppre
    assert ref.request_class.tolist() == [1, 0, 0, 2]


def test_rmw_reads_then_writes_after_alu_latency_with_the_bank_pinned():
    ref = ReferenceController(DDR4, {"refresh": "none"}, alu_latency=4)
    p = ref.add_port()
    # rmw to bank 0 row 1 at 0; a read of row 2 in bank 0 at 30 (after the RD) must not precharge the
    # pinned bank before the WR
    requests(ref, p, [(0, 1, 2, 0, 7), (0, 2, 0, 30, 8)])
    log = run(DDR4, ref)
    rd = T["nRCD"]
    wr = max(rd + RD_LAT + 4, rd + max(1, T["nCL"] + T["nBL"] + T["nRTRS"] - T["nCWL"]))
    pre = max(wr + T["nCWL"] + T["nBL"] + T["nWR"], T["nRAS"])          # nWRPRE
    assert cmds(log) == [(0, "ACT", 0), (rd, "RD", 0), (wr, "WR", 0), (pre, "PRE", 0),
                         (pre + T["nRP"], "ACT", 0), (pre + T["nRP"] + T["nRCD"], "RD", 0)]
    done = [wr + WR_LAT, pre + T["nRP"] + T["nRCD"] + RD_LAT]
    assert ref.request_done.tolist() == done
    assert ref.completions() == [(7, done[0]), (8, done[1])]


# two rw sources on their own banks: B's requests are older (its port is made first). Both open a row at 0;
# at 200 B gets two hits on its open row and A a read to a closed bank. (See each policy's derivation.)
ARB_EXPECT = {
    # oldest column candidate first, then the oldest row candidate
    "frfcfs": [(0, "ACT", 4), (4, "ACT", 0), (22, "RD", 4), (26, "RD", 0), (200, "RD", 4), (201, "ACT", 8),
               (208, "RD", 4), (223, "RD", 8)],
    # A (rank 0) first whenever it has a ready candidate; B fills the cycles A cannot use
    "priority": [(0, "ACT", 0), (4, "ACT", 4), (22, "RD", 0), (26, "RD", 4), (200, "ACT", 8), (201, "RD", 4),
                 (209, "RD", 4), (222, "RD", 8)],
    # B only while A has fewer than 1 queued request (then nCCDS after A's RD)
    "threshold": [(0, "ACT", 0), (22, "RD", 0), (23, "ACT", 4), (45, "RD", 4), (200, "ACT", 8), (222, "RD", 8),
                  (226, "RD", 4), (234, "RD", 4)],
    # A is active until it runs dry (after its RD at 22), then B, which is still active at 200
    "blocked": [(0, "ACT", 0), (22, "RD", 0), (23, "ACT", 4), (45, "RD", 4), (200, "RD", 4), (208, "RD", 4),
                (209, "ACT", 8), (231, "RD", 8)],
}


@pytest.mark.parametrize("policy", sorted(ARB_EXPECT))
def test_arbitration_policies(policy):
    ref = ReferenceController(DDR4, {"refresh": "none"}, sources=[{"name": "A", "kind": "rw"},
                                                                  {"name": "B", "kind": "rw"}],
                              arbitration=policy, threshold=1)
    pb = ref.add_port("B", width=2)
    pa = ref.add_port("A", width=2)
    requests(ref, pb, [(4, 1, 0, 0, -1), (4, 1, 0, 200, -1), (4, 1, 0, 200, -1)])
    requests(ref, pa, [(0, 1, 0, 0, -1), (8, 1, 0, 200, -1)])
    log = run(DDR4, ref)
    assert cmds(log) == ARB_EXPECT[policy]
    assert all(s == ("A" if b in (0, 8) else "B") for _, _, b, s in log)


@pytest.mark.parametrize("cap", [0, 50])
def test_starvation_cap_promotes_a_waiting_source(cap):
    """priority: A (rank 0) reads round robin from three bank groups, one RD every nCCDS, so B's RD (same
    rank) is only ever ready in cycles A also uses. Without a cap B waits until A is done; with cap 50 B is
    promoted 50 cycles after it first lost with a ready RD, and issues then."""
    ref = ReferenceController(DDR4, {"refresh": "none"}, sources=[{"name": "A", "kind": "rw"},
                                                                  {"name": "B", "kind": "rw"}],
                              arbitration="priority", starvation_cap=cap)
    pa = ref.add_port("A", width=1)
    pb = ref.add_port("B", width=1)
    requests(ref, pa, [((0, 8, 12)[i % 3], 1, 0, 0, -1) for i in range(30)])
    requests(ref, pb, [(4, 1, 0, 0, -1)])
    log = run(DDR4, ref)
    a_rds = [c for c, n, b, s in log if s == "A" and n == "RD"]
    b_act, b_rd = (c for c, n, b, s in log if s == "B")
    # A's ACTs at 0, nRRDS, 2 nRRDS; B's ACT in the first free cycle after; A's RDs from nRCD every nCCDS
    assert a_rds[:3] == [T["nRCD"], T["nRCD"] + T["nCCDS"], T["nRCD"] + 2 * T["nCCDS"]]
    if cap == 0:
        assert b_rd == a_rds[-1] + T["nCCDS"]
    else:
        first_lost = min(c for c in a_rds if c >= b_act + T["nRCD"])    # B ready but A wins
        promoted = first_lost + cap
        # the first cycle of A's nCCDS cadence at or after the promotion (B is not ready in between)
        cadence = a_rds[0] + T["nCCDS"] * -(-(promoted - a_rds[0]) // T["nCCDS"])
        assert b_rd == cadence and first_lost == 34 and b_rd == 86
        assert b_rd < a_rds[-1]


@pytest.mark.parametrize("active_buffer", [False, True])
def test_active_buffer_pins_a_request_from_its_act_to_its_column_command(active_buffer):
    """A write alone at 0 (write mode) gets its ACT; a read of another row of the bank at 1 switches to read
    mode. Without active_buffer the read's PRE closes the write's row first; with it the write is pinned
    from its ACT and its WR issues before the PRE."""
    ref = ReferenceController(DDR4, {"refresh": "none"}, active_buffer=active_buffer)
    p = ref.add_port()
    requests(ref, p, [(0, 1, 1, 0, -1), (0, 2, 0, 1, -1)])
    log = run(DDR4, ref)
    rcd, ras, rp = T["nRCD"], T["nRAS"], T["nRP"]
    if active_buffer:
        wr = rcd
        pre = max(ras, wr + T["nCWL"] + T["nBL"] + T["nWR"])
        expect = [(0, "ACT", 0), (wr, "WR", 0), (pre, "PRE", 0), (pre + rp, "ACT", 0), (pre + rp + rcd, "RD", 0)]
        classes = [1, 2]
    else:
        rd = ras + rp + rcd
        pre2 = max(ras + rp + ras, rd + T["nRTP"])
        expect = [(0, "ACT", 0), (ras, "PRE", 0), (ras + rp, "ACT", 0), (rd, "RD", 0), (pre2, "PRE", 0),
                  (pre2 + rp, "ACT", 0), (pre2 + rp + rcd, "WR", 0)]
        classes = [2, 2]
    assert cmds(log) == expect
    assert ref.request_class.tolist() == classes


def test_same_cycle_order_channels_then_column_then_row():
    """Two channels issue in one cycle: channel 0 first. On HBM2's dual bus a column and a row command of
    one channel in one cycle are logged column first."""
    spec = load_spec("HBM2_2Gbps_PC", overrides={"org.channels": 2})
    t = spec.timing
    ref = ReferenceController(spec, {"refresh": "none"})
    p = ref.add_port(width=4)
    per_ch = spec.banks_per_channel
    a = np.array([(1, per_ch + 0, 1), (0, 0, 1), (0, 4, 1)])       # (channel, bank, row)
    ref.enqueue_requests(p, a[:, 0], a[:, 1], a[:, 2], 0, 0, [0, 0, t["nRCDRD"]], -1)
    log = run(spec, ref)
    assert cmds(log) == [(0, "ACT", 0), (0, "ACT", per_ch), (t["nRCDRD"], "RD", 0), (t["nRCDRD"], "ACT", 4),
                         (t["nRCDRD"], "RD", per_ch), (2 * t["nRCDRD"], "RD", 4)]


@pytest.mark.parametrize("mode", ["split", "wait"])
def test_stream_refresh_admission(mode):
    """A segment (SEG_START, est 400) enqueued at 700 with the refresh due at 1000: `split` starts it at
    once; `wait` holds it until the refresh has issued and the next due is far enough."""
    spec = load_spec("GDDR6_AiM_16Gbps", overrides={"org.channels": 1, "timing.nREFI": 1000})
    t = spec.timing
    ref = ReferenceController(spec, {"refresh": "allbank"}, sources=[{"name": "pim", "kind": "stream"}],
                              stream_refresh=mode)
    c = spec.cmd
    ref.enqueue_stream("pim", 0, [c("ACTAB"), c("MACAB"), c("PREAB")], 0, [3, 3, -1], [-1, 0, -1],
                       flags=[SEG_START, 0, SEG_END], est=[400, 0, 0], at=700)
    log = run(spec, ref)
    actab = 700 if mode == "split" else 1000 + t["nRFC"]
    assert [x for x in cmds(log) if x[1] == "ACTAB"] == [(actab, "ACTAB", 0)]
    assert (1000, "REFab", 0) in cmds(log) or mode == "split"
