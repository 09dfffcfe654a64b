"""System `t3`: one tensor-parallel sublayer (GEMM + reduce-scatter + all-gather) in the configurations
Sequential, T3, T3-MCA and Ideal overlap (archsim.interconnect.t3 has the model and its assumptions).

    archsim run --system t3 --set model=t-nlg --set sublayer=fc2_fwd --set tp=8 --set tokens=1024

Ideal overlap is derived from the Sequential run: max(GEMM, reduce-scatter) + all-gather.
"""
from __future__ import annotations

import math
from typing import Any

from archsim.errors import ConfigError
from archsim.results import Result, make_manifest
from archsim.systems import register

DEFAULTS: dict[str, Any] = {
    "model": "t-nlg",
    "sublayer": "fc2_fwd",
    "tp": 8,
    "tokens": 1024,
    "devices": "one",            # one: device 0 cycle-accurate, neighbours by ring symmetry; all: every device
    "preset": "t3_paper",
    "configs": ["sequential", "t3", "t3-mca"],
    "tracker_entries": 256,
    "mca_threshold": "dynamic",   # dynamic (per K step), auto (first stage) or an integer
    "nmc_update": "command",      # command: the standard's NMC update command; rd_wr: RD + ALU + WR
    "starvation_cap_cycles": 1000,
    "window_cycles": 64,
}


def resolve(config: dict[str, Any]) -> dict[str, Any]:
    from archsim.config import require_choice, require_int
    from archsim.interconnect.t3 import CONFIGS, SUBLAYERS

    allowed = {"system", *DEFAULTS}
    unknown = sorted(set(config) - allowed)
    if unknown:
        raise ConfigError(unknown[0], f"unknown key for system t3; allowed: {', '.join(sorted(DEFAULTS))}")
    out = {**DEFAULTS, **config}
    require_choice("t3", "sublayer", out["sublayer"], SUBLAYERS)
    require_choice("t3", "devices", out["devices"], ["one", "all"])
    tp = require_int("t3", "tp", out["tp"], minimum=2)
    if tp > 64:
        raise ConfigError("tp", f"must be 2..64 (the T3 evaluation's range), got {tp}")
    require_int("t3", "tokens", out["tokens"], minimum=1)
    for key in ("tracker_entries", "starvation_cap_cycles", "window_cycles"):
        require_int("t3", key, out[key], minimum=1)
    if out["mca_threshold"] not in ("auto", "dynamic"):
        if isinstance(out["mca_threshold"], str):
            raise ConfigError("mca_threshold", f"must be dynamic, auto or an integer >= 1, got {out['mca_threshold']!r}")
        require_int("t3", "mca_threshold", out["mca_threshold"], minimum=1)
    require_choice("t3", "nmc_update", out["nmc_update"], ["command", "rd_wr"])
    cfgs = out["configs"]
    if isinstance(cfgs, str):
        cfgs = [cfgs]
    if not isinstance(cfgs, list) or not cfgs:
        raise ConfigError("configs", f"must be a non-empty list of {', '.join(CONFIGS)}, got {out['configs']!r}")
    for c in cfgs:
        require_choice("t3", "configs", c, CONFIGS)
    out["configs"] = list(cfgs)
    if not isinstance(out["model"], str):
        raise ConfigError("model", f"must be a model name or file, got {out['model']!r}")
    return out


def run_sublayer(cfg: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Simulate the configured configurations; stats and one table row per configuration."""
    from archsim.interconnect import t3
    from archsim.workload.spec import load_model

    model = load_model(cfg["model"])
    params = t3.load_params(cfg["preset"], overrides={
        "tracker.entries": cfg["tracker_entries"], "mca.threshold": cfg["mca_threshold"],
        "mca.starvation_cap_cycles": cfg["starvation_cap_cycles"], "driver.window_cycles": cfg["window_cycles"],
        "nmc.update": cfg["nmc_update"]})
    shape = t3.sublayer_shape(model, cfg["sublayer"], cfg["tp"], cfg["tokens"])
    runs = {}
    for c in cfg["configs"]:
        runs[c] = t3.simulate_sublayer(params, shape, cfg["tp"], c, devices=cfg["devices"])
        runs[c].memories = []       # the request tables are large (GBs for 500B-class layers); counts are kept
    tck = params.spec.tCK_s
    rows = []
    stats: dict[str, Any] = {"model": model.name, "sublayer": shape.name, "tp": cfg["tp"], "tokens": shape.tokens,
                             "k": shape.k, "d_model": shape.h}
    for c, r in runs.items():
        energy = t3.dram_energy(r, params)
        rows.append({"config": c, "gemm_s": r.gemm_cycles * tck, "rs_end_s": r.rs_end_cycles * tck,
                     "all_gather_s": r.ag_s, "sublayer_s": r.sublayer_s,
                     "data_movement_bytes": t3.data_movement_bytes(r),
                     **{f"{k}_accesses": v for k, v in r.traffic.items()},
                     "nmc_updates": r.nmc_updates, "dram_energy_pj": sum(energy.values()),
                     "tracker_high_water": r.tracker["high_water"], "tracker_full_events": r.tracker["full_events"],
                     "mca_threshold": r.threshold, "comm_latency_max_cycles": r.comm_latency_max,
                     "mca_threshold_min": r.extra.get("threshold_min"), "mca_threshold_max": r.extra.get("threshold_max"),
                     "nmc_mode": r.nmc_mode,
                     "padded_d_model": r.extra.get("padded_from_h") and r.shape.h, "wall_s": r.wall_s})
    if "sequential" in runs:
        seq = runs["sequential"]
        gemm_s = seq.gemm_cycles * tck
        rs_s = (seq.rs_end_cycles - seq.gemm_cycles) * tck
        ideal = max(gemm_s, rs_s) + seq.ag_s
        rows.append({"config": "ideal", "gemm_s": gemm_s, "rs_end_s": max(gemm_s, rs_s), "all_gather_s": seq.ag_s,
                     "sublayer_s": ideal})
        base = seq.sublayer_s
        stats["sequential_s"] = base
        stats["sequential_gemm_s"] = gemm_s
        stats["sequential_rs_s"] = rs_s
        stats["comm_fraction"] = (rs_s + seq.ag_s) / base
        for row in rows:
            row["speedup"] = base / row["sublayer_s"]
            stats[f"speedup_{row['config'].replace('-', '_')}"] = row["speedup"]
        for row in rows:
            if "data_movement_bytes" in row:
                row["data_movement_vs_sequential"] = row["data_movement_bytes"] / t3.data_movement_bytes(seq)
    for row in rows:
        stats[f"{row['config'].replace('-', '_')}_s"] = row["sublayer_s"]
    for c, r in runs.items():
        if c != "sequential" and "sequential" in runs:
            stats[f"data_movement_change_{c.replace('-', '_')}"] = \
                t3.data_movement_bytes(r) / t3.data_movement_bytes(runs["sequential"]) - 1
    stats["sim_wall_s"] = sum(r.wall_s for r in runs.values())
    stats["finite"] = all(math.isfinite(v) for v in stats.values() if isinstance(v, float))
    return stats, rows


@register("t3", resolve=resolve)
def run_config(config: dict[str, Any], seed: int = 0) -> Result:
    cfg = resolve(config)
    stats, rows = run_sublayer(cfg)
    return Result(stats=stats, df=rows, manifest=make_manifest("t3", dict(cfg), seed=seed))
