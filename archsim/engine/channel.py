"""The channel engine: one resumable, event-driven numba kernel for every unit that talks to DRAM.

Semantics: docs/channel-engine.md (the contract; archsim/engine/reference.py is an independent naive
implementation of it, and tests compare the two cycle for cycle). Device tables: archsim/engine/tables.py.

State lives outside the kernel in numpy arrays (`State`, a namedtuple, so numba compiles one kernel for all
devices of a kernel variant, see "Kernel variants" below, and caches it). `advance(S, T, CF, until)` simulates
cycles [clock, until) and returns early at the done cycle of the first pending tagged completion, so a driver
can react at exactly that cycle. Requests and stream commands are enqueued between calls by writing into the
state arrays (`MemorySystem` does it).

Time jumps straight to the next cycle at which something can happen: a port can offer, a channel has a
command whose timing is met (its `wake`), a refresh falls due. Idle cycles are never visited; a channel's
wake is a lower bound of the next cycle it could issue at, so skipping cycles never changes results.

Per channel, sources are FR-FCFS read/write queues (`rw`) and in-order command streams (`stream`).
Observers (per-command counters, the issued-command log, the completion ring) are fed by `_observe` after
each issue and never influence scheduling.
"""
from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, NamedTuple

import numba
import numpy as np
from numba.extending import overload

from archsim.dram.effects import (
    E_CLOSE,
    E_COMPUTE,
    E_OPEN,
    E_READ,
    E_READ_CLOSE,
    E_REFRESH,
    E_UPDATE,
    E_UPDATE_CLOSE,
    E_WRITE,
    E_WRITE_CLOSE,
)
from archsim.dram.roles import (
    R_ACT,
    R_PRE,
    R_RD,
    R_RDA,
    R_REFAB,
    R_REFPB,
    R_RFMAB,
    R_UPD,
    R_UPDA,
    R_WR,
    R_WRA,
)
from archsim.engine import field_access, kernel_cache, nowrap, state

# The kernel never indexes from an array's end: numba compiles this module without negative-index wrap-around
# (~17-20 % of kernel time; archsim/engine/nowrap.py).
nowrap.register(__name__)
# A read of one state field loads that field, not the whole state tuple (a quarter less first-compile time,
# same machine code; archsim/engine/field_access.py).
field_access.register(__name__)
# numba's cache of this module is keyed on its content and on the content of the modules it imports (the
# effects, roles and state layout baked into the kernel): an edit there alone recompiles (kernel_cache.py).
kernel_cache.register(__name__, __file__)

INF = np.int64(1) << np.int64(62)
# advance(RUN_TO_END): stop when every command has issued, without waiting for completion latencies
# (docs/channel-engine.md clarification 13); advance(INF) also delivers the tagged completions still pending
RUN_TO_END = INF + np.int64(1)

# Every helper is compiled without reference counting: the kernel allocates nothing (arrays live outside), and
# reference counting every array of the state tuple at every call costs more than the work.
# A call passes S and T by value, flattened into ~1000 scalar arguments (every array's pointer, shape and
# strides), so a helper that stays an out-of-line call costs ~1000 stack pushes per call. LLVM inlines the
# small helpers by itself once they are linked into the kernel; the three big per-step functions (`_step`,
# `_cands`, `_issue_pick`, too large for LLVM's inliner) are inlined at the numba IR level (`_inl`), which
# leaves the whole kernel one function without argument marshalling (4-6x faster than calls). Inlining *every*
# helper at the IR level instead makes numba's own analysis quadratic (minutes of cold compile).
_helper = numba.njit(cache=True, no_cpython_wrapper=True, _nrt=False)
_call = _helper
_inl = numba.njit(cache=True, no_cpython_wrapper=True, _nrt=False, inline='always')

# ---------------------------------------------------------------------------------------------------------
# CF: the controller config array, declared once. One slot per line: its name (the constant CF_<name>, a plain
# module-level int that numba folds into the compiled kernel), what it means, and how its value comes from the
# device set (`d`: spec, lowered tables T, controller config ctrl, and MemorySystem's arguments; see
# `_controller_fields`). The kernel reads a slot with `_cf(S.variant, CF, CF_<name>)` (a variant's constant where the
# variant fixes it, `_VARIANT_FIXED`) or CF[CF_<name>]. A new controller knob: one line at the end
# (docs/extending.md, "A config knob").
class Slot(NamedTuple):
    name: str
    doc: str
    value: Callable[[Any], int]


CF_SLOTS: list[Slot] = []


def _slot(name: str, doc: str, value: Callable[[Any], int]) -> int:
    CF_SLOTS.append(Slot(name, doc, value))
    return np.int64(len(CF_SLOTS) - 1)     # not a literal: numba compiles _cf once, not once per slot


CF_CH = _slot("CH", "channels of the device set", lambda d: d.nch)
CF_NSRC = _slot("NSRC", "sources per channel", lambda d: d.nsrc)
CF_NRW = _slot("NRW", "rw sources per channel", lambda d: d.n_rw)
CF_NST = _slot("NST", "stream sources per channel", lambda d: d.nsrc - d.n_rw)
CF_CLOSED_ROW = _slot("CLOSED_ROW", "closed row policy (1) or open (0)", lambda d: d.ctrl.row_policy == "closed")
CF_REFRESH = _slot("REFRESH", "REFRESH_NONE / _ALLBANK / _PERBANK (controller.refresh)",
                   lambda d: REFRESH_MODES[d.ctrl.refresh])
CF_DUAL_BUS = _slot("DUAL_BUS", "separate row and column command buses (the standard's command_bus: dual)",
                    lambda d: d.spec.command_bus == "dual")
CF_LOG = _slot("LOG", "the command log is kept", lambda d: d.log)
CF_NREFI = _slot("NREFI", "all-bank refresh interval of one node (refresh_stagger, DRAMsim3's RANK_LEVEL_STAGGERED: "
                 "nodes x (nREFI // nodes), one node due every nREFI // nodes cycles)",
                 lambda d: (d.T.ref_nodes * (d.spec.timing["nREFI"] // d.T.ref_nodes)
                            if d.ctrl.refresh_stagger and d.ctrl.refresh == "allbank" else d.spec.timing["nREFI"]))
CF_NREFIPB = _slot("NREFIPB", "per-bank refresh interval (nREFIpb)", lambda d: d.spec.timing["nREFIpb"])
CF_ARB = _slot("ARB", "arbitration (ARBITRATIONS)", lambda d: ARBITRATIONS[d.arbitration])
CF_STARVE = _slot("STARVE", "starvation cap in cycles (0 never promotes)", lambda d: d.starvation_cap)
CF_THRESH = _slot("THRESH", "threshold arbitration's gate (MemorySystem.set_threshold changes it)",
                  lambda d: d.threshold)
CF_STREAM_REF = _slot("STREAM_REF", "stream_refresh: wait (1) or split (0)", lambda d: d.stream_refresh == "wait")
CF_NRFC = _slot("NRFC", "all-bank refresh cycle time (nRFC)", lambda d: d.spec.timing["nRFC"])
CF_ALU = _slot("ALU", "rmw as RD + WR: ALU latency between them", lambda d: d.alu_latency)
CF_ACTIVE_BUF = _slot("ACTIVE_BUF", "active_buffer: a request is pinned from its ACT", lambda d: d.active_buffer)
CF_WM_HIGH = _slot("WM_HIGH", "write queue entries that start write mode",
                   lambda d: max(1, int(round(d.ctrl.write_high_watermark * d.ctrl.write_queue))))
CF_WM_LOW = _slot("WM_LOW", "write queue entries at which write mode may end",
                  lambda d: int(round(d.ctrl.write_low_watermark * d.ctrl.write_queue)))
CF_NBUF = _slot("NBUF", "row buffers per bank", lambda d: len(d.spec.row_buffers))
CF_MAX_CYCLES = _slot("MAX_CYCLES", "timeout: advance() fails past this cycle (run(max_cycles) changes it)",
                      lambda d: d.max_cycles)
CF_NRFCPB = _slot("NRFCPB", "per-bank refresh cycle time (nRFCpb)", lambda d: d.spec.timing["nRFCpb"])
CF_PIN_FREES = _slot("PIN_FREES", "pinned_leave_queue: a pinned request frees its queue entry",
                     lambda d: d.ctrl.pinned_leave_queue)
CF_HIT_CAP = _slot("HIT_CAP", "row_hit_cap: column commands per open row before the oldest request wins (0 off)",
                   lambda d: d.ctrl.row_hit_cap)
CF_CMDQ = _slot("CMDQ", "bank_command_queue: entries of each bank's command queue (0: archsim's FR-FCFS queues)",
                 lambda d: d.ctrl.bank_command_queue)
CF_DRAIN_IDLE = _slot("DRAIN_IDLE", "write_drain_idle: drain the write queue above this many writes while every "
                      "command queue is empty", lambda d: d.ctrl.write_drain_idle)
CF_POSTED = _slot("POSTED", "posted_writes: a write is acknowledged the cycle after it enters its queue",
                  lambda d: d.ctrl.posted_writes)
CF_MERGE_RD = _slot("MERGE_RD", "merge_reads: a read of an address a queued read waits for is answered with it",
                    lambda d: d.ctrl.merge_reads)
CF_RFM_THRESH = _slot("RFM_THRESH", "rfm_threshold: activates of one bank that make its rank due for an RFM (0 off)",
                      lambda d: d.ctrl.rfm_threshold)
CF_RESERVE = _slot("RESERVE", "stream_reserve: a stream's waiting open reserves its banks from rw sources' opens",
                   lambda d: d.ctrl.stream_reserve)
CF_COARSE_FIRST = _slot("COARSE_FIRST", "the rw scan checks a candidate's COARSE_CELLS first: a queue of more than "
                        "COARSE_FIRST_QUEUE entries", lambda d: max(d.ctrl.read_queue, d.ctrl.write_queue) > COARSE_FIRST_QUEUE)
# exact multi-command steps (`_stream_run`) in new MemorySystems: on; `set_runs(False)` turns them off (same results,
# one command per step: tests and benchmarks/bench_runs.py compare the two)
_RUNS = [True]


def set_runs(on: bool) -> None:
    """Exact multi-command steps on (default) or off in the MemorySystems made from now on."""
    _RUNS[0] = bool(on)


CF_RUNS = _slot("RUNS", "exact multi-command steps: a stream's run of column commands issues in one step (1; 0 one "
                "command per step, same results: tests compare the two)", lambda d: _RUNS[0])
CF_TAGGED = _slot("TAGGED", "a tagged request or stream command has been enqueued (MemorySystem sets it): another "
                  "channel's completion could then stop advance() inside a run, so runs need one channel",
                  lambda d: 0)
N_CF = len(CF_SLOTS)
CF_INDEX = {s.name: i for i, s in enumerate(CF_SLOTS)}
if any(globals().get("CF_" + s.name) != i for i, s in enumerate(CF_SLOTS)):
    raise RuntimeError("a controller slot's constant CF_<name> does not name its own slot")
REFRESH_NONE, REFRESH_ALLBANK, REFRESH_PERBANK = 0, 1, 2
# what a refresh node has pending (S.ref_pending, bits): its periodic refresh, an RFM (rfm_threshold)
REF_DUE, REF_RFM = 1, 2
REFRESH_MODES = {"none": REFRESH_NONE, "allbank": REFRESH_ALLBANK, "perbank": REFRESH_PERBANK}
ARB_FRFCFS, ARB_PRIORITY, ARB_BLOCKED, ARB_THRESHOLD, ARB_THRESHOLD_ROW, ARB_THRESHOLD_YIELD = 0, 1, 2, 3, 4, 5
# threshold_row: as threshold, but a held-back source may still issue column commands (to rows it opened);
# only its row commands wait, so it never holds a bank's row open while it waits (T3-MCA variant, issue 22).
# threshold_yield: as threshold, but while a source is held back the first source may precharge the rows it
# opened (a controller with no row ownership: T3-MCA's, issue 34)
ARBITRATIONS = {"frfcfs": ARB_FRFCFS, "priority": ARB_PRIORITY, "blocked": ARB_BLOCKED, "threshold": ARB_THRESHOLD,
                "threshold_row": ARB_THRESHOLD_ROW, "threshold_yield": ARB_THRESHOLD_YIELD}
SEG_START, SEG_END = 1, 2
KIND_READ, KIND_WRITE, KIND_RMW = 0, 1, 2
PHASE_POSTED = 2          # r_phase of a posted write (acknowledged) still waiting to issue (bank_command_queue)
CLASS_NONE = 3            # r_class of a request served without a command of its own (posted_writes, merge_reads)
# advance() status
ST_UNTIL, ST_COMPLETION, ST_IDLE, ST_LOG_FULL, ST_DEADLOCK, ST_TIMEOUT = 0, 1, 2, 3, 4, 5
KEY_SHIFT = np.int64(16)                     # candidate keys in the rw scan: age << KEY_SHIFT | list position
KEY_MASK = (np.int64(1) << KEY_SHIFT) - np.int64(1)
# Under a deep request window (a queue of more than COARSE_FIRST_QUEUE entries) the rw scan checks a candidate's
# coarsest timing cells (the channel's and the level below it) before the rest: most candidates it re-examines there
# are held back by a command just issued to another bank, which raised a cell they share (NeuPIMs, request_queue
# 4096: 99.7 % of those found not ready were so by these two cells alone). With 32-entry queues the extra check
# cost more than it saved (DRAM traces): docs/performance.md.
COARSE_CELLS = np.int64(2)
COARSE_FIRST_QUEUE = 256
STALL_CYCLES = np.int64(1) << np.int64(24)   # no source issued for this long while work is left: a deadlock


# ---------------------------------------------------------------------------------------------------------
# Kernel variants. The kernel is one source; a state allocated for a common device set is typed differently
# (the dtype of `State.variant` names the variant), so numba compiles that source once more for it, with the
# controller fields the variant fixes as constants (VARIANT_CF; -1 = read from CF). LLVM then drops the code the
# other device sets need, which leaves a smaller function with far fewer values spilled to the stack:
#   lean       one FR-FCFS rw source, one row buffer (every trace run, NPU-only GEMMs), under any controller
#              convention (the active buffer, DRAMsim3's queues and rules are runtime fields: fixing them saved
#              no measurable time on default runs, and the conventions' runs took 1.6-2x the kernel time in
#              the general kernel): a fraction of the general kernel's size, ~15-20 % less kernel time on trace
#              runs;
#   pim_dual   one PIM stream and one rw source under priority arbitration on banks with two row buffers
#              (NeuPIMs with a shallow request window): ~10-12 % less kernel time per layer;
#   pim_dual_deep  the same device set under a deep request window (CF_COARSE_FIRST: NeuPIMs' mappings, 4,096
#              entries): its rw scan walks the banks oldest candidate first (`_ordered_scan`), an order whose
#              upkeep made shallow-window runs ~30 % slower, so only the deep variants compile it;
#   pim_blocked_deep  one PIM stream and one rw source under blocked arbitration on banks with one row buffer,
#              under a deep request window: NeuPIMs' NPU+PIM baseline (system npu_pim, every mapping of it), with
#              pim_dual_deep's ordered scan;
#   stream     stream sources only (so no ports either: ports feed rw sources): PIM-GPT, Duplex's Logic-PIM
#              without xPU requests. Besides the constants, numba never types the rw and port helpers for it
#              (`_rw_part`), which is most of what a cold compile of it saves (docs/performance.md, cold start).
# A MemorySystem takes the first variant whose fixed fields agree with its own (docs/performance.md has the
# figures). Every variant runs the same source under the same contract; tests compare each with the reference
# scheduler and with the general kernel (MemorySystem(kernel="general") forces that one).
_VARIANT_FIXED = {     # variant -> {controller slot name: the value it fixes}
    "general": {},
    "lean": {"NSRC": 1, "NRW": 1, "NST": 0, "NBUF": 1, "ARB": ARB_FRFCFS, "STARVE": 0},
    "pim_dual": {"NSRC": 2, "NRW": 1, "NST": 1, "NBUF": 2, "ARB": ARB_PRIORITY, "STARVE": 0, "ACTIVE_BUF": 0,
                 "HIT_CAP": 0, "CMDQ": 0, "POSTED": 0, "MERGE_RD": 0, "COARSE_FIRST": 0},
    "stream": {"NRW": 0, "CMDQ": 0, "POSTED": 0, "MERGE_RD": 0},
    "pim_dual_deep": {"NSRC": 2, "NRW": 1, "NST": 1, "NBUF": 2, "ARB": ARB_PRIORITY, "STARVE": 0, "ACTIVE_BUF": 0,
                      "HIT_CAP": 0, "CMDQ": 0, "POSTED": 0, "MERGE_RD": 0, "COARSE_FIRST": 1},
    "pim_blocked_deep": {"NSRC": 2, "NRW": 1, "NST": 1, "NBUF": 1, "ARB": ARB_BLOCKED, "STARVE": 0, "ACTIVE_BUF": 0,
                         "HIT_CAP": 0, "CMDQ": 0, "POSTED": 0, "MERGE_RD": 0, "COARSE_FIRST": 1},
}
KERNEL_VARIANTS = tuple(_VARIANT_FIXED)
# State.variant's dtype per variant, in that order
_VARIANT_DTYPES = (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32)


def _variant_cf() -> np.ndarray:
    """VARIANT_CF[v, slot]: the value variant v fixes controller slot `slot` to, -1 where it does not."""
    for v, fixed in _VARIANT_FIXED.items():
        if set(fixed) - set(CF_INDEX):
            raise RuntimeError(f"kernel variant {v}: unknown controller slots {sorted(set(fixed) - set(CF_INDEX))}; "
                               f"declared: {', '.join(CF_INDEX)}")
    return np.array([[fixed.get(s.name, -1) for s in CF_SLOTS] for fixed in _VARIANT_FIXED.values()], dtype=np.int64)


VARIANT_CF = _variant_cf()
# ORDERED_SCAN[v]: variant v keeps the rw scan's age order (`_ordered_scan`; a DeepState): the variants that fix a
# deep request window
ORDERED_SCAN = np.array([v > 0 and VARIANT_CF[v, CF_COARSE_FIRST] == 1 for v in range(len(KERNEL_VARIANTS))])


def _variant(S):
    """Index in KERNEL_VARIANTS of the kernel variant of a State, or of its `variant` array (a compile-time
    constant in compiled code)."""
    return _VARIANT_DTYPES.index((S if isinstance(S, np.ndarray) else S.variant).dtype.type)


def _variant_of_type(S) -> int:
    """Index in KERNEL_VARIANTS of the variant a State's numba type `S` (or its `variant` array's) names (at
    typing time)."""
    dtype = S.dtype if isinstance(S, numba.types.Array) else S.types[S.fields.index("variant")].dtype
    return [numba.from_dtype(np.dtype(d)) for d in _VARIANT_DTYPES].index(dtype)


@overload(_variant, jit_options={"cache": True, "no_cpython_wrapper": True, "_nrt": False})
def _variant_typed(S):
    v = _variant_of_type(S)
    return lambda S: v


def _returns_none(S, *args):
    return None


def _returns_true(S, *args):
    return True


def _returns_inf(S, *args):
    return INF


def _variant_part(applies):
    """Decorator maker (instead of `_call`) for helpers only some variants run: `applies(v)` says which (v: an index
    in KERNEL_VARIANTS). The kernel calls such a helper through an overload that numba resolves per state type at
    typing time: for a variant it does not apply to, to `empty` (one of the `_returns_*`, of the helper's return
    type), so numba never types or compiles the helper for it (nor the state fields only it reads); for the others
    to the helper itself, compiled as `_call` compiles it (same options, same on-disk cache entries), or with
    inline=True inlined into its caller at numba's IR level as `_inl` does (then `empty` names the helper's
    parameters: the IR inliner takes no *args). The returned function's `impl` is the helper's own dispatcher
    (archsim.warm)."""
    def part(empty, inline=False):
        def wrap(py_func):
            impl = _call(py_func)

            def gate(*args):
                raise TypeError(f"{py_func.__name__} is called from compiled code only (its dispatcher: .impl)")

            def typed(S, *args):
                return py_func if applies(_variant_of_type(S)) else empty

            typed.__signature__ = inspect.signature(py_func)     # numba checks the implementations' parameters
            overload(gate, inline="always" if inline else "never",
                     jit_options={"cache": True, "no_cpython_wrapper": True, "_nrt": False})(typed)
            gate.impl = impl
            gate.__name__ = gate.__qualname__ = py_func.__name__
            gate.__doc__ = py_func.__doc__
            return gate
        return wrap
    return part


# helpers only rw sources and ports use: not compiled for a variant without rw sources ("stream")
_rw_part = _variant_part(lambda v: VARIANT_CF[v, CF_NRW] != 0)
# helpers of the deep-window scan order (`_ordered_scan`), which read DeepState's fields (archsim/engine/state.py)
_deep_part = _variant_part(lambda v: ORDERED_SCAN[v])


@_helper
def _cf(V, CF, slot):
    """Controller field `slot`: the variant's constant where it fixes one, else CF[slot]. V: the state's
    `variant` array (S.variant), not the state itself: a call passes its argument by value, and the whole state
    is ~1,000 machine words to copy, and for LLVM to optimise away again at every call (cold compile)."""
    v = _variant(V)
    if v > 0 and VARIANT_CF[v, slot] >= 0:
        return VARIANT_CF[v, slot]
    return CF[slot]


@_helper
def _ordered_scan(V):
    """Whether the rw scan keeps each queue's banks in candidate age order, column and row commands apart
    (`_ord_update`), and stops at the first ready one of each (`_rw_cands_ordered`): only in a variant that fixes a
    deep request window (pim_dual_deep, pim_blocked_deep: their state is a DeepState). A compile-time constant, so
    the other variants carry neither the order nor its upkeep (nor its state fields: `_deep_part`). V: the state's
    `variant` array."""
    return ORDERED_SCAN[_variant(V)]


@_helper
def _is_rw(S, ch, s):
    """Source s of channel ch is an rw source (not a stream)."""
    v = _variant(S)
    if v > 0 and VARIANT_CF[v, CF_NST] == 0:
        return True
    if v > 0 and VARIANT_CF[v, CF_NRW] == 0:
        return False
    return S.src_kind[ch, s] == 0


# The kernel's state: the namedtuple of arrays declared field by field (dtype, shape, fill, role) in
# archsim/engine/state.py, which also derives the field groups the Python side works on (CACHE_FIELDS: the
# fields that only cache answers; code that writes a channel's timing, rows or pins from outside the kernel
# must invalidate them, `state.invalidate_caches`, and tests comparing two runs' states skip them).
State = state.State
CACHE_FIELDS = state.CACHE_FIELDS


# ---------------------------------------------------------------------------------------------------------
@_helper
def _earliest(S, T, ch, c, b):
    """Earliest cycle command c may issue to the target of c holding local bank b (timing only)."""
    t = np.int64(0)
    for k in range(T.K):
        v = S.ready[ch, T.rcell[c, b, k] + c]
        if v > t:
            t = v
    return t


@_helper
def _earliest_coarse(S, T, ch, c, b, hi):
    """The latest of the first `hi` cells command c reads at the target holding local bank b (the coarsest cells
    come first): a lower bound of `_earliest`."""
    t = np.int64(0)
    for k in range(hi):
        v = S.ready[ch, T.rcell[c, b, k] + c]
        if v > t:
            t = v
    return t


@_helper
def _ref_blocked(S, T, CF, ch, c, bl):
    """True if command c at the target holding local bank bl touches a bank whose refresh is pending."""
    if S.ch_ref_pending[ch] == 0:
        return False
    B = T.banks
    r = T.rep[c, bl]
    k0 = T.tgt_off[c * B + r]
    k1 = T.tgt_off[c * B + r + 1]
    for k in range(k0, k1):
        x = T.tgt_banks[k]
        node = ch * T.ref_nodes + T.bank_ref_node[x]
        if S.ref_pending[node] != 0:
            if CF[CF_REFRESH] != REFRESH_PERBANK:      # all-bank refresh or RFM (never with per-bank refresh)
                return True
            lo = T.ref_off[T.bank_ref_node[x]]
            if T.ref_banks[lo + S.ref_bank[node]] == x:
                return True
    return False


@_helper
def _mark_dirty(S, ch, b):
    if not S.dirty[b]:
        S.dirty[b] = True
        S.dirty_list[ch, S.dirty_n[ch]] = b
        S.dirty_n[ch] += 1


@_call
def _issue(S, T, CF, ch, c, bl, row, col, src, clk):
    """Issue command c at the target holding local bank bl of channel ch at cycle clk: timing state, bank
    state, observers. row/col: the request's or stream command's (-1 unknown); src: source index in the
    channel (-1 = refresh manager), stream sources have src_kind 1."""
    B = T.banks
    gb0 = ch * B
    # --- timing (forward form, archsim.engine.tables)
    k = c * B + bl
    for u in range(T.upd_off[k], T.upd_off[k + 1]):
        v = clk + T.upd_lat[u]
        x = T.upd_idx[u]
        if v > S.ready[ch, x]:
            S.ready[ch, x] = v
    for u in range(T.win_off[k], T.win_off[k + 1]):
        wid = T.win_wid[u]
        node = T.win_node[u]
        w = T.win_w[wid]
        pos = S.hist_pos[ch, wid, node]
        S.hist[ch, wid, node, pos] = clk
        pos += 1
        if pos == w:
            pos = 0
        S.hist_pos[ch, wid, node] = pos
        v = S.hist[ch, wid, node, pos] + T.win_lat[wid]
        j = wid * T.n_win_nodes + node
        for uu in range(T.wcov_off[j], T.wcov_off[j + 1]):
            x = T.wcov_idx[uu]
            if v > S.ready[ch, x]:
                S.ready[ch, x] = v
    # --- bank state
    eff = T.cmd_effect[c]
    r = T.rep[c, bl]
    logged_row = _issue_bank_state(S, T, CF, ch, c, r, row, src, clk)
    # --- observers
    _observe(S, CF, B, ch, c, gb0 + r, logged_row, col, src, clk)
    return eff


@_inl
def _issue_bank_state(S, T, CF, ch, c, r, row, src, clk):
    """The bank state command c changes at its target (representative bank r of channel ch) issued at clk: open
    rows, owners, the rw queues' hits, the activate counts (rfm_threshold), the precharged-time observer.
    Returns the row the log records."""
    B = T.banks
    gb0 = ch * B
    eff = T.cmd_effect[c]
    buf = T.cmd_buf[c]
    k0 = T.tgt_off[c * B + r]
    k1 = T.tgt_off[c * B + r + 1]
    logged_row = row
    if eff == E_OPEN or eff == E_CLOSE or eff == E_READ_CLOSE or eff == E_WRITE_CLOSE or eff == E_UPDATE_CLOSE:
        S.ch_rows_epoch[ch] += 1
    if eff == E_OPEN:
        is_stream = src >= 0 and not _is_rw(S, ch, src)
        n_rw = _cf(S.variant, CF, CF_NRW)
        for kk in range(k0, k1):
            x = gb0 + T.tgt_banks[kk]
            S.open_row[x, buf] = row if row >= 0 else -2
            S.owner[x, buf] = src
            if is_stream:
                S.last_open_cmd[x, buf] = c
                S.last_open_tgt[x, buf] = gb0 + r
                S.last_open_row[x, buf] = row
            g = ch * T.ref_nodes + T.bank_ref_node[T.tgt_banks[kk]]
            if S.n_open[g] == 0:
                _node_busy_from(S, g, clk, 0)
                S.pre_since[g] = -1
            S.n_open[g] += 1
            if buf == 0:
                if _cf(S.variant, CF, CF_HIT_CAP) > 0:
                    S.row_hits[x] = 0
                # queued requests that now hit the new row
                for q in range(2 * n_rw):
                    _recount_hits(S, x, q)
                _mark_dirty(S, ch, x)
        _count_activate(S, T, CF, ch, k0, k1, clk)
    elif eff == E_CLOSE or eff == E_READ_CLOSE or eff == E_WRITE_CLOSE or eff == E_UPDATE_CLOSE:
        if eff == E_CLOSE:
            logged_row = S.open_row[gb0 + T.tgt_banks[k0], buf] if k1 - k0 == 1 else -1
        n_rw = _cf(S.variant, CF, CF_NRW)
        for kk in range(k0, k1):
            x = gb0 + T.tgt_banks[kk]
            if S.open_row[x, buf] != -1:
                S.open_row[x, buf] = -1
                S.owner[x, buf] = -1
                g = ch * T.ref_nodes + T.bank_ref_node[T.tgt_banks[kk]]
                S.n_open[g] -= 1
                if S.n_open[g] == 0:
                    # precharged from now, or once a refresh of another of its banks (REFpb) has run
                    S.pre_since[g] = max(clk, S.refresh_until[g])
                if buf == 0:
                    if _cf(S.variant, CF, CF_HIT_CAP) > 0:
                        S.row_hits[x] = 0
                    for q in range(2 * n_rw):
                        S.hitq[x, q] = 0
                        S.first_hit[x, q] = -1
                    _mark_dirty(S, ch, x)
    elif eff == E_READ or eff == E_WRITE or eff == E_COMPUTE or eff == E_UPDATE:
        if logged_row < 0 and k1 - k0 == 1:
            logged_row = S.open_row[gb0 + T.tgt_banks[k0], buf]
        if buf == 0 and _cf(S.variant, CF, CF_HIT_CAP) > 0:
            _count_row_hit(S, T, ch, k0, k1)
    elif eff == E_REFRESH:
        # a refreshing bank keeps its node out of precharged standby for the refresh's cycles
        for kk in range(k0, k1):
            g = ch * T.ref_nodes + T.bank_ref_node[T.tgt_banks[kk]]
            if clk + T.cmd_busy[c] > S.refresh_until[g]:
                S.refresh_until[g] = clk + T.cmd_busy[c]
            if S.pre_since[g] >= 0:
                _node_busy_from(S, g, clk, T.cmd_busy[c])
    return logged_row


@_helper
def _node_busy_from(S, g, clk, busy):
    """Node g, every bank closed since pre_since[g], is busy from clk for `busy` cycles (a refresh) or until a
    bank closes again (busy 0: a row opens; the caller marks it): the precharged time up to clk is counted
    (pre_cycles, the per-state background's input) and the count resumes after the busy cycles."""
    if clk > S.pre_since[g]:
        S.pre_cycles[g] += clk - S.pre_since[g]
    if busy > 0 and clk + busy > S.pre_since[g]:
        S.pre_since[g] = clk + busy


@_helper
def _count_activate(S, T, CF, ch, k0, k1, clk):
    """rfm_threshold: a command opened a row in target banks tgt_banks[k0:k1] of channel ch; if that is one bank,
    it counts one activate of it, and once a bank has counted rfm_threshold, its refresh node (the rank) is due
    for an RFM, requested at clk (issued by the refresh step, 3.1), and the activate counts of the node's banks
    start again (Ramulator 2.1's RFMManager)."""
    if CF[CF_RFM_THRESH] <= 0 or k1 - k0 != 1:
        return
    b = T.tgt_banks[k0]
    x = ch * T.banks + b
    S.act_count[x] += 1
    if S.act_count[x] < CF[CF_RFM_THRESH]:
        return
    node = T.bank_ref_node[b]
    g = ch * T.ref_nodes + node
    for kk in range(T.ref_off[node], T.ref_off[node + 1]):
        S.act_count[ch * T.banks + T.ref_banks[kk]] = 0
    if (S.ref_pending[g] & REF_RFM) == 0:
        if S.ref_pending[g] == 0:
            S.ch_ref_pending[ch] += 1
        S.ref_pending[g] |= REF_RFM
        S.rfm_at[g] = clk


@_helper
def _count_row_hit(S, T, ch, k0, k1):
    """row_hit_cap: the open rows of buffer 0 at target banks tgt_banks[k0:k1] served one more column command;
    their banks' rw candidates may change (the cap reached)."""
    for kk in range(k0, k1):
        x = ch * T.banks + T.tgt_banks[kk]
        S.row_hits[x] += 1
        _mark_dirty(S, ch, x)


@_helper
def _observe(S, CF, B, ch, c, gbank, row, col, src, clk):
    """Observers of every issued command: per-command counters and the command log. The log is in (cycle,
    channel) order, each channel's commands in issue order; a run (`_stream_run`) logs a channel's commands
    ahead of the cycle the other channels are at, so an entry goes in before the entries of later cycles (and
    of higher channels in its cycle): without runs it is always the last, one comparison."""
    S.cmd_count[ch, c] += 1
    if CF[CF_LOG] != 0:
        n = S.n_log[0]
        j = n
        while j > 0 and (S.log_clk[j - 1] > clk or (S.log_clk[j - 1] == clk and S.log_bank[j - 1] // B > ch)):
            S.log_clk[j] = S.log_clk[j - 1]
            S.log_cmd[j] = S.log_cmd[j - 1]
            S.log_bank[j] = S.log_bank[j - 1]
            S.log_row[j] = S.log_row[j - 1]
            S.log_col[j] = S.log_col[j - 1]
            S.log_src[j] = S.log_src[j - 1]
            j -= 1
        S.log_clk[j] = clk
        S.log_cmd[j] = c
        S.log_bank[j] = gbank
        S.log_row[j] = row if row >= -1 else -1
        S.log_col[j] = col
        S.log_src[j] = src
        S.n_log[0] = n + 1


@_helper
def _progressed(S, clk):
    """Something issued or entered at clk: the last such cycle (progress[1], the stall check's) is the latest
    one, also when a run issued a channel's commands ahead of the cycle the other channels are at."""
    if clk > S.progress[1]:
        S.progress[1] = clk


@_helper
def _complete(S, tag, done, ident):
    """Record a completion; tagged ones stop advance() at their done cycle. A tag with a completion group
    (`MemorySystem.expect`) records one completion, when its last item completes, at the latest done cycle."""
    if tag >= 0 and tag < S.g_left.shape[0] and S.g_left[tag] > 0:
        if done > S.g_done[tag]:
            S.g_done[tag] = done
        S.g_left[tag] -= 1
        if S.g_left[tag] > 0:
            return
        done = S.g_done[tag]
        S.g_done[tag] = -1
        ident = -1
    if tag >= 0:
        n = S.n_comp[0]
        S.c_tag[n] = tag
        S.c_done[n] = done
        S.c_id[n] = ident
        S.n_comp[0] = n + 1
        if done < S.min_pending[0]:
            S.min_pending[0] = done


# ---------------------------------------------------------------------------------------------------------
@_helper
def _unlink(S, ri, b, q):
    nx = S.l_next[ri]
    pv = S.l_prev[ri]
    if pv >= 0:
        S.l_next[pv] = nx
    else:
        S.l_head[b, q] = nx
    if nx >= 0:
        S.l_prev[nx] = pv
    else:
        S.l_tail[b, q] = pv
    S.l_cnt[b, q] -= 1


@_call
def _recount_hits(S, b, q):
    row = S.open_row[b, 0]
    cnt = 0
    fh = -1
    j = S.l_head[b, q]
    while j >= 0:
        if S.r_row[j] == row:
            cnt += 1
            if fh < 0:
                fh = j
        j = S.l_next[j]
    S.hitq[b, q] = cnt
    S.first_hit[b, q] = fh


@_rw_part(_returns_none)
def _serve_request(S, T, CF, ch, k, ri, c, b, clk):
    """Column command c issued for request ri (rw source k of channel ch, global bank b)."""
    n_rw = _cf(S.variant, CF, CF_NRW)
    w = 1 if S.r_kind[ri] != KIND_READ else 0
    q = k * 2 + w
    eff = T.cmd_effect[c]
    if S.r_kind[ri] == KIND_RMW and eff == E_READ:
        # the RD of a read-modify-write without an update command: the request stays queued, pinned, until its WR
        S.r_phase[ri] = 1
        S.r_nb[ri] = clk + T.cmd_lat[c] + CF[CF_ALU]
        if S.r_pin[ri] == 0:              # (with active_buffer it is pinned since its ACT already)
            pk = ch * n_rw + k
            S.pin_list[pk, S.pin_n[pk]] = ri
            S.pin_n[pk] += 1
            S.bank_pin[b] += 1
            S.r_pin[ri] = 1
            S.ch_pin_epoch[ch] += 1
            if CF[CF_PIN_FREES] != 0:
                _free_entry(S, (ch * n_rw + k) * 2 + w, clk)
        _mark_dirty(S, ch, b)
        return
    # the request is served; its bank's candidate changes
    _mark_dirty(S, ch, b)
    done = clk + T.cmd_lat[c]
    S.r_done[ri] = done
    # a pinned request's entry was freed when it was pinned (pinned_leave_queue)
    freed = CF[CF_PIN_FREES] != 0 and S.r_pin[ri] != 0
    # unpin
    pk = ch * n_rw + k
    for j in range(S.pin_n[pk]):
        if S.pin_list[pk, j] == ri:
            S.pin_list[pk, j] = S.pin_list[pk, S.pin_n[pk] - 1]
            S.pin_n[pk] -= 1
            S.bank_pin[b] -= 1
            S.r_pin[ri] = 0
            S.ch_pin_epoch[ch] += 1
            break
    nx = S.l_next[ri]
    if eff != E_READ_CLOSE and eff != E_WRITE_CLOSE and eff != E_UPDATE_CLOSE:   # (closing: _issue cleared the hits)
        S.hitq[b, q] -= 1
        if S.hitq[b, q] == 0:
            S.first_hit[b, q] = -1
        elif S.first_hit[b, q] == ri:
            # the remaining hits are younger: the next one is further down the list (a pinned request
            # served out of order leaves the oldest hit where it is)
            orow = S.open_row[b, 0]
            j = nx
            while j >= 0 and S.r_row[j] != orow:
                j = S.l_next[j]
            S.first_hit[b, q] = j
    _unlink(S, ri, b, q)
    qi = (ch * n_rw + k) * 2 + w
    if S.l_cnt[b, q] == 0:
        p = S.act_pos[b, q]
        last = S.act_list[qi, S.act_n[qi] - 1]
        S.act_list[qi, p] = last
        S.act_pos[last, q] = p
        S.act_n[qi] -= 1
    S.outstanding[0] -= 1
    S.progress[0] += 1
    _complete(S, S.r_tag[ri], done, ri)
    if not freed:
        _free_entry(S, qi, clk)


@_call
def _free_entry(S, qi, clk):
    """One entry of queue qi is free (its request was served, or pinned under pinned_leave_queue): a port
    blocked on this queue may offer again next cycle."""
    S.qlen[qi] -= 1
    for p in range(S.p_block.shape[0]):
        if S.p_block[p] == qi:
            S.p_block[p] = -1
            if S.p_next[p] > clk + 1:
                S.p_next[p] = clk + 1


@_rw_part(_returns_inf)
def _offer(S, T, CF, clk):
    """Ports offer requests in order (head-of-line blocking), the first port rotating with the cycle (clk mod
    ports: no port has a fixed priority); returns the next cycle a port can offer."""
    nxt = INF
    B = T.banks
    n_rw = _cf(S.variant, CF, CF_NRW)
    n_ports = S.p_head.shape[0]
    first = clk % n_ports if n_ports > 0 else 0
    for pi in range(n_ports):
        p = first + pi
        if p >= n_ports:
            p -= n_ports
        if S.p_next[p] > clk:
            if S.p_next[p] < nxt:
                nxt = S.p_next[p]
            continue
        offered = 0
        while offered < S.p_width[p] and S.p_head[p] < S.p_tail[p]:
            ri = S.p_buf[p, S.p_head[p]]
            if S.r_arrive[ri] > clk:
                break
            ch = S.r_ch[ri]
            k = S.src_idx[ch, S.r_src[ri]]
            w = 1 if S.r_kind[ri] != KIND_READ else 0
            qi = (ch * n_rw + k) * 2 + w
            if S.qlen[qi] >= S.qcap[qi]:
                S.p_block[p] = qi
                break
            if ((_cf(S.variant, CF, CF_POSTED) != 0 or _cf(S.variant, CF, CF_MERGE_RD) != 0)
                    and _cq_accept(S, T, CF, ch, ri, w, clk)):
                S.p_head[p] += 1            # answered from (merged into) a waiting write or read: queued nowhere
                offered += 1
                _progressed(S, clk)
                continue
            b = S.r_bank[ri]
            q = k * 2 + w
            S.qlen[qi] += 1
            S.r_enq[ri] = clk
            S.r_seq[ri] = S.seq[ch]
            S.seq[ch] += 1
            changed = False
            tl = S.l_tail[b, q]
            S.l_prev[ri] = tl
            S.l_next[ri] = -1
            if tl >= 0:
                S.l_next[tl] = ri
            else:
                S.l_head[b, q] = ri
                S.act_pos[b, q] = S.act_n[qi]
                S.act_list[qi, S.act_n[qi]] = b
                S.act_n[qi] += 1
                changed = True
            S.l_tail[b, q] = ri
            S.l_cnt[b, q] += 1
            if S.open_row[b, 0] == S.r_row[ri]:
                S.hitq[b, q] += 1
                if S.first_hit[b, q] < 0:
                    S.first_hit[b, q] = ri
                changed = True
            if changed:
                _mark_dirty(S, ch, b)
            # wake the channel no earlier than the new request's own next command could issue (one rw
            # source: it cannot make another queued request issuable sooner, and when its bank's candidate
            # did not change (older requests of another row queued there) it cannot issue before that
            # candidate, which the wake already covers); otherwise now
            if S.wake[ch] > clk:
                if (_cf(S.variant, CF, CF_NSRC) != 1 or w != S.wmode[ch * n_rw + k] or S.ch_ref_pending[ch] != 0
                        or _cf(S.variant, CF, CF_CMDQ) != 0):
                    S.wake[ch] = clk
                elif changed:
                    orow = S.open_row[b, 0]
                    if orow == S.r_row[ri]:
                        c = _first_col(T, S.r_kind[ri])
                    elif orow == -1:
                        c = T.role[R_ACT]
                    else:
                        c = T.role[R_PRE]
                    t = max(clk, _earliest(S, T, ch, c, b - ch * B))
                    if t < S.wake[ch]:
                        S.wake[ch] = t
            S.p_head[p] += 1
            offered += 1
            _progressed(S, clk)
        if S.p_head[p] < S.p_tail[p] and S.p_block[p] < 0:
            nx = max(clk + 1, S.r_arrive[S.p_buf[p, S.p_head[p]]])
            S.p_next[p] = nx
            if nx < nxt:
                nxt = nx
        else:
            S.p_next[p] = INF
    return nxt


# ---------------------------------------------------------------------------------------------------------
@_call
def _refresh_want(S, T, CF, ch, node):
    """(command, local bank) the refresh of `node` wants next, or (-1, x) with x = 1 if a pinned bank
    holds it up."""
    B = T.banks
    nbuf = _cf(S.variant, CF, CF_NBUF)
    lo = T.ref_off[node]
    hi = T.ref_off[node + 1]
    g = ch * T.ref_nodes + node
    if CF[CF_REFRESH] != REFRESH_PERBANK:      # all-bank refresh, or an RFM (under all-bank refresh or none)
        if S.n_open[g] > 0:
            for buf in range(nbuf):
                first = -1
                for kk in range(lo, hi):
                    x = ch * B + T.ref_banks[kk]
                    if S.open_row[x, buf] != -1:
                        first = T.ref_banks[kk]
                        break
                if first < 0:
                    continue
                # the widest close of this buffer whose target covers the node, else the bank's own close
                c = T.close_bank[buf]
                cb = first
                for lv in range(T.n_levels):
                    cw = T.close_wide[buf, lv]
                    if cw >= 0 and lv <= T.ref_level:
                        c = cw
                        cb = T.ref_banks[lo]
                        break
                # it waits while a pinned request holds any bank it closes (the target may be wider than
                # the node: a channel-wide close for a pseudochannel's refresh)
                rr = T.rep[c, cb]
                for kk in range(T.tgt_off[c * B + rr], T.tgt_off[c * B + rr + 1]):
                    if S.bank_pin[ch * B + T.tgt_banks[kk]] > 0:
                        return -1, 1
                return c, cb
        return T.role[_ref_final(S, g)], T.ref_banks[lo]
    b = T.ref_banks[lo + S.ref_bank[g]]
    for buf in range(nbuf):
        if S.open_row[ch * B + b, buf] != -1:
            if S.bank_pin[ch * B + b] > 0:
                return -1, 1
            return T.close_bank[buf], b
    return T.role[R_REFPB], b


@_helper
def _first_col(T, kind):
    """The plain column command a hit of this kind issues first: RD, WR, or for an rmw the standard's update
    command (RD when it has none). A lower bound of the hit's closing form (tables.py checks)."""
    if kind == KIND_WRITE:
        return T.role[R_WR]
    if kind == KIND_RMW and T.role[R_UPD] >= 0:
        return T.role[R_UPD]
    return T.role[R_RD]


@_helper
def _col_cmd(S, T, CF, k, ri, b):
    """The column command of hit ri (rw source k, global bank b): RD/WR, or with the closed policy the
    closing form if it is the bank's only hit in both queues of the source and no other request pins the
    bank; an rmw issues the standard's update command (UPD/UPDA) if it has one, else it reads first."""
    upd = S.r_kind[ri] == KIND_RMW and T.role[R_UPD] >= 0
    if S.r_kind[ri] == KIND_RMW and S.r_phase[ri] == 0 and not upd:
        return T.role[R_RD]
    w = S.r_kind[ri] != KIND_READ
    last = False
    if CF[CF_CLOSED_ROW] != 0 and S.hitq[b, 2 * k] + S.hitq[b, 2 * k + 1] <= 1:
        last = S.bank_pin[b] - S.r_pin[ri] == 0
    if upd:
        return T.role[R_UPDA] if last else T.role[R_UPD]
    if w:
        return T.role[R_WRA] if last else T.role[R_WR]
    return T.role[R_RDA] if last else T.role[R_RD]


@_call
def _bank_cand(S, T, CF, kq, ww, b):
    """(request, command) the bank stands for in queue (kq, ww): its oldest unpinned hit, else its oldest
    unpinned request (ACT or PRE); (-1, -1) if it has none. With row_hit_cap, once the open row has served
    that many column commands the oldest unpinned request, hit or not."""
    qq = kq * 2 + ww
    cap = _cf(S.variant, CF, CF_HIT_CAP)
    if S.hitq[b, qq] > 0 and (cap == 0 or S.row_hits[b] < cap):
        orow = S.open_row[b, 0]
        j = S.first_hit[b, qq]
        while j >= 0 and (S.r_row[j] != orow or S.r_pin[j] != 0):
            j = S.l_next[j]
        if j >= 0:
            return j, _col_cmd(S, T, CF, kq, j, b)
    j = S.l_head[b, qq]
    while j >= 0 and S.r_pin[j] != 0:
        j = S.l_next[j]
    if j < 0:
        return np.int64(-1), np.int64(-1)
    if S.open_row[b, 0] == S.r_row[j]:
        return j, _col_cmd(S, T, CF, kq, j, b)
    if S.open_row[b, 0] == -1:
        return j, T.role[R_ACT]
    return j, T.role[R_PRE]


@_rw_part(_returns_none)
def _rw_cands(S, T, CF, ch, k, clk, out):
    """FR-FCFS candidates of rw source k: out[0..3] = col (cmd, local bank, request), out[4..7] = row;
    out[8] = earliest cycle of a candidate not ready now. Requests absent: -1."""
    B = T.banks
    n_rw = _cf(S.variant, CF, CF_NRW)
    gb0 = ch * B
    pk = ch * n_rw + k
    nxt = INF
    out[0] = -1
    out[4] = -1
    me = _rw_src(S, ch, k)
    # pinned requests first, in either mode
    best = INF
    for j in range(S.pin_n[pk]):
        ri = S.pin_list[pk, j]
        b = S.r_bank[ri]
        bl = b - gb0
        c = _col_cmd(S, T, CF, k, ri, b)
        t = _earliest(S, T, ch, c, bl)
        if S.r_kind[ri] == KIND_RMW and S.r_phase[ri] == 1 and S.r_nb[ri] > t:
            t = S.r_nb[ri]
        if t <= clk:
            if S.r_seq[ri] < best:
                best = S.r_seq[ri]
                out[0] = c
                out[1] = bl
                out[2] = ri
                out[3] = S.r_seq[ri]
        elif t < nxt:
            nxt = t
    if out[0] >= 0:
        out[8] = nxt
        return
    w = S.wmode[pk]
    q = k * 2 + w
    qi = pk * 2 + w
    _update_dirty(S, T, CF, ch)
    if S.qlen[qi] == 0:
        out[8] = nxt
        return
    # The scan keeps its data-dependent choices out of branches (they mispredict): a candidate's key is
    # (age << KEY_SHIFT) | position in the active list, INF when it is blocked or not ready, and the oldest
    # ready column / row candidates are plain minima of keys (ages are distinct).
    best_col = INF
    best_row = INF
    ref_check = S.ch_ref_pending[ch] != 0
    c_pre = T.role[R_PRE]
    c_act = T.role[R_ACT]
    nbuf = _cf(S.variant, CF, CF_NBUF)
    ignore_reserve = _cf(S.variant, CF, CF_ARB) == ARB_BLOCKED or _cf(S.variant, CF, CF_RESERVE) == 0
    yields = _held_rows_yield(S, CF, ch, me)
    if _ordered_scan(S.variant):
        _rw_cands_ordered(S, T, CF, ch, q, qi, clk, out, nxt, ref_check, c_pre, c_act, me, ignore_reserve, nbuf,
                          yields)
        return
    coarse_first = CF[CF_COARSE_FIRST] != 0
    for kk in range(S.act_n[qi]):
        b = S.act_list[qi, kk]
        bl = b - gb0
        c = S.cand_cmd[q, b]
        if c < 0:
            continue
        tc = S.cand_t[q, b]
        if tc > clk:
            # not ready: its timing was found later than now and timing only moves later (a lower bound is
            # all the wake needs)
            nxt = min(nxt, tc)
            continue
        if ref_check:
            if _ref_blocked(S, T, CF, ch, c, bl):
                continue
        # the coarse cells first: a command issued since cand_t was found raises them for every bank it shares
        # them with (the column bus's spacing), so they alone mostly show the candidate is still not ready
        if coarse_first:
            t = _earliest_coarse(S, T, ch, c, bl, min(COARSE_CELLS, T.K))
            if t > clk:
                S.cand_t[q, b] = t
                nxt = min(nxt, t)
                continue
        blocked = _rw_blocked(S, ch, q, b, c, c_pre, c_act, me, ignore_reserve, nbuf, yields)
        t = _earliest(S, T, ch, c, bl)
        t = max(t, S.cand_nb[q, b])
        S.cand_t[q, b] = t
        t = INF if blocked else t
        nxt = min(nxt, t)
        key = (S.cand_seq[q, b] << KEY_SHIFT) | kk
        key = key if t <= clk else INF
        col = T.cmd_bus[c] == 1
        best_col = min(best_col, key if col else INF)
        best_row = min(best_row, INF if col else key)
    if best_col < INF:
        b = S.act_list[qi, best_col & KEY_MASK]
        out[0] = S.cand_cmd[q, b]
        out[1] = b - gb0
        out[2] = S.cand_ri[q, b]
        out[3] = best_col >> KEY_SHIFT
    if best_row < INF:
        b = S.act_list[qi, best_row & KEY_MASK]
        out[4] = S.cand_cmd[q, b]
        out[5] = b - gb0
        out[6] = S.cand_ri[q, b]
        out[7] = best_row >> KEY_SHIFT
    out[8] = nxt


@_deep_part(_returns_none)
def _rw_cands_ordered(S, T, CF, ch, q, qi, clk, out, nxt, ref_check, c_pre, c_act, me, ignore_reserve, nbuf, yields):
    """`_rw_cands`' bank scan under a deep window (`_ordered_scan`). The banks with a candidate are listed per
    group of banks that read the same coarse cells (S.coarse_group), oldest candidate first, column and row
    commands apart (`_ord_update`): the first ready bank of a list is the group's oldest ready one, and the oldest of those over
    the groups is the source's. The younger banks of a list stay unexamined: after a ready one (a step with a
    ready candidate issues, or wakes again next cycle: the wake needs no bound from them), and after a coarse-cell
    failure when every candidate of the list is that command (they read the very same cells: the same bound).
    out as `_rw_cands`; out[8] is then at most clk when a candidate is ready."""
    gb0 = ch * T.banks
    coarse = min(COARSE_CELLS, T.K)
    for cls in range(2):
        best = INF
        for g in range(S.ord_n.shape[2]):
            n = S.ord_n[qi, cls, g]
            for kk in range(n):
                b = S.ord_list[qi, cls, g, kk]
                bl = b - gb0
                c = S.cand_cmd[q, b]
                tc = S.cand_t[q, b]
                if tc > clk:
                    # not ready: its timing was found later than now and timing only moves later
                    nxt = min(nxt, tc)
                    continue
                if ref_check:
                    if _ref_blocked(S, T, CF, ch, c, bl):
                        continue
                t = _earliest_coarse(S, T, ch, c, bl, coarse)
                if t > clk:
                    S.cand_t[q, b] = t
                    nxt = min(nxt, t)
                    if S.ord_ncmd[qi, cls, g, c] == n:
                        break
                    continue
                t = max(_earliest(S, T, ch, c, bl), S.cand_nb[q, b])
                S.cand_t[q, b] = t
                if _rw_blocked(S, ch, q, b, c, c_pre, c_act, me, ignore_reserve, nbuf, yields):
                    continue
                nxt = min(nxt, t)
                if t <= clk:
                    if S.cand_seq[q, b] < best:
                        best = S.cand_seq[q, b]
                        o = cls * 4
                        out[o] = c
                        out[o + 1] = bl
                        out[o + 2] = S.cand_ri[q, b]
                        out[o + 3] = best
                    break
    out[8] = nxt


@_call
def _update_dirty(S, T, CF, ch):
    """Bring the rw candidates of the banks changed since the channel's last pass up to date (and, under
    `_ordered_scan`, the banks' places in the scan's age-ordered lists)."""
    n_rw = _cf(S.variant, CF, CF_NRW)
    for kk in range(S.dirty_n[ch]):
        b = S.dirty_list[ch, kk]
        S.dirty[b] = False
        for kq in range(n_rw):
            for ww in range(2):
                qq = kq * 2 + ww
                ri, c = _bank_cand(S, T, CF, kq, ww, b)
                if _ordered_scan(S.variant):
                    _ord_update(S, T, (ch * n_rw + kq) * 2 + ww, qq, b, ri, c)
                S.cand_ri[qq, b] = ri
                S.cand_cmd[qq, b] = c
                S.cand_t[qq, b] = 0
                if ri >= 0:
                    # the request's age and (rmw WR) not-before cycle, kept beside the candidate so the scan
                    # reads no per-request arrays (random accesses into the request pool)
                    S.cand_seq[qq, b] = S.r_seq[ri]
                    S.cand_nb[qq, b] = S.r_nb[ri] if S.r_kind[ri] == KIND_RMW and S.r_phase[ri] == 1 else 0
    S.dirty_n[ch] = 0


@_deep_part(_returns_none)
def _ord_update(S, T, qi, qq, b, ri, c):
    """Bank b's new candidate (request ri, command c; ri < 0 none) in queue qq of the bank, qi of the channel, in
    the scan's lists (`_rw_cands_ordered`), before the candidate fields take it: the bank moves when its
    candidate's bus or age changed; a new command alone (ACT -> PRE, RD -> RDA) only moves its list's count of
    commands."""
    cls = -1 if ri < 0 else (0 if T.cmd_bus[c] == 1 else 1)
    g = S.coarse_group[b % T.banks]
    old = S.ord_cls[qq, b]
    if old >= 0:
        if cls == old and S.r_seq[ri] == S.cand_seq[qq, b]:
            S.ord_ncmd[qi, cls, g, S.cand_cmd[qq, b]] -= 1
            S.ord_ncmd[qi, cls, g, c] += 1
            return
        # out of its list
        n = S.ord_n[qi, old, g]
        j = 0
        while S.ord_list[qi, old, g, j] != b:
            j += 1
        for i in range(j, n - 1):
            S.ord_list[qi, old, g, i] = S.ord_list[qi, old, g, i + 1]
        S.ord_n[qi, old, g] = n - 1
        S.ord_ncmd[qi, old, g, S.cand_cmd[qq, b]] -= 1
        S.ord_cls[qq, b] = -1
    if cls < 0:
        return
    # into list cls at its age, oldest first (a new candidate is mostly the youngest: the walk from the end is short)
    seq = S.r_seq[ri]
    j = S.ord_n[qi, cls, g]
    while j > 0 and S.cand_seq[qq, S.ord_list[qi, cls, g, j - 1]] > seq:
        S.ord_list[qi, cls, g, j] = S.ord_list[qi, cls, g, j - 1]
        j -= 1
    S.ord_list[qi, cls, g, j] = b
    S.ord_n[qi, cls, g] += 1
    S.ord_ncmd[qi, cls, g, c] += 1
    S.ord_cls[qq, b] = cls


@_helper
def _held_rows_yield(S, CF, ch, me):
    """Whether source `me` may precharge rows that held-back sources opened this step: `threshold_yield`, the
    first source, and the gate closed (S.held[ch, s] marks the sources it holds back)."""
    return _cf(S.variant, CF, CF_ARB) == ARB_THRESHOLD_YIELD and me == 0


@_helper
def _rw_blocked(S, ch, q, b, c, c_pre, c_act, me, ignore_reserve, nbuf, yields):
    """Whether bank b's candidate c (queue q) may not issue for a reason other than timing: a PRE of a bank
    pinned or whose row another source opened (unless `yields`, _held_rows_yield, and the gate holds that
    source back); an ACT of a reserved bank or of a row open in another buffer. (Under `blocked` only the
    active source issues: a reservation would only hold the active rw source back for an inactive stream, so
    blocked arbitration ignores reservations.)"""
    own = S.owner[b, 0]
    others = (own != -1) & (own != me)
    if others and yields:
        others = S.held[ch, own] == 0
    blocked = ((c == c_pre) & ((S.bank_pin[b] > 0) | others)) | (
        (c == c_act) & (S.reserve[b] > 0) & (not ignore_reserve))
    if nbuf > 1 and c == c_act and not blocked:
        row = S.r_row[S.cand_ri[q, b]]
        for bb in range(1, nbuf):
            if S.open_row[b, bb] == row:
                blocked = True
    return blocked


@_rw_part(_returns_true)
def _rw_row_after_col(S, T, CF, ch, k, clk, out):
    """Row-bus candidate of rw source k after its own column command issued this cycle, without a rescan:
    only the served bank's candidate changed, and every other candidate's timing can only have moved later
    (the caller rules out changes of rows, pins and reservations). out[4..7] as _rw_cands. Returns False
    if a full rescan is needed (the row candidate found before is no longer ready, or pinned requests)."""
    n_rw = _cf(S.variant, CF, CF_NRW)
    pk = ch * n_rw + k
    if S.pin_n[pk] > 0:
        return False
    if out[4] >= 0 and _earliest(S, T, ch, out[4], out[5]) > clk:
        return False
    w = S.wmode[pk]
    q = k * 2 + w
    qi = pk * 2 + w
    b = ch * T.banks + out[1]                  # the served bank (the column candidate that issued)
    _update_dirty(S, T, CF, ch)
    if S.qlen[qi] == 0:
        out[4] = -1
        return True
    c = S.cand_cmd[q, b]
    if c < 0 or T.cmd_bus[c] == 1:
        return True
    if S.ch_ref_pending[ch] != 0 and _ref_blocked(S, T, CF, ch, c, out[1]):
        return True
    me = _rw_src(S, ch, k)
    if _rw_blocked(S, ch, q, b, c, T.role[R_PRE], T.role[R_ACT], me,
                   _cf(S.variant, CF, CF_ARB) == ARB_BLOCKED or _cf(S.variant, CF, CF_RESERVE) == 0,
                   _cf(S.variant, CF, CF_NBUF), _held_rows_yield(S, CF, ch, me)):
        return True
    if max(_earliest(S, T, ch, c, out[1]), S.cand_nb[q, b]) > clk:
        return True
    if out[4] < 0 or S.cand_seq[q, b] < out[7]:
        out[4] = c
        out[5] = out[1]
        out[6] = S.cand_ri[q, b]
        out[7] = S.cand_seq[q, b]
    return True


@_helper
def _rw_src(S, ch, k):
    """Source index (in the channel) of rw source k."""
    n = 0
    for s in range(S.src_kind.shape[1]):
        if _is_rw(S, ch, s):
            if n == k:
                return s
            n += 1
    return -1


@_call
def _open_rule(S, T, ch, c, bl, row, nbuf):
    """An open c (at the target holding local bank bl) of `row`, or the close that must come first:
    (command, local bank)."""
    B = T.banks
    gb0 = ch * B
    buf = T.cmd_buf[c]
    r = T.rep[c, bl]
    k0 = T.tgt_off[c * B + r]
    k1 = T.tgt_off[c * B + r + 1]
    if row >= 0 and nbuf > 1:
        for kk in range(k0, k1):
            x = gb0 + T.tgt_banks[kk]
            for bb in range(nbuf):
                if bb != buf and S.open_row[x, bb] == row:
                    return T.close_bank[bb], T.tgt_banks[kk]
    for kk in range(k0, k1):
        x = gb0 + T.tgt_banks[kk]
        if S.open_row[x, buf] != -1:
            cw = T.close_wide[buf, T.cmd_scope[c]]
            if cw >= 0:
                return cw, bl
            return T.close_bank[buf], T.tgt_banks[kk]
    return c, bl


@_call
def _stream_cand(S, T, CF, ch, m, src, clk, out):
    """Candidate of stream m: out[0] cmd (-1 none), out[1] local bank, out[2] row, out[3] age,
    out[8] earliest cycle if not ready now (INF if held)."""
    B = T.banks
    gb0 = ch * B
    sl = ch * _cf(S.variant, CF, CF_NST) + m
    out[0] = -1
    out[8] = INF
    h = S.s_head[sl]
    if h >= S.s_in[sl]:
        return
    H = S.s_cmd[sl, h]
    bl = S.s_bank[sl, h] - gb0
    eff = T.cmd_effect[H]
    buf = T.cmd_buf[H]
    r = T.rep[H, bl]
    k0 = T.tgt_off[H * B + r]
    k1 = T.tgt_off[H * B + r + 1]
    nbuf = _cf(S.variant, CF, CF_NBUF)
    hrow = S.s_row[sl, h]
    c = H
    cb = bl
    crow = hrow
    if eff == E_OPEN:
        c, cb = _open_rule(S, T, ch, H, bl, hrow, nbuf)
    elif (eff == E_COMPUTE or eff == E_READ or eff == E_WRITE or eff == E_READ_CLOSE or eff == E_WRITE_CLOSE
          or eff == E_UPDATE or eff == E_UPDATE_CLOSE) and not (
            S.s_ok_epoch[sl] == S.ch_rows_epoch[ch] and S.s_ok_tgt[sl] == H * B + r and S.s_ok_row[sl] == hrow):
        # (skipped when no row buffer of the channel changed since these rows were last found open)
        lost = False
        for kk in range(k0, k1):
            x = gb0 + T.tgt_banks[kk]
            orow = S.open_row[x, buf]
            if orow == -1 or (hrow >= 0 and orow != hrow):
                # lost (refresh or another source closed it): restore the stream's last open covering it
                rc = S.last_open_cmd[x, buf]
                if rc < 0:
                    return            # malformed stream: nothing opened this row before
                rb = S.last_open_tgt[x, buf] - gb0
                crow = S.last_open_row[x, buf]
                c, cb = _open_rule(S, T, ch, rc, rb, crow, nbuf)
                lost = True
                break
        if not lost:
            S.s_ok_epoch[sl] = S.ch_rows_epoch[ch]
            S.s_ok_tgt[sl] = H * B + r
            S.s_ok_row[sl] = hrow
    if c != H and T.cmd_effect[c] == E_CLOSE:
        crow = -1
    # a close on a pinned bank waits
    ce = T.cmd_effect[c]
    if ce == E_CLOSE or ce == E_READ_CLOSE or ce == E_WRITE_CLOSE or ce == E_UPDATE_CLOSE:
        rr = T.rep[c, cb]
        for kk in range(T.tgt_off[c * B + rr], T.tgt_off[c * B + rr + 1]):
            if S.bank_pin[gb0 + T.tgt_banks[kk]] > 0:
                return
    if _ref_blocked(S, T, CF, ch, c, cb):
        return
    t = _earliest(S, T, ch, c, cb)
    # refresh admission of a segment that would cross a refresh: the stream holds (no candidate at all)
    if CF[CF_STREAM_REF] == 1 and CF[CF_REFRESH] != REFRESH_NONE and (S.s_flags[sl, h] & SEG_START) != 0:
        est = S.s_est[sl, h]
        if CF[CF_REFRESH] == REFRESH_ALLBANK:
            split = CF[CF_NREFI] - CF[CF_NRFC]
        else:
            split = CF[CF_NREFIPB] - CF[CF_NRFCPB]
        if 0 < est <= split:
            for kk in range(k0, k1):
                node = ch * T.ref_nodes + T.bank_ref_node[T.tgt_banks[kk]]
                if clk + est > S.ref_due[node]:      # (a pending refresh's due has passed: held too)
                    return   # held until this refresh has issued (its issue wakes the channel)
    out[0] = c
    out[1] = cb
    out[2] = crow
    out[3] = S.s_seq[sl, h]
    out[8] = t


@_helper
def _stream_head_changed(S, T, CF, ch, m, delta):
    """Reserve (delta=+1) or release (-1) the banks of stream m's head if it is an open."""
    sl = ch * _cf(S.variant, CF, CF_NST) + m
    h = S.s_head[sl]
    if h >= S.s_in[sl]:
        return
    H = S.s_cmd[sl, h]
    if T.cmd_effect[H] != E_OPEN:
        return
    B = T.banks
    bl = S.s_bank[sl, h] - ch * B
    r = T.rep[H, bl]
    for kk in range(T.tgt_off[H * B + r], T.tgt_off[H * B + r + 1]):
        S.reserve[ch * B + T.tgt_banks[kk]] += delta
        S.ch_pin_epoch[ch] += 1


@_helper
def _has_work(S, CF, ch, s):
    k = S.src_idx[ch, s]
    if _is_rw(S, ch, s):
        n_rw = _cf(S.variant, CF, CF_NRW)
        pk = ch * n_rw + k
        return S.qlen[pk * 2] + S.qlen[pk * 2 + 1] + S.pin_n[pk] > 0
    sl = ch * _cf(S.variant, CF, CF_NST) + k
    return S.s_head[sl] < S.s_in[sl]


@_helper
def _at_boundary(S, CF, ch, s):
    if not _has_work(S, CF, ch, s):
        return True
    if not _is_rw(S, ch, s):
        return S.s_lastend[ch * _cf(S.variant, CF, CF_NST) + S.src_idx[ch, s]] != 0
    return False


# ---------------------------------------------------------------------------------------------------------
@_inl
def _cands(S, T, CF, ch, clk, cand):
    """Every source's ready candidates into cand[s] (columns: 0-3 column bus, 4-7 row bus: command, local
    bank, request or row, age); cand[s, 8] = earliest cycle of a candidate not ready now. Returns the min."""
    nxt = INF
    for s in range(_cf(S.variant, CF, CF_NSRC)):
        o = cand[s]
        _source_cands(S, T, CF, ch, s, clk, o)
        if o[8] < nxt:
            nxt = o[8]
    return nxt


@_inl
def _source_cands(S, T, CF, ch, s, clk, o):
    """Source s's ready candidates into o (as _cands)."""
    if _is_rw(S, ch, s):
        _rw_cands(S, T, CF, ch, S.src_idx[ch, s], clk, o)
    else:
        _stream_cand(S, T, CF, ch, S.src_idx[ch, s], s, clk, o)
        o[4] = -1
        if o[0] >= 0:
            if o[8] > clk:
                o[0] = -1
            elif T.cmd_bus[o[0]] == 0:            # a row-bus command goes in the row slots
                o[4] = o[0]
                o[5] = o[1]
                o[6] = o[2]
                o[7] = o[3]
                o[0] = -1


@_inl
def _cands_after_col(S, T, CF, ch, clk, cand, win, rows0, pins0):
    """The row-bus candidates after source `win` issued on the column bus this cycle (dual command bus):
    what a full _cands would give, recomputing only what the column command can have changed. Timing only
    moves later, so when no row buffer, pin or reservation changed, another source's row candidate that is
    still ready is still its oldest ready one, and one that had none still has none; the winner's own
    candidates changed (a stream's head moved; an rw source served one bank)."""
    structural = S.ch_rows_epoch[ch] != rows0 or S.ch_pin_epoch[ch] != pins0
    nxt = INF
    for s in range(_cf(S.variant, CF, CF_NSRC)):
        o = cand[s]
        full = structural
        if not full:
            if s == win:
                full = not _is_rw(S, ch, s) or not _rw_row_after_col(S, T, CF, ch, S.src_idx[ch, s], clk, o)
            elif _is_rw(S, ch, s) and S.pin_n[ch * _cf(S.variant, CF, CF_NRW) + S.src_idx[ch, s]] > 0:
                full = True       # its ready pinned request may no longer be ready, and it hid row candidates
            elif o[4] >= 0:
                full = _earliest(S, T, ch, o[4], o[5]) > clk
        if full:
            _source_cands(S, T, CF, ch, s, clk, o)
        if o[8] < nxt:
            nxt = o[8]
    return nxt


# The command bus _arbitrate picks for: the column or the row bus of a dual command bus, or the single one. numpy
# integers, not literals: numba compiles _arbitrate once for the three (LLVM folds the constant after inlining).
BUS_COL, BUS_ROW, BUS_SINGLE = np.int64(0), np.int64(1), np.int64(2)


@_call
def _arbitrate(S, CF, ch, cand, bus, promoted, gate):
    """Winner of a bus among the ready candidates: (source, slot 0 column / 4 row) or (-1, 0).
    bus: BUS_COL, BUS_ROW or BUS_SINGLE."""
    nsrc = _cf(S.variant, CF, CF_NSRC)
    arb = _cf(S.variant, CF, CF_ARB)
    if arb == ARB_FRFCFS:
        best = INF
        win = -1
        slot = 0
        if bus != 1:
            for s in range(nsrc):
                if cand[s, 0] >= 0 and cand[s, 3] < best:
                    best = cand[s, 3]
                    win = s
            if win >= 0 or bus == 0:
                return win, 0
        for s in range(nsrc):
            if cand[s, 4] >= 0 and cand[s, 7] < best:
                best = cand[s, 7]
                win = s
                slot = 4
        return win, slot
    for pass_ in range(2):
        for s in range(nsrc):
            if (promoted[s] != 0) != (pass_ == 0):
                continue
            if arb == ARB_BLOCKED and s != S.active[ch]:
                continue
            if arb >= ARB_THRESHOLD and s != 0 and gate == 0 and promoted[s] == 0:
                if arb == ARB_THRESHOLD_ROW and bus != 1 and cand[s, 0] >= 0:
                    return s, 0
                continue
            if bus != 1 and cand[s, 0] >= 0:
                return s, 0
            if bus != 0 and cand[s, 4] >= 0:
                return s, 4
    return -1, 0


@_call
def _request_command(r_class, r_col, role, cmd_bus, c, ri):
    """Request ri's command c is about to issue (from an rw source or DRAMsim3's command queue): note what its row
    cost it (r_class: an ACT makes it at least a miss, a PRE a conflict) and return the command's column argument
    (the request's column for a column command, -1 for a row command). Takes the arrays it needs, not the state:
    a call passes its arguments by value."""
    if c == role[R_ACT]:
        if r_class[ri] < 1:
            r_class[ri] = 1
    elif c == role[R_PRE]:
        r_class[ri] = 2
    return r_col[ri] if cmd_bus[c] == 1 else np.int64(-1)


@_inl
def _issue_pick(S, T, CF, ch, s, slot, clk):
    """Issue source s's candidate in `slot` (0 column, 4 row)."""
    B = T.banks
    n_rw = _cf(S.variant, CF, CF_NRW)
    o = S.cand[s]
    c = o[slot]
    bl = o[slot + 1]
    ri = o[slot + 2]
    if _is_rw(S, ch, s):
        _progressed(S, clk)
        k = S.src_idx[ch, s]
        b = ch * B + bl
        col = _request_command(S.r_class, S.r_col, T.role, T.cmd_bus, c, ri)
        eff = _issue(S, T, CF, ch, c, bl, S.r_row[ri], col, s, clk)
        if eff == E_OPEN:
            if _cf(S.variant, CF, CF_ACTIVE_BUF) != 0:
                pk = ch * n_rw + k
                S.pin_list[pk, S.pin_n[pk]] = ri
                S.pin_n[pk] += 1
                S.bank_pin[b] += 1
                S.r_pin[ri] = 1
                S.ch_pin_epoch[ch] += 1
                if CF[CF_PIN_FREES] != 0:
                    _free_entry(S, pk * 2 + (1 if S.r_kind[ri] != KIND_READ else 0), clk)
        elif T.cmd_bus[c] == 1:
            _serve_request(S, T, CF, ch, k, ri, c, b, clk)
        return
    m = S.src_idx[ch, s]
    sl = ch * _cf(S.variant, CF, CF_NST) + m
    h = S.s_head[sl]
    H = S.s_cmd[sl, h]
    _progressed(S, clk)
    done = clk + T.cmd_lat[c]
    if done > S.s_maxdone[sl]:
        S.s_maxdone[sl] = done
    if c == H and bl == S.s_bank[sl, h] - ch * B:
        _stream_head_changed(S, T, CF, ch, m, np.int64(-1))
        _issue(S, T, CF, ch, c, bl, S.s_row[sl, h], S.s_col[sl, h], s, clk)
        _complete(S, S.s_tag[sl, h], done, -1 - h)
        S.s_lastend[sl] = 1 if (S.s_flags[sl, h] & SEG_END) != 0 else 0
        S.s_head[sl] = h + 1
        S.outstanding[0] -= 1
        _stream_head_changed(S, T, CF, ch, m, np.int64(1))
    else:
        # a prerequisite: a close, or the restore of the stream's row (ri = its row)
        _issue(S, T, CF, ch, c, bl, ri, np.int64(-1), s, clk)
        S.s_lastend[sl] = 0


# ---------------------------------------------------------------------------------------------------------
# bank_command_queue (DRAMsim3's two-level queues, docs/channel-engine.md 3.6): one rw source whose read and
# write queues are a transaction queue and a write buffer in front of a command queue per bank. Each step
# issues the first ready command of the bank queues visited round robin, then moves at most one transaction.
# Its step and the helpers it calls once or more per step are inlined at numba's IR level (`_inl`): as
# out-of-line calls each one passed the whole state (~1,000 machine words) at every call.
@_inl
def _cq_hit_queued(S, b, orow):
    """Some request in bank b's command queue is to the open row orow."""
    for pos in range(S.cq_n[b]):
        if S.r_row[S.cq_req[b, pos]] == orow:
            return True
    return False


@_inl
def _cq_read_before(S, b, pos, ri):
    """A read of write ri's address is ahead of it (before position pos) in bank b's command queue."""
    for j in range(pos):
        x = S.cq_req[b, j]
        if S.r_kind[x] == KIND_READ and S.r_row[x] == S.r_row[ri] and S.r_col[x] == S.r_col[ri]:
            return True
    return False


@_inl
def _cq_find(S, b, q, kind, ri):
    """A request of `kind` to ri's address (bank b, row, column) waiting in bank b's transaction list q or in its
    command queue (not yet issued): the oldest in the list, else the first in the queue; -1 none."""
    j = S.l_head[b, q]
    while j >= 0:
        if S.r_row[j] == S.r_row[ri] and S.r_col[j] == S.r_col[ri]:
            return j
        j = S.l_next[j]
    for pos in range(S.cq_n[b]):
        x = S.cq_req[b, pos]
        if S.r_kind[x] == kind and S.r_row[x] == S.r_row[ri] and S.r_col[x] == S.r_col[ri]:
            return x
    return np.int64(-1)


@_inl
def _cq_queue_cmd(S, T, CF, ch, bl, clk):
    """The first command of local bank bl's command queue whose timing is met at clk, in queue order:
    (command, position), or (-1, earliest cycle of one of them). A request to the open row gives its column
    command, one to a closed bank an ACT; a PRE only for the queue's first request, and only if no queued
    request hits the open row or the row has served row_hit_cap column commands; a write waits behind a read
    of its address. Each kind of command has one earliest cycle for the bank: computed once per call."""
    b = ch * T.banks + bl
    orow = S.open_row[b, 0]
    if orow == -1 and S.cq_n[b] > 0:
        # a closed bank: every request of its queue gives the same ACT, so the first one decides
        c = T.role[R_ACT]
        t = _earliest(S, T, ch, c, bl)
        if t <= clk:
            return c, np.int64(0)
        return np.int64(-1), t
    cap = CF[CF_HIT_CAP]
    tmin = INF
    t_rd = np.int64(-1)
    t_wr = np.int64(-1)
    for pos in range(S.cq_n[b]):
        ri = S.cq_req[b, pos]
        if orow == S.r_row[ri]:
            if S.r_kind[ri] == KIND_WRITE:
                if _cq_read_before(S, b, pos, ri):
                    continue
                c = T.role[R_WR]
                if t_wr < 0:
                    t_wr = _earliest(S, T, ch, c, bl)
                t = t_wr
            else:
                c = T.role[R_RD]
                if t_rd < 0:
                    t_rd = _earliest(S, T, ch, c, bl)
                t = t_rd
        else:
            if pos > 0 or (not (cap > 0 and S.row_hits[b] >= cap) and _cq_hit_queued(S, b, orow)):
                continue
            c = T.role[R_PRE]
            t = _earliest(S, T, ch, c, bl)
        if t <= clk:
            return c, np.int64(pos)
        tmin = min(tmin, t)
    return np.int64(-1), tmin


@_inl
def _cq_pick(S, T, CF, ch, clk):
    """The command the bank queues offer at clk: visited round robin from the one after cq_rr (queues of
    banks whose refresh is pending skipped), the first ready command of the first queue that has one.
    Returns (command, local bank, position, earliest cycle of a command not ready); command -1: none."""
    B = T.banks
    rr = S.cq_rr[ch]
    tmin = INF
    ref_check = S.ch_ref_pending[ch] != 0
    for i in range(B):
        bl = rr + 1 + i
        if bl >= B:
            bl -= B
        if S.cq_n[ch * B + bl] == 0:
            continue
        if ref_check and _ref_blocked(S, T, CF, ch, T.role[R_ACT], bl):
            continue
        # (the queue's earliest cycle found before, unchanged since but for timing cells that only rise: a
        # lower bound, so a queue it puts after clk has no ready command)
        t = S.cq_t[ch * B + bl]
        if t > clk:
            tmin = min(tmin, t)
            continue
        c, x = _cq_queue_cmd(S, T, CF, ch, bl, clk)
        if c >= 0:
            return c, np.int64(bl), x, tmin
        S.cq_t[ch * B + bl] = x
        tmin = min(tmin, x)
    return np.int64(-1), np.int64(-1), np.int64(-1), tmin


@_inl
def _cq_issue(S, T, CF, ch, c, bl, pos, clk):
    """Issue command c for the request at position pos of local bank bl's command queue. A column command
    serves the request (it leaves the queue); a posted write was acknowledged when it was accepted."""
    b = ch * T.banks + bl
    ri = S.cq_req[b, pos]
    S.cq_rr[ch] = bl
    _progressed(S, clk)
    col = _request_command(S.r_class, S.r_col, T.role, T.cmd_bus, c, ri)
    _issue(S, T, CF, ch, c, bl, S.r_row[ri], col, _rw_src(S, ch, 0), clk)
    # the queues of the banks it changed (rows, row hits, this queue) no longer have their earliest cycle found
    r = T.rep[c, bl]
    for k in range(T.tgt_off[c * T.banks + r], T.tgt_off[c * T.banks + r + 1]):
        S.cq_t[ch * T.banks + T.tgt_banks[k]] = 0
    if T.cmd_bus[c] != 1:
        return
    for j in range(pos, S.cq_n[b] - 1):
        S.cq_req[b, j] = S.cq_req[b, j + 1]
    S.cq_n[b] -= 1
    if S.r_phase[ri] == PHASE_POSTED:
        S.r_phase[ri] = 0
        return
    done = clk + T.cmd_lat[c]
    while ri >= 0:                      # the request, then the reads merged into it
        S.r_done[ri] = done
        S.outstanding[0] -= 1
        S.progress[0] += 1
        _complete(S, S.r_tag[ri], done, ri)
        ri = S.r_follow[ri]


@_inl
def _cq_move(S, T, CF, ch, clk):
    """Move at most one transaction into its bank's command queue: the oldest of the read queue, or of the
    write queue while draining, whose bank's queue has room. Draining starts when the write queue is full, or
    holds more than write_drain_idle writes while every command queue is empty, and moves as many writes as
    it held then; a write with a read of its address still waiting ends the drain. True if one moved."""
    B = T.banks
    gb0 = ch * B
    qw = ch * 2 + 1
    if S.cq_drain[ch] == 0:
        empty = True
        for bl in range(B):
            if S.cq_n[gb0 + bl] > 0:
                empty = False
                break
        if S.qlen[qw] >= S.qcap[qw] or (S.qlen[qw] > CF[CF_DRAIN_IDLE] and empty):
            S.cq_drain[ch] = S.qlen[qw]
    w = 1 if S.cq_drain[ch] > 0 else 0
    qi = ch * 2 + w
    best = np.int64(-1)
    best_seq = INF
    for kk in range(S.act_n[qi]):
        b = S.act_list[qi, kk]
        if S.cq_n[b] >= CF[CF_CMDQ]:
            continue
        ri = S.l_head[b, w]
        if S.r_seq[ri] < best_seq:
            best_seq = S.r_seq[ri]
            best = ri
    if best < 0:
        return False
    ri = best
    b = S.r_bank[ri]
    if w == 1:
        if _cq_find(S, b, 0, KIND_READ, ri) >= 0:
            S.cq_drain[ch] = 0
            return False
        S.cq_drain[ch] -= 1
    _unlink(S, ri, b, w)
    if S.l_cnt[b, w] == 0:
        p = S.act_pos[b, w]
        last = S.act_list[qi, S.act_n[qi] - 1]
        S.act_list[qi, p] = last
        S.act_pos[last, w] = p
        S.act_n[qi] -= 1
    S.cq_req[b, S.cq_n[b]] = ri
    S.cq_n[b] += 1
    S.cq_t[b] = 0
    _free_entry(S, qi, clk)
    return True


@_inl
def _cq_accept(S, T, CF, ch, ri, w, clk):
    """posted_writes / merge_reads, at a request's acceptance. Posted: a request to the address of a waiting
    write (in the write queue or a command queue) is done at the next cycle and queued nowhere (returns True):
    a read answered from the write, a write merged with it; any other write is done (acknowledged) at the next
    cycle and queued (False). Merged reads: a read of the address of a waiting read is queued nowhere and done
    with that read (True). Otherwise the request is queued (False)."""
    b = S.r_bank[ri]
    if CF[CF_POSTED] != 0:
        if _cq_find(S, b, 1, KIND_WRITE, ri) >= 0:
            S.r_enq[ri] = clk
            S.r_done[ri] = clk + 1
            S.r_class[ri] = CLASS_NONE
            S.outstanding[0] -= 1
            S.progress[0] += 1
            _complete(S, S.r_tag[ri], clk + 1, ri)
            return True
        if w == 1:
            S.r_done[ri] = clk + 1
            S.outstanding[0] -= 1
            S.progress[0] += 1
            _complete(S, S.r_tag[ri], clk + 1, ri)
            S.r_phase[ri] = PHASE_POSTED
            return False
    if w == 0 and CF[CF_MERGE_RD] != 0:
        j = _cq_find(S, b, 0, KIND_READ, ri)
        if j >= 0:
            while S.r_follow[j] >= 0:
                j = S.r_follow[j]
            S.r_follow[j] = ri
            S.r_enq[ri] = clk
            S.r_class[ri] = CLASS_NONE
            return True
    return False


def _cq_step_skipped(S, T, CF, ch, clk, ref_issued, nxt):
    """`_cq_step` in a variant without rw sources (never reached; numba's IR inliner takes no *args)."""
    return INF


@_rw_part(_cq_step_skipped, inline=True)
def _cq_step(S, T, CF, ch, clk, ref_issued, nxt):
    """The bank_command_queue step after refresh (3.6): a single command bus takes the bank queues' command
    unless a refresh command issued; a dual bus (DRAMsim3's hbm_dual_cmd) asks the queues a second time after
    a first command (a refresh one included) and issues that one too if it is on the other bus (the round robin
    moves on to its queue either way). Then one transaction moves. Returns the channel's next wake cycle."""
    dual = CF[CF_DUAL_BUS] != 0
    issued = ref_issued
    first_bus = np.int64(0)              # a refresh command is on the row bus
    tmin = INF
    if not ref_issued:
        c, bl, pos, tmin = _cq_pick(S, T, CF, ch, clk)
        if c >= 0:
            _cq_issue(S, T, CF, ch, c, bl, pos, clk)
            issued = True
            first_bus = T.cmd_bus[c]
    if issued and dual:
        c, bl, pos, t2 = _cq_pick(S, T, CF, ch, clk)
        if c >= 0:
            if T.cmd_bus[c] != first_bus:
                _cq_issue(S, T, CF, ch, c, bl, pos, clk)
            else:
                S.cq_rr[ch] = bl
    moved = _cq_move(S, T, CF, ch, clk)
    if issued or moved:
        return clk + 1
    return min(nxt, tmin)


@_helper
def _ref_final(S, g):
    """The role of the command node g's pending work ends with: the periodic refresh (REFab) if it is due and
    fell due no later than a pending RFM was requested (both served in that order), else the RFM."""
    p = S.ref_pending[g]
    if (p & REF_DUE) != 0 and ((p & REF_RFM) == 0 or S.ref_due[g] <= S.rfm_at[g]):
        return R_REFAB
    return R_RFMAB


@_inl
def _refresh_step(S, T, CF, ch, clk):
    """Section 3.1 for channel ch at cycle clk: refresh nodes fall due, and the first pending node whose wanted
    command is ready issues it (taking the row bus). Returns (a refresh command issued, next due cycle)."""
    nxt = INF
    issued = False
    none = np.int64(-1)
    refresh = CF[CF_REFRESH]
    if refresh != REFRESH_NONE or CF[CF_RFM_THRESH] > 0:
        for node in range(T.ref_nodes):
            g = ch * T.ref_nodes + node
            if refresh != REFRESH_NONE and (S.ref_pending[g] & REF_DUE) == 0:
                if clk >= S.ref_due[g]:
                    if S.ref_pending[g] == 0:
                        S.ch_ref_pending[ch] += 1
                    S.ref_pending[g] |= REF_DUE
                elif S.ref_due[g] < nxt:
                    nxt = S.ref_due[g]
            if S.ref_pending[g] == 0:
                continue
            c, bl = _refresh_want(S, T, CF, ch, node)
            if c < 0:
                continue
            t = _earliest(S, T, ch, c, bl)
            if t <= clk and not issued:
                eff = _issue(S, T, CF, ch, c, bl, none, none, none, clk)
                issued = True
                if _cf(S.variant, CF, CF_CMDQ) > 0:
                    # (bank_command_queue: a refresh command may close rows the bank queues' commands depend on)
                    for x in range(ch * T.banks, (ch + 1) * T.banks):
                        S.cq_t[x] = 0
                if eff == E_REFRESH and c == T.role[R_RFMAB]:
                    S.ref_pending[g] &= ~REF_RFM
                    if S.ref_pending[g] == 0:
                        S.ch_ref_pending[ch] -= 1
                elif eff == E_REFRESH:
                    S.ref_pending[g] &= ~REF_DUE
                    if S.ref_pending[g] == 0:
                        S.ch_ref_pending[ch] -= 1
                    if refresh == REFRESH_ALLBANK:
                        S.ref_due[g] += CF[CF_NREFI]
                    else:
                        S.ref_due[g] += CF[CF_NREFIPB]
                        S.ref_bank[g] += 1
                        if S.ref_bank[g] == T.ref_off[node + 1] - T.ref_off[node]:
                            S.ref_bank[g] = 0
            elif t < nxt:
                nxt = t
    return issued, nxt


@_inl
def _step_decide(S, CF, ch, clk):
    """The decisions a step takes once, before any candidate: the rw queues' write modes (watermarks), the
    sources the starvation cap promotes (into S.promo[ch]), the active source under `blocked` arbitration.
    Returns the threshold gate (0: the first source's queue is at the threshold, so the others are held back)."""
    nsrc = _cf(S.variant, CF, CF_NSRC)
    n_rw = _cf(S.variant, CF, CF_NRW)
    for k in range(n_rw):
        pk = ch * n_rw + k
        ql_r = S.qlen[pk * 2]
        ql_w = S.qlen[pk * 2 + 1]
        if S.wmode[pk] == 0:
            if ql_w >= CF[CF_WM_HIGH] or (ql_r == 0 and ql_w > 0):
                S.wmode[pk] = 1
        else:
            if ql_w == 0 or (ql_w <= CF[CF_WM_LOW] and ql_r > 0):
                S.wmode[pk] = 0
    arb = _cf(S.variant, CF, CF_ARB)
    cap = _cf(S.variant, CF, CF_STARVE)
    promoted = S.promo[ch]
    for s in range(nsrc):
        promoted[s] = 1 if (cap > 0 and S.starve[ch, s] >= 0 and clk - S.starve[ch, s] >= cap) else 0
    if arb == ARB_BLOCKED:
        a = S.active[ch]
        if a < 0 or _at_boundary(S, CF, ch, a):
            start = 0 if a < 0 else a + 1
            for d in range(nsrc):
                s2 = (start + d) % nsrc
                if _has_work(S, CF, ch, s2):
                    # a stream that becomes active starts a new segment, also when it is the active one chosen
                    # again (clarification 11): its SEG_END mark is cleared either way
                    if not _is_rw(S, ch, s2):
                        S.s_lastend[ch * _cf(S.variant, CF, CF_NST) + S.src_idx[ch, s2]] = 0
                    a = s2
                    break
            S.active[ch] = a
    gate = 1
    if arb >= ARB_THRESHOLD:
        # the first source's queued entries: rw queues, or stream commands entered and not issued
        if _is_rw(S, ch, 0):
            pk0 = ch * n_rw + S.src_idx[ch, 0]
            occ = S.qlen[pk0 * 2] + S.qlen[pk0 * 2 + 1]
        else:
            sl0 = ch * _cf(S.variant, CF, CF_NST) + S.src_idx[ch, 0]
            occ = S.s_in[sl0] - S.s_head[sl0]
        gate = 1 if occ < CF[CF_THRESH] else 0
        for s in range(nsrc):
            S.held[ch, s] = 1 if (s != 0 and gate == 0 and promoted[s] == 0) else 0
    return gate


@_inl
def _step_starvation(S, CF, ch, clk, win_c, win_r, nxt):
    """Starvation bookkeeping after a step's issues (starvation cap under a non-FR-FCFS arbitration): since when
    each source has had a ready candidate (S.promo_ready[ch]) without issuing (S.starve; -1 not waiting).
    Returns the next wake, lowered to the cycle a cap expires."""
    nsrc = _cf(S.variant, CF, CF_NSRC)
    cap = _cf(S.variant, CF, CF_STARVE)
    ready = S.promo_ready[ch]
    for s in range(nsrc):
        if s == win_c or s == win_r:
            S.starve[ch, s] = -1
        elif ready[s] != 0:
            if S.starve[ch, s] < 0:
                S.starve[ch, s] = clk
        elif not _has_work(S, CF, ch, s):
            S.starve[ch, s] = -1
        if S.starve[ch, s] >= 0:
            tp = S.starve[ch, s] + cap
            if clk < tp < nxt:
                nxt = tp
    return nxt


@_inl
def _run_may_start(S, T, CF, ch, s, clk, limit):
    """A run (`_stream_run`) of stream source s of channel ch may follow its command issued at clk: runs are on
    (limit > clk + 1), arbitration picks s whenever it alone has a ready candidate (not a threshold gate), no
    refresh or RFM of the channel is pending, and no other source of the channel has work. Returns the first
    cycle the run may not reach (no refresh falls due before it), or -1."""
    arb = _cf(S.variant, CF, CF_ARB)
    if limit <= clk + 1 or arb >= ARB_THRESHOLD or S.ch_ref_pending[ch] != 0 or _is_rw(S, ch, s):
        return np.int64(-1)
    if arb == ARB_BLOCKED and S.active[ch] != s:
        return np.int64(-1)
    for s2 in range(_cf(S.variant, CF, CF_NSRC)):
        if s2 != s and _has_work(S, CF, ch, s2):
            return np.int64(-1)
    # (the step's own command may have put a completion in the ring since run_limit was taken)
    limit = min(limit, S.min_pending[0])
    if CF[CF_REFRESH] != REFRESH_NONE:
        for node in range(T.ref_nodes):
            limit = min(limit, S.ref_due[ch * T.ref_nodes + node])
    for p in range(S.p_head.shape[0]):       # a blocked port could be unblocked by another channel at any cycle
        if S.p_block[p] >= 0:
            return np.int64(-1)
        limit = min(limit, S.p_next[p])
    return limit


@_call
def _stream_run(S, T, CF, ch, s, clk, limit):
    """Exact multi-command step: stream source s of channel ch issued a column command at clk and is the only
    source of the channel with work (`_run_may_start`); its next commands are column commands on rows its target
    holds open, each issued at its earliest cycle, as the per-cycle steps would: nothing else of the channel can
    issue before `limit` (no refresh falls due, no intake or port offer, no completion stops advance()), and a
    column command moves no row. Issues them at their cycles now, up to the first command that is not such a
    column command, is tagged (its completion would go into the ring ahead of other channels' earlier ones),
    is a segment start under refresh admission (time-dependent), would reach `limit`, or is the stream's last
    (an item stays outstanding, so advance() cannot see nothing left before the run's last cycle). On a dual
    command bus the row bus takes the stream's next candidate at the same cycle when it is ready, as a step
    does, and the run ends there. Returns the cycle of the last command issued (clk: none)."""
    m = S.src_idx[ch, s]
    sl = ch * _cf(S.variant, CF, CF_NST) + m
    o = S.cand[s]
    cur = clk
    dual = CF[CF_DUAL_BUS] != 0
    wait_ref = CF[CF_STREAM_REF] == 1 and CF[CF_REFRESH] != REFRESH_NONE
    while True:
        h = S.s_head[sl]
        # (dual bus: the next command may issue on the row bus with it, so two items must be left)
        if h >= S.s_in[sl] or h + (2 if dual else 1) >= S.s_tail[sl] or S.s_tag[sl, h] >= 0:
            break
        H = S.s_cmd[sl, h]
        eff = T.cmd_effect[H]
        if T.cmd_bus[H] != 1 or not (eff == E_READ or eff == E_WRITE or eff == E_COMPUTE or eff == E_UPDATE):
            break
        if wait_ref and (S.s_flags[sl, h] & SEG_START) != 0:
            break
        if CF[CF_LOG] != 0 and S.n_log[0] + 3 * CF[CF_CH] + 2 > S.log_clk.shape[0]:
            break
        _stream_cand(S, T, CF, ch, m, s, cur + 1, o)
        if o[0] != H:
            break                  # no candidate, or a restore or close first
        t = max(o[8], cur + 1)
        if t >= limit:
            break
        _issue_pick(S, T, CF, ch, s, 0, t)
        S.run_cmds[ch] += 1
        cur = t
        if dual:
            _stream_cand(S, T, CF, ch, m, s, t, o)
            if o[0] >= 0 and T.cmd_bus[o[0]] == 0 and o[8] <= t:
                o[4] = o[0]
                o[5] = o[1]
                o[6] = o[2]
                o[7] = o[3]
                _issue_pick(S, T, CF, ch, s, 4, t)
                S.run_cmds[ch] += 1
                break
    return cur


@_inl
def _wake_after_issue(S, T, CF, ch, win_c, win_r, row_free, clk, run_limit):
    """The next wake of a channel whose step issued at clk: the next cycle, or, when the step's one command was a
    stream's column command and a run may follow (`_run_may_start`), the cycle after the run's last command."""
    if win_c < 0 or win_r >= 0 or not row_free:
        return clk + 1
    limit = _run_may_start(S, T, CF, ch, win_c, clk, run_limit)
    if limit <= clk + 1:
        return clk + 1
    return _stream_run(S, T, CF, ch, win_c, clk, limit) + 1


@_inl
def _run_limit(S, CF, clk, until):
    """The first cycle runs (exact multi-command steps) stepped at clk may not reach: the bound, the next intake
    and pending completion, the timeout and stall checks; with more than one channel, none once a tagged item was
    enqueued (a completion of another channel could stop advance() inside a run). clk: no runs."""
    if CF[CF_RUNS] == 0 or (CF[CF_CH] > 1 and CF[CF_TAGGED] != 0):
        return clk
    return min(until, S.st_next[0], S.min_pending[0], CF[CF_MAX_CYCLES] + 1, clk + STALL_CYCLES)


@_inl
def _step(S, T, CF, ch, clk, cand, run_limit):
    """One scheduling step of channel ch at cycle clk. Returns the channel's next wake cycle. run_limit: the first
    cycle a run of stream commands after this step's may not reach (clk or less: no run; `_stream_run`)."""
    nsrc = _cf(S.variant, CF, CF_NSRC)
    dual = CF[CF_DUAL_BUS] != 0
    # ---- refresh
    issued, nxt = _refresh_step(S, T, CF, ch, clk)
    row_free = not issued
    col_free = dual or not issued
    if _cf(S.variant, CF, CF_CMDQ) > 0:
        # DRAMsim3's two-level queues (bank_command_queue): their own scheduling path
        return _cq_step(S, T, CF, ch, clk, issued, nxt)
    # ---- decisions taken once per step: write modes, promotions, the blocked active source, the gate
    gate = _step_decide(S, CF, ch, clk)
    arb = _cf(S.variant, CF, CF_ARB)
    cap = _cf(S.variant, CF, CF_STARVE)
    promoted = S.promo[ch]
    # ---- candidates and arbitration: column bus first, then the row bus with candidates recomputed
    ready = S.promo_ready[ch]
    for s in range(nsrc):
        ready[s] = 0
    win_c = -1
    win_r = -1
    rows0 = np.int64(0)
    pins0 = np.int64(0)
    track = cap > 0 and arb != ARB_FRFCFS
    if col_free or row_free or track:
        t = _cands(S, T, CF, ch, clk, cand)
        if t < nxt:
            nxt = t
        for s in range(nsrc):
            if cand[s, 0] >= 0 or cand[s, 4] >= 0:
                ready[s] = 1
        if dual:
            if col_free:
                win_c, slot = _arbitrate(S, CF, ch, cand, BUS_COL, promoted, gate)
                if win_c >= 0:
                    rows0 = S.ch_rows_epoch[ch]
                    pins0 = S.ch_pin_epoch[ch]
                    _issue_pick(S, T, CF, ch, win_c, 0, clk)
                    issued = True
            if row_free:
                if win_c >= 0:
                    t = _cands_after_col(S, T, CF, ch, clk, cand, win_c, rows0, pins0)
                    if t < nxt:
                        nxt = t
                    for s in range(nsrc):
                        if cand[s, 0] >= 0 or cand[s, 4] >= 0:
                            ready[s] = 1
                win_r, slot = _arbitrate(S, CF, ch, cand, BUS_ROW, promoted, gate)
                if win_r >= 0:
                    _issue_pick(S, T, CF, ch, win_r, 4, clk)
                    issued = True
        elif col_free:
            w, slot = _arbitrate(S, CF, ch, cand, BUS_SINGLE, promoted, gate)
            if w >= 0:
                _issue_pick(S, T, CF, ch, w, slot, clk)
                issued = True
                if slot == 0:
                    win_c = w
                else:
                    win_r = w
    # ---- starvation bookkeeping
    if track:
        nxt = _step_starvation(S, CF, ch, clk, win_c, win_r, nxt)
    if issued:
        nxt = _wake_after_issue(S, T, CF, ch, win_c, win_r, row_free, clk, run_limit)
    return nxt


@_call
def _intake(S, T, CF, clk):
    """Stream commands whose entry cycle has come enter their streams (after the ports' offers of the
    cycle), in order, taking the channel's next sequence numbers. Returns the next entry cycle."""
    nxt = INF
    nst = _cf(S.variant, CF, CF_NST)
    for sl in range(S.s_in.shape[0]):
        if nst == 0:
            break
        ch = sl // nst
        while S.s_in[sl] < S.s_tail[sl] and S.s_at[sl, S.s_in[sl]] <= clk:
            i = S.s_in[sl]
            S.s_seq[sl, i] = S.seq[ch]
            S.seq[ch] += 1
            S.s_in[sl] = i + 1
            _progressed(S, clk)
            if i == S.s_head[sl]:
                _stream_head_changed(S, T, CF, ch, sl - ch * nst, np.int64(1))
            S.wake[ch] = clk
        if S.s_in[sl] < S.s_tail[sl] and S.s_at[sl, S.s_in[sl]] < nxt:
            nxt = S.s_at[sl, S.s_in[sl]]
    return nxt


@numba.njit(cache=True, nogil=True, _nrt=False)
def advance(S, T, CF, until):
    """Simulate cycles [S.clock, until); stop early at the done cycle of the first pending tagged completion
    (status ST_COMPLETION, clock = that cycle, nothing at it simulated yet), when nothing is left to do
    (ST_IDLE), or when the command log is about to overflow (ST_LOG_FULL: grow it and call again)."""
    clk = S.clock[0]
    nch = CF[CF_CH]
    cand = S.cand
    status = ST_UNTIL
    p_next = INF
    for p in range(S.p_head.shape[0]):
        if S.p_next[p] < p_next:
            p_next = S.p_next[p]
    while True:
        if clk >= until:
            status = ST_UNTIL
            break
        if S.outstanding[0] == 0 and (until > INF or (until == INF and S.min_pending[0] >= INF)):
            status = ST_IDLE        # nothing left (refresh alone does not keep an unbounded run going)
            break
        if S.min_pending[0] <= clk:
            status = ST_COMPLETION
            break
        if clk > CF[CF_MAX_CYCLES]:
            status = ST_TIMEOUT
            break
        if (S.outstanding[0] > 0 and p_next >= INF and S.st_next[0] >= INF
                and clk - S.progress[1] > STALL_CYCLES):
            status = ST_DEADLOCK     # work is left but only refresh has issued for a long time
            break
        if CF[CF_LOG] != 0 and S.n_log[0] + 3 * nch > S.log_clk.shape[0]:
            status = ST_LOG_FULL
            break
        if p_next <= clk:
            p_next = _offer(S, T, CF, clk)
        if S.st_next[0] <= clk:
            S.st_next[0] = _intake(S, T, CF, clk)
        run_limit = _run_limit(S, CF, clk, until)
        for ch in range(nch):
            if S.wake[ch] <= clk:
                S.wake[ch] = _step(S, T, CF, ch, clk, cand, run_limit)
        for p in range(S.p_head.shape[0]):       # a served request may have unblocked a port
            if S.p_next[p] < p_next:
                p_next = S.p_next[p]
        t_next = min(p_next, S.st_next[0])
        for ch in range(nch):
            if S.wake[ch] < t_next:
                t_next = S.wake[ch]
        if S.min_pending[0] < t_next:
            t_next = S.min_pending[0]
        if t_next >= INF:
            status = ST_IDLE if S.outstanding[0] == 0 else ST_DEADLOCK
            clk = clk + 1
            break
        if t_next <= clk:
            t_next = clk + 1
        # never jump past the bound: a driver may enqueue work for cycles in [until, t_next) next
        clk = min(t_next, until)
    S.clock[0] = clk
    return status


# ---------------------------------------------------------------------------------------------------------
# Threads (docs/channel-engine.md, "Threads"). Between two coupling cycles (a port offer, a stream intake, a
# pending completion, the bound) channels do not interact: a shard of channels [lo, hi) advances on its own, in
# its own thread, with a shard state whose shared fields (log, completion ring, counters, scratch) are its own;
# the coordinator (archsim/engine/threads.py) merges them afterwards in cycle order, channels ascending, which
# is the order one thread produces. (Here, beside `_step`: numba's cache is per file, so they recompile with it.)
@numba.njit(cache=True, nogil=True, _nrt=False)
def advance_shard(S, T, CF, lo, hi, until, c_clk):
    """Step channels [lo, hi) over cycles [S.clock, until), each at its own wake cycles (as `advance` steps it
    when nothing outside the channel changes it). c_clk[i] = the cycle of the step that recorded the shard's
    completion i. Returns the last cycle at which a channel of the shard stepped (-1 none)."""
    clk = S.clock[0]
    cand = S.cand
    last = np.int64(-1)
    while clk < until:
        for ch in range(lo, hi):
            if S.wake[ch] <= clk:
                n0 = S.n_comp[0]
                S.wake[ch] = _step(S, T, CF, ch, clk, cand, clk)      # (no runs: regions bound the shards)
                for i in range(n0, S.n_comp[0]):
                    c_clk[i] = clk
                last = clk
        t_next = until
        for ch in range(lo, hi):
            if S.wake[ch] < t_next:
                t_next = S.wake[ch]
        if t_next <= clk:
            t_next = clk + 1
        clk = t_next
    S.clock[0] = clk
    return last


@numba.njit(cache=True, nogil=True, _nrt=False)
def _replay_completions(S, tag, done, ident):
    """Record merged shard completions (raw: item by item) in order, through the completion groups."""
    for i in range(tag.shape[0]):
        _complete(S, tag[i], done[i], ident[i])
