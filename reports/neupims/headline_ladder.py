"""From archsim's code configuration to the headline's, one input switched per rung: which input makes the headline's
NeuPIMs / NPU+PIM (the code's issue path) lower than archsim's code configuration over the points the code ran
(issue 33). Writes reports/neupims/headline_ladder.csv.

Run:  .venv/bin/python reports/neupims/headline_ladder.py [-o DIR] [--models gpt3-7b,gpt3-30b]

Both systems run each point with the headline's sub-batch setting (NeuPIMs with sub-batch interleaving from batch
make_report.SBI_MIN_BATCH on, two layers simulated; below it without, one layer; NPU+PIM one layer), one decoder
block's stages made a decode iteration by NeuPIMs' stage formula (make_report.whole_block_cycles), runs cached by
content (run_cache.py) as code_grid.py's are. The rungs, each switching one input of the one before:

  code config      code_grid.py's archsim_ratio_issue_paper_sbi: the code's batch snapshot as dataset, NPU preset
                   `neupims_code`, NeuPIMs on mapping `neupims_code` and DRAM standard `neupims_code`, NPU+PIM on
                   `neupims_code` with `pim_issue: per_cycle` (issue_toggle.per_cycle_mapping)
  batch            archsim's own sampler of the dataset at the batch (the headline's batches)
  dram             NeuPIMs on the default DRAM standard (`neupims`, separate row and column command buses)
  neupims mapping  NeuPIMs on mapping `neupims` (the headline's)
  npu_pim mapping  NPU+PIM on mapping `npu_pim_issue` (the headline's)
  npu              NPU preset `neupims_npu` (the headline's NPU): every input now the headline's
  headline runs    the headline's own runs (make_report's grid, two layers simulated for every system), its ratio
                   from ratios.csv's tokens/s: what differs from the rung before is only the simulated layers

Columns: rung (0..6), rung_name, switched (what the rung changes), model, tp, dataset, batch, neupims_cycles,
npu_pim_cycles (decode-iteration cycles of the whole model; NaN on the headline-runs rung, whose ratio is of
tokens/s), ratio (NPU+PIM / NeuPIMs: NeuPIMs' speed-up), step_pct (ratio / the rung before's at the point - 1, in %);
then one "geomean" row per rung (dataset "geomean", over the points of that rung: count in `batch`), its step_pct the
geomean's change from the rung before's (abs_step_pct its size), and vs_code_config_pct (the rung's geomean /
the code configuration's - 1).
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import code_grid  # noqa: E402
import issue_toggle  # noqa: E402
import make_report  # noqa: E402
import vs_code  # noqa: E402

from archsim.systems.neupims.config import Policy, _policy  # noqa: E402
from archsim.workload.spec import load_model  # noqa: E402

HERE = Path(__file__).resolve().parent
RUNGS = [   # (name, what the rung switches from the one before)
    ("code config", "archsim's code configuration (code_grid.csv)"),
    ("batch", "the code's batch snapshot -> archsim's sampler of the dataset"),
    ("dram", "NeuPIMs' DRAM standard neupims_code -> neupims"),
    ("neupims mapping", "NeuPIMs' mapping neupims_code -> neupims"),
    ("npu_pim mapping", "NPU+PIM's mapping neupims_code with pim_issue per_cycle -> npu_pim_issue"),
    ("npu", "NPU preset neupims_code -> neupims_npu"),
    ("headline runs", "the headline's own runs (two layers simulated)"),
]


def rung_configs(rung: int, key: tuple[str, int, str, int], runs: Path) -> tuple[dict, dict]:
    """(NeuPIMs' config, NPU+PIM's) at rung 1..5 of point `key`; each rung switches one input of the one before."""
    model, tp, dataset, batch = key
    sbi = batch >= make_report.SBI_MIN_BATCH
    neupims = {"system": "neupims", "npu": "neupims_code", "mapping": "neupims_code", "model": model, "tp": tp,
               "dataset": dataset, "batch": batch, "sub_batch": sbi, "layers": 2 if sbi else 1,
               "dram": dict(vs_code.CODE_DRAM)}
    npupim = {"system": "npu_pim", "npu": "neupims_code", "mapping": issue_toggle.per_cycle_mapping(runs),
              "model": model, "tp": tp, "dataset": dataset, "batch": batch, "sub_batch": False, "layers": 1}
    if rung >= 2:
        del neupims["dram"]
    if rung >= 3:
        neupims["mapping"] = "neupims"
    if rung >= 4:
        npupim["mapping"] = "npu_pim_issue"
    if rung >= 5:
        neupims["npu"] = npupim["npu"] = "neupims_npu"
    return neupims, npupim


def headline_ratio(ratios: pd.DataFrame, model: str, dataset: str, batch: int) -> float:
    return code_grid.headline_ratio(ratios, model, dataset, batch)


def point_rows(key: tuple[str, int, str, int], grid: pd.DataFrame, ratios: pd.DataFrame, runs: Path) -> list[dict]:
    model, tp, dataset, batch = key
    layers = load_model(model).n_layers
    head = {"model": model, "tp": tp, "dataset": dataset, "batch": batch}
    g = grid[(grid["model"] == model) & (grid["dataset"] == dataset) & (grid["batch"] == batch)].iloc[0]
    rows = [{**head, "neupims_cycles": g["archsim_neupims_paper_sbi_cycles"],
             "npu_pim_cycles": g["archsim_npu_pim_issue_cycles"], "ratio": g["archsim_ratio_issue_paper_sbi"]}]
    for rung in range(1, 6):
        neupims, npupim = rung_configs(rung, key, runs)
        if rung == 1:
            neupims["dataset"] = npupim["dataset"] = dataset
        n = code_grid.archsim_iteration(neupims, runs, layers)
        p = code_grid.archsim_iteration(npupim, runs, layers)
        rows.append({**head, "neupims_cycles": n, "npu_pim_cycles": p, "ratio": p / n})
        print(f"{model} {dataset} {batch} rung {rung}: {p / n:.4f}", flush=True)
    rows.append({**head, "neupims_cycles": float("nan"), "npu_pim_cycles": float("nan"),
                 "ratio": headline_ratio(ratios, model, dataset, batch)})
    return [{"rung": i, "rung_name": RUNGS[i][0], "switched": RUNGS[i][1], **r} for i, r in enumerate(rows)]


def ladder_points(grid: pd.DataFrame, models: list[str]) -> list[tuple[str, int, str, int]]:
    """The points code_grid.csv's paper_sbi reading ran at the headline's TP (the 9 headline points)."""
    pts = grid[grid["dataset"].isin(make_report.DATASETS) & (grid["paper_sbi_status"] == "ran")
               & (grid["at_headline_tp"] == True) & grid["model"].isin(models)]  # noqa: E712
    return [(r["model"], int(r["tp"]), r["dataset"], int(r["batch"])) for _, r in pts.iterrows()]


def with_geomeans(df: pd.DataFrame, names: list[tuple[str, str]] = RUNGS) -> pd.DataFrame:
    """Per point its step from the rung before; one geomean row per rung over that rung's points."""
    df = df.sort_values(["model", "dataset", "batch", "rung"]).reset_index(drop=True)
    prev = df.groupby(["model", "dataset", "batch"])["ratio"].shift(1)
    df["step_pct"] = (100 * (df["ratio"] / prev - 1)).round(1)
    geo = []
    for rung, g in df.groupby("rung"):
        geo.append({"rung": rung, "rung_name": names[rung][0], "switched": names[rung][1], "model": "all",
                    "dataset": "geomean", "batch": len(g), "ratio": make_report._geo(g["ratio"])})
    geo = pd.DataFrame(geo)
    geo["step_pct"] = (100 * (geo["ratio"] / geo["ratio"].shift(1) - 1)).round(1)
    geo["abs_step_pct"] = geo["step_pct"].abs()
    geo["vs_code_config_pct"] = (100 * (geo["ratio"] / geo["ratio"].iloc[0] - 1)).round(1)
    return pd.concat([df, geo], ignore_index=True)


def build(out: Path, models: list[str]) -> pd.DataFrame:
    runs = out / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    grid, ratios = pd.read_csv(out / "code_grid.csv"), pd.read_csv(out / "ratios.csv")
    rows: list[dict] = []
    for key in ladder_points(grid, models):
        rows += point_rows(key, grid, ratios, runs)
        with_geomeans(pd.DataFrame(rows)).to_csv(out / "headline_ladder.csv", index=False)   # what ran so far
    df = with_geomeans(pd.DataFrame(rows))
    df.to_csv(out / "headline_ladder.csv", index=False)
    return df


SPLIT_CSV = "headline_ladder_mapping.csv"


def mapping_keys() -> list[tuple[str, object]]:
    """(key, mapping neupims's value) of every policy key whose value differs between mappings neupims_code and
    neupims (the "neupims mapping" rung's whole difference, the policy's defaults filled in), in the policy's
    order: the order headline_ladder_mapping.csv switches them in."""
    code, head = _policy(vs_code.CONFIG["mapping"]), _policy("neupims")
    return [(f.name, getattr(head, f.name)) for f in dataclasses.fields(Policy)
            if f.name != "name" and getattr(code, f.name) != getattr(head, f.name)]


def mapping_switched(runs: Path, keys: list[tuple[str, object]]) -> str:
    """Mapping neupims_code with each of `keys` set to its value (mapping neupims's), written to `runs`; its path as
    a config names it."""
    return vs_code.mapping_with(runs, f"neupims_code_as_neupims_{'_'.join(k for k, _ in keys)}.yaml", dict(keys))


def mapping_split(out: Path, models: list[str]) -> pd.DataFrame:
    """The "neupims mapping" rung split: NeuPIMs' mapping keys switched from neupims_code's values to mapping neupims's
    one at a time, cumulatively, on top of the "dram" rung; NPU+PIM as on that rung. Writes
    SPLIT_CSV: step (0: the dram rung, k: the first k of mapping_keys() switched), key, the point, neupims_cycles,
    npu_pim_cycles, ratio, step_pct; one geomean row per step (as headline_ladder.csv's; its vs_code_config_pct
    against step 0, the dram rung)."""
    runs = out / "runs"
    grid = pd.read_csv(out / "code_grid.csv")
    keys = mapping_keys()
    rows: list[dict] = []
    for key in ladder_points(grid, models):
        model, tp, dataset, batch = key
        layers = load_model(model).n_layers
        neupims, npupim = rung_configs(2, key, runs)
        neupims["dataset"] = npupim["dataset"] = dataset
        p = code_grid.archsim_iteration(npupim, runs, layers)
        for k in range(len(keys) + 1):
            cfg = {**neupims, "mapping": mapping_switched(runs, keys[:k])} if k else neupims
            n = code_grid.archsim_iteration(cfg, runs, layers)
            rows.append({"rung": k, "rung_name": keys[k - 1][0] if k else "dram", "model": model, "tp": tp,
                         "dataset": dataset, "batch": batch, "neupims_cycles": n, "npu_pim_cycles": p,
                         "ratio": p / n})
            print(f"{model} {dataset} {batch} step {k}: {p / n:.4f}", flush=True)
        with_geomeans(pd.DataFrame(rows), split_names(keys)).to_csv(out / SPLIT_CSV, index=False)
    df = with_geomeans(pd.DataFrame(rows), split_names(keys))
    df.to_csv(out / SPLIT_CSV, index=False)
    return df


def split_names(keys: list[tuple[str, object]]) -> list[tuple[str, str]]:
    """The split's steps as with_geomeans names them (RUNGS' form)."""
    return [("dram", "the ladder's dram rung (NeuPIMs on mapping neupims_code)"),
            *((k, f"NeuPIMs' mapping key {k}: neupims_code's value -> mapping neupims's ({v})") for k, v in keys)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--out", type=Path, default=HERE, help="output folder (default: the report's own)")
    ap.add_argument("--models", default="gpt3-7b,gpt3-30b", help="models of the headline points to run")
    ap.add_argument("--mapping-split", action="store_true", help=f"write {SPLIT_CSV} (mapping_split) instead")
    args = ap.parse_args(argv)
    os.chdir(ROOT)
    make = mapping_split if args.mapping_split else build
    df = make(args.out.resolve(), args.models.split(","))
    print(df[df["dataset"] == "geomean"][["rung", "rung_name", "batch", "ratio", "step_pct", "vs_code_config_pct"]]
          .to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
