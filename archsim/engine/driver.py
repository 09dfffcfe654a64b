"""Completion-driven co-simulation of several agents on one `MemorySystem`.

An agent (an NPU array's DMA, a channel's PIM attention, ...) enqueues requests or stream commands under a
*completion group* (`MemorySystem.expect`: one event when the last item of the group is done) and registers
a callback for it. The driver advances the memory to the next group completion and calls its callback at
that cycle; the callback may enqueue more work, at that cycle or later (work that must wait for compute is
enqueued with a future arrival). So every interaction between units happens at a memory completion, and no
request is ever offered in the engine's past.

This is the event loop specialised to units whose only events are memory completions (compute and vector
units are timed arithmetic between them); `archsim.engine.loop.EventLoop` is the general task graph.
"""
from __future__ import annotations

from collections.abc import Callable

from archsim.engine.channel import ST_COMPLETION, ST_IDLE, EngineError, MemorySystem

Callback = Callable[[int], None]


class Driver:
    def __init__(self, ms: MemorySystem):
        self.ms = ms
        self._callbacks: dict[int, Callback] = {}
        self._free: list[int] = []
        self._next = 0

    def group(self, n: int, callback: Callback) -> int:
        """A fresh tag whose n items complete as one event: `callback(done_cycle)` (tags are recycled)."""
        tag = self._free.pop() if self._free else self._next
        if tag == self._next:
            self._next += 1
        self.ms.expect(tag, n)
        self._callbacks[tag] = callback
        return tag

    @property
    def waiting(self) -> int:
        return len(self._callbacks)

    def run(self) -> int:
        """Advance until every registered group has completed; returns the memory clock (cycles)."""
        ms = self.ms
        while self._callbacks:
            st = ms.advance()
            if st == ST_COMPLETION:
                for tag, done in ms.drain():
                    cb = self._callbacks.pop(tag, None)
                    if cb is None:
                        continue
                    self._free.append(tag)
                    cb(done)
            elif st == ST_IDLE and self._callbacks:
                raise EngineError(f"memory idle at cycle {ms.clock} with {len(self._callbacks)} completion groups "
                                  "still waiting (an agent expected more items than it enqueued)")
        return ms.clock
