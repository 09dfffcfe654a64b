"""archsim.host: PIM-GPT's non-linear ASIC and the GPU/CPU roofline + framework-overhead baselines."""
from archsim.host.asic import (
    AsicConfig,
    AsicModel,
    EnergyTable,
    OpCounter,
    OpCounts,
    exp_taylor,
    gelu_tanh,
    layernorm,
    op_counts,
    partial_sum,
    reciprocal_nr,
    rmsnorm,
    rsqrt_fast,
    silu,
    softmax,
)
from archsim.host.baselines import Baseline

__all__ = [
    "AsicConfig", "AsicModel", "Baseline", "EnergyTable", "OpCounter", "OpCounts", "exp_taylor", "gelu_tanh",
    "layernorm", "op_counts", "partial_sum", "reciprocal_nr", "rmsnorm", "rsqrt_fast", "silu", "softmax",
]
