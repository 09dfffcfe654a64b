"""archsim.npu: systolic-array NPU model (tile timing, scratchpad-aware GEMM tiling, DMA tiles as data,
roofline estimators, vector units). Independent of the DRAM engine: memory traffic leaves as DmaTile data."""
# Each name is imported from its module when first used (PEP 562): `archsim.npu.config` (a config check, the
# CLI's help) does not load the tile model and numpy with it.
_WHERE = {name: module for module, names in {
    "config": ('DATAFLOWS', 'PRELOAD_RULES', 'VECTOR_OPS', 'NpuConfig', 'SystolicArray', 'VectorConfig', 'load_npu_config',),
    "roofline": ('GemmEstimate', 'gemm_estimates', 'min_gemm_bytes', 'padded_gemm', 'roofline_gemm', 'tile_model_gemm', 'vector_estimates',),
    "systolic": ('ArrayInstr', 'ArrayPipeline', 'DmaTile', 'DoubleBufferTimeline', 'GemmSchedule', 'GemmTile', 'TileShape', 'TileTiming', 'Timeline', 'array_occupancy_cycles', 'bandwidth_dma_cycles', 'dram_traffic_bytes', 'instr_sequence_cycles', 'os_fold_cycles', 'overlap_timeline', 'plan_tile_shape', 'run_gemm_functional', 'scalesim_fold_cycles', 'scalesim_gemm_cycles', 'scalesim_reported_cycles', 'schedule_gemm', 'tile_buffer_bytes', 'tile_fits', 'ws_empty_preload_cycles', 'ws_issue_offset_cycles', 'ws_latency_cycles',),
    "vector": ('VECTOR_KINDS', 'addtree_levels', 'vector_iters', 'vector_op_cycles', 'vector_row_cycles',),
}.items() for name in names}


def __getattr__(name: str) -> object:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'archsim.npu' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"archsim.npu.{module}"), name)


__all__ = [
    "DATAFLOWS", "PRELOAD_RULES", "VECTOR_KINDS", "VECTOR_OPS", "ArrayInstr", "ArrayPipeline", "DmaTile",
    "DoubleBufferTimeline", "GemmEstimate", "GemmSchedule", "GemmTile", "NpuConfig", "SystolicArray", "TileShape",
    "TileTiming",
    "Timeline", "VectorConfig", "addtree_levels", "array_occupancy_cycles", "bandwidth_dma_cycles",
    "dram_traffic_bytes", "gemm_estimates", "instr_sequence_cycles", "load_npu_config", "min_gemm_bytes",
    "os_fold_cycles", "overlap_timeline", "padded_gemm", "plan_tile_shape", "roofline_gemm",
    "run_gemm_functional", "scalesim_fold_cycles", "scalesim_gemm_cycles", "scalesim_reported_cycles",
    "schedule_gemm", "tile_buffer_bytes", "tile_fits", "tile_model_gemm",
    "vector_estimates", "vector_iters", "vector_op_cycles", "vector_row_cycles", "ws_empty_preload_cycles",
    "ws_issue_offset_cycles", "ws_latency_cycles",
]
