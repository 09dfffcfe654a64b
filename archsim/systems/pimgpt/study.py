"""PIM-GPT in the which-PIM study (archsim/study): an intent mapped onto system `pimgpt`'s keys.

The model's GEMVs run in the banks of AiM-style PIM units (a pseudo-channel of each stack), its non-linear ops on
the ASIC; one device (PIM-GPT has no multi-device mode). Decode steps are simulated at contexts around the
requests' mean context (the per-token cost is affine in the context), `decode_tokens` of them (option, default
4); a batch's requests run one after another (`batch`: the global buffer holds one input vector).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from archsim.study.intent import Intent, Refusal

DESIGN = "PIM-GPT"
STYLE = "AiM-style all-bank MACs in every bank"
RUNS_AS = "pimgpt"
COMPUTE = "a 1 GHz ASIC for the non-linear ops (archsim/presets/asic/pimgpt_asic.yaml); GEMVs in the banks"
MEMORY = {"hbm2": "HBM2_2Gbps_AiM", "hbm3": "HBM3_6400Mbps_AiM"}
PAPER = {"preset": "GDDR6_AiM_16Gbps", "channels": 8}     # the paper's 8 GDDR6-AiM channels


def config(it: Intent, model: Any, files: Path) -> dict[str, Any]:
    from archsim.dram.spec import load_spec

    if it.tp != 1:
        raise Refusal(f"{DESIGN} has no multi-device mode (one PIM memory beside one ASIC): tp {it.tp} is not "
                      "modelled")
    n = int(it.options.get("decode_tokens", 4))
    cfg: dict[str, Any] = {"system": RUNS_AS, "model": it.model, "tokens": n,
                           "context_start": max(0, it.mean_context - (n + 1) // 2), "batch": it.batch,
                           "baselines": False}
    if it.memory.generation == "paper":
        return {**cfg, **PAPER}
    preset = MEMORY[it.memory.generation]
    return {**cfg, "preset": preset, "channels": load_spec(preset).channels * it.memory.stacks}
