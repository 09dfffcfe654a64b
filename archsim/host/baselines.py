"""GPU / CPU baselines for batch-1 decode: per-op roofline + per-kernel framework overhead + TDP energy.

Each op of the graph costs, on the device, its roofline time
    max(flops / (peak x compute_efficiency), bytes / (peak_bw x bandwidth_efficiency))
and, on the host, kernels(op) x host_overhead_per_kernel_s, where kernels(op) is the number of kernels the
framework launches for it (counted from HF transformers' source, see the preset YAMLs). A GPU runs host and
device as a two-stage pipeline (asynchronous launches, simulated kernel by kernel); a CPU pays both in turn.
A preset describes one framework on one device: `t4` is HF eager (launch-bound: the device waits on the host),
`t4-graphs` fused kernels replayed as a CUDA graph (device-bound: per-kernel cost is a device-side gap).
Energy per token: with `power.busy_w` and `power.host_gap_w`, busy_w x device time + host_gap_w x the rest of
the latency (the device waiting on the host); without them, TDP x activity factor x latency. Every number
lives, with its source, in archsim/presets/baselines/<name>.yaml.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from archsim import schema
from archsim.config import load_yaml
from archsim.errors import ConfigError, UserError, unknown_name
from archsim.schema import REQUIRED, opt
from archsim.workload.graph import MATMUL_KINDS, OP_KINDS, Op

PRESET_DIR = Path(__file__).resolve().parent.parent / "presets" / "baselines"
# Ops whose arithmetic can use the matrix engines (tensor cores / FMA-paired AVX-512).
_MATMUL_LIKE = MATMUL_KINDS + ("attn_score", "attn_context")


def _known_names() -> dict[str, Path]:
    """name and aliases -> preset file."""
    names: dict[str, Path] = {}
    for path in sorted(PRESET_DIR.glob("*.yaml")):
        names[path.stem] = path
        try:
            aliases = load_yaml(path).data.get("aliases", []) or []
        except UserError:
            continue
        for alias in aliases:
            names.setdefault(str(alias), path)
    return names


@dataclass(frozen=True)
class BaselineMemory:
    """The memory's peak bandwidth, stated (datasheet) or from channels x transfers x width (CPU)."""

    bandwidth_efficiency: float = opt(REQUIRED, "fraction of peak bandwidth reached", above=0, maximum=1)
    peak_bandwidth_bytes_per_s: float | None = opt(None, "peak bandwidth, bytes/s", minimum=1)
    channels: int | None = opt(None, "memory channels (without a stated peak)", minimum=1)
    transfers_per_s: float | None = opt(None, "transfers per second of a channel", minimum=1)
    channel_width_bytes: float | None = opt(None, "bytes per transfer of a channel", minimum=1)

    def __post_init__(self) -> None:
        if self.peak_bandwidth_bytes_per_s is None:
            for key in ("channels", "transfers_per_s", "channel_width_bytes"):
                if getattr(self, key) is None:
                    raise ConfigError(key, "missing (give peak_bandwidth_bytes_per_s, or channels, "
                                      "transfers_per_s and channel_width_bytes)")


@dataclass(frozen=True)
class BaselineCompute:
    """Peak FLOP/s, stated (datasheet) or from the microarchitecture (CPU: 2 FLOPs per FMA lane)."""

    compute_efficiency: float = opt(REQUIRED, "fraction of peak FLOP/s reached", above=0, maximum=1)
    peak_matmul_flops_per_s: float | None = opt(None, "peak FLOP/s of matrix ops", minimum=1)
    peak_vector_flops_per_s: float | None = opt(None, "peak FLOP/s of element-wise ops", minimum=1)
    cores: int | None = opt(None, "cores (without stated peaks)", minimum=1)
    clock_hz: float | None = opt(None, "clock, Hz", minimum=1)
    fma_units_per_core: int | None = opt(None, "FMA units per core", minimum=1)
    simd_fp32_lanes: int | None = opt(None, "fp32 lanes per FMA unit", minimum=1)

    def __post_init__(self) -> None:
        need = (("peak_vector_flops_per_s",) if self.peak_matmul_flops_per_s is not None else
                ("cores", "clock_hz", "fma_units_per_core", "simd_fp32_lanes"))
        for key in need:
            if getattr(self, key) is None:
                raise ConfigError(key, "missing (give peak_matmul_flops_per_s and peak_vector_flops_per_s, or "
                                  "cores, clock_hz, fma_units_per_core and simd_fp32_lanes)")


@dataclass(frozen=True)
class BaselinePower:
    tdp_w: float = opt(REQUIRED, "board or package power, W", minimum=0)
    activity_factor: float = opt(REQUIRED, "fraction of TDP drawn (without busy_w / host_gap_w)", above=0,
                                 maximum=1)
    busy_w: float | None = opt(None, "power while a kernel runs, W", minimum=0)
    host_gap_w: float | None = opt(None, "power while the device waits on the host, W", minimum=0)


@dataclass(frozen=True)
class BaselineFramework:
    """The framework's host cost: kernels per op and the host time of each."""

    host_overhead_per_kernel_s: float = opt(REQUIRED, "host time per launched kernel, s", minimum=0)
    overlap_host_and_device: bool = opt(REQUIRED, "asynchronous launches: host and device form a pipeline")
    kv_append_copies_cache: bool = opt(REQUIRED, "appending K/V rewrites the whole cache (torch.cat)")
    per_token_kernels: int = opt(REQUIRED, "kernels per token outside the graph's ops", minimum=0)
    bias_extra_kernels: int = opt(REQUIRED, "extra kernels of an op with a bias", minimum=0)
    kernels_per_op: dict[str, int] = opt(REQUIRED, "kernels per graph op kind (every kind)")

    def __post_init__(self) -> None:
        missing = [k for k in OP_KINDS if k not in self.kernels_per_op]
        if missing:
            raise ConfigError("kernels_per_op", f"missing kinds: {', '.join(missing)}")
        for kind, count in self.kernels_per_op.items():
            if kind not in OP_KINDS:
                raise ConfigError(f"kernels_per_op.{kind}", f"unknown op kind; kinds: {', '.join(OP_KINDS)}")
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise ConfigError(f"kernels_per_op.{kind}", f"must be an integer >= 0, got {count!r}")


@dataclass(frozen=True)
class BaselinePreset:
    """A baseline preset file (archsim/presets/baselines/<name>.yaml): one framework on one device."""

    device: str = opt(REQUIRED, "gpu or cpu", choices=("gpu", "cpu"))
    memory: BaselineMemory = opt(BaselineMemory, "memory")
    compute: BaselineCompute = opt(BaselineCompute, "compute")
    storage_bytes_per_element: int = opt(REQUIRED, "bytes per stored element", minimum=1)
    power: BaselinePower = opt(BaselinePower, "power")
    framework: BaselineFramework = opt(BaselineFramework, "framework")
    name: str = opt("", "the preset's name (default: its file's)")
    aliases: list[str] = opt([], "other names it is found by")
    source: str = opt("", "where its numbers come from")


@dataclass(frozen=True)
class Baseline:
    """A GPU or CPU with its framework, as a roofline + overhead model. Load with `Baseline.load(name)`."""

    name: str
    device: str                                  # "gpu" or "cpu"
    peak_bandwidth_bytes_per_s: float
    bandwidth_efficiency: float
    peak_matmul_flops_per_s: float
    peak_vector_flops_per_s: float
    compute_efficiency: float
    storage_bytes_per_element: int
    tdp_w: float
    activity_factor: float
    busy_w: float | None                         # power while a kernel runs (None: tdp_w x activity_factor)
    host_gap_w: float | None                     # power while the device waits on the host
    host_overhead_per_kernel_s: float
    overlap_host_and_device: bool
    kv_append_copies_cache: bool
    per_token_kernels: int
    bias_extra_kernels: int
    kernels_per_op: dict[str, int] = field(default_factory=dict)
    source: str = ""

    # ---- loading ---------------------------------------------------------------------------------------
    @classmethod
    def names(cls) -> list[str]:
        return sorted(_known_names())

    @classmethod
    def load(cls, name_or_path: str | Path) -> Baseline:
        """A shipped baseline by name or alias ("t4"/"gpu", "xeon-gold-6154"/"cpu") or a user YAML path."""
        text = str(name_or_path)
        path = Path(text).expanduser()
        if not path.is_file():
            known = _known_names()
            if "/" in text or text.endswith((".yaml", ".yml")):
                raise UserError(f"{text}: baseline file not found (shipped: {', '.join(sorted(known))})")
            if text not in known:
                raise unknown_name("baseline", text, known)
            path = known[text]
        preset = schema.load(BaselinePreset, path)
        if not preset.source:
            preset = dataclasses.replace(preset, source=str(path))
        return cls.from_preset(preset, path.stem)

    @classmethod
    def from_preset(cls, p: BaselinePreset, name: str) -> Baseline:
        mem, comp, pwr, fw = p.memory, p.compute, p.power, p.framework
        # Peaks: either stated (datasheet) or computed from the microarchitecture (CPU).
        if mem.peak_bandwidth_bytes_per_s is not None:
            bw = float(mem.peak_bandwidth_bytes_per_s)
        else:
            bw = mem.channels * float(mem.transfers_per_s) * float(mem.channel_width_bytes)
        if comp.peak_matmul_flops_per_s is not None:
            mm, vec = float(comp.peak_matmul_flops_per_s), float(comp.peak_vector_flops_per_s)
        else:
            lane_ops = comp.cores * float(comp.clock_hz) * comp.fma_units_per_core * comp.simd_fp32_lanes
            mm, vec = 2.0 * lane_ops, lane_ops      # an FMA is 2 flops; elementwise ops get 1 per lane
        return cls(
            name=p.name or name, device=p.device, peak_bandwidth_bytes_per_s=bw,
            bandwidth_efficiency=float(mem.bandwidth_efficiency), peak_matmul_flops_per_s=mm,
            peak_vector_flops_per_s=vec, compute_efficiency=float(comp.compute_efficiency),
            storage_bytes_per_element=p.storage_bytes_per_element, tdp_w=float(pwr.tdp_w),
            activity_factor=float(pwr.activity_factor),
            busy_w=None if pwr.busy_w is None else float(pwr.busy_w),
            host_gap_w=None if pwr.host_gap_w is None else float(pwr.host_gap_w),
            host_overhead_per_kernel_s=float(fw.host_overhead_per_kernel_s),
            overlap_host_and_device=fw.overlap_host_and_device, kv_append_copies_cache=fw.kv_append_copies_cache,
            per_token_kernels=fw.per_token_kernels, bias_extra_kernels=fw.bias_extra_kernels,
            kernels_per_op=dict(fw.kernels_per_op), source=p.source)

    # ---- per-op model ----------------------------------------------------------------------------------
    @property
    def effective_bandwidth_bytes_per_s(self) -> float:
        return self.peak_bandwidth_bytes_per_s * self.bandwidth_efficiency

    def kernels(self, op: Op) -> int:
        """Kernels (dispatched framework ops) the baseline's framework launches for `op`."""
        return self.kernels_per_op[op.kind] + (self.bias_extra_kernels if op.has_bias else 0)

    def op_bytes(self, op: Op, context_len: int | None = None, new_tokens: int = 1) -> float:
        """Bytes moved at this baseline's storage precision (HF's cache concat rewrites the whole cache)."""
        scale = self.storage_bytes_per_element / op.dtype_bytes
        if op.kind == "kv_append" and self.kv_append_copies_cache and context_len:
            # torch.cat(past, new): read past + new, write the concatenation (K and V).
            per_token = op.kv_write_bytes / new_tokens
            return per_token * 2 * context_len * scale
        return op.bytes_total * scale

    def roofline_s(self, op: Op, context_len: int | None = None, new_tokens: int = 1) -> dict[str, float]:
        peak = self.peak_matmul_flops_per_s if op.kind in _MATMUL_LIKE else self.peak_vector_flops_per_s
        compute_s = op.flops / (peak * self.compute_efficiency)
        memory_s = self.op_bytes(op, context_len, new_tokens) / self.effective_bandwidth_bytes_per_s
        return {"compute_s": compute_s, "memory_s": memory_s, "roofline_s": max(compute_s, memory_s)}

    # ---- one decode step -------------------------------------------------------------------------------
    def decode_token(self, graph: list[Op]) -> dict[str, Any]:
        """Latency and energy of running `graph` (one decode step) plus greedy token selection.

        Returns latency_s, energy_j, power_w, kernels, overhead_s (= kernels x host overhead), device_s
        (sum of rooflines), busy_fraction, and per_op: a DataFrame with one row per op (+ a "sample" row).
        """
        ctx = getattr(graph, "context_len", None)
        phase = getattr(graph, "phase", "decode")
        new_tokens = 1 if phase == "decode" else (ctx or 1)
        rows = []
        for op in graph:
            r = self.roofline_s(op, ctx, new_tokens)
            k = self.kernels(op)
            rows.append({"name": op.name, "kind": op.kind, "layer": op.layer, "flops": op.flops,
                         "bytes": self.op_bytes(op, ctx, new_tokens), **r, "kernels": k,
                         "overhead_s": k * self.host_overhead_per_kernel_s})
        # Greedy sampling: argmax over the logits (+ device->host copy of the token on a GPU).
        vocab = next((op.n for op in reversed(graph) if op.role == "lm_head"), 0)
        batch = getattr(graph, "batch", 1)
        sample_bytes = float(vocab * batch * self.storage_bytes_per_element)
        sample_s = sample_bytes / self.effective_bandwidth_bytes_per_s
        rows.append({"name": "sample", "kind": "sample", "layer": None, "flops": vocab * batch,
                     "bytes": sample_bytes, "compute_s": 0.0, "memory_s": sample_s, "roofline_s": sample_s,
                     "kernels": self.per_token_kernels,
                     "overhead_s": self.per_token_kernels * self.host_overhead_per_kernel_s})
        import pandas as pd  # imported when a baseline runs (config checks load the preset only)

        df = pd.DataFrame(rows)
        df["layer"] = df["layer"].astype("Int64")
        df["latency_s"] = self._schedule(df["roofline_s"].to_numpy(), df["kernels"].to_numpy())
        df["bound"] = np.where(df["overhead_s"] > df["roofline_s"], "overhead",
                               np.where(df["compute_s"] > df["memory_s"], "compute", "memory"))
        latency_s = float(df["latency_s"].sum())
        device_s = float(df["roofline_s"].sum())
        energy_j = self.energy_j(latency_s, device_s)
        return {
            "baseline": self.name,
            "latency_s": latency_s,
            "energy_j": energy_j,
            "power_w": energy_j / latency_s if latency_s else 0.0,     # average over the step
            "host_gap_s": max(latency_s - device_s, 0.0),
            "kernels": int(df["kernels"].sum()),
            "overhead_s": float(df["overhead_s"].sum()),
            "device_s": device_s,
            "busy_fraction": device_s / latency_s if latency_s else 0.0,
            "per_op": df,
        }

    def energy_j(self, latency_s: float, device_s: float) -> float:
        """Energy of a step of `latency_s` in which the device computes for `device_s`: busy power while it
        computes and host-gap power while it waits on the host (when the preset gives both), else TDP x
        activity factor throughout."""
        if self.busy_w is None or self.host_gap_w is None:
            return self.tdp_w * self.activity_factor * latency_s
        busy = min(device_s, latency_s)
        return self.busy_w * busy + self.host_gap_w * (latency_s - busy)

    def _schedule(self, device_s: np.ndarray, kernels: np.ndarray) -> np.ndarray:
        """Per-op share of the step time.

        Without overlap every op costs host + device in turn. With overlap (asynchronous launches), the host
        enqueues kernels one after another (host_overhead_per_kernel_s each) and the device starts a kernel
        when it has been enqueued and the previous one has finished; an op's device time is split evenly
        over its kernels. An op's share is how far it moves the device's finish time.
        """
        o = self.host_overhead_per_kernel_s
        if not self.overlap_host_and_device:
            return device_s + kernels * o
        host_t = dev_t = 0.0
        out = np.empty(len(device_s))
        for i, (d, k) in enumerate(zip(device_s, kernels, strict=True)):
            before = dev_t
            if k == 0:
                dev_t = max(dev_t, host_t) + d
            else:
                for _ in range(int(k)):
                    host_t += o
                    dev_t = max(dev_t, host_t) + d / k
            out[i] = dev_t - before
        return out
