"""The GPU baselines of NeuPIMs: gpu_only (the paper's PyTorch-eager A100, per kernel) and gpu_roofline (an
upper bound: the A100's roofline per operator).
"""
from __future__ import annotations

from archsim.systems.neupims.config import Setup
from archsim.systems.neupims.device import allreduce_s


def gpu_iteration_s(su: Setup, contexts: list[int]) -> tuple[float, dict]:
    """One decode iteration (su.layers layers) of one TP shard on the GPU (preset su.gpu); the all-reduces over the same link
    as the NPU systems.

    gpu_roofline: max(FLOPs / peak, bytes / bandwidth) per operator (efficiencies from the preset), nothing
    else: an upper bound on any A100 software.
    gpu_only (the paper's baseline, PyTorch on an A100): every kernel HF-style eager PyTorch launches for a
    layer (the preset's `framework.kernels_per_op`) costs its host dispatch (`host_overhead_per_kernel_s`)
    and its own device roofline; the host runs ahead of the device (asynchronous launches), so a layer takes
    max(host, device). Attention reads each request's own K and V (no padding to the batch's longest context:
    our assumption, the favourable one for the GPU); the KV append is torch.cat (HF eager), which rewrites
    the whole cache every step (preset `kv_append_copies_cache`)."""
    from archsim.host.baselines import Baseline

    gpu = Baseline.load(su.gpu)
    model, tp, layers = su.model, su.tp, su.layers
    flops_s = gpu.peak_matmul_flops_per_s * gpu.compute_efficiency
    bw = gpu.peak_bandwidth_bytes_per_s * gpu.bandwidth_efficiency
    b = len(contexts)
    E, F, eb = model.d_model, model.d_ff, 2
    heads = model.n_heads // tp
    ar = 2 * allreduce_s(tp, su.link_bytes_per_s, su.link_latency_s, b * E * eb)
    Q, KV = model.q_dim, model.kv_dim              # GQA: K and V of n_kv_heads heads
    # the gated FFN's gate and up GEMMs are two (E, F) GEMMs where GPT's FFN has one
    ffn_in = [(E, F // tp)] * (2 if model.gated_ffn else 1)
    gemms = [max(2 * b * k * n / flops_s, (k * n + b * (k + n)) * eb / bw)
             for k, n in ((E, (Q + 2 * KV) // tp), (Q // tp, E), *ffn_in, (F // tp, E))]
    if su.variant.gpu_model == "roofline":
        kv_bytes = sum(contexts) * 2 * KV // tp * eb
        attn = max(4 * sum(contexts) * Q // tp / flops_s, kv_bytes / bw)
        per_layer = sum(gemms) + attn + ar
        return per_layer * layers, {"gemm_s": sum(gemms) * layers, "attention_s": attn * layers,
                                    "allreduce_s": ar * layers}
    kpo = gpu.kernels_per_op
    act = b * E * eb                               # one activation vector per request
    padded = sum(contexts)                         # KV tokens attention reads (ragged, no padding)
    kv_half = padded * KV // tp * eb               # K (or V) bytes of this shard
    scores = padded * heads * eb
    # (kernels, device seconds) per operator of one layer; elementwise kernels read and write their tensor
    ops = {
        "layernorm": (2 * kpo["layernorm"], 2 * 2 * act / bw),
        "gemm": (len(gemms) * (kpo["gemm"] + gpu.bias_extra_kernels), sum(gemms) + len(gemms) * 2 * act / bw),
        "kv_append": (kpo["kv_append"], (4 if gpu.kv_append_copies_cache else 2) * kv_half / bw),
        "attn_score": (kpo["attn_score"], max(2 * padded * Q // tp / flops_s, kv_half / bw)
                       + (kpo["attn_score"] - 1) * 2 * scores / bw),
        "softmax": (kpo["softmax"], (kpo["softmax"] - 1) * 2 * scores / bw + 2 * scores / bw),
        "attn_context": (kpo["attn_context"], max(2 * padded * Q // tp / flops_s, kv_half / bw) + 2 * act / tp / bw),
        "residual_add": (2 * kpo["residual_add"], 2 * 3 * act / bw),
        "gelu": (kpo["gelu"], kpo["gelu"] * 2 * b * F // tp * eb / bw),     # the FFN's activation (SiLU if gated)
    }
    if model.gated_ffn:     # SwiGLU's element-wise product: reads gate and up, writes their product
        ops["gate_mul"] = (1, 3 * b * F // tp * eb / bw)
    kernels = sum(k for k, _ in ops.values())
    per_kernel = su.gpu_host_overhead_s or gpu.host_overhead_per_kernel_s
    host = kernels * per_kernel
    device = sum(d for _, d in ops.values())
    body = max(host, device) if gpu.overlap_host_and_device else host + device
    per_layer = body + ar
    return per_layer * layers, {"host_s": host * layers, "device_s": device * layers, "allreduce_s": ar * layers,
                                "kernels_per_layer": kernels, "host_overhead_per_kernel_s": per_kernel,
                                "attention_s": (ops["attn_score"][1] + ops["attn_context"][1] + ops["softmax"][1]
                                                + ops["kv_append"][1]) * layers}
