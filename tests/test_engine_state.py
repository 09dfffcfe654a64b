"""The kernel's state and controller slots, declared once (archsim/engine/state.py, CF_SLOTS in
archsim/engine/channel.py): every declared field is allocated with its declared dtype, shape and fill on several
device sets, and the split the thread coordinator relies on (a shard's own copies, fields split by channel, the
rest written only in the cycles one thread runs) holds for every field while shards run."""
from __future__ import annotations

import concurrent.futures

import numpy as np
import pytest
from engine_cases import _spec
from test_engine_threads import _multi_case, _run

import archsim.engine.channel as channel
import archsim.engine.threads as threads
from archsim.engine import state
from archsim.engine.memory import MemorySystem

# device sets with different sizes: sources of both kinds, one and two row buffers, per-bank refresh, no log
DEVICE_SETS = [
    ("DDR4_3200AA_x8_8Gb", {}, {}, {}),
    ("HBM2_2Gbps_PC", {}, {"refresh": "perbank"}, {"log": False, "requests": 7}),
    ("NeuPIMs_HBM2_Dual", {"org.channels": 2}, {},
     {"sources": [{"name": "pim", "kind": "stream"}, {"name": "mem", "kind": "rw"}], "arbitration": "priority"}),
    ("HBM3_6400Mbps", {"org.channels": 2}, {"refresh_stagger": True, "read_queue": 16, "write_queue": 48},
     {"sources": [{"name": "a", "kind": "rw"}, {"name": "s", "kind": "stream"}, {"name": "b", "kind": "rw"}],
      "arbitration": "threshold", "threshold": 3, "stream_capacity": 100}),
    ("GDDR6_AiM_16Gbps", {}, {"refresh": "none"}, {"sources": [{"name": "pim", "kind": "stream"}]}),
]


def _build(preset, overrides, ctrl, kw) -> MemorySystem:
    return MemorySystem(_spec(preset, tuple(sorted(overrides.items()))), ctrl, **kw)


def test_state_is_the_declaration():
    assert channel.State._fields == tuple(f.name for f in state.FIELDS)
    assert len(set(channel.State._fields)) == len(state.FIELDS), "a field is declared twice"
    assert channel.CACHE_FIELDS == tuple(f.name for f in state.FIELDS if f.role in ("cache", "epoch"))
    for f in state.FIELDS:
        assert f.role in state.ROLES, f"{f.name}: role {f.role!r} not in ROLES"
        assert set(f.flags) <= {state.SHARD, state.COUNT, state.BANK_ID, state.FIXED}, f"{f.name}: flags {f.flags}"
        assert all(isinstance(d, int) or d in state.SIZES for d in f.shape), f"{f.name}: shape {f.shape}"
        assert f.doc, f"{f.name} has no comment"
        assert f.fresh is None or f.role == "request", f"{f.name}: only pool fields have a fresh value"


@pytest.mark.parametrize("case", range(len(DEVICE_SETS)))
def test_every_field_allocated_as_declared(case):
    ms = _build(*DEVICE_SETS[case])
    S = ms.S
    for f in state.FIELDS:
        a = getattr(S, f.name)
        want = state.shape_of(f, ms.sizes)
        assert a.shape == want, f"{f.name}: allocated {a.shape}, declared {f.shape} = {want}"
        if f.dtype is state.VARIANT:
            assert a.dtype.type is channel._VARIANT_DTYPES[channel.KERNEL_VARIANTS.index(ms.kernel)], f.name
        else:
            assert a.dtype == np.dtype(f.dtype), f"{f.name}: allocated {a.dtype}, declared {np.dtype(f.dtype)}"
        if f.fill is not state.INIT and a.size:
            assert (a == f.fill).all(), f"{f.name}: not every element is the declared fill {f.fill}"
    # the sizes behind the shapes are the device's
    spec, T = ms.spec, ms.tables
    assert S.open_row.shape == (spec.channels * T.banks, len(spec.row_buffers))
    assert S.ready.shape == (spec.channels, T.n_cells * T.n_cmds)
    assert S.cand.shape == (max(len(ms.sources), 1), state.CAND_WIDTH)
    assert S.qcap.tolist() == [ms.ctrl.read_queue, ms.ctrl.write_queue] * (S.qcap.size // 2)


def test_grown_fields_keep_their_declaration():
    """The Python side grows the pool, streams, log, ring and groups from the same declaration."""
    ms = _build(*DEVICE_SETS[3])
    port = ms.add_port("a", 2)
    ms.expect(2000, 1)
    ms.enqueue_requests(port, 0, 1, 2, 3, tag=2000)
    ms._grow_pool(3000)
    ms._grow_log()
    ms._grow_ring(10_000)
    for _ in range(3):
        ms.enqueue_stream("s", 1, np.zeros(90, np.int64), ms.tables.banks)
    S = ms.S
    assert S.r_ch.shape == (3000,) and all(getattr(S, f).shape == (3000,) for f in state.POOL_FIELDS)
    assert {getattr(S, f).shape for f in state.STREAM_SLOT_FIELDS} == {S.s_cmd.shape} and S.s_cmd.shape[1] >= 270
    assert {getattr(S, f).shape[0] for f in state.LOG_FIELDS} == {8192}
    assert {getattr(S, f).shape[0] for f in state.RING_FIELDS} == {10_000}
    assert S.g_done.shape == S.g_left.shape and S.g_done[0] == -1 and S.g_left[2000] == 1
    # a fresh request: the engine-owned pool fields at their declared `fresh` values
    for f in state.POOL_FIELDS:
        v = state.BY_NAME[f].fresh
        if v is not None:
            assert getattr(S, f)[0] == v, f"{f}: {getattr(S, f)[0]} after enqueue, declared fresh {v}"


def test_controller_slots_by_name(monkeypatch):
    assert channel.N_CF == len(channel.CF_SLOTS) == len(channel.CF_INDEX)
    for i, s in enumerate(channel.CF_SLOTS):
        assert getattr(channel, "CF_" + s.name) == i and s.doc, s.name
    ms = _build(*DEVICE_SETS[3])
    cf = ms.cf
    assert (cf[channel.CF_CH], cf[channel.CF_NSRC], cf[channel.CF_NRW], cf[channel.CF_NST]) == (2, 3, 2, 1)
    assert cf[channel.CF_ARB] == channel.ARB_THRESHOLD and cf[channel.CF_THRESH] == 3
    assert cf[channel.CF_WM_HIGH] == max(1, round(ms.ctrl.write_high_watermark * 48))
    # refresh_stagger: a node's interval is nodes x (nREFI // nodes)
    n = ms.tables.ref_nodes
    assert cf[channel.CF_NREFI] == n * (ms.spec.timing["nREFI"] // n)
    # variants fix slots by name; a name that is no slot is refused when the table is read
    lean = channel.KERNEL_VARIANTS.index("lean")
    assert channel.VARIANT_CF[lean, channel.CF_NBUF] == 1 and channel.VARIANT_CF[lean, channel.CF_THRESH] == -1
    monkeypatch.setitem(channel._VARIANT_FIXED, "lean", {"NBUFS": 1})
    with pytest.raises(RuntimeError, match="unknown controller slots.*NBUFS"):
        channel._variant_cf()


def _serial_fields() -> set[str]:
    """Fields neither a shard's own, nor split by channel, nor request slots: written only in coupling cycles."""
    return {f.name for f in state.FIELDS
            if state.SHARD not in f.flags and state.channel_axis(f) is None and f.role != "request"}


class _InOrder:
    """An executor that runs each submitted shard at once: shards then run one after another."""

    def submit(self, fn, *args):
        fut = concurrent.futures.Future()
        fut.set_result(fn(*args))
        return fut


def test_shards_write_only_their_own_part(monkeypatch):
    """While a shard of channels [lo, hi) runs, every field it shares with the state changes only in its own
    channels' part (a channel-split field), in its own channels' requests (the pool), or not at all (the
    rest); the fields it has its own copies of are exactly state.SHARD_FIELDS."""
    monkeypatch.setattr(threads, "REGION_MIN", 1)
    monkeypatch.setattr(threads, "REGION_MAX", 64)
    assert _serial_fields() == {"p_buf", "p_head", "p_tail", "p_width", "p_src", "p_next", "p_block",
                                "st_next", "variant"}, sorted(_serial_fields())
    changed: set[str] = set()
    shards_run = [0]
    real_kernel = threads.Coordinator.load_kernel

    def checked_kernel(coord):
        kernel, replay = real_kernel(coord)
        S, size = coord.ms.S, coord.ms.sizes
        for _lo, _hi, sh, _cc in coord._shard_states():
            for f in state.FIELDS:
                own = getattr(sh, f.name) is not getattr(S, f.name)
                assert own == (state.SHARD in f.flags), f"{f.name}: own copy {own}, declared {f.flags}"
        coord._pool = _InOrder()

        def run(sh, T, cf, lo, hi, until, cc):
            shared = [f for f in state.FIELDS if state.SHARD not in f.flags]
            before = {f.name: getattr(sh, f.name).copy() for f in shared}
            got = kernel(sh, T, cf, lo, hi, until, cc)
            mine = np.isin(sh.r_ch, np.arange(int(lo), int(hi)))
            for f in shared:
                diff = before[f.name] != getattr(sh, f.name)
                if not diff.any():
                    continue
                changed.add(f.name)
                if state.channel_axis(f) is not None:
                    for ch in range(int(lo), int(hi)):
                        diff[state.channel_index(f, size, ch)] = False
                elif f.role == "request":
                    diff &= ~mine
                assert not diff.any(), f"{f.name}: shard [{lo}, {hi}) wrote outside its channels"
            shards_run[0] += 1
            return got

        return run, replay

    monkeypatch.setattr(threads.Coordinator, "load_kernel", checked_kernel)
    for seed in (0, 1, 4, 7):
        case = _multi_case(seed)
        one, _ = _run(case, 1, False)
        many, ms = _run(case, 2, False)
        assert one["clock"] == many["clock"] and np.array_equal(one["done"], many["done"]), f"seed {seed}"
    assert shards_run[0] >= 20, f"only {shards_run[0]} shard runs"
    # the check saw shards write the kinds of fields it guards
    assert {"ready", "open_row", "wake", "r_done", "cmd_count"} <= changed, sorted(changed)
    assert not changed & _serial_fields(), sorted(changed & _serial_fields())
