"""The fast channel engine (archsim.engine.memory.MemorySystem) against the naive reference scheduler
(archsim.engine.reference.ReferenceController) on random small cases (tests/engine_cases.py): identical
command logs, request done cycles and completions, and every log accepted by the independent checker.

Mutation tests: with one constraint row group removed from the spec given to an engine, a case where that
row binds makes the engine issue early, and the checker (full spec) must name the row -- the checker is not
blind to it and the engine's tables carry it.

Tests that need the fast engine skip until it exists; the harness itself (case generator, comparison, the
mutation search) also runs the reference against itself so it is exercised now.

Seeds: ARCHSIM_ENGINE_SEEDS (default 200: the fast engine spends ~0.2 s on each small case today) for test_engine_matches_reference; `-m slow` adds a sweep of
10,000 more.
"""
from __future__ import annotations

import dataclasses
import os
from functools import cache, partial

import numpy as np
import pandas as pd
import pytest
from engine_cases import DRAWN, VARIANTS, _spec, case_spec, describe, random_case, run_case
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from archsim.dram.checker import check_log
from archsim.engine.reference import SEG_END, SEG_START, ReferenceController

SEEDS = int(os.environ.get("ARCHSIM_ENGINE_SEEDS", "200"))   # per run of test_engine_matches_reference
CHUNK = 100


@pytest.fixture(scope="module")
def fast_engine():
    return pytest.importorskip("archsim.engine.memory").MemorySystem


def _norm(log: pd.DataFrame) -> pd.DataFrame:
    cols = ["cycle", "command", "channel", "pseudochannel", "rank", "bankgroup", "bank", "row", "column", "source"]
    out = log[cols].reset_index(drop=True).copy()
    for c in cols:
        out[c] = out[c].astype(str) if c in ("command", "source") else out[c].astype(np.int64)
    return out


def assert_same(case: dict, a: dict, b: dict, names: tuple[str, str] = ("fast", "reference")) -> None:
    la, lb = _norm(a["log"]), _norm(b["log"])
    n = min(len(la), len(lb))
    diff = np.nonzero((la.iloc[:n].to_numpy() != lb.iloc[:n].to_numpy()).any(axis=1))[0]
    first = int(diff[0]) if len(diff) else (n if len(la) != len(lb) else -1)
    if first >= 0:
        lo = max(0, first - 5)
        raise AssertionError(
            f"command logs differ at row {first} ({len(la)} vs {len(lb)} rows); {describe(case)}\n"
            f"{names[0]}:\n{la.iloc[lo:first + 1].to_string()}\n{names[1]}:\n{lb.iloc[lo:first + 1].to_string()}")
    bad = np.nonzero(np.asarray(a["done"]) != np.asarray(b["done"]))[0]
    assert len(bad) == 0, (f"request done cycles differ (request {bad[0]}: {a['done'][bad[0]]} vs "
                           f"{b['done'][bad[0]]}); {describe(case)}")
    assert list(map(tuple, a["completions"])) == list(map(tuple, b["completions"])), f"completions differ; {describe(case)}"
    assert np.array_equal(a["class"], b["class"]), f"request classes differ; {describe(case)}"


def assert_clean(case: dict, out: dict, who: str) -> None:
    v = check_log(case_spec(case), out["log"])
    assert not v, f"{who}: {len(v)} violation(s); {describe(case)}\n" + "\n".join(str(x) for x in v[:5])
    assert (np.asarray(out["done"]) >= 0).all(), f"{who}: requests left undone; {describe(case)}"


# ------------------------------------------------------------------------------------------------
# the harness against the reference itself (runs now)


@pytest.mark.parametrize("chunk", range(3))
def test_reference_logs_are_legal_and_deterministic(chunk):
    for seed in range(chunk * 25, chunk * 25 + 25):
        case = random_case(seed)
        a = run_case(ReferenceController, case)
        assert_clean(case, a, "reference")
        assert_same(case, a, run_case(ReferenceController, case), ("reference", "reference again"))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1))
def test_reference_logs_are_legal_hypothesis(seed):
    case = random_case(seed)
    assert_clean(case, run_case(ReferenceController, case), "reference")


class _NoSkip(ReferenceController):
    """The reference without its idle-cycle skipping: one step per cycle, always."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, skip_idle=False, **kwargs)


@pytest.mark.parametrize("chunk", range(2))
def test_idle_skipping_changes_nothing(chunk):
    for seed in range(1000 + chunk * 15, 1000 + chunk * 15 + 15):
        case = random_case(seed)
        assert_same(case, run_case(ReferenceController, case), run_case(_NoSkip, case), ("skipping", "per-cycle"))


def test_generator_covers_the_space():
    """The random cases reach every preset variant, refresh mode, arbitration policy and source mix, and
    exercise refresh, backpressure (full queues) and rmw."""
    seen = {"variant": set(), "refresh": set(), "arbitration": set(), "mix": set()}
    for seed in range(300):
        c = random_case(seed)
        seen["variant"].add((c["preset"], c["overrides"].get("org.ranks", 1)))
        seen["refresh"].add(c["controller"]["refresh"])
        seen["arbitration"].add(c["arbitration"])
        seen["mix"].add(tuple(sorted(s["kind"] for s in c["sources"])))
    assert len(seen["variant"]) == DRAWN
    assert seen["refresh"] == {"allbank", "perbank", "none"}
    assert seen["arbitration"] == {"frfcfs", "priority", "blocked", "threshold"}
    assert {("rw",), ("stream",), ("rw", "stream"), ("rw", "rw")} <= seen["mix"]
    logs = [run_case(ReferenceController, random_case(s))["log"] for s in range(40)]
    sources = pd.concat([lg["source"] for lg in logs])
    assert (sources == "refresh").sum() > 0
    assert pd.concat([lg["command"] for lg in logs]).isin(["MACAB", "COMP", "PACT", "RDRES"]).any()


# ------------------------------------------------------------------------------------------------
# the fast engine against the reference (skips until archsim.engine.channel exists)


@pytest.mark.parametrize("chunk", range(max(1, SEEDS // CHUNK)))
def test_engine_matches_reference(fast_engine, chunk):
    for seed in range(chunk * CHUNK, (chunk + 1) * CHUNK):
        case = random_case(seed)
        fast, ref = run_case(fast_engine, case), run_case(ReferenceController, case)
        assert_same(case, fast, ref)
        assert_clean(case, fast, "fast engine")


# issue 39's standards, each on its own seeds (random_case pins the variant)
@pytest.mark.parametrize("variant", range(7, len(VARIANTS)), ids=lambda v: VARIANTS[v][0])
def test_engine_matches_reference_issue39_standards(fast_engine, variant):
    for seed in range(40):
        case = random_case(500_000 + seed, variant=variant)
        fast, ref = run_case(fast_engine, case), run_case(ReferenceController, case)
        assert_same(case, fast, ref)
        assert_clean(case, fast, "fast engine")


# seeds that once failed, kept in the default run: 101633 (an all-bank refresh of one pseudochannel closing the
# PIM buffers with the channel-wide PPREA while an rmw pinned a bank of the other pseudochannel: the kernel checked
# pins on the refresh node's banks only, the reference on the banks the close closes); 13427 (found by hypothesis:
# HBM2-NMC, a stream beside an rw source under `blocked`; the stream ended a segment at 95 with its next segment
# queued and the rw source idle, so it was chosen again, but the kernel kept its SEG_END mark and let the rw
# source's request of cycle 104 take the channel mid-segment: test_blocked_stream_chosen_again_keeps_the_channel)
REGRESSION_SEEDS = (101633, 13427)


@pytest.mark.parametrize("seed", REGRESSION_SEEDS)
def test_engine_matches_reference_regressions(fast_engine, seed):
    case = random_case(seed)
    fast, ref = run_case(fast_engine, case), run_case(ReferenceController, case)
    assert_same(case, fast, ref)
    assert_clean(case, fast, "fast engine")


@pytest.mark.slow
@pytest.mark.parametrize("chunk", range(100))
def test_engine_matches_reference_sweep(fast_engine, chunk):
    for seed in range(100_000 + chunk * CHUNK, 100_000 + (chunk + 1) * CHUNK):
        case = random_case(seed)
        fast, ref = run_case(fast_engine, case), run_case(ReferenceController, case)
        assert_same(case, fast, ref)
        assert_clean(case, fast, "fast engine")


# ------------------------------------------------------------------------------------------------
# kernel variants (archsim.engine.channel.KERNEL_VARIANTS): the same source compiled again for a common device set
# with its controller fields as constants; each must match the reference and the general kernel exactly


def _dual_variant() -> int:
    return next(v for v, (preset, ov) in enumerate(VARIANTS) if len(_spec(preset, ov).row_buffers) == 2)


def variant_case(kernel: str, seed: int) -> dict:
    """A random case the `kernel` variant runs. lean: one rw source, FR-FCFS, a standard with one row buffer
    (reads, writes, rmw; every refresh mode). pim_dual: one stream and one rw source on a dual-row-buffer
    standard under priority arbitration. Neither has a starvation cap; lean has active-buffer pins in half its
    cases, pim_dual none. pim_dual_deep: pim_dual's cases with read and write queues 300 deep (past the kernel's
    deep-window threshold, so every request is in the window at once: the age-ordered scan). pim_blocked_deep: one
    stream and one rw source on a standard with one row buffer under blocked arbitration (the generator gives the
    stream a bank of its own there), queues 300 deep (NeuPIMs' NPU+PIM baseline). stream: one stream
    and no rw source (so no port), any standard, arbitration, cap and refresh mode. (Two of the generator's random
    streams in one channel contend for the same rows until max_cycles, in the general kernel as well.)"""
    rng = np.random.default_rng(seed)
    if kernel == "stream":
        return random_case(seed, n_rw=0, n_stream=1)
    single = [v for v, (preset, ov) in enumerate(VARIANTS) if len(_spec(preset, ov).row_buffers) == 1]
    if kernel == "lean":
        case = random_case(seed, variant=int(rng.choice(single)), n_rw=1, n_stream=0)
        case["arbitration"] = "frfcfs"
    elif kernel == "pim_blocked_deep":
        draw = seed
        while True:       # blocked as the generator drew it (so the stream has its own bank), the rw source kept
            pick = int(np.random.default_rng(draw).choice(single))
            case = random_case(draw, variant=pick, n_rw=1, n_stream=1)
            if case["arbitration"] == "blocked" and sorted(x["kind"] for x in case["sources"]) == ["rw", "stream"]:
                break
            draw += 1_000_000
        case["controller"]["read_queue"] = case["controller"]["write_queue"] = 300
    else:
        draw = seed
        while True:       # (the generator drops the rw source of a `blocked` case on an all-bank stream standard)
            case = random_case(draw, variant=_dual_variant(), n_rw=1, n_stream=1)
            if sorted(x["kind"] for x in case["sources"]) == ["rw", "stream"]:
                break
            draw += 1_000_000
        case["arbitration"] = "priority"
        if kernel == "pim_dual_deep":
            case["controller"]["read_queue"] = case["controller"]["write_queue"] = 300
    case["starvation_cap"] = 0
    # (lean: the active buffer is a runtime field, on in half the cases)
    case["controller"]["active_buffer"] = kernel == "lean" and bool(rng.random() < 0.5)
    return case


VARIANT_SEEDS = max(1, SEEDS // 2)


def test_kernel_variant_is_chosen_only_where_it_applies(fast_engine):
    from archsim.errors import ConfigError

    spec = _spec("HBM2_2Gbps_PC", (("org.channels", 1),))
    dual = _spec(*VARIANTS[_dual_variant()])
    pim_npu = [{"name": "pim", "kind": "stream"}, {"name": "npu", "kind": "rw"}]
    assert fast_engine(spec).kernel == "lean"
    assert fast_engine(spec).S.variant.dtype == np.uint8
    assert fast_engine(spec, kernel="general").kernel == "general"
    assert fast_engine(dual, sources=pim_npu, arbitration="priority").kernel == "pim_dual"
    deep = {"read_queue": 257, "write_queue": 32}              # a queue deeper than COARSE_FIRST_QUEUE: a deep window
    assert fast_engine(dual, deep, sources=pim_npu, arbitration="priority").kernel == "pim_dual_deep"
    assert fast_engine(dual, deep, sources=pim_npu, arbitration="priority").S.variant.dtype == np.int32
    # only that variant's state carries the scan order's fields (each field costs every kernel call: state.py)
    from archsim.engine import state
    assert type(fast_engine(dual, deep, sources=pim_npu, arbitration="priority").S) is state.DeepState
    assert type(fast_engine(dual, sources=pim_npu, arbitration="priority").S) is state.State
    assert type(fast_engine(spec, deep).S) is state.State                      # lean: the unordered scan
    assert state.DeepState._fields == state.State._fields + tuple(f.name for f in state.DEEP_FIELDS)
    assert fast_engine(dual, {"read_queue": 256}, sources=pim_npu, arbitration="priority").kernel == "pim_dual"
    # NeuPIMs' NPU+PIM baseline: one row buffer, PIM blocking the NPU, a deep window
    blocked_deep = fast_engine(spec, deep, sources=pim_npu, arbitration="blocked")
    assert blocked_deep.kernel == "pim_blocked_deep" and type(blocked_deep.S) is state.DeepState
    assert fast_engine(spec, sources=pim_npu, arbitration="blocked").kernel == "general"      # a shallow window
    assert fast_engine(dual, deep, sources=pim_npu, arbitration="blocked").kernel == "general"  # two row buffers
    streams = [{"name": "pim0", "kind": "stream"}, {"name": "pim1", "kind": "stream"}]
    for kw in ({}, {"arbitration": "blocked"}, {"starvation_cap": 10}, {"active_buffer": True}):
        assert fast_engine(dual, sources=streams[:1], **kw).kernel == "stream", kw
        assert fast_engine(spec, sources=streams, **kw).kernel == "stream", kw
    assert fast_engine(spec, sources=streams, kernel="general").kernel == "general"
    with pytest.raises(ConfigError, match="ports feed rw sources"):      # (so a stream-only set has no port)
        fast_engine(spec, sources=streams).add_port("pim0")
    two = [{"name": "a", "kind": "rw"}, {"name": "b", "kind": "stream"}]
    for kw in ({"sources": two}, {"arbitration": "priority"}, {"starvation_cap": 10}):
        assert fast_engine(spec, **kw).kernel == "general", kw
    # the reference simulators' conventions on one row buffer: lean (their keys are runtime fields there)
    for kw in ({"active_buffer": True}, {"controller": {"convention": "dramsim3"}},
               {"controller": {"convention": "ramulator2"}}):
        assert fast_engine(spec, **kw).kernel == "lean", kw
    assert fast_engine(dual).kernel == "general"                                  # two buffers, one source
    assert fast_engine(dual, sources=pim_npu, arbitration="blocked").kernel == "general"
    with pytest.raises(ConfigError, match="allowed: auto, general$"):
        fast_engine(spec, sources=two, kernel="lean")
    with pytest.raises(ConfigError, match="kernel"):
        fast_engine(spec, kernel="fastest")


@pytest.mark.parametrize("kernel", ["lean", "pim_dual", "pim_dual_deep", "pim_blocked_deep", "stream"])
@pytest.mark.parametrize("chunk", range(max(1, VARIANT_SEEDS // 50)))
def test_kernel_variant_matches_reference_and_general_kernel(fast_engine, kernel, chunk):
    general = partial(fast_engine, kernel="general")
    for seed in range(500_000 + chunk * 50, 500_000 + (chunk + 1) * 50):
        case = variant_case(kernel, seed)
        fast, ref = run_case(fast_engine, case), run_case(ReferenceController, case)
        assert fast["kernel"] == kernel, describe(case)
        assert_same(case, fast, ref)
        assert_clean(case, fast, f"{kernel} kernel")
        gen = run_case(general, case)
        assert gen["kernel"] == "general"
        assert_same(case, fast, gen, (kernel, "general"))


# derandomized: the same 60 seeds on every run, so a red suite is reproducible (a random draw found the divergence
# below on one of three full runs of 2026-11-28); new seeds are explored by running with --hypothesis-seed
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(st.integers(0, 2**32 - 1))
def test_engine_matches_reference_hypothesis(fast_engine, seed):
    case = random_case(seed)
    assert_same(case, run_case(fast_engine, case), run_case(ReferenceController, case))


def _blocked_case(second: str, arrive: int) -> dict:
    """HBM2, one channel, `blocked`: stream s0 has two segments on bank 0 (ACT, RD, PRE with SEG_END each), all
    queued at cycle 0; the second source (an rw source with one read, or a stream with one segment) gets its
    work on bank 4 at `arrive`."""
    preset, ov = "HBM2_2Gbps_PC", {"org.channels": 1}
    spec = _spec(preset, tuple(ov.items()))

    def stream(name, bank, segments, at):
        cmds = [c for r in range(segments) for c in (("ACT", r, -1, SEG_START), ("RD", r, 0, 0), ("PRE", -1, -1, SEG_END))]
        z = np.zeros(len(cmds), dtype=np.int64)
        return {"source": name, "channel": z, "cmd": np.array([spec.cmd(c[0]) for c in cmds]), "bank": z + bank,
                "row": np.array([c[1] for c in cmds]), "column": np.array([c[2] for c in cmds]),
                "flags": np.array([c[3] for c in cmds]), "est": z, "tag": z - 1, "at": z + at}

    one = np.zeros(1, dtype=np.int64)
    streams = [stream("s0", 0, 2, 0)]
    ports, requests = [], []
    if second == "rw":
        ports = [{"source": "rw", "width": 1}]
        requests = [{"port": 0, "channel": one, "bank": one + 4, "row": one, "column": one, "kind": one,
                     "arrive": one + arrive, "tag": one - 1}]
    else:
        streams.append(stream("s1", 4, 1, arrive))
    return {"seed": -1, "preset": preset, "overrides": ov, "controller": {"refresh": "none"},
            "sources": [{"name": "s0", "kind": "stream"}, {"name": second if second == "rw" else "s1",
                                                           "kind": second}],
            "arbitration": "blocked", "starvation_cap": 0, "threshold": 1, "stream_refresh": "split",
            "alu_latency": 4, "ports": ports, "requests": requests, "streams": streams}


@pytest.mark.parametrize("second", ["rw", "stream"])
def test_blocked_stream_chosen_again_keeps_the_channel(fast_engine, second):
    """Clarification 11: a stream that ends a segment (its PRE with SEG_END at p) while its next segment is queued
    and no other source has work is chosen again at p + 1 and starts a new segment, which it keeps to its end.
    So work of another source arriving at p + 1 takes the channel at that boundary (its first command before the
    stream's next ACT), work arriving at p + 2 waits until the stream's second segment has ended (the kernel
    kept the SEG_END mark of a stream chosen again and let it through: seed 13427). Runs the general kernel (rw)
    and the `stream` variant (two streams)."""
    alone = run_case(ReferenceController, _blocked_case(second, 10_000))["log"]
    own = alone[alone["source"] == "s0"]
    p = int(own[own["command"] == "PRE"]["cycle"].iloc[0])
    act2 = int(own[own["command"] == "ACT"]["cycle"].iloc[1])
    assert act2 > p + 2, "the second ACT must still wait for tRP at p + 2 for the case to test anything"
    for arrive, first_before_act2 in ((p + 1, True), (p + 2, False)):
        case = _blocked_case(second, arrive)
        fast, ref = run_case(fast_engine, case), run_case(ReferenceController, case)
        assert fast["kernel"] == ("general" if second == "rw" else "stream")
        assert_same(case, fast, ref)
        assert_clean(case, fast, "fast engine")
        log = fast["log"]
        other = log[log["source"] != "s0"]["cycle"]
        s0 = log[log["source"] == "s0"]
        assert (int(other.min()) < act2) == first_before_act2, (arrive, log.to_string())
        if not first_before_act2:
            assert int(other.min()) > int(s0["cycle"].max()), log.to_string()


# ------------------------------------------------------------------------------------------------
# mutation tests: remove one row group from the engine's spec; the checker must catch the early issue


MUTATION_VARIANTS = {"DDR4x2": 1, "HBM3": 3, "AiM": 4, "DualRB": 5}
POOL = 100   # candidate seeds per variant


def _group_rules(spec) -> dict[int, list[str]]:
    """Violation text prefixes of each group ("level: P -> F")."""
    out: dict[int, list[str]] = {}
    for c in spec.constraints:
        lv = c["level_name"] + (" sibling" if c["sibling"] else "")
        out.setdefault(c["group"], []).append(f"{lv}: {c['prev_name']} -> {c['next_name']}")
    return out


def _pool_case(variant: int, i: int) -> dict:
    return random_case(50_000 + 1000 * variant + i, variant=variant, refresh=("allbank", "perbank", "none")[i % 3])


@cache
def _pool_runs(variant: int) -> tuple[dict[int, list[int]], dict[int, pd.DataFrame]]:
    """The reference's logs of the pool cases of this variant, and for each group the pool cases where the
    group binds exactly (checking a log with every latency + 1 flags exactly the rows with gap == latency)."""
    tight: dict[int, list[int]] = {}
    logs: dict[int, pd.DataFrame] = {}
    for i in range(POOL):
        case = _pool_case(variant, i)
        spec = case_spec(case)
        logs[i] = log = run_case(ReferenceController, case)["log"]
        plus = dataclasses.replace(spec, constraints=[{**c, "latency": c["latency"] + 1} for c in spec.constraints])
        hit = {_rule_key(v.rule) for v in check_log(plus, log) if v.kind == "timing"}
        for g, texts in _group_rules(spec).items():
            if hit & set(texts):
                tight.setdefault(g, []).append(i)
    return tight, logs


def _rule_key(rule: str) -> str:
    return rule.rsplit(" >=", 1)[0].split(" (window")[0]


def _mutated(case: dict, group: int):
    full = case_spec(case)
    return full, dataclasses.replace(full, constraints=[c for c in full.constraints if c["group"] != group])


_MUTATED_REF_LOGS: dict[tuple[int, int, int], pd.DataFrame] = {}


@cache
def _exercising(variant: int, group: int) -> tuple[int, ...]:
    """Pool cases where removing the group changes the reference's log: there the group is the only thing
    holding some command back. (In such a case the first command that moves violates the group, so the
    checker must see it.)"""
    tight, logs = _pool_runs(variant)
    out = []
    for i in tight.get(group, [])[:8]:
        case = _pool_case(variant, i)
        _, mutated = _mutated(case, group)
        log = run_case(ReferenceController, case, spec=mutated)["log"]
        if not _norm(log).equals(_norm(logs[i])):
            _MUTATED_REF_LOGS[(variant, group, i)] = log
            out.append(i)
            if len(out) == 3:
                break
    return tuple(out)


def _mutation_cases():
    """Row groups whose removal changes some generated case's schedule (the others cannot be caught by any
    checker run on these cases: test_rows_that_cannot_bind_change_nothing verifies the static reasons,
    test_mutation_coverage bounds how many groups no case exercises)."""
    cases = []
    for name, v in MUTATION_VARIANTS.items():
        preset, ov = VARIANTS[v]
        spec = _spec(preset, ov)
        for g in sorted({c["group"] for c in spec.constraints}):
            if _why_not_binding(spec, g) or not _exercising(v, g):
                continue
            rows = [c for c in spec.constraints if c["group"] == g]
            rid = f"{name}:g{g}:{rows[0]['level_name']}:{rows[0]['prev_name']}->{rows[0]['next_name']}"
            cases.append(pytest.param(v, g, id=rid))
    return cases


def _why_not_binding(spec, g: int) -> str | None:
    """Rows that provably cannot bind in these cases, or whose commands the cases never issue."""
    rows = [c for c in spec.constraints if c["group"] == g]
    t = spec.timing
    names = {c["prev_name"] for c in rows} | {c["next_name"] for c in rows}
    r = rows[0]
    buses = {spec.commands[c["prev"]].bus for c in rows} | {spec.commands[c["next"]].bus for c in rows}
    if max(c["latency"] for c in rows) <= 1 and (spec.command_bus == "single" or len(buses) == 1):
        return "latency 1 between commands of one command bus: the bus already spaces them a cycle apart"
    if r["window"] == 4 and 4 * t["nRRDS"] >= t["nFAW"] and names <= {"ACT", "PACT"}:
        return "4 activates are >= 4 x nRRDS apart, which is not less than nFAW here"
    others = [c for c in spec.constraints if c["group"] != g]
    dominated = []
    for c in rows:
        # another row on the same pair at this or a wider level (every same-node pair is also a same-node
        # pair there) with at least this latency always binds too, so removing this one changes nothing
        anc, lv = set(), c["level"]
        while lv >= 0:
            anc.add(lv)
            lv = spec.level_parent[lv]
        dominated.append(any(o["prev"] == c["prev"] and o["next"] == c["next"] and o["window"] == 1 and
                             not o["sibling"] and not c["sibling"] and c["window"] == 1 and o["level"] in anc
                             and o["latency"] >= c["latency"] for o in others))
    if all(dominated):
        return "another row on the same commands at the same or a wider level has at least this latency"
    for c in rows:
        # pairs sharing the level's node share or are siblings at a child level; rows there cover both
        kids = [k for k in range(len(spec.levels)) if spec.level_parent[k] == c["level"]]
        if c["sibling"] or c["window"] != 1 or not any(
                any(not o["sibling"] and o["level"] == k and o["latency"] >= c["latency"] for o in same)
                and any(o["sibling"] and o["level"] == k and o["latency"] >= c["latency"] for o in same)
                for k in kids for same in [[o for o in others if o["prev"] == c["prev"] and o["next"] == c["next"]
                                            and o["window"] == 1]]):
            return None
    if rows:
        return ("rows one level down cover both the same and the sibling node with at least this latency "
                "(e.g. nBL vs nCCDS and the sibling nCCDR)")
    return None


@pytest.mark.parametrize("engine", ["reference", "fast"])
@pytest.mark.parametrize("variant,group", _mutation_cases())
def test_removed_row_is_caught(engine, variant, group, request):
    engine_cls = ReferenceController if engine == "reference" else request.getfixturevalue("fast_engine")
    preset, ov = VARIANTS[variant]
    spec = _spec(preset, ov)
    texts = _group_rules(spec)[group]
    cases = _exercising(variant, group)
    assert cases
    for i in cases:
        case = _pool_case(variant, i)
        full, mutated = _mutated(case, group)
        if engine == "reference":
            log = _MUTATED_REF_LOGS[(variant, group, i)]
        else:
            log = run_case(engine_cls, case, spec=mutated)["log"]
        found = [v for v in check_log(full, log) if v.kind == "timing" and _rule_key(v.rule) in texts]
        assert found, (f"removing group {group} ({texts}) from the {engine} engine's spec went unnoticed; "
                       f"{describe(case)}")


def test_rows_that_cannot_bind_change_nothing():
    """The static reasons `_why_not_binding` gives hold on the case pool: removing such a row changes no
    generated schedule (the reference scheduler's log is identical)."""
    claimed = 0
    for v in MUTATION_VARIANTS.values():
        spec = _spec(*VARIANTS[v])
        for g in sorted({c["group"] for c in spec.constraints}):
            why = _why_not_binding(spec, g)
            if why:
                claimed += 1
                assert not _exercising(v, g), f"variant {v} group {g}: claimed '{why}' but a case changes"
    assert claimed > 0


def test_mutation_coverage():
    """Most row groups of the mutation variants are bound by some generated case (so the mutation tests
    test something); the rest are listed with why not."""
    missing = []
    total = 0
    for name, v in MUTATION_VARIANTS.items():
        spec = _spec(*VARIANTS[v])
        for g in sorted({c["group"] for c in spec.constraints}):
            total += 1
            if not _why_not_binding(spec, g) and not _exercising(v, g):
                missing.append(f"{name}:g{g}:" + ",".join(sorted(set(_group_rules(spec)[g]))))
    assert len(missing) <= total // 3, f"{len(missing)} of {total}:\n" + "\n".join(missing)


@pytest.mark.parametrize("refresh", ["none", "allbank"])
def test_open_onto_an_open_buffer_uses_its_narrowest_close(fast_engine, refresh):
    """A stream that opens a new PIM row set while another is open gets the buffer's narrowest close inserted
    before each G_ACT (docs/channel-engine.md 1, "bank-scope close") instead of deadlocking: NeuPIMs' PIM buffer
    has a per-bank PIM_PREb (as its code closes rows bank by bank), so one per bank of the G_ACT's group, not the
    channel-wide PIM_PRE; kernel and reference agree and the log is legal."""
    from archsim.dram.spec import load_spec

    spec = load_spec("NeuPIMs_HBM2_Dual", overrides={"org.channels": 1})
    groups = list(range(0, spec.banks_per_channel, spec.counts[-1]))     # one bank of every bank group
    names, bank, row = [], [], []
    for r in (5, 6):                  # open row r in every PIM buffer (COMP is channel-wide), compute, read out
        names += ["G_ACT"] * len(groups) + ["COMP", "READRES"]
        bank += groups + [0, 0]
        row += [r] * (len(groups) + 2)
    names.append("PIM_PRE")
    bank.append(0)
    row.append(-1)
    cmd = np.array([spec.cmd(n) for n in names], dtype=np.int64)
    row = np.array(row, dtype=np.int64)
    z = np.zeros(len(cmd), dtype=np.int64)
    case = {"seed": -1, "preset": "NeuPIMs_HBM2_Dual", "overrides": {"org.channels": 1},
            "controller": {"refresh": refresh}, "sources": [{"name": "pim", "kind": "stream"}],
            "arbitration": "frfcfs", "starvation_cap": 0, "threshold": 1, "stream_refresh": "split",
            "alu_latency": 4, "ports": [], "requests": [],
            "streams": [{"source": "pim", "channel": z, "cmd": cmd, "bank": np.array(bank), "row": row, "column": z - 1,
                         "flags": z, "est": z, "tag": z - 1, "at": z}]}
    a = run_case(fast_engine, case)
    b = run_case(ReferenceController, case)
    assert_same(case, a, b)
    assert_clean(case, a, "fast")
    issued = [c for c in a["log"]["command"] if c not in ("REFab", "PREA")]
    k, per_group = len(groups), spec.counts[-1]
    assert issued[k:] == (["COMP", "READRES"] + (["PIM_PREb"] * per_group + ["G_ACT"]) * k
                          + ["COMP", "READRES", "PIM_PRE"]), issued


def test_engine_matches_reference_without_stream_reservations(fast_engine):
    """controller.stream_reserve: false (NeuPIMs' NewtonSim controller reserves no bank for PIM): a stream's
    waiting open no longer keeps rw sources out of its banks, in the kernel as in the reference; and the key
    changes what some of these cases issue (it is not ignored)."""
    checked = changed = 0
    for seed in range(700_000, 700_400):
        case = random_case(seed, n_rw=1, n_stream=1)
        if case["arbitration"] == "blocked":
            continue            # blocked arbitration ignores reservations anyway
        reserved = run_case(fast_engine, case)
        case["controller"]["stream_reserve"] = False
        fast, ref = run_case(fast_engine, case), run_case(ReferenceController, case)
        assert_same(case, fast, ref)
        assert_clean(case, fast, "fast engine")
        changed += not _norm(fast["log"]).equals(_norm(reserved["log"]))
        checked += 1
        if checked == 60:
            break
    assert checked == 60 and changed > 0, (checked, changed)


def test_engine_matches_reference_with_a_deep_window(fast_engine):
    """Queues deeper than the kernel's coarse-cells threshold (256 entries: under NeuPIMs' 4096-entry window the
    rw scan checks a candidate's two coarsest timing cells first, issue 38) issue exactly what the reference does:
    the random cases with their read and write queues made 300 deep, every request then in the window at once."""
    for seed in range(800_000, 800_060):
        case = random_case(seed)
        case["controller"]["read_queue"] = case["controller"]["write_queue"] = 300
        fast, ref = run_case(fast_engine, case), run_case(ReferenceController, case)
        assert_same(case, fast, ref)
        assert_clean(case, fast, "fast engine")
