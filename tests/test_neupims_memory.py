"""NeuPIMs' memory on the channel engine: HBM2 with a PIM row buffer per bank (standard neupims) and the
single-buffer Newton baseline (neupims_single), driven as NeuPIMs drives them: a GEMV command stream (G_ACT
per bank group, k COMPs + READRES per head, PIM_PRE) beside NPU reads in the same channel."""
from __future__ import annotations

import numpy as np
import pytest

from archsim import energy
from archsim.dram.checker import check_log
from archsim.dram.spec import load_spec
from archsim.engine.channel import SEG_END, SEG_START
from archsim.engine.memory import MemorySystem

PIM_ROW = 300


def _spec(name: str):
    return load_spec(name, overrides={"org.channels": 1})


def _gemv(spec, heads: int, k: int, row: int = PIM_ROW):
    """Commands, target banks, rows and flags of one GEMV: G_ACT on each bank group of both pseudo-ranks,
    `heads` x (k COMP + READRES), PIM_PRE. The whole GEMV is one segment (NeuPIMs' PIM_HEADER)."""
    C = spec.cmd
    groups = [r * 16 + g * 4 for r in range(spec.counts[2]) for g in range(spec.counts[3])]
    cmds = [C("G_ACT")] * len(groups) + ([C("COMP")] * k + [C("READRES")]) * heads + [C("PIM_PRE")]
    banks = groups + [0] * (heads * (k + 1) + 1)
    rows = [row] * (len(cmds) - 1) + [-1]
    flags = np.zeros(len(cmds), dtype=np.int64)
    flags[0] |= SEG_START
    flags[-1] |= SEG_END
    return cmds, banks, rows, flags


def _clean(spec, ms):
    log = ms.command_log()
    bad = check_log(spec, log)
    assert not bad, "\n".join(str(v) for v in bad[:5])
    return log


def _run(preset: str, arbitration: str, reads: int = 64, heads: int = 8, k: int = 8):
    spec = _spec(preset)
    ms = MemorySystem(spec, {"refresh": "none"}, sources=[{"name": "pim", "kind": "stream"},
                                                          {"name": "npu", "kind": "rw"}],
                      arbitration=arbitration, log=True)
    port = ms.add_port("npu")
    i = np.arange(reads)
    # NPU reads: row 7 of every bank, arriving one per cycle
    ms.enqueue_requests(port, 0, i % 32, 7, i // 32 % 16, 0, i, -1)
    cmds, banks, rows, flags = _gemv(spec, heads, k)
    ms.enqueue_stream("pim", 0, cmds, banks, row=rows, column=-1, flags=flags)
    end = ms.run()
    return spec, ms, end, _clean(spec, ms)


def test_gemv_head_takes_2_x_k_plus_1_cycles():
    """NeuPIMs: COMPs every max(BL/2, tCCD_S) = 2 cycles, READRES after the last, the next head's COMPs
    after READRES: 2 x (k + 1) = 18 cycles per head with k = 8 (dk 128 on 16 multipliers)."""
    spec = _spec("NeuPIMs_HBM2_Dual")
    ms = MemorySystem(spec, {"refresh": "none"}, sources=[{"name": "pim", "kind": "stream"}], log=True)
    cmds, banks, rows, flags = _gemv(spec, heads=4, k=8)
    ms.enqueue_stream("pim", 0, cmds, banks, row=rows, column=-1, flags=flags)
    ms.run()
    log = _clean(spec, ms)
    comp = log[log.command == "COMP"].cycle.to_numpy().reshape(4, 8)
    rr = log[log.command == "READRES"].cycle.to_numpy()
    assert (np.diff(comp, axis=1) == 2).all()
    assert (rr - comp[:, -1] == 2).all()
    assert (np.diff(comp[:, 0]) == 18).all()
    # the first COMP waits the last G_ACT's nRCDRD; two G_ACTs (8 banks) per four-activate window of a rank
    gact = log[log.command == "G_ACT"].cycle.to_numpy()
    assert comp[0, 0] == gact[-1] + spec.timing["nRCDRD"]
    per_rank = gact.reshape(2, 4)
    assert (per_rank[:, 2:] - per_rank[:, :2] >= spec.timing["nFAW"]).all()


def test_dual_row_buffers_let_npu_reads_run_beside_a_gemv():
    spec, ms, end_dual, log = _run("NeuPIMs_HBM2_Dual", "priority")
    pim, npu = log[log.source == "pim"], log[log.source == "npu"]
    # NPU reads issue while the GEMV's rows are open in the PIM buffers (between the first G_ACT and PIM_PRE)
    g0, pp = pim[pim.command == "G_ACT"].cycle.min(), pim[pim.command == "PIM_PRE"].cycle.max()
    during = npu[(npu.command == "RD") & (npu.cycle > g0) & (npu.cycle < pp)]
    assert len(during) > 0
    assert (npu.command == "PRE").sum() == 0          # nobody closed anybody else's row
    # the single-buffer baseline, blocked (the channel serves only PIM while a GEMV runs), takes longer
    _, ms1, end_single, log1 = _run("NeuPIMs_HBM2_Single", "blocked")
    p1 = log1[log1.source == "pim"]
    n1 = log1[(log1.source == "npu") & log1.command.isin(["RD", "RDA"])]
    g1, pp1 = p1[p1.command == "G_ACT"].cycle.min(), p1[p1.command == "PIM_PRE"].cycle.max()
    assert not ((n1.cycle > g1) & (n1.cycle < pp1)).any()
    assert end_single > end_dual


def test_a_read_of_the_pim_row_waits_until_the_pim_buffer_closes():
    """One row is never open in both buffers: an NPU read of the row a GEMV holds activates it only after
    PIM_PRECHARGE."""
    spec = _spec("NeuPIMs_HBM2_Dual")
    ms = MemorySystem(spec, {"refresh": "none"}, sources=[{"name": "pim", "kind": "stream"},
                                                          {"name": "npu", "kind": "rw"}],
                      arbitration="priority", log=True)
    port = ms.add_port("npu")
    cmds, banks, rows, flags = _gemv(spec, heads=2, k=8)
    ms.enqueue_stream("pim", 0, cmds, banks, row=rows, column=-1, flags=flags)
    ms.enqueue_requests(port, 0, 5, PIM_ROW, 3, 0, 20, -1)
    ms.run()
    log = _clean(spec, ms)
    act = log[(log.command == "ACT") & (log.source == "npu")].cycle.to_numpy()
    pim_pre = log[log.command == "PIM_PRE"].cycle.to_numpy()
    assert len(act) == 1 and act[0] >= pim_pre[0] + spec.timing["nRP"]


def test_gemv_is_admitted_only_if_it_ends_before_the_next_refresh():
    """NeuPIMs' PIM_HEADER: a GEMV whose estimated length would cross the next refresh waits for it."""
    spec = _spec("NeuPIMs_HBM2_Dual")
    cmds, banks, rows, flags = _gemv(spec, heads=8, k=8)
    est = 400
    nrefi = spec.timing["nREFI"]
    start = nrefi - est // 2          # half of the GEMV would fall after the refresh
    ms = MemorySystem(spec, {"refresh": "allbank"}, sources=[{"name": "pim", "kind": "stream"}],
                      stream_refresh="wait", log=True)
    ms.enqueue_stream("pim", 0, cmds, banks, row=rows, column=-1, flags=flags, est=est, at=start)
    ms.run()
    log = _clean(spec, ms)
    ref = log[log.command == "REFab"].cycle.min()
    first = log[log.source == "pim"].cycle.min()
    assert first > ref                                # held until the refresh had issued
    assert ref >= nrefi


def test_pim_commands_are_priced_as_neupims_charges_them():
    spec, ms, _, log = _run("NeuPIMs_HBM2_Dual", "priority", reads=8, heads=2)
    per = energy.dram_action_energy_pj(spec)
    assert per["COMP"] == pytest.approx(4 * per["RD"]) and per["G_ACT"] == pytest.approx(4 * per["ACT"])
    counts = log.command.value_counts().to_dict()
    e = energy.dram_energy_pj(spec, counts, cycles=0)
    assert e["pim"] == pytest.approx(per["COMP"] * counts["COMP"] + per["G_ACT"] * counts["G_ACT"]
                                     + per["READRES"] * counts["READRES"])


def test_every_command_of_the_standard_has_an_encoding():
    """isa/neupims.yaml encodes every command the neupims standard times (same names), and a GEMV
    round-trips through the assembler."""
    from archsim import isa as isa_mod

    spec = _spec("NeuPIMs_HBM2_Dual")
    isa = isa_mod.load("neupims")
    names = {ins.mnemonic for ins in isa.instructions}
    assert set(spec.command_names) <= names
    text = "PIM_HEADER row=300 log2_comps=3 log2_readres=0\nG_ACT bankgroup=5 row=300\nCOMP col=3\nREADRES\nPIM_PRE\n"
    words = isa_mod.assemble(isa, text)
    assert isa_mod.assemble(isa, isa_mod.disassemble(isa, words)) == words
