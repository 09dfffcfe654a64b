"""The T3 device preset (archsim/presets/t3/*.yaml): the GPU producer, its memory and the T3 hardware
(tracker, NMC, MCA, DMA driver), read once into typed, frozen parameters; the NMC update's energy.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from archsim import paths
from archsim.config import Doc, load_yaml, require_int, require_number
from archsim.dram import mapping as mapping_mod
from archsim.dram.effects import Effect
from archsim.dram.spec import DramSpec, load_spec
from archsim.errors import UserError
from archsim.interconnect.ring import RingConfig
from archsim.systems.t3.shapes import COL_UNIT

PRESET_DIR = paths.PACKAGE_DIR / "presets" / "t3"
# mca.gate -> the channel engine's arbitration (docs/channel-engine.md 3.4)
MCA_GATES = {"all": "threshold", "row": "threshold_row", "yield": "threshold_yield"}


@dataclass(frozen=True)
class GpuConfig:
    cus: int = 80
    clock_hz: float = 1.4e9
    flops_per_cu_cycle: int = 1024
    l2_bytes: int = 16 << 20
    l2_line_bytes: int = 128
    l2_ways: int = 24
    tile_m: int = 128
    tile_n: int = 128
    k_step: int = 256             # K elements a workgroup loads per step of its K loop
    dtype_bytes: int = 2

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


def _section(doc: Doc, data: dict, key: str, allowed: tuple[str, ...]) -> dict:
    sec = data.get(key, {})
    if not isinstance(sec, dict):
        raise doc.error(key, "must be a mapping")
    unknown = sorted(set(sec) - set(allowed))
    if unknown:
        raise doc.error(f"{key}.{unknown[0]}", f"unknown key; allowed keys: {', '.join(allowed)}")
    return sec


def _energy_expr(doc: Doc, text: Any, spec: DramSpec) -> str:
    from archsim import expr
    from archsim.energy import dram_action_energy_pj

    if not isinstance(text, str):
        raise doc.error("nmc.update_energy", f"must be an expression over RD, WR, ACT (a string), got {text!r}")
    base = {k: v for k, v in dram_action_energy_pj(spec).items() if k in ("ACT", "RD", "WR")}
    try:
        expr.evaluate(text, base)
    except Exception as exc:  # noqa: BLE001 - the expression module raises several kinds
        raise doc.error("nmc.update_energy", f"{text!r}: {exc}; allowed names: ACT, RD, WR") from None
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


def params_from_mapping(doc: Doc) -> T3Params:
    data = doc.data
    if not isinstance(data, dict):
        raise doc.error("<top>", "must be a mapping")
    top = ("name", "source", "gpu", "memory", "ring", "ring_directions", "nmc", "tracker", "mca", "driver")
    unknown = sorted(set(data) - set(top))
    if unknown:
        raise doc.error(unknown[0], f"unknown key; allowed keys: {', '.join(top)}")
    g = _section(doc, data, "gpu", tuple(GpuConfig.__dataclass_fields__))
    gpu = GpuConfig(**{k: (require_number(doc, f"gpu.{k}", v, minimum=1.0) if k == "clock_hz"
                          else require_int(doc, f"gpu.{k}", v, minimum=1)) for k, v in g.items()})
    if gpu.tile_n % COL_UNIT:
        raise doc.error("gpu.tile_n", f"must be a multiple of {COL_UNIT} columns (one 32 B access), got {gpu.tile_n}")
    m = _section(doc, data, "memory", ("preset", "channels", "controller", "mapping"))
    overrides = {}
    if "channels" in m:
        overrides["org.channels"] = require_int(doc, "memory.channels", m["channels"], minimum=1)
    spec = load_spec(m.get("preset", "HBM2_2Gbps_PC"), overrides=overrides)
    ctrl = m.get("controller", {}) or {}
    if not isinstance(ctrl, dict):
        raise doc.error("memory.controller", "must be a mapping")
    addr_map = m.get("mapping")
    if addr_map is not None:
        if not isinstance(addr_map, str):
            raise doc.error("memory.mapping", f"must be an address-mapping string (docs/traces.md), got {addr_map!r}")
        addr_map = " ".join(addr_map.split())
        try:
            mapping_mod.parse_mapping(addr_map)
            mapping_mod.hash_masks(spec, addr_map)
        except UserError as exc:
            raise doc.error("memory.mapping", str(exc)) from None
    nmc = _section(doc, data, "nmc", ("alu_latency_cycles", "update_energy", "update"))
    tr = _section(doc, data, "tracker", ("entries",))
    mca = _section(doc, data, "mca", ("threshold", "starvation_cap_cycles", "gate"))
    drv = _section(doc, data, "driver", ("window_cycles",))
    thr = mca.get("threshold", "dynamic")
    if thr not in ("auto", "dynamic"):
        if isinstance(thr, str):
            raise doc.error("mca.threshold", f"must be dynamic, auto or an integer >= 1, got {thr!r}")
        thr = require_int(doc, "mca.threshold", thr, minimum=1)
    from archsim.config import require_choice
    update = require_choice(doc, "nmc.update", nmc.get("update", "command"), ["command", "rd_wr"])
    gate = require_choice(doc, "mca.gate", mca.get("gate", "yield"), list(MCA_GATES))
    # the adder latency is the standard's nALU where it has one (one source of truth); the key is for
    # standards without an update command
    if "nALU" in spec.timing:
        if "alu_latency_cycles" in nmc:
            raise doc.error("nmc.alu_latency_cycles", f"{spec.name} gives the adder latency (timing nALU = "
                            f"{spec.timing['nALU']}); set it there, not here")
        alu = int(spec.timing["nALU"])
    else:
        alu = require_int(doc, "nmc.alu_latency_cycles", nmc.get("alu_latency_cycles", 4), minimum=0)
    ring = data.get("ring", "t3_ring")
    if not isinstance(ring, str):
        raise doc.error("ring", f"must be a ring preset name or file, got {ring!r}")
    directions = require_int(doc, "ring_directions", data.get("ring_directions", 1), minimum=1)
    if directions > 2:
        raise doc.error("ring_directions", f"must be 1 (one direction of each link) or 2 (both), got {directions}")
    return T3Params(gpu=gpu, spec=spec, controller=dict(ctrl), ring_name=ring, ring_directions=directions,
                    alu_latency_cycles=alu, nmc_update=update,
                    tracker_entries=require_int(doc, "tracker.entries", tr.get("entries", 256), minimum=1),
                    mca_threshold=thr,
                    starvation_cap_cycles=require_int(doc, "mca.starvation_cap_cycles",
                                                      mca.get("starvation_cap_cycles", 1000), minimum=1),
                    window_cycles=require_int(doc, "driver.window_cycles", drv.get("window_cycles", 0), minimum=0),
                    update_energy=_energy_expr(doc, nmc.get("update_energy", "WR + RD"), spec),
                    name=str(data.get("name", "t3")), mapping=addr_map, mca_gate=gate)


def load_t3_ring(params: T3Params, tp: int) -> RingConfig:
    """The preset's ring for `tp` devices, used in the preset's number of directions."""
    import dataclasses

    from archsim.interconnect.ring import load_ring

    return dataclasses.replace(load_ring(params.ring_name, tp), directions=params.ring_directions)


def load_params(name_or_path: str | Path = "t3_paper", overrides: dict[str, Any] | None = None) -> T3Params:
    """A T3 preset by name or path; `overrides` = {dotted key: value} applied to the file's mapping."""
    import copy

    from archsim.config import set_path

    path = paths.preset_file("T3", PRESET_DIR, name_or_path)
    doc = load_yaml(path)
    if overrides:
        data = copy.deepcopy(doc.data)
        for k, v in overrides.items():
            set_path(data, k, v, source=str(path))
        doc = Doc(data=data, source=doc.source, lines=doc.lines)
    return params_from_mapping(doc)
