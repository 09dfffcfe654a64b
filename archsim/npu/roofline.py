"""Roofline-style GEMM estimates next to the tile model, so a user can see how much of a tile-model result
comes from array shape, tiling traffic and DMA overlap rather than from peak rates alone.

GEMM estimators (all in core cycles, one DMA stream of `bytes_per_cycle`):

* ``roofline``: max(MACs / (H * W * arrays), minimum bytes / bandwidth); minimum bytes = A, B and C once.
* ``padded``: like roofline, but compute counts whole array blocks: WS ceil(K/H) * ceil(N/W) * M,
  OS ceil(M/H) * ceil(N/W) * K, divided over `arrays`; bytes are the schedule's actual DMA traffic.
* ``tile_model``: the overlapped double-buffered timeline of the tiled schedule on one array with each
  tile's DMA taking bytes / bandwidth. Loads and stores run on separate engines (like ONNXim's ld and st
  queues), each at `bytes_per_cycle`, so its memory part is max(load, store bytes) / bandwidth.

Vector operators get ``roofline`` and ``op_count`` (see `vector_estimates`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from archsim.npu.config import NpuConfig
from archsim.npu.systolic import GemmSchedule, bandwidth_dma_cycles, overlap_timeline, schedule_gemm
from archsim.npu.vector import vector_op_cycles


@dataclass(frozen=True)
class GemmEstimate:
    """One estimator's answer: total cycles, its compute and memory parts, bytes counted, and the bound."""

    estimator: str
    cycles: int
    compute_cycles: int
    memory_cycles: int
    bytes: int
    bound: str


def min_gemm_bytes(cfg: NpuConfig, m: int, k: int, n: int) -> int:
    """A (M x K) and B (K x N) read once and C (M x N) written once, in the operand dtype."""
    return (m * k + k * n + m * n) * cfg.dtype_bytes


def _estimate(name: str, compute: int, memory: int, nbytes: int) -> GemmEstimate:
    return GemmEstimate(name, max(compute, memory), compute, memory, nbytes,
                        "compute" if compute >= memory else "memory")


def roofline_gemm(cfg: NpuConfig, m: int, k: int, n: int, bytes_per_cycle: float, arrays: int = 1) -> GemmEstimate:
    """Peak-rate bound: no array-shape padding, no tiling traffic, perfect overlap."""
    if bytes_per_cycle <= 0 or arrays < 1:
        raise ValueError(f"bytes_per_cycle must be > 0 and arrays >= 1, got {bytes_per_cycle}, {arrays}")
    nbytes = min_gemm_bytes(cfg, m, k, n)
    compute = math.ceil(m * k * n / (cfg.macs_per_cycle * arrays))
    return _estimate("roofline", compute, math.ceil(nbytes / bytes_per_cycle), nbytes)


def padded_gemm(cfg: NpuConfig, m: int, k: int, n: int, bytes_per_cycle: float, arrays: int = 1,
                schedule: GemmSchedule | None = None) -> GemmEstimate:
    """Roofline with the array's block padding and the schedule's real DMA bytes."""
    if bytes_per_cycle <= 0 or arrays < 1:
        raise ValueError(f"bytes_per_cycle must be > 0 and arrays >= 1, got {bytes_per_cycle}, {arrays}")
    sched = schedule or schedule_gemm(cfg, m, k, n)
    if cfg.dataflow == "ws":
        blocks, stream = math.ceil(k / cfg.height) * math.ceil(n / cfg.width), m
    else:
        blocks, stream = math.ceil(m / cfg.height) * math.ceil(n / cfg.width), k
    compute = math.ceil(blocks / arrays) * stream
    nbytes = sched.load_bytes + sched.store_bytes
    return _estimate("padded", compute, math.ceil(nbytes / bytes_per_cycle), nbytes)


def tile_model_gemm(cfg: NpuConfig, m: int, k: int, n: int, bytes_per_cycle: float,
                    schedule: GemmSchedule | None = None) -> GemmEstimate:
    """The tiled schedule's overlapped timeline with bandwidth-derived DMA times."""
    sched = schedule or schedule_gemm(cfg, m, k, n)
    loads, stores = bandwidth_dma_cycles(sched, bytes_per_cycle)
    timeline = overlap_timeline(sched, loads, stores)
    nbytes = sched.load_bytes + sched.store_bytes
    memory = math.ceil(max(sched.load_bytes, sched.store_bytes) / bytes_per_cycle)
    return GemmEstimate("tile_model", timeline.total_cycles, sched.compute_only_cycles(), memory, nbytes,
                        timeline.bound)


def gemm_estimates(cfg: NpuConfig, m: int, k: int, n: int, bytes_per_cycle: float) -> dict[str, GemmEstimate]:
    """All estimators for one GEMM on one array, keyed by estimator name (one schedule shared)."""
    sched = schedule_gemm(cfg, m, k, n)
    return {
        "roofline": roofline_gemm(cfg, m, k, n, bytes_per_cycle),
        "padded": padded_gemm(cfg, m, k, n, bytes_per_cycle, schedule=sched),
        "tile_model": tile_model_gemm(cfg, m, k, n, bytes_per_cycle, schedule=sched),
    }


# Vector operations per element, counting each reduction tree as one operation per element (it consumes
# every element once): LayerNorm 2 trees + 2 adds + 3 muls, softmax 2 trees + add + exp + mul.
_VECTOR_OPS_PER_ELEMENT = {"layernorm": 7, "softmax": 5, "gelu": 1, "add": 1}
_VECTOR_OPERANDS = {"layernorm": 1, "softmax": 1, "gelu": 1, "add": 2}


def vector_estimates(cfg: NpuConfig, kind: str, n: int, rows: int, bytes_per_cycle: float) -> dict[str, GemmEstimate]:
    """Estimators for a vector operator on `rows` rows of n elements: ``roofline`` (all lanes of all
    pipelines busy vs operands in and result out at `bytes_per_cycle`) and ``op_count`` (the per-row
    latency formulas of archsim.npu.vector, with the same byte count)."""
    if kind not in _VECTOR_OPS_PER_ELEMENT:
        raise ValueError(f"unknown vector operator {kind!r}; known: {', '.join(_VECTOR_OPS_PER_ELEMENT)}")
    if bytes_per_cycle <= 0 or n < 1 or rows < 1:
        raise ValueError(f"need bytes_per_cycle > 0, n >= 1 and rows >= 1; got {bytes_per_cycle}, {n}, {rows}")
    elems = n * rows
    nbytes = elems * cfg.dtype_bytes * (_VECTOR_OPERANDS[kind] + 1)
    memory = math.ceil(nbytes / bytes_per_cycle)
    lanes = cfg.vector.lanes * cfg.vector.pipelines
    compute = math.ceil(elems * _VECTOR_OPS_PER_ELEMENT[kind] / lanes)
    return {
        "roofline": _estimate("roofline", compute, memory, nbytes),
        "op_count": _estimate("op_count", vector_op_cycles(cfg, kind, n, rows), memory, nbytes),
    }
