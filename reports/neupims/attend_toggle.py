"""When PIM starts the attend GEMVs, as a toggle: vs_code.py's model cases with mapping neupims_code as it is
(`attend_start: all_logits`: every channel's attend once the last channel's logits and softmaxes are done, as
NeuPIMs' code runs its PIM program, NeuPIMSAttend after NeuPIMSLogitSoftmax) and with each channel starting a
head's attend when its own softmax is done (`attend_start: head`, archsim's default); writes
reports/neupims/attend_toggle.csv.

Run:  .venv/bin/python reports/neupims/attend_toggle.py [-o DIR]

Columns: case, stage, code_cycles, archsim_cycles_head, archsim_cycles_all_logits, their distances from the code
(abs_err_head, abs_err_all_logits) and moved_toward_code (the code's barrier brings the stage closer to the code).
The all_logits runs are vs_code.py's own (cached in DIR/runs); the head runs use a copy of the mapping with only
attend_start changed, written under DIR/runs.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import vs_code  # noqa: E402

from archsim import paths  # noqa: E402
from archsim.results import load_result  # noqa: E402

STARTS = ("head", "all_logits")
# the cases with PIM attention of several requests per channel: the three model cases, with and without
# sub-batch interleaving (stage B of a case without it is the whole batch's attention alone)
CASES = [c for c in vs_code.CASES if c.startswith("gpt3-")]


def build(out: Path) -> pd.DataFrame:
    code = pd.read_csv(vs_code.HERE / "code_results.csv")
    runs = out / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    base = paths.resolve("mappings", vs_code.CONFIG["mapping"]).read_text()
    assert "\nattend_start: all_logits\n" in base, "mapping neupims_code no longer sets attend_start: all_logits"
    per_head = runs / "neupims_code_attend_start_head.yaml"
    per_head.write_text(base.replace("\nattend_start: all_logits\n", "\nattend_start: head\n"))
    rows = []
    for case in CASES:
        cyc = {}
        for start in STARTS:
            cfg = vs_code.config(case)
            if start != "all_logits":
                cfg["mapping"] = str(per_head.relative_to(ROOT)) if per_head.is_relative_to(ROOT) else str(per_head)
            st = load_result(vs_code._run((cfg, runs))).tables["stages"]
            st = st[st["sample"] == 0].drop_duplicates("stage")      # a stage's first layer, as vs_code.csv
            cyc[start] = dict(zip(st["stage"], st["cycles"], strict=True))
        ref = code[(code["case"] == case) & (code["stage"] != "block")].set_index("stage")["code_cycles"]
        for s, c in ref.items():
            rows.append({"case": case, "stage": s, "code_cycles": int(c),
                         **{f"archsim_cycles_{k}": int(cyc[k][s]) for k in STARTS}})
    df = pd.DataFrame(rows)
    # each stage's distance from the code with either start, and whether the code's barrier moves it closer
    for k in STARTS:
        df[f"abs_err_{k}"] = (df[f"archsim_cycles_{k}"] - df["code_cycles"]).abs()
    df["moved_toward_code"] = df["abs_err_all_logits"] < df["abs_err_head"]
    df.to_csv(out / "attend_toggle.csv", index=False)
    return df


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--out", type=Path, default=vs_code.HERE, help="output folder (default: the report's own)")
    args = ap.parse_args(argv)
    os.chdir(ROOT)
    print(build(args.out.resolve()).to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
