"""Completion-driven co-simulation of several agents on one `MemorySystem`, on the event loop.

An agent (an NPU array's DMA, a channel's PIM attention, ...) enqueues requests or stream commands under a
*completion group* (`group(n, callback)`: one event when the last of the n items is done) and gets
`callback(done_cycle)` then; the callback may enqueue more work, at that cycle or later (work that must wait
for compute is enqueued with a future arrival). So every interaction between units happens at a memory
completion, and no request is ever offered in the engine's past.

`Driver` is `archsim.engine.loop.EventLoop` with one `MemoryUnit` whose time is the memory's cycles and whose
agents only wait on completion groups (`MemoryUnit.group`); it keeps the small interface its users (NeuPIMs,
`archsim.npu.dram_gemm`) were written against. It is not a loop of its own.
"""
from __future__ import annotations

from collections.abc import Callable

from archsim.engine.channel import EngineError, MemorySystem
from archsim.engine.loop import EventLoop, MemoryUnit

Callback = Callable[[int], None]


class Driver:
    def __init__(self, ms: MemorySystem):
        self.ms = ms
        self.loop = EventLoop(name="driver")
        self.unit = self.loop.add(MemoryUnit("memory", ms, ticks="cycles"))

    def group(self, n: int, callback: Callback) -> int:
        """A fresh tag whose n items complete as one event: `callback(done_cycle)` (tags are recycled)."""
        return self.unit.group(n, callback)

    @property
    def waiting(self) -> int:
        return self.unit.groups_waiting

    def run(self) -> int:
        """Advance until every registered group has completed; returns the memory clock (cycles)."""
        self.loop.run()
        if self.unit.groups_waiting:
            raise EngineError(f"memory idle at cycle {self.ms.clock} with {self.unit.groups_waiting} completion "
                              "groups still waiting (an agent expected more items than it enqueued)")
        return self.ms.clock
