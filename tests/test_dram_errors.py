"""Bad input to the DRAM side gets a clear error (file, key or line, allowed values), never a traceback;
the CLI exits 2 on user error, and `archsim check-log` exits 1 on a log with violations, 0 on a clean one."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from archsim.cli import main
from archsim.dram.spec import load_spec, preset_names
from archsim.dram.trace import Trace
from archsim.errors import ConfigError, UserError
from archsim.systems.dram_trace.system import run_trace

DDR4 = "DDR4_3200AA_x8_8Gb"
HBM3 = "HBM3_6400Mbps"


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "Traceback" not in out
    return code, out, err


# ------------------------------------------------------------------------------------------------
# API


def test_unknown_preset_lists_known_ones():
    with pytest.raises(UserError) as exc:
        load_spec("HBM9_9000Mbps")
    msg = str(exc.value)
    assert "unknown DRAM preset 'HBM9_9000Mbps'" in msg
    for name in preset_names():
        assert name in msg


@pytest.mark.parametrize("overrides", [{"timing.nRCDRD": -3}, ["dram.timing.nRCDRD=-3"], {"timing.nRCDRD": 2.5}])
def test_invalid_timing_value_names_the_key(overrides):
    with pytest.raises(ConfigError) as exc:
        load_spec(HBM3, overrides=overrides)
    msg = str(exc.value)
    assert "timing.nRCDRD" in msg and "must be an integer >= 1" in msg and "HBM3_6400Mbps.yaml" in msg


def test_invalid_time_in_ns_names_the_key():
    with pytest.raises(ConfigError, match=r"timing\.tRCDRD_ns: must be a finite time in ns >= 0, got -1"):
        load_spec(HBM3, overrides={"timing.tRCDRD_ns": -1})


def test_unknown_timing_parameter_lists_allowed():
    with pytest.raises(ConfigError, match=r"timing\.nFOO: unknown timing parameter for HBM3; allowed: nBL"):
        load_spec(HBM3, overrides={"timing.nFOO": 3})


@pytest.mark.parametrize("preset,key", [(HBM3, "nRC"), (DDR4, "nRC"), (DDR4, "nRCDRD"), (HBM3, "nREFIpb")])
def test_setting_a_derived_value_is_an_error(preset, key):
    with pytest.raises(ConfigError, match=rf"timing\.{key}: {key} is derived \({key} = .+\); set its inputs instead"):
        load_spec(preset, overrides={f"timing.{key}": 50})


def test_valid_override_changes_the_timing():
    assert load_spec(HBM3, overrides={"timing.nRCDRD": 40}).timing["nRCDRD"] == 40
    spec = load_spec(HBM3, overrides={"timing.nRAS": 50})
    assert spec.timing["nRC"] == 50 + spec.timing["nRP"]  # derived values follow their inputs


def test_address_beyond_capacity():
    spec = load_spec(DDR4)
    cap = spec.capacity_bytes
    trace = Trace(addr=np.array([0, cap], dtype=np.uint64), is_write=np.zeros(2, dtype=bool),
                  arrive=np.full(2, -1), source="mytrace", fmt="synthetic")
    with pytest.raises(UserError) as exc:
        run_trace(trace, preset=DDR4)
    msg = str(exc.value)
    assert "mytrace" in msg and "beyond the capacity" in msg and hex(cap) in msg and DDR4 in msg
    # the last byte is fine
    ok = Trace(addr=np.array([cap - 1], dtype=np.uint64), is_write=np.zeros(1, dtype=bool), arrive=np.full(1, -1),
               source="t", fmt="synthetic")
    assert run_trace(ok, preset=DDR4).stats["requests"] == 1


def test_malformed_trace_line_names_file_and_line(tmp_path):
    path = tmp_path / "bad.trace"
    path.write_text("LD 0x40\nST 0x80\nLD zz\n")
    with pytest.raises(UserError, match=rf"{path}:3: bad address 'zz'"):
        run_trace(str(path), preset=DDR4)


def test_bad_controller_option_names_the_key():
    with pytest.raises(ConfigError, match=r"controller\.refresh.*perbank"):
        run_trace({"kind": "random", "requests": 10}, preset=DDR4, controller={"refresh": "sometimes"})
    with pytest.raises(ConfigError, match=r"controller\.row_polcy: unknown key; did you mean row_policy"):
        run_trace({"kind": "random", "requests": 10}, preset=DDR4, controller={"row_polcy": "open"})


def test_synthetic_trace_fits_any_preset():
    r = run_trace({"kind": "random", "requests": 100}, preset="GDDR6_14Gbps")
    assert r.stats["requests"] == 100


# ------------------------------------------------------------------------------------------------
# CLI: exit 2 and one line on stderr, never a traceback


@pytest.mark.parametrize("argv,expect", [
    (["trace", "synthetic:random:10", "--preset", "NOPE", "--quiet"], "unknown DRAM preset 'NOPE'; known: DDR4"),
    (["trace", "synthetic:random:10", "--set", "dram.timing.nRCD=-3", "--quiet"],
     "timing.nRCD: must be an integer >= 1 and <= 1,048,576, got -3"),
    (["trace", "synthetic:random:10", "--set", "dram.timing.nRC=50", "--quiet"], "nRC is derived"),
    (["trace", "synthetic:random:10", "--set", "dram.timing.nFOO=5", "--quiet"], "dram.timing.nFOO: unknown key path"),
    (["trace", "no/such/file.trace", "--quiet"], "trace file not found"),
    (["trace", "synthetic:random:ten", "--quiet"], "expected synthetic:KIND:N"),
    (["trace", "synthetic:random:10", "--address-mapping", "RoXxCh", "--quiet"], "unknown field 'Xx'"),
    (["check-log", "no/such/log.csv", "--preset", DDR4], "command log not found"),
])
def test_cli_user_errors_exit_2(capsys, argv, expect):
    code, _out, err = _cli(capsys, *argv)
    assert code == 2
    assert err.startswith("archsim: error: ") and expect in err


def test_cli_malformed_trace_and_capacity(capsys, tmp_path):
    bad = tmp_path / "t.trace"
    bad.write_text("0x40 READ 0\n0x80 READ 5\n0x100 FETCH 9\n")
    code, _, err = _cli(capsys, "trace", str(bad), "--quiet")
    assert code == 2 and f"{bad}:3" in err
    far = tmp_path / "far.trace"
    far.write_text(f"LD {hex(load_spec(DDR4).capacity_bytes + 64)}\n")
    code, _, err = _cli(capsys, "trace", str(far), "--quiet")
    assert code == 2 and "beyond the capacity" in err


# ------------------------------------------------------------------------------------------------
# check-log


@pytest.fixture
def clean_log(tmp_path, capsys):
    path = tmp_path / "cmds.csv"
    code, _, _ = _cli(capsys, "trace", "synthetic:random:300", "--preset", DDR4, "--log", str(path), "--quiet")
    assert code == 0 and path.is_file()
    return path


def test_check_log_clean_returns_0(capsys, clean_log):
    code, out, _ = _cli(capsys, "check-log", str(clean_log), "--preset", DDR4)
    assert code == 0 and out.startswith("OK:") and "no violations" in out


def test_check_log_tampered_returns_1_and_names_the_rule(capsys, clean_log, tmp_path):
    df = pd.read_csv(clean_log)
    i = int(df.index[df.command == "RD"][10])
    j = int(df.index[(df.command == "ACT") & (df.index < i)
                     & (df.bankgroup == df.bankgroup[i]) & (df.bank == df.bank[i])][-1])
    n_rcd = load_spec(DDR4).timing["nRCDRD"]
    df.loc[i, "cycle"] = df.cycle[j] + n_rcd - 1     # RD one cycle before its ACT's nRCDRD has passed
    df = df.sort_values("cycle", kind="stable").reset_index(drop=True)
    bad = tmp_path / "tampered.csv"
    df.to_csv(bad, index=False)
    code, out, _ = _cli(capsys, "check-log", str(bad), "--preset", DDR4)
    assert code == 1 and out.startswith("FAIL:")
    assert f"bank: ACT -> RD >= nRCDRD = {n_rcd}, got {n_rcd - 1}" in out


def test_check_log_state_violation_returns_1(capsys, clean_log, tmp_path):
    df = pd.read_csv(clean_log)
    df = df.drop(index=df.index[df.command == "PRE"][0]).reset_index(drop=True)  # a lost precharge
    bad = tmp_path / "lost_pre.csv"
    df.to_csv(bad, index=False)
    code, out, _ = _cli(capsys, "check-log", str(bad), "--preset", DDR4)
    assert code == 1 and "ACT opens row" in out and "buffer mem of" in out and "open (close it first)" in out


@pytest.mark.parametrize("edit,expect", [
    (lambda df: df.assign(command=df.command.where(df.index != 3, "NOP")), "bad.csv:5: unknown command 'NOP'"),  # data row 3: line 5
    (lambda df: df.assign(channel=df.channel.where(df.index != 4, 5)), "bad.csv:6: channel 5 out of range"),
    (lambda df: df.drop(columns=["bank"]), "lacks columns bank"),
])
def test_check_log_bad_input_exits_2(capsys, clean_log, tmp_path, edit, expect):
    bad = tmp_path / "bad.csv"
    edit(pd.read_csv(clean_log)).to_csv(bad, index=False)
    code, _, err = _cli(capsys, "check-log", str(bad), "--preset", DDR4)
    assert code == 2 and expect in err


def test_check_log_with_wrong_channel_count_is_a_clear_error(capsys, tmp_path):
    path = tmp_path / "two.csv"
    code, _, _ = _cli(capsys, "trace", "synthetic:random:200", "--preset", DDR4, "--channels", "2",
                      "--log", str(path), "--quiet")
    assert code == 0
    code, _, err = _cli(capsys, "check-log", str(path), "--preset", DDR4)
    assert code == 2 and "channel 1 out of range 0..0" in err
    code, out, _ = _cli(capsys, "check-log", str(path), "--preset", DDR4, "--channels", "2")
    assert code == 0 and out.startswith("OK:")
