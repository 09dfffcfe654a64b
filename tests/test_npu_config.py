"""NPU presets and config errors (archsim.npu.config) plus the vector-unit op-count model."""
from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from archsim.errors import ConfigError, UserError
from archsim.npu import (
    NpuConfig,
    VectorConfig,
    addtree_levels,
    load_npu_config,
    vector_iters,
    vector_op_cycles,
    vector_row_cycles,
)
from archsim.npu.config import PRESET_DIR


def test_neupims_preset_matches_the_reference_note():
    cfg = load_npu_config("neupims_npu")
    assert (cfg.height, cfg.width, cfg.clock_hz, cfg.dataflow, cfg.dtype_bytes) == (128, 128, 1e9, "ws", 2)
    assert cfg.arrays == 8                          # exposed, though the NeuPIMs code simulates one array
    assert (cfg.vector.pipelines, cfg.vector.lanes) == (8, 128)
    assert set(cfg.vector.latency_cycles.values()) == {1}
    assert cfg.macs_per_cycle == 128 * 128


def _write(tmp_path: Path, mutate) -> Path:
    data = yaml.safe_load((PRESET_DIR / "neupims_npu.yaml").read_text())
    mutate(data)
    path = tmp_path / "bad_npu.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.mark.parametrize("mutate,key,allowed", [
    (lambda d: d["systolic"].update(dataflow="rs"), "systolic.dataflow", "ws, os"),
    (lambda d: d["systolic"].update(height=0), "systolic.height", ">= 1"),
    (lambda d: d["systolic"].update(width="wide"), "systolic.width", "integer"),
    (lambda d: d["systolic"].update(ws_preload_rule="fast"), "systolic.ws_preload_rule", "bounded, onnxim"),
    (lambda d: d["memory"].update(scratchpad_bytes=-5), "memory.scratchpad_bytes", ">= 1"),
    (lambda d: d["memory"].pop("accumulator_bytes"), "memory.accumulator_bytes", "missing"),
    (lambda d: d["memory"].update(spad_size=3), "memory.spad_size", "scratchpad_bytes, accumulator_bytes"),
    (lambda d: d["vector"]["latency_cycles"].update(exp=0), "vector.latency_cycles.exp", ">= 1"),
    (lambda d: d["vector"]["latency_cycles"].update(tanh=2), "vector.latency_cycles.tanh", "add, mul, exp"),
    (lambda d: d.update(systolc={}), "systolc", "systolic"),
    (lambda d: d["systolic"].update(clock_hz="1GHz"), "systolic.clock_hz", "number"),
])
def test_bad_values_give_one_line_config_error(tmp_path, mutate, key, allowed):
    path = _write(tmp_path, mutate)
    with pytest.raises(ConfigError) as info:
        load_npu_config(path)
    msg = str(info.value)
    assert "\n" not in msg
    assert msg.startswith(str(path))
    assert f": {key}:" in msg and allowed in msg
    assert info.value.key_path == key


def test_direct_construction_is_validated_too():
    with pytest.raises(ConfigError, match="dataflow: must be one of ws, os"):
        NpuConfig(dataflow="is")
    with pytest.raises(ConfigError, match="must be one of ws, os"):
        load_npu_config().with_(dataflow="xx")
    with pytest.raises(ConfigError, match="not an NpuConfig field"):
        load_npu_config(heigth=64)


def test_unknown_preset_names_the_shipped_ones():
    with pytest.raises(UserError, match="neupims_npu"):
        load_npu_config("neupim_npu")


# ---- vector units ---------------------------------------------------------------------------------------
def test_addtree_recursion():
    assert addtree_levels(1, 128) == addtree_levels(128, 128) == 1
    assert addtree_levels(129, 128) == 2 + 1
    assert addtree_levels(4096, 128) == 32 + 1
    assert addtree_levels(128 * 128 * 3, 128) == 384 + 3 + 1
    assert vector_iters(4096, 128) == 32 and vector_iters(4097, 128) == 33


def test_vector_formulas_with_unit_latencies():
    cfg = load_npu_config()
    # LayerNorm(4096) = 2*33 + 2 + 1 + 32*(2+3); Softmax(4096) = 2*33 + 32*3; GELU/add = 32 passes.
    assert vector_row_cycles(cfg, "layernorm", 4096) == 66 + 3 + 160
    assert vector_row_cycles(cfg, "softmax", 4096) == 66 + 96
    assert vector_row_cycles(cfg, "gelu", 4096) == vector_row_cycles(cfg, "add", 4096) == 32
    # 20 rows on 8 pipelines: 3 rounds.
    assert vector_op_cycles(cfg, "softmax", 4096, rows=20) == 3 * 162
    with pytest.raises(ValueError, match="layernorm"):
        vector_row_cycles(cfg, "groupnorm", 64)


def test_vector_formulas_with_other_latencies():
    base = load_npu_config()
    lat = {"add": 3, "mul": 4, "exp": 9, "sqrt": 11, "gelu": 7, "add_tree": 2}
    cfg = base.with_(vector=VectorConfig(pipelines=4, lanes=64, latency_cycles=lat))
    n = 1000
    iters, tree = math.ceil(n / 64), 16 + 1
    assert vector_row_cycles(cfg, "layernorm", n) == 2 * tree * 2 + 2 * 4 + 11 + iters * (2 * 3 + 3 * 4)
    assert vector_row_cycles(cfg, "softmax", n) == 2 * tree * 2 + iters * (3 + 9 + 4)
    assert vector_row_cycles(cfg, "gelu", n) == iters * 7
    assert vector_op_cycles(cfg, "add", n, rows=5) == 2 * iters * 3


def test_vector_estimators():
    from archsim.npu import vector_estimates
    cfg = load_npu_config()
    est = vector_estimates(cfg, "softmax", 4096, 64, bytes_per_cycle=32.0)
    # 64 rows x 4096 fp16 in and out = 1 MiB at 32 B/cycle; op count: 8 rounds of 162 cycles.
    assert est["roofline"].bytes == 64 * 4096 * 2 * 2 and est["roofline"].memory_cycles == 32768
    assert est["roofline"].compute_cycles == math.ceil(64 * 4096 * 5 / (8 * 128)) == 1280
    assert est["op_count"].compute_cycles == 8 * 162
    assert est["roofline"].bound == est["op_count"].bound == "memory"
    add = vector_estimates(cfg, "add", 1024, 8, bytes_per_cycle=1e9)
    assert add["roofline"].bytes == 8 * 1024 * 2 * 3 and add["op_count"].bound == "compute"
    with pytest.raises(ValueError, match="layernorm"):
        vector_estimates(cfg, "tanh", 8, 1, 1.0)


@pytest.mark.parametrize("mutate,key,allowed", [
    (lambda d: d["systolic"].update(stationary="inputs"), "systolic.stationary", "weights, activations"),
    (lambda d: d["systolic"].update(rows_per_cycle=0), "systolic.rows_per_cycle", ">= 1"),
    (lambda d: d["memory"].update(dma="eager"), "memory.dma", "double_buffer, per_instruction"),
    (lambda d: d["memory"].update(vector_operands="l2"), "memory.vector_operands", "sram, dram"),
    (lambda d: d["vector"].update(size_zero_ops=["tanh"]), "vector.size_zero_ops", "layernorm"),
])
def test_code_npu_keys_give_one_line_errors(tmp_path, mutate, key, allowed):
    test_bad_values_give_one_line_config_error(tmp_path, mutate, key, allowed)


def test_the_code_presets_read_as_the_code_runs_its_npu():
    code = load_npu_config("neupims_code")
    assert (code.arrays, code.stationary, code.rows_per_cycle, code.dma, code.vector_operands) == (
        1, "activations", 8, "per_instruction", "dram")
    assert set(code.vector.size_zero_ops) == {"layernorm", "gelu", "add"}
    assert load_npu_config("neupims_code_npu_only").ws_preload_rule == "serial"
    with pytest.raises(ConfigError, match="serial"):
        NpuConfig(dataflow="os", ws_preload_rule="serial")
