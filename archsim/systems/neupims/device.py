"""One TP shard's hardware (DRAM spec, NPU, the model slice it holds), the TP all-reduce, and which channel
holds each request's KV cache.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from archsim.dram.spec import DramSpec, load_spec
from archsim.errors import ConfigError, UserError
from archsim.interconnect.ring import RingConfig, collective_s
from archsim.npu.config import NpuConfig
from archsim.systems.neupims.compiler import pim_unit_banks
from archsim.systems.neupims.config import Policy, Setup
from archsim.workload import serving
from archsim.workload.spec import ModelSpec


@dataclass
class Device:
    """One TP shard's hardware: DRAM spec, NPU, and the model slice it holds."""

    system: str
    variant: Any                         # the system's class (archsim.systems.neupims: NeuPims or a baseline): what it does
    model: ModelSpec
    tp: int
    layers: int
    spec: DramSpec | None
    npu: NpuConfig
    policy: Policy
    link_bytes_per_s: float | None       # None: ideal interconnect
    link_latency_s: float
    npu_attention: str = "pipelined"
    cache: dict = field(default_factory=dict)     # GEMM schedules and the attention compiler, kept across iterations

    @property
    def heads(self) -> int:
        return self.model.n_heads // self.tp

    @property
    def kv_heads(self) -> int:
        """KV heads on this device (GQA: fewer than its query heads; the config makes tp divide them)."""
        return self.model.n_kv_heads // self.tp

    @property
    def group(self) -> int:
        """Query heads per KV head (1: MHA)."""
        return self.model.n_heads // self.model.n_kv_heads

    @property
    def dram_hz(self) -> float:
        return 1e12 / self.spec.tCK_ps

    def npu_to_dram(self, npu_cycles: float) -> int:
        return math.ceil(npu_cycles * self.dram_hz / self.npu.clock_hz - 1e-9)

    @property
    def kv_capacity_bytes(self) -> int:
        """KV cache room of the TP group: memory of tp devices minus the weights."""
        return self.tp * self.spec.capacity_bytes - self.model.weight_bytes

    @property
    def pim_units(self) -> int:
        """PIM units of the device (COMP's scope: NeuPIMs' channels, HBM pseudo-channels): what a request's KV
        cache is placed on; the "channels" of KV placement and sub-batch partitioning."""
        if self.spec is None or "COMP" not in self.spec.command_names:
            return self.spec.channels if self.spec is not None else 0
        return self.spec.channels * (self.spec.banks_per_channel // pim_unit_banks(self.spec))

    @property
    def capacity_tokens_per_channel(self) -> int:
        """A request's KV cache (this device's heads, all layers) lives in one PIM unit (NeuPIMs' PIM tiles)."""
        per_token = self.model.kv_bytes_per_token // self.tp
        free = self.spec.capacity_bytes - self.model.weight_bytes // self.tp
        return max(free // self.pim_units // per_token, 0)


def build_device(su: Setup) -> Device:
    spec = None
    if not su.gpu_system:
        spec = load_spec(su.preset, dict(su.dram))
        if su.variant.pim_arbitration is not None and "COMP" not in spec.command_names:
            raise ConfigError("preset", f"{spec.name} has no PIM commands; system {su.system} needs a NeuPIMs device")
        per_device = su.model.weight_bytes / su.tp
        if per_device >= spec.capacity_bytes:
            raise UserError(f"{su.model.name}: its weights take {per_device / 1e9:.1f} GB per device at tp {su.tp}, "
                            f"more than the {spec.capacity_bytes / 1e9:.1f} GB of {spec.name}; raise tp (NeuPIMs "
                            "also splits GPT3-175B over 4 pipeline stages, which archsim does not model)")
    return Device(su.system, su.variant, su.model, su.tp, su.layers, spec, su.npu, su.policy, su.link_bytes_per_s,
                  su.link_latency_s, su.npu_attention)


def allreduce_s(tp: int, link_bytes_per_s: float | None, link_latency_s: float, nbytes: int) -> float:
    """A ring all-reduce of `nbytes` per device over the TP group (archsim.interconnect.ring's closed form);
    0 on one device or an ideal link (None)."""
    if tp == 1 or link_bytes_per_s is None:
        return 0.0
    return collective_s(RingConfig(devices=tp, link_bytes_per_s=link_bytes_per_s, hop_latency_s=link_latency_s), "all_reduce", nbytes)


def assign(dev: Device, contexts: list[int], policy: str) -> list[int]:
    nch = dev.pim_units
    cap = dev.capacity_tokens_per_channel
    if policy == "gmlbp":
        out = serving.assign_channels_gmlbp(contexts, nch, serving.mha_load_fn(dev.model, dev.tp), capacity_tokens=cap)
    else:
        out = serving.assign_channels_round_robin(contexts, nch, capacity_tokens=cap)
    if -1 in out:
        need = sum(contexts) * dev.model.kv_bytes_per_token
        raise UserError(f"the batch's KV cache does not fit: {len(contexts)} requests with {sum(contexts)} tokens "
                        f"need {need / 2**30:.1f} GiB of KV cache, the {dev.tp} device(s) hold "
                        f"{dev.kv_capacity_bytes / 2**30:.1f} GiB next to the weights")
    return out
