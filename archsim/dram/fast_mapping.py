"""Numba kernel of archsim.dram.mapping.decode: one pass over the addresses instead of ~20 numpy passes
(a 2 M-request trace decodes in a few ms instead of 30-60 ms plus the temporaries' page faults).

Kept in its own module so that numba's on-disk cache (keyed by this file) survives edits to mapping.py. The
one-address forms (`decode_one`, `decode_hashed_one`) are what archsim.engine.dma expands DMA ranges with.
"""
from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def decode_one(a, shift, mask, mult):
    """(channel, global bank id, row, column) of byte address `a` (uint64): field j (mapping.VECTOR_LEVELS order)
    = (a >> shift[j]) & mask[j]; the global bank id is channel, then pseudochannel, rank, bank group and bank as
    mixed-radix digits (mult[j] = level j's count), as mapping.decode defines it."""
    ch = np.int64((a >> shift[0]) & mask[0])
    b = ch
    for j in range(1, 5):
        b = b * mult[j] + np.int64((a >> shift[j]) & mask[j])
    return ch, b, np.int64((a >> shift[5]) & mask[5]), np.int64((a >> shift[6]) & mask[6])


@numba.njit(cache=True, nogil=True)
def decode_hashed_one(a, shift, mask, mult, xor):
    """decode_one with address hashing: bit k of level j (channel..bank) is XORed with the parity of
    a & xor[j, k] (mapping.hash_masks; a zero mask leaves the bit as it is)."""
    b = np.int64(0)
    ch = np.int64(0)
    for j in range(5):
        v = (a >> shift[j]) & mask[j]
        for k in range(64):
            if (mask[j] >> np.uint64(k)) == 0:
                break
            x = a & xor[j, k]
            if x:
                x ^= x >> np.uint64(32)
                x ^= x >> np.uint64(16)
                x ^= x >> np.uint64(8)
                x ^= x >> np.uint64(4)
                x ^= x >> np.uint64(2)
                x ^= x >> np.uint64(1)
                v ^= (x & np.uint64(1)) << np.uint64(k)
        if j == 0:
            ch = np.int64(v)
            b = ch
        else:
            b = b * mult[j] + np.int64(v)
    return ch, b, np.int64((a >> shift[5]) & mask[5]), np.int64((a >> shift[6]) & mask[6])


@numba.njit(cache=True, nogil=True)
def decode_into(addr, shift, mask, mult, channel, bank, row, column):
    """decode_one of every address into the four output arrays."""
    for i in range(addr.shape[0]):
        channel[i], bank[i], row[i], column[i] = decode_one(addr[i], shift, mask, mult)


@numba.njit(cache=True, nogil=True)
def decode_hashed_into(addr, shift, mask, mult, xor, channel, bank, row, column):
    """decode_hashed_one of every address into the four output arrays."""
    for i in range(addr.shape[0]):
        channel[i], bank[i], row[i], column[i] = decode_hashed_one(addr[i], shift, mask, mult, xor)
