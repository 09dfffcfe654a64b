"""System `gemm` (archsim.systems.gemm.system): the CLI/API face of one systolic GEMM, SCALE-Sim-exact under
npu.ws_preload_rule=scalesim, its errors, and memory=dram through the channel engine."""
from __future__ import annotations

import json

import pytest

from archsim import api
from archsim.cli import main


def _run(**keys):
    cfg = {"system": "gemm", **{k: v for k, v in keys.items() if k != "npu"}, "npu": keys.get("npu", {})}
    return api.run(cfg).stats


def test_cli_reports_scalesim_cycles(capsys):
    """The command in the issue, on a measured case (tests/test_npu_systolic.py SCALESIM_MEASURED: 16x8 WS,
    M=37 N=29 K=45 -> 899 in SCALE-Sim 3.0)."""
    rc = main(["run", "--system", "gemm", "--set", "m=37", "--set", "k=45", "--set", "n=29", "--set", "npu.height=16",
               "--set", "npu.width=8", "--set", "npu.dataflow=ws", "--set", "npu.ws_preload_rule=scalesim", "--json", "-"])
    assert rc == 0
    stats = json.loads(capsys.readouterr().out)["stats"]
    assert stats["cycles"] == 899, stats


@pytest.mark.parametrize("dataflow,expected", [("ws", 2675), ("os", 2 * (128 + 128 + 300 - 2) - 1)])
def test_api_scalesim_both_dataflows(dataflow, expected):
    s = _run(m=64, k=300, n=256, npu={"height": 128, "width": 128, "dataflow": dataflow, "ws_preload_rule": "scalesim"})
    assert (s["cycles"], s["scalesim_cycles"]) == (expected, expected), s
    assert s["elapsed_cycles"] == expected + 1 and s["tiles"] == 1


def test_default_rule_is_the_presets_and_reports_the_scalesim_figure_beside_it():
    """Decode shape on the NeuPIMs array: archsim's pipelined rule overlaps the weight preloads, SCALE-Sim
    serialises them; both figures are in the stats."""
    s = _run(m=8, k=1024, n=1024)
    assert s["rule"] == "bounded"
    assert s["cycles"] == s["elapsed_cycles"] < s["scalesim_cycles"], s
    assert s["scalesim_cycles"] == 8 * 8 * (256 + 128 + 8 - 2) - 1


def test_bad_keys_exit_2_with_the_key_path(capsys):
    for arg, words in (("npu.dataflow=xs", "npu.dataflow: must be one of ws, os"),
                       ("npu.ws_preload_rule=scale", "npu.ws_preload_rule"), ("m=0", "m: must be an integer >= 1"),
                       ("memory=hbm", "memory: must be one of ideal, dram")):
        rc = main(["run", "--system", "gemm", "--set", arg])
        err = capsys.readouterr().err
        assert rc == 2 and words in err, (arg, err)


def test_dram_memory_streams_every_operand_and_is_never_faster_than_ideal():
    """memory=dram on one HBM2 channel: every byte of A, B and C moves as requests, compute waits for it."""
    npu = {"height": 32, "width": 32, "ws_preload_rule": "scalesim", "scratchpad_bytes": 1 << 15}
    ideal = _run(m=16, k=256, n=256, npu=npu)
    dram = _run(m=16, k=256, n=256, npu=npu, memory="dram", dram={"channels": 1})
    assert dram["dram_read_bytes"] >= (16 * 256 + 256 * 256) * 2 and dram["dram_write_bytes"] >= 16 * 256 * 2
    assert dram["compute_only_cycles"] == ideal["elapsed_cycles"] == ideal["scalesim_cycles"] + 1
    assert dram["cycles"] > ideal["cycles"], (dram["cycles"], ideal["cycles"])
