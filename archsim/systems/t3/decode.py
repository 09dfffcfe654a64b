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
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from archsim import metrics, schema
from archsim.errors import ConfigError
from archsim.limits import MAX_BATCH, MAX_CHANNELS
from archsim.registry import register
from archsim.results import Result, make_manifest
from archsim.schema import opt
from archsim.stats_names import from_code

MODEL_FEATURES = frozenset({"gqa", "gated_ffn"})   # archsim.summary.FEATURES: K/V heads and a gated FFN size its ops; no MoE
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


def decode_step(cfg: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Simulate the fused sublayers and add the roofline parts: (stats, one row per part of a layer)."""
    from archsim import energy as energy_mod
    from archsim.systems.t3.params import load_t3_ring
    from archsim.systems.t3.shapes import SublayerShape, sublayer_shape
    from archsim.systems.t3.sim import dram_energy, simulate_sublayer
    from archsim.systems.t3.system import VARIANT_CONFIGS, variant_params
    from archsim.workload.spec import load_model

    model = load_model(cfg["model"])
    if model.n_heads % cfg["tp"]:
        raise ConfigError("tp", f"{model.name} has {model.n_heads} heads; tp must divide it, got {cfg['tp']}")
    base = _params(cfg)
    cls = VARIANT_CONFIGS[cfg["configuration"]]          # the configuration's knobs, at the preset's values
    params = variant_params(base, cls(**{f.name: getattr(base, f.name) for f in dataclasses.fields(cls)}))
    spec, gpu, tp, b, L = params.spec, params.gpu, cfg["tp"], cfg["batch"], cfg["context"]
    ring = load_t3_ring(params, tp)
    peak = gpu.peak_flops
    bw = spec.peak_bw_bytes_per_s
    eb = gpu.dtype_bytes
    E, F = model.d_model, model.d_ff * (2 if model.gated_ffn else 1)
    kv = model.n_kv_heads * model.d_head            # K (or V) width of all heads
    rows: list[dict[str, Any]] = []
    dram_pj: dict[str, float] = {}
    tck = spec.tCK_s

    def roof(part: str, flops: float, nbytes: float, seconds: float | None = None, kind: str = "roofline") -> None:
        sec = _roofline(flops, nbytes, peak, bw) if seconds is None else seconds
        acc = max(1, round(nbytes / spec.access_bytes))
        pj = energy_mod.dram_energy_pj(spec, {"RD": acc, "ACT": math.ceil(nbytes / spec.row_bytes)},
                                       round(sec / tck), spec.channels)
        for k, v in pj.items():
            dram_pj[k] = dram_pj.get(k, 0.0) + v
        rows.append({"part": part, "kind": kind, "seconds": sec, "flops": flops, "bytes": nbytes})

    # the column-parallel GEMMs (no collective after them) on the same GPU and memory model: their time is the
    # GEMM of a Sequential run of their shape (its reduce-scatter, simulated after, is not counted); their
    # DRAM energy from their bytes as the roofline parts'
    for part, n_out in (("qkv", (E + 2 * kv) // tp), ("fc1", F // tp)):
        shape = SublayerShape(part, b, E, n_out)
        run = simulate_sublayer(params, shape, tp, "sequential", devices="one", ring=ring)
        roof(part, 2 * b * E * n_out, (E * n_out + b * E + b * n_out) * eb, seconds=run.gemm_cycles * tck,
             kind="simulated GEMM (no collective)")
    roof("attention", 2 * 2 * b * L * model.n_heads * model.d_head / tp, 2 * b * L * kv / tp * eb)
    for sub in FUSED:
        shape = sublayer_shape(model, sub, tp, b)
        run = simulate_sublayer(params, shape, tp, cfg["configuration"], devices="one", ring=ring)
        for k, v in dram_energy(run, params).items():
            dram_pj[k] = dram_pj.get(k, 0.0) + v
        dram_pj["background"] = dram_pj.get("background", 0.0) + energy_mod.dram_energy_pj(
            spec, {}, run.rs_end_cycles, spec.channels)["background"]
        rows.append({"part": sub, "kind": f"simulated ({cfg['configuration']})", "seconds": run.sublayer_s,
                     "flops": 2 * b * shape.k * shape.h, "bytes": float(shape.k * shape.h * eb),
                     "gemm_s": run.gemm_cycles * tck, "rs_end_s": run.rs_end_cycles * tck, "all_gather_s": run.ag_s})
    layer_s = sum(r["seconds"] for r in rows)
    step = layer_s * model.n_layers
    macs = sum(r["flops"] for r in rows) / 2 * tp              # every device's, one layer
    nmc = dram_pj.pop("nmc", 0.0)
    static = dram_pj.pop("background", 0.0)
    per_tok = model.n_layers * tp * 1e-12 / b                  # one device's layer -> every device, every layer
    parts = {"dram": sum(dram_pj.values()) * per_tok, "pim": nmc * per_tok, "static": static * per_tok,
             "compute": macs * metrics.DEFAULT_MAC_PJ * 1e-12 * model.n_layers / b}
    sc = metrics.scope(layers_simulated=1, layers=model.n_layers, devices=tp,
                       not_modelled=["element-wise ops (norms, residuals, activation)", "embedding and LM head",
                                     "prefill"],
                       simulated=[*FUSED, "qkv", "fc1"], roofline=["attention"],
                       compute_energy=f"{metrics.DEFAULT_MAC_PJ} pJ per GPU MAC (archsim.metrics.DEFAULT_MAC_PJ)")
    stats: dict[str, Any] = {"model": model.name, "tp": tp, "batch": b, "context": L,
                             "configuration": cfg["configuration"], "memory": spec.name, "channels": spec.channels, "layer_s": layer_s,
                             "fused_share": sum(r["seconds"] for r in rows if r["part"] in FUSED) / layer_s}
    stats.update(metrics.common(step, b, parts, sc))
    return stats, rows


@register("t3_decode", resolve=resolve, schema=T3DecodeConfig,
          stats=from_code((decode_step, "stats"), metrics.NAMES))
def run(config: dict[str, Any], seed: int = 0) -> Result:
    cfg = resolve(config)
    stats, rows = decode_step(cfg)
    return Result(stats=stats, df=rows, manifest=make_manifest("t3_decode", cfg, seed=seed))
