"""Sweeps that survive what happens to long unattended runs (issue 27): the sweep process killed (SIGKILL or
SIGTERM) takes its workers with it and the same command resumes at once; a lock names its holder and is
taken over from a dead one; a corrupt stored point is run again; a worker that dies fails only its point;
a metric naming a column the system does not produce stops the sweep early."""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sweep_fixtures  # noqa: F401  (registers toy-roofline in this process)
from sweep_fixtures import subprocess_env, toy_sweep, write_sweep

from archsim.errors import UserError
from archsim.sweep import load_failures, load_results, run_sweep
from archsim.sweep.store import ResultsStore

CLI = [sys.executable, "-m", "archsim.cli"]


def _children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[1]) == pid:
                    out.append(int(entry.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _slow_sweep(tmp_path: Path) -> Path:
    body = toy_sweep(work_s=0.4)
    body["axes"] = [{"grid": {"gemv.rows": [256, 512, 1024, 2048], "gemv.cols": [64, 128]}}]
    body.pop("metrics")
    return write_sweep(tmp_path, body)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_killed_sweep_takes_its_workers_and_resumes_at_once(tmp_path, sig):
    path = _slow_sweep(tmp_path)
    out = tmp_path / "res"
    cmd = [*CLI, "sweep", str(path), "-o", str(out), "--jobs", "2"]
    proc = subprocess.Popen(cmd, env=subprocess_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    workers: list[int] = []
    while len(workers) < 2:
        assert proc.poll() is None, proc.stderr.read()
        assert time.monotonic() < deadline, "no workers started"
        workers = _children(proc.pid)
        time.sleep(0.05)
    os.kill(proc.pid, sig)          # the sweep process only, as `timeout` or a job scheduler does
    proc.wait()
    err = proc.stderr.read().decode()
    proc.stderr.close()
    if sig == signal.SIGTERM:       # a clean stop: workers stopped, lock released, a line saying how to resume
        assert proc.returncode == 128 + signal.SIGTERM and "stopped by SIGTERM" in err, (proc.returncode, err)
    deadline = time.monotonic() + 10
    while any(_alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [w for w in workers if _alive(w)], f"workers {workers} outlived the killed sweep"
    rerun = subprocess.run(cmd, env=subprocess_env(), capture_output=True, text=True, timeout=120)
    assert rerun.returncode == 0, rerun.stderr
    assert "8 points:" in rerun.stdout and "0 failed" in rerun.stdout, rerun.stdout
    # a SIGKILLed sweep's lock record is taken over, with a line saying so; a SIGTERMed one left none
    assert ("taking over the lock of sweep pid" in rerun.stderr) == (sig == signal.SIGKILL), rerun.stderr
    assert len(load_results(out)[0]) == 8


def test_lock_names_its_holder(tmp_path):
    path = _slow_sweep(tmp_path)
    store = ResultsStore(tmp_path / "res")
    with store.lock(), pytest.raises(UserError, match=rf"another archsim sweep .*\(pid {os.getpid()} on "):
        run_sweep(path, store.root, jobs=1, progress=False)
    assert (store.root / ".lock").read_text() == ""      # a clean end leaves no holder record


def test_corrupt_point_is_run_again(tmp_path, capsys):
    body = toy_sweep()
    path = write_sweep(tmp_path, body)
    out = tmp_path / "res"
    assert run_sweep(path, out, jobs=1, progress=False).succeeded == 8
    points = sorted((out / "points").glob("*.stats.parquet"))
    victim = points[0].name.removesuffix(".stats.parquet")
    table = out / "points" / f"{victim}.parquet"
    table.write_bytes(table.read_bytes()[: table.stat().st_size // 2])     # a truncated file
    outcome = run_sweep(path, out, jobs=1, progress=False)
    assert (outcome.skipped, outcome.succeeded) == (7, 1), outcome
    assert f"sweep point {victim}" in capsys.readouterr().err
    assert len(load_results(out)[0]) == 8


def test_dead_worker_fails_only_its_point(tmp_path):
    path = write_sweep(tmp_path, toy_sweep(die_if={"rows": 2048}))
    out = tmp_path / "res"
    outcome = run_sweep(path, out, jobs=2, progress=False)
    failures = load_failures(out)
    assert (outcome.succeeded, len(outcome.failed), len(failures)) == (4, 4, 4), outcome
    assert all("worker process running this point died (killed by signal 9" in f["error"] for f in failures)
    stats, _ = load_results(out)
    assert set(stats["gemv.rows"]) == {1024}


def test_unknown_metric_column_stops_the_sweep_early(tmp_path):
    body = toy_sweep(work_s=0.2)
    body["metrics"] = {"bad": "latncy_s * 2"}
    path = write_sweep(tmp_path, body)
    out = tmp_path / "res"
    with pytest.raises(UserError, match=r"metrics.bad.expr: 'latncy_s' is not a stats column .*did you mean latency_s"):
        run_sweep(path, out, jobs=1, progress=False)
    assert len(list((out / "points").glob("*.stats.parquet"))) == 1, "the sweep ran on after the first point"
    # on resume the stored point shows the columns: refused before anything runs
    with pytest.raises(UserError, match="not a stats column"):
        run_sweep(path, out, jobs=1, progress=False)
    assert len(list((out / "points").glob("*.stats.parquet"))) == 1
