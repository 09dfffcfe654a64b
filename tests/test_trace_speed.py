"""The faster parts of a whole `archsim trace` process give the same answers as the plain versions they
replaced (issue #7, Speed): the numba address decode against a numpy reference, constant-field warnings
from differing bits against a full decode, the per-channel statistics (bincount) against per-channel masks,
the bubble-count arrivals against the formula, and the CLI's garbage-collector handling. The parsers
themselves are compared in test_trace_fast.py (fast byte-level parser against the general one, every
accepted spelling and malformed lines)."""
from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.dram import mapping as mapping_mod
from archsim.dram.spec import load_spec
from archsim.dram.trace import Trace, _requests_trace, read_trace, synthetic_trace, write_trace

ROOT = Path(__file__).resolve().parent.parent
PRESETS = ["DDR4_3200AA_x8_8Gb", "HBM2_2Gbps_PC", "HBM3_6400Mbps", "GDDR6_16Gbps"]
MAPPINGS = ["RoBaRaCoCh", "rorabgbachco", "RoRaBgBaChCo", "ChRaBaRoCo", "RoCoBaBgRaPcCh"]
_SPECS = {}


def _spec(name: str):
    if name not in _SPECS:
        _SPECS[name] = load_spec(name)
    return _SPECS[name]


def _decode_reference(spec, addr, mapping):
    """The previous numpy decode, field by field (the definition the numba kernel must match)."""
    sizes = {"channel": spec.counts[0], "pseudochannel": spec.counts[1], "rank": spec.counts[2],
             "bankgroup": spec.counts[3], "bank": spec.counts[4], "row": spec.rows, "column": spec.columns}
    a = np.asarray(addr, dtype=np.uint64) >> np.uint64(int(spec.access_bytes).bit_length() - 1)
    parts = {}
    for f in mapping_mod.parse_mapping(mapping):
        bits = int(sizes[f]).bit_length() - 1
        parts[f] = (a & np.uint64((1 << bits) - 1)).astype(np.int64)
        a = a >> np.uint64(bits)
    bank = parts["channel"]
    for lvl, n in (("pseudochannel", spec.counts[1]), ("rank", spec.counts[2]), ("bankgroup", spec.counts[3]),
                   ("bank", spec.counts[4])):
        bank = bank * n + parts[lvl]
    return {"channel": parts["channel"], "bank": bank, "row": parts["row"], "column": parts["column"]}


@settings(max_examples=60, deadline=None)
@given(preset=st.sampled_from(PRESETS), mapping=st.sampled_from(MAPPINGS), seed=st.integers(0, 2**32 - 1),
       n=st.integers(0, 300), wide=st.booleans())
def test_decode_matches_numpy_reference(preset, mapping, seed, n, wide):
    spec = _spec(preset)
    rng = np.random.default_rng(seed)
    # within the device, or any 64-bit value (bits above the mapping's fields are ignored by both)
    top = (1 << 64) - 1 if wide else spec.capacity_bytes - 1
    addr = rng.integers(0, top, size=n, dtype=np.uint64, endpoint=True)
    got = mapping_mod.decode(spec, addr, mapping)
    want = _decode_reference(spec, addr, mapping)
    assert set(got) == set(want)
    for k in want:
        assert got[k].dtype == np.int64 and got[k].shape == (n,)
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)


def test_decode_accepts_lists_and_views():
    spec = _spec("HBM2_2Gbps_PC")
    addr = np.arange(0, 64 * 32 * 200, 32 * 7, dtype=np.uint64)
    strided = addr[::3]                                       # not contiguous
    for a in (strided, strided.tolist(), strided.astype(np.int64), strided.reshape(-1, 5), strided[7]):
        got = mapping_mod.decode(spec, a, "RoBaRaCoCh")
        want = _decode_reference(spec, np.asarray(a, dtype=np.uint64), "RoBaRaCoCh")
        for k in want:
            assert got[k].shape == want[k].shape
            np.testing.assert_array_equal(got[k], want[k])


@settings(max_examples=60, deadline=None)
@given(preset=st.sampled_from(PRESETS), mapping=st.sampled_from(MAPPINGS), seed=st.integers(0, 2**32 - 1),
       n=st.integers(1, 200), fixed=st.sets(st.sampled_from(mapping_mod.VECTOR_LEVELS)))
def test_constant_fields_matches_a_full_decode(preset, mapping, seed, n, fixed):
    """Constant fields from the bits that differ == the fields whose decoded values are all equal."""
    spec = _spec(preset)
    rng = np.random.default_rng(seed)
    sizes = mapping_mod._sizes(spec)
    vec = np.stack([np.full(n, rng.integers(0, sizes[f])) if f in fixed else rng.integers(0, sizes[f], n)
                    for f in mapping_mod.VECTOR_LEVELS], axis=1)
    addr = mapping_mod.encode_many(spec, vec, mapping) | rng.integers(0, spec.access_bytes, n, dtype=np.uint64)
    parts = mapping_mod.decode_fields(spec, addr, mapping)
    want = [f for f in mapping_mod.VECTOR_LEVELS[:5] if sizes[f] > 1 and bool(np.all(parts[f] == parts[f][0]))]
    assert mapping_mod.constant_fields(spec, addr, mapping) == want


def _arrive_reference(third: np.ndarray) -> np.ndarray:
    """The previous bubble-count arrival formula."""
    has_b = third >= 0
    if not has_b.any():
        return np.full(len(third), -1, dtype=np.int64)
    bub = np.where(has_b, third, 0)
    nominal = np.cumsum(bub + 1) - 1
    return np.where(has_b, nominal, -1)


@settings(max_examples=80, deadline=None)
@given(third=st.lists(st.one_of(st.just(-1), st.integers(0, 10**6)), max_size=60))
def test_bubble_arrivals_match_the_formula(third):
    third = np.array(third, dtype=np.int64)
    addr = np.zeros(len(third), dtype=np.uint64)
    for fmt in ("ramulator", "simpleo3"):
        tr = _requests_trace("t.trace", fmt, addr, np.zeros(len(third), bool), third.copy())
        assert tr.arrive.dtype == np.int64
        np.testing.assert_array_equal(tr.arrive, _arrive_reference(third))


def _plain_stats(spec, tr: Trace, raw) -> tuple[dict, list[dict]]:
    """Statistics the straightforward way (masks per channel, numpy means and percentiles)."""
    is_write = np.asarray(tr.is_write, dtype=bool)
    lat = (raw["req_done"] - raw["req_enq"])[~is_write]
    kind = raw["req_kind"]
    stats = {"reads": int((~is_write).sum()), "writes": int(is_write.sum()),
             "row_hits": int((kind == 0).sum()), "row_misses": int((kind == 1).sum()),
             "row_conflicts": int((kind == 2).sum()), "row_hit_rate": float((kind == 0).mean()),
             "read_latency_mean_cycles": float(lat.mean()) if lat.size else 0.0,
             "read_latency_p50_cycles": float(np.percentile(lat, 50)) if lat.size else 0.0,
             "read_latency_p99_cycles": float(np.percentile(lat, 99)) if lat.size else 0.0,
             "read_latency_mean_ns": float(lat.mean() * spec.tCK_ps / 1000) if lat.size else 0.0}
    ch = mapping_mod.decode(spec, tr.addr, raw["mapping"])["channel"]
    rows = []
    for c in range(spec.channels):
        sel = ch == c
        lat_c = (raw["req_done"] - raw["req_enq"])[sel & ~is_write]
        rows.append({"requests": int(sel.sum()), "reads": int((sel & ~is_write).sum()),
                     "writes": int((sel & is_write).sum()), "row_hits": int((kind[sel] == 0).sum()),
                     "row_misses": int((kind[sel] == 1).sum()), "row_conflicts": int((kind[sel] == 2).sum()),
                     "read_latency_mean_cycles": float(lat_c.mean()) if lat_c.size else 0.0,
                     "bytes": int(sel.sum()) * spec.access_bytes})
    return stats, rows


@pytest.mark.parametrize("preset, channels, kind, read_fraction", [
    ("DDR4_3200AA_x8_8Gb", 1, "random", 0.8),
    ("DDR4_3200AA_x8_8Gb", 2, "mixed", 0.5),
    ("HBM2_2Gbps_PC", 8, "stream", 0.8),
    ("HBM2_2Gbps_PC", 8, "random", 1.0),     # reads only
    ("HBM2_2Gbps_PC", 8, "random", 0.0),     # writes only: no latencies
])
def test_statistics_match_per_channel_masks(preset, channels, kind, read_fraction):
    from archsim.systems.dram_trace.system import run_trace

    spec = load_spec(preset)
    tr = synthetic_trace(kind, 3000, read_fraction=read_fraction, span_bytes=1 << 28,
                         access_bytes=spec.access_bytes, seed=5)
    res = run_trace(tr, preset=preset, channels=channels)
    raw = dict(res.extra["raw"], mapping=res.stats["mapping"])
    stats, rows = _plain_stats(res.extra["spec"], tr, raw)
    for k, v in stats.items():
        assert res.stats[k] == v, k          # exactly: the same numbers, not merely close
    table = res.df.to_dict("records")
    assert len(table) == channels
    for got, want in zip(table, rows, strict=True):
        for k, v in want.items():
            assert got[k] == v, (got["channel"], k)
    timings = res.extra["timings_s"]
    assert set(timings) == {"setup", "read", "check", "decode", "engine_setup", "kernel", "stats"}
    assert all(t >= 0 for t in timings.values())


def test_trace_command_restores_the_garbage_collector(tmp_path):
    from archsim.cli import main

    path = tmp_path / "t.trace"
    path.write_text("LD 0x40\nST 0x80\n")
    assert gc.isenabled()
    assert main(["trace", str(path), "--quiet"]) == 0
    assert gc.isenabled()
    gc.disable()
    try:
        assert main(["trace", str(path), "--quiet"]) == 0
        assert not gc.isenabled()            # left as it was
    finally:
        gc.enable()
    bad = tmp_path / "bad.trace"
    bad.write_text("LD 0x40\nLD 0xZZ\n")
    assert main(["trace", str(bad), "--quiet"]) == 2   # an error: still restored
    assert gc.isenabled()


def test_trace_command_bad_line_exit_2_names_file_and_line(tmp_path):
    path = tmp_path / "bad.trace"
    path.write_text("LD 0x40\nST 0x80\nLD 0x4g\n")
    run = subprocess.run([sys.executable, "-m", "archsim.cli", "trace", str(path), "--quiet"], capture_output=True,
                         text=True, cwd=str(ROOT))
    assert run.returncode == 2
    assert f"{path}:3:" in run.stderr and "Traceback" not in run.stderr


def test_whole_process_benchmark_runs(tmp_path):
    """benchmarks/bench_trace_cli.py on a tiny trace: the child runs agree with an in-process run."""
    from archsim.systems.dram_trace.system import run_trace

    out = tmp_path / "b.json"
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_trace_cli.py"), "--requests", "3000",
                          "--repeat", "1", "--cases", "ddr4-stream", "--dir", str(tmp_path), "--json", str(out)],
                         capture_output=True, text=True, cwd=str(ROOT))
    assert run.returncode == 0, run.stderr
    case = json.loads(out.read_text())["cases"][0]
    assert case["requests"] == 3000 and case["wall_s"] > 0 and case["cpu_s"] > 0
    assert set(case["breakdown_s"]) >= {"imports", "read", "decode", "kernel", "stats", "start+exit"}
    trace = tmp_path / "ddr4-stream-3000.trace"
    want = run_trace(str(trace), preset="DDR4_3200AA_x8_8Gb", channels=1, mapping="RoBaRaCoCh")
    assert case["cycles"] == want.stats["cycles"]
    assert len(read_trace(trace)) == 3000
    assert "| ddr4-stream |" in run.stdout


def test_written_trace_round_trips_through_the_fast_path(tmp_path):
    tr = synthetic_trace("mixed", 500, seed=2)
    tr.arrive = np.where(np.arange(500) % 7 == 0, np.arange(500) * 3, -1)
    write_trace(tr, tmp_path / "m.trace")
    back = read_trace(tmp_path / "m.trace")
    assert back.parser == "fast"
    np.testing.assert_array_equal(back.addr, tr.addr)
    np.testing.assert_array_equal(back.is_write, tr.is_write)
    np.testing.assert_array_equal(back.arrive, tr.arrive)


@pytest.mark.parametrize("data", [
    b"LD 0x40\nST 0x80\n", b"LD 0x40\nST 0x80",                    # with and without a final newline
    b"\xef\xbb\xbfLD 0x40\r\nST 0x80\r\n",                         # byte-order mark, CRLF
    b"0x40 READ 1\n0x80 WRITE 3", b"3 0x40\n0 4096 8192\n",         # DRAMsim3; SimpleO3 (general parser)
    b"R 0,0,1,2,3,4\nW 0,0,1,2,3,5\n", b"LD 0x40\nLD 0xZZ\n", b"# only a comment\n", b"", b"L",
])
def test_memory_mapped_read_equals_reading_the_bytes(tmp_path, data):
    """read_trace maps plain files into memory; the result (or error) is the one parsing the bytes gives."""
    import gzip

    from archsim.dram import trace as trace_mod
    from archsim.errors import UserError

    def parse_bytes(raw: bytes, source: str):
        raw = raw[3:] if raw[:3] == b"\xef\xbb\xbf" else raw
        return trace_mod._read_fast(raw, source) or trace_mod._read_general(raw, source)

    for name, payload in (("t.trace", data), ("t.trace.gz", gzip.compress(data))):
        path = tmp_path / name
        path.write_bytes(payload)
        try:
            want = parse_bytes(data, str(path))
        except UserError as exc:
            with pytest.raises(UserError) as got:
                read_trace(path)
            assert str(got.value) == str(exc)
            continue
        got = read_trace(path)
        assert (got.fmt, len(got), got.parser) == (want.fmt, len(want), want.parser)
        np.testing.assert_array_equal(got.is_write, want.is_write)
        np.testing.assert_array_equal(got.arrive, want.arrive)
        if want.vec is None:
            np.testing.assert_array_equal(got.addr, want.addr)
        else:
            np.testing.assert_array_equal(got.vec, want.vec)


def test_request_stats_refuses_out_of_range_input():
    from archsim.dram.fast_stats import request_stats

    z = np.zeros(3, dtype=np.int64)
    ok = request_stats(np.array([0, 1, 1]), np.array([False, True, False]), np.array([0, 2, 1]), z,
                       np.array([5, 7, 9]), 2)
    assert ok["per_req"].tolist() == [1, 2] and ok["per_read"].tolist() == [1, 1]
    assert ok["per_kind"].tolist() == [[1, 0, 0], [0, 1, 1]] and ok["lat_sum"].tolist() == [5, 9]
    assert ok["lat"].tolist() == [5, 9]
    with pytest.raises(ValueError, match="request 2: channel 2"):
        request_stats(np.array([0, 1, 2]), np.zeros(3, bool), z, z, z, 2)
    with pytest.raises(ValueError, match="request 0: .* row class 4"):     # (3: served without a command)
        request_stats(z, np.zeros(3, bool), np.array([4, 0, 0]), z, z, 2)


def test_read_while_loading_engine_reads_the_trace_and_loads_the_kernel(tmp_path):
    """run_trace reads a trace file while another thread loads the channel kernel: the trace is the one
    read_trace gives, the kernel for the run's state types is loaded, and a read error comes out as the same
    UserError (the loading thread does not swallow or delay it)."""
    import numba

    from archsim.dram.controller import ControllerConfig
    from archsim.engine.channel import advance
    from archsim.engine.memory import MemorySystem
    from archsim.errors import UserError
    from archsim.systems.dram_trace.system import _read_while_loading_engine

    spec, ctrl = _spec("HBM2_2Gbps_PC"), ControllerConfig(mapping="RoBaRaCoCh")
    tr = synthetic_trace("random", 400, seed=3)
    write_trace(tr, tmp_path / "t.trace")
    got = _read_while_loading_engine(tmp_path / "t.trace", spec, ctrl, log=False)
    want = read_trace(tmp_path / "t.trace")
    for field in ("addr", "is_write", "arrive"):
        np.testing.assert_array_equal(getattr(got, field), getattr(want, field))
    ms = MemorySystem(spec, ctrl, log=False, requests=len(tr))
    assert tuple(numba.typeof(a) for a in (ms.S, ms.tables, ms.cf, np.int64(0))) in advance.overloads
    (tmp_path / "bad.trace").write_text("LD 0x40\nLD 0x4g\n")
    with pytest.raises(UserError) as exc:
        _read_while_loading_engine(tmp_path / "bad.trace", spec, ctrl, log=False)
    with pytest.raises(UserError) as plain:
        read_trace(tmp_path / "bad.trace")
    assert str(exc.value) == str(plain.value)


def test_load_kernel_loads_without_running():
    """MemorySystem.load_kernel fetches the compiled kernel for the state's types and runs nothing: the clock,
    counters and pool stay as they were, and a run afterwards issues what a run without it issues."""
    from archsim.dram.controller import ControllerConfig
    from archsim.engine.memory import MemorySystem

    spec = _spec("DDR4_3200AA_x8_8Gb")
    tr = synthetic_trace("random", 300, seed=5, span_bytes=1 << 24)
    dec = mapping_mod.decode(spec, tr.addr, "RoBaRaCoCh")

    def run(preload: bool):
        ms = MemorySystem(spec, ControllerConfig(mapping="RoBaRaCoCh"), log=True, requests=len(tr))
        port = ms.add_port("mem")
        if preload:
            ms.load_kernel()
            kernel = ms._kernel
            assert kernel is not None and ms.clock == 0 and int(ms.S.cmd_count.sum()) == 0
        ms.enqueue_requests(port, dec["channel"], dec["bank"], dec["row"], dec["column"], tr.is_write)
        ms.run()
        if preload:
            assert ms._kernel is kernel      # the run used the loaded entry point (the state was not replaced)
        k = int(ms.S.n_log[0])
        return ms.clock, ms.S.log_clk[:k].copy(), ms.S.log_cmd[:k].copy()

    (c0, clk0, cmd0), (c1, clk1, cmd1) = run(False), run(True)
    assert c0 == c1 and len(cmd0) > 300
    np.testing.assert_array_equal(clk0, clk1)
    np.testing.assert_array_equal(cmd0, cmd1)
