"""PIM channel engine: executes per-channel command streams in order, each command at the earliest cycle
its timing constraints allow (event-driven: time jumps straight to that cycle; idle cycles are never visited).

Timing state is the forward ready table of archsim.engine.dram_kernel: ready[node, cmd] is the earliest cycle
`cmd` may issue at that node; issuing `prev` at t raises ready[node_of_level(L), next] to t + latency for every
constraint row (L, prev, next, latency), windowed rows keep a ring of the last `window` issue times. One
command per cycle on the channel's single command bus.

`run_segment` is the plain-Python reference; `run_segment_jit` is the same function compiled by numba
(cache=True). Tests require them equal cycle for cycle.

`run_channels` / `run_channels_jit` run all channels of one op in one call (streams concatenated, `offs`
delimiting the channels); each channel is exactly `run_segment` on its slice.

Memoisation: the engine is deterministic and shift-invariant, so the outcome of a segment depends only on
the command sequence and on the timing state *relative to* the segment's start cycle (values at or before
the start never bind). `PimEngine.run` keys a memo on (segment key, normalised state) and stores the
relative end state, so a reused result is exactly what a full simulation would produce.

Normalised states are interned: each distinct one gets a small integer id (`state_id`), and after a memo
hit the engine keeps its state *virtually* as (id, base cycle), materialising the arrays only when a
kernel has to run. Moving the reference point forward by `delta` cycles maps an id to another id (clipping
is monotone: values that no longer bind saturate at the same floors), which is cached, so a chain of memo
hits costs a few dictionary look-ups and no array work. Callers (archsim.pim.system) use `state_id` to key
coarser memos (a whole layer) on the same exact state.
"""
from __future__ import annotations

import time
from typing import Any

import numba
import numpy as np

from archsim.dram.spec import DramSpec, load_spec
from archsim.dram.system import kernel_tables

INF = np.int64(1) << np.int64(62)


def run_segment(cmd, bank, t_min, node_of, cmd_scope, con_start, con_end, con_level, con_next, con_lat,
                con_window, con_win_id, done_lat, ready, hist, hist_pos, last, issue, counts):
    """Issue cmd[i] (at bank[i]) in order. Returns the cycle at which the last command has completed."""
    n = cmd.shape[0]
    t_prev = last[0] + 1
    if t_min > t_prev:
        t_prev = t_min
    end = t_min
    for i in range(n):
        c = cmd[i]
        b = bank[i]
        t = t_prev
        for k in range(cmd_scope[c] + 1):
            v = ready[node_of[b, k], c]
            if v > t:
                t = v
        issue[i] = t
        for j in range(con_start[c], con_end[c]):
            node = node_of[b, con_level[j]]
            nc = con_next[j]
            win = con_window[j]
            if win <= 1:
                v = t + con_lat[j]
            else:
                wid = con_win_id[j]
                pos = hist_pos[wid, node]
                hist[wid, node, pos] = t
                pos = (pos + 1) % win
                hist_pos[wid, node] = pos
                v = hist[wid, node, pos] + con_lat[j]   # oldest of the last `win` issues
            if v > ready[node, nc]:
                ready[node, nc] = v
        counts[c] += 1
        e = t + done_lat[c]
        if e > end:
            end = e
        t_prev = t + 1
    if n > 0:
        last[0] = t_prev - 1
    return end


run_segment_jit = numba.njit(cache=True, nogil=True)(run_segment)


def run_channels(cmd, bank, offs, t_min, node_of, cmd_scope, con_start, con_end, con_level, con_next, con_lat,
                 con_window, con_win_id, done_lat, ready, hist, hist_pos, last, issue, counts, ends):
    """Channel ch runs cmd[offs[ch]:offs[ch+1]] with `run_segment` on its own state (ready[ch], ...);
    ends[ch] (preset by the caller to t_min) receives its completion cycle."""
    for ch in range(offs.shape[0] - 1):
        a = offs[ch]
        b = offs[ch + 1]
        if b > a:
            ends[ch] = run_segment(cmd[a:b], bank[a:b], t_min, node_of, cmd_scope, con_start, con_end, con_level,
                                   con_next, con_lat, con_window, con_win_id, done_lat, ready[ch], hist[ch],
                                   hist_pos[ch], last[ch], issue[a:b], counts[ch])


@numba.njit(cache=True, nogil=True)
def run_channels_jit(cmd, bank, offs, t_min, node_of, cmd_scope, con_start, con_end, con_level, con_next,
                     con_lat, con_window, con_win_id, done_lat, ready, hist, hist_pos, last, issue, counts, ends):
    """`run_channels` compiled; calls the compiled `run_segment` per channel."""
    for ch in range(offs.shape[0] - 1):
        a = offs[ch]
        b = offs[ch + 1]
        if b > a:
            ends[ch] = run_segment_jit(cmd[a:b], bank[a:b], t_min, node_of, cmd_scope, con_start, con_end,
                                       con_level, con_next, con_lat, con_window, con_win_id, done_lat, ready[ch],
                                       hist[ch], hist_pos[ch], last[ch], issue[a:b], counts[ch])


def completion_latency(spec: DramSpec) -> np.ndarray:
    """Cycles from issue until a command's effect is complete (data returned / written / computed)."""
    t = spec.timing
    lat = np.ones(len(spec.commands), dtype=np.int64)
    for c in spec.commands:
        if c.name in ("RD", "RDA", "RDMAC"):
            lat[c.index] = t["nCL"] + t["nBL"]          # read data has crossed the bus
        elif c.name in ("WR", "WRA", "WRGB"):
            lat[c.index] = t["nCWL"] + t["nBL"]
        elif c.name == "MACAB":
            lat[c.index] = t["nMACRD"]
        elif c.name == "AF":
            lat[c.index] = t["nAFRD"]
        elif c.name in ("PRE", "PREA", "PREAB"):
            lat[c.index] = t["nRP"]
    return lat


class PimEngine:
    """Timing state of `channels` independent PIM channels plus the memo of segment outcomes."""

    def __init__(self, spec: DramSpec, channels: int | None = None, engine: str = "numba", memo: bool = True,
                 log: bool = False):
        if engine not in ("numba", "python"):
            from archsim.errors import UserError

            raise UserError(f"engine {engine!r}: must be numba or python")
        self.spec = spec
        self.channels = channels or spec.channels
        one = spec if spec.channels == 1 else load_spec(spec.raw, overrides={"org.channels": 1})
        self.tabs = kernel_tables(one)
        tb = self.tabs
        self._tab_args = (tb["node_of"], tb["cmd_scope"], tb["con_start"], tb["con_end"], tb["con_level"],
                          tb["con_next"], tb["con_lat"], tb["con_window"], tb["con_win_id"])
        self.n_cmds = len(spec.commands)
        self.done_lat = completion_latency(spec)
        self.fn = run_segment_jit if engine == "numba" else run_segment
        self.engine = engine
        self.memo_on = memo and not log
        self.log_on = log
        C, N = self.channels, self.tabs["n_nodes"]
        W, MW = max(self.tabs["n_windows"], 1), max(self.tabs["max_window"], 1)
        self.ready = np.zeros((C, N, self.n_cmds), dtype=np.int64)
        self.hist = np.full((C, W, N, MW), -INF, dtype=np.int64)
        self.hist_pos = np.zeros((C, W, N), dtype=np.int64)
        self.last = np.full((C, 1), -1, dtype=np.int64)
        self.max_lat = int(max(self.tabs["con_lat"].max(initial=0), self.done_lat.max()))
        win = self.tabs["con_window"]
        self._mixed_windows = bool(len(set(win[win > 1].tolist())) > 1)   # rotation needs one ring length
        # memo: (segment key, state id) -> (end_rel_max, counts summed over channels, end state id,
        #                                   end_rel per channel, counts per channel)
        self.memo: dict[Any, tuple] = {}
        self._sid_of: dict[bytes, int] = {}            # normalised state bytes -> state id
        self._states: list[tuple] = []                 # state id -> (ready, hist, hist_pos, last, saturation)
        self._shift: dict[tuple[int, int], int] = {}   # (state id, delta) -> state id
        self._virtual: tuple[int, int] | None = None   # (state id, base) of the current state, if known
        self._arrays_ok = True                         # the arrays hold the current state (else: _virtual)
        self.memo_hits = 0
        self.memo_misses = 0
        self.commands_simulated = 0
        self.kernel_s = 0.0
        self.logs: list[list[tuple[np.ndarray, Any]]] = [[] for _ in range(C)]

    # -- state normalisation (for the memo) ---------------------------------------------------------------
    def _canonicalise(self) -> None:
        """Rotate every window ring so its write position is 0 (same state, fewer memo variants)."""
        if not self.hist_pos.any() or self._mixed_windows:
            return
        mw = self.hist.shape[-1]
        idx = (self.hist_pos[..., None] + np.arange(mw)) % mw
        self.hist[:] = np.take_along_axis(self.hist, idx, axis=-1)
        self.hist_pos[:] = 0

    def _intern(self, ready: np.ndarray, hist: np.ndarray, hist_pos: np.ndarray, last: np.ndarray) -> int:
        """Id of a normalised relative state (ready >= 0, hist >= -max_lat-1, last >= -1)."""
        key = ready.tobytes() + hist.tobytes() + hist_pos.tobytes() + last.tobytes()
        sid = self._sid_of.get(key)
        if sid is None:
            # shift beyond which every value sits at its floor (the state no longer changes)
            sat = max(int(ready.max(initial=0)), int(hist.max(initial=-self.max_lat - 1)) + self.max_lat + 1,
                      int(last.max(initial=-1)) + 1, 0)
            sid = self._sid_of[key] = len(self._states)
            self._states.append((ready, hist, hist_pos, last, sat))
        return sid

    def _sid_of_arrays(self, t0: int) -> int:
        self._canonicalise()
        ready = np.maximum(self.ready - t0, 0)
        hist = np.maximum(self.hist - t0, -self.max_lat - 1)
        last = np.maximum(self.last - t0, -1)
        return self._intern(ready, hist, self.hist_pos.copy(), last)

    def state_id(self, t0: int) -> int:
        """Id of the current timing state relative to cycle t0 (equal ids => equal behaviour of any command
        sequence started at t0). Memo on only."""
        v = self._virtual
        if v is None:
            return self._sid_of_arrays(t0)
        sid, base = v
        delta = t0 - base
        if delta == 0:
            return sid
        if delta < 0:                                  # reference moved back: work on the arrays
            self._materialise()
            return self._sid_of_arrays(t0)
        st = self._states[sid]
        if delta > st[4]:
            delta = st[4]
        got = self._shift.get((sid, delta))
        if got is None:
            ready, hist, hist_pos, last, _ = st
            got = self._intern(np.maximum(ready - delta, 0), np.maximum(hist - delta, -self.max_lat - 1),
                               hist_pos, np.maximum(last - delta, -1))
            self._shift[(sid, delta)] = got
        return got

    def set_state(self, sid: int, t0: int) -> None:
        """Make the timing state the interned state `sid` relative to cycle t0."""
        self._virtual = (sid, t0)
        self._arrays_ok = False

    def _materialise(self) -> None:
        """Make the arrays hold the current state; afterwards they are the only description of it."""
        v = self._virtual
        self._virtual = None
        if self._arrays_ok or v is None:
            self._arrays_ok = True
            return
        sid, t0 = v
        ready, hist, hist_pos, last, _ = self._states[sid]
        self.ready[:] = ready + t0
        self.hist[:] = np.where(hist <= -self.max_lat - 1, -INF, hist + t0)
        self.hist_pos[:] = hist_pos
        self.last[:] = last + t0
        self._arrays_ok = True

    def sync(self) -> None:
        """Bring the state arrays (ready, hist, hist_pos, last) up to date."""
        self._materialise()

    # -- running ----------------------------------------------------------------------------------------
    def _memo_lookup(self, key: Any, t_min: int) -> tuple[Any, Any]:
        """(memo key, entry or None). A hit already moves the engine to the entry's end state."""
        if not self.memo_on or key is None:
            return None, None
        skey = (key, self.state_id(t_min))
        hit = self.memo.get(skey)
        if hit is None:
            self.memo_misses += 1
        else:
            self.memo_hits += 1
            self.set_state(hit[2], t_min)
        return skey, hit

    def run(self, key: Any, streams: Any, t_min: int) -> tuple[np.ndarray, np.ndarray]:
        """Run one op: `streams` is a list (per channel) of (cmd, bank) arrays or None, or a callable
        returning that list (called only on a memo miss). Returns (end cycle per channel, counts[ch, cmd])."""
        C = self.channels
        skey, hit = self._memo_lookup(key, t_min)
        if hit is not None:
            return hit[3] + t_min, hit[4]
        self._materialise()
        if callable(streams):
            streams = streams()
        ends = np.full(C, t_min, dtype=np.int64)
        counts = np.zeros((C, self.n_cmds), dtype=np.int64)
        t0 = time.perf_counter()
        for ch in range(C):
            s = streams[ch]
            if s is None or len(s[0]) == 0:
                continue
            cmd = np.ascontiguousarray(s[0], dtype=np.int64)
            bank = np.ascontiguousarray(np.maximum(s[1], 0), dtype=np.int64)
            issue = np.zeros(len(cmd), dtype=np.int64)
            ends[ch] = self.fn(cmd, bank, np.int64(t_min), *self._tab_args, self.done_lat, self.ready[ch],
                               self.hist[ch], self.hist_pos[ch], self.last[ch], issue, counts[ch])
            self.commands_simulated += len(cmd)
            if self.log_on:
                self.logs[ch].append((issue, s))
        self.kernel_s += time.perf_counter() - t0
        if self.memo_on and key is not None:
            self._store(skey, ends, counts, t_min)
        return ends, counts

    def run_flat(self, key: Any, flat: Any, t_min: int) -> tuple[int, np.ndarray]:
        """Run one op given as flat streams (cmd, bank, offs): all channels concatenated, bank >= 0, channel
        ch = [offs[ch], offs[ch+1]) (or a callable returning that, called only on a memo miss). One kernel
        call for all channels. Returns (end cycle of the op = max over channels, counts summed over channels);
        the counts array is shared with the memo: do not modify it."""
        skey, hit = self._memo_lookup(key, t_min)
        if hit is not None:
            return t_min + hit[0], hit[1]
        self._materialise()
        if callable(flat):
            flat = flat()
        cmd, bank, offs = flat
        C = self.channels
        ends = np.full(C, t_min, dtype=np.int64)
        counts = np.zeros((C, self.n_cmds), dtype=np.int64)
        n = len(cmd)
        t0 = time.perf_counter()
        if n:
            issue = np.empty(n, dtype=np.int64)
            if self.engine == "numba":
                run_channels_jit(cmd, bank, offs, np.int64(t_min), *self._tab_args, self.done_lat, self.ready,
                                 self.hist, self.hist_pos, self.last, issue, counts, ends)
            else:
                run_channels(cmd, bank, offs, np.int64(t_min), *self._tab_args, self.done_lat, self.ready,
                             self.hist, self.hist_pos, self.last, issue, counts, ends)
            self.commands_simulated += n
        self.kernel_s += time.perf_counter() - t0
        if self.memo_on and key is not None:
            hit = self._store(skey, ends, counts, t_min)
            return t_min + hit[0], hit[1]
        return int(ends.max()), counts.sum(axis=0)

    def _store(self, skey: Any, ends: np.ndarray, counts: np.ndarray, t_min: int) -> tuple:
        rel = ends - t_min
        out = self._sid_of_arrays(t_min)
        hit = (int(rel.max()), counts.sum(axis=0), out, rel, counts)
        self.memo[skey] = hit
        self._virtual = (out, t_min)          # the arrays stay valid too; this makes the next state_id cheap
        self._arrays_ok = True
        return hit

    def command_log(self) -> Any:
        """Command log (cycle, command, channel, ..., row, column) of everything run with log=True."""
        import pandas as pd

        if not self.log_on:
            raise RuntimeError("PimEngine was created with log=False")
        names = np.array(self.spec.command_names)
        frames = []
        bpg = self.spec.counts[4]
        for ch in range(self.channels):
            for issue, s in self.logs[ch]:
                cmd = np.asarray(s[0])
                bank = np.maximum(np.asarray(s[1]), 0)
                scope = self.tabs["cmd_scope"][cmd]
                chan_scope = scope == 0
                row = np.asarray(s[2]) if len(s) > 2 else np.full(len(cmd), -1)
                col = np.asarray(s[3]) if len(s) > 3 else np.full(len(cmd), -1)
                frames.append(pd.DataFrame({
                    "cycle": issue, "command": names[cmd], "channel": ch, "pseudochannel": 0, "rank": 0,
                    "bankgroup": np.where(chan_scope, 0, bank // bpg), "bank": np.where(chan_scope, 0, bank % bpg),
                    "row": row, "column": col}))
        if not frames:
            return pd.DataFrame(columns=["cycle", "command", "channel", "pseudochannel", "rank", "bankgroup",
                                         "bank", "row", "column"])
        df = pd.concat(frames, ignore_index=True)
        return df.sort_values(["cycle", "channel"], kind="stable").reset_index(drop=True)
