"""Where issue_toggle.py's remaining gap sits: in the NPU+PIM baseline case with `pim_issue: per_cycle`, when each
channel's logits and attend finished in archsim (the run's `pim_units` table, stage B, layer 0) beside the code's
per-channel ends (code_channels.csv, from the npu+pim run's traffic logs); writes reports/neupims/issue_channels.csv.

The channels are issued in turn, so the spread from the first channel's end to the last's is the issue path's, and
the first channel's own end (it waits for no other channel) is its PIM execution alone.

Run:  .venv/bin/python reports/neupims/issue_channels.py [-o DIR]

Columns: channel, code_logits_end, archsim_logits_end (cycles from the logits' start), diff_logits (archsim - code),
code_attend_end, archsim_attend_end (cycles from the attend's release), diff_attend, and for each end its distance
after channel 0's (*_after_ch0: the spread the channel-after-channel issue makes). The code's ends are those of
1,000-cycle log intervals.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE))

import issue_toggle  # noqa: E402
import vs_code  # noqa: E402

from archsim.results import load_result  # noqa: E402


def build(out: Path) -> pd.DataFrame:
    _code, runs = vs_code.toggle_inputs(out)
    cfg = vs_code.config(issue_toggle.CASE)
    cfg["mapping"] = issue_toggle.per_cycle_mapping(runs)
    res = load_result(vs_code._run((cfg, runs)))
    units = res.tables["pim_units"]
    units = units[(units["stage"] == "B") & (units["layer"] == 0)].set_index("unit")
    st = res.tables["stages"]
    release = int(st.loc[(st["sample"] == 0) & (st["stage"] == "B") & (st["layer"] == 0),
                         "attend_release_cycle"].iloc[0])
    code = pd.read_csv(HERE / "code_channels.csv").set_index("channel")
    df = pd.DataFrame({"code_logits_end": code["logits_end"],
                       "archsim_logits_end": units["logits_end_cycle"].astype(int)})
    df["diff_logits"] = df["archsim_logits_end"] - df["code_logits_end"]
    df["code_attend_end"] = code["attend_end"]
    df["archsim_attend_end"] = units["end_cycle"].astype(int) - release
    df["diff_attend"] = df["archsim_attend_end"] - df["code_attend_end"]
    for side in ("code", "archsim"):
        for part in ("logits", "attend"):
            df[f"{side}_{part}_after_ch0"] = df[f"{side}_{part}_end"] - df.loc[0, f"{side}_{part}_end"]
    df = df.rename_axis("channel").reset_index()
    df.to_csv(out / "issue_channels.csv", index=False)
    return df


def main(argv: list[str] | None = None) -> int:
    return vs_code.toggle_main(__doc__, build, argv)


if __name__ == "__main__":
    raise SystemExit(main())
