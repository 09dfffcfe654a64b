"""The channel kernel's state, declared once: every field's dtype, shape, initial value and role.

The kernel (archsim/engine/channel.py) keeps all its state outside itself, in numpy arrays gathered in one
namedtuple, `State` (numba compiles one kernel for every device of a kernel variant because the arrays are
arguments, and caches it). `FIELDS` below is the only list of those arrays (and `DEEP_FIELDS` of the ones only the
deep-window variant's `DeepState` adds); everything else is derived from it:

* `State` (the namedtuple, fields in declaration order) and its allocation (`allocate`, MemorySystem.__init__);
* the field groups the Python side works on: the request pool (`POOL_FIELDS`, grown by `_grow_pool`, their
  `fresh` values written by `_reset_requests`), the stream slots (`STREAM_SLOT_FIELDS`), the command log
  (`LOG_FIELDS`), the completion ring (`RING_FIELDS`), the caches (`CACHE_FIELDS`);
* what the thread coordinator (archsim/engine/threads.py) gives every shard of channels its own copy of
  (`SHARD_FIELDS`), the rest being shared: split between channels (`channel_axis`), or written only in the
  cycles one thread runs;
* what exact reuse (archsim/engine/reuse.py) carries from one channel to an identical one (`OUTCOME_FIELDS`) and
  keys a channel's state on besides its timing (`BANK_STATE_FIELDS`).

A shape is a tuple of size names (`SIZES`, computed per device set by `sizes`) and integers. A field whose size
names a per-channel block (`CHANNEL_MAJOR`: channel-major arrays, channel ch owning block ch) is split between
channels along that axis. To add a field: one `F(...)` line here (before `variant`), then the kernel may read
`S.<name>` (docs/extending.md, "A kernel state field").
"""
from __future__ import annotations

from collections import namedtuple
from typing import Any, NamedTuple

import numpy as np

INF = np.int64(1) << np.int64(62)       # (channel.INF: "never"; here so that this module needs nothing else)
I64 = np.int64
INIT = "init"                           # fill: the array is computed by the allocator's caller (MemorySystem)
VARIANT = "variant"                     # dtype: the kernel variant's (channel._VARIANT_DTYPES)

# Sizes a shape may name (values: `sizes`). Channel-major ones hold a block per channel, channel ch's block first
# at ch * (size / channels); CHANNEL_MAJOR says so (the thread shards and exact reuse split them by channel).
SIZES = {
    "ch": "channels of the device set",
    "cells": "timing cells x commands of one channel (the lowered tables' n_cells * n_cmds)",
    "windows": "window constraint rows (n_win)", "win_nodes": "nodes per window row (n_win_nodes)",
    "window": "the longest window (max_window)",
    "banks": "banks of the device set (channels x banks per channel; a global bank id indexes them)",
    "banks_per_ch": "banks per channel",
    "bufs": "row buffers per bank",
    "pool": "request pool slots (grows: MemorySystem._grow_pool)",
    "ports": "request ports (0 until add_port)", "port_backlog": "backlog capacity per port (grows)",
    "rw_queues": "rw queues: channels x rw sources x (read, write)",
    "bank_queues": "rw queues of one bank: rw sources x (read, write)",
    "rw_sources": "rw sources: channels x rw sources",
    "pin_cap": "pinned requests one rw source may hold: 2 x the longer queue + 2",
    "streams": "stream slots: channels x stream sources (at least 1)",
    "stream_cap": "commands a stream slot holds (grows)",
    "sources": "sources per channel (at least 1)",
    "ref_nodes": "refresh nodes: channels x refresh nodes per channel",
    "cmds": "commands of the standard",
    "log": "command log entries (grows; 1 without a log)",
    "ring": "completion ring entries (grows)",
    "groups": "completion groups by tag (0 until MemorySystem.expect)",
    "cand_width": "values of one source's candidate (the kernel's `cand` row)",
    "cmdq": "entries of one bank's command queue (controller.bank_command_queue; at least 1)",
    "coarse_groups": "groups of a channel's banks that read the same coarsest timing cells (tables.coarse_groups)",
}
CHANNEL_MAJOR = ("ch", "banks", "ref_nodes", "streams", "rw_queues", "rw_sources")
CAND_WIDTH = 9

# Roles: what a field is for.
ROLES = {
    "global": "one value for the whole device set",
    "timing": "per channel: the forward timing state (earliest cycle per cell and command, window histories)",
    "bank": "per bank: row buffers, the streams' last opens",
    "hold": "per bank: holds of work in flight (pinned requests, waiting stream opens); zero when nothing is queued",
    "request": "the request pool: one slot per request, shared by every channel",
    "port": "request ports: in-order backlogs feeding the rw queues",
    "queue": "rw sources: queues, their per-bank request lists and candidate tables",
    "stream": "stream slots: in-order command buffers",
    "arbitration": "per (channel, source): arbitration state",
    "refresh": "per refresh node: the refresh manager",
    "wake": "per channel: the next cycle it may issue",
    "observer": "what was issued and completed; never influences scheduling",
    "scratch": "rewritten every step before it is read",
    "cache": "a remembered answer; its `fill` means unknown (invalidate: write the fill)",
    "epoch": "a count of changes a cache compares against (invalidate: add one)",
    "variant": "the kernel variant: an empty array whose dtype names it",
}
# Flags.
SHARD = "shard"        # threads: every shard of channels has its own copy (merged, or reset, after a region)
COUNT = "count"        # a running count: a channel given another's outcome adds that one's increase (reuse)
BANK_ID = "bank_id"    # holds global bank ids: a channel given another's outcome shifts them to its own banks
FIXED = "fixed"        # never written after allocation


class Field(NamedTuple):
    name: str
    dtype: Any             # numpy scalar type, or VARIANT
    shape: tuple           # size names (SIZES) and ints
    fill: Any              # initial value of every element, or INIT (the caller computes the array)
    role: str              # ROLES
    doc: str
    flags: tuple = ()
    fresh: int | None = None   # request pool: the value a slot gets back when a new request takes it
                               # (None: enqueue_requests writes it)


def F(name: str, dtype: Any, shape: tuple, fill: Any, role: str, doc: str, *flags: str, fresh: int | None = None):
    return Field(name, dtype, tuple(shape), fill, role, doc, tuple(flags), fresh)


B_ = ("banks",)
BQ = ("bank_queues", "banks")
SL = ("streams",)
SC = ("streams", "stream_cap")
CS = ("ch", "sources")

FIELDS: tuple[Field, ...] = (
    F("clock", I64, (1,), 0, "global", "the next cycle to simulate", SHARD),
    # timing (archsim.engine.tables: the forward form)
    F("ready", I64, ("ch", "cells"), 0, "timing", "earliest cycle per (timing cell, command)"),
    F("hist", I64, ("ch", "windows", "win_nodes", "window"), -INF, "timing", "issue cycles per window ring"),
    F("hist_pos", I64, ("ch", "windows", "win_nodes"), 0, "timing", "write position of each window ring"),
    # banks
    F("open_row", I64, ("banks", "bufs"), -1, "bank", "open row per buffer (-1 closed, -2 open at an unknown row)"),
    F("owner", I64, ("banks", "bufs"), -1, "bank", "source that opened the buffer (-1 none)"),
    F("bank_pin", I64, B_, 0, "hold", "requests pinning the bank's row (held open for their column command)"),
    F("reserve", I64, B_, 0, "hold", "stream opens waiting for the bank (no other source may open it)"),
    F("last_open_cmd", I64, ("banks", "bufs"), -1, "bank", "the last open a stream issued there: its command"),
    F("last_open_tgt", I64, ("banks", "bufs"), 0, "bank", "... its target's representative bank", BANK_ID),
    F("last_open_row", I64, ("banks", "bufs"), -1, "bank", "... its row"),
    F("row_hits", I64, B_, 0, "bank", "column commands the open row of buffer 0 served (row_hit_cap)"),
    # the request pool (zeros: pages the OS maps on first write; enqueue_requests initialises every slot it
    # fills, so a pool larger than its use costs no memory traffic)
    F("r_ch", I64, ("pool",), 0, "request", "channel"),
    F("r_bank", I64, ("pool",), 0, "request", "global bank"),
    F("r_row", I64, ("pool",), 0, "request", "row"),
    F("r_col", I64, ("pool",), 0, "request", "column"),
    F("r_kind", I64, ("pool",), 0, "request", "KIND_READ / KIND_WRITE / KIND_RMW"),
    F("r_tag", I64, ("pool",), 0, "request", "completion tag (-1 none)"),
    F("r_arrive", I64, ("pool",), 0, "request", "arrival cycle"),
    F("r_src", I64, ("pool",), 0, "request", "source index in the channel"),
    F("r_enq", I64, ("pool",), 0, "request", "cycle it entered its queue (-1 not yet)", fresh=-1),
    F("r_done", I64, ("pool",), 0, "request", "done cycle (-1 not served)", fresh=-1),
    F("r_class", I64, ("pool",), 0, "request", "0 hit, 1 miss, 2 conflict (its worst)", fresh=0),
    F("r_seq", I64, ("pool",), 0, "request", "age: the channel's sequence number at entry", fresh=0),
    F("r_phase", I64, ("pool",), 0, "request", "rmw as RD + WR: 1 after its RD", fresh=0),
    F("r_nb", I64, ("pool",), 0, "request", "rmw: not before this cycle (RD latency + ALU)", fresh=0),
    F("l_next", I64, ("pool",), 0, "request", "next request in its bank's queue list (-1 end)", fresh=-1),
    F("l_prev", I64, ("pool",), 0, "request", "previous one (-1 head)", fresh=-1),
    # ports
    F("p_buf", I64, ("ports", "port_backlog"), 0, "port", "backlog: request ids in order"),
    F("p_head", I64, ("ports",), 0, "port", "next backlog entry to offer"),
    F("p_tail", I64, ("ports",), 0, "port", "end of the backlog"),
    F("p_width", I64, ("ports",), 0, "port", "requests offered per cycle at most"),
    F("p_src", I64, ("ports",), 0, "port", "rw source fed"),
    F("p_next", I64, ("ports",), INF, "port", "next cycle it may offer"),
    F("p_block", I64, ("ports",), -1, "port", "the full queue it waits for (-1 none)"),
    # rw queues: queue q = (ch * n_rw + k) * 2 + (0 read, 1 write)
    F("qlen", I64, ("rw_queues",), 0, "queue", "entries"),
    F("qcap", I64, ("rw_queues",), INIT, "queue", "capacity (read_queue, write_queue)", FIXED),
    F("wmode", I64, ("rw_sources",), 0, "queue", "write mode"),
    F("l_head", I64, ("banks", "bank_queues"), -1, "queue", "oldest request of the bank in the queue (-1 none)"),
    F("l_tail", I64, ("banks", "bank_queues"), -1, "queue", "youngest one"),
    F("l_cnt", I64, ("banks", "bank_queues"), 0, "queue", "requests of the bank in the queue"),
    F("hitq", I64, ("banks", "bank_queues"), 0, "queue", "... of them hits on buffer 0's open row"),
    F("first_hit", I64, ("banks", "bank_queues"), -1, "queue", "the oldest hit (-1 none)"),
    F("act_list", I64, ("rw_queues", "banks_per_ch"), 0, "queue", "banks with requests in the queue"),
    F("act_n", I64, ("rw_queues",), 0, "queue", "length of act_list"),
    F("act_pos", I64, ("banks", "bank_queues"), 0, "queue", "the bank's position in act_list"),
    F("cand_ri", I64, BQ, 0, "queue", "the bank's candidate: request"),
    F("cand_cmd", I64, BQ, 0, "queue", "... command"),
    F("cand_seq", I64, BQ, 0, "queue", "... age"),
    F("cand_nb", I64, BQ, 0, "queue", "... not before (rmw WR)"),
    F("dirty", np.bool_, B_, False, "queue", "the bank's candidates need recomputing"),
    F("dirty_list", I64, ("ch", "banks_per_ch"), 0, "queue", "dirty banks of the channel", BANK_ID),
    F("dirty_n", I64, ("ch",), 0, "queue", "length of dirty_list"),
    F("pin_list", I64, ("rw_sources", "pin_cap"), 0, "queue", "pinned requests of the rw source"),
    F("pin_n", I64, ("rw_sources",), 0, "queue", "length of pin_list"),
    # streams: slot sl = ch * n_st + m
    F("s_cmd", I64, SC, 0, "stream", "command"),
    F("s_bank", I64, SC, 0, "stream", "target's representative global bank", BANK_ID),
    F("s_row", I64, SC, -1, "stream", "row (-1 unknown)"),
    F("s_col", I64, SC, -1, "stream", "column (-1 unknown)"),
    F("s_flags", I64, SC, 0, "stream", "SEG_START / SEG_END"),
    F("s_est", I64, SC, 0, "stream", "estimated segment duration (stream_refresh: wait)"),
    F("s_tag", I64, SC, -1, "stream", "completion tag (-1 none)"),
    F("s_seq", I64, SC, 0, "stream", "age: the channel's sequence number at entry (-1 not entered)"),
    F("s_head", I64, SL, 0, "stream", "first command not issued"),
    F("s_tail", I64, SL, 0, "stream", "end of the commands"),
    F("s_lastend", I64, SL, 0, "arbitration", "its last issued command had SEG_END (blocked arbitration)"),
    # arbitration per (channel, source)
    F("src_kind", I64, CS, INIT, "arbitration", "0 rw, 1 stream", FIXED),
    F("src_idx", I64, CS, INIT, "arbitration", "index among the channel's rw (stream) sources", FIXED),
    F("starve", I64, CS, -1, "arbitration", "cycle since which it has had a ready candidate and not issued"),
    F("active", I64, ("ch",), -1, "arbitration", "the active source (blocked arbitration; -1 none yet)"),
    F("seq", I64, ("ch",), 0, "arbitration", "the channel's next sequence number (age)", COUNT),
    # refresh per node
    F("ref_due", I64, ("ref_nodes",), INIT, "refresh", "next due cycle"),
    F("ref_pending", I64, ("ref_nodes",), 0, "refresh", "due and not issued: 1 its refresh, 2 an RFM (bits)"),
    F("ref_bank", I64, ("ref_nodes",), 0, "refresh", "per-bank refresh: the node's current bank"),
    F("ch_ref_pending", I64, ("ch",), 0, "refresh", "pending nodes of the channel"),
    F("rfm_at", I64, ("ref_nodes",), INF, "refresh", "cycle the node's pending RFM was requested (rfm_threshold)"),
    F("act_count", I64, B_, 0, "refresh", "activates of the bank since its node's last RFM request (rfm_threshold)"),
    F("n_open", I64, ("ref_nodes",), 0, "bank", "open (bank, buffer)s of the node"),
    # per-state background (DRAMPower's split of standby: precharged while every bank of the node is closed and
    # none refreshing, active otherwise)
    F("pre_since", I64, ("ref_nodes",), 0, "observer", "cycle since which every bank of the node is closed and not "
      "refreshing (-1: a row is open; in the future: a refresh runs until then)"),
    F("pre_cycles", I64, ("ref_nodes",), 0, "observer", "precharged cycles of the node before pre_since", COUNT),
    F("refresh_until", I64, ("ref_nodes",), 0, "observer", "cycle until which the node's last refresh runs (a "
      "per-bank refresh may still run when its node's last open row closes)"),
    F("wake", I64, ("ch",), 0, "wake", "a lower bound of the next cycle the channel can issue"),
    # observers
    F("cmd_count", I64, ("ch", "cmds"), 0, "observer", "commands issued", COUNT),
    F("log_clk", I64, ("log",), 0, "observer", "command log: cycle", SHARD),
    F("log_cmd", I64, ("log",), 0, "observer", "... command", SHARD),
    F("log_bank", I64, ("log",), 0, "observer", "... target's representative global bank", SHARD, BANK_ID),
    F("log_row", I64, ("log",), 0, "observer", "... row", SHARD),
    F("log_col", I64, ("log",), 0, "observer", "... column", SHARD),
    F("log_src", I64, ("log",), 0, "observer", "... source (-1 refresh)", SHARD),
    F("n_log", I64, (1,), 0, "observer", "log entries", SHARD),
    F("c_tag", I64, ("ring",), 0, "observer", "completion ring: tag", SHARD),
    F("c_done", I64, ("ring",), 0, "observer", "... done cycle", SHARD),
    F("c_id", I64, ("ring",), 0, "observer", "... request id (a stream command: -1 - its index; a group: -1)", SHARD),
    F("n_comp", I64, (1,), 0, "observer", "ring entries", SHARD),
    F("min_pending", I64, (1,), INF, "observer", "the earliest done cycle in the ring (advance stops there)", SHARD),
    F("outstanding", I64, (1,), 0, "observer", "requests and stream commands not yet issued", SHARD),
    F("progress", I64, (4,), 0, "observer", "[0] requests served, [1] last cycle anything issued or entered",
      SHARD),
    F("cand", I64, ("sources", "cand_width"), 0, "scratch", "the step's candidate per source", SHARD),
    F("s_maxdone", I64, SL, 0, "observer", "the stream's latest done cycle"),
    F("run_cmds", I64, ("ch",), 0, "observer", "commands issued by runs (exact multi-command steps) after their "
      "first", COUNT),
    F("r_pin", I64, ("pool",), 0, "request", "pinned (holds its bank's row for its column command)", fresh=0),
    F("s_at", I64, SC, 0, "stream", "entry cycle"),
    F("s_in", I64, SL, 0, "stream", "first command not yet entered"),
    F("st_next", I64, (1,), INF, "stream", "next entry cycle of any stream"),
    F("promo", I64, CS, 0, "scratch", "promoted this step (starvation cap)"),
    F("promo_ready", I64, CS, 0, "scratch", "had a ready candidate this step"),
    F("held", I64, CS, 0, "scratch", "held back by the threshold gate this step (threshold arbitrations)"),
    F("g_left", I64, ("groups",), 0, "observer", "completion groups: items still to complete", SHARD),
    F("g_done", I64, ("groups",), -1, "observer", "... latest done cycle so far", SHARD),
    # caches (never change results): a lower bound of each rw candidate's earliest cycle (timing cells only
    # rise, so a value computed earlier stays a lower bound; 0 = unknown); per stream the (rows epoch, target,
    # row) at which its head's rows were last found open
    F("cand_t", I64, BQ, 0, "cache", "a lower bound of the bank candidate's earliest cycle"),
    F("ch_rows_epoch", I64, ("ch",), 0, "epoch", "row-buffer changes of the channel"),
    F("s_ok_epoch", I64, SL, -1, "cache", "rows epoch at which the head's rows were found open"),
    F("s_ok_tgt", I64, SL, -1, "cache", "... the head's target then"),
    F("s_ok_row", I64, SL, -1, "cache", "... and row"),
    F("ch_pin_epoch", I64, ("ch",), 0, "epoch", "bank pin / reservation changes of the channel"),
    # bank_command_queue (DRAMsim3's two-level queues) and merge_reads
    F("cq_req", I64, ("banks", "cmdq"), 0, "queue", "requests of each bank's command queue, in order"),
    F("cq_n", I64, B_, 0, "queue", "entries of the bank's command queue"),
    F("cq_rr", I64, ("ch",), 0, "queue", "local bank whose command queue issued last (round robin)"),
    F("cq_drain", I64, ("ch",), 0, "queue", "writes left to move in the current write drain"),
    F("cq_t", I64, B_, 0, "cache", "bank_command_queue: a lower bound of the earliest cycle a command of the bank's "
      "queue may issue (timing cells only rise; 0 unknown, INF none; its queue, row or hits changing resets it)"),
    F("r_follow", I64, ("pool",), -1, "request", "the next read merged into this one (done with it; -1 none)",
      fresh=-1),
    F("variant", VARIANT, (0,), 0, "variant", "its dtype names the kernel variant", FIXED),
)

# The deep-window kernel variants' own fields (channel._ordered_scan; pim_dual_deep, pim_blocked_deep): their
# state is a DeepState, State with these after it. Every other variant's state leaves them out: each field is
# several machine words of every non-inlined kernel call (a call passes the state by value), and adding these to
# State made the shallow NeuPIMs kernel ~30 % slower though nothing read them (docs/performance.md, "deep request
# window").
DEEP_FIELDS: tuple[Field, ...] = (
    F("ord_list", I64, ("rw_queues", 2, "coarse_groups", "banks_per_ch"), 0, "queue", "banks with a candidate in the "
      "queue, a column command's (0) and a row command's (1) apart, per group of banks (`coarse_group`), oldest "
      "candidate first: the rw scan's order"),
    F("ord_n", I64, ("rw_queues", 2, "coarse_groups"), 0, "queue", "lengths of ord_list"),
    F("ord_ncmd", I64, ("rw_queues", 2, "coarse_groups", "cmds"), 0, "queue", "... how many of its banks' candidates "
      "are each command"),
    F("ord_cls", I64, BQ, -1, "queue", "the ord_list the bank is in (-1 none)"),
    F("coarse_group", I64, ("banks_per_ch",), INIT, "queue", "the bank's group: banks reading the same coarsest "
      "timing cells (tables.coarse_groups)", FIXED),
)

BY_NAME = {f.name: f for f in FIELDS + DEEP_FIELDS}
State = namedtuple("State", [f.name for f in FIELDS])
DeepState = namedtuple("DeepState", [f.name for f in FIELDS + DEEP_FIELDS])


def _named(pred) -> tuple[str, ...]:
    return tuple(f.name for f in FIELDS if pred(f))


POOL_FIELDS = _named(lambda f: f.shape == ("pool",))
STREAM_SLOT_FIELDS = _named(lambda f: f.shape == SC)
LOG_FIELDS = _named(lambda f: f.shape == ("log",))
RING_FIELDS = _named(lambda f: f.shape == ("ring",))
# the fields that only cache answers (tests comparing two runs' states skip them; code that writes a channel's
# timing, rows or pins from outside the kernel must invalidate them: `invalidate_caches`)
CACHE_FIELDS = _named(lambda f: f.role in ("cache", "epoch"))
SHARD_FIELDS = _named(lambda f: SHARD in f.flags)


def channel_axis(f: Field) -> int | None:
    """The axis of `f` split between channels (a CHANNEL_MAJOR size), or None."""
    return next((i for i, d in enumerate(f.shape) if d in CHANNEL_MAJOR), None)


def channel_index(f: Field, size: dict, ch: int) -> tuple:
    """Index of channel ch's part of field f (one with a channel axis), for sizes `size`."""
    ax = channel_axis(f)
    n = size[f.shape[ax]] // size["ch"]
    return (slice(None),) * ax + (slice(ch * n, (ch + 1) * n),)


# exact reuse (archsim/engine/reuse.py): what an op of one stream per channel leaves in a channel and an
# identical channel therefore gets from it (state that can change without refresh, per channel), and the part
# of it a channel's memo key holds (its timing and bank state)
_OUTCOME_ROLES = ("timing", "bank", "arbitration", "wake", "observer")
OUTCOME_FIELDS = _named(lambda f: f.role in _OUTCOME_ROLES and channel_axis(f) is not None and FIXED not in f.flags)
OUTCOME_COUNTS = tuple(f for f in OUTCOME_FIELDS if COUNT in BY_NAME[f].flags)
BANK_STATE_FIELDS = _named(lambda f: f.role == "bank" and f.shape[0] == "banks")


def sizes(*, channels: int, banks_per_ch: int, bufs: int, cmds: int, cells: int, windows: int, win_nodes: int,
          window: int, ref_nodes_per_ch: int, sources: int, rw: int, requests: int, stream_capacity: int,
          queue_max: int, log: bool, cmdq: int = 0, coarse_groups: int = 1) -> dict[str, int]:
    """The sizes (SIZES) of one device set's state."""
    st = sources - rw
    rw1 = max(rw, 1)
    return {
        "ch": channels, "cells": cells, "windows": windows, "win_nodes": win_nodes, "window": window,
        "banks": channels * banks_per_ch, "banks_per_ch": banks_per_ch, "bufs": bufs,
        "pool": max(int(requests), 1), "ports": 0, "port_backlog": 1,
        "rw_queues": channels * rw1 * 2, "bank_queues": rw1 * 2, "rw_sources": channels * rw1,
        "pin_cap": queue_max * 2 + 2, "streams": max(channels * st, 1), "stream_cap": max(int(stream_capacity), 1),
        "sources": max(sources, 1), "ref_nodes": channels * ref_nodes_per_ch, "cmds": cmds,
        "log": 4096 if log else 1, "ring": 4096, "groups": 0, "cand_width": CAND_WIDTH,
        "cmdq": max(int(cmdq), 1), "coarse_groups": coarse_groups,
    }


def shape_of(f: Field, size: dict) -> tuple[int, ...]:
    return tuple(size[d] if isinstance(d, str) else d for d in f.shape)


def allocate(names: tuple[str, ...] | list[str], size: dict, init: dict | None = None) -> dict[str, np.ndarray]:
    """Arrays of fields `names` for sizes `size`: every element the declared fill (zeros stay unwritten pages),
    or for INIT fields the array `init` gives, checked against the declared dtype and shape."""
    out = {}
    for name in names:
        f = BY_NAME[name]
        shape = shape_of(f, size)
        if f.fill is INIT or f.dtype is VARIANT:
            a = (init or {}).get(name)
            if a is None:
                raise ValueError(f"state field {name}: its array is computed by the caller and was not given")
            if a.shape != shape or (f.dtype is not VARIANT and a.dtype != f.dtype):
                raise ValueError(f"state field {name}: given {a.dtype}{a.shape}, declared {np.dtype(f.dtype)}{shape}")
            out[name] = a
        elif f.fill == 0:
            out[name] = np.zeros(shape, f.dtype)
        else:
            out[name] = np.full(shape, f.fill, f.dtype)
    return out


def new_state(size: dict, init: dict, deep: bool = False) -> State:
    """A fresh state for sizes `size`; `init` holds the arrays of the INIT fields. deep: a DeepState (the
    deep-window kernel variant's)."""
    kind = DeepState if deep else State
    return kind(**allocate(kind._fields, size, init))


def reset_pool(S: State, a: int, b: int) -> None:
    """The engine-owned fields of request pool slots [a, b) back to a fresh request's (`fresh`)."""
    for name in POOL_FIELDS:
        v = BY_NAME[name].fresh
        if v is not None:
            getattr(S, name)[a:b] = v


_CACHE_DECLS = tuple(BY_NAME[f] for f in CACHE_FIELDS)


def invalidate_caches(S: State, channel: int | None = None, size: dict | None = None) -> None:
    """Forget the kernel's cached answers (of one channel, or all): answers back to their fill (unknown),
    epochs advanced. Needed after code outside the kernel wrote timing, rows or pins."""
    for f in _CACHE_DECLS:
        a = getattr(S, f.name)
        if channel is not None:
            a = a[channel_index(f, size, channel)]
        if f.role == "epoch":
            a += 1
        else:
            a.fill(f.fill)
