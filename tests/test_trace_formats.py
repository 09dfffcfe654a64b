"""Issue #8.3: DRAMsim3 hex addresses without 0x and its P_MEM_RD / P_MEM_WR / IFETCH ops, Ramulator 2's
address-vector and SimpleO3 trace formats, vectorised encode_many / constant_fields."""
from __future__ import annotations

import gzip

import numpy as np
import pytest

from archsim.dram.mapping import constant_fields, decode_fields, encode, encode_many
from archsim.dram.spec import load_spec
from archsim.dram.trace import Trace, read_trace, to_addresses, trace_warnings
from archsim.errors import UserError

MAPPINGS = ["RoBaRaCoCh", "ChRaBaRoCo", "rorabgbachco", "RoCoBaRaCh"]


def _write(path, text):
    path.write_text(text)
    return path


# ---- DRAMsim3 ---------------------------------------------------------------------------------------------
def test_dramsim3_addresses_are_hex_without_0x(tmp_path):
    tr = read_trace(_write(tmp_path / "d.trace", "1a2b40 READ 0\n100 WRITE 3\n0x100 READ 4\nFFFF r 9\n"))
    assert tr.fmt == "dramsim3"
    assert tr.addr.tolist() == [0x1A2B40, 0x100, 0x100, 0xFFFF]


def test_dramsim3_ops(tmp_path):
    tr = read_trace(_write(tmp_path / "d.trace", "40 P_MEM_RD 1\n80 P_MEM_WR 2\nc0 IFETCH 3\n100 p_mem_wr 4\n"))
    assert tr.is_write.tolist() == [False, True, False, True]
    assert tr.arrive.tolist() == [1, 2, 3, 4]
    with pytest.raises(UserError, match=r"d2.trace:1: bad address '12g4' \(not a hexadecimal number\)"):
        read_trace(_write(tmp_path / "d2.trace", "12g4 READ 1\n"))


# ---- Ramulator 2 address vectors --------------------------------------------------------------------------
def test_vector_trace_reads_levels(tmp_path):
    tr = read_trace(_write(tmp_path / "v.trace", "# DDR4 order\nR 0,1,2,3,100,7\nW 0,0,1,2,5,9\n"))
    assert tr.fmt == "ramulator-vec" and tr.vec_width == 6 and len(tr) == 2
    # archsim order: channel, pseudochannel, rank, bankgroup, bank, row, column
    assert tr.vec.tolist() == [[0, 0, 1, 2, 3, 100, 7], [0, 0, 0, 1, 2, 5, 9]]
    assert tr.is_write.tolist() == [False, True] and tr.arrive.tolist() == [-1, -1]
    assert tr.vec_line.tolist() == [2, 3]
    assert not tr.has_addresses
    with pytest.raises(UserError, match="address-vector trace has no byte addresses.*to_addresses"):
        tr.addr  # noqa: B018


@pytest.mark.parametrize("text, row", [
    ("R 1,0,1,2,3,4,5\n", [1, 0, 1, 2, 3, 4, 5]),
    ("W 1,2,3,4,5\n", [1, 0, 0, 2, 3, 4, 5]),
    ("r 1,3,4,5\n", [1, 0, 0, 0, 3, 4, 5]),
])
def test_vector_lengths(tmp_path, text, row):
    assert read_trace(_write(tmp_path / "v.trace", text)).vec.tolist() == [row]


@pytest.mark.parametrize("text, message", [
    ("R 0,0,1,2,3,4\nR 0,0,1,2,3\n", r":2: address vector '0,0,1,2,3' has 5 entries, earlier lines 6"),
    ("R 0,0,1\n", r":1: address vector '0,0,1' has 3 entries"),
    ("R 0,0,1,2,3,4\nW 0,0,x,2,3,4\n", r":2: bad vector entry 'x'"),
    ("R 0,0,1,2,3,4\nW 0,0,-1,2,3,4\n", r":2: negative vector entry '-1'"),
    ("R 0,0,1,2,3,4\nW 0,0,1,2,3,4 9\n", r":2: unexpected extra field '9'"),
    ("R 0,0,1,2,3,4\nLD 0x40\n", r":2: mixed trace formats"),
])
def test_vector_errors_name_line(tmp_path, text, message):
    with pytest.raises(UserError, match=message):
        read_trace(_write(tmp_path / "v.trace", text))


def test_to_addresses_ddr4_round_trip(tmp_path):
    spec = load_spec("DDR4_3200AA_x8_8Gb", ["org.ranks=2"])
    rng = np.random.default_rng(0)
    n = 500
    want = np.stack([np.zeros(n, int), rng.integers(0, 2, n), rng.integers(0, 4, n), rng.integers(0, 4, n),
                     rng.integers(0, spec.rows, n), rng.integers(0, spec.columns, n)], axis=1)
    text = "".join(f"{'W' if i % 3 == 0 else 'R'} {','.join(map(str, v))}\n" for i, v in enumerate(want.tolist()))
    path = tmp_path / "v.trace.gz"
    path.write_bytes(gzip.compress(text.encode()))
    tr = read_trace(path)
    for mapping in MAPPINGS:
        addr = to_addresses(tr, spec, mapping)
        f = decode_fields(spec, addr, mapping)
        got = np.stack([f[k] for k in ("channel", "rank", "bankgroup", "bank", "row", "column")], axis=1)
        assert (got == want).all(), mapping
    tr.addr = to_addresses(tr, spec, "RoBaRaCoCh")   # what the driver does; then it is an ordinary trace
    assert tr.has_addresses and len(tr.addr) == n


def test_to_addresses_hbm_second_entry_is_pseudochannel(tmp_path):
    spec = load_spec("HBM2_2Gbps_PC")      # 8 channels x 2 pseudochannels, 1 rank
    tr = read_trace(_write(tmp_path / "v.trace", "R 3,1,2,3,77,5\n"))
    f = decode_fields(spec, to_addresses(tr, spec), "RoBaRaCoCh")
    assert [int(f[k][0]) for k in ("channel", "pseudochannel", "rank", "bankgroup", "bank", "row", "column")] == \
        [3, 1, 0, 2, 3, 77, 5]


def test_to_addresses_out_of_range_names_line_and_level(tmp_path):
    spec = load_spec("DDR4_3200AA_x8_8Gb")
    tr = read_trace(_write(tmp_path / "v.trace", "R 0,0,1,2,3,4\n\nW 0,0,1,2,3,1023\n"))
    with pytest.raises(UserError, match=r"v.trace:3: column = 1023 is out of range for DDR4_3200AA_x8_8Gb "
                                        r"\(0..127\); a 6-entry vector is read as channel,rank,bankgroup,bank,row,"
                                        r"column"):
        to_addresses(tr, spec)
    with pytest.raises(UserError, match="not an address-vector trace"):
        to_addresses(read_trace(_write(tmp_path / "l.trace", "LD 0x40\n")), spec)


def test_vector_trace_simulates_like_the_address_trace(tmp_path):
    from archsim.systems.dram_trace.system import run_trace

    spec = load_spec("DDR4_3200AA_x8_8Gb")
    rng = np.random.default_rng(1)
    lines = [f"R 0,0,{rng.integers(4)},{rng.integers(4)},{rng.integers(64)},{rng.integers(128)}" for _ in range(300)]
    vt = read_trace(_write(tmp_path / "v.trace", "\n".join(lines) + "\n"))
    addr = to_addresses(vt, spec, "RoBaRaCoCh")
    vt.addr = addr
    plain = Trace(addr, np.zeros(len(addr), bool), np.full(len(addr), -1), "plain", "synthetic")
    a = run_trace(vt, preset="DDR4_3200AA_x8_8Gb", mapping="RoBaRaCoCh")
    b = run_trace(plain, preset="DDR4_3200AA_x8_8Gb", mapping="RoBaRaCoCh")
    assert a.stats["cycles"] == b.stats["cycles"] > 0


# ---- Ramulator 2 SimpleO3 ---------------------------------------------------------------------------------
def test_simpleo3_reads_and_writebacks(tmp_path):
    tr = read_trace(_write(tmp_path / "o3.trace", "3 0x40\n0 4096 8192\n\n2 128\n"))
    assert tr.fmt == "simpleo3"
    assert tr.addr.tolist() == [0x40, 4096, 8192, 128]
    assert tr.is_write.tolist() == [False, False, True, False]
    # 3 bubbles: arrives at 3; 0 bubbles: 4; its write-back as soon as possible (nominally 5), then
    # 2 bubbles: 5 + 1 + 2 = 8 (the same rule as the load/store trace's bubble counts)
    assert tr.arrive.tolist() == [3, 4, -1, 8]


@pytest.mark.parametrize("text, message", [
    ("3 0x40\n3 0x40 0x80 0xc0\n", r":2: unexpected extra field '0xc0'"),
    ("3 0x40\n3 0xZZ\n", r":2: bad load address '0xZZ'"),
    ("3 0x40\n3 64 zz\n", r":2: bad write-back address 'zz'"),
    ("3 0x40\nLD 0x40\n", r":2: mixed trace formats"),
])
def test_simpleo3_errors(tmp_path, text, message):
    with pytest.raises(UserError, match=message):
        read_trace(_write(tmp_path / "o3.trace", text))


# ---- mapping helpers --------------------------------------------------------------------------------------
@pytest.mark.parametrize("preset", ["DDR4_3200AA_x8_8Gb", "HBM3_6400Mbps", "GDDR6_16Gbps"])
@pytest.mark.parametrize("mapping", MAPPINGS)
def test_encode_many_matches_encode(preset, mapping):
    spec = load_spec(preset)
    rng = np.random.default_rng(2)
    sizes = (*spec.counts, spec.rows, spec.columns)
    vec = np.stack([rng.integers(0, n, 64) for n in sizes], axis=1)
    got = encode_many(spec, vec, mapping)
    assert got.dtype == np.uint64
    assert got.tolist() == [encode(spec, *map(int, v), mapping=mapping) for v in vec]
    with pytest.raises(ValueError, match="row="):
        encode_many(spec, np.array([[0, 0, 0, 0, 0, spec.rows, 0]]), mapping)


def test_constant_fields():
    spec = load_spec("HBM3_6400Mbps")       # 16 channels, 2 pseudochannels, 2 ranks, 4 x 4 banks
    rng = np.random.default_rng(3)
    n = 200
    vec = np.stack([np.full(n, 5), rng.integers(0, 2, n), np.zeros(n, int), rng.integers(0, 4, n),
                    np.full(n, 2), rng.integers(0, spec.rows, n), rng.integers(0, spec.columns, n)], axis=1)
    addr = encode_many(spec, vec, "RoBaRaCoCh")
    assert constant_fields(spec, addr, "RoBaRaCoCh") == ["channel", "rank", "bank"]
    ddr4 = load_spec("DDR4_3200AA_x8_8Gb")   # one channel and rank: never reported
    assert constant_fields(ddr4, np.arange(0, 64 * 1000, 64, dtype=np.uint64), "RoBaRaCoCh") == []
    assert constant_fields(spec, np.zeros(0, np.uint64)) == []


def test_trace_warnings_name_constant_fields(tmp_path):
    spec = load_spec("HBM2_2Gbps_PC")        # 8 channels x 2 pseudochannels
    tr = read_trace(_write(tmp_path / "s.trace", "".join(f"LD 0x{i * 32 * 16:x}\n" for i in range(64))))
    warnings = trace_warnings(tr, spec, "RoBaRaCoCh")
    assert len(warnings) == 1 and "channel (1 of 8)" in warnings[0] and "pseudochannel (1 of 2)" in warnings[0]
    from archsim.dram.trace import synthetic_trace

    spread = synthetic_trace("random", 2000, access_bytes=32, span_bytes=spec.capacity_bytes, seed=1)
    assert trace_warnings(spread, spec, "RoBaRaCoCh") == []
