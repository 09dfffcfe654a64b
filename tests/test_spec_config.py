"""DRAM standards/presets as data, config overrides, address mapping, energy formulas, packaging of data."""
from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.config import load_yaml_text, set_path
from archsim.dram import mapping
from archsim.dram.spec import LEVELS, load_spec, preset_names
from archsim.energy import dram_action_energy_pj, dram_energy_pj
from archsim.errors import ConfigError, UserError

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", preset_names())
def test_every_preset_loads_with_derived_values(name):
    s = load_spec(name)
    t = s.timing
    assert t["nRC"] == t["nRAS"] + t["nRP"]
    assert t["nREFIpb"] == t["nREFI"] // s.banks_per_rank
    assert s.capacity_bytes == s.total_banks * s.rows * s.row_bytes
    # every constraint level is one of the standard's levels and latencies are non-negative
    assert all(0 <= c["level"] < len(s.levels) and c["latency"] >= 0 for c in s.constraints)
    assert s.node_of.shape == (s.total_banks, len(s.levels)) and len(s.counts) == len(LEVELS)


def test_preset_peak_bandwidths_match_closed_form():
    # pin rate x bus width / 8, per data bus (pseudo-channel for HBM)
    expect = {"DDR4_3200AA_x8_8Gb": 3.2 * 64 / 8, "HBM2_2Gbps_PC": 2.0 * 64 / 8, "HBM2_2Gbps_Legacy": 2.0 * 128 / 8,
              "HBM3_6400Mbps": 6.4 * 32 / 8, "GDDR6_16Gbps": 16 * 16 / 8}
    for name, gbps in expect.items():
        assert load_spec(name).peak_bw_per_bus_bytes_per_s / 1e9 == pytest.approx(gbps, rel=1e-9), name
    # GDDR6 14 Gbps: tCK is rounded to 570 ps in the preset (1.754 GHz), so allow that rounding
    assert load_spec("GDDR6_14Gbps").peak_bw_per_bus_bytes_per_s / 1e9 == pytest.approx(28.0, rel=0.01)


def test_ns_values_use_jedec_rounding():
    s = load_spec("DDR4_3200AA_x8_8Gb")  # tCK 0.625 ns
    assert s.timing["nRAS"] == math.ceil(32 / 0.625)          # 51.2 -> 52
    assert s.timing["nWR"] == 24                               # 15 / 0.625 = 24 exactly, no round-up
    assert s.timing["nFAW"] == 34 and s.timing["nCCDL"] == 8 and s.timing["nRRDL"] == 8


def test_override_cycles_replaces_ns_and_recomputes_derived():
    s = load_spec("DDR4_3200AA_x8_8Gb", overrides=["timing.nRAS=40", "dram.timing.nRP=30"])
    assert s.timing["nRAS"] == 40 and s.timing["nRC"] == 70
    rcd = [c for c in s.constraints if c["prev_name"] == "ACT" and c["next_name"] == "RD" and c["level_name"] == "bank"]
    assert rcd[0]["latency"] == s.timing["nRCD"] == 22


def test_bad_values_name_the_key():
    with pytest.raises(ConfigError, match=r"timing\.nRCDRD: must be an integer >= 1 and <= 1,048,576, got -3"):
        load_spec("HBM2_2Gbps_PC", overrides={"timing.nRCDRD": -3})
    with pytest.raises(ConfigError, match=r"nRC is derived"):
        load_spec("HBM2_2Gbps_PC", overrides={"timing.nRC": 50})
    with pytest.raises(ConfigError, match=r"unknown timing parameter.*did you mean nRCDRD"):
        load_spec("HBM2_2Gbps_PC", overrides={"timing.nrcdrd": 5})
    with pytest.raises(ConfigError, match=r"org.channels: must be an integer >= 1 and <= 4,096 and a power of two, got 3"):
        load_spec("HBM2_2Gbps_PC", overrides={"org.channels": 3})
    with pytest.raises(ConfigError, match=r"GDDR6 has no pseudochannel level"):
        load_spec("GDDR6_14Gbps", overrides={"org.pseudochannels": 2})
    with pytest.raises(UserError, match=r"unknown DRAM preset 'HBM2'.*HBM2_2Gbps_PC"):
        load_spec("HBM2")


def test_error_carries_file_and_line(tmp_path):
    text = (ROOT / "archsim/presets/dram/HBM2_2Gbps_PC.yaml").read_text().replace("nRP: 14", "nRP: fast")
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    line = next(i for i, s in enumerate(text.splitlines(), 1) if "nRP: fast" in s)
    with pytest.raises(ConfigError) as exc:
        load_spec(str(bad))
    assert f"bad.yaml:{line}: timing.nRP: must be an integer" in str(exc.value)


def test_set_path_suggests_nearest_key():
    doc = load_yaml_text("controller:\n  row_policy: open\n", "x.yaml")
    with pytest.raises(ConfigError, match="did you mean row_policy"):
        set_path(doc.data, "controller.row_polcy", "closed")


@settings(max_examples=60, deadline=None)
@given(data=st.data(), name=st.sampled_from(preset_names()),
       mapping_str=st.sampled_from(["RoBaRaCoCh", "RoRaBaChCo", "rorabgbachco", "RoRaBaCoBgPcCh", "ChRaBaRoCo"]))
def test_mapping_encode_decode_round_trip(data, name, mapping_str):
    s = load_spec(name)
    c = s.counts
    vals = [data.draw(st.integers(0, n - 1)) for n in c] + [data.draw(st.integers(0, s.rows - 1)),
                                                            data.draw(st.integers(0, s.columns - 1))]
    addr = mapping.encode(s, *vals, mapping=mapping_str)
    assert addr < s.capacity_bytes
    dec = mapping.decode(s, np.array([addr]), mapping_str)
    bank = (((vals[0] * c[1] + vals[1]) * c[2] + vals[2]) * c[3] + vals[3]) * c[4] + vals[4]
    assert (dec["channel"][0], dec["bank"][0], dec["row"][0], dec["column"][0]) == (vals[0], bank, vals[5], vals[6])


def test_mapping_errors():
    with pytest.raises(UserError, match="unknown field 'Xx'"):
        mapping.parse_mapping("RoXxCoCh")
    with pytest.raises(UserError, match="appears twice"):
        mapping.parse_mapping("RoRoBaCoCh")
    with pytest.raises(UserError, match="missing bank"):
        mapping.parse_mapping("RoCoCh")


def test_idd_energy_scales_with_tck_not_1ns():
    """DRAMsim3 issue #18 computed energy with 1 ns instead of tCK: here a slower clock means more energy
    for the same cycle counts."""
    fast = load_spec("DDR4_3200AA_x8_8Gb")
    slow = load_spec("DDR4_3200AA_x8_8Gb", overrides={"timing.tCK_ps": 1250})
    e_fast, e_slow = dram_action_energy_pj(fast), dram_action_energy_pj(slow)
    assert e_slow["RD"] == pytest.approx(2 * e_fast["RD"])
    # mA x ns x V = pJ, 8 devices: (160 - 54) mA x 4 x 0.625 ns x 1.2 V x 8
    assert e_fast["RD"] == pytest.approx((160 - 54) * 4 * 0.625 * 1.2 * 8)
    e = dram_energy_pj(fast, {"ACT": 10, "RD": 5}, cycles=1000)
    assert e["act_pre"] == pytest.approx(10 * e_fast["ACT"]) and e["background"] > 0


def test_table_energy_per_bit():
    s = load_spec("HBM2_2Gbps_PC")
    e = dram_action_energy_pj(s)
    assert e["RD"] == pytest.approx(3.48 * 32 * 8)
    assert e["ACT"] == pytest.approx(0.11 * 1024 * 8)


def test_build_ships_data_folders(tmp_path):
    """isa/, mappings/, workloads/ must resolve from an installed package, not only from a checkout."""
    out = tmp_path / "lib"
    subprocess.run([sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(out)], cwd=ROOT, check=True,
                   capture_output=True)
    shipped = out / "archsim" / "_shipped"
    assert (shipped / "isa" / "pim.yaml").is_file()
    assert (out / "archsim" / "presets" / "dram" / "standards" / "jedec.yaml").is_file()
    for name in ("isa", "mappings", "workloads"):
        if (ROOT / name).is_dir() and any((ROOT / name).iterdir()):
            assert any((shipped / name).iterdir()), name


def test_cli_presets(capsys):
    from archsim.cli import main

    assert main(["presets", "list"]) == 0
    out = capsys.readouterr().out
    assert all(n in out for n in preset_names())
    assert main(["presets", "show", "HBM3_6400Mbps"]) == 0
    assert "nRC: 71" in capsys.readouterr().out
    assert main(["presets", "show", "nope"]) == 2
    err = capsys.readouterr().err
    assert "known:" in err and "Traceback" not in err


def test_duplicate_yaml_keys_are_an_error():
    with pytest.raises(ConfigError, match=r"x.yaml:3: axes: duplicate key \(first on line 1\)"):
        load_yaml_text("axes: [1]\nname: a\naxes: [2]\n", "x.yaml")
