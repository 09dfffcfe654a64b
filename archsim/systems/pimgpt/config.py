"""The config of system `pimgpt` (one schema: DEFAULTS, resolve, the CLI flags and help derive from it) and its
resolution (the mapping policy and baselines checked before a run); light to import (the simulation is
archsim.systems.pimgpt.system)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from archsim import schema
from archsim.config import flatten
from archsim.errors import ConfigError, UserError
from archsim.limits import MAX_CHANNELS
from archsim.schema import opt

if TYPE_CHECKING:
    from archsim.host.baselines import Baseline
    from archsim.systems.pimgpt.compiler import Policy

# model features simulated (archsim.summary.FEATURES): GQA (K/V per KV head) and the gated FFN, with RMSNorm and
# RoPE on the ASIC, and the mixture-of-experts FFN (every expert placed, the router GEMV, the token's
# experts_per_token experts run; issue 37)
MODEL_FEATURES: frozenset[str] = frozenset({"gqa", "gated_ffn", "moe"})


@dataclass
class PimGptConfig:
    """Config of system `pimgpt` (one source of truth: DEFAULTS, resolve, the CLI flags and help derive from it)."""

    model: str = opt("gpt2-xl", "model name (workloads/models) or a model YAML / HF config.json")
    tokens: int = opt(1024, "tokens to decode, token by token; the context grows 1..tokens", minimum=1)
    channels: int | None = opt(None, "PIM channels; null: the preset's", minimum=1, power_of_two=True,
                                maximum=MAX_CHANNELS)
    # 1e15 Hz stands for an ASIC that takes no time (README: "a run per cause"); below 1 MHz no ASIC is plausible
    asic_clock_hz: float | None = opt(None, "ASIC clock in Hz; null: the ASIC preset's (1 GHz)", minimum=1e6,
                                      maximum=1e15)
    preset: str = opt("GDDR6_AiM_16Gbps", "DRAM preset with a `pim` section (archsim presets list)")
    mapping: str = opt("pimgpt", "mapping policy file: mappings/*.yaml or a path")
    mapping_overrides: dict[str, Any] = opt({}, "overrides of the mapping policy's keys, e.g. "
                                            "{weights: {layout: row_aligned}} (keys mapping_overrides.<section>.<key>)",
                                            overrides_of=("mapping", "archsim.systems.pimgpt.compiler:load_policy"))
    asic: str = opt("pimgpt_asic", "ASIC preset (archsim/presets/asic)")
    asic_overrides: dict[str, Any] = opt({}, "overrides of the ASIC preset's values by their key paths, e.g. "
                                         "{lanes: 64} or {energy: {target_node_nm: 7}} (`archsim presets show "
                                         "asic/NAME` lists them)", optional=True,
                                         overrides_of=("asic", "archsim.host.asic:load_asic"))
    baselines: list[str] | Literal[False] = opt(["t4", "xeon-gold-6154"], "baseline devices to compare with "
                                                "([] or false: none)")
    engine: Literal["numba"] = opt("numba", "simulation engine (the numba channel engine, the only one)")
    memo: bool = opt(True, "reuse identical steps (exact: equal to a full simulation); false simulates every op")
    refresh: bool = opt(False, "simulate DRAM refresh (interrupts PIM streams; turns the op memo off)")
    timeline: bool = opt(False, "also record a per-unit timeline of the last decode step (one extra step, per-op path)")
    # optional: absent from the resolved config unless given, so configs that do not use it keep their hash
    dram: dict[str, Any] = opt(None, "overrides of the DRAM preset, e.g. {timing: {nRCDRD: 20}} (keys dram.<section>.<key>"
                               ", the preset's values)", optional=True, overrides_of=("preset", "archsim.dram.spec:preset_leaves"))
    schedule: str = opt("serial", "serial: the paper's engine (the next op starts when the ASIC and the PIM are idle);"
                        " overlap: the token's op graph on the event loop, ASIC and PIM overlapping where the data "
                        "allow (systems/pimgpt/overlap.py)", choices=lambda: tuple(SCHEDULES), optional=True)
    omit_ops: list[str] = opt([], "op kinds left out of every decode step (an experiment: what they cost; e.g. "
                              "[kv_append] or [attn_score, softmax, attn_context]); schedule: serial only",
                              choices=lambda: _op_kinds(), optional=True)
    context_start: int = opt(0, "context already in the KV cache when decoding starts (a prompt): the decode "
                             "steps run at contexts context_start + 1 .. context_start + tokens", minimum=0,
                             optional=True)
    batch: int = opt(1, "requests decoded together at the same context. The global buffer holds one input "
                     "vector, so every weight GEMV runs once per request: a batch's step is `batch` steps of "
                     "one request (each op closes its rows, so they are equal); one is simulated", minimum=1,
                     optional=True)


def _op_kinds() -> tuple[str, ...]:
    from archsim.workload.graph import OP_KINDS

    return OP_KINDS


DEFAULTS: dict[str, Any] = {"system": "pimgpt", **schema.defaults(PimGptConfig)}
# ---- the config resolved once ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class SerialSchedule:
    """schedule: serial, the paper's engine (key paths `memo`, `omit_ops`: they act on this schedule only)."""

    memo: bool                      # reuse identical ops and layers (exact)
    omit_ops: tuple[str, ...]       # op kinds left out of every decode step (an experiment)


@dataclass(frozen=True)
class OverlapSchedule:
    """schedule: overlap, the op graph on the event loop (systems/pimgpt/overlap.py); no knobs of its own (the
    event loop drives the channel engine directly, so there is no op memo to switch)."""


# each schedule's own knobs: its sub-config, built from the top-level keys of the same names (key paths unchanged)
SCHEDULES: dict[str, type] = {"serial": SerialSchedule, "overlap": OverlapSchedule}


def _resolve(config: dict[str, Any]) -> tuple[dict[str, Any], Policy, tuple[Baseline, ...]]:
    """The resolved config, with the mapping policy and baselines it loaded on the way (so `setup` loads
    neither again)."""
    from archsim.host.baselines import Baseline

    schema.check(PimGptConfig, config, "pimgpt")   # unknown keys, types, allowed values, ranges
    if config.get("omit_ops") and config.get("schedule", "serial") != "serial":
        raise UserError("omit_ops: works with schedule: serial only (the overlap task graph reads every op's "
                        "inputs)")
    out = {**DEFAULTS, **config}
    pol = policy(out)     # the mapping policy and its overrides are checked with the config, before a run
    # an unknown baseline too: before a run (and before a kernel compile)
    baselines = tuple(Baseline.load(name) for name in out["baselines"] or [])
    return out, pol, baselines


def resolve(config: dict[str, Any]) -> dict[str, Any]:
    return _resolve(config)[0]


def policy(cfg: dict[str, Any]) -> Policy:
    """The mapping policy with cfg's mapping_overrides. A bad value the user set in mapping_overrides is
    reported at that key (`mapping_overrides.weights.layout`), not at the policy file line it replaced."""
    from archsim.systems.pimgpt.compiler import load_policy

    overrides = flatten(dict(cfg["mapping_overrides"] or {}))
    try:
        return load_policy(cfg["mapping"], cfg["mapping_overrides"])
    except ConfigError as exc:
        key = exc.key_path.removeprefix("mapping.")
        if key not in overrides:
            raise
        raise ConfigError(f"mapping_overrides.{key}", exc.problem) from None


EXAMPLES = """\
  archsim run --model gpt2-small --tokens 16
  archsim run --system pimgpt --set dram.timing.nRCDRD=20 --tokens 4
  archsim run --model gpt2-small --tokens 4 --json run.json && archsim run --from-json run.json"""
