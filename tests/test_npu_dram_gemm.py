"""An NPU GEMM whose DMA goes through the cycle-accurate DRAM as real requests (archsim.npu.dram_gemm):
memory-bound GEMMs run close to the bandwidth bound, compute-bound ones close to the compute bound, and the
DRAM command log passes the independent checker."""
from __future__ import annotations

import pytest

from archsim.dram.checker import check_log
from archsim.dram.spec import load_spec
from archsim.npu.config import load_npu_config
from archsim.npu.dram_gemm import simulate_gemm

CFG = load_npu_config()
NO_REFRESH = {"refresh": "none"}


def _bound_cycles(spec, r) -> float:
    """Bytes moved / peak bandwidth of the device, in NPU cycles."""
    return (r.read_bytes + r.write_bytes) / (spec.peak_bw_bytes_per_s / CFG.clock_hz)


def test_dma_moves_exactly_the_schedule_bytes_and_the_log_is_clean():
    spec = load_spec("NeuPIMs_HBM2_Dual", overrides={"org.channels": 2})
    r = simulate_gemm(CFG, spec, 64, 512, 256, controller=NO_REFRESH, log=True)
    assert r.read_bytes == r.schedule.load_bytes and r.write_bytes == r.schedule.store_bytes
    log = r.memory.command_log()
    assert not check_log(spec, log)
    assert (log.command == "RD").sum() + (log.command == "RDA").sum() == r.read_bytes // spec.access_bytes
    # every tile computed after its operands arrived, in order
    for t in r.timeline.tiles:
        assert t.compute_start_cycles >= t.load_done_cycles >= t.load_issue_cycles


def test_memory_bound_gemm_runs_near_the_bandwidth_bound():
    """A decode-shaped GEMM (8 rows) reads B once: its time is the bytes over the channels' bandwidth."""
    spec = load_spec("NeuPIMs_HBM2_Dual", overrides={"org.channels": 2})
    r = simulate_gemm(CFG, spec, 8, 1024, 1024, controller=NO_REFRESH)
    bound = _bound_cycles(spec, r)
    assert r.npu_cycles > r.schedule.compute_only_cycles()
    assert bound <= r.npu_cycles <= 1.2 * bound
    assert r.timeline.bound == "memory" and r.timeline.dma_stall_cycles > 0


def test_compute_bound_gemm_runs_near_the_compute_bound():
    """With all 32 channels a 512 x 512 x 512 GEMM hides its DMA behind compute except the first tile's."""
    spec = load_spec("NeuPIMs_HBM2_Dual")
    r = simulate_gemm(CFG, spec, 512, 512, 512, controller=NO_REFRESH)
    compute = r.schedule.compute_only_cycles()
    assert _bound_cycles(spec, r) < compute
    assert compute <= r.npu_cycles <= 1.15 * compute


def test_slower_memory_makes_a_memory_bound_gemm_slower():
    fast = load_spec("NeuPIMs_HBM2_Dual", overrides={"org.channels": 4})
    slow = load_spec("NeuPIMs_HBM2_Dual", overrides={"org.channels": 1})
    a = simulate_gemm(CFG, fast, 8, 1024, 512, controller=NO_REFRESH)
    b = simulate_gemm(CFG, slow, 8, 1024, 512, controller=NO_REFRESH)
    assert b.npu_cycles == pytest.approx(4 * a.npu_cycles, rel=0.25)


@pytest.mark.parametrize("m,k,n", [(8, 1024, 512), (200, 700, 300), (512, 512, 512)])
def test_blocked_layout_gives_each_tile_one_disjoint_contiguous_range(m, k, n):
    """In the tile-blocked layout every DMA tile is one range; the loads of the tiles of one output block cover
    each operand tile once (no two tiles of A or B overlap unless they are the same tile)."""
    from archsim.npu.dram_gemm import _blocked_range
    from archsim.npu.systolic import schedule_gemm

    s = schedule_gemm(CFG, m, k, n)
    seen: dict[tuple[str, int], int] = {}
    for t in s.tiles:
        for d in (*t.loads, *t.stores):
            lo, hi = _blocked_range(s, d, 0)
            assert hi - lo == d.bytes
            key = (d.tensor, lo)
            assert seen.setdefault(key, hi) == hi       # the same tile always maps to the same range
    for name in ("A", "B", "C"):
        ranges = sorted((lo, hi) for (tn, lo), hi in seen.items() if tn == name)
        assert all(a[1] <= b[0] for a, b in zip(ranges, ranges[1:], strict=False))   # disjoint
