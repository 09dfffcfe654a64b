"""RTL checks for rtl/dual_rowbuf_arbiter.v (issue #10): cocotb co-simulation (Icarus) against the channel
engine's command log for the same memory requests and PIM stream, the generated headers' freshness, the
scope refusals, a mutation test and Verilator lint.

The golden model is archsim.engine.memory.MemorySystem on one channel of NeuPIMs_HBM2_Dual (arbitration
`priority`, PIM first) or NeuPIMs_HBM2_Single (`blocked`), sources [pim: stream, mem: rw], queues of one
entry, all-bank refresh (tests/rtl/arb_streams.py). tests/rtl/tb_dual_rowbuf_arbiter.py drives the RTL and
records its command buses; this file compares the two logs entry by entry (cycle, bus, command, bank,
source, opened row). The bench's top level is tests/rtl/arb_harness.v, a transactor that feeds the block
and logs its buses without a Python call per cycle.
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
HARNESS = "arb_harness"          # tests/rtl/arb_harness.v: feeds the block and logs its buses

needs_iverilog = pytest.mark.skipif(shutil.which("iverilog") is None, reason="iverilog (Icarus Verilog) is not on PATH")
needs_verilator = pytest.mark.skipif(shutil.which("verilator") is None, reason="verilator is not on PATH")

RANDOM_SEEDS = (11, 22, 33)
BLOCKED_SEEDS = (44, 55)


def _case(spec, mode: str, name: str, work: Workload, want: list[tuple] | None = None) -> dict:
    log = engine_log(spec, mode, work) if want is None else want
    last = max([e[0] for e in log] + [0])
    return {"name": name, "requests": [list(r) for r in work.requests], "stream": [list(s) for s in work.stream],
            "cycles": last + 200, "names": list(spec.command_names), "mode": mode,
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
        self.runner.build(sources=[RTL / f"{TOP}.v", HERE / "arb_harness.v"], includes=includes,
                          hdl_toplevel=HARNESS, build_dir=build_dir,
                          parameters={"BLOCKED": MODES[mode][2], "REFRESH": int(CONTROLLER["refresh"] == "allbank"),
                                      **(parameters or {})}, always=True,
                          timescale=("1ns", "1ps"), waves=waves, log_file=build_dir / "build.log")

    def run(self, cases: list[dict], tag: str) -> tuple[list[dict], str]:
        work = self.build_dir / tag
        work.mkdir(parents=True, exist_ok=True)
        cases_file, result_file, log = work / "cases.json", work / "result.json", work / "sim.log"
        cases_file.write_text(json.dumps(cases))
        try:
            self.runner.test(hdl_toplevel=HARNESS, test_module="tb_dual_rowbuf_arbiter", build_dir=self.build_dir,
                             test_dir=work, waves=self.waves, plusargs=[f"+ARB_DIR={work}"],
                             extra_env={"ARCHSIM_TB_CASES": str(cases_file), "ARCHSIM_TB_RESULT": str(result_file),
                                        "ARCHSIM_TB_DIR": str(work)},
                             log_file=log)
        except SystemExit:
            pass
        tail = log.read_text(errors="replace")[-3000:] if log.exists() else "(no log)"
        results = json.loads(result_file.read_text()) if result_file.exists() else []
        return results, tail


def _state(spec, log: list, upto: int) -> str:
    """One side's state before cycle `upto`, from its own log: the open rows per (bank, buffer) and the
    last commands."""
    scope = timing_verilog.arbiter_tables(spec)["scope_mask"]
    rows: dict[tuple[int, int], int] = {}
    for e in log:
        if e[0] >= upto:
            break
        c = spec.commands[spec.cmd(e[2])]
        banks = [x for x in range(spec.banks_per_channel) if scope[c.scope][e[3]] >> x & 1]
        for x in banks:
            if c.effect == "open":
                rows[(x, c.buffer)] = e[5]
            elif c.effect in ("close", "read_close", "write_close"):
                rows.pop((x, c.buffer), None)
    opened = ", ".join(f"b{x}.{spec.row_buffers[k]}={r}" for (x, k), r in sorted(rows.items()))
    last = [e for e in log if e[0] < upto][-6:]
    return (f"open rows: {opened or '-'}\n    last commands: "
            + "; ".join(f"{e[0]} {e[1]} {e[2]} b{e[3]} {e[4]}" + (f" r{e[5]}" if e[5] >= 0 else "") for e in last))


def exclusivity_violation(spec, log: list) -> str | None:
    """The first open in `log` of a row another buffer of one of its banks holds (checked on the RTL's own
    output, independently of the comparison with the engine)."""
    scope = timing_verilog.arbiter_tables(spec)["scope_mask"]
    rows: dict[tuple[int, int], int] = {}
    for e in log:
        c = spec.commands[spec.cmd(e[2])]
        for x in range(spec.banks_per_channel):
            if not scope[c.scope][e[3]] >> x & 1:
                continue
            if c.effect == "open":
                if any(rows.get((x, k)) == e[5] for k in range(len(spec.row_buffers)) if k != c.buffer):
                    return f"{e}: row {e[5]} of bank {x} is already open in another buffer"
                rows[(x, c.buffer)] = e[5]
            elif c.effect in ("close", "read_close", "write_close"):
                rows.pop((x, c.buffer), None)
    return None


def first_mismatch(case: dict, got: list) -> str | None:
    """None if the RTL's log equals the engine's, else a description of the first differing entry."""
    want = [tuple(e) for e in case["want"]]
    got = [tuple(e) for e in got]
    for i in range(max(len(want), len(got))):
        w = want[i] if i < len(want) else None
        g = got[i] if i < len(got) else None
        if w != g:
            cyc = min(x[0] for x in (w, g) if x is not None)
            spec = arbiter_spec(case["mode"])
            return (f"first mismatch at log entry {i}, cycle {cyc}: engine {w}, RTL {g}\n"
                    f"  engine (before cycle {cyc}) {_state(spec, want, cyc)}\n"
                    f"  RTL    (before cycle {cyc}) {_state(spec, got, cyc)}")
    return None


def _check(sim: Sim, cases: list[dict], tag: str, tmp_root: Path | None = None) -> list[dict]:
    results, tail = sim.run(cases, tag)
    assert len(results) == len(cases), f"cocotb bench failed:\n{tail}"
    errors = []
    for case, res in zip(cases, results, strict=True):
        bad = first_mismatch(case, res["log"])
        excl = exclusivity_violation(arbiter_spec(case["mode"]), res["log"])
        if excl:
            errors.append(f"{case['name']}: the RTL broke row exclusivity at {excl}")
        if res["unsupported"]:
            errors.append(f"{case['name']}: the RTL flagged `unsupported` (a restore without an earlier open) at cycle "
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


# ---- directed cases ---------------------------------------------------------------------------------------
def _gemv(spec, row: int, at: int = 0, comps: int = 2, first_group: int = 0) -> list[tuple]:
    """One PIM segment: G_ACT on every bank group (from `first_group` on, cyclically), COMPs, READRES, PIM_PRE."""
    C = spec.cmd
    per = spec.counts[4]
    n = spec.banks_per_channel // per
    groups = [((first_group + i) % n) * per for i in range(n)]
    cmds = [(C("G_ACT"), g, row) for g in groups] + [(C("COMP"), 0, row)] * comps + [(C("READRES"), 0, row),
                                                                                     (C("PIM_PRE"), 0, -1)]
    out = [(at, c, b, r, 0, 0) for c, b, r in cmds]
    out[0] = out[0][:4] + (SEG_START, 0)
    out[-1] = out[-1][:4] + (SEG_END, 0)
    return out


def _find(log, cmd, bank=None, src=None, after=-1):
    for e in log:
        if e[2] == cmd and (bank is None or e[3] == bank) and (src is None or e[4] == src) and e[0] > after:
            return e
    raise AssertionError(f"no {cmd} bank {bank} from {src} after {after} in the engine log")


def _directed_dual(spec) -> list[dict]:
    T = spec.timing
    cases = []
    # (a) a memory access to the row the PIM buffer holds waits for PIM_PRE, then exactly nRP
    #     ([bank, [PIM_PRE], [ACT], nRP]): an RTL issuing the ACT a cycle early (or late) mismatches
    w = Workload(requests=[(0, 0, 3, 5)], stream=_gemv(spec, 5))
    log = engine_log(spec, "dual", w)
    pre = _find(log, "PIM_PRE", src="pim")
    act = _find(log, "ACT", 3, "mem")
    assert act[0] == pre[0] + T["nRP"], (act, pre)
    assert _find(log, "RD", 3, "mem")[0] == act[0] + T["nRCDRD"]
    cases.append(_case(spec, "dual", "mem ACT of the PIM buffer's row: PIM_PRE + nRP", w, log))
    # (b) a PIM open of a row the mem buffer holds: the stream precharges it first (PRE from the pim source),
    #     after the memory read's nRTP and the ACT's nRAS
    w = Workload(requests=[(0, 0, 5, 9)], stream=_gemv(spec, 9, at=20, first_group=1))
    log = engine_log(spec, "dual", w)
    act, rd = _find(log, "ACT", 5, "mem"), _find(log, "RD", 5, "mem")
    pre = _find(log, "PRE", 5, "pim")
    assert pre[0] == max(act[0] + T["nRAS"], rd[0] + T["nRTP"], 20), (act, rd, pre)
    assert _find(log, "G_ACT", 4, "pim")[0] > pre[0]
    cases.append(_case(spec, "dual", "PIM open of the mem buffer's row: PRE first", w, log))
    # (b2) the two buffers of a bank activate like two banks of a group: a memory ACT to another row of a
    #      bank whose PIM buffer was just opened waits nRRDL after that G_ACT (and nRRDS after the last one)
    w = Workload(requests=[(0, 0, 2, 40)], stream=_gemv(spec, 5))
    log = engine_log(spec, "dual", w)
    gacts = [e for e in log if e[2] == "G_ACT"]
    act = _find(log, "ACT", 2, "mem")
    last = max(e[0] for e in gacts if e[0] < act[0])
    # and nFAW after its rank's last G_ACT (a G_ACT opens four banks: a whole four-activate window); a bank
    # index is pseudo-rank x 16 + bank group x 4 + bank
    last_in_rank = max(e[0] for e in gacts if e[0] < act[0] and e[3] // 16 == act[3] // 16)
    assert act[0] == max(gacts[0][0] + T["nRRDL"], last + T["nRRDS"], last_in_rank + T["nFAW"]), (act, gacts)
    cases.append(_case(spec, "dual", "mem ACT after G_ACT on the same bank: nRRDL, the rank's nFAW", w, log))
    # (c) PIM priority and the dual bus: COMPs win the column bus while memory ACTs use the row bus in the
    #     same cycles; a memory read ready together with a COMP waits for it
    reqs = [(t, 0, b, 40 + b) for t, b in ((0, 1), (0, 9), (0, 17), (0, 25), (30, 2), (30, 10))]
    w = Workload(requests=reqs, stream=_gemv(spec, 6, comps=12))
    log = engine_log(spec, "dual", w)
    cyc = {}
    for e in log:
        cyc.setdefault(e[0], []).append(e)
    both = [c for c, es in cyc.items() if {(e[1], e[4]) for e in es} == {("col", "pim"), ("row", "mem")}]
    assert both, "no cycle with a PIM column command and a memory row command"
    cases.append(_case(spec, "dual", "PIM priority on the column bus, memory on the row bus", w, log))
    return cases


def _directed_refresh(spec) -> dict:
    """Refresh preemption: a GEMV and memory rows open when the refresh of both ranks falls due. The refresh
    goes first (at its due cycle), closes the mem buffers (PREA per rank) and the PIM buffers (PIM_PRE), then
    REFab; nothing else issues to the ranks meanwhile; after nRFC the stream goes on and restores the PIM
    rows the refresh closed (its last G_ACT per bank group) before its next COMP."""
    T = spec.timing
    w = Workload(requests=[(3860, 0, 3, 30), (3880, 1, 20, 31)], stream=_gemv(spec, 5, at=3850, comps=60))
    log = engine_log(spec, "dual", w)
    ref = [e for e in log if e[4] == "refresh"]
    # due at nREFI; its PIM_PRE may close the GEMV's rows only nRAS after their G_ACT (a G_ACT fills the rank's
    # four-activate window, so the stream's last one before the refresh can fall within nRAS of nREFI)
    last_gact = max(e[0] for e in log if e[2] == "G_ACT" and e[0] < ref[0][0])
    assert ref[0][0] == max(T["nREFI"], last_gact + T["nRAS"]), (ref, last_gact)
    # it closes what is open (the PIM rows; a PREA per rank with an open memory row: rank 0's request may still
    # wait on that window), then refreshes both ranks
    names = [e[2] for e in ref]
    assert names.count("PIM_PRE") == 1 and set(names[:-2]) <= {"PIM_PRE", "PREA"} and names[-2:] == ["REFab"] * 2, ref
    last_ref = ref[-1][0]
    assert not [e for e in log if ref[0][0] <= e[0] <= last_ref and e[4] != "refresh"], "a source issued"
    after = [e for e in log if e[0] > last_ref]
    own_ref = [e[0] for e in ref if e[2] == "REFab" and e[3] // 16 == after[0][3] // 16]     # its rank's refresh
    assert after[0][2] == "G_ACT" and after[0][0] == own_ref[0] + T["nRFC"], (after[0], ref)
    stream_gacts = sum(1 for x in w.stream if spec.command_names[x[1]] == "G_ACT")
    restores = sum(1 for e in log if e[2] == "G_ACT") - stream_gacts
    # one restore per bank group the GEMV had opened when the refresh closed it (the stream starts at 3850: every
    # G_ACT before the refresh is of its first row set; a G_ACT's four-activate window spaces them nFAW apart)
    opened = {e[3] for e in log if e[2] == "G_ACT" and e[0] < ref[0][0]}
    assert opened and restores == len(opened), f"{restores} restores of {len(opened)} open bank groups"
    return _case(spec, "dual", "refresh preempts a GEMV; the stream restores its rows", w, log)


def _directed_blocked(spec) -> list[dict]:
    cases = []
    # while a segment runs only PIM issues; the next segment waits until the memory queues are empty
    reqs = [(2, 0, 3, 30), (2, 1, 7, 31), (40, 0, 12, 32)]
    stream = _gemv(spec, 5, comps=4) + _gemv(spec, 6, at=60, comps=4)
    w = Workload(requests=reqs, stream=stream)
    log = engine_log(spec, "blocked", w)
    end1 = [e for e in log if e[2] == "PIM_PRE"][0][0]
    mem = [e[0] for e in log if e[4] == "mem"]
    assert mem and min(mem) > end1, "memory issued during the first segment"
    start2 = [e for e in log if e[2] == "G_ACT" and e[0] > end1][0][0]
    assert start2 > max(mem), "the second segment started before the memory queues drained"
    cases.append(_case(spec, "blocked", "blocked: memory waits for SEG_END, PIM for empty queues", w, log))
    return cases


@pytest.mark.rtl
@needs_iverilog
def test_directed_dual(sims, dual, tmp_path) -> None:
    _check(sims("dual"), _directed_dual(dual), "directed", tmp_path)


@pytest.mark.rtl
@needs_iverilog
def test_directed_refresh_preemption(sims, dual, tmp_path) -> None:
    _check(sims("dual"), [_directed_refresh(dual)], "refresh", tmp_path)


@pytest.mark.rtl
@needs_iverilog
def test_directed_blocked(sims, single, tmp_path) -> None:
    _check(sims("blocked"), _directed_blocked(single), "directed", tmp_path)


# ---- a NeuPIMs attention step ------------------------------------------------------------------------------
@pytest.mark.rtl
@needs_iverilog
def test_attention_step_with_memory_traffic_matches_engine(sims, dual, tmp_path) -> None:
    work, what = attention_workload(dual)
    case = _case(dual, "dual", f"NeuPIMs attention step ({what}) + DMA requests", work)
    assert {"GWRITE", "G_ACT", "COMP", "READRES", "PIM_PRE"} <= {e[2] for e in case["want"]}
    _check(sims("dual"), [case], "attention", tmp_path)


# ---- mutation test ------------------------------------------------------------------------------------------
@pytest.mark.rtl
@needs_iverilog
def test_mutated_timing_parameter_is_caught(dual, tmp_path_factory) -> None:
    """Build the RTL with nRP - 1 (PRE/PIM_PRE -> ACT/G_ACT/..., the cross-buffer row PIM_PRE -> ACT among
    them): the random bench must report a mismatch, one cycle early."""
    t = timing_verilog.arbiter_tables(dual, latency_override={"nRP": dual.timing["nRP"] - 1})
    params = {"ROW_LAT": timing_verilog.lat_vector(t), "CTR_SAT": timing_verilog.ctr_sat_vector(t)}
    assert params["ROW_LAT"] != timing_verilog.lat_vector(timing_verilog.arbiter_tables(dual))
    mp = pytest.MonkeyPatch()
    mp.syspath_prepend(str(HERE))
    try:
        root = tmp_path_factory.mktemp("arb_mutant")
        sm = Sim(root / "build", "dual", params)
        case = _case(dual, "dual", "random seed 11 on the nRP-1 mutant", random_workload(dual, RANDOM_SEEDS[0], 300, 150))
        with pytest.raises(AssertionError) as err:
            _check(sm, [case], "mutant", root)
    finally:
        mp.undo()
    msg = str(err.value)
    assert "first mismatch at log entry" in msg and "waveform: " in msg and ".fst" in msg, msg
    print(f"mutation nRP-1 caught: {msg}")


# ---- scope: what the RTL does not implement is refused ------------------------------------------------------
@pytest.mark.parametrize(("change", "match"), [
    ({"controller": {"refresh": "perbank"}}, "refresh"),
    ({"controller": {"read_queue": 4}}, "queues"),
    ({"controller": {"row_policy": "closed"}}, "row policy"),
    ({"controller": {"active_buffer": True}}, "active_buffer"),
    ({"arbitration": "frfcfs"}, "arbitration"),
    ({"starvation_cap": 100}, "starvation"),
    ({"stream_refresh": "wait"}, "stream_refresh"),
    ({"requests": [(0, 2, 0, 1)]}, "rmw"),
    ({"stream": "RDA"}, "read_close"),
])
def test_scope_refuses_what_the_rtl_does_not_implement(dual, change, match) -> None:
    work = Workload(requests=change.get("requests", []))
    if change.get("stream"):
        work.stream = [(0, dual.cmd(change["stream"]), 0, 1, 0, 0)]
    with pytest.raises(NotImplementedError, match=f"{match}.*issue #10"):
        check_scope(dual, change.get("controller", {}), change.get("arbitration", "priority"), work,
                    change.get("starvation_cap", 0), change.get("stream_refresh", "split"))
    check_scope(dual, CONTROLLER, "priority", Workload())       # the supported configuration passes


def test_arbiter_header_refuses_a_single_bus_standard() -> None:
    from archsim.errors import ConfigError

    with pytest.raises(ConfigError, match="issue #10"):
        timing_verilog.arbiter_header(timing_verilog.default_spec())


@pytest.mark.parametrize("preset", list(timing_verilog.ARBITER_PRESETS))
def test_committed_arbiter_headers_are_current(preset) -> None:
    spec = timing_verilog.arbiter_spec(preset)
    path = timing_verilog.arbiter_header_path(preset, INCLUDE)
    assert path.is_file(), f"{path} missing: run `python -m archsim.dram.verilog`"
    assert path.read_text(encoding="ascii") == timing_verilog.arbiter_header(spec), (
        f"{path} is stale relative to {preset}: run `python -m archsim.dram.verilog`")
    t = timing_verilog.arbiter_tables(spec)
    assert len(t["rows"]) == len(spec.constraints) and any(r["sib"] for r in t["rows"])
    # every counter saturates at or above every latency compared with it
    for r in t["rows"]:
        base = r["ctr"] - (r["win"] - 1)
        assert all(t["ctr_sat"][base + n * r["stride"] + r["win"] - 1] >= r["lat"]
                   for n in range(t["n_nodes"][r["level"]]))


# ---- lint ------------------------------------------------------------------------------------------------
@pytest.mark.rtl
@needs_verilator
@pytest.mark.parametrize("mode", ["blocked"])   # the default build (dual): tests/rtl/test_rtl_cli.py lints it
def test_arbiter_lints_clean(tmp_path: Path, mode: str) -> None:
    sub = MODES[mode][3]
    inc = ([f"-I{INCLUDE / sub}"] if sub else []) + [f"-I{INCLUDE}"]
    proc = subprocess.run(["verilator", "--lint-only", "-Wall", *inc, f"-GBLOCKED={MODES[mode][2]}",
                           str(RTL / f"{TOP}.v")], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"verilator lint failed:\n{proc.stdout}\n{proc.stderr}"


def test_exclusivity_check_catches_a_row_open_in_both_buffers(dual) -> None:
    """The bench's own exclusivity check on the RTL's log (beside the comparison with the engine)."""
    ok = [(0, "row", "G_ACT", 0, "pim", 5), (1, "row", "PIM_PRE", 0, "pim", -1), (20, "row", "ACT", 2, "mem", 5)]
    assert exclusivity_violation(dual, ok) is None
    bad = [(0, "row", "G_ACT", 0, "pim", 5), (20, "row", "ACT", 2, "mem", 5)]
    assert "bank 2" in exclusivity_violation(dual, bad)
    bad = [(0, "row", "ACT", 6, "mem", 9), (20, "row", "G_ACT", 4, "pim", 9)]
    assert "bank 6" in exclusivity_violation(dual, bad)
