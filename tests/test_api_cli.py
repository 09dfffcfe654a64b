"""The Python API mirrors the CLI; results are data (stats + tidy DataFrame + manifest)."""
from __future__ import annotations

import json

import archsim
from archsim.cli import main
from archsim.dram.trace import synthetic_trace, write_trace


def test_run_trace_api_and_registry_agree(tmp_path):
    trace = {"kind": "random", "requests": 3000, "span_bytes": 1 << 26, "seed": 3}
    a = archsim.run_trace(trace, preset="GDDR6_14Gbps", channels=2)
    b = archsim.run({"system": "dram-trace", "preset": "GDDR6_14Gbps", "channels": 2, "trace": trace})
    assert a.stats["cycles"] == b.stats["cycles"] > 0
    assert list(a.df["channel"]) == [0, 1] and a.df["requests"].sum() == 3000
    assert a.manifest["config_hash"] == b.manifest["config_hash"]
    # the per-channel table adds up to the totals
    assert a.df["cmd_RD"].sum() + a.df["cmd_RDA"].sum() == a.stats["reads"]
    assert a.df["row_hits"].sum() == a.stats["row_hits"]


def test_same_config_same_result():
    cfg = {"system": "dram-trace", "preset": "HBM2_2Gbps_PC", "trace": {"kind": "random", "requests": 2000}}
    r1, r2 = archsim.run(cfg, seed=5), archsim.run(cfg, seed=5)
    assert r1.stats["cycles"] == r2.stats["cycles"]
    assert r1.df.equals(r2.df)


def test_cli_trace_file_json_and_log(tmp_path, capsys):
    tr = synthetic_trace("stream", 2000, access_bytes=64, seed=1)
    path = tmp_path / "t.trace.gz"
    write_trace(tr, path, fmt="dramsim3")
    out_json, out_log = tmp_path / "r.json", tmp_path / "log.csv"
    rc = main(["trace", str(path), "--preset", "DDR4_3200AA_x8_8Gb", "--json", str(out_json), "--log", str(out_log),
               "--set", "dram.timing.nRCD=24"])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "bandwidth" in printed and "row hits/misses/conflicts" in printed
    data = json.loads(out_json.read_text())
    assert data["stats"]["requests"] == 2000
    assert data["manifest"]["config"]["dram"]["timing"]["nRCD"] == 24
    assert out_log.read_text().startswith("cycle,command,channel")
    # --quiet prints nothing (the JSON still gets written)
    out_json.unlink()
    assert main(["trace", str(path), "--preset", "DDR4_3200AA_x8_8Gb", "--json", str(out_json), "--quiet"]) == 0
    assert capsys.readouterr().out == "" and out_json.exists()


def test_cli_bad_input_leaves_nothing(tmp_path, capsys):
    bad = tmp_path / "bad.trace"
    bad.write_text("LD 0x40\nLD 0x80\nFOO 0x10\n")
    out_json = tmp_path / "r.json"
    assert main(["trace", str(bad), "--json", str(out_json)]) == 2
    err = capsys.readouterr().err
    assert "bad.trace:3" in err and "Traceback" not in err
    assert not out_json.exists()
    assert main(["trace", "synthetic:random:10", "--set", "dram.timing.nRCD=-1"]) == 2
    assert "timing.nRCD" in capsys.readouterr().err
    assert main(["trace", "synthetic:random:10", "--set", "controller.row_policy=sideways"]) == 2
    assert "must be one of open, closed" in capsys.readouterr().err
    # an address beyond capacity
    big = tmp_path / "big.trace"
    big.write_text("LD 0x7fffffffff\n")
    assert main(["trace", str(big), "--preset", "GDDR6_14Gbps"]) == 2
    assert "beyond the capacity" in capsys.readouterr().err


def test_dram_trace_controller_keys_are_sweepable_without_base(tmp_path):
    """The dram-trace system fills the controller's defaults, so a sweep can vary controller.* keys that the
    base config does not name; a misspelt one gets the nearest real keys."""
    import pytest

    from archsim.errors import UserError
    from archsim.sweep import load_results, load_sweep, run_sweep

    base = {"system": "dram-trace", "preset": "DDR4_3200AA_x8_8Gb", "trace": {"kind": "random", "requests": 500}}
    sweep = {"name": "rowpol", "base": base, "axes": [{"grid": {"controller.row_policy": ["open", "closed"]}}]}
    out = run_sweep(load_sweep(sweep), tmp_path / "res", jobs=1, progress=False)
    assert not out.failed
    stats, _ = load_results(tmp_path / "res")
    assert sorted(stats["controller.row_policy"]) == ["closed", "open"]
    bad = {**sweep, "axes": [{"grid": {"controller.row_polcy": ["open"]}}]}
    with pytest.raises(UserError, match="did you mean controller.row_policy"):
        load_sweep(bad)
