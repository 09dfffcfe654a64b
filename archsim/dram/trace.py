"""Memory traces: reading Ramulator 2 / DRAMsim3 trace files, writing them, and synthetic traces.

A :class:`Trace` is three parallel arrays (byte address, write flag, arrival cycle) plus where it came
from. ``arrive[i] >= 0`` is the earliest cycle request ``i`` may be offered to the memory system;
``-1`` means "as soon as possible", i.e. the cycle after the previous request was offered. Requests
are offered in order, one per cycle at most.

Supported file formats (detected from the first non-blank, non-comment line; ``#`` starts a comment;
gzip-compressed files are recognised by their magic bytes and read transparently; docs/traces.md has
the details):

* Ramulator 2 load/store trace (``ramulator``)::

      LD 0x1a2b3c          # arrive = -1 (the cycle after the previous request)
      12 ST 0x1a2b40       # 12 bubbles (non-memory cycles) first: arrive = previous + 1 + 12

  The "previous" arrival of a request without a bubble count is its nominal cycle (previous + 1),
  and the first request's previous arrival is -1, so ``12 LD 0x0`` as the first line arrives at 12.
  Addresses are hex (``0x...``) or decimal.

* Ramulator 2 address-vector trace (``ramulator-vec``, Ramulator's ReadWriteTrace)::

      R 0,1,0,2,100,3      # read; the address as one decimal index per level
      W 0,0,1,3,7,12       # write

  Every request arrives as soon as possible. Vectors hold 4 to 7 entries, the same number on every
  line, read as (see VECTOR_ORDERS): 7 = channel, pseudochannel, rank, bankgroup, bank, row, column;
  6 = channel, rank, bankgroup, bank, row, column (the second entry is the pseudochannel on a device
  with pseudochannels and a single rank, e.g. HBM); 5 = channel, bankgroup, bank, row, column;
  4 = channel, bank, row, column. Missing levels are 0; the column counts accesses (0 ..
  row_bytes / access_bytes - 1). The trace keeps the vectors in ``Trace.vec`` (n x 7, archsim's
  level order) and has no byte addresses until ``to_addresses(trace, spec, mapping)`` derives them.

* Ramulator 2 SimpleO3 core trace (``simpleo3``)::

      3 0x1a2b3c           # 3 bubbles, then a read of 0x1a2b3c
      0 4096 8192          # a read of 4096, then a write (write-back) of 8192

  The bubble count (non-memory instructions in Ramulator) is read as idle cycles, as for the
  load/store trace; the write-back is offered as soon as possible after its read. Addresses are hex
  (``0x...``) or decimal.

* DRAMsim3 trace (``dramsim3``)::

      0x1a2b3c READ 120    # also WRITE, R, W, P_MEM_RD, P_MEM_WR, IFETCH (any case); third field = cycle
      1a2b40 WRITE 125     # time stamps must be non-decreasing

  Addresses are hexadecimal with or without ``0x`` (as DRAMsim3 reads them); P_MEM_RD and IFETCH are
  reads, P_MEM_WR a write.

Counts and time stamps are decimal.

Parsing is vectorised with numpy (fixed-width byte arrays, digit lookup tables), a few seconds
for tens of millions of lines; lines the fast path cannot handle are re-parsed one by one, which
either accepts them (e.g. hex addresses with many leading zeros) or produces an error naming the
file and line.
"""
from __future__ import annotations

import gzip
import mmap
import os
import re
import stat
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from archsim.dram.trace_kinds import SYNTHETIC_KINDS
from archsim.errors import UserError
from archsim.output import write_bytes

__all__ = ["Trace", "read_trace", "synthetic_trace", "write_trace", "to_addresses", "trace_warnings", "FORMATS",
           "WRITE_FORMATS",
           "SYNTHETIC_KINDS", "VECTOR_ORDERS", "parse_synthetic"]

FORMATS = ("ramulator", "dramsim3", "ramulator-vec", "simpleo3")  # formats read_trace reads
WRITE_FORMATS = ("ramulator", "dramsim3")  # formats write_trace writes

_RAM_FORMS = (
    "'LD <addr>', 'ST <addr>' or '<bubbles> LD|ST <addr>' (Ramulator 2 trace; <addr> hex 0x... "
    "or decimal, <bubbles> a non-negative decimal count)"
)
_D3_FORMS = (
    "'<addr> READ|WRITE|R|W|P_MEM_RD|P_MEM_WR|IFETCH <cycle>' (DRAMsim3 trace; <addr> hexadecimal with "
    "or without 0x, <cycle> a non-negative decimal time stamp, non-decreasing)"
)
_VEC_FORMS = (
    "'R|W <c>,<c>,...' (Ramulator 2 address-vector trace; 4 to 7 non-negative decimal entries, the same "
    "number on every line)"
)
_O3_FORMS = (
    "'<bubbles> <load addr> [<writeback addr>]' (Ramulator 2 SimpleO3 trace; addresses hex 0x... or "
    "decimal, <bubbles> a non-negative decimal count)"
)
_FORMS = {"ramulator": _RAM_FORMS, "dramsim3": _D3_FORMS, "ramulator-vec": _VEC_FORMS, "simpleo3": _O3_FORMS}
_ANY_FORMS = " or ".join(_FORMS.values())
_FMT_NAME = {"ramulator": "Ramulator 2 load/store", "dramsim3": "DRAMsim3",
             "ramulator-vec": "Ramulator 2 address-vector", "simpleo3": "Ramulator 2 SimpleO3"}

# Address-vector length -> the archsim levels (indices into mapping.VECTOR_LEVELS) its entries fill.
VECTOR_ORDERS = {
    7: ("channel", "pseudochannel", "rank", "bankgroup", "bank", "row", "column"),
    6: ("channel", "rank", "bankgroup", "bank", "row", "column"),
    5: ("channel", "bankgroup", "bank", "row", "column"),
    4: ("channel", "bank", "row", "column"),
}
_LEVELS7 = VECTOR_ORDERS[7]
_VEC_SLOTS = {k: [_LEVELS7.index(name) for name in order] for k, order in VECTOR_ORDERS.items()}

_U64_MAX = (1 << 64) - 1
_I64_MAX = (1 << 63) - 1

_RAM_OPS = {"LD": False, "ST": True}
_D3_OPS = {"READ": False, "R": False, "WRITE": True, "W": True, "P_MEM_RD": False, "P_MEM_WR": True,
           "IFETCH": False}
_D3_WRITE_OPS = [op.encode() for op, w in _D3_OPS.items() if w]
_D3_READ_OPS = [op.encode() for op, w in _D3_OPS.items() if not w]
_VEC_OPS = {"R": False, "W": True}

_HEX_RE = re.compile(r"0[xX][0-9a-fA-F]+")
_BARE_HEX_RE = re.compile(r"[0-9a-fA-F]+")
_DEC_RE = re.compile(r"[0-9]+")
_NEG_RE = re.compile(r"-(0[xX][0-9a-fA-F]+|[0-9]+)")
_COMMENT_RE = re.compile(rb"#[^\n]*")
# Every ASCII whitespace byte except newline becomes a plain space (handles tabs and CRLF files).
_WS_TABLE = bytes.maketrans(b"\t\r\x0b\x0c", b"    ")

_CHUNK_BYTES = 16 << 20  # the file is parsed in pieces of about this size, split at line ends
_FAST_MAX_WIDTH = 96  # longer lines skip the vectorised path (keeps the byte matrices small)

_DIGIT = np.full(256, 255, dtype=np.uint8)
_DIGIT[np.frombuffer(b"0123456789", np.uint8)] = np.arange(10, dtype=np.uint8)
_DIGIT[np.frombuffer(b"abcdef", np.uint8)] = np.arange(10, 16, dtype=np.uint8)
_DIGIT[np.frombuffer(b"ABCDEF", np.uint8)] = np.arange(10, 16, dtype=np.uint8)


class Trace:
    """A memory-request trace: parallel arrays, one entry per request (see the module docstring).

    addr:     uint64 byte addresses
    is_write: bool
    arrive:   int64 earliest offer cycle; -1 = as soon as possible
    source:   file name or "synthetic:<kind>"
    fmt:      one of FORMATS or "synthetic"
    vec:      address-vector traces only: (n x 7) int64 level indices (channel, pseudochannel, rank,
              bankgroup, bank, row, column); vec_width is the vector length in the file and vec_line
              the file line of each request. Such a trace has no byte addresses (reading `addr` raises)
              until they are derived: ``trace.addr = to_addresses(trace, spec, mapping)``.
    parser:   how read_trace parsed the file: "fast" (archsim.dram.fast_trace, the numba byte-level
              parser of Ramulator load/store and DRAMsim3 traces), "general" (the numpy parser: other
              formats, and any file the fast one gives up on); "" when not read from a file.
    """

    parser: str = ""

    def __init__(self, addr: np.ndarray | None, is_write: np.ndarray, arrive: np.ndarray, source: str, fmt: str,
                 vec: np.ndarray | None = None, vec_width: int = 0, vec_line: np.ndarray | None = None):
        self.source = source
        self.fmt = fmt
        self.is_write = np.ascontiguousarray(is_write, dtype=bool).reshape(-1)
        self.arrive = np.ascontiguousarray(arrive, dtype=np.int64).reshape(-1)
        self.vec = None if vec is None else np.ascontiguousarray(vec, dtype=np.int64).reshape(-1, len(_LEVELS7))
        self.vec_width = int(vec_width)
        self.vec_line = None if vec_line is None else np.asarray(vec_line, dtype=np.int64).reshape(-1)
        n = len(self.is_write)
        self._addr: np.ndarray | None = None
        if addr is not None:
            self.addr = addr
        elif self.vec is None:
            raise UserError(f"{source}: a trace needs byte addresses or address vectors")
        if len(self.arrive) != n or (self.vec is not None and len(self.vec) != n):
            raise UserError(
                f"{self.source}: trace arrays differ in length (is_write {n}, arrive {len(self.arrive)}"
                + (f", vec {len(self.vec)}" if self.vec is not None else "")
                + "); expected one entry per request in each"
            )
        if self.fmt not in (*FORMATS, "synthetic"):
            raise UserError(f"{self.source}: unknown trace format {self.fmt!r}; expected one of: "
                            f"{', '.join((*FORMATS, 'synthetic'))}")

    @property
    def addr(self) -> np.ndarray:
        if self._addr is None:
            raise UserError(
                f"{self.source}: an address-vector trace has no byte addresses until they are derived from the "
                "DRAM organisation and address mapping (archsim.dram.trace.to_addresses(trace, spec, mapping))"
            )
        return self._addr

    @addr.setter
    def addr(self, value: np.ndarray) -> None:
        addr = np.ascontiguousarray(value, dtype=np.uint64).reshape(-1)
        if len(addr) != len(self.is_write):
            raise UserError(
                f"{self.source}: trace arrays differ in length (addr {len(addr)}, is_write {len(self.is_write)}, "
                f"arrive {len(self.arrive)}); expected one entry per request in each"
            )
        self._addr = addr

    @property
    def has_addresses(self) -> bool:
        return self._addr is not None

    def __len__(self) -> int:
        return len(self.is_write)

    def __repr__(self) -> str:
        return f"Trace({len(self)} requests, fmt={self.fmt!r}, source={self.source!r})"


def to_addresses(trace: Trace, spec: Any, mapping: str | None = None) -> np.ndarray:
    """Byte addresses of an address-vector trace on `spec` (a DramSpec) under `mapping` (default
    RoBaRaCoCh): the inverse of the mapping's decode, vectorised. A 6-entry vector's second entry is the
    pseudochannel on a device with more than one pseudochannel and a single rank (HBM), else the rank.
    Raises UserError naming the file and line of the first entry out of the device's range."""
    from archsim.dram.mapping import DEFAULT_MAPPING, encode_many

    if trace.vec is None:
        raise UserError(f"{trace.source}: not an address-vector trace (format {trace.fmt}); it has byte addresses")
    vec = trace.vec
    order = list(VECTOR_ORDERS.get(trace.vec_width, _LEVELS7))
    if trace.vec_width == 6 and spec.counts[1] > 1 and spec.counts[2] == 1:   # HBM: channel, pseudochannel, ...
        vec = vec.copy()
        vec[:, 1], vec[:, 2] = vec[:, 2], 0
        order[1] = "pseudochannel"
    sizes = dict(zip(_LEVELS7, (*spec.counts, spec.rows, spec.columns), strict=True))
    for j, level in enumerate(_LEVELS7):
        bad = np.flatnonzero(vec[:, j] >= sizes[level])
        if len(bad):
            i = int(bad[0])
            line = f":{int(trace.vec_line[i])}" if trace.vec_line is not None else f": request {i + 1}"
            width = trace.vec_width or 7
            raise UserError(
                f"{trace.source}{line}: {level} = {int(vec[i, j])} is out of range for {spec.name} "
                f"(0..{sizes[level] - 1}); a {width}-entry vector is read as {','.join(order)}"
                + (" (the column counts accesses of access_bytes)" if level == "column" else "")
            )
    return encode_many(spec, vec, mapping or DEFAULT_MAPPING)


def trace_warnings(trace: Trace, spec: Any, mapping: str | None = None) -> list[str]:
    """One-line warnings about how `trace` (with byte addresses) uses `spec` under `mapping`: address
    fields the device has several of but the trace never varies (mapping.constant_fields)."""
    from archsim.dram.mapping import DEFAULT_MAPPING, constant_fields

    mapping = mapping or DEFAULT_MAPPING
    fields = constant_fields(spec, trace.addr, mapping)
    if not fields:
        return []
    sizes = dict(zip(_LEVELS7[:5], spec.counts, strict=True))
    what = ", ".join(f"{f} (1 of {sizes[f]})" for f in fields)
    return [f"{trace.source}: every request goes to the same {what} under mapping {mapping}; the run measures "
            "only that part of the device (another mapping or a wider address range spreads the requests)"]


# ----------------------------------------------------------------------------------------------
# reading


class _LineError(Exception):
    """A problem with one line; the caller adds file, line number and the allowed forms."""

    def __init__(self, what: str, forms: str):
        super().__init__(what)
        self.what = what
        self.forms = forms


# The largest trace text archsim reads (after gzip): ~70 M requests, whose arrays take a few GB; a larger
# file, an endless one (/dev/zero, a pipe) or a gzip bomb is refused once this much is read (issue 35).
MAX_TRACE_BYTES = 1 << 30
_READ_CHUNK = 16 << 20


def _too_large(source: str) -> UserError:
    from archsim.config import size_text

    return UserError(f"{source}: trace is larger than {size_text(MAX_TRACE_BYTES)} (the limit; after gzip); "
                     "split it or simulate a part of it")


def _bounded(fh: Any, source: str) -> bytearray:
    """Everything `fh` holds, read in chunks up to MAX_TRACE_BYTES (into one buffer: no second copy); a binary
    file is refused at its first chunk."""
    data = bytearray()
    while True:
        chunk = fh.read(_READ_CHUNK)
        if not chunk:
            return data
        if not data and chunk[:2] != b"\x1f\x8b" and b"\0" in chunk:     # (gzip: checked once inflated)
            raise UserError(f"{source}: not a text trace (it holds NUL bytes); expected {_ANY_FORMS}")
        data += chunk
        if len(data) > MAX_TRACE_BYTES:
            raise _too_large(source)


def _read_bytes(path: Path, source: str) -> bytearray:
    try:
        with open(path, "rb") as fh:
            raw = _bounded(fh, source)
    except FileNotFoundError:
        raise UserError(f"{source}: trace file not found") from None
    except IsADirectoryError:
        raise UserError(f"{source}: is a directory; expected a trace file") from None
    except OSError as e:
        raise UserError(f"{source}: cannot read trace file: {e.strerror or e}") from None
    if raw[:2] == b"\x1f\x8b":
        import io

        try:
            with gzip.GzipFile(fileobj=io.BytesIO(raw)) as fh:
                raw = _bounded(fh, source)
        except (OSError, EOFError, zlib.error) as e:
            raise UserError(f"{source}: corrupt or truncated gzip file ({e}); expected a gzip-compressed trace") from None
    if raw[:3] == b"\xef\xbb\xbf":  # UTF-8 byte-order mark
        raw = raw[3:]
    return raw


def _show(tok: str) -> str:
    return repr(tok if len(tok) <= 40 else tok[:37] + "...")


def _parse_int(tok: str, what: str, *, hex_ok: bool, limit: int, hex_only: bool = False) -> int:
    """A decimal number, or hex with 0x when hex_ok; with hex_only, hexadecimal with or without 0x."""
    digits = tok[2:] if tok[:2] in ("0x", "0X") else tok
    if len(digits.lstrip("0")) > 20:     # beyond 64 bits in any base: refused before int() reads it all
        raise _LineError(f"{what} {_show(tok)} is too large ({len(tok):,} characters; limit {limit})", "")
    if (hex_ok or hex_only) and _HEX_RE.fullmatch(tok):
        v = int(tok[2:], 16)
    elif hex_only and _BARE_HEX_RE.fullmatch(tok):
        v = int(tok, 16)
    elif not hex_only and _DEC_RE.fullmatch(tok):
        v = int(tok)
    elif _NEG_RE.fullmatch(tok):
        raise _LineError(f"negative {what} {_show(tok)}", "")
    else:
        kind = ("hexadecimal number" if hex_only else "hex 0x... or decimal number" if hex_ok
                else "decimal number")
        raise _LineError(f"bad {what} {_show(tok)} (not a {kind})", "")
    if v > limit:
        raise _LineError(f"{what} {_show(tok)} is too large (limit {limit})", "")
    return v


def _classify(tokens: list[str]) -> str | None:
    if not tokens:
        return None
    op0 = tokens[0].upper()
    if op0 in _RAM_OPS:
        return "ramulator"
    if op0 in _VEC_OPS:
        return "ramulator-vec"
    if len(tokens) >= 2:
        op = tokens[1].upper()
        if op in _RAM_OPS:
            return "ramulator"
        if op in _D3_OPS:
            return "dramsim3"
        if tokens[0].isdigit() and _looks_numeric(tokens[1]):
            return "simpleo3"
    return None


def _looks_numeric(tok: str) -> bool:
    return tok[:1].isdigit() or (tok[:1] in "+-" and tok[1:2].isdigit())


def _parse_line_ram(tokens: list[str]) -> tuple[int, bool, int]:
    """-> (addr, is_write, bubbles or -1 if the line has no bubble count)."""
    op0 = tokens[0].upper()
    if op0 in _RAM_OPS:
        if len(tokens) < 2:
            raise _LineError(f"missing address after {tokens[0]!r}", _RAM_FORMS)
        addr = _parse_int(tokens[1], "address", hex_ok=True, limit=_U64_MAX)
        if len(tokens) > 2:
            raise _LineError(f"unexpected extra field {_show(tokens[2])}", _RAM_FORMS)
        return addr, _RAM_OPS[op0], -1
    if not _looks_numeric(tokens[0]):
        raise _LineError(f"bad opcode {_show(tokens[0])}", _RAM_FORMS)
    bubbles = _parse_int(tokens[0], "bubble count", hex_ok=False, limit=_I64_MAX)
    if len(tokens) < 2:
        raise _LineError("missing opcode (LD or ST) and address after the bubble count", _RAM_FORMS)
    op1 = tokens[1].upper()
    if op1 not in _RAM_OPS:
        raise _LineError(f"bad opcode {_show(tokens[1])}", _RAM_FORMS)
    if len(tokens) < 3:
        raise _LineError(f"missing address after {tokens[1]!r}", _RAM_FORMS)
    addr = _parse_int(tokens[2], "address", hex_ok=True, limit=_U64_MAX)
    if len(tokens) > 3:
        raise _LineError(f"unexpected extra field {_show(tokens[3])}", _RAM_FORMS)
    return addr, _RAM_OPS[op1], bubbles


def _parse_line_d3(tokens: list[str]) -> tuple[int, bool, int]:
    """-> (addr, is_write, time stamp)."""
    addr = _parse_int(tokens[0], "address", hex_ok=True, limit=_U64_MAX, hex_only=True)
    if len(tokens) < 2:
        raise _LineError("missing command (READ or WRITE) and time stamp after the address", _D3_FORMS)
    op = tokens[1].upper()
    if op not in _D3_OPS:
        raise _LineError(f"bad command {_show(tokens[1])}", _D3_FORMS)
    if len(tokens) < 3:
        raise _LineError(f"missing time stamp after {tokens[1]!r}", _D3_FORMS)
    ts = _parse_int(tokens[2], "time stamp", hex_ok=False, limit=_I64_MAX)
    if len(tokens) > 3:
        raise _LineError(f"unexpected extra field {_show(tokens[3])}", _D3_FORMS)
    return addr, _D3_OPS[op], ts


def _parse_line_vec(tokens: list[str], width: int | None) -> tuple[list[int], bool]:
    """-> (vector entries, is_write). width: the entry count every line must have (None: any of 4..7)."""
    op = tokens[0].upper()
    if op not in _VEC_OPS:
        raise _LineError(f"bad command {_show(tokens[0])}", _VEC_FORMS)
    if len(tokens) < 2:
        raise _LineError(f"missing address vector after {tokens[0]!r}", _VEC_FORMS)
    if len(tokens) > 2:
        raise _LineError(f"unexpected extra field {_show(tokens[2])}", _VEC_FORMS)
    entries = tokens[1].split(",")
    if len(entries) not in VECTOR_ORDERS:
        raise _LineError(f"address vector {_show(tokens[1])} has {len(entries)} entries", _VEC_FORMS)
    if width is not None and len(entries) != width:
        raise _LineError(f"address vector {_show(tokens[1])} has {len(entries)} entries, earlier lines {width}",
                         _VEC_FORMS)
    vec = [_parse_int(e, "vector entry", hex_ok=False, limit=_I64_MAX) for e in entries]
    return vec, _VEC_OPS[op]


def _parse_line_o3(tokens: list[str]) -> tuple[int, int, int]:
    """-> (bubbles, load address, write-back address or -1)."""
    if not _looks_numeric(tokens[0]):
        raise _LineError(f"bad bubble count {_show(tokens[0])}", _O3_FORMS)
    bubbles = _parse_int(tokens[0], "bubble count", hex_ok=False, limit=_I64_MAX)
    if len(tokens) < 2:
        raise _LineError("missing load address after the bubble count", _O3_FORMS)
    load = _parse_int(tokens[1], "load address", hex_ok=True, limit=_U64_MAX)
    wb = -1
    if len(tokens) > 2:
        wb = _parse_int(tokens[2], "write-back address", hex_ok=True, limit=_U64_MAX)
    if len(tokens) > 3:
        raise _LineError(f"unexpected extra field {_show(tokens[3])}", _O3_FORMS)
    return bubbles, load, wb


def _parse_uint(tok: np.ndarray, *, hex_ok: bool, max_hex: int, max_dec: int,
                hex_only: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised parse of a fixed-width bytes array of hex (0x...) / decimal numbers (with hex_only:
    hexadecimal with or without 0x).

    Returns (values as uint64, ok mask). Rows that are not a plain number with at most max_hex hex /
    max_dec decimal digits are not ok (the caller re-parses those one by one)."""
    tok = np.ascontiguousarray(tok)
    n = len(tok)
    w = tok.dtype.itemsize
    if w == 0:
        return np.zeros(n, dtype=np.uint64), np.zeros(n, dtype=bool)
    m = tok.view(np.uint8).reshape(n, w)
    length = np.strings.str_len(tok)
    if (hex_ok or hex_only) and w >= 3:
        prefixed = (m[:, 0] == ord("0")) & ((m[:, 1] | 0x20) == ord("x"))
    else:
        prefixed = np.zeros(n, dtype=bool)
    is_hex = np.ones(n, dtype=bool) if hex_only else prefixed
    start = np.where(prefixed, 2, 0)
    ndig = length - start
    ok = (ndig >= 1) & (ndig <= np.where(is_hex, max_hex, max_dec))
    base = np.where(is_hex, np.uint64(16), np.uint64(10))
    digits = _DIGIT[m]
    val = np.zeros(n, dtype=np.uint64)
    for j in range(w):
        active = (start <= j) & (j < length)
        if not active.any():
            continue
        d = digits[:, j]
        ok &= ~active | (d < base)
        val = np.where(active, val * base + d, val)
    return val, ok


def _split_first(a: np.ndarray, sep: bytes = b" ") -> tuple[np.ndarray, np.ndarray]:
    """(first sep-separated field, the rest without leading spaces) of each row of a stripped array."""
    if a.dtype.itemsize == 0:  # all rows empty (numpy mishandles zero-width arrays in partition)
        empty = np.zeros(len(a), dtype="S1")
        return empty, empty
    head, _, tail = np.strings.partition(a, sep)
    if tail.dtype.itemsize == 0:
        return head, np.zeros(len(a), dtype="S1")
    return head, np.strings.lstrip(tail)


class _Parser:
    """Incremental parser: feed() whole-line chunks in order, then finish()."""

    def __init__(self, source: str):
        self.source = source
        self.fmt: str | None = None
        self.fmt_line = 0
        self.addr: list[np.ndarray] = []
        self.is_write: list[np.ndarray] = []
        self.third: list[np.ndarray] = []  # bubbles (-1 = none) or time stamps
        self.lineno: list[np.ndarray] = []
        self.vec: list[np.ndarray] = []  # address-vector traces: (n x width) entries
        self.vec_width: int | None = None
        self.last_ts = -1
        self.last_ts_line = 0

    def _error(self, line: int, what: str, forms: str) -> UserError:
        return UserError(f"{self.source}:{line}: {what}; expected {forms}")

    def _slow(self, text: bytes, line: int) -> Any:
        tokens = text.decode("utf-8", "replace").split()
        kind = _classify(tokens)
        assert self.fmt is not None
        if kind is not None and kind != self.fmt:
            raise self._error(
                line,
                f"mixed trace formats: this line is a {_FMT_NAME[kind]} request but the file is a "
                f"{_FMT_NAME[self.fmt]} trace (detected from line {self.fmt_line})",
                _FORMS[self.fmt],
            )
        try:
            if self.fmt == "ramulator":
                return _parse_line_ram(tokens)
            if self.fmt == "dramsim3":
                return _parse_line_d3(tokens)
            if self.fmt == "simpleo3":
                return _parse_line_o3(tokens)
            return _parse_line_vec(tokens, self.vec_width)
        except _LineError as e:
            raise self._error(line, e.what, e.forms or _FORMS[self.fmt]) from None

    def _detect(self, text: bytes, line: int) -> None:
        tokens = text.decode("utf-8", "replace").split()
        kind = _classify(tokens)
        if kind is None:
            what = f"cannot recognise the trace format from {_show(' '.join(tokens))}"
            raise self._error(line, what, _ANY_FORMS)
        self.fmt, self.fmt_line = kind, line
        if kind == "ramulator-vec":
            self.vec_width = len(self._slow(text, line)[0])

    def _check_ts(self, ts: np.ndarray, lines: np.ndarray, upto: int) -> None:
        """Raise if time stamps ts[:upto] decrease (also against the previous chunk's last one)."""
        if upto <= 0:
            return
        t = ts[:upto]
        prev = np.empty(upto, dtype=np.int64)
        prev[0] = self.last_ts
        prev[1:] = t[:-1]
        bad = np.flatnonzero(t < prev)
        if len(bad):
            i = int(bad[0])
            pline = int(lines[i - 1]) if i > 0 else self.last_ts_line
            raise self._error(
                int(lines[i]),
                f"time stamp {int(t[i])} is earlier than {int(prev[i])} on line {pline}",
                "non-decreasing time stamps: " + _D3_FORMS,
            )

    def feed(self, chunk: bytes, first_line: int) -> None:
        if b"#" in chunk:
            chunk = _COMMENT_RE.sub(b"", chunk)
        chunk = chunk.translate(_WS_TABLE)
        lines = chunk.split(b"\n")
        long_rows: np.ndarray | None = None
        if max(map(len, lines)) > _FAST_MAX_WIDTH:
            lens = np.fromiter(map(len, lines), dtype=np.int64, count=len(lines))
            long_rows = lens > _FAST_MAX_WIDTH
            short = [b"" if n > _FAST_MAX_WIDTH else s for s, n in zip(lines, lens.tolist(), strict=True)]
            arr = np.array(short, dtype=f"S{_FAST_MAX_WIDTH}")
        else:
            arr = np.array(lines, dtype=bytes)
        s = np.strings.strip(arr)
        keep = np.strings.str_len(s) > 0
        if long_rows is not None:
            keep |= long_rows
        rows = np.flatnonzero(keep)
        if len(rows) == 0:
            return
        s = s[rows]
        lineno = rows.astype(np.int64) + first_line
        if self.fmt is None:
            self._detect(lines[int(rows[0])], int(lineno[0]))

        f1, rest = _split_first(s)
        f2, rest = _split_first(rest)
        f3, rest = _split_first(rest)
        bad = np.strings.str_len(rest) > 0  # a fourth field (rest is already stripped of leading blanks)
        if long_rows is not None:
            bad |= long_rows[rows]
        if self.fmt == "ramulator-vec":
            self._feed_vec(f1, f2, f3, bad, lines, rows, lineno)
            return
        if self.fmt == "simpleo3":
            self._feed_o3(f1, f2, f3, bad, lines, rows, lineno)
            return
        n = len(s)
        if self.fmt == "ramulator":
            op1 = np.strings.upper(f1)
            plain = (op1 == b"LD") | (op1 == b"ST")
            has_b = ~plain
            op = np.where(plain, op1, np.strings.upper(f2))
            bad |= ~((op == b"LD") | (op == b"ST"))
            f3_empty = np.strings.str_len(f3) == 0
            bad |= np.where(plain, ~f3_empty, f3_empty)
            addr, ok = _parse_uint(np.where(plain, f2, f3), hex_ok=True, max_hex=16, max_dec=19)
            bad |= ~ok
            third = np.full(n, -1, dtype=np.int64)
            if has_b.any():
                bub, ok = _parse_uint(f1[has_b], hex_ok=False, max_hex=0, max_dec=18)
                third[has_b] = bub.astype(np.int64)
                bad[has_b] |= ~ok
            is_write = op == b"ST"
        else:
            addr, ok = _parse_uint(f1, hex_ok=True, max_hex=16, max_dec=19, hex_only=True)
            bad |= ~ok
            op = np.strings.upper(f2)
            is_w = np.isin(op, _D3_WRITE_OPS)
            bad |= ~(is_w | np.isin(op, _D3_READ_OPS))
            ts, ok = _parse_uint(f3, hex_ok=False, max_hex=0, max_dec=18)
            bad |= ~ok
            third = ts.astype(np.int64)
            is_write = is_w

        # Lines the vectorised pass could not handle: parse each on its own (or report it).
        for i in np.flatnonzero(bad).tolist():
            try:
                a, w, t = self._slow(lines[int(rows[i])], int(lineno[i]))
            except UserError:
                if self.fmt == "dramsim3":
                    self._check_ts(third, lineno, i)  # an earlier decreasing time stamp wins
                raise
            addr[i], is_write[i], third[i] = a, w, t
        if self.fmt == "dramsim3":
            self._check_ts(third, lineno, n)
            self.last_ts, self.last_ts_line = int(third[-1]), int(lineno[-1])
        self._append(addr, is_write, third, lineno)

    def _append(self, addr: np.ndarray, is_write: np.ndarray, third: np.ndarray, lineno: np.ndarray) -> None:
        self.addr.append(addr)
        self.is_write.append(is_write.astype(bool, copy=False))
        self.third.append(third)
        self.lineno.append(lineno)

    def _feed_vec(self, f1: np.ndarray, f2: np.ndarray, f3: np.ndarray, bad: np.ndarray, lines: list[bytes],
                  rows: np.ndarray, lineno: np.ndarray) -> None:
        width = self.vec_width
        assert width is not None
        n = len(f1)
        op = np.strings.upper(f1)
        is_write = op == b"W"
        bad |= ~(is_write | (op == b"R")) | (np.strings.str_len(f3) > 0)
        bad |= np.strings.count(f2, b",") != width - 1
        vec = np.zeros((n, width), dtype=np.int64)
        rest = f2
        for j in range(width):
            entry, rest = _split_first(rest, b",")
            val, ok = _parse_uint(entry, hex_ok=False, max_hex=0, max_dec=18)
            vec[:, j] = val.astype(np.int64)
            bad |= ~ok
        for i in np.flatnonzero(bad).tolist():
            v, w = self._slow(lines[int(rows[i])], int(lineno[i]))
            vec[i], is_write[i] = v, w
        self.vec.append(vec)
        self._append(np.zeros(0, dtype=np.uint64), is_write, np.full(n, -1, dtype=np.int64), lineno)

    def _feed_o3(self, f1: np.ndarray, f2: np.ndarray, f3: np.ndarray, bad: np.ndarray, lines: list[bytes],
                 rows: np.ndarray, lineno: np.ndarray) -> None:
        bub, ok = _parse_uint(f1, hex_ok=False, max_hex=0, max_dec=18)
        bad |= ~ok
        load, ok = _parse_uint(f2, hex_ok=True, max_hex=16, max_dec=19)
        bad |= ~ok
        has_wb = np.strings.str_len(f3) > 0
        wb, ok = _parse_uint(f3, hex_ok=True, max_hex=16, max_dec=19)
        bad |= has_wb & ~ok
        bub = bub.astype(np.int64)
        for i in np.flatnonzero(bad).tolist():
            b, a, w = self._slow(lines[int(rows[i])], int(lineno[i]))
            bub[i], load[i], has_wb[i] = b, a, w >= 0
            if w >= 0:
                wb[i] = w
        # Each line is a read, then (with a write-back address) a write offered as soon as possible.
        count = 1 + has_wb.astype(np.int64)
        first = np.cumsum(count) - count      # index of each line's read in the expanded arrays
        total = int(count.sum())
        addr = np.empty(total, dtype=np.uint64)
        is_write = np.zeros(total, dtype=bool)
        third = np.full(total, -1, dtype=np.int64)
        addr[first], third[first] = load, bub
        second = first[has_wb] + 1
        addr[second], is_write[second] = wb[has_wb], True
        self._append(addr, is_write, third, np.repeat(lineno, count))

    def finish(self) -> Trace:
        if not self.lineno:
            raise UserError(f"{self.source}: trace contains no requests (only blank lines or comments); expected {_ANY_FORMS}")
        is_write = np.concatenate(self.is_write)
        third = np.concatenate(self.third)
        assert self.fmt is not None
        if self.fmt == "ramulator-vec":
            assert self.vec_width is not None
            raw = np.concatenate(self.vec)
            vec = np.zeros((len(raw), len(_LEVELS7)), dtype=np.int64)
            vec[:, _VEC_SLOTS[self.vec_width]] = raw
            return Trace(addr=None, is_write=is_write, arrive=third, source=self.source, fmt=self.fmt, vec=vec,
                         vec_width=self.vec_width, vec_line=np.concatenate(self.lineno))
        return _requests_trace(self.source, self.fmt, np.concatenate(self.addr), is_write, third)


def _requests_trace(source: str, fmt: str, addr: np.ndarray, is_write: np.ndarray, third: np.ndarray) -> Trace:
    """The Trace of a byte-address format from parallel arrays; third is the DRAMsim3 time stamp, or
    the bubble count (-1: none) of the Ramulator formats, turned into arrival cycles here."""
    if fmt == "dramsim3":
        arrive = third
    else:
        top = int(third.max()) if len(third) else -1
        if top < 0:
            arrive = third  # no bubble counts: every entry is already -1 (as soon as possible)
        else:
            has_b = third >= 0
            bub = np.maximum(third, 0)
            if top * len(bub) >= _I64_MAX // 2 and sum(bub.tolist()) + len(bub) >= _I64_MAX:
                raise UserError(
                    f"{source}: bubble counts add up past the 64-bit cycle range; "
                    f"expected {_FORMS[fmt]} with a total below {_I64_MAX}"
                )
            # previous nominal cycle + 1 + bubbles, starting at -1 (in place: one array, not four)
            bub += 1
            nominal = np.cumsum(bub, out=bub)
            nominal -= 1
            arrive = np.where(has_b, nominal, -1)
    return Trace(addr=addr, is_write=is_write, arrive=arrive, source=source, fmt=fmt)


def read_trace(path: str | Path) -> Trace:
    """Read a trace file in any of FORMATS (auto-detected; gzip read transparently).

    Raises UserError naming the file (and line) for missing files, malformed or mixed-format lines,
    decreasing DRAMsim3 time stamps, and traces without requests. An address-vector trace comes back
    with `vec` and without byte addresses: see to_addresses. `Trace.parser` tells which parser read it."""
    source = str(path)
    p = Path(path).expanduser()
    data = _map_file(p)
    if data is None:
        data = _read_bytes(p, source)
    nul = data.find(b"\0")      # (memchr: ~0.1 s per GB) the parsers would take NUL bytes for blanks
    if nul >= 0:
        line = bytes(data[:nul]).count(b"\n") + 1
        if isinstance(data, mmap.mmap):
            data.close()
        raise UserError(f"{source}:{line}: a NUL byte: not a text trace; expected {_ANY_FORMS}")
    try:
        trace = _read_fast(data, source)
        if trace is None:
            trace = _read_general(data, source)
    finally:
        if isinstance(data, mmap.mmap):
            try:
                data.close()
            except BufferError:  # a view is still referenced (e.g. from an exception's frames): freed with it
                pass
    return trace


def _map_file(path: Path) -> mmap.mmap | None:
    """A read-only memory map of a plain, uncompressed regular file without a byte-order mark: the parsers
    then read the page cache directly (no copy of a file of tens of MB, no fresh memory to fault in). None
    for anything else (gzip, a BOM, an empty or special file, an error), which _read_bytes reads or reports."""
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode) or st.st_size < 3:
                return None
            if st.st_size > MAX_TRACE_BYTES:
                raise _too_large(str(path))
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return None
    if mm[:2] == b"\x1f\x8b" or mm[:3] == b"\xef\xbb\xbf":
        mm.close()
        return None
    return mm


def _read_fast(data: bytes | mmap.mmap, source: str) -> Trace | None:
    """The trace in `data` if it is a Ramulator load/store or DRAMsim3 trace the numba byte-level parser
    (archsim.dram.fast_trace) reads entirely; None for anything else, which _read_general handles."""
    from archsim.dram import fast_trace  # imports numba: only when a file is read

    parsed = fast_trace.parse_bytes(data)
    if parsed is None:
        return None
    trace = _requests_trace(source, *parsed)
    trace.parser = "fast"
    return trace


def _read_general(data: bytes | mmap.mmap, source: str) -> Trace:
    """The trace in `data`, any of FORMATS, with the vectorised numpy parser: every format, every
    accepted spelling, and the error messages for malformed files."""
    parser = _Parser(source)
    pos, line, n = 0, 1, len(data)
    while pos < n:
        end = n
        if n - pos > _CHUNK_BYTES:
            end = data.rfind(b"\n", pos, pos + _CHUNK_BYTES)
            if end < 0:
                end = data.find(b"\n", pos + _CHUNK_BYTES)
                if end < 0:
                    end = n
        chunk = bytes(data[pos:end])     # (a bytearray's slice is one too; the parser splits bytes)
        parser.feed(chunk, line)
        line += chunk.count(b"\n") + 1
        pos = end + 1
    trace = parser.finish()
    trace.parser = "general"
    return trace


# ----------------------------------------------------------------------------------------------
# synthetic traces


def parse_synthetic(text: str) -> tuple[str, int]:
    """`synthetic:KIND:N` (the CLI's and the API's shorthand) -> (KIND, N)."""
    from archsim.limits import MAX_TRACE_REQUESTS

    parts = text.split(":")
    if len(parts) != 3 or parts[0] != "synthetic" or parts[1] not in SYNTHETIC_KINDS or not parts[2].isdigit() \
            or len(parts[2]) > 20 or not 1 <= int(parts[2]) <= MAX_TRACE_REQUESTS:
        raise UserError(f"{_show(text)}: expected synthetic:KIND:N with KIND one of {', '.join(SYNTHETIC_KINDS)} "
                        f"and N a number of requests from 1 to {MAX_TRACE_REQUESTS:,} (archsim.limits)")
    return parts[1], int(parts[2])


def synthetic_trace(
    kind: str,
    requests: int,
    read_fraction: float = 0.8,
    span_bytes: int = 2 << 30,
    access_bytes: int = 64,
    seed: int = 0,
    start: int = 0,
) -> Trace:
    """A synthetic trace of `requests` accesses in [start, start + span_bytes).

    kind "random": uniformly random access_bytes-aligned addresses; "stream": start, start +
    access_bytes, ... wrapping at span_bytes; "mixed": each request continues the sequential stream or is
    random, with equal probability; "conflict": random multiples of span/1024, i.e. addresses that differ
    only in their 10 highest bits (under row-high mappings such as RoBaRaCoCh: one bank, one column, 1024
    rows, so nearly every access is a row conflict). Each request is a read with probability read_fraction
    (seeded numpy Generator, so deterministic per seed); every arrive is -1 (as soon as possible)."""
    if kind not in SYNTHETIC_KINDS:
        raise UserError(f"unknown synthetic trace kind {kind!r}; expected one of: {', '.join(SYNTHETIC_KINDS)}")
    where = f"synthetic:{kind}"
    if int(requests) != requests or requests < 1:
        raise UserError(f"{where}: requests = {requests!r}; expected a positive whole number")
    if not 0.0 <= read_fraction <= 1.0:
        raise UserError(f"{where}: read_fraction = {read_fraction!r}; expected a number in [0, 1]")
    if int(access_bytes) != access_bytes or access_bytes < 1:
        raise UserError(f"{where}: access_bytes = {access_bytes!r}; expected a positive whole number of bytes")
    if int(span_bytes) != span_bytes or span_bytes < access_bytes:
        raise UserError(f"{where}: span_bytes = {span_bytes!r}; expected a whole number >= access_bytes ({access_bytes})")
    if int(start) != start or start < 0 or start + span_bytes > _U64_MAX + 1:
        raise UserError(f"{where}: start = {start!r}; expected a non-negative address with start + span_bytes <= 2**64")
    requests, access_bytes, span_bytes, start = int(requests), int(access_bytes), int(span_bytes), int(start)
    slots = span_bytes // access_bytes
    rng = np.random.default_rng(seed)
    is_write = rng.random(requests) >= read_fraction
    if kind == "random":
        idx = rng.integers(0, slots, size=requests, dtype=np.uint64)
    elif kind == "stream":
        idx = np.arange(requests, dtype=np.uint64) % np.uint64(slots)
    elif kind == "mixed":
        seq = rng.random(requests) < 0.5
        rand = rng.integers(0, slots, size=requests, dtype=np.uint64)
        step = np.cumsum(seq, dtype=np.uint64) % np.uint64(slots)
        idx = np.where(seq, step, rand)
    else:   # conflict
        rows = min(1024, slots)
        idx = rng.integers(0, rows, size=requests, dtype=np.uint64) * np.uint64(slots // rows)
    addr = idx * np.uint64(access_bytes) + np.uint64(start)
    return Trace(
        addr=addr,
        is_write=is_write,
        arrive=np.full(requests, -1, dtype=np.int64),
        source=where,
        fmt="synthetic",
    )


# ----------------------------------------------------------------------------------------------
# writing


def _nominal_ramulator(arrive: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """-> (bubble counts, has-bubble mask) reproducing `arrive` when read back.

    The nominal cycle is t[i] = max(arrive[i], t[i-1] + 1) (or t[i-1] + 1 for -1), t[-1] = -1: an
    arrival earlier than the cycle after its predecessor cannot be expressed (requests are offered in
    order, one per cycle) and is written as that cycle. With c[i] = t[i] - i this is a running max."""
    i = np.arange(len(arrive), dtype=np.int64)
    concrete = arrive >= 0
    c = np.maximum.accumulate(np.maximum(np.where(concrete, arrive - i, 0), 0))
    bubbles = np.diff(c, prepend=0)
    return bubbles, concrete


def _dramsim3_cycles(arrive: np.ndarray) -> np.ndarray:
    """Time stamps: arrive where >= 0, else the cycle after the previous request (index for an
    all -1 trace); clamped so they never decrease."""
    concrete = arrive >= 0
    k = np.cumsum(~concrete)  # number of as-soon-as-possible requests so far
    e = np.maximum.accumulate(np.maximum(np.where(concrete, arrive - k, -1), -1))
    return e + k


def _format(trace: Trace, fmt: str) -> bytes:
    addrs = [f"0x{a:x}" for a in trace.addr.tolist()]
    if fmt == "ramulator":
        ops = np.where(trace.is_write, "ST", "LD").tolist()
        bubbles, concrete = _nominal_ramulator(trace.arrive)
        if not concrete.any():
            body = "\n".join([f"{o} {a}" for o, a in zip(ops, addrs, strict=True)])
        else:
            body = "\n".join(
                [
                    f"{b} {o} {a}" if c else f"{o} {a}"
                    for b, c, o, a in zip(bubbles.tolist(), concrete.tolist(), ops, addrs, strict=True)
                ]
            )
    else:
        ops = np.where(trace.is_write, "WRITE", "READ").tolist()
        cycles = _dramsim3_cycles(trace.arrive).tolist()
        body = "\n".join([f"{a} {o} {c}" for a, o, c in zip(addrs, ops, cycles, strict=True)])
    return (body + "\n").encode("ascii") if body else b""


def write_trace(trace: Trace, path: str | Path, fmt: str = "ramulator") -> None:
    """Write `trace` as a Ramulator 2 (`[bubbles] LD|ST 0x..`) or DRAMsim3 (`0x.. READ|WRITE cycle`) file.

    Ramulator lines carry a bubble count only for requests with arrive >= 0; DRAMsim3 time stamps are
    arrive, or the cycle after the previous request for arrive = -1. Arrivals earlier than what the
    in-order, one-per-cycle offer rule allows are written as that earliest possible cycle (reading the
    file back gives the same simulation). gzip-compressed if the path ends in .gz. Atomic: a temporary
    file in the same directory replaces the target only once complete (archsim.output.write_bytes)."""
    if fmt not in WRITE_FORMATS:
        raise UserError(f"unknown trace format {fmt!r} for {path}; expected one of: {', '.join(WRITE_FORMATS)}")
    payload = _format(trace, fmt)
    if str(path).endswith(".gz"):   # mtime 0: the same trace gives the same bytes
        payload = gzip.compress(payload, compresslevel=6, mtime=0)
    if str(path) != "-" and not Path(path).expanduser().parent.is_dir():   # a library call makes no folders
        raise UserError(f"{path}: cannot write trace file: no such directory")
    write_bytes(path, payload)   # the CLI's one writer: atomic for files, through symlinks, in place to devices
