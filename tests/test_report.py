"""Reports from sweep results and single-run JSON files."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import sweep_fixtures  # noqa: F401  (registers toy-roofline)
from sweep_fixtures import subprocess_env, toy_sweep, write_sweep

from archsim import __version__
from archsim.errors import UserError
from archsim.report import make_report
from archsim.sweep import load_results, run_sweep

CLI = [sys.executable, "-m", "archsim.cli"]
FIGURE_KINDS = ("speedup_", "energy_", "vs_", "roofline", "timeline_")


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("sweep")
    out = tmp / "results"
    outcome = run_sweep(write_sweep(tmp, toy_sweep()), out, jobs=2, progress=False)
    assert outcome.succeeded == 8
    return out


@pytest.fixture(scope="module")
def run_json(tmp_path_factory) -> Path:
    from archsim.api import run

    path = tmp_path_factory.mktemp("run") / "single.json"
    run({"system": "toy-roofline", "gemv": {"rows": 512, "cols": 256, "batch": 2}}, seed=3).write_json(path)
    return path


def test_report_from_sweep(sweep_dir, tmp_path):
    out = tmp_path / "reports" / "toy"
    outcome = make_report([sweep_dir], out)
    assert outcome.skipped == []
    md = (out / "report.md").read_text()
    page = (out / "report.html").read_text()
    figures = out / "figures"
    for kind in FIGURE_KINDS:
        slugs = [s for s in outcome.figures if s.startswith(kind)]
        assert slugs, f"no {kind} figure"
        for s in slugs:
            for ext in ("png", "svg", "csv"):
                assert (figures / f"{s}.{ext}").stat().st_size > 0
            assert f"figures/{s}.png" in md
    assert (figures / "energy_toy.png").read_bytes().startswith(b"\x89PNG")
    assert b"<svg" in (figures / "roofline.svg").read_bytes()
    # one vs-figure per swept axis; gemv.batch is zipped with gemv.cols (a function of it), so it has none
    assert {s for s in outcome.figures if s.startswith("vs_")} == {
        "vs_toy_gemv.rows", "vs_toy_hw.bytes_per_s", "vs_toy_gemv.cols"}

    # the data behind a figure is the data: speedup CSV matches the computed metric
    stats, _ = load_results(sweep_dir)
    speed = pd.read_csv(figures / "speedup_toy_speedup.csv")
    assert sorted(speed["speedup"]) == pytest.approx(sorted(stats["speedup"]))
    roof = pd.read_csv(figures / "roofline.csv")
    assert len(roof) == 16 and (roof["attained_flops_per_s"] == roof["flops"] / roof["seconds"]).all()

    # version and every config hash are stated, in both renderings
    for text in (md, page):
        assert f"archsim {__version__}" in text
        for h in stats["config_hash"]:
            assert h in text
    # HTML is self-contained: every image is embedded
    srcs = re.findall(r'src="([^"]*)"', page)
    assert len(srcs) == len(outcome.figures) and all(s.startswith("data:image/svg+xml;base64,") for s in srcs)
    assert "<link" not in page and "<script" not in page
    assert pd.read_csv(out / "runs.csv").shape[0] == 8
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".")]  # no staging dirs left


def test_report_lists_failures_and_skips(tmp_path, run_json):
    tmp = tmp_path / "s"
    tmp.mkdir()
    body = toy_sweep(name="failing", fail_if={"rows": 2048})
    body["axes"] = [{"grid": {"gemv.rows": [1024, 2048]}}]
    body.pop("metrics")
    run_sweep(write_sweep(tmp, body), tmp / "res", jobs=1, progress=False)
    out = tmp_path / "rep"
    outcome = make_report([tmp / "res"], out)
    skipped = dict(outcome.skipped)
    assert "Speedup against baselines" in skipped and "no metric with a `baseline:`" in skipped["Speedup against baselines"]
    assert "no axis with two or more values" in skipped["Latency and throughput vs swept parameters"]
    md = (out / "report.md").read_text()
    assert "## Failed points" in md and "asked to fail for gemv.rows=2048" in md
    assert "### Skipped figures" in md and "Speedup against baselines: sweep failing: no metric" in md


def test_report_from_single_run_json(run_json, tmp_path):
    out = tmp_path / "rep"
    outcome = make_report([run_json], out, title="One run")
    assert any(s.startswith("timeline_") for s in outcome.figures)
    assert "roofline" in outcome.figures and "energy_runs" in outcome.figures
    skipped = dict(outcome.skipped)
    assert set(skipped) == {"Speedup against baselines", "Latency and throughput vs swept parameters"}
    md = (out / "report.md").read_text()
    assert md.startswith("# One run")
    manifest = json.loads(run_json.read_text())["manifest"]
    assert manifest["config_hash"] in md
    timeline = pd.read_csv(out / "figures" / f"{[s for s in outcome.figures if s.startswith('timeline_')][0]}.csv")
    assert list(timeline["unit"]) == ["pim", "asic"] and (timeline["end_s"] > timeline["start_s"]).all()


def test_report_mixes_inputs_and_energy_from_stats(run_json, sweep_dir, tmp_path):
    # a run whose energy comes only as stats energy_<component>_<unit>, table without any figure columns
    other = tmp_path / "stats_only.json"
    other.write_text(json.dumps({"stats": {"latency_s": 1e-3, "energy_dram_pj": 2e6, "energy_mac_nj": 3.0,
                                           "energy_total_pj": 5e6},
                                 "table": [{"phase": "decode", "cycles": 10}],
                                 "manifest": {"config_hash": "abc123", "archsim_version": __version__}}))
    out = tmp_path / "rep"
    outcome = make_report([sweep_dir, run_json, other], out)
    # one energy figure per sweep, one for the single runs together
    assert len(pd.read_csv(out / "figures" / "energy_toy.csv")) == 8
    energy = pd.read_csv(out / "figures" / "energy_runs.csv")
    assert list(energy["run"]) == ["single", "stats_only"]
    row = energy.iloc[1]
    assert row["dram_energy_j"] == pytest.approx(2e-6) and row["mac_energy_j"] == pytest.approx(3e-9)
    assert "total_energy_j" not in energy.columns
    assert energy.iloc[0]["pim_energy_j"] > 0
    assert outcome.skipped == []
    assert set(pd.read_csv(out / "runs.csv")["source"]) == {"toy", "single", "stats_only"}


def test_report_replaces_previous_report_but_not_other_dirs(run_json, tmp_path):
    out = tmp_path / "rep"
    make_report([run_json], out)
    assert list((out / "figures").glob("timeline_*"))
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps({"stats": {"latency_s": 1.0}, "table": [], "manifest": {}}))
    outcome = make_report([bare], out)  # replaced whole: the old figures are gone
    assert outcome.figures == [] and len(outcome.skipped) == 5
    assert not list((out / "figures").iterdir())
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    stranger = tmp_path / "mine"
    stranger.mkdir()
    (stranger / "thesis.tex").write_text("keep me")
    with pytest.raises(UserError, match="not an archsim report"):
        make_report([run_json], stranger)
    assert [p.name for p in stranger.iterdir()] == ["thesis.tex"]


@pytest.mark.parametrize("make_input, expected", [
    (lambda d: d / "missing", "no such sweep results directory"),
    (lambda d: (d / "x.json").write_text("{not json") and d / "x.json", "not a JSON file"),
    (lambda d: (d / "y.json").write_text('{"a": 1}') and d / "y.json", "not an archsim run result"),
    (lambda d: (d / "empty").mkdir() or d / "empty", "no manifest.json"),
])
def test_report_bad_input_is_user_error(tmp_path, capsys, make_input, expected):
    from archsim.cli import main

    path = make_input(tmp_path)
    assert main(["report", str(path), "-o", str(tmp_path / "rep")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("archsim: error: ") and expected in err and "Traceback" not in err
    assert not (tmp_path / "rep").exists()


def test_report_cli(run_json, tmp_path):
    proc = subprocess.run([*CLI, "report", str(run_json), "-o", str(tmp_path / "r")], env=subprocess_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "report.html" in proc.stdout and (tmp_path / "r" / "report.html").is_file()
