"""NeuPIMs in the which-PIM study (archsim/study): an intent mapped onto system `neupims`'s keys.

An NPU (8 weight-stationary 128 x 128 arrays, archsim/presets/npu/neupims_npu.yaml) runs the GEMMs, Newton-style
dual-row-buffer PIM units (a pseudo-channel of each stack) the attention GEMVs, with sub-batch interleaving;
`tp` devices. The batch's requests are `batch` copies of one request (prompt input_len, output_len), each at a
uniformly drawn point of its generation (iteration mode over a trace of them). Options: `layers` (simulated,
the rest extrapolated: the scope says so), `samples`, and `dataset` (the batches of one of NeuPIMs' datasets, e.g.
`sharegpt`, instead of the study's identical requests: the paper's workload, for its configuration's point).
"""
from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from archsim.study.intent import Intent, Refusal

DESIGN = "NeuPIMs"
STYLE = "Newton-style dual-row-buffer PIM beside an NPU"
RUNS_AS = "neupims"
COMPUTE = ("NPU: 8 systolic arrays of 128 x 128 at 1 GHz with vector units (archsim/presets/npu/neupims_npu.yaml), "
           "tile by tile with its DMA on the channel engine")
MEMORY = {"hbm2": "HBM2_2Gbps_Newton", "hbm3": "HBM3_6400Mbps_Newton"}
PAPER = {"preset": "NeuPIMs_HBM2_Dual"}          # NeuPIMs' own device: 32 channels of NewtonSim's HBM2


def trace(it: Intent, files: Path) -> str:
    """A trace of `batch` requests of the study's lengths, written once in the study's input files folder; named
    relative to the working directory when it lies inside it, so a study run from a checkout's root keeps no
    machine's path in its results and resumes in another clone without re-running its NeuPIMs points."""
    files.mkdir(parents=True, exist_ok=True)
    path = files / f"requests-{it.batch}x{it.input_len}+{it.output_len}.csv"
    if not path.is_file():
        tmp = path.with_suffix(".tmp")
        with open(tmp, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["arrival_s", "prompt_tokens", "output_tokens"])
            w.writerows([0.0, it.input_len, it.output_len] for _ in range(it.batch))
        tmp.replace(path)
    path = path.resolve()
    return str(path.relative_to(Path.cwd().resolve()) if path.is_relative_to(Path.cwd().resolve()) else path)


def config(it: Intent, model: Any, files: Path) -> dict[str, Any]:
    from archsim.dram.spec import load_spec

    if model.n_heads % it.tp:
        raise Refusal(f"{model.name} has {model.n_heads} heads: tp {it.tp} does not divide them")
    if model.n_kv_heads % it.tp:
        raise Refusal(f"{model.name} has {model.n_kv_heads} KV heads: tp {it.tp} does not divide them")
    cfg: dict[str, Any] = {"system": RUNS_AS, "model": it.model, "tp": it.tp, "batch": it.batch,
                           "dataset": it.options.get("dataset") or trace(it, files), "mode": "iteration",
                           **{k: it.options[k] for k in ("layers", "samples") if k in it.options}}
    if it.memory.generation == "paper":
        return {**cfg, **PAPER}
    preset = MEMORY[it.memory.generation]
    return {**cfg, "preset": preset, "dram": {"org": {"channels": load_spec(preset).channels * it.memory.stacks}}}
