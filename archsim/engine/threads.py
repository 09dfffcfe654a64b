"""Channels sharded over threads (docs/channel-engine.md, "Threads"): the coordinator of a MemorySystem built
with threads > 1.

Between two coupling cycles (a port offer, a stream intake, a tagged completion, the bound of advance()) the
channels of a device set do not interact. The coordinator runs the coupling cycles on one thread with the
ordinary kernel (`channel.advance`) and the stretches between them, *regions*, with every shard of channels
[lo, hi) advancing in its own thread (`channel.advance_shard`, numba `nogil`). A shard state shares every
per-channel array with the MemorySystem's state and has its own copies of what all channels write (command
log, completion ring, counters, candidate scratch); after a region they are merged in cycle order, channels
ascending within a cycle, the order one thread produces. Results are bit-identical for every thread count
(tests/test_engine_threads.py).

This module holds no numba code: the compiled functions live in archsim/engine/channel.py beside `_step`,
so that numba's per-file cache recompiles them whenever the step changes; the MemorySystem
(archsim/engine/memory.py) builds the coordinator.
"""
from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

from archsim.dram.roles import R_RD, R_RDA, R_UPD, R_UPDA, R_WR, R_WRA
from archsim.engine import channel, compiling, state

# Regions shorter than REGION_MIN cycles run on one thread (a hand-off to the threads costs more than they
# save); a region is at most REGION_MAX cycles (the shards' log and completion buffers hold that many); while
# no region opens, one thread runs spans doubling up to SERIAL_SPAN_MAX cycles before the coordinator looks
# again (a trace offers every cycle: it then runs on one thread almost entirely).
REGION_MIN = 8
REGION_MAX = 4096
SERIAL_SPAN_MAX = 4096

# set_threads(): the default of new MemorySystems (None = every core). One thread until measured otherwise: see
# docs/performance.md (benchmarks/bench_threads.py)
_DEFAULT: list[int | None] = [1]

# what the coordinators did, per MemorySystem (`ms.sync`) and summed over this process (TOTALS): parallel
# regions and their cycles, one-thread kernel calls and their cycles, simulated time (ps), wall seconds of the
# one-thread calls, of the regions (threads + merge), of the shards' kernels summed over threads, of merges
SYNC_KEYS = ("regions", "region_cycles", "serial_calls", "serial_cycles", "sim_ps", "serial_s", "region_s",
             "shard_s", "merge_s")
TOTALS = dict.fromkeys(SYNC_KEYS, 0)


def set_threads(n: int | None) -> None:
    """The worker-thread count of new MemorySystems (CLI `--threads`); None = every core this process may run
    on. Not a config key: threads change no result, so they are no part of a run's config or its hash (and
    `engine` is already a key of its own in PIM-GPT's config)."""
    _DEFAULT[0] = None if n is None else check_threads(n)


def check_threads(n: Any, key: str = "threads") -> int:
    from archsim.errors import ConfigError

    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
        raise ConfigError(key, f"must be a whole number >= 1, got {n!r}")
    return int(n)


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def resolve_threads(n: int | None = None) -> int:
    """Worker threads for a MemorySystem: n, else the set default, else every core."""
    if n is None:
        n = _DEFAULT[0]
    return max(1, cores()) if n is None else check_threads(n)


def _timed(fn, *args):
    t0 = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t0


class Coordinator:
    """Runs advance() of one MemorySystem on `threads` shards of its channels."""

    def __init__(self, ms: Any, threads: int):
        self.ms = ms
        self.ch = channel         # the kernels and constants it runs
        self.threads = threads
        self.sync = dict.fromkeys(SYNC_KEYS, 0)
        self._shards: tuple | None = None          # (the state they were built for, [(lo, hi, state, c_clk)])
        self._kernels: tuple | None = None         # (the state they were compiled for, (shard, replay))
        self._pool = None
        T = ms.tables
        # a command issued at cycle c completes no earlier than c + its latency: while a tagged completion may
        # come from it, a region is no longer (the completion would have stopped advance() inside it). Requests
        # complete with their column command; note_stream lowers it for tagged stream commands.
        col = [T.role[r] for r in (R_RD, R_RDA, R_WR, R_WRA, R_UPD, R_UPDA) if T.role[r] >= 0]
        self.lat_min = int(T.cmd_lat[col].min()) if col else 0
        # tags that were outside a completion group when enqueued (a driver may expect() them afterwards):
        # while one is not grouped, any tagged item may stop advance() and regions are at most lat_min long
        self.loose: set[int] = set()
        self.span = 1

    # -- what enqueueing tells it ------------------------------------------------------------------------
    def note_tags(self, tag: np.ndarray) -> None:
        t = np.asarray(tag, dtype=np.int64).reshape(-1)
        t = t[t >= 0]
        if t.size:
            g = self.ms.S.g_left
            t = np.unique(t)
            grouped = (t < g.shape[0]) & (g[np.minimum(t, max(g.shape[0] - 1, 0))] > 0) if g.size else t < 0
            self.loose.update(t[~grouped].tolist())

    def note_stream(self, cmd: np.ndarray, tag: np.ndarray) -> None:
        tagged = cmd[tag >= 0]
        if tagged.size:
            self.lat_min = min(self.lat_min, int(self.ms.tables.cmd_lat[tagged].min()))
            self.note_tags(tag)

    # -- advancing -----------------------------------------------------------------------------------------
    def advance(self, until: int) -> int:
        """channel.advance(until) with the channels sharded: one thread through the cycles that couple channels
        (port offers, stream intake, completions), the shards in parallel over the regions between them. Same
        statuses, state and observers as one kernel call (ST_LOG_FULL included)."""
        ch = self.ch
        ms = self.ms
        while True:
            clk = int(ms.S.clock[0])
            end = self._region_end(clk, until)
            if end - clk < REGION_MIN:
                # coupling cycles, or too short a gap: one thread, over a span that doubles while no region opens.
                # An unbounded run stops once nothing is left, which the kernel only checks with the real bound:
                # pass that when the span could see the last item complete (at most two per channel a cycle)
                stop = min(until, clk + self.span)
                if until >= ch.INF and int(ms.S.outstanding[0]) <= 2 * int(ms.cf[ch.CF_CH]) * self.span:
                    stop = until
                t0 = time.perf_counter()
                st = ms._call_kernel(stop)
                self._count(serial_calls=1, serial_cycles=int(ms.S.clock[0]) - clk, serial_s=time.perf_counter() - t0)
                if st != ch.ST_UNTIL or stop >= until:
                    return st
                self.span = min(2 * self.span, SERIAL_SPAN_MAX)
                continue
            self.span = 1
            st = self._region(clk, end)
            if st != ch.ST_UNTIL:
                return st

    def _completion_window(self) -> int:
        """Cycles from a region's start within which no tagged completion can fall: the shortest latency of a
        tagged command while an ungrouped tagged item may be in flight; otherwise also as long as no completion
        group can lose its last item (a channel completes at most two items a cycle)."""
        ch = self.ch
        S = self.ms.S
        g = S.g_left
        if self.loose:
            self.loose = {t for t in self.loose if not (t < g.shape[0] and g[t] > 0)}
            if self.loose and int(S.outstanding[0]) == 0 and int(S.n_comp[0]) == 0:
                self.loose.clear()                 # nothing in flight: no loose item is left
        if self.loose:
            return self.lat_min
        left = g[g > 0] if g.size else g
        if not left.size:
            return int(ch.INF)
        return max(self.lat_min, (int(left.min()) - 1) // (2 * int(self.ms.cf[ch.CF_CH])))

    def _region_end(self, clk: int, until: int) -> int:
        """The end of the longest region from clk in which no channel can affect another: before the next port
        offer, stream intake, pending completion, completion a command issued in it could cause, bound, timeout
        or stall check; none while a port is blocked (a served request would unblock it mid-region)."""
        ch = self.ch
        S, cf = self.ms.S, self.ms.cf
        if S.p_block.size and int(S.p_block.max()) >= 0:
            return clk
        end = min(until, int(S.st_next[0]), int(S.min_pending[0]), clk + REGION_MAX,
                  int(cf[ch.CF_MAX_CYCLES]) + 1, int(S.progress[1]) + int(ch.STALL_CYCLES) + 1)
        if S.p_next.size:
            end = min(end, int(S.p_next.min()))
        if until >= ch.INF:
            # an unbounded run stops when nothing is left: keep at least one item outstanding through the region
            end = min(end, clk + (int(S.outstanding[0]) - 1) // (2 * int(cf[ch.CF_CH])))
        if end - clk >= REGION_MIN:
            end = min(end, clk + self._completion_window())
        return end

    def _shard_states(self) -> list:
        """Per shard: (lo, hi, shard state, completion cycles). A shard state shares every per-channel array
        with the MemorySystem's state and has its own copies of what all channels write: log, completion ring
        (raw items: the completion groups are applied at the merge), counters, candidate scratch."""
        ch = self.ch
        S = self.ms.S
        if self._shards is not None and self._shards[0] is S:
            return self._shards[1]
        nch = int(self.ms.cf[ch.CF_CH])
        n = self.threads
        out = []
        for i in range(n):
            lo, hi = nch * i // n, nch * (i + 1) // n
            nl = 3 * (hi - lo) * REGION_MAX if self.ms.cf[ch.CF_LOG] else 1
            nc = 2 * (hi - lo) * REGION_MAX
            # the fields every channel writes (state.SHARD_FIELDS), fresh; groups are applied at the merge
            own = state.allocate(state.SHARD_FIELDS, dict(self.ms.sizes, log=nl, ring=nc, groups=0))
            sh = S._replace(**own)
            out.append((lo, hi, sh, np.zeros(nc, np.int64)))
        self._shards = (S, out)
        return out

    def load_kernel(self) -> tuple:
        """(advance_shard, _replay_completions) compiled for this state's types, looked up once (as
        MemorySystem._call_kernel does); compile time is counted apart from simulation time."""
        ch = self.ch
        ms = self.ms
        if self._kernels is None or self._kernels[0] is not ms.S:
            import numba

            i64 = numba.typeof(np.int64(0))
            arr = numba.typeof(np.zeros(1, np.int64))
            state = numba.typeof(ms.S)
            sig = (state, numba.typeof(ms.tables), numba.typeof(ms.cf), i64, i64, i64, arr)
            shard = compiling.compile(ch.advance_shard, sig, "the threaded channel kernel (engine.threads > 1) for "
                                      "this configuration", note="it is cached; --threads 1 does without it")
            self._kernels = (ms.S, (shard, compiling.compile(ch._replay_completions, (state, arr, arr, arr), None)))
        return self._kernels[1]

    def _region(self, clk: int, end: int) -> int:
        """Advance every shard over [clk, end) in parallel, then merge their observers. Returns ST_UNTIL, or
        the idle / deadlock status one thread would have stopped with inside the region."""
        ch = self.ch
        ms = self.ms
        nch = int(ms.cf[ch.CF_CH])
        if ms.cf[ch.CF_LOG]:
            while int(ms.S.n_log[0]) + 3 * nch * (end - clk + 1) > ms.S.log_clk.shape[0]:
                ms._grow_log()
        S = ms.S
        if S.c_tag.shape[0] - int(S.n_comp[0]) < 2 * nch * (end - clk) + 4096:
            m = 2 * S.c_tag.shape[0] + 2 * nch * (end - clk)
            ms._grow_ring(m)
            S = ms.S
        shards = self._shard_states()
        kernel, replay = self.load_kernel()
        for _lo, _hi, sh, _cc in shards:
            sh.clock[0] = clk
            sh.n_log[0] = sh.n_comp[0] = sh.outstanding[0] = sh.progress[0] = 0
            sh.progress[1] = -1
            sh.min_pending[0] = ch.INF
        T, cf, e = ms.tables, ms.cf, np.int64(end)
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(self.threads - 1, thread_name_prefix="archsim-shard")
        t0 = time.perf_counter()
        futs = [self._pool.submit(_timed, kernel, sh, T, cf, np.int64(lo), np.int64(hi), e, cc)
                for lo, hi, sh, cc in shards[1:]]
        lo, hi, sh, cc = shards[0]
        got = [_timed(kernel, sh, T, cf, np.int64(lo), np.int64(hi), e, cc)] + [f.result() for f in futs]
        t1 = time.perf_counter()
        self._merge(shards, replay)
        S.clock[0] = end
        self._count(regions=1, region_cycles=end - clk, region_s=time.perf_counter() - t0,
                    shard_s=sum(x[1] for x in got), merge_s=time.perf_counter() - t1)
        if (int(S.wake.min()) >= ch.INF and int(S.st_next[0]) >= ch.INF and int(S.min_pending[0]) >= ch.INF
                and (not S.p_next.size or int(S.p_next.min()) >= ch.INF)):
            # nothing can happen any more: one thread stops after the step of the last channel that stepped
            S.clock[0] = max(max(x[0] for x in got), clk) + 1
            return ch.ST_IDLE if int(S.outstanding[0]) == 0 else ch.ST_DEADLOCK
        return ch.ST_UNTIL

    def _merge(self, shards: list, replay: Any) -> None:
        """Shard observers into the state: log entries and completions by cycle, shards in channel order (a
        stable sort keeps each shard's own order within a cycle); counters summed."""
        ch = self.ch
        S = self.ms.S
        if self.ms.cf[ch.CF_LOG]:
            parts = [(sh, int(sh.n_log[0])) for _, _, sh, _ in shards]
            tot = sum(k for _, k in parts)
            if tot:
                order = np.argsort(np.concatenate([sh.log_clk[:k] for sh, k in parts]), kind="stable")
                n0 = int(S.n_log[0])
                for f in state.LOG_FIELDS:
                    getattr(S, f)[n0:n0 + tot] = np.concatenate([getattr(sh, f)[:k] for sh, k in parts])[order]
                S.n_log[0] = n0 + tot
        pick = [(sh, cc, int(sh.n_comp[0])) for _, _, sh, cc in shards if sh.n_comp[0]]
        if pick:
            order = np.argsort(np.concatenate([cc[:k] for _, cc, k in pick]), kind="stable")
            tag, done, ident = (np.concatenate([getattr(sh, f)[:k] for sh, _, k in pick])[order]
                                for f in state.RING_FIELDS)
            replay(S, tag, done, ident)
        for _, _, sh, _ in shards:
            S.outstanding[0] += sh.outstanding[0]
            S.progress[0] += sh.progress[0]
            if sh.progress[1] > S.progress[1]:
                S.progress[1] = sh.progress[1]

    def _count(self, **inc) -> None:
        dt = inc.get("serial_cycles", 0) + inc.get("region_cycles", 0)
        inc["sim_ps"] = dt * self.ms.spec.tCK_ps
        for k, v in inc.items():
            self.sync[k] += v
            TOTALS[k] += v
