"""RTL checks for rtl/dual_rowbuf_arbiter.v (issue #10): cocotb co-simulation (Icarus) against the channel
engine's command log for the same memory requests and PIM stream, the generated headers' freshness, the
scope refusals, a mutation test and Verilator lint.

The golden model is archsim.engine.channel.MemorySystem on one channel of NeuPIMs_HBM2_Dual (arbitration
`priority`, PIM first) or NeuPIMs_HBM2_Single (`blocked`), sources [pim: stream, mem: rw], queues of one
entry, refresh none (tests/rtl/arb_streams.py). tests/rtl/tb_dual_rowbuf_arbiter.py drives the RTL and
records its command buses; this file compares the two logs entry by entry (cycle, bus, command, bank,
source, opened row).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from arb_streams import (
    CONTROLLER,
    MODES,
    Workload,
    arbiter_spec,
    attention_workload,
    check_scope,
    engine_log,
    random_workload,
)

from archsim.dram import verilog as timing_verilog
from archsim.engine.channel import SEG_END, SEG_START

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
RTL = REPO / "rtl"
INCLUDE = RTL / "include"
TOP = "dual_rowbuf_arbiter"

needs_iverilog = pytest.mark.skipif(shutil.which("iverilog") is None, reason="iverilog (Icarus Verilog) is not on PATH")
needs_verilator = pytest.mark.skipif(shutil.which("verilator") is None, reason="verilator is not on PATH")

RANDOM_SEEDS = (11, 22, 33)
BLOCKED_SEEDS = (44, 55)


def _case(spec, mode: str, name: str, work: Workload, want: list[tuple] | None = None) -> dict:
    log = engine_log(spec, mode, work) if want is None else want
    last = max([e[0] for e in log] + [0])
    return {"name": name, "requests": [list(r) for r in work.requests], "stream": [list(s) for s in work.stream],
            "cycles": last + 200, "names": list(spec.command_names),
            "opens": [c.name for c in spec.commands if c.effect == "open"], "want": [list(e) for e in log]}


class Sim:
    """One Icarus build of the arbiter for a mode (optionally with ROW_LAT overridden) and its runs."""

    def __init__(self, build_dir: Path, mode: str, parameters: dict | None = None, waves: bool = False):
        from cocotb_tools.runner import get_runner

        self.mode = mode
        self.runner = get_runner("icarus")
        self.build_dir = build_dir
        self.waves = waves
        sub = MODES[mode][3]
        includes = ([INCLUDE / sub] if sub else []) + [INCLUDE]
        self.runner.build(sources=[RTL / f"{TOP}.v"], includes=includes, hdl_toplevel=TOP, build_dir=build_dir,
                          parameters={"BLOCKED": MODES[mode][2], **(parameters or {})}, always=True,
                          timescale=("1ns", "1ps"), waves=waves, log_file=build_dir / "build.log")

    def run(self, cases: list[dict], tag: str) -> tuple[list[dict], str]:
        work = self.build_dir / tag
        work.mkdir(parents=True, exist_ok=True)
        cases_file, result_file, log = work / "cases.json", work / "result.json", work / "sim.log"
        cases_file.write_text(json.dumps(cases))
        try:
            self.runner.test(hdl_toplevel=TOP, test_module="tb_dual_rowbuf_arbiter", build_dir=self.build_dir,
                             test_dir=work, waves=self.waves,
                             extra_env={"ARCHSIM_TB_CASES": str(cases_file), "ARCHSIM_TB_RESULT": str(result_file)},
                             log_file=log)
        except SystemExit:
            pass
        tail = log.read_text(errors="replace")[-3000:] if log.exists() else "(no log)"
        results = json.loads(result_file.read_text()) if result_file.exists() else []
        return results, tail


def _state(log: list, upto: int) -> str:
    """Open rows per (bank, buffer) and the last commands of one side, from its log before cycle `upto`."""
    last = [e for e in log if e[0] < upto][-6:]
    return "last commands: " + "; ".join(f"{e[0]} {e[1]} {e[2]} b{e[3]} {e[4]}" + (f" r{e[5]}" if e[5] >= 0 else "")
                                         for e in last)


def first_mismatch(case: dict, got: list) -> str | None:
    """None if the RTL's log equals the engine's, else a description of the first differing entry."""
    want = [tuple(e) for e in case["want"]]
    got = [tuple(e) for e in got]
    for i in range(max(len(want), len(got))):
        w = want[i] if i < len(want) else None
        g = got[i] if i < len(got) else None
        if w != g:
            cyc = min(x[0] for x in (w, g) if x is not None)
            return (f"first mismatch at log entry {i}, cycle {cyc}: engine {w}, RTL {g}\n"
                    f"  engine {_state(want, cyc + 1)}\n  RTL    {_state(got, cyc + 1)}")
    return None


def _check(sim: Sim, cases: list[dict], tag: str, tmp_root: Path | None = None) -> list[dict]:
    results, tail = sim.run(cases, tag)
    assert len(results) == len(cases), f"cocotb bench failed:\n{tail}"
    errors = []
    for case, res in zip(cases, results, strict=True):
        bad = first_mismatch(case, res["log"])
        if res["unsupported"]:
            errors.append(f"{case['name']}: the RTL flagged `unsupported` (a stream restore) at cycle "
                          f"{res['end_cycle'] - 1}" + (f"; {bad}" if bad else ""))
            continue
        if bad:
            errors.append(f"{case['name']}: {bad}")
        elif res["popped"] != len(case["stream"]) or res["accepted"] != len(case["requests"]):
            errors.append(f"{case['name']}: RTL issued {res['popped']}/{len(case['stream'])} stream commands, "
                          f"took {res['accepted']}/{len(case['requests'])} requests")
    if errors and tmp_root is not None:
        errors.append(f"waveform: {_waves(sim, cases, results, tmp_root)}")
    assert not errors, "\n".join(errors)
    return results


def _waves(sim: Sim, cases: list[dict], results: list[dict], root: Path) -> str:
    """Rerun the first failing case with waves on, up to a little after its first mismatch; its path."""
    for case, res in zip(cases, results, strict=True):
        bad = first_mismatch(case, res["log"])
        if bad or res["unsupported"]:
            cyc = int(bad.split("cycle ")[1].split(":")[0]) if bad else res["end_cycle"]
            ws = Sim(root / "waves_build", sim.mode, waves=True)
            ws.run([{**case, "cycles": cyc + 20}], "waves")
            found = sorted((root / "waves_build").rglob("*.fst")) + sorted((root / "waves_build").rglob("*.vcd"))
            return str(found[0]) if found else "(no waveform written)"
    return "(none)"


@pytest.fixture(scope="module")
def sims(tmp_path_factory, request):
    if shutil.which("iverilog") is None:
        pytest.skip("iverilog (Icarus Verilog) is not on PATH")
    mp = pytest.MonkeyPatch()
    mp.syspath_prepend(str(HERE))
    request.addfinalizer(mp.undo)
    cache: dict[str, Sim] = {}

    def get(mode: str) -> Sim:
        if mode not in cache:
            cache[mode] = Sim(tmp_path_factory.mktemp(f"arb_{mode}"), mode)
        return cache[mode]
    return get


@pytest.fixture(scope="module")
def dual():
    return arbiter_spec("dual")


@pytest.fixture(scope="module")
def single():
    return arbiter_spec("blocked")


# ---- random mixes ---------------------------------------------------------------------------------------
@pytest.mark.rtl
@needs_iverilog
@pytest.mark.parametrize("seed", RANDOM_SEEDS)
def test_random_mix_matches_engine_dual(sims, dual, seed, tmp_path) -> None:
    case = _case(dual, "dual", f"dual random seed {seed}", random_workload(dual, seed))
    assert len(case["want"]) > 2000
    _check(sims("dual"), [case], f"random{seed}", tmp_path)


@pytest.mark.rtl
@needs_iverilog
@pytest.mark.parametrize("seed", BLOCKED_SEEDS)
def test_random_mix_matches_engine_blocked(sims, single, seed, tmp_path) -> None:
    case = _case(single, "blocked", f"blocked random seed {seed}", random_workload(single, seed))
    assert len(case["want"]) > 2000
    _check(sims("blocked"), [case], f"random{seed}", tmp_path)
