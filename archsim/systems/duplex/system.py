"""Duplex (MICRO'24) serving runs: xPU + Logic-PIM devices, or the baselines GPU, 2xGPU, Bank-PIM and
BankGroup-PIM, under continuous batching (closed loop or Poisson arrivals at a QPS).

Each iteration (stage) of archsim.workload.serving.ContinuousBatcher is compiled by archsim.systems.duplex.compiler
into operators dispatched by the mapping policy (mappings/duplex.yaml), timed (xPU: roofline; Logic-PIM:
bundle command streams on the channel engine, or its roofline with `pim_timing: roofline`; Bank-PIM and
BankGroup-PIM: rooflines; links: ring all-reduce / all-to-all) and costed (DRAM bits per path, activates,
MACs). The simulation of system `duplex` (declared in archsim.systems.duplex; its config in config.py).
"""
from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pandas as pd

from archsim import schema
from archsim.engine.compiling import clock, sim_seconds
from archsim.errors import UserError
from archsim.results import Result, make_manifest
from archsim.systems.duplex.compiler import (
    Compiler,
    Policy,
    Stage,
    load_policy,
    make_device,
    paper_devices,
)
from archsim.systems.duplex.config import (
    DEFAULTS,
    SPLITS,
    DuplexConfig,
    devices_preset,
    policy_overrides,
    resolve,
)
from archsim.systems.duplex.serving import DuplexBatcher, make_requests, serving_metrics
from archsim.workload.serving import Batch
from archsim.workload.spec import ModelSpec

if TYPE_CHECKING:
    from archsim.pim.logic_pim import DuplexDevices


# ---- the run's config, typed ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class XpuOnly:
    """device gpu / 2xgpu: GPUs alone (no low-Op/B unit); no knobs of their own."""


@dataclass(frozen=True)
class LogicPimDevice:
    """device duplex: xPU + Logic-PIM (key paths `pim_timing`: Logic-PIM on the channel engine or its roofline;
    `command_path`: how its bundle commands reach the banks)."""

    pim_timing: str
    command_path: str


@dataclass(frozen=True)
class RooflinePimDevice:
    """device bank_pim / bankgroup_pim: xPU + a PIM baseline timed by its roofline; no knobs of its own."""


# each device kind's sub-config, built from the top-level keys of the same names (key paths unchanged)
DEVICE_CONFIGS: dict[str, type] = {"gpu": XpuOnly, "2xgpu": XpuOnly, "duplex": LogicPimDevice,
                                   "bank_pim": RooflinePimDevice, "bankgroup_pim": RooflinePimDevice}


@dataclass(frozen=True)
class UniformRouting:
    """routing uniform: every expert equally likely; no knobs."""

    name: ClassVar[str] = "uniform"


@dataclass(frozen=True)
class ZipfRouting:
    """routing zipf: expert popularity ~ 1 / rank^zipf_s (key path `zipf_s`)."""

    name: ClassVar[str] = "zipf"
    zipf_s: float


@dataclass(frozen=True)
class SampledRouting:
    """routing sampled: every MoE layer's routing drawn at random (k distinct experts per token); no knobs (the
    run's seed seeds it)."""

    name: ClassVar[str] = "sampled"


ROUTING_CONFIGS: dict[str, type] = {"uniform": UniformRouting, "zipf": ZipfRouting, "sampled": SampledRouting}


@dataclass(frozen=True)
class Serving:
    """The served workload and the batcher's limits (key paths of the same names)."""

    requests: int
    input_len: int
    output_len: int
    length_std: float
    qps: float | None             # None: closed loop (all requests arrive at 0)
    max_batch: int
    max_prefill_tokens: int | None
    data_parallel: int


@dataclass(frozen=True)
class Setup:
    """A run's config resolved once into typed values (model and mapping policy loaded once), passed down to
    everything below `run`; `resolved` is the same config as the dict the manifest records."""

    model: ModelSpec
    device: str                                            # DEVICE_KINDS
    hardware: XpuOnly | LogicPimDevice | RooflinePimDevice  # the device kind's own knobs
    devices: int | None                                    # per replica; None: the paper's count or the weights'
    policy: Policy                                         # the mapping file with the overrides applied
    interference: str                                      # co-processing interference asked for: engine | none
    coprocessing_split: str                                # interference_aware | lookup_table | llmsimulator
    routing: UniformRouting | ZipfRouting | SampledRouting
    memory_cap: str                        # enforce | unlimited (the batcher's KV-cache memory check)
    dispatch: str                          # layer | per_expert (the MoE experts' unit choice)
    serving: Serving
    memory: str | None                     # a stack's DRAM preset; None: the devices preset's
    stacks: int | None                     # stacks per device; None: the devices preset's
    devices_preset: DuplexDevices          # the xPU, links, processors and Logic-PIM, with devices_overrides
    resolved: dict[str, Any] = field(compare=False, repr=False)

    @property
    def pim_timing(self) -> str:
        """Logic-PIM's timing; a device without Logic-PIM has no engine model (its low unit is a roofline)."""
        return self.hardware.pim_timing if isinstance(self.hardware, LogicPimDevice) else "roofline"

    @property
    def command_path(self) -> str | None:
        """Logic-PIM's command path (device duplex); None for a device without Logic-PIM."""
        return self.hardware.command_path if isinstance(self.hardware, LogicPimDevice) else None

    @property
    def zipf_s(self) -> float:
        """The Zipf exponent (the schema's default under uniform routing, which does not read it)."""
        return self.routing.zipf_s if isinstance(self.routing, ZipfRouting) else DEFAULTS["zipf_s"]


def setup(config: dict[str, Any]) -> Setup:
    """`config` resolved and typed: what `run` passes down."""
    from archsim.workload import load_model

    cfg = resolve(config)
    return Setup(model=load_model(cfg["model"]), device=cfg["device"],
                 hardware=schema.variant(DEVICE_CONFIGS, cfg["device"], cfg, "device", DuplexConfig), devices=cfg["devices"],
                 policy=load_policy(cfg["mapping"], policy_overrides(cfg)),
                 interference=cfg.get("interference", "engine"),
                 coprocessing_split=cfg.get("coprocessing_split", SPLITS[0]),
                 routing=schema.variant(ROUTING_CONFIGS, cfg["routing"], cfg, "routing"),
                 memory_cap=cfg.get("memory_cap", "enforce"), dispatch=cfg.get("dispatch", "layer"),
                 serving=Serving(**{f.name: cfg[f.name] for f in dataclasses.fields(Serving)}),
                 memory=cfg.get("preset"), stacks=cfg.get("stacks"), devices_preset=devices_preset(cfg), resolved=cfg)


# A model the paper does not list (a user's config.json) gets the fewest devices, a power of two, whose memory
# its weights fill at most half (the rest holds the KV cache). This rule gives the paper's count for every
# model of its Table I (tests/test_duplex_system.py checks it), so it is the paper's sizing, not a new one.
WEIGHT_FILL_LIMIT = 0.5


def devices_for_weights(weight_bytes: int, device_memory_bytes: int) -> int:
    n = 1
    while weight_bytes > WEIGHT_FILL_LIMIT * n * device_memory_bytes:
        n *= 2
    return n


def n_devices(su: Setup, device_memory_bytes: int) -> tuple[int, str]:
    """Devices of one replica and where the count comes from: `config`, `paper` or `weights` (the rule above)."""
    if su.devices is not None:
        n, source = su.devices, "config"
    elif (n := paper_devices(su.model.name)) is not None:
        source = "paper"
    else:
        n, source = devices_for_weights(su.model.weight_bytes, device_memory_bytes), "weights"
    return (2 * n if su.device == "2xgpu" else n), source


class DuplexRun:
    """One serving run: compiler, batcher and per-operator accounting. Operator times and energies are those
    of one device (for MoE the slowest device); run energy = per-device energy x devices (exact for the
    tensor-parallel parts and uniform routing, an approximation under skewed routing)."""

    def __init__(self, config: dict[str, Any] | Setup, seed: int = 0, timer=None):
        self.su = su = config if isinstance(config, Setup) else setup(config)
        self.model = su.model
        self.device = make_device(su.device, su.pim_timing, timer=timer, memory=su.memory, stacks=su.stacks,
                                  command_path=su.command_path, preset=su.devices_preset)
        self.D, self.devices_source = n_devices(su, self.device.memory_bytes)
        self.policy = su.policy
        self.compiler = Compiler(self.model, self.device, self.D, self.policy, su.routing.name, su.zipf_s,
                                 su.interference, su.coprocessing_split, seed=seed, dispatch=su.dispatch)
        self.seed = seed
        longest = su.serving.input_len + su.serving.output_len
        if longest > self.model.max_context:
            raise UserError(f"input_len + output_len = {longest} exceeds {self.model.name}'s max context "
                            f"{self.model.max_context}")
        weights = self.model.weight_bytes
        self.kv_capacity = self.D * self.device.memory_bytes - weights
        if su.memory_cap == "unlimited":      # no memory check: every request fits (the batch limit still holds)
            self.kv_capacity = float(su.serving.max_batch * self.model.kv_bytes_per_token * self.model.max_context)
        elif self.kv_capacity <= 0:
            raise UserError(f"{self.model.name} ({weights / 2**30:.0f} GiB of weights) does not fit in {self.D} "
                            f"devices of {self.device.memory_bytes / 2**30:.0f} GiB")
        self.acc: dict[tuple, list[float]] = defaultdict(lambda: [0.0] * 6)
        self.stage_kinds = {"decode": 0, "mixed": 0}
        self.decode_s = 0.0          # time and tokens of the decode-only stages (the common schema's decode step)
        self.decode_tokens = 0
        # co-processed operator pairs: (stage kind, pair) -> [overlaps, alone s, with-interference s,
        # xPU s, low s, xPU slow-down x xPU s, low slow-down x low s] (slow-downs time-weighted)
        self.pairs: dict[tuple, list[float]] = defaultdict(lambda: [0.0] * 8)

    def iteration_time(self, batch: Batch) -> float:
        pre = tuple(e.new_tokens for e in batch.entries if e.phase == "prefill")
        dec = tuple(e.context_tokens for e in batch.entries if e.phase == "decode")
        st = Stage(pre, dec)
        seconds, ops = self.compiler.stage(st)
        self.stage_kinds[st.kind] += 1
        if st.kind == "decode":
            self.decode_s += seconds
            self.decode_tokens += len(dec)
        for o in ops:
            a = self.acc[(st.kind, o.kind, o.unit)]
            a[0] += o.seconds * o.count
            a[1] += o.roofline_s * o.count
            a[2] += o.energy_pj * o.count * self.D
            a[3] += o.flops * o.count
            a[4] += o.bytes * o.count
            a[5] += o.count
        for p in self.compiler.pairs:
            a = self.pairs[(st.kind, p["pair"])]
            n = p["count"]
            for i, v in enumerate((1.0, p["alone_s"], p["seconds"], p["xpu_s"], p["low_s"],
                                   p["xpu_slowdown"] * p["xpu_s"], p["low_slowdown"] * p["low_s"],
                                   p.get("serialized", 0))):
                a[i] += v * n
        return seconds

    def run(self) -> Result:
        su, sv = self.su, self.su.serving
        rng = np.random.default_rng(self.seed)
        reqs = make_requests(sv.requests, sv.input_len, sv.output_len, rng, sv.length_std, sv.qps,
                             max_context=self.model.max_context)
        batcher = DuplexBatcher(sv.max_batch, int(self.kv_capacity), self.model.kv_bytes_per_token,
                                self.iteration_time, sv.max_prefill_tokens)
        timer = clock()       # simulation time: a first run's kernel compile apart (sim_compile_s)
        # data parallelism: replica r serves requests r, r + k, ... with its own batcher on its own devices;
        # the replicas run side by side, so the merged run ends with the last replica (iterations of all
        # replicas together give the token intervals; operator time and energy add up over replicas)
        k = sv.data_parallel
        parts = [batcher.run(reqs[r::k]) for r in range(k) if reqs[r::k]]
        served = parts[0]
        for p in parts[1:]:
            served.iterations.extend(p.iterations)
            served.records.update(p.records)
            served.admission_order.extend(p.admission_order)
        wall = sim_seconds(timer)
        metrics = serving_metrics(served)
        rows = []
        for (stage, kind, unit), (sec, roof, e, f, b, n) in sorted(self.acc.items()):
            rows.append({"stage": stage, "op": kind, "unit": unit, "seconds": sec, "roofline_seconds": roof,
                         "energy_pj": e, "flops": f, "bytes": b, "op_b": f / b if b else float("inf"),
                         "invocations": n})
        df = pd.DataFrame(rows)
        energy_j = float(df.energy_pj.sum()) * 1e-12 if len(df) else 0.0
        tokens = metrics["output_tokens"]
        timer = self.device.timer
        stats = {
            **metrics, "model": self.model.name, "device": su.device, "devices": self.D * sv.data_parallel,
            "devices_per_replica": self.D, "devices_source": self.devices_source, "data_parallel": sv.data_parallel,
            "energy_j": energy_j, "energy_per_token_j": energy_j / tokens if tokens else 0.0,
            "decode_stages": self.stage_kinds["decode"], "mixed_stages": self.stage_kinds["mixed"],
            "kv_capacity_bytes": int(self.kv_capacity), "wall_s": wall,
            "engine_streams_simulated": timer.simulated if timer else 0,
            "engine_wall_s": timer.engine_wall_s if timer else 0.0,
        }
        stats.update(self.common_metrics(metrics["ttft_mean_s"]))
        inter = self.interference_table()
        stats["interference"] = "engine" if self.compiler.interference else "none"
        if su.interference == "engine" and not self.compiler.interference:
            # says why the co-processing ran interference-free although the engine model was asked for
            stats["interference_note"] = (
                "no low-Op/B unit: nothing runs beside the xPU" if self.device.low is None else
                f"{self.device.low} has no channel-engine model (a roofline): its co-processing is interference-free"
                if self.device.low != "logic_pim" else
                "pim_timing roofline: no engine streams to measure the interference with")
        stats["interference_added_s"] = float((inter.seconds - inter.alone_seconds).sum()) if len(inter) else 0.0
        # the co-processing split rule and what it decided; Logic-PIM's command path (the memory's option)
        stats["coprocessing_split"] = su.coprocessing_split
        for k, v in self.compiler.decisions.items():
            stats[f"coprocessing_{k}"] = v
        # the MoE experts' unit choice and, per_expert, the experts it put on each unit
        stats["dispatch"] = su.dispatch
        if su.dispatch == "per_expert":
            for unit, n in self.compiler.expert_units.items():
                stats[f"dispatch_experts_on_{unit}"] = n
        if self.device.spec is not None and "logic_pim.command_path" in self.device.spec.options:
            stats["command_path"] = self.device.spec.options["logic_pim.command_path"]
        for r in inter.itertuples():
            stats[f"interference_{r.stage}_{r.pair}_xpu_slowdown"] = r.xpu_slowdown
            stats[f"interference_{r.stage}_{r.pair}_low_slowdown"] = r.low_slowdown
        manifest = make_manifest("duplex", su.resolved, self.seed)
        res = Result(df=df, manifest=manifest, stats=stats, extra={"serving": served, "compiler": self.compiler})
        res.tables["interference"] = inter
        return res

    def common_metrics(self, ttft_s: float) -> dict[str, Any]:
        """The common metric schema (archsim.metrics) from the decode-only stages: their mean time is the decode
        step, their tokens / time the decode throughput; energy per decoded token from their operators: the
        xPU's DRAM traffic and activates are `dram`, its MACs `compute`, the low-Op/B unit's operators (its
        path's bits, bundle activates and refresh, its MACs) `pim`. Not modelled: links' energy (the paper's
        code charges none), DRAM background."""
        from archsim import metrics as schema_

        stages = self.stage_kinds["decode"]
        if not stages:
            sc = schema_.scope(layers_simulated=self.model.n_layers, layers=self.model.n_layers, devices=self.D,
                               phase="serving", not_modelled=["a decode-only stage: none ran"])
            return schema_.common(float("nan"), 0, {}, sc, ttft_s)
        dram = pim = compute = 0.0
        for (kind, _op, unit), (_s, _r, e, f, _b, _n) in self.acc.items():
            if kind != "decode" or unit == "link":
                continue
            if unit == "low":
                pim += e
            else:
                mac = f / 2 * self.device.mac_pj * self.D
                compute += mac
                dram += e - mac
        tok = self.decode_tokens
        parts = {"dram": dram * 1e-12 / tok, "pim": pim * 1e-12 / tok, "compute": compute * 1e-12 / tok}
        sc = schema_.scope(layers_simulated=self.model.n_layers, layers=self.model.n_layers, devices=self.D,
                           phase="serving: decode-only stages", decode_stages=stages,
                           not_modelled=[])   # the parts it leaves out (io, static) are named by common()
        return schema_.common(self.decode_s / stages, round(tok / stages), parts, sc, ttft_s)

    def interference_table(self) -> pd.DataFrame:
        """One row per (stage kind, co-processed operator pair): how often the pair met (layer invocations;
        `serialized` of them run one after the other because overlapping would have been slower), the time the pair took without and with interference, and the time-weighted slow-downs
        of each unit while both ran."""
        rows = []
        for (stage, pair), (n, alone, co, xs, ls, sx, sl, ser) in sorted(self.pairs.items()):
            rows.append({"stage": stage, "pair": pair, "overlaps": int(n), "serialized": int(ser),
                         "xpu_seconds": xs, "low_seconds": ls,
                         "alone_seconds": alone, "seconds": co, "xpu_slowdown": sx / xs if xs else 1.0,
                         "low_slowdown": sl / ls if ls else 1.0,
                         "added_fraction": co / alone - 1 if alone else 0.0})
        return pd.DataFrame(rows, columns=["stage", "pair", "overlaps", "serialized", "xpu_seconds", "low_seconds",
                                           "alone_seconds",
                                           "seconds", "xpu_slowdown", "low_slowdown", "added_fraction"])


def run(config: dict[str, Any], seed: int = 0) -> Result:
    return DuplexRun(config, seed).run()
