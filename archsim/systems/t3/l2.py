"""The GPU's last-level cache as T3's producer GEMM sees it: set-associative, LRU, lines of `line_bytes`.

Operand reads (`read`) hit or miss per line; a miss allocates the line. Output stores (`store`) differ by how
the configuration writes them (T3, sec. 4): Sequential's plain stores allocate their lines (write-allocate
without fetching, as Accel-Sim's L2 does: `docs/presets.md`, [Accel-Sim]), so the GEMM's outputs take ways
from its operands and evict them; T3's stores are NMC updates to uncached memory (or remote stores over the
link) and bypass the cache. The stores still go to DRAM when they are made (the timing of a write-back
cache's later evictions is not modelled; every output byte is written once either way).

Set index: a multiplicative hash of the line address (Accel-Sim hashes L2 sets too; assumption: any hash that
spreads lines evenly over the sets). Each access batch is applied in order: lines of one set in the order
given, sets side by side (numpy).
"""
from __future__ import annotations

import numpy as np

_HASH = np.uint64(0x9E3779B97F4A7C15)          # Fibonacci hashing: spreads consecutive line addresses


class L2Cache:
    def __init__(self, capacity_bytes: int, line_bytes: int, ways: int):
        if capacity_bytes < line_bytes * ways:
            raise ValueError(f"L2 of {capacity_bytes} B is smaller than one set ({ways} ways of {line_bytes} B)")
        self.line_bytes = line_bytes
        self.ways = ways
        self.sets = capacity_bytes // (line_bytes * ways)
        self.tags = np.full((self.sets, ways), -1, np.int64)      # line address held by (set, way), -1 empty
        self.used = np.zeros((self.sets, ways), np.int64)         # last use (LRU: the smallest is evicted)
        self.clock = 0
        self.read_lines = 0
        self.read_misses = 0
        self.store_lines = 0
        self.evicted_by_stores = 0         # valid lines a store's allocation replaced

    @property
    def capacity_bytes(self) -> int:
        return self.sets * self.ways * self.line_bytes

    def lines(self, addr: np.ndarray) -> np.ndarray:
        """The distinct lines of byte addresses, in first-touch order."""
        lines = np.asarray(addr, np.int64) // self.line_bytes
        _, first = np.unique(lines, return_index=True)
        return lines[np.sort(first)]

    def _set_of(self, lines: np.ndarray) -> np.ndarray:
        h = (lines.astype(np.uint64) * _HASH) >> np.uint64(20)
        return (h % np.uint64(self.sets)).astype(np.int64)

    def _access(self, lines: np.ndarray) -> tuple[np.ndarray, int]:
        """Touch distinct `lines` in order: a hit refreshes its way, a miss replaces the set's LRU way.
        Returns (miss mask, valid lines replaced)."""
        n = len(lines)
        miss = np.zeros(n, bool)
        if n == 0:
            return miss, 0
        sets = self._set_of(lines)
        order = np.argsort(sets, kind="stable")
        s_sorted = sets[order]
        starts = np.r_[0, np.nonzero(np.diff(s_sorted))[0] + 1]
        rank = np.empty(n, np.int64)
        rank[order] = np.arange(n) - np.repeat(starts, np.diff(np.r_[starts, n]))
        evicted = 0
        for r in range(int(rank.max()) + 1):          # round r: each set's r-th line, every set at once
            idx = np.nonzero(rank == r)[0]
            st, ln = sets[idx], lines[idx]
            stamp = self.clock + idx + 1               # the batch's order, for LRU (0: never used)
            row_tags = self.tags[st]
            hit_way = np.argmax(row_tags == ln[:, None], axis=1)
            hit = row_tags[np.arange(len(idx)), hit_way] == ln
            way = np.where(hit, hit_way, np.argmin(self.used[st], axis=1))
            evicted += int((~hit & (self.tags[st, way] >= 0)).sum())
            self.tags[st, way] = ln
            self.used[st, way] = stamp
            miss[idx] = ~hit
        self.clock += n
        return miss, evicted

    def read(self, addr: np.ndarray) -> np.ndarray:
        """Operand reads of byte addresses `addr` (one per DRAM access): the mask of those to read from DRAM
        (every access of a line that missed)."""
        lines = np.asarray(addr, np.int64) // self.line_bytes
        uniq, first, inv = np.unique(lines, return_index=True, return_inverse=True)
        order = np.argsort(first)                      # the lines in first-touch order
        miss_sorted, _ = self._access(uniq[order])
        miss_line = np.empty(len(uniq), bool)
        miss_line[order] = miss_sorted
        self.read_lines += len(uniq)
        self.read_misses += int(miss_sorted.sum())
        return miss_line[inv]

    def store(self, addr: np.ndarray) -> None:
        """Plain output stores of byte addresses `addr`: write-allocate (no fetch)."""
        lines = self.lines(addr)
        _, evicted = self._access(lines)
        self.store_lines += len(lines)
        self.evicted_by_stores += evicted
