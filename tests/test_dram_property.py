"""Property tests (hypothesis) of the DRAM simulator on random traces, presets and controller options:
every request completes exactly once, the independent checker accepts the whole command log, and the trace
run (numba channel engine) equals the independent reference scheduler (archsim.engine.reference) fed the same
decoded requests, cycle for cycle."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from archsim.dram import mapping as mapping_mod
from archsim.dram.checker import check_log
from archsim.dram.controller import ControllerConfig
from archsim.dram.spec import load_spec, preset_names
from archsim.dram.trace import Trace
from archsim.engine.reference import ReferenceController
from archsim.systems.dram_trace.system import run_trace, simulate_trace

SPECS = {p: load_spec(p) for p in preset_names()}
MAPPINGS = ["RoBaRaCoCh", "RoRaBaCoBgPcCh", "rorabgbachco", "ChRaBaRoCo", "RoCoBaRaCh"]
COLUMN = {"RD", "WR", "RDA", "WRA"}


@st.composite
def scenarios(draw):
    preset = draw(st.sampled_from(sorted(SPECS)))
    spec = SPECS[preset]
    channels = draw(st.sampled_from([1, 2]))
    spec = spec.with_channels(channels) if channels != spec.channels else spec
    n = draw(st.integers(1, 120))
    # a few hot rows make hits and conflicts likely; the rest uniformly random in the device
    hot = draw(st.lists(st.integers(0, spec.capacity_bytes - 1), min_size=1, max_size=4))
    addr = []
    for _ in range(n):
        if draw(st.booleans()):
            addr.append(draw(st.sampled_from(hot)) + draw(st.integers(0, 8)) * spec.access_bytes)
        else:
            addr.append(draw(st.integers(0, spec.capacity_bytes - 1)))
    addr = [min(a, spec.capacity_bytes - 1) for a in addr]
    is_write = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    gaps = draw(st.lists(st.one_of(st.just(-1), st.integers(0, 3), st.integers(0, 400)), min_size=n, max_size=n))
    arrive, t = [], 0
    for g in gaps:
        if g < 0:
            arrive.append(-1)
        else:
            t += g
            arrive.append(t)
    wq = draw(st.integers(1, 16))
    lo = draw(st.sampled_from([0.0, 0.2, 0.5]))
    hi = draw(st.sampled_from([0.6, 0.8, 1.0]))
    if round(hi * wq) <= round(lo * wq):  # watermarks that round to one entry count are rejected by the config
        lo, hi = 0.0, 1.0
    ctrl = {"row_policy": draw(st.sampled_from(["open", "closed"])),
            "refresh": draw(st.sampled_from(list(spec.refresh_modes))),
            "read_queue": draw(st.integers(1, 16)), "write_queue": wq,
            "write_low_watermark": lo, "write_high_watermark": hi,
            "mapping": draw(st.sampled_from(MAPPINGS)), "frontend_width": draw(st.integers(1, 4))}
    trace = Trace(addr=np.array(addr, dtype=np.uint64), is_write=np.array(is_write, dtype=bool),
                  arrive=np.array(arrive, dtype=np.int64), source="hypothesis", fmt="synthetic")
    return spec, trace, ctrl


def _reference(spec, trace, ctrl):
    cfg = ControllerConfig.from_dict(ctrl)
    dec = mapping_mod.decode(spec, trace.addr, cfg.mapping)
    ref = ReferenceController(spec, cfg)
    port = ref.add_port("mem", width=cfg.frontend_width)
    ref.enqueue_requests(port, dec["channel"], dec["bank"], dec["row"], dec["column"],
                         trace.is_write.astype(np.int64), trace.arrive, -1)
    assert ref.run(max_cycles=10**8)
    return ref


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(scenarios())
def test_random_traces_complete_check_and_match_python(case):
    spec, trace, ctrl = case
    fast = run_trace(trace, preset=spec, controller=ctrl, log=True)
    n = len(trace)
    raw = fast.extra["raw"]
    # every request completes exactly once
    assert (raw["req_enq"] >= 0).all()
    assert (raw["req_done"] >= raw["req_enq"]).all()
    concrete = trace.arrive >= 0
    assert (raw["req_enq"][concrete] >= trace.arrive[concrete]).all()
    log = fast.extra["command_log"].df
    col = log[log.command.isin(COLUMN)]
    assert len(col) == n
    assert int(col.command.isin(["WR", "WRA"]).sum()) == int(trace.is_write.sum())
    assert fast.stats["cycles"] == int(raw["req_done"].max())
    # the independent checker accepts the full log
    violations = check_log(spec, log)
    assert not violations, "\n".join(str(v) for v in violations[:10])
    # the engine equals the reference scheduler, cycle for cycle
    ref = _reference(spec, trace, ctrl)
    np.testing.assert_array_equal(raw["req_done"], ref.request_done, err_msg="request done cycles")
    np.testing.assert_array_equal(raw["req_kind"], ref.request_class, err_msg="hit/miss/conflict class")
    rlog = ref.command_log()
    np.testing.assert_array_equal(log.cycle.to_numpy(), rlog.cycle.to_numpy(), err_msg="command cycles")
    np.testing.assert_array_equal(log.command.to_numpy(), rlog.command.to_numpy(), err_msg="commands")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(scenarios(), st.sampled_from([1, 2, 3, 7, 16]))
def test_streaming_in_small_chunks_matches_reference(case, chunk):
    """A trace streams through the engine `chunk` requests at a time, reusing the pool slots of served requests;
    the engine is advanced between chunks only as far as the port's backlog cannot run dry. Chunks of a few
    requests (many advances, every slot reused many times) give the reference scheduler's run exactly."""
    spec, trace, ctrl = case
    cfg = ControllerConfig.from_dict(ctrl)
    raw = simulate_trace(spec, cfg, trace.addr, trace.is_write, trace.arrive, log=True, chunk=chunk)
    ref = _reference(spec, trace, ctrl)
    np.testing.assert_array_equal(raw["req_done"], ref.request_done, err_msg="request done cycles")
    np.testing.assert_array_equal(raw["req_kind"], ref.request_class, err_msg="hit/miss/conflict class")
    rlog = ref.command_log()
    np.testing.assert_array_equal(raw["log"][0], rlog.cycle.to_numpy(), err_msg="command cycles")
    np.testing.assert_array_equal(np.array(spec.command_names)[raw["log"][1]], rlog.command.to_numpy(),
                                  err_msg="commands")


def test_streaming_keeps_the_pool_bounded_and_equals_one_chunk():
    """20 k requests through chunks of 256: the pool stays a few chunks long, and every per-request result,
    command count and the log equal a run with the whole trace in one chunk."""
    spec = SPECS["HBM2_2Gbps_PC"]
    cfg = ControllerConfig.from_dict({"mapping": "RoBaRaCoCh"})
    rng = np.random.default_rng(7)
    n = 20_000
    addr = (rng.integers(0, 1 << 28, n) // spec.access_bytes * spec.access_bytes).astype(np.uint64)
    is_write = rng.random(n) < 0.3
    arrive = np.full(n, -1, np.int64)
    one = simulate_trace(spec, cfg, addr, is_write, arrive, log=True, chunk=n)
    small = simulate_trace(spec, cfg, addr, is_write, arrive, log=True, chunk=256)
    assert small["engine"].S.r_ch.shape[0] <= 16 * 256
    for k in ("req_enq", "req_done", "req_kind", "channel", "cmd_count"):
        np.testing.assert_array_equal(small[k], one[k], err_msg=k)
    for a, b in zip(small["log"], one["log"], strict=True):
        np.testing.assert_array_equal(a, b)


def test_reused_slots_must_hold_served_requests():
    from archsim.engine.memory import MemorySystem

    spec = SPECS["DDR4_3200AA_x8_8Gb"]
    ms = MemorySystem(spec, log=False)
    port = ms.add_port()
    ids = ms.enqueue_requests(port, 0, [0, 1], [5, 6], 0)
    with pytest.raises(ValueError, match=r"slots \[0, 2\) are not reclaimable"):
        ms.enqueue_requests(port, 0, [0, 1], [5, 6], 0, slot=0)     # not served yet
    ms.run()
    assert ms.served(0, 2)
    again = ms.enqueue_requests(port, 0, [2, 3], [7, 8], 1, slot=int(ids[0]))
    assert again.tolist() == ids.tolist()
    ms.run()
    assert (ms.request_done >= 0).all() and ms.n_req == 2
    with pytest.raises(ValueError, match="not reclaimable"):
        ms.enqueue_requests(port, 0, [0, 1, 2], [5, 6, 7], 0, slot=0)   # past the pool's end


def test_progress_thread_errors_reach_the_caller(monkeypatch):
    """With the progress bar on, the run happens in a thread; its errors (here max_cycles) are raised to the
    caller as in a quiet run, not printed as a thread's traceback."""
    from archsim.errors import UserError
    from archsim.systems.dram_trace import system as dram_trace

    monkeypatch.setattr(dram_trace, "_progress_enabled", lambda quiet: True)
    spec = SPECS["DDR4_3200AA_x8_8Gb"]
    cfg = ControllerConfig.from_dict({})
    addr = np.arange(200, dtype=np.uint64) * np.uint64(1 << 20)
    with pytest.raises(UserError, match="max_cycles=50"):
        dram_trace.simulate_trace(spec, cfg, addr, np.zeros(200, bool), np.full(200, -1), quiet=False, max_cycles=50)
