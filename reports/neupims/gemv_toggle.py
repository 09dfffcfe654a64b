"""The code's fused GEMV as a toggle: NeuPIMs' cases without sub-batch interleaving with a row set's last GEMV issued
as archsim issues it (split) and as NeuPIMs' code does (fused), beside the code; writes
reports/neupims/gemv_toggle.csv.

NeuPIMs' own operations issue each GEMV as one PIM_COMPS_READRES (NeuPIMSLogitSoftmax.cc:253-260,
NeuPIMSAttend.cc:226-233), which NewtonSim times as one command: a PIM precharge waits only AL + tRTP after it
(NS/timing.cc:429-441), only the next GEMV waits for its COMPs (NS/channel_state.cc:484-505). archsim issues the COMPs
one by one and closes the rows after the last (the hardware). The mapping policy `pim_gemv: fused` takes the code's
timing (with the DRAM standard neupims_code_fused: neupims_code with the code's COMPS_READRES, docs/presets.md); `split` is every other run's.

Cases: vs_code.py's model cases and uni cases without sub-batch interleaving (stage B is the attention alone), with
refresh as each simulator has it by default; and the model cases without refresh on both sides (archsim `refresh:
false`, the code's runs with tREFI past the run's end: code_norefresh.csv, as refresh_cost.py).

Run:  .venv/bin/python reports/neupims/gemv_toggle.py [-o DIR]

Arms: split (mapping neupims_code as it is), fused (`pim_gemv: fused`) and, with refresh, fused_staggered (also the
code's refresh rule, the ranks in turn: `refresh_stagger: true`, refresh_toggle.py; without refresh there is no
refresh to stagger: empty).

Columns: case, refresh (on / off), part (B: the stage; logits, attend: its two PIM operations), code_cycles,
archsim_cycles_<arm>, diff_pct_<arm> (archsim / code - 1, in %), abs_err_<arm>, closer (True: the fused arm is the
nearer to the code than split), closer_staggered (the same of fused_staggered; False without refresh).
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

HERE = Path(__file__).resolve().parent
ARMS = ("split", "fused", "fused_staggered")
CASES = [c for c in vs_code.CASES if c.endswith("-off") and not c.startswith(("npupim-", "npuonly-"))]
NOREFRESH = [c for c in CASES if not c.startswith("uni")]      # the cases the code was run without refresh
PARTS = {"B": "", "logits": "logits_", "attend": "attend_"}
FUSED_DRAM = {"standard": "neupims_code_fused"}      # neupims_code (one command a cycle) with the fused GEMV


def fused_mapping(runs: Path, staggered: bool = False) -> str:
    """Mapping neupims_code with `pim_gemv: fused` (and, `staggered`, the code's refresh rule too:
    `refresh_stagger: true`, refresh_toggle.py)."""
    if not staggered:
        return vs_code.with_key(runs, "neupims_code_pim_gemv_fused.yaml", "pim_gemv", "fused")
    return vs_code.derived_mapping(runs, "neupims_code_pim_gemv_fused_refresh_staggered.yaml",
                                   append=("pim_gemv: fused", "refresh_stagger: true"))


def _code_norefresh(norefresh: pd.DataFrame, case: str) -> dict[str, int]:
    mine = norefresh[(norefresh["case"] == f"{case}_norefresh") & (norefresh["stage"] == "B")]
    assert len(mine) == 1, f"code_norefresh.csv has no stage B of {case}_norefresh"
    ops = dict(x.split("=") for x in mine["pim_ops"].iloc[0].split(";"))
    return {"": int(mine["code_cycles"].iloc[0]), "logits_": int(ops["NeuPIMSLogitSoftmax"]),
            "attend_": int(ops["NeuPIMSAttend"])}


def build(out: Path) -> pd.DataFrame:
    code, runs = vs_code.toggle_inputs(out)
    norefresh = pd.read_csv(HERE / "code_norefresh.csv")
    mappings = {"fused": fused_mapping(runs), "fused_staggered": fused_mapping(runs, staggered=True)}
    rows = []
    for refresh in ("on", "off"):
        for case in CASES if refresh == "on" else NOREFRESH:
            arms = {}
            for arm in ARMS if refresh == "on" else ARMS[:2]:      # without refresh no refresh rule to stagger
                cfg = vs_code.config(case)
                if arm in mappings:
                    cfg["mapping"] = mappings[arm]
                    cfg["dram"] = dict(FUSED_DRAM)
                if refresh == "off":
                    cfg["refresh"] = False
                res = load_result(vs_code._run((cfg, runs)))
                arms[arm] = {r["stage"]: r for r in vs_code.rows_of(case, res, code[code["case"] == case])}["B"]
            code_none = _code_norefresh(norefresh, case) if refresh == "off" else {}
            for part, key in PARTS.items():
                row = {"case": case, "refresh": refresh, "part": part,
                       "code_cycles": code_none[key] if refresh == "off" else arms["split"][f"code_{key}cycles"]}
                for arm in ARMS:
                    row[f"archsim_cycles_{arm}"] = arms[arm][f"archsim_{key}cycles"] if arm in arms else None
                rows.append(row)
    df = vs_code.toggle_frame(rows, ARMS)
    df["closer"] = df["abs_err_fused"] < df["abs_err_split"]
    df["closer_staggered"] = df["abs_err_fused_staggered"] < df["abs_err_split"]
    df.to_csv(out / "gemv_toggle.csv", index=False)
    return df


def main(argv: list[str] | None = None) -> int:
    columns = ["case", "refresh", "part", "code_cycles", "archsim_cycles_split", "archsim_cycles_fused",
               "diff_pct_split", "diff_pct_fused", "diff_pct_fused_staggered"]
    return vs_code.toggle_main(__doc__, build, argv, columns)


if __name__ == "__main__":
    raise SystemExit(main())
