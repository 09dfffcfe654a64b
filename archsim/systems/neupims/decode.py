"""Decode iterations of one device, stage by stage, on one long-lived channel engine: the NPU's GEMM DMA and
the PIM attention streams in one engine, softmax on the vector units between them.
"""
from __future__ import annotations

import functools
import heapq
import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from archsim.dram import mapping as mapping_mod
from archsim.engine.channel import SEG_START
from archsim.engine.loop import EventLoop, MemoryUnit
from archsim.engine.memory import EngineError, MemorySystem
from archsim.errors import UserError
from archsim.npu.dram_gemm import GemmAgent, InstructionGemmAgent, VectorStreamAgent
from archsim.npu.systolic import ArrayInstr, ArrayPipeline, _tile_instrs, schedule_gemm
from archsim.npu.vector import vector_op_cycles, vector_row_cycles
from archsim.systems.duplex.compiler import routing_counts
from archsim.systems.neupims.compiler import AttentionCompiler, Stream
from archsim.systems.neupims.config import BANK_QUEUE_ENTRIES, TRANSACTION_QUEUE_ENTRIES
from archsim.systems.neupims.device import Device, allreduce_s
from archsim.workload import serving


def _op_name(op: tuple) -> str:
    """An NPU program operator's name: the GEMM's (qkv, proj, ffn1 or ffn_gate and ffn_up, ffn2), the vector
    operator's (add, layernorm / rmsnorm, gelu / silu / relu, mul, rope), allreduce or npu_attention."""
    if op[0] == "gemm":
        return op[2]
    return op[1] if op[0] == "vector" else op[0]


@dataclass
class StageStats:
    name: str
    layer: int
    start: int = 0            # DRAM cycles
    end: int = 0
    npu_busy: int = 0         # NPU array cycles doing GEMM work (summed over arrays), in DRAM cycles
    npu_end: int = 0
    pim_end: int = 0
    pim_unit_end: dict[int, int] = field(default_factory=dict)     # each PIM unit's last attention GEMV done
    vector_busy: int = 0
    link_busy: int = 0
    commands: dict[str, int] = field(default_factory=dict)
    # the NPU program's operators in order: (name, start, end) in DRAM cycles, so a stage's time can be read
    # operator by operator (reports/neupims/vs_code.py holds them beside NeuPIMs' per-operation log)
    npu_ops: list[tuple[str, int, int]] = field(default_factory=list)
    # mapping policy `attend_start: all_logits`: the cycle every channel's attend GEMVs were released (the last
    # logits segment's softmax end); -1 when each head's attend starts by itself (`head`) or no PIM ran
    attend_start: int = -1
    pim_unit_logits_end: dict[int, int] = field(default_factory=dict)   # each PIM unit's last logits GEMV done
    # mapping policy `pim_issue: per_cycle`: the PIM instructions the NPU core handed over, one per NPU cycle (0: the
    # commands entered at the bus's rate), and the DRAM cycle the last of them entered its stream
    pim_instructions: int = 0
    pim_last_entry: int = -1


@dataclass
class _AttendBarrier:
    """NeuPIMs' code's operation barrier inside the PIM program (`attend_start: all_logits`): the attend GEMVs
    held until every logits segment of the stage, on every channel, and its softmax are done."""
    segments_left: int
    ready: int                      # the latest softmax end so far (DRAM cycles)
    held: list[tuple] = field(default_factory=list)
    # pim_issue per_cycle: per channel, each attend command's entry cycle after the release (_IssueOrder.attend)
    entry: dict[int, np.ndarray] | None = None


@dataclass(frozen=True)
class _IssueOrder:
    """Mapping policy `pim_issue: per_cycle`: per channel, the DRAM cycle (from its operation's start) each logits and
    attend command enters its stream, as the npu+pim branch's core hands the device's PIM instructions over one per
    NPU cycle, request after request, channel after channel; and the instructions of each operation."""

    logits: dict[int, np.ndarray]
    attend: dict[int, np.ndarray]
    logits_instructions: int
    attend_instructions: int


def _schedule(dev: Device, m: int, k: int, n: int):
    """(schedule, busy array cycles) of an m x k x n GEMM on one array, cached per device. With the NPU's
    `stationary: activations` the array holds the token tile and the weights stream: the transposed GEMM
    (n x k x m, the weights in A's role)."""
    key = ("gemm", m, k, n)
    if key not in dev.cache:
        if dev.npu.stationary == "activations":
            sched = schedule_gemm(dev.npu, n, k, m, names=("B", "A", "C"))
        else:
            sched = schedule_gemm(dev.npu, m, k, n)
        dev.cache[key] = (sched, sched.array_cycles())
    return dev.cache[key]


@lru_cache(maxsize=65536)
def _attention_streams(compiler: AttentionCompiler, context: int, head: int = 0) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...], int, int]:
    """One head's logits and attend streams with rows relative to the request's first KV row, and the rows
    its K and V tiles take (one layer; layout head_rows). `head` only matters modulo the heads one GWRITE of q
    serves (the first of them carries the GWRITE)."""
    head = head % (compiler.row_elems // compiler.dk)
    lg, at = Stream(), Stream()
    keys_per_row = compiler.row_elems // compiler.dk
    k_rows = math.ceil(math.ceil(context / compiler.banks) / keys_per_row)
    v_rows = math.ceil(compiler.dk / compiler.banks) * math.ceil(context / compiler.row_elems)
    # the query / score staging rows live just past the KV rows of the head (GWRITE source rows)
    compiler.logits(lg, context, 0, q_row=k_rows + v_rows, head=head)
    compiler.attend(at, context, k_rows, s_row=k_rows + v_rows + 1)
    return lg.arrays(), at.arrays(), k_rows + v_rows + 2, k_rows


@lru_cache(maxsize=65536)
def _group_streams(compiler: AttentionCompiler, context: int, first_head: int, group: int):
    """GQA (layout head_rows): one KV head's streams, rows relative to its first KV row. Its K and V^T rows are
    stored once and read by the `group` query heads of its group. q.K^T: the group's queries sit side by side
    in the global buffer (one GWRITE fills row_elems / dk heads' q), so each open K row set runs one GEMV per
    query head (more GEMV rows over the same keys); a group wider than the buffer, or crossing its boundary,
    takes one pass over the K rows per buffer fill. s.V: the buffer holds one head's chunk of scores, so each
    query head's attend opens the shared V^T rows again. Returns (logits streams, the group's query heads
    (0 .. group - 1) each completes, attend streams per query head, rows taken). `first_head` only matters
    modulo the heads one GWRITE of q serves."""
    per_gwrite = compiler.row_elems // compiler.dk
    k_rows = math.ceil(math.ceil(context / compiler.banks) / per_gwrite)
    v_rows = math.ceil(compiler.dk / compiler.banks) * math.ceil(context / compiler.row_elems)
    staging = k_rows + v_rows              # q and score staging rows just past the KV head's rows
    lgs, segs = [], []
    h = first_head
    while h < first_head + group:
        n = min(first_head + group, (h // per_gwrite + 1) * per_gwrite) - h
        lg = Stream()
        compiler.logits(lg, context, 0, q_row=staging, head=h % per_gwrite, queries=n)
        lgs.append(lg.arrays())
        segs.append(tuple(range(h - first_head, h - first_head + n)))
        h += n
    ats = []
    for _ in range(group):
        at = Stream()
        compiler.attend(at, context, k_rows, s_row=staging + 1)
        ats.append(at.arrays())
    return tuple(lgs), tuple(segs), tuple(ats), staging + 2


@lru_cache(maxsize=65536)
def _token_rows_streams(compiler: AttentionCompiler, context: int, heads: int):
    """A request's streams in layout token_rows (NeuPIMs' code), rows relative to its first KV row: the logits
    per query chunk (its heads share each row set), the heads of each chunk, the attend per head, and the rows
    the request takes. K: tile t of chunk c at row t x chunks + c (PIMTensor.cc:20-33, `_rows[ti * chunks +
    chunk]`); each head's V^T after the keys; then the staging rows of q (one per chunk) and s (per head)."""
    per_chunk = compiler.row_elems // compiler.dk
    chunks = math.ceil(heads / per_chunk)
    tiles = math.ceil(context / compiler.banks)
    v_rows = math.ceil(compiler.dk / compiler.banks) * math.ceil(context / compiler.row_elems)
    s_chunks = math.ceil(context / compiler.row_elems)
    k_rows = tiles * chunks
    q_row = k_rows + heads * v_rows
    lgs, at, seg_heads = [], [], []
    for c in range(chunks):
        lg = Stream()
        group = tuple(range(c * per_chunk, min(heads, (c + 1) * per_chunk)))
        compiler.logits_token_rows(lg, context, c, q_row + c, len(group), row_stride=chunks)
        lgs.append(lg.arrays())
        seg_heads.append(group)
    for h in range(heads):
        a = Stream()
        compiler.attend(a, context, k_rows + h * v_rows, s_row=q_row + chunks + h * s_chunks)
        at.append(a.arrays())
    return tuple(lgs), tuple(seg_heads), tuple(at), q_row + chunks + heads * s_chunks


@dataclass(frozen=True)
class _Part:
    """The logits (or attend) streams of every head of one channel, concatenated (DecodeSimulator._part)."""

    cmd: np.ndarray
    bank: np.ndarray          # the engine's representative bank of each command's target (global id)
    valid: np.ndarray         # the command names a row
    pos: np.ndarray           # its row past the first KV row, before the layer's offset
    flags: np.ndarray
    est: np.ndarray
    start: np.ndarray         # head j's commands: [start[j], start[j + 1])


@dataclass(frozen=True)
class _ChannelPlan:
    logits: _Part             # per logits segment (a head's, or a query chunk's in layout token_rows)
    attend: _Part             # per head
    softmax: list[int]        # each head's softmax, DRAM cycles
    seg_heads: list[tuple[int, ...]]    # the heads (attend / softmax indices) each logits segment completes
    lg_parts: list[int]                 # logits segments of each request, in order (its attend has `heads` parts)


def _controller(dev: Device, refresh: bool, attention_on_pim: bool) -> dict:
    """The memory controller's config from the mapping policy."""
    # the NPU's read and write queues: the window FR-FCFS schedules from (mapping policy `request_queue`)
    ctrl = {"refresh": "allbank" if refresh else "none", "read_queue": dev.policy.request_queue,
            "write_queue": dev.policy.request_queue, "stream_reserve": dev.policy.pim_reserves_banks}
    if dev.policy.refresh_stagger and refresh:
        ctrl["refresh_stagger"] = True      # the ranks refresh in turn (mapping policy refresh_stagger)
    if dev.policy.npu_controller == "bank_queues":
        if attention_on_pim:
            raise NotImplementedError("mapping policy npu_controller: bank_queues with PIM attention (issue 33): "
                                      "the engine's bank command queues take no PIM stream source")
        ctrl.update(convention="dramsim3", bank_command_queue=BANK_QUEUE_ENTRIES,
                    read_queue=TRANSACTION_QUEUE_ENTRIES, write_queue=TRANSACTION_QUEUE_ENTRIES)
    return ctrl


class DecodeSimulator:
    """Simulates decode iterations of one device, stage by stage, on one long-lived channel engine."""

    def __init__(self, dev: Device, refresh: bool = True, log: bool = False):
        self.dev = dev
        self.log = log
        self.stream_flags: dict[int, list[tuple[int, int]]] = {}
        spec = dev.spec
        self.attention_on_pim = dev.variant.pim_arbitration is not None and dev.policy.attention == "pim"
        # one PIM stream source per PIM unit of a channel (an HBM channel has two pseudo-channels, each a unit)
        self.units = dev.pim_units // spec.channels if self.attention_on_pim else 1
        self.unit_banks = spec.banks_per_channel // self.units
        pim_sources = ["pim"] if self.units == 1 else [f"pim{u}" for u in range(self.units)]
        if self.attention_on_pim:
            sources = [{"name": n, "kind": "stream"} for n in pim_sources] + [{"name": "npu", "kind": "rw"}]
            arbitration = dev.variant.pim_arbitration
        else:
            sources = [{"name": "npu", "kind": "rw"}]
            arbitration = "frfcfs"
        ctrl = _controller(dev, refresh, self.attention_on_pim)
        # a PIM GEMV that would cross a refresh waits for it (NeuPIMs' PIM_HEADER admission)
        self.ms = MemorySystem(spec, ctrl, sources=sources, arbitration=arbitration, log=log,
                               stream_refresh="wait" if self.attention_on_pim else "split", requests=1 << 16,
                               stream_capacity=1 << 14, reuse_slots=True)
        # one exact event loop over the device's memory, in DRAM cycles: every agent (an array's GEMM DMA, a
        # channel's PIM attention, npu_only's KV loads) waits on completion groups of `self.memory`
        self.loop = EventLoop(name=f"{dev.system} stage")
        self.memory = self.loop.add(MemoryUnit("DRAM", self.ms, ticks="cycles"))
        # one load and one store DMA engine per array, each offering up to one request per channel per cycle
        width = spec.channels
        self.ports = [(self.ms.add_port("npu", width), self.ms.add_port("npu", width)) for _ in range(dev.npu.arrays)]
        self.decode = mapping_mod.Decoder(spec, spec.default_mapping)     # tables built once, not per DMA tile
        if self.attention_on_pim and "compiler" not in dev.cache:
            dev.cache["compiler"] = AttentionCompiler(spec, dev.model.d_head, dev.policy.pim_precharge,
                                                      dev.policy.pim_gemv)
        self.compiler = dev.cache.get("compiler")
        self._unit_slot = [int(self.ms.S.src_idx[0, self.ms.source_index(n)]) for n in pim_sources] \
            if self.attention_on_pim else []
        self._plans: dict[tuple[int, tuple[int, ...]], _ChannelPlan] = {}    # this iteration's (channel, contexts)
        self._softmax_memo: dict[int, int] = {}
        self.stages: list[StageStats] = []
        self.eb = dev.npu.dtype_bytes
        # address space: weights of every layer from 0, activations after them; KV rows from kv_base_row
        E, tp = dev.model.d_model, dev.tp
        # QKV: the device's query heads and its KV heads' K and V (GQA: n_kv_heads x d_head each; MHA: 3E / tp)
        qkv_cols = (dev.model.q_dim + 2 * dev.model.kv_dim) // tp
        F = dev.model.d_ff // tp
        # the FFN's input GEMMs: GPT's one (ffn1), or a gated FFN's gate and up projections (SwiGLU)
        ffn_in = {"ffn_gate": (E, F), "ffn_up": (E, F)} if dev.model.gated_ffn else {"ffn1": (E, F)}
        self.gemm_shapes = {"qkv": (E, qkv_cols), "proj": (dev.model.q_dim // tp, E), **ffn_in, "ffn2": (F, E)}
        self.ffn_names = [*ffn_in, "ffn2"]
        if dev.model.n_experts > 1:
            # MoE: the router (d_model x n_experts, whole on every device) and each expert's FFN GEMMs "e<i>.<name>",
            # every expert split over the tp devices as the dense FFN is (tensor-parallel experts)
            self.gemm_shapes["router"] = (E, dev.model.n_experts)
            for e in range(dev.model.n_experts):
                self.gemm_shapes.update({f"e{e}.{name}": self.gemm_shapes[name] for name in self.ffn_names})
        align = spec.row_bytes * spec.total_banks
        self.weight_base: dict[tuple[int, str], int] = {}
        # Each array streams its own block of a GEMM's weights (k x n/arrays, contiguous). Blocks are staggered
        # by channels/arrays channels and banks/arrays banks: arrays streaming side by side then work on
        # different channels and banks. (Aligned blocks all start at channel 0, bank 0: the arrays move through
        # the channels as a convoy, head-of-line blocked at the same channel queue, and fight over one bank.)
        ra = spec.row_bytes
        stagger = ra * max(spec.channels // dev.npu.arrays, 1) + ra * spec.channels * max(
            spec.banks_per_channel // dev.npu.arrays, 1)
        self.block_stride = {}
        at = 0
        for name, (k, n) in self.gemm_shapes.items():
            self.block_stride[name] = math.ceil(k * math.ceil(n / dev.npu.arrays) * self.eb / align) * align + stagger
        for layer in range(dev.layers):
            for name in self.layer_gemms(layer):
                self.weight_base[(layer, name)] = at
                at += self.block_stride[name] * dev.npu.arrays
        self.act_base = at
        rows_needed = at // (spec.row_bytes * spec.total_banks) + 64
        base = spec.rows // 2 if dev.policy.kv_base_row == "half" else dev.policy.kv_base_row
        self.kv_row0 = max(base, rows_needed)
        if self.kv_row0 >= spec.rows:
            why = (f"the weights need {rows_needed} rows of every bank" if rows_needed >= base else
                   f"the mapping policy's kv_base_row {base}")
            raise UserError(f"{dev.model.name} / tp {tp}: {why}, beyond {spec.name}'s {spec.rows} rows")
        self.vector_free = [0] * dev.npu.vector.pipelines

    def layer_gemms(self, layer: int) -> list[str]:
        """The GEMMs whose weights `layer` holds: attention and the dense FFN, or (an MoE layer) the router and
        every expert's FFN."""
        if not self.dev.model.is_moe_layer(layer):
            return ["qkv", "proj", *self.ffn_names]
        return ["qkv", "proj", "router",
                *(f"e{e}.{name}" for e in range(self.dev.model.n_experts) for name in self.ffn_names)]

    # -- NPU ops ---------------------------------------------------------------------------------------------
    def _gemm(self, layer: int, name: str, m: int, start: int, on_array_done, stats: StageStats) -> None:
        """Start GEMM `name` of `layer` at DRAM cycle `start` split over the arrays; `on_array_done(end)` is
        called with each array's end (DRAM cycles)."""
        dev = self.dev
        k, n = self.gemm_shapes[name]
        arrays = dev.npu.arrays
        n_per = math.ceil(n / arrays)
        start_npu = math.ceil(start * dev.npu.clock_hz / self.dev.dram_hz - 1e-9)
        base = self.weight_base[(layer, name)]
        for a in range(arrays):
            na = min(n_per, n - a * n_per)
            if na <= 0:
                continue
            if dev.npu.dma == "per_instruction":
                def done(ag, stats=stats):
                    stats.npu_busy += dev.npu_to_dram(ag.busy_cycles)
                    on_array_done(dev.npu_to_dram(ag.end_npu))
                InstructionGemmAgent(self.memory, dev.npu, m, k, na, base + a * self.block_stride[name], start_npu,
                                     *self.ports[a], self.decode, on_finish=done).start()
                continue
            sched, busy = _schedule(dev, m, k, na)
            stats.npu_busy += dev.npu_to_dram(busy)
            bases = {"A": self.act_base, "B": base + a * self.block_stride[name],
                     "C": self.act_base + (1 + a) * (1 << 24)}
            # operands in the tile-blocked layout (weights arranged offline, activations written that way), so
            # a tile is one contiguous range spread over every channel (row-major A with 8 KB rows would put
            # a tile's 1 KB row pieces on a quarter of the channels)
            agent = GemmAgent(self.memory, sched, bases, start_npu, *self.ports[a], self.decode, dev.npu.clock_hz,
                              on_finish=lambda ag: on_array_done(self.dev.npu_to_dram(ag.end_npu)), layout="blocked")
            agent.start()

    def _arrays_used(self, name: str) -> int:
        n = self.gemm_shapes[name][1]
        return math.ceil(n / math.ceil(n / self.dev.npu.arrays))

    def _vector(self, kind: str, n: int, rows: int) -> int:
        return self.dev.npu_to_dram(vector_op_cycles(self.dev.npu, kind, n, rows))

    def _vector_in_dram(self, kind: str, n: int, rows: int, start: int, then, stats: StageStats) -> None:
        """A vector operator with its rows loaded from and stored to DRAM (the NPU's `vector_operands: dram`):
        a residual add and an element-wise product read two rows per output row, the norms and activations one."""
        npu = self.dev.npu
        row = vector_row_cycles(npu, kind, n)
        stats.vector_busy += self.dev.npu_to_dram(row * rows)
        inputs = 2 if kind in ("add", "mul") else 1
        start_npu = math.ceil(start * npu.clock_hz / self.dev.dram_hz - 1e-9)
        VectorStreamAgent(self.memory, npu.clock_hz, rows, inputs * n * self.eb, n * self.eb, row, self.act_base,
                          start_npu, *self.ports[0], self.decode,
                          on_finish=lambda ag: then(self.dev.npu_to_dram(ag.end_npu))).start()

    def _allreduce(self, nbytes: int) -> int:
        """Ring all-reduce across the tp devices (reduce-scatter + all-gather), in DRAM cycles."""
        return math.ceil(allreduce_s(self.dev.tp, self.dev.link_bytes_per_s, self.dev.link_latency_s, nbytes)
                         * self.dev.dram_hz)

    def _npu_program(self, ops: list[tuple], start: int, stats: StageStats) -> None:
        """Run ops in order from `start` (GEMMs through the memory, the rest as fixed latencies); sets
        stats.npu_end when the last op finishes. Ops: ("gemm", layer, name, m), ("vector", kind, n, rows),
        ("allreduce", bytes), ("npu_attention", contexts)."""
        def then(i: int, t0: int, end: int) -> None:
            stats.npu_ops.append((_op_name(ops[i]), t0, end))
            run(i + 1, end)

        def run(i: int, t: int) -> None:
            while i < len(ops):
                op = ops[i]
                if op[0] == "gemm":
                    ends: list[int] = []
                    expected = self._arrays_used(op[2])

                    def finished(end: int, i=i, t0=t, ends=ends, expected=expected) -> None:
                        ends.append(end)
                        if len(ends) == expected:
                            then(i, t0, max(ends))
                    self._gemm(op[1], op[2], op[3], t, finished, stats)
                    return
                if op[0] == "vector" and self.dev.npu.vector_operands == "dram":
                    self._vector_in_dram(*op[1:], t, lambda end, i=i, t0=t: then(i, t0, end), stats)
                    return
                if op[0] == "npu_attention":
                    self._npu_attention(op[1], op[2], t, stats, lambda end, i=i, t0=t: then(i, t0, end))
                    return
                if op[0] == "vector":
                    d = self._vector(*op[1:])
                    stats.vector_busy += d
                else:           # allreduce
                    d = self._allreduce(op[1])
                    stats.link_busy += d
                stats.npu_ops.append((_op_name(op), t, t + d))
                t += d
                i += 1
            stats.npu_end = max(stats.npu_end, t)
        run(0, start)

    # -- attention on the NPU (npu_only) -----------------------------------------------------------------------
    def _npu_attention(self, layer: int, contexts: list[int], start: int, stats: StageStats, then) -> None:
        """Each request's K and V (its heads on this device) stream over the external bus into the NPU; the
        arrays take requests in turn, loading the next request while computing one (double buffering)."""
        dev = self.dev
        arrays = dev.npu.arrays
        dk, heads = dev.model.d_head, self.heads
        kv_tok = 2 * dev.kv_heads * dk * self.eb        # K and V of this device's KV heads (GQA: fewer than heads)
        state = {"left": arrays}
        ends = [start] * arrays
        base = self.act_base + (64 << 24) + layer * (1 << 30) % (self.dev.spec.capacity_bytes // 2)
        offsets = np.cumsum([0] + [c * kv_tok for c in contexts])
        per_array = [list(range(a, len(contexts), arrays)) for a in range(arrays)]

        def compute_cycles(L: int) -> int:
            array = (_schedule(dev, 1, dk, L)[1] + _schedule(dev, 1, L, dk)[1]) * heads
            soft = vector_row_cycles(dev.npu, "softmax", L) * math.ceil(heads / dev.npu.vector.pipelines)
            return dev.npu_to_dram(array + soft)

        # pipelined: each array issues every head's q.K^T and s.V into one instruction pipeline that stays
        # full across heads and requests (a weight block preloads while the previous one streams), and its
        # SIMD vector unit runs a head's softmax while the array goes on with the next heads' q.K^T
        pipes = [ArrayPipeline(dev.npu) for _ in range(arrays)]
        vec_free = [0] * arrays
        qk_instrs = lambda L: _tile_instrs(dev.npu, 1, dk, L)      # noqa: E731
        sv_instrs = lambda L: _tile_instrs(dev.npu, 1, L, dk)      # noqa: E731
        to_npu = dev.npu.clock_hz / dev.dram_hz

        def pipelined_end(a: int, L: int, ready_dram: int) -> tuple[int, int]:
            """(compute start, end) in DRAM cycles of one request's attention on array a's pipeline."""
            pipe = pipes[a]
            ready = math.ceil(ready_dram * to_npu - 1e-9)
            begin = max(ready, pipe.busy_until_cycles)
            soft = vector_row_cycles(dev.npu, "softmax", L)
            soft_end = []
            for _h in range(heads):
                for ins in qk_instrs(L):
                    _s, fin = pipe.issue(ins, ready)
                vec_free[a] = max(vec_free[a], fin) + soft
                soft_end.append(vec_free[a])
            for h in range(heads):
                for ins in sv_instrs(L):
                    pipe.issue(ins, soft_end[h])
            return dev.npu_to_dram(begin), dev.npu_to_dram(pipe.busy_until_cycles)

        def fused_end(a: int, L: int, ready_dram: int) -> tuple[int, int]:
            """(start, end) in DRAM cycles of one request's attention as NeuPIMs' npu-only branch schedules it
            (FusedMHA.cc:111-228): per head one preload streaming the L keys past q (q.K^T), the softmax of the
            L scores on a vector pipeline, then one preload per 128 keys of s (s.V), ceil((L + 127) / 128) of
            them (the loop's bound, :202), each waiting for its operand; the array's own timing rule applies."""
            pipe = pipes[a]
            t = max(math.ceil(ready_dram * to_npu - 1e-9), pipe.busy_until_cycles)
            begin = t
            soft = vector_row_cycles(dev.npu, "softmax", L)
            for _h in range(heads):
                _s, fin = pipe.issue(ArrayInstr(rows=L, cols=1, depth=dk), t)
                t = fin + soft
                for _blk in range(0, L + 127, 128):
                    _s, fin = pipe.issue(ArrayInstr(rows=dk, cols=1, depth=128), t)
                t = fin
            return dev.npu_to_dram(begin), dev.npu_to_dram(pipe.busy_until_cycles)

        def array_run(a: int) -> None:
            reqs = per_array[a]
            loaded: dict[int, int] = {}
            comp_end = [start]

            def issue(j: int, at: int) -> None:
                r = reqs[j]
                lo = int(base + offsets[r])
                addr = np.arange(lo // 64 * 64, lo + contexts[r] * kv_tok, self.dev.spec.access_bytes, dtype=np.uint64)
                addr %= np.uint64(self.dev.spec.capacity_bytes)
                dec = self.decode(addr)
                tag = self.memory.group(len(addr), lambda done, j=j: loaded_cb(j, done))
                self.ms.enqueue_requests(self.ports[a][0], dec["channel"], dec["bank"], dec["row"], dec["column"], 0,
                                         at, tag)

            def loaded_cb(j: int, done: int) -> None:
                loaded[j] = done
                if dev.npu_attention == "fused_mha":
                    c0, end = fused_end(a, contexts[reqs[j]], done)
                    stats.npu_busy += end - c0
                    comp_end[0] = end
                elif dev.npu_attention == "pipelined":
                    c0, end = pipelined_end(a, contexts[reqs[j]], done)
                    stats.npu_busy += end - c0
                    comp_end[0] = end
                else:
                    c0 = max(done, comp_end[0])
                    c = compute_cycles(contexts[reqs[j]])
                    stats.npu_busy += c
                    comp_end[0] = c0 + c
                if j + 1 < len(reqs):
                    issue(j + 1, max(done, c0))       # the other buffer half is free once j starts computing
                else:
                    ends[a] = comp_end[0]
                    state["left"] -= 1
                    if state["left"] == 0:
                        then(max(ends))

            if reqs:
                issue(0, start)
            else:
                state["left"] -= 1
                if state["left"] == 0:
                    then(max(ends))

        for a in range(arrays):
            array_run(a)

    @property
    def heads(self) -> int:
        return self.dev.heads

    # -- attention on PIM ----------------------------------------------------------------------------------------
    def _channel_plan(self, ch: int, contexts: tuple[int, ...]) -> _ChannelPlan:
        """The layer-independent part of one channel's attention streams (every layer of an iteration runs the
        same requests: only the rows' layer offset differs), built once per iteration and channel."""
        key = (ch, contexts)
        plan = self._plans.get(key)
        if plan is None:
            comp = self.compiler
            lg, lg_base, at, at_base, seg_heads, lg_parts = [], [], [], [], [], []
            row = self.kv_row0
            for L in contexts:
                first = len(at)
                lg_parts.append(len(lg))
                if self.dev.policy.kv_layout == "token_rows":
                    lgs, groups, ats, rows = _token_rows_streams(comp, L, self.heads)
                    lg += lgs
                    lg_base += [row] * len(lgs)
                    seg_heads += [tuple(first + h for h in g) for g in groups]
                    at += ats
                    at_base += [row] * len(ats)
                    row += rows
                    continue
                heads_per_gwrite = comp.row_elems // comp.dk
                group = self.dev.group
                if group > 1:           # GQA: per KV head, its query heads over its K / V rows
                    for k in range(self.dev.kv_heads):
                        lgs, groups, ats, rows = _group_streams(comp, L, k * group % heads_per_gwrite, group)
                        lg += lgs
                        lg_base += [row] * len(lgs)
                        seg_heads += [tuple(first + k * group + j for j in g) for g in groups]
                        at += ats
                        at_base += [row] * len(ats)
                        row += rows
                    continue
                for h in range(self.heads):
                    (lg_h, at_h, rows_per_head, _k) = _attention_streams(comp, L, h % heads_per_gwrite)
                    lg.append(lg_h)
                    at.append(at_h)
                    lg_base.append(row)
                    at_base.append(row)
                    seg_heads.append((first + h,))
                    row += rows_per_head
            softmax = [self._softmax_cycles(L) for L in contexts for _h in range(self.heads)]
            lg_parts = np.diff([*lg_parts, len(lg)]).tolist()
            plan = self._plans[key] = _ChannelPlan(self._part(ch, lg, lg_base), self._part(ch, at, at_base), softmax,
                                                   seg_heads, lg_parts)
        return plan

    def _part(self, unit: int, streams: list[tuple[np.ndarray, ...]], base: list[int]) -> _Part:
        """Streams (one per head) of PIM unit `unit` concatenated, banks as the engine keeps them (its
        representative bank of the command's target), rows as positions past the first KV row before the
        layer's offset."""
        B = self.dev.spec.banks_per_channel
        ch, u = divmod(unit, self.units)
        n = np.array([len(p[0]) for p in streams], dtype=np.int64)
        cmd, local, rel, flags, est = (np.concatenate([p[i] for p in streams]) for i in range(5))
        if local.min() < 0 or local.max() >= self.unit_banks:
            raise EngineError(f"attention stream bank out of range for {self.dev.spec.name}")
        pos = rel + np.repeat(np.asarray(base, dtype=np.int64), n)
        return _Part(cmd, ch * B + self.ms.tables.rep[cmd, local + u * self.unit_banks], rel >= 0, pos, flags, est,
                     np.concatenate([[0], np.cumsum(n)]))

    def _layer_rows(self, part: _Part, layer: int) -> np.ndarray:
        """A part's rows in `layer` (each layer's KV caches sit 97 rows further, wrapping in the KV region)."""
        span = self.dev.spec.rows - self.kv_row0
        return np.where(part.valid, (part.pos + layer * 97) % span + self.kv_row0, -1)

    def _softmax_cycles(self, L: int) -> int:
        d = self._softmax_memo.get(L)
        if d is None:
            d = self._softmax_memo[L] = self.dev.npu_to_dram(vector_row_cycles(self.dev.npu, "softmax", L))
        return d

    def _pim_attention(self, layer: int, requests: list[tuple[int, int]], start: int, stats: StageStats) -> None:
        """requests: (context, channel). Per channel, the logits GEMVs of every request and head go first (one
        stream); each head's softmax runs on a vector pipeline when its logits are done, and its attend GEMV
        is appended to the channel's stream at the softmax's end, or (mapping policy `attend_start:
        all_logits`) every channel's attend GEMVs once the last logits and softmax of the stage are done."""
        by_ch: dict[int, list[int]] = {}
        for L, ch in requests:
            by_ch.setdefault(ch, []).append(L)
        stats.pim_end = max(stats.pim_end, start)
        plans = {ch: self._channel_plan(ch, tuple(contexts)) for ch, contexts in by_ch.items()}
        barrier = None
        if self.dev.policy.attend_start == "all_logits":
            barrier = _AttendBarrier(sum(len(p.seg_heads) for p in plans.values()), start)
        issue = None
        if self.dev.policy.pim_issue == "per_cycle":      # (config: only with the barrier)
            issue = self._issue_order(requests, plans)
            barrier.entry = issue.attend
            stats.pim_instructions += issue.logits_instructions + issue.attend_instructions
        for ch, plan in plans.items():
            lg, at = plan.logits, plan.attend
            at_rows = self._layer_rows(at, layer)
            group = self.memory.group
            # one completion group for the unit's attend GEMVs (every head's): its end is the unit's PIM end, the
            # latest of its heads' ends, with one stop of the engine instead of one per head
            attend_cmds = sum(int(at.start[j + 1] - at.start[j]) for heads in plan.seg_heads for j in heads)
            attend_tag = group(attend_cmds, functools.partial(self._pim_done, stats, ch))
            # tags: one completion group per logits segment, whose end starts its heads' softmax
            tags = np.repeat(np.array([
                group(int(lg.start[g + 1] - lg.start[g]),
                      functools.partial(self._softmax_then_attend, ch, at, at_rows, heads, plan.softmax, stats,
                                        attend_tag, barrier))
                for g, heads in enumerate(plan.seg_heads)], dtype=np.int64), np.diff(lg.start))
            entry = start if issue is None else start + issue.logits[ch]
            if issue is not None:
                stats.pim_last_entry = max(stats.pim_last_entry, int(entry[-1]))
            self._append(ch, lg.cmd, lg.bank, self._layer_rows(lg, layer), lg.flags, lg.est, tags, entry)

    def _instruction_marks(self, part: _Part) -> np.ndarray:
        """1 for a command that stands for one PIM instruction of NeuPIMs' core (GWRITE, PIM_HEADER, COMP, READRES:
        NeuPIMSLogitSoftmax.cc:185-252, NeuPIMSAttend.cc:152-225), else 0: a GWRITE's ACT for the GWRITE (its
        GWRITE and PRE come with it), a row set's first G_ACT for its PIM_HEADER (the other G_ACTs and the PIM
        precharges are the controller's own)."""
        c = self.compiler.c
        return ((part.cmd == c["ACT"]) | (part.cmd == c["COMP"]) | (part.cmd == c["READRES"])
                | (part.cmd == c.get("COMPS_READRES", -1)) | ((part.flags & SEG_START) != 0)).astype(np.int64)

    def _issue_order(self, requests: list[tuple[int, int]], plans: dict[int, _ChannelPlan]) -> _IssueOrder:
        """Mapping policy `pim_issue: per_cycle`: every command's place in the device's one sequence of PIM
        instructions, one per NPU cycle (a command that is no instruction enters with the one it belongs to): the
        logits of every request, channel after channel, then (after the barrier) the attend in the same order."""
        per_req: dict[int, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}
        for ch, plan in plans.items():
            per_req[ch] = []
            for part, parts_of_req in ((plan.logits, plan.lg_parts), (plan.attend, [self.heads] * len(plan.lg_parts))):
                marks = np.concatenate([[0], np.cumsum(self._instruction_marks(part))])
                bounds = part.start[np.concatenate([[0], np.cumsum(parts_of_req)])]
                first, end = bounds[:-1], bounds[1:]
                req_of_cmd = np.repeat(np.arange(len(first)), end - first)
                # a command's instruction index within its request (those before its first instruction: 0)
                within = np.maximum(marks[1:] - marks[first][req_of_cmd] - 1, 0)
                per_req[ch].append((marks[end] - marks[first], req_of_cmd, within))
        base = {ch: [np.zeros(len(plans[ch].lg_parts), dtype=np.int64) for _ in range(2)] for ch in plans}
        totals = [0, 0]
        seen: dict[int, int] = {}
        # the batch as the code consolidates it: channel after channel, each channel's requests in the batch's order
        # ([npu+pim] src/scheduler/Scheduler.cc:252-264); each request's instructions after the previous request's
        for _L, ch in sorted(requests, key=lambda req: req[1]):
            k = seen.get(ch, 0)
            seen[ch] = k + 1
            for op in (0, 1):
                base[ch][op][k] = totals[op]
                totals[op] += int(per_req[ch][op][0][k])
        to_dram = self.dev.dram_hz / self.dev.npu.clock_hz
        entry = [{ch: np.ceil((base[ch][op][req] + within) * to_dram - 1e-9).astype(np.int64)
                  for ch, parts in per_req.items() for _n, req, within in [parts[op]]} for op in (0, 1)]
        return _IssueOrder(entry[0], entry[1], totals[0], totals[1])

    def _softmax_then_attend(self, ch: int, at: _Part, rows: np.ndarray, heads: tuple[int, ...], softmax: list[int],
                             stats: StageStats, attend_tag: int, barrier: _AttendBarrier | None,
                             logits_done: int) -> None:
        """The logits of `heads` are done: each head's softmax on the next free vector pipeline, then its attend
        GEMV appended to the channel's stream in the unit's attend group `attend_tag` (with a barrier: held until
        the stage's last logits segment)."""
        stats.pim_unit_logits_end[ch] = max(stats.pim_unit_logits_end.get(ch, 0), logits_done)
        for j in heads:
            d = softmax[j]
            free = heapq.heappop(self.vector_free)
            begin = max(free, logits_done)
            heapq.heappush(self.vector_free, begin + d)
            stats.vector_busy += d
            attend = (ch, at, rows, j, attend_tag)
            if barrier is None:
                self._append_attend(*attend, begin + d)
            else:
                barrier.ready = max(barrier.ready, begin + d)
                barrier.held.append(attend)
        if barrier is None:
            return
        barrier.segments_left -= 1
        if barrier.segments_left == 0:
            stats.attend_start = barrier.ready
            held = barrier.held
            if barrier.entry is not None:       # pim_issue per_cycle: a channel's heads in its entry cycles' order
                held = sorted(held, key=lambda attend: (attend[0], attend[3]))
                stats.pim_last_entry = max(stats.pim_last_entry, barrier.ready + max(
                    int(e[-1]) for e in barrier.entry.values()))
            for attend in held:
                entry = None if barrier.entry is None else barrier.entry[attend[0]]
                self._append_attend(*attend, barrier.ready, entry)

    def _append_attend(self, ch: int, at: _Part, rows: np.ndarray, j: int, tag: int, when: int,
                       entry: np.ndarray | None = None) -> None:
        """Head j's attend GEMVs (its part of `at`) onto channel ch's stream from cycle `when` (pim_issue
        per_cycle: each command at `when` + its `entry`), tagged with the unit's attend group."""
        a, b = int(at.start[j]), int(at.start[j + 1])
        when = when if entry is None else when + entry[a:b]
        self._append(ch, at.cmd[a:b], at.bank[a:b], rows[a:b], at.flags[a:b], at.est[a:b], tag, when)

    def _append(self, unit: int, cmd, bank, row, flags, est, tag, at) -> None:
        """`MemorySystem.enqueue_stream` to PIM unit `unit`'s stream (its channel's stream source of that
        unit) of commands checked once when their plan was built (bank: the engine's representative bank;
        archsim.engine.reuse drives the engine the same way). `at`: the cycle they enter, or one per command."""
        ms = self.ms
        ch, u = divmod(unit, self.units)
        now = int(ms.S.clock[0])
        at = max(now, int(at)) if np.ndim(at) == 0 else np.maximum(at, now)
        ms._append_stream(ch * ms.n_st + self._unit_slot[u], cmd, bank, row, -1, flags, est, tag, at)
        if self.log:     # per unit, (command, segment flags) of the stream in enqueue order (tests read them)
            self.stream_flags.setdefault(unit, []).extend(zip(cmd.tolist(), flags.tolist(), strict=True))

    @staticmethod
    def _pim_done(stats: StageStats, unit: int, done: int) -> None:
        stats.pim_end = max(stats.pim_end, done)
        stats.pim_unit_end[unit] = max(stats.pim_unit_end.get(unit, 0), done)

    # -- one stage -----------------------------------------------------------------------------------------------
    def run_stage(self, name: str, layer: int, npu_ops: list[tuple], pim: tuple[int, list[tuple[int, int]]] | None,
                  start: int) -> StageStats:
        st = StageStats(name, layer, start=start, npu_end=start, pim_end=start)
        before = self.ms.S.cmd_count.sum(axis=0).copy()
        self.vector_free = [start] * self.dev.npu.vector.pipelines
        if pim is not None and pim[1]:
            self._pim_attention(pim[0], pim[1], start, st)
        if npu_ops:
            self._npu_program(npu_ops, start, st)
        self.loop.run()
        st.end = max(st.npu_end, st.pim_end, start)
        counts = self.ms.S.cmd_count.sum(axis=0) - before
        st.commands = {n: int(c) for n, c in zip(self.dev.spec.command_names, counts, strict=True) if c}
        self.ms.recycle_requests()
        self.stages.append(st)
        return st

    # -- one decode iteration -------------------------------------------------------------------------------------
    def layer_ops(self, layer: int, b: int) -> tuple[list[tuple], list[tuple]]:
        """(QKV ops, Proj+FFN ops) of one layer for a sub-batch of b requests."""
        m = self.dev.model
        E = m.d_model
        act = b * E * self.eb
        norm = m.norm                    # layernorm or rmsnorm, as the model says
        qkv = [("vector", norm, E, b), ("gemm", layer, "qkv", b)]
        if m.position == "rope":         # rotate the device's q and k rows on the vector unit
            qkv.append(("vector", "rope", (m.q_dim + m.kv_dim) // self.dev.tp, b))
        post = [("gemm", layer, "proj", b), ("allreduce", act), ("vector", "add", E, b),
                ("vector", norm, E, b), *self._ffn_ops(layer, b), ("allreduce", act), ("vector", "add", E, b)]
        return qkv, post

    def _ffn_ops(self, layer: int, b: int) -> list[tuple]:
        """The FFN of `layer` for b tokens. Dense: GEMM, activation, GEMM; gated (SwiGLU): act(x W_gate) * (x W_up)
        on the vector unit, then W_down. MoE layer: the router GEMM and its softmax (top-k), then each expert's FFN
        over the tokens routed to it (the expected counts of uniform routing, duplex.compiler.routing_counts;
        an expert with none reads no weights)."""
        m = self.dev.model
        F = m.d_ff // self.dev.tp

        def ffn(prefix: str, rows: int) -> list[tuple]:
            if m.gated_ffn:
                first = [("gemm", layer, prefix + "ffn_gate", rows), ("vector", m.activation, F, rows),
                         ("gemm", layer, prefix + "ffn_up", rows), ("vector", "mul", F, rows)]
            else:
                first = [("gemm", layer, prefix + "ffn1", rows), ("vector", m.activation, F, rows)]
            return [*first, ("gemm", layer, prefix + "ffn2", rows)]

        if not m.is_moe_layer(layer):
            return ffn("", b)
        ops = [("gemm", layer, "router", b), ("vector", "softmax", m.n_experts, b)]
        for e, count in enumerate(routing_counts(m, b, "uniform", layer=layer)):
            if count:
                ops += ffn(f"e{e}.", int(count))
        return ops

    def iteration(self, contexts: list[int], channels: list[int], sub_batch: bool, start: int = 0,
                  on_layer=None) -> int:
        """One decode step of every request (context lengths after the step) through all layers; returns the
        end cycle. channels: the channel holding each request's KV cache (-1 never happens here). on_layer(k,
        cycle): called as the k-th layer's last stage ends (progress of a long iteration)."""
        on_layer = on_layer or (lambda k, cycle: None)
        self._plans = {}
        n = len(contexts)
        L = self.dev.layers
        reqs = list(zip(contexts, channels, strict=True))
        t = start
        if not sub_batch:
            for layer in range(L):
                qkv, post = self.layer_ops(layer, n)
                t = self.run_stage("A", layer, qkv, None, t).end
                if self.attention_on_pim:
                    t = self.run_stage("B", layer, [], (layer, reqs), t).end
                else:
                    t = self.run_stage("B", layer, [("npu_attention", layer, contexts)], None, t).end
                t = self.run_stage("E", layer, post, None, t).end
                on_layer(layer + 1, t)
            return t
        sb1, sb2 = serving.partition_sub_batches(channels, self.dev.pim_units)
        subs = [[reqs[i] for i in sb1], [reqs[i] for i in sb2]]
        sizes = [len(s) for s in subs]
        # an empty sub-batch (a batch of one request) runs no operators: its GEMMs would stream every weight again
        ops = [[self.layer_ops(layer, sizes[s]) if sizes[s] else ([], []) for s in (0, 1)] for layer in range(L)]
        # A: QKV(SB1) | B: QKV(SB2) + MHA(SB1) | C: post(SB1)+QKV'(SB1) + MHA(SB2) | D: post(SB2)+QKV'(SB2) +
        # MHA'(SB1) ... | E: post(SB1) + MHA(SB2) | F: post(SB2)   (primes: the next layer)
        t = self.run_stage("A", 0, ops[0][0][0], None, t).end
        t = self.run_stage("B", 0, ops[0][1][0], (0, subs[0]), t).end
        for layer in range(L - 1):
            t = self.run_stage("C", layer, ops[layer][0][1] + ops[layer + 1][0][0], (layer, subs[1]), t).end
            t = self.run_stage("D", layer, ops[layer][1][1] + ops[layer + 1][1][0], (layer + 1, subs[0]), t).end
            on_layer(layer + 1, t)
        t = self.run_stage("E", L - 1, ops[L - 1][0][1], (L - 1, subs[1]), t).end
        t = self.run_stage("F", L - 1, ops[L - 1][1][1], None, t).end
        on_layer(L, t)
        return t
