"""What is modelled (T3, Pati et al., ASPLOS'24, sec. 4; facts in the project's T3 research note):

* **Producer GEMM** (GPU-like, `GpuConfig`): each device computes its partial C_d = A_d @ B_d (T x H) in
  *waves* of `cus` workgroup tiles (tile_m x tile_n); a wave's operands are read from DRAM unless the L2
  (archsim.systems.t3.l2: set-associative LRU lines) still holds them; the reads of wave w+1 overlap the
  compute of wave w (double buffering), the compute of a wave takes its largest tile's FLOPs / per-CU rate.
  Sequential's output stores allocate L2 lines and evict operands; T3's NMC updates bypass the L2.
* **Chunks and stagger**: the output's columns are cut into N chunks (ring order); device d produces chunk
  (d - 1 - s) mod N at stage s (`stage_chunk`), so production order matches the ring (ring.rs_send_chunk).
* **Output address-space configuration per stage** (`role`): stage 0 -> `remote` (the GEMM's stores go to
  the next device, arriving there as NMC updates), stages 1..N-2 -> `local_dma` (local NMC updates; the
  tracker fires a pre-programmed DMA to the next device when a tile has all its updates), stage N-1 ->
  `final` (local updates; the tile is done when complete).
* **Tracker** (`Tracker`): a table of `entries` counting updates per output tile (local and remote/DMA, one
  count per 32 B access that completed); a tile whose count reaches its expected value fires and frees its
  entry. An update for a tile without an entry when the table is full waits in arrival order in an overflow
  queue (back-pressure at the memory controller in hardware) until an entry frees.
* **NMC**: every update is a read-modify-write request of the channel engine. With `nmc.update: command`
  (default) and a standard that has an update command (hbm2_nmc's NMC_ADD: an atomic read-add-write of one
  burst next to the bank, one column command with the write's bus timing) the engine issues that command,
  priced by the preset's energy table; with `rd_wr` (or a standard without one) it is RD, ALU latency, WR
  to the open row, priced as one update by the post-pass. It crosses the memory bus once (data movement).
* **DMA engine**: reads a fired tile through the communication source and sends it over the link.
* **MCA**: the memory's two request sources are `compute` (GEMM reads and stores) and `comm` (DMA reads,
  incoming updates, the sequential reduce-scatter's sends); `T3-MCA` uses the engine's `threshold`
  arbitration (compute first, comm only while the compute queue is below the threshold, or after
  `starvation_cap` cycles of waiting), `T3` and `Sequential` use FR-FCFS over both. The threshold
  (`mca_threshold`: Little's-law entries of a memory intensity) is `dynamic` by default: first estimated
  from the first K step's planned reads over its compute time, then re-estimated at every K step from the
  intensity observed in the step before (compute accesses enqueued over the time between the two steps'
  reads), so it follows the GEMM's phases (operands that hit in the L2, stores at a wave's end); `auto`
  keeps the first estimate, an integer fixes it. While the gate holds communication back, its open rows
  yield to the compute source (`mca.gate: yield`, engine arbitration `threshold_yield`).
* **Sequential**: the GEMM stores C with plain writes; then a ring RS (NCCL-like, pipelined per tile): step
  0 reads the chunk and sends it; steps 1..N-2 read the received copy and the local partial, add (CUs) and
  send; the owner reads both and writes the sum. The receiver writes each incoming tile to a receive buffer.
* **All-gather** is not fused in T3; it follows in every configuration as ring.collective_s (link-bound).

Devices: `devices="all"` simulates every device's memory cycle-accurately; `devices="one"` simulates device
0 and feeds it, as its incoming traffic, its own outgoing traffic relabelled one chunk back (the ring is
symmetric: what device N-1 sends to device 0 at time t is what device 0 sends to device 1 at t, for the
previous chunk). "one" needs equal chunks and no functional mode.

Time base: DRAM cycles of the device memory. GPU cycles and link times convert with ceil. The agents (GEMM
producer, tracker, DMA engine, links) run on archsim.engine.loop's exact event loop (`window_cycles: 0`, the
preset's): every request wait is a completion group the memory stops at, so the work it causes enters at its
done cycle; devices meet only through links, so each memory may run a hop latency ahead of the others.
`window_cycles: W > 0` runs the windowed loop instead (request waits polled every W cycles; work they cause in
the same memory can enter it up to W-1 cycles late), kept for the comparison in reports/t3/window.csv.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from archsim.config import require_int
from archsim.dram import mapping as mapping_mod
from archsim.dram.effects import Effect
from archsim.dram.spec import DramSpec
from archsim.engine.channel import CF_THRESH, KIND_READ, KIND_RMW, KIND_WRITE
from archsim.engine.compiling import clock, sim_seconds
from archsim.engine.loop import EventLoop, MemoryUnit
from archsim.engine.memory import MemorySystem
from archsim.errors import ConfigError, UserError
from archsim.interconnect.ring import RingConfig, chunk_bounds, collective_s
from archsim.systems.t3.l2 import L2Cache
from archsim.systems.t3.params import T3Params, load_t3_ring, update_action, update_energy_pj
from archsim.systems.t3.shapes import (
    COL_UNIT,
    SublayerShape,
    Tile,
    chunk_tiles,
    expert_tiles,
    role,
    stage_chunks,
    stage_of,
)
from archsim.systems.t3.tracker import Tracker
from archsim.systems.t3.variants import VARIANT_CONFIGS, mca_threshold  # noqa: F401  (mca_threshold: re-exported)

CONFIGS = list(VARIANT_CONFIGS)          # simulated; "ideal" is derived from the sequential run
# a MoE sublayer's GEMM order: `expert`: the active experts' GEMMs one after another, each in the staggered chunk
# order (a chunk is released when the last expert's tiles of it are in); `chunk`: every expert's tiles of a
# chunk before the next chunk (the chunks complete in ring order as a dense GEMM's do)
MOE_ORDERS = ("expert", "chunk")
ALL_CONFIGS = CONFIGS + ["ideal"]


def dram_energy(run: SublayerRun, params: T3Params) -> dict[str, float]:
    """DRAM energy (pJ, summed over the simulated devices) by component; NMC updates under `nmc`."""
    from archsim.energy import ACTION_COMPONENT, dram_action_energy_pj

    per = dram_action_energy_pj(run.spec)
    per["NMC_UPDATE"] = update_energy_pj(run.spec, params)
    out: dict[str, float] = {}
    for action, n in nmc_energy_actions(run).items():
        comp = ACTION_COMPONENT.get(action, "nmc" if action in ("NMC_UPDATE", update_action(run.spec)) else None)
        if comp is not None and action in per:
            out[comp] = out.get(comp, 0.0) + per[action] * n
    return out


@dataclass
class SublayerRun:
    config: str
    shape: SublayerShape
    tp: int
    devices: str
    gemm_cycles: int                   # GEMM compute + stores done (max over devices)
    rs_end_cycles: int                 # last reduce-scatter tile final (max over devices)
    ag_s: float
    spec: DramSpec
    ring: RingConfig
    traffic: dict[str, int]            # per simulated device (mean): accesses by class
    commands: dict[str, int]           # DRAM commands, summed over simulated devices
    nmc_updates: int
    tracker: dict[str, int]
    dma_fires: dict[tuple[int, Any], int]   # (device, tile key) -> fire count (tests)
    final_tiles: dict[tuple[int, Any], int]
    memories: list[MemorySystem]
    outputs: list[np.ndarray] | None = None
    threshold: int | None = None
    comm_latency_max: int = 0
    wall_s: float = 0.0
    nmc_mode: str = "rd_wr"            # how updates were issued: command (one update command) or rd_wr
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def rs_cycles(self) -> int:
        return self.rs_end_cycles - (0 if VARIANT_CONFIGS[self.config].fused else self.gemm_cycles)

    @property
    def sublayer_s(self) -> float:
        return self.rs_end_cycles * self.spec.tCK_s + self.ag_s


def _interleave(dec: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    """Requests of one batch reordered round-robin over channels (each channel's own order kept): the GPU's
    memory partitions take requests independently, so one busy channel must not hold the port's head for
    the others (the engine's ports block at the head)."""
    ch = dec[0]
    if len(ch) < 2:
        return dec
    order = np.argsort(ch, kind="stable")
    sorted_ch = ch[order]
    starts = np.r_[0, np.nonzero(np.diff(sorted_ch))[0] + 1]
    counts = np.diff(np.r_[starts, len(ch)])
    rank = np.arange(len(ch)) - np.repeat(starts, counts)
    final = order[np.lexsort((sorted_ch, rank))]
    return tuple(x[final] for x in dec)


def _check_run(config: str, moe_order: str, devices: str, tp: int, shape: SublayerShape) -> None:
    from archsim.errors import unknown_name

    if config not in CONFIGS:
        raise unknown_name("T3 configuration", config, CONFIGS)
    if moe_order not in MOE_ORDERS:
        raise unknown_name("moe_order", moe_order, MOE_ORDERS)
    if devices not in ("all", "one"):
        raise ConfigError("devices", f"must be all or one, got {devices!r}")
    require_int("t3", "tp", tp, minimum=2)
    require_int("t3", "tokens", shape.tokens, minimum=1)


class _Sim:
    def __init__(self, params: T3Params, shape: SublayerShape, tp: int, config: str, devices: str = "all",
                 functional: bool = False, log: bool = False, seed: int = 0, window_cycles: int | None = None,
                 ring: RingConfig | None = None, moe_order: str = "expert",
                 enqueue_jitter: tuple[int, int] | None = None):
        _check_run(config, moe_order, devices, tp, shape)
        # (J, seed): every enqueue enters 0..J cycles after the cycle the agent asked for (seeded uniform draws);
        # a probe of how far a row moves under perturbations as small as a cycle (reports/t3: the driver)
        self.jitter = enqueue_jitter
        self.jitter_rng = np.random.default_rng(enqueue_jitter[1]) if enqueue_jitter else None
        self.jitter_cycles = 0
        self.moe_order = moe_order
        self.p = params
        self.n = tp
        self.shape = shape
        self.padded_from: int | None = None
        self.config = config
        self.variant = VARIANT_CONFIGS[config]      # what the configuration does (archsim.systems.t3.variants)
        self.ring = ring or load_t3_ring(params, tp)     # a caller's ring: loaded once for several runs
        if self.ring.devices != tp:
            raise ConfigError("tp", f"the ring given has {self.ring.devices} devices, the sublayer {tp}")
        self.dirs = self.ring.directions
        self.spec = params.spec
        self.gpu = params.gpu
        # 0: the exact loop (every request wait is a completion group the memory stops at); W > 0: windows of W
        self.W = params.window_cycles if window_cycles is None else window_cycles
        self.chunks = chunk_tiles(shape, tp, self.gpu, self.dirs)
        if devices == "one":
            if functional:
                raise ConfigError("devices", "functional mode needs devices: all (every device's data differs)")
            shape = self._pad_for_symmetry()
        # the GEMM's tiles of each chunk in production order: the output tiles themselves (one dense GEMM), or
        # every active expert's tiles writing into them (MoE: shapes.expert_tiles)
        self.prod = expert_tiles(shape, tp, self.gpu, self.dirs) if shape.experts else self.chunks
        self.accumulates = self._accumulating_tiles()
        self.devices = devices
        self.sim = list(range(tp)) if devices == "all" else [0]
        self.functional = functional
        self._lay_out(shape)
        self.mapping = params.mapping or self.spec.default_mapping
        self.addr_cache: dict[tuple, tuple[np.ndarray, ...]] = {}
        # the event loop, in DRAM cycles of the device memory (module doc: Time base)
        # exact loop (module doc, Time base)
        hop = int(math.ceil(self.ring.hop_latency_s / self.spec.tCK_s - 1e-9))
        self.loop = EventLoop(lookahead_ps=max(1, hop), window=self.W or None, name="t3")
        self.units: dict[int, MemoryUnit] = {}
        # GPU waves: the production order of device d (stage by stage, staggered)
        self.mems: dict[int, MemorySystem] = {}
        self.pc: dict[int, int] = {}
        self.pm: dict[int, int] = {}
        self._set_threshold()
        self.nmc_mode = "command" if params.nmc_update == "command" and any(
            c.effect == Effect.UPDATE for c in self.spec.commands) else "rd_wr"
        for dev in self.sim:
            self._add_memory(dev, log)
        self.traffic = {dev: {"gemm_read": 0, "gemm_write": 0, "gemm_update": 0, "rs_read": 0, "rs_write": 0,
                              "rs_update": 0} for dev in self.sim}
        self.nmc_updates = 0
        self.link_free = {(dev, d): 0 for dev in range(tp) for d in range(self.dirs)}   # (device, direction)
        self.trackers = {dev: Tracker(params.tracker_entries) for dev in self.sim}
        self.dma_fires: dict[tuple[int, Any], int] = {}
        self.final_tiles: dict[tuple[int, Any], int] = {}
        self.gemm_done: dict[int, int] = {}
        self.stall: dict[int, int] = {}            # device -> cycles its CUs waited for operands (memory)
        self.weight_reads = {dev: 0 for dev in self.sim}   # DRAM read accesses of B (the weights) per device
        self.l2 = {dev: self.new_l2() for dev in self.sim}
        self.first_send: int | None = None         # first cycle a reduce-scatter byte left on a link
        if functional:
            self._functional_data(seed)

    def _functional_data(self, seed: int) -> None:
        """Every device's A, B and partial sum P (and its experts' data), C and R to fill (functional mode)."""
        shape, tp = self.shape, self.n
        rng = np.random.default_rng(seed)
        # small integers: every sum is exact in float64, so any order of additions gives the same result
        self.A = {e: rng.integers(-3, 4, size=(shape.tokens, shape.k)).astype(np.float64) for e in range(tp)}
        self.B = {e: rng.integers(-3, 4, size=(shape.k, shape.h)).astype(np.float64) for e in range(tp)}
        self.P = {e: self.A[e] @ self.B[e] for e in range(tp)}
        if shape.experts:
            self._functional_experts(rng)
        self.C = {e: np.zeros((shape.tokens, shape.h)) for e in range(tp)}
        self.R = {e: np.zeros((shape.tokens, shape.h)) for e in range(tp)}

    def _lay_out(self, shape: SublayerShape) -> None:
        """Base address of each region, each aligned to a full stripe of rows over every bank: A, the GEMMs'
        inputs (every active expert's rows one after another), B, their weights (one K x H block per active
        expert), C, the partial sum, R, the sequential reduce-scatter's receive buffer."""
        d = self.gpu.dtype_bytes
        align = self.spec.row_bytes * self.spec.total_banks
        sizes = {"A": shape.gemm_rows * shape.k * d, "B": shape.n_gemms * shape.k * shape.h * d,
                 "C": shape.tokens * shape.h * d, "R": shape.tokens * shape.h * d}
        rows_before = np.cumsum((0, *shape.experts))
        self.a_offset = [int(r) * shape.k * d for r in rows_before[:shape.n_gemms]]
        self.b_offset = [e * shape.k * shape.h * d for e in range(shape.n_gemms)]
        self.base, at = {}, 0
        for name, size in sizes.items():
            self.base[name] = at
            at += math.ceil(size / align) * align
        cap = self.spec.capacity_bytes
        if at > cap:
            raise UserError(f"t3: {shape.name} at {shape.tokens} tokens needs {at} B per device, more than "
                            f"the {cap} B of {self.spec.name}")

    def _set_threshold(self) -> None:
        """T3-MCA's threshold: the first-stage estimate (`dynamic` re-estimates it per K step, retune_threshold);
        `thresholds` records it per K step of the first simulated device."""
        self.threshold = None
        first_acc, first_cyc = self._first_wave_estimate()
        self.dynamic = self.variant.retunes(self.p)
        self.threshold = self.variant.threshold(self.p, first_acc, first_cyc)
        self.thresholds: list[int] = [self.threshold] if self.threshold is not None else []

    def _add_memory(self, dev: int, log: bool) -> None:
        """Device `dev`'s memory on the event loop: a compute and a comm source, arbitrated by MCA's gate
        under t3-mca (FR-FCFS otherwise), and a port for each."""
        params = self.p
        arbitration, starvation_cap = self.variant.arbitration(params)
        ms = MemorySystem(self.spec, params.controller, sources=[{"name": "compute", "kind": "rw"},
                                                                 {"name": "comm", "kind": "rw"}],
                          arbitration=arbitration, threshold=self.threshold or 0, starvation_cap=starvation_cap,
                          alu_latency=params.alu_latency_cycles, log=log, requests=1 << 16, rmw=self.nmc_mode)
        self.mems[dev] = ms
        self.units[dev] = self.loop.add(MemoryUnit(f"memory {dev}", ms, ticks="cycles"))
        self.pc[dev] = ms.add_port("compute", width=self.spec.channels)
        self.pm[dev] = ms.add_port("comm", width=self.spec.channels)

    def _functional_experts(self, rng: np.random.Generator) -> None:
        """MoE data: every device's experts' inputs and weights, their products (XP[dev][e], count_e x H) and the
        device's partial sum P (every expert's product added into its tokens' rows)."""
        from archsim.systems.t3.shapes import expert_row_starts

        sh = self.shape
        self.XA = {d: [rng.integers(-3, 4, size=(c, sh.k)).astype(np.float64) for c in sh.experts]
                   for d in range(self.n)}
        self.XB = {d: [rng.integers(-3, 4, size=(sh.k, sh.h)).astype(np.float64) for _ in sh.experts]
                   for d in range(self.n)}
        self.XP = {d: [a @ b for a, b in zip(self.XA[d], self.XB[d], strict=True)] for d in range(self.n)}
        for d in range(self.n):
            self.P[d] = np.zeros((sh.tokens, sh.h))
            for start, xp in zip(expert_row_starts(sh), self.XP[d], strict=True):
                np.add.at(self.P[d], (start + np.arange(len(xp))) % sh.tokens, xp)

    def _part(self, dev: int, tile: Tile) -> np.ndarray:
        """A GEMM tile's product (functional mode): the block of the partial sum, or of its expert's product."""
        if tile.expert is None:
            return self.P[dev][self._sl(tile)]
        return self.XP[dev][tile.expert][tile.a0:tile.a0 + tile.tm, tile.n0:tile.n0 + tile.tn]

    def _accumulating_tiles(self) -> set[tuple[int, int]]:
        """(chunk, index) of the MoE tiles whose output rows an earlier expert of the chunk already wrote: a
        plain-store (sequential) GEMM reads its C block and writes the sum (an epilogue with beta = 1)."""
        acc = set()
        for c, tiles in enumerate(self.prod if self.shape.experts else []):
            written: set[tuple[int, int]] = set()
            for t in tiles:
                rows = {(r, t.n0) for r in range(t.m0, t.m0 + t.tm)}
                if rows & written:
                    acc.add((c, t.index))
                written |= rows
        return acc

    def tracker_key(self, tile: Tile) -> tuple[int, int]:
        """The output tile a tile's updates count towards: itself, or the one a MoE expert's tile writes into."""
        return (tile.chunk, tile.index if tile.expert is None else tile.out)

    # -- helpers ----------------------------------------------------------------------------------------------
    def _pad_for_symmetry(self) -> SublayerShape:
        """devices: one relabels a chunk as the next one along its ring direction, so a direction's chunks must
        be equal: pad d_model to a multiple of tp x 16 columns where they are not (the padded columns are
        computed, stored and reduced like real ones; the run records the padding). Returns the shape run."""
        tp = self.n
        if all(len({tuple((t.tm, t.tn) for t in c) for c in self.chunks[k * tp:(k + 1) * tp]}) == 1
               for k in range(self.dirs)):
            return self.shape
        unit = COL_UNIT * tp
        shape = self.shape
        self.padded_from = shape.h
        self.shape = dataclasses.replace(shape, h=math.ceil(shape.h / unit) * unit)
        self.chunks = chunk_tiles(self.shape, tp, self.gpu, self.dirs)
        return self.shape

    def cyc_gpu(self, gpu_cycles: float) -> int:
        return int(math.ceil(gpu_cycles / self.gpu.clock_hz / self.spec.tCK_s - 1e-9))

    def at(self, t: int, fn: Callable[[], None]) -> None:
        self.loop.at(int(t), fn)

    def _tile_addr(self, region: str, tile: Tile) -> np.ndarray:
        d = self.gpu.dtype_bytes
        a = self.spec.access_bytes
        rows = np.arange(tile.m0, tile.m0 + tile.tm, dtype=np.uint64)[:, None]
        cols = np.arange(0, tile.tn * d, a, dtype=np.uint64)[None, :]
        return (self.base[region] + (rows * self.shape.h + tile.n0) * d + cols).ravel()

    def _decoded(self, key: tuple, addr_fn: Callable[[], np.ndarray]) -> tuple[np.ndarray, ...]:
        got = self.addr_cache.get(key)
        if got is None:
            addr = addr_fn()
            dec = mapping_mod.decode(self.spec, addr, self.mapping)
            got = (dec["channel"], dec["bank"], dec["row"], dec["column"])
            self.addr_cache[key] = got
        return got

    def tile_requests(self, region: str, tile: Tile) -> tuple[np.ndarray, ...]:
        key = (region, tile.chunk, tile.index) if tile.expert is None else (region, tile.chunk, tile.index, "e")
        return self._decoded(key, lambda: self._tile_addr(region, tile))

    def mem(self, dev: int, source: str, dec: tuple[np.ndarray, ...], kind: int, t: int, cb: Callable[[int], None],
            cls: str) -> np.ndarray:
        """Offer requests at cycle t (not before the memory's clock); cb(done cycle of the last) when all are
        done. Returns the request ids."""
        ms = self.mems[dev]
        ch, bank, row, col = _interleave(dec)
        n = len(ch)
        self.traffic[dev][cls] += n
        if kind == KIND_RMW:
            self.nmc_updates += n
        port = self.pc[dev] if source == "compute" else self.pm[dev]
        unit = self.units[dev]
        if self.jitter and self.jitter[0] > 0:
            late = int(self.jitter_rng.integers(0, self.jitter[0] + 1))
            self.jitter_cycles += late
            t = int(t) + late
        if self.W:
            ids = ms.enqueue_requests(port, ch, bank, row, col, kind, max(int(t), ms.clock), -1)
            unit.wait_requests(ids, cb)
        else:
            ids = ms.enqueue_requests(port, ch, bank, row, col, kind, max(int(t), ms.clock), unit.group(n, cb))
        return ids

    def link(self, src: int, tile: Tile, t: int, fn: Callable[[int], None]) -> None:
        """Send a tile from device src to its next device in the tile's direction (serialised on that direction
        of the link; arrives after the hop latency)."""
        nbytes = tile.tm * tile.tn * self.gpu.dtype_bytes
        ser = int(math.ceil(nbytes / self.ring.link_bytes_per_s / self.spec.tCK_s - 1e-9))
        lat = int(math.ceil(self.ring.hop_latency_s / self.spec.tCK_s - 1e-9))
        key = (src, tile.chunk // self.n)
        start = max(t, self.link_free[key])
        if self.first_send is None or start < self.first_send:
            self.first_send = start
        self.link_free[key] = start + ser
        arrive = start + ser + lat
        self.at(arrive, lambda: fn(arrive))

    def next_of(self, dev: int, tile: Tile) -> tuple[int, Tile]:
        """Where a tile sent by dev lands: (device, tile) - the next device in the tile's direction; with
        devices: one, device 0 itself, the tile relabelled one chunk along the ring (module doc)."""
        n = self.n
        forward = tile.chunk < n
        if self.devices == "all":
            return ((dev + 1) if forward else (dev - 1)) % n, tile
        c = (tile.chunk - 1) % n if forward else n + (tile.chunk - n + 1) % n
        return 0, (self.chunks if tile.expert is None else self.prod)[c][tile.index]

    # -- GEMM producer ----------------------------------------------------------------------------------------
    def order(self, dev: int) -> list[Tile]:
        staged = [t for s in range(self.n) for c in stage_chunks(self.n, dev, s, self.dirs) for t in self.prod[c]]
        if self.shape.experts and self.moe_order == "expert":
            return sorted(staged, key=lambda t: t.expert)      # stable: each expert's tiles keep the stagger
        return staged

    def waves(self, dev: int) -> list[list[Tile]]:
        o = self.order(dev)
        c = self.gpu.cus
        return [o[i:i + c] for i in range(0, len(o), c)]

    def kslices(self) -> list[tuple[int, int]]:
        k, ks = self.shape.k, self.gpu.k_step
        return [(k0, min(ks, k - k0)) for k0 in range(0, k, ks)]

    def new_l2(self) -> L2Cache:
        return L2Cache(self.gpu.l2_bytes, self.gpu.l2_line_bytes, self.gpu.l2_ways)

    def _step_reads(self, l2: L2Cache, wave: list[Tile], k0: int, kw: int,
                    dev: int | None = None) -> tuple[np.ndarray, ...]:
        """The DRAM reads of one K step of a wave: its operand blocks (an A row block, a B column block per
        tile, each once; a MoE tile's from its expert's A and B), the accesses of the lines the L2 does not
        hold. With `dev`, the device's weight reads (B) are counted."""
        need = []
        for t in wave:
            e = t.expert or 0
            need.append(("A", e, t.a0 if t.expert is not None else t.m0, t.tm, k0, kw))
            need.append(("B", e, t.n0, t.tn, k0, kw))
        keys = list(dict.fromkeys(need))
        blocks = [self._block_addr(key) for key in keys]
        addr = np.concatenate(blocks)
        dec = [np.concatenate([self._decoded(("blk",) + key, lambda key=key: self._block_addr(key))[j]
                               for key in keys]) for j in range(4)]
        miss = l2.read(addr)
        if dev is not None:
            is_b = np.concatenate([np.full(len(b), key[0] == "B") for key, b in zip(keys, blocks, strict=True)])
            self.weight_reads[dev] += int((miss & is_b).sum())
        return tuple(x[miss] for x in dec)

    def _block_addr(self, key: tuple) -> np.ndarray:
        name, e, o0, w, k0, kw = key
        got = self.addr_cache.get(("addr",) + key)
        if got is not None:
            return got
        d = self.gpu.dtype_bytes
        a = self.spec.access_bytes
        k, h = self.shape.k, self.shape.h
        if name == "A":       # rows o0..o0+w, columns k0..k0+kw of A (T x K; a MoE expert's own rows)
            rows = np.arange(o0, o0 + w, dtype=np.uint64)[:, None]
            cols = np.arange(k0 * d // a * a, (k0 + kw) * d, a, dtype=np.uint64)[None, :]
            got = (self.base["A"] + self.a_offset[e] + rows * (k * d) + cols).ravel()
        else:                 # B (K x H; a MoE expert's own): rows of the K step, columns o0..o0+w
            rows = np.arange(k0, k0 + kw, dtype=np.uint64)[:, None]
            cols = np.arange(0, w * d, a, dtype=np.uint64)[None, :]
            got = (self.base["B"] + self.b_offset[e] + (rows * h + o0) * d + cols).ravel()
        self.addr_cache[("addr",) + key] = got
        return got

    def step_cycles(self, wave: list[Tile], kw: int) -> int:
        """One K step of a wave: every CU runs its tile's 2 tm tn kw FLOPs at once; the largest one decides."""
        flops = max(2 * t.tm * t.tn * kw for t in wave)
        return self.cyc_gpu(math.ceil(flops / self.gpu.flops_per_cu_cycle))

    def _first_wave_estimate(self) -> tuple[int, int]:
        w = self.waves(0)[0]
        k0, kw = self.kslices()[0]
        return len(self._step_reads(self.new_l2(), w, k0, kw)[0]), self.step_cycles(w, kw)

    def gemm_steps(self, dev: int) -> tuple[list[list[Tile]], list[tuple[int, int, int]]]:
        """The waves of device dev and its steps (wave, K offset, K width), in order."""
        waves = self.waves(dev)
        return waves, [(w, k0, kw) for w in range(len(waves)) for (k0, kw) in self.kslices()]

    def replay_l2(self, dev: int = 0) -> int:
        """The GEMM's DRAM read accesses from the L2 alone, without the memory: its accesses in the order the
        run makes them (step i's reads after the stores of the wave that ended at step i - 2: step i's reads
        wait for step i - 2's compute, whose end stores its wave; step i - 1's compute is still running), so
        equal to a simulated run's `gemm_read` count."""
        waves, steps = self.gemm_steps(dev)
        l2 = self.new_l2()
        n = 0
        for i, (w, k0, kw) in enumerate(steps):
            if not self.variant.fused and i >= 2:
                w2, k2, kw2 = steps[i - 2]
                if k2 + kw2 >= self.shape.k:
                    for t in waves[w2]:
                        if (t.chunk, t.index) in self.accumulates:    # a MoE epilogue's read of C (accumulate)
                            n += int(l2.read(self._tile_addr("C", t)).sum())
                        l2.store(self._tile_addr("C", t))
            n += len(self._step_reads(l2, waves[w], k0, kw)[0])
        return n

    def start_gemm(self, dev: int) -> None:
        """Steps = (wave, K step) in order; the reads of step i+1 are issued once step i's reads are done and
        step i-1's compute has freed its buffer (double buffering); a wave's tiles are stored after its last
        K step."""
        waves, steps = self.gemm_steps(dev)
        l2 = self.l2[dev]
        st = {"reads_done": {}, "comp_done": {}, "issued": {}, "stores_left": sum(len(w) for w in waves),
              "comp_end": 0, "mark": (0, 0)}
        n_s = len(steps)

        def issue_reads(i: int, t: int) -> None:
            st["issued"][i] = t
            if self.dynamic and i > 0:
                st["mark"] = self.retune_threshold(dev, st["mark"], t)
            w, k0, kw = steps[i]
            dec = self._step_reads(l2, waves[w], k0, kw, dev)
            if not len(dec[0]):
                reads_done(i, t)
                return
            self.mem(dev, "compute", dec, KIND_READ, t, lambda td: reads_done(i, td), "gemm_read")

        def reads_done(i: int, t: int) -> None:
            st["reads_done"][i] = t
            try_compute(i)
            try_reads(i + 1)

        def try_reads(i: int) -> None:
            if i >= n_s or i in st["issued"]:
                return
            if i - 1 in st["reads_done"] and (i < 2 or i - 2 in st["comp_done"]):
                issue_reads(i, max(st["reads_done"][i - 1], st["comp_done"].get(i - 2, 0)))

        def try_compute(i: int) -> None:
            if i not in st["reads_done"] or (i > 0 and i - 1 not in st["comp_done"]):
                return
            start = max(st["reads_done"][i], st["comp_done"].get(i - 1, 0))
            # compute stall: the CUs wait for this step's operands after finishing the step before
            self.stall[dev] = self.stall.get(dev, 0) + max(0, st["reads_done"][i] - st["comp_done"].get(i - 1, 0))
            w, _, kw = steps[i]
            end = start + self.step_cycles(waves[w], kw)
            self.at(end, lambda: comp_done(i, end))

        def comp_done(i: int, t: int) -> None:
            st["comp_done"][i] = t
            st["comp_end"] = t
            w, k0, kw = steps[i]
            if k0 + kw >= self.shape.k:
                for tile in waves[w]:
                    self.store(dev, tile, t, store_done)
            try_compute(i + 1)
            try_reads(i + 2)

        def store_done(t: int) -> None:
            st["stores_left"] -= 1
            if st["stores_left"] == 0:
                self.gemm_done[dev] = max(t, st["comp_end"])
                if not self.variant.fused:
                    self.start_rs(dev, self.gemm_done[dev])

        issue_reads(0, 0)

    def retune_threshold(self, dev: int, mark: tuple[int, int], t: int) -> tuple[int, int]:
        """T3-MCA's dynamic threshold, re-estimated when a K step's reads issue (cycle t) from the memory
        intensity observed since the previous step's did (`mark`: that cycle and the compute source's
        accesses by then): the accesses enqueued in between over the cycles in between (mca_threshold).
        Returns the new mark."""
        tr = self.traffic[dev]
        count = tr["gemm_read"] + tr["gemm_write"] + tr["gemm_update"]
        thr = mca_threshold(self.p, count - mark[1], t - mark[0])
        ms = self.mems[dev]
        if thr != ms.cf[CF_THRESH]:
            ms.set_threshold(thr)
        if dev == self.sim[0]:
            self.thresholds.append(thr)
        return t, count

    def stage_of(self, dev: int, chunk: int) -> int:
        return stage_of(self.n, dev, chunk)

    def store(self, dev: int, tile: Tile, t: int, done: Callable[[int], None]) -> None:
        nacc = len(self.tile_requests("C", tile)[0])
        if not self.variant.fused:
            if (tile.chunk, tile.index) in self.accumulates:
                self.accumulate(dev, tile, t, done)
                return
            # plain stores: write-allocate in the L2 (they evict operands); T3's updates bypass it
            self.l2[dev].store(self._tile_addr("C", tile))

            def wrote(td: int) -> None:
                if self.functional and tile.expert is None:
                    self.C[dev][self._sl(tile)] = self._part(dev, tile)
                elif self.functional:        # experts' stores may complete in any order: C starts at zero
                    self.C[dev][self._sl(tile)] += self._part(dev, tile)
                done(td)
            self.mem(dev, "compute", self.tile_requests("C", tile), KIND_WRITE, t, wrote, "gemm_write")
            return
        r = role(self.n, self.stage_of(dev, tile.chunk))
        if r == "remote":
            # remote_update: the GEMM's stores leave through the link and update the neighbour's memory
            data = self._part(dev, tile).copy() if self.functional else None
            self.send_update(dev, tile, t, data)
            done(t + 0)
            return

        def updated(td: int) -> None:
            if self.functional:
                self.C[dev][self._sl(tile)] += self._part(dev, tile)
            self.count(dev, tile, nacc, td)
            done(td)
        self.mem(dev, "compute", self.tile_requests("C", tile), KIND_RMW, t, updated, "gemm_update")

    def accumulate(self, dev: int, tile: Tile, t: int, done: Callable[[int], None]) -> None:
        """A sequential MoE tile whose rows an earlier expert wrote: its epilogue reads the C block (from the
        L2 where it still holds it) and writes the sum."""
        addr = self._tile_addr("C", tile)
        dec = self.tile_requests("C", tile)
        miss = self.l2[dev].read(addr)
        self.l2[dev].store(addr)

        def wrote(td: int) -> None:
            if self.functional:
                self.C[dev][self._sl(tile)] += self._part(dev, tile)
            done(td)

        def read(td: int) -> None:
            self.mem(dev, "compute", dec, KIND_WRITE, td, wrote, "gemm_write")
        if miss.any():
            self.mem(dev, "compute", tuple(x[miss] for x in dec), KIND_READ, t, read, "gemm_read")
        else:
            read(t)

    def _sl(self, tile: Tile) -> tuple[slice, slice]:
        return slice(tile.m0, tile.m0 + tile.tm), slice(tile.n0, tile.n0 + tile.tn)

    # -- T3: updates, tracker, DMA ------------------------------------------------------------------------------
    def send_update(self, dev: int, tile: Tile, t: int, data: np.ndarray | None) -> None:
        dst, dtile = self.next_of(dev, tile)

        def arrived(ta: int) -> None:
            def updated(td: int) -> None:
                if self.functional:
                    self.C[dst][self._sl(dtile)] += data
                self.count(dst, dtile, len(self.tile_requests("C", dtile)[0]), td)
            self.mem(dst, "comm", self.tile_requests("C", dtile), KIND_RMW, ta, updated, "rs_update")
        self.link(dev, tile, t, arrived)

    def program_trackers(self) -> None:
        for dev in self.sim:
            tr = self.trackers[dev]
            for s in range(1, self.n):
                for c in stage_chunks(self.n, dev, s, self.dirs):
                    local = self.local_updates(c)
                    for tile in self.chunks[c]:
                        # the local updates of every access of the tile (one per GEMM writing it: the dense
                        # GEMM, or each expert routed its tokens) and the incoming ones: the previous device's
                        # stores where it produced the chunk at stage 0 (remote updates, one per GEMM as the
                        # local ones), else one DMA of the reduced tile
                        own = len(self.tile_requests("C", tile)[0])
                        tr.expect((c, tile.index), local[tile.index] + (local[tile.index] if s == 1 else own))

    def local_updates(self, chunk: int) -> dict[int, int]:
        """Accesses the chunk's GEMM tiles update, per output tile (index in the chunk)."""
        got: dict[int, int] = {}
        for t in self.prod[chunk]:
            key = self.tracker_key(t)[1]
            got[key] = got.get(key, 0) + len(self.tile_requests("C", t)[0])
        return got

    def count(self, dev: int, tile: Tile, n: int, t: int) -> None:
        for key in self.trackers[dev].update(self.tracker_key(tile), n, t):
            self.fire(dev, self.chunks[key[0]][key[1]], t)

    def fire(self, dev: int, tile: Tile, t: int) -> None:
        key = (dev, (tile.chunk, tile.index))
        self.dma_fires[key] = self.dma_fires.get(key, 0) + 1
        if role(self.n, self.stage_of(dev, tile.chunk)) == "final":
            self.final_tiles[key] = t
            return

        def read(td: int) -> None:     # the DMA engine read the complete tile: send it on
            data = self.C[dev][self._sl(tile)].copy() if self.functional else None
            self.send_update(dev, tile, td, data)
        self.mem(dev, "comm", self.tile_requests("C", tile), KIND_READ, t, read, "rs_read")

    # -- sequential reduce-scatter ----------------------------------------------------------------------------
    def start_rs(self, dev: int, t: int) -> None:
        """NCCL-like ring RS after the GEMM, pipelined per tile (module doc)."""
        for tile in (t for c in stage_chunks(self.n, dev, 0, self.dirs) for t in self.chunks[c]):
            def read(td: int, tile=tile) -> None:
                data = self.C[dev][self._sl(tile)].copy() if self.functional else None
                self.seq_send(dev, tile, td, data)
            self.mem(dev, "comm", self.tile_requests("C", tile), KIND_READ, t, read, "rs_read")
        # reductions whose received tile came before this device's GEMM finished
        for fn in self.waiting.pop(dev, []):
            fn(t)

    def seq_send(self, dev: int, tile: Tile, t: int, data: np.ndarray | None) -> None:
        dst, dtile = self.next_of(dev, tile)

        def arrived(ta: int) -> None:
            def wrote(td: int) -> None:
                if self.functional:
                    self.R[dst][self._sl(dtile)] = data
                if dst in self.gemm_done:
                    self.seq_reduce(dst, dtile, td)
                else:
                    self.waiting.setdefault(dst, []).append(lambda tg: self.seq_reduce(dst, dtile, tg))
            self.mem(dst, "comm", self.tile_requests("R", dtile), KIND_WRITE, ta, wrote, "rs_write")
        self.link(dev, tile, t, arrived)

    def seq_reduce(self, dev: int, tile: Tile, t: int) -> None:
        """The reduction kernel (on CUs): read the received copy and the local partial, add, then send the sum
        on (steps 1..N-2) or write it (the owner)."""
        final = role(self.n, self.stage_of(dev, tile.chunk)) == "final"
        left = [2]

        def read(td: int) -> None:
            left[0] -= 1
            if left[0]:
                return
            s = self.R[dev][self._sl(tile)] + self.C[dev][self._sl(tile)] if self.functional else None
            if final:
                def wrote(tw: int) -> None:
                    if self.functional:
                        self.C[dev][self._sl(tile)] = s
                    self.dma_fires[(dev, (tile.chunk, tile.index))] = 1
                    self.final_tiles[(dev, (tile.chunk, tile.index))] = tw
                self.mem(dev, "comm", self.tile_requests("C", tile), KIND_WRITE, td, wrote, "rs_write")
            else:
                self.seq_send(dev, tile, td, s)
        self.mem(dev, "comm", self.tile_requests("R", tile), KIND_READ, t, read, "rs_read")
        self.mem(dev, "comm", self.tile_requests("C", tile), KIND_READ, t, read, "rs_read")

    # -- running ------------------------------------------------------------------------------------------------
    def run(self) -> None:
        timer = clock()       # simulation time: a first run's kernel compile apart (sim_compile_s)
        self.waiting: dict[int, list] = {}
        if self.variant.fused:
            self.program_trackers()
        for dev in self.sim:
            self.start_gemm(dev)
        self.loop.run()
        self.wall_s = sim_seconds(timer)
        if self.variant.fused:
            for dev in self.sim:
                tr = self.trackers[dev]
                if tr.pending or len(tr.fired) != len(tr.expected):
                    raise UserError(f"t3: device {dev}: tracker ended with {tr.pending} tiles incomplete "
                                    f"({tr.entries} entries; {tr.full_events} updates found the table full)")


def simulate_sublayer(params: T3Params, shape: SublayerShape, tp: int, config: str, devices: str = "all",
                      functional: bool = False, log: bool = False, seed: int = 0,
                      window_cycles: int | None = None, ring: RingConfig | None = None,
                      moe_order: str = "expert", enqueue_jitter: tuple[int, int] | None = None) -> SublayerRun:
    """Simulate one sliced sublayer (GEMM + reduce-scatter; all-gather in closed form) in one configuration
    (`ring`: the ring of `params.ring_name` for `tp` devices, if the caller loaded it already; `enqueue_jitter`:
    (J, seed), every enqueue delayed by a seeded 0..J cycles, a sensitivity probe, None in every report row)."""
    sim = _Sim(params, shape, tp, config, devices, functional, log, seed, window_cycles, ring, moe_order,
               enqueue_jitter)
    sim.run()
    shape = sim.shape
    n_sim = len(sim.sim)
    traffic = {k: sum(sim.traffic[d][k] for d in sim.sim) // n_sim for k in sim.traffic[sim.sim[0]]}
    cmds: dict[str, int] = {}
    comm_lat = 0
    for ms in sim.mems.values():
        tot = ms.S.cmd_count.sum(axis=0)
        for c in sim.spec.commands:
            cmds[c.name] = cmds.get(c.name, 0) + int(tot[c.index])
        n = ms.n_req
        src = ms.S.r_src[:n]
        lat = ms.S.r_done[:n] - ms.S.r_enq[:n]
        if (src == 1).any():
            comm_lat = max(comm_lat, int(lat[src == 1].max()))
    final_end = max(sim.final_tiles.values()) if sim.final_tiles else 0
    gemm = max(sim.gemm_done.values())
    total_bytes = shape.tokens * shape.h * params.gpu.dtype_bytes
    tr = {"entries": params.tracker_entries,
          "high_water": max((t.high_water for t in sim.trackers.values()), default=0),
          "full_events": sum(t.full_events for t in sim.trackers.values()),
          "fired": sum(len(t.fired) for t in sim.trackers.values())}
    outputs = None
    if functional:
        bounds = chunk_bounds(shape.h, tp, COL_UNIT)
        outputs = [sim.C[e][:, bounds[e][0]:bounds[e][1]].copy() for e in range(tp)]
    run = SublayerRun(config=config, shape=shape, tp=tp, devices=devices, gemm_cycles=gemm,
                      rs_end_cycles=max(final_end, gemm), ag_s=collective_s(sim.ring, "all_gather", total_bytes),
                      spec=sim.spec, ring=sim.ring, traffic=traffic, commands=cmds, nmc_updates=sim.nmc_updates,
                      tracker=tr, dma_fires=sim.dma_fires, final_tiles=sim.final_tiles,
                      memories=list(sim.mems.values()), outputs=outputs, threshold=sim.threshold,
                      comm_latency_max=comm_lat, wall_s=sim.wall_s, nmc_mode=sim.nmc_mode)
    if sim.thresholds:
        th = np.array(sim.thresholds)
        run.extra["threshold_min"], run.extra["threshold_mean"], run.extra["threshold_max"] = \
            int(th.min()), float(th.mean()), int(th.max())
        run.extra["thresholds"] = len(th)
    run.extra["padded_from_h"] = sim.padded_from
    if enqueue_jitter:
        run.extra["enqueue_jitter"] = {"max_cycles": enqueue_jitter[0], "seed": enqueue_jitter[1],
                                       "cycles_added": sim.jitter_cycles}
    run.extra["threshold_trajectory"] = [int(x) for x in sim.thresholds]
    run.extra["compute_stall_cycles"] = max(sim.stall.values(), default=0)
    l2s = [sim.l2[d] for d in sim.sim]
    run.extra["gemm_read_bytes"] = traffic["gemm_read"] * sim.spec.access_bytes
    # the weights (B) the GEMMs read from DRAM per device: every active expert's K x H block once at decode sizes
    run.extra["weight_read_bytes"] = sum(sim.weight_reads.values()) // n_sim * sim.spec.access_bytes
    run.extra["experts"] = list(shape.experts)
    if shape.experts:
        run.extra["moe_order"] = moe_order
    run.extra["l2_read_miss_rate"] = sum(c.read_misses for c in l2s) / max(1, sum(c.read_lines for c in l2s))
    run.extra["l2_lines_evicted_by_stores"] = sum(c.evicted_by_stores for c in l2s) // n_sim
    run.extra["first_send_cycles"] = sim.first_send
    # channels one chunk's output touches under the address mapping (fewest and most over the chunks)
    per_chunk = [len(np.unique(np.concatenate([sim.tile_requests("C", t)[0] for t in tiles])))
                 for tiles in sim.chunks]
    run.extra["chunk_channels_min"], run.extra["chunk_channels_max"] = min(per_chunk), max(per_chunk)
    run.extra["chunk_bytes_max"] = max(sum(t.tm * t.tn for t in tiles) for tiles in sim.chunks) * params.gpu.dtype_bytes
    run.extra["mapping"] = sim.mapping
    if functional:
        run.extra["partials"] = sim.P
        run.extra["chunk_bounds"] = chunk_bounds(shape.h, tp, COL_UNIT)
    return run


def rs_link_bound_s(run: SublayerRun) -> float:
    """Ring link bound of the reduce-scatter: N-1 steps of one hop latency plus a chunk's serialisation (the
    largest chunk of the simulated shape; on a bidirectional ring each direction carries its own chunks, half
    of the rows each)."""
    chunk_bytes = run.extra["chunk_bytes_max"]
    return (run.tp - 1) * (run.ring.hop_latency_s + chunk_bytes / run.ring.link_bytes_per_s)


def data_movement_bytes(run: SublayerRun) -> int:
    """Bytes crossing the memory interface of one device for GEMM + reduce-scatter (an NMC update carries its
    data once; the read and write inside the DRAM do not cross the interface)."""
    return sum(run.traffic.values()) * run.spec.access_bytes


def nmc_energy_actions(run: SublayerRun) -> dict[str, int]:
    """DRAM actions of the run. Updates issued as the standard's update command are its action already; an
    update run as RD + WR has its RD and WR moved to one NMC_UPDATE action."""
    from archsim import energy as energy_mod

    acts = energy_mod.action_counts(run.spec, run.commands)
    if run.nmc_mode == "command":
        return acts
    n = run.nmc_updates
    acts["RD"] = acts.get("RD", 0) - n
    acts["WR"] = acts.get("WR", 0) - n
    if n:
        acts["NMC_UPDATE"] = n
    return acts


def expected_rs_accesses(n: int, chunk_accesses: int) -> dict[str, dict[str, int]]:
    """Closed-form reduce-scatter traffic per device (in accesses) of the two schedules (module doc):
    sequential reads 2N-1 chunks and writes N; T3 reads N-2 (DMA) and updates 2(N-1) (local + incoming)."""
    return {"sequential": {"rs_read": (2 * n - 1) * chunk_accesses, "rs_write": n * chunk_accesses},
            "t3": {"rs_read": (n - 2) * chunk_accesses, "updates": 2 * (n - 1) * chunk_accesses}}
