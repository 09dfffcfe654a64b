"""T3 in the which-PIM study (archsim/study): an intent mapped onto system `t3_decode`'s keys.

A GPU (80 CUs at 1.4 GHz) whose tensor-parallel GEMMs are fused with their reduce-scatter by T3's tracker, the
updates done near the banks (NMC); the decode step of the whole model at the requests' mean context, T3-MCA.
T3 overlaps a collective: with one device there is none, so tp 1 is refused.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from archsim.study.intent import Intent, Refusal

DESIGN = "T3"
STYLE = "near-memory update (NMC) of GEMM outputs fused with the reduce-scatter"
RUNS_AS = "t3_decode"
COMPUTE = ("GPU: 80 CUs at 1.4 GHz, 115 TFLOPS FP16 (archsim/presets/t3/t3_paper.yaml), its GEMMs in 128 x 128 "
           "output tiles with their operand reads on the channel engine (no split-K: a decode GEMM uses few CUs)")
MEMORY = {"hbm2": "HBM2_2Gbps_NMC", "hbm3": "HBM3_6400Mbps_NMC"}
STREAM_MAPPING = "RoRaBgBaCoCh"


def config(it: Intent, model: Any, files: Path) -> dict[str, Any]:
    from archsim.dram.spec import load_spec

    if it.tp < 2:
        raise Refusal(f"{DESIGN} overlaps a tensor-parallel collective: with tp 1 there is none (needs tp >= 2)")
    if model.n_heads % it.tp:
        raise Refusal(f"{model.name} has {model.n_heads} heads: tp {it.tp} does not divide them")
    cfg: dict[str, Any] = {"system": RUNS_AS, "model": it.model, "tp": it.tp, "batch": it.batch,
                           "context": it.mean_context, "configuration": it.options.get("configuration", "t3-mca")}
    if it.memory.generation == "paper":
        return cfg
    preset = MEMORY[it.memory.generation]
    # the GPU's streams mapped as the study's NPU streams are (HBM2_2Gbps_Newton's mapping): channels lowest,
    # then a row's columns (the T3 preset's IPoly hash is written for its own 32 HBM2 channels)
    return {**cfg, "memory_preset": preset, "channels": load_spec(preset).channels * it.memory.stacks,
            "memory_mapping": STREAM_MAPPING}
