"""T3's near-memory update command (standard hbm2_nmc, preset HBM2_2Gbps_NMC): an rmw request is one NMC_ADD
(NMC_ADDA) command in the fast engine and the reference alike, the checker enforces its rows, removing one
of its rows is caught, the RD + WR form stays reachable, and T3-MCA's dynamic threshold follows the GEMM.

Tight gates of every new row (illegal at t-1, legal at t) are in tests/test_dram_checker.py::test_tight_gate,
which covers every row of every shipped preset, HBM2_2Gbps_NMC included (test_every_row_is_gated there)."""
from __future__ import annotations

import dataclasses
from functools import cache

import numpy as np
import pytest
from engine_cases import VARIANTS, case_spec, random_case, run_case

from archsim.dram.checker import check_log
from archsim.dram.roles import R_UPD, R_UPDA
from archsim.dram.spec import load_spec
from archsim.engine.channel import KIND_READ, KIND_RMW, KIND_WRITE
from archsim.engine.memory import MemorySystem
from archsim.engine.reference import ReferenceController
from archsim.engine.tables import lower
from archsim.errors import ConfigError

SMALL_MAPPING = "RoRaBgBaChCo,Ch^Ro"     # 4-channel T3 memory (the preset's IPoly hash is for 32 channels)

NMC = VARIANTS.index(("HBM2_2Gbps_NMC", (("org.channels", 1),)))
NEW = ("NMC_ADD", "NMC_ADDA")


@pytest.fixture(scope="module")
def spec():
    return load_spec("HBM2_2Gbps_NMC", overrides={"org.channels": 1})


def _new_groups(spec) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for c in spec.constraints:
        if c["prev_name"] in NEW or c["next_name"] in NEW:
            lv = c["level_name"] + (" sibling" if c["sibling"] else "")
            out.setdefault(c["group"], []).append(f"{lv}: {c['prev_name']} -> {c['next_name']}")
    return out


def test_roles_and_timing_of_the_update_command(spec):
    t = spec.timing
    T = lower(spec).tables
    assert spec.commands[T.role[R_UPD]].name == "NMC_ADD" and spec.commands[T.role[R_UPDA]].name == "NMC_ADDA"
    assert t["nUPD"] == t["nCWL"] + t["nBL"] + t["nALU"]
    assert spec.commands[spec.cmd("NMC_ADD")].latency == t["nUPD"]
    # standards without one keep -1 (rmw = RD + WR there)
    assert lower(load_spec("HBM2_2Gbps_PC", overrides={"org.channels": 1})).tables.role[R_UPD] == -1


def test_an_update_without_its_closing_form_is_refused(spec):
    k = spec.cmd("NMC_ADDA")
    assert k == len(spec.commands) - 1
    half = dataclasses.replace(spec, commands=spec.commands[:-1],
                               constraints=[c for c in spec.constraints if k not in (c["prev"], c["next"])])
    with pytest.raises(ConfigError, match="needs a bank-scope `update_close`"):
        lower(half)


def test_an_rmw_is_one_update_command(spec):
    """Both engines: 64 rmw requests to open rows issue 64 NMC_ADD / NMC_ADDA and no RD or WR beyond the ACTs'
    rows; each completes nUPD after its command; the log is legal."""
    rng = np.random.default_rng(3)
    n = 64
    bank, row, col = rng.integers(0, 8, n), rng.integers(0, 3, n), rng.integers(0, 32, n)
    logs = []
    for cls in (MemorySystem, ReferenceController):
        ms = cls(spec, {"refresh": "none", "row_policy": "open"}, log=True)
        p = ms.add_port(width=2)
        ms.enqueue_requests(p, np.zeros(n, np.int64), bank, row, col, KIND_RMW, np.arange(n) * 3, -1)
        ms.run()
        log = ms.command_log().reset_index(drop=True)
        cmds = log["command"].value_counts().to_dict()
        assert cmds.get("NMC_ADD", 0) + cmds.get("NMC_ADDA", 0) == n
        assert cmds.get("RD", 0) == cmds.get("WR", 0) == 0
        done = np.asarray(ms.request_done)
        upd = log[log["command"].isin(NEW)]
        assert sorted(done.tolist()) == sorted((upd["cycle"] + spec.timing["nUPD"]).tolist())
        assert check_log(spec, log) == []
        logs.append(log[["cycle", "command", "bank", "row", "column"]].to_numpy().tolist())
    assert logs[0] == logs[1]


@pytest.mark.parametrize("cls", [MemorySystem, ReferenceController])
def test_rd_wr_form_stays_reachable_and_unchanged(spec, cls):
    """rmw="rd_wr" on the NMC standard schedules exactly as the plain HBM2 standard (the update rows never
    bind without update commands)."""
    plain = load_spec("HBM2_2Gbps_PC", overrides={"org.channels": 1})
    rng = np.random.default_rng(5)
    n = 80
    args = (np.zeros(n, np.int64), rng.integers(0, 16, n), rng.integers(0, 4, n), rng.integers(0, 32, n),
            rng.choice([KIND_READ, KIND_WRITE, KIND_RMW], n), np.sort(rng.integers(0, 400, n)), -1)
    out = []
    for sp, kw in ((spec, {"rmw": "rd_wr"}), (plain, {})):
        ms = cls(sp, {"refresh": "allbank", "row_policy": "closed"}, log=True, alu_latency=4, **kw)
        ms.enqueue_requests(ms.add_port(width=2), *args)
        ms.run()
        log = ms.command_log()
        assert not log["command"].isin(NEW).any()
        out.append((log[["cycle", "command", "bank", "row", "column"]].to_numpy().tolist(),
                    np.asarray(ms.request_done).tolist()))
    assert out[0] == out[1]
    with pytest.raises((ConfigError, ValueError), match="command or rd_wr"):
        cls(spec, rmw="rdwr")


def test_engine_matches_reference_on_update_heavy_cases():
    """Random NMC cases (40% rmw requests, NMC_ADD in streams): identical logs, done cycles, completions;
    the checker accepts them; the update command and its closing form both occur."""
    seen = set()
    for seed in range(15):
        case = random_case(7000 + seed, variant=NMC)
        fast, ref = run_case(MemorySystem, case), run_case(ReferenceController, case)
        assert fast["log"][["cycle", "command", "bank", "row", "column", "source"]].astype(str).values.tolist() == \
            ref["log"][["cycle", "command", "bank", "row", "column", "source"]].astype(str).values.tolist(), seed
        assert np.array_equal(fast["done"], ref["done"]) and fast["completions"] == ref["completions"], seed
        assert check_log(case_spec(case), fast["log"]) == [], seed
        seen |= set(fast["log"]["command"]) & set(NEW)
    assert seen == set(NEW)


@cache
def _pool():
    return [random_case(9000 + i, variant=NMC, refresh="none") for i in range(16)]


@cache
def _mutation_targets() -> tuple[tuple[int, int], ...]:
    """(group, pool case) pairs where removing the new row group changes the reference's schedule."""
    out = []
    spec0 = case_spec(_pool()[0])
    base: dict[int, list] = {}
    for g in sorted(_new_groups(spec0)):
        follow = {c["next_name"] for c in spec0.constraints if c["group"] == g}
        if _why_not_catchable(spec0, g) or follow <= {"PREA", "REFab"}:
            continue            # (no case to search for: see test_dropping_a_new_row_is_caught)
        for i, case in enumerate(_pool()):
            full = case_spec(case)
            mutated = dataclasses.replace(full, constraints=[c for c in full.constraints if c["group"] != g])
            if i not in base:
                base[i] = run_case(ReferenceController, case)["log"][["cycle", "command"]].to_numpy().tolist()
            a = base[i]
            b = run_case(ReferenceController, case, spec=mutated)["log"][["cycle", "command"]].to_numpy().tolist()
            if a != b:
                out.append((g, i))
                break
    return tuple(out)


def _why_not_catchable(spec, g: int) -> str | None:
    rows = [c for c in spec.constraints if c["group"] == g]
    if max(c["latency"] for c in rows) <= 1:
        return "latency 1: the column bus spaces column commands a cycle apart anyway"
    others = [c for c in spec.constraints if c["group"] != g]
    if all(any((o["level"], o["prev"], o["next"], o["sibling"]) == (c["level"], c["prev"], c["next"], c["sibling"])
               and o["window"] == 1 and o["latency"] >= c["latency"] for o in others) for c in rows):
        # HBM2 has no rank level: rank rows act at the pseudo-channel, where nCCDS = nBL
        return "an equal row on the same commands and level binds too"
    return None


def test_dropping_a_new_row_is_caught():
    """Remove one NMC row group from the fast engine's spec: on a case where it binds, the engine issues early
    and the checker (full spec) names that row. Every new group is caught, or provably cannot bind alone."""
    targets = dict(_mutation_targets())
    spec = case_spec(_pool()[0])
    groups = _new_groups(spec)
    for g in groups:
        follow = {c["next_name"] for c in spec.constraints if c["group"] == g}
        if g not in targets and follow <= {"PREA", "REFab"}:
            # commands the refresh manager issues: a directed stream ACT, update, PREA / REFab instead
            upd = next(c["prev_name"] for c in spec.constraints if c["group"] == g)
            seq = [spec.cmd(x) for x in ("ACT", upd, sorted(follow)[0])]
            mutated = dataclasses.replace(spec, constraints=[c for c in spec.constraints if c["group"] != g])
            ms = MemorySystem(mutated, {"refresh": "none"}, sources=[{"name": "s", "kind": "stream"}], log=True)
            ms.enqueue_stream("s", 0, np.array(seq), np.array([3, 3, 3]), np.array([5, 5, -1]), np.array([-1, 2, -1]))
            ms.run()
            rules = {v.rule.rsplit(" >=", 1)[0] for v in check_log(spec, ms.command_log()) if v.kind == "timing"}
            assert rules & set(groups[g]), (g, groups[g], rules)
            continue
        if g not in targets:
            assert _why_not_catchable(spec, g), f"group {g} {groups[g]} is exercised by no pool case"
            continue
        case = _pool()[targets[g]]
        full = case_spec(case)
        mutated = dataclasses.replace(full, constraints=[c for c in full.constraints if c["group"] != g])
        log = run_case(MemorySystem, case, spec=mutated)["log"]
        rules = {v.rule.rsplit(" >=", 1)[0] for v in check_log(full, log) if v.kind == "timing"}
        assert rules & set(groups[g]), (g, groups[g], rules)
    assert len(targets) >= 7


# ---- T3-MCA's dynamic threshold ------------------------------------------------------------------------------
def test_set_threshold_takes_effect_between_advances(spec):
    """A communication request gated by threshold 1 behind a busy compute source issues as soon as the
    threshold is raised above the compute queue's occupancy (no starvation cap)."""
    def run(raise_at):
        ms = MemorySystem(spec, {"refresh": "none", "read_queue": 8, "write_queue": 8},
                          sources=[{"name": "compute", "kind": "rw"}, {"name": "comm", "kind": "rw"}],
                          arbitration="threshold", threshold=1, starvation_cap=0, log=False)
        pc, pm = ms.add_port("compute", width=4), ms.add_port("comm")
        n = 400
        rng = np.random.default_rng(2)
        ms.enqueue_requests(pc, 0, rng.integers(0, 8, n), rng.integers(0, 64, n), rng.integers(0, 32, n),
                            KIND_READ, 0)
        rid = ms.enqueue_requests(pm, 0, 12, 3, 1, KIND_READ, 10)
        if raise_at is not None:
            ms.advance(raise_at)
            ms.set_threshold(100)
        ms.run()
        return int(ms.request_done[rid[0]]), int(ms.request_done[:n].max())
    gated, compute_end = run(None)
    assert gated > compute_end                    # threshold 1, no cap: comm waits for compute to drain
    opened, compute_end2 = run(200)
    assert 200 <= opened < 260 < compute_end2     # issued right after the raise, while compute is busy


def test_mca_threshold_is_the_littles_law_entries_of_a_memory_intensity():
    """Accesses per channel per cycle x the closed-row read latency (ACT -> RD + RD's completion, from the
    constraint rows), rounded up, between 1 and the compute queues' capacity; an integer fixes it."""
    from archsim.dram.latency import closed_row_read
    from archsim.systems.t3.params import load_params
    from archsim.systems.t3.sim import mca_threshold

    p = load_params(overrides={"memory.channels": 4, "memory.mapping": SMALL_MAPPING})
    lat = closed_row_read(p.spec)
    cap = p.controller["read_queue"] + p.controller["write_queue"]
    assert mca_threshold(p, 4 * 1000, 1000 * lat) == 1                  # one access per channel per latency
    assert mca_threshold(p, 4 * 1000 * 7 + 1, 1000 * lat) == 8          # rounded up
    assert mca_threshold(p, 0, 100) == 1
    assert mca_threshold(p, 10 ** 9, 1) == cap
    fixed = load_params(overrides={"memory.channels": 4, "memory.mapping": SMALL_MAPPING, "mca.threshold": 5})
    assert mca_threshold(fixed, 10 ** 9, 1) == 5


def test_dynamic_threshold_follows_the_gemm_and_never_starves_it():
    """T3-MCA with the dynamic threshold on a GEMM of two waves of 4 K steps (8 CUs): re-estimated at every
    step after the first-stage estimate, so one value per step; it moves with the observed intensity (the
    second wave finds its A blocks in the L2, and the first wave's stores land between), within its bounds;
    the GEMM never starves (within 5% of the GEMM alone) and ends before T3's, whose communication is not
    held back."""
    from archsim.systems.t3.params import load_params
    from archsim.systems.t3.shapes import SublayerShape
    from archsim.systems.t3.sim import CONFIGS, simulate_sublayer

    p = load_params(overrides={"memory.channels": 4, "memory.mapping": SMALL_MAPPING, "mca.threshold": "dynamic",
                               "gpu.cus": 8})
    shape = SublayerShape("fc2_fwd", tokens=256, k=1024, h=1024)
    runs = {c: simulate_sublayer(p, shape, 4, c, devices="one") for c in CONFIGS}
    mca = runs["t3-mca"]
    traj = mca.extra["threshold_trajectory"]
    assert len(traj) == 2 * shape.k // p.gpu.k_step
    assert traj[0] == mca.threshold and len(set(traj)) >= 3
    assert 1 <= min(traj) and max(traj) <= p.controller["read_queue"] + p.controller["write_queue"]
    assert mca.gemm_cycles <= 1.05 * runs["sequential"].gemm_cycles
    assert mca.gemm_cycles < runs["t3"].gemm_cycles


def test_t3_isa_names_the_standard_commands_and_encodes_a_simulated_stream(spec):
    """isa/t3.yaml: every instruction but NOP is a command of the hbm2_nmc standard (the engine times them by
    name), and the command log of an rmw run encodes and decodes losslessly."""
    from archsim import isa as isa_mod

    t3isa = isa_mod.load("t3")
    assert set(t3isa.mnemonics) - {"NOP"} == {c.name for c in spec.commands}
    ms = MemorySystem(spec, {"refresh": "none", "row_policy": "closed"}, log=True)
    ms.enqueue_requests(ms.add_port(), 0, [3, 3, 20], [7, 7, 9], [1, 2, 31], KIND_RMW, 0)
    ms.run()
    log = ms.command_log()
    assert {"NMC_ADD", "NMC_ADDA"} <= set(log["command"])
    for r in log.itertuples():
        bank = r.pseudochannel * 16 + r.bankgroup * 4 + r.bank          # the ISA's bank field
        fields = [f.name for f in t3isa.instruction(r.command).fields]
        vals = {"bank": bank, "row": r.row, "col": r.column, "pc": r.pseudochannel}
        word = t3isa.encode(r.command, **{f: vals[f] for f in fields})
        back = t3isa.decode(word)
        assert back.mnemonic == r.command and all(back.fields[f] == vals[f] for f in fields)
