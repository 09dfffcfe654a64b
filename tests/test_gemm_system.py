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


def test_config_resolves_once_into_a_typed_frozen_setup_with_a_sub_config_per_memory():
    """`setup` turns the config into typed values once: the NPU preset with its overrides and buffer sizes, and
    the memory's own knobs in its own dataclass, selected by `memory` and built from the same key paths
    (`dram.preset`, `dram.channels`, `dram.refresh`) the CLI and sweeps use."""
    import dataclasses

    from archsim.systems.gemm import system as G

    cfg = {"m": 16, "k": 64, "n": 32, "memory": "dram", "npu": {"height": 32, "dataflow": "os"},
           "dram": {"channels": 2, "refresh": True}}
    su = G.setup(cfg)
    assert isinstance(su.memory, G.DramMemory) and su.memory.name == "dram", su.memory
    assert (su.memory.spec.name, su.memory.spec.channels, su.memory.refresh) == ("NeuPIMs_HBM2_Single", 2, True)
    assert su.memory.controller is None                           # the preset's controller: refresh on
    assert (su.m, su.k, su.n, su.npu.height, su.npu.width, su.npu.dataflow) == (16, 64, 32, 32, 128, "os"), su
    # null buffers: both halves hold A and B whole (scratchpad) and the whole output (accumulator)
    assert su.npu.scratchpad_bytes == 2 * (16 * 64 + 64 * 32) * su.npu.dtype_bytes
    assert su.npu.accumulator_bytes == 2 * 16 * 32 * su.npu.acc_dtype_bytes
    assert su.resolved == G.resolve(cfg)
    with pytest.raises(dataclasses.FrozenInstanceError):
        su.m = 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        su.memory.refresh = False
    assert G.DramMemory.from_config(G.resolve({"memory": "dram"})).controller == {"refresh": "none"}
    ideal = G.setup({"memory": "ideal", "dram": {"preset": "no_such_preset"}})   # the dram section is not read
    assert ideal.memory == G.IdealMemory() and ideal.memory.name == "ideal"
    assert set(G.MEMORY_CONFIGS) == set(G.MEMORIES)


def test_a_bad_dram_preset_names_its_key_when_memory_is_dram(capsys):
    rc = main(["run", "--system", "gemm", "--set", "memory=dram", "--set", "dram.preset=no_such_preset"])
    err = capsys.readouterr().err
    assert rc == 2 and "no_such_preset" in err and len(err.strip().splitlines()) == 1, err


def test_a_dram_run_loads_the_npu_preset_and_the_dram_spec_once(monkeypatch):
    from archsim.dram import spec as spec_mod
    from archsim.npu import config as npu_mod

    calls = {"load_spec": 0, "load_npu_config": 0}
    for mod, name in ((spec_mod, "load_spec"), (npu_mod, "load_npu_config")):
        real = getattr(mod, name)

        def counted(*a, _real=real, _name=name, **k):
            calls[_name] += 1
            return _real(*a, **k)
        monkeypatch.setattr(mod, name, counted)
    s = _run(m=8, k=64, n=64, memory="dram", dram={"channels": 1})
    assert s["dram_channels"] == 1 and s["dram_read_bytes"] >= (8 * 64 + 64 * 64) * 2, s
    assert calls == {"load_spec": 1, "load_npu_config": 1}, calls
