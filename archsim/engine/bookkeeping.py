"""Compiled helpers of MemorySystem's Python-side bookkeeping between kernel calls: whether pool slots are served
(asked before every reuse of ring slots) and the completion ring's drain (after every stop of the kernel at a
completion). One pass each without numpy temporaries; kept out of archsim/engine/channel.py so that an edit here
never recompiles the kernel's variants."""
from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def all_served(r_done, r_phase, a, b, posted):
    """Every request in pool slots [a, b) has a done cycle and is not a posted write still waiting to issue."""
    for i in range(a, b):
        if r_done[i] < 0 or r_phase[i] == posted:
            return False
    return True


@numba.njit(cache=True, nogil=True)
def drain_ring(c_done, ring, n, clock, out_tag, out_done, c_tag_index, inf):
    """The first n ring entries done by `clock` (c_done <= clock) into out_tag / out_done in done order (stable:
    ties keep ring order); the others kept, in order, at the front of every ring field (`ring`; field
    `c_tag_index` is the tag). Returns (entries taken, entries kept, the kept ones' earliest done or `inf`)."""
    m = 0
    for i in range(n):
        if c_done[i] <= clock:
            m += 1
    idx = np.empty(m, np.int64)
    j = 0
    for i in range(n):
        if c_done[i] <= clock:
            idx[j] = i
            j += 1
    order = np.argsort(c_done[idx], kind="mergesort")
    tags = ring[c_tag_index]
    for j in range(m):
        i = idx[order[j]]
        out_tag[j] = tags[i]
        out_done[j] = c_done[i]
    k = 0
    earliest = inf
    for i in range(n):
        d = c_done[i]
        if d > clock:
            for f in range(len(ring)):
                ring[f][k] = ring[f][i]
            k += 1
            if d < earliest:
                earliest = d
    return m, k, earliest
