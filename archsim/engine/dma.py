"""DMA operand streams as strided descriptors, expanded into the engine's request pool by compiled code (issue 38).

A DMA engine (an NPU's tile loads and stores) moves a few strided blocks per tile: descriptor d is `rows[d]`
byte ranges [start[d] + i * stride[d], ... + row_bytes[d]), i < rows[d]. Each range is the requests
`MemorySystem.enqueue_requests` takes for it request by request: one per access from the range's start rounded
down to an access (`step` bytes) up to its end, in address order, descriptor after descriptor. Here one compiled
call counts them (`count_requests`) and one decodes every address (archsim.dram.fast_mapping, the decoder's
tables) straight into pool slots [slot, slot + n) (`fill_requests`): Python pays O(descriptors) per tile, not the
~10 numpy passes and temporaries of O(requests) arrays it paid before. `MemorySystem.enqueue_ranges` is the entry
point; tests/test_engine_dma.py holds the requests to the request-by-request path's.

Kept out of archsim/engine/channel.py (and out of what it imports) so that an edit here recompiles these two small
functions only, never the channel kernel's variants.
"""
from __future__ import annotations

import numba
import numpy as np

from archsim.dram.fast_mapping import decode_hashed_one, decode_one


@numba.njit(cache=True, nogil=True)
def count_requests(start, stride, rows, row_bytes, step):
    """How many requests the descriptors expand into (one per access each range touches)."""
    n = 0
    for d in range(start.shape[0]):
        for i in range(rows[d]):
            lo = start[d] + i * stride[d]
            first = lo // step * step
            hi = lo + row_bytes[d]
            if hi > first:
                n += (hi - first + step - 1) // step
    return n


@numba.njit(cache=True, nogil=True)
def fill_requests(start, stride, rows, row_bytes, step, shift, mask, mult, xor, hashed, slot,
                  r_ch, r_bank, r_row, r_col, given, given_values, fresh, fresh_values):
    """Expand the descriptors in order into pool slots from `slot` on: each access's address decoded into its
    channel, global bank, row and column; the other fields a caller gives (kind, arrival, tag, source: arrays
    `given`, one value each) and the engine-owned fields (`fresh`: back to a fresh request's value) written in
    the same call. Returns the slot after the last one written."""
    k = slot
    for d in range(start.shape[0]):
        for i in range(rows[d]):
            lo = start[d] + i * stride[d]
            addr = lo // step * step
            hi = lo + row_bytes[d]
            while addr < hi:
                a = np.uint64(addr)
                if hashed:
                    r_ch[k], r_bank[k], r_row[k], r_col[k] = decode_hashed_one(a, shift, mask, mult, xor)
                else:
                    r_ch[k], r_bank[k], r_row[k], r_col[k] = decode_one(a, shift, mask, mult)
                k += 1
                addr += step
    # (slice fills: numba makes them memset-like loops, ~2x faster than element stores in the loop above)
    for f in range(len(given)):
        given[f][slot:k] = given_values[f]
    for f in range(len(fresh)):
        fresh[f][slot:k] = fresh_values[f]
    return k


class Descriptors:
    """The strided byte blocks of one DMA transfer (a tile's loads, or its stores), collected in order:
    `add(start, stride, rows, row_bytes)`, or `add_range(lo, hi)` for one contiguous range."""

    __slots__ = ("start", "stride", "rows", "row_bytes")

    def __init__(self):
        self.start: list[int] = []
        self.stride: list[int] = []
        self.rows: list[int] = []
        self.row_bytes: list[int] = []

    def add(self, start: int, stride: int, rows: int, row_bytes: int) -> None:
        self.start.append(start)
        self.stride.append(stride)
        self.rows.append(rows)
        self.row_bytes.append(row_bytes)

    def add_range(self, lo: int, hi: int) -> None:
        self.add(lo, 0, 1, hi - lo)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return tuple(np.array(x, dtype=np.int64) for x in (self.start, self.stride, self.rows, self.row_bytes))


def addresses(start, stride, rows, row_bytes, step: int) -> np.ndarray:
    """The byte addresses the descriptors expand into, in order (numpy; the reference `fill_requests` is held to)."""
    out = []
    for s, st, r, rb in zip(start, stride, rows, row_bytes, strict=True):
        for i in range(int(r)):
            lo = int(s) + i * int(st)
            out.append(np.arange(lo // step * step, lo + int(rb), step, dtype=np.int64))
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)
