"""Numba kernel of a trace run's per-request statistics (archsim.systems.dram_trace.system._result): one pass over
the requests instead of ~10 numpy passes and their temporaries.

Kept in its own module so that numba's on-disk cache (keyed by this file) survives edits elsewhere.
"""
from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def request_counts(channel, is_write, kind, enq, done, per_req, per_read, per_kind, lat_sum, lat):
    """Per channel: requests, reads, row hits/misses/conflicts (kind 0/1/2; 3: served without a command of its
    own, counted in none) and the exact (int64) sum of read latencies (done - enq); every read's latency, in
    request order, into lat. Returns the number of reads, or -1 - i if request i has a channel or kind out of
    range (nothing is written out of bounds)."""
    nch = per_req.shape[0]
    k = 0
    for i in range(channel.shape[0]):
        c = channel[i]
        r = kind[i]
        if c < 0 or c >= nch or r < 0 or r > 3:
            return -1 - i
        per_req[c] += 1
        if r < 3:                  # (3: served without a command of its own, e.g. from a buffered write)
            per_kind[c, r] += 1
        if not is_write[i]:
            x = done[i] - enq[i]
            lat[k] = x
            k += 1
            per_read[c] += 1
            lat_sum[c] += x
    return k


def request_stats(channel: np.ndarray, is_write: np.ndarray, kind: np.ndarray, enq: np.ndarray, done: np.ndarray,
                  channels: int) -> dict[str, np.ndarray]:
    """{per_req, per_read (channels), per_kind (channels x 3), lat_sum (channels, int64), lat (the reads'
    latencies, in request order)} of parallel per-request arrays."""
    n = len(channel)
    i64 = np.int64
    out = {"per_req": np.zeros(channels, i64), "per_read": np.zeros(channels, i64),
           "per_kind": np.zeros((channels, 3), i64), "lat_sum": np.zeros(channels, i64)}
    lat = np.empty(n, i64)
    # (channel and kind keep their integer dtype: a trace run stores them narrow, and a widened copy would be
    # fresh memory of 8 bytes per request)
    channel, kind = (np.ascontiguousarray(a if a.dtype.kind in "iu" else a.astype(i64))
                     for a in (np.asarray(channel), np.asarray(kind)))
    k = request_counts(channel, np.ascontiguousarray(is_write, dtype=np.bool_),
                       kind, np.ascontiguousarray(enq, dtype=i64),
                       np.ascontiguousarray(done, dtype=i64), out["per_req"], out["per_read"], out["per_kind"],
                       out["lat_sum"], lat)
    if k < 0:
        i = -1 - k
        raise ValueError(f"request {i}: channel {int(channel[i])} (of {channels}) or row class {int(kind[i])} "
                         "(0 hit, 1 miss, 2 conflict, 3 none) out of range")
    out["lat"] = lat[:k]
    return out
