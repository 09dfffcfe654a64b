"""NeuPIMs' code's refresh as a toggle: vs_code.py's NeuPIMs cases with the ranks of a channel refreshing together
(mapping neupims_code as it is: archsim's controller, every rank's all-bank refresh due at the same nREFI) and in
turn (the mapping policy `refresh_stagger: true`: one rank every nREFI / ranks, NewtonSim's RANK_LEVEL_STAGGERED
default, NS/configuration.cc:284, NS/refresh.cc:13-28); writes reports/neupims/refresh_toggle.csv.

Run:  .venv/bin/python reports/neupims/refresh_toggle.py [-o DIR]

Columns: case, stage, code_cycles, archsim_cycles_together, archsim_cycles_staggered (vs_code.csv's runs, cached in
DIR/runs), their distances from the code (abs_err_*), diff_pct_*, moved_toward_code (True: the stage is closer to
the code with the staggered refresh); for the PIM stages the logits and attend parts the same way (code_attend_cycles,
archsim_attend_cycles_*, ...). The `staggered` arm uses a copy of the mapping with refresh_stagger added, written
under DIR/runs.
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

ARMS = ("together", "staggered")
# the NeuPIMs cases (the baselines run other systems)
CASES = [c for c in vs_code.CASES if not c.startswith(("npupim-", "npuonly-"))]


def _staggered_mapping(runs: Path) -> str:
    return vs_code.with_key(runs, "neupims_code_refresh_staggered.yaml", "refresh_stagger", "true")


def build(out: Path) -> pd.DataFrame:
    code, runs = vs_code.toggle_inputs(out)
    staggered = _staggered_mapping(runs)
    rows = []
    for case in CASES:
        arms = {}
        for arm in ARMS:
            cfg = vs_code.config(case)
            if arm == "staggered":
                cfg["mapping"] = staggered
            res = load_result(vs_code._run((cfg, runs)))
            arms[arm] = {r["stage"]: r for r in vs_code.rows_of(case, res, code[code["case"] == case])}
        rows += [vs_code.toggle_row(case, stage, arms, "staggered") for stage in arms["staggered"]]
    df = vs_code.part_errors(pd.DataFrame(rows), ARMS)
    df.to_csv(out / "refresh_toggle.csv", index=False)
    return df


def main(argv: list[str] | None = None) -> int:
    columns = ["case", "stage", "code_cycles", "archsim_cycles_together", "archsim_cycles_staggered",
               "moved_toward_code"]
    return vs_code.toggle_main(__doc__, build, argv, columns)


if __name__ == "__main__":
    raise SystemExit(main())
