"""Memory traces: reading Ramulator 2 / DRAMsim3 trace files, writing them, and synthetic traces.

A :class:`Trace` is three parallel arrays (byte address, write flag, arrival cycle) plus where it came
from. ``arrive[i] >= 0`` is the earliest cycle request ``i`` may be offered to the memory system;
``-1`` means "as soon as possible", i.e. the cycle after the previous request was offered. Requests
are offered in order, one per cycle at most.

Supported file formats (detected from the first non-blank, non-comment line; ``#`` starts a comment;
gzip-compressed files are recognised by their magic bytes and read transparently):

* Ramulator 2 load/store trace::

      LD 0x1a2b3c          # arrive = -1 (the cycle after the previous request)
      12 ST 0x1a2b40       # 12 bubbles (non-memory cycles) first: arrive = previous + 1 + 12

  The "previous" arrival of a request without a bubble count is its nominal cycle (previous + 1),
  and the first request's previous arrival is -1, so ``12 LD 0x0`` as the first line arrives at 12.

* DRAMsim3 trace::

      0x1a2b3c READ 120    # also WRITE, R, W (any case); third field = arrival cycle
      0x1a2b40 WRITE 125   # time stamps must be non-decreasing

Addresses are hex (``0x...``) or decimal; counts and time stamps are decimal.

Parsing is vectorised with numpy (fixed-width byte arrays, digit lookup tables), a few seconds
for tens of millions of lines; lines the fast path cannot handle are re-parsed one by one, which
either accepts them (e.g. hex addresses with many leading zeros) or produces an error naming the
file and line.
"""
from __future__ import annotations

import gzip
import os
import re
import secrets
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from archsim.errors import UserError

__all__ = ["Trace", "read_trace", "synthetic_trace", "write_trace", "FORMATS", "SYNTHETIC_KINDS"]

FORMATS = ("ramulator", "dramsim3")
SYNTHETIC_KINDS = ("random", "stream")

_RAM_FORMS = (
    "'LD <addr>', 'ST <addr>' or '<bubbles> LD|ST <addr>' (Ramulator 2 trace; <addr> hex 0x... "
    "or decimal, <bubbles> a non-negative decimal count)"
)
_D3_FORMS = (
    "'<addr> READ|WRITE|R|W <cycle>' (DRAMsim3 trace; <addr> hex 0x... or decimal, <cycle> a "
    "non-negative decimal time stamp, non-decreasing)"
)
_FORMS = {"ramulator": _RAM_FORMS, "dramsim3": _D3_FORMS}
_ANY_FORMS = f"{_RAM_FORMS} or {_D3_FORMS}"
_FMT_NAME = {"ramulator": "Ramulator 2", "dramsim3": "DRAMsim3"}

_U64_MAX = (1 << 64) - 1
_I64_MAX = (1 << 63) - 1

_RAM_OPS = {"LD": False, "ST": True}
_D3_OPS = {"READ": False, "R": False, "WRITE": True, "W": True}

_HEX_RE = re.compile(r"0[xX][0-9a-fA-F]+")
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


@dataclass(eq=False)
class Trace:
    """A memory-request trace: parallel arrays, one entry per request (see the module docstring)."""

    addr: np.ndarray  # uint64 byte addresses
    is_write: np.ndarray  # bool
    arrive: np.ndarray  # int64 earliest offer cycle; -1 = as soon as possible
    source: str  # file name or "synthetic:<kind>"
    fmt: str  # "ramulator" | "dramsim3" | "synthetic"

    def __post_init__(self) -> None:
        self.addr = np.ascontiguousarray(self.addr, dtype=np.uint64).reshape(-1)
        self.is_write = np.ascontiguousarray(self.is_write, dtype=bool).reshape(-1)
        self.arrive = np.ascontiguousarray(self.arrive, dtype=np.int64).reshape(-1)
        n = len(self.addr)
        if len(self.is_write) != n or len(self.arrive) != n:
            raise UserError(
                f"{self.source}: trace arrays differ in length (addr {n}, is_write {len(self.is_write)}, "
                f"arrive {len(self.arrive)}); expected one entry per request in each"
            )
        if self.fmt not in (*FORMATS, "synthetic"):
            raise UserError(f"{self.source}: unknown trace format {self.fmt!r}; expected ramulator, dramsim3, synthetic")

    def __len__(self) -> int:
        return len(self.addr)


# ----------------------------------------------------------------------------------------------
# reading


class _LineError(Exception):
    """A problem with one line; the caller adds file, line number and the allowed forms."""

    def __init__(self, what: str, forms: str):
        super().__init__(what)
        self.what = what
        self.forms = forms


def _read_bytes(path: Path, source: str) -> bytes:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise UserError(f"{source}: trace file not found") from None
    except IsADirectoryError:
        raise UserError(f"{source}: is a directory; expected a trace file") from None
    except OSError as e:
        raise UserError(f"{source}: cannot read trace file: {e.strerror or e}") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as e:
            raise UserError(f"{source}: corrupt or truncated gzip file ({e}); expected a gzip-compressed trace") from None
    if raw[:3] == b"\xef\xbb\xbf":  # UTF-8 byte-order mark
        raw = raw[3:]
    return raw


def _show(tok: str) -> str:
    return repr(tok if len(tok) <= 40 else tok[:37] + "...")


def _parse_int(tok: str, what: str, *, hex_ok: bool, limit: int) -> int:
    if hex_ok and _HEX_RE.fullmatch(tok):
        v = int(tok[2:], 16)
    elif _DEC_RE.fullmatch(tok):
        v = int(tok)
    elif _NEG_RE.fullmatch(tok):
        raise _LineError(f"negative {what} {_show(tok)}", "")
    else:
        kind = "hex 0x... or decimal number" if hex_ok else "decimal number"
        raise _LineError(f"bad {what} {_show(tok)} (not a {kind})", "")
    if v > limit:
        raise _LineError(f"{what} {_show(tok)} is too large (limit {limit})", "")
    return v


def _classify(tokens: list[str]) -> str | None:
    if tokens and tokens[0].upper() in _RAM_OPS:
        return "ramulator"
    if len(tokens) >= 2:
        op = tokens[1].upper()
        if op in _RAM_OPS:
            return "ramulator"
        if op in _D3_OPS:
            return "dramsim3"
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
    addr = _parse_int(tokens[0], "address", hex_ok=True, limit=_U64_MAX)
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


def _parse_uint(tok: np.ndarray, *, hex_ok: bool, max_hex: int, max_dec: int) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised parse of a fixed-width bytes array of hex (0x...) / decimal numbers.

    Returns (values as uint64, ok mask). Rows that are not a plain number with at most max_hex hex /
    max_dec decimal digits are not ok (the caller re-parses those one by one)."""
    tok = np.ascontiguousarray(tok)
    n = len(tok)
    w = tok.dtype.itemsize
    m = tok.view(np.uint8).reshape(n, w)
    length = np.strings.str_len(tok)
    if hex_ok and w >= 3:
        is_hex = (m[:, 0] == ord("0")) & ((m[:, 1] | 0x20) == ord("x"))
    else:
        is_hex = np.zeros(n, dtype=bool)
    start = np.where(is_hex, 2, 0)
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


def _split_first(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first space-separated field, the rest without leading spaces) of each row of a stripped array."""
    if a.dtype.itemsize == 0:  # all rows empty (numpy mishandles zero-width arrays in partition)
        empty = np.zeros(len(a), dtype="S1")
        return empty, empty
    head, _, tail = np.strings.partition(a, b" ")
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
        self.last_ts = -1
        self.last_ts_line = 0

    def _error(self, line: int, what: str, forms: str) -> UserError:
        return UserError(f"{self.source}:{line}: {what}; expected {forms}")

    def _slow(self, text: bytes, line: int) -> tuple[int, bool, int]:
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
            return _parse_line_ram(tokens) if self.fmt == "ramulator" else _parse_line_d3(tokens)
        except _LineError as e:
            raise self._error(line, e.what, e.forms or _FORMS[self.fmt]) from None

    def _detect(self, text: bytes, line: int) -> None:
        tokens = text.decode("utf-8", "replace").split()
        kind = _classify(tokens)
        if kind is None:
            what = f"cannot recognise the trace format from {_show(' '.join(tokens))}"
            raise self._error(line, what, _ANY_FORMS)
        self.fmt, self.fmt_line = kind, line

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
            addr, ok = _parse_uint(f1, hex_ok=True, max_hex=16, max_dec=19)
            bad |= ~ok
            op = np.strings.upper(f2)
            is_w = (op == b"WRITE") | (op == b"W")
            bad |= ~(is_w | (op == b"READ") | (op == b"R"))
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
        self.addr.append(addr)
        self.is_write.append(is_write.astype(bool, copy=False))
        self.third.append(third)
        self.lineno.append(lineno)

    def finish(self) -> Trace:
        if not self.addr:
            raise UserError(f"{self.source}: trace contains no requests (only blank lines or comments); expected {_ANY_FORMS}")
        addr = np.concatenate(self.addr)
        is_write = np.concatenate(self.is_write)
        third = np.concatenate(self.third)
        assert self.fmt is not None
        if self.fmt == "dramsim3":
            arrive = third
        else:
            has_b = third >= 0
            if not has_b.any():
                arrive = np.full(len(addr), -1, dtype=np.int64)
            else:
                bub = np.where(has_b, third, 0)
                if int(bub.max()) * len(bub) >= _I64_MAX // 2 and sum(bub.tolist()) + len(bub) >= _I64_MAX:
                    raise UserError(
                        f"{self.source}: bubble counts add up past the 64-bit cycle range; "
                        f"expected {_RAM_FORMS} with a total below {_I64_MAX}"
                    )
                nominal = np.cumsum(bub + 1) - 1  # previous nominal cycle + 1 + bubbles, starting at -1
                arrive = np.where(has_b, nominal, -1)
        return Trace(addr=addr, is_write=is_write, arrive=arrive, source=self.source, fmt=self.fmt)


def read_trace(path: str | Path) -> Trace:
    """Read a Ramulator 2 or DRAMsim3 trace file (format auto-detected; gzip read transparently).

    Raises UserError naming the file (and line) for missing files, malformed or mixed-format lines,
    decreasing DRAMsim3 time stamps, and traces without requests."""
    source = str(path)
    data = _read_bytes(Path(path).expanduser(), source)
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
        chunk = data[pos:end]
        parser.feed(chunk, line)
        line += chunk.count(b"\n") + 1
        pos = end + 1
    return parser.finish()


# ----------------------------------------------------------------------------------------------
# synthetic traces


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
    access_bytes, ... wrapping at span_bytes. Each request is a read with probability read_fraction
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
    else:
        idx = np.arange(requests, dtype=np.uint64) % np.uint64(slots)
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
    file in the same directory replaces the target only once complete."""
    if fmt not in FORMATS:
        raise UserError(f"unknown trace format {fmt!r} for {path}; expected one of: {', '.join(FORMATS)}")
    payload = _format(trace, fmt)
    target = Path(path).expanduser()
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        # os.open with 0o666 lets the umask decide permissions, as for a normally created file.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except OSError as e:
        raise UserError(f"{path}: cannot write trace file: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            if target.name.endswith(".gz"):
                with gzip.GzipFile(filename="", mode="wb", fileobj=f, compresslevel=6, mtime=0) as gz:
                    gz.write(payload)
            else:
                f.write(payload)
        os.replace(tmp, target)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise UserError(f"{path}: cannot write trace file: {e.strerror or e}") from None
        raise
