"""The npu+pim branch's PIM issue path as a toggle: vs_code.py's NPU+PIM baseline case (system npu_pim, mapping
neupims_code) with the attention's PIM commands entering the controller at the command bus's own rate (the mapping
as it is: `pim_issue: bus`) and as that branch's core hands them over (`pim_issue: per_cycle`: one PIM instruction,
GWRITE, PIM_HEADER, COMP or READRES, per NPU cycle for the whole device, [npu+pim] src/NeuPIMSystolicWS.cc:150-178;
the batch consolidated channel after channel, [npu+pim] src/scheduler/Scheduler.cc:252-264; the logits of the whole
batch one PIM tile, then the attend's); writes reports/neupims/issue_toggle.csv.

Run:  .venv/bin/python reports/neupims/issue_toggle.py [-o DIR]

Columns: case, stage (A, B, E and the block), code_cycles, archsim_cycles_bus, archsim_cycles_per_cycle (runs cached
in DIR/runs), diff_pct_* (archsim / code - 1, in %), abs_err_*, moved_toward_code (True: per_cycle is closer to the
code than bus); for stage B the logits and attend parts the same way (code_logits_cycles, archsim_logits_cycles_*,
...), and pim_instructions (the PIM instructions the per_cycle arm's core handed over; its stage B can take no fewer
cycles). The per_cycle arm uses a copy of the mapping with `pim_issue: per_cycle` added, written under DIR/runs.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import vs_code  # noqa: E402

from archsim.results import load_result  # noqa: E402

ARMS = ("bus", "per_cycle")
CASE = "npupim-baseline_gpt3-7B_tp4_bs512_clb0"


def per_cycle_mapping(runs: Path) -> str:
    """Mapping neupims_code with `pim_issue: per_cycle` (its attend_start is all_logits, which per_cycle needs)."""
    return vs_code.with_key(runs, "neupims_code_pim_issue_per_cycle.yaml", "pim_issue", "per_cycle")


def build(out: Path) -> pd.DataFrame:
    code, runs = vs_code.toggle_inputs(out)
    arms, instructions = {}, 0
    for arm in ARMS:
        cfg = vs_code.config(CASE)
        if arm == "per_cycle":
            cfg["mapping"] = per_cycle_mapping(runs)
        res = load_result(vs_code._run((cfg, runs)))
        arms[arm] = {r["stage"]: r for r in vs_code.rows_of(CASE, res, code[code["case"] == CASE])}
        if arm == "per_cycle":
            st = res.tables["stages"]
            instructions = int(st.loc[(st["sample"] == 0) & (st["stage"] == "B"), "pim_instructions"].iloc[0])
    rows = []
    for stage in arms["per_cycle"]:
        row = vs_code.toggle_row(CASE, stage, arms, "per_cycle")
        row["pim_instructions"] = instructions if stage == "B" else 0
        rows.append(row)
    df = vs_code.part_errors(pd.DataFrame(rows), ARMS)
    df.to_csv(out / "issue_toggle.csv", index=False)
    return df


def main(argv: list[str] | None = None) -> int:
    columns = ["case", "stage", "code_cycles", "archsim_cycles_bus", "archsim_cycles_per_cycle", "diff_pct_bus",
               "diff_pct_per_cycle", "moved_toward_code"]
    return vs_code.toggle_main(__doc__, build, argv, columns)


if __name__ == "__main__":
    raise SystemExit(main())
