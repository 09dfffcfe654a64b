"""Tests for archsim.dram.trace: trace file reading/writing and synthetic traces."""
from __future__ import annotations

import gzip
import os
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.dram import trace as trace_mod
from archsim.dram.trace import Trace, read_trace, synthetic_trace, write_trace
from archsim.errors import UserError

U64_MAX = (1 << 64) - 1


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _same(a: Trace, b: Trace, arrive: bool = True) -> None:
    assert len(a) == len(b)
    np.testing.assert_array_equal(a.addr, b.addr)
    np.testing.assert_array_equal(a.is_write, b.is_write)
    if arrive:
        np.testing.assert_array_equal(a.arrive, b.arrive)


# ---------------------------------------------------------------------------------------------
# round trips


@st.composite
def ramulator_traces(draw):
    """Traces a Ramulator file can express exactly: -1 entries, or arrive = previous nominal + 1 + bubbles."""
    n = draw(st.integers(1, 40))
    addr = draw(st.lists(st.integers(0, U64_MAX), min_size=n, max_size=n))
    is_write = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    arrive, t = [], -1
    for _ in range(n):
        if draw(st.booleans()):
            t += 1
            arrive.append(-1)
        else:
            t += 1 + draw(st.integers(0, 1000))
            arrive.append(t)
    return Trace(np.array(addr, dtype=np.uint64), np.array(is_write), np.array(arrive), "h", "synthetic")


@st.composite
def dramsim3_traces(draw):
    """Traces a DRAMsim3 file can express exactly: non-decreasing time stamps."""
    n = draw(st.integers(1, 40))
    addr = draw(st.lists(st.integers(0, U64_MAX), min_size=n, max_size=n))
    is_write = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    gaps = draw(st.lists(st.integers(0, 10**6), min_size=n, max_size=n))
    return Trace(np.array(addr, dtype=np.uint64), np.array(is_write), np.cumsum(gaps), "h", "synthetic")


@pytest.mark.parametrize("suffix", ["trace", "trace.gz"])
@settings(max_examples=60, deadline=None)
@given(tr=ramulator_traces())
def test_round_trip_ramulator(tr, suffix):
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / f"t.{suffix}"
        write_trace(tr, p, fmt="ramulator")
        back = read_trace(p)
        assert back.fmt == "ramulator"
        assert back.source == str(p)
        _same(tr, back)
        assert back.addr.dtype == np.uint64 and back.is_write.dtype == bool and back.arrive.dtype == np.int64


@pytest.mark.parametrize("suffix", ["trace", "trace.gz"])
@settings(max_examples=60, deadline=None)
@given(tr=dramsim3_traces())
def test_round_trip_dramsim3(tr, suffix):
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / f"t.{suffix}"
        write_trace(tr, p, fmt="dramsim3")
        back = read_trace(p)
        assert back.fmt == "dramsim3"
        _same(tr, back)


def _offer_cycles(arrive: list[int]) -> list[int]:
    """Reference model: in-order offering, one per cycle, no earlier than arrive (-1 = next cycle)."""
    out, t = [], -1
    for a in arrive:
        t = max(t + 1, a)
        out.append(t)
    return out


@settings(max_examples=100, deadline=None)
@given(
    arrive=st.lists(st.one_of(st.just(-1), st.integers(0, 50)), min_size=1, max_size=30),
    fmt=st.sampled_from(["ramulator", "dramsim3"]),
)
def test_write_any_arrivals_keeps_offer_cycles(arrive, fmt):
    """Arrivals a format cannot express exactly (decreasing, too close) are written as the earliest cycle
    the request could be offered anyway, so the offer schedule is unchanged."""
    n = len(arrive)
    tr = Trace(np.arange(n, dtype=np.uint64) * 64, np.zeros(n, bool), np.array(arrive), "h", "synthetic")
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "t.trace"
        write_trace(tr, p, fmt=fmt)
        back = read_trace(p)
    _same(tr, back, arrive=False)
    if fmt == "ramulator":
        np.testing.assert_array_equal(back.arrive == -1, np.array(arrive) == -1)
    else:
        assert (np.diff(back.arrive) >= 0).all()
    # the offer schedule is what matters to the simulator (DRAMsim3 lets requests share a stamp,
    # which the one-per-cycle rule then spreads out)
    assert _offer_cycles(back.arrive.tolist()) == _offer_cycles(arrive)


def test_dramsim3_write_asap_uses_index(tmp_path):
    tr = synthetic_trace("stream", 5)
    write_trace(tr, tmp_path / "s.trace", fmt="dramsim3")
    lines = (tmp_path / "s.trace").read_text().splitlines()
    assert [int(x.split()[2]) for x in lines] == [0, 1, 2, 3, 4]
    assert lines[1].split()[:2] == ["0x40", "WRITE" if tr.is_write[1] else "READ"]


def test_ramulator_write_forms(tmp_path):
    tr = Trace(np.array([0x10, 0x20, 0x30], dtype=np.uint64), np.array([False, True, False]),
               np.array([-1, -1, -1]), "x", "synthetic")
    write_trace(tr, tmp_path / "r.trace")
    assert (tmp_path / "r.trace").read_text() == "LD 0x10\nST 0x20\nLD 0x30\n"
    tr.arrive = np.array([5, -1, 9])
    write_trace(tr, tmp_path / "r.trace")
    assert (tmp_path / "r.trace").read_text() == "5 LD 0x10\nST 0x20\n2 LD 0x30\n"


def test_write_gz_is_gzip_and_atomic(tmp_path):
    tr = synthetic_trace("random", 1000, seed=3)
    p = tmp_path / "t.trace.gz"
    p.write_text("old contents")
    write_trace(tr, p, fmt="dramsim3")
    assert p.read_bytes()[:2] == b"\x1f\x8b"
    assert gzip.decompress(p.read_bytes()).decode().startswith("0x")
    assert sorted(os.listdir(tmp_path)) == ["t.trace.gz"]  # no temporary files left behind
    _same(tr, read_trace(p), arrive=False)


def test_write_errors(tmp_path):
    tr = synthetic_trace("stream", 3)
    with pytest.raises(UserError, match="unknown trace format 'csv'.*ramulator, dramsim3"):
        write_trace(tr, tmp_path / "t.csv", fmt="csv")
    with pytest.raises(UserError, match="cannot write"):
        write_trace(tr, tmp_path / "missing_dir" / "t.trace")
    assert os.listdir(tmp_path) == []


def test_large_round_trip(tmp_path):
    tr = synthetic_trace("random", 200_000, seed=7)
    tr.arrive = np.cumsum(np.random.default_rng(1).integers(0, 4, len(tr)))
    for fmt in ("ramulator", "dramsim3"):
        p = tmp_path / f"big.{fmt}"
        write_trace(tr, p, fmt=fmt)
        back = read_trace(p)
        assert back.fmt == fmt
        _same(tr, back, arrive=fmt == "dramsim3")


# ---------------------------------------------------------------------------------------------
# reading and auto-detection


def test_detect_ramulator(tmp_path):
    p = _write(tmp_path / "a.txt", "# a comment\n\n  LD 0x1a2b3c  # trailing comment\nst\t4096\r\nLd 0XFF\n")
    tr = read_trace(p)
    assert tr.fmt == "ramulator" and tr.source == str(p)
    assert tr.addr.tolist() == [0x1A2B3C, 4096, 255]
    assert tr.is_write.tolist() == [False, True, False]
    assert tr.arrive.tolist() == [-1, -1, -1]


def test_detect_dramsim3(tmp_path):
    p = _write(tmp_path / "b.txt", "\n# header\n0x1a2b3c READ 120\n0x40 write 125\n  128 r 125\n0x0 W 200\n")
    tr = read_trace(p)
    assert tr.fmt == "dramsim3"
    assert tr.addr.tolist() == [0x1A2B3C, 0x40, 0x128, 0]  # DRAMsim3 reads addresses as hex, 0x or not
    assert tr.is_write.tolist() == [False, True, False, True]
    assert tr.arrive.tolist() == [120, 125, 125, 200]


def test_bubble_counts_to_arrive(tmp_path):
    p = _write(tmp_path / "c.trace", "12 LD 0x10\nLD 0x20\n3 ST 0x30\n0 LD 0x40\nST 0x50\n")
    tr = read_trace(p)
    # 12; (13, asap); 13+1+3 = 17; 18; (19, asap)
    assert tr.arrive.tolist() == [12, -1, 17, 18, -1]
    assert tr.is_write.tolist() == [False, False, True, False, True]


def test_gzip_by_magic_not_suffix(tmp_path):
    text = b"LD 0x10\nST 0x20\n"
    p = tmp_path / "compressed.trace"  # gzip without the .gz suffix
    p.write_bytes(gzip.compress(text))
    assert read_trace(p).addr.tolist() == [0x10, 0x20]
    q = tmp_path / "plain.trace.gz"  # .gz suffix, but plain text
    q.write_bytes(text)
    assert read_trace(q).addr.tolist() == [0x10, 0x20]
    r = tmp_path / "broken.gz"
    r.write_bytes(gzip.compress(text)[:-6])
    with pytest.raises(UserError, match="broken.gz.*gzip"):
        read_trace(r)


def test_wide_and_edge_numbers(tmp_path):
    lines = [
        "0x00000000000000000000000000ff READ 1",  # more than 16 hex digits (leading zeros)
        "ffffffffffffffff WRITE 2",  # DRAMsim3: hex without 0x, the largest address
        "0xffffffffffffffff R 0000000000000000000000003",
        "0x10" + " " * 200 + "W 4",  # a line too wide for the vectorised pass
    ]
    tr = read_trace(_write(tmp_path / "w.trace", "\n".join(lines)))
    assert tr.addr.tolist() == [0xFF, U64_MAX, U64_MAX, 0x10]
    assert tr.arrive.tolist() == [1, 2, 3, 4]


def test_only_wide_lines(tmp_path):
    tr = read_trace(_write(tmp_path / "w.trace", ("LD" + " " * 120 + "0x40\n") * 3))
    assert tr.addr.tolist() == [64, 64, 64]


def test_many_chunks_keep_line_numbers(tmp_path, monkeypatch):
    monkeypatch.setattr(trace_mod, "_CHUNK_BYTES", 64)
    monkeypatch.setattr(trace_mod, "_read_fast", lambda data, source: None)  # the general parser chunks
    body = [f"0x{i * 64:x} READ {i}" for i in range(200)]
    tr = read_trace(_write(tmp_path / "m.trace", "\n".join(body) + "\n"))
    assert tr.arrive.tolist() == list(range(200))
    body[150] = "0x40 READ"
    with pytest.raises(UserError, match=r"m\.trace:151: missing time stamp"):
        read_trace(_write(tmp_path / "m.trace", "\n".join(body) + "\n"))
    body[150] = "0x40 READ 5"  # decreasing across what is now a chunk boundary somewhere
    with pytest.raises(UserError, match=r"m\.trace:151: time stamp 5 is earlier than 149 on line 150"):
        read_trace(_write(tmp_path / "m.trace", "\n".join(body) + "\n"))


# ---------------------------------------------------------------------------------------------
# errors


def test_missing_file(tmp_path):
    p = tmp_path / "nope.trace"
    with pytest.raises(UserError, match="nope.trace: trace file not found"):
        read_trace(p)


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n  \n#another\n"])
def test_empty_trace(tmp_path, text):
    with pytest.raises(UserError, match="no requests"):
        read_trace(_write(tmp_path / "e.trace", text))


def test_unrecognised_format(tmp_path):
    with pytest.raises(UserError, match=r"u\.trace:2: cannot recognise the trace format.*expected.*LD.*READ"):
        read_trace(_write(tmp_path / "u.trace", "# hi\nhello world\n"))


def test_decreasing_timestamps(tmp_path):
    p = _write(tmp_path / "d.trace", "0x0 READ 10\n0x40 READ 10\n\n0x80 WRITE 9\n")
    with pytest.raises(UserError) as e:
        read_trace(p)
    msg = str(e.value)
    assert msg.startswith(f"{p}:4: time stamp 9 is earlier than 10 on line 2")
    assert "expected non-decreasing" in msg


def test_earliest_error_wins(tmp_path):
    p = _write(tmp_path / "d.trace", "0x0 READ 10\n0x40 READ 5\n0x80 WRITE 20\n0xZZ READ 30\n")
    with pytest.raises(UserError, match=r"d\.trace:2: time stamp 5"):
        read_trace(p)
    p = _write(tmp_path / "d.trace", "0x0 READ 10\n0xZZ READ 30\n0x40 READ 5\n")
    with pytest.raises(UserError, match=r"d\.trace:2: bad address '0xZZ'"):
        read_trace(p)


RAM_OK = "LD 0x{:x}"
D3_OK = "0x{:x} READ {}"


@pytest.mark.parametrize(
    ("fmt", "bad", "what"),
    [
        ("ramulator", "LOAD 0x40", "bad opcode 'LOAD'"),
        ("ramulator", "LD 0xZZ", "bad address '0xZZ'"),
        ("ramulator", "LD 1a2b", "bad address '1a2b'"),
        ("ramulator", "ST", "missing address"),
        ("ramulator", "5 ST", "missing address"),
        ("ramulator", "-3 LD 0x40", "negative bubble count '-3'"),
        ("ramulator", "x3 LD 0x40", "bad opcode 'x3'"),
        ("ramulator", "3 XX 0x40", "bad opcode 'XX'"),
        ("ramulator", "LD 0x40 7", "unexpected extra field '7'"),
        ("ramulator", "LD 0x1ffffffffffffffff", "address '0x1ffffffffffffffff' is too large"),
        ("ramulator", "LD 0x1_000", "bad address '0x1_000'"),
        ("dramsim3", "0x40 FETCH 100", "bad command 'FETCH'"),
        ("dramsim3", "0xG0 READ 100", "bad address '0xG0'"),
        ("dramsim3", "0x40 READ", "missing time stamp"),
        ("dramsim3", "0x40", "missing command"),
        ("dramsim3", "0x40 READ 0x64", "bad time stamp '0x64'"),
        ("dramsim3", "0x40 READ -1", "negative time stamp"),
        ("dramsim3", "0x40 READ 100 extra", "unexpected extra field 'extra'"),
    ],
)
def test_malformed_line_reports_file_and_line(tmp_path, fmt, bad, what):
    lines = [RAM_OK.format(i * 64) if fmt == "ramulator" else D3_OK.format(i * 64, 100) for i in range(10)]
    lines[6] = bad  # line 7 of 10
    p = _write(tmp_path / "bad.trace", "\n".join(lines) + "\n")
    with pytest.raises(UserError) as e:
        read_trace(p)
    msg = str(e.value)
    assert msg.startswith(f"{p}:7: {what}"), msg
    forms = "LD" if fmt == "ramulator" else "READ|WRITE"
    assert "; expected " in msg and forms in msg.split("; expected ", 1)[1]


@pytest.mark.parametrize(
    ("text", "line", "kinds"),
    [
        ("LD 0x0\nST 0x40\n0x80 READ 5\n", 3, ("DRAMsim3", "Ramulator 2 load/store")),
        ("0x0 READ 1\n# c\n\n4 LD 0x40\n", 4, ("Ramulator 2 load/store", "DRAMsim3")),
        ("0x0 READ 1\nST 0x40\n", 2, ("Ramulator 2 load/store", "DRAMsim3")),
    ],
)
def test_mixed_formats(tmp_path, text, line, kinds):
    p = _write(tmp_path / "mix.trace", text)
    with pytest.raises(UserError) as e:
        read_trace(p)
    msg = str(e.value)
    assert msg.startswith(f"{p}:{line}: mixed trace formats"), msg
    assert f"is a {kinds[0]} request but the file is a {kinds[1]} trace (detected from line 1)" in msg


def test_trace_validates_lengths():
    with pytest.raises(UserError, match="differ in length"):
        Trace(np.zeros(3), np.zeros(2, bool), np.zeros(3), "x", "synthetic")


# ---------------------------------------------------------------------------------------------
# synthetic traces


def test_synthetic_deterministic():
    a = synthetic_trace("random", 5000, seed=11)
    b = synthetic_trace("random", 5000, seed=11)
    c = synthetic_trace("random", 5000, seed=12)
    _same(a, b)
    assert not np.array_equal(a.addr, c.addr)
    assert a.source == "synthetic:random" and a.fmt == "synthetic"
    assert (a.arrive == -1).all()


@pytest.mark.parametrize("kind", ["random", "stream"])
@pytest.mark.parametrize("frac", [0.0, 0.3, 0.8, 1.0])
def test_synthetic_read_fraction(kind, frac):
    tr = synthetic_trace(kind, 50_000, read_fraction=frac, seed=5)
    reads = 1.0 - tr.is_write.mean()
    assert abs(reads - frac) < 0.01  # ~4.5 standard deviations at n = 50k


def test_synthetic_stream():
    tr = synthetic_trace("stream", 100, span_bytes=64 * 40, access_bytes=64, start=4096)
    expect = 4096 + (np.arange(100) % 40) * 64
    np.testing.assert_array_equal(tr.addr, expect.astype(np.uint64))
    tr = synthetic_trace("stream", 10, access_bytes=128)
    assert tr.addr.tolist() == [i * 128 for i in range(10)]


def test_synthetic_random_in_span_and_aligned():
    span = 1 << 20
    tr = synthetic_trace("random", 100_000, span_bytes=span, access_bytes=64, seed=2)
    assert tr.addr.dtype == np.uint64
    assert int(tr.addr.max()) < span
    assert (tr.addr % 64 == 0).all()
    # roughly uniform: each eighth of the span gets about 1/8 of the requests
    counts = np.bincount((tr.addr // (span // 8)).astype(np.int64), minlength=8)
    assert (np.abs(counts / len(tr) - 1 / 8) < 0.01).all()
    big = synthetic_trace("random", 1000, seed=1)  # default 2 GiB span
    assert int(big.addr.max()) < 2 << 30 and (big.addr % 64 == 0).all()


def test_synthetic_errors():
    with pytest.raises(UserError, match="random, stream"):
        synthetic_trace("zipf", 10)
    with pytest.raises(UserError, match="read_fraction"):
        synthetic_trace("random", 10, read_fraction=1.5)
    with pytest.raises(UserError, match="requests"):
        synthetic_trace("random", 0)
    with pytest.raises(UserError, match="span_bytes"):
        synthetic_trace("random", 10, span_bytes=32, access_bytes=64)


def test_synthetic_round_trip(tmp_path):
    tr = synthetic_trace("random", 3000, seed=9)
    write_trace(tr, tmp_path / "s.trace")
    _same(tr, read_trace(tmp_path / "s.trace"))


def test_synthetic_mixed_and_conflict_traces():
    from archsim.dram.trace import parse_synthetic
    from archsim.systems.dram_trace.system import run_trace

    n = 4000
    mixed = synthetic_trace("mixed", n, seed=2)
    step = np.diff(mixed.addr.astype(np.int64))
    assert 0.2 < (step == 64).mean() < 0.6                 # about half continue the stream
    conf = synthetic_trace("conflict", n, seed=2)
    stride = (2 << 30) // 1024
    assert (conf.addr % stride == 0).all() and len(np.unique(conf.addr)) > 900
    res = run_trace(conf, preset="DDR4_3200AA_x8_8Gb", quiet=True)
    assert res.stats["row_conflicts"] > 0.9 * n             # one bank, 1024 rows: nearly every access conflicts
    assert parse_synthetic("synthetic:conflict:10") == ("conflict", 10)
    for bad in ("synthetic:zigzag:10", "synthetic:random:0", "synthetic:random"):
        with pytest.raises(UserError, match="KIND one of random, stream, mixed, conflict"):
            parse_synthetic(bad)


def test_presets_default_mapping_spreads_cache_lines_over_pseudochannels(capsys):
    """32 B accesses are half a 64 B line: under RoBaRaCoCh a 64 B-line stream never sets address bit 5, the
    lowest pseudo-channel bit, and uses one pseudo-channel (with a warning); the preset's default mapping
    spreads the same lines over every channel and pseudo-channel."""
    from archsim.dram.spec import load_spec
    from archsim.systems.dram_trace.system import run_trace

    tr = synthetic_trace("stream", 4096, access_bytes=64)
    for preset in ("HBM2_2Gbps_PC", "HBM3_6400Mbps", "GDDR6_16Gbps"):
        spec = load_spec(preset)
        default = run_trace(tr, preset=preset)
        assert default.stats["mapping"] == spec.default_mapping != "RoBaRaCoCh"
        err = capsys.readouterr().err
        assert "pseudochannel (1 of" not in err and "channel (1 of" not in err
        assert (default.df.requests > 0).all()                       # every channel gets lines
        one_pc = run_trace(tr, preset=preset, mapping="RoBaRaCoCh")
        assert "channel (1 of 2)" in capsys.readouterr().err         # pseudo-channel (HBM) or channel (GDDR6)
        assert one_pc.stats["mapping"] == "RoBaRaCoCh"
        # the manifest records the resolved mapping, so the run is reproducible without the preset default
        assert default.manifest["config"]["controller"]["mapping"] == spec.default_mapping
