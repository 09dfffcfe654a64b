"""DRAMsim3's controller rules as controller keys of the channel engine (issue 24): `row_hit_cap` (a bank's open
row serves at most that many column commands ahead of an older request that needs a precharge) and
`refresh_stagger` (the all-bank refreshes of a channel's ranks spread over nREFI). Each key is checked in both
engines (the numba kernel and the reference scheduler) on exact small cases at its boundary, and the two engines
are compared on random cases with the keys set."""
from __future__ import annotations

import numpy as np
import pytest
from engine_cases import random_case, run_case
from test_engine_vs_reference import assert_clean, assert_same

from archsim.dram.controller import ControllerConfig
from archsim.dram.spec import load_spec
from archsim.engine.reference import ReferenceController
from archsim.errors import ConfigError

MemorySystem = pytest.importorskip("archsim.engine.channel").MemorySystem
ENGINES = {"fast": MemorySystem, "reference": ReferenceController}
DDR4 = "DDR4_3200AA_x8_8Gb"


def _run(engine, spec, controller, bank, row, arrive):
    eng = ENGINES[engine](spec, controller=controller, log=True)
    port = eng.add_port("mem", width=1)
    n = len(row)
    eng.enqueue_requests(port, np.zeros(n, np.int64), np.asarray(bank, np.int64), np.asarray(row, np.int64),
                         np.arange(n, dtype=np.int64) % 4, np.zeros(n, np.int64), np.asarray(arrive, np.int64),
                         np.full(n, -1, np.int64))
    eng.run(max_cycles=1_000_000)
    return eng.command_log().reset_index(drop=True)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("cap", [0, 1, 2, 3, 4])
def test_row_hit_cap_lets_the_oldest_request_precharge_after_cap_hits(engine, cap):
    """One bank: a read of row 0, then a read of row 1, then four more reads of row 0 (all queued before the
    first column command). Without a cap the four younger hits go before the row-1 read; with cap k the row
    serves exactly k column commands (the first read included) before the PRE for the row-1 read."""
    spec = load_spec(DDR4)
    rows = [0, 1, 0, 0, 0, 0]
    log = _run(engine, spec, {"refresh": "none", "row_hit_cap": cap}, [0] * 6, rows, range(6))
    cmds = log["command"].tolist()
    first_pre = cmds.index("PRE")
    served_before = sum(c == "RD" for c in cmds[:first_pre])
    expected = 5 if cap == 0 else min(cap, 5)
    assert served_before == expected, f"{engine}, cap {cap}: {served_before} reads before the first PRE: {cmds}"
    # the PRE is for the row-1 read: the next ACT opens row 1
    acts = log[log["command"] == "ACT"]["row"].tolist()
    assert acts[:2] == [0, 1], f"{engine}, cap {cap}: rows activated {acts}"


@pytest.mark.parametrize("engine", ENGINES)
def test_row_hit_cap_counts_only_the_rows_own_column_commands(engine):
    """The count starts again at each ACT: with cap 2, rows 0, 1, 0 each serve two hits in turn while a request
    of the other row waits, and no more."""
    spec = load_spec(DDR4)
    rows = [0, 1, 0, 1, 0, 1, 0, 1]
    log = _run(engine, spec, {"refresh": "none", "row_hit_cap": 2}, [0] * 8, rows, range(8))
    runs = []
    for c, r in zip(log["command"], log["row"], strict=True):
        if c == "ACT":
            runs.append([r, 0])
        elif c == "RD":
            runs[-1][1] += 1
    assert all(n <= 2 for _, n in runs), f"{engine}: (row, reads) per activation {runs}"
    assert sum(n for _, n in runs) == 8, f"{engine}: (row, reads) per activation {runs}"


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("stagger", [False, True])
def test_refresh_stagger_spreads_the_ranks_refreshes(engine, stagger):
    """Two ranks, nREFI 1001: staggered, rank 0 refreshes at 500, 1500, 2500 and rank 1 at 1000, 2000 (every
    2 x (1001 // 2) = 1000 cycles); not staggered, both at 1001 and 2002. An idle channel: each REF issues at its
    due cycle. One late read keeps the run going (the refreshes before it are compared)."""
    spec = load_spec(DDR4, overrides={"org.ranks": 2, "timing.nREFI": 1001})
    log = _run(engine, spec, {"refresh": "allbank", "refresh_stagger": stagger}, [0], [0], [2700])
    refs = log[(log["command"] == "REFab") & (log["cycle"] < 2600)]      # (the read delays later ones)
    got = {r: refs[refs["rank"] == r]["cycle"].tolist() for r in (0, 1)}
    if stagger:
        assert got == {0: [500, 1500, 2500], 1: [1000, 2000]}, f"{engine}, staggered: REFab cycles per rank {got}"
    else:
        # both ranks are due together; the single command bus takes one command a cycle, so rank 1 follows
        assert got[0] == [1001, 2002] and [c - a for a, c in zip(got[0], got[1], strict=True)] == [1, 1], \
            f"{engine}, not staggered: REFab cycles per rank {got}"


@pytest.mark.parametrize("engine", ENGINES)
def test_refresh_stagger_on_one_rank_changes_nothing(engine):
    spec = load_spec(DDR4, overrides={"timing.nREFI": 1001})
    logs = [_run(engine, spec, {"refresh": "allbank", "refresh_stagger": s}, [0, 3, 0], [0, 1, 2], [0, 900, 2100])
            for s in (False, True)]
    assert logs[0].equals(logs[1]), f"{engine}: one rank, staggered or not:\n{logs[0]}\n{logs[1]}"


def test_the_keys_are_validated():
    with pytest.raises(ConfigError, match="controller.refresh_stagger"):
        ControllerConfig.from_dict({"refresh": "perbank", "refresh_stagger": True})
    with pytest.raises(ConfigError, match="controller.row_hit_cap"):
        ControllerConfig.from_dict({"row_hit_cap": -1})
    # left at their defaults they stay out of the config's dict (so existing config hashes stay)
    assert "row_hit_cap" not in ControllerConfig().to_dict()
    assert ControllerConfig.from_dict({"row_hit_cap": 4, "refresh_stagger": True}).to_dict()["row_hit_cap"] == 4


def dramsim3_case(seed: int) -> dict:
    """A random engine case (tests/engine_cases.py) with the DRAMsim3 keys drawn on top (a separate stream of
    draws, so the plain cases stay as they are)."""
    case = random_case(seed)
    rng = np.random.default_rng(10_000_000 + seed)
    case["controller"]["row_hit_cap"] = int(rng.choice([1, 2, 3, 4]))
    case["controller"]["refresh_stagger"] = case["controller"]["refresh"] != "perbank" and bool(rng.random() < 0.7)
    return case


@pytest.mark.parametrize("chunk", range(2))
def test_engine_matches_reference_with_dramsim3_keys(chunk):
    for seed in range(chunk * 60, (chunk + 1) * 60):
        case = dramsim3_case(seed)
        fast, ref = run_case(MemorySystem, case), run_case(ReferenceController, case)
        assert_same(case, fast, ref)
        assert_clean(case, fast, "fast engine")


@pytest.mark.slow
@pytest.mark.parametrize("chunk", range(20))
def test_engine_matches_reference_with_dramsim3_keys_sweep(chunk):
    for seed in range(50_000 + chunk * 100, 50_000 + (chunk + 1) * 100):
        case = dramsim3_case(seed)
        fast, ref = run_case(MemorySystem, case), run_case(ReferenceController, case)
        assert_same(case, fast, ref)
        assert_clean(case, fast, "fast engine")


def test_the_random_cases_exercise_the_keys():
    """The keys must change the schedule in some of the random cases (reference scheduler with and without
    each key); otherwise the comparison above proves little."""
    changed = {"row_hit_cap": 0, "refresh_stagger": 0}
    for seed in range(60):
        case = dramsim3_case(seed)
        base = run_case(ReferenceController, case)["log"]
        for key, off in (("row_hit_cap", 0), ("refresh_stagger", False)):
            if not case["controller"][key]:
                continue
            other = {**case, "controller": {**case["controller"], key: off}}
            changed[key] += not run_case(ReferenceController, other)["log"].equals(base)
    assert min(changed.values()) >= 5, f"random cases whose schedule each key changes: {changed}"
