"""One metric schema for every LLM system (issue 37): the numbers that compare designs, with the same names,
units and scope everywhere, emitted beside each system's own stats.

    decode_tokens_per_s   tokens per second the decode phase produces (batch / decode_step_s)
    decode_step_s         one decode step of the whole model (every layer) for the whole batch
    ttft_s                time to the first token (prefill); NaN where the system models no prefill
    energy_per_token_j    energy per decoded token, the sum of its components:
      energy_per_token_dram_j     DRAM devices: array, internal data path and interface I/O of ordinary accesses,
                                  refresh (background is `static`)
      energy_per_token_pim_j      in- and near-memory compute: PIM MACs and buffers, Logic-PIM, NMC updates and
                                  the data they move inside the memory
      energy_per_token_compute_j  the host compute units (NPU arrays, xPU, GPU, ASIC)
      energy_per_token_io_j       links between devices (tensor-parallel collectives)
      energy_per_token_static_j   standby power x time (DRAM background)
    scope                 what was simulated and what was not: layers simulated of the model's, devices, phase,
                          and the parts not modelled (components reported as 0 are named there)

A component a system does not model is 0 and named in `scope["not_modelled"]`, never silently left out.
"""
from __future__ import annotations

import math
from typing import Any

ENERGY_PARTS = ("dram", "pim", "compute", "io", "static")
NAMES = ("decode_tokens_per_s", "decode_step_s", "ttft_s", "energy_per_token_j",
         *(f"energy_per_token_{p}_j" for p in ENERGY_PARTS), "scope")
# The study's assumption for the arithmetic energy of the tensor units (NPU arrays, xPU, GPU) where a system's
# preset gives none: Duplex's code charges 0.23 pJ per FLOP on every processor (0.46 pJ per FP16 MAC;
# archsim/presets/duplex/devices.yaml energy.mac_pj), the one public per-MAC figure among the four systems.
DEFAULT_MAC_PJ = 0.46


def common(decode_step_s: float, batch: int, energy_per_token_j: dict[str, float], scope: dict[str, Any],
           ttft_s: float = math.nan) -> dict[str, Any]:
    """The common stats of a run: `energy_per_token_j` maps parts (ENERGY_PARTS) to J per decoded token; parts
    it leaves out are 0 and added to scope["not_modelled"]."""
    unknown = set(energy_per_token_j) - set(ENERGY_PARTS)
    if unknown:
        raise ValueError(f"energy parts {sorted(unknown)}: the common schema has {', '.join(ENERGY_PARTS)}")
    scope = {**scope, "not_modelled": list(scope.get("not_modelled", []))}
    for part in ENERGY_PARTS:
        if part not in energy_per_token_j:
            scope["not_modelled"].append(f"{part} energy")
    parts = {p: float(energy_per_token_j.get(p, 0.0)) for p in ENERGY_PARTS}
    out: dict[str, Any] = {
        "decode_tokens_per_s": batch / decode_step_s if decode_step_s > 0 else math.nan,
        "decode_step_s": float(decode_step_s),
        "ttft_s": float(ttft_s),
        "energy_per_token_j": sum(parts.values()),
        **{f"energy_per_token_{p}_j": v for p, v in parts.items()},
        "scope": scope,
    }
    return out


def scope(*, layers_simulated: int, layers: int, devices: int, phase: str = "decode",
          not_modelled: list[str] | tuple[str, ...] = (), **more: Any) -> dict[str, Any]:
    """A scope record: how much of the model and the machine the numbers cover."""
    return {"layers_simulated": int(layers_simulated), "layers": int(layers), "devices": int(devices),
            "phase": phase, "not_modelled": list(not_modelled), **more}
