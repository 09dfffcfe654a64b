"""NeuPIMs' code's three rules for the NPU beside PIM, as toggles: vs_code.py's model cases with archsim's defaults,
with each of the code's rules, and with all three (vs_code.csv); writes reports/neupims/beside_pim_toggle.csv.

The rules (docs/presets.md "Mapping neupims_code"):
  attend_start        head: each channel starts a head's attend GEMVs when that head's softmax is done (archsim's
                      default); all_logits: once every channel's logits and softmaxes are done (the code's PIM
                      program runs NeuPIMSAttend after NeuPIMSLogitSoftmax)
  pim_reserves_banks  true: a PIM open waiting to issue keeps the NPU from opening its banks (archsim's controller);
                      false: the NPU opens any bank timing allows (NewtonSim reserves no bank for PIM)
  command bus         dual: HBM2's separate row and column command buses (standard neupims); single: one command a
                      cycle per channel, as NewtonSim's NeuPIMs controller issues them (standard neupims_code)

Run:  .venv/bin/python reports/neupims/beside_pim_toggle.py [-o DIR]

Columns: case, stage, code_cycles; per arm archsim_cycles_<arm>, abs_err_<arm> (the distance from the code) and
diff_pct_<arm>; moved_<from>_to_<to> (True: the stage is closer to the code with arm <to> than with <from>) for the
steps in STEPS. Arms: head_reserved_dual (archsim's defaults), head_reserved_single, all_logits_reserved_dual,
head_free_dual, all_logits_free_dual (the code's two scheduling rules on HBM2's buses) and code (all three:
vs_code.csv's runs, cached in DIR/runs). The arms with archsim's value of a mapping key use copies of the mapping
with only that key changed, written under DIR/runs.
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

CODE_LINES = {"attend_start": "attend_start: all_logits", "pim_reserves_banks": "pim_reserves_banks: false"}
DEFAULT_LINES = {"attend_start": "attend_start: head", "pim_reserves_banks": "pim_reserves_banks: true"}
# arm -> (the mapping keys set to archsim's defaults, the code's single command bus)
ARMS = {"head_reserved_dual": (("attend_start", "pim_reserves_banks"), False),
        "head_reserved_single": (("attend_start", "pim_reserves_banks"), True),
        "all_logits_reserved_dual": (("pim_reserves_banks",), False), "head_free_dual": (("attend_start",), False),
        "all_logits_free_dual": ((), False), "code": ((), True)}
FILES = {("attend_start", "pim_reserves_banks"): "neupims_code_attend_head_reserves_banks.yaml",
         ("pim_reserves_banks",): "neupims_code_pim_reserves_banks.yaml", ("attend_start",): "neupims_code_attend_start_head.yaml"}
# (from arm, to arm): each rule alone from archsim's defaults, the bus added to the two scheduling rules, all three
STEPS = [("head_reserved_dual", "all_logits_reserved_dual"), ("head_reserved_dual", "head_free_dual"),
         ("head_reserved_dual", "head_reserved_single"), ("head_reserved_dual", "all_logits_free_dual"),
         ("all_logits_free_dual", "code"), ("head_reserved_dual", "code")]
# the cases whose PIM attention has several requests per channel: the three model cases, with and without
# sub-batch interleaving (stage B of a case without it is the whole batch's attention alone)
CASES = [c for c in vs_code.CASES if c.startswith("gpt3-")]


def _mapping(runs: Path, keys: tuple[str, ...]) -> str | None:
    """The mapping file with `keys` at archsim's defaults (None: neupims_code itself)."""
    if not keys:
        return None
    return vs_code.derived_mapping(runs, FILES[keys], {CODE_LINES[k]: DEFAULT_LINES[k] for k in keys})


def build(out: Path) -> pd.DataFrame:
    code, runs = vs_code.toggle_inputs(out)
    rows = []
    for case in CASES:
        cyc = {}
        for arm, (keys, single) in ARMS.items():
            cfg = vs_code.config(case)
            mapping = _mapping(runs, keys)
            if mapping is not None:
                cfg["mapping"] = mapping
            if not single:
                del cfg["dram"]             # HBM2's separate row and column command buses (standard neupims)
            st = load_result(vs_code._run((cfg, runs))).tables["stages"]
            st = st[st["sample"] == 0].drop_duplicates("stage")      # a stage's first layer, as vs_code.csv
            cyc[arm] = dict(zip(st["stage"], st["cycles"], strict=True))
        ref = code[(code["case"] == case) & (code["stage"] != "block")].set_index("stage")["code_cycles"]
        for s, c in ref.items():
            rows.append({"case": case, "stage": s, "code_cycles": int(c),
                         **{f"archsim_cycles_{arm}": int(cyc[arm][s]) for arm in ARMS}})
    df = pd.DataFrame(rows)
    for arm in ARMS:
        df[f"abs_err_{arm}"] = (df[f"archsim_cycles_{arm}"] - df["code_cycles"]).abs()
        df[f"diff_pct_{arm}"] = (100 * (df[f"archsim_cycles_{arm}"] / df["code_cycles"] - 1)).round(1)
    for a, b in STEPS:
        df[f"moved_{a}_to_{b}"] = df[f"abs_err_{b}"] < df[f"abs_err_{a}"]
    df.to_csv(out / "beside_pim_toggle.csv", index=False)
    return df


def main(argv: list[str] | None = None) -> int:
    columns = ["case", "stage", "code_cycles", *(f"archsim_cycles_{a}" for a in ARMS)]
    return vs_code.toggle_main(__doc__, build, argv, columns)


if __name__ == "__main__":
    raise SystemExit(main())
