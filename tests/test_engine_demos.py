"""One demonstration per future user of the substrate (NeuPIMs, Duplex, T3): each drives the channel engine
the way that system will, and the independent checker re-verifies every command log."""
from __future__ import annotations

import numpy as np
import pytest

from archsim.dram.checker import check_log
from archsim.dram.spec import load_spec
from archsim.engine.channel import ST_COMPLETION
from archsim.engine.loop import EventLoop, FixedUnit, Link, MemoryUnit, Task
from archsim.engine.memory import MemorySystem


def _clean(spec, ms):
    log = ms.command_log()
    bad = check_log(spec, log)
    assert not bad, "\n".join(str(v) for v in bad[:5])
    return log


def test_dma_enqueues_more_requests_when_earlier_ones_complete():
    """An NPU-like DMA with 4 outstanding reads: each completion (at its exact cycle) issues the next read."""
    spec = load_spec("HBM2_2Gbps_PC", overrides={"org.channels": 1})
    ms = MemorySystem(spec, log=True)
    port = ms.add_port()
    total, window = 40, 4
    rows = np.arange(total) // 8
    sent = 0

    def send(k, at):
        nonlocal sent
        i = np.arange(sent, sent + k)
        ms.enqueue_requests(port, np.zeros(k, int), i % 16, rows[i], i % 32, 0, at, i)
        sent += k

    send(window, 0)
    done_at = {}
    while len(done_at) < total:
        st = ms.advance()
        if st == ST_COMPLETION:
            for tag, done in ms.drain():
                done_at[tag] = done
                if sent < total:
                    send(1, ms.clock)
        else:
            break
    assert len(done_at) == total
    # request k + window is enqueued exactly when request k completes (one in flight per completion)
    enq = ms.S.r_enq[:total]
    order = sorted(done_at, key=lambda t: (done_at[t], t))
    for j, tag in enumerate(order[:total - window]):
        assert enq[window + j] >= done_at[tag]
    _clean(spec, ms)


def _dual_rb_case(arbitration: str):
    spec = load_spec("HBM2_2Gbps_DualRB", overrides={"org.channels": 1})
    # PIM first: under `blocked` the active source would otherwise wait forever for the bank the PIM stream
    # has reserved (a hazard of the contract, docs/channel-engine.md clarification 16)
    ms = MemorySystem(spec, sources=[{"name": "pim", "kind": "stream"}, {"name": "mem", "kind": "rw"}],
                      arbitration=arbitration, log=True)
    port = ms.add_port("mem")
    # reads to row 7 of bank 3 (mem buffer) while the PIM stream computes on row 100 of the same bank
    n = 24
    ms.enqueue_requests(port, np.zeros(n, int), 3, 7, np.arange(n) % 32, 0, np.arange(n) * 4, -1)
    # COMP and RDRES are all-bank (Newton style): the stream opens its row in the PIM buffer of every bank
    C = spec.cmd
    nb = spec.banks_per_channel
    cmds = [C("PACT")] * nb + [C("COMP")] * 16 + [C("RDRES"), C("PPREA")]
    banks = list(range(nb)) + [3] * 18
    ms.enqueue_stream("pim", 0, cmds, banks, row=[100] * (nb + 17) + [-1], column=-1)
    end = ms.run()
    return spec, ms, end


def test_pim_stream_and_frfcfs_reads_share_a_bank_through_two_row_buffers():
    spec, ms, end = _dual_rb_case("priority")
    log = _clean(spec, ms)
    # both sources progressed in the same bank: the reads never precharged the PIM row and vice versa
    mem = log[log.source == "mem"]
    pim = log[log.source == "pim"]
    assert (mem.command == "PRE").sum() == 0 and set(pim.command) == {"PACT", "COMP", "RDRES", "PPREA"}
    assert (ms.request_class == 0).sum() == 23          # one miss (the ACT), then hits while PIM runs
    # they overlap in time
    assert mem.cycle.min() < pim[pim.command == "PPREA"].cycle.max() and pim.cycle.min() < mem.cycle.max()
    # the blocked policy (one source at a time, the single-buffer NPU+PIM baseline) takes longer
    _, _, end_blocked = _dual_rb_case("blocked")
    assert end_blocked > end


def test_read_modify_write_keeps_its_row_open_between_rd_and_wr():
    spec = load_spec("HBM2_2Gbps_PC", overrides={"org.channels": 1})
    alu = 6
    ms = MemorySystem(spec, log=True, alu_latency=alu)
    port = ms.add_port()
    # one rmw to bank 0 row 5, then a read to another row of bank 0 arriving just after the rmw's RD
    # (from its RD on the rmw pins its row; before it, a conflicting read may still close it)
    rd_at = spec.timing["nRCDRD"] + 1
    ms.enqueue_requests(port, [0, 0], [0, 0], [5, 9], [1, 2], [2, 0], [0, rd_at + 1], -1)
    ms.run()
    log = _clean(spec, ms)
    rd = log[(log.command == "RD") & (log.row == 5)].cycle.to_numpy()
    wr = log[(log.command == "WR") & (log.row == 5)].cycle.to_numpy()
    assert len(rd) == 1 and len(wr) == 1
    assert wr[0] >= rd[0] + spec.commands[spec.cmd("RD")].latency + alu
    pre = log[log.command == "PRE"].cycle.to_numpy()
    assert len(pre) == 1 and pre[0] > wr[0]              # the conflicting read had to wait for the WR
    assert ms.request_done[0] == wr[0] + spec.commands[spec.cmd("WR")].latency


def test_observer_fires_a_dma_when_a_region_has_received_its_writes():
    """A T3-like tracker: writes to a tile carry the tile's tag; when the count reaches the expected number the
    pre-programmed DMA (reads of that tile) is enqueued at that very cycle."""
    spec = load_spec("HBM2_2Gbps_PC", overrides={"org.channels": 1})
    ms = MemorySystem(spec, log=True)
    port = ms.add_port()
    expected = {0: 6, 1: 6}
    rng = np.random.default_rng(3)
    for tile in (0, 1):
        k = expected[tile]
        ms.enqueue_requests(port, np.zeros(k, int), tile * 2 + np.arange(k) % 2, 10 + tile, np.arange(k),
                            1, rng.integers(0, 30, k), tile)
    counts = {0: 0, 1: 0}
    fired = {}
    while True:
        st = ms.advance()
        if st != ST_COMPLETION:
            break
        for tag, _done in ms.drain():
            if tag >= 100:
                continue
            counts[tag] += 1
            if counts[tag] == expected[tag]:
                fired[tag] = ms.clock
                ms.enqueue_requests(port, np.zeros(4, int), tag * 2, 10 + tag, np.arange(4), 0, ms.clock, 100 + tag)
    assert set(fired) == {0, 1}
    writes_done = ms.request_done[:12]
    for tile in (0, 1):
        assert fired[tile] == writes_done[tile * 6:(tile + 1) * 6].max()    # exactly when the last write landed
    dma = np.arange(12, 20)
    assert (ms.S.r_enq[dma] >= np.repeat([fired[0], fired[1]], 4)).all()
    _clean(spec, ms)


def test_two_devices_linked_by_a_transfer():
    """Device A reads a tile; a link carries it (latency + bytes / bandwidth); device B writes it. The loop
    advances the two memories in lockstep windows no longer than the link latency."""
    spec = load_spec("HBM2_2Gbps_PC", overrides={"org.channels": 1})
    a = MemorySystem(spec, log=True)
    b = MemorySystem(spec, log=True)
    pa, pb = a.add_port(), b.add_port()
    latency_ps = 500_000
    loop = EventLoop(lookahead_ps=latency_ps)
    ua, ub = loop.add(MemoryUnit("devA", a)), loop.add(MemoryUnit("devB", b))
    link = loop.add(Link("link", latency_ps=latency_ps, bytes_per_s=50e9))
    nbytes = 16 * spec.access_bytes

    def read(ms, at, tag):
        ms.enqueue_requests(pa, np.zeros(16, int), np.arange(16) % 4, 3, np.arange(16), 0, at, tag)
        return 16

    def write(ms, at, tag):
        ms.enqueue_requests(pb, np.zeros(16, int), np.arange(16) % 4, 8, np.arange(16), 1, at, tag)
        return 16

    t_read = Task("read", ua, submit=read)
    t_link = Task("send", link, deps=[t_read], cycles=link.transfer_cycles(nbytes))
    t_write = Task("write", ub, deps=[t_link], submit=write)
    loop.submit([t_read, t_link, t_write])
    loop.run()
    assert t_write.end_ps > 0
    assert t_link.start_ps == t_read.end_ps
    assert t_write.start_ps >= t_read.end_ps + latency_ps
    read_done_ps = int(a.request_done.max()) * spec.tCK_ps
    assert t_read.end_ps == pytest.approx(read_done_ps)
    assert int(b.S.r_enq[:16].min()) * spec.tCK_ps >= t_read.end_ps + latency_ps
    _clean(spec, a)
    _clean(spec, b)


def test_fixed_units_overlap_where_the_graph_allows():
    loop = EventLoop()
    asic = loop.add(FixedUnit("asic", 1e9))
    npu = loop.add(FixedUnit("npu", 1e9))
    a = Task("a", asic, cycles=100)
    b = Task("b", npu, cycles=30)                       # independent of a: runs beside it
    c = Task("c", asic, deps=[a, b], cycles=10)
    loop.submit([a, b, c])
    end = loop.run()
    assert (a.start_ps, b.start_ps) == (0, 0) and c.start_ps == 100_000 and end == 110_000


def _read_chain(window):
    """An agent that reads 4 bursts, computes for 10 cycles after they are done, then reads the next 4 (8
    times), on the exact loop (a completion group per read) or a windowed one (request waits)."""
    spec = load_spec("HBM2_2Gbps_PC", overrides={"org.channels": 1})
    ms = MemorySystem(spec, log=True)
    port = ms.add_port()
    loop = EventLoop(window=window)
    unit = loop.add(MemoryUnit("mem", ms, ticks="cycles"))
    seen = []

    def issue(k, at):
        def done(t):
            seen.append((k, t, loop.now))
            if k + 1 < 8:
                loop.at(t + 10, lambda: issue(k + 1, t + 10))

        args = (np.zeros(4, int), np.arange(4) + 4 * (k % 2), 3 + k, np.arange(4), 0, at)
        if window is None:
            ms.enqueue_requests(port, *args, unit.group(4, done))
        else:
            unit.wait_requests(ms.enqueue_requests(port, *args, -1), done)

    issue(0, 0)
    loop.run()
    return seen, ms


@pytest.mark.parametrize("window", [1, 8])
def test_windowed_loop_gives_the_exact_schedule_when_agents_wait_a_window(window):
    """Request waits in a windowed loop are called with their exact done cycles, in order; an agent that waits
    at least a window after a completion before using the memory again gets the exact loop's schedule."""
    exact, ms_exact = _read_chain(None)
    got, ms = _read_chain(window)
    assert [(k, t) for k, t, _ in got] == [(k, t) for k, t, _ in exact], (got, exact)
    for k, t, _ in got:
        assert t == int(ms.S.r_done[4 * k:4 * k + 4].max()), (k, t)
    assert all(now == t for _, t, now in exact)                     # the exact loop calls at the done cycle
    assert ms.command_log().equals(ms_exact.command_log())
    _clean(ms.spec, ms)


def _burst_and_probe(window):
    """Source 0 enqueues a burst far longer than a window checks (the windowed loop's pending limit), then
    source 1 one read on another channel: when is the probe's wait called?"""
    spec = load_spec("HBM2_2Gbps_PC", overrides={"org.channels": 2})
    ms = MemorySystem(spec, sources=[{"name": "a", "kind": "rw"}, {"name": "b", "kind": "rw"}])
    pa, pb = ms.add_port("a"), ms.add_port("b")
    loop = EventLoop(window=window)
    unit = loop.add(MemoryUnit("mem", ms, ticks="cycles"))
    n = 20000
    seen = {}

    def wait(name, ids, tag):
        if window is None:
            return
        unit.wait_requests(ids, lambda t: seen.setdefault(name, (t, loop.now)))

    tag = unit.group(n, lambda t: seen.setdefault("burst", (t, loop.now))) if window is None else -1
    wait("burst", ms.enqueue_requests(pa, 0, np.arange(n) % 8, np.arange(n) // 64, np.arange(n) % 32, 0, 0, tag),
         tag)
    tag = unit.group(1, lambda t: seen.setdefault("probe", (t, loop.now))) if window is None else -1
    wait("probe", ms.enqueue_requests(pb, 1, spec.banks_per_channel, 5, 0, 0, 0, tag), tag)
    loop.run()
    return seen


@pytest.mark.parametrize("window", [16, 64])
def test_windowed_loop_sees_one_source_done_behind_another_sources_burst(window):
    """The windowed loop checks a bounded prefix of the waited ids per source: a burst of one source (a GEMM's
    K step) does not hide a later request of another source (a reduce-scatter update), which is called at its
    done cycle as on the exact loop, long before the burst drains."""
    exact = _burst_and_probe(None)
    got = _burst_and_probe(window)
    assert got["probe"][0] == exact["probe"][0]                  # its exact done cycle,
    assert got["probe"][1] < got["probe"][0] + window            # seen by the end of its window
    assert got["probe"][0] < exact["burst"][0] // 10
    assert got["burst"][0] == exact["burst"][0]


def test_windowed_loop_rejects_tasks_on_memory_and_waits_need_a_window():
    from archsim.engine.memory import EngineError

    spec = load_spec("HBM2_2Gbps_PC", overrides={"org.channels": 1})
    loop = EventLoop(window=4)
    unit = loop.add(MemoryUnit("mem", MemorySystem(spec), ticks="cycles"))
    with pytest.raises(EngineError, match="exact loop"):
        loop.submit([Task("t", unit, submit=lambda ms, at, tag: 0)])
    exact = EventLoop()
    other = exact.add(MemoryUnit("mem", MemorySystem(spec)))
    with pytest.raises(EngineError, match="windowed EventLoop"):
        other.wait_requests(np.arange(2), lambda t: None)
    with pytest.raises(ValueError, match="window must be"):
        EventLoop(window=0)


def _two_waits_one_cycle(window):
    """Two sources each read one burst at cycle 0, on channels 1 and 0 (that order): both are done on the same
    cycle. In which order are the two waits called?"""
    spec = load_spec("HBM2_2Gbps_PC", overrides={"org.channels": 2})
    ms = MemorySystem(spec, sources=[{"name": "a", "kind": "rw"}, {"name": "b", "kind": "rw"}])
    ports = ms.add_port("a"), ms.add_port("b")
    loop = EventLoop(window=window)
    unit = loop.add(MemoryUnit("mem", ms, ticks="cycles"))
    seen = []
    for name, port, ch in (("first", ports[0], 1), ("second", ports[1], 0)):
        def done(t, name=name):
            seen.append((name, t))
        if window is None:
            ms.enqueue_requests(port, ch, ch * spec.banks_per_channel, 5, 0, 0, 0, unit.group(1, done))
        else:
            unit.wait_requests(ms.enqueue_requests(port, ch, ch * spec.banks_per_channel, 5, 0, 0, 0, -1), done)
    loop.run()
    return seen


@pytest.mark.parametrize("window", [1, 16])
def test_windowed_loop_calls_same_cycle_waits_in_the_exact_loops_order(window):
    """Waits done on one cycle are called as the exact loop drains them (the kernel's completion order: the
    cycle's channels ascending), not in the order they began: an agent's reaction to two same-cycle
    completions (T3: two tiles' DMA reads) enters the memory in the exact driver's order."""
    exact = _two_waits_one_cycle(None)
    assert exact[0][1] == exact[1][1]                    # the case: one done cycle
    assert [n for n, _ in exact] == ["second", "first"]  # channel 0's completion is recorded first
    assert _two_waits_one_cycle(window) == exact
