"""The channel engine's Python face: `MemorySystem` (allocation, sources and ports, enqueueing, advancing,
draining, observers' results), the lowered tables of a standard, and the accounting of kernel compiles.

The kernel itself (archsim/engine/channel.py) is numba code over the state arrays; this module owns those
arrays (archsim/engine/state.py declares them) and calls the kernel between enqueues. Semantics:
docs/channel-engine.md.
"""
from __future__ import annotations

from typing import Any

import numba
import numpy as np

from archsim.dram.roles import R_REFAB, R_REFPB, R_RFMAB, R_UPD, R_UPDA
from archsim.engine import compiling, state
from archsim.engine.channel import (
    _VARIANT_DTYPES,
    ARBITRATIONS,
    CF_CMDQ,
    CF_MAX_CYCLES,
    CF_SLOTS,
    CF_TAGGED,
    CF_THRESH,
    COARSE_CELLS,
    INF,
    KERNEL_VARIANTS,
    KEY_MASK,
    KIND_RMW,
    ORDERED_SCAN,
    PHASE_POSTED,
    RUN_TO_END,
    ST_COMPLETION,
    ST_DEADLOCK,
    ST_IDLE,
    ST_LOG_FULL,
    ST_TIMEOUT,
    VARIANT_CF,
    advance,
)

_LOWERED: dict[str, object] = {}
_NO_XOR = np.zeros((5, 64), dtype=np.uint64)     # enqueue_ranges: the hash table of an unhashed mapping
# the engine-owned pool fields and a fresh request's value in each (state.reset_pool's; enqueue_ranges writes them)
_FRESH_FIELDS = tuple(f for f in state.POOL_FIELDS if state.BY_NAME[f].fresh is not None)
_RING_TAG = state.RING_FIELDS.index("c_tag")
_FRESH_VALUES = np.array([state.BY_NAME[f].fresh for f in _FRESH_FIELDS], dtype=np.int64)


def lowered(spec):
    """Tables of `spec` (one channel), computed once per distinct standard content."""
    from archsim.engine.tables import lower

    key = repr((spec.standard, spec.counts, spec.levels, [(c.name, c.scope, c.bus, c.effect, c.buffer, c.latency)
                                                          for c in spec.commands],
                [(r["level"], r["prev"], r["next"], r["latency"], r["window"], r["sibling"], r["group"])
                 for r in spec.constraints]))
    got = _LOWERED.get(key)
    if got is None:
        one = spec if spec.channels == 1 else _one_channel(spec)
        got = _LOWERED[key] = lower(one)
    return got


def _one_channel(spec):
    import dataclasses

    B = spec.banks_per_channel
    return dataclasses.replace(spec, counts=(1,) + tuple(spec.counts[1:]), node_of=spec.node_of[:B])


def _pick_variant(kernel: str, cf: np.ndarray) -> int:
    """Index in KERNEL_VARIANTS of the kernel a device set with controller fields `cf` runs: `kernel`, or for
    "auto" the first variant whose fixed fields agree with cf, else the general kernel."""
    from archsim.errors import ConfigError

    fits = [v == 0 or bool(np.all((VARIANT_CF[v] < 0) | (cf == VARIANT_CF[v]))) for v in range(len(KERNEL_VARIANTS))]
    if kernel == "auto":
        return next((v for v in range(1, len(KERNEL_VARIANTS)) if fits[v]), 0)
    if kernel in KERNEL_VARIANTS and fits[KERNEL_VARIANTS.index(kernel)]:
        return KERNEL_VARIANTS.index(kernel)
    allowed = ["auto"] + [n for n, ok in zip(KERNEL_VARIANTS, fits, strict=True) if ok]
    raise ConfigError("kernel", f"{kernel!r} does not run this device set (its sources and controller "
                      f"fields); allowed: {', '.join(allowed)}")


class EngineError(RuntimeError):
    """The kernel reached a state the semantics forbid (a simulator bug, not a user error)."""



def _controller_fields(spec, T, ctrl, *, nch, nsrc, n_rw, arbitration, starvation_cap, threshold, stream_refresh,
                       alu_latency, active_buffer, log, max_cycles):
    """The kernel's controller field array: every declared slot (CF_SLOTS) evaluated for this device, controller
    and source set."""
    from types import SimpleNamespace

    from archsim.errors import UserError

    if ctrl.refresh == "allbank" and T.role[R_REFAB] < 0 or ctrl.refresh == "perbank" and T.role[R_REFPB] < 0:
        raise UserError(f"{spec.standard} has no {ctrl.refresh} refresh command")
    if ctrl.bank_command_queue > 0 and (nsrc != 1 or n_rw != 1 or bool(active_buffer)):
        raise UserError("controller.bank_command_queue: DRAMsim3's queues serve one rw source without the "
                        f"active buffer (got {n_rw} rw and {nsrc - n_rw} stream sources, "
                        f"active_buffer={bool(active_buffer)})")
    d = SimpleNamespace(spec=spec, T=T, ctrl=ctrl, nch=nch, nsrc=nsrc, n_rw=n_rw, arbitration=arbitration,
                        starvation_cap=int(starvation_cap), threshold=int(threshold), stream_refresh=stream_refresh,
                        alu_latency=int(alu_latency), active_buffer=bool(active_buffer), log=bool(log),
                        max_cycles=max_cycles)
    return np.array([int(s.value(d)) for s in CF_SLOTS], dtype=np.int64)


def _first_refresh_due(spec, T, ctrl):
    """The first refresh due cycle of each refresh node of one channel: nREFI (per-bank: nREFIpb) for every
    node, or with refresh_stagger node i at (i + 1) * (nREFI // nodes); INF without refresh."""
    n = T.ref_nodes
    if ctrl.refresh == "none":
        return np.full(n, INF, np.int64)
    if ctrl.refresh == "perbank":
        return np.full(n, spec.timing["nREFIpb"], np.int64)
    if ctrl.refresh_stagger:
        return (np.arange(1, n + 1, dtype=np.int64) * (spec.timing["nREFI"] // n)).astype(np.int64)
    return np.full(n, spec.timing["nREFI"], np.int64)


class MemorySystem:
    """All channels of one DRAM device set, with their sources, ports and observers.

    sources: list of {"name", "kind": "rw" | "stream"} (default one rw source "mem"). Requests enter through
    ports (`add_port`), stream commands through `enqueue_stream`. `advance(until)` / `run()` simulate.
    kernel: which compilation of the channel kernel runs it (KERNEL_VARIANTS): "auto" = the first variant whose
    fixed controller fields agree with this device set's, else "general" (tests compare the variants).
    reuse_slots: new requests take served requests' pool slots (enqueue_requests), for drivers whose requests
    are all untagged or in completion groups; per-request results are then not kept.
    threads: worker threads advancing shards of channels between coupling cycles (None = the process default,
    archsim.engine.threads.set_threads() / CLI --threads, one thread unless set; 1 = the plain kernel; never more
    than channels). Results are bit-identical for every count.
    """

    def __init__(self, spec, controller=None, sources=None, arbitration="frfcfs", starvation_cap=0, threshold=0,
                 stream_refresh="split", alu_latency=4, active_buffer=None, log=True, requests=1024,
                 stream_capacity=1024, max_cycles=1 << 60, rmw="command", kernel="auto", reuse_slots=False,
                 threads=None):
        from archsim.dram.controller import ControllerConfig
        from archsim.errors import ConfigError

        self.spec = spec
        ctrl = controller if isinstance(controller, ControllerConfig) else ControllerConfig.from_dict(controller)
        self.ctrl = ctrl
        if ctrl.refresh not in spec.refresh_modes:
            raise ConfigError("controller.refresh", f"{spec.standard} does not support {ctrl.refresh!r} refresh; "
                              f"allowed: {', '.join(spec.refresh_modes)}")
        self.low = lowered(spec)
        T = self.tables = self.low.tables
        if ctrl.rfm_threshold > 0 and T.role[R_RFMAB] < 0:
            raise ConfigError("controller.rfm_threshold", f"{spec.name}: standard {spec.standard} has no refresh-"
                              "management command (`rfm_command:`); use a preset with one, e.g. "
                              "DDR5_4800AN_x8_16Gb_RFM, or rfm_threshold: 0")
        if rmw not in ("command", "rd_wr"):
            raise ConfigError("rmw", f"must be command or rd_wr, got {rmw!r}")
        if rmw == "rd_wr" and T.role[R_UPD] >= 0:
            # rmw requests as RD, ALU latency, WR even though the standard has an update command (to compare)
            role = T.role.copy()
            role[R_UPD] = role[R_UPDA] = -1
            T = self.tables = T._replace(role=role)
        self.sources = list(sources or [{"name": "mem", "kind": "rw"}])
        names = [s["name"] for s in self.sources]
        for s in self.sources:
            if s.get("kind") not in ("rw", "stream"):
                raise ConfigError("sources", f"source {s.get('name')!r}: kind must be rw or stream, got {s.get('kind')!r}")
        if len(set(names)) != len(names):
            raise ConfigError("sources", f"source names must be distinct, got {names}")
        if arbitration not in ARBITRATIONS:
            raise ConfigError("arbitration", f"must be one of {', '.join(ARBITRATIONS)}, got {arbitration!r}")
        if stream_refresh not in ("split", "wait"):
            raise ConfigError("stream_refresh", f"must be split or wait, got {stream_refresh!r}")
        self.names = names
        nch = spec.channels
        B = T.banks
        if B > KEY_MASK:
            raise ConfigError("org", f"{B} banks per channel: the kernel supports at most {int(KEY_MASK)}")
        nsrc = len(self.sources)
        n_rw = sum(s["kind"] == "rw" for s in self.sources)
        n_st = nsrc - n_rw
        self.n_rw, self.n_st = n_rw, n_st
        ab = ctrl.active_buffer if active_buffer is None else active_buffer
        cf = _controller_fields(spec, T, ctrl, nch=nch, nsrc=nsrc, n_rw=n_rw, arbitration=arbitration,
                                starvation_cap=starvation_cap, threshold=threshold, stream_refresh=stream_refresh,
                                alu_latency=alu_latency, active_buffer=ab, log=log, max_cycles=max_cycles)
        self.cf = cf
        v = _pick_variant(kernel, cf)
        self.kernel = KERNEL_VARIANTS[v]
        deep = bool(ORDERED_SCAN[v])      # a DeepState: the deep-window variants' scan order
        extra = {}
        if deep:
            from archsim.engine.tables import coarse_groups  # (loaded with the tables above)

            extra["coarse_group"] = coarse_groups(T.rcell, COARSE_CELLS)
        # the state's sizes as allocated (archsim/engine/state.py SIZES; the pool, ports, streams, log and ring grow)
        self.sizes = state.sizes(channels=nch, banks_per_ch=B, bufs=len(spec.row_buffers), cmds=T.n_cmds,
                                 cells=T.n_cells * T.n_cmds, windows=T.n_win, win_nodes=T.n_win_nodes,
                                 window=T.max_window, ref_nodes_per_ch=T.ref_nodes, sources=nsrc, rw=n_rw,
                                 requests=requests, stream_capacity=stream_capacity,
                                 queue_max=max(ctrl.read_queue, ctrl.write_queue), log=log,
                                 cmdq=ctrl.bank_command_queue,
                                 coarse_groups=int(extra["coarse_group"].max()) + 1 if deep else 1)
        self.S = state.new_state(self.sizes, self._initial_arrays(spec, T, ctrl, v) | extra, deep=deep)
        self.n_req = 0
        # reuse_slots: every request may be forgotten once served (untagged, or in a completion group), so new
        # requests take the slots of served ones in ring order and the pool stays as large as the requests in
        # flight, not as the requests of a whole phase (enqueue_requests)
        self.reuse_slots = bool(reuse_slots)
        self._ring = 0                             # (reuse_slots) where the next requests' slots are looked for
        self.wall_s = 0.0
        self._kernel = None
        self._stream_slots: dict[str, int] = {}    # stream source name -> its index among the stream sources
        # threads > 1: a coordinator runs advance() with the channels sharded over threads (archsim/engine/threads.py)
        from archsim.engine import threads as threads_mod

        self.threads = min(threads_mod.resolve_threads(threads), nch)
        self._coord = threads_mod.Coordinator(self, self.threads) if self.threads > 1 else None

    # -- building ------------------------------------------------------------------------------------------
    def _initial_arrays(self, spec, T, ctrl, variant: int) -> dict[str, np.ndarray]:
        """The state fields whose initial values depend on the device set (fill INIT in archsim/engine/state.py):
        queue capacities, each source's kind and index among its kind, refresh due cycles, the variant's dtype."""
        nch, nsrc = spec.channels, len(self.sources)
        src_kind = np.zeros((nch, max(nsrc, 1)), dtype=np.int64)
        src_idx = np.zeros((nch, max(nsrc, 1)), dtype=np.int64)
        seen = {"rw": 0, "stream": 0}
        for i, s in enumerate(self.sources):
            src_kind[:, i] = 0 if s["kind"] == "rw" else 1
            src_idx[:, i] = seen[s["kind"]]
            seen[s["kind"]] += 1
        nq = self.sizes["rw_queues"]
        return {"qcap": np.tile(np.array([ctrl.read_queue, ctrl.write_queue], dtype=np.int64), nq // 2),
                "src_kind": src_kind, "src_idx": src_idx, "ref_due": np.tile(_first_refresh_due(spec, T, ctrl), nch),
                "variant": np.zeros(0, _VARIANT_DTYPES[variant])}

    def _grow(self, **fields):
        self.S = self.S._replace(**fields)
        self._kernel = None

    def _signature(self) -> tuple:
        return tuple(numba.typeof(a) for a in (self.S, self.tables, self.cf, np.int64(0)))

    def kernel_cached(self) -> bool | None:
        """Whether this system's kernel is compiled in this process or in numba's on-disk cache (so loading it
        takes ~0.05 s, not a compile of minutes); None if numba's cache cannot be asked."""
        return compiling.cached(advance, self._signature())

    def load_kernel(self, threaded: bool = False) -> None:
        """Load the compiled kernel for this system's state types from numba's cache (~0.05 s in a new process;
        a cold cache compiles it, 35-60 s of CPU) without running it. A driver may call it from another thread
        while it does GIL-free work (the trace driver parses the trace meanwhile); otherwise the first advance
        loads it. A compile says so on stderr first (one line, with the expected time); the time spent here is
        counted apart (compile_seconds()), not as simulation time. `threaded`: also the threaded form of a
        system on threads (engine.threads > 1), which a run otherwise compiles when it first opens a parallel
        region (archsim.warm compiles it ahead)."""
        self._kernel = compiling.compile(advance, self._signature())
        if threaded and self._coord is not None:
            self._coord.load_kernel()

    def _call_kernel(self, until: int) -> int:
        """One call of the kernel. Numba's dispatcher types ~140 arguments on every call (~60 us, which
        co-simulations that stop at every tile completion pay thousands of times), so the compiled entry point
        for the state's exact types is looked up once and reused until the state arrays are replaced."""
        if self._kernel is None:
            self.load_kernel()
        return self._kernel(self.S, self.tables, self.cf, np.int64(until))

    def _grow_pool(self, need: int) -> None:
        S = self.S
        cap = S.r_ch.shape[0]
        if need <= cap:
            return
        new = max(need, 2 * cap)
        upd = {}
        for f in state.POOL_FIELDS:
            a = getattr(S, f)
            b = np.zeros(new, dtype=a.dtype)      # (untouched beyond the copy until enqueue_requests fills it)
            b[:cap] = a
            upd[f] = b
        self._grow(**upd)

    def recycle_requests(self) -> bool:
        """Free the request pool for reuse when every port is empty and every request's column command has
        issued (their completions stay in the ring); returns whether it did. Long co-simulations (a decode
        iteration streams tens of millions of DMA requests) call it at barriers so memory stays bounded;
        request_done()/request_class() then only cover requests enqueued since."""
        S = self.S
        n = self.n_req
        if n == 0:
            return True
        if (S.p_head != S.p_tail).any() or not self.served(0, n):
            return False
        # (no reset of the slots: enqueue_requests initialises every slot it fills)
        S.p_head[:] = 0
        S.p_tail[:] = 0
        self.n_req = 0
        self._ring = 0
        return True

    def _reset_requests(self, a: int, b: int) -> None:
        """The engine-owned fields of pool slots [a, b) back to a fresh request's (enqueue_requests writes the
        others, r_tag included)."""
        state.reset_pool(self.S, a, b)

    def source_index(self, name: str) -> int:
        from archsim.errors import unknown_name

        if name not in self.names:
            raise unknown_name("source", name, self.names)
        return self.names.index(name)

    def add_port(self, source: str = "mem", width: int = 1) -> int:
        """A new in-order request port feeding rw source `source`; returns its index."""
        from archsim.errors import ConfigError

        s = self.source_index(source)
        if self.sources[s]["kind"] != "rw":
            raise ConfigError("source", f"ports feed rw sources; {source!r} is a {self.sources[s]['kind']} source")
        S = self.S
        n = S.p_head.shape[0]
        pb = np.zeros((n + 1, max(S.p_buf.shape[1], 1)), dtype=np.int64)
        pb[:n] = S.p_buf
        self._grow(p_buf=pb, p_head=np.r_[S.p_head, 0], p_tail=np.r_[S.p_tail, 0], p_width=np.r_[S.p_width, width],
                   p_src=np.r_[S.p_src, s], p_next=np.r_[S.p_next, INF], p_block=np.r_[S.p_block, -1])
        return n

    def enqueue_requests(self, port: int, channel, bank, row, column, kind=0, arrive=-1, tag=-1,
                         slot: int | None = None) -> np.ndarray:
        """Append requests to a port's backlog (arrays of one length, scalars broadcast; bank = global bank id).
        Returns their request ids: pool slots, by default the next ones at the pool's end. `slot`: use slots
        [slot, slot + n) instead, which the caller has reclaimed (`served` is true for them and nothing keeps
        their ids: untagged requests): a streaming driver that reuses them keeps the pool bounded. With
        `reuse_slots` (MemorySystem) the engine reuses served requests' slots itself, in ring order, growing the
        pool only when the requests in flight fill it; every request must then be untagged or in a completion
        group, and per-request results (request_done, request_class) are not kept."""
        cols = [np.atleast_1d(np.asarray(x, dtype=np.int64)) for x in (channel, bank, row, column, kind, arrive, tag)]
        n = max(c.shape[0] for c in cols)
        channel, bank, row, column, kind, arrive, tag = (np.broadcast_to(c, (n,)) for c in cols)
        self._check_kinds(kind)
        a, b = self._new_slots(n, tag, slot)
        S = self.S
        S.r_ch[a:b] = channel
        S.r_bank[a:b] = bank
        S.r_row[a:b] = row
        S.r_col[a:b] = column
        S.r_kind[a:b] = kind
        arr = np.broadcast_to(np.asarray(arrive, dtype=np.int64), (n,))
        S.r_arrive[a:b] = np.maximum(arr, 0)
        S.r_tag[a:b] = tag
        S.r_src[a:b] = S.p_src[port]
        self._append_port(port, a, b, tag)
        return np.arange(a, b, dtype=np.int64)

    def enqueue_ranges(self, port: int, start, stride, rows, row_bytes, decoder: Any, kind: int = 0,
                       arrive: int = -1, tag: int = -1) -> int:
        """Append the requests of strided byte blocks to a port's backlog (archsim.engine.dma): block d is
        rows[d] ranges [start[d] + i * stride[d], ... + row_bytes[d]), each one request per access it touches
        (from its start rounded down to an access), in order, addresses decoded by `decoder` (an
        archsim.dram.mapping.Decoder of this device); all of kind `kind`, arriving at `arrive`, tagged `tag`.
        The same requests in the same slots as `enqueue_requests` of the decoded addresses, written by one
        compiled call instead of O(requests) numpy passes. Returns the number of requests."""
        from archsim.engine import dma

        start, stride, rows, row_bytes = (np.ascontiguousarray(x, dtype=np.int64) for x in (start, stride, rows,
                                                                                          row_bytes))
        step = int(self.spec.access_bytes)
        if decoder.moves:       # a split field moves address bits first: decode request by request
            addr = dma.addresses(start, stride, rows, row_bytes, step).astype(np.uint64)
            dec = decoder(addr)
            self.enqueue_requests(port, dec["channel"], dec["bank"], dec["row"], dec["column"], kind, arrive, tag)
            return len(addr)
        n = int(dma.count_requests(start, stride, rows, row_bytes, step))
        if n == 0:
            return 0
        self._check_kinds(kind)
        tags = np.array([tag], dtype=np.int64)
        a, b = self._new_slots(n, tags, None, reset=False)
        S = self.S
        hashed = decoder.xor is not None
        given = np.array([kind, max(int(arrive), 0), tag, S.p_src[port]], dtype=np.int64)
        dma.fill_requests(start, stride, rows, row_bytes, step, decoder.shift, decoder.mask, decoder.mult,
                          decoder.xor if hashed else _NO_XOR, hashed, a, S.r_ch, S.r_bank, S.r_row, S.r_col,
                          (S.r_kind, S.r_arrive, S.r_tag, S.r_src), given,
                          tuple(getattr(S, f) for f in _FRESH_FIELDS), _FRESH_VALUES)
        self._append_port(port, a, b, tags)
        return n

    def _check_kinds(self, kind) -> None:
        """Requests of `kind` (one or an array) can be queued by this controller: DRAMsim3's bank command queues
        take reads and writes only."""
        if self.cf[CF_CMDQ] > 0 and np.any(np.asarray(kind) == KIND_RMW):
            from archsim.errors import ConfigError
            raise ConfigError("controller.bank_command_queue", "DRAMsim3's queues take reads and writes only; "
                              "rmw requests need bank_command_queue: 0")

    def _new_slots(self, n: int, tag: np.ndarray, slot: int | None, reset: bool = True) -> tuple[int, int]:
        """Pool slots [a, b) for n new requests (see enqueue_requests' `slot`), reset to a fresh request's
        (`reset`; enqueue_ranges resets them as it writes them)."""
        if self.reuse_slots:
            if slot is not None:
                raise ValueError("slot: a MemorySystem with reuse_slots picks the slots itself")
            self._check_forgettable(tag)
            a, b = self._ring_slots(n)
        elif slot is None:
            self._grow_pool(self.n_req + n)
            a, b = self.n_req, self.n_req + n
        else:
            a, b = int(slot), int(slot) + n
            if a < 0 or b > self.n_req or not self.served(a, b):
                raise ValueError(f"slots [{a}, {b}) are not reclaimable: every one must hold a served request")
        if reset:
            self._reset_requests(a, b)
        return a, b

    def _append_port(self, port: int, a: int, b: int, tag: np.ndarray) -> None:
        """Append pool slots [a, b) (requests just written, tagged `tag`) to the port's backlog."""
        S = self.S
        n = b - a
        tail = S.p_tail[port]
        if tail + n > S.p_buf.shape[1]:
            # compact the consumed prefix, then grow (in place while the live entries fit in half: no
            # allocation, and the kernel's typed entry point stays valid)
            h = S.p_head[port]
            cap = S.p_buf.shape[1]
            need = max(int((S.p_tail - S.p_head).max()), tail - h + n)
            width = cap if 2 * need <= cap else max(2 * cap, 2 * need)     # keep half free: amortised O(1)
            pb = S.p_buf if width == cap else np.zeros((S.p_buf.shape[0], width), dtype=np.int64)
            for p in range(S.p_buf.shape[0]):
                hp, tp = S.p_head[p], S.p_tail[p]
                pb[p, :tp - hp] = S.p_buf[p, hp:tp].copy()
                S.p_tail[p] = tp - hp
                S.p_head[p] = 0
            if pb is not S.p_buf:
                self._grow(p_buf=pb)
                S = self.S
            tail = S.p_tail[port]
        if not self.cf[CF_TAGGED]:
            self._note_tags(tag)
        if self._coord is not None:
            self._coord.note_tags(tag)
        S.p_buf[port, tail:tail + n] = np.arange(a, b, dtype=np.int64)
        S.p_tail[port] = tail + n
        S.outstanding[0] += n
        if S.p_block[port] < 0:
            head_arrive = S.r_arrive[S.p_buf[port, S.p_head[port]]]
            S.p_next[port] = min(S.p_next[port], max(S.clock[0], head_arrive))
        self.n_req = max(self.n_req, b)

    def _check_forgettable(self, tag: np.ndarray) -> None:
        """With reuse_slots a completion must not name a slot: a tagged request must be in a completion group."""
        if tag.shape[0] == 0:
            return
        t = tag[0] if (tag == tag[0]).all() else None
        tags = np.unique(tag) if t is None else [t]
        for t in tags:
            if t >= 0 and (t >= self.S.g_left.shape[0] or self.S.g_left[t] <= 0):
                raise ValueError(f"tag {int(t)} has no completion group (MemorySystem.expect): with reuse_slots a "
                                 "request's slot is reused once it is served, so its completion cannot name it")

    def _ring_slots(self, n: int) -> tuple[int, int]:
        """n pool slots for new requests (reuse_slots): the next ones in ring order if none of them holds a request
        not yet served, else new slots at the end of a grown pool (the requests in flight outgrew it)."""
        cap = self.S.r_ch.shape[0]
        a = self._ring if self._ring + n <= cap else 0
        if a + n > cap or not self.served(a, a + n):
            a = cap
            self._grow_pool(cap + n)
        self._ring = a + n
        return a, a + n

    def served(self, a: int, b: int) -> bool:
        """Whether every request in pool slots [a, b) has been served (its last column command issued): the
        engine no longer reads those slots."""
        # (a posted write is acknowledged, r_done set, while it still waits to issue: PHASE_POSTED)
        from archsim.engine.bookkeeping import all_served

        return bool(all_served(self.S.r_done, self.S.r_phase, int(a), int(b), PHASE_POSTED))

    def enqueue_stream(self, source: str, channel: int, cmd, bank, row=-1, column=-1, flags=0, est=0, tag=-1,
                       at=None) -> None:
        """Append commands to stream `source` of `channel` (cmd = spec command indices, bank = global bank id
        of a bank in the target). A command enters its stream at cycle `at` (default: now; an array gives one
        cycle per command, non-decreasing), after the ports' offers of that cycle, and takes the channel's
        next sequence number then (docs/channel-engine.md, clarification 1)."""
        from archsim.errors import ConfigError

        sl0 = self._stream_slots.get(source)
        if sl0 is None:
            s = self.source_index(source)
            if self.sources[s]["kind"] != "stream":
                raise ConfigError("source", f"{source!r} is not a stream source")
            sl0 = self._stream_slots[source] = int(self.S.src_idx[0, s])
        cmd = np.asarray(cmd, dtype=np.int64).reshape(-1)
        n = cmd.shape[0]
        if n == 0:
            return
        if not isinstance(channel, int | np.integer):      # (a scalar is the common case: no np.unique)
            chans = np.unique(np.asarray(channel, dtype=np.int64))
            if len(chans) != 1:
                raise ConfigError("stream", f"one stream call feeds one channel, got channels {chans.tolist()}")
            channel = chans[0]
        channel = int(channel)
        S = self.S
        T = self.tables
        B = T.banks
        local = np.asarray(bank, dtype=np.int64) - channel * B
        if local.size not in (1, n):
            raise ConfigError("stream", f"{local.size} banks for {n} commands: give one bank, or one per command")
        if cmd.min() < 0 or cmd.max() >= T.n_cmds or local.min() < 0 or local.max() >= B:
            raise ConfigError("stream", f"command or bank out of range for {self.spec.name} channel {channel}")
        now = int(S.clock[0])
        if at is None or np.ndim(at) == 0:
            at_arr = max(now, int(now if at is None else at))
        else:
            at_arr = np.maximum(np.broadcast_to(np.asarray(at, dtype=np.int64), (n,)), now)
        rep_bank = channel * B + T.rep[cmd, local]
        sl = channel * self.n_st + sl0
        self._append_stream(sl, cmd, rep_bank, row, column, flags, est, tag, at_arr)
        if self._coord is not None:
            self._coord.note_stream(cmd, np.broadcast_to(np.asarray(tag, dtype=np.int64), (n,)))

    def _note_tags(self, tag: Any) -> None:
        """Items with these tags were enqueued: once one is tagged, the kernel's runs keep to devices of one
        channel (CF_TAGGED: another channel's completion could stop advance() inside a run)."""
        if np.any(np.asarray(tag) >= 0):
            self.cf[CF_TAGGED] = 1

    def _append_stream(self, sl: int, cmd: np.ndarray, rep_bank: np.ndarray, row: Any, column: Any, flags: Any,
                       est: Any, tag: Any, at: Any) -> None:
        """Append commands to stream slot `sl`, arguments already checked (enqueue_stream, or a driver that
        checks once per op: archsim.engine.reuse): rep_bank global representative banks, at >= now (one
        cycle or one per command)."""
        S = self.S
        n = len(cmd)
        h, t = S.s_head[sl], S.s_tail[sl]
        if t + n > S.s_cmd.shape[1]:
            # compact every stream (drop issued commands); widen only if the live commands do not fit
            cap = S.s_cmd.shape[1]
            need = max(int((S.s_tail - S.s_head).max()), t - h + n)
            fields = state.STREAM_SLOT_FIELDS
            if 2 * need <= cap:
                # in place (no allocation: compacting is frequent, and fresh pages cost more than the copy)
                for q in range(S.s_head.shape[0]):
                    hq, tq = int(S.s_head[q]), int(S.s_tail[q])
                    if hq > 0:
                        for f in fields:
                            arr = getattr(S, f)
                            arr[q, :tq - hq] = arr[q, hq:tq].copy()
            else:
                width = max(2 * cap, 2 * need)     # keep half free: amortised O(1)
                upd = {}
                for f in fields:
                    arr = getattr(S, f)
                    new = np.full((arr.shape[0], width), state.BY_NAME[f].fill, dtype=arr.dtype)
                    for q in range(arr.shape[0]):
                        hq, tq = S.s_head[q], S.s_tail[q]
                        new[q, :tq - hq] = arr[q, hq:tq]
                    upd[f] = new
                self._grow(**upd)
            S = self.S
            for q in range(S.s_head.shape[0]):
                S.s_tail[q] -= S.s_head[q]
                S.s_in[q] -= S.s_head[q]
                S.s_head[q] = 0
            h, t = S.s_head[sl], S.s_tail[sl]
        S.s_cmd[sl, t:t + n] = cmd
        S.s_bank[sl, t:t + n] = rep_bank
        S.s_row[sl, t:t + n] = row
        S.s_col[sl, t:t + n] = column
        S.s_flags[sl, t:t + n] = flags
        S.s_est[sl, t:t + n] = est
        S.s_tag[sl, t:t + n] = tag
        if not self.cf[CF_TAGGED]:
            self._note_tags(tag)
        S.s_seq[sl, t:t + n] = -1
        S.s_at[sl, t:t + n] = at
        S.s_tail[sl] = t + n
        S.outstanding[0] += n
        S.st_next[0] = min(S.st_next[0], at if isinstance(at, int) else int(np.min(at)))

    def expect(self, tag: int, n: int) -> None:
        """Make `tag` a completion group of `n` more items (requests or stream commands enqueued with this tag,
        before or after this call): drain() then yields (tag, latest done cycle) once, when all n completed,
        instead of one completion per item, and advance() stops only then. Groups keep drivers that wait for
        whole tiles or GEMVs from stopping the kernel at every request."""
        from archsim.errors import ConfigError

        if tag < 0 or n < 1:
            raise ConfigError("expect", f"tag must be >= 0 and n >= 1, got tag {tag}, n {n}")
        S = self.S
        if tag >= S.g_left.shape[0]:
            m = max(2 * S.g_left.shape[0], tag + 1, 1024)
            g_left, g_done = state.allocate(("g_left", "g_done"), {"groups": m}).values()
            g_left[:S.g_left.shape[0]] = S.g_left
            g_done[:S.g_done.shape[0]] = S.g_done
            self._grow(g_left=g_left, g_done=g_done)
            S = self.S
        S.g_left[tag] += n

    def set_threshold(self, threshold: int) -> None:
        """Change the `threshold` arbitration's gate between advance() calls (a driver re-estimating it per
        phase, e.g. T3-MCA); every channel re-evaluates its candidates from the current cycle on."""
        from archsim.errors import ConfigError

        if int(threshold) < 0:
            raise ConfigError("threshold", f"must be >= 0, got {threshold}")
        self.cf[CF_THRESH] = int(threshold)
        np.minimum(self.S.wake, self.S.clock[0], out=self.S.wake)

    # -- running -------------------------------------------------------------------------------------------
    def advance(self, until: int | None = None) -> int:
        """Simulate up to cycle `until` (exclusive) or the next tagged completion; returns the status.
        Without `until`: to the next tagged completion, or until everything enqueued is done (ST_IDLE).
        With `until`, refresh is simulated up to it even when nothing is left (other units may still
        enqueue), so keep `until` near the cycles that matter."""
        if until is None:
            until = INF

        timer = compiling.clock()
        while True:
            st = self._call_kernel(until) if self._coord is None else self._coord.advance(until)
            if st == ST_LOG_FULL:
                self._grow_log()
                continue
            break
        self.wall_s += compiling.sim_seconds(timer)     # simulation time: compile excluded
        if st == ST_DEADLOCK:
            raise EngineError(f"channel engine deadlock at cycle {int(self.S.clock[0])}: "
                              f"{int(self.S.outstanding[0])} requests/commands left and nothing can issue")
        if st == ST_TIMEOUT:
            from archsim.errors import UserError

            raise UserError(f"simulation exceeded max_cycles={int(self.cf[CF_MAX_CYCLES])}")
        return int(st)

    def run(self, max_cycles: int | None = None) -> int:
        """Simulate until everything enqueued is done (tagged completions are kept for `drain`)."""
        if max_cycles is not None:
            self.cf[CF_MAX_CYCLES] = max_cycles
        while True:
            st = self.advance(RUN_TO_END)
            if st == ST_IDLE:
                return int(self.S.clock[0])
            if st == ST_COMPLETION:
                self._release_completions()

    def _grow_log(self) -> None:
        S = self.S
        n = S.log_clk.shape[0]
        upd = {}
        for f in state.LOG_FIELDS:
            a = getattr(S, f)
            b = np.zeros(2 * n, dtype=a.dtype)
            b[:n] = a
            upd[f] = b
        self._grow(**upd)

    def _release_completions(self) -> None:
        """Let advance() run past the completions due now (they stay in the ring for drain())."""
        S = self.S
        n = int(S.n_comp[0])
        pend = S.c_done[:n]
        later = pend[pend > S.clock[0]]
        S.min_pending[0] = later.min() if later.size else INF

    def drain(self) -> list[tuple[int, int]]:
        """Tagged completions done by now, as (tag, done cycle) in done order; they leave the ring."""
        S = self.S
        n = int(S.n_comp[0])
        if n == 1:
            # the common case of a co-simulation stopped at one group's completion: no array passes
            d = int(S.c_done[0])
            if d > S.clock[0]:
                return []
            S.n_comp[0] = 0
            S.min_pending[0] = INF
            return [(int(S.c_tag[0]), d)]
        from archsim.engine.bookkeeping import drain_ring

        tags, done = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
        m, k, earliest = drain_ring(S.c_done, tuple(getattr(S, f) for f in state.RING_FIELDS), n, S.clock[0], tags,
                                    done, _RING_TAG, INF)
        out = list(zip(tags[:m].tolist(), done[:m].tolist(), strict=True))
        S.n_comp[0] = k
        S.min_pending[0] = earliest
        if S.c_tag.shape[0] - k < 4096:
            self._grow_ring(2 * S.c_tag.shape[0])
        return out

    def _grow_ring(self, m: int) -> None:
        """The completion ring (state.RING_FIELDS) resized to m entries, its entries kept."""
        self._grow(**{f: np.resize(getattr(self.S, f), m) for f in state.RING_FIELDS})

    @property
    def sync(self) -> dict:
        """What the threads did (archsim/engine/threads.py SYNC_KEYS); all zero with one thread."""
        from archsim.engine import threads as threads_mod

        return self._coord.sync if self._coord is not None else dict.fromkeys(threads_mod.SYNC_KEYS, 0)

    # -- observing -----------------------------------------------------------------------------------------
    @property
    def clock(self) -> int:
        return int(self.S.clock[0])

    def command_log(self):
        """The issued commands (needs log=True): cycle, command, address fields of the target's lowest bank,
        row, column, source."""
        import pandas as pd

        S = self.S
        n = int(S.n_log[0])
        bank = S.log_bank[:n]
        counts = self.spec.counts
        rem = bank.copy()
        parts = {}
        for lvl, k in zip(("bank", "bankgroup", "rank", "pseudochannel", "channel"), counts[::-1], strict=True):
            parts[lvl] = rem % k
            rem = rem // k
        names = np.array(self.spec.command_names)
        src_names = np.array(["refresh"] + self.names)
        return pd.DataFrame({"cycle": S.log_clk[:n], "command": names[S.log_cmd[:n]], "channel": parts["channel"],
                             "pseudochannel": parts["pseudochannel"], "rank": parts["rank"],
                             "bankgroup": parts["bankgroup"], "bank": parts["bank"], "row": S.log_row[:n],
                             "column": S.log_col[:n], "source": src_names[S.log_src[:n] + 1]})

    @property
    def request_done(self) -> np.ndarray:
        self._check_ids_kept()
        return self.S.r_done[:self.n_req]

    @property
    def request_class(self) -> np.ndarray:
        self._check_ids_kept()
        return self.S.r_class[:self.n_req]

    def _check_ids_kept(self) -> None:
        if self.reuse_slots:
            raise ValueError("request ids name pool slots, which a MemorySystem with reuse_slots reuses: per-request "
                             "results are gone once served (use completion groups)")

    def completions(self) -> list[tuple[int, int]]:
        """Every tagged completion recorded so far, in done order (ties: issue order), including those
        whose done cycle is still ahead of the clock; they leave the ring."""
        S = self.S
        n = int(S.n_comp[0])
        order = np.argsort(S.c_done[:n], kind="stable")
        out = list(zip(S.c_tag[:n][order].tolist(), S.c_done[:n][order].tolist(), strict=True))
        S.n_comp[0] = 0
        S.min_pending[0] = INF
        return out

    def action_counts(self) -> dict[str, int]:
        """{energy action: count} over all channels (the energy post-pass input)."""
        out: dict[str, int] = {}
        tot = self.S.cmd_count.sum(axis=0)
        for c in self.spec.commands:
            out[c.action] = out.get(c.action, 0) + int(tot[c.index])
        return out
