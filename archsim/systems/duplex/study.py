"""Duplex in the which-PIM study (archsim/study): an intent mapped onto system `duplex`'s keys.

An H100-class xPU and Logic-PIM on each stack's logic die (bank bundles read over added TSVs), `tp` devices;
the batch's requests all arrive at once and are served by continuous batching, the decode-only stages giving
the decode step. On HBM2 its layout uses the 2 bundle spaces of a pseudo-channel (mappings/duplex_hbm2.yaml).
Option `requests` (default: the batch) serves more requests than fit in the batch at once, as the paper's runs
do (128 requests, batch 64).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from archsim.study.intent import Intent

DESIGN = "Duplex"
STYLE = "Logic-PIM on the HBM logic die beside an xPU"
RUNS_AS = "duplex"
COMPUTE = ("xPU: H100-class roofline, 989 TFLOPS FP16 at the stacks' bandwidth (archsim/presets/duplex/devices.yaml; "
           "its paper's model); Logic-PIM 32 x 512 MACs per stack, its bundle streams on the channel engine")
MEMORY = {"hbm2": "HBM2_2Gbps_LogicPIM", "hbm3": "HBM3_6400Mbps_LogicPIM"}


def config(it: Intent, model: Any, files: Path) -> dict[str, Any]:
    cfg: dict[str, Any] = {"system": RUNS_AS, "model": it.model, "device": "duplex", "devices": it.tp,
                           "requests": int(it.options.get("requests", it.batch)), "max_batch": it.batch, "input_len": it.input_len,
                           "output_len": it.output_len}
    if it.memory.generation == "paper":
        return cfg
    cfg.update(preset=MEMORY[it.memory.generation], stacks=it.memory.stacks)
    if it.memory.generation == "hbm2":
        cfg["mapping"] = "duplex_hbm2"
    return cfg
