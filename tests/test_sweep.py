"""Sweeps: expansion, validation before any run, the resumable store, executors, metrics."""
from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
import sweep_fixtures  # noqa: F401  (registers toy-roofline in this process)
from sweep_fixtures import subprocess_env, toy_sweep, write_sweep

from archsim.errors import UserError
from archsim.sweep import load_failures, load_results, load_sweep, run_sweep
from archsim.sweep.metrics import compute_metrics, parse_expression, parse_metrics
from archsim.sweep.runner import Progress, progress_wanted
from archsim.sweep.store import ResultsStore

CLI = [sys.executable, "-m", "archsim.cli"]


def sweep_of(tmp_path: Path, axes: list, **extra) -> object:
    body = toy_sweep()
    body["axes"] = axes
    body.pop("metrics")
    body.update(extra)
    return load_sweep(write_sweep(tmp_path, body))


# ----------------------------------------------------------------------------------------------------------
# expansion


def test_grid_is_cartesian_product(tmp_path):
    s = sweep_of(tmp_path, [{"grid": {"gemv.rows": [64, 128], "gemv.cols": [8, 16, 32]}}])
    assert len(s.points) == 6
    assert [(p.axes["gemv.rows"], p.axes["gemv.cols"]) for p in s.points] == [
        (64, 8), (64, 16), (64, 32), (128, 8), (128, 16), (128, 32)]
    p = s.points[4]
    assert p.config["gemv"] == {"rows": 128, "cols": 16, "batch": 1}
    assert p.config["system"] == "toy-roofline"
    assert len({p.point_hash for p in s.points}) == 6


def test_zip_pairs_values(tmp_path):
    s = sweep_of(tmp_path, [{"zip": {"gemv.rows": [64, 128, 256], "gemv.batch": [1, 2, 4]}}])
    assert [(p.axes["gemv.rows"], p.axes["gemv.batch"]) for p in s.points] == [(64, 1), (128, 2), (256, 4)]


def test_points_fill_unset_keys_with_base_values(tmp_path):
    s = sweep_of(tmp_path, [{"points": [{"gemv.rows": 64}, {"gemv.rows": 128, "gemv.cols": 32}]}])
    assert len(s.points) == 2
    assert s.axis_keys == ["gemv.rows", "gemv.cols"]
    assert s.points[0].axes == {"gemv.rows": 64, "gemv.cols": 1024}  # cols from the base config
    assert s.points[1].config["gemv"] == {"rows": 128, "cols": 32, "batch": 1}


def test_axes_multiply(tmp_path):
    s = sweep_of(tmp_path, [
        {"grid": {"gemv.rows": [64, 128]}},
        {"zip": {"gemv.cols": [8, 16, 32], "gemv.batch": [1, 2, 3]}},
        {"points": [{"hw.bytes_per_s": 1.0e11}, {"hw.bytes_per_s": 3.0e11}]},
    ])
    assert len(s.points) == 2 * 3 * 2
    combos = {(p.axes["gemv.rows"], p.axes["gemv.cols"], p.axes["gemv.batch"], p.axes["hw.bytes_per_s"])
              for p in s.points}
    assert len(combos) == 12 and (128, 16, 2, 3.0e11) in combos


def test_keys_from_system_defaults_are_sweepable(tmp_path):
    # hw.* is not in the base config; the toy system's resolver supplies it.
    s = sweep_of(tmp_path, [{"grid": {"hw.bytes_per_s": [1.0e11, 2.0e11]}}])
    assert [p.config["hw"]["bytes_per_s"] for p in s.points] == [1.0e11, 2.0e11]


def test_int_accepted_where_float_expected(tmp_path):
    s = sweep_of(tmp_path, [{"grid": {"hw.bytes_per_s": [100000000000, 2.0e11]}}])
    assert len(s.points) == 2


def test_base_config_from_a_file_next_to_the_sweep(tmp_path):
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "toy.yaml").write_text("system: toy-roofline\ngemv: {rows: 64, cols: 32, batch: 1}\n")
    s = sweep_of(tmp_path, [{"grid": {"gemv.cols": [8, 16]}}], base="configs/toy.yaml")
    assert [p.config["gemv"] for p in s.points] == [{"rows": 64, "cols": 8, "batch": 1},
                                                    {"rows": 64, "cols": 16, "batch": 1}]
    with pytest.raises(UserError, match="base: config file .*missing.yaml' not found"):
        sweep_of(tmp_path, [], base="missing.yaml")


def test_seeds_are_derived_deterministically(tmp_path):
    a = sweep_of(tmp_path, [{"grid": {"gemv.rows": [64, 128, 256]}}])
    b = sweep_of(tmp_path, [{"grid": {"gemv.rows": [256, 64, 128]}}])  # other order, same points
    seeds_a = {p.point_hash: p.seed for p in a.points}
    seeds_b = {p.point_hash: p.seed for p in b.points}
    assert seeds_a == seeds_b and len(set(seeds_a.values())) == 3
    c = sweep_of(tmp_path, [{"grid": {"gemv.rows": [64, 128, 256]}}], seed=8)
    assert {p.seed for p in c.points}.isdisjoint(seeds_a.values())


def test_explicit_seed_axis(tmp_path):
    s = sweep_of(tmp_path, [{"grid": {"seed": [1, 2, 3]}}])
    assert [p.seed for p in s.points] == [1, 2, 3]
    assert len({p.config_hash for p in s.points}) == 1  # same config ...
    assert len({p.point_hash for p in s.points}) == 3  # ... but three distinct runs
    assert all("seed" not in p.config for p in s.points)


# ----------------------------------------------------------------------------------------------------------
# bad input: UserError naming file, line, key path and what is allowed; nothing runs


BAD = {
    "unknown_key": ([{"grid": {"gemv.rowz": [1, 2]}}], ["gemv.rowz", "unknown key path", "gemv.rows"]),
    "unknown_key_hw": ([{"grid": {"hw.bandwidth": [1.0]}}], ["hw.bandwidth", "keys under hw:", "hw.bytes_per_s"]),
    "empty_grid_list": ([{"grid": {"gemv.rows": []}}], ["gemv.rows", "empty axis"]),
    "empty_grid": ([{"grid": {}}], ["axes[0].grid", "empty grid axis"]),
    "empty_points": ([{"points": []}], ["axes[0].points", "empty points axis"]),
    "type_str_for_int": ([{"grid": {"gemv.rows": [64, "128"]}}],
                         ["gemv.rows", "'128' is a string", "an integer", "axes[0].grid.gemv.rows[1]"]),
    "type_float_for_int": ([{"zip": {"gemv.rows": [64.5]}}], ["gemv.rows", "a number", "expected an integer"]),
    "type_bool_for_int": ([{"points": [{"gemv.batch": True}]}], ["gemv.batch", "true/false"]),
    "yaml_float_as_text": ([{"grid": {"hw.bytes_per_s": ["1e11"]}}], ["'1e11' is a string", "e.g. 1.0e+11"]),
    "zip_unequal": ([{"zip": {"gemv.rows": [1, 2, 3], "gemv.cols": [1, 2]}}],
                    ["zip lists must have equal lengths", "gemv.rows: 3", "gemv.cols: 2"]),
    "key_in_two_axes": ([{"grid": {"gemv.rows": [1]}}, {"grid": {"gemv.rows": [2]}}], ["swept by two axes"]),
    "section_not_leaf": ([{"grid": {"gemv": [1, 2]}}], ["gemv", "section", "gemv.rows"]),
    "not_a_list": ([{"grid": {"gemv.rows": 64}}], ["gemv.rows", "must be a list"]),
    "unknown_axis_kind": ([{"grids": {"gemv.rows": [64]}}], ["unknown axis kind", "did you mean grid"]),
    "duplicate_points": ([{"points": [{"gemv.rows": 64}, {"gemv.rows": 64}]}], ["same run"]),
    "bad_seed": ([{"grid": {"seed": [-1]}}], ["seed", ">= 0"]),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_sweep_is_user_error(tmp_path, case):
    axes, expected = BAD[case]
    path = write_sweep(tmp_path, {**{k: v for k, v in toy_sweep().items() if k != "metrics"}, "axes": axes})
    with pytest.raises(UserError) as info:
        load_sweep(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}:")
    assert ":" in msg.split(" ")[0][len(str(path)):]  # file:line
    for text in expected:
        assert text in msg, msg


@pytest.mark.parametrize("patch, expected", [
    ({"colour": 1}, ["colour", "unknown sweep-file key"]),
    ({"base": {"system": "toy-roofln"}}, ["unknown system", "toy-roofline"]),
    ({"base": {"gemv": {"rows": 1}}}, ["system", "must name a system"]),
    ({"imports": ["no_such_module_xyz"]}, ["imports[0]", "no_such_module_xyz", "not found"]),
    ({"seed": "one"}, ["seed", "integer"]),
    ({"metrics": {"s": {"expr": "__import__('os').system('true')", "baseline": {"gemv.rows": 1024}}}},
     ["metrics.s.expr", "Call is not allowed"]),
    ({"metrics": {"s": {"expr": "latency_s", "baseline": {"gemv.cols": 256}}}},
     ["gemv.cols", "baseline keys must be swept axis keys", "gemv.rows"]),
    ({"metrics": {"s": {"expr": "latency_s", "baseline": {"gemv.rows": 999}}}},
     ["gemv.rows", "not one of the swept values", "1024, 2048"]),
    ({"metrics": {"s": "baseline.latency_s / latency_s"}}, ["no `baseline:`"]),
])
def test_bad_sweep_file_sections(tmp_path, patch, expected):
    body = toy_sweep()
    body["axes"] = [{"grid": {"gemv.rows": [1024, 2048]}}]
    body.pop("metrics")
    body.update(patch)
    with pytest.raises(UserError) as info:
        load_sweep(write_sweep(tmp_path, body))
    for text in expected:
        assert text in str(info.value), str(info.value)


def test_yaml_syntax_error_names_file_and_line(tmp_path):
    with pytest.raises(UserError, match=r"sweep.yaml:\d+: invalid YAML"):
        load_sweep(write_sweep(tmp_path, "name: x\naxes: [\n"))
    with pytest.raises(UserError, match=r"sweep.yaml: expected a mapping"):
        load_sweep(write_sweep(tmp_path, "- just\n- a list\n"))


def test_cli_bad_sweep_exits_2_without_traceback_and_runs_nothing(tmp_path):
    body = toy_sweep()
    body["axes"] = [{"grid": {"gemv.rowz": [1, 2]}}]
    path = write_sweep(tmp_path, body)
    out = tmp_path / "res"
    proc = subprocess.run([*CLI, "sweep", str(path), "-o", str(out)], env=subprocess_env(),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("archsim: error: ") and "gemv.rowz" in proc.stderr and "gemv.rows" in proc.stderr
    assert not out.exists()


def test_run_options_are_checked(tmp_path):
    path = write_sweep(tmp_path, toy_sweep())
    with pytest.raises(UserError, match="--jobs"):
        run_sweep(path, tmp_path / "o", jobs=0)
    with pytest.raises(UserError, match="unknown executor"):
        run_sweep(path, tmp_path / "o", executor="ray")
    with pytest.raises(UserError, match="--scheduler needs --executor dask"):
        run_sweep(path, tmp_path / "o", scheduler="tcp://127.0.0.1:1")
    assert not (tmp_path / "o").exists()


# ----------------------------------------------------------------------------------------------------------
# running and the store


def test_run_store_and_load(tmp_path):
    path = write_sweep(tmp_path, toy_sweep(run_log=str(tmp_path / "runs.log")))
    sweep = load_sweep(path)
    out = tmp_path / "res"
    outcome = run_sweep(path, out, jobs=2, progress=False)
    assert (outcome.total, outcome.skipped, outcome.succeeded, outcome.failed) == (8, 0, 8, [])

    manifest = json.loads((out / "manifest.json").read_text())
    from archsim import __version__

    assert manifest["archsim_version"] == __version__
    assert manifest["sweep_text"] == path.read_text()
    assert [p["point_hash"] for p in manifest["points"]] == [p.point_hash for p in sweep.points]
    assert manifest["points"][3]["axes"] == sweep.points[3].axes

    stats, table = load_results(out)
    assert list(stats["point_hash"]) == [p.point_hash for p in sweep.points]  # manifest order
    assert len(table) == 2 * 8 and set(table["op"]) == {"gemv", "activation"}
    for col in ("config_hash", "seed", "gemv.rows", "hw.bytes_per_s", "gemv.cols", "gemv.batch"):
        assert col in stats.columns and col in table.columns
    # speedup: same rows/cols/batch, bytes_per_s 2e11 vs the 1e11 baseline; this toy is memory-bound
    fast = stats[stats["hw.bytes_per_s"] == 2.0e11]
    assert (fast["speedup"] > 1.9).all() and (stats[stats["hw.bytes_per_s"] == 1.0e11]["speedup"] == 1.0).all()
    assert stats["gflops"].to_numpy() == pytest.approx((stats["flops"] / stats["latency_s"] / 1e9).to_numpy())
    # the seed reached the system, and each point's Result manifest is kept in its parquet file
    point = sweep.points[0]
    meta = pq.read_schema(out / "points" / f"{point.point_hash}.parquet").metadata
    result_manifest = json.loads(meta[b"archsim.result_manifest"])
    assert result_manifest["seed"] == point.seed and result_manifest["config_hash"] == point.config_hash
    assert not list(out.rglob("*.tmp"))

    # rerun: nothing recomputed; --force recomputes everything
    before = {p: p.stat().st_mtime_ns for p in (out / "points").iterdir()}
    again = run_sweep(path, out, jobs=2, progress=False)
    assert (again.skipped, again.succeeded) == (8, 0)
    assert {p: p.stat().st_mtime_ns for p in (out / "points").iterdir()} == before
    assert len((tmp_path / "runs.log").read_text().splitlines()) == 8
    forced = run_sweep(path, out, jobs=2, progress=False, force=True)
    assert (forced.skipped, forced.succeeded) == (0, 8)
    assert len((tmp_path / "runs.log").read_text().splitlines()) == 16
    pd.testing.assert_frame_equal(load_results(out)[0], stats)  # same config + seed -> same results


def test_failing_point_is_recorded_and_others_finish(tmp_path, capsys):
    from archsim.cli import main

    path = write_sweep(tmp_path, toy_sweep(fail_if={"rows": 2048}))
    out = tmp_path / "res"
    assert main(["sweep", str(path), "-o", str(out), "--jobs", "2"]) == 1
    captured = capsys.readouterr()
    assert "8 points: 0 already done, 4 ran, 4 failed" in captured.out
    assert captured.err.count("FAILED") == 4 and "asked to fail for gemv.rows=2048" in captured.err
    stats, _ = load_results(out)
    assert len(stats) == 4 and set(stats["gemv.rows"]) == {1024}
    failures = load_failures(out)
    assert len(failures) == 4
    record = json.loads((out / "failures" / f"{failures[0]['point_hash']}.json").read_text())
    assert record["error_type"] == "ValueError" and "Traceback" in record["traceback"]
    assert record["axes"]["gemv.rows"] == 2048 and record["config"]["gemv"]["rows"] == 2048


def test_failure_record_removed_when_point_later_succeeds(tmp_path):
    sweep = load_sweep(write_sweep(tmp_path, toy_sweep()))
    store = ResultsStore(tmp_path / "res")
    with store.lock():
        store.prepare(sweep)
        point = sweep.points[0]
        store.write_failure(point, {"error_type": "ValueError", "error": "boom", "traceback": "..."})
        assert load_failures(store.root)[0]["error"] == "boom"
        store.write_point(point, {"latency_s": 1.0}, pd.DataFrame({"op": ["x"]}), {})
    assert load_failures(store.root) == [] and not store.failure_path(point.point_hash).exists()


def test_results_dir_guards(tmp_path):
    path = write_sweep(tmp_path, toy_sweep())
    out = tmp_path / "res"
    store = ResultsStore(out)
    with store.lock(), pytest.raises(UserError, match="another archsim sweep is writing"):
        run_sweep(path, out, jobs=1, progress=False)
    run_sweep(path, out, jobs=1, progress=False)
    other = write_sweep(tmp_path, toy_sweep(name="other"), name="other.yaml")
    with pytest.raises(UserError, match="holds results of sweep 'toy', not 'other'"):
        run_sweep(other, out, jobs=1, progress=False)
    stranger = tmp_path / "stranger"
    stranger.mkdir()
    (stranger / "notes.txt").write_text("mine")
    with pytest.raises(UserError, match="not an archsim results directory"):
        run_sweep(path, stranger, jobs=1, progress=False)
    assert sorted(p.name for p in stranger.iterdir()) == ["notes.txt"]


def test_local_workers_start_safely_when_other_threads_exist(tmp_path):
    # With another thread alive fork is unsafe, so the pool uses forkserver; results must be the same.
    path = write_sweep(tmp_path, toy_sweep())
    run_sweep(path, tmp_path / "fork", jobs=2, progress=False)
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        outcome = run_sweep(path, tmp_path / "forkserver", jobs=2, progress=False)
    finally:
        stop.set()
        thread.join()
    assert outcome.succeeded == 8
    pd.testing.assert_frame_equal(load_results(tmp_path / "fork")[1], load_results(tmp_path / "forkserver")[1])


def _finished(points_dir: Path) -> list[Path]:
    return [p for p in points_dir.glob("*.parquet") if not p.name.endswith(".stats.parquet")] \
        if points_dir.is_dir() else []


def test_kill_midway_then_resume(tmp_path):
    """SIGKILL the whole sweep halfway: the rerun completes it, keeps finished points, corrupts nothing."""
    body = toy_sweep(work_s=0.3, run_log=str(tmp_path / "runs.log"))
    body["axes"] = [{"grid": {"gemv.rows": [256, 512, 1024, 2048], "gemv.cols": [64, 128, 256]}}]
    body.pop("metrics")
    path = write_sweep(tmp_path, body)
    out = tmp_path / "res"
    cmd = [*CLI, "sweep", str(path), "-o", str(out), "--jobs", "2"]
    proc = subprocess.Popen(cmd, env=subprocess_env(), start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    try:
        while len(_finished(out / "points")) < 6:
            assert proc.poll() is None, f"sweep ended before it could be killed: {proc.stderr.read()}"
            assert time.monotonic() < deadline, "sweep made no progress"
            time.sleep(0.01)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # the CLI and its worker processes
        proc.wait()
        proc.stderr.close()
    done = {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in _finished(out / "points")}
    assert 6 <= len(done) < 12
    for p in (out / "points").glob("*.parquet"):  # whatever the kill left is complete
        pq.read_table(p)

    rerun = subprocess.run(cmd, env=subprocess_env(), capture_output=True, text=True, timeout=60)
    assert rerun.returncode == 0, rerun.stderr
    assert f"12 points: {len(done)} already done, {12 - len(done)} ran, 0 failed" in rerun.stdout
    sweep = load_sweep(path)
    stats, table = load_results(out)
    assert sorted(stats["point_hash"]) == sorted(p.point_hash for p in sweep.points)  # each exactly once
    assert len(table) == 24
    for p in (out / "points").glob("*.parquet"):
        pq.read_table(p)
    assert not list(out.rglob("*.tmp"))
    # points finished before the kill were neither rewritten nor recomputed
    assert {n: (p.stat().st_ino, p.stat().st_mtime_ns) for n, p in
            ((n, out / "points" / n) for n in done)} == done
    runs = pd.Series([line.split()[0] for line in (tmp_path / "runs.log").read_text().splitlines()])
    counts = runs.value_counts()
    by_hash = {p.point_hash: p.config_hash for p in sweep.points}
    for name in done:
        assert counts[by_hash[name.removesuffix(".parquet")]] == 1
    assert set(counts.index) == set(by_hash.values())


def test_dask_and_local_give_identical_tables(tmp_path, monkeypatch):
    from distributed import LocalCluster

    monkeypatch.setenv("PYTHONPATH", subprocess_env()["PYTHONPATH"])  # Dask workers import sweep_fixtures
    path = write_sweep(tmp_path, toy_sweep())
    local = run_sweep(path, tmp_path / "local", jobs=2, progress=False)
    with LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None) as cluster:
        dask = run_sweep(path, tmp_path / "dask", executor="dask", scheduler=cluster.scheduler_address,
                         progress=False)
    assert local.succeeded == dask.succeeded == 8 and not dask.failed

    def tidy(frame: pd.DataFrame) -> pd.DataFrame:
        return frame.sort_values(list(frame.columns)[:2] + ["point_hash"]).reset_index(drop=True)

    for a, b in zip(load_results(tmp_path / "local"), load_results(tmp_path / "dask"), strict=True):
        pd.testing.assert_frame_equal(tidy(a), tidy(b))


def test_unreachable_dask_scheduler_is_user_error(tmp_path, capsys):
    from archsim.cli import main

    path = write_sweep(tmp_path, toy_sweep())
    assert main(["sweep", str(path), "-o", str(tmp_path / "r"), "--scheduler", "tcp://127.0.0.1:9"]) == 2
    assert "cannot connect to the Dask scheduler 'tcp://127.0.0.1:9'" in capsys.readouterr().err


# ----------------------------------------------------------------------------------------------------------
# metrics


@pytest.mark.parametrize("expr", [
    "__import__('os').system('echo hi')", "latency_s.__class__", "(lambda: 1)()", "latency_s[0]",
    "latency_s if flops else 1", "latency_s < 1", "f'{latency_s}'", "[latency_s]", "latency_s and flops",
    "baseline", "latency_s // 2", "'text'", "True", "x := 1", "open('f')",
])
def test_metric_expressions_reject_non_arithmetic(expr):
    with pytest.raises(ValueError):
        parse_expression(expr)


def test_metric_expression_names():
    _, names, base = parse_expression("(baseline.latency_s - latency_s) / -hw.bytes_per_s ** 2 + 1.5e3")
    assert names == ("latency_s", "hw.bytes_per_s") and base == ("latency_s",)


def test_metric_evaluation_with_baseline_groups():
    stats = pd.DataFrame({
        "mem": ["ddr", "ddr", "hbm", "hbm", "ddr", "hbm"],
        "size": [1, 1, 1, 1, 2, 2],
        "latency_s": [4.0, 4.0, 1.0, 1.0, 8.0, 2.0],
        "energy_pj": [10.0, 10.0, 6.0, 6.0, 0.0, 1.0],
    }).iloc[[0, 2, 4, 5]].reset_index(drop=True)

    def err(where, key, problem):
        return UserError(f"{where} {key} {problem}")

    metrics = parse_metrics({
        "speedup": {"expr": "baseline.latency_s / latency_s", "baseline": {"mem": "ddr"}},
        "pj_per_s": "energy_pj / latency_s",
        "inv": "1 / energy_pj",
    }, {"mem": list(stats["mem"]), "size": list(stats["size"])}, err)
    out = compute_metrics(stats, metrics, ["mem", "size"])
    assert list(out["speedup"]) == [1.0, 4.0, 1.0, 4.0]  # hbm vs ddr of the same size
    assert list(out["pj_per_s"]) == [2.5, 6.0, 0.0, 0.5]
    assert out["inv"].iloc[2] == float("inf")  # division by zero gives inf, not an exception
    # a missing baseline point gives NaN; an unknown column is a UserError with a hint
    out = compute_metrics(stats.iloc[1:], metrics, ["mem", "size"])
    assert out["speedup"].isna().iloc[0] and out["speedup"].iloc[2] == 4.0
    bad = parse_metrics({"m": "latency_z * 2"}, {}, err)
    with pytest.raises(UserError, match="'latency_z' is not a stats column; did you mean latency_s"):
        compute_metrics(stats, bad, [])


# ----------------------------------------------------------------------------------------------------------
# progress


def test_progress_line_and_quiet_rules(monkeypatch):
    buf = io.StringIO()
    bar = Progress("demo", 10, enabled=True, stream=buf)
    bar.update(3, 1, force=True)
    bar.close()
    text = buf.getvalue()
    assert "demo [" in text and "4/10 points" in text and "1 failed" in text and "ETA" in text
    monkeypatch.setenv("CI", "true")

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert not progress_wanted(Tty())
    monkeypatch.delenv("CI")
    assert progress_wanted(Tty()) and not progress_wanted(io.StringIO())
