"""The T3 device preset (archsim/presets/t3/*.yaml): the GPU producer, its memory and the T3 hardware
(tracker, NMC, MCA, DMA driver), read once into typed, frozen parameters; the NMC update's energy.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from archsim import paths, schema
from archsim.dram import mapping as mapping_mod
from archsim.dram.effects import Effect
from archsim.dram.spec import DramSpec, load_spec
from archsim.errors import ConfigError, UserError
from archsim.interconnect.ring import RingConfig
from archsim.schema import opt
from archsim.systems.t3.shapes import COL_UNIT

PRESET_DIR = paths.PACKAGE_DIR / "presets" / "t3"
# mca.gate -> the channel engine's arbitration (docs/channel-engine.md 3.4)
MCA_GATES = {"all": "threshold", "row": "threshold_row", "yield": "threshold_yield"}


@dataclass(frozen=True)
class GpuConfig:
    """The GPU that produces the GEMM's outputs."""

    cus: int = opt(80, "compute units", minimum=1)
    clock_hz: float = opt(1.4e9, "clock, Hz", minimum=1)
    flops_per_cu_cycle: int = opt(1024, "FLOPs of one CU per cycle", minimum=1)
    l2_bytes: int = opt(16 << 20, "L2 capacity, bytes", minimum=1)
    l2_line_bytes: int = opt(128, "L2 line, bytes", minimum=1)
    l2_ways: int = opt(24, "L2 associativity", minimum=1)
    tile_m: int = opt(128, "output tile rows of a workgroup", minimum=1)
    tile_n: int = opt(128, "output tile columns of a workgroup (a multiple of 16: one 32 B access)", minimum=1)
    k_step: int = opt(256, "K elements a workgroup loads per step of its K loop", minimum=1)
    dtype_bytes: int = opt(2, "bytes per element", minimum=1)

    def __post_init__(self) -> None:
        schema.validate(self)
        if self.tile_n % COL_UNIT:
            raise ConfigError("tile_n", f"must be a multiple of {COL_UNIT} columns (one 32 B access), got {self.tile_n}")

    @property
    def peak_flops(self) -> float:
        return self.cus * self.clock_hz * self.flops_per_cu_cycle


@dataclass(frozen=True)
class T3Params:
    """A T3 device preset (archsim/presets/t3/*.yaml), resolved."""

    gpu: GpuConfig
    spec: DramSpec
    controller: dict[str, Any]
    ring_name: str
    ring_directions: int = 1         # 1: the reduce-scatter uses one direction of each link; 2: both
    alu_latency_cycles: int = 4
    nmc_update: str = "command"      # command: the standard's update command for an rmw; rd_wr: RD + WR
    tracker_entries: int = 256
    mca_threshold: int | str = "dynamic"
    starvation_cap_cycles: int = 1000
    window_cycles: int = 0          # 0: the exact driver (completion groups); W > 0: the windowed loop
    update_energy: str = "WR + RD"
    name: str = "t3"
    mapping: str | None = None       # address mapping (with hashing); None: the memory preset's `mapping:`
    # what a held-back comm source may do: all - nothing, and it keeps the rows it opened; row - only its ACT/PRE
    # wait; yield - nothing, and the compute source may precharge its rows (no row ownership)
    mca_gate: str = "yield"


@dataclass(frozen=True)
class T3Memory:
    preset: str = opt("HBM2_2Gbps_PC", "DRAM preset of the device memory")
    channels: int | None = opt(None, "channels; null: the preset's", minimum=1)
    controller: dict[str, Any] = opt({}, "controller keys of the channel engine (read_queue, row_policy, ...)")
    mapping: str | None = opt(None, "address mapping with hashing (docs/traces.md); null: the preset's")


@dataclass(frozen=True)
class T3Nmc:
    update: str = opt("command", "command: the standard's update command for an NMC update; rd_wr: RD + WR",
                      choices=("command", "rd_wr"))
    alu_latency_cycles: int | None = opt(None, "adder latency, cycles (only for a standard without nALU; "
                                         "default 4)", minimum=0)
    update_energy: str = opt("WR + RD", "energy of one update as an expression over RD, WR, ACT (a standard "
                             "without an update command)")


@dataclass(frozen=True)
class T3Tracker:
    entries: int = opt(256, "tracker entries", minimum=1)


@dataclass(frozen=True)
class T3Mca:
    threshold: int | str = opt("dynamic", "memory-controller arbitration threshold: dynamic, auto or an integer",
                               choices=("dynamic", "auto"), minimum=1)
    starvation_cap_cycles: int = opt(1000, "cycles a held-back source waits at most", minimum=1)
    gate: str = opt("yield", "what a held-back source may do (docs/channel-engine.md 3.4)", choices=tuple(MCA_GATES))


@dataclass(frozen=True)
class T3Driver:
    window_cycles: int = opt(0, "0: the exact DMA driver (completion groups); W > 0: the windowed loop", minimum=0)


@dataclass(frozen=True)
class T3Preset:
    """A T3 device preset file (archsim/presets/t3/<name>.yaml)."""

    name: str = opt("t3", "the preset's name")
    source: str = opt("", "where its numbers come from")
    gpu: GpuConfig = opt(GpuConfig, "the GPU")
    memory: T3Memory = opt(T3Memory, "the device memory")
    ring: str = opt("t3_ring", "ring preset (archsim/presets/interconnect)")
    ring_directions: int = opt(1, "1: the reduce-scatter uses one direction of each link; 2: both", choices=(1, 2))
    nmc: T3Nmc = opt(T3Nmc, "near-memory updates")
    tracker: T3Tracker = opt(T3Tracker, "the tracker")
    mca: T3Mca = opt(T3Mca, "memory-controller arbitration")
    driver: T3Driver = opt(T3Driver, "the DMA driver")


def _energy_expr(text: str, spec: DramSpec) -> str:
    from archsim import expr
    from archsim.energy import dram_action_energy_pj

    base = {k: v for k, v in dram_action_energy_pj(spec).items() if k in ("ACT", "RD", "WR")}
    try:
        expr.evaluate(text, base)
    except Exception as exc:  # noqa: BLE001 - the expression module raises several kinds
        raise ConfigError("nmc.update_energy", f"{text!r}: {exc}; allowed names: ACT, RD, WR") from None
    return text


def update_action(spec: DramSpec) -> str | None:
    """The energy action of the standard's near-memory update command (e.g. hbm2_nmc's NMC), or None."""
    return next((c.action for c in spec.commands if c.effect == Effect.UPDATE), None)


def update_energy_pj(spec: DramSpec, params: T3Params) -> float:
    """Energy of one NMC update: the preset's energy table prices the standard's update action when it has
    one (also for an update run as RD + WR: the same physical operation); else `nmc.update_energy`."""
    from archsim import expr
    from archsim.energy import dram_action_energy_pj

    per = dram_action_energy_pj(spec)
    act = update_action(spec)
    if act is not None and act in per:
        return float(per[act])
    return float(expr.evaluate(params.update_energy, {k: per[k] for k in ("ACT", "RD", "WR")}))


def params_from_preset(p: T3Preset) -> T3Params:
    """The preset resolved: its memory loaded, its mapping checked against it (a ConfigError at the preset's key
    path; `load_params` places it in the file)."""
    m = p.memory
    spec = load_spec(m.preset, overrides={"org.channels": m.channels} if m.channels is not None else {})
    addr_map = m.mapping
    if addr_map is not None:
        addr_map = " ".join(addr_map.split())
        try:
            mapping_mod.parse_mapping(addr_map)
            mapping_mod.hash_masks(spec, addr_map)
        except UserError as exc:
            raise ConfigError("memory.mapping", str(exc)) from None
    # the adder latency is the standard's nALU where it has one (one source of truth); the key is for
    # standards without an update command
    if "nALU" in spec.timing:
        if p.nmc.alu_latency_cycles is not None:
            raise ConfigError("nmc.alu_latency_cycles", f"{spec.name} gives the adder latency (timing nALU = "
                              f"{spec.timing['nALU']}); set it there, not here")
        alu = int(spec.timing["nALU"])
    else:
        alu = 4 if p.nmc.alu_latency_cycles is None else p.nmc.alu_latency_cycles
    return T3Params(gpu=p.gpu, spec=spec, controller=dict(m.controller), ring_name=p.ring,
                    ring_directions=p.ring_directions, alu_latency_cycles=alu, nmc_update=p.nmc.update,
                    tracker_entries=p.tracker.entries, mca_threshold=p.mca.threshold,
                    starvation_cap_cycles=p.mca.starvation_cap_cycles, window_cycles=p.driver.window_cycles,
                    update_energy=_energy_expr(p.nmc.update_energy, spec), name=p.name, mapping=addr_map,
                    mca_gate=p.mca.gate)


def load_t3_ring(params: T3Params, tp: int) -> RingConfig:
    """The preset's ring for `tp` devices, used in the preset's number of directions."""
    import dataclasses

    from archsim.interconnect.ring import load_ring

    return dataclasses.replace(load_ring(params.ring_name, tp), directions=params.ring_directions)


def load_preset_values(name_or_path: str | Path = "t3_paper") -> T3Preset:
    """A T3 preset's values as its file gives them (the key paths `preset_overrides` of system t3 may set)."""
    return schema.load_preset(T3Preset, "T3", PRESET_DIR, name_or_path)[0]


def load_params(name_or_path: str | Path = "t3_paper", overrides: dict[str, Any] | None = None) -> T3Params:
    """A T3 preset by name or path; `overrides` = {dotted key: value} applied to the file's values."""
    preset, path = schema.load_preset(T3Preset, "T3", PRESET_DIR, name_or_path, overrides)
    try:
        return params_from_preset(preset)
    except ConfigError as exc:
        if exc.source is not None:
            raise
        if exc.key_path in (overrides or {}):
            raise ConfigError(exc.key_path, exc.problem, source="--set") from None
        from archsim.config import load_yaml

        raise load_yaml(path).error(exc.key_path, exc.problem) from None
