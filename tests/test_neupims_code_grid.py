"""reports/neupims/code_grid.csv, the released code's own NeuPIMs / NPU+PIM over the headline's points (GPT3-7B TP4,
GPT3-30B TP8) beside archsim's and the headline's: its code columns follow from the measured rows of code_results.csv (NeuPIMs' stage formula), a point
without them says "not run" and has no code number, archsim's columns follow from the committed runs of the
configurations vs_code.py names, a point the generator aborts at has neither, the headline's column is ratios.csv's
reading, the geomean rows (per model, over all, and the headline's over the points the code did not run) from the
point rows; and the report's section marks a point the code was not run at and states only what its rows hold."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
HERE = ROOT / "reports" / "neupims"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import code_grid  # noqa: E402
import make_report  # noqa: E402
import run_cache  # noqa: E402
import vs_code  # noqa: E402

from archsim.results import load_result  # noqa: E402
from archsim.systems.neupims.config import TP_DEFAULT  # noqa: E402
from reports.claims import Claims, verify  # noqa: E402

LAYERS = {"gpt3-7b": 32, "gpt3-13b": 40, "gpt3-30b": 48}


@pytest.fixture(scope="module")
def grid() -> pd.DataFrame:
    return pd.read_csv(HERE / "code_grid.csv")


def _points(grid: pd.DataFrame, simulated: bool = True) -> pd.DataFrame:
    """The point rows (by default only those with a batch snapshot, which both simulators can run)."""
    pts = grid[grid["dataset"] != "geomean"]
    return pts[pts["status"] != code_grid.GENERATOR_ABORTS] if simulated else pts


def _key(r) -> tuple[str, int, str, int]:
    return r["model"], int(r["tp"]), r["dataset"], int(r["batch"])


def test_every_point_has_one_row(grid):
    pts = _points(grid, simulated=False)
    assert sorted(_key(r) for _, r in pts.iterrows()) == sorted(code_grid.POINTS)
    geo = grid[grid["dataset"] == "geomean"]
    assert sorted(geo["model"]) == sorted([*set(pts["model"]), "all", make_report.GRID_REST])


def test_a_point_the_generator_aborts_at_has_no_numbers(grid):
    """No snapshot: neither simulator's columns hold a number; the headline's reading is still there to read."""
    aborted = _points(grid, simulated=False)
    aborted = aborted[aborted["status"] == code_grid.GENERATOR_ABORTS]
    assert sorted(_key(r) for _, r in aborted.iterrows()) == sorted(k for k, v in code_grid.POINTS.items() if v is None)
    for col in ("code_ratio", "archsim_ratio_issue", "archsim_ratio_bus", "code_ratio_paper_sbi"):
        assert aborted[col].isna().all()


def test_the_headline_column_is_its_reading_at_the_point(grid):
    ratios = pd.read_csv(HERE / "ratios.csv")
    ratios = ratios[ratios["base"] == code_grid.HEADLINE_BASE].set_index(["model", "dataset", "batch"])["ratio"]
    for _, r in _points(grid, simulated=False).iterrows():
        assert r["headline_tp"] == TP_DEFAULT[r["model"]] and r["at_headline_tp"] == (r["tp"] == r["headline_tp"])
        # no reading where the code ran another TP than the headline's
        want = ratios.get((r["model"], r["dataset"], int(r["batch"])), float("nan")) if r["at_headline_tp"] else float("nan")
        assert (np.isnan(want) and np.isnan(r["headline_ratio_issue"])) or r["headline_ratio_issue"] == want


def test_the_code_columns_follow_from_its_measured_rows(grid):
    code = pd.read_csv(HERE / "code_results.csv")
    for _, r in _points(grid).iterrows():
        trace, neupims_case, npupim_case = code_grid.POINTS[_key(r)]
        layers = LAYERS[r["model"]]
        assert r["trace"] == trace
        cases = [code[(code["case"] == c) & (code["stage"] != "block")] for c in (neupims_case, npupim_case)]
        if any(rows.empty for rows in cases):
            assert r["status"] == "not run"
            assert np.isnan(r["code_ratio"]) and np.isnan(r["diff_pct_issue"])
            continue
        assert r["status"] == "ran"
        neupims, npupim = (make_report.whole_block_cycles(rows, "code_cycles", layers) for rows in cases)
        assert set(cases[0]["stage"]) == set("ABCDEF") and set(cases[1]["stage"]) == set("ABE")
        assert r["code_neupims_cycles"] == neupims and r["code_npu_pim_cycles"] == npupim
        assert r["code_ratio"] == pytest.approx(npupim / neupims, rel=1e-12)
        assert r["code_neupims_wall_s"] == cases[0]["wall_s"].iloc[0]
        assert r["diff_pct_issue"] == pytest.approx(100 * (r["archsim_ratio_issue"] / r["code_ratio"] - 1), abs=0.051)
        if r["batch"] >= make_report.SBI_MIN_BATCH:       # the paper's NeuPIMs is the sub-batched one
            assert r["code_ratio_paper_sbi"] == r["code_ratio"]
            continue
        off = code[(code["case"] == neupims_case.replace("_sbi-on", "_sbi-off")) & (code["stage"] != "block")]
        if off.empty:
            assert r["paper_sbi_status"] == "not run" and np.isnan(r["code_ratio_paper_sbi"])
        else:
            assert set(off["stage"]) == set("ABE")
            assert r["code_ratio_paper_sbi"] == pytest.approx(npupim / make_report.whole_block_cycles(off, "code_cycles", layers))


def test_the_archsim_columns_follow_from_the_committed_runs(grid, monkeypatch):
    monkeypatch.chdir(ROOT)      # the traces are repo-relative in the configs (and their keys)
    runs = HERE / "runs"
    for _, r in _points(grid).iterrows():
        model, tp, _, _ = key = _key(r)
        trace, neupims_case, npupim_case = code_grid.POINTS[key]
        layers = LAYERS[model]
        base = vs_code.case_config(npupim_case, model, tp, trace, False)
        cfgs = {"archsim_neupims_cycles": vs_code.case_config(neupims_case, model, tp, trace, True),
                "archsim_npu_pim_bus_cycles": base,
                "archsim_npu_pim_issue_cycles": {**base, "mapping": "reports/neupims/runs/neupims_code_pim_issue_per_cycle.yaml"},
                "archsim_npu_pim_stagger_cycles": {
                    **base, "mapping": "reports/neupims/runs/neupims_code_pim_issue_per_cycle_refresh_stagger.yaml"}}
        assert cfgs["archsim_neupims_cycles"]["layers"] == 2 and base["system"] == "npu_pim"
        for col, cfg in cfgs.items():
            path = run_cache.run_path(runs, cfg)
            assert path.exists(), f"{r['dataset']} {r['batch']}: no committed run for {col}"
            st = load_result(path).tables["stages"].query("sample == 0")
            assert r[col] == make_report.whole_block_cycles(st, "cycles", layers)
        if r["batch"] < make_report.SBI_MIN_BATCH:         # the paper's NeuPIMs: no sub-batches, one layer
            off = vs_code.case_config(neupims_case.replace("_sbi-on", "_sbi-off"), model, tp, trace, False)
            st = load_result(run_cache.run_path(runs, off)).tables["stages"].query("sample == 0")
            assert r["archsim_neupims_paper_sbi_cycles"] == make_report.whole_block_cycles(st, "cycles", layers)
        for arm in code_grid.ARMS:
            assert r[f"archsim_ratio_{arm}"] == pytest.approx(r[f"archsim_npu_pim_{arm}_cycles"] / r["archsim_neupims_cycles"])


@pytest.mark.parametrize("model", ["gpt3-7b", "gpt3-13b", "gpt3-30b", "all"])
def test_the_geomean_rows_are_over_the_points_the_code_ran(grid, model):
    pts = _points(grid)
    pts = pts if model == "all" else pts[pts["model"] == model]
    ran = pts[pts["status"] == "ran"]
    geo = grid[(grid["dataset"] == "geomean") & (grid["model"] == model)].iloc[0]
    assert geo["status"] == ("ran" if len(ran) else "not run")
    if ran.empty:
        return
    for col in ("code_ratio", *(f"archsim_ratio_{arm}" for arm in code_grid.ARMS)):
        assert geo[col] == pytest.approx(float(np.exp(np.log(ran[col]).mean())), rel=1e-12)
    assert geo["abs_code_vs_paper_pct"] == abs(geo["code_vs_paper_pct"])
    assert geo["code_vs_paper_pct"] == pytest.approx(100 * (geo["code_ratio"] / make_report.PAPER["vs NPU+PIM"] - 1),
                                                     abs=0.051)
    same = ran[ran["at_headline_tp"] == True]  # noqa: E712   the headline's points: those at its TP
    if same.empty:
        assert np.isnan(geo["headline_ratio_issue"])
        return
    assert geo["headline_ratio_issue"] == pytest.approx(float(np.exp(np.log(same["headline_ratio_issue"]).mean())), rel=1e-12)
    assert geo["code_ratio_at_headline_tp"] == pytest.approx(float(np.exp(np.log(same["code_ratio"]).mean())), rel=1e-12)
    assert geo["headline_vs_code_pct"] == pytest.approx(
        100 * (geo["headline_ratio_issue"] / geo["code_ratio_at_headline_tp"] - 1), abs=0.051)


def test_the_rest_row_is_the_headline_over_the_points_the_code_did_not_run(grid):
    ratios = pd.read_csv(HERE / "ratios.csv")
    ratios = ratios[(ratios["base"] == code_grid.HEADLINE_BASE) & ratios["ratio"].notna()]
    ran = {(r["model"], r["dataset"], int(r["batch"])) for _, r in _points(grid).iterrows()
           if r["paper_sbi_status"] == "ran" and r["at_headline_tp"]}     # at the headline's TP and sub-batch setting
    rest = ratios[[(m, d, b) not in ran for m, d, b in zip(ratios["model"], ratios["dataset"], ratios["batch"], strict=True)]]
    row = grid[(grid["dataset"] == "geomean") & (grid["model"] == make_report.GRID_REST)].iloc[0]
    assert row["batch"] == len(rest)
    assert row["headline_ratio_issue"] == pytest.approx(float(np.exp(np.log(rest["ratio"]).mean())), rel=1e-12)


def _headline_text(tmp_path: Path, second_point_paper_sbi: bool) -> str:
    """The headline's code-grid sentence on a hand-made grid of two points the code ran with sub-batch interleaving
    at every batch (ratios 1.0 and 1.44, geomean 1.2x), the headline's setting at both (1.6 and 2.5) or at one."""
    paper_sbi = [(1.6, "ran"), (2.5, "ran") if second_point_paper_sbi else (float("nan"), "not run")]
    rows = [{"model": "gpt3-7b", "tp": 4, "headline_tp": 4, "at_headline_tp": True, "headline_ratio_issue": 1.5,
             "dataset": d, "batch": b, "status": "ran", "code_ratio": r, "code_vs_paper_pct": round(100 * (r / 1.6 - 1), 1),
             "code_ratio_paper_sbi": p, "paper_sbi_status": st}
            for (d, b, r), (p, st) in zip([("sharegpt", 64, 1.0), ("alpaca", 64, 1.44)], paper_sbi, strict=True)]
    ran = [p for p, st in paper_sbi if st == "ran"]
    geo_sbi = float(np.exp(np.log(ran).mean()))
    geo = {"dataset": "geomean", "status": "ran", "code_ratio": 1.2, "code_vs_paper_pct": -25.0,
           "abs_code_vs_paper_pct": 25.0, "paper_sbi_status": "ran", "code_ratio_paper_sbi": geo_sbi,
           "code_vs_paper_pct_paper_sbi": round(100 * (geo_sbi / 1.6 - 1), 1),
           "abs_code_vs_paper_pct_paper_sbi": abs(round(100 * (geo_sbi / 1.6 - 1), 1)),
           "headline_ratio_issue_paper_sbi_pts": 1.5, "code_ratio_paper_sbi_at_headline_tp": geo_sbi,
           "headline_vs_code_paper_sbi_pct": round(100 * (1.5 / geo_sbi - 1), 1)}
    if not second_point_paper_sbi:     # the code's every-batch reading only: the headline's setting not at every point
        geo["paper_sbi_status"] = "not run"
    rest = {"dataset": "geomean", "model": make_report.GRID_REST, "status": "not run", "paper_sbi_status": "not run",
            "batch": 2, "trace": "2 gpt3-13b", "headline_ratio_issue": 1.5}
    pd.DataFrame([*rows, {**geo, "model": "gpt3-7b"}, {**geo, "model": "all"}, rest]).to_csv(
        tmp_path / "code_grid.csv", index=False)
    pd.DataFrame([{"claim": "vs NPU+PIM", "paper": 1.6}]).to_csv(tmp_path / "paper.csv", index=False)
    # the headline's own ratios: only gpt3-7b, so the comparison with the other models' points has rows too
    pd.DataFrame([{"model": m, "dataset": d, "batch": 64, "base": "vs NPU+PIM (code's issue path)", "ratio": 1.5}
                  for m in ("gpt3-7b", "gpt3-13b") for d in ("sharegpt", "alpaca")]).to_csv(tmp_path / "ratios.csv", index=False)
    c = Claims(tmp_path)
    md = make_report._code_grid_headline(c)
    c.write()
    (tmp_path / "README.md").write_text("\n".join(md) + "\n")
    assert verify(tmp_path) == []
    return "\n".join(md)


def test_the_headline_sentence_reads_the_code_with_the_headlines_sub_batch_setting(tmp_path):
    """The headline runs NeuPIMs with sub-batch interleaving only from batch 256 on: the sentence on the code's own
    ratio takes that reading (the grid's paper_sbi columns, geomean 2.0x here, the paper's 1.6x below it) with the
    every-batch reading (1.2x) beside it, and the headline's geomean is set against it; when the code did not run
    that setting at every point the sentence says which setting its number has and makes no comparison."""
    (tmp_path / "a").mkdir()
    matched = _headline_text(tmp_path / "a", True)
    assert "run as the headline runs it" in matched and "gives NeuPIMs / NPU+PIM 2.00x on the geomean over 2" in matched
    assert "the paper's 1.6x is at or below the code's own geomean, which is +25 % from the paper's, outside" in matched
    assert "with sub-batch interleaving at every batch it gives 1.20x over 2 points (-25 % from the paper's)" in matched
    assert "-25 % from the code's own 2.00x there" in matched
    (tmp_path / "b").mkdir()
    unmatched = _headline_text(tmp_path / "b", False)
    assert "with sub-batch interleaving at every batch (not the headline's setting)" in unmatched
    assert "gives NeuPIMs / NPU+PIM 1.20x" in unmatched and "The headline's reading" not in unmatched


def test_the_section_marks_a_point_not_run_and_its_claims_hold(tmp_path):
    """A hand-made grid: two GPT3-7B points ran (ratios 2 and 3), one did not, a GPT3-30B point the generator aborts
    at; the section's prose holds against it, and the paper's 1.6x reads below both points."""
    seven = {"model": "gpt3-7b", "tp": 4, "headline_tp": 4, "at_headline_tp": True}
    rows = [{**seven, "dataset": "sharegpt", "batch": 64, "status": "ran", "code_neupims_cycles": 100.0, "code_npu_pim_cycles": 200.0,
             "code_ratio": 2.0, "code_neupims_wall_s": 10.0, "code_npu_pim_wall_s": 5.0, "archsim_ratio_issue": 2.2,
             "archsim_ratio_stagger": 2.0, "diff_pct_stagger": 0.0, "archsim_ratio_bus": 1.0, "diff_pct_issue": 10.0,
             "code_vs_paper_pct": 25.0, "headline_ratio_issue": 1.8},
            {**seven, "dataset": "alpaca", "batch": 64, "status": "ran", "code_neupims_cycles": 100.0, "code_npu_pim_cycles": 300.0,
             "code_ratio": 3.0, "code_neupims_wall_s": 10.0, "code_npu_pim_wall_s": 5.0, "archsim_ratio_issue": 2.7,
             "archsim_ratio_stagger": 3.0, "diff_pct_stagger": 0.0, "archsim_ratio_bus": 1.0, "diff_pct_issue": -10.0,
             "code_vs_paper_pct": 87.5, "headline_ratio_issue": 2.0},
            {**seven, "dataset": "alpaca", "batch": 512, "status": "not run", "archsim_ratio_issue": 2.0, "archsim_ratio_stagger": 2.0,
             "archsim_ratio_bus": 1.0, "headline_ratio_issue": 1.5}]
    for r, (code, ours) in zip(rows, [(1.5, 1.4), (2.5, 2.0), (float("nan"), 2.0)], strict=True):
        r.update({"paper_sbi_status": "ran" if code == code else "not run", "code_ratio_paper_sbi": code,
                  "archsim_ratio_issue_paper_sbi": ours})
    rows.append({"model": "gpt3-30b", "tp": 8, "headline_tp": 8, "at_headline_tp": True, "dataset": "sharegpt", "batch": 256,
                 "status": code_grid.GENERATOR_ABORTS, "paper_sbi_status": code_grid.GENERATOR_ABORTS,
                 "headline_ratio_issue": 1.2})
    df = pd.DataFrame(rows)
    geo = {"dataset": "geomean", "status": "ran", "code_ratio": 6 ** 0.5, "archsim_ratio_issue": (2.2 * 2.7) ** 0.5,
           "archsim_ratio_stagger": 6 ** 0.5, "diff_pct_stagger": 0.0,
           "archsim_ratio_bus": 1.0, "diff_pct_issue": round(100 * ((2.2 * 2.7) ** 0.5 / 6 ** 0.5 - 1), 1),
           "code_vs_paper_pct": round(100 * (6 ** 0.5 / 1.6 - 1), 1), "abs_code_vs_paper_pct": round(100 * (6 ** 0.5 / 1.6 - 1), 1),
           "headline_ratio_issue": 3.6 ** 0.5, "code_ratio_at_headline_tp": 6 ** 0.5, "headline_vs_code_pct": round(100 * (3.6 ** 0.5 / 6 ** 0.5 - 1), 1),
           "paper_sbi_status": "ran",
           "code_ratio_paper_sbi": (1.5 * 2.5) ** 0.5, "archsim_ratio_issue_paper_sbi": (1.4 * 2.0) ** 0.5,
           "code_ratio_paper_sbi_at_headline_tp": (1.5 * 2.5) ** 0.5, "headline_ratio_issue_paper_sbi_pts": 3.6 ** 0.5,
           "headline_vs_code_paper_sbi_pct": round(100 * (3.6 ** 0.5 / (1.5 * 2.5) ** 0.5 - 1), 1),
           "code_vs_paper_pct_paper_sbi": round(100 * ((1.5 * 2.5) ** 0.5 / 1.6 - 1), 1),
           "abs_code_vs_paper_pct_paper_sbi": abs(round(100 * ((1.5 * 2.5) ** 0.5 / 1.6 - 1), 1))}
    geos = [{**geo, "model": "gpt3-7b"}, {"dataset": "geomean", "model": "gpt3-30b", "status": "not run",
                                          "paper_sbi_status": "not run"}, {**geo, "model": "all"},
            {"dataset": "geomean", "model": make_report.GRID_REST, "status": "not run", "paper_sbi_status": "not run",
             "batch": 2, "trace": "1 gpt3-7b, 1 gpt3-30b", "headline_ratio_issue": (1.5 * 1.2) ** 0.5}]
    pd.concat([df, pd.DataFrame(geos)]).to_csv(tmp_path / "code_grid.csv", index=False)
    pd.DataFrame([{"claim": "vs NPU+PIM", "paper": 1.6}]).to_csv(tmp_path / "paper.csv", index=False)
    pd.DataFrame([{"model": r["model"], "dataset": r["dataset"], "batch": r["batch"], "base": make_report.ISSUE_BASE,
                   "ratio": r["headline_ratio_issue"]} for r in rows]).to_csv(tmp_path / "ratios.csv", index=False)
    c = Claims(tmp_path)
    md = make_report._code_grid_section(c) + make_report._code_grid_headline(c)
    c.write()
    (tmp_path / "README.md").write_text("\n".join(md) + "\n")
    assert verify(tmp_path) == []
    text = "\n".join(md)
    assert "| gpt3-7b TP4 | alpaca | 512 | not run | not run | not run |" in text
    assert "| gpt3-30b TP8 | sharegpt | 256 | not run: generator aborts | - |" in text
    assert "The generator aborts at 1 of the points (gpt3-30b sharegpt batch 256)" in text
    assert "Over the 2 points the code ran, its own NeuPIMs / NPU+PIM is 2.45x on the geomean (gpt3-7b 2.45x over 2)" in text
    assert "from 2.00x to 3.00x per point" in text
    assert "the paper's is at or below the code's geomean, below its lowest point and at or below its highest, and the code's geomean is outside a band of 15 % around the paper's" in text
    assert "| gpt3-7b TP4 | alpaca | 512 | not run | not run | not run | 2.00x | - | 2.00x | - | 1.00x | not run / 2.00x | 1.50x | - |" in text
    assert "at the smaller batches the code's NeuPIMs / NPU+PIM is at most 2.50x" in text
    assert "over the headline's other 2 points, which the code did not run at the headline's TP (1 gpt3-7b, 1 gpt3-30b), it is 1.34x, below the band" in text
    assert ("over the 2 points the code ran at the headline's TP and sub-batch setting, is 1.90x on the geomean (+19 % from "
            "the paper's, -2 % from the code's own 1.94x there), not below the paper's band") in text


def test_a_point_whose_neupims_run_is_missing_shows_its_npu_pim_run():
    """GPT3-30B TP8 Alpaca 64: the code's NeuPIMs with sub-batch interleaving was not run, its NPU+PIM was (and gives
    the paper-SBI ratio): the row shows the NPU+PIM cycles and wall time it has, "not run" only for the missing run."""
    r = pd.Series({"model": "gpt3-30b", "tp": 8, "headline_tp": 8, "dataset": "alpaca", "batch": 64, "status": "not run",
                   "code_neupims_cycles": float("nan"), "code_npu_pim_cycles": 10532880.0,
                   "code_neupims_wall_s": float("nan"), "code_npu_pim_wall_s": 183.8, "code_ratio": float("nan"),
                   "archsim_ratio_issue": 0.62, "archsim_ratio_stagger": 0.59, "archsim_ratio_bus": 0.57,
                   "paper_sbi_status": "ran", "code_ratio_paper_sbi": 1.11, "archsim_ratio_issue_paper_sbi": 1.10,
                   "headline_ratio_issue": 1.08})
    row = make_report._code_grid_row(r)
    assert row.startswith("| gpt3-30b TP8 | alpaca | 64 | not run | 10,532,880 | not run | 0.62x | - |")
    assert row.endswith("| 1.11x / 1.10x | 1.08x | - / 184 |")
    both = {**r.to_dict(), "status": "ran", "code_neupims_cycles": 1.0e7, "code_neupims_wall_s": 900.0, "code_ratio": 1.05,
            "diff_pct_issue": -41.0, "diff_pct_stagger": -43.8}
    ran = make_report._code_grid_row(pd.Series(both))
    assert "| 10,000,000 | 10,532,880 |" in ran and ran.endswith("| 900 / 184 |")
