"""NPU configuration: systolic array, on-chip buffers and vector units, read from archsim/presets/npu/*.yaml.

Kept independent of the DRAM engine on purpose: the NPU model only describes its memory traffic as data
(DMA tiles), so the integrator decides which DRAM model serves it.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from archsim import paths
from archsim.config import Doc, load_yaml, require_choice, require_int, require_number
from archsim.errors import ConfigError

PRESET_DIR = Path(__file__).resolve().parent.parent / "presets" / "npu"
DATAFLOWS = ["ws", "os"]
# scalesim: SCALE-Sim 3.0 fold timing, both dataflows; serial: NeuPIMs' npu-only branch (archsim.npu.systolic)
PRELOAD_RULES = ["bounded", "onnxim", "scalesim", "serial"]
VECTOR_OPS = ["add", "mul", "exp", "sqrt", "gelu", "add_tree"]
STATIONARY = ["weights", "activations"]     # which GEMM operand a WS array holds (the other streams as rows)
DMA_ISSUE = ["double_buffer", "per_instruction"]
VECTOR_OPERANDS = ["sram", "dram"]
VECTOR_KINDS = ("layernorm", "rmsnorm", "softmax", "gelu", "silu", "relu", "add", "mul", "rope")   # archsim.npu.vector's operators

_TOP_KEYS = ("name", "source", "systolic", "memory", "vector")
_SYSTOLIC_KEYS = ("arrays", "height", "width", "clock_hz", "dataflow", "dtype_bytes", "acc_dtype_bytes",
                  "ws_preload_rule", "stationary", "rows_per_cycle")
_MEMORY_KEYS = ("scratchpad_bytes", "accumulator_bytes", "dma", "vector_operands")
_VECTOR_KEYS = ("pipelines", "lanes", "latency_cycles", "size_zero_ops")


@dataclass(frozen=True)
class VectorConfig:
    """SIMD vector units next to the array: `pipelines` independent units of `lanes` lanes each."""

    pipelines: int = 8
    lanes: int = 128
    latency_cycles: dict[str, int] = field(default_factory=lambda: {op: 1 for op in VECTOR_OPS})
    # operators whose instruction is timed as a vector of 0 elements (NeuPIMs' code builds LayerNorm, GELU and
    # Add instructions with the size of an operand list it has just moved away: their compute is near-free)
    size_zero_ops: tuple[str, ...] = ()


@dataclass(frozen=True)
class NpuConfig:
    """One NPU core. Sizes in bytes, clock in Hz; the tile model simulates one array (see `arrays`)."""

    height: int = 128
    width: int = 128
    clock_hz: float = 1.0e9
    dataflow: str = "ws"
    dtype_bytes: int = 2
    acc_dtype_bytes: int = 4
    scratchpad_bytes: int = 1 << 20
    accumulator_bytes: int = 1 << 20
    arrays: int = 1
    ws_preload_rule: str = "bounded"
    # WS: the operand the array holds; the other streams through it as rows (`activations`: the token tile
    # stays and weight columns stream, as NeuPIMs' MatMul does with its operands swapped)
    stationary: str = "weights"
    # rows one WS instruction streams per cycle (NeuPIMs' code times a 128-row stream as 16 cycles: 8)
    rows_per_cycle: int = 1
    # double_buffer: tile by tile, a tile's loads before its compute (archsim.npu.systolic); per_instruction:
    # every load of a GEMM issued at its start, each array instruction waiting only for its own operands
    # (NeuPIMs' code with its one-tile GEMMs)
    dma: str = "double_buffer"
    # where vector operators (LayerNorm, GELU, residual add) read and write their rows: the NPU SRAM, or DRAM
    # (each a separate operation that loads its input rows and stores its output, as NeuPIMs' code runs them)
    vector_operands: str = "sram"
    vector: VectorConfig = field(default_factory=VectorConfig)
    name: str = "npu"
    source: str = ""

    def __post_init__(self) -> None:
        src = f"NpuConfig({self.name})"
        for key in ("height", "width", "dtype_bytes", "acc_dtype_bytes", "scratchpad_bytes",
                    "accumulator_bytes", "arrays", "rows_per_cycle"):
            require_int(src, key, getattr(self, key), minimum=1)
        require_number(src, "clock_hz", self.clock_hz, minimum=1.0)
        require_choice(src, "dataflow", self.dataflow, DATAFLOWS)
        require_choice(src, "ws_preload_rule", self.ws_preload_rule, PRELOAD_RULES)
        require_choice(src, "stationary", self.stationary, STATIONARY)
        require_choice(src, "dma", self.dma, DMA_ISSUE)
        require_choice(src, "vector_operands", self.vector_operands, VECTOR_OPERANDS)
        bad = [op for op in self.vector.size_zero_ops if op not in VECTOR_KINDS]
        if bad:
            raise ConfigError("vector.size_zero_ops", f"unknown operator {bad[0]!r}; allowed: {', '.join(VECTOR_KINDS)}",
                              source=src)
        if self.dma == "per_instruction" and (self.dataflow != "ws" or self.ws_preload_rule == "scalesim"):
            raise ConfigError("memory.dma", "per_instruction issue is modelled for dataflow ws with rule bounded, "
                              "onnxim or serial", source=src)
        if self.ws_preload_rule == "serial" and self.dataflow != "ws":
            raise ConfigError("ws_preload_rule", "serial is a weight-stationary rule (dataflow ws)", source=src)
        require_int(src, "vector.pipelines", self.vector.pipelines, minimum=1)
        require_int(src, "vector.lanes", self.vector.lanes, minimum=1)
        missing = [op for op in VECTOR_OPS if op not in self.vector.latency_cycles]
        if missing:
            raise ConfigError(f"vector.latency_cycles.{missing[0]}",
                              f"missing (required: {', '.join(VECTOR_OPS)})", source=src)
        for op, value in self.vector.latency_cycles.items():
            require_int(src, f"vector.latency_cycles.{op}", value, minimum=1)

    @property
    def macs_per_cycle(self) -> int:
        """MACs one array completes per cycle at full utilisation."""
        return self.height * self.width

    def with_(self, **changes: Any) -> NpuConfig:
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)


# The name issue #9 uses for the array configuration; one class holds array, buffers and vector units.
SystolicArray = NpuConfig


def _preset_path(name_or_path: str | Path) -> Path:
    return paths.preset_file("NPU", PRESET_DIR, name_or_path)


def _section(doc: Doc, key: str, allowed: tuple[str, ...]) -> dict[str, Any]:
    sec = doc.data.get(key)
    if not isinstance(sec, dict):
        raise doc.error(key, f"missing section (a mapping with keys {', '.join(allowed)})")
    unknown = sorted(set(sec) - set(allowed))
    if unknown:
        raise doc.error(f"{key}.{unknown[0]}", f"unknown key; allowed keys: {', '.join(allowed)}")
    return sec


def _need(doc: Doc, sec: dict[str, Any], prefix: str, key: str) -> Any:
    if key not in sec:
        raise doc.error(f"{prefix}.{key}", "missing")
    return sec[key]


def load_npu_config(name_or_path: str | Path = "neupims_npu", **overrides: Any) -> NpuConfig:
    """Read an NPU preset by name (archsim/presets/npu/) or a user YAML; keyword overrides win.

    Every bad value raises a one-line ConfigError naming the file, the key path (with its line) and what is
    allowed, so a typo in a sweep fails before any simulation starts.
    """
    path = _preset_path(name_or_path)
    doc = load_yaml(path)
    unknown = sorted(set(doc.data) - set(_TOP_KEYS))
    if unknown:
        raise doc.error(unknown[0], f"unknown key; allowed keys: {', '.join(_TOP_KEYS)}")
    sa = _section(doc, "systolic", _SYSTOLIC_KEYS)
    mem = _section(doc, "memory", _MEMORY_KEYS)
    vec = _section(doc, "vector", _VECTOR_KEYS)
    lat = vec.get("latency_cycles")
    if not isinstance(lat, dict):
        raise doc.error("vector.latency_cycles", f"missing section (a mapping with keys {', '.join(VECTOR_OPS)})")
    bad = sorted(set(lat) - set(VECTOR_OPS))
    if bad:
        raise doc.error(f"vector.latency_cycles.{bad[0]}", f"unknown vector op; allowed: {', '.join(VECTOR_OPS)}")
    latency = {op: require_int(doc, f"vector.latency_cycles.{op}", _need(doc, lat, "vector.latency_cycles", op),
                               minimum=1) for op in VECTOR_OPS}

    def sa_int(key: str) -> int:
        return require_int(doc, f"systolic.{key}", _need(doc, sa, "systolic", key), minimum=1)

    zero_ops = vec.get("size_zero_ops", [])
    if not isinstance(zero_ops, list) or any(op not in VECTOR_KINDS for op in zero_ops):
        raise doc.error("vector.size_zero_ops", f"must be a list of operators from {', '.join(VECTOR_KINDS)}, "
                        f"got {zero_ops!r}")

    values: dict[str, Any] = dict(
        arrays=sa_int("arrays"),
        height=sa_int("height"),
        width=sa_int("width"),
        clock_hz=require_number(doc, "systolic.clock_hz", _need(doc, sa, "systolic", "clock_hz"), minimum=1.0),
        dataflow=require_choice(doc, "systolic.dataflow", _need(doc, sa, "systolic", "dataflow"), DATAFLOWS),
        dtype_bytes=sa_int("dtype_bytes"),
        acc_dtype_bytes=sa_int("acc_dtype_bytes"),
        ws_preload_rule=require_choice(doc, "systolic.ws_preload_rule", sa.get("ws_preload_rule", "bounded"),
                                       PRELOAD_RULES),
        stationary=require_choice(doc, "systolic.stationary", sa.get("stationary", "weights"), STATIONARY),
        rows_per_cycle=require_int(doc, "systolic.rows_per_cycle", sa.get("rows_per_cycle", 1), minimum=1),
        dma=require_choice(doc, "memory.dma", mem.get("dma", "double_buffer"), DMA_ISSUE),
        vector_operands=require_choice(doc, "memory.vector_operands", mem.get("vector_operands", "sram"),
                                       VECTOR_OPERANDS),
        scratchpad_bytes=require_int(doc, "memory.scratchpad_bytes",
                                     _need(doc, mem, "memory", "scratchpad_bytes"), minimum=1),
        accumulator_bytes=require_int(doc, "memory.accumulator_bytes",
                                      _need(doc, mem, "memory", "accumulator_bytes"), minimum=1),
        vector=VectorConfig(
            pipelines=require_int(doc, "vector.pipelines", _need(doc, vec, "vector", "pipelines"), minimum=1),
            lanes=require_int(doc, "vector.lanes", _need(doc, vec, "vector", "lanes"), minimum=1),
            latency_cycles=latency, size_zero_ops=tuple(zero_ops)),
        name=str(doc.data.get("name", path.stem)),
        source=str(doc.data.get("source", "")),
    )
    allowed = [f.name for f in fields(NpuConfig)]
    bad_override = sorted(set(overrides) - set(allowed))
    if bad_override:
        raise ConfigError(bad_override[0], f"not an NpuConfig field; fields: {', '.join(allowed)}", source=str(path))
    values.update(overrides)
    return NpuConfig(**values)
