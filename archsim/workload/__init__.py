"""archsim.workload: model specs (workloads/models/*.yaml or HF config.json) and operator graphs."""
from archsim.workload.graph import (
    ATTENTION_KINDS,
    MATMUL_KINDS,
    OP_KINDS,
    VECTOR_KINDS,
    Op,
    OpGraph,
    build_graph,
)
from archsim.workload.spec import (
    DTYPE_BYTES,
    ModelSpec,
    is_hf_config,
    list_models,
    load_model,
    load_model_file,
    spec_from_hf_config,
    spec_from_mapping,
)

__all__ = [
    "ATTENTION_KINDS", "DTYPE_BYTES", "MATMUL_KINDS", "OP_KINDS", "VECTOR_KINDS", "ModelSpec", "Op", "OpGraph",
    "build_graph", "is_hf_config", "list_models", "load_model", "load_model_file", "spec_from_hf_config",
    "spec_from_mapping",
]
