"""The NPU's queue depth beside PIM, as a toggle: the sub-batch-interleaving cases of vs_code.py with mapping
neupims_code as it is (`request_queue: 4096`, the window of NeuPIMs' per-bank command queues) and with archsim's
default 32-entry read and write queues; writes reports/neupims/queue_toggle.csv.

Run:  .venv/bin/python reports/neupims/queue_toggle.py [-o DIR]

Columns: case, stage (C, D, E, F), code_cycles, then archsim's cycles at each depth (archsim_cycles_q32,
archsim_cycles_q4096), their distances from the code (abs_err_q32, abs_err_q4096) and moved_toward_code.
The 4096 runs are vs_code.py's own (cached in DIR/runs); the 32 runs use a copy of the mapping with only
request_queue changed, written under DIR/runs.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import vs_code  # noqa: E402

DEPTHS = (32, 4096)
STAGES = ("C", "D", "E", "F")


def build(out: Path) -> pd.DataFrame:
    code, runs = vs_code.toggle_inputs(out)
    shallow = vs_code.derived_mapping(runs, "neupims_code_request_queue_32.yaml",
                                      {"request_queue: 4096": "request_queue: 32"})
    rows = []
    for case in (c for c in vs_code.CASES if c.endswith("sbi-on")):
        cyc = {}
        for depth in DEPTHS:
            cfg = vs_code.config(case)
            if depth != 4096:
                cfg["mapping"] = shallow
            cyc[depth] = vs_code.stage_cycles(cfg, runs)
        ref = code[code["case"] == case].set_index("stage")["code_cycles"]
        for s in STAGES:
            rows.append({"case": case, "stage": s, "code_cycles": int(ref[s]),
                         **{f"archsim_cycles_q{d}": int(cyc[d][s]) for d in DEPTHS}})
    df = pd.DataFrame(rows)
    # each stage's distance from the code at each depth, and whether the code's window moves it closer (a signed
    # sum over stages lets one stage's excess cancel another's shortfall; these do not)
    for d in DEPTHS:
        df[f"abs_err_q{d}"] = (df[f"archsim_cycles_q{d}"] - df["code_cycles"]).abs()
    df["moved_toward_code"] = df[f"abs_err_q{DEPTHS[1]}"] < df[f"abs_err_q{DEPTHS[0]}"]
    df.to_csv(out / "queue_toggle.csv", index=False)
    return df


def main(argv: list[str] | None = None) -> int:
    return vs_code.toggle_main(__doc__, build, argv)


if __name__ == "__main__":
    raise SystemExit(main())
