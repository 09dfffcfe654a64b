"""A T3 sublayer's shapes and schedule: the per-device GEMM of a Megatron-sliced sublayer, its output
chunks in ring order, the stage at which each device produces each chunk and the role of its stores.
"""
from __future__ import annotations

import dataclasses
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
    # mixture of experts: the tokens routed to each active expert, each expert's (count x K) @ (K x H) GEMM
    # accumulating into the one T x H output (() = one dense GEMM of all T tokens)
    experts: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if any(c < 1 or c > self.tokens for c in self.experts):
            raise ConfigError("experts", f"{self.name}: an active expert has 1..{self.tokens} tokens, "
                              f"got {list(self.experts)}")

    @property
    def gemm_rows(self) -> int:
        """Rows of A summed over the GEMMs: T (dense) or every active expert's tokens."""
        return sum(self.experts) if self.experts else self.tokens

    @property
    def n_gemms(self) -> int:
        return len(self.experts) or 1


def moe_fc2_shape(model: Any, tp: int, tokens: int) -> SublayerShape:
    """The down projection of a tensor-parallel MoE FFN (every expert's FC-2 row-split over the tp devices, as
    the dense FC-2 is): on every device each active expert's (t_e x d_ff / tp) @ (d_ff / tp x d_model) GEMM over
    its routed tokens, all into one T x d_model partial sum that one reduce-scatter reduces. Tokens per expert:
    the expected counts of uniform routing (archsim.systems.duplex.compiler.routing_counts, as NeuPIMs runs
    MoE); an expert with none has no GEMM."""
    from archsim.systems.duplex.compiler import routing_counts

    dense = sublayer_shape(model, "fc2_fwd", tp, tokens)
    counts = tuple(int(c) for c in routing_counts(model, tokens, "uniform") if c)
    return dataclasses.replace(dense, experts=counts)


def expert_row_starts(shape: SublayerShape) -> list[int]:
    """Output row of each active expert's first token: the experts' tokens are consecutive runs round the
    batch (expert e takes the next count_e tokens after expert e - 1's, wrapping at T), so the runs cover every
    token experts_per_token times and a token's experts are distinct (no run is longer than T). Tokens of a
    decode batch are interchangeable: only the counts matter, and this order keeps each expert's rows contiguous
    (one run, or two where it wraps)."""
    starts, at = [], 0
    for c in shape.experts:
        starts.append(at)
        at = (at + c) % shape.tokens
    return starts


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
    m0: int              # first output row
    tm: int
    n0: int
    tn: int
    # a MoE expert's GEMM tile (expert_tiles): the active expert, its first row in that expert's own A, and the
    # output tile (index in the chunk) its rows fall in; None: an output tile (a dense GEMM's tiles are these)
    expert: int | None = None
    a0: int = 0
    out: int = 0


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


def _expert_segments(shape: SublayerShape, tile_m: int) -> list[tuple[int, int, int, int]]:
    """(expert, row in its A, output row, rows) of every active expert's tokens, cut where they wrap round the
    batch and where they cross an output tile's rows (so every store lands in one tracked output tile), in
    expert order."""
    segs = []
    for e, (start, count) in enumerate(zip(expert_row_starts(shape), shape.experts, strict=True)):
        a = 0
        while a < count:
            row = (start + a) % shape.tokens
            rows = min(count - a, shape.tokens - row, tile_m - row % tile_m)
            segs.append((e, a, row, rows))
            a += rows
    return segs


def expert_tiles(shape: SublayerShape, n: int, gpu: GpuConfig, directions: int = 1) -> list[list[Tile]]:
    """A MoE sublayer's GEMM tiles of each chunk in production order: every active expert's tiles of the chunk's
    columns over its rows, expert after expert, each tile tagged with the output tile it updates (chunk_tiles'
    tiling of the T x H output). The chunk's output is complete when every expert's tiles are in. An expert's
    rows are cut where they wrap round the batch or cross an output tile's rows (a departure from the GPU's own
    tiling of its gathered rows only when the batch is larger than one tile's rows or an expert's run wraps)."""
    outputs = chunk_tiles(shape, n, gpu, directions)
    rows = list(range(0, shape.tokens, gpu.tile_m))
    half = math.ceil(len(rows) / 2)
    out = []
    for c, tiles in enumerate(outputs):
        index = {(t.m0, t.n0): t.index for t in tiles}
        prod: list[Tile] = []
        for e, a0, row, count in _expert_segments(shape, gpu.tile_m):
            block = row // gpu.tile_m * gpu.tile_m
            if directions == 2 and (rows.index(block) < half) != (c < n):
                continue                           # the other ring direction's rows
            for n0 in sorted({t.n0 for t in tiles}):
                tn = next(t.tn for t in tiles if t.n0 == n0)
                prod.append(Tile(c, len(prod), row, count, n0, tn, e, a0, index[(block, n0)]))
        out.append(prod)
    return out
