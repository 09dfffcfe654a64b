"""Byte-level numba parser for the two common trace formats (Ramulator 2 load/store, DRAMsim3).

archsim.dram.trace.read_trace tries this parser first: one pass over the file's bytes, no Python objects
per line. It accepts only lines it is sure the general parser (archsim.dram.trace._Parser) reads the same
way, and gives up on anything else: another format, a malformed or mixed-format line, a decreasing
DRAMsim3 time stamp, a non-ASCII byte, a file without requests. read_trace then re-parses the whole file
with the general parser, so every error message (file, line, expected forms) stays the one it produces.

Kept in its own module so that numba's on-disk cache (keyed by this file) survives edits to trace.py.
"""
from __future__ import annotations

import mmap

import numba
import numpy as np

FAIL, RAMULATOR, DRAMSIM3 = 0, 1, 2
FMT_NAMES = {RAMULATOR: "ramulator", DRAMSIM3: "dramsim3"}

# Byte classes. Token bytes are the only ones any accepted token contains ([0-9A-Za-z_]); every other
# byte (punctuation, control bytes the general parser's str.split() treats as blanks, non-ASCII bytes
# that it decodes and upper-cases with Unicode rules) makes the fast parser give up.
_OTHER, _BLANK, _NEWLINE, _COMMENT, _TOKEN = 0, 1, 2, 3, 4
_CLASS = np.zeros(256, dtype=np.uint8)
_CLASS[[ord(c) for c in " \t\r\x0b\x0c"]] = _BLANK  # the blanks the general parser maps to spaces
_CLASS[ord("\n")] = _NEWLINE
_CLASS[ord("#")] = _COMMENT
_CLASS[[ord(c) for c in "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_"]] = _TOKEN

_HEXVAL = np.full(256, 255, dtype=np.uint8)
for _i, _c in enumerate("0123456789abcdef"):
    _HEXVAL[ord(_c)] = _HEXVAL[ord(_c.upper())] = _i

_U64_TENTH = np.uint64(((1 << 64) - 1) // 10)  # 1844674407370955161; the last digit may be at most 5
_I64_MAX = (1 << 63) - 1

# DRAMsim3 commands, upper case, as byte arrays (numba freezes global arrays as constants).
_READ = np.frombuffer(b"READ", np.uint8)
_WRITE = np.frombuffer(b"WRITE", np.uint8)
_IFETCH = np.frombuffer(b"IFETCH", np.uint8)
_P_MEM_RD = np.frombuffer(b"P_MEM_RD", np.uint8)
_P_MEM_WR = np.frombuffer(b"P_MEM_WR", np.uint8)


@numba.njit(cache=True, inline="always")
def _upper(c):
    return c - 32 if 97 <= c <= 122 else c


@numba.njit(cache=True, inline="always")
def _is(buf, s, e, word):
    """Token buf[s:e] equals `word` (upper case) ignoring ASCII case."""
    if e - s != len(word):
        return False
    for j in range(e - s):
        if _upper(buf[s + j]) != word[j]:
            return False
    return True


@numba.njit(cache=True, inline="always")
def _ram_op(buf, s, e):
    """LD -> 0, ST -> 1, anything else -> -1 (any case)."""
    if e - s != 2:
        return -1
    a, b = _upper(buf[s]), _upper(buf[s + 1])
    if a == 76 and b == 68:  # LD
        return 0
    if a == 83 and b == 84:  # ST
        return 1
    return -1


@numba.njit(cache=True, inline="always")
def _d3_op(buf, s, e):
    """DRAMsim3 command: read -> 0, write -> 1, not a command -> -1 (any case)."""
    k = e - s
    if k == 1:
        c = _upper(buf[s])
        return 0 if c == 82 else 1 if c == 87 else -1  # R, W
    if k == 4:
        return 0 if _is(buf, s, e, _READ) else -1
    if k == 5:
        return 1 if _is(buf, s, e, _WRITE) else -1
    if k == 6:
        return 0 if _is(buf, s, e, _IFETCH) else -1
    if k == 8:
        if _is(buf, s, e, _P_MEM_RD):
            return 0
        if _is(buf, s, e, _P_MEM_WR):
            return 1
    return -1


@numba.njit(cache=True, inline="always")
def _skip_zeros(buf, s, e):
    """Start of buf[s:e] without leading zeros, keeping at least one digit (so '0' stays a number)."""
    while s < e - 1 and buf[s] == 48:
        s += 1
    return s


@numba.njit(cache=True)
def _hex(buf, s, e):
    """-> (value, ok) of hex digits buf[s:e] (at least one; ok False past 2**64 - 1)."""
    v = np.uint64(0)
    if s >= e:
        return v, False
    s = _skip_zeros(buf, s, e)
    if e - s > 16:
        return v, False
    for j in range(s, e):
        d = _HEXVAL[buf[j]]
        if d == 255:
            return v, False
        v = (v << np.uint64(4)) | np.uint64(d)
    return v, True


@numba.njit(cache=True)
def _dec_u64(buf, s, e):
    """-> (value, ok) of decimal digits buf[s:e] (at least one; ok False past 2**64 - 1)."""
    v = np.uint64(0)
    if s >= e:
        return v, False
    s = _skip_zeros(buf, s, e)
    if e - s > 20:
        return v, False
    for j in range(s, e):
        d = buf[j] - 48
        if d < 0 or d > 9:
            return v, False
        if j - s == 19 and (v > _U64_TENTH or (v == _U64_TENTH and d > 5)):  # only a 20th digit can overflow
            return v, False
        v = v * np.uint64(10) + np.uint64(d)
    return v, True


@numba.njit(cache=True)
def _dec_i64(buf, s, e):
    """-> (value, ok) of decimal digits buf[s:e] (at least one; ok False past 2**63 - 1)."""
    v = 0
    if s >= e:
        return v, False
    s = _skip_zeros(buf, s, e)
    if e - s > 19:
        return v, False
    for j in range(s, e):
        d = buf[j] - 48
        if d < 0 or d > 9:
            return v, False
        if j - s == 18 and v > (_I64_MAX - d) // 10:  # only a 19th digit can overflow
            return v, False
        v = v * 10 + d
    return v, True


@numba.njit(cache=True, inline="always")
def _has_0x(buf, s, e):
    return e - s >= 2 and buf[s] == 48 and (buf[s + 1] | 32) == 120


@numba.njit(cache=True)
def detect(buf):
    """Format of the first request line (RAMULATOR, DRAMSIM3, or FAIL for anything else), decided as
    trace._classify does: LD/ST first or second, R/W first (address vectors), a DRAMsim3 command second."""
    n = len(buf)
    i = 0
    while i < n:
        ntok = 0
        s0 = e0 = s1 = e1 = 0
        while True:  # buf ends with a newline
            cls = _CLASS[buf[i]]
            if cls == _TOKEN:
                s = i
                while _CLASS[buf[i]] == _TOKEN:
                    i += 1
                if ntok == 0:
                    s0, e0 = s, i
                elif ntok == 1:
                    s1, e1 = s, i
                ntok += 1
            elif cls == _BLANK:
                i += 1
            elif cls == _NEWLINE:
                i += 1
                break
            elif cls == _COMMENT:
                while buf[i] != 10:
                    i += 1
            else:
                return FAIL
        if ntok == 0:
            continue
        if _ram_op(buf, s0, e0) >= 0:
            return RAMULATOR
        if e0 - s0 == 1 and (_upper(buf[s0]) == 82 or _upper(buf[s0]) == 87):
            return FAIL  # R / W first: an address-vector trace
        if ntok >= 2 and _ram_op(buf, s1, e1) >= 0:
            return RAMULATOR
        if ntok >= 2 and _d3_op(buf, s1, e1) >= 0:
            return DRAMSIM3
        return FAIL
    return FAIL


# The line parsers below read each field in one pass (digits straight into the value). A field must end
# at a blank, a newline or '#'; anything else (a letter after a number, punctuation) fails the file.


@numba.njit(cache=True, inline="always")
def _skip_blanks(buf, i):
    while _CLASS[buf[i]] == _BLANK:
        i += 1
    return i


@numba.njit(cache=True, inline="always")
def _ends_field(buf, i):
    c = _CLASS[buf[i]]
    return c == _BLANK or c == _NEWLINE or c == _COMMENT


@numba.njit(cache=True, inline="always")
def _end_of_line(buf, i):
    """Index after the line's newline if only blanks and a comment are left at i, else -1 (an extra field)."""
    i = _skip_blanks(buf, i)
    if buf[i] == 35:  # '#'
        while buf[i] != 10:
            i += 1
    return i + 1 if buf[i] == 10 else -1


@numba.njit(cache=True, inline="always")
def _scan_hex(buf, i):
    """-> (value, end, ok) of the hex digits from i (at least one, value below 2**64)."""
    s = i
    v = np.uint64(0)
    while True:
        d = _HEXVAL[buf[i]]
        if d == 255:
            break
        v = (v << np.uint64(4)) | np.uint64(d)
        i += 1
    if i - s > 16:  # maybe too large, maybe leading zeros: the careful version decides
        v, ok = _hex(buf, s, i)
        return v, i, ok
    return v, i, i > s


@numba.njit(cache=True, inline="always")
def _scan_dec_u64(buf, i):
    """-> (value, end, ok) of the decimal digits from i (at least one, value below 2**64)."""
    s = i
    v = np.uint64(0)
    while True:
        d = np.int64(buf[i]) - 48
        if d < 0 or d > 9:
            break
        v = v * np.uint64(10) + np.uint64(d)
        i += 1
    if i - s > 19:
        v, ok = _dec_u64(buf, s, i)
        return v, i, ok
    return v, i, i > s


@numba.njit(cache=True, inline="always")
def _scan_dec_i64(buf, i):
    """-> (value, end, ok) of the decimal digits from i (at least one, value below 2**63)."""
    s = i
    v = 0
    while True:
        d = np.int64(buf[i]) - 48
        if d < 0 or d > 9:
            break
        v = v * 10 + d
        i += 1
    if i - s > 18:
        v, ok = _dec_i64(buf, s, i)
        return v, i, ok
    return v, i, i > s


@numba.njit(cache=True, inline="always")
def _scan_word(buf, i):
    while _CLASS[buf[i]] == _TOKEN:
        i += 1
    return i


@numba.njit(cache=True, nogil=True)
def parse_ramulator(buf, addr, is_write, third):
    """'LD|ST <addr>' or '<bubbles> LD|ST <addr>' lines (<addr> hex 0x... or decimal) -> requests
    (third = bubble count, -1 for none), or -1 if any line is something else."""
    n = len(buf)
    i = 0
    k = 0
    while i < n:
        i = _skip_blanks(buf, i)
        c = buf[i]
        if c == 10:
            i += 1
            continue
        if c == 35:
            i = _end_of_line(buf, i)
            continue
        bubbles = -1
        if 48 <= c <= 57:  # a bubble count first
            bubbles, i, ok = _scan_dec_i64(buf, i)
            if not ok or _CLASS[buf[i]] != _BLANK:
                return -1
            i = _skip_blanks(buf, i)
        e = _scan_word(buf, i)
        op = _ram_op(buf, i, e)
        if op < 0 or _CLASS[buf[e]] != _BLANK:
            return -1
        i = _skip_blanks(buf, e)
        if buf[i] == 48 and (buf[i + 1] | 32) == 120:  # 0x
            a, i, ok = _scan_hex(buf, i + 2)
        else:
            a, i, ok = _scan_dec_u64(buf, i)
        if not ok or not _ends_field(buf, i):
            return -1
        i = _end_of_line(buf, i)
        if i < 0:
            return -1
        addr[k] = a
        is_write[k] = op == 1
        third[k] = bubbles
        k += 1
    return k


@numba.njit(cache=True, nogil=True)
def parse_dramsim3(buf, addr, is_write, third):
    """'<addr> <command> <cycle>' lines (<addr> hexadecimal with or without 0x, cycles decimal and
    non-decreasing) -> requests (third = time stamp), or -1 if any line is something else."""
    n = len(buf)
    i = 0
    k = 0
    last_ts = -1
    while i < n:
        i = _skip_blanks(buf, i)
        c = buf[i]
        if c == 10:
            i += 1
            continue
        if c == 35:
            i = _end_of_line(buf, i)
            continue
        if c == 48 and (buf[i + 1] | 32) == 120:  # 0x
            i += 2
        a, i, ok = _scan_hex(buf, i)
        if not ok or _CLASS[buf[i]] != _BLANK:
            return -1
        i = _skip_blanks(buf, i)
        e = _scan_word(buf, i)
        op = _d3_op(buf, i, e)
        if op < 0 or _CLASS[buf[e]] != _BLANK:
            return -1
        i = _skip_blanks(buf, e)
        ts, i, ok = _scan_dec_i64(buf, i)
        if not ok or not _ends_field(buf, i) or ts < last_ts:
            return -1
        i = _end_of_line(buf, i)
        if i < 0:
            return -1
        last_ts = ts
        addr[k] = a
        is_write[k] = op == 1
        third[k] = ts
        k += 1
    return k


def load() -> None:
    """Load the parser's compiled functions now (from numba's cache; the first compiled function a process
    loads also pays numba's one-time initialisation, ~0.1 s)."""
    parse_bytes(b"LD 0\n")
    parse_bytes(b"0 READ 0\n")


def parse_bytes(data: bytes | mmap.mmap) -> tuple[str, np.ndarray, np.ndarray, np.ndarray] | None:
    """(format name, addr, is_write, third) of a Ramulator load/store or DRAMsim3 trace's bytes (or a memory
    map of them), or None when the general parser must read it (see the module docstring). The arrays are
    new: nothing refers to `data` afterwards."""
    if data[-1:] != b"\n":
        data = bytes(data) + b"\n"  # the kernel's sentinel (a copy, but only for files without a final newline)
    buf = np.frombuffer(data, dtype=np.uint8)
    # Every request line takes at least 5 bytes with its newline ('LD 0', '0 R 0'): an upper bound on the
    # number of requests that costs no pass over the data (pages never written are never touched).
    rows = len(data) // 5 + 1
    addr = np.empty(rows, dtype=np.uint64)
    is_write = np.empty(rows, dtype=np.bool_)
    third = np.empty(rows, dtype=np.int64)
    fmt = detect(buf)
    if fmt == RAMULATOR:
        k = parse_ramulator(buf, addr, is_write, third)
    elif fmt == DRAMSIM3:
        k = parse_dramsim3(buf, addr, is_write, third)
    else:
        return None
    if k <= 0:  # a line the general parser must read or report (k = 0 cannot happen after detect)
        return None
    for a in (addr, is_write, third):
        a.resize(k, refcheck=False)  # shrinks in place (realloc); nothing else refers to these arrays
    return FMT_NAMES[fmt], addr, is_write, third
