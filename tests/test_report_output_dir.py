"""Issue #8.5: `archsim report` without -o writes next to its input (never into the shipped reports/),
and refuses a directory holding files it did not write unless --force (which keeps them)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import sweep_fixtures  # noqa: F401  (registers toy-roofline)
from sweep_fixtures import toy_sweep, write_sweep

from archsim.cli import main
from archsim.commands.report import default_out_dir
from archsim.errors import UserError
from archsim.report import make_report
from archsim.report.build import MARKER

SHIPPED = Path(__file__).resolve().parent.parent / "reports" / "pimgpt_channels_x_model"


@pytest.fixture(scope="module")
def run_json(tmp_path_factory) -> Path:
    from archsim.api import run

    path = tmp_path_factory.mktemp("run") / "single.json"
    run({"system": "toy-roofline", "gemv": {"rows": 64, "cols": 64, "batch": 1}}, seed=3).write_json(path)
    return path


def test_default_out_dir(tmp_path):
    sweep = tmp_path / "pimgpt_channels_x_model"
    sweep.mkdir()
    assert default_out_dir(sweep) == sweep / "report"
    assert default_out_dir(tmp_path / "run.json") == tmp_path / "run-report"


def test_report_without_o_leaves_shipped_report_alone(tmp_path, monkeypatch, capsys):
    # Reproduce the issue: from a checkout, the sweep results dir is named like the shipped example.
    repo = tmp_path / "repo"
    shutil.copytree(SHIPPED, repo / "reports" / SHIPPED.name)
    before = {p: p.read_bytes() for p in (repo / "reports").rglob("*") if p.is_file()}
    body = toy_sweep(name=SHIPPED.name)
    body["axes"] = [{"grid": {"hw.bytes_per_s": [1.0e11, 2.0e11]}}]
    results = repo / "results" / SHIPPED.name
    from archsim.sweep import run_sweep

    run_sweep(write_sweep(tmp_path, body), results, jobs=1, progress=False)
    monkeypatch.chdir(repo)
    assert main(["report", str(Path("results") / SHIPPED.name), "-q"]) == 0
    assert (results / "report" / "report.html").is_file()
    assert {p: p.read_bytes() for p in (repo / "reports").rglob("*") if p.is_file()} == before


def test_run_json_default_and_rerun(run_json, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["report", str(run_json), "-q"]) == 0
    out = run_json.with_name("single-report")
    assert (out / "report.md").is_file()
    assert main(["report", str(run_json), "-q"]) == 0     # its own previous report is replaced
    listed = (out / MARKER).read_text().splitlines()[1:]
    assert "report.md" in listed and "runs.csv" in listed and any(x.startswith("figures/") for x in listed)


def test_refuses_foreign_files_unless_force(run_json, tmp_path, capsys):
    out = tmp_path / "rep"
    make_report([run_json], out)
    (out / "notes.txt").write_text("mine")          # a file the report did not write
    with pytest.raises(UserError, match=r"holds files archsim did not write \(notes.txt\).*--force"):
        make_report([run_json], out)
    assert main(["report", str(run_json), "-o", str(out)]) == 2
    assert "--force" in capsys.readouterr().err
    assert main(["report", str(run_json), "-o", str(out), "--force", "-q"]) == 0
    assert (out / "notes.txt").read_text() == "mine" and (out / "report.html").is_file()
    assert "notes.txt" not in (out / MARKER).read_text()     # still not ours: the next run refuses again
    with pytest.raises(UserError):
        make_report([run_json], out)


def test_old_marker_without_file_list(run_json, tmp_path):
    out = tmp_path / "old"
    make_report([run_json], out)
    (out / MARKER).write_text("archsim report directory; `archsim report` may replace it\n")
    make_report([run_json], out)                     # the standard report files count as ours
    (out / MARKER).write_text("archsim report directory; `archsim report` may replace it\n")
    (out / "README.md").write_text("hand-written")
    with pytest.raises(UserError, match="README.md"):
        make_report([run_json], out)
