"""A GEMM on the NPU with its DMA as real requests through the cycle-accurate DRAM (the channel engine).

The tile schedule and the double-buffer rules are archsim.npu.systolic's (`schedule_gemm`,
`DoubleBufferTimeline`); here every load and store of a tile becomes one read / write request per DRAM access
of its address ranges, offered through a load (or store) port of a `MemorySystem` at the cycle the DMA engine
issues it, and the tile's operands are ready when the last of its reads completes (one completion-group event
per tile: `MemoryUnit.group` of archsim.engine.loop). Stores are written when their output block is complete; a block
two behind must be stored before its accumulator half is reused.

Time: the engine counts DRAM cycles, the timeline NPU cycles; conversions round up (a result is never
available before it exists). Events are handled in time order: the loads of tile i+1 are enqueued as soon as
their issue cycle is known (when tile i's loads are done), before the engine is advanced to wait for
anything else, so no request is ever offered in the engine's past.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from archsim.dram import mapping as mapping_mod
from archsim.dram.spec import DramSpec
from archsim.engine.dma import Descriptors, count_requests
from archsim.engine.loop import EventLoop, MemoryUnit
from archsim.engine.memory import MemorySystem
from archsim.npu.config import NpuConfig
from archsim.npu.systolic import (
    ArrayInstr,
    ArrayPipeline,
    DmaTile,
    DoubleBufferTimeline,
    GemmSchedule,
    Timeline,
    schedule_gemm,
    ws_stream_cycles,
)


@dataclass
class DramGemm:
    """Outcome of `simulate_gemm`: the NPU timeline, the memory system (log, counters) and byte counts."""

    schedule: GemmSchedule
    timeline: Timeline
    memory: MemorySystem
    read_bytes: int
    write_bytes: int
    npu_cycles: int

    @property
    def bytes_per_npu_cycle(self) -> float:
        return (self.read_bytes + self.write_bytes) / max(self.npu_cycles, 1)


LAYOUTS = ("row_major", "blocked")

def _blocked_range(schedule: GemmSchedule, d: DmaTile, base: int) -> tuple[int, int]:
    """The tile's bytes in the tile-blocked layout: the tensor stored tile after tile (row-major over tiles,
    every slot a full tile), so one DMA tile is one contiguous range."""
    sh, eb = schedule.shape, schedule.cfg.dtype_bytes
    role = schedule.names.index(d.tensor)
    rows, cols, tr, tc = ((schedule.m, schedule.k, sh.m, sh.k), (schedule.k, schedule.n, sh.k, sh.n),
                          (schedule.m, schedule.n, sh.m, sh.n))[role]
    r0, c0 = divmod(d.offset_bytes // eb, cols)
    block = (r0 // tr) * math.ceil(cols / tc) + c0 // tc
    start = base + block * tr * tc * eb
    return start, start + d.bytes


def _requests(spec: DramSpec, tiles: tuple[DmaTile, ...], bases: dict[str, int],
              schedule: GemmSchedule | None = None, layout: str = "row_major") -> np.ndarray:
    """Byte addresses of every DRAM access the DMA tiles touch (access-aligned). `layout`: row_major tensors,
    or blocked (needs `schedule`: each tile contiguous, the layout an NPU compiler gives its operands)."""
    a = spec.access_bytes
    out = []
    for d in tiles:
        ranges = [_blocked_range(schedule, d, bases[d.tensor])] if layout == "blocked" else \
            d.address_ranges(bases[d.tensor])
        for lo, hi in ranges:
            out.append(np.arange(lo // a * a, hi, a, dtype=np.uint64))
    return np.concatenate(out) if out else np.zeros(0, dtype=np.uint64)


def _descriptors(tiles: tuple[DmaTile, ...], bases: dict[str, int], schedule: GemmSchedule | None = None,
                 layout: str = "row_major") -> Descriptors:
    """The DMA tiles as strided byte blocks (archsim.engine.dma), the ranges `_requests` expands: a tile's rows,
    or one range where they are contiguous (DmaTile.address_ranges) or the layout is blocked."""
    out = Descriptors()
    for d in tiles:
        if layout == "blocked":
            out.add_range(*_blocked_range(schedule, d, bases[d.tensor]))
        elif d.row_bytes == d.stride_bytes or d.rows == 1:
            out.add(bases[d.tensor] + d.offset_bytes, 0, 1, d.bytes)
        else:
            out.add(bases[d.tensor] + d.offset_bytes, d.stride_bytes, d.rows, d.row_bytes)
    return out


class GemmAgent:
    """One GEMM on one NPU array whose DMA goes through a shared `MemorySystem`, a `MemoryUnit` of an exact
    `EventLoop` counted in the memory's cycles (`ticks="cycles"`): each tile's loads (and each block's stores)
    are one completion group.

    Event-driven form of the double-buffer rules (`DoubleBufferTimeline`): the loads of tile i+1 are enqueued
    once tile i's loads are done and tile i-1 has read its operands; the first tile of output block o waits for
    block o-2's store; a block's stores are enqueued when its last K tile finishes computing. Loads and stores
    use separate ports (a load DMA engine and a store DMA engine, as ONNXim's ld and st queues), so a store
    waiting for compute never holds back the next tile's loads. `start_npu` is the NPU cycle at which the
    GEMM may begin; `on_finish(agent)` is called when its last store is done (`end_npu` then holds the cycle).
    `layout`: how A, B and C lie in DRAM (row_major, or blocked: tile after tile, see `_blocked_range`).
    `dma_ranges`: a tile's DMA is enqueued as strided blocks the engine expands (MemorySystem.enqueue_ranges);
    False enqueues it request by request (the same requests: tests/test_engine_dma.py).
    """

    def __init__(self, memory: MemoryUnit, schedule: GemmSchedule, bases: dict[str, int], start_npu: int,
                 load_port: int, store_port: int, mapping: str | mapping_mod.Decoder, npu_hz: float,
                 on_finish: Callable[[GemmAgent], None] | None = None, layout: str = "row_major",
                 dma_ranges: bool = True):
        self.memory, self.schedule, self.bases = memory, schedule, bases
        self.spec = memory.ms.spec
        # a Decoder (built once by a system running many GEMMs) or a mapping name
        self.decode = mapping if isinstance(mapping, mapping_mod.Decoder) else mapping_mod.Decoder(self.spec, mapping)
        self.start_npu = start_npu
        self.load_port, self.store_port = load_port, store_port
        self.ratio = (1e12 / npu_hz) / self.spec.tCK_ps           # DRAM cycles per NPU cycle
        self.on_finish = on_finish
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
        self.layout = layout
        self.dma_ranges = dma_ranges
        self.dbt = DoubleBufferTimeline(schedule)
        self.load_done: dict[int, int] = {}       # tile -> loads done (relative NPU cycles)
        self.store_done: dict[int, int] = {}      # output block -> stores done (relative NPU cycles)
        self.store_timing: dict[int, Any] = {}
        self.enqueued = 0                         # tiles whose loads are enqueued
        self.reads = self.writes = 0
        self.end_npu: int | None = None
        self._stores_left = 0

    # NPU cycles relative to the GEMM start <-> absolute DRAM cycles (rounded up: nothing is early)
    def _to_dram(self, rel_npu: int) -> int:
        return math.ceil((self.start_npu + rel_npu) * self.ratio - 1e-9)

    def _to_rel_npu(self, dram: int) -> int:
        return math.ceil(dram / self.ratio - 1e-9) - self.start_npu

    def _enqueue(self, tiles: tuple[DmaTile, ...], write: bool, at_rel: int, callback: Callable[[int], None]) -> None:
        ms = self.memory.ms
        port = self.store_port if write else self.load_port
        if self.dma_ranges and isinstance(ms, MemorySystem):
            # the tiles as strided blocks, expanded and decoded into the request pool by compiled code (issue 38):
            # the requests, slots and order of the request-by-request path below
            blocks = _descriptors(tiles, self.bases, self.schedule, self.layout).arrays()
            n = int(count_requests(*blocks, int(self.spec.access_bytes)))
            if n == 0:
                callback(self._to_dram(at_rel))
                return
            ms.enqueue_ranges(port, *blocks, self.decode, int(write), self._to_dram(at_rel),
                              self.memory.group(n, callback))
        else:
            addr = _requests(self.spec, tiles, self.bases, self.schedule, self.layout)
            n = len(addr)
            if n == 0:
                callback(self._to_dram(at_rel))
                return
            dec = self.decode(addr)
            tag = self.memory.group(n, callback)
            ms.enqueue_requests(port, dec["channel"], dec["bank"], dec["row"], dec["column"], int(write),
                                self._to_dram(at_rel), tag)
        if write:
            self.writes += n
        else:
            self.reads += n

    def start(self) -> None:
        tiles = self.schedule.tiles
        if not tiles:
            self._finish()
            return
        self.enqueued = 1
        self._enqueue(tiles[0].loads, False, 0, lambda done: self._loaded(0, done))

    def _loaded(self, i: int, done_dram: int) -> None:
        self.load_done[i] = max(self._to_rel_npu(done_dram), 0)
        self._progress()

    def _stored(self, o: int, done_dram: int) -> None:
        self.store_done[o] = self._to_rel_npu(done_dram)
        self._stores_left -= 1
        self._progress()

    def _progress(self) -> None:
        """Record every tile whose inputs are known, in order; enqueue loads and stores as they become known."""
        tiles = self.schedule.tiles
        dbt = self.dbt
        while not dbt.done:
            i = len(dbt.timeline.tiles)
            if i not in self.load_done:
                return
            ready = self.load_done[i]
            if self.enqueued == i + 1 and i + 1 < len(tiles):
                prev = dbt.timeline.tiles[i - 1].inputs_consumed_cycles if i >= 1 else 0
                self.enqueued += 1
                self._enqueue(tiles[i + 1].loads, False, max(ready, prev),
                              lambda done, j=i + 1: self._loaded(j, done))
            tile = tiles[i]
            if tile.first_k and tile.output_index >= 2:
                o = tile.output_index - 2
                if o not in self.store_done:
                    return
                if self.store_timing.get(o) is not None:
                    dbt.record_store_done(self.store_timing[o], self.store_done[o])
                    self.store_timing[o] = None
            timing = dbt.record_load_done(ready)
            if tile.last_k:
                self.store_timing[tile.output_index] = timing
                self._stores_left += 1
                self._enqueue(tile.stores, True, timing.compute_done_cycles,
                              lambda done, o=tile.output_index: self._stored(o, done))
        if self._stores_left == 0 and self.end_npu is None:
            for o, timing in self.store_timing.items():
                if timing is not None:
                    dbt.record_store_done(timing, self.store_done[o])
                    self.store_timing[o] = None
            self._finish()

    def _finish(self) -> None:
        self.end_npu = self.start_npu + self.dbt.timeline.total_cycles
        if self.on_finish is not None:
            self.on_finish(self)


def default_bases(spec: DramSpec, dtype_bytes: int, m: int, k: int, n: int, at: int = 0) -> dict[str, int]:
    """A, B, C one after another from byte `at`, each aligned to a DRAM row of every bank."""
    align = spec.row_bytes * spec.total_banks
    bases = {}
    for name, size in (("A", m * k * dtype_bytes), ("B", k * n * dtype_bytes), ("C", m * n * dtype_bytes)):
        bases[name] = at
        at += math.ceil(size / align) * align
    return bases


def simulate_gemm(cfg: NpuConfig, spec: DramSpec, m: int, k: int, n: int, controller: Any = None,
                  mapping: str | None = None, bases: dict[str, int] | None = None, log: bool = False,
                  dma_width: int | None = None, layout: str = "row_major", dma_ranges: bool = True) -> DramGemm:
    """C = A @ B on one NPU array with every DMA access simulated by the channel engine on `spec`.
    `dma_width`: requests each DMA engine may offer per DRAM cycle (default one per channel). `layout`,
    `dma_ranges`: GemmAgent's."""
    schedule = schedule_gemm(cfg, m, k, n)
    bases = bases or default_bases(spec, cfg.dtype_bytes, m, k, n)
    ms = MemorySystem(spec, controller, log=log, reuse_slots=True)     # every DMA request is in a completion group
    width = dma_width or spec.channels
    loop = EventLoop(name="NPU GEMM")
    memory = loop.add(MemoryUnit("DRAM", ms, ticks="cycles"))
    agent = GemmAgent(memory, schedule, bases, 0, ms.add_port(width=width), ms.add_port(width=width),
                      mapping or spec.default_mapping, cfg.clock_hz, layout=layout, dma_ranges=dma_ranges)
    agent.start()
    loop.run()
    a = spec.access_bytes
    return DramGemm(schedule, agent.dbt.timeline, ms, agent.reads * a, agent.writes * a, agent.dbt.timeline.total_cycles)


@dataclass(frozen=True)
class _Instr:
    """One array instruction of an `InstructionGemmAgent` program, the loads it waits for and the output block
    it completes (-1: none)."""

    instr: ArrayInstr
    loads: tuple[int, ...]
    store: int


class InstructionGemmAgent:
    """One GEMM (M tokens x K, weights K x N) with `dma: per_instruction` (the NPU preset's memory.dma): the
    whole GEMM is one tile, every load is issued at the start in program order, and each array instruction
    waits only for its own operands, as NeuPIMs' code runs its one-tile GEMMs (every MOVIN of a tile pushed to
    memory in one cycle, NeuPIMSystolicWS.cc:90-160; a compute instruction issues once its operands are in the
    scratchpad, Core.cc:255-275).

    Program (MatMul.cc:195-353): the stationary operand in blocks of W columns (the token tile when
    `stationary: activations`, the code's swapped operands) outermost, then K in blocks of H, then the streamed
    operand in blocks of W rows. Each streamed block is loaded during the first stationary block only, each
    stationary block with its first streamed block (a preload); an output block is stored once its last K
    block is computed. Loads take consecutive addresses from `base` in program order (the code's sequential
    DMA stream, Common.cc:73-114). `on_finish(agent)` is called once the last store is done; `end_npu` holds
    the NPU cycle, `busy_cycles` the array's issue slots."""

    def __init__(self, memory: MemoryUnit, cfg: NpuConfig, m: int, k: int, n: int, base: int, start_npu: int,
                 load_port: int, store_port: int, decode: mapping_mod.Decoder,
                 on_finish: Callable[[InstructionGemmAgent], None] | None = None):
        self.memory, self.cfg, self.base, self.start_npu = memory, cfg, base, start_npu
        self.spec = memory.ms.spec
        self.decode, self.load_port, self.store_port = decode, load_port, store_port
        self.ratio = (1e12 / cfg.clock_hz) / self.spec.tCK_ps
        self.on_finish = on_finish
        self.loads: list[int] = []            # bytes of each load, in program order
        self.stores: list[int] = []           # bytes of each output block
        self.program: list[_Instr] = []
        self._build(m, k, n)
        self.load_done: list[int | None] = [None] * len(self.loads)
        self.pipe = ArrayPipeline(cfg)
        self.next = 0                         # the next instruction to issue (in order)
        self.busy_cycles = 0
        self.end_npu: int | None = None
        self._stores_left = len(self.stores)
        self._last_store = 0
        self.reads = self.writes = 0

    def _build(self, m: int, k: int, n: int) -> None:
        cfg, eb = self.cfg, self.cfg.dtype_bytes
        stat, stream = (m, n) if cfg.stationary == "activations" else (n, m)
        W, H = cfg.width, cfg.height
        streamed: dict[tuple[int, int], int] = {}
        for s0 in range(0, stat, W):
            cols = min(W, stat - s0)
            for k0 in range(0, k, H):
                depth = min(H, k - k0)
                stat_load = -1
                for t0 in range(0, stream, W):
                    rows = min(W, stream - t0)
                    if s0 == 0:
                        streamed[(t0, k0)] = len(self.loads)
                        self.loads.append(rows * depth * eb)
                    if t0 == 0:
                        stat_load = len(self.loads)
                        self.loads.append(depth * cols * eb)
                    store = -1
                    if k0 + H >= k:
                        store = len(self.stores)
                        self.stores.append(rows * cols * eb)
                    self.program.append(_Instr(ArrayInstr(rows=rows, cols=cols, depth=depth, preload=t0 == 0),
                                               (streamed[(t0, k0)], stat_load), store))

    def _to_dram(self, rel_npu: int) -> int:
        return math.ceil((self.start_npu + rel_npu) * self.ratio - 1e-9)

    def _to_rel_npu(self, dram: int) -> int:
        return max(math.ceil(dram / self.ratio - 1e-9) - self.start_npu, 0)

    def _requests(self, lo: int, nbytes: int) -> dict[str, np.ndarray]:
        a = self.spec.access_bytes
        addr = np.arange(lo // a * a, lo + nbytes, a, dtype=np.uint64) % np.uint64(self.spec.capacity_bytes)
        return self.decode(addr)

    def start(self) -> None:
        at = self._to_dram(0)
        lo = self.base
        ms = self.memory.ms
        for i, nbytes in enumerate(self.loads):
            dec = self._requests(lo, nbytes)
            lo += nbytes
            tag = self.memory.group(len(dec["channel"]), lambda done, i=i: self._loaded(i, done))
            ms.enqueue_requests(self.load_port, dec["channel"], dec["bank"], dec["row"], dec["column"], 0, at, tag)
            self.reads += len(dec["channel"])
        self._store_base = lo
        if not self.program:
            self._finish()

    def _loaded(self, i: int, done_dram: int) -> None:
        self.load_done[i] = self._to_rel_npu(done_dram)
        ms = self.memory.ms
        while self.next < len(self.program):
            ins = self.program[self.next]
            ready = [self.load_done[j] for j in ins.loads if j >= 0]
            if any(r is None for r in ready):
                return
            start, finish = self.pipe.issue(ins.instr, max(ready))
            self.busy_cycles += (self.pipe.cfg.height if ins.instr.preload else 0) + \
                ws_stream_cycles(self.cfg, ins.instr.rows)
            self.next += 1
            if ins.store >= 0:
                dec = self._requests(self._store_base, self.stores[ins.store])
                self._store_base += self.stores[ins.store]
                tag = self.memory.group(len(dec["channel"]), self._stored)
                ms.enqueue_requests(self.store_port, dec["channel"], dec["bank"], dec["row"], dec["column"], 1,
                                    self._to_dram(finish), tag)
                self.writes += len(dec["channel"])

    def _stored(self, done_dram: int) -> None:
        self._last_store = max(self._last_store, self._to_rel_npu(done_dram))
        self._stores_left -= 1
        if self._stores_left == 0 and self.next == len(self.program):
            self._finish()

    def _finish(self) -> None:
        self.end_npu = self.start_npu + max(self.pipe.busy_until_cycles, self._last_store)
        if self.on_finish is not None:
            self.on_finish(self)


class VectorStreamAgent:
    """A vector operator whose rows go through DRAM (the NPU preset's `memory.vector_operands: dram`): every
    row's input loads issued at the start (`in_bytes` per row, all inputs), each row computed once its inputs
    are in (`row_cycles` NPU cycles, one row issued per cycle on the vector pipelines, which never make it
    wait: NeuPIMSystolicWS.cc:466-483) and its output (`out_bytes`) stored after, as NeuPIMs' code runs
    LayerNorm, GELU and the residual add (LayerNorm.cc:160-196, Gelu.cc:55-89, Add.cc:73-124). `on_finish(agent)`
    once the last store is done; `end_npu` holds the NPU cycle."""

    def __init__(self, memory: MemoryUnit, npu_hz: float, rows: int, in_bytes: int, out_bytes: int, row_cycles: int,
                 base: int, start_npu: int, load_port: int, store_port: int, decode: mapping_mod.Decoder,
                 on_finish: Callable[[VectorStreamAgent], None] | None = None):
        self.memory, self.base, self.start_npu = memory, base, start_npu
        self.spec = memory.ms.spec
        self.ratio = (1e12 / npu_hz) / self.spec.tCK_ps
        self.rows, self.in_bytes, self.out_bytes, self.row_cycles = rows, in_bytes, out_bytes, row_cycles
        self.load_port, self.store_port, self.decode, self.on_finish = load_port, store_port, decode, on_finish
        self.done: list[int | None] = [None] * rows
        self.next = 0
        self.issued = -1                      # NPU cycle (relative) the last row was issued
        self.end_npu: int | None = None
        self._stores_left = rows
        self._last = 0

    def _to_dram(self, rel_npu: int) -> int:
        return math.ceil((self.start_npu + rel_npu) * self.ratio - 1e-9)

    def _to_rel_npu(self, dram: int) -> int:
        return max(math.ceil(dram / self.ratio - 1e-9) - self.start_npu, 0)

    def _enqueue(self, lo: int, nbytes: int, write: bool, at: int, callback) -> None:
        a = self.spec.access_bytes
        addr = np.arange(lo // a * a, lo + nbytes, a, dtype=np.uint64) % np.uint64(self.spec.capacity_bytes)
        dec = self.decode(addr)
        tag = self.memory.group(len(addr), callback)
        self.memory.ms.enqueue_requests(self.store_port if write else self.load_port, dec["channel"], dec["bank"],
                                        dec["row"], dec["column"], int(write), at, tag)

    def start(self) -> None:
        if self.rows == 0:
            self._finish()
            return
        at = self._to_dram(0)
        for r in range(self.rows):
            self._enqueue(self.base + r * self.in_bytes, self.in_bytes, False, at, lambda d, r=r: self._loaded(r, d))

    def _loaded(self, r: int, done_dram: int) -> None:
        self.done[r] = self._to_rel_npu(done_dram)
        out_base = self.base + self.rows * self.in_bytes
        while self.next < self.rows and self.done[self.next] is not None:
            self.issued = max(self.done[self.next], self.issued + 1)
            end = self.issued + self.row_cycles
            self._enqueue(out_base + self.next * self.out_bytes, self.out_bytes, True, self._to_dram(end), self._stored)
            self.next += 1

    def _stored(self, done_dram: int) -> None:
        self._last = max(self._last, self._to_rel_npu(done_dram))
        self._stores_left -= 1
        if self._stores_left == 0:
            self._finish()

    def _finish(self) -> None:
        self.end_npu = self.start_npu + max(self._last, self.issued + self.row_cycles if self.rows else 0)
        if self.on_finish is not None:
            self.on_finish(self)
