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


# ---- the NPU as NeuPIMs' code runs it (preset neupims_code: dma per_instruction, token tile held) ----------
def _run_agent(agent_factory, spec):
    from archsim.dram.mapping import Decoder
    from archsim.engine.loop import EventLoop, MemoryUnit
    from archsim.engine.memory import MemorySystem

    ms = MemorySystem(spec, NO_REFRESH, log=True, reuse_slots=True)
    loop = EventLoop(name="test")
    mem = loop.add(MemoryUnit("DRAM", ms, ticks="cycles"))
    agent = agent_factory(mem, ms.add_port(width=spec.channels), ms.add_port(width=spec.channels),
                          Decoder(spec, spec.default_mapping))
    agent.start()
    loop.run()
    return agent, ms


def test_code_gemm_is_its_instruction_stream_when_compute_bound():
    """NeuPIMs' MatMul on its one array (MatMul.cc:195-353): per (token tile, 128-deep K block) one preload and
    one 16-cycle instruction per further 128 weight columns; a compute-bound GEMM takes that stream's time
    (128 + 16 (m - 1) per block under the onnxim rule) plus the fill, and moves exactly its operand bytes."""
    from archsim.npu.dram_gemm import InstructionGemmAgent

    code = load_npu_config("neupims_code")
    spec = load_spec("NeuPIMs_HBM2_Dual")
    m, k, n = 512, 512, 1024             # 4 token tiles x 4 K blocks, 8 weight-column blocks
    agent, ms = _run_agent(lambda mem, lp, sp, dec: InstructionGemmAgent(mem, code, m, k, n, 0, 0, lp, sp, dec), spec)
    stream = (m // 128) * (k // 128) * (128 + 16 * (n // 128 - 1))
    assert stream <= agent.end_npu <= stream + 2000
    assert agent.reads * 64 == (k * n + m * k) * 2          # weights once (first token tile), tokens once
    assert agent.writes * 64 == m * n * 2
    assert not check_log(spec, ms.command_log())


def test_code_gemm_with_little_compute_is_bound_by_its_loads():
    """A decode-sized GEMM (32 tokens) streams its weights once: close to the bytes over the bandwidth."""
    from archsim.npu.dram_gemm import InstructionGemmAgent

    code = load_npu_config("neupims_code")
    spec = load_spec("NeuPIMs_HBM2_Dual", overrides={"org.channels": 4})
    m, k, n = 32, 1024, 2048
    agent, _ = _run_agent(lambda mem, lp, sp, dec: InstructionGemmAgent(mem, code, m, k, n, 0, 0, lp, sp, dec), spec)
    bound = (k * n + m * k + m * n) * 2 / (spec.peak_bw_bytes_per_s / code.clock_hz)
    assert bound <= agent.end_npu <= 1.25 * bound


def test_vector_rows_through_dram_take_their_bytes():
    """LayerNorm as NeuPIMs' code runs it: rows loaded, 5 cycles each, stored: time ~ bytes / bandwidth."""
    from archsim.npu.dram_gemm import VectorStreamAgent
    from archsim.npu.vector import vector_row_cycles

    code = load_npu_config("neupims_code")
    assert vector_row_cycles(code, "layernorm", 4096) == 5 and vector_row_cycles(code, "gelu", 4096) == 0
    spec = load_spec("NeuPIMs_HBM2_Dual", overrides={"org.channels": 4})
    rows, row_bytes = 64, 4096 * 2
    agent, ms = _run_agent(lambda mem, lp, sp, dec: VectorStreamAgent(mem, code.clock_hz, rows, row_bytes, row_bytes, 5,
                                                                      0, 0, lp, sp, dec), spec)
    log = ms.command_log()
    assert (log.command == "WR").sum() + (log.command == "WRA").sum() == rows * row_bytes // 64
    bound = 2 * rows * row_bytes / (spec.peak_bw_bytes_per_s / code.clock_hz)
    assert bound <= agent.end_npu <= 1.5 * bound


def test_serial_rule_is_the_npu_only_branchs_fused_attention():
    """Rule serial (NeuPIMs' npu-only branch): a head's q.K^T preload takes H + W + seq/8 - 1 and every s.V preload
    H + W + 16 - 1, each after the previous one (the first into the then empty array 8 cycles later, a GEMV):
    seq 512 -> 255 + 64 + 8 + 5 x 271 per head once the array is busy."""
    from archsim.npu.systolic import ArrayInstr, ArrayPipeline

    cfg = load_npu_config("neupims_code_npu_only")
    pipe = ArrayPipeline(cfg)
    pipe.issue(ArrayInstr(rows=128, cols=128, depth=128), 0)          # something in the array
    t0 = pipe.busy_until_cycles
    _s, fin = pipe.issue(ArrayInstr(rows=512, cols=1, depth=128), 0)
    assert fin - t0 == 255 + 512 // 8
    for _ in range(0, 512 + 127, 128):
        pipe.issue(ArrayInstr(rows=128, cols=1, depth=128), fin)
    assert pipe.busy_until_cycles - t0 == 255 + 64 + 8 + 5 * 271
