"""The event loop: one time base for every unit, and a task graph with edges.

Time is an integer number of picoseconds (or of one memory's cycles: "Time base" below). Units:
* `FixedUnit` - runs one task at a time (or `capacity` at a time); a task takes `cycles` of the unit's clock
  (ASIC, NPU arrays, vector units, DMA set-up, links);
* `MemoryUnit` - a `MemorySystem` (archsim.engine.channel); a task submits requests or stream commands with
  a tag and is done when every tagged item has completed (its done cycle, converted to picoseconds; one
  completion group, `MemorySystem.expect`).

A `Task` starts when all its dependencies are done and its unit has room; a task may also be started by a
trigger (`loop.start(task)` from another task's `on_done` callback, e.g. an observer that counted enough
writes). The loop pops heap events in time order; before handling an event at time t it advances every
memory unit up to t, stopping at each memory completion at exactly its cycle so that what the completion
triggers happens at the right time.

Several memory units (several devices): they advance in lockstep windows of `lookahead_ps`, the smallest
delay between a memory completion in one unit and work it can cause in another (a link's latency). This is
the conservative rule of parallel discrete-event simulation: results are exact as long as every cross-unit
interaction goes through a delay of at least `lookahead_ps`; `Link` units enforce it.

How an agent waits on memory (one way: a callback with the loop time of the completion's done cycle):
* `MemoryUnit.group(n, callback) -> tag` (exact loop): the agent enqueues n items with that tag;
  `callback(t)` when the last is done. A `Task` on a `MemoryUnit` is the same wait (its `submit` enqueues
  items under the tag it is given) whose callback finishes the task and starts its dependants;
* `MemoryUnit.wait_requests(ids, callback)` (windowed loop): requests the agent enqueued itself
  (`enqueue_requests` returns their ids); `callback(t)` at the last one's done cycle.
Timed work that is not memory (compute, links) is `loop.at(t, fn)` or a `Task` on a `FixedUnit` / `Link`.

Two ways to synchronise the memories with the rest (the loop's `window`):
* exact (`window=None`, default): memories stop at each completion group at exactly its cycle (above);
* windowed (`window=W` ticks): every memory advances W ticks at a time (or to the next timed event, if
  sooner); the request waits whose requests all have a done cycle by then are called in the order of their
  done times (ties as the exact loop drains them: the channel of each wait's last request), each with its exact
  done time, and the timed events up to the window's end follow. (The engine
  knows a request's done cycle when its column command issues, so a done time can lie up to a burst's
  latency past the window: such a wait is called at its done time, in order with the timed events.) Work a
  completion causes in the same memory can enter it up to W-1 ticks late. The waited ids are checked per
  source, a bounded prefix of each (a port hands requests over in order), so a long burst of one source does
  not hide the completions of another. T3 used it to poll request ids instead of stopping the kernel at every
  completion; it now runs on the exact loop, which is faster there (reports/t3/window.csv compares them).

Time base: the loop's integer time is picoseconds for the unit constructors' defaults (units with different
clocks); a system paced by one DRAM clock can count that clock's cycles instead (`MemoryUnit(...,
ticks="cycles")`, T3), so no conversion rounds.

A run of the exact loop to the end (`run()` with no bound) that stops while completion groups still wait
raises `EngineError` naming them: the memory went idle with an agent expecting more items than it enqueued.

Users: PIM-GPT's overlap mode (task graph), ring collectives (links), NeuPIMs and `archsim.npu.dram_gemm`
(completion groups: one memory unit counted in its own cycles, `ticks="cycles"`) and T3 (completion groups by
default; request waits on the windowed loop with `driver.window_cycles: W`). Not a loop, and so not here: `archsim.engine.reuse.StreamChannels` is a memo
layer over the channel engine (it runs one op's per-channel command streams to completion and reuses the
outcome of identical ones; nothing else happens while an op runs).
"""
from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from archsim.engine.channel import INF, ST_COMPLETION
from archsim.engine.memory import EngineError, MemorySystem
from archsim.errors import UserError

PS_INF = 1 << 62


@dataclass(eq=False)
class Task:
    name: str
    unit: Any
    deps: list[Task] = field(default_factory=list)
    cycles: int = 0                                   # FixedUnit: duration in the unit's clock
    submit: Callable[[MemorySystem, int, int], int] | None = None   # MemoryUnit: (ms, at_cycle, tag) -> items
    on_done: list[Callable[[Task, int], None]] = field(default_factory=list)
    auto: bool = True                                 # start when deps are done (False: only by a trigger)
    start_ps: int = -1
    end_ps: int = -1
    _waiting: int = 0
    _children: list[Task] = field(default_factory=list)


class Unit:
    def __init__(self, name: str, clock_hz: float, capacity: int = 1):
        self.name = name
        self.period_ps = 1e12 / clock_hz
        self.capacity = capacity
        self.busy = 0
        self.queue: list[Task] = []
        self.intervals: list[tuple[str, int, int]] = []

    def ps(self, cycles: int) -> int:
        return int(math.ceil(cycles * self.period_ps - 1e-6))

    def cycle_at(self, t_ps: int) -> int:
        """First cycle of this unit's clock at or after t_ps."""
        return int(math.ceil(t_ps / self.period_ps - 1e-9))


class FixedUnit(Unit):
    def begin(self, loop: EventLoop, task: Task, t: int) -> None:
        start = self.ps(self.cycle_at(t))
        task.start_ps = start
        loop.at(start + self.ps(task.cycles), lambda: loop._finish(task))


class Link(FixedUnit):
    """A point-to-point link: a transfer of `nbytes` takes latency + nbytes / bandwidth."""

    def __init__(self, name: str, latency_ps: int, bytes_per_s: float, capacity: int = 1):
        super().__init__(name, 1e12, capacity)        # 1 ps clock
        self.latency_ps = latency_ps
        self.bytes_per_s = bytes_per_s

    def transfer_cycles(self, nbytes: int) -> int:
        return self.latency_ps + int(math.ceil(nbytes / self.bytes_per_s * 1e12))


class _PendingRequests:
    """Request ids of one source a memory unit waits on, in enqueue order. A port hands its requests to the
    controller in order (it blocks at its head), so only a bounded prefix of one source's ids can have
    completed; each window checks `pend` (accepted, not yet seen done) topped up from the backlog to `limit`
    ids. Kept per source: one list over several sources let a long burst of one (a GEMM's K step, tens of
    thousands of reads) hide the completions of another enqueued after it until the burst drained."""

    def __init__(self, limit: int):
        self.limit = limit
        self.pend = np.zeros(0, np.int64)
        self.segs: deque[np.ndarray] = deque()
        self.pos = 0
        self.size = 0

    def add(self, ids: np.ndarray) -> None:
        self.segs.append(ids)
        self.size += len(ids)

    def window(self) -> np.ndarray:
        need = self.limit - len(self.pend)
        if need > 0 and self.segs:
            parts = [self.pend]
            while need > 0 and self.segs:
                seg = self.segs[0]
                k = min(need, len(seg) - self.pos)
                parts.append(seg[self.pos:self.pos + k])
                self.pos += k
                need -= k
                if self.pos == len(seg):
                    self.segs.popleft()
                    self.pos = 0
            self.pend = np.concatenate(parts)
        return self.pend


class MemoryUnit(Unit):
    """A `MemorySystem` in the loop. `ticks="cycles"`: the loop's time is this memory's clock cycles (one clock
    paces the system; no rounding between cycles and picoseconds)."""

    def __init__(self, name: str, ms: MemorySystem, capacity: int = 1 << 30, ticks: str = "ps"):
        if ticks not in ("ps", "cycles"):
            raise ValueError(f"ticks must be ps or cycles, got {ticks!r}")
        super().__init__(name, 1e12 / ms.spec.tCK_ps if ticks == "ps" else 1e12, capacity)
        self.ms = ms
        # completion groups (exact loop): tag -> callback(loop time of the group's done cycle); tags are recycled
        self._groups: dict[int, Callable[[int], None]] = {}
        self._free_tags: list[int] = []
        self._next_tag = 0
        self.loop: EventLoop | None = None
        # request waits: wait id -> [requests left, latest order key (collect), callback]; the wait id of every request
        self._waits: dict[int, list] = {}
        self._owner = np.zeros(1 << 16, np.int64)
        self._next_wait = 0
        self._pending: dict[int, _PendingRequests] = {}      # source -> its waited ids (windowed loop)
        self._pending_limit = 0

    def attach(self, loop: EventLoop) -> None:
        """Called by `EventLoop.add`. In a windowed loop, how many outstanding ids a window checks: every
        request the controller queues can hold, twice over, plus what 8 requests per channel and cycle of a
        window could add (a bound on what can have completed; a larger one only costs time)."""
        self.loop = loop
        ctrl, channels = self.ms.ctrl, self.ms.spec.channels
        window_cycles = self.cycle_at(loop.window) if loop.window else 1
        self._pending_limit = 2 * 2 * (ctrl.read_queue + ctrl.write_queue) * channels + 8 * window_cycles * channels

    @property
    def requests_waited(self) -> int:
        """Requests of `wait_requests` calls not yet seen done."""
        return sum(p.size for p in self._pending.values())

    def wait_requests(self, ids: np.ndarray, callback: Callable[[int], None]) -> None:
        """`callback(t)` once every request in `ids` (from this memory's `enqueue_requests`) is done; t is the
        loop time of the last one's done cycle. Needs a windowed loop (`EventLoop(window=...)`)."""
        loop = self.loop
        if loop is None or not loop.window:
            raise EngineError(f"{self.name}: wait_requests needs the unit in a windowed EventLoop (window=W)")
        if len(ids) == 0:
            loop.at(loop.now, lambda: callback(loop.now))
            return
        wid = self._next_wait
        self._next_wait += 1
        self._waits[wid] = [len(ids), 0, callback]
        own = self._owner
        if ids[-1] >= own.shape[0]:
            new = np.zeros(max(2 * own.shape[0], int(ids[-1]) + 1), np.int64)
            new[:own.shape[0]] = own
            self._owner = own = new
        own[ids] = wid
        src = self.ms.S.r_src[ids]
        for s in np.unique(src).tolist():
            pend = self._pending.get(s)
            if pend is None:
                pend = self._pending[s] = _PendingRequests(self._pending_limit)
            pend.add(ids if src[0] == src[-1] == s and (src == s).all() else ids[src == s])

    def collect(self) -> list[tuple[int, Callable[[int], None]]]:
        """The request waits whose last request is done, as (done cycle, callback), in the exact loop's order:
        by done cycle, then by the channel of the wait's last request (below)."""
        fin_ids, fin_done = [], []
        for pending in self._pending.values():
            if pending.size == 0:
                continue
            ids = pending.window()
            done = self.ms.S.r_done[ids]
            fin = done >= 0
            if fin.any():
                pending.pend = ids[~fin]
                pending.size -= int(fin.sum())
                fin_ids.append(ids[fin])
                fin_done.append(done[fin])
        if not fin_ids:
            return []
        ids = np.concatenate(fin_ids)
        wids = self._owner[ids]
        # a request's order key: its done cycle, then its channel - the order the kernel records completions
        # of one latency in (a cycle's channels ascending), which is the exact loop's drain() order; waits done
        # on the same cycle are called in it, so the windowed loop's schedule tends to the exact one as W -> 1
        nch = self.ms.spec.channels
        keys = np.concatenate(fin_done) * nch + self.ms.S.r_ch[ids]
        out = []
        uniq, inv = np.unique(wids, return_inverse=True)
        cnt = np.bincount(inv)
        latest = np.full(len(uniq), -1, np.int64)
        np.maximum.at(latest, inv, keys)
        for wid, c, m in zip(uniq.tolist(), cnt.tolist(), latest.tolist(), strict=True):
            wait = self._waits[wid]
            wait[0] -= c
            wait[1] = max(wait[1], m)
            if wait[0] == 0:
                del self._waits[wid]
                out.append((wait[1], wait[2]))
        out.sort(key=lambda x: x[0])
        return [(key // nch, cb) for key, cb in out]

    def begin(self, loop: EventLoop, task: Task, t: int) -> None:
        if loop.window:
            raise EngineError(f"{self.name}: tasks on a memory unit need the exact loop (window=None); in a "
                              "windowed loop, enqueue and use wait_requests")
        cyc = self.cycle_at(t)
        task.start_ps = self.ps(cyc)
        tag = self._tag()
        n = task.submit(self.ms, cyc, tag)
        if n == 0:
            self._free_tags.append(tag)
            loop.at(task.start_ps, lambda: loop._finish(task))
        else:
            self.ms.expect(tag, int(n))      # one completion when the task's last item is done
            self._groups[tag] = lambda _t: loop._finish(task)

    def _tag(self) -> int:
        tag = self._free_tags.pop() if self._free_tags else self._next_tag
        if tag == self._next_tag:
            self._next_tag += 1
        return tag

    def group(self, n: int, callback: Callable[[int], None]) -> int:
        """A fresh tag whose `n` items (requests or stream commands the caller enqueues with this tag) complete
        as one event: `callback(t)` at the loop time t of the last one's done cycle (exact loop)."""
        tag = self._tag()
        self.ms.expect(tag, n)
        self._groups[tag] = callback
        return tag

    @property
    def groups_waiting(self) -> int:
        return len(self._groups)

    def advance_to(self, loop: EventLoop, t_ps: int) -> int | None:
        """Advance up to t_ps (exclusive); return the time of the first completion on the way, if any; the
        callbacks of the groups that completed there are on the loop's heap at that time, in done order."""
        until = self.cycle_at(t_ps) if t_ps < PS_INF else INF
        if until <= self.ms.clock:
            return None                      # nothing to simulate (the kernel would return at once)
        st = self.ms.advance(until)
        if st != ST_COMPLETION:
            return None
        now = self.ms.clock
        t_now = self.ps(now)
        for tag, done in self.ms.drain():
            cb = self._groups.pop(tag, None)
            if cb is not None:
                self._free_tags.append(tag)
                t_done = self.ps(done)
                loop.at(t_now, lambda cb=cb, t_done=t_done: cb(t_done))
        return t_now


class EventLoop:
    def __init__(self, lookahead_ps: int = PS_INF, window: int | None = None, name: str = "event loop",
                 stall_limit: int = 1 << 26):
        """`window`: None for exact completions, or the windowed loop's window in ticks (module doc); `name`
        and `stall_limit` (ticks without a completed request wait while some are outstanding) for the
        windowed loop's deadlock error."""
        if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
            raise ValueError(f"window must be None or an integer >= 1, got {window!r}")
        self.heap: list[tuple[int, int, Callable[[], None]]] = []
        self.seq = 0
        self.now = 0
        self.units: list[Unit] = []
        self.memories: list[MemoryUnit] = []
        self.lookahead_ps = lookahead_ps
        self.window = window
        self.name = name
        self.stall_limit = stall_limit
        self.done: list[Task] = []

    def add(self, unit: Unit) -> Unit:
        self.units.append(unit)
        if isinstance(unit, MemoryUnit):
            self.memories.append(unit)
            unit.attach(self)
        return unit

    def at(self, t: int, fn: Callable[[], None]) -> None:
        heapq.heappush(self.heap, (t, self.seq, fn))
        self.seq += 1

    # -- tasks ------------------------------------------------------------------------------------------------
    def submit(self, tasks: list[Task]) -> None:
        """Add a task graph; tasks whose deps are done (or empty) start now."""
        for task in tasks:
            task._waiting = sum(1 for d in task.deps if d.end_ps < 0)
            for d in task.deps:
                if d.end_ps < 0:
                    d._children.append(task)
        for task in tasks:
            if task._waiting == 0 and task.auto:
                self._ready(task, self.now)

    def start(self, task: Task) -> None:
        """Start a task now (a trigger), whatever its `auto` flag."""
        self._ready(task, self.now)

    def _ready(self, task: Task, t: int) -> None:
        unit = task.unit
        if unit.busy < unit.capacity:
            unit.busy += 1
            unit.begin(self, task, t)
        else:
            unit.queue.append(task)

    def _finish(self, task: Task) -> None:
        task.end_ps = self.now
        unit = task.unit
        unit.intervals.append((task.name, task.start_ps, task.end_ps))
        unit.busy -= 1
        self.done.append(task)
        if unit.queue:
            nxt = unit.queue.pop(0)
            unit.busy += 1
            unit.begin(self, nxt, self.now)
        for cb in task.on_done:
            cb(task, self.now)
        for child in task._children:
            child._waiting -= 1
            if child._waiting == 0 and child.auto:
                self._ready(child, self.now)

    # -- running --------------------------------------------------------------------------------------------
    def run(self, until_ps: int = PS_INF) -> int:
        """Run until nothing is left (or until `until_ps`, exact loop only); returns the loop's time."""
        if self.window:
            if until_ps < PS_INF:
                raise ValueError("a windowed EventLoop runs to the end (until_ps is for the exact loop)")
            return self._run_windowed()
        while True:
            if until_ps >= PS_INF and not self.heap and not any(m._groups for m in self.memories):
                break              # nothing timed and nothing waited on: done
            t_heap = self.heap[0][0] if self.heap else PS_INF
            horizon = min(t_heap, until_ps)
            if len(self.memories) > 1:
                horizon = min(horizon, self.now + self.lookahead_ps)
            first = None
            for m in self.memories:
                got = m.advance_to(self, horizon if first is None else min(horizon, first))
                if got is not None:
                    first = got if first is None else min(first, got)
            if first is not None:
                self.now = max(self.now, min(first, horizon))
                continue                                   # the completions' events are on the heap now
            if not self.heap:
                if horizon >= until_ps or all(m.ms.S.outstanding[0] == 0 for m in self.memories):
                    break
                self.now = horizon
                continue
            t, _, fn = heapq.heappop(self.heap)
            if t > until_ps:
                heapq.heappush(self.heap, (t, 0, fn))
                break
            self.now = t
            fn()
        if until_ps >= PS_INF:
            self._check_groups()
        return self.now

    def _check_groups(self) -> None:
        """The exact loop ran out of work: a completion group still waiting can never complete."""
        for m in self.memories:
            if m.groups_waiting:
                raise EngineError(f"{self.name}: {m.name} idle at cycle {m.ms.clock} with {m.groups_waiting} "
                                  "completion groups still waiting (an agent expected more items than it enqueued)")

    def _run_windowed(self) -> int:
        """The windowed mode (module doc); a UserError when requests stay outstanding for `stall_limit` ticks
        without one wait completing (a schedule that waits on itself)."""
        window = self.window
        idle_windows = 0
        while True:
            busy = any(m.requests_waited for m in self.memories)
            t_heap = self.heap[0][0] if self.heap else PS_INF
            if not busy and t_heap >= PS_INF:
                break
            horizon = min(t_heap, self.now + window) if busy else t_heap
            if horizon > self.now:
                if busy:
                    for m in self.memories:
                        until = m.cycle_at(horizon)
                        if m.ms.clock < until:
                            m.ms.advance(until)
                self.now = horizon
            ready: list[tuple[int, int, Callable[[int], None]]] = []
            for m in self.memories:
                for done, cb in m.collect():
                    ready.append((m.ps(done), len(ready), cb))
            ready.sort(key=lambda x: (x[0], x[1]))
            for t_done, _, cb in ready:
                if t_done > self.now:
                    # known at its column command, done later: called at its done time, in order with the
                    # timed events (run now, the work it causes would queue in the ports ahead of earlier work)
                    self.at(t_done, lambda cb=cb, t_done=t_done: cb(t_done))
                else:
                    cb(t_done)
            while self.heap and self.heap[0][0] <= self.now:
                _, _, fn = heapq.heappop(self.heap)
                fn()
            if busy and not ready:
                idle_windows += 1
                if idle_windows * window > self.stall_limit:
                    raise UserError(f"{self.name}: no request completed for {self.stall_limit} ticks "
                                    "(a deadlock in the schedule)")
            else:
                idle_windows = 0
        return self.now
