"""System `t3`: one tensor-parallel sublayer (GEMM + reduce-scatter + all-gather) in the configurations
Sequential, T3, T3-MCA and Ideal overlap (archsim.systems.t3.sim has the model and its assumptions; params, shapes and tracker its parts).

    archsim run --system t3 --set model=t-nlg --set sublayer=fc2_fwd --set tp=8 --set tokens=1024

Ideal overlap is derived from the Sequential run: max(GEMM, reduce-scatter) + all-gather.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from archsim import schema
from archsim.errors import ConfigError
from archsim.limits import MAX_BATCH
from archsim.results import Result, make_manifest
from archsim.schema import opt
from archsim.systems.t3.variants import VARIANT_CONFIGS, Variant

if TYPE_CHECKING:       # the model module is imported when a run needs it (the CLI's help does not)
    from archsim.interconnect.ring import RingConfig
    from archsim.systems.t3.params import T3Params
    from archsim.systems.t3.shapes import SublayerShape
    from archsim.workload.spec import ModelSpec

MODEL_FEATURES: frozenset[str] = frozenset()  # model features simulated (archsim.summary.FEATURES): dense MHA sublayers only


def _sublayers() -> list[str]:
    """The sublayers (imported when asked: the CLI's help does not import the model)."""
    from archsim.systems.t3.shapes import SUBLAYERS

    return SUBLAYERS


@dataclass
class T3Config:
    """Config of system `t3` (one source of truth: DEFAULTS, resolve, the CLI flags and help derive from it)."""

    model: str = opt("t-nlg", "model name (workloads/models) or a model file")
    sublayer: str = opt("fc2_fwd", "the tensor-parallel sublayer simulated", choices=_sublayers)
    tp: int = opt(8, "tensor-parallel devices (the T3 evaluation's range)", minimum=2, maximum=64)
    tokens: int = opt(1024, "tokens in the batch (GEMM M)", minimum=1, maximum=MAX_BATCH)
    # one: device 0 cycle-accurate, neighbours by ring symmetry; all: every device
    devices: str = opt("one", "one: device 0 simulated, its neighbours by ring symmetry; all: every device",
                       choices=("one", "all"))
    preset: str = opt("t3_paper", "T3 hardware preset (archsim/presets/t3; `archsim presets show t3/NAME`)")
    preset_overrides: dict[str, Any] = opt({}, "overrides of the T3 preset's values by key path, e.g. "
                                           "{gpu: {l2_bytes: 4194304}} (`archsim presets show t3/NAME` lists them)",
                                           optional=True,
                                           overrides_of=("preset", "archsim.systems.t3.params:load_preset_values"))
    configs: list[str] | str = opt(["sequential", "t3", "t3-mca"], "configurations simulated (ideal is derived "
                                   "from sequential)", choices=lambda: tuple(VARIANT_CONFIGS))
    tracker_entries: int = opt(256, "tracker entries (tile-update counters) at the memory controller", minimum=1)
    mca_threshold: int | str = opt("dynamic", "MCA: occupancy threshold, the Little's-law queue entries of the GEMM's "
                                   "memory intensity; dynamic: first from the first stage, then re-estimated per K "
                                   "step from the observed intensity; auto: the first-stage estimate only; or an "
                                   "integer", choices=("dynamic", "auto"), minimum=1)
    nmc_update: str = opt("command", "near-memory update: command (the standard's NMC update command, UPD/UPDA) "
                          "or rd_wr (RD + ALU + WR)", choices=("command", "rd_wr"))
    starvation_cap_cycles: int = opt(1000, "MCA: most cycles a source may starve", minimum=1)
    mca_gate: str = opt("yield", "MCA: a held-back communication source issues nothing and its open rows yield to the "
                        "compute source (yield), or it keeps them (all), or it still issues column commands to rows it "
                        "opened (row)", choices=("yield", "all", "row"))
    window_cycles: int = opt(0, "agents' driver: 0 exact (the memory stops at each completion waited on); W > 0 the "
                             "windowed loop, completions acted on at W-cycle boundaries (approximate)", minimum=0)
    ring_directions: int = opt(1, "reduce-scatter and all-gather on one direction of each ring link (1, NCCL's ring) or "
                               "on both, half the columns each way (2)", minimum=1, maximum=2)
    memory_mapping: str | None = opt(None, "device address mapping with optional hash clauses (docs/traces.md), "
                                      "e.g. RoRaBgBaChCo for the unhashed layout; null: the preset's (hashed)")


DEFAULTS: dict[str, Any] = schema.defaults(T3Config)


def _resolve(config: dict[str, Any]) -> tuple[dict[str, Any], T3Params | None]:
    """The resolved config, and the preset it loaded on the way when a memory mapping or preset overrides were
    given (else None): a bad value is rejected with the config, not when the simulation starts."""
    schema.check(T3Config, config, "t3")   # unknown keys, types, allowed values, ranges
    out = {**DEFAULTS, **config}
    cfgs = out["configs"]
    if isinstance(cfgs, str):
        cfgs = [cfgs]
    if not cfgs:
        raise ConfigError("configs", f"must be a non-empty list of {', '.join(VARIANT_CONFIGS)}, got {out['configs']!r}")
    out["configs"] = list(cfgs)
    # a bad mapping is rejected with the config, not when the simulation starts
    return out, (load_params(out) if out["memory_mapping"] is not None or out.get("preset_overrides") else None)


def resolve(config: dict[str, Any]) -> dict[str, Any]:
    return _resolve(config)[0]


def variant_params(params: T3Params, variant: Variant) -> T3Params:
    """The preset parameters a configuration runs with: the shared ones, plus its own knobs."""
    return dataclasses.replace(params, **dataclasses.asdict(variant))


@dataclass(frozen=True)
class Setup:
    """A run's config resolved once into typed values (model, preset and ring loaded once), passed down to
    everything below `run_config`; `resolved` is the same config as the dict the manifest records."""

    model: ModelSpec
    shape: SublayerShape            # the per-device GEMM of the sublayer
    tp: int
    devices: str                    # one | all
    params: T3Params                # the preset with the shared keys set (PRESET_KEYS)
    ring: RingConfig                # the preset's ring, for `tp` devices
    variants: tuple[Variant, ...]   # the configurations simulated, in the order given
    resolved: dict[str, Any] = field(compare=False, repr=False)


def setup(config: dict[str, Any]) -> Setup:
    """`config` resolved and typed: what `run_config` passes down."""
    from archsim.systems.t3.params import load_t3_ring
    from archsim.systems.t3.shapes import sublayer_shape
    from archsim.workload.spec import load_model

    cfg, params = _resolve(config)
    if params is None:
        params = load_params(cfg)
    model = load_model(cfg["model"])
    variants = tuple(schema.variant(VARIANT_CONFIGS, c, cfg, "configs") for c in dict.fromkeys(cfg["configs"]))
    return Setup(model=model, shape=sublayer_shape(model, cfg["sublayer"], cfg["tp"], cfg["tokens"]),
                 tp=cfg["tp"], devices=cfg["devices"], params=params, ring=load_t3_ring(params, cfg["tp"]),
                 variants=variants, resolved=cfg)


# preset key path -> the config key that overrides it for every configuration (the config's defaults are the
# preset's); the keys of one configuration only are set per run from its sub-config (variant_params).
# nmc_update is the memory's (every configuration's row records the update mode it had), so it is shared.
PRESET_KEYS = {"driver.window_cycles": "window_cycles", "nmc.update": "nmc_update", "memory.mapping": "memory_mapping",
               "ring_directions": "ring_directions"}


def load_params(cfg: dict[str, Any]) -> T3Params:
    """The T3 preset with the config's preset_overrides and shared keys applied (a shared key wins). A bad value
    the user set is reported at the key they set (`memory_mapping: ...`, `preset_overrides.gpu.l2_bytes`), not
    at the preset file's line that it replaced."""
    from archsim.config import flatten
    from archsim.systems.t3 import params as t3params

    given = flatten(dict(cfg.get("preset_overrides") or {}))
    shared = {path: cfg[key] for path, key in PRESET_KEYS.items() if cfg.get(key) is not None}
    try:
        return t3params.load_params(cfg["preset"], overrides={**given, **shared})
    except ConfigError as exc:
        if exc.key_path in shared:
            raise ConfigError(PRESET_KEYS[exc.key_path], exc.problem) from None
        if exc.key_path in given:
            raise ConfigError(f"preset_overrides.{exc.key_path}", exc.problem) from None
        raise


def run_sublayer(su: Setup) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Simulate the configured configurations; stats and one table row per configuration."""
    from archsim.systems.t3 import sim as t3

    shape = su.shape
    runs, run_params = {}, {}
    for v in su.variants:
        run_params[v.name] = params = variant_params(su.params, v)
        runs[v.name] = t3.simulate_sublayer(params, shape, su.tp, v.name, devices=su.devices, ring=su.ring)
        runs[v.name].memories = []  # the request tables are large (GBs for 500B-class layers); counts are kept
    tck = su.params.spec.tCK_s
    rows = [_config_row(c, r, run_params[c], tck) for c, r in runs.items()]
    stats: dict[str, Any] = {"model": su.model.name, "sublayer": shape.name, "tp": su.tp, "tokens": shape.tokens,
                             "k": shape.k, "d_model": shape.h}
    if "sequential" in runs:
        _against_sequential(runs["sequential"], rows, stats, tck)
    for row in rows:
        stats[f"{row['config'].replace('-', '_')}_s"] = row["sublayer_s"]
    _per_config(runs, rows, stats, tck)
    stats["ring_directions"] = su.ring.directions
    stats["sim_wall_s"] = sum(r.wall_s for r in runs.values())
    stats["finite"] = all(math.isfinite(v) for v in stats.values() if isinstance(v, float))
    return stats, rows


def _config_row(c: str, r: Any, params: Any, tck: float) -> dict[str, Any]:
    """One configuration's table row."""
    from archsim.systems.t3 import sim as t3

    energy = t3.dram_energy(r, params)
    return {"config": c, "gemm_s": r.gemm_cycles * tck, "rs_end_s": r.rs_end_cycles * tck,
            "all_gather_s": r.ag_s, "sublayer_s": r.sublayer_s,
            "data_movement_bytes": t3.data_movement_bytes(r),
            **{f"{k}_accesses": v for k, v in r.traffic.items()},
            "nmc_updates": r.nmc_updates, "dram_energy_pj": sum(energy.values()),
            "tracker_high_water": r.tracker["high_water"], "tracker_full_events": r.tracker["full_events"],
            "mca_threshold": r.threshold, "comm_latency_max_cycles": r.comm_latency_max,
            "mca_threshold_min": r.extra.get("threshold_min"), "mca_threshold_max": r.extra.get("threshold_max"),
            "nmc_mode": r.nmc_mode,
            "padded_d_model": r.extra.get("padded_from_h") and r.shape.h, "wall_s": r.wall_s,
            # reduce-scatter: sequential from the GEMM's end, fused from the first byte sent
            "rs_s": (r.rs_end_cycles - (r.gemm_cycles if c == "sequential" else
                                        (r.extra["first_send_cycles"] or 0))) * tck,
            "rs_link_bound_s": t3.rs_link_bound_s(r),
            "compute_stall_cycles": r.extra["compute_stall_cycles"],
            "chunk_channels_min": r.extra["chunk_channels_min"],
            "chunk_channels_max": r.extra["chunk_channels_max"]}


def _against_sequential(seq: Any, rows: list[dict[str, Any]], stats: dict[str, Any], tck: float) -> None:
    """The ideal row (GEMM and reduce-scatter fully overlapped) and every row's speed-up and data movement
    against the Sequential run; the Sequential run's own stats."""
    from archsim.systems.t3 import sim as t3

    gemm_s = seq.gemm_cycles * tck
    rs_s = (seq.rs_end_cycles - seq.gemm_cycles) * tck
    ideal = max(gemm_s, rs_s) + seq.ag_s
    rows.append({"config": "ideal", "gemm_s": gemm_s, "rs_end_s": max(gemm_s, rs_s), "all_gather_s": seq.ag_s,
                 "sublayer_s": ideal})
    base = seq.sublayer_s
    stats["sequential_s"] = base
    stats["sequential_gemm_s"] = gemm_s
    stats["sequential_rs_s"] = rs_s
    stats["rs_link_bound_s"] = t3.rs_link_bound_s(seq)
    stats["sequential_rs_vs_link_bound"] = rs_s / stats["rs_link_bound_s"]
    stats["chunk_channels_min"] = seq.extra["chunk_channels_min"]
    stats["chunk_channels_max"] = seq.extra["chunk_channels_max"]
    stats["channels"] = seq.spec.channels
    stats["memory_mapping"] = seq.extra["mapping"]
    stats["comm_fraction"] = (rs_s + seq.ag_s) / base
    for row in rows:
        row["speedup"] = base / row["sublayer_s"]
        stats[f"speedup_{row['config'].replace('-', '_')}"] = row["speedup"]
    for row in rows:
        if "data_movement_bytes" in row:
            row["data_movement_vs_sequential"] = row["data_movement_bytes"] / t3.data_movement_bytes(seq)


def _per_config(runs: dict[str, Any], rows: list[dict[str, Any]], stats: dict[str, Any], tck: float) -> None:
    """Each configuration's stats: data movement against Sequential, reduce-scatter, stalls, GEMM reads and
    MCA's threshold per K step."""
    from archsim.systems.t3 import sim as t3

    seq = runs.get("sequential")
    for c, r in runs.items():
        if c != "sequential" and seq is not None:
            stats[f"data_movement_change_{c.replace('-', '_')}"] = \
                t3.data_movement_bytes(r) / t3.data_movement_bytes(seq) - 1
    for c, r in runs.items():
        key = c.replace("-", "_")
        stats[f"{key}_rs_s"] = next(row["rs_s"] for row in rows if row["config"] == c)
        stats[f"{key}_compute_stall_cycles"] = r.extra["compute_stall_cycles"]
        stats[f"{key}_gemm_s"] = r.gemm_cycles * tck
        stats[f"{key}_rs_end_s"] = r.rs_end_cycles * tck
        # the GEMM's operand reads from DRAM (L2 misses; Sequential's output stores take L2 lines, T3's bypass)
        stats[f"{key}_gemm_read_bytes"] = r.extra["gemm_read_bytes"]
        stats[f"{key}_l2_read_miss_rate"] = r.extra["l2_read_miss_rate"]
        if r.extra["threshold_trajectory"]:
            # MCA: the threshold per K step (one value with `auto` or a fixed threshold)
            stats[f"{key}_threshold_trajectory"] = r.extra["threshold_trajectory"]
    if seq is not None:
        base_stall = seq.extra["compute_stall_cycles"]
        for c, r in runs.items():
            if c != "sequential":
                # stalls beyond the sequential GEMM's own (which runs with no communication traffic beside it)
                stats[f"{c.replace('-', '_')}_comm_stall_cycles"] = r.extra["compute_stall_cycles"] - base_stall
    if seq is not None and "t3" in runs:
        stats["gemm_read_ratio_sequential_vs_t3"] = seq.extra["gemm_read_bytes"] / runs["t3"].extra["gemm_read_bytes"]


EXAMPLES = """\
  archsim run --system t3 --set model=t-nlg --set sublayer=fc2_fwd --set tp=8 --set tokens=1024"""


def run_config(config: dict[str, Any], seed: int = 0) -> Result:
    su = setup(config)
    stats, rows = run_sublayer(su)
    return Result(stats=stats, df=rows, manifest=make_manifest("t3", dict(su.resolved), seed=seed))
