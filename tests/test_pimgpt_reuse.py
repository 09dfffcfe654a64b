"""Exact reuse in PIM-GPT's stream runs (archsim.engine.reuse, issue #7): timing classes of attention streams,
channels that take an identical channel's outcome, last opens outside the memo key. Each is checked against a
run that simulates everything."""
from __future__ import annotations

import numpy as np
import pytest

from archsim.dram.spec import load_spec
from archsim.engine.channel import CACHE_FIELDS
from archsim.engine.reuse import StreamChannels
from archsim.systems.pimgpt.compiler import AttentionLayout, Geometry, WeightLayout
from archsim.systems.pimgpt.system import PimGptSimulator


@pytest.fixture(scope="module")
def spec4():
    return load_spec("GDDR6_AiM_16Gbps", overrides={"org.channels": 4})


def _flat_equal(a, b):
    return all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("heads,d_head,lmax,kv", [(9, 64, 300, None), (40, 128, 2100, None), (3, 64, 100, None),
                                                  (25, 64, 1024, None), (32, 128, 600, 8), (12, 64, 300, 6)])
def test_timing_class_determines_the_stream(spec4, heads, d_head, lmax, kv):
    """Arguments with the same timing class give the same (cmd, bank) streams; different classes differ."""
    att = AttentionLayout(0, heads, d_head, lmax, 3, Geometry.from_spec(spec4), n_kv_heads=kv)
    for kind, fn, args in (("score", att.score_timing, range(1, lmax + 1)),
                           ("context", att.context_timing, range(1, lmax + 1)),
                           ("kv", att.kv_timing, range(0, lmax))):
        first: dict = {}
        for a in args:
            cls = att.timing_class(kind, a)
            if cls in first:
                if a % 7 == 0 or a < 40:          # every argument near the start, a sample after
                    assert _flat_equal(fn(a), first[cls][1]), (kind, a, first[cls][0])
            else:
                first[cls] = (a, fn(a))
        streams = [s for _, s in first.values()]
        if kind == "kv":
            continue                                # a class may be finer than needed (only costs reuse)
        assert all(not _flat_equal(x, y) for i, x in enumerate(streams) for y in streams[i + 1:]), kind
    with pytest.raises(ValueError, match="unknown kind"):
        att.timing_class("ffn", 1)


def _ops(spec):
    g = Geometry.from_spec(spec)
    w = WeightLayout("w", 200, 1100, 0, g)
    att = AttentionLayout(0, 9, 64, 256, w.n_rows, g)
    return [w.timing(), att.kv_timing(5), att.score_timing(37), att.context_timing(37), att.kv_timing(6),
            att.score_timing(38), w.element_reads_timing(3)]


def _flat(op, channels):
    if len(op) == 3 and np.ndim(op[0]) == 0:            # (channel, cmd, bank) of an element read
        c, cmd, bank = op
        offs = np.zeros(channels + 1, dtype=np.int64)
        offs[c + 1:] = len(cmd)
        return cmd, bank, offs
    return op


def test_identical_channels_take_one_outcome(spec4):
    """With the memo on, channels with equal streams and states are simulated once; every field of the engine
    state (timing, rows, last opens, counters, sequence numbers) ends equal to a run that simulates all of them,
    and so do op ends and counts."""
    full = StreamChannels(spec4, memo=False)
    dedup = StreamChannels(spec4, memo=True)
    ta = tb = 0
    for rep in range(2):
        for op in _ops(spec4):
            op = _flat(op, 4)
            ea, ca = full.run_flat(None, op, ta)            # key None: no memo, only the channel reuse differs
            eb, cb = dedup.run_flat(None, op, tb)
            assert ea - ta == eb - tb and np.array_equal(ca, cb)
            ta, tb = ea + 3 * rep, eb + 3 * rep
    assert ta == tb
    assert dedup.commands_simulated < full.commands_simulated
    Sa, Sb = full.ms.S, dedup.ms.S
    for f in Sa._fields:
        if f.startswith("s_") and f not in ("s_maxdone", "s_lastend"):
            continue                                        # stream buffers: only the channels simulated fill them
        if f in CACHE_FIELDS:
            continue                                        # kernel caches: a copied channel invalidates its own
        assert np.array_equal(getattr(Sa, f), getattr(Sb, f)), f


def test_last_opens_outside_the_key_stay_exact(spec4):
    """Two ops that differ only in the stream's last open (an element read on another bank before them) share
    a memo entry; the last-open arrays still end as in a full simulation."""
    g = Geometry.from_spec(spec4)
    w = WeightLayout("w", 200, 1100, 0, g)
    full = StreamChannels(spec4, memo=False)
    memo = StreamChannels(spec4, memo=True)
    ta = tb = 0
    for o in (3, 17, 3, 40):
        for op in (_flat(w.element_reads_timing(o), 4), w.timing()):
            ea, ca = full.run_flat(None, op, ta)
            eb, cb = memo.run_flat(("op", len(op[0]), int(op[0][0]), int(op[1][0])), op, tb)
            assert ea - ta == eb - tb and np.array_equal(ca, cb)
            ta, tb = ea + 500, eb + 500                     # a gap longer than any latency: equal relative states
    memo.sync()
    assert memo.memo_hits >= 2
    for f in ("last_open_cmd", "last_open_tgt", "last_open_row", "open_row"):
        assert np.array_equal(getattr(full.ms.S, f), getattr(memo.ms.S, f)), f


def test_restoring_stream_never_enters_the_memo(spec2=None):
    """A stream that computes on a row it closed makes the engine restore it (reading the last opens the key
    leaves out): such an op is simulated every time, and still equals the full simulation."""
    spec = load_spec("GDDR6_AiM_16Gbps", overrides={"org.channels": 1})
    C = {c.name: c.index for c in spec.commands}
    cmd = np.array([C["ACTAB"], C["MACAB"], C["PREAB"], C["MACAB"], C["PREAB"]], dtype=np.int64)
    op = (cmd, np.zeros(5, dtype=np.int64), np.array([0, 5], dtype=np.int64))
    full = StreamChannels(spec, memo=False)
    memo = StreamChannels(spec, memo=True)
    ta = tb = 0
    for _ in range(3):
        ea, ca = full.run_flat(None, op, ta)
        eb, cb = memo.run_flat(("restore",), op, tb)
        assert ea - ta == eb - tb and np.array_equal(ca, cb)
        assert cb[C["ACTAB"]] == 2                          # the restore
        ta, tb = ea + 500, eb + 500
    assert memo.memo_hits == 0 and memo.unsafe_runs == 3


def test_pimgpt_reuse_equals_full_simulation_over_many_tokens():
    """24 tokens of GPT-2 small (two score classes, every kv bank): the memoised fast path equals simulating
    every op of every token, op by op, bit for bit."""
    T = 24
    fast = PimGptSimulator({"model": "gpt2-small", "tokens": T, "baselines": []})
    full = PimGptSimulator({"model": "gpt2-small", "tokens": T, "baselines": [], "memo": False})
    for t in range(T):
        assert fast.run_token(t) == full.run_token(t), t
    for role, x in full.acc.items():
        y = fast.acc[role]
        for f in ("ops", "pim_cycles", "asic_cycles", "asic_energy_pj"):
            assert x[f] == y[f], (role, f)
        assert np.array_equal(x["counts"], y["counts"]), role
    assert fast.engine.memo_hits > 4 * fast.engine.memo_misses
    assert fast.engine.commands_simulated * 5 < full.engine.commands_simulated


def test_direct_enqueue_equals_enqueue_stream(spec4):
    """StreamChannels writes stream commands into the engine arrays itself (no per-call checks); the same ops
    through MemorySystem.enqueue_stream end at the same cycles with the same counts and engine state."""
    from archsim.engine.memory import MemorySystem

    ms = MemorySystem(spec4, {"refresh": "none"}, sources=[{"name": "pim", "kind": "stream"}], stream_capacity=64)
    sc = StreamChannels(spec4, memo=False)
    B = spec4.banks_per_channel
    t = 0
    for op in _ops(spec4) * 2:
        cmd, bank, offs = _flat(op, 4)
        if ms.S.clock[0] < t:
            ms.S.clock[0] = t
        before = ms.S.cmd_count.copy()
        ms.S.s_maxdone[:] = t
        for c in range(4):
            if offs[c + 1] > offs[c]:
                ms.enqueue_stream("pim", c, cmd[offs[c]:offs[c + 1]], bank[offs[c]:offs[c + 1]] + c * B)
        ms.run()
        end_a, cnt_a = int(ms.S.s_maxdone[:4].max()), (ms.S.cmd_count - before).sum(axis=0)
        end_b, cnt_b = sc.run_flat(None, (cmd, bank, offs), t)
        assert end_a == end_b and np.array_equal(cnt_a, cnt_b)
        t = end_a + 5
    for f in ("ready", "hist", "open_row", "last_open_cmd", "last_open_tgt", "seq", "cmd_count"):
        assert np.array_equal(getattr(ms.S, f), getattr(sc.ms.S, f)), f
