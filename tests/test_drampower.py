"""DRAMPower export (archsim.dram.drampower, `archsim trace --log-format drampower`) and the committed
comparison (reports/dram_fidelity/drampower.csv): archsim's side of its rows re-run here, so a change to
archsim's energy model that breaks the agreement with DRAMPower shows without DRAMPower installed, and each
claim of the report's prose held to the table."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "reports" / "dram_fidelity"))

import drampower_report  # noqa: E402

from archsim.dram import drampower  # noqa: E402
from archsim.dram.spec import load_spec  # noqa: E402
from archsim.errors import UserError  # noqa: E402


def test_memspec_carries_the_presets_currents_and_timings():
    spec = load_spec("DDR4_3200AA_x8_8Gb")
    m = drampower.memspec(spec)["memspec"]
    assert m["memoryType"] == "DDR4"
    arch, power, timing = m["memarchitecturespec"], m["mempowerspec"], m["memtimingspec"]
    # 8 x8 devices on a 64-bit bus, BL8, 1 KB page (1024 columns of 8 bits), 16 banks in 4 groups
    assert (arch["width"], arch["nbrOfDevices"], arch["burstLength"], arch["nbrOfColumns"]) == (8, 8, 8, 1024)
    assert (arch["nbrOfBanks"], arch["nbrOfBankGroups"], arch["nbrOfRanks"]) == (16, 4, 1)
    for key in ("IDD0", "IDD2N", "IDD3N", "IDD4R", "IDD4W"):
        assert power[key.lower()] == pytest.approx(spec.energy[key] * 1e-3)
    assert power["idd5B"] == pytest.approx(spec.energy["IDD5B"] * 1e-3)
    assert power["vdd"] == spec.energy["VDD"]
    assert timing["tCK"] == pytest.approx(625e-12)
    assert (timing["RAS"], timing["RP"], timing["RFC1"]) == (spec.timing["nRAS"], spec.timing["nRP"], spec.timing["nRFC"])
    assert m["bankwisespec"]["factRho"] == 1.0


def test_ddr5_memspec_uses_its_own_keys():
    spec = load_spec("DDR5_4800AN_x8_16Gb")
    m = drampower.memspec(spec)["memspec"]
    assert m["memoryType"] == "DDR5"
    assert m["memarchitecturespec"]["burstLength"] == 16 and m["memarchitecturespec"]["width"] == 8
    assert m["memtimingspec"]["RFC1_slr"] == spec.timing["nRFC"]
    assert m["mempowerspec"]["idd5b"] == pytest.approx(spec.energy["IDD5B"] * 1e-3)


def test_lpddr5_memspec_puts_the_one_supply_on_vdd1_with_wck_always_on():
    spec = load_spec("LPDDR5_6400_x16_16Gb")
    m = drampower.memspec(spec)["memspec"]
    assert m["memoryType"] == "LPDDR5"
    arch, power, timing = m["memarchitecturespec"], m["mempowerspec"], m["memtimingspec"]
    # one x16 die, BL16 of two beats per WCK at WCK = 4 CK: 16 / (2 x 4) = 2 CK, the preset's nBL
    assert (arch["width"], arch["nbrOfDevices"], arch["burstLength"], arch["nbrOfColumns"]) == (16, 1, 16, 1024)
    assert arch["burstLength"] / (arch["dataRate"] * timing["WCK2CK"]) == spec.timing["nBL"]
    assert arch["WCKalwaysOn"] is True and (arch["nbrOfBanks"], arch["nbrOfBankGroups"]) == (16, 4)
    for key in ("IDD0", "IDD2N", "IDD3N", "IDD4R", "IDD4W"):
        assert power[key.lower() + "1"] == pytest.approx(spec.energy[key] * 1e-3)
        assert power[key.lower() + "2h"] == power[key.lower() + "2l"] == 0.0
    assert power["idd51"] == pytest.approx(spec.energy["IDD5B"] * 1e-3)
    assert (timing["RAS"], timing["RPpb"], timing["RFCab"]) == (spec.timing["nRAS"], spec.timing["nRP"],
                                                                 spec.timing["nRFC"])


def test_lpddr5_activate_is_given_at_its_first_cycle():
    """LPDDR5's two-cycle ACT (ACT-1, ACT-2) is timed from ACT-1: DRAMPower gets the logged cycle."""
    spec = load_spec("LPDDR5_6400_x16_16Gb")
    log = pd.DataFrame({"cycle": [0, 224, 250], "command": ["REFab", "ACT", "PRE"], "channel": 0, "pseudochannel": 0,
                        "rank": 0, "bankgroup": 1, "bank": 2, "row": [-1, 5, -1], "column": -1})
    assert drampower.trace_lines(spec, log, 300)[:3] == ["0,REFA,0,1,6,0,0", "224,ACT,0,1,6,5,0", "250,PRE,0,1,6,0,0"]


def test_derived_standards_count_as_their_base():
    assert drampower.memory_type(load_spec("DDR4_3200AA_x8_8Gb_Ramulator2")) == "DDR4"


@pytest.mark.parametrize("preset", ["HBM2_2Gbps_PC", "GDDR6_14Gbps", "HBM4_8000Mbps_32Gb_8Hi"])
def test_standards_drampower_lacks_are_refused_naming_the_allowed_ones(preset):
    with pytest.raises(UserError, match="DRAMPower takes DDR4, DDR5, LPDDR5"):
        drampower.memory_type(load_spec(preset))


def test_trace_lines_number_banks_within_the_rank_and_close_the_window():
    spec = load_spec("DDR4_3200AA_x8_8Gb", overrides={"org.ranks": 2})
    log = pd.DataFrame({"cycle": [5, 0, 30, 80], "command": ["RD", "ACT", "PRE", "REFab"],
                        "channel": 0, "pseudochannel": 0, "rank": [1, 1, 1, 0], "bankgroup": [2, 2, 2, 0],
                        "bank": [3, 3, 3, 0], "row": [7, 7, -1, -1], "column": [4, -1, -1, -1]})
    lines = drampower.trace_lines(spec, log, end_cycle=100)
    zeros = "00" * spec.access_bytes
    assert lines == ["0,ACT,1,2,11,7,0", f"5,RD,1,2,11,7,4,{zeros}", "30,PRE,1,2,11,0,0", "80,REFA,0,0,0,0,0",
                     "100,END,0,0,0,0,0"]


def test_a_two_cycle_command_is_given_at_its_last_cycle():
    """DDR5's ACT, RD and WR take two command-bus cycles; the log has the first, DRAMPower gets the last (the
    cycle its timings run from), so an ACT logged one cycle before a refresh ends is not inside the refresh."""
    spec = load_spec("DDR5_4800AN_x8_16Gb")
    log = pd.DataFrame({"cycle": [0, 709, 730], "command": ["REFab", "ACT", "PRE"], "channel": 0, "pseudochannel": 0,
                        "rank": 0, "bankgroup": 1, "bank": 2, "row": [-1, 5, -1], "column": -1})
    assert drampower.trace_lines(spec, log, 800)[:3] == ["0,REFA,0,1,6,0,0", "710,ACT,0,1,6,5,0", "730,PRE,0,1,6,0,0"]


def test_close_banks_precharges_every_rank_at_the_end():
    spec = load_spec("DDR4_3200AA_x8_8Gb", overrides={"org.ranks": 2})
    log = pd.DataFrame({"cycle": [0], "command": ["ACT"], "channel": 0, "pseudochannel": 0, "rank": 1,
                        "bankgroup": 0, "bank": 1, "row": 3, "column": -1})
    assert drampower.trace_lines(spec, log, 50, close_banks=True)[1:] == [
        "50,PREA,0,0,0,0,0", "50,PREA,1,0,0,0,0", "50,END,0,0,0,0,0"]


def test_a_command_without_a_drampower_counterpart_is_refused():
    spec = load_spec("DDR4_3200AA_x8_8Gb")
    log = pd.DataFrame({"cycle": [0], "command": ["REFpb"], "channel": 0, "pseudochannel": 0, "rank": 0,
                        "bankgroup": 0, "bank": 0, "row": -1, "column": -1})
    with pytest.raises(UserError, match="REFpb"):
        drampower.trace_lines(spec, log, end_cycle=10)


def test_cli_writes_trace_memspec_and_config(tmp_path):
    out = tmp_path / "ddr5.csv"
    res = subprocess.run([str(Path(sys.executable).parent / "archsim"), "trace", "synthetic:random:300", "--preset",
                          "DDR5_4800AN_x8_16Gb", "--log", str(out), "--log-format", "drampower", "--quiet"],
                         capture_output=True, text=True, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    lines = out.read_text().splitlines()
    assert lines[-1].endswith(",END,0,0,0,0,0") and sum(",ACT," in x for x in lines) > 0
    cycles = [int(x.split(",")[0]) for x in lines]
    assert cycles == sorted(cycles)
    memspec = json.loads((tmp_path / "ddr5.memspec.json").read_text())
    assert memspec["memspec"]["memoryType"] == "DDR5"
    assert json.loads((tmp_path / "ddr5.config.json").read_text()) == {"useToggleRate": False}


# ---- the committed comparison -------------------------------------------------------------------------------
ROWS = drampower_report.load() if drampower_report.CSV_PATH.exists() else []
# a few cases of the table, one per device, both variants (each run takes well under a second once compiled)
PINNED = [("DDR4-3200 1R", "random", "as-is"), ("DDR4-3200 2R", "mixed", "flat-background"),
          ("DDR5-4800 1R", "conflict", "as-is"), ("LPDDR5-6400 1ch", "stream", "prea-at-end")]


def test_the_comparison_covers_every_device_trace_and_variant():
    import run_drampower

    got = {(r["device"], r["kind"], r["variant"]) for r in ROWS}
    want = {(d, k, v) for d in run_drampower.ENERGY_DEVICES for k in run_drampower.KINDS for v in run_drampower.VARIANTS}
    assert got == want


@pytest.mark.parametrize("device,kind,variant", PINNED)
def test_archsim_side_of_the_table_is_what_archsim_computes_today(device, kind, variant):
    import run_drampower

    case = drampower_report.cases(ROWS)[(device, kind, variant)]
    r = run_drampower.run_archsim(device, kind, int(case["total"]["requests"]), variant, log=False)
    assert r.stats["cycles"] == int(case["total"]["cycles"])
    for comp in drampower_report.COMPONENTS:
        assert r.stats["energy_pj"][comp] == pytest.approx(case[comp]["archsim_pj"], rel=1e-5), comp


def test_prose_claims_hold_on_the_table():
    c = drampower_report.claims(ROWS)
    cs = drampower_report.cases(ROWS)
    asis = {k: v for k, v in cs.items() if k[2] == "as-is"}
    diffs = [abs(v[comp]["diff_pct"]) for v in asis.values() for comp in drampower_report.COMPONENTS]
    assert c["worst_pct"] == max(diffs)
    assert len(c["outside"]) == sum(d > drampower_report.TOL_PCT for d in diffs)
    # each toggle's direction on its component, case by case
    for variant, (comp, _) in drampower_report.TOGGLES.items():
        t = c["toggles"][variant]
        before = [abs(v[comp]["diff_pct"]) for (d, k, _), v in asis.items()]
        after = [abs(cs[(d, k, variant)][comp]["diff_pct"]) for (d, k, _), v in asis.items()]
        assert t["toward"] == sum(a < b for a, b in zip(after, before, strict=True))
        assert t["unchanged"] == sum(a == b for a, b in zip(after, before, strict=True))
        assert (t["before_max"], t["after_max"]) == (max(before), max(after))
    assert c["power_down_pj"] == max(abs(r["drampower_pj"]) for r in ROWS if r["component"] == "power_down")
    readme = (ROOT / "reports" / "dram_fidelity" / "README.md").read_text()
    assert drampower_report.prose(ROWS) in readme
    assert "(not run" not in readme.split("## Energy against DRAMPower")[1].split("\n## ")[0]


def test_the_driver_without_drampower_says_so_and_exits_2(tmp_path):
    res = subprocess.run([sys.executable, str(ROOT / "reports" / "dram_fidelity" / "run_drampower.py"), "--drampower",
                          str(tmp_path / "nowhere"), "-o", str(tmp_path / "out"), "--csv", str(tmp_path / "x.csv")],
                         capture_output=True, text=True)
    assert res.returncode == 2
    assert res.stderr.strip().count("\n") == 0 and "no DRAMPower command-line tool" in res.stderr
    assert not (tmp_path / "x.csv").exists()
