"""Mapping policy `pim_gemv` (issue 33): a row set's last GEMV split into COMPs and READRES (default, the hardware's
order) or fused into one COMPS_READRES as NeuPIMs' code times it (standard neupims_code_fused)."""
from __future__ import annotations

import numpy as np
import pytest

from archsim import paths
from archsim.dram.checker import check_log
from archsim.dram.latency import gap
from archsim.dram.spec import STANDARD_DIR, load_spec
from archsim.errors import ConfigError
from archsim.systems.neupims.compiler import AttentionCompiler
from archsim.systems.neupims.config import setup
from archsim.systems.neupims.decode import DecodeSimulator
from archsim.systems.neupims.device import assign, build_device
from archsim.systems.neupims.modes import sample_batch

SMALL = {"model": "gpt3-small", "layers": 1, "batch": 4, "sub_batch": False}
CODE_DRAM = {"standard": "neupims_code_fused"}


def _spec(standard: str):
    return load_spec("NeuPIMs_HBM2_Dual", overrides={"standard": standard})


def _mapping(tmp_path, gemv: str) -> str:
    path = tmp_path / f"neupims_code_{gemv}.yaml"
    path.write_text(paths.resolve("mappings", "neupims_code").read_text() + f"pim_gemv: {gemv}\n")
    return str(path)


def _log(tmp_path, gemv: str):
    cfg = setup({"system": "neupims", **SMALL, "mapping": _mapping(tmp_path, gemv), "dram": CODE_DRAM})
    dev = build_device(cfg)
    sim = DecodeSimulator(dev, refresh=False, log=True)
    ctx = sample_batch("sharegpt", SMALL["batch"], np.random.default_rng(3))
    sim.iteration(ctx, assign(dev, ctx, "gmlbp"), False)
    return dev, sim.stages, sim.ms.command_log()


def test_split_streams_are_those_of_the_standard_without_the_fused_command():
    # the fused command of neupims_code_fused shifts no command index and the default emits none of it
    code, plain = _spec("neupims_code_fused"), _spec("neupims")
    assert "COMPS_READRES" in code.command_names and "COMPS_READRES" not in plain.command_names
    for a, b in zip(AttentionCompiler(code, 64, "per_bank").decode_step([40, 700], 3),
                    AttentionCompiler(plain, 64, "per_bank").decode_step([40, 700], 3), strict=True):
        for x, y in zip(a.arrays(), b.arrays(), strict=True):
            np.testing.assert_array_equal(x, y)


def test_fused_emits_one_command_for_each_row_sets_last_gemv():
    spec = _spec("neupims_code_fused")
    split = AttentionCompiler(spec, 64, "per_bank", "split").decode_step([700], 2)
    fused = AttentionCompiler(spec, 64, "per_bank", "fused").decode_step([700], 2)
    comp, fu, gact = spec.cmd("COMP"), spec.cmd("COMPS_READRES"), spec.cmd("G_ACT")
    for s, f in zip(split, fused, strict=True):
        row_sets = s.count(gact) // 8
        assert f.count(fu) == row_sets > 0 and s.count(fu) == 0
        assert f.count(comp) < s.count(comp)


def test_fused_needs_the_code_standard(tmp_path):
    # standard neupims_code: one command a cycle, no fused GEMV
    cfg = setup({"system": "neupims", **SMALL, "mapping": _mapping(tmp_path, "fused"), "dram": {"standard": "neupims_code"}})
    with pytest.raises(ConfigError, match="pim_gemv"):
        DecodeSimulator(build_device(cfg), refresh=False)


def test_fused_rows_close_trtp_after_the_gemv_and_split_rows_after_the_last_comp(tmp_path):
    dev, _, log = _log(tmp_path, "fused")
    assert check_log(dev.spec, log) == []
    trtp = gap(dev.spec, "COMPS_READRES", "PIM_PREb")
    assert trtp == dev.spec.timing["nRTP"] == 5
    ch = log[(log["channel"] == 0) & (log["source"] != "npu")]
    t = ch["cycle"].to_numpy()
    cmd = ch["command"].to_numpy()
    fused_at = t[cmd == "COMPS_READRES"]
    assert len(fused_at) > 10
    # each fused GEMV's row set starts closing exactly nRTP after it (the code: 5 cycles, code_trace.csv)
    first_pre = [t[(cmd == "PIM_PREb") & (t > g)].min() for g in fused_at]
    assert int(np.median(np.array(first_pre) - fused_at)) == trtp
    # and the next GEMV waits at least nGEMV = nCOMP x 33 after it
    nxt = [t[((cmd == "COMP") | (cmd == "COMPS_READRES")) & (t > g)] for g in fused_at[:-1]]
    assert min(int(n.min()) - g for n, g in zip(nxt, fused_at[:-1], strict=True)) >= 2 * 33
    _, _, split_log = _log(tmp_path, "split")
    sp = split_log[(split_log["channel"] == 0) & (split_log["source"] != "npu")]
    assert (sp["command"] == "COMPS_READRES").sum() == 0


def test_fused_shortens_the_attention_by_the_comps_it_overlaps(tmp_path):
    _, split, _ = _log(tmp_path, "split")
    _, fused, _ = _log(tmp_path, "fused")
    b_split = next(s for s in split if s.name == "B")
    b_fused = next(s for s in fused if s.name == "B")
    assert b_fused.end - b_fused.start < b_split.end - b_split.start


def test_the_next_gemv_wait_never_binds(tmp_path):
    # neupims_code_fused's nGEMV takes the code's wait after a GEMV of a full row's 32 COMPs (comp_to_comp x 33)
    # for every fused GEMV; the code waits comp_to_comp x (max(k, 6) + 1) after one of k COMPs
    # (NS/channel_state.cc:484-505), down to x 7. The standard says that never binds (the next GEMV waits first for
    # the row set to close and reopen): with the wait at the code's smallest every command issues at the same cycle
    # (gpt3-small: logits GEMVs of 4 COMPs, where the code waits x 7)
    text = (STANDARD_DIR / "neupims_code_fused.yaml").read_text()
    assert "nGEMV: nCOMP * (32 + 1)" in text
    shortest = tmp_path / "neupims_code_fused_shortest_wait.yaml"
    shortest.write_text(text.replace("nGEMV: nCOMP * (32 + 1)", "nGEMV: nCOMP * (6 + 1)"))
    logs = []
    for standard in ("neupims_code_fused", str(shortest)):
        cfg = setup({"system": "neupims", **SMALL, "mapping": _mapping(tmp_path, "fused"), "dram": {"standard": standard}})
        dev = build_device(cfg)
        assert gap(dev.spec, "COMPS_READRES", "COMP") == dev.spec.timing["nCOMP"] * (33 if standard == "neupims_code_fused" else 7)
        sim = DecodeSimulator(dev, refresh=False, log=True)
        ctx = sample_batch("sharegpt", SMALL["batch"], np.random.default_rng(3))
        sim.iteration(ctx, assign(dev, ctx, "gmlbp"), False)
        logs.append(sim.ms.command_log())
    assert (logs[0]["command"] == "COMPS_READRES").sum() > 10
    for col in ("cycle", "channel", "command"):
        np.testing.assert_array_equal(logs[0][col].to_numpy(), logs[1][col].to_numpy())
