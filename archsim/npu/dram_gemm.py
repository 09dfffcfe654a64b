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
from archsim.engine.loop import EventLoop, MemoryUnit
from archsim.engine.memory import MemorySystem
from archsim.npu.config import NpuConfig
from archsim.npu.systolic import DmaTile, DoubleBufferTimeline, GemmSchedule, Timeline, schedule_gemm


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
    """

    def __init__(self, memory: MemoryUnit, schedule: GemmSchedule, bases: dict[str, int], start_npu: int,
                 load_port: int, store_port: int, mapping: str | mapping_mod.Decoder, npu_hz: float,
                 on_finish: Callable[[GemmAgent], None] | None = None, layout: str = "row_major"):
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
        addr = _requests(self.spec, tiles, self.bases, self.schedule, self.layout)
        if len(addr) == 0:
            callback(self._to_dram(at_rel))
            return
        dec = self.decode(addr)
        tag = self.memory.group(len(addr), callback)
        self.memory.ms.enqueue_requests(self.store_port if write else self.load_port, dec["channel"], dec["bank"],
                                        dec["row"], dec["column"], int(write), self._to_dram(at_rel), tag)
        if write:
            self.writes += len(addr)
        else:
            self.reads += len(addr)

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
                  dma_width: int | None = None) -> DramGemm:
    """C = A @ B on one NPU array with every DMA access simulated by the channel engine on `spec`.
    `dma_width`: requests each DMA engine may offer per DRAM cycle (default one per channel)."""
    schedule = schedule_gemm(cfg, m, k, n)
    bases = bases or default_bases(spec, cfg.dtype_bytes, m, k, n)
    ms = MemorySystem(spec, controller, log=log, reuse_slots=True)     # every DMA request is in a completion group
    width = dma_width or spec.channels
    loop = EventLoop(name="NPU GEMM")
    memory = loop.add(MemoryUnit("DRAM", ms, ticks="cycles"))
    agent = GemmAgent(memory, schedule, bases, 0, ms.add_port(width=width), ms.add_port(width=width),
                      mapping or spec.default_mapping, cfg.clock_hz)
    agent.start()
    loop.run()
    a = spec.access_bytes
    return DramGemm(schedule, agent.dbt.timeline, ms, agent.reads * a, agent.writes * a, agent.dbt.timeline.total_cycles)
