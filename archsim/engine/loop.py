"""The event loop: one time base for every unit, and a task graph with edges.

Time is an integer number of picoseconds. Units:
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
"""
from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from archsim.engine.channel import INF, ST_COMPLETION, MemorySystem

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


class MemoryUnit(Unit):
    def __init__(self, name: str, ms: MemorySystem, capacity: int = 1 << 30):
        super().__init__(name, 1e12 / ms.spec.tCK_ps, capacity)
        self.ms = ms
        self.tasks: dict[int, Task] = {}
        self._next_tag = 0

    def begin(self, loop: EventLoop, task: Task, t: int) -> None:
        cyc = self.cycle_at(t)
        task.start_ps = self.ps(cyc)
        tag = self._next_tag
        self._next_tag += 1
        self.tasks[tag] = task
        n = task.submit(self.ms, cyc, tag)
        if n == 0:
            loop.at(task.start_ps, lambda: loop._finish(task))
        else:
            self.ms.expect(tag, int(n))      # one completion when the task's last item is done

    def advance_to(self, loop: EventLoop, t_ps: int) -> int | None:
        """Advance up to t_ps (exclusive); return the time of the first completion on the way, if any."""
        until = self.cycle_at(t_ps) if t_ps < PS_INF else INF
        st = self.ms.advance(until)
        if st != ST_COMPLETION:
            return None
        now = self.ms.clock
        for tag, _done in self.ms.drain():
            task = self.tasks.pop(tag, None)
            if task is not None:
                loop.at(self.ps(now), lambda task=task: loop._finish(task))
        return self.ps(now)


class EventLoop:
    def __init__(self, lookahead_ps: int = PS_INF):
        self.heap: list[tuple[int, int, Callable[[], None]]] = []
        self.seq = 0
        self.now = 0
        self.units: list[Unit] = []
        self.memories: list[MemoryUnit] = []
        self.lookahead_ps = lookahead_ps
        self.done: list[Task] = []

    def add(self, unit: Unit) -> Unit:
        self.units.append(unit)
        if isinstance(unit, MemoryUnit):
            self.memories.append(unit)
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
        while True:
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
        return self.now
