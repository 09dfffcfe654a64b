"""NeuPIMs / NPU+PIM as the released code itself gives it over the headline's GPT3-7B points (ShareGPT and Alpaca,
batch 64, 256, 512), beside archsim's ratio in the code's configuration: writes reports/neupims/code_grid.csv.

Run:  .venv/bin/python reports/neupims/code_grid.py [-o DIR]

The code's cycles are measured rows of code_results.csv (benchmarks/neupims_code/run_neupims.py over a Release build
of casys-kaist/NeuPIMs f299af3, NeuPIMs with sub-batch interleaving on, and of its `npu+pim` branch e51a4af with that
branch's newton.json and npupim.json, as vs_code.py's cases; one decoder block each). The traces are the code's own
batch snapshots (workloads/datasets/neupims_traces: the repository's clb-0 at ShareGPT batch 512, the rest made by
its generator, seed 0, trace index 0). A point whose code runs are not in code_results.csv is a row with status
"not run" and no code numbers.

archsim runs each point exactly as vs_code.py and code_ratios.csv do (runs cached in DIR/runs by content,
run_cache.py): NeuPIMs with NPU preset `neupims_code`, mapping `neupims_code` and DRAM standard `neupims_code`, two
layers (stages A-F of one block); NPU+PIM (system npu_pim, one layer) with the npu+pim branch's PIM issue path (the
mapping with `pim_issue: per_cycle`, issue_toggle.py), with that path and the ranks' refreshes staggered as the
code's device does (`refresh_stagger: true` as well: mapping npu_pim_code_issue's reading, npupim_refresh_toggle.py)
and, for context, at the command bus's own rate
(`pim_issue: bus`, the mapping as it is). Each side's block becomes a decode iteration of the model's 32 layers by
NeuPIMs' own stage formula (make_report.whole_block_cycles), as code_ratios.csv does.

Columns: dataset, batch, trace, status, code_neupims_cycles, code_npu_pim_cycles, code_ratio (NPU+PIM / NeuPIMs
iteration cycles = NeuPIMs' speed-up), code_vs_paper_pct (the code's ratio / the paper's 1.6x - 1, in %; on the geomean row also abs_code_vs_paper_pct, its
size), code_neupims_wall_s, code_npu_pim_wall_s (the code's run wall times, on a
shared machine), archsim_neupims_cycles, archsim_npu_pim_{issue,stagger,bus}_cycles, archsim_ratio_{issue,stagger,bus},
diff_pct_{issue,stagger,bus} (archsim's ratio / the code's - 1, in %);
paper_sbi_status, code_neupims_paper_sbi_cycles, code_ratio_paper_sbi, archsim_neupims_paper_sbi_cycles,
archsim_ratio_issue_paper_sbi, diff_pct_issue_paper_sbi: the same with NeuPIMs as the paper runs it, sub-batch
interleaving only from batch 256 on (below it both simulators' NeuPIMs without it, one layer; the code's
`..._sbi-off` case); then a "geomean" row over the points the code ran (for the paper_sbi columns: the points
whose paper_sbi_status is "ran"; there also code_vs_paper_pct_paper_sbi and abs_code_vs_paper_pct_paper_sbi, the
code's geomean of that reading against the paper's 1.6x, in %, and its size).
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import issue_toggle  # noqa: E402
import make_report  # noqa: E402
import npupim_refresh_toggle  # noqa: E402
import vs_code  # noqa: E402

from archsim.workload.spec import load_model  # noqa: E402

MODEL, TP = "gpt3-7b", 4
GEN = f"{vs_code.TRACES}/generated"
# (dataset, batch) -> (trace, the code's NeuPIMs case, its NPU+PIM case) as code_results.csv names them
POINTS = {
    ("sharegpt", 64): (f"{GEN}/share-gpt2-bs64-ms7B-tp4-pp1-clb-0.csv", "gpt3-7B_tp4_sharegpt_bs64_genclb0_sbi-on",
                       "npupim-baseline_gpt3-7B_tp4_sharegpt_bs64_genclb0"),
    ("sharegpt", 256): (f"{GEN}/share-gpt2-bs256-ms7B-tp4-pp1-clb-0.csv", "gpt3-7B_tp4_bs256_genclb0_sbi-on",
                        "npupim-baseline_gpt3-7B_tp4_sharegpt_bs256_genclb0"),
    ("sharegpt", 512): (f"{vs_code.TRACES}/clb/share-gpt2-bs512-ms7B-tp4-clb-0.csv", "gpt3-7B_tp4_bs512_clb0_sbi-on",
                        "npupim-baseline_gpt3-7B_tp4_bs512_clb0"),
    **{("alpaca", b): (f"{GEN}/alpaca-bs{b}-ms7B-tp4-pp1-clb-0.csv", f"gpt3-7B_tp4_alpaca_bs{b}_genclb0_sbi-on",
                       f"npupim-baseline_gpt3-7B_tp4_alpaca_bs{b}_genclb0") for b in (64, 256, 512)},
}
PAPER = make_report.PAPER["vs NPU+PIM"]      # the paper's NeuPIMs / NPU+PIM (paper.csv)
# archsim's NPU+PIM: the code's PIM issue path (per_cycle); the same with the ranks' refreshes staggered as the code's
# device does (npu_pim_code_issue's reading, npupim_refresh_toggle.py); at the command bus's rate
ARMS = ("issue", "stagger", "bus")


def code_iteration(code: pd.DataFrame, case: str, layers: int) -> tuple[float, float]:
    """(decode-iteration cycles, wall seconds) of the code's run `case` (NaN, NaN if it is not in code_results)."""
    rows = code[(code["case"] == case) & (code["stage"] != "block")]
    if rows.empty:
        return float("nan"), float("nan")
    return float(make_report.whole_block_cycles(rows, "code_cycles", layers)), float(rows["wall_s"].iloc[0])


def archsim_iteration(cfg: dict, runs: Path, layers: int) -> float:
    stages = vs_code.stage_cycles(cfg, runs)
    return float(make_report.whole_block_cycles(
        pd.DataFrame({"stage": list(stages), "cycles": list(stages.values())}), "cycles", layers))


def point_row(dataset: str, batch: int, code: pd.DataFrame, runs: Path, layers: int) -> dict:
    trace, neupims_case, npupim_case = POINTS[(dataset, batch)]
    code_neupims, wall_neupims = code_iteration(code, neupims_case, layers)
    code_npupim, wall_npupim = code_iteration(code, npupim_case, layers)
    ran = np.isfinite(code_neupims) and np.isfinite(code_npupim)
    neupims = archsim_iteration(vs_code.case_config(neupims_case, MODEL, TP, trace, True), runs, layers)
    base = vs_code.case_config(npupim_case, MODEL, TP, trace, False)
    npupim = {"bus": archsim_iteration(base, runs, layers),
              "issue": archsim_iteration({**base, "mapping": issue_toggle.per_cycle_mapping(runs)}, runs, layers),
              "stagger": archsim_iteration({**base, "mapping": npupim_refresh_toggle.mapping(runs, "staggered")},
                                           runs, layers)}
    row = {"dataset": dataset, "batch": batch, "trace": trace, "status": "ran" if ran else "not run",
           "code_neupims_cycles": code_neupims, "code_npu_pim_cycles": code_npupim,
           "code_ratio": code_npupim / code_neupims,
           "code_vs_paper_pct": round(100 * (code_npupim / code_neupims / PAPER - 1), 1),
           "code_neupims_wall_s": wall_neupims,
           "code_npu_pim_wall_s": wall_npupim, "archsim_neupims_cycles": neupims}
    for arm in ARMS:
        row[f"archsim_npu_pim_{arm}_cycles"] = npupim[arm]
    for arm in ARMS:
        row[f"archsim_ratio_{arm}"] = npupim[arm] / neupims
    for arm in ARMS:
        row[f"diff_pct_{arm}"] = round(100 * (row[f"archsim_ratio_{arm}"] / row["code_ratio"] - 1), 1)
    return {**row, **paper_sbi(neupims_case, trace, batch, row, code, runs, layers)}


def paper_sbi(neupims_case: str, trace: str, batch: int, row: dict, code: pd.DataFrame, runs: Path,
              layers: int) -> dict:
    """The same ratios with NeuPIMs as the paper runs it: sub-batch interleaving only from batch
    make_report.SBI_MIN_BATCH on, below it the code's and archsim's NeuPIMs without it (the `_sbi-off` case)."""
    if batch >= make_report.SBI_MIN_BATCH:
        code_neupims, neupims = row["code_neupims_cycles"], row["archsim_neupims_cycles"]
    else:
        off = neupims_case.replace("_sbi-on", "_sbi-off")
        code_neupims = code_iteration(code, off, layers)[0]
        neupims = archsim_iteration(vs_code.case_config(off, MODEL, TP, trace, False), runs, layers)
    ratio = row["code_npu_pim_cycles"] / code_neupims
    out = {"paper_sbi_status": "ran" if np.isfinite(ratio) else "not run", "code_neupims_paper_sbi_cycles": code_neupims,
           "code_ratio_paper_sbi": ratio, "archsim_neupims_paper_sbi_cycles": neupims}
    out["archsim_ratio_issue_paper_sbi"] = row["archsim_npu_pim_issue_cycles"] / neupims
    out["diff_pct_issue_paper_sbi"] = round(100 * (out["archsim_ratio_issue_paper_sbi"] / ratio - 1), 1)
    return out


def geomean_row(df: pd.DataFrame) -> dict:
    """Geometric means of the ratios over the points the code ran (archsim's over the same points; for the paper_sbi
    columns the points with paper_sbi_status "ran")."""
    ran = df[df["status"] == "ran"]
    row = {"dataset": "geomean", "trace": f"{len(ran)} points the code ran", "status": "ran" if len(ran) else "not run"}
    for col in ("code_ratio", *(f"archsim_ratio_{arm}" for arm in ARMS)):
        row[col] = make_report._geo(ran[col])
    row["code_vs_paper_pct"] = round(100 * (row["code_ratio"] / PAPER - 1), 1)
    row["abs_code_vs_paper_pct"] = abs(row["code_vs_paper_pct"])
    for arm in ARMS:
        row[f"diff_pct_{arm}"] = round(100 * (row[f"archsim_ratio_{arm}"] / row["code_ratio"] - 1), 1)
    ran_paper = df[df["paper_sbi_status"] == "ran"]
    row["paper_sbi_status"] = "ran" if len(ran_paper) else "not run"
    for col in ("code_ratio_paper_sbi", "archsim_ratio_issue_paper_sbi"):
        row[col] = make_report._geo(ran_paper[col])
    row["diff_pct_issue_paper_sbi"] = round(100 * (row["archsim_ratio_issue_paper_sbi"] / row["code_ratio_paper_sbi"] - 1), 1)
    row["code_vs_paper_pct_paper_sbi"] = round(100 * (row["code_ratio_paper_sbi"] / PAPER - 1), 1)
    row["abs_code_vs_paper_pct_paper_sbi"] = abs(row["code_vs_paper_pct_paper_sbi"])
    return row


def build(out: Path) -> pd.DataFrame:
    code, runs = vs_code.toggle_inputs(out)
    layers = load_model(MODEL).n_layers
    df = pd.DataFrame([point_row(d, b, code, runs, layers) for d, b in POINTS])
    df = pd.concat([df, pd.DataFrame([geomean_row(df)])], ignore_index=True)
    df.to_csv(out / "code_grid.csv", index=False)
    return df


def main(argv: list[str] | None = None) -> int:
    columns = ["dataset", "batch", "status", "code_ratio", "archsim_ratio_issue", "archsim_ratio_stagger", "archsim_ratio_bus",
               "diff_pct_issue", "diff_pct_bus"]
    return vs_code.toggle_main(__doc__, build, argv, columns)


if __name__ == "__main__":
    raise SystemExit(main())
