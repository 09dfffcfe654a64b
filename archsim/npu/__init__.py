"""archsim.npu: systolic-array NPU model (tile timing, scratchpad-aware GEMM tiling, DMA tiles as data,
roofline estimators, vector units). Independent of the DRAM engine: memory traffic leaves as DmaTile data."""
from archsim.npu.config import (
    DATAFLOWS,
    PRELOAD_RULES,
    VECTOR_OPS,
    NpuConfig,
    SystolicArray,
    VectorConfig,
    load_npu_config,
)
from archsim.npu.roofline import (
    GemmEstimate,
    gemm_estimates,
    min_gemm_bytes,
    padded_gemm,
    roofline_gemm,
    tile_model_gemm,
    vector_estimates,
)
from archsim.npu.systolic import (
    ArrayInstr,
    ArrayPipeline,
    DmaTile,
    DoubleBufferTimeline,
    GemmSchedule,
    GemmTile,
    TileShape,
    TileTiming,
    Timeline,
    array_occupancy_cycles,
    bandwidth_dma_cycles,
    dram_traffic_bytes,
    instr_sequence_cycles,
    os_fold_cycles,
    overlap_timeline,
    plan_tile_shape,
    run_gemm_functional,
    schedule_gemm,
    tile_buffer_bytes,
    tile_fits,
    ws_empty_preload_cycles,
    ws_issue_offset_cycles,
    ws_latency_cycles,
)
from archsim.npu.vector import VECTOR_KINDS, addtree_levels, vector_iters, vector_op_cycles, vector_row_cycles

__all__ = [
    "DATAFLOWS", "PRELOAD_RULES", "VECTOR_KINDS", "VECTOR_OPS", "ArrayInstr", "ArrayPipeline", "DmaTile",
    "DoubleBufferTimeline", "GemmEstimate", "GemmSchedule", "GemmTile", "NpuConfig", "SystolicArray", "TileShape",
    "TileTiming",
    "Timeline", "VectorConfig", "addtree_levels", "array_occupancy_cycles", "bandwidth_dma_cycles",
    "dram_traffic_bytes", "gemm_estimates", "instr_sequence_cycles", "load_npu_config", "min_gemm_bytes",
    "os_fold_cycles", "overlap_timeline", "padded_gemm", "plan_tile_shape", "roofline_gemm",
    "run_gemm_functional", "schedule_gemm", "tile_buffer_bytes", "tile_fits", "tile_model_gemm",
    "vector_estimates", "vector_iters", "vector_op_cycles", "vector_row_cycles", "ws_empty_preload_cycles",
    "ws_issue_offset_cycles", "ws_latency_cycles",
]
