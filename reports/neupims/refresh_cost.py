"""What refresh costs each simulator's attention stage: NeuPIMs' code and archsim on the same cases with refresh and
without it, side by side; writes reports/neupims/refresh_cost.csv.

Cases: the code's NPU+PIM baseline with its issue path (npupim_refresh_toggle.py's arms) and NeuPIMs' own cases
without sub-batch interleaving (vs_code.py's, refresh_toggle.py's arms), where stage B is the attention alone. The
code refreshes its ranks in turn (NewtonSim's default RANK_LEVEL_STAGGERED, NS/configuration.cc:284,
NS/refresh.cc:13-37) and admits a GEMV only if its estimate fits before the next refresh; its cycles without refresh
are its runs with the device config's tREFI past the run's end (code_norefresh.csv, the driver's rows:
`benchmarks/neupims_code/run_neupims.py ... --newton-set tREFI=100000000 --case <case>_norefresh`, otherwise each
case's own command, runs/<case>/command.txt). archsim runs each case with `refresh: false` (none), its default refresh
(together: every rank's all-bank refresh at the same nREFI) and `refresh_stagger: true` (staggered).

Run:  .venv/bin/python reports/neupims/refresh_cost.py [-o DIR]

Columns: case, part (B: the stage; logits, attend: its two PIM operations), code_cycles, code_cycles_norefresh,
archsim_cycles_none / _together / _staggered, diff_pct_none (archsim / code - 1 without refresh on both sides, in
%), code_refresh_cost (the code's cycles with refresh minus without), archsim_refresh_cost_together / _staggered
(each arm minus none), refresh_cost_off_together / _staggered (their distance from the code's), staggered_closer
(True: the staggered rule's cost is the closer to the code's).
"""
from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import npupim_refresh_toggle  # noqa: E402
import refresh_toggle  # noqa: E402
import vs_code  # noqa: E402

from archsim.results import load_result  # noqa: E402

HERE = Path(__file__).resolve().parent
ARMS = ("none", "together", "staggered")
NPUPIM = npupim_refresh_toggle.CASE
CASES = [NPUPIM, *(c for c in refresh_toggle.CASES if c.endswith("sbi-off") and not c.startswith("uni"))]
PARTS = {"B": "", "logits": "logits_", "attend": "attend_"}


def configs(case: str, runs: Path) -> dict[str, dict]:
    """Each arm's archsim config of `case` (the toggles' own mappings, so their cached runs are reused)."""
    out = {}
    for arm in ARMS:
        cfg = vs_code.config(case)
        if case == NPUPIM:
            cfg["mapping"] = npupim_refresh_toggle.mapping(runs, "staggered" if arm == "staggered" else "together")
        elif arm == "staggered":
            cfg["mapping"] = refresh_toggle._staggered_mapping(runs)
        if arm == "none":
            cfg["refresh"] = False
        out[arm] = cfg
    return out


def build(out: Path) -> pd.DataFrame:
    code, runs = vs_code.toggle_inputs(out)
    norefresh = pd.read_csv(HERE / "code_norefresh.csv")
    rows = []
    for case in CASES:
        arms = {}
        for arm, cfg in configs(case, runs).items():
            res = load_result(vs_code._run((cfg, runs)))
            arms[arm] = {r["stage"]: r for r in vs_code.rows_of(case, res, code[code["case"] == case])}["B"]
        mine = norefresh[(norefresh["case"] == f"{case}_norefresh") & (norefresh["stage"] == "B")]
        assert len(mine) == 1, f"code_norefresh.csv has no stage B of {case}_norefresh"
        ops = dict(x.split("=") for x in mine["pim_ops"].iloc[0].split(";"))
        code_none = {"": int(mine["code_cycles"].iloc[0]), "logits_": int(ops["NeuPIMSLogitSoftmax"]),
                     "attend_": int(ops["NeuPIMSAttend"])}
        for part, key in PARTS.items():
            row = {"case": case, "part": part, "code_cycles": arms["together"][f"code_{key}cycles"],
                   "code_cycles_norefresh": code_none[key]}
            for arm in ARMS:
                row[f"archsim_cycles_{arm}"] = arms[arm][f"archsim_{key}cycles"]
            rows.append(row)
    df = pd.DataFrame(rows)
    df["diff_pct_none"] = (100 * (df["archsim_cycles_none"] / df["code_cycles_norefresh"] - 1)).round(1)
    df["code_refresh_cost"] = df["code_cycles"] - df["code_cycles_norefresh"]
    for arm in ("together", "staggered"):
        df[f"archsim_refresh_cost_{arm}"] = df[f"archsim_cycles_{arm}"] - df["archsim_cycles_none"]
        df[f"refresh_cost_off_{arm}"] = (df[f"archsim_refresh_cost_{arm}"] - df["code_refresh_cost"]).abs()
    df["staggered_closer"] = df["refresh_cost_off_staggered"] < df["refresh_cost_off_together"]
    df.to_csv(out / "refresh_cost.csv", index=False)
    return df


def main(argv: list[str] | None = None) -> int:
    columns = ["case", "part", "code_cycles", "code_cycles_norefresh", "archsim_cycles_none", "diff_pct_none",
               "code_refresh_cost", "archsim_refresh_cost_together", "archsim_refresh_cost_staggered"]
    return vs_code.toggle_main(__doc__, build, argv, columns)


if __name__ == "__main__":
    raise SystemExit(main())
