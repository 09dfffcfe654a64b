"""A GEMM on the NPU with its DMA as real requests through the cycle-accurate DRAM (the channel engine).

The tile schedule and the double-buffer rules are archsim.npu.systolic's (`schedule_gemm`,
`DoubleBufferTimeline`); here every load and store of a tile becomes one read / write request per DRAM access
of its address ranges, offered through one port of a `MemorySystem` at the cycle the DMA engine issues it, and
the tile's operands are ready when the last of its reads completes (its done cycle, from the engine's
completion ring). Stores are written when their output block is complete; a block two behind must be stored
before its accumulator half is reused.

Time: the engine counts DRAM cycles, the timeline NPU cycles; conversions round up (a result is never
available before it exists). Events are handled in time order: the loads of tile i+1 are enqueued as soon as
their issue cycle is known (when tile i's loads are done), before the engine is advanced to wait for
anything else, so no request is ever offered in the engine's past.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from archsim.dram import mapping as mapping_mod
from archsim.dram.spec import DramSpec
from archsim.engine.channel import ST_COMPLETION, MemorySystem
from archsim.npu.config import NpuConfig
from archsim.npu.systolic import DmaTile, DoubleBufferTimeline, GemmSchedule, Timeline, schedule_gemm

STORE_TAG = 1 << 40        # store requests: STORE_TAG + output block; loads: the tile index


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


def _requests(spec: DramSpec, tiles: tuple[DmaTile, ...], bases: dict[str, int]) -> np.ndarray:
    """Byte addresses of every DRAM access the DMA tiles touch (access-aligned)."""
    a = spec.access_bytes
    out = []
    for d in tiles:
        for lo, hi in d.address_ranges(bases[d.tensor]):
            out.append(np.arange(lo // a * a, hi, a, dtype=np.uint64))
    return np.concatenate(out) if out else np.zeros(0, dtype=np.uint64)


def simulate_gemm(cfg: NpuConfig, spec: DramSpec, m: int, k: int, n: int, controller: Any = None,
                  mapping: str | None = None, bases: dict[str, int] | None = None, log: bool = False,
                  dma_width: int | None = None) -> DramGemm:
    """C = A @ B on one NPU array with every DMA access simulated by the channel engine on `spec`.
    `dma_width`: requests the DMA engine may offer per DRAM cycle (default one per channel)."""
    schedule = schedule_gemm(cfg, m, k, n)
    d = cfg.dtype_bytes
    if bases is None:      # A, B, C one after another, each aligned to a DRAM row of every bank
        align = spec.row_bytes * spec.total_banks
        sizes = {"A": m * k * d, "B": k * n * d, "C": m * n * d}
        bases, at = {}, 0
        for name, size in sizes.items():
            bases[name] = at
            at += math.ceil(size / align) * align
    mapping = mapping or spec.default_mapping
    ms = MemorySystem(spec, controller, log=log)
    port = ms.add_port(width=dma_width or spec.channels)
    dram_ps = spec.tCK_ps
    npu_ps = 1e12 / cfg.clock_hz
    to_dram = lambda c: math.ceil(c * npu_ps / dram_ps - 1e-9)      # noqa: E731  (NPU cycle -> DRAM cycle)
    to_npu = lambda c: math.ceil(c * dram_ps / npu_ps - 1e-9)       # noqa: E731

    pending: dict[int, int] = {}      # tag -> requests not yet complete
    last_done: dict[int, int] = {}    # tag -> latest done cycle (DRAM)
    reads = writes = 0

    def enqueue(addr: np.ndarray, write: bool, at_npu: int, tag: int) -> None:
        dec = mapping_mod.decode(spec, addr, mapping)
        ms.enqueue_requests(port, dec["channel"], dec["bank"], dec["row"], dec["column"], int(write),
                            to_dram(at_npu), tag)
        pending[tag] = pending.get(tag, 0) + len(addr)
        last_done.setdefault(tag, 0)

    def wait(tag: int) -> int:
        """Advance the engine until every request of `tag` is done; its last done cycle (NPU cycles)."""
        while pending.get(tag, 0) > 0:
            st = ms.advance()
            if st != ST_COMPLETION:
                raise RuntimeError(f"memory idle with requests of tag {tag} outstanding")
            for t, done in ms.drain():
                pending[t] -= 1
                last_done[t] = max(last_done[t], done)
        return to_npu(last_done[tag])

    dbt = DoubleBufferTimeline(schedule)
    tiles = schedule.tiles
    store_of: dict[int, Any] = {}     # output block -> its TileTiming (store recorded later)
    if tiles:
        addr = _requests(spec, tiles[0].loads, bases)
        reads += len(addr)
        enqueue(addr, False, 0, 0)
    for i, tile in enumerate(tiles):
        ready = wait(i)
        if i + 1 < len(tiles):
            # the next tile's loads issue once this tile's are done and tile i-1's half is free: both known
            # now, so enqueue them before waiting for anything else
            prev = dbt.timeline.tiles[i - 1].inputs_consumed_cycles if i >= 1 else 0
            issue = max(ready, prev)
            addr = _requests(spec, tiles[i + 1].loads, bases)
            reads += len(addr)
            enqueue(addr, False, issue, i + 1)
        if tile.first_k and tile.output_index >= 2:
            o = tile.output_index - 2
            dbt.record_store_done(store_of[o], wait(STORE_TAG + o))
        timing = dbt.record_load_done(ready)
        if tile.last_k:
            store_of[tile.output_index] = timing
            addr = _requests(spec, tile.stores, bases)
            writes += len(addr)
            enqueue(addr, True, timing.compute_done_cycles, STORE_TAG + tile.output_index)
    for o, timing in store_of.items():
        dbt.record_store_done(timing, wait(STORE_TAG + o))
    a = spec.access_bytes
    return DramGemm(schedule, dbt.timeline, ms, reads * a, writes * a, dbt.timeline.total_cycles)
