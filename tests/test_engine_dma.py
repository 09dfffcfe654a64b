"""DMA ranges (archsim.engine.dma, MemorySystem.enqueue_ranges; issue 38): strided byte blocks expanded, decoded
and written into the request pool by compiled code are the requests of the request-by-request path
(enqueue_requests of the decoded addresses): the same pool slots, fields, port backlog and, run to the end, the
same command log and completions; an NPU GEMM's DMA through either path gives the same timeline and commands."""
from __future__ import annotations

import numpy as np
import pytest

from archsim.dram import mapping as M
from archsim.dram.spec import load_spec
from archsim.engine import dma, state
from archsim.engine.channel import ST_IDLE
from archsim.engine.memory import MemorySystem
from archsim.npu.config import load_npu_config
from archsim.npu.dram_gemm import _descriptors, _requests, simulate_gemm
from archsim.npu.systolic import schedule_gemm

NO_REFRESH = {"refresh": "none"}
SPEC = load_spec("HBM2_2Gbps_PC", overrides={"org.channels": 4})
MAPPINGS = ["RoRaBgBaChCo", "ChRaBaRoCo", "RoBaRaCoCh,Ch0^Ad14^Ad17,Ba1^Ad20"]


def _blocks(rng, n_blocks, capacity):
    """Random strided blocks: unaligned starts and strides, rows overlapping or apart, empty rows."""
    start = rng.integers(0, capacity // 2, n_blocks)
    rows = rng.integers(1, 6, n_blocks)
    row_bytes = rng.integers(0, 300, n_blocks)
    stride = row_bytes + rng.integers(-40, 500, n_blocks)
    return start, np.maximum(stride, 0), rows, row_bytes


def _pair(spec, reuse):
    out = []
    for _ in range(2):
        ms = MemorySystem(spec, NO_REFRESH, log=True, reuse_slots=reuse)
        out.append((ms, ms.add_port(width=2), ms.add_port(width=3)))
    return out


def _run(ms):
    events = []
    while True:
        st = ms.advance()
        events += ms.drain()
        if st == ST_IDLE:
            return events


@pytest.mark.parametrize("mapping", MAPPINGS)
@pytest.mark.parametrize("reuse", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ranges_are_the_requests_of_the_request_by_request_path(mapping, reuse, seed):
    rng = np.random.default_rng(seed)
    dec = M.Decoder(SPEC, mapping)
    (fast, fp0, fp1), (slow, sp0, sp1) = _pair(SPEC, reuse)
    step = SPEC.access_bytes
    tag = 0
    for transfer in range(12):
        blocks = _blocks(rng, int(rng.integers(1, 5)), SPEC.capacity_bytes)
        kind, arrive = int(rng.integers(0, 2)), int(rng.integers(0, 3000))
        addr = dma.addresses(*blocks, step)
        assert int(dma.count_requests(*(np.asarray(b, dtype=np.int64) for b in blocks), step)) == len(addr)
        if len(addr) == 0:
            continue
        t = -1
        if reuse or transfer % 2:       # reused slots need groups; without them some transfers are untagged
            t, tag = tag, tag + 1
            fast.expect(t, len(addr))
            slow.expect(t, len(addr))
        port = transfer % 2
        assert fast.enqueue_ranges((fp0, fp1)[port], *blocks, dec, kind, arrive, t) == len(addr)
        d = dec(addr.astype(np.uint64))
        slow.enqueue_requests((sp0, sp1)[port], d["channel"], d["bank"], d["row"], d["column"], kind, arrive, t)
        if transfer % 4 == 3:           # some served before more are enqueued: slots reused in ring order
            fast.advance(fast.clock + 500)
            slow.advance(slow.clock + 500)
            assert fast.drain() == slow.drain()
    for f in (*state.POOL_FIELDS, "p_buf", "p_head", "p_tail", "p_next", "outstanding"):
        assert np.array_equal(getattr(fast.S, f), getattr(slow.S, f)), f
    assert fast.n_req == slow.n_req
    assert _run(fast) == _run(slow)
    assert fast.command_log().equals(slow.command_log())


def test_a_split_mapping_decodes_request_by_request():
    """A split field moves address bits before the decode: enqueue_ranges takes the request-by-request path."""
    mapping = "RoBaCoChCo2"
    dec = M.Decoder(SPEC, mapping)
    assert dec.moves
    (fast, fp, _), (slow, sp, _) = _pair(SPEC, False)
    blocks = ([100, 9000], [64, 0], [3, 1], [200, 700])
    addr = dma.addresses(*blocks, SPEC.access_bytes)
    assert fast.enqueue_ranges(fp, *blocks, dec) == len(addr)
    d = dec(addr.astype(np.uint64))
    slow.enqueue_requests(sp, d["channel"], d["bank"], d["row"], d["column"])
    for f in ("r_ch", "r_bank", "r_row", "r_col"):
        assert np.array_equal(getattr(fast.S, f), getattr(slow.S, f)), f


@pytest.mark.parametrize("layout", ["row_major", "blocked"])
@pytest.mark.parametrize("shape", [(64, 512, 256), (40, 300, 200), (8, 1000, 130)])
def test_gemm_tile_descriptors_expand_to_the_tiles_addresses(layout, shape):
    """A GEMM's DMA tiles as descriptors: the addresses of `_requests` (DmaTile.address_ranges), tile by tile."""
    cfg = load_npu_config()
    spec = load_spec("NeuPIMs_HBM2_Dual", overrides={"org.channels": 2})
    sched = schedule_gemm(cfg, *shape)
    bases = dict(zip(sched.names, (0, 1 << 22, 3 << 22), strict=True))
    for tile in sched.tiles:
        for tiles in (tile.loads, tile.stores):
            blocks = _descriptors(tiles, bases, sched, layout).arrays()
            assert np.array_equal(dma.addresses(*blocks, spec.access_bytes),
                                  _requests(spec, tiles, bases, sched, layout).astype(np.int64))


@pytest.mark.parametrize("layout", ["row_major", "blocked"])
def test_gemm_through_ranges_is_the_gemm_request_by_request(layout):
    cfg = load_npu_config()
    spec = load_spec("NeuPIMs_HBM2_Dual", overrides={"org.channels": 2})
    a = simulate_gemm(cfg, spec, 40, 600, 300, controller=NO_REFRESH, log=True, layout=layout)
    b = simulate_gemm(cfg, spec, 40, 600, 300, controller=NO_REFRESH, log=True, layout=layout, dma_ranges=False)
    assert (a.npu_cycles, a.read_bytes, a.write_bytes) == (b.npu_cycles, b.read_bytes, b.write_bytes)
    assert a.timeline.tiles == b.timeline.tiles
    assert a.memory.command_log().equals(b.memory.command_log())
