"""T3's track-and-trigger table near one memory controller: counts completed updates per output tile and
fires the tile's pre-programmed action when its count is complete. The golden model of rtl/t3_tracker.v
(tests/rtl/tb_t3_tracker.py).
"""
from __future__ import annotations

from collections import deque
from typing import Any

from archsim.errors import ConfigError


class Tracker:
    """Track-and-trigger table near one memory controller (module doc). `expect(key, count)` pre-programs a
    tile's expected update count and its action; `update(key, n, t)` counts n completed updates at cycle t.
    Fired keys are returned by `update` (at most one per call plus the overflow updates it unblocks)."""

    def __init__(self, entries: int = 256):
        if entries < 1:
            raise ConfigError("tracker.entries", f"must be >= 1, got {entries}")
        self.entries = entries
        self.expected: dict[Any, int] = {}
        self.table: dict[Any, int] = {}             # key -> count so far (an occupied entry)
        self.overflow: deque[tuple[Any, int]] = deque()
        self.fired: dict[Any, int] = {}            # key -> cycle it fired
        self.high_water = 0
        self.full_events = 0                       # updates that found the table full

    def expect(self, key: Any, count: int) -> None:
        if count < 1:
            raise ValueError(f"tracker: expected count of {key} must be >= 1, got {count}")
        if key in self.expected and key not in self.fired:
            raise ValueError(f"tracker: {key} programmed twice before it fired")
        self.fired.pop(key, None)          # wrap-around: a key is reused once its tile has fired
        self.expected[key] = count

    def update(self, key: Any, n: int, t: int) -> list[Any]:
        if key not in self.expected:
            raise ValueError(f"tracker: update for unprogrammed tile {key}")
        if key in self.fired:
            raise ValueError(f"tracker: update for tile {key} after it fired (count would exceed its expected)")
        fired: list[Any] = []
        if key not in self.table and (len(self.table) >= self.entries or self.overflow):
            self.full_events += 1
            self.overflow.append((key, n))
            return fired
        self._count(key, n, t, fired)
        return fired

    def _count(self, key: Any, n: int, t: int, fired: list[Any]) -> None:
        self.table[key] = self.table.get(key, 0) + n
        self.high_water = max(self.high_water, len(self.table))
        c = self.table[key]
        if c > self.expected[key]:
            raise ValueError(f"tracker: tile {key} counted {c} updates, expected {self.expected[key]}")
        if c == self.expected[key]:
            del self.table[key]
            self.fired[key] = t
            fired.append(key)
            # a freed entry admits waiting updates in arrival order (updates to tiles already in the table
            # could not be waiting: they are counted at once)
            while self.overflow and (self.overflow[0][0] in self.table or len(self.table) < self.entries):
                k2, n2 = self.overflow.popleft()
                self._count(k2, n2, t, fired)

    @property
    def pending(self) -> int:
        return len(self.table) + len(self.overflow)
