"""System `gemm`: one C[M,N] = A[M,K] @ B[K,N] on one systolic array (archsim.npu), the check every systolic
model is held to.

    archsim run --system gemm --set m=64 --set k=300 --set n=256 --set npu.height=128 --set npu.width=128 \\
        --set npu.dataflow=ws --set npu.ws_preload_rule=scalesim --json -

`npu.ws_preload_rule` picks the array timing: `bounded` / `onnxim` (archsim's ONNXim-style pipeline, weight
preload overlapped with the previous fold) or `scalesim` (SCALE-Sim 3.0's serial, full-array folds for both
dataflows; `stats.cycles` is then SCALE-Sim's reported compute cycles, docs/npu-gemm.md).

memory: `ideal` times the array alone (every DMA instantaneous; the double-buffer rules still apply when the
scratchpad forces several tiles); `dram` sends every load and store through the channel engine as real requests
(archsim.npu.dram_gemm). Buffers default to "large enough": the whole GEMM as one tile, as a SCALE-Sim run whose
SRAMs never stall; give npu.scratchpad_bytes / npu.accumulator_bytes to tile it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from archsim import schema
from archsim.limits import MAX_CHANNELS
from archsim.results import Result, make_manifest
from archsim.schema import opt

if TYPE_CHECKING:
    from archsim.dram.spec import DramSpec
    from archsim.npu.config import NpuConfig

MEMORIES = ("ideal", "dram")


def _npu_lists(name: str) -> list[str]:
    from archsim.npu import config

    return getattr(config, name)


@dataclass
class GemmNpuConfig:
    """The array: a preset (archsim/presets/npu) whose keys the others override (null: the preset's value)."""

    preset: str = opt("neupims_npu", "NPU preset (archsim/presets/npu) the keys below override")
    height: int | None = opt(None, "array rows (PEs); null: the preset's", minimum=1)
    width: int | None = opt(None, "array columns (PEs); null: the preset's", minimum=1)
    dataflow: str | None = opt(None, "ws (weight stationary) or os (output stationary); null: the preset's",
                               choices=lambda: _npu_lists("DATAFLOWS"))
    ws_preload_rule: str | None = opt(None, "array timing rule: bounded, onnxim (archsim's pipeline) or scalesim "
                                      "(SCALE-Sim 3.0, both dataflows); null: the preset's",
                                      choices=lambda: _npu_lists("PRELOAD_RULES"))
    clock_hz: float | None = opt(None, "array clock in Hz; null: the preset's", above=0)
    scratchpad_bytes: int | None = opt(None, "operand scratchpad (double-buffered); null: large enough for the "
                                       "whole GEMM as one tile", minimum=1)
    accumulator_bytes: int | None = opt(None, "accumulator (double-buffered); null: large enough for the whole "
                                        "output", minimum=1)


@dataclass
class GemmDramConfig:
    """The DRAM behind the NPU's DMA when memory: dram."""

    preset: str = opt("NeuPIMs_HBM2_Single", "DRAM preset (archsim presets list)")
    channels: int | None = opt(None, "channels; null: the preset's", minimum=1, maximum=MAX_CHANNELS)
    refresh: bool = opt(False, "simulate refresh")


@dataclass
class GemmConfig:
    """Config of system `gemm` (one source of truth: DEFAULTS, resolve, the CLI flags and help derive from it)."""

    m: int = opt(128, "rows of A and C (tokens in a batch)", minimum=1)
    k: int = opt(128, "reduction depth (columns of A, rows of B)", minimum=1)
    n: int = opt(128, "columns of B and C", minimum=1)
    memory: str = opt("ideal", "ideal: the array alone; dram: every load and store through the channel engine",
                      choices=MEMORIES)
    npu: GemmNpuConfig = opt(GemmNpuConfig, "the systolic array")
    dram: GemmDramConfig = opt(GemmDramConfig, "the DRAM (memory: dram)")


DEFAULTS: dict[str, Any] = schema.defaults(GemmConfig)


def resolve(config: dict[str, Any]) -> dict[str, Any]:
    schema.check(GemmConfig, config, "gemm")   # unknown keys, types, allowed values, ranges
    out = {**DEFAULTS, **config}
    for section in ("npu", "dram"):
        out[section] = {**DEFAULTS[section], **(config.get(section) or {})}
    return out


# ---- the config resolved once into typed values -------------------------------------------------------------
@dataclass(frozen=True)
class IdealMemory:
    """memory: ideal. No knobs: every DMA is instantaneous (the `dram` section is not read)."""

    name: ClassVar[str] = "ideal"

    @classmethod
    def from_config(cls, cfg: dict[str, Any]) -> IdealMemory:
        return cls()


@dataclass(frozen=True)
class DramMemory:
    """memory: dram (key paths `dram.preset`, `dram.channels`, `dram.refresh`): the DRAM behind the DMA, its
    preset loaded once with the channel count applied."""

    name: ClassVar[str] = "dram"
    spec: DramSpec
    refresh: bool

    @classmethod
    def from_config(cls, cfg: dict[str, Any]) -> DramMemory:
        from archsim.dram.spec import load_spec

        dram = cfg["dram"]
        channels = dram["channels"]
        spec = load_spec(dram["preset"], overrides={"org.channels": channels} if channels else None)
        return cls(spec=spec, refresh=dram["refresh"])

    @property
    def controller(self) -> dict[str, str] | None:
        """The channel engine's controller overrides: the preset's (refresh on) or refresh off."""
        return None if self.refresh else {"refresh": "none"}


# each memory's own knobs: its sub-config, built from its section of the config (key paths unchanged)
MEMORY_CONFIGS: dict[str, type[IdealMemory] | type[DramMemory]] = {"ideal": IdealMemory, "dram": DramMemory}


@dataclass(frozen=True)
class GemmSetup:
    """A run's config resolved once into typed values (the NPU preset loaded with its overrides and buffer
    sizes, the memory's sub-config selected by `memory`), passed down to `run_gemm`; `resolved` is the same
    config as the dict the manifest records."""

    m: int
    k: int
    n: int
    npu: NpuConfig
    memory: IdealMemory | DramMemory
    resolved: dict[str, Any] = field(compare=False, repr=False)


def _npu_config(section: dict[str, Any], m: int, k: int, n: int) -> NpuConfig:
    """The NpuConfig of a resolved `npu` section: the preset, its overrides, and buffers sized to one tile if
    null (both scratchpad halves hold A and B whole; both accumulator halves the whole output)."""
    from archsim.npu.config import load_npu_config

    over = {key: v for key, v in section.items() if key != "preset" and v is not None}
    npu = load_npu_config(section["preset"], **over)
    sizes = {}
    if section["scratchpad_bytes"] is None:
        sizes["scratchpad_bytes"] = 2 * (m * k + k * n) * npu.dtype_bytes
    if section["accumulator_bytes"] is None:
        sizes["accumulator_bytes"] = 2 * m * n * npu.acc_dtype_bytes
    return npu.with_(**sizes) if sizes else npu


def setup(config: dict[str, Any]) -> GemmSetup:
    """`config` resolved and typed: what `run_config` passes down."""
    cfg = resolve(config)
    m, k, n = cfg["m"], cfg["k"], cfg["n"]
    npu = _npu_config(cfg["npu"], m, k, n)
    return GemmSetup(m=m, k=k, n=n, npu=npu, memory=MEMORY_CONFIGS[cfg["memory"]].from_config(cfg),
                     resolved=cfg)


def run_gemm(su: GemmSetup) -> tuple[dict[str, Any], Any]:
    """Simulate the configured GEMM; (stats, per-tile timeline frame)."""
    from archsim.npu.systolic import (
        overlap_timeline,
        scalesim_gemm_cycles,
        scalesim_reported_cycles,
        schedule_gemm,
    )

    npu, m, k, n = su.npu, su.m, su.k, su.n
    stats: dict[str, Any] = {"m": m, "k": k, "n": n, "dataflow": npu.dataflow, "rule": npu.ws_preload_rule,
                             "height": npu.height, "width": npu.width, "memory": su.memory.name}
    if isinstance(su.memory, DramMemory):
        from archsim.npu.dram_gemm import simulate_gemm

        spec = su.memory.spec
        run = simulate_gemm(npu, spec, m, k, n, controller=su.memory.controller)
        sched, timeline = run.schedule, run.timeline
        stats.update(dram_preset=spec.name, dram_channels=spec.channels, dram_read_bytes=run.read_bytes,
                     dram_write_bytes=run.write_bytes, compute_only_cycles=sched.compute_only_cycles())
    else:
        sched = schedule_gemm(npu, m, k, n)
        timeline = overlap_timeline(sched)
    elapsed = timeline.total_cycles
    scalesim = npu.ws_preload_rule == "scalesim"
    # SCALE-Sim counts the last busy cycle's index from 0; the scalesim rule reports cycles its way
    cycles = scalesim_reported_cycles(elapsed) if scalesim else elapsed
    stats.update(
        cycles=cycles, elapsed_cycles=elapsed, seconds=elapsed / npu.clock_hz, macs=m * k * n,
        folds=len(sched.instrs), tiles=len(sched.tiles), tile_m=sched.shape.m, tile_k=sched.shape.k,
        tile_n=sched.shape.n, utilisation=timeline.utilisation, bound=timeline.bound,
        dma_stall_cycles=timeline.dma_stall_cycles, accumulator_stall_cycles=timeline.accumulator_stall_cycles,
        # SCALE-Sim 3.0's closed form for this array and GEMM, whatever rule ran (the comparison an architect asks)
        scalesim_cycles=scalesim_gemm_cycles(npu, m, k, n),
        scratchpad_bytes=npu.scratchpad_bytes, accumulator_bytes=npu.accumulator_bytes)
    return stats, timeline.to_frame()


def run_config(config: dict[str, Any], seed: int = 0) -> Result:
    su = setup(config)
    stats, frame = run_gemm(su)
    return Result(stats=stats, df=frame, manifest=make_manifest("gemm", dict(su.resolved), seed=seed))
