"""Tile-level systolic-array model: instruction timing, scratchpad-aware GEMM tiling, DMA tiles, overlap.

The array is not simulated per PE; each array instruction has a deterministic latency (as in ONNXim and
NeuPIMs, whose accuracy rests on that), and memory traffic leaves this module as data (`DmaTile`s with byte
counts and address ranges) so the integrator can feed it to whichever DRAM model it runs.

Closed forms (H = array height, W = width, r = rows streamed by an instruction):

* WS instruction latency (issue to last result in the accumulator): ``H + W - 2 + max(r, 4)``.
* WS issue offset after the previous instruction (rows r_prev), while that one is still in flight:
  ``max(r_prev, 4)`` if no new weights are needed; with a weight preload ``H`` (rule ``onnxim``, the exact
  ONNXim/NeuPIMs rule) or ``max(H, max(r_prev, 4))`` (rule ``bounded``, archsim default: weights cannot
  enter while the previous rows still stream, so utilisation never exceeds 1).
* WS preload into an empty pipeline: the instruction starts ``2H - 1`` cycles after it becomes ready.
  Hence n back-to-back preloading instructions of equal rows r take
  ``(2H - 1) + (n - 1) * offset(r) + H + W - 2 + max(r, 4)`` cycles.
* OS fold (r output rows x c output columns, reduction depth T): ``2r + c + T - 2`` cycles, folds serial.
  SCALE-Sim v3 issue #4 discusses 2R + C + T - 2 against R + C + T - 2; archsim takes the 2R form because
  the R extra cycles drain the finished outputs out of the PEs, and without a second set of output
  registers the next fold cannot start accumulating until that drain ends.
* Rule ``scalesim`` (``ws_preload_rule: scalesim``, both dataflows): SCALE-Sim 3.0's compute timing, folds
  strictly serial and always sized to the whole array (a partial fold costs as much as a full one):
  WS fold ``2H + W + r - 2`` (H cycles of weight load, then r rows skewed across H + W - 1 PEs and drained),
  OS fold ``H + W + T - 2``. SCALE-Sim reports the index of the last busy cycle counted from 0, one less
  than the number of cycles: for a whole GEMM ``folds * fold - 1`` (`scalesim_gemm_cycles`;
  docs/npu-gemm.md has the derivation and the measured SCALE-Sim runs).

Integration recipe (DRAM model in the loop)::

    sched = schedule_gemm(cfg, m, k, n, names=("x", "w_qkv", "qkv"))
    tl = DoubleBufferTimeline(sched)
    while not tl.done:
        t_issue = tl.next_load_issue_cycle()
        ready = dram.serve(tl.next_tile.loads, at=t_issue)   # integrator's DRAM model: cycle data arrives
        tl.record_load_done(ready)
    tl.timeline.total_cycles, tl.timeline.bound, tl.timeline.to_frame()
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from archsim.errors import ConfigError
from archsim.npu.config import NpuConfig

if TYPE_CHECKING:
    import pandas as pd


# ---- array instructions ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class ArrayInstr:
    """One array instruction. WS: stream `rows` inputs through a depth x cols weight block (loaded first if
    `preload`). OS: one fold computing rows x cols outputs over a reduction of `depth`."""

    rows: int
    cols: int
    depth: int
    preload: bool = True

    @property
    def macs(self) -> int:
        return self.rows * self.cols * self.depth


def ws_stream_cycles(cfg: NpuConfig, rows: int, floor: int = 4) -> int:
    """Cycles a WS instruction streams its rows: `rows_per_cycle` rows a cycle (1 on a real array; NeuPIMs'
    code times its 128-row instructions as 16 cycles, MatMul.cc:316-321), at least `floor` (4: ONNXim's)."""
    return max(math.ceil(rows / cfg.rows_per_cycle), floor)


def ws_latency_cycles(cfg: NpuConfig, rows: int) -> int:
    """Issue-to-result latency of one WS instruction: fill across H + W - 2 PEs plus max(rows, 4) rows."""
    return cfg.height + cfg.width - 2 + ws_stream_cycles(cfg, rows)


def ws_issue_offset_cycles(cfg: NpuConfig, prev_rows: int, preload: bool) -> int:
    """Cycles between the starts of two WS instructions when the pipeline is not empty (see module doc)."""
    if cfg.ws_preload_rule == "scalesim":      # folds serial: the next starts when this one has drained
        return scalesim_fold_cycles(cfg, ArrayInstr(rows=prev_rows, cols=cfg.width, depth=cfg.height))
    stream = ws_stream_cycles(cfg, prev_rows)
    if cfg.ws_preload_rule == "serial":      # a preload waits for the previous instruction to leave the array
        return cfg.height + cfg.width + ws_stream_cycles(cfg, prev_rows, floor=1) - 1 if preload else stream
    if not preload:
        return stream
    if cfg.ws_preload_rule == "onnxim":
        return cfg.height
    return max(cfg.height, stream)


def ws_empty_preload_cycles(cfg: NpuConfig) -> int:
    """Weight preload into an empty pipeline: H cycles to read the block out of the buffer and H - 1 to shift
    it into place; nothing hides it."""
    return 2 * cfg.height - 1


def os_fold_cycles(rows: int, cols: int, depth: int) -> int:
    """One output-stationary fold: skewed operands reach the far PE after r + c - 2 cycles, T MACs there, then
    r cycles to drain the outputs (module doc says why 2r and not r)."""
    return 2 * rows + cols + depth - 2


def scalesim_fold_cycles(cfg: NpuConfig, instr: ArrayInstr) -> int:
    """One fold under SCALE-Sim 3.0's timing (rule ``scalesim``), whatever part of the array it uses.

    WS: H cycles to load the weights, then the fold's r input rows skewed over H + W - 1 PEs and drained:
    ``2H + W + r - 2``. OS: the T-deep reduction skewed over the array plus the drain: ``H + W + T - 2``."""
    if cfg.dataflow == "os":
        return cfg.height + cfg.width + instr.depth - 2
    return 2 * cfg.height + cfg.width + instr.rows - 2


def scalesim_gemm_cycles(cfg: NpuConfig, m: int, k: int, n: int) -> int:
    """SCALE-Sim 3.0's reported compute cycles of an unstalled M x K x N GEMM (``Compute cycles`` in its log,
    ``Total Cycles`` in COMPUTE_REPORT.csv): every fold serial and full-array sized, minus one because it
    reports the last cycle's index counted from 0. WS folds: ceil(K/H) * ceil(N/W) of ``2H + W + M - 2``;
    OS folds: ceil(M/H) * ceil(N/W) of ``H + W + K - 2``."""
    h, w = cfg.height, cfg.width
    if cfg.dataflow == "os":
        return math.ceil(m / h) * math.ceil(n / w) * (h + w + k - 2) - 1
    return math.ceil(k / h) * math.ceil(n / w) * (2 * h + w + m - 2) - 1


def scalesim_reported_cycles(elapsed_cycles: int) -> int:
    """SCALE-Sim's way of counting an elapsed run: the last busy cycle's index from 0 (one less than the
    count; an empty run stays 0)."""
    return max(elapsed_cycles - 1, 0)


class ArrayPipeline:
    """In-order issue of array instructions under the timing rules above; keeps what the next one needs."""

    def __init__(self, cfg: NpuConfig):
        self.cfg = cfg
        self.last_start_cycles: int | None = None
        self.last_rows = 0
        self.busy_until_cycles = 0     # finish of the latest-finishing instruction issued so far

    def peek(self, instr: ArrayInstr, ready_cycles: int) -> tuple[int, int]:
        """(start, finish) the instruction would get if issued now with its data ready at `ready_cycles`."""
        cfg = self.cfg
        if cfg.ws_preload_rule == "scalesim":     # SCALE-Sim: folds one after another, both dataflows
            start = max(ready_cycles, self.busy_until_cycles)
            return start, start + scalesim_fold_cycles(cfg, instr)
        if cfg.dataflow == "os":
            start = max(ready_cycles, self.busy_until_cycles)
            return start, start + os_fold_cycles(instr.rows, instr.cols, instr.depth)
        if cfg.ws_preload_rule == "serial":
            return self._peek_serial(instr, ready_cycles)
        now = ready_cycles if self.last_start_cycles is None else max(ready_cycles, self.last_start_cycles)
        if self.last_start_cycles is None or self.busy_until_cycles <= now:      # pipeline empty
            start = now + (ws_empty_preload_cycles(cfg) if instr.preload else 0)
        else:
            start = max(now, self.last_start_cycles + ws_issue_offset_cycles(cfg, self.last_rows, instr.preload))
        return start, start + ws_latency_cycles(cfg, instr.rows)

    def _peek_serial(self, instr: ArrayInstr, ready: int) -> tuple[int, int]:
        """Rule ``serial`` (NeuPIMs' npu-only branch, SystolicWS.cc:265-270, 331-377): an instruction takes
        H + W + s - 1 cycles (s = its stream cycles); a preload waits until the previous instruction has left
        the array, or, into an empty array, 8 cycles for a one-column (GEMV) block and W otherwise; a
        non-preload instruction follows the previous one's stream."""
        cfg = self.cfg
        latency = cfg.height + cfg.width + ws_stream_cycles(cfg, instr.rows, floor=1) - 1
        empty = self.last_start_cycles is None or self.busy_until_cycles <= ready
        if instr.preload:
            start = ready + (8 if instr.cols == 1 else cfg.width) if empty else self.busy_until_cycles
        else:
            start = ready if empty else max(ready, self.busy_until_cycles - cfg.height - cfg.width + 1)
        return start, start + latency

    def inputs_consumed_cycles(self, instr: ArrayInstr, start: int, finish: int) -> int:
        """When an instruction has read its last operand from the scratchpad (its half can be refilled):
        WS after its rows have streamed in (weights were taken at the preload), OS before the output drain."""
        if self.cfg.ws_preload_rule == "scalesim":
            # SCALE-Sim's demand matrices: WS reads its last input row at 2H + r - 2 (H weight rows, then r
            # rows skewed over H); OS its last operand at T - 1 plus the longer of the two skews
            h, w = self.cfg.height, self.cfg.width
            return start + (instr.depth + max(h, w) - 1 if self.cfg.dataflow == "os" else 2 * h + instr.rows - 1)
        if self.cfg.dataflow == "os":
            return finish - instr.rows
        return start + ws_stream_cycles(self.cfg, instr.rows)

    def issue(self, instr: ArrayInstr, ready_cycles: int = 0) -> tuple[int, int]:
        start, finish = self.peek(instr, ready_cycles)
        self.last_start_cycles = start
        self.last_rows = instr.rows
        self.busy_until_cycles = max(self.busy_until_cycles, finish)
        return start, finish


def instr_sequence_cycles(cfg: NpuConfig, instrs: Sequence[ArrayInstr]) -> int:
    """Cycles for a sequence of instructions with all data ready at cycle 0 (last result written)."""
    pipe = ArrayPipeline(cfg)
    for instr in instrs:
        pipe.issue(instr, 0)
    return pipe.busy_until_cycles


# ---- DMA tiles ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DmaTile:
    """A strided block of a row-major tensor to move between DRAM and a buffer.

    `offset_bytes` is relative to the tensor's base address; `rows` runs of `row_bytes` bytes, `stride_bytes`
    apart. The integrator maps tensor names to base addresses and turns `address_ranges` into requests.
    """

    tensor: str
    direction: str          # "load" or "store"
    offset_bytes: int
    rows: int
    row_bytes: int
    stride_bytes: int

    @property
    def bytes(self) -> int:
        return self.rows * self.row_bytes

    def address_ranges(self, base_bytes: int = 0) -> list[tuple[int, int]]:
        """Half-open [start, end) byte ranges, contiguous rows merged."""
        start = base_bytes + self.offset_bytes
        if self.row_bytes == self.stride_bytes or self.rows == 1:
            return [(start, start + self.bytes)]
        return [(start + i * self.stride_bytes, start + i * self.stride_bytes + self.row_bytes)
                for i in range(self.rows)]


# ---- tiling -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TileShape:
    """Per-tile extents along M (rows of A), K (reduction) and N (columns of B)."""

    m: int
    k: int
    n: int


def tile_buffer_bytes(cfg: NpuConfig, shape: TileShape) -> tuple[int, int]:
    """(scratchpad bytes for the A and B tiles, accumulator bytes for the output tile) of one tile."""
    spad = (shape.m * shape.k + shape.k * shape.n) * cfg.dtype_bytes
    acc = shape.m * shape.n * cfg.acc_dtype_bytes
    return spad, acc


def tile_fits(cfg: NpuConfig, shape: TileShape) -> bool:
    """Double buffering: one tile's A + B must fit in half the scratchpad, its output in half the accumulator."""
    spad, acc = tile_buffer_bytes(cfg, shape)
    return spad <= cfg.scratchpad_bytes // 2 and acc <= cfg.accumulator_bytes // 2


def _candidates(dim: int, unit: int) -> list[int]:
    """Tile extents worth trying: powers-of-two multiples of the array edge, the full dimension, and
    power-of-two fractions of the edge for buffers too small for a full block."""
    out = {dim}
    mult = unit
    while mult < dim:
        out.add(mult)
        mult *= 2
    frac = unit // 2
    while frac >= 1:
        out.add(min(frac, dim))
        frac //= 2
    return sorted(v for v in out if 1 <= v <= dim)


def dram_traffic_bytes(cfg: NpuConfig, m: int, k: int, n: int, shape: TileShape) -> int:
    """Bytes moved by the m-n-k loop order with every tile loading its own A and B blocks: A is read once per
    N tile, B once per M tile, C written once."""
    tm, tn = math.ceil(m / shape.m), math.ceil(n / shape.n)
    return (m * k * tn + k * n * tm + m * n) * cfg.dtype_bytes


def array_occupancy_cycles(cfg: NpuConfig, m: int, k: int, n: int, shape: TileShape) -> int:
    """Array issue slots of the whole GEMM under `shape` when it streams without stalls (sum over tiles of
    instructions x issue offset for WS, of fold cycles for OS); the planner's first criterion."""
    total = 0
    for tm, cm in _extents(m, shape.m):
        for tk, ck in _extents(k, shape.k):
            for tn, cn in _extents(n, shape.n):
                count = cm * ck * cn
                if cfg.dataflow == "ws":
                    per = math.ceil(tk / cfg.height) * math.ceil(tn / cfg.width) * \
                        ws_issue_offset_cycles(cfg, tm, True)
                elif cfg.ws_preload_rule == "scalesim":   # full-array folds, H + W + T - 2 each
                    per = math.ceil(tm / cfg.height) * math.ceil(tn / cfg.width) * (cfg.height + cfg.width + tk - 2)
                else:   # sum of 2r + c + T - 2 over the nr x nc folds: every row counted nc times, etc.
                    nr, nc = math.ceil(tm / cfg.height), math.ceil(tn / cfg.width)
                    per = 2 * tm * nc + tn * nr + nr * nc * (tk - 2)
                total += count * per
    return total


def _extents(dim: int, tile: int) -> list[tuple[int, int]]:
    """[(extent, how many tiles have it)]: the full tiles and the ragged last one."""
    full, rest = divmod(dim, tile)
    out = [(tile, full)] if full else []
    if rest:
        out.append((rest, 1))
    return out


def plan_tile_shape(cfg: NpuConfig, m: int, k: int, n: int) -> TileShape:
    """Choose the tile shape: fewest array cycles first (the array is what this model times), then least DRAM
    traffic, then fewest tiles, then the tallest tile.

    Only shapes passing `tile_fits` are considered. Raises ConfigError when the buffers cannot hold even a
    1 x 1 x 1 tile.
    """
    for name, v in (("m", m), ("k", k), ("n", n)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"GEMM dimension {name} must be a positive integer, got {v!r}")
    half_spad_elems = cfg.scratchpad_bytes // 2 // cfg.dtype_bytes
    half_acc_elems = cfg.accumulator_bytes // 2 // cfg.acc_dtype_bytes
    best: tuple[tuple[int, int, int, int], TileShape] | None = None
    for tk in _candidates(k, cfg.height):
        for tn in _candidates(n, cfg.width):
            room = half_spad_elems - tk * tn
            if room < tk:
                continue
            tm = min(m, room // tk, half_acc_elems // tn)
            if tm < 1:
                continue
            shape = TileShape(tm, tk, tn)
            tiles = math.ceil(m / tm) * math.ceil(k / tk) * math.ceil(n / tn)
            key = (array_occupancy_cycles(cfg, m, k, n, shape), dram_traffic_bytes(cfg, m, k, n, shape), tiles, -tm)
            if best is None or key < best[0]:
                best = (key, shape)
    if best is None:
        raise ConfigError("memory.scratchpad_bytes",
                          f"too small for any GEMM tile: need at least {2 * 2 * cfg.dtype_bytes} bytes of scratchpad "
                          f"and {2 * cfg.acc_dtype_bytes} bytes of accumulator (got {cfg.scratchpad_bytes}, "
                          f"{cfg.accumulator_bytes})", source=cfg.name)
    return best[1]


@dataclass(frozen=True)
class GemmTile:
    """One scratchpad tile of a GEMM: its block coordinates, the array instructions that compute it, and the
    DMA it needs (loads before it starts, stores once its output block is complete)."""

    index: int
    m0: int
    k0: int
    n0: int
    m: int
    k: int
    n: int
    output_index: int       # which output block (accumulator slot user) this tile adds into
    first_k: bool
    last_k: bool
    instrs: tuple[ArrayInstr, ...]
    loads: tuple[DmaTile, ...]
    stores: tuple[DmaTile, ...]
    latency_cycles: int     # alone on an empty array, data ready at 0
    occupancy_cycles: int   # array issue slots it takes when the array is already streaming

    @property
    def load_bytes(self) -> int:
        return sum(d.bytes for d in self.loads)

    @property
    def store_bytes(self) -> int:
        return sum(d.bytes for d in self.stores)

    @property
    def macs(self) -> int:
        return self.m * self.k * self.n


@dataclass(frozen=True)
class GemmSchedule:
    """C[M,N] = A[M,K] @ B[K,N] as an ordered list of tiles (loop order m, n, k; k innermost so partial
    sums stay in the accumulator)."""

    cfg: NpuConfig
    m: int
    k: int
    n: int
    shape: TileShape
    tiles: tuple[GemmTile, ...]
    names: tuple[str, str, str] = ("A", "B", "C")

    @property
    def macs(self) -> int:
        return self.m * self.k * self.n

    @property
    def load_bytes(self) -> int:
        return sum(t.load_bytes for t in self.tiles)

    @property
    def store_bytes(self) -> int:
        return sum(t.store_bytes for t in self.tiles)

    @property
    def instrs(self) -> list[ArrayInstr]:
        return [i for t in self.tiles for i in t.instrs]

    def array_cycles(self) -> int:
        """Cycles of the bare instruction stream (all operands ready at 0, buffers ignored)."""
        return instr_sequence_cycles(self.cfg, self.instrs)

    def to_frame(self) -> pd.DataFrame:
        """One row per tile: block origin and extents, instructions, cycles and DMA bytes."""
        import pandas as pd

        return pd.DataFrame([{
            "tile": t.index, "m0": t.m0, "k0": t.k0, "n0": t.n0, "m": t.m, "k": t.k, "n": t.n,
            "output": t.output_index, "instrs": len(t.instrs), "latency_cycles": t.latency_cycles,
            "occupancy_cycles": t.occupancy_cycles, "load_bytes": t.load_bytes, "store_bytes": t.store_bytes,
        } for t in self.tiles])

    def compute_only_cycles(self) -> int:
        """Cycles with every DMA instantaneous: the compute bound of this schedule, including waits the
        double-buffered scratchpad and accumulator impose (equal to array_cycles when they impose none)."""
        return overlap_timeline(self).total_cycles


def _tile_instrs(cfg: NpuConfig, m: int, k: int, n: int) -> tuple[ArrayInstr, ...]:
    out: list[ArrayInstr] = []
    if cfg.dataflow == "ws":
        for kb in range(0, k, cfg.height):
            for nb in range(0, n, cfg.width):
                out.append(ArrayInstr(rows=m, cols=min(cfg.width, n - nb), depth=min(cfg.height, k - kb)))
    else:
        for mb in range(0, m, cfg.height):
            for nb in range(0, n, cfg.width):
                out.append(ArrayInstr(rows=min(cfg.height, m - mb), cols=min(cfg.width, n - nb), depth=k,
                                      preload=False))
    return tuple(out)


def schedule_gemm(cfg: NpuConfig, m: int, k: int, n: int, shape: TileShape | None = None,
                  names: tuple[str, str, str] = ("A", "B", "C")) -> GemmSchedule:
    """Tile a GEMM for `cfg` (plan_tile_shape unless `shape` is given) and list each tile's DMA and compute.

    Tensors are row-major with dtype_bytes elements: A is M x K, B is K x N, C (stored in the input dtype,
    as the next layer reads it) is M x N. `names` label the tensors in the DMA tiles.
    """
    if shape is None:
        shape = plan_tile_shape(cfg, m, k, n)
    elif not tile_fits(cfg, shape):
        spad, acc = tile_buffer_bytes(cfg, shape)
        raise ValueError(f"tile {shape} needs {spad} B of scratchpad and {acc} B of accumulator; the halves are "
                         f"{cfg.scratchpad_bytes // 2} and {cfg.accumulator_bytes // 2} B")
    a_name, b_name, c_name = names
    d = cfg.dtype_bytes
    tiles: list[GemmTile] = []
    output_index = 0
    cache: dict[tuple[int, int, int], tuple[tuple[ArrayInstr, ...], int, int]] = {}
    for m0 in range(0, m, shape.m):
        tm = min(shape.m, m - m0)
        for n0 in range(0, n, shape.n):
            tn = min(shape.n, n - n0)
            for k0 in range(0, k, shape.k):
                tk = min(shape.k, k - k0)
                key = (tm, tk, tn)
                if key not in cache:
                    instrs = _tile_instrs(cfg, tm, tk, tn)
                    if cfg.ws_preload_rule == "scalesim":
                        occupancy = sum(scalesim_fold_cycles(cfg, i) for i in instrs)
                    elif cfg.dataflow == "ws":
                        occupancy = sum(ws_issue_offset_cycles(cfg, tm, i.preload) for i in instrs)
                    else:
                        occupancy = sum(os_fold_cycles(i.rows, i.cols, i.depth) for i in instrs)
                    cache[key] = (instrs, instr_sequence_cycles(cfg, instrs), occupancy)
                instrs, latency, occupancy = cache[key]
                last_k = k0 + tk >= k
                loads = (DmaTile(a_name, "load", (m0 * k + k0) * d, tm, tk * d, k * d),
                         DmaTile(b_name, "load", (k0 * n + n0) * d, tk, tn * d, n * d))
                stores = (DmaTile(c_name, "store", (m0 * n + n0) * d, tm, tn * d, n * d),) if last_k else ()
                tiles.append(GemmTile(index=len(tiles), m0=m0, k0=k0, n0=n0, m=tm, k=tk, n=tn,
                                      output_index=output_index, first_k=k0 == 0, last_k=last_k,
                                      instrs=instrs, loads=loads, stores=stores, latency_cycles=latency,
                                      occupancy_cycles=occupancy))
            output_index += 1
    return GemmSchedule(cfg=cfg, m=m, k=k, n=n, shape=shape, tiles=tuple(tiles), names=names)


# ---- overlapped timeline ------------------------------------------------------------------------------
@dataclass
class TileTiming:
    """When one tile's load was issued and finished, when its compute ran, and why compute waited."""

    load_issue_cycles: int
    load_done_cycles: int
    compute_start_cycles: int
    compute_done_cycles: int
    stall_cycles: int          # how much later the tile's first instruction started than a ready tile would
    stall_reason: str          # "none", "dma" (waiting for its loads) or "accumulator" (waiting for a store)
    inputs_consumed_cycles: int = 0   # its scratchpad half is free again from here
    store_done_cycles: int | None = None


@dataclass
class Timeline:
    """The overlapped execution of a schedule: per-tile timing plus totals and utilisation."""

    schedule: GemmSchedule
    tiles: list[TileTiming] = field(default_factory=list)

    @property
    def total_cycles(self) -> int:
        ends = [t.compute_done_cycles for t in self.tiles]
        ends += [t.store_done_cycles for t in self.tiles if t.store_done_cycles is not None]
        return max(ends, default=0)

    @property
    def dma_stall_cycles(self) -> int:
        return sum(t.stall_cycles for t in self.tiles if t.stall_reason == "dma")

    @property
    def accumulator_stall_cycles(self) -> int:
        return sum(t.stall_cycles for t in self.tiles if t.stall_reason == "accumulator")

    @property
    def utilisation(self) -> float:
        """Useful MACs over what one array could do in the elapsed cycles."""
        total = self.total_cycles
        return self.schedule.macs / (self.schedule.cfg.macs_per_cycle * total) if total else 0.0

    def to_frame(self) -> pd.DataFrame:
        """One row per tile with its load, compute and store times and its stall."""
        import pandas as pd

        return pd.DataFrame([{"tile": i, **vars(t)} for i, t in enumerate(self.tiles)])

    @property
    def bound(self) -> str:
        """'memory' when waiting on DMA (or on stores freeing the accumulator) costs more than 5 % of the
        run, otherwise 'compute'."""
        waiting = self.dma_stall_cycles + self.accumulator_stall_cycles
        return "memory" if waiting > 0.05 * max(self.total_cycles, 1) else "compute"


class DoubleBufferTimeline:
    """Step-by-step overlap of DMA and compute for an integrator that gets load completion times from a
    real DRAM model: ask `next_load_issue_cycle()`, issue the tile's `loads` then, report the cycle they
    finished with `record_load_done()`; repeat for every tile; read `timeline`.

    Rules: scratchpad halves alternate, so tile i's loads start once tile i-1's loads are done (one DMA
    engine) and tile i-2's instructions have read their operands (its half is free). Accumulator halves alternate per output
    block, so the first tile of output block o waits for block o-2's store. A block is stored once its last
    K tile finishes, on a store engine that serves blocks in order.
    """

    def __init__(self, schedule: GemmSchedule, store_cycles: Sequence[int] | None = None):
        self.schedule = schedule
        self.pipe = ArrayPipeline(schedule.cfg)
        self.timeline = Timeline(schedule)
        n = len(schedule.tiles)
        self.store_cycles = list(store_cycles) if store_cycles is not None else [0] * n
        if len(self.store_cycles) != n:
            raise ValueError(f"store_cycles has {len(self.store_cycles)} entries for {n} tiles")
        self._store_done_by_output: dict[int, int] = {}
        self._last_store_done = 0

    @property
    def done(self) -> bool:
        return len(self.timeline.tiles) == len(self.schedule.tiles)

    @property
    def next_tile(self) -> GemmTile:
        """The tile whose loads are to be issued next."""
        i = len(self.timeline.tiles)
        if i >= len(self.schedule.tiles):
            raise IndexError("every tile has been recorded")
        return self.schedule.tiles[i]

    def next_load_issue_cycle(self) -> int:
        i = len(self.timeline.tiles)
        if i >= len(self.schedule.tiles):
            raise IndexError("every tile has been recorded")
        issue = self.timeline.tiles[i - 1].load_done_cycles if i >= 1 else 0
        if i >= 2:
            issue = max(issue, self.timeline.tiles[i - 2].inputs_consumed_cycles)
        return issue

    def record_load_done(self, ready_cycles: int) -> TileTiming:
        """Record when the next tile's loads completed (clamped to no earlier than their issue)."""
        issue = self.next_load_issue_cycle()
        tile = self.schedule.tiles[len(self.timeline.tiles)]
        ready = max(int(ready_cycles), issue)
        acc_free = 0
        if tile.first_k and tile.output_index >= 2:
            acc_free = self._store_done_by_output[tile.output_index - 2]
        data_ready = max(ready, acc_free)
        unconstrained_start, _ = self.pipe.peek(tile.instrs[0], 0)
        start = done = consumed = None
        for instr in tile.instrs:
            s, f = self.pipe.issue(instr, data_ready)
            start = s if start is None else start
            done = f if done is None else max(done, f)
            c = self.pipe.inputs_consumed_cycles(instr, s, f)
            consumed = c if consumed is None else max(consumed, c)
        stall = start - unconstrained_start
        reason = "none" if stall <= 0 else ("dma" if ready >= acc_free else "accumulator")
        timing = TileTiming(issue, ready, start, done, max(stall, 0), reason, consumed)
        if tile.last_k:
            store_start = max(done, self._last_store_done)
            timing.store_done_cycles = store_start + self.store_cycles[tile.index]
            self._last_store_done = timing.store_done_cycles
            self._store_done_by_output[tile.output_index] = timing.store_done_cycles
        self.timeline.tiles.append(timing)
        return timing


    def record_store_done(self, timing: TileTiming, done_cycles: int) -> None:
        """Replace the store completion of the block `timing` ended (recorded with store_cycles 0) by the
        cycle a real memory finished it; later tiles of the block two behind wait for it."""
        tile = self.schedule.tiles[next(i for i, t in enumerate(self.timeline.tiles) if t is timing)]
        timing.store_done_cycles = max(int(done_cycles), timing.compute_done_cycles)
        self._store_done_by_output[tile.output_index] = timing.store_done_cycles
        self._last_store_done = max(self._last_store_done, timing.store_done_cycles)


def overlap_timeline(schedule: GemmSchedule, load_cycles: Sequence[int] | None = None,
                     store_cycles: Sequence[int] | None = None) -> Timeline:
    """Overlapped timeline when tile i's loads take `load_cycles[i]` once issued (0 = compute bound)."""
    n = len(schedule.tiles)
    loads = list(load_cycles) if load_cycles is not None else [0] * n
    if len(loads) != n:
        raise ValueError(f"load_cycles has {len(loads)} entries for {n} tiles")
    tl = DoubleBufferTimeline(schedule, store_cycles)
    for cycles in loads:
        tl.record_load_done(tl.next_load_issue_cycle() + int(cycles))
    return tl.timeline


def bandwidth_dma_cycles(schedule: GemmSchedule, bytes_per_cycle: float) -> tuple[list[int], list[int]]:
    """(load, store) cycles per tile when each DMA engine moves `bytes_per_cycle` (a stand-in for DRAM).

    The load and store engines are separate (as ONNXim's ld and st queues); for a bus shared by both
    directions pass the share each direction gets."""
    if bytes_per_cycle <= 0:
        raise ValueError(f"bytes_per_cycle must be > 0, got {bytes_per_cycle}")
    return ([math.ceil(t.load_bytes / bytes_per_cycle) for t in schedule.tiles],
            [math.ceil(t.store_bytes / bytes_per_cycle) for t in schedule.tiles])


# ---- functional mode ------------------------------------------------------------------------------------
def run_gemm_functional(schedule: GemmSchedule, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Compute A @ B the way the schedule does: FP16 operands, FP32 accumulation, tile by tile and array
    block by array block, so a tiling bug (a missed or doubled block) shows up as a wrong result. Returns
    the FP32 accumulator contents (the store to C would round them to the operand dtype)."""
    cfg = schedule.cfg
    if a.shape != (schedule.m, schedule.k) or b.shape != (schedule.k, schedule.n):
        raise ValueError(f"operands {a.shape} x {b.shape} do not match the schedule "
                         f"({schedule.m} x {schedule.k}) x ({schedule.k} x {schedule.n})")
    a16 = np.asarray(a).astype(np.float16)
    b16 = np.asarray(b).astype(np.float16)
    out = np.zeros((schedule.m, schedule.n), dtype=np.float32)
    acc = np.zeros((0, 0), dtype=np.float32)
    for t in schedule.tiles:
        if t.first_k:
            acc = np.zeros((t.m, t.n), dtype=np.float32)
        a_tile = a16[t.m0:t.m0 + t.m, t.k0:t.k0 + t.k]
        b_tile = b16[t.k0:t.k0 + t.k, t.n0:t.n0 + t.n]
        if cfg.dataflow == "ws":
            blocks = [(0, t.m, kb, nb) for kb in range(0, t.k, cfg.height) for nb in range(0, t.n, cfg.width)]
            depth = cfg.height
        else:
            blocks = [(mb, min(cfg.height, t.m - mb), 0, nb) for mb in range(0, t.m, cfg.height)
                      for nb in range(0, t.n, cfg.width)]
            depth = t.k
        for (mb, rows, kb, nb), instr in zip(blocks, t.instrs, strict=True):
            lhs = a_tile[mb:mb + rows, kb:kb + depth].astype(np.float32)
            rhs = b_tile[kb:kb + depth, nb:nb + instr.cols].astype(np.float32)
            acc[mb:mb + rows, nb:nb + instr.cols] += lhs @ rhs
        if t.last_k:
            out[t.m0:t.m0 + t.m, t.n0:t.n0 + t.n] = acc
    return out
