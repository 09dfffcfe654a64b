"""In-order command streams on the channel engine, with exact reuse (memo) of repeated steps.

`StreamChannels` runs one op at a time: each channel's command stream is enqueued into one `stream`
source of a `MemorySystem` (archsim.engine.channel) at the op's start cycle, and the op ends when every
command's effect is complete. Systems built from such ops (PIM-GPT) use it; anything that mixes sources
drives `MemorySystem` directly.

Exact reuse. The engine is deterministic and shift-invariant *as long as nothing that depends on absolute
time is in play*: with refresh off and no other source holding work, the outcome of an op depends only on its
command sequence and on the timing state relative to its start (values at or before the start never bind).
So a memo keyed on (op key, normalised relative state) stores the relative end state and reproduces a full
simulation exactly. With refresh on, or with queued work of other sources, the state is not normalisable and
the memo is bypassed (`state_id` returns None): every op is simulated in full. Tests compare memo and full
simulation cycle for cycle, with refresh and with concurrent sources.

Within an op, channels are independent: a channel whose stream and relative state equal another channel's in
the same op is not simulated but given that channel's outcome (`_copy_channel`; memo on only). The stream's last
open per bank (read only by a restore) is not part of the key; see `_static` for why that stays exact.

Normalised states are interned (`state_id` -> small int). After a memo hit the state is kept *virtually* as
(id, base cycle) and written back into the engine arrays only when a kernel has to run; moving the base
forward by delta maps an id to another id (cached), so chains of hits cost a few dictionary look-ups.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from archsim.dram.effects import E_OPEN
from archsim.engine import state
from archsim.engine.channel import INF
from archsim.engine.compiling import clock, sim_seconds
from archsim.engine.memory import MemorySystem


class StreamChannels:
    """`channels` channels of `spec`, one in-order stream each, plus the memo of op outcomes."""

    def __init__(self, spec, memo: bool = True, log: bool = False, refresh: bool = False, engine: str = "numba",
                 units: int = 1):
        """`units`: PIM units per channel (e.g. the two pseudo-channels of an HBM channel, each driven by its own
        all-bank commands): each is one stream source of the channel, and a "channel" of this class's API (the
        streams of an op, `ends`) is a unit, unit u = (channel u // units, its banks [u % units] of the channel's
        banks split evenly). The units of a channel share its command buses, so they are not independent: with
        more than one the memo and the copy of equal channels are off (every op is simulated in full)."""
        from archsim.errors import UserError

        if engine != "numba":
            raise UserError(f"engine {engine!r}: the channel engine runs under numba")
        self.spec = spec
        self.units = units
        self.channels = spec.channels * units
        ctrl = {"refresh": "allbank" if refresh else "none"}
        names = ["pim"] if units == 1 else [f"pim{u}" for u in range(units)]
        self.ms = MemorySystem(spec, ctrl, sources=[{"name": n, "kind": "stream"} for n in names], log=log,
                               stream_capacity=4096)
        self.refresh = refresh
        self.engine = engine
        self.n_cmds = len(spec.commands)
        self.memo_on = memo and not log and not refresh and units == 1
        self.log_on = log
        t = self.ms.tables
        self.max_lat = int(max(max((r["latency"] for r in spec.constraints), default=0), int(t.cmd_lat.max())))
        win = t.win_w
        self._mixed_windows = bool(len(set(win[win > 1].tolist())) > 1)
        self.memo: dict[Any, tuple] = {}
        self._sid_of: dict[bytes, int] = {}
        self._states: list[tuple] = []
        self._shift: dict[tuple[int, int], int] = {}
        self._virtual: tuple[int, int] | None = None
        self._arrays_ok = True
        self.memo_hits = 0
        self.memo_misses = 0
        self.commands_simulated = 0
        self.kernel_s = 0.0
        self.unsafe_runs = 0               # simulated ops that may not enter the memo (see _stream_effects)
        self._lo_mark: np.ndarray | None = None
        self._unsafe_mark = 0
        self._B = t.banks
        self._rep = t.rep
        self._is_open = np.asarray(t.cmd_effect) == E_OPEN
        self._slots = [int(self.ms.S.src_idx[0, self.ms.source_index(n)]) for n in names]   # stream slot per unit
        self._unit_banks = t.banks // units
        self._views: list = []              # per channel: views of its part of the state (_channel_views)
        self._views_of = None               # the state those views are of

    # -- state normalisation -----------------------------------------------------------------------------
    def _canonicalise(self) -> None:
        """Rotate every window ring so its write position is 0 (same behaviour, fewer memo variants)."""
        S = self.ms.S
        if not S.hist_pos.any() or self._mixed_windows:
            return
        mw = S.hist.shape[-1]
        idx = (S.hist_pos[..., None] + np.arange(mw)) % mw
        S.hist[:] = np.take_along_axis(S.hist, idx, axis=-1)
        S.hist_pos[:] = 0

    def _intern(self, ready: np.ndarray, hist: np.ndarray, hist_pos: np.ndarray, static: bytes) -> int:
        key = ready.tobytes() + hist.tobytes() + hist_pos.tobytes() + static
        sid = self._sid_of.get(key)
        if sid is None:
            # shift beyond which every value sits at its floor (the state no longer changes)
            sat = max(int(ready.max(initial=0)), int(hist.max(initial=-self.max_lat - 1)) + self.max_lat + 1, 0)
            sid = self._sid_of[key] = len(self._states)
            self._states.append((ready, hist, hist_pos, static, sat))
        return sid

    def _static(self) -> bytes:
        """The time-independent part of the key: which rows are open. A stream's last open per bank
        (`last_open_*`, read only when the stream restores a row) is not part of the key: an op enters the
        memo only if it restored nothing (so it never read them), and its own writes to them are replayed
        on a hit (`_apply_last_open`); the arrays themselves always hold the true values."""
        return self.ms.S.open_row.tobytes()

    def _sid_of_arrays(self, t0: int) -> int:
        self._canonicalise()
        S = self.ms.S
        ready = np.maximum(S.ready - t0, 0)
        hist = np.maximum(S.hist - t0, -self.max_lat - 1)
        return self._intern(ready, hist, S.hist_pos.copy(), self._static())

    def state_id(self, t0: int) -> int | None:
        """Id of the engine state relative to cycle t0 (equal ids => equal behaviour of any op started at
        t0), or None when the state cannot be normalised (memo off, refresh on)."""
        if not self.memo_on:
            return None
        v = self._virtual
        if v is None:
            return self._sid_of_arrays(t0)
        sid, base = v
        delta = t0 - base
        if delta == 0:
            return sid
        if delta < 0:
            self._materialise()
            return self._sid_of_arrays(t0)
        st = self._states[sid]
        if delta > st[4]:
            delta = st[4]
        got = self._shift.get((sid, delta))
        if got is None:
            ready, hist, hist_pos, static, _ = st
            got = self._intern(np.maximum(ready - delta, 0), np.maximum(hist - delta, -self.max_lat - 1),
                               hist_pos, static)
            self._shift[(sid, delta)] = got
        return got

    def set_state(self, sid: int, t0: int) -> None:
        self._virtual = (sid, t0)
        self._arrays_ok = False

    def _materialise(self) -> None:
        v = self._virtual
        self._virtual = None
        if self._arrays_ok or v is None:
            self._arrays_ok = True
            return
        sid, t0 = v
        ready, hist, hist_pos, _static, _ = self._states[sid]
        S = self.ms.S
        S.ready[:] = ready + t0
        S.hist[:] = np.where(hist <= -self.max_lat - 1, -INF, hist + t0)
        S.hist_pos[:] = hist_pos
        state.invalidate_caches(S)     # the kernel's timing caches are lower bounds of the old timing state
        self._arrays_ok = True

    def sync(self) -> None:
        self._materialise()

    # -- running -------------------------------------------------------------------------------------------
    def _enqueue(self, unit: int, cmd: np.ndarray, local_bank: np.ndarray, row: Any, col: Any, at: int) -> None:
        """`MemorySystem.enqueue_stream` for one unit's stream source, without its per-call checks (done once per
        op by the caller); `local_bank` counts from the unit's first bank."""
        ms = self.ms
        at = max(at, int(ms.S.clock[0]))
        ch, u = divmod(unit, self.units)
        bank = local_bank + u * self._unit_banks
        ms._append_stream(ch * ms.n_st + self._slots[u], cmd, self._rep[cmd, bank] + ch * self._B, row, col,
                          0, 0, -1, at)

    def _run_streams(self, per_channel: list[tuple[np.ndarray, ...] | None], t_min: int) -> tuple[np.ndarray, np.ndarray]:
        """Enqueue each channel's stream at t_min and run until all are done. Returns (end cycle per channel,
        command counts per channel)."""
        ms = self.ms
        S = ms.S
        C = self.channels
        if S.clock[0] < t_min:
            S.clock[0] = t_min            # nothing is queued between ops: the engine may jump
        # the running counts a channel given another's outcome advances by that one's increase (_copy_channel)
        before = {f: getattr(S, f).copy() for f in state.OUTCOME_COUNTS}
        S.s_maxdone[:] = t_min
        n_cmds = self.n_cmds
        n = 0
        # Channels are independent (docs/channel-engine.md, section 2): with the memo on (no refresh, nothing
        # else queued), a channel whose stream and relative state equal an earlier channel's in this op does
        # exactly what that channel does, so it is not simulated but given that channel's outcome (`_copy_channel`)
        seen: dict[bytes, int] = {}
        dups: list[tuple[int, int]] = []
        for ch in range(C):
            s = per_channel[ch]
            if s is None or len(s[0]) == 0:
                continue
            cmd = np.asarray(s[0], dtype=np.int64)
            bank = np.maximum(np.asarray(s[1], dtype=np.int64), 0)
            if bank.max() >= self._unit_banks or cmd.min() < 0 or cmd.max() >= n_cmds:
                from archsim.errors import ConfigError
                raise ConfigError("stream", f"command or bank out of range for {self.spec.name} channel {ch}")
            row = s[2] if len(s) > 2 else -1
            col = s[3] if len(s) > 3 else -1
            if self.memo_on and C > 1:
                sig = self._channel_sig(ch, t_min) + cmd.tobytes() + bank.tobytes()
                rep = seen.get(sig)
                if rep is not None:
                    dups.append((ch, rep))
                    continue
                seen[sig] = ch
            self._enqueue(ch, cmd, bank, row, col, t_min)
            n += len(cmd)
        timer = clock()
        if n:
            ms.run()
        self.kernel_s += sim_seconds(timer)    # a first call's compile excluded
        self.commands_simulated += n
        for ch, rep in dups:
            self._copy_channel(rep, ch, before)
        S = ms.S
        # the end of each unit's stream (its slot of its channel), and the counts per channel
        slot = np.arange(C) // self.units * ms.n_st + np.asarray(self._slots)[np.arange(C) % self.units]
        return S.s_maxdone[slot].copy(), S.cmd_count - before["cmd_count"]

    def _channel_views(self) -> list[tuple[list, list, list]]:
        """Per channel, views of its part of the state (state.channel_index), built once per state arrays: (what
        an op leaves in it, state.OUTCOME_FIELDS: (view, how a copy moves it, field, index); its banks' state,
        state.BANK_STATE_FIELDS: (view, holds bank ids); its caches, state.CACHE_FIELDS: (view, is an epoch,
        fill))."""
        S = self.ms.S
        if self._views_of is not S:
            size = self.ms.sizes
            self._views = []
            for ch in range(self.channels):
                out, banks, caches = [], [], []
                for f in state.OUTCOME_FIELDS:
                    d = state.BY_NAME[f]
                    idx = state.channel_index(d, size, ch)
                    how = 1 if state.COUNT in d.flags else 2 if state.BANK_ID in d.flags else 0
                    out.append((getattr(S, f)[idx], how, f, idx))
                for f in state.BANK_STATE_FIELDS:
                    d = state.BY_NAME[f]
                    banks.append((getattr(S, f)[state.channel_index(d, size, ch)], state.BANK_ID in d.flags))
                for f in state.CACHE_FIELDS:
                    d = state.BY_NAME[f]
                    caches.append((getattr(S, f)[state.channel_index(d, size, ch)], d.role == "epoch", d.fill))
                self._views.append((out, banks, caches))
            self._views_of = S
        return self._views

    def _channel_sig(self, ch: int, t0: int) -> bytes:
        """Channel ch's state relative to t0, everything its future depends on: its timing relative to t0 and
        its banks' state (state.BANK_STATE_FIELDS; bank ids relative to the channel's first bank)."""
        S = self.ms.S
        b0 = ch * self._B
        sig = [np.maximum(S.ready[ch] - t0, 0).tobytes(), np.maximum(S.hist[ch] - t0, -self.max_lat - 1).tobytes(),
               S.hist_pos[ch].tobytes()]
        for a, bank_id in self._channel_views()[ch][1]:
            sig.append((a - b0 if bank_id else a).tobytes())
        return b"".join(sig)

    def _copy_channel(self, src: int, dst: int, before: dict[str, np.ndarray]) -> None:
        """Give channel dst the outcome channel src had in this run (same stream, same starting state): every
        field an op changes in a channel (state.OUTCOME_FIELDS) copied from src's part to dst's, running counts
        advanced by src's increase, bank ids shifted to dst's banks; then dst's kernel caches are invalidated
        (its rows and pins changed outside the kernel)."""
        views = self._channel_views()
        shift = (dst - src) * self._B
        for (d, how, f, _), (s, _, _, sidx) in zip(views[dst][0], views[src][0], strict=True):
            if how == 1:
                d += s - before[f][sidx]
            elif how == 2:
                np.add(s, shift, out=d)
            else:
                d[...] = s
        for a, epoch, fill in views[dst][2]:
            if epoch:
                a += 1
            else:
                a.fill(fill)

    def run(self, key: Any, streams: Any, t_min: int) -> tuple[np.ndarray, np.ndarray]:
        """Run one op: `streams` is a list (per channel) of (cmd, bank[, row, col]) arrays or None, or a callable
        returning it (called only on a memo miss). Returns (end cycle per channel, counts[ch, cmd])."""
        skey, hit = self._memo_lookup(key, t_min)
        if hit is not None:
            return hit[3] + t_min, hit[4]
        self._materialise()
        if callable(streams):
            streams = streams()
        pre = self._pre_run() if skey is not None else None
        ends, counts = self._run_streams(streams, t_min)
        if skey is not None:
            flat = [(np.asarray(s[0], dtype=np.int64), np.maximum(np.asarray(s[1], dtype=np.int64), 0))
                    if s is not None and len(s[0]) else None for s in streams]
            self._store(skey, ends, counts, t_min, pre, self._stream_effects(flat, counts))
        return ends, counts

    def run_flat(self, key: Any, flat: Any, t_min: int) -> tuple[int, np.ndarray]:
        """Run one op given as flat streams (cmd, bank, offs): channel ch = [offs[ch], offs[ch+1]) (or a
        callable returning that). Returns (end cycle of the op, counts summed over channels); the counts
        array is shared with the memo: do not modify it."""
        skey, hit = self._memo_lookup(key, t_min)
        if hit is not None:
            return t_min + hit[0], hit[1]
        self._materialise()
        if callable(flat):
            flat = flat()
        cmd, bank, offs = flat
        per = [(cmd[offs[c]:offs[c + 1]], bank[offs[c]:offs[c + 1]]) if offs[c + 1] > offs[c] else None
               for c in range(self.channels)]
        pre = self._pre_run() if skey is not None else None
        ends, counts = self._run_streams(per, t_min)
        if skey is not None:
            hit = self._store(skey, ends, counts, t_min, pre, self._stream_effects(per, counts))
            if hit is not None:
                return t_min + hit[0], hit[1]
        return int(ends.max()), counts.sum(axis=0)

    def _memo_lookup(self, key: Any, t_min: int) -> tuple[Any, Any]:
        if not self.memo_on or key is None:
            return None, None
        skey = (key, self.state_id(t_min))
        hit = self.memo.get(skey)
        if hit is None:
            self.memo_misses += 1
        else:
            self.memo_hits += 1
            self.set_state(hit[2], t_min)
            self._apply_last_open(hit[5])
        return skey, hit

    # -- what a memo entry must carry besides timing: the stream's last opens ---------------------------------
    def _pre_run(self) -> np.ndarray:
        return self.ms.S.open_row.copy()

    def _stream_effects(self, per: list, counts: np.ndarray) -> tuple | None:
        """(mask, last_open_cmd, last_open_tgt, last_open_row) the op wrote, or None if it may not enter the
        memo: it issued a command its streams do not hold (a restore, which reads the last opens the key
        leaves out, or a close of a row found open)."""
        T = self.ms.tables
        B = self._B
        mask = np.zeros(self.ms.S.last_open_cmd.shape, dtype=bool)
        for ch, s in enumerate(per):
            if s is None:
                if counts[ch].any():
                    return None
                continue
            cmd, bank = s[0], s[1]
            if not np.array_equal(np.bincount(cmd, minlength=self.n_cmds), counts[ch]):
                return None
            op = self._is_open[cmd]
            if op.any():
                for c, r in set(zip(cmd[op].tolist(), self._rep[cmd[op], bank[op]].tolist(), strict=True)):
                    k0, k1 = T.tgt_off[c * B + r], T.tgt_off[c * B + r + 1]
                    mask[ch * B + T.tgt_banks[k0:k1], T.cmd_buf[c]] = True
        S = self.ms.S
        return mask, S.last_open_cmd[mask], S.last_open_tgt[mask], S.last_open_row[mask]

    def _apply_last_open(self, lo: tuple | None) -> None:
        if lo is None:
            return
        mask, c, t, r = lo
        S = self.ms.S
        S.last_open_cmd[mask] = c
        S.last_open_tgt[mask] = t
        S.last_open_row[mask] = r
        if self._lo_mark is not None:
            self._lo_mark |= mask

    def mark_last_open(self) -> None:
        """Start recording which last-open entries the ops run from now on write (for a caller's memo of
        several ops, e.g. PIM-GPT's layer memo)."""
        self._lo_mark = np.zeros(self.ms.S.last_open_cmd.shape, dtype=bool)
        self._unsafe_mark = self.unsafe_runs

    def last_open_since_mark(self) -> tuple | None:
        """The last-open writes since `mark_last_open` (to replay with `apply_last_open`), or None if an op
        since the mark was not memo-safe (its outcome may depend on what the key leaves out)."""
        mask = self._lo_mark
        self._lo_mark = None
        if mask is None or self.unsafe_runs != self._unsafe_mark:
            return None
        S = self.ms.S
        return mask, S.last_open_cmd[mask], S.last_open_tgt[mask], S.last_open_row[mask]

    def apply_last_open(self, lo: tuple) -> None:
        self._apply_last_open(lo)

    def _store(self, skey: Any, ends: np.ndarray, counts: np.ndarray, t_min: int, open_before: np.ndarray,
               lo: tuple | None) -> tuple | None:
        if lo is None or not np.array_equal(open_before, self.ms.S.open_row):
            # not memo-safe (a restore, or rows left open/closed that a hit would not reproduce): simulated
            # in full, never reused
            self.unsafe_runs += 1
            return None
        if self._lo_mark is not None:
            self._lo_mark |= lo[0]
        rel = ends - t_min
        out = self._sid_of_arrays(t_min)
        hit = (int(rel.max()), counts.sum(axis=0), out, rel, counts, lo)
        self.memo[skey] = hit
        self._virtual = (out, t_min)
        self._arrays_ok = True
        return hit

    def command_log(self) -> Any:
        """Command log (cycle, command, channel, ..., row, column) of everything run with log=True."""
        if not self.log_on:
            raise RuntimeError("StreamChannels was created with log=False")
        return self.ms.command_log().drop(columns=["source"])
