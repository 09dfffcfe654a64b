"""NeuPIMs and its baselines: decode iterations of a GPT-3 model on NPU + HBM-PIM devices, every layer simulated.

One TP shard of the model runs on one device: an NPU (systolic arrays + vector units, archsim.npu) and 32
HBM2 channels with PIM banks (preset NeuPIMs_HBM2_Dual / _Single). Per layer and sub-batch:

  QKV      LayerNorm (vector) -> GEMM b x E x 3E/tp (NPU arrays; DMA through the channel engine)
  MHA      per request and head q.K^T (PIM GEMV) -> softmax (NPU vector units) -> s.V (PIM GEMV), on the channel
           that holds the request's KV cache (archsim.systems.neupims.compiler streams), or on the NPU (npu_only)
  Proj+FFN GEMM b x E/tp x E -> all-reduce -> residual add -> LayerNorm -> GEMM b x E x 4E/tp -> GELU ->
           GEMM b x 4E/tp x E -> all-reduce -> residual add

Llama-class models (issue 37): grouped-query attention (the QKV GEMM's K and V columns, the KV cache and the PIM
K/V rows per KV head; a group's query heads run as more GEMVs over the same open K rows), a gated FFN (gate and
up GEMMs of d_ff, SiLU and their element-wise product on the vector units, the down GEMM) and RMSNorm, as the
model file says; an MoE layer's router GEMM and its softmax, then each expert's FFN GEMMs over its routed tokens
(uniform routing's expected counts; every expert split over the tp devices); RoPE of q and k on the vector units.

Stages follow mappings/neupims.yaml: with sub-batch interleaving, two sub-batches through stages A..F (NPU runs
QKV / Proj+FFN of one while PIM runs the other's MHA; every stage ends at a barrier); without it, QKV, MHA and
Proj+FFN of the whole batch one after the other. Everything that touches DRAM in a stage runs in ONE channel
engine at the same time: the NPU's DMA requests (an rw source, FR-FCFS) and the PIM command streams (a stream
source). The four systems differ only in data:

  neupims   dual row buffers (PIM and memory rows open at once); PIM commands first (`priority`)
  npu_pim   one row buffer; `blocked`: while a PIM GEMV runs, the channel serves only PIM (Newton-style); by
            default the paper's naive baseline (mappings/npu_pim.yaml: no sub-batch interleaving, round-robin)
  npu_only  plain HBM (the single-buffer device, no PIM command issued); attention on the NPU
  gpu_only  the paper's GPU-only baseline: PyTorch eager on an A100 40GB, per kernel (host launch cost overlapped
            with the device's per-kernel roofline, the KV cache re-copied by torch.cat every step), no cycle simulation
  gpu_roofline  an upper bound on any A100: its roofline per operator, no host or framework cost

Modes: `iteration` (NeuPIMs' own method, without its one-layer extrapolation: `samples` batches of `batch`
requests with sampled lengths, one decode iteration each over all layers) and `serving` (continuous batching of
`requests` requests; prefill on standalone NPUs, every decode iteration simulated; TTFT / TBT percentiles).

Assumptions (stated in reports/neupims/README.md): TP devices are symmetric, so one device is simulated and
the all-reduce is a ring over `link_bytes_per_s` / `link_latency_s` (default: an ideal interconnect, as in
NeuPIMs' simulator, which models no inter-device traffic); GEMM weights are
stored per array (the N dimension split over `arrays` arrays, each streaming its own block); vector ops read
their operands from the NPU SRAM (no DRAM traffic); softmax jobs queue on the vector pipelines in the order the
logits GEMVs finish.
"""
from __future__ import annotations

from typing import Any

from archsim import metrics
from archsim.registry import register
from archsim.results import Result
from archsim.stats_names import from_code
from archsim.systems.neupims.config import (
    MODEL_FEATURES,
    SYSTEMS,
    NeuPimsConfig,
    ServingMode,
    resolve,
    setup,
)
from archsim.systems.neupims.modes import run_iteration_mode, run_serving_mode


def run(config: dict[str, Any], seed: int = 0) -> Result:
    su = setup(config)
    if isinstance(su.mode, ServingMode):
        return run_serving_mode(su, seed)
    return run_iteration_mode(su, seed)


EXAMPLES = {
    "neupims": """\
  archsim run --system neupims --batch 64 --set layers=2      # 2 of the model's layers (the summary says so)
  archsim run --system neupims --mode serving --batch 16 --set requests=16 --set layers=1
  archsim run --system npu_pim --batch 64 --set layers=2      # one of the baselines of the NeuPIMs paper""",
    "npu_pim": "  archsim run --system npu_pim --batch 64 --set layers=2",
    "npu_only": "  archsim run --system npu_only --batch 64 --set layers=2",
    "gpu_only": "  archsim run --system gpu_only --batch 64",
    "gpu_roofline": "  archsim run --system gpu_roofline --batch 64",
}

for _name in SYSTEMS:
    register(_name, resolve=resolve, schema=NeuPimsConfig, examples=EXAMPLES[_name], features=MODEL_FEATURES,
             stats=from_code((run_iteration_mode, "stats"), (run_serving_mode, "stats"), metrics.NAMES))(run)
