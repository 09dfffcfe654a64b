"""Property tests (hypothesis) of the DRAM simulator on random traces, presets and controller options:
every request completes exactly once, the independent checker accepts the whole command log, and the trace
run (numba channel engine) equals the independent reference scheduler (archsim.engine.reference) fed the same
decoded requests, cycle for cycle."""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from archsim.dram import mapping as mapping_mod
from archsim.dram.checker import check_log
from archsim.dram.controller import ControllerConfig
from archsim.dram.spec import load_spec, preset_names
from archsim.dram.trace import Trace
from archsim.engine.reference import ReferenceController
from archsim.systems.dram_trace import run_trace

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
    cfg = ControllerConfig.from_dict(ctrl)
    dec = mapping_mod.decode(spec, trace.addr, cfg.mapping)
    ref = ReferenceController(spec, cfg)
    port = ref.add_port("mem", width=cfg.frontend_width)
    ref.enqueue_requests(port, dec["channel"], dec["bank"], dec["row"], dec["column"],
                         trace.is_write.astype(np.int64), trace.arrive, -1)
    assert ref.run(max_cycles=10**8)
    np.testing.assert_array_equal(raw["req_done"], ref.request_done, err_msg="request done cycles")
    np.testing.assert_array_equal(raw["req_kind"], ref.request_class, err_msg="hit/miss/conflict class")
    rlog = ref.command_log()
    np.testing.assert_array_equal(log.cycle.to_numpy(), rlog.cycle.to_numpy(), err_msg="command cycles")
    np.testing.assert_array_equal(log.command.to_numpy(), rlog.command.to_numpy(), err_msg="commands")
