"""Exact multi-command steps (docs/channel-engine.md, "Runs"): a stream's run of column commands issued in one
kernel step gives the same results as one command per step, on random multi-channel cases (stream and rw
sources, ports, refresh, tagged and untagged items, the log on), in each kernel variant that runs streams; and
runs do happen on them (the kernel counts the commands runs issue)."""
from __future__ import annotations

import numpy as np
import pytest

from archsim.dram.spec import load_spec
from archsim.engine import channel
from archsim.engine.memory import MemorySystem

PRESETS = ("GDDR6_AiM_16Gbps", "HBM2_2Gbps_DualRB")


def _streams(rng, spec, ms, ch, n_ops):
    """A PIM-like program on one channel's stream: all-bank (or bank) opens, runs of column commands on the
    open rows, closes; some items tagged."""
    B = ms.tables.banks
    opens = [i for i, c in enumerate(spec.commands) if c.effect == "open"]
    cols = [i for i, c in enumerate(spec.commands) if c.bus == "column" and c.effect in ("read", "write", "compute")]
    closes = [i for i, c in enumerate(spec.commands) if c.effect == "close"]
    cmd, bank, row = [], [], []
    for _ in range(n_ops):
        o = int(rng.choice(opens))
        b = int(rng.integers(B))
        r = int(rng.integers(64))
        buf = spec.commands[o].buffer
        o_cmd = spec.commands[o]
        same = [c for c in cols if spec.commands[c].buffer == buf and spec.commands[c].scope == o_cmd.scope]
        if not same:
            continue
        cmd.append(o), bank.append(b), row.append(r)
        c = int(rng.choice(same))
        for _ in range(int(rng.integers(1, 24))):
            cmd.append(c), bank.append(b), row.append(r)
        cl = [x for x in closes if spec.commands[x].buffer == buf and spec.commands[x].scope <= o_cmd.scope]
        cmd.append(int(rng.choice(cl))), bank.append(b), row.append(-1)
    return (np.array(cmd, dtype=np.int64), ch * B + np.array(bank, dtype=np.int64), np.array(row, dtype=np.int64))


def _run(preset, seed, runs):
    rng = np.random.default_rng(seed)
    spec = load_spec(preset, overrides={"org.channels": int(rng.choice([1, 2, 4]))})
    # an rw source beside the stream only where the stream keeps to its own row buffer (docs/channel-engine.md,
    # clarification 16: an rw source never closes a row a stream opened)
    with_rw = preset == "HBM2_2Gbps_DualRB" and bool(rng.integers(2))
    sources = [{"name": "pim", "kind": "stream"}] + ([{"name": "npu", "kind": "rw"}] if with_rw else [])
    arb = str(rng.choice(["frfcfs", "priority"]))
    ctrl = {"refresh": str(rng.choice(["none", "allbank"]))}
    ms = MemorySystem(spec, ctrl, sources=sources, arbitration=arb, log=True,
                      stream_refresh=str(rng.choice(["split", "wait"])), requests=4096, stream_capacity=4096,
                      max_cycles=1 << 20)
    ms.cf[channel.CF_RUNS] = 1 if runs else 0
    tagged = bool(rng.integers(2))
    B = ms.tables.banks
    for ch in range(spec.channels):
        for k in range(2):
            at = int(rng.integers(0, 400)) * k
            cmd, bank, row = _streams(rng, spec, ms, ch, int(rng.integers(1, 5)))
            tag = np.where(rng.random(cmd.size) < 0.1, rng.integers(0, 8, cmd.size), -1) if tagged else -1
            ms.enqueue_stream("pim", ch, cmd, bank, row=row, tag=tag, at=at)
    if with_rw:
        p = ms.add_port("npu", 1)
        n = int(rng.integers(10, 200))
        ch = rng.integers(0, spec.channels, n)
        ms.enqueue_requests(p, ch, ch * B + rng.integers(0, B, n), rng.integers(0, 64, n), rng.integers(0, 32, n),
                            rng.integers(0, 2, n), np.sort(rng.integers(0, 3000, n)), tag=-1)
    done = []
    while True:
        st = ms.advance(channel.RUN_TO_END)
        if st == channel.ST_IDLE:
            break
        done.append(ms.drain() if hasattr(ms, "drain") else None)
    S = ms.S
    n = int(S.n_log[0])
    return {"log": np.stack([S.log_clk[:n], S.log_cmd[:n], S.log_bank[:n], S.log_row[:n], S.log_col[:n],
                             S.log_src[:n]]),
            "ring": np.stack([S.c_tag[:S.n_comp[0]], S.c_done[:S.n_comp[0]], S.c_id[:S.n_comp[0]]]),
            "counts": S.cmd_count.copy(), "progress": S.progress[:2].copy(), "clock": int(S.clock[0]),
            "maxdone": S.s_maxdone.copy(), "r_done": S.r_done.copy(), "pre": S.pre_cycles.copy(),
            "done": repr(done), "runs": int(S.run_cmds.sum())}


RUN_CMDS: list[int] = []


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("seed", range(6))
def test_runs_bit_identical(preset, seed):
    on, off = _run(preset, seed, True), _run(preset, seed, False)
    assert off.pop("runs") == 0
    RUN_CMDS.append(on.pop("runs"))
    for k in off:
        assert np.array_equal(np.asarray(on[k]), np.asarray(off[k])) if not isinstance(off[k], str) \
            else on[k] == off[k], k


def test_runs_happen():
    """The cases above exercise runs: with runs on, some commands were issued by them (a guard that never let a
    run start would pass the comparison trivially)."""
    on = [_run(p, seed, True)["runs"] for p in PRESETS for seed in range(3)]
    assert sum(on) > 0 and sum(x > 0 for x in on) >= 2, on


@pytest.mark.parametrize("runs", [False, True])
def test_run_stops_at_the_steps_own_completion(runs):
    """A tagged command that starts a run puts its completion in the ring: advance() stops at its done cycle
    with nothing issued at or after it, runs on or off (a driver may enqueue work there)."""
    channel.set_runs(runs)
    try:
        spec = load_spec("GDDR6_AiM_16Gbps", overrides={"org.channels": 1})
        ms = MemorySystem(spec, {"refresh": "none"}, sources=[{"name": "pim", "kind": "stream"}], log=True)
    finally:
        channel.set_runs(True)
    c = {n: spec.cmd(n) for n in ("ACTAB", "MACAB", "PREAB")}
    cmd = [c["ACTAB"]] + [c["MACAB"]] * 40 + [c["PREAB"]]
    tag = np.full(len(cmd), -1)
    tag[1] = 5
    ms.enqueue_stream("pim", 0, cmd, 0, row=3, tag=tag)
    assert ms.advance() == channel.ST_COMPLETION
    stop = int(ms.S.clock[0])
    n = int(ms.S.n_log[0])
    assert n > 2 and int(ms.S.log_clk[:n].max()) < stop
    assert stop == int(ms.S.log_clk[1]) + int(ms.tables.cmd_lat[c["MACAB"]])
