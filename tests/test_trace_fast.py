"""The numba byte-level trace parser (archsim.dram.fast_trace) against the general numpy parser.

read_trace tries the fast parser first and re-reads the whole file with the general one when it gives
up, so: whatever the fast parser accepts it must read exactly as the general parser does, it must give
up on everything the general parser rejects (so errors keep their file, line and expected forms), and
it must actually be used for the common formats."""
from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from archsim.dram import fast_trace
from archsim.dram import trace as trace_mod
from archsim.dram.trace import Trace, read_trace
from archsim.errors import UserError

U64_MAX = (1 << 64) - 1
I64_MAX = (1 << 63) - 1


def _general(data: bytes) -> Trace:
    return trace_mod._read_general(data, "t.trace")


def _fast(data: bytes) -> Trace | None:
    return trace_mod._read_fast(data, "t.trace")


def _same(a: Trace, b: Trace) -> None:
    assert (a.fmt, a.source, len(a)) == (b.fmt, b.source, len(b))
    assert a.addr.dtype == b.addr.dtype and a.is_write.dtype == b.is_write.dtype and a.arrive.dtype == b.arrive.dtype
    np.testing.assert_array_equal(a.addr, b.addr)
    np.testing.assert_array_equal(a.is_write, b.is_write)
    np.testing.assert_array_equal(a.arrive, b.arrive)


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _error(fn, data: bytes) -> str:
    with pytest.raises(UserError) as exc:
        fn(data, "t.trace")
    return str(exc.value)


# ---------------------------------------------------------------------------------------------
# random traces of every accepted spelling

_BLANKS = st.sampled_from([" ", "  ", "\t", " \t ", "\x0b", "\x0c", "\r"])
_ADDRS = st.one_of(st.integers(0, 1 << 40), st.integers(0, U64_MAX), st.sampled_from([0, U64_MAX, 1 << 63]))
_COUNTS = st.one_of(st.integers(0, 1000), st.integers(0, 10**6), st.sampled_from([0, I64_MAX]))


def _case(draw, word: str) -> str:
    return "".join(c.upper() if draw(st.booleans()) else c.lower() for c in word)


def _hex(draw, v: int, prefix: bool) -> str:
    digits = f"{v:x}"
    digits = "".join(c.upper() if draw(st.booleans()) else c for c in digits)
    zeros = "0" * draw(st.sampled_from([0, 0, 0, 1, 5, 20]))  # leading zeros, also past 16 digits
    return (draw(st.sampled_from(["0x", "0X"])) if prefix else "") + zeros + digits


def _dec(draw, v: int) -> str:
    return "0" * draw(st.sampled_from([0, 0, 0, 1, 3, 25])) + str(v)


def _decorate(draw, fields: list[str]) -> str:
    """One line: fields joined by blanks, optional leading/trailing blanks and a trailing comment."""
    line = draw(st.sampled_from(["", "", " ", "\t", "  "]))
    for j, f in enumerate(fields):
        line += (draw(_BLANKS) if j else "") + f
    line += draw(st.sampled_from(["", "", " ", "\t", "\r"]))
    if draw(st.integers(0, 5)) == 0:
        line += draw(st.sampled_from(["#", "# comment", " # LD 0x1 READ ~!@ é", "#\t12 ST"]))
    return line


@st.composite
def ramulator_lines(draw):
    addr = draw(_ADDRS)
    a = _hex(draw, addr, True) if draw(st.booleans()) else _dec(draw, addr)
    fields = [_case(draw, draw(st.sampled_from(["LD", "ST"]))), a]
    if draw(st.booleans()):
        fields.insert(0, _dec(draw, draw(st.integers(0, 10**6))))
    return _decorate(draw, fields)


@st.composite
def dramsim3_lines(draw):
    op = _case(draw, draw(st.sampled_from(["READ", "WRITE", "R", "W", "P_MEM_RD", "P_MEM_WR", "IFETCH"])))
    fields = [_hex(draw, draw(_ADDRS), draw(st.booleans())), op, "{ts}"]
    return _decorate(draw, fields)


@st.composite
def trace_texts(draw):
    """A whole file: request lines of one format with blank and comment lines between them."""
    fmt = draw(st.sampled_from(["ramulator", "dramsim3"]))
    lines = draw(st.lists(ramulator_lines() if fmt == "ramulator" else dramsim3_lines(), min_size=1, max_size=30))
    if fmt == "dramsim3":  # non-decreasing time stamps, sometimes huge
        ts = sorted(draw(st.lists(_COUNTS, min_size=len(lines), max_size=len(lines))))
        lines = [line.replace("{ts}", _dec(draw, t)) for line, t in zip(lines, ts, strict=True)]
    out = []
    for line in lines:
        out += draw(st.lists(st.sampled_from(["", "   ", "\t", "# a comment", "#", "  # LD 0x1"]), max_size=2))
        out.append(line)
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    text = newline.join(out) + draw(st.sampled_from(["", newline, newline * 2, "\n#end"]))
    return fmt, text.encode()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace_texts())
def test_fast_equals_general_on_every_spelling(case):
    fmt, data = case
    fast = _fast(data)
    assert fast is not None, data
    assert fast.parser == "fast" and fast.fmt == fmt
    _same(fast, _general(data))


_NOISE = st.sampled_from([b" ", b"\t", b"\n", b"\r", b"#", b"x", b"X", b"0", b"9", b"f", b"g", b"-", b"+", b",",
                          b"_", b"\x00", b"\x1c", b"\xc3\xa9", b"\xff", b"LD", b"R", b"W", b"READ", b"0x"])


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace_texts(), st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 3), _NOISE), min_size=1, max_size=4))
def test_fast_never_disagrees_on_mutated_files(case, edits):
    """Random insertions/deletions/replacements: the fast parser either gives up or reads the file as the
    general parser does; it never accepts a file the general parser rejects."""
    _, data = case
    for pos, kind, noise in edits:
        pos %= len(data) + 1
        if kind == 0:
            data = data[:pos] + noise + data[pos:]
        elif kind == 1:
            data = data[:pos] + data[pos + 1:]
        else:
            data = data[:pos] + noise + data[pos + len(noise):]
    fast = _fast(data)
    try:
        general = _general(data)
    except (UserError, IndexError):  # IndexError: the general parser's crash on a line of only \x1c-\x1f
        assert fast is None, data
        return
    if fast is not None:
        _same(fast, general)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, U64_MAX), st.integers(-1, 50)), min_size=1, max_size=50),
       st.sampled_from(["ramulator", "dramsim3"]))
def test_written_traces_take_the_fast_path(tmp_path_factory, rows, fmt):
    """What write_trace writes, read_trace reads back with the fast parser, identically."""
    w, a, arr = zip(*rows, strict=True)
    tr = Trace(addr=np.array(a, dtype=np.uint64), is_write=np.array(w), arrive=np.array(arr), source="x", fmt="synthetic")
    path = tmp_path_factory.mktemp("w") / "t.trace"
    trace_mod.write_trace(tr, path, fmt)
    back = read_trace(path)
    assert back.parser == "fast"
    _same(back, trace_mod._read_general(path.read_bytes(), str(path)))


# ---------------------------------------------------------------------------------------------
# edge cases, one by one

EDGE = [
    b"LD 0x40",                                   # no trailing newline
    b"LD 0x40\r\nST 0X80\r\n",                    # CRLF
    b"\tLD\t0x40\t\n  12\tst  128  \n",           # tabs, leading blanks, lower case, decimal
    b"ld 0xABCdef\nSt 0xffffffffffffffff\n",      # mixed-case hex, the largest address
    b"LD 18446744073709551615\n",                 # the largest decimal address
    b"LD 0x00000000000000000000000000001\n",      # leading zeros past 16 digits
    b"LD 0000000000000000000000000018446744073709551615\n",
    b"9223372036854775805 LD 0x1\n",              # the largest bubble count the cycle range allows here
    b"# header\n\n   \n#LD 0x1\nLD 0x40 # trailing comment\nST 0x80#tight\n#end",
    b"LD 0x40\n\n\n",
    b"\xef\xbb\xbfLD 0x40\n",                      # UTF-8 byte-order mark (stripped on reading)
    b"1a2b40 READ 0\n100 write 3\n0x100 R 4\nFFFF w 9\n",
    b"40 P_MEM_RD 1\n80 P_MEM_WR 2\nc0 IFETCH 3\n100 p_mem_wr 4\n",
    b"0 READ 0\nffffffffffffffff WRITE 9223372036854775807\n",
    b"0x40 READ 5\n0x80 READ 5\n",                # equal time stamps are fine
    b"3 READ 7\n",                                # DRAMsim3 with a bare, digit-only address
    b"12 LD 0x0\nLD 0x40\n3 ST 0x80\n",           # bubbles: 12, -1, 16
]


@pytest.mark.parametrize("data", EDGE)
def test_edge_cases_fast_and_equal(tmp_path, data):
    path = tmp_path / "e.trace"
    path.write_bytes(data)
    tr = read_trace(path)
    assert tr.parser == "fast"
    _same(tr, trace_mod._read_general(trace_mod._read_bytes(path, str(path)), str(path)))


def test_bubble_arrivals(tmp_path):
    tr = read_trace(_write(tmp_path / "b.trace", b"12 LD 0x0\nLD 0x40\n3 ST 0x80\n"))
    assert tr.parser == "fast" and tr.arrive.tolist() == [12, -1, 17] and tr.is_write.tolist() == [False, False, True]


def test_gzip_takes_the_fast_path(tmp_path):
    text = b"".join(b"LD 0x%x\n" % (i * 64) for i in range(1000))
    path = _write(tmp_path / "g.trace.gz", gzip.compress(text))
    tr = read_trace(path)
    assert tr.parser == "fast" and tr.addr.tolist() == [i * 64 for i in range(1000)]


@pytest.mark.parametrize("text", [
    b"R 0,1,0,2,100,3\nW 0,0,1,3,7,12\n",          # address vectors
    b"3 0x1a2b3c\n0 4096 8192\n",                  # SimpleO3
])
def test_other_formats_use_the_general_parser(tmp_path, text):
    tr = read_trace(_write(tmp_path / "o.trace", text))
    assert tr.parser == "general"
    assert _fast(text) is None


# ---------------------------------------------------------------------------------------------
# malformed files: the fast parser gives up, read_trace reports what the general parser reports

MALFORMED = [
    b"LD 0x40\nLD 0x1g\n",
    b"LD 0x40\nLD\n",
    b"LD 0x40 0x80\n",
    b"LD 0x\n",
    b"LD 0x10000000000000000\n",                  # 2**64
    b"LD 18446744073709551616\n",
    b"9223372036854775808 LD 0x1\n",              # 2**63 bubbles
    b"-1 LD 0x1\n",
    b"+1 LD 0x1\n",
    b"LD -5\n",
    b"5 XX 0x1\n",
    b"LD 0x40\n0x40 READ 3\n",                    # mixed formats
    b"LD 0x40\nR 0,0,1,2,3,4\n",
    b"LD 0x40\nLD 0x4\xc3\xa90\n",                  # non-ASCII
    b"LD 0x40\rLD 0x80\n",                         # a lone CR is a blank, not a line end
    b"0x40 READ 5\n0x80 WRITE 4\n",               # decreasing time stamps
    b"0x40 READ\n",
    b"0x40 READ 5 6\n",
    b"12g4 READ 1\n",
    b"0x40 FETCH 1\n",
    b"0x40 READ 0x5\n",
    b"0x40 READ 9223372036854775808\n",
    b"LD 0x40,\n",
    b"",
    b"# only a comment\n\n",
    b"hello world\n",
    b"R LD 0x1\n",                                # R first: read as an address vector, as _classify does
    b"9223372036854775807 LD 0x1\n1 LD 0x2\n",    # bubbles add up past the cycle range (after parsing)
]


@pytest.mark.parametrize("data", MALFORMED)
def test_malformed_input_gives_the_general_error(tmp_path, data):
    expected = _error(trace_mod._read_general, data)
    path = _write(tmp_path / "t.trace", data)
    with pytest.raises(UserError) as exc:
        read_trace(path)
    assert str(exc.value) == expected.replace("t.trace", str(path))
    assert "\n" not in str(exc.value)
    if b"9223372036854775807 LD" not in data:
        assert fast_trace.parse_bytes(data) is None


def test_fast_parser_detects_like_classify():
    for text, fmt in [(b"LD 0x1\n", "ramulator"), (b"3 st 0x1\n", "ramulator"), (b"3 READ 5\n", "dramsim3"),
                      (b"\n# x\n  ab r 5\n", "dramsim3")]:
        assert fast_trace.parse_bytes(text)[0] == fmt
    for text in [b"R 1,2,3,4\n", b"w 1,2,3,4\n", b"3 4 5\n", b"X LD 0x1\n"]:
        assert fast_trace.parse_bytes(text) is None


# ---------------------------------------------------------------------------------------------
# start-up: a trace run does not import pandas (its import costs more than a short simulation)


def test_trace_run_does_not_import_pandas(tmp_path):
    import os
    import subprocess
    import sys

    path = _write(tmp_path / "s.trace", b"LD 0x40\nST 0x80\n")
    code = ("import sys\nfrom archsim.cli import main\n"
            f"assert main(['trace', {str(path)!r}, '--preset', 'HBM2_2Gbps_PC']) == 0\n"
            "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'pandas', 'pyarrow', 'matplotlib', 'dask', 'scipy'})\n"
            "assert not heavy, heavy\n")
    env = {**os.environ, "CI": "true"}        # no progress bar; the summary is printed
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr
    assert "requests" in run.stdout


def test_result_table_from_rows_is_a_dataframe(tmp_path):
    import pandas as pd

    from archsim.results import Result
    from archsim.systems.dram_trace.system import run_trace

    rows = [{"channel": 0, "requests": 3}, {"channel": 1, "requests": 4}]
    res = Result(stats={}, df=rows, manifest={})
    assert isinstance(res.df, pd.DataFrame) and res.df is res.df
    pd.testing.assert_frame_equal(res.df, pd.DataFrame(rows))
    frame = pd.DataFrame(rows)
    assert Result(stats={}, df=frame, manifest={}).df is frame
    with pytest.raises(TypeError):
        Result(stats={}, manifest={})  # df stays a required field
    out = run_trace(str(_write(tmp_path / "s.trace", b"LD 0x40\nST 0x80\n")), preset="HBM2_2Gbps_PC", quiet=True)
    assert isinstance(out.df, pd.DataFrame) and out.df["requests"].sum() == 2
    out.write_csv(tmp_path / "t.csv")
    assert (tmp_path / "t.csv").read_text().startswith("channel,")
