"""NeuPIMs / NPU+PIM as the released code itself gives it over the headline's points (GPT3-7B at TP4 and GPT3-30B at
TP8, the headline's TPs; ShareGPT and Alpaca, batch 64, 256, 512; and GPT3-13B at TP8, the code's configuration: at
the headline's TP4 the generator aborts), beside archsim's ratio in the code's configuration
and the headline's own reading: writes reports/neupims/code_grid.csv.

Run:  .venv/bin/python reports/neupims/code_grid.py [-o DIR]

The code's cycles are measured rows of code_results.csv (benchmarks/neupims_code/run_neupims.py over a Release build
of casys-kaist/NeuPIMs f299af3, NeuPIMs with sub-batch interleaving on, and of its `npu+pim` branch e51a4af with that
branch's newton.json and npupim.json, as vs_code.py's cases; one decoder block each). The traces are the code's own
batch snapshots (workloads/datasets/neupims_traces: the repository's clb-0 at ShareGPT batch 512, the rest made by
its generator, seed 0, trace index 0). A point whose code runs are not in code_results.csv is a row with status
"not run" and no code numbers; a point the generator aborts at (GPT3-30B TP8 at ShareGPT batch 256 and 512 and Alpaca
batch 512: `assert 0` at get_distributions.py:232, a channel's KV tiles overflow) has status "not run: generator
aborts" and neither simulator's numbers (there is no batch snapshot).

archsim runs each point exactly as vs_code.py and code_ratios.csv do (runs cached in DIR/runs by content,
run_cache.py): NeuPIMs with NPU preset `neupims_code`, mapping `neupims_code` and DRAM standard `neupims_code`, two
layers (stages A-F of one block); NPU+PIM (system npu_pim, one layer) with the npu+pim branch's PIM issue path (the
mapping with `pim_issue: per_cycle`, issue_toggle.py), with that path and the ranks' refreshes staggered as the
code's device does (`refresh_stagger: true` as well: mapping npu_pim_code_issue's reading, npupim_refresh_toggle.py)
and, for context, at the command bus's own rate
(`pim_issue: bus`, the mapping as it is). Each side's block becomes a decode iteration of the model's layers (32 for GPT3-7B, 48 for GPT3-30B) by
NeuPIMs' own stage formula (make_report.whole_block_cycles), as code_ratios.csv does.
The headline's reading is ratios.csv's "vs NPU+PIM (code's issue path)" at the same model, dataset and batch
(archsim's own NPU and batch sampling at the headline's TP, make_report.py).

Columns: model, tp (the code's run), headline_tp (the headline's, TP_DEFAULT), dataset, batch, trace, status, code_neupims_cycles, code_npu_pim_cycles, code_ratio (NPU+PIM / NeuPIMs
iteration cycles = NeuPIMs' speed-up), code_vs_paper_pct (the code's ratio / the paper's 1.6x - 1, in %; on the geomean row also abs_code_vs_paper_pct, its
size), code_neupims_wall_s, code_npu_pim_wall_s (the code's run wall times, on a
shared machine), archsim_neupims_cycles, archsim_npu_pim_{issue,stagger,bus}_cycles, archsim_ratio_{issue,stagger,bus},
diff_pct_{issue,stagger,bus} (archsim's ratio / the code's - 1, in %); at_headline_tp (the code ran the point at
the headline's TP), headline_ratio_issue (NaN where it did not: the headline has no reading there),
headline_vs_code_pct (the headline's reading / the code's ratio - 1, in %; on a geomean row against
code_ratio_at_headline_tp, the code's geomean over the same points; headline_ratio_issue_paper_sbi_pts,
code_ratio_paper_sbi_at_headline_tp, headline_vs_code_paper_sbi_pct: the same against the code's NeuPIMs as the paper
runs it, as the headline runs it, over the points at the headline's TP whose paper_sbi_status is "ran");
paper_sbi_status, code_neupims_paper_sbi_cycles, code_ratio_paper_sbi, archsim_neupims_paper_sbi_cycles,
archsim_ratio_issue_paper_sbi, diff_pct_issue_paper_sbi: the same with NeuPIMs as the paper runs it, sub-batch
interleaving only from batch 256 on (below it both simulators' NeuPIMs without it, one layer; the code's
`..._sbi-off` case); then "geomean" rows (dataset "geomean"), one per model and one with model "all", over the
points the code ran (for the paper_sbi columns: the points whose paper_sbi_status is "ran"; on the geomean rows also code_vs_paper_pct_paper_sbi and
abs_code_vs_paper_pct_paper_sbi, the code's geomean of that reading against the paper's 1.6x, in %, and its size).
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

from archsim.systems.neupims.config import TP_DEFAULT  # noqa: E402
from archsim.workload.spec import load_model  # noqa: E402

GEN = f"{vs_code.TRACES}/generated"
GENERATOR_ABORTS = make_report.GENERATOR_ABORTS_STATUS   # the authors' trace generator stops (get_distributions.py:222-232)
# (model, tp, dataset, batch) -> (trace, the code's NeuPIMs case, its NPU+PIM case) as code_results.csv names them;
# None where the authors' generator aborts (clb places requests without checking KV capacity, a channel overflows,
# `assert 0` at get_distributions.py:232): there is no batch snapshot for either simulator to run
POINTS: dict[tuple[str, int, str, int], tuple[str, str, str] | None] = {
    ("gpt3-7b", 4, "sharegpt", 64): (f"{GEN}/share-gpt2-bs64-ms7B-tp4-pp1-clb-0.csv",
                                     "gpt3-7B_tp4_sharegpt_bs64_genclb0_sbi-on",
                                     "npupim-baseline_gpt3-7B_tp4_sharegpt_bs64_genclb0"),
    ("gpt3-7b", 4, "sharegpt", 256): (f"{GEN}/share-gpt2-bs256-ms7B-tp4-pp1-clb-0.csv", "gpt3-7B_tp4_bs256_genclb0_sbi-on",
                                      "npupim-baseline_gpt3-7B_tp4_sharegpt_bs256_genclb0"),
    ("gpt3-7b", 4, "sharegpt", 512): (f"{vs_code.TRACES}/clb/share-gpt2-bs512-ms7B-tp4-clb-0.csv",
                                      "gpt3-7B_tp4_bs512_clb0_sbi-on", "npupim-baseline_gpt3-7B_tp4_bs512_clb0"),
    **{("gpt3-7b", 4, "alpaca", b): (f"{GEN}/alpaca-bs{b}-ms7B-tp4-pp1-clb-0.csv", f"gpt3-7B_tp4_alpaca_bs{b}_genclb0_sbi-on",
                                     f"npupim-baseline_gpt3-7B_tp4_alpaca_bs{b}_genclb0") for b in (64, 256, 512)},
    # GPT3-30B at TP8, the headline's own TP (the code's gpt3-30B.json with n_tp 8, n_pp 1)
    **{("gpt3-30b", 8, d, b): (f"{GEN}/{f}-bs{b}-ms30B-tp8-pp1-clb-0.csv", f"gpt3-30B_tp8_{d}_bs{b}_genclb0_sbi-on",
                               f"npupim-baseline_gpt3-30B_tp8_{d}_bs{b}_genclb0")
       for d, f, b in (("sharegpt", "share-gpt2", 64), ("alpaca", "alpaca", 64), ("alpaca", "alpaca", 256))},
    **{("gpt3-30b", 8, d, b): None for d, b in (("sharegpt", 256), ("sharegpt", 512), ("alpaca", 512))},
    # GPT3-13B at TP8: the code's configuration, not the headline's (TP4, where the generator aborts at batch 256)
    ("gpt3-13b", 8, "sharegpt", 256): (f"{GEN}/share-gpt2-bs256-ms13B-tp8-pp1-clb-0.csv", "gpt3-13B_tp8_bs256_genclb0_sbi-on",
                                       "npupim-baseline_gpt3-13B_tp8_sharegpt_bs256_genclb0"),
}
PAPER = make_report.PAPER["vs NPU+PIM"]      # the paper's NeuPIMs / NPU+PIM (paper.csv)
# archsim's NPU+PIM: the code's PIM issue path (per_cycle); the same with the ranks' refreshes staggered as the code's
# device does (npu_pim_code_issue's reading, npupim_refresh_toggle.py); at the command bus's rate
ARMS = ("issue", "stagger", "bus")
HEADLINE_BASE = "vs NPU+PIM (code's issue path)"     # the headline's reading (ratios.csv's base)


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


def headline_ratio(ratios: pd.DataFrame, model: str, dataset: str, batch: int) -> float:
    """The headline's NeuPIMs / NPU+PIM with the code's issue path at the point (ratios.csv; NaN where it has none)."""
    r = ratios[(ratios["model"] == model) & (ratios["dataset"] == dataset) & (ratios["batch"] == batch)
               & (ratios["base"] == HEADLINE_BASE)]["ratio"]
    return float(r.iloc[0]) if len(r) else float("nan")


def point_row(key: tuple[str, int, str, int], code: pd.DataFrame, runs: Path, ratios: pd.DataFrame) -> dict:
    model, tp, dataset, batch = key
    at_headline_tp = tp == TP_DEFAULT[model]     # else the headline has no reading at this configuration
    head = {"model": model, "tp": tp, "headline_tp": TP_DEFAULT[model], "at_headline_tp": at_headline_tp,
            "dataset": dataset, "batch": batch,
            "headline_ratio_issue": headline_ratio(ratios, model, dataset, batch) if at_headline_tp else float("nan")}
    if POINTS[key] is None:          # no batch snapshot: neither simulator can run the point
        return {**head, "trace": "", "status": GENERATOR_ABORTS, "paper_sbi_status": GENERATOR_ABORTS}
    trace, neupims_case, npupim_case = POINTS[key]
    layers = load_model(model).n_layers
    code_neupims, wall_neupims = code_iteration(code, neupims_case, layers)
    code_npupim, wall_npupim = code_iteration(code, npupim_case, layers)
    ran = np.isfinite(code_neupims) and np.isfinite(code_npupim)
    neupims = archsim_iteration(vs_code.case_config(neupims_case, model, tp, trace, True), runs, layers)
    base = vs_code.case_config(npupim_case, model, tp, trace, False)
    npupim = {"bus": archsim_iteration(base, runs, layers),
              "issue": archsim_iteration({**base, "mapping": issue_toggle.per_cycle_mapping(runs)}, runs, layers),
              "stagger": archsim_iteration({**base, "mapping": npupim_refresh_toggle.mapping(runs, "staggered")},
                                           runs, layers)}
    row = {**head, "trace": trace, "status": "ran" if ran else "not run",
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
    row["headline_vs_code_pct"] = round(100 * (row["headline_ratio_issue"] / row["code_ratio"] - 1), 1)
    return {**row, **paper_sbi(model, tp, neupims_case, trace, batch, row, code, runs, layers)}


def paper_sbi(model: str, tp: int, neupims_case: str, trace: str, batch: int, row: dict, code: pd.DataFrame,
              runs: Path, layers: int) -> dict:
    """The same ratios with NeuPIMs as the paper runs it: sub-batch interleaving only from batch
    make_report.SBI_MIN_BATCH on, below it the code's and archsim's NeuPIMs without it (the `_sbi-off` case)."""
    if batch >= make_report.SBI_MIN_BATCH:
        code_neupims, neupims = row["code_neupims_cycles"], row["archsim_neupims_cycles"]
    else:
        off = neupims_case.replace("_sbi-on", "_sbi-off")
        code_neupims = code_iteration(code, off, layers)[0]
        neupims = archsim_iteration(vs_code.case_config(off, model, tp, trace, False), runs, layers)
    ratio = row["code_npu_pim_cycles"] / code_neupims
    out = {"paper_sbi_status": "ran" if np.isfinite(ratio) else "not run", "code_neupims_paper_sbi_cycles": code_neupims,
           "code_ratio_paper_sbi": ratio, "archsim_neupims_paper_sbi_cycles": neupims}
    out["archsim_ratio_issue_paper_sbi"] = row["archsim_npu_pim_issue_cycles"] / neupims
    out["diff_pct_issue_paper_sbi"] = round(100 * (out["archsim_ratio_issue_paper_sbi"] / ratio - 1), 1)
    return out


def geomean_row(df: pd.DataFrame, model: str) -> dict:
    """Geometric means of the ratios over the points the code ran of `model` ("all": every model's), archsim's and
    the headline's over the same points; for the paper_sbi columns the points with paper_sbi_status "ran"."""
    pts = df if model == "all" else df[df["model"] == model]
    ran = pts[pts["status"] == "ran"]
    row = {"model": model, "dataset": "geomean", "trace": f"{len(ran)} points the code ran",
           "status": "ran" if len(ran) else "not run"}
    for col in ("code_ratio", *(f"archsim_ratio_{arm}" for arm in ARMS), "headline_ratio_issue"):
        row[col] = make_report._geo(ran[col])       # the headline's: over the points at its TP (NaN elsewhere)
    row["code_vs_paper_pct"] = round(100 * (row["code_ratio"] / PAPER - 1), 1)
    row["abs_code_vs_paper_pct"] = abs(row["code_vs_paper_pct"])
    for arm in ARMS:
        row[f"diff_pct_{arm}"] = round(100 * (row[f"archsim_ratio_{arm}"] / row["code_ratio"] - 1), 1)
    # the headline against the code over the points both have (the code's runs at the headline's TP)
    row["code_ratio_at_headline_tp"] = make_report._geo(ran.loc[ran["at_headline_tp"] == True, "code_ratio"])  # noqa: E712
    row["headline_vs_code_pct"] = round(100 * (row["headline_ratio_issue"] / row["code_ratio_at_headline_tp"] - 1), 1)
    ran_paper = pts[pts["paper_sbi_status"] == "ran"]
    row["paper_sbi_status"] = "ran" if len(ran_paper) else "not run"
    for col in ("code_ratio_paper_sbi", "archsim_ratio_issue_paper_sbi"):
        row[col] = make_report._geo(ran_paper[col])
    row["diff_pct_issue_paper_sbi"] = round(100 * (row["archsim_ratio_issue_paper_sbi"] / row["code_ratio_paper_sbi"] - 1), 1)
    # the headline runs NeuPIMs as the paper does (make_report's sub_batch "paper"): against the code's ratio so
    # read, over the points at the headline's TP where the code's runs give it
    same = ran_paper[ran_paper["at_headline_tp"] == True]  # noqa: E712
    row["headline_ratio_issue_paper_sbi_pts"] = make_report._geo(same["headline_ratio_issue"])
    row["code_ratio_paper_sbi_at_headline_tp"] = make_report._geo(same["code_ratio_paper_sbi"])
    row["headline_vs_code_paper_sbi_pct"] = round(
        100 * (row["headline_ratio_issue_paper_sbi_pts"] / row["code_ratio_paper_sbi_at_headline_tp"] - 1), 1)
    row["code_vs_paper_pct_paper_sbi"] = round(100 * (row["code_ratio_paper_sbi"] / PAPER - 1), 1)
    row["abs_code_vs_paper_pct_paper_sbi"] = abs(row["code_vs_paper_pct_paper_sbi"])
    return row


def rest_row(df: pd.DataFrame, ratios: pd.DataFrame) -> dict:
    """The headline's geomean over its points the code did not run (every model, dataset and batch of ratios.csv
    with a reading, less the points of `df` the code ran at the headline's TP and sub-batch setting); `batch` holds
    their count."""
    # the points compared with the headline: those the code ran at its TP and sub-batch setting
    ran = df[(df["paper_sbi_status"] == "ran") & (df["at_headline_tp"] == True)]  # noqa: E712
    done = set(zip(ran["model"], ran["dataset"], ran["batch"].astype(int), strict=True))
    head = ratios[(ratios["base"] == HEADLINE_BASE) & np.isfinite(ratios["ratio"])]
    rest = head[[k not in done for k in zip(head["model"], head["dataset"], head["batch"], strict=True)]]
    counts = rest.groupby("model", sort=False).size()
    return {"model": make_report.GRID_REST, "dataset": "geomean", "batch": len(rest), "status": "not run",
            "trace": ", ".join(f"{n} {m}" for m, n in counts.items()), "paper_sbi_status": "not run",
            "headline_ratio_issue": make_report._geo(rest["ratio"])}


def build(out: Path) -> pd.DataFrame:
    code, runs = vs_code.toggle_inputs(out)
    ratios = pd.read_csv(out / "ratios.csv")
    df = pd.DataFrame([point_row(key, code, runs, ratios) for key in POINTS])
    models = list(dict.fromkeys(df["model"]))
    df = pd.concat([df, pd.DataFrame([geomean_row(df, m) for m in [*models, "all"]] + [rest_row(df, ratios)])],
                   ignore_index=True)
    df.to_csv(out / "code_grid.csv", index=False)
    return df


def main(argv: list[str] | None = None) -> int:
    columns = ["model", "tp", "dataset", "batch", "status", "code_ratio", "archsim_ratio_issue", "archsim_ratio_stagger", "archsim_ratio_bus",
               "diff_pct_issue", "diff_pct_bus"]
    return vs_code.toggle_main(__doc__, build, argv, columns)


if __name__ == "__main__":
    raise SystemExit(main())
