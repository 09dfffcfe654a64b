"""NPU configuration: systolic array, on-chip buffers and vector units, read from archsim/presets/npu/*.yaml.

Kept independent of the DRAM engine on purpose: the NPU model only describes its memory traffic as data
(DMA tiles), so the integrator decides which DRAM model serves it.
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from archsim import schema
from archsim.errors import ConfigError
from archsim.schema import opt

PRESET_DIR = Path(__file__).resolve().parent.parent / "presets" / "npu"
DATAFLOWS = ["ws", "os"]
# scalesim: SCALE-Sim 3.0 fold timing, both dataflows; serial: NeuPIMs' npu-only branch (archsim.npu.systolic)
PRELOAD_RULES = ["bounded", "onnxim", "scalesim", "serial"]
VECTOR_OPS = ["add", "mul", "exp", "sqrt", "gelu", "add_tree"]
STATIONARY = ["weights", "activations"]     # which GEMM operand a WS array holds (the other streams as rows)
DMA_ISSUE = ["double_buffer", "per_instruction"]
VECTOR_OPERANDS = ["sram", "dram"]
VECTOR_KINDS = ("layernorm", "rmsnorm", "softmax", "gelu", "silu", "relu", "add", "mul", "rope")   # archsim.npu.vector's operators


@dataclass(frozen=True)
class VectorConfig:
    """SIMD vector units next to the array: `pipelines` independent units of `lanes` lanes each."""

    pipelines: int = opt(8, "independent vector units", minimum=1, required=True)
    lanes: int = opt(128, "lanes of one unit", minimum=1, required=True)
    latency_cycles: dict[str, int] = opt({op: 1 for op in VECTOR_OPS}, "pipeline latency of each vector op, "
                                         f"cycles ({', '.join(VECTOR_OPS)})", required=True)
    # operators whose instruction is timed as a vector of 0 elements (NeuPIMs' code builds LayerNorm, GELU and
    # Add instructions with the size of an operand list it has just moved away: their compute is near-free)
    size_zero_ops: tuple[str, ...] = opt((), "operators timed as a vector of 0 elements (NeuPIMs' code)",
                                         choices=VECTOR_KINDS)

    def __post_init__(self) -> None:
        schema.validate(self)
        missing = [op for op in VECTOR_OPS if op not in self.latency_cycles]
        if missing:
            raise ConfigError(f"latency_cycles.{missing[0]}", f"missing (required: {', '.join(VECTOR_OPS)})")
        for op, value in self.latency_cycles.items():
            if op not in VECTOR_OPS:
                raise ConfigError(f"latency_cycles.{op}", f"unknown vector op; allowed: {', '.join(VECTOR_OPS)}")
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"latency_cycles.{op}", f"must be an integer >= 1, got {value!r}")


@dataclass(frozen=True)
class NpuConfig:
    """One NPU core (archsim/presets/npu/<name>.yaml: its keys under `systolic:`, `memory:` and `vector:`).
    Sizes in bytes, clock in Hz; the tile model simulates one array (see `arrays`)."""

    height: int = opt(128, "array rows (PEs)", minimum=1, under="systolic", required=True)
    width: int = opt(128, "array columns (PEs)", minimum=1, under="systolic", required=True)
    clock_hz: float = opt(1.0e9, "array clock, Hz", minimum=1, under="systolic", required=True)
    dataflow: str = opt("ws", "ws (weight stationary) or os (output stationary)", choices=DATAFLOWS,
                        under="systolic", required=True)
    dtype_bytes: int = opt(2, "bytes per operand element", minimum=1, under="systolic", required=True)
    acc_dtype_bytes: int = opt(4, "bytes per accumulator element", minimum=1, under="systolic", required=True)
    scratchpad_bytes: int = opt(1 << 20, "operand scratchpad (double-buffered), bytes", minimum=1, under="memory", required=True)
    accumulator_bytes: int = opt(1 << 20, "accumulator (double-buffered), bytes", minimum=1, under="memory", required=True)
    arrays: int = opt(1, "arrays of the core (the tile model simulates one)", minimum=1, under="systolic", required=True)
    ws_preload_rule: str = opt("bounded", "array timing rule (archsim.npu.systolic)", choices=PRELOAD_RULES,
                               under="systolic")
    # WS: the operand the array holds; the other streams through it as rows (`activations`: the token tile
    # stays and weight columns stream, as NeuPIMs' MatMul does with its operands swapped)
    stationary: str = opt("weights", "the operand a WS array holds", choices=STATIONARY, under="systolic")
    # rows one WS instruction streams per cycle (NeuPIMs' code times a 128-row stream as 16 cycles: 8)
    rows_per_cycle: int = opt(1, "rows one WS instruction streams per cycle", minimum=1, under="systolic")
    # double_buffer: tile by tile, a tile's loads before its compute (archsim.npu.systolic); per_instruction:
    # every load of a GEMM issued at its start, each array instruction waiting only for its own operands
    # (NeuPIMs' code with its one-tile GEMMs)
    dma: str = opt("double_buffer", "how a GEMM's loads are issued", choices=DMA_ISSUE, under="memory")
    # where vector operators (LayerNorm, GELU, residual add) read and write their rows: the NPU SRAM, or DRAM
    # (each a separate operation that loads its input rows and stores its output, as NeuPIMs' code runs them)
    vector_operands: str = opt("sram", "where vector operators read and write their rows",
                               choices=VECTOR_OPERANDS, under="memory")
    vector: VectorConfig = opt(VectorConfig, "the vector units", required=True)
    name: str = opt("npu", "the preset's name")
    source: str = opt("", "where its numbers come from")

    def __post_init__(self) -> None:
        schema.validate(self)
        if self.dma == "per_instruction" and (self.dataflow != "ws" or self.ws_preload_rule == "scalesim"):
            raise ConfigError("dma", "per_instruction issue is modelled for dataflow ws with rule bounded, "
                              "onnxim or serial", source=f"NpuConfig({self.name})")
        if self.ws_preload_rule == "serial" and self.dataflow != "ws":
            raise ConfigError("ws_preload_rule", "serial is a weight-stationary rule (dataflow ws)",
                              source=f"NpuConfig({self.name})")

    @property
    def macs_per_cycle(self) -> int:
        """MACs one array completes per cycle at full utilisation."""
        return self.height * self.width

    def with_(self, **changes: Any) -> NpuConfig:
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)


# The name issue #9 uses for the array configuration; one class holds array, buffers and vector units.
SystolicArray = NpuConfig


def load_npu_config(name_or_path: str | Path = "neupims_npu", preset_overrides: dict[str, Any] | None = None,
                    label: str = "--set", **overrides: Any) -> NpuConfig:
    """Read an NPU preset by name (archsim/presets/npu/) or a user YAML; `preset_overrides` (by the file's key
    paths, {"systolic": {"height": 64}} or {"systolic.height": 64}; an error names `label`) and keyword overrides
    (NpuConfig's field names) win. Every bad value raises a one-line ConfigError naming the file, the key path
    (with its line) and what is allowed, so a typo in a sweep fails before any simulation starts."""
    by_name = {f.name: schema.file_name(f) for f in fields(NpuConfig)}
    unknown = sorted(set(overrides) - set(by_name))
    if unknown:
        raise ConfigError(unknown[0], f"not an NpuConfig field; fields: {', '.join(by_name)}")
    over = {**(preset_overrides or {}), **{by_name[k]: v for k, v in overrides.items()}}
    config, path = schema.load_preset(NpuConfig, "NPU", PRESET_DIR, name_or_path, over, blame=label)
    return config if "name" in overrides or config.name != "npu" else replace(config, name=path.stem)
