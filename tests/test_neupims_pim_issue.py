"""Mapping policy `pim_issue` (issue 33): `per_cycle` enters the NPU+PIM attention's PIM commands as the npu+pim
branch's core hands them to memory, one PIM instruction per NPU cycle for the whole device, the batch channel after
channel; `bus` (every shipped mapping but npu_pim_code_issue) enters them at the stage's start, as before."""
from __future__ import annotations

import math

import numpy as np
import pytest

from archsim import paths
from archsim.errors import ConfigError
from archsim.systems.neupims.config import setup
from archsim.systems.neupims.decode import DecodeSimulator
from archsim.systems.neupims.device import build_device

# GPT-3 Small on one device: 12 heads of 64, so a query chunk of a 512-element row holds 8 heads (two chunks)
SMALL = {"model": "gpt3-small", "layers": 1, "batch": 8, "kv_layout": "token_rows"}
# (context, channel) in the batch's order: channel 1's first request comes first, the code consolidates channel 0 first
REQS = [(100, 1), (64, 0), (40, 1)]


def _mapping(tmp_path, name: str, *lines: str) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(paths.resolve("mappings", "neupims").read_text() + "\n" + "\n".join(lines) + "\n")
    return str(path)


def test_pim_issue_is_bus_unless_a_mapping_says_otherwise_and_is_checked(tmp_path):
    names = [n for n in paths.shipped_names("mappings") if n.startswith(("neupims", "npu_pim"))]
    issue = {"npu_pim_code_issue", "npu_pim_issue"}          # the code's issue path, on its layout and on archsim's
    assert issue <= set(names) and len(names) > 4
    for name in names:
        want = "per_cycle" if name in issue else "bus"
        assert setup({"system": "npu_pim", **SMALL, "mapping": name}).policy.pim_issue == want, name
    with pytest.raises(ConfigError, match="pim_issue"):
        setup({"system": "npu_pim", **SMALL, "mapping": _mapping(tmp_path, "bad", "pim_issue: sometimes")})
    # the attend tile follows the logits tile: per_cycle without the barrier is refused, naming the key
    with pytest.raises(ConfigError, match="pim_issue.*attend_start"):
        setup({"system": "npu_pim", **SMALL, "mapping": _mapping(tmp_path, "head", "pim_issue: per_cycle")})


def _code_instructions(context: int, heads: int = 12, dk: int = 64) -> tuple[int, int]:
    """The PIM instructions NeuPIMs' npu+pim branch generates for one request (GWRITE, PIM_HEADER, COMP, READRES:
    NeuPIMSLogitSoftmax.cc:173-252, 330-350 and NeuPIMSAttend.cc:146-225, 271-281), with 32 banks, 1 KB rows of
    FP16 and 16 elements a COMP: (logits, attend)."""
    page, banks, per_comp = 512, 32, 16
    chunks = math.ceil(heads * dk / page)
    per_tile = page // dk
    tiles = math.ceil(context / banks)
    logits = 0
    for c in range(chunks):
        in_chunk = min(per_tile, heads - c * per_tile)
        logits += 1 + tiles * (1 + in_chunk * (dk // per_comp + 1))
    attend = 0
    for c in range(math.ceil(context / page)):
        comps = math.ceil(min(page, context - c * page) / per_comp)
        attend += heads * (1 + math.ceil(dk / banks) * (1 + comps + 1))
    return logits, attend


def _stage(mapping: str):
    dev = build_device(setup({"system": "npu_pim", **SMALL, "mapping": mapping}))
    sim = DecodeSimulator(dev, refresh=False, log=True)
    st = sim.run_stage("B", 0, [], (0, REQS), 0)
    log = sim.ms.command_log()
    pim = log[log["source"] != "npu"].sort_values(["channel", "cycle"], kind="stable")
    return dev, sim, st, {ch: g for ch, g in pim.groupby("channel")}


def test_per_cycle_changes_only_when_the_attentions_commands_enter(tmp_path):
    """The same commands on every channel in the same order; with per_cycle the device's PIM instructions enter one
    per NPU cycle (the code's count of them), channel 0's before channel 1's, and none issues before it entered."""
    _dev, _sim, bus, bus_log = _stage(_mapping(tmp_path, "bus", "attend_start: all_logits"))
    dev, sim, per, per_log = _stage(_mapping(tmp_path, "per", "attend_start: all_logits", "pim_issue: per_cycle"))
    assert bus.pim_instructions == 0 and bus.pim_last_entry == -1
    assert bus_log.keys() == per_log.keys() == {0, 1}
    for ch in bus_log:
        cols = ["command", "bank", "row"]
        assert (bus_log[ch][cols].to_numpy() == per_log[ch][cols].to_numpy()).all()
    counts = [_code_instructions(L) for L, _ch in REQS]
    n_logits, n_attend = (sum(c[i] for c in counts) for i in (0, 1))
    assert per.pim_instructions == n_logits + n_attend
    plans = {ch: sim._channel_plan(ch, tuple(L for L, c in REQS if c == ch)) for ch in (0, 1)}
    order = sim._issue_order(REQS, plans)
    ratio = dev.dram_hz / dev.npu.clock_hz
    for entries, part, n in ((order.logits, "logits", n_logits), (order.attend, "attend", n_attend)):
        instr = {ch: entries[ch][sim._instruction_marks(getattr(plans[ch], part)) == 1] for ch in plans}
        # one instruction per NPU cycle for the device: cycles 0, 1, 2 ... converted to DRAM cycles, none twice
        assert np.array_equal(np.sort(np.concatenate(list(instr.values()))),
                              np.ceil(np.arange(n) * ratio - 1e-9).astype(np.int64))
        assert instr[0].max() < instr[1].min()          # channel after channel, whatever the batch's order
    # the engine held every command to its entry: logits from the stage's start, the attend from its release
    for ch, log in per_log.items():
        k = len(plans[ch].logits.cmd)
        assert (log["cycle"].to_numpy()[:k] >= order.logits[ch]).all()
        assert (log["cycle"].to_numpy()[k:] >= per.attend_start + order.attend[ch]).all()
    assert per.pim_last_entry == per.attend_start + max(int(order.attend[ch][-1]) for ch in plans)
    assert per.end - per.start > bus.end - bus.start
    assert per.end - per.start >= math.ceil((n_logits + n_attend) * ratio)


def test_code_channels_reads_when_each_channel_last_returned_results(tmp_path):
    """reports/neupims/code_channels.py: per channel, the end of the last log interval with READRES data inside each
    PIM operation (from the operation's start), on a made-up run of two operations and 32 channels; and the committed
    table again from the code's run where it is on this machine."""
    import sys
    from pathlib import Path

    import pandas as pd
    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root / "reports" / "neupims"))
    import code_channels

    (tmp_path / "PIM_stage_B.tsv").write_text(
        "OpName\tStartCycle\tEndCycle\t\nlayer0.attn.NeuPIMSAttend\t5000\t9000\t\n"
        "layer0.attn.NeuPIMSLogitSoftmax\t1000\t5000\t\n")
    for ch in range(code_channels.CHANNELS):
        reads = {1000: 4, 2000: 4 if ch else 0, 3000: 4 if ch > 1 else 0, 4000: 0, 5000: 0, 6000: 2, 8000: 2 if ch else 0}
        (tmp_path / f"mem_io_B_ch_{ch}.tsv").write_text("StartCycle\tChannelID\tPIMReads\t\n" + "".join(
            f"{t}\t{ch}\t{n}\t\n" for t, n in sorted(reads.items())))
    df = code_channels.build(tmp_path).set_index("channel")
    assert df.loc[0, "logits_end"] == 1000 and df.loc[1, "logits_end"] == 2000 and df.loc[5, "logits_end"] == 3000
    assert df.loc[0, "attend_end"] == 2000 and df.loc[1, "attend_end"] == 4000
    assert df.loc[5, "logits_busy_intervals"] == 3 and df.loc[0, "attend_busy_intervals"] == 1
    run = Path("/work/ext/neupims/runs/npupim-baseline_gpt3-7B_tp4_bs512_clb0")
    if run.exists():
        committed = pd.read_csv(root / "reports" / "neupims" / "code_channels.csv")
        pd.testing.assert_frame_equal(code_channels.build(run), committed)
