"""PIM commands of a run in NeuPIMs' simulator beside archsim's, per case: writes code_commands.csv.

Run:  .venv/bin/python reports/neupims/code_commands.py LOG_DIR [LOG_DIR ...] [-o DIR]

Each LOG_DIR is the log folder of a run of NeuPIMs' simulator (benchmarks/neupims_code/run_neupims.py --log-dir),
named as the case it ran (vs_code.py's CASES); its dramsim3.json holds NewtonSim's per-channel command counts of
the whole run (NS/simple_stats.cc). archsim's counts are the same case's run (vs_code.py's configuration, cached
in the report's runs/), summed over its stages. Both are totals over the device's channels.

The committed table: the uni cases' runs (traces workloads/datasets/neupims_traces/micro) and the batch-512
case's NeuPIMs (SBI off) and npu+pim runs, e.g. `code_commands.py /work/ext/neupims/runs/uni{32,128,512,1024}-off
/work/ext/neupims/runs/{gpt3-7B_tp4_bs512_clb0_sbi-off,npupim-baseline_gpt3-7B_tp4_bs512_clb0}`.

The npu+pim branch's NewtonSim closes a GEMV's rows with ordinary PRECHARGEs (its num_pre_cmds, 1,155,258 against
NeuPIMs' 201,832 + 947,488 PIM_PRECHARGEs in the batch-512 case), so its PIM_PRECHARGE count is 0.

Columns: case, command (COMP, READRES, G_ACT, GWRITE, PIM_PRECHARGE), code_count, archsim_count,
abs_diff (|archsim - code|).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE))

# command -> (NewtonSim's statistic, archsim's stage column)
COMMANDS = {"COMP": ("num_comp_cmds", "n_COMP"), "READRES": ("num_readres_cmds", "n_READRES"),
            "G_ACT": ("num_gact_cmds", "n_G_ACT"), "GWRITE": ("num_gwrite_cmds", "n_GWRITE"),
            "PIM_PRECHARGE": ("num_pim_precharge_cmds", "n_PIM_PREb")}


def code_counts(log_dir: Path) -> dict[str, int]:
    """{command: count summed over channels} of the run whose logs are in `log_dir`."""
    stats = json.loads((log_dir / "dramsim3.json").read_text())
    return {cmd: sum(int(ch.get(key, 0)) for ch in stats.values()) for cmd, (key, _) in COMMANDS.items()}


def archsim_counts(stages: pd.DataFrame) -> dict[str, int]:
    """{command: count} of a run's stage table (sample 0, every stage and channel)."""
    st = stages[stages["sample"] == 0]
    return {cmd: int(st[col].sum()) if col in st else 0 for cmd, (_, col) in COMMANDS.items()}


def table(cases: dict[str, tuple[dict[str, int], dict[str, int]]]) -> pd.DataFrame:
    rows = [{"case": case, "command": cmd, "code_count": code[cmd], "archsim_count": ours[cmd],
             "abs_diff": abs(ours[cmd] - code[cmd])}
            for case, (code, ours) in cases.items() for cmd in COMMANDS]
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    import os

    import run_cache
    import vs_code

    from archsim.results import load_result

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log_dirs", type=Path, nargs="+", help="log folders of NeuPIMs' simulator, named by case")
    ap.add_argument("-o", "--out", type=Path, default=HERE, help="output folder (default: the report's own)")
    args = ap.parse_args(argv)
    os.chdir(HERE.parents[1])           # the cases' traces are repo-relative paths
    cases = {}
    for log_dir in args.log_dirs:
        case = log_dir.resolve().name
        if case not in vs_code.CASES:
            raise SystemExit(f"{log_dir}: not a case of vs_code.py (the folder is named by its case)")
        run = vs_code._run((vs_code.config(case), HERE / "runs"))
        cases[case] = (code_counts(log_dir), archsim_counts(load_result(run).tables["stages"]))
    df = table(cases)
    df.to_csv(args.out / "code_commands.csv", index=False)
    print(df.to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
