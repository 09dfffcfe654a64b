"""System `t3_decode`: a whole decode step of a model on T3 devices (issue 37): every layer of a tensor-parallel
model at one token per request, the two sublayers T3 fuses (the attention out-projection and FC-2, each a GEMM
with its reduce-scatter and all-gather) simulated cycle for cycle on the channel engine in the chosen
configuration (archsim.systems.t3.sim), the rest of the layer on the same GPU and memory by its roofline.

    archsim run --system t3_decode --set model=gpt3-7b --set tp=4 --set batch=64 --set context=1024

Per layer and device: QKV GEMM (batch x d_model x 3 d_model / tp, column-parallel: no collective) ->
attention (every request reads its K and V, context x d_model / tp each) -> out-projection + RS + AG
(simulated) -> FC-1 GEMM (batch x d_model x d_ff / tp) -> FC-2 + RS + AG (simulated). The column-parallel
GEMMs (QKV, FC-1) run on the same GPU and memory model (the GEMM of a Sequential run of their shape); attention
(every request reads its K and V) is the GPU's roofline at the memory's peak bandwidth. Layers are identical, so
one layer stands for all; the element-wise ops (norms, residuals, activation) and the embedding / LM head are
not modelled (the scope says so).

Mixture of experts (tensor-parallel experts, Megatron-style: each expert's FC-1 column-split and FC-2 row-split
over the tp devices, as the dense FFN): a MoE layer's FFN is the router GEMM (d_model x n_experts, whole on
every device; roofline), each active expert's FC-1 GEMM over its routed tokens (simulated, one after another)
and the down projection fused with the reduce-scatter: every active expert's FC-2 GEMM updates the one
batch x d_model partial sum, whose tiles the tracker releases when every expert's updates are in
(shapes.moe_fc2_shape, simulated; `moe_order`: the experts' GEMMs one after another, each in ring order, or
chunk by chunk). Tokens per expert: the expected counts of uniform routing
(archsim.systems.duplex.compiler.routing_counts); an expert with none reads no weights. A model whose MoE FFN
is every moe_every-th layer has one dense and one MoE layer simulated, weighted by their counts.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from archsim import metrics, schema
from archsim.errors import ConfigError
from archsim.limits import MAX_BATCH, MAX_CHANNELS
from archsim.results import Result, make_manifest
from archsim.schema import opt

MODEL_FEATURES = frozenset({"gqa", "gated_ffn", "moe"})   # archsim.summary.FEATURES: all size or shape its ops
FUSED = ("op_fwd", "fc2_fwd")                  # the sublayers T3 fuses with their reduce-scatter at decode


@dataclass
class T3DecodeConfig:
    """Config of system `t3_decode` (its keys: DEFAULTS, resolve, CLI flags and help derive from it)."""

    model: str = opt("gpt3-7b", "model name (workloads/models) or a model file")
    tp: int = opt(4, "devices the layers are sliced over (T3 overlaps their reduce-scatter)", minimum=2, maximum=64)
    batch: int = opt(64, "requests decoded together (the GEMMs' M)", minimum=1, maximum=MAX_BATCH)
    context: int = opt(1024, "KV-cache tokens of every request at the step", minimum=1)
    configuration: str = opt("t3-mca", "the configuration of the fused sublayers: sequential (GEMM, then a ring "
                      "reduce-scatter), t3 (tracker-fused), t3-mca (+ memory-controller arbitration)",
                      choices=("sequential", "t3", "t3-mca"))
    preset: str = opt("t3_paper", "T3 hardware preset (archsim/presets/t3)")
    moe_order: str = opt("expert", "a MoE layer's fused down projection: expert (the active experts' GEMMs one "
                         "after another, each in ring order; a chunk is released when the last expert's tiles are "
                         "in) or chunk (every expert's tiles of a chunk before the next chunk); absent unless given, "
                         "so a dense model's config keeps its hash", choices=("expert", "chunk"), optional=True)
    # the memory of a device (optional: the T3 preset's unless given)
    memory_preset: str = opt("HBM2_2Gbps_NMC", "DRAM preset of the device memory; default: the T3 preset's",
                             optional=True)
    channels: int = opt(32, "channels of the device memory; default: the T3 preset's", minimum=1, maximum=MAX_CHANNELS,
                        optional=True)
    memory_mapping: str = opt("RoRaBgBaChCo", "address mapping of the device memory (docs/traces.md); default: "
                              "the T3 preset's (its channel hash is written for its 32 channels), or with another "
                              "memory_preset or channels that memory preset's", optional=True)


DEFAULTS: dict[str, Any] = {"system": "t3_decode", **schema.defaults(T3DecodeConfig)}


def resolve(config: dict[str, Any]) -> dict[str, Any]:
    schema.check(T3DecodeConfig, config, "t3_decode")
    return {**DEFAULTS, **config}


def _params(cfg: dict[str, Any]):
    from archsim.systems.t3.params import load_params

    over = {}
    for key, path in (("memory_preset", "memory.preset"), ("channels", "memory.channels"),
                      ("memory_mapping", "memory.mapping")):
        if key in cfg:
            over[path] = cfg[key]
    if over and "memory_mapping" not in cfg:
        # the T3 preset's mapping hashes the channel bits of its own memory (IPoly over 32 HBM2 channels):
        # another memory runs with its own preset's mapping unless one is given
        over["memory.mapping"] = None
    return load_params(cfg["preset"], overrides=over)


def _roofline(flops: float, nbytes: float, peak_flops: float, bw: float) -> float:
    return max(flops / peak_flops, nbytes / bw)


def layer_kinds(model: Any) -> list[tuple[str, int]]:
    """The kinds of layer a model has and how many of each: dense and / or MoE (every moe_every-th block)."""
    moe = model.n_moe_layers
    return [(kind, n) for kind, n in (("dense", model.n_layers - moe), ("moe", moe)) if n]


def decode_step(cfg: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Simulate the fused sublayers and add the roofline parts: (stats, one row per part of a layer; a MoE
    model's rows say which kind of layer, `layer`, they belong to)."""
    from archsim.systems.t3.params import load_t3_ring
    from archsim.systems.t3.system import variant_params
    from archsim.systems.t3.variants import VARIANT_CONFIGS
    from archsim.workload.spec import load_model

    model = load_model(cfg["model"])
    if model.n_heads % cfg["tp"]:
        raise ConfigError("tp", f"{model.name} has {model.n_heads} heads; tp must divide it, got {cfg['tp']}")
    base = _params(cfg)
    cls = VARIANT_CONFIGS[cfg["configuration"]]          # the configuration's knobs, at the preset's values
    params = variant_params(base, cls(**{f.name: getattr(base, f.name) for f in dataclasses.fields(cls)}))
    spec, tp, b, L = params.spec, cfg["tp"], cfg["batch"], cfg["context"]
    ring = load_t3_ring(params, tp)
    rows: list[dict[str, Any]] = []
    # per kind of layer (dense, MoE): its share of the layers, its parts' time and its DRAM energy (pJ)
    memo: dict[tuple, Any] = {}         # sublayer runs by (shape, configuration): a dense and a MoE layer share some
    layers = [(kind, n / model.n_layers, *_layer(cfg, model, params, ring, kind, memo))
              for kind, n in layer_kinds(model)]
    for kind, _, layer_rows, _ in layers:
        rows += [{**r, "layer": kind} for r in layer_rows] if model.n_experts > 1 else layer_rows
    layer_s = sum(w * sum(r["seconds"] for r in lr) for _, w, lr, _ in layers)      # the mean layer
    step = layer_s * model.n_layers
    macs = sum(w * (sum(r["flops"] for r in lr) / 2 * tp) for _, w, lr, _ in layers)   # every device's, one layer
    per_tok = model.n_layers * tp * 1e-12 / b                  # one device's layer -> every device, every layer
    dram = nmc = static = 0.0
    for _, w, _, pj in layers:
        pj = dict(pj)
        nmc += pj.pop("nmc", 0.0) * w * per_tok
        static += pj.pop("background", 0.0) * w * per_tok
        dram += sum(pj.values()) * w * per_tok
    parts = {"dram": dram, "pim": nmc, "static": static,
             "compute": macs * metrics.DEFAULT_MAC_PJ * 1e-12 * model.n_layers / b}
    fused = sum(w * sum(r["seconds"] for r in lr if r["part"] in FUSED) for _, w, lr, _ in layers)
    sc = metrics.scope(layers_simulated=len(layers), layers=model.n_layers, devices=tp,
                       not_modelled=["element-wise ops (norms, residuals, activation)", "embedding and LM head",
                                     "prefill"],
                       simulated=[*FUSED, "qkv", "fc1"], roofline=["attention"],
                       compute_energy=f"{metrics.DEFAULT_MAC_PJ} pJ per GPU MAC (archsim.metrics.DEFAULT_MAC_PJ)")
    stats: dict[str, Any] = {"model": model.name, "tp": tp, "batch": b, "context": L,
                             "configuration": cfg["configuration"], "memory": spec.name, "channels": spec.channels, "layer_s": layer_s,
                             "fused_share": fused / layer_s}
    if model.n_experts > 1:
        from archsim.systems.t3.shapes import moe_fc2_shape

        counts = list(moe_fc2_shape(model, tp, b).experts)
        sc["roofline"].append("router")
        sc["not_modelled"].append("routing imbalance: every MoE layer's tokens per expert are the expected counts "
                                  "of uniform routing (archsim.systems.duplex.compiler.routing_counts)")
        sc["moe"] = {"layers": model.n_moe_layers, "experts": model.n_experts,
                     "experts_per_token": model.experts_per_token, "tokens_per_active_expert": counts,
                     "fc1": "each active expert's GEMM over its tokens, one after another",
                     "fc2_fwd": "every active expert's GEMM updates the one output the reduce-scatter reduces",
                     "order": cfg.get("moe_order", "expert")}
        stats["experts_active"] = len(counts)
        stats["moe_layers"] = model.n_moe_layers
    stats.update(metrics.common(step, b, parts, sc))
    return stats, rows


def _layer(cfg: dict[str, Any], model: Any, params: Any, ring: Any, kind: str,
           memo: dict[tuple, Any]) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """One layer of `kind` (dense or moe) on one device: (one row per part, its DRAM energy in pJ by component).
    `memo` holds the sublayer runs of the step's other kind of layer (the same shape simulates the same)."""
    from archsim import energy as energy_mod
    from archsim.systems.t3.shapes import SublayerShape, moe_fc2_shape, sublayer_shape
    from archsim.systems.t3.sim import dram_energy, simulate_sublayer

    spec, gpu, tp, b, L = params.spec, params.gpu, cfg["tp"], cfg["batch"], cfg["context"]
    peak = gpu.peak_flops
    bw = spec.peak_bw_bytes_per_s
    eb = gpu.dtype_bytes
    E, F = model.d_model, model.d_ff * (2 if model.gated_ffn else 1)
    kv = model.n_kv_heads * model.d_head            # K (or V) width of all heads
    rows: list[dict[str, Any]] = []
    dram_pj: dict[str, float] = {}
    tck = spec.tCK_s

    def roof(part: str, flops: float, nbytes: float, seconds: float | None = None, kind: str = "roofline",
             **more: Any) -> None:
        sec = _roofline(flops, nbytes, peak, bw) if seconds is None else seconds
        acc = max(1, round(nbytes / spec.access_bytes))
        pj = energy_mod.dram_energy_pj(spec, {"RD": acc, "ACT": math.ceil(nbytes / spec.row_bytes)},
                                       round(sec / tck), spec.channels)
        for k, v in pj.items():
            dram_pj[k] = dram_pj.get(k, 0.0) + v
        rows.append({"part": part, "kind": kind, "seconds": sec, "flops": flops, "bytes": nbytes, **more})

    def simulated(shape: SublayerShape, configuration: str) -> Any:
        key = (shape, configuration)
        if key not in memo:
            memo[key] = simulate_sublayer(params, shape, tp, configuration, devices="one", ring=ring,
                                          moe_order=cfg.get("moe_order", "expert"))
        return memo[key]

    def gemm_s(part: str, tokens: int, n_out: int) -> float:
        # a column-parallel GEMM (no collective after it) on the same GPU and memory model: the GEMM of a
        # Sequential run of its shape (its reduce-scatter, simulated after, is not counted)
        return simulated(SublayerShape(part, tokens, E, n_out), "sequential").gemm_cycles * tck

    # the column-parallel GEMMs: their DRAM energy from their bytes as the roofline parts'
    moe = kind == "moe"
    n_fc1 = F // tp
    for part, n_out in (("qkv", (E + 2 * kv) // tp), ) + ((("fc1", n_fc1), ) if not moe else ()):
        roof(part, 2 * b * E * n_out, (E * n_out + b * E + b * n_out) * eb, seconds=gemm_s(part, b, n_out),
             kind="simulated GEMM (no collective)")
    roof("attention", 2 * 2 * b * L * model.n_heads * model.d_head / tp, 2 * b * L * kv / tp * eb)
    fused = {sub: sublayer_shape(model, sub, tp, b) for sub in FUSED}
    if moe:
        fc2 = fused["fc2_fwd"] = moe_fc2_shape(model, tp, b)
        ne = model.n_experts
        roof("router", 2 * b * E * ne, (E * ne + b * E + b * ne) * eb)
        # each active expert's FC-1 over its tokens, one GEMM after another (equal counts simulate once)
        times = {t: gemm_s("fc1", t, n_fc1) for t in set(fc2.experts)}
        roof("fc1", sum(2 * t * E * n_fc1 for t in fc2.experts),
             sum((E * n_fc1 + t * E + t * n_fc1) * eb for t in fc2.experts),
             seconds=sum(times[t] for t in fc2.experts), kind="simulated GEMM (no collective), per active expert",
             experts=len(fc2.experts))
    for sub in FUSED:
        shape = fused[sub]
        run = simulated(shape, cfg["configuration"])
        for k, v in dram_energy(run, params).items():
            dram_pj[k] = dram_pj.get(k, 0.0) + v
        dram_pj["background"] = dram_pj.get("background", 0.0) + energy_mod.dram_energy_pj(
            spec, {}, run.rs_end_cycles, spec.channels)["background"]
        row = {"part": sub, "kind": f"simulated ({cfg['configuration']})", "seconds": run.sublayer_s,
               "flops": 2 * shape.gemm_rows * shape.k * shape.h, "bytes": float(shape.n_gemms * shape.k * shape.h * eb),
               "gemm_s": run.gemm_cycles * tck, "rs_end_s": run.rs_end_cycles * tck, "all_gather_s": run.ag_s}
        if shape.experts:
            row.update(experts=len(shape.experts), weight_read_bytes=run.extra["weight_read_bytes"])
        rows.append(row)
    return rows, dram_pj


def run_config(config: dict[str, Any], seed: int = 0) -> Result:
    cfg = resolve(config)
    stats, rows = decode_step(cfg)
    return Result(stats=stats, df=rows, manifest=make_manifest("t3_decode", cfg, seed=seed))
