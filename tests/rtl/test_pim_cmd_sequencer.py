"""RTL checks for rtl/pim_cmd_sequencer.v (issue #10): cocotb co-simulation (Icarus) against the channel
engine's command log for the same stream, the generated timing header's freshness, a mutation test and
Verilator lint.

The golden model is archsim.engine.memory.MemorySystem (one channel of GDDR6_AiM_16Gbps, one `stream`
source, refresh "none"): tests/rtl/seq_streams.py runs it; tests/rtl/tb_pim_cmd_sequencer.py drives the
RTL with the same stream and compares issue cycles command for command.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from pathlib import Path

import pytest
from seq_streams import engine_cycles, pimgpt_stream, random_stream, sequencer_spec

from archsim.dram import verilog as timing_verilog

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
RTL = REPO / "rtl"
INCLUDE = RTL / "include"
TOP = "pim_cmd_sequencer"

needs_iverilog = pytest.mark.skipif(
    shutil.which("iverilog") is None, reason="iverilog (Icarus Verilog) is not on PATH"
)
needs_verilator = pytest.mark.skipif(shutil.which("verilator") is None, reason="verilator is not on PATH")

RANDOM_SEEDS = (101, 202, 303)
RANDOM_COMMANDS = 3000


@pytest.fixture(scope="module")
def spec():
    return sequencer_spec()


def _case(spec, name, cmd, bank, row=-1, at=None, strict=False, cycle=None):
    if cycle is None:
        cycle = engine_cycles(spec, cmd, bank, row, at=at)
    return {"name": name, "cmd": list(cmd), "bank": list(bank), "cycle": list(cycle),
            "at": list(at) if at is not None else None, "strict": strict, "names": list(spec.command_names)}


class Sim:
    """One Icarus build of the sequencer (optionally with the ROW_LAT parameter overridden) and its runs."""

    def __init__(self, build_dir: Path, parameters: dict | None = None, include: Path = INCLUDE):
        from cocotb_tools.runner import get_runner

        self.runner = get_runner("icarus")
        self.build_dir = build_dir
        self.runner.build(
            sources=[RTL / f"{TOP}.v"],
            includes=[include],
            hdl_toplevel=TOP,
            build_dir=build_dir,
            parameters=parameters or {},
            always=True,
            timescale=("1ns", "1ps"),
            log_file=build_dir / "build.log",
        )

    def run(self, cases: list[dict], tag: str) -> tuple[bool, list[dict], str]:
        """Run the bench on `cases`; (passed, per-case results, log tail)."""
        work = self.build_dir / tag
        work.mkdir(parents=True, exist_ok=True)
        cases_file, result_file, log = work / "cases.json", work / "result.json", work / "sim.log"
        cases_file.write_text(json.dumps(cases))
        passed = True
        try:
            xml = self.runner.test(
                hdl_toplevel=TOP,
                test_module="tb_pim_cmd_sequencer",
                build_dir=self.build_dir,
                test_dir=work,
                extra_env={"ARCHSIM_TB_CASES": str(cases_file), "ARCHSIM_TB_RESULT": str(result_file),
                           "ARCHSIM_TB_NUM_CMDS": str(len(sequencer_spec().commands))},
                log_file=log,
            )
            from cocotb_tools.runner import get_results

            _, failed = get_results(xml)
            passed = failed == 0
        except SystemExit:  # the runner exits when a cocotb test fails
            passed = False
        tail = log.read_text(errors="replace")[-3000:] if log.exists() else "(no log)"
        results = json.loads(result_file.read_text()) if result_file.exists() else []
        return passed, results, tail


@pytest.fixture(scope="module")
def sim(tmp_path_factory, request):
    if shutil.which("iverilog") is None:
        pytest.skip("iverilog (Icarus Verilog) is not on PATH")
    # The runner passes sys.path to the simulator's Python as PYTHONPATH; the bench module lives here.
    mp = pytest.MonkeyPatch()
    mp.syspath_prepend(str(HERE))
    request.addfinalizer(mp.undo)
    return Sim(tmp_path_factory.mktemp("seq_build"))


def _assert_ok(sim: Sim, cases: list[dict], tag: str) -> list[dict]:
    passed, results, tail = sim.run(cases, tag)
    errors = [f"{r['name']}: {r['errors'][0]}" for r in results if r["errors"]]
    assert passed and len(results) == len(cases) and not errors, (
        "\n".join(errors) or f"cocotb bench failed:\n{tail}")
    for case, res in zip(cases, results, strict=True):
        assert res["cycle"] == case["cycle"]
    return results


# ---- generated header -------------------------------------------------------------------------------
def test_committed_timing_header_is_current(spec) -> None:
    path = INCLUDE / timing_verilog.header_filename(spec)
    assert path.is_file(), f"{path} missing: run `python -m archsim.dram.verilog`"
    assert path.read_text(encoding="ascii") == timing_verilog.timing_header(spec), (
        f"{path} is stale relative to the {spec.name} spec: run `python -m archsim.dram.verilog`")


def test_timing_header_check_command(tmp_path: Path) -> None:
    assert timing_verilog.main(["--check"]) == 0
    assert timing_verilog.main(["--check", "-o", str(tmp_path)]) == 1          # missing
    assert timing_verilog.main(["-o", str(tmp_path)]) == 0
    assert timing_verilog.main(["--check", "-o", str(tmp_path)]) == 0
    path = tmp_path / "gddr6_aim_timing.vh"
    path.write_text(path.read_text().replace("nRCDRD = 36", "nRCDRD = 35"))
    assert timing_verilog.main(["--check", "-o", str(tmp_path)]) == 1          # stale


def test_timing_header_covers_every_constraint_row(spec) -> None:
    t = timing_verilog.timing_tables(spec)
    assert len(t["rows"]) == len(spec.constraints) > 100
    text = timing_verilog.timing_header(spec)
    assert f"`define GDDR6_AIM_NUM_ROWS {len(spec.constraints)}" in text
    # nFAW is a windowed row: its counters keep the last 4 ACTs of the channel
    faw = [r for r in t["rows"] if r["expr"] == "nFAW" and r["win"] == 4]
    assert faw and all(r["stride"] == 4 for r in faw)


@pytest.mark.parametrize(("preset", "match"), [("DDR4_3200AA_x8_8Gb", "sibling"), ("HBM2_2Gbps_PC", "dual")])
def test_timing_header_refuses_what_the_rtl_does_not_implement(preset: str, match: str) -> None:
    from archsim.dram.spec import load_spec
    from archsim.errors import ConfigError

    with pytest.raises(ConfigError, match=match):
        timing_verilog.timing_header(load_spec(preset, overrides={"org.channels": 1}))


# ---- directed tight-gate tests --------------------------------------------------------------------------
def _directed(spec) -> list[dict]:
    """Streams whose issue cycles follow by hand from one or two constraint rows; the bench samples in_ready
    every cycle (strict), so an RTL that issued one cycle early (at the bound - 1) fails."""
    T = spec.timing
    C = spec.cmd
    cases = []

    def add(name, names_banks, want):
        cmd = [C(n) for n, _ in names_banks]
        bank = [b for _, b in names_banks]
        row = [7 if n in ("ACT", "ACTAB", "RD", "WR", "MACAB") else -1 for n, _ in names_banks]
        case = _case(spec, name, cmd, bank, row, strict=True)
        assert case["cycle"] == want, f"{name}: engine {case['cycle']}, hand-derived {want}"
        cases.append(case)

    add("ACT->RD nRCDRD", [("ACT", 3), ("RD", 3)], [0, T["nRCDRD"]])
    add("ACT->WR nRCDWR", [("ACT", 3), ("WR", 3)], [0, T["nRCDWR"]])
    mac = T["nRCDRDMAC"]
    add("ACTAB->MACAB nRCDRDMAC, MACAB->MACAB nCCDL, MACAB->RDMAC nMACRD",
        [("ACTAB", 0), ("MACAB", 0), ("MACAB", 0), ("RDMAC", 0)],
        [0, mac, mac + T["nCCDL"], mac + T["nCCDL"] + T["nMACRD"]])
    add("ACTAB->PREAB nRAS, ACTAB->ACTAB nFAWAB", [("ACTAB", 0), ("PREAB", 0), ("ACTAB", 0)],
        [0, T["nRAS"], max(T["nRAS"] + T["nRP"], T["nRC"], T["nFAWAB"])])
    # WR->RD: same bank group (nCWL + nBL + nWTRL) vs another bank group (channel row, ... + nWTRS)
    t_wr = T["nRRDL"] + T["nRCDWR"]
    add("WR->RD same bankgroup nWTRL", [("ACT", 1), ("ACT", 0), ("WR", 0), ("RD", 1)],
        [0, T["nRRDL"], t_wr, t_wr + T["nCWL"] + T["nBL"] + T["nWTRL"]])
    t_wr = T["nRRDS"] + T["nRCDWR"]
    add("WR->RD other bankgroup nWTRS", [("ACT", 4), ("ACT", 0), ("WR", 0), ("RD", 4)],
        [0, T["nRRDS"], t_wr, t_wr + T["nCWL"] + T["nBL"] + T["nWTRS"]])
    # a bank-scope PRE binds only its bank: ACT to another bank right after a PRE waits nRRD, not nRP
    add("PRE->ACT nRP per bank", [("ACT", 2), ("PRE", 2), ("ACT", 2), ("ACT", 6)],
        [0, T["nRAS"], T["nRAS"] + T["nRP"], T["nRAS"] + T["nRP"] + T["nRRDS"]])
    return cases


@pytest.mark.rtl
@needs_iverilog
def test_directed_commands_issue_exactly_at_the_bound(sim, spec) -> None:
    _assert_ok(sim, _directed(spec), "directed")


# ---- random streams and a PIM-GPT stream -------------------------------------------------------------
def _random_case(spec, seed: int, gaps: bool = False) -> dict:
    rng = random.Random(seed)
    cmd, bank, row = random_stream(spec, rng, RANDOM_COMMANDS)
    at = None
    if gaps:   # the stream's commands arrive over time (in_valid low in between)
        t, at = 0, []
        for _ in cmd:
            t += rng.choice([0, 0, 0, 1, 5, 40])
            at.append(t)
    return _case(spec, f"random seed {seed}" + (" with arrival gaps" if gaps else ""), cmd, bank, row, at=at)


@pytest.mark.rtl
@needs_iverilog
@pytest.mark.parametrize("seed", RANDOM_SEEDS)
def test_random_streams_match_engine_cycle_for_cycle(sim, spec, seed: int) -> None:
    _assert_ok(sim, [_random_case(spec, seed, gaps=seed == RANDOM_SEEDS[-1])], f"random{seed}")


@pytest.mark.rtl
@needs_iverilog
def test_pimgpt_layer_stream_matches_engine(sim, spec) -> None:
    cmd, bank, row, ops = pimgpt_stream(3000)
    _assert_ok(sim, [_case(spec, f"PIM-GPT gpt2-small layer 0 channel 0 ({ops})", cmd, bank, row)], "pimgpt")


@pytest.mark.rtl
@needs_iverilog
def test_windowed_nfaw_row_with_a_binding_nfaw(sim, tmp_path_factory) -> None:
    """nFAW (the only windowed row, window 4) never binds on GDDR6-AiM as shipped (4 x nRRD = 44 >= nFAW = 42).
    With nFAW = 60 it does; same row structure, so the RTL takes that spec's latencies through ROW_LAT."""
    base = timing_verilog.timing_tables(sequencer_spec())
    spec60 = sequencer_spec({"nFAW": 60})
    t60 = timing_verilog.timing_tables(spec60)
    keep = ("prev", "next", "level", "win", "ctr", "stride")
    assert [[r[k] for k in keep] for r in t60["rows"]] == [[r[k] for k in keep] for r in base["rows"]]
    assert t60["lat_bits"] == base["lat_bits"] and t60["ctrs"] == base["ctrs"]
    mp = pytest.MonkeyPatch()
    mp.syspath_prepend(str(HERE))
    try:
        s60 = Sim(tmp_path_factory.mktemp("seq_nfaw60"), {"ROW_LAT": timing_verilog.lat_vector(t60)})
        C = spec60.cmd
        acts = [0, 4, 8, 12, 1]
        T = spec60.timing
        directed = _case(spec60, "nFAW=60: 5th ACT waits for the 1st + nFAW", [C("ACT")] * 5, acts, 3,
                         strict=True)
        assert directed["cycle"] == [0, T["nRRDS"], 2 * T["nRRDS"], 3 * T["nRRDS"], T["nFAW"]]
        _assert_ok(s60, [directed, _random_case(spec60, 404)], "nfaw60")
    finally:
        mp.undo()


# A test-only variant of the GDDR6-AiM standard with rows the shipped table lacks but the engine's semantics
# cover: bank rows that bind an all-bank command through each of its banks, all-bank commands recorded at
# every bank / bank group, and a window over a two-command preceding list at a level with several nodes
# (issues of either command count, wide commands count at every node). Same standard name, so the header
# keeps its file name and macro prefix.
SYNTHETIC_STANDARD = """\
name: GDDR6-AiM
source: "test-only variant of gddr6_aim (tests/rtl/test_pim_cmd_sequencer.py)"
extends: gddr6_aim
constraints:
  - [bank, [PRE], [ACTAB], nRP + 20]
  - [bank, [ACTAB], [RD, RDA, WR, WRA], nRCDRD + 10]
  - [bankgroup, [MACAB, WRGB], [RD, RDA, WR, WRA, ACT], 20]
  - [bankgroup, [RD, WR], [ACTAB], 25]
  - [bankgroup, [ACT, ACTAB], [ACT, ACTAB], 150, 2]
"""


@pytest.mark.rtl
@needs_iverilog
def test_wide_targets_and_windows_on_a_synthetic_standard(tmp_path_factory) -> None:
    from archsim.dram.spec import load_preset_dict, load_spec

    root = tmp_path_factory.mktemp("seq_synthetic")
    std = root / "gddr6_aim_variant.yaml"
    std.write_text(SYNTHETIC_STANDARD)
    data, _ = load_preset_dict(timing_verilog.TIMING_PRESET)
    data = {**data, "standard": str(std)}
    # nRRD 3 and nFAW 30 so that the four-activate window binds too
    spec = load_spec(data, overrides={"org.channels": 1, "timing.nRRDS": 3, "timing.nRRDL": 3, "timing.nFAW": 30})
    assert len(spec.constraints) > len(sequencer_spec().constraints)
    include = root / "include"
    timing_verilog.write_header(spec, include)
    C = spec.cmd
    # the window counts ACT and ACTAB together: the 2nd ACT of bank group 0 waits 150 after the ACTAB (per
    # command it would be the first ACT of the window and go at nRRD after the first)
    window = _case(spec, "window over [ACT, ACTAB]", [C("ACTAB"), C("PREAB"), C("ACT"), C("ACT")], [0, 0, 0, 1], 7,
                   strict=True)
    T = spec.timing
    assert window["cycle"] == [0, T["nRAS"], max(T["nRAS"] + T["nRP"], T["nFAWAB"]), 150]
    faw = _case(spec, "nFAW binds", [C("ACT")] * 5, [0, 4, 8, 12, 1], 7, strict=True)
    assert faw["cycle"] == [0, 3, 6, 9, 30]
    mp = pytest.MonkeyPatch()
    mp.syspath_prepend(str(HERE))
    try:
        s = Sim(root / "build", include=include)
        _assert_ok(s, [window, faw, _random_case(spec, 505), _random_case(spec, 606)], "synthetic")
    finally:
        mp.undo()


# ---- mutation test ---------------------------------------------------------------------------------------
@pytest.mark.rtl
@needs_iverilog
def test_mutated_timing_parameter_is_caught(spec, tmp_path_factory) -> None:
    """Build the RTL with nRCDRD - 1 (ACT -> RD/RDA on the bank, and ACTAB -> RD/RDA): the random bench
    must report a mismatch, one cycle early, at a RD/RDA."""
    mutated = timing_verilog.timing_tables(spec, latency_override={"nRCDRD": spec.timing["nRCDRD"] - 1})
    assert timing_verilog.lat_vector(mutated) != timing_verilog.lat_vector(timing_verilog.timing_tables(spec))
    mp = pytest.MonkeyPatch()
    mp.syspath_prepend(str(HERE))
    try:
        sm = Sim(tmp_path_factory.mktemp("seq_mutant"), {"ROW_LAT": timing_verilog.lat_vector(mutated)})
        case = _random_case(spec, RANDOM_SEEDS[0])
        passed, results, tail = sm.run([case], "mutant")
    finally:
        mp.undo()
    assert not passed, "the bench did not catch nRCDRD - 1"
    first = results[0]["errors"][0]
    i = len(results[0]["cycle"]) - 1
    assert first.startswith(f"first mismatch at command {i} ("), first
    assert spec.command_names[case["cmd"][i]] in ("RD", "RDA")
    assert results[0]["cycle"][i] == case["cycle"][i] - 1, first
    print(f"mutation nRCDRD-1 caught: {first}")


# Mutants no stream can tell apart from the shipped table on GDDR6_AiM_16Gbps (so the sweep expects them to
# pass): the mutated rows are shadowed by other rows with the same or a larger bound.
EQUIVALENT_MUTANTS = {
    "nCCDS": "every channel-level nCCDS row (RD->RD, WR->WR, ...) has an nBL row with the same pair, level and value",
    "nRRDL": "the bankgroup ACT->ACT row is shadowed by the channel-level nRRDS row (nRRDS = nRRDL = 11)",
    "nFAW": "4 ACTs take 3 x nRRDS = 33 cycles and a 5th one waits nRRDS more (44 >= nFAW = 42): never binds",
    "nWRRD_bus": "WR->RD 1 -> 0: the single command bus already puts every command a cycle after the last",
}


def _lat_exprs() -> list[str]:
    return sorted({r["expr"] for r in sequencer_spec().constraints})


@pytest.mark.rtl
@pytest.mark.slow
@needs_iverilog
@pytest.mark.parametrize("expr", _lat_exprs())
def test_every_timing_parameter_mutation(spec, tmp_path_factory, expr: str) -> None:
    """Sweep (slow, `-m slow`): each latency expression of the table - 1, against random seed 101. Every
    mutant is caught except the equivalent ones listed in EQUIVALENT_MUTANTS."""
    lat = next(r["latency"] for r in spec.constraints if r["expr"] == expr)
    mutated = timing_verilog.timing_tables(spec, latency_override={expr: lat - 1})
    mp = pytest.MonkeyPatch()
    mp.syspath_prepend(str(HERE))
    try:
        sm = Sim(tmp_path_factory.mktemp("seq_mut"), {"ROW_LAT": timing_verilog.lat_vector(mutated)})
        passed, results, tail = sm.run([_random_case(spec, RANDOM_SEEDS[0])], "mutant")
    finally:
        mp.undo()
    if expr in EQUIVALENT_MUTANTS:
        assert passed, f"{expr} - 1 was expected to be an equivalent mutant: {results}"
    else:
        assert not passed and results and results[0]["errors"], f"{expr} - 1 not caught by the random bench"


# ---- lint ----------------------------------------------------------------------------------------------
@pytest.mark.rtl
@needs_verilator
def test_sequencer_lints_clean(tmp_path: Path) -> None:
    proc = subprocess.run(
        ["verilator", "--lint-only", "-Wall", f"-I{INCLUDE}", str(RTL / f"{TOP}.v")],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, f"verilator lint failed:\n{proc.stdout}\n{proc.stderr}"
