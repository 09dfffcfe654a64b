"""reports/neupims/code_grid.csv, the released code's own NeuPIMs / NPU+PIM over the headline's GPT3-7B points beside
archsim's: its code columns follow from the measured rows of code_results.csv (NeuPIMs' stage formula), a point
without them says "not run" and has no code number, archsim's columns follow from the committed runs of the
configurations vs_code.py names, the geomean row from the point rows; and the report's section marks a point the
code was not run at and states only what its rows hold."""
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
from reports.claims import Claims, verify  # noqa: E402

LAYERS = 32     # GPT3-7B


@pytest.fixture(scope="module")
def grid() -> pd.DataFrame:
    return pd.read_csv(HERE / "code_grid.csv")


def _points(grid: pd.DataFrame) -> pd.DataFrame:
    return grid[grid["dataset"] != "geomean"]


def test_every_point_has_one_row(grid):
    pts = _points(grid)
    assert sorted(zip(pts["dataset"], pts["batch"].astype(int), strict=True)) == sorted(code_grid.POINTS)
    assert (grid["dataset"] == "geomean").sum() == 1


def test_the_code_columns_follow_from_its_measured_rows(grid):
    code = pd.read_csv(HERE / "code_results.csv")
    for _, r in _points(grid).iterrows():
        trace, neupims_case, npupim_case = code_grid.POINTS[(r["dataset"], int(r["batch"]))]
        assert r["trace"] == trace
        cases = [code[(code["case"] == c) & (code["stage"] != "block")] for c in (neupims_case, npupim_case)]
        if any(rows.empty for rows in cases):
            assert r["status"] == "not run"
            assert np.isnan(r["code_ratio"]) and np.isnan(r["diff_pct_issue"])
            continue
        assert r["status"] == "ran"
        neupims, npupim = (make_report.whole_block_cycles(rows, "code_cycles", LAYERS) for rows in cases)
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
            assert r["code_ratio_paper_sbi"] == pytest.approx(npupim / make_report.whole_block_cycles(off, "code_cycles", LAYERS))


def test_the_archsim_columns_follow_from_the_committed_runs(grid, monkeypatch):
    monkeypatch.chdir(ROOT)      # the traces are repo-relative in the configs (and their keys)
    runs = HERE / "runs"
    for _, r in _points(grid).iterrows():
        trace, neupims_case, npupim_case = code_grid.POINTS[(r["dataset"], int(r["batch"]))]
        base = vs_code.case_config(npupim_case, code_grid.MODEL, code_grid.TP, trace, False)
        cfgs = {"archsim_neupims_cycles": vs_code.case_config(neupims_case, code_grid.MODEL, code_grid.TP, trace, True),
                "archsim_npu_pim_bus_cycles": base,
                "archsim_npu_pim_issue_cycles": {**base, "mapping": "reports/neupims/runs/neupims_code_pim_issue_per_cycle.yaml"},
                "archsim_npu_pim_stagger_cycles": {
                    **base, "mapping": "reports/neupims/runs/neupims_code_pim_issue_per_cycle_refresh_stagger.yaml"}}
        assert cfgs["archsim_neupims_cycles"]["layers"] == 2 and base["system"] == "npu_pim"
        for col, cfg in cfgs.items():
            path = run_cache.run_path(runs, cfg)
            assert path.exists(), f"{r['dataset']} {r['batch']}: no committed run for {col}"
            st = load_result(path).tables["stages"].query("sample == 0")
            assert r[col] == make_report.whole_block_cycles(st, "cycles", LAYERS)
        if r["batch"] < make_report.SBI_MIN_BATCH:         # the paper's NeuPIMs: no sub-batches, one layer
            off = vs_code.case_config(neupims_case.replace("_sbi-on", "_sbi-off"), code_grid.MODEL, code_grid.TP, trace, False)
            st = load_result(run_cache.run_path(runs, off)).tables["stages"].query("sample == 0")
            assert r["archsim_neupims_paper_sbi_cycles"] == make_report.whole_block_cycles(st, "cycles", LAYERS)
        for arm in code_grid.ARMS:
            assert r[f"archsim_ratio_{arm}"] == pytest.approx(r[f"archsim_npu_pim_{arm}_cycles"] / r["archsim_neupims_cycles"])


def test_the_geomean_row_is_over_the_points_the_code_ran(grid):
    ran = _points(grid)[_points(grid)["status"] == "ran"]
    geo = grid[grid["dataset"] == "geomean"].iloc[0]
    for col in ("code_ratio", *(f"archsim_ratio_{arm}" for arm in code_grid.ARMS)):
        assert geo[col] == pytest.approx(float(np.exp(np.log(ran[col]).mean())), rel=1e-12)
    assert geo["abs_code_vs_paper_pct"] == abs(geo["code_vs_paper_pct"])
    assert geo["code_vs_paper_pct"] == pytest.approx(100 * (geo["code_ratio"] / make_report.PAPER["vs NPU+PIM"] - 1),
                                                     abs=0.051)
    assert geo["code_vs_paper_pct_paper_sbi"] == pytest.approx(
        100 * (geo["code_ratio_paper_sbi"] / make_report.PAPER["vs NPU+PIM"] - 1), abs=0.051)
    assert geo["abs_code_vs_paper_pct_paper_sbi"] == abs(geo["code_vs_paper_pct_paper_sbi"])


def _headline_text(tmp_path: Path, second_point_paper_sbi: bool) -> str:
    """The headline's code-grid sentence on a hand-made grid of two points the code ran with sub-batch interleaving
    at every batch (ratios 1.0 and 1.44, geomean 1.2x), the headline's setting at both (1.6 and 2.5) or at one."""
    paper_sbi = [(1.6, "ran"), (2.5, "ran") if second_point_paper_sbi else (float("nan"), "not run")]
    rows = [{"dataset": d, "batch": b, "status": "ran", "code_ratio": r, "code_vs_paper_pct": round(100 * (r / 1.6 - 1), 1),
             "code_ratio_paper_sbi": p, "paper_sbi_status": st}
            for (d, b, r), (p, st) in zip([("sharegpt", 64, 1.0), ("alpaca", 64, 1.44)], paper_sbi, strict=True)]
    ran = [p for p, st in paper_sbi if st == "ran"]
    geo_sbi = float(np.exp(np.log(ran).mean()))
    geo = {"dataset": "geomean", "status": "ran", "code_ratio": 1.2, "code_vs_paper_pct": -25.0,
           "abs_code_vs_paper_pct": 25.0, "paper_sbi_status": "ran", "code_ratio_paper_sbi": geo_sbi,
           "code_vs_paper_pct_paper_sbi": round(100 * (geo_sbi / 1.6 - 1), 1),
           "abs_code_vs_paper_pct_paper_sbi": abs(round(100 * (geo_sbi / 1.6 - 1), 1))}
    pd.DataFrame([*rows, geo]).to_csv(tmp_path / "code_grid.csv", index=False)
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
    assert "with sub-batch interleaving at every batch it gives 1.20x (-25 % from the paper's)" in matched
    assert "-25 % from the code's own with the same sub-batch setting" in matched
    (tmp_path / "b").mkdir()
    unmatched = _headline_text(tmp_path / "b", False)
    assert "with sub-batch interleaving at every batch (not the headline's setting)" in unmatched
    assert "gives NeuPIMs / NPU+PIM 1.20x" in unmatched and "The headline's reading" not in unmatched


def test_the_section_marks_a_point_not_run_and_its_claims_hold(tmp_path):
    """A hand-made grid: two points ran (ratios 2 and 3), one did not; the section's prose holds against it, and
    the paper's 1.6x reads below both points."""
    rows = [{"dataset": "sharegpt", "batch": 64, "status": "ran", "code_neupims_cycles": 100.0, "code_npu_pim_cycles": 200.0,
             "code_ratio": 2.0, "code_neupims_wall_s": 10.0, "code_npu_pim_wall_s": 5.0, "archsim_ratio_issue": 2.2,
             "archsim_ratio_stagger": 2.0, "diff_pct_stagger": 0.0, "archsim_ratio_bus": 1.0, "diff_pct_issue": 10.0, "code_vs_paper_pct": 25.0},
            {"dataset": "alpaca", "batch": 64, "status": "ran", "code_neupims_cycles": 100.0, "code_npu_pim_cycles": 300.0,
             "code_ratio": 3.0, "code_neupims_wall_s": 10.0, "code_npu_pim_wall_s": 5.0, "archsim_ratio_issue": 2.7,
             "archsim_ratio_stagger": 3.0, "diff_pct_stagger": 0.0, "archsim_ratio_bus": 1.0, "diff_pct_issue": -10.0, "code_vs_paper_pct": 87.5},
            {"dataset": "alpaca", "batch": 512, "status": "not run", "archsim_ratio_issue": 2.0, "archsim_ratio_stagger": 2.0,
             "archsim_ratio_bus": 1.0}]
    for r, (code, ours) in zip(rows, [(1.5, 1.4), (2.5, 2.0), (float("nan"), 2.0)], strict=True):
        r.update({"paper_sbi_status": "ran" if code == code else "not run", "code_ratio_paper_sbi": code,
                  "archsim_ratio_issue_paper_sbi": ours})
    df = pd.DataFrame(rows)
    geo = {"dataset": "geomean", "status": "ran", "code_ratio": 6 ** 0.5, "archsim_ratio_issue": (2.2 * 2.7) ** 0.5,
           "archsim_ratio_stagger": 6 ** 0.5, "diff_pct_stagger": 0.0,
           "archsim_ratio_bus": 1.0, "diff_pct_issue": round(100 * ((2.2 * 2.7) ** 0.5 / 6 ** 0.5 - 1), 1),
           "code_vs_paper_pct": round(100 * (6 ** 0.5 / 1.6 - 1), 1), "abs_code_vs_paper_pct": round(100 * (6 ** 0.5 / 1.6 - 1), 1),
           "paper_sbi_status": "ran",
           "code_ratio_paper_sbi": (1.5 * 2.5) ** 0.5, "archsim_ratio_issue_paper_sbi": (1.4 * 2.0) ** 0.5,
           "code_vs_paper_pct_paper_sbi": round(100 * ((1.5 * 2.5) ** 0.5 / 1.6 - 1), 1),
           "abs_code_vs_paper_pct_paper_sbi": abs(round(100 * ((1.5 * 2.5) ** 0.5 / 1.6 - 1), 1))}
    pd.concat([df, pd.DataFrame([geo])]).to_csv(tmp_path / "code_grid.csv", index=False)
    pd.DataFrame([{"claim": "vs NPU+PIM", "paper": 1.6}]).to_csv(tmp_path / "paper.csv", index=False)
    c = Claims(tmp_path)
    md = make_report._code_grid_section(c) + make_report._code_grid_headline(c)
    c.write()
    (tmp_path / "README.md").write_text("\n".join(md) + "\n")
    assert verify(tmp_path) == []
    text = "\n".join(md)
    assert "| alpaca | 512 | not run | not run | not run |" in text
    assert "Over the 2 points the code ran" in text
    assert "from 2.00x to 3.00x per point" in text
    assert "the paper's is at or below the code's geomean, below its lowest point and at or below its highest, and the code's geomean is outside a band of 15 % around the paper's" in text
    assert "| alpaca | 512 | not run | not run | not run | 2.00x | - | 2.00x | - | 1.00x | not run / 2.00x | - |" in text
    assert "at the smaller batches the code's NeuPIMs / NPU+PIM is at most 2.50x" in text
