"""Vector-unit latencies for the non-GEMM operators (softmax, LayerNorm / RMSNorm, GELU / SiLU / ReLU, residual
add, element-wise product, rotary position embedding).

Op-count model as in ONNXim/NeuPIMs (the NeuPIMs code, casys-kaist/NeuPIMs): a vector of n elements on a unit of
`lanes` lanes takes iters = ceil(n / lanes) passes, and a reduction takes addtree(n) tree levels with
addtree(n) = 1 if n <= lanes else ceil(n / lanes) + addtree(ceil(n / lanes)). Per vector (one row):

* LayerNorm = 2 * addtree * L_tree + 2 * L_mul + L_sqrt + iters * (2 * L_add + 3 * L_mul)
  (mean and variance trees; scalar 1/n and 1/sqrt; subtract, add, divide-as-multiply, scale, shift)
* Softmax   = 2 * addtree * L_tree + iters * (L_add + L_exp + L_mul)   (max tree and sum tree)
* GELU      = iters * L_gelu;  residual add = iters * L_add
* RMSNorm   = addtree * L_tree + L_mul + L_sqrt + iters * 3 * L_mul
  (archsim's count, same conventions: square, one sum-of-squares tree, scalar 1/n and 1/sqrt, scale, gain)
* SiLU      = iters * (L_exp + L_add + 2 * L_mul)   (x * 1 / (1 + exp(-x)), the divide as a multiply; archsim's)
* ReLU      = iters * L_add (a compare);  element-wise product (a gated FFN's gate x up) = iters * L_mul
* RoPE      = iters * (2 * L_mul + L_add)   (x cos + rotate(x) sin per element, cos / sin from a table; archsim's)

archsim's choice for several rows: each row runs on one pipeline and rows are spread over the pipelines,
so `rows` vectors take ceil(rows / pipelines) x the per-row latency. (ONNXim scales some terms by the tile
rows and not others; a row-per-pipeline rule keeps every operator consistent.)
"""
from __future__ import annotations

import math

from archsim.npu.config import VECTOR_KINDS, NpuConfig  # noqa: F401  (VECTOR_KINDS: re-exported)


def vector_iters(n: int, lanes: int) -> int:
    """Passes over an n-element vector on `lanes` lanes."""
    if n < 1 or lanes < 1:
        raise ValueError(f"vector length and lanes must be >= 1, got n={n}, lanes={lanes}")
    return math.ceil(n / lanes)


def addtree_levels(n: int, lanes: int) -> int:
    """Tree passes to reduce n elements: each pass folds `lanes` values into one until one pass remains."""
    if n < 1 or lanes < 1:
        raise ValueError(f"vector length and lanes must be >= 1, got n={n}, lanes={lanes}")
    if n <= lanes:
        return 1
    partials = math.ceil(n / lanes)
    return partials + addtree_levels(partials, lanes)


def vector_row_cycles(cfg: NpuConfig, kind: str, n: int) -> int:
    """Latency of one `kind` operator on one n-element row (formulas in the module docstring). An operator in
    the preset's `vector.size_zero_ops` is timed as a 0-element row: no passes, one tree level (NeuPIMs' code,
    LayerNorm.cc:171-180, Gelu.cc:69-78, Add.cc:98-107: LayerNorm 5 cycles, GELU and add 0)."""
    lat = cfg.vector.latency_cycles
    lanes = cfg.vector.lanes
    zero = kind in cfg.vector.size_zero_ops
    iters = 0 if zero else vector_iters(n, lanes)
    tree = 1 if zero else addtree_levels(n, lanes)
    if kind == "layernorm":
        return (2 * tree * lat["add_tree"] + 2 * lat["mul"] + lat["sqrt"]
                + iters * (2 * lat["add"] + 3 * lat["mul"]))
    if kind == "softmax":
        return 2 * tree * lat["add_tree"] + iters * (lat["add"] + lat["exp"] + lat["mul"])
    if kind == "gelu":
        return iters * lat["gelu"]
    if kind == "add":
        return iters * lat["add"]
    if kind == "rmsnorm":
        return tree * lat["add_tree"] + lat["mul"] + lat["sqrt"] + iters * 3 * lat["mul"]
    if kind == "silu":
        return iters * (lat["exp"] + lat["add"] + 2 * lat["mul"])
    if kind == "relu":
        return iters * lat["add"]
    if kind == "mul":
        return iters * lat["mul"]
    if kind == "rope":
        return iters * (2 * lat["mul"] + lat["add"])
    raise ValueError(f"unknown vector operator {kind!r}; known: {', '.join(VECTOR_KINDS)}")


def vector_op_cycles(cfg: NpuConfig, kind: str, n: int, rows: int = 1) -> int:
    """Latency of `rows` independent rows of length n, one row per pipeline at a time."""
    if rows < 1:
        raise ValueError(f"rows must be >= 1, got {rows}")
    return math.ceil(rows / cfg.vector.pipelines) * vector_row_cycles(cfg, kind, n)
