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

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from archsim.config import Doc, load_yaml, require_choice, require_int, require_number
from archsim.errors import UserError, unknown_name
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
        return cls.from_doc(load_yaml(path))

    @classmethod
    def from_doc(cls, doc: Doc) -> Baseline:
        d = doc.data

        def section(key: str) -> dict[str, Any]:
            sec = d.get(key)
            if not isinstance(sec, dict):
                raise doc.error(key, "missing section (a mapping)")
            return sec

        def num(sec: dict[str, Any], prefix: str, key: str, minimum: float = 0.0) -> float:
            if key not in sec:
                raise doc.error(prefix + key, "missing")
            return require_number(doc, prefix + key, sec[key], minimum=minimum)

        def frac(sec: dict[str, Any], prefix: str, key: str) -> float:
            value = num(sec, prefix, key)
            if not 0.0 < value <= 1.0:
                raise doc.error(prefix + key, f"must be a fraction in (0, 1], got {value}")
            return value

        def integer(sec: dict[str, Any], prefix: str, key: str, minimum: int = 0) -> int:
            if key not in sec:
                raise doc.error(prefix + key, "missing")
            return require_int(doc, prefix + key, sec[key], minimum=minimum)

        def flag(sec: dict[str, Any], prefix: str, key: str) -> bool:
            value = sec.get(key)
            if not isinstance(value, bool):
                raise doc.error(prefix + key, f"must be true or false, got {value!r}")
            return value

        mem, comp, pwr, fw = section("memory"), section("compute"), section("power"), section("framework")
        # Peaks: either stated (datasheet) or computed from the microarchitecture (CPU).
        if "peak_bandwidth_bytes_per_s" in mem:
            bw = num(mem, "memory.", "peak_bandwidth_bytes_per_s", 1.0)
        else:
            bw = (integer(mem, "memory.", "channels", 1) * num(mem, "memory.", "transfers_per_s", 1.0)
                  * num(mem, "memory.", "channel_width_bytes", 1.0))
        if "peak_matmul_flops_per_s" in comp:
            mm = num(comp, "compute.", "peak_matmul_flops_per_s", 1.0)
            vec = num(comp, "compute.", "peak_vector_flops_per_s", 1.0)
        else:
            lane_ops = (integer(comp, "compute.", "cores", 1) * num(comp, "compute.", "clock_hz", 1.0)
                        * integer(comp, "compute.", "fma_units_per_core", 1)
                        * integer(comp, "compute.", "simd_fp32_lanes", 1))
            mm, vec = 2.0 * lane_ops, lane_ops      # an FMA is 2 flops; elementwise ops get 1 per lane
        kernels = fw.get("kernels_per_op")
        if not isinstance(kernels, dict):
            raise doc.error("framework.kernels_per_op", "missing section (a mapping of op kind -> kernels)")
        missing = [k for k in OP_KINDS if k not in kernels]
        if missing:
            raise doc.error("framework.kernels_per_op", f"missing kinds: {', '.join(missing)}")
        extra = sorted(set(kernels) - set(OP_KINDS))
        if extra:
            raise doc.error(f"framework.kernels_per_op.{extra[0]}", f"unknown op kind; kinds: {', '.join(OP_KINDS)}")
        kernel_counts = {k: require_int(doc, f"framework.kernels_per_op.{k}", v, minimum=0) for k, v in kernels.items()}
        return cls(
            name=str(d.get("name", Path(doc.source).stem)),
            device=require_choice(doc, "device", d.get("device"), ["gpu", "cpu"]),
            peak_bandwidth_bytes_per_s=bw,
            bandwidth_efficiency=frac(mem, "memory.", "bandwidth_efficiency"),
            peak_matmul_flops_per_s=mm,
            peak_vector_flops_per_s=vec,
            compute_efficiency=frac(comp, "compute.", "compute_efficiency"),
            storage_bytes_per_element=require_int(doc, "storage_bytes_per_element", d.get("storage_bytes_per_element"),
                                                  minimum=1),
            tdp_w=num(pwr, "power.", "tdp_w", 0.0),
            activity_factor=frac(pwr, "power.", "activity_factor"),
            busy_w=num(pwr, "power.", "busy_w") if "busy_w" in pwr else None,
            host_gap_w=num(pwr, "power.", "host_gap_w") if "host_gap_w" in pwr else None,
            host_overhead_per_kernel_s=num(fw, "framework.", "host_overhead_per_kernel_s", 0.0),
            overlap_host_and_device=flag(fw, "framework.", "overlap_host_and_device"),
            kv_append_copies_cache=flag(fw, "framework.", "kv_append_copies_cache"),
            per_token_kernels=integer(fw, "framework.", "per_token_kernels"),
            bias_extra_kernels=integer(fw, "framework.", "bias_extra_kernels"),
            kernels_per_op=kernel_counts,
            source=str(d.get("source", doc.source)),
        )

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
