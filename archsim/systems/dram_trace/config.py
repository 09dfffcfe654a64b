"""The config of system `dram-trace` (one schema: resolve, the CLI flags and help derive from it) and the
controller it resolves; light to import (the simulation is archsim.systems.dram_trace.system)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from archsim import schema
from archsim.dram.controller import ControllerConfig
from archsim.dram.trace_kinds import SYNTHETIC_KINDS
from archsim.errors import ConfigError
from archsim.limits import MAX_CHANNELS, MAX_TRACE_REQUESTS
from archsim.schema import opt

DEFAULT_PRESET = "DDR4_3200AA_x8_8Gb"


@dataclass
class SyntheticTrace:
    """A synthetic trace given as a mapping (archsim.dram.trace.synthetic_trace); every key is optional in the
    config (absent unless given): kind and requests are required at run time, span_bytes defaults to the
    device's capacity and seed to the run's seed."""

    kind: str = opt(None, "access pattern (required)", choices=SYNTHETIC_KINDS, optional=True)
    requests: int = opt(None, "requests in the trace (required)", minimum=1, maximum=MAX_TRACE_REQUESTS,
                         optional=True)
    read_fraction: float = opt(0.8, "probability that a request is a read", minimum=0, maximum=1, optional=True)
    span_bytes: int | None = opt(None, "addresses in [start, start + span_bytes); null: the device's capacity",
                                 minimum=1, optional=True)
    seed: int | None = opt(None, "generator seed; null: the run's seed", minimum=0, optional=True)
    start: int = opt(0, "first address", minimum=0, optional=True)


@dataclass
class DramTraceConfig:
    """Config of system `dram-trace` (one source of truth: resolve, the CLI flags and help derive from it).
    Optional keys are absent from the resolved config unless given, so configs that do not use them keep
    their hash."""

    preset: str = opt(DEFAULT_PRESET, "DRAM preset (archsim presets list)", optional=True)
    channels: int | None = opt(None, "channels; null: the preset's", minimum=1, maximum=MAX_CHANNELS, optional=True)
    # no --mapping flag: on the command line --mapping is a mapping policy (pimgpt, ...), an address mapping
    # is --address-mapping (archsim trace)
    mapping: str | None = opt(None, "address mapping, MSB..LSB, e.g. RoBaRaCoCh; null: controller.mapping, "
                              "else the preset's", optional=True, flag=False)
    controller: ControllerConfig | None = opt(ControllerConfig, "memory-controller policy")
    dram: dict[str, Any] = opt(None, "overrides of the DRAM preset, e.g. {timing: {nRCD: 20}} (keys "
                               "dram.<section>.<key>, the preset's values)", optional=True,
                               overrides_of=("preset", "archsim.dram.spec:preset_leaves"))
    trace: str | SyntheticTrace = opt(None, "the trace (required): a trace file path, or a synthetic trace "
                                      "{kind, requests, ...}", optional=True)
    engine: Literal["numba"] = opt("numba", "simulation engine (the numba channel engine, the only one)")


def resolve(config: dict[str, Any]) -> dict[str, Any]:
    """Fill the controller's defaults, so sweeps can vary any controller.* key without naming it in `base`."""
    schema.check(DramTraceConfig, config, "dram-trace")   # unknown keys, types, allowed values, ranges
    out = dict(config)
    out["controller"] = {**ControllerConfig().to_dict(), **(config.get("controller") or {})}
    out.setdefault("engine", "numba")
    # the controller's values (and the top-level mapping) are checked with the config, before a run, and a bad
    # one is reported at the key the user set (archsim.keypaths.apply_overrides adds where it was set)
    ControllerConfig.from_dict(out["controller"], source=None)
    if out.get("mapping") is not None:
        with_mapping(out["controller"], out["mapping"])
    return out


def with_mapping(controller: dict[str, Any], mapping: str) -> ControllerConfig:
    """The controller with the address mapping given as the top-level key `mapping` (errors name that key)."""
    try:
        return ControllerConfig.from_dict({**controller, "mapping": mapping}, source=None)
    except ConfigError as exc:
        if exc.key_path != "controller.mapping":
            raise
        raise ConfigError("mapping", exc.problem) from None


# keys of a synthetic trace given as a mapping -> their defaults (None: required, or chosen at run time)
SYNTHETIC_KEYS = {k.path: k.default for k in schema.keys(SyntheticTrace)}


EXAMPLES = """\
  archsim run --system dram-trace --set trace.kind=random --set trace.requests=2000 --preset HBM2_2Gbps_PC
  archsim run --system dram-trace --set trace=my.trace --set controller.row_policy=closed"""


