"""NewtonSim's controller for the NPU's stream, as a toggle: the stages where the NPU works alone (A: LayerNorm and
QKV GEMM, E: projection and FFN) of vs_code.py's cases without sub-batch interleaving, with archsim's controller and
with the controller NeuPIMs' code runs (mapping policy `npu_controller: bank_queues`: the engine's DRAMsim3
controller, whose convention brings NewtonSim's staggered refresh too; `refresh_stagger: true` says so explicitly);
writes reports/neupims/controller_toggle.csv.

Why: in NeuPIMs' code the NPU's QKV GEMM of 32 tokens has read its last weight on channel 0 well before its stage
ends (code_trace.csv: a_last_read_cycle of a_cycles, from its channel-0 command log; the code's own
mem_io_A_ch_*.tsv show no traffic on any channel after a_last_traffic_interval_end); the rest is the array working through instructions whose operands came late. NewtonSim's per-bank
command queues (128 entries) serve the banks round robin, a queue's first ready command, and let only a queue's
first entry precharge (NS/neupims_command_queue.cc:119-150, 336-360): a posted write at a queue's head waits while
reads of other banks keep the data bus busy, and its bank serves no read of another row meanwhile, so the
sequential weight stream is served far out of order (the first 1,000 requests of channel 0, in arrival order, all
served only by a_first1000_served_cycle, when a_served_by_then reads had issued) and the array, which runs its instructions in order,
waits for the late ones. archsim's FR-FCFS over one 4096-entry queue serves the oldest row hit first.

The engine's bank command queues take no PIM stream, so these runs put attention on the NPU (`attention: npu`;
stages A and E have no PIM work in either simulator); stage B is left out.

Run:  .venv/bin/python reports/neupims/controller_toggle.py [-o DIR]

Columns: case, stage, code_cycles; per arm archsim_cycles_<arm>, diff_pct_<arm>, abs_err_<arm>; moved_toward_code
(True: the stage is closer to the code with the code's controller and refresh, arm code_controller, than with
archsim's, arm archsim_controller). Arms: archsim_controller (mapping neupims_code, attention on the NPU),
code_controller (and npu_controller: bank_queues, refresh_stagger: true). The arms use copies of the mapping
written under DIR/runs.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import vs_code  # noqa: E402

# arm -> lines added to mapping neupims_code (after `attention: npu`)
ARMS = {"archsim_controller": [], "code_controller": ["npu_controller: bank_queues", "refresh_stagger: true"]}
STAGES = ("A", "E")
CASES = [c for c in vs_code.CASES if c.endswith("-off") and not c.startswith(("npupim-", "npuonly-"))]


def _mapping(runs: Path, arm: str) -> str:
    return vs_code.derived_mapping(runs, f"neupims_code_npu_attention_{arm}.yaml",
                                   {"attention: pim": "attention: npu"}, tuple(ARMS[arm]))


def build(out: Path) -> pd.DataFrame:
    code, runs = vs_code.toggle_inputs(out)
    rows = []
    for case in CASES:
        cyc = {}
        for arm in ARMS:
            cyc[arm] = vs_code.stage_cycles({**vs_code.config(case), "mapping": _mapping(runs, arm)}, runs)
        ref = code[code["case"] == case].set_index("stage")["code_cycles"]
        for s in STAGES:
            rows.append({"case": case, "stage": s, "code_cycles": int(ref[s]),
                         **{f"archsim_cycles_{arm}": int(cyc[arm][s]) for arm in ARMS}})
    df = vs_code.toggle_frame(rows, ARMS)
    df["moved_toward_code"] = df["abs_err_code_controller"] < df["abs_err_archsim_controller"]
    df.to_csv(out / "controller_toggle.csv", index=False)
    return df


def main(argv: list[str] | None = None) -> int:
    columns = ["case", "stage", "code_cycles", *(f"archsim_cycles_{a}" for a in ARMS), "moved_toward_code"]
    return vs_code.toggle_main(__doc__, build, argv, columns)


if __name__ == "__main__":
    raise SystemExit(main())
