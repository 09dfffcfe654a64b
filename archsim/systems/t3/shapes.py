"""A T3 sublayer's shapes and schedule: the per-device GEMM of a Megatron-sliced sublayer, its output
chunks in ring order, the stage at which each device produces each chunk and the role of its stores.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from archsim.errors import ConfigError
from archsim.interconnect.ring import chunk_bounds

if TYPE_CHECKING:
    from archsim.systems.t3.params import GpuConfig


SUBLAYERS = ["op_fwd", "fc2_fwd", "fc1_bwd", "ip_bwd"]
ROLES = ("remote", "local_dma", "final")
COL_UNIT = 16                                      # chunk edges on 16 FP16 columns = one 32 B access


@dataclass(frozen=True)
class SublayerShape:
    """The per-device GEMM of a sliced sublayer: (T x K) @ (K x H) -> T x H partial sums to reduce-scatter."""

    name: str
    tokens: int
    k: int
    h: int


def sublayer_shape(model: Any, sublayer: str, tp: int, tokens: int) -> SublayerShape:
    """Megatron slicing: out-projection and FC-2 (forward) and FC-1 / input projection input gradients
    (backward) each leave a T x d_model partial sum on every device; K is the sliced dimension."""
    from archsim.errors import unknown_name

    if sublayer not in SUBLAYERS:
        raise unknown_name("sublayer", sublayer, SUBLAYERS)
    h = model.d_model
    full_k = {"op_fwd": model.n_heads * model.d_head,           # attention context -> hidden
              "fc2_fwd": model.d_ff,                            # FFN intermediate -> hidden
              "fc1_bwd": model.d_ff * (2 if model.gated_ffn else 1),   # dX = dY1 @ W1^T
              "ip_bwd": model.n_heads * model.d_head + 2 * model.n_kv_heads * model.d_head}[sublayer]
    if full_k % tp:
        raise ConfigError("tp", f"{model.name} {sublayer}: K = {full_k} is not divisible by tp = {tp}")
    return SublayerShape(sublayer, tokens, full_k // tp, h)


# ---- schedule ---------------------------------------------------------------------------------------------
# With a bidirectional ring (`directions` 2) each of the N column chunks is cut in two by rows (whole tiles:
# the GEMM's tiles do not change): chunk c, its first half of the rows, goes round the ring forwards (device d
# sends to d + 1), chunk N + c, its second half, backwards (d sends to d - 1); both halves of column chunk d
# end reduced on device d, as on one direction.
def stage_chunk(n: int, device: int, stage: int) -> int:
    """The forward chunk device `device` produces at stage `stage` (staggered: matches ring order)."""
    return (device - 1 - stage) % n


def stage_chunks(n: int, device: int, stage: int, directions: int = 1) -> list[int]:
    """The chunks device `device` produces at stage `stage`: the forward one, and the backward one (N +
    (device + 1 + stage) mod N) on a bidirectional ring."""
    fwd = stage_chunk(n, device, stage)
    return [fwd] if directions == 1 else [fwd, n + (device + 1 + stage) % n]


def stage_of(n: int, device: int, chunk: int) -> int:
    """The stage at which `device` produces `chunk` (either direction)."""
    return (device - 1 - chunk) % n if chunk < n else (chunk - n - device - 1) % n


def role(n: int, stage: int) -> str:
    """Output address-space configuration of a stage's chunk: remote_update, local_update + DMA, final."""
    if stage == 0:
        return "remote"
    return "final" if stage == n - 1 else "local_dma"


@dataclass(frozen=True)
class Tile:
    chunk: int
    index: int           # within the chunk
    m0: int
    tm: int
    n0: int
    tn: int


def chunk_tiles(shape: SublayerShape, n: int, gpu: GpuConfig, directions: int = 1) -> list[list[Tile]]:
    """Tiles of each chunk (N per ring direction) in production order (row-major within the chunk)."""
    if shape.h % COL_UNIT:
        raise ConfigError("model.d_model", f"{shape.h} is not a multiple of {COL_UNIT}")
    rows = list(range(0, shape.tokens, gpu.tile_m))
    if directions == 2 and len(rows) < 2:
        raise ConfigError("ring_directions", f"a bidirectional ring cuts each chunk by rows of {gpu.tile_m}-token "
                          f"tiles; {shape.tokens} tokens are one row of tiles")
    half = math.ceil(len(rows) / 2)
    row_sets = [rows] if directions == 1 else [rows[:half], rows[half:]]
    out = []
    for k, row_set in enumerate(row_sets):
        for c, (lo, hi) in enumerate(chunk_bounds(shape.h, n, COL_UNIT)):
            tiles = []
            for m0 in row_set:
                for n0 in range(lo, hi, gpu.tile_n):
                    tiles.append(Tile(c + k * n, len(tiles), m0, min(gpu.tile_m, shape.tokens - m0), n0,
                                      min(gpu.tile_n, hi - n0)))
            out.append(tiles)
    return out
