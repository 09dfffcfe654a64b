"""NeuPIMs attention GEMVs on PIM (archsim.systems.neupims.compiler): command counts follow the layout, the channel
engine runs the streams checker-clean within NeuPIMs' own length estimate, PIM attention overlaps NPU
traffic with dual row buffers and not in the blocked single-buffer baseline, and no GEMV crosses a refresh."""
from __future__ import annotations

import math

import numpy as np
import pytest

from archsim.dram.checker import check_log
from archsim.dram.spec import load_spec
from archsim.engine.memory import MemorySystem
from archsim.systems.neupims.compiler import AttentionCompiler, Stream

DK = 128


def _spec(name="NeuPIMs_HBM2_Dual"):
    return load_spec(name, overrides={"org.channels": 1})


def _run(spec, stream, ctrl=None, npu_reads=0, arbitration="priority", stream_refresh="split"):
    sources = [{"name": "pim", "kind": "stream"}] + ([{"name": "npu", "kind": "rw"}] if npu_reads else [])
    ms = MemorySystem(spec, ctrl or {"refresh": "none"}, sources=sources, arbitration=arbitration,
                      stream_refresh=stream_refresh, log=True)
    if npu_reads:
        port = ms.add_port("npu")
        i = np.arange(npu_reads)
        # NPU weight reads: rows 5000.. of every bank, sequential columns (a GEMM's DMA), all queued at 0
        ms.enqueue_requests(port, 0, i % 32, 5000 + i // (32 * 16), i // 32 % 16, 0, 0, -1)
    cmd, bank, row, flags, est = stream.arrays()
    ms.enqueue_stream("pim", 0, cmd, bank, row=row, column=-1, flags=flags, est=est)
    end = ms.run()
    log = ms.command_log()
    assert not check_log(spec, log)
    return end, log


@pytest.mark.parametrize("context", [32, 200, 1024])
def test_command_counts_follow_the_layout(context):
    spec = _spec()
    ac = AttentionCompiler(spec, DK)
    heads = 3
    lg, at = ac.decode_step([context], heads)
    B = spec.banks_per_channel
    rounds = math.ceil(context / B)
    assert lg.count(spec.cmd("COMP")) == heads * rounds * DK // 16
    assert lg.count(spec.cmd("READRES")) == heads * rounds
    row_sets = math.ceil(rounds / (512 // DK))
    assert lg.count(spec.cmd("G_ACT")) == heads * row_sets * 8            # 2 ranks x 4 bank groups
    chunks, blocks = math.ceil(context / 512), math.ceil(DK / B)
    # a chunk's GEMV takes as many COMPs as it has scores / 16: a short last chunk fewer (NeuPIMSAttend.cc:171-174)
    scores_per_comp = [math.ceil(min(512, context - c * 512) / 16) for c in range(chunks)]
    assert at.count(spec.cmd("COMP")) == heads * blocks * sum(scores_per_comp)
    assert at.count(spec.cmd("READRES")) == heads * chunks * blocks
    assert at.count(spec.cmd("GWRITE")) == heads * chunks                 # one chunk of s per GWRITE
    # one admission segment per row set (NeuPIMs' PIM_HEADER covers one tile)
    for s in (lg, at):
        flags = s.arrays()[3]
        assert (flags & 1).sum() == s.count(spec.cmd("PIM_PRE")) == (flags & 2 > 0).sum()


@pytest.mark.parametrize("heads", [4, 5])
def test_token_rows_layout_shares_each_row_set_among_a_query_chunks_heads(heads):
    """NeuPIMs' code layout: per 32 keys one row set per query chunk of 4 heads (dk 128 in 1 KB rows), a GEMV per
    head in it; with 5 heads the fifth opens a row of its own for every 32 keys (GPT3-13B at TP 8)."""
    spec = _spec()
    ac = AttentionCompiler(spec, DK)
    s = Stream()
    context = 100
    tiles = math.ceil(context / 32)
    for c, group in enumerate((range(0, 4), range(4, heads))):
        if len(group):
            ac.logits_token_rows(s, context, c, 1000 + c, len(group), row_stride=2)
    chunks = math.ceil(heads / 4)
    assert s.count(spec.cmd("GWRITE")) == chunks
    assert s.count(spec.cmd("PIM_PRE")) == chunks * tiles                        # row sets
    assert s.count(spec.cmd("READRES")) == heads * tiles
    assert s.count(spec.cmd("COMP")) == heads * tiles * DK // 16
    head_rows = Stream()
    for h in range(heads):
        ac.logits(head_rows, context, 0, 2000, head=h)
    # the head_rows layout opens one row set per head per 128 keys
    assert head_rows.count(spec.cmd("PIM_PRE")) == heads * math.ceil(tiles / 4)
    end_token, _ = _run(spec, s)
    end_head, _ = _run(spec, head_rows)
    if heads == 4:
        assert end_token <= end_head * 1.1          # the same activations, grouped differently
    else:
        assert end_token > end_head                 # the fifth head's own row sets


def test_per_bank_precharge_closes_every_bank_and_takes_longer():
    """pim_precharge per_bank (NeuPIMs' simulator): one PIM_PREb per bank ends a row set instead of one PIM_PRE;
    the checker accepts the stream and the row set takes longer (32 row-bus commands before the next G_ACT)."""
    spec = _spec()
    unit, per_bank = AttentionCompiler(spec, DK), AttentionCompiler(spec, DK, pim_precharge="per_bank")
    a, b = unit.decode_step([256], heads=4), per_bank.decode_step([256], heads=4)
    assert b[0].count(spec.cmd("PIM_PREb")) == 32 * a[0].count(spec.cmd("PIM_PRE"))
    assert b[0].count(spec.cmd("PIM_PRE")) == 0
    assert _run(spec, b[0])[0] > _run(spec, a[0])[0]
    with pytest.raises(ValueError, match="pim_precharge"):
        AttentionCompiler(spec, DK, pim_precharge="lazy")


def test_a_g_act_fills_the_ranks_four_activate_window():
    """A G_ACT opens the 4 banks of a group: the rank's next G_ACT or ACT waits nFAW (NewtonSim timing.cc:396-401)."""
    from archsim.dram import latency

    spec = _spec()
    assert latency.level_gap(spec, "G_ACT", "G_ACT", "rank") == spec.timing["nFAW"]
    assert latency.level_gap(spec, "G_ACT", "ACT", "rank") == spec.timing["nFAW"]
    ac = AttentionCompiler(spec, DK)
    s = Stream()
    ac._row_set(s, 5, [8])
    _end, log = _run(spec, s)
    gact = log[log.command == "G_ACT"]
    by_rank = gact.groupby("rank").cycle.apply(lambda c: c.diff().dropna().min())
    assert len(by_rank) == 2 and (by_rank == spec.timing["nFAW"]).all()
    # the ranks' windows run side by side: the compiler takes the ranks in turn
    assert gact.cycle.max() == 3 * spec.timing["nFAW"] + 1


def test_gemvs_run_within_neupims_estimate_and_above_the_compute_bound():
    spec = _spec()
    ac = AttentionCompiler(spec, DK)
    lg, at = ac.decode_step([1024, 300], heads=2)
    t = spec.timing
    for s in (lg, at):
        end, _ = _run(spec, s)
        cmd, _, _, _, est = s.arrays()
        comps = s.count(spec.cmd("COMP"))
        # row sets within their admission estimates, the GWRITEs (ACT, GWRITE, PRE on a staging bank) between them
        gwrites = s.count(spec.cmd("GWRITE")) * (t["nRCDRD"] + t["nGWRITE"] + t["nRP"])
        assert comps * t["nCOMP"] < end <= est.sum() + gwrites


def test_dual_row_buffers_overlap_attention_with_npu_traffic():
    """The NeuPIMs mechanism: with a PIM row buffer per bank, NPU reads and PIM attention share the channel;
    the blocked single-buffer baseline serves them one after the other."""
    ac_d = AttentionCompiler(_spec(), DK)
    lg, _ = ac_d.decode_step([512], heads=4)
    reads = 4096
    pim_alone, _ = _run(_spec(), lg)
    end_dual, log = _run(_spec(), lg, npu_reads=reads, arbitration="priority")
    single = _spec("NeuPIMs_HBM2_Single")
    lg1, _ = AttentionCompiler(single, DK).decode_step([512], heads=4)
    end_single, log1 = _run(single, lg1, npu_reads=reads, arbitration="blocked")
    assert end_dual < end_single
    # in the dual device NPU reads issue while PIM rows are open
    pim = log[log.source == "pim"]
    rd = log[(log.source == "npu") & (log.command == "RD")]
    assert ((rd.cycle > pim.cycle.min()) & (rd.cycle < pim.cycle.max())).sum() > reads // 4
    # dual: close to the longer of the two alone; blocked single-buffer: close to their sum
    npu_alone, _ = _run(_spec(), Stream(), npu_reads=reads)
    pim_alone1, _ = _run(single, lg1)
    assert max(pim_alone, npu_alone) <= end_dual < 0.8 * (pim_alone + npu_alone)
    assert end_single >= 0.95 * (pim_alone1 + npu_alone)


def test_no_gemv_crosses_a_refresh_when_admission_waits():
    spec = _spec()
    lg, _ = AttentionCompiler(spec, DK).decode_step([1024, 1024, 512], heads=4)
    end, log = _run(spec, lg, ctrl={"refresh": "allbank"}, stream_refresh="wait")
    cmd, _, _, flags, _ = lg.arrays()
    pim = log[log.source == "pim"].reset_index(drop=True)
    assert len(pim) == len(cmd)                    # nothing split: no restores
    starts = np.flatnonzero(flags & 1)
    ends = np.flatnonzero(flags & 2)
    refs = log[log.command == "REFab"].cycle.to_numpy()
    assert len(refs) > 0
    for s, e in zip(starts, ends, strict=True):
        a, b = pim.cycle[s], pim.cycle[e]
        assert not ((refs > a) & (refs < b)).any(), f"GEMV {s}..{e} spans a refresh"
