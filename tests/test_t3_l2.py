"""T3's L2 model (archsim.systems.t3.l2): LRU lines, Sequential's output stores allocate and evict operands,
T3's NMC updates bypass; GEMM DRAM reads checked against a hand count on a tiny shape."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from archsim.systems.t3.l2 import L2Cache
from archsim.systems.t3.params import GpuConfig, load_params
from archsim.systems.t3.shapes import SublayerShape
from archsim.systems.t3.sim import simulate_sublayer


def test_lru_line_is_the_one_replaced_and_a_hit_refreshes_it():
    c = L2Cache(4 * 32, 32, 4)                 # one set of 4 lines: fully associative
    assert c.sets == 1
    assert c.read(np.arange(4) * 32).all()     # 4 cold misses
    assert not c.read(np.array([0])).any()     # line 0 hit: now the most recent
    assert c.read(np.array([4 * 32])).all()    # a 5th line replaces the LRU one, line 1
    assert not c.read(np.array([0, 2 * 32, 3 * 32])).any()
    assert c.read(np.array([32])).all()        # line 1 was evicted


def test_accesses_of_one_line_miss_together_and_count_once():
    c = L2Cache(8 * 128, 128, 8)
    got = c.read(np.array([0, 32, 64, 96, 128]))
    assert got.all() and c.read_misses == 2 and c.read_lines == 2
    assert not c.read(np.array([32, 160])).any()


def test_stores_allocate_and_evict_operands():
    c = L2Cache(4 * 32, 32, 4)
    c.read(np.arange(4) * 32)
    c.store(np.arange(10, 12) * 32)            # two output lines take the two LRU operand lines
    assert c.evicted_by_stores == 2 and c.store_lines == 2
    assert c.read(np.arange(4) * 32)[:2].all()


def test_sets_spread_lines_evenly():
    c = L2Cache(16 << 20, 128, 24)
    assert c.sets == (16 << 20) // (128 * 24)
    counts = np.bincount(c._set_of(np.arange(200_000, dtype=np.int64)), minlength=c.sets)
    assert counts.max() <= 2 * counts.mean()


@pytest.fixture(scope="module")
def tiny_params():
    """A GPU small enough to count its L2 by hand: waves of 2 tiles of 16 x 16, one K step of 16, and a fully
    associative L2 of 96 lines of 32 B (a line: one row of an A or B block, or of an output tile)."""
    base = load_params(overrides={"memory.channels": 4, "memory.mapping": "RoRaBgBaChCo,Ch^Ro"})
    gpu = GpuConfig(cus=2, tile_m=16, tile_n=16, k_step=16, l2_bytes=96 * 32, l2_line_bytes=32, l2_ways=96)
    return dataclasses.replace(base, gpu=gpu)


def test_gemm_dram_reads_by_hand(tiny_params):
    """T = 32 tokens, K = 16, H = 64 on 2 devices: device 0 makes chunk 1 (columns 32-63), then chunk 0, in
    waves of 2 tiles; every block (A0, A16, B0 ... B48) is 16 lines. Wave w+1's reads are issued while wave w
    computes, so wave w's stores come before wave w+2's reads.
    W0 reads A0 B32 B48 (48 lines), W1 A16 (16; B32, B48 hit). T3: W2 hits A0 and reads B0 B16 (32), W3 hits
    all: 96 lines. Sequential: W0's 2 output tiles (32 lines) fill the L2 (96); W2 hits A0, and B0, B16 evict
    A16 and B32 (LRU); W1's stores evict B48 and half of W0's outputs; W3 misses A16 (16): 112 lines. Every
    store after W0's replaces a valid line: 3 x 32."""
    shape = SublayerShape("fc2_fwd", tokens=32, k=16, h=64)
    seq = simulate_sublayer(tiny_params, shape, 2, "sequential", devices="all")
    t3 = simulate_sublayer(tiny_params, shape, 2, "t3", devices="all")
    assert seq.extra["gemm_read_bytes"] == 112 * 32
    assert t3.extra["gemm_read_bytes"] == 96 * 32
    assert seq.extra["l2_lines_evicted_by_stores"] == 96 and t3.extra["l2_lines_evicted_by_stores"] == 0


@pytest.mark.parametrize("config", ["sequential", "t3"])
def test_l2_replay_gives_the_simulated_reads(config):
    """_Sim.replay_l2 (the L2 alone, no memory: reports/t3's token sweep of GEMM reads) counts what a timed run
    reads, on a shape of several waves and K steps whose outputs evict operands (a small L2)."""
    from archsim.systems.t3.sim import _Sim

    base = load_params(overrides={"memory.channels": 4, "memory.mapping": "RoRaBgBaChCo,Ch^Ro"})
    # 960 KB: between a wave's operands (A 256 KB + its B columns 512 KB) and those plus its outputs (256 KB)
    p = dataclasses.replace(base, gpu=dataclasses.replace(base.gpu, cus=8, l2_bytes=960 << 10))
    shape = SublayerShape("fc2_fwd", tokens=256, k=512, h=1024)
    run = simulate_sublayer(p, shape, 4, config, devices="one")
    assert _Sim(p, shape, 4, config, devices="one").replay_l2() == run.traffic["gemm_read"]
    other = _Sim(p, shape, 4, "t3" if config == "sequential" else "sequential", devices="one").replay_l2()
    assert (run.traffic["gemm_read"] > other) == (config == "sequential")
