"""reports/neupims/code_commands.py: NewtonSim's PIM command counts (a run's dramsim3.json, summed over channels)
beside archsim's (the case's run, summed over stages), and the committed table against the committed runs."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "reports" / "neupims"))

import code_commands  # noqa: E402
import run_cache  # noqa: E402
import vs_code  # noqa: E402

from archsim.results import load_result  # noqa: E402

HERE = ROOT / "reports" / "neupims"


def test_counts_are_summed_over_channels_and_stages(tmp_path):
    stats = {"0": {"num_comp_cmds": 3, "num_gact_cmds": 8, "num_readres_cmds": 1, "num_gwrite_cmds": 2},
             "1": {"num_comp_cmds": 5, "num_gact_cmds": 8, "num_readres_cmds": 1, "num_gwrite_cmds": 2,
                   "num_pim_precharge_cmds": 4}}
    (tmp_path / "dramsim3.json").write_text(json.dumps(stats))
    code = code_commands.code_counts(tmp_path)
    assert code == {"COMP": 8, "READRES": 2, "G_ACT": 16, "GWRITE": 4, "PIM_PRECHARGE": 4}
    stages = pd.DataFrame({"sample": [0, 0, 1], "stage": ["A", "B", "B"], "n_COMP": [0, 8, 99],
                           "n_READRES": [0, 2, 99], "n_G_ACT": [0, 17, 99], "n_GWRITE": [1, 3, 99],
                           "n_PIM_PREb": [0, 4, 99]})
    ours = code_commands.archsim_counts(stages)
    assert ours == {"COMP": 8, "READRES": 2, "G_ACT": 17, "GWRITE": 4, "PIM_PRECHARGE": 4}
    df = code_commands.table({"uni32-off": (code, ours)}).set_index("command")
    assert df.loc["G_ACT", "abs_diff"] == 1 and df["abs_diff"].drop("G_ACT").eq(0).all()


def test_a_folder_not_named_by_a_case_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)         # main() moves to the repository; the fixture moves back
    with pytest.raises(SystemExit, match="not a case of vs_code.py"):
        code_commands.main([str(tmp_path / "not-a-case")])


def test_the_committed_table_holds_the_committed_runs(monkeypatch):
    monkeypatch.chdir(ROOT)
    df = pd.read_csv(HERE / "code_commands.csv")
    for case, rows in df.groupby("case"):
        ours = code_commands.archsim_counts(
            load_result(run_cache.run_path(HERE / "runs", vs_code.config(case))).tables["stages"])
        assert dict(zip(rows["command"], rows["archsim_count"], strict=True)) == ours, case
    assert (df["abs_diff"] == (df["archsim_count"] - df["code_count"]).abs()).all()
