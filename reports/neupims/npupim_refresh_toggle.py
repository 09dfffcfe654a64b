"""The npu+pim branch's staggered refresh as a toggle on its NPU+PIM baseline: vs_code.py's case
npupim-baseline_gpt3-7B_tp4_bs512_clb0 with the code's PIM issue path (mapping neupims_code with `pim_issue:
per_cycle`, issue_toggle.py's arm) and the ranks of a channel refreshing together (archsim's controller, as that arm
is) or in turn (`refresh_stagger: true` added); writes reports/neupims/npupim_refresh_toggle.csv.

The branch's device config sets no refresh policy ([npu+pim] extern/NewtonSim/configs/HBM2_8Gb_x128_singlepim.ini),
so NewtonSim's default RANK_LEVEL_STAGGERED holds (NS/configuration.cc:284, NS/refresh.cc:13-37): one rank's refresh
every tREFI / ranks, and its Newton controller admits a GEMV (PIM_HEADER) only if its estimated latency fits before
the next one (NS/newton_command_queue.cc:54-67, 332-346; NS/channel_state.cc:271-329). A GEMV needs every bank of
the channel, so each rank's refresh stops the channel's PIM work.

Beside them the same case without refresh on both sides: archsim with `refresh: false`, the code with its device
config's tREFI past the run's end (code_norefresh.csv, the driver's rows of that run:
`benchmarks/neupims_code/run_neupims.py --sim-dir SRC_NPUPIM --case npupim-baseline_gpt3-7B_tp4_bs512_clb0_norefresh
--model-config SRC_NPUPIM/configs/model_configs/gpt3-7B.json --trace share-gpt2-bs512-ms7B-tp4-clb-0.csv
--sys-config SRC_NPUPIM/configs/system_configs/npupim.json --mem-config SRC_NPUPIM/configs/memory_configs/newton.json
--newton-set tREFI=100000000 --log-dir LOG --out code_norefresh.csv`), so that each simulator's refresh cost (its
cycles with refresh minus without) can be set side by side.

Run:  .venv/bin/python reports/neupims/npupim_refresh_toggle.py [-o DIR]

Columns: case, stage (A, B, E and the block), code_cycles, archsim_cycles_together, archsim_cycles_staggered (runs
cached in DIR/runs), abs_err_* and diff_pct_* (archsim / code - 1, in %), moved_toward_code (True: the staggered
refresh is closer to the code); for stage B its logits and attend parts the same way (code_logits_cycles, ...) and,
on the B row, channel 0's own ends (it is issued first and waits for no other channel: its PIM execution alone):
code_ch0_logits_end / archsim_ch0_logits_end_* (cycles from the logits' start; the code's from code_channels.csv,
the end of a 1,000-cycle log interval), code_ch0_attend_end / archsim_ch0_attend_end_* (from the attend's release),
abs_err_ch0_*, diff_pct_ch0_*, moved_ch0_*_toward_code; the same ends without refresh on both sides,
code_ch0_{part}_end_norefresh (code_channels_norefresh.csv) and archsim_ch0_{part}_end_none, diff_pct_ch0_{part}_none,
and what the refresh costs them: code_ch0_{part}_refresh_cost (with minus without), archsim_ch0_{part}_refresh_cost_
together / _staggered; ch0_{part}_gap_staggered (archsim's staggered end minus the code's, cycles) split into
ch0_{part}_gap_none (the same without refresh) and ch0_{part}_gap_refresh_staggered (archsim's staggered refresh cost
minus the code's). Without refresh (stage rows, and the B row's parts):
code_{part}cycles_norefresh, archsim_{part}cycles_none, abs_err_{part}none and diff_pct_{part}none (archsim / code - 1
without refresh, in %), code_{part}refresh_cost (the code's cycles with refresh minus without), archsim_{part}refresh_cost_together /
_staggered (archsim's, each arm minus `none`), refresh_cost_{part}off_together / _staggered (their distance from the
code's), refresh_cost_{part}closer (True: the staggered arm's refresh cost is closer to the code's than the together
arm's).
"""
from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import issue_toggle  # noqa: E402
import vs_code  # noqa: E402

from archsim import paths  # noqa: E402
from archsim.results import load_result  # noqa: E402

HERE = Path(__file__).resolve().parent
ARMS = ("together", "staggered")
CASE = issue_toggle.CASE


def mapping(runs: Path, arm: str) -> str:
    """issue_toggle.py's per_cycle mapping; the staggered arm with `refresh_stagger: true` appended as well."""
    if arm == "together":
        return issue_toggle.per_cycle_mapping(runs)
    text = paths.resolve("mappings", vs_code.CONFIG["mapping"]).read_text()
    assert "\nrefresh_stagger:" not in text, "mapping neupims_code sets refresh_stagger itself"
    return vs_code.derived_mapping(runs, "neupims_code_pim_issue_per_cycle_refresh_stagger.yaml",
                                   append=("pim_issue: per_cycle", "refresh_stagger: true"))


def channel0_ends(res) -> dict[str, int]:
    """Channel 0's last logits GEMV (from the stage's start) and last attend GEMV (from the attend's release) in
    stage B of layer 0 (the result's pim_units and stages tables)."""
    units = res.tables["pim_units"]
    row = units[(units["stage"] == "B") & (units["layer"] == 0) & (units["unit"] == 0)].iloc[0]
    st = res.tables["stages"]
    release = int(st.loc[(st["sample"] == 0) & (st["stage"] == "B") & (st["layer"] == 0),
                         "attend_release_cycle"].iloc[0])
    return {"logits": int(row["logits_end_cycle"]), "attend": int(row["end_cycle"]) - release}


def build(out: Path) -> pd.DataFrame:
    code, runs = vs_code.toggle_inputs(out)
    arms, ch0 = {}, {}
    for arm in ARMS:
        cfg = vs_code.config(CASE)
        cfg["mapping"] = mapping(runs, arm)
        res = load_result(vs_code._run((cfg, runs)))
        arms[arm] = {r["stage"]: r for r in vs_code.rows_of(CASE, res, code[code["case"] == CASE])}
        ch0[arm] = channel0_ends(res)
    # without refresh on both sides: archsim `refresh: false` (the together arm's mapping), the code's norefresh run
    cfg = vs_code.config(CASE)
    cfg["mapping"], cfg["refresh"] = mapping(runs, "together"), False
    norefresh = pd.read_csv(HERE / "code_norefresh.csv")
    norefresh = norefresh[(norefresh["case"] == f"{CASE}_norefresh") & (norefresh["stage"] != "block")]
    res_none = load_result(vs_code._run((cfg, runs)))
    none = {r["stage"]: r for r in vs_code.rows_of(CASE, res_none, norefresh)}
    ch0["none"] = channel0_ends(res_none)
    code_ch0 = pd.read_csv(HERE / "code_channels.csv").set_index("channel").loc[0]
    code_ch0_none = pd.read_csv(HERE / "code_channels_norefresh.csv").set_index("channel").loc[0]
    rows = []
    for stage, ref in arms["together"].items():
        row = vs_code.toggle_row(CASE, stage, arms, "together")
        for part in vs_code.PARTS:
            if pd.isna(ref.get(f"code_{part}cycles")):
                continue
            row[f"code_{part}cycles_norefresh"] = none[stage][f"code_{part}cycles"]
            row[f"archsim_{part}cycles_none"] = none[stage][f"archsim_{part}cycles"]
        if stage == "B":
            for part in ("logits", "attend"):
                row[f"code_ch0_{part}_end"] = int(code_ch0[f"{part}_end"])
                for arm in ARMS:
                    row[f"archsim_ch0_{part}_end_{arm}"] = ch0[arm][part]
                row[f"code_ch0_{part}_end_norefresh"] = int(code_ch0_none[f"{part}_end"])
                row[f"archsim_ch0_{part}_end_none"] = ch0["none"][part]
        rows.append(row)
    df = vs_code.part_errors(pd.DataFrame(rows), ARMS)
    for part in ("logits", "attend"):
        code_end = df[f"code_ch0_{part}_end"]
        for arm in ARMS:
            df[f"abs_err_ch0_{part}_{arm}"] = (df[f"archsim_ch0_{part}_end_{arm}"] - code_end).abs()
            df[f"diff_pct_ch0_{part}_{arm}"] = (100 * (df[f"archsim_ch0_{part}_end_{arm}"] / code_end - 1)).round(1)
        moved = df[f"abs_err_ch0_{part}_staggered"] < df[f"abs_err_ch0_{part}_together"]
        df[f"moved_ch0_{part}_toward_code"] = moved.where(code_end.notna())
        # without refresh on both sides, and what the refresh costs channel 0's end on each side
        code_none, archsim_none = df[f"code_ch0_{part}_end_norefresh"], df[f"archsim_ch0_{part}_end_none"]
        df[f"diff_pct_ch0_{part}_none"] = (100 * (archsim_none / code_none - 1)).round(1)
        df[f"code_ch0_{part}_refresh_cost"] = code_end - code_none
        for arm in ARMS:
            df[f"archsim_ch0_{part}_refresh_cost_{arm}"] = df[f"archsim_ch0_{part}_end_{arm}"] - archsim_none
        # channel 0's end off the code's under the staggered refresh (archsim - code, cycles) = off without refresh
        # + the difference of the two refresh costs
        df[f"ch0_{part}_gap_staggered"] = df[f"archsim_ch0_{part}_end_staggered"] - code_end
        df[f"ch0_{part}_gap_none"] = archsim_none - code_none
        df[f"ch0_{part}_gap_refresh_staggered"] = (df[f"archsim_ch0_{part}_refresh_cost_staggered"]
                                                   - df[f"code_ch0_{part}_refresh_cost"])
    for part in vs_code.PARTS:
        if f"code_{part}cycles_norefresh" not in df:
            continue
        df[f"abs_err_{part}none"] = (df[f"archsim_{part}cycles_none"] - df[f"code_{part}cycles_norefresh"]).abs()
        df[f"diff_pct_{part}none"] = (100 * (df[f"archsim_{part}cycles_none"] / df[f"code_{part}cycles_norefresh"] - 1)).round(1)
        df[f"code_{part}refresh_cost"] = df[f"code_{part}cycles"] - df[f"code_{part}cycles_norefresh"]
        for arm in ARMS:
            df[f"archsim_{part}refresh_cost_{arm}"] = df[f"archsim_{part}cycles_{arm}"] - df[f"archsim_{part}cycles_none"]
        for arm in ARMS:
            df[f"refresh_cost_{part}off_{arm}"] = (df[f"archsim_{part}refresh_cost_{arm}"] - df[f"code_{part}refresh_cost"]).abs()
        closer = df[f"refresh_cost_{part}off_staggered"] < df[f"refresh_cost_{part}off_together"]
        df[f"refresh_cost_{part}closer"] = closer.where(df[f"code_{part}cycles"].notna())
    df.to_csv(out / "npupim_refresh_toggle.csv", index=False)
    return df


def main(argv: list[str] | None = None) -> int:
    columns = ["case", "stage", "code_cycles", "archsim_cycles_together", "archsim_cycles_staggered",
               "diff_pct_together", "diff_pct_staggered", "moved_toward_code"]
    return vs_code.toggle_main(__doc__, build, argv, columns)


if __name__ == "__main__":
    raise SystemExit(main())
