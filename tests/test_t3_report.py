"""reports/t3: the README is what make_report.py renders from the committed CSVs, every claim of its prose holds
on those tables (recomputed here, apart from make_report.claims), and committed rows re-simulate exactly."""
from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import pandas as pd
import pytest

REPORT = Path(__file__).resolve().parents[1] / "reports" / "t3"


def _load(name: str):
    sys.path.insert(0, str(REPORT))
    spec = importlib.util.spec_from_file_location(name, REPORT / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


MR = _load("make_report")
RES = pd.read_csv(REPORT / "results.csv")
KEYS = ["model", "tp", "sublayer"]


def _gm(xs) -> float:
    xs = list(xs)
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def _csv(name: str) -> pd.DataFrame:
    path = REPORT / name
    if not path.exists():
        pytest.fail(f"reports/t3/{name} is missing: run reports/t3/experiments.py")
    return pd.read_csv(path)


def test_readme_is_rendered_from_the_committed_tables():
    assert (REPORT / "README.md").read_text() == MR.render(REPORT)


def test_every_row_of_the_paper_grid_is_there_and_fc1_copies_are_marked():
    assert len(RES) == len(MR.CASES) * len(MR.SUBLAYERS)
    copies = RES[RES["copy_of"].fillna("") != ""]
    for r in copies.to_dict("records"):
        assert r["sublayer"] == "fc1_bwd" and r["copy_of"] == "fc2_fwd" and r["sim_wall_s"] == 0
        twin = RES[(RES["model"] == r["model"]) & (RES["tp"] == r["tp"]) & (RES["sublayer"] == "fc2_fwd")].iloc[0]
        for k in ("speedup_t3", "speedup_t3_mca", "speedup_ideal", "gemm_read_ratio", "k"):
            assert r[k] == twin[k]
    palm = RES[(RES["model"] == "palm") & (RES["sublayer"] == "fc1_bwd")].iloc[0]
    assert str(palm["copy_of"]) in ("", "nan") and palm["sim_wall_s"] > 0      # gated FFN: its own shape
    assert "(= FC-2)" in (REPORT / "README.md").read_text()


def test_done_when_columns_and_a_moving_threshold():
    for col in ("gemm_read_bytes_sequential", "gemm_read_bytes_t3", "mca_threshold_trajectory"):
        assert col in RES
    trajs = [json.loads(t) for t in RES["mca_threshold_trajectory"]]
    cap = 64                                                       # the preset's read + write queues
    assert all(1 <= v <= cap for t in trajs for v in t)
    moving = sum(len(set(t)) > 1 for t in trajs)
    assert moving == len(RES), f"the threshold stays put in {len(RES) - moving} rows"
    assert (RES["gemm_read_bytes_sequential"] >= RES["gemm_read_bytes_t3"]).all()
    assert (RES["gemm_read_ratio"] == RES["gemm_read_bytes_sequential"] / RES["gemm_read_bytes_t3"]).all()


def test_headline_and_its_resolution():
    c = MR.claims(REPORT)
    assert c["mca_over_t3_geomean"] == pytest.approx(_gm(RES["mca_over_t3"]) - 1)
    sim = RES[RES["copy_of"].fillna("") == ""].set_index(KEYS)["mca_over_t3"]
    win = _csv("window.csv")
    tok = _csv("experiments_tokens.csv")
    moves = [_gm(g.set_index(KEYS)["mca_over_t3"].reindex(sim.index)) - _gm(sim) for _, g in win.groupby("window")]
    moves.append(_gm(tok.set_index(KEYS)["mca_over_t3"].reindex(sim.index)) - _gm(sim))
    assert c["mca_resolution"] == pytest.approx(max(abs(m) for m in moves))
    assert c["mca_headline_is_none"] == (abs(c["mca_over_t3_geomean"]) <= c["mca_resolution"])
    assert c["mca_target_met"] == (c["mca_over_t3_geomean"] >= 0.13 * 2 / 3)
    text = (REPORT / "README.md").read_text()
    assert ("below the model's resolution" in text) == c["mca_headline_is_none"]
    gemm = (sim.index.to_frame(index=False).merge(RES, on=KEYS))
    assert c["mca_gemm_shorter_rows"] == int((gemm["t3_mca_gemm_us"] < gemm["t3_gemm_us"]).sum())
    assert c["ideal_over_t3_geomean"] == pytest.approx(_gm(RES["speedup_ideal"] / RES["speedup_t3"]) - 1)
    assert c["paper_ideal_over_t3"] == pytest.approx(1.35 / 1.20 - 1)
    assert c["t3_gemm_slowdown_geomean"] == pytest.approx(_gm(gemm["t3_gemm_us"] / gemm["sequential_gemm_us"]) - 1)


def _window_gap() -> float:
    win = _csv("window.csv")
    piv = win.pivot_table(index=KEYS, columns="window", values=["speedup_t3", "speedup_t3_mca"])
    assert len(piv) == (RES["copy_of"].fillna("") == "").sum()
    return max((piv[(k, 16)] - piv[(k, 64)]).abs().max() for k in ("speedup_t3", "speedup_t3_mca")) * 100


def test_window_table_and_its_claim():
    gap = _window_gap()
    assert MR.claims(REPORT)["window_max_gap_points"] == pytest.approx(gap)
    converges = "the windowed loop converges within the bound." in (REPORT / "README.md").read_text()
    assert converges == (gap <= 0.5)


def test_jitter_rows_and_their_claim():
    """experiments_jitter.csv: J = 0 is the exact driver (results.csv's speed-up, bit for bit); the window
    section's why-sentence holds the largest moves per J and its verdict follows the J = 1 move."""
    jit = _csv("experiments_jitter.csv")
    exact = jit[jit["jitter_max_cycles"] == 0].merge(RES, on=KEYS, suffixes=("", "_res"))
    assert len(exact) == len(jit[KEYS].drop_duplicates()) > 0
    assert exact["speedup_t3"].to_numpy() == pytest.approx(exact["speedup_t3_res"].to_numpy(), rel=1e-12)
    assert (jit.loc[jit["jitter_max_cycles"] > 0, "cycles_added"] > 0).all()
    c = MR.claims(REPORT)["jitter"]
    moved = (jit["speedup_t3"] - jit["speedup_t3_exact"]).abs() * 100
    text = (REPORT / "README.md").read_text()
    for j, v in c["max_points"].items():
        assert v == pytest.approx(moved[jit["jitter_max_cycles"] == j].max())
        assert f"by up to {v:.2f} points with J = {j}" in text
    assert ("no driver that acts on a completion even one cycle off" in text) == (c["max_points"][1] > 0.5)


@pytest.mark.xfail(strict=True, reason="issue 34 done-when not met: window.csv's rows at 16 and 64 cycles differ by up "
                   "to 1.3 points (after the windowed loop's tie-order fix), and a 0..1-cycle enqueue lateness on the exact driver moves a row by more than "
                   "0.5 (experiments_jitter.csv); strict, so it fails once they converge")
def test_window_rows_converge():
    """Issue 34 done-when: every row's speed-ups at windows 16 and 64 within 0.5 points of each other."""
    gap = _window_gap()
    assert gap <= 0.5, f"windows 16 and 64 differ by {gap:.2f} points"


def test_gemm_reads_two_ways_agree_and_the_l2_claims_hold():
    """The L2 replay (experiments_l2.csv) at the report's token count reads what the timed runs read."""
    l2 = _csv("experiments_l2.csv")
    at = l2[l2["tokens"] == RES["tokens"].iloc[0]].merge(RES, on=KEYS, suffixes=("_l2", ""))
    assert len(at) == (RES["copy_of"].fillna("") == "").sum()
    assert (at["gemm_read_bytes_sequential_l2"] == at["gemm_read_bytes_sequential"]).all()
    assert (at["gemm_read_bytes_t3_l2"] == at["gemm_read_bytes_t3"]).all()
    c = MR.claims(REPORT)
    for tok, g in l2.groupby("tokens"):
        gb = g[g["gemm_bound"]]
        assert c["l2_tokens"][tok] == pytest.approx(_gm(gb["gemm_read_ratio"]))


def test_causes_table_directions():
    cz = _csv("experiments_causes.csv")
    c = MR.claims(REPORT)
    base = _gm(cz[cz["toggle"] == "report defaults"]["mca_over_t3"]) - 1
    for rec in c["causes"]:
        g = cz[cz["toggle"] == rec["toggle"]]
        got = _gm(g["mca_over_t3"]) - 1
        assert rec["mca_over_t3"] == pytest.approx(got)
        assert rec["toward_paper"] == (abs(got - 0.13) < abs(base - 0.13))
    text = (REPORT / "README.md").read_text()
    toward = [r["toggle"] for r in c["causes"] if r["toward_paper"]]
    assert f"toward the paper: {', '.join(toward) or 'none'}." in text


def test_bidirectional_claims():
    bi = _csv("results_bidir.csv")
    c = MR.claims(REPORT)
    assert (c["bidir_comm_share_min"], c["bidir_comm_share_max"]) == (bi["comm_fraction"].min(), bi["comm_fraction"].max())
    assert c["bidir_comm_share_max"] < c["comm_share_max"]          # both directions: less communication
    assert (bi["ring_directions"] == 2).all() and (RES["ring_directions"] == 1).all()


def test_nmc_figure_compares_geomeans_over_the_same_rows():
    n = _csv("experiments_nmc.csv")
    t = MR.nmc_table(n)
    big = RES[RES["model"].isin(MR.BIG) & (RES["copy_of"].fillna("") == "")]
    assert (t["rows"] == len(big)).all()
    first = t.iloc[0]
    assert first["t3_mca_geomean"] == pytest.approx(_gm(big["speedup_t3_mca"]) - 1)
    assert first["ideal_geomean"] == pytest.approx(_gm(big["speedup_ideal"]) - 1)


def _check_row(model: str, tp: int, sub: str) -> None:
    from archsim import api

    r = RES[(RES["model"] == model) & (RES["tp"] == tp) & (RES["sublayer"] == sub)].iloc[0]
    got = MR.row_from(api.run(MR.row_config(model, tp, sub, int(r["tokens"]))).stats)
    for k in ("speedup_t3", "speedup_t3_mca", "speedup_ideal", "gemm_read_bytes_sequential", "gemm_read_bytes_t3",
              "mca_threshold_trajectory", "comm_fraction"):
        assert got[k] == r[k] or got[k] == pytest.approx(r[k], rel=1e-12), (model, tp, sub, k, got[k], r[k])


def test_a_committed_row_re_simulates():
    _check_row("mega-gpt2", 16, "op_fwd")


@pytest.mark.slow
@pytest.mark.parametrize("model,tp,sub", [tuple(r) for r in RES[RES["copy_of"].fillna("") == ""][KEYS].itertuples(index=False)])
def test_every_committed_row_re_simulates(model, tp, sub):
    _check_row(model, tp, sub)


def test_the_tiling_sentence_holds_its_table():
    """The GEMM-read ratio under tilings the paper does not state: the largest per tiling and the verdict against
    the issue's 1.2-2.0 are experiments_l2_wave.csv's."""
    wave = pd.read_csv(REPORT / "experiments_l2_wave.csv")
    text = " ".join((REPORT / "README.md").read_text().split())
    for tiling, v in wave.groupby("tiling", sort=False)["gemm_read_ratio"].max().items():
        assert f"{tiling} {v:.2f}x" in text, tiling
    below = wave["gemm_read_ratio"].max() < 1.2
    assert ("below the issue's 1.2-2.0" in text) == below and ("within the issue's 1.2-2.0" in text) == (not below)


def test_l2_fit_sentence_counts_its_rows():
    """Review of issue 34: the L2 sentence states how many GEMM-bound rows read at most 1% more in Sequential at
    the report's token count (it said "most", which 5 of 11 do not make)."""
    l2 = _csv("experiments_l2.csv")
    tok = int(l2["tokens"].min())
    gb = l2[(l2["tokens"] == tok) & l2["gemm_bound"]]["gemm_read_ratio"]
    fit = int((gb <= 1.01).sum())
    text = " ".join((REPORT / "README.md").read_text().split())
    assert (f"At {tok} tokens Sequential reads at most 1% more than T3 (a wave's operands fit the L2 beside its "
            f"outputs) in {fit} of {len(gb)} GEMM-bound rows, and up to {gb.max():.2f}x in the others") in text
    assert "in most GEMM-bound rows" not in text or fit * 2 > len(gb)


def test_summary_resolution_is_the_prose_resolution():
    """Review of issue 34: the summary table's resolution of the T3-MCA-over-T3 headline is the prose's number."""
    c = MR.claims(REPORT)
    text = (REPORT / "README.md").read_text()
    if not c["mca_headline_is_none"]:
        assert f"(resolution {c['mca_resolution']:.2%})" in text
        assert f"is {c['mca_resolution']:.2%}: the headline" in text


def test_the_device_model_sentence_holds_its_table():
    """The one-device model's resolution: the largest moves the prose states are experiments_devices.csv's against
    results.csv's rows."""
    dv = pd.read_csv(REPORT / "experiments_devices.csv").set_index(["model", "tp", "sublayer", "tokens"])
    one = pd.read_csv(REPORT / "results.csv").set_index(["model", "tp", "sublayer", "tokens"]).loc[dv.index]
    text = " ".join((REPORT / "README.md").read_text().split())
    moves = {k: ((one[k] - dv[k]).abs() * 100).max() for k in ("speedup_t3", "speedup_t3_mca", "mca_over_t3")}
    assert (f"moves T3's speed-up by up to {moves['speedup_t3']:.1f} points, T3-MCA's by up to "
            f"{moves['speedup_t3_mca']:.1f} and MCA over T3 by up to {moves['mca_over_t3']:.1f}") in text
    assert (dv["devices"] == "all").all()
