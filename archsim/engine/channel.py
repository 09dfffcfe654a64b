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
import sys
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
    R_UPD,
    R_UPDA,
    R_WR,
    R_WRA,
)
from archsim.engine import field_access, nowrap, state

# The kernel never indexes from an array's end: numba compiles this module without negative-index wrap-around
# (~17-20 % of kernel time; archsim/engine/nowrap.py).
nowrap.register(__name__)
# A read of one state field loads that field, not the whole state tuple (a quarter less first-compile time,
# same machine code; archsim/engine/field_access.py).
field_access.register(__name__)

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
N_CF = len(CF_SLOTS)
CF_INDEX = {s.name: i for i, s in enumerate(CF_SLOTS)}
if any(globals().get("CF_" + s.name) != i for i, s in enumerate(CF_SLOTS)):
    raise RuntimeError("a controller slot's constant CF_<name> does not name its own slot")
REFRESH_NONE, REFRESH_ALLBANK, REFRESH_PERBANK = 0, 1, 2
REFRESH_MODES = {"none": REFRESH_NONE, "allbank": REFRESH_ALLBANK, "perbank": REFRESH_PERBANK}
ARB_FRFCFS, ARB_PRIORITY, ARB_BLOCKED, ARB_THRESHOLD, ARB_THRESHOLD_ROW = 0, 1, 2, 3, 4
# threshold_row: as threshold, but a held-back source may still issue column commands (to rows it opened);
# only its row commands wait, so it never holds a bank's row open while it waits (T3-MCA variant, issue 22)
ARBITRATIONS = {"frfcfs": ARB_FRFCFS, "priority": ARB_PRIORITY, "blocked": ARB_BLOCKED, "threshold": ARB_THRESHOLD,
                "threshold_row": ARB_THRESHOLD_ROW}
SEG_START, SEG_END = 1, 2
KIND_READ, KIND_WRITE, KIND_RMW = 0, 1, 2
PHASE_POSTED = 2          # r_phase of a posted write (acknowledged) still waiting to issue (bank_command_queue)
CLASS_NONE = 3            # r_class of a request served without a command of its own (posted_writes, merge_reads)
# advance() status
ST_UNTIL, ST_COMPLETION, ST_IDLE, ST_LOG_FULL, ST_DEADLOCK, ST_TIMEOUT = 0, 1, 2, 3, 4, 5
KEY_SHIFT = np.int64(16)                     # candidate keys in the rw scan: age << KEY_SHIFT | list position
KEY_MASK = (np.int64(1) << KEY_SHIFT) - np.int64(1)
STALL_CYCLES = np.int64(1) << np.int64(24)   # no source issued for this long while work is left: a deadlock


# ---------------------------------------------------------------------------------------------------------
# Kernel variants. The kernel is one source; a state allocated for a common device set is typed differently
# (the dtype of `State.variant` names the variant), so numba compiles that source once more for it, with the
# controller fields the variant fixes as constants (VARIANT_CF; -1 = read from CF). LLVM then drops the code the
# other device sets need, which leaves a smaller function with far fewer values spilled to the stack:
#   lean       one FR-FCFS rw source, one row buffer (every trace run, NPU-only GEMMs): a fifth of the general
#              kernel's size, ~15-20 % less kernel time on trace runs;
#   pim_dual   one PIM stream and one rw source under priority arbitration on banks with two row buffers
#              (NeuPIMs): ~10-12 % less kernel time per layer;
#   stream     stream sources only (so no ports either: ports feed rw sources): PIM-GPT, Duplex's Logic-PIM
#              without xPU requests. Besides the constants, numba never types the rw and port helpers for it
#              (`_rw_part`), which is most of what a cold compile of it saves (README "Measured speed", cold start).
# A MemorySystem takes the first variant whose fixed fields agree with its own (README "Measured speed" has the
# figures). Every variant runs the same source under the same contract; tests compare each with the reference
# scheduler and with the general kernel (MemorySystem(kernel="general") forces that one).
_VARIANT_FIXED = {     # variant -> {controller slot name: the value it fixes}
    "general": {},
    "lean": {"NSRC": 1, "NRW": 1, "NST": 0, "NBUF": 1, "ARB": ARB_FRFCFS, "STARVE": 0, "ACTIVE_BUF": 0, "HIT_CAP": 0,
             "CMDQ": 0, "POSTED": 0, "MERGE_RD": 0},
    "pim_dual": {"NSRC": 2, "NRW": 1, "NST": 1, "NBUF": 2, "ARB": ARB_PRIORITY, "STARVE": 0, "ACTIVE_BUF": 0,
                 "HIT_CAP": 0, "CMDQ": 0, "POSTED": 0, "MERGE_RD": 0},
    "stream": {"NRW": 0, "CMDQ": 0, "POSTED": 0, "MERGE_RD": 0},
}
KERNEL_VARIANTS = tuple(_VARIANT_FIXED)
_VARIANT_DTYPES = (np.int8, np.uint8, np.int16, np.uint16)       # State.variant's dtype per variant, in that order


def _variant_cf() -> np.ndarray:
    """VARIANT_CF[v, slot]: the value variant v fixes controller slot `slot` to, -1 where it does not."""
    for v, fixed in _VARIANT_FIXED.items():
        if set(fixed) - set(CF_INDEX):
            raise RuntimeError(f"kernel variant {v}: unknown controller slots {sorted(set(fixed) - set(CF_INDEX))}; "
                               f"declared: {', '.join(CF_INDEX)}")
    return np.array([[fixed.get(s.name, -1) for s in CF_SLOTS] for fixed in _VARIANT_FIXED.values()], dtype=np.int64)


VARIANT_CF = _variant_cf()


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


def _rw_part(empty):
    """Decorator (instead of `_call`) of a helper only rw sources and ports use. The kernel calls it through an
    overload that numba resolves per state type at typing time: for a variant without rw sources ("stream") to
    `empty` (one of the `_returns_*`, of the helper's return type), so numba never types or compiles the helper
    for it; for every other variant to the helper itself, compiled as `_call` compiles it (same options, same
    on-disk cache entries). The returned function's `impl` is the helper's own dispatcher (archsim.warm)."""
    def wrap(py_func):
        impl = _call(py_func)

        def gate(*args):
            raise TypeError(f"{py_func.__name__} is called from compiled code only (its dispatcher: .impl)")

        def typed(S, *args):
            return empty if VARIANT_CF[_variant_of_type(S), CF_NRW] == 0 else py_func

        typed.__signature__ = inspect.signature(py_func)     # numba checks the implementations' parameters
        overload(gate, jit_options={"cache": True, "no_cpython_wrapper": True, "_nrt": False})(typed)
        gate.impl = impl
        gate.__name__ = gate.__qualname__ = py_func.__name__
        gate.__doc__ = py_func.__doc__
        return gate
    return wrap


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
            if CF[CF_REFRESH] == REFRESH_ALLBANK:
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
    buf = T.cmd_buf[c]
    r = T.rep[c, bl]
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
            S.n_open[ch * T.ref_nodes + T.bank_ref_node[T.tgt_banks[kk]]] += 1
            if buf == 0:
                if _cf(S.variant, CF, CF_HIT_CAP) > 0:
                    S.row_hits[x] = 0
                # queued requests that now hit the new row
                for q in range(2 * n_rw):
                    _recount_hits(S, x, q)
                _mark_dirty(S, ch, x)
    elif eff == E_CLOSE or eff == E_READ_CLOSE or eff == E_WRITE_CLOSE or eff == E_UPDATE_CLOSE:
        if eff == E_CLOSE:
            logged_row = S.open_row[gb0 + T.tgt_banks[k0], buf] if k1 - k0 == 1 else -1
        n_rw = _cf(S.variant, CF, CF_NRW)
        for kk in range(k0, k1):
            x = gb0 + T.tgt_banks[kk]
            if S.open_row[x, buf] != -1:
                S.open_row[x, buf] = -1
                S.owner[x, buf] = -1
                S.n_open[ch * T.ref_nodes + T.bank_ref_node[T.tgt_banks[kk]]] -= 1
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
    # --- observers
    _observe(S, CF, ch, c, gb0 + r, logged_row, col, src, clk)
    return eff


@_helper
def _count_row_hit(S, T, ch, k0, k1):
    """row_hit_cap: the open rows of buffer 0 at target banks tgt_banks[k0:k1] served one more column command;
    their banks' rw candidates may change (the cap reached)."""
    for kk in range(k0, k1):
        x = ch * T.banks + T.tgt_banks[kk]
        S.row_hits[x] += 1
        _mark_dirty(S, ch, x)


@_helper
def _observe(S, CF, ch, c, gbank, row, col, src, clk):
    """Observers of every issued command: per-command counters and the command log."""
    S.cmd_count[ch, c] += 1
    if CF[CF_LOG] != 0:
        n = S.n_log[0]
        S.log_clk[n] = clk
        S.log_cmd[n] = c
        S.log_bank[n] = gbank
        S.log_row[n] = row if row >= -1 else -1
        S.log_col[n] = col
        S.log_src[n] = src
        S.n_log[0] = n + 1


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
                S.progress[1] = clk
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
            S.progress[1] = clk
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
    if CF[CF_REFRESH] == REFRESH_ALLBANK:
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
        return T.role[R_REFAB], T.ref_banks[lo]
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
    refresh = CF[CF_REFRESH]
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
    ref_check = S.ch_ref_pending[ch] != 0 and refresh != REFRESH_NONE
    c_pre = T.role[R_PRE]
    c_act = T.role[R_ACT]
    nbuf = _cf(S.variant, CF, CF_NBUF)
    ignore_reserve = _cf(S.variant, CF, CF_ARB) == ARB_BLOCKED
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
        blocked = _rw_blocked(S, q, b, c, c_pre, c_act, me, ignore_reserve, nbuf)
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


@_call
def _update_dirty(S, T, CF, ch):
    """Bring the rw candidates of the banks changed since the channel's last pass up to date."""
    n_rw = _cf(S.variant, CF, CF_NRW)
    for kk in range(S.dirty_n[ch]):
        b = S.dirty_list[ch, kk]
        S.dirty[b] = False
        for kq in range(n_rw):
            for ww in range(2):
                ri, c = _bank_cand(S, T, CF, kq, ww, b)
                S.cand_ri[kq * 2 + ww, b] = ri
                S.cand_cmd[kq * 2 + ww, b] = c
                S.cand_t[kq * 2 + ww, b] = 0
                if ri >= 0:
                    # the request's age and (rmw WR) not-before cycle, kept beside the candidate so the scan
                    # reads no per-request arrays (random accesses into the request pool)
                    S.cand_seq[kq * 2 + ww, b] = S.r_seq[ri]
                    S.cand_nb[kq * 2 + ww, b] = S.r_nb[ri] if S.r_kind[ri] == KIND_RMW and S.r_phase[ri] == 1 else 0
    S.dirty_n[ch] = 0


@_helper
def _rw_blocked(S, q, b, c, c_pre, c_act, me, ignore_reserve, nbuf):
    """Whether bank b's candidate c (queue q) may not issue for a reason other than timing: a PRE of a bank
    pinned or whose row another source opened; an ACT of a reserved bank or of a row open in another buffer.
    (Under `blocked` only the active source issues: a reservation would only hold the active rw source back
    for an inactive stream, so blocked arbitration ignores reservations.)"""
    own = S.owner[b, 0]
    blocked = ((c == c_pre) & ((S.bank_pin[b] > 0) | ((own != -1) & (own != me)))) | (
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
    if S.ch_ref_pending[ch] != 0 and CF[CF_REFRESH] != REFRESH_NONE and _ref_blocked(S, T, CF, ch, c, out[1]):
        return True
    if _rw_blocked(S, q, b, c, T.role[R_PRE], T.role[R_ACT], _rw_src(S, ch, k), _cf(S.variant, CF, CF_ARB) == ARB_BLOCKED,
                   _cf(S.variant, CF, CF_NBUF)):
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
    if CF[CF_REFRESH] != REFRESH_NONE and _ref_blocked(S, T, CF, ch, c, cb):
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
        S.progress[1] = clk
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
    S.progress[1] = clk
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
@_helper
def _cq_hit_queued(S, b, orow):
    """Some request in bank b's command queue is to the open row orow."""
    for pos in range(S.cq_n[b]):
        if S.r_row[S.cq_req[b, pos]] == orow:
            return True
    return False


@_helper
def _cq_read_before(S, b, pos, ri):
    """A read of write ri's address is ahead of it (before position pos) in bank b's command queue."""
    for j in range(pos):
        x = S.cq_req[b, j]
        if S.r_kind[x] == KIND_READ and S.r_row[x] == S.r_row[ri] and S.r_col[x] == S.r_col[ri]:
            return True
    return False


@_helper
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


@_call
def _cq_queue_cmd(S, T, CF, ch, bl, clk):
    """The first command of local bank bl's command queue whose timing is met at clk, in queue order:
    (command, position), or (-1, earliest cycle of one of them). A request to the open row gives its column
    command, one to a closed bank an ACT; a PRE only for the queue's first request, and only if no queued
    request hits the open row or the row has served row_hit_cap column commands; a write waits behind a read
    of its address."""
    b = ch * T.banks + bl
    orow = S.open_row[b, 0]
    cap = CF[CF_HIT_CAP]
    tmin = INF
    for pos in range(S.cq_n[b]):
        ri = S.cq_req[b, pos]
        if orow == S.r_row[ri]:
            c = T.role[R_WR] if S.r_kind[ri] == KIND_WRITE else T.role[R_RD]
            if S.r_kind[ri] == KIND_WRITE and _cq_read_before(S, b, pos, ri):
                continue
        elif orow == -1:
            c = T.role[R_ACT]
        else:
            if pos > 0 or (not (cap > 0 and S.row_hits[b] >= cap) and _cq_hit_queued(S, b, orow)):
                continue
            c = T.role[R_PRE]
        t = _earliest(S, T, ch, c, bl)
        if t <= clk:
            return c, np.int64(pos)
        tmin = min(tmin, t)
    return np.int64(-1), tmin


@_call
def _cq_pick(S, T, CF, ch, clk):
    """The command the bank queues offer at clk: visited round robin from the one after cq_rr (queues of
    banks whose refresh is pending skipped), the first ready command of the first queue that has one.
    Returns (command, local bank, position, earliest cycle of a command not ready); command -1: none."""
    B = T.banks
    rr = S.cq_rr[ch]
    tmin = INF
    ref_check = S.ch_ref_pending[ch] != 0 and CF[CF_REFRESH] != REFRESH_NONE
    for i in range(B):
        bl = rr + 1 + i
        if bl >= B:
            bl -= B
        if S.cq_n[ch * B + bl] == 0:
            continue
        if ref_check and _ref_blocked(S, T, CF, ch, T.role[R_ACT], bl):
            continue
        c, x = _cq_queue_cmd(S, T, CF, ch, bl, clk)
        if c >= 0:
            return c, np.int64(bl), x, tmin
        tmin = min(tmin, x)
    return np.int64(-1), np.int64(-1), np.int64(-1), tmin


@_call
def _cq_issue(S, T, CF, ch, c, bl, pos, clk):
    """Issue command c for the request at position pos of local bank bl's command queue. A column command
    serves the request (it leaves the queue); a posted write was acknowledged when it was accepted."""
    b = ch * T.banks + bl
    ri = S.cq_req[b, pos]
    S.cq_rr[ch] = bl
    S.progress[1] = clk
    col = _request_command(S.r_class, S.r_col, T.role, T.cmd_bus, c, ri)
    _issue(S, T, CF, ch, c, bl, S.r_row[ri], col, _rw_src(S, ch, 0), clk)
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


@_call
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
    _free_entry(S, qi, clk)
    return True


@_call
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


@_rw_part(_returns_inf)
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


@_inl
def _refresh_step(S, T, CF, ch, clk):
    """Section 3.1 for channel ch at cycle clk: refresh nodes fall due, and the first pending node whose wanted
    command is ready issues it (taking the row bus). Returns (a refresh command issued, next due cycle)."""
    nxt = INF
    issued = False
    none = np.int64(-1)
    refresh = CF[CF_REFRESH]
    if refresh != REFRESH_NONE:
        for node in range(T.ref_nodes):
            g = ch * T.ref_nodes + node
            if S.ref_pending[g] == 0:
                if clk >= S.ref_due[g]:
                    S.ref_pending[g] = 1
                    S.ch_ref_pending[ch] += 1
                else:
                    if S.ref_due[g] < nxt:
                        nxt = S.ref_due[g]
                    continue
            c, bl = _refresh_want(S, T, CF, ch, node)
            if c < 0:
                continue
            t = _earliest(S, T, ch, c, bl)
            if t <= clk and not issued:
                eff = _issue(S, T, CF, ch, c, bl, none, none, none, clk)
                issued = True
                if eff == E_REFRESH:
                    S.ref_pending[g] = 0
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
                    if s2 != a and not _is_rw(S, ch, s2):
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
def _step(S, T, CF, ch, clk, cand):
    """One scheduling step of channel ch at cycle clk. Returns the channel's next wake cycle."""
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
        nxt = clk + 1
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
            S.progress[1] = clk
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
        for ch in range(nch):
            if S.wake[ch] <= clk:
                S.wake[ch] = _step(S, T, CF, ch, clk, cand)
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
                S.wake[ch] = _step(S, T, CF, ch, clk, cand)
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


# =========================================================================================================
# Python side: allocation, enqueueing, advancing, draining
# =========================================================================================================
_LOWERED: dict[str, object] = {}


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
        # the state's sizes as allocated (archsim/engine/state.py SIZES; the pool, ports, streams, log and ring grow)
        self.sizes = state.sizes(channels=nch, banks_per_ch=B, bufs=len(spec.row_buffers), cmds=T.n_cmds,
                                 cells=T.n_cells * T.n_cmds, windows=T.n_win, win_nodes=T.n_win_nodes,
                                 window=T.max_window, ref_nodes_per_ch=T.ref_nodes, sources=nsrc, rw=n_rw,
                                 requests=requests, stream_capacity=stream_capacity,
                                 queue_max=max(ctrl.read_queue, ctrl.write_queue), log=log,
                                 cmdq=ctrl.bank_command_queue)
        self.S = state.new_state(self.sizes, self._initial_arrays(spec, T, ctrl, v))
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
        self._coord = threads_mod.Coordinator(self, self.threads, sys.modules[__name__]) if self.threads > 1 else None

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
        return kernel_cached(self._signature())

    def load_kernel(self, threaded: bool = False) -> None:
        """Load the compiled kernel for this system's state types from numba's cache (~0.05 s in a new process;
        a cold cache compiles it, 35-60 s of CPU) without running it. A driver may call it from another thread
        while it does GIL-free work (the trace driver parses the trace meanwhile); otherwise the first advance
        loads it. A compile says so on stderr first (one line, with the expected time); the time spent here is
        counted apart (compile_seconds()), not as simulation time. `threaded`: also the threaded form of a
        system on threads (engine.threads > 1), which a run otherwise compiles when it first opens a parallel
        region (archsim.warm compiles it ahead)."""
        import time

        sig = self._signature()
        t0 = time.perf_counter()
        if kernel_cached(sig) is False:
            _announce_compile(sig)
        self._kernel = advance.compile(sig)
        _COMPILE_S[0] += time.perf_counter() - t0
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
        if self.cf[CF_CMDQ] > 0 and (kind == KIND_RMW).any():
            from archsim.errors import ConfigError
            raise ConfigError("controller.bank_command_queue", "DRAMsim3's queues take reads and writes only; "
                              "rmw requests need bank_command_queue: 0")
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
        self._reset_requests(a, b)
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
        if self._coord is not None:
            self._coord.note_tags(tag)
        S.p_buf[port, tail:tail + n] = np.arange(a, b, dtype=np.int64)
        S.p_tail[port] = tail + n
        S.outstanding[0] += n
        if S.p_block[port] < 0:
            head_arrive = S.r_arrive[S.p_buf[port, S.p_head[port]]]
            S.p_next[port] = min(S.p_next[port], max(S.clock[0], head_arrive))
        self.n_req = max(self.n_req, b)
        return np.arange(a, b, dtype=np.int64)

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
        return bool(((self.S.r_done[a:b] >= 0) & (self.S.r_phase[a:b] != PHASE_POSTED)).all())

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
        import time

        if until is None:
            until = INF

        t0, c0 = time.perf_counter(), _COMPILE_S[0]
        while True:
            st = self._call_kernel(until) if self._coord is None else self._coord.advance(until)
            if st == ST_LOG_FULL:
                self._grow_log()
                continue
            break
        self.wall_s += time.perf_counter() - t0 - (_COMPILE_S[0] - c0)     # simulation time: compile excluded
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
        done = S.c_done[:n]
        now = done <= S.clock[0]
        order = np.argsort(done[now], kind="stable")
        out = list(zip(S.c_tag[:n][now][order].tolist(), done[now][order].tolist(), strict=True))
        keep = ~now
        k = int(keep.sum())
        for f in state.RING_FIELDS:
            a = getattr(S, f)
            a[:k] = a[:n][keep]
        S.n_comp[0] = k
        S.min_pending[0] = S.c_done[:k].min() if k else INF
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


# ---- compile time: announced, and counted apart from simulation time ------------------------------------
# Seconds this process spent loading or compiling channel kernels. MemorySystem.wall_s and the op engine's
# kernel_s exclude it; results report it as its own figure (sim_compile_s).
_COMPILE_S = [0.0]
# Expected cold-compile time of one kernel variant, as measured on this project's 2-core machine: 61 s idle
# (issue 26), 2 min with a few other jobs running, 10 min under a load average of 10 (a trace run, 597 s).
COMPILE_EXPECTED = "about 35-60 s of CPU (README \"Measured speed\", cold start), several times that in wall time under load"
_ANNOUNCED: set[Any] = set()


def compile_seconds() -> float:
    """Seconds this process has spent loading or compiling channel kernels so far."""
    return _COMPILE_S[0]


def kernel_cached(sig: tuple) -> bool | None:
    """Whether the kernel for `sig` is compiled in this process or in numba's on-disk cache; None if unknown
    (numba's cache internals changed): then no notice is printed."""
    try:
        if tuple(sig) in advance.overloads:
            return True
        cache = advance._cache
        advance.targetctx.refresh()
        key = cache._index_key(sig, advance.targetctx.codegen())
        return key in cache._cache_file._load_index()
    except Exception:   # noqa: BLE001  (a notice is a courtesy; never fail a run for it)
        return None


def _announce_compile(sig: tuple) -> None:
    import os
    import sys

    if sig in _ANNOUNCED or os.environ.get("ARCHSIM_NO_COMPILE_NOTICE"):
        return
    _ANNOUNCED.add(sig)
    where = getattr(getattr(advance, "_cache", None), "_cache_path", "numba's cache")
    print(f"archsim: compiling the channel kernel for this configuration, {COMPILE_EXPECTED} (once: it is "
          f"cached in {where})", file=sys.stderr, flush=True)
