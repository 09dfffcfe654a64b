"""Systems `neupims` and its baselines, the variants of one class below (config.py: the config; device.py,
decode.py, modes.py, baselines.py: the simulation; compiler.py: the attention PIM command streams). Decode
iterations of a GPT-3-class model on NPU + HBM-PIM devices, every layer simulated.

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
source). The system and its baselines are variants of one class (below), each carrying what it does:

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

from typing import Any, ClassVar

from archsim import metrics
from archsim.registry import System, register
from archsim.results import Result
from archsim.stats_names import from_code
from archsim.systems.neupims.config import MODEL_FEATURES, NeuPimsConfig, ServingMode, resolve, setup

MODES = "archsim.systems.neupims.modes"        # imported when a run starts (the CLI's help does not load it)


@register
class NeuPims(System):
    """NeuPIMs: decode iterations of a GPT-3-class model on NPU + HBM-PIM devices (dual row buffers, sub-batch
    interleaving), every layer simulated on the channel engine; its baselines are the variants npu_pim,
    npu_only, gpu_only and gpu_roofline."""

    name = "neupims"
    config = NeuPimsConfig
    features = MODEL_FEATURES
    stats = from_code((f"{MODES}:run_iteration_mode", "stats"), (f"{MODES}:run_serving_mode", "stats"), metrics.NAMES)
    examples = """\
  archsim run --system neupims --batch 64 --set layers=2      # 2 of the model's layers (the summary says so)
  archsim run --system neupims --mode serving --batch 16 --set requests=16 --set layers=1
  archsim run --system npu_pim --batch 64 --set layers=2      # one of the baselines of the NeuPIMs paper"""
    # What a variant is (read by config.setup, the device, the decode simulator and the modes):
    device_preset: ClassVar[str | None] = "NeuPIMs_HBM2_Dual"   # its DRAM device (None: no DRAM simulated)
    mapping_default: ClassVar[str] = "neupims"                  # its mapping policy when none is given
    pim_arbitration: ClassVar[str | None] = "priority"          # PIM beside the NPU's requests (None: no PIM)
    interleaves: ClassVar[bool] = True     # may interleave sub-batches (something runs beside the NPU's work)
    gpu_model: ClassVar[str | None] = None  # a GPU baseline: eager (per kernel, host cost) or roofline

    @classmethod
    def resolve(cls, config: dict[str, Any]) -> dict[str, Any]:
        return resolve({**config, "system": cls.name})

    @classmethod
    def run(cls, config: dict[str, Any], seed: int = 0) -> Result:
        import importlib

        modes = importlib.import_module(MODES)
        su = setup({**config, "system": cls.name})
        if isinstance(su.mode, ServingMode):
            return modes.run_serving_mode(su, seed)
        return modes.run_iteration_mode(su, seed)


@register
class NpuPim(NeuPims):
    """NPU+PIM, the NeuPIMs paper's naive baseline: one row buffer per bank, the channel blocked for the NPU
    while a PIM GEMV runs (Newton-style); by default no sub-batch interleaving and round-robin channels."""

    name = "npu_pim"
    examples = "  archsim run --system npu_pim --batch 64 --set layers=2"
    device_preset = "NeuPIMs_HBM2_Single"
    mapping_default = "npu_pim"
    pim_arbitration = "blocked"


@register
class NpuOnly(NeuPims):
    """NPU-only: plain HBM (the single-buffer device, no PIM command issued), attention on the NPU."""

    name = "npu_only"
    examples = "  archsim run --system npu_only --batch 64 --set layers=2"
    device_preset = "NeuPIMs_HBM2_Single"
    mapping_default = "npu_only"
    pim_arbitration = None
    interleaves = False


@register
class GpuOnly(NeuPims):
    """GPU-only, the NeuPIMs paper's baseline: PyTorch eager on an A100 40GB, per kernel (host launch cost
    overlapped with the device's per-kernel roofline, the KV cache re-copied by torch.cat every step); no cycle
    simulation. Refuses mixture-of-experts models."""

    name = "gpu_only"
    examples = "  archsim run --system gpu_only --batch 64"
    device_preset = None
    pim_arbitration = None
    interleaves = False
    gpu_model = "eager"


@register
class GpuRoofline(GpuOnly):
    """An upper bound on any A100: its roofline per operator, no host or framework cost."""

    name = "gpu_roofline"
    examples = "  archsim run --system gpu_roofline --batch 64"
    gpu_model = "roofline"
