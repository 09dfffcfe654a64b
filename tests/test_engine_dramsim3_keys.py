"""DRAMsim3's controller rules as controller keys of the channel engine (issue 24): `row_hit_cap` (a bank's open
row serves at most that many column commands ahead of an older request that needs a precharge) and
`refresh_stagger` (the all-bank refreshes of a channel's ranks spread over nREFI). Each key is checked in both
engines (the numba kernel and the reference scheduler) on exact small cases at its boundary, and the two engines
are compared on random cases with the keys set."""
from __future__ import annotations

import functools

import numpy as np
import pytest
from engine_cases import case_spec, random_case, run_case
from test_engine_vs_reference import assert_clean, assert_same

from archsim.dram.controller import ControllerConfig
from archsim.dram.spec import load_spec
from archsim.engine.reference import ReferenceController
from archsim.errors import ConfigError

MemorySystem = pytest.importorskip("archsim.engine.memory").MemorySystem
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


# ---------------------------------------------------------------------------------------------------------
# bank_command_queue and posted_writes (DRAMsim3's two-level queues, docs/channel-engine.md 3.6)
def _run_q(engine, controller, bank, row, col, kind, arrive, width=1, preset=DDR4, overrides=None):
    spec = load_spec(preset, overrides=overrides or {})
    eng = ENGINES[engine](spec, controller=controller, log=True)
    port = eng.add_port("mem", width=width)
    n = len(bank)
    eng.enqueue_requests(port, np.zeros(n, np.int64), np.asarray(bank, np.int64), np.asarray(row, np.int64),
                         np.asarray(col, np.int64), np.asarray(kind, np.int64), np.asarray(arrive, np.int64),
                         np.full(n, -1, np.int64))
    eng.run(max_cycles=1_000_000)
    enq = eng.S.r_enq[:n].tolist() if engine == "fast" else [r.enq for r in eng.requests]
    return eng.command_log().reset_index(drop=True), np.asarray(eng.request_done).tolist(), enq


@pytest.mark.parametrize("engine", ENGINES)
def test_one_transaction_moves_down_per_cycle(engine):
    """Eight reads to eight banks offered four a cycle into a 4-entry read queue: the queue fills at cycle 0 and
    one transaction moves to its bank's command queue per cycle (freeing its entry for the next cycle), so the
    later reads are accepted one a cycle: 0, 0, 0, 0, 1, 2, 3, 4 (two moves a cycle would give 1, 1, 2, 2). A
    moved read's ACT issues no earlier than the cycle after its move."""
    ctrl = {"refresh": "none", "read_queue": 4, "bank_command_queue": 8}
    log, done, enq = _run_q(engine, ctrl, [0, 4, 8, 12, 1, 5, 9, 13], [0] * 8, [0] * 8, [0] * 8, [0] * 8, width=4)
    assert enq == [0, 0, 0, 0, 1, 2, 3, 4], f"{engine}: acceptance cycles {enq}"
    assert log["cycle"].iloc[0] == 1 and log["command"].iloc[0] == "ACT", f"{engine}:\n{log.head()}"


@pytest.mark.parametrize("engine", ENGINES)
def test_a_full_bank_queue_holds_its_transactions_back(engine):
    """Command queues of one entry: three reads of one bank move down one at a time, each after the previous one's
    RD issued (its queue has room again); a read of another bank (group 1) behind them moves past them at once."""
    ctrl = {"refresh": "none", "bank_command_queue": 1}
    log, done, enq = _run_q(engine, ctrl, [0, 0, 0, 4], [0, 0, 0, 0], [0, 1, 2, 0], [0] * 4, [0, 0, 0, 0], width=4)
    rd = log[log["command"] == "RD"]
    got = list(zip(rd["bankgroup"], rd["column"], strict=True))
    assert got[0] == (0, 0) and got[-1] == (0, 2) and (1, 0) in got[:2], f"{engine}: reads (bank group, column) {got}"
    first = rd["cycle"].tolist()
    assert all(b - a >= 1 for a, b in zip(first, first[1:], strict=False)), f"{engine}: RD cycles {first}"


@pytest.mark.parametrize("engine", ENGINES)
def test_posted_writes(engine):
    """Posted: a write is done the cycle after it is accepted; a read of its address while it waits is answered
    then too, with no command; five writes (not more than write_drain_idle 8) never issue, and the run ends
    when every request is done. Nine writes drain once the command queues are empty: nine WRs."""
    ctrl = {"refresh": "none", "bank_command_queue": 8, "posted_writes": True}
    n = 5
    log, done, enq = _run_q(engine, ctrl, [0] * n + [0], [0] * (n + 1), list(range(n)) + [3], [1] * n + [0],
                            list(range(n + 1)))
    assert done == [e + 1 for e in enq], f"{engine}: done {done}, accepted {enq}"
    assert len(log) == 0, f"{engine}: commands issued for buffered writes and a buffered read:\n{log}"
    # (a read of another bank at cycle 100 keeps the run going past the last write's acknowledgement)
    log, done, enq = _run_q(engine, ctrl, [0] * 9 + [4], [0] * 10, list(range(10)), [1] * 9 + [0],
                            list(range(9)) + [100])
    assert done[:9] == [e + 1 for e in enq[:9]], f"{engine}: done {done}, accepted {enq}"
    wr = log[log["command"] == "WR"]["cycle"].tolist()
    assert len(wr) == 9 and wr[-1] < 100, f"{engine}: WR cycles {wr}"


def test_the_queue_keys_are_validated():
    with pytest.raises(ConfigError, match="controller.posted_writes"):
        ControllerConfig.from_dict({"posted_writes": True})
    with pytest.raises(ConfigError, match="controller.bank_command_queue"):
        ControllerConfig.from_dict({"bank_command_queue": 8, "row_policy": "closed"})
    with pytest.raises(ConfigError, match="controller.bank_command_queue"):
        ControllerConfig.from_dict({"bank_command_queue": -1})
    cfg = ControllerConfig()
    assert not {"bank_command_queue", "posted_writes", "write_drain_idle"} & set(cfg.to_dict()), cfg.to_dict()
    spec = load_spec(DDR4)
    with pytest.raises(Exception, match="bank_command_queue"):
        MemorySystem(spec, controller={"bank_command_queue": 8}, sources=[{"name": "a", "kind": "rw"},
                                                                          {"name": "b", "kind": "rw"}])
    eng = MemorySystem(spec, controller={"bank_command_queue": 8})
    with pytest.raises(ConfigError, match="rmw"):
        eng.enqueue_requests(eng.add_port("mem"), 0, 0, 0, 0, 2, 0, -1)


def command_queue_case(seed: int) -> dict:
    """A random engine case (one rw source) under bank_command_queue, with posted writes and merged reads in
    half of them each. The addresses are distinct, except reads that repeat an earlier write's of their port
    under posted writes (answered from the write buffer while it waits) or an earlier read's under merged reads:
    a write never follows a read of its address (the livelock of hazard 16), a read never follows a write of
    its address without posted writes (a read queued behind a write of its address holds a full write queue's
    drain, hazard 16), and without posted writes every write drains (write_drain_idle 0)."""
    case = random_case(seed, n_rw=1, n_stream=0)
    rng = np.random.default_rng(20_000_000 + seed)
    c = case["controller"]
    c.update(row_policy="open", active_buffer=False, pinned_leave_queue=False,
             bank_command_queue=int(rng.choice([1, 2, 3, 8])), write_drain_idle=int(rng.choice([0, 1, 2, 8])),
             posted_writes=bool(rng.random() < 0.5), row_hit_cap=int(rng.choice([0, 1, 2, 4])))
    if not c["posted_writes"]:
        c["write_drain_idle"] = 0
    c["refresh_stagger"] = c["refresh"] != "perbank" and bool(rng.random() < 0.5)
    c["merge_reads"] = bool(rng.random() < 0.5)
    cols = case_spec(case).columns
    seen = set()
    for r in case["requests"]:
        earlier = []                  # addresses a read of this port may repeat (accepted before it)
        r["kind"] = np.where(r["kind"] == 2, 1, r["kind"]).astype(np.int64)
        for i in range(len(r["bank"])):
            if r["kind"][i] == 0 and earlier and rng.random() < 0.3:
                r["bank"][i], r["row"][i], r["column"][i] = earlier[int(rng.integers(len(earlier)))]
                continue
            a = (int(r["bank"][i]), int(r["row"][i]), int(r["column"][i]))
            while a in seen:          # (another column, and another row once the row's columns run out)
                a = (a[0], a[1] if rng.random() < 0.8 else int(rng.integers(0, 64)), int(rng.integers(0, cols)))
            seen.add(a)
            r["bank"][i], r["row"][i], r["column"][i] = a
            if (c["posted_writes"] and r["kind"][i] == 1) or (c["merge_reads"] and r["kind"][i] == 0):
                earlier.append(a)
    return case


@pytest.mark.parametrize("chunk", range(2))
def test_engine_matches_reference_with_command_queues(chunk):
    """Each case on the kernel it picks (lean on one row buffer) and on the general kernel."""
    kernels = set()
    for seed in range(chunk * 40, (chunk + 1) * 40):
        case = command_queue_case(seed)
        ref = run_case(ReferenceController, case)
        for engine in (MemorySystem, functools.partial(MemorySystem, kernel="general")):
            fast = run_case(engine, case)
            kernels.add(fast["kernel"])
            assert_same(case, fast, ref)
            assert_clean(case, fast, "fast engine")
    assert kernels == {"lean", "general"}, kernels


@pytest.mark.slow
@pytest.mark.parametrize("chunk", range(10))
def test_engine_matches_reference_with_command_queues_sweep(chunk):
    for seed in range(70_000 + chunk * 100, 70_000 + (chunk + 1) * 100):
        case = command_queue_case(seed)
        fast, ref = run_case(MemorySystem, case), run_case(ReferenceController, case)
        assert_same(case, fast, ref)
        assert_clean(case, fast, "fast engine")


def test_the_random_command_queue_cases_exercise_the_rules():
    """Posted reads answered from the write buffer, merged reads, writes left in the buffer and dual-bus
    second commands occur in the random cases (reference scheduler), so the comparison above covers them."""
    seen = {"answered": 0, "undrained": 0, "dual_pairs": 0, "merged": 0}
    for seed in range(80):
        case = command_queue_case(seed)
        out = run_case(ReferenceController, case)
        log = out["log"]
        n_col = log["command"].isin(["RD", "WR"]).sum()
        n_req = sum(len(r["bank"]) for r in case["requests"])
        if case["controller"]["posted_writes"]:
            seen["answered"] += n_col < n_req
        seen["dual_pairs"] += int(log.duplicated("cycle").sum() > 0 and case_spec(case).command_bus == "dual")
        seen["undrained"] += int((out["done"] >= 0).all() and n_col < n_req)
        seen["merged"] += int(case["controller"]["merge_reads"] and (out["class"] == 3).any())
    assert min(seen.values()) >= 5, f"random cases showing each rule: {seen}"
