"""Completion groups (MemorySystem.expect; MemoryUnit.group on the exact event loop) and request-pool recycling."""
from __future__ import annotations

import numpy as np
import pytest

from archsim.dram.spec import load_spec
from archsim.engine.channel import ST_IDLE
from archsim.engine.loop import EventLoop, MemoryUnit
from archsim.engine.memory import MemorySystem
from archsim.errors import ConfigError

NO_REFRESH = {"refresh": "none"}


def _memory(ms):
    """The exact event loop with one memory counted in its own cycles (how NeuPIMs and the NPU DMA run)."""
    loop = EventLoop(name="test loop")
    return loop, loop.add(MemoryUnit("memory", ms, ticks="cycles"))


def _requests(spec, n, seed):
    rng = np.random.default_rng(seed)
    return (rng.integers(0, spec.channels, n), rng.integers(0, spec.banks_per_channel, n),
            rng.integers(0, 64, n), rng.integers(0, 8, n), rng.integers(0, 2, n))


def _enqueue(ms, port, spec, reqs, tag, arrive=0):
    ch, b, row, col, kind = reqs
    ms.enqueue_requests(port, ch, ch * spec.banks_per_channel + b, row, col, kind, arrive, tag)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_group_fires_once_at_the_latest_done_cycle_of_its_items(seed):
    spec = load_spec("HBM2_2Gbps_PC")
    reqs = _requests(spec, 300, seed)
    plain = MemorySystem(spec, NO_REFRESH, log=True)
    _enqueue(plain, plain.add_port(width=4), spec, reqs, tag=-1)
    plain.run()
    grouped = MemorySystem(spec, NO_REFRESH, log=True)
    grouped.expect(7, 300)
    _enqueue(grouped, grouped.add_port(width=4), spec, reqs, tag=7)
    events = []
    while True:
        st = grouped.advance()
        events += grouped.drain()
        if st == ST_IDLE:
            break
    assert events == [(7, int(plain.request_done.max()))]
    # grouping changes nothing the device does
    assert np.array_equal(grouped.command_log()["cycle"], plain.command_log()["cycle"])


def test_expect_rejects_bad_arguments():
    ms = MemorySystem(load_spec("HBM2_2Gbps_PC"), NO_REFRESH)
    with pytest.raises(ConfigError, match="tag must be >= 0"):
        ms.expect(-1, 3)
    with pytest.raises(ConfigError, match="n >= 1"):
        ms.expect(3, 0)


def test_recycled_request_pool_gives_the_same_schedule():
    """Two phases of requests, the second enqueued after the first is done: recycling the pool in between
    (what long co-simulations do at barriers) must not change a single command."""
    spec = load_spec("HBM2_2Gbps_PC")
    a, b = _requests(spec, 400, 5), _requests(spec, 400, 6)
    logs = []
    for recycle in (False, True):
        ms = MemorySystem(spec, {"refresh": "allbank"}, log=True, requests=16)
        port = ms.add_port(width=2)
        loop, mem = _memory(ms)
        ends = []
        _enqueue(ms, port, spec, a, mem.group(400, ends.append))
        assert loop.run() == ms.clock == max(ends)        # the loop's time is the memory's cycles
        if recycle:
            assert ms.recycle_requests()
            assert ms.n_req == 0
        _enqueue(ms, port, spec, b, mem.group(400, ends.append), arrive=ms.clock + 10)
        loop.run()
        log = ms.command_log()
        logs.append((ends, log["cycle"].tolist(), log["command"].tolist(), log["bank"].tolist(), log["channel"].tolist()))
    assert logs[0] == logs[1]


def test_recycling_refuses_while_requests_wait():
    spec = load_spec("HBM2_2Gbps_PC")
    ms = MemorySystem(spec, NO_REFRESH)
    _enqueue(ms, ms.add_port(), spec, _requests(spec, 50, 1), tag=-1, arrive=1000)
    assert not ms.recycle_requests()


def test_loop_reports_a_group_that_never_completes():
    from archsim.engine.memory import EngineError

    spec = load_spec("HBM2_2Gbps_PC")
    ms = MemorySystem(spec, NO_REFRESH)
    loop, mem = _memory(ms)
    fired = []
    _enqueue(ms, ms.add_port(), spec, _requests(spec, 5, 1), mem.group(5, fired.append))
    _enqueue(ms, ms.add_port(), spec, _requests(spec, 5, 2), mem.group(6, fired.append))
    with pytest.raises(EngineError, match="test loop: memory idle at cycle [0-9]+ with 1 completion groups"):
        loop.run()
    assert len(fired) == 1, fired                     # the complete group fired; the short one never can


def test_a_bounded_run_may_stop_with_groups_waiting():
    """run(until_ps) stops at the bound with work in flight: not an error; the run to the end finishes it."""
    spec = load_spec("HBM2_2Gbps_PC")
    ms = MemorySystem(spec, NO_REFRESH)
    loop, mem = _memory(ms)
    fired = []
    _enqueue(ms, ms.add_port(), spec, _requests(spec, 50, 3), mem.group(50, fired.append))
    loop.run(until_ps=5)                              # 5 cycles: no request is done yet
    assert fired == [] and mem.groups_waiting == 1 and ms.clock <= 5, (fired, ms.clock)
    end = loop.run()
    assert fired == [end] and mem.groups_waiting == 0, (fired, end)


def test_enqueue_stream_rejects_bad_input_with_one_line_errors():
    spec = load_spec("NeuPIMs_HBM2_Dual")
    B = spec.banks_per_channel
    ms = MemorySystem(spec, NO_REFRESH, sources=[{"name": "pim", "kind": "stream"}, {"name": "mem", "kind": "rw"}],
                      arbitration="priority", log=False)
    rd = spec.command_names.index("RD")
    with pytest.raises(ConfigError, match="'mem' is not a stream source"):
        ms.enqueue_stream("mem", 0, [rd], [0])
    with pytest.raises(ConfigError, match="one stream call feeds one channel, got channels \\[0, 1\\]"):
        ms.enqueue_stream("pim", [0, 1], [rd, rd], [0, B])
    with pytest.raises(ConfigError, match="3 banks for 2 commands"):
        ms.enqueue_stream("pim", 1, [rd, rd], [B, B + 1, B + 2])
    with pytest.raises(ConfigError, match="command or bank out of range"):
        ms.enqueue_stream("pim", 1, [rd], [0])                      # bank 0 is in channel 0
    with pytest.raises(ConfigError, match="command or bank out of range"):
        ms.enqueue_stream("pim", 1, [len(spec.command_names)], [B])
    assert int(ms.S.outstanding[0]) == 0                            # nothing was enqueued by the failed calls


def _dma_stream(ms, spec, groups, size, reuse_log):
    """A DMA-like agent: `groups` groups of `size` random requests on two ports, each group enqueued when the
    one two before it completed (double buffering), arriving 5 cycles later. Returns the completion events."""
    loop, mem = _memory(ms)
    ports = (ms.add_port(width=2), ms.add_port(width=2))
    events = []

    def issue(g, at):
        def done(cycle, g=g):
            events.append((g, cycle))
            if g + 2 < groups:
                issue(g + 2, cycle + 5)
        _enqueue(ms, ports[g % 2], spec, _requests(spec, size, 100 + g), mem.group(size, done), arrive=at)
        reuse_log.append(int(ms.S.r_ch.shape[0]))

    issue(0, 0)
    issue(1, 0)
    loop.run()
    return events


@pytest.mark.parametrize("refresh", ["none", "allbank"])
def test_reused_slots_give_the_same_schedule_in_a_bounded_pool(refresh):
    """reuse_slots: served requests' slots take new requests (ring order), so the pool stays as large as the
    requests in flight; nothing the device does changes."""
    spec = load_spec("HBM2_2Gbps_PC")
    runs = []
    for reuse in (False, True):
        ms = MemorySystem(spec, {"refresh": refresh}, log=True, requests=64, reuse_slots=reuse)
        pool = []
        events = _dma_stream(ms, spec, groups=40, size=100, reuse_log=pool)
        log = ms.command_log()
        runs.append((events, log["cycle"].tolist(), log["command"].tolist(), log["bank"].tolist(),
                     log["row"].tolist(), log["channel"].tolist()))
        if reuse:
            assert max(pool) <= 512, pool          # two groups in flight at a time, not all 4,000 requests
            assert ms.n_req <= max(pool)
        else:
            assert max(pool) >= 4000
    assert runs[0] == runs[1]


def test_reused_slots_grow_the_pool_while_every_slot_is_in_flight():
    spec = load_spec("HBM2_2Gbps_PC")
    ms = MemorySystem(spec, NO_REFRESH, requests=16, reuse_slots=True)
    port = ms.add_port()
    ms.expect(1, 10)
    ms.expect(2, 10)
    ch, b, row, col, kind = _requests(spec, 10, 3)
    first = ms.enqueue_requests(port, ch, ch * spec.banks_per_channel + b, row, col, kind, 0, 1)
    second = ms.enqueue_requests(port, ch, ch * spec.banks_per_channel + b, row, col, kind, 0, 2)
    assert set(first.tolist()).isdisjoint(second.tolist())       # nothing served yet: no slot is taken twice
    assert ms.S.r_ch.shape[0] >= 20


def test_reused_slots_refuse_what_would_name_a_slot():
    spec = load_spec("HBM2_2Gbps_PC")
    ms = MemorySystem(spec, NO_REFRESH, reuse_slots=True)
    port = ms.add_port()
    ch, b, row, col, kind = _requests(spec, 4, 3)
    bank = ch * spec.banks_per_channel + b
    with pytest.raises(ValueError, match="tag 5 has no completion group"):
        ms.enqueue_requests(port, ch, bank, row, col, kind, 0, 5)
    with pytest.raises(ValueError, match="picks the slots itself"):
        ms.enqueue_requests(port, ch, bank, row, col, kind, 0, -1, slot=0)
    ms.enqueue_requests(port, ch, bank, row, col, kind, 0, -1)       # untagged: fine
    assert len(ms.enqueue_requests(port, [], [], [], [], [], [], [])) == 0     # nothing to enqueue, nothing refused
    ms.run()
    with pytest.raises(ValueError, match="reuses"):
        _ = ms.request_done
