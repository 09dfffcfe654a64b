"""Issue #8.4: every file and folder archsim writes gets the permissions the user's umask gives
(0644 / 0755 under umask 022), not mkstemp's 0600 / mkdtemp's 0700."""
from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
import sweep_fixtures  # noqa: F401  (registers toy-roofline)
from sweep_fixtures import toy_sweep, write_sweep

from archsim.report import make_report
from archsim.results import atomic_write_text
from archsim.sweep import run_sweep


@pytest.fixture(params=[0o022, 0o027])
def mask(request):
    old = os.umask(request.param)
    yield request.param
    os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _check_tree(root: Path, mask: int) -> int:
    checked = 0
    for p in [root, *root.rglob("*")]:
        if p.name == ".lock":
            continue
        want = (0o777 if p.is_dir() else 0o666) & ~mask
        assert _mode(p) == want, f"{p}: {oct(_mode(p))}, expected {oct(want)}"
        checked += 1
    return checked


def test_atomic_write_text_follows_umask(tmp_path, mask):
    path = tmp_path / "out" / "r.json"
    atomic_write_text(path, "{}\n")
    assert _mode(path) == 0o666 & ~mask
    assert _mode(path.parent) == 0o777 & ~mask


def test_run_json_sweep_store_and_report_follow_umask(tmp_path):

    old = os.umask(0o027)         # not the usual 022, so a hard-coded 0644 would fail too
    try:
        _sweep_and_report(tmp_path, 0o027)
    finally:
        os.umask(old)


def _sweep_and_report(tmp_path: Path, mask: int) -> None:
    from archsim.api import run

    run_json = tmp_path / "run.json"
    run({"system": "toy-roofline", "gemv": {"rows": 64, "cols": 64, "batch": 1}}, seed=1).write_json(run_json)
    assert _mode(run_json) == 0o666 & ~mask
    body = toy_sweep()
    body["axes"] = [{"grid": {"hw.bytes_per_s": [1.0e11, 2.0e11]}}]
    results = tmp_path / "results"
    run_sweep(write_sweep(tmp_path, body), results, jobs=1, progress=False)
    assert _check_tree(results, mask) > 5
    report = tmp_path / "report"
    make_report([results, run_json], report)
    assert _check_tree(report, mask) > 5
    make_report([results], report)          # replacing a previous report keeps the modes too
    _check_tree(report, mask)
