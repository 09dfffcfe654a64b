"""Duplex compiler, serving and system: dispatch by Op/B on crafted stages, routing, expert co-processing,
the functional MoE against numpy, serving metrics, small end-to-end comparisons, config errors. The full
paper-scale runs are in reports/duplex/ and marked slow here."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.errors import ConfigError, UserError
from archsim.pim.logic_pim import LogicPimTimer
from archsim.systems.duplex.compiler import (
    Compiler,
    Stage,
    load_policy,
    make_device,
    moe_functional,
    routing_counts,
)
from archsim.systems.duplex.serving import DuplexBatcher, make_requests, serving_metrics, tbt_samples
from archsim.systems.duplex.system import DuplexRun, resolve
from archsim.workload import load_model
from archsim.workload.serving import ContinuousBatcher

TIMER = LogicPimTimer()
# Logic-PIM's commands on the xPU's column command bus (the other reading of the paper, issue 34)
SHARED = {"command_path": "shared_column_bus"}
TIMER_SHARED = make_device("duplex", command_path="shared_column_bus").timer


def _compiler(model="mixtral-8x7b", device="duplex", n=4, timing="engine", **pol):
    return Compiler(load_model(model), make_device(device, timing, timer=TIMER), n, load_policy("duplex", pol))


def _units(ops):
    return {o.kind: o.unit for o in ops if o.unit != "link"}


def test_table_dispatch_decode_and_mixed_stages():
    c = _compiler()
    _, ops = c.stage(Stage((), (1100,) * 16))
    u = _units(ops)
    assert u["attention_decode"] == "low" and u["moe"] == "low"
    assert u["qkv"] == u["out_proj"] == u["lm_head"] == "xpu"
    _, ops = c.stage(Stage((1024,), (1100,) * 15))
    u = _units(ops)
    assert u["attention_prefill"] == "xpu" and u["attention_decode"] == "low" and u["moe"] == "xpu"
    g = _compiler(device="gpu")
    assert set(_units(g.stage(Stage((), (1100,) * 16))[1]).values()) == {"xpu"}


def test_decode_attention_op_b_is_the_query_group_size():
    for model, group in (("mixtral-8x7b", 4), ("opt-66b", 1), ("llama3-70b", 8), ("grok-1", 6)):
        c = _compiler(model, n=4)
        ops = c.stage(Stage((), (500, 700, 900)))[1]
        att = next(o for o in ops if o.kind == "attention_decode")
        assert att.op_b == pytest.approx(group)


@pytest.mark.parametrize("threshold,model,want", [(16, "opt-66b", "low"), (16, "llama3-70b", "low"),
                                                  (4, "llama3-70b", "xpu"), (4, "opt-66b", "low"),
                                                  (0.5, "opt-66b", "xpu")])
def test_opb_rule_sends_low_op_b_memory_ops_to_the_low_unit(threshold, model, want):
    c = _compiler(model, rule="opb", opb_threshold=threshold)
    ops = c.stage(Stage((), (800,) * 8))[1]
    assert _units(ops)["attention_decode"] == want
    assert _units(ops)["qkv"] == "xpu"                       # never a low-unit op kind


def test_opb_rule_runs_a_small_batch_dense_ffn_on_logic_pim_through_the_engine():
    c = _compiler("llama3-70b", rule="opb", opb_threshold=16)
    small = c.stage(Stage((), (700,) * 8))[1]
    ffn = next(o for o in small if o.kind == "dense_ffn")
    assert ffn.unit == "low" and ffn.op_b < 16
    assert ffn.seconds >= ffn.roofline_s * 0.999
    big = next(o for o in c.stage(Stage((), (700,) * 64))[1] if o.kind == "dense_ffn")
    assert big.unit == "xpu"


def test_opb_rule_moves_moe_to_the_xpu_when_tokens_lift_op_b():
    c = _compiler(rule="opb", opb_threshold=16)
    few = _units(c.stage(Stage((), (600,) * 16))[1])["moe"]      # 16 x 2 / 8 = 4 tokens per expert
    many = _units(c.stage(Stage((512,), (600,) * 16))[1])["moe"]  # 528 x 2 / 8 = 132 per expert
    assert (few, many) == ("low", "xpu")


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 5000), st.sampled_from(["uniform", "zipf"]), st.floats(0, 2), st.integers(0, 40))
def test_routing_counts(tokens, routing, s, layer):
    m = load_model("glam")
    c = routing_counts(m, tokens, routing, s, layer)
    assert c.sum() == tokens * m.experts_per_token or c.max() == tokens
    assert c.min() >= 0 and c.max() <= tokens
    if routing == "uniform":
        assert c.max() - c.min() <= 1
    else:
        hot = np.roll(c, -(layer % m.n_experts))
        assert (np.diff(hot) <= 1).all()                     # popularity falls with rank (up to rounding)


def test_expert_coprocessing_is_the_best_prefix_split_and_beats_either_unit_alone():
    """The split moves whole bundle spaces (the experts that share one) from the xPU to the low unit, fewest
    tokens first, and keeps the best min-max prefix of lookup-table times."""
    c = _compiler(expert_coprocessing=True, expert_tensor_parallel=True)     # 8 experts per device, 2 per space
    experts = [(0, 3), (1, 40), (2, 7), (3, 90), (4, 1), (5, 12), (6, 30), (7, 2)]
    on_x, on_l = c.split_experts(experts)
    assert sorted(on_x + on_l) == sorted(experts)
    assert on_x and on_l
    x_spaces = {sp for e, _ in on_x for sp in c.expert_placement(e)}
    l_spaces = {sp for e, _ in on_l for sp in c.expert_placement(e)}
    assert not x_spaces & l_spaces, f"xPU spaces {x_spaces}, Logic-PIM spaces {l_spaces}"
    cost = max(sum(c.expert_table(t)[0] for _, t in on_x), sum(c.expert_table(t)[1] for _, t in on_l))
    all_x = sum(c.expert_table(t)[0] for _, t in experts)
    all_l = sum(c.expert_table(t)[1] for _, t in experts)
    assert cost <= min(all_x, all_l)
    groups = {}
    for e, t in experts:
        groups.setdefault(c.expert_placement(e), []).append(t)
    order = sorted(groups.values(), key=sum)
    prefix = min(max(sum(c.expert_table(t)[0] for g in order[k:] for t in g),
                     sum(c.expert_table(t)[1] for g in order[:k] for t in g)) for k in range(len(order) + 1))
    assert cost == pytest.approx(prefix)
    tokens = lambda part: [sum(t for e2, t in experts if c.expert_placement(e2) == c.expert_placement(e))   # noqa: E731
                           for e, _ in part]
    assert max(tokens(on_l)) <= min(tokens(on_x))      # the low unit takes the spaces with the fewest tokens


def _spaces_per_device(c):
    return [{sp for e in ids for sp in c.expert_placement(e)} for ids in c.expert_devices()]


@pytest.mark.parametrize("model,n,et", [("mixtral-8x7b", 4, False), ("mixtral-8x7b", 8, False),
                                        ("mixtral-8x7b", 4, True), ("glam", 8, False), ("glam", 16, False),
                                        ("grok-1", 16, False), ("grok-1", 8, False), ("mixtral-8x7b", 3, False),
                                        ("glam", 32, False)])
def test_every_device_spreads_its_experts_over_every_bundle_space(model, n, et):
    """Issue 22: with the old layout (expert e in space e mod 4) a device's experts all shared one space
    whenever the device count was a multiple of 4, so Logic-PIM could never overlap one bundle's precharge and
    activate with another's reads. Every device now uses all four spaces, and its experts' rows are even."""
    c = _compiler(model, n=n, expert_tensor_parallel=et)
    for ids, spaces in zip(c.expert_devices(), _spaces_per_device(c), strict=True):
        assert spaces == {0, 1, 2, 3}, f"{model} on {n} devices: experts {ids} use spaces {sorted(spaces)}"
    # the old layout collides exactly where the issue says (device counts that are multiples of 4)
    old = _compiler(model, n=n, expert_tensor_parallel=et,
                    layout={"expert_spaces": [0, 1, 2, 3], "kv_spaces": [0, 1, 2], "prefill_qkv_space": 3,
                            "expert_placement": "global_modulo"})
    groups = len(old.expert_devices())
    if groups % 4 == 0:
        assert all(len(s) == 1 for s in _spaces_per_device(old))
    # rows of one expert split evenly over its spaces
    segs = c.expert_segments([(0, 4)])
    rows = [s.rows for s in segs]
    assert max(rows) - min(rows) <= 1 and len({s.space for s in segs}) == len(segs)


def test_spreading_the_experts_speeds_up_decode_moe_on_logic_pim():
    """Mixtral on 4 devices: each device holds 2 experts; in one space their bundle rows cannot overlap
    precharge/activate, in two they can. The per-device layout's decode MoE is measurably faster."""
    stage = Stage((), (600,) * 32)
    layout = {"expert_spaces": [0, 1, 2, 3], "kv_spaces": [0, 1, 2], "prefill_qkv_space": 3}
    t = {pl: next(o for o in _compiler(layout={**layout, "expert_placement": pl}).stage(stage)[1]
                  if o.kind == "moe" and o.unit == "low").seconds for pl in ("per_device", "global_modulo")}
    assert t["global_modulo"] > 1.1 * t["per_device"], f"decode MoE on Logic-PIM: {t}"


def test_moe_functional_matches_numpy_for_every_split():
    rng = np.random.default_rng(3)
    d, f, n_ex, k, tokens = 32, 48, 4, 2, 10
    x = rng.standard_normal((tokens, d)).astype(np.float32)
    gate = rng.standard_normal((d, n_ex)).astype(np.float32)
    experts = [tuple(rng.standard_normal(s).astype(np.float32) / 4 for s in ((d, f), (d, f), (f, d)))
               for _ in range(n_ex)]
    # numpy reference: float64 MoE on the FP16-rounded weights
    r16 = lambda a: a.astype(np.float16).astype(np.float64)          # noqa: E731
    logits = x @ gate
    ref = np.zeros((tokens, d))
    for i in range(tokens):
        top = np.argsort(-logits[i], kind="stable")[:k]
        w = np.exp(logits[i, top] - logits[i, top].max())
        w /= w.sum()
        for e, wt in zip(top, w, strict=True):
            wg, wu, wd = experts[e]
            g, u = r16(x[i]) @ r16(wg), r16(x[i]) @ r16(wu)
            ref[i] += wt * (r16((g / (1 + np.exp(-g))) * u) @ r16(wd))
    for on_low in ({0, 1, 2, 3}, set(), {1, 3}):
        got = moe_functional(x, gate, experts, k, on_low, stacks=5)
        np.testing.assert_allclose(got, ref, rtol=2e-2, atol=2e-2)


def test_engine_time_is_at_least_the_roofline_for_every_low_op():
    c = _compiler()
    for stage in (Stage((), (1500,) * 32), Stage((), (300,) * 8)):
        for o in c.stage(stage)[1]:
            if o.unit == "low":
                assert o.seconds >= o.roofline_s * 0.999, o


def test_edap_by_op_b_orders_the_designs_as_the_paper():
    """Paper Fig. 8: Bank-PIM best below Op/B 8, Logic-PIM best from 8 up, BankGroup-PIM never better than
    Logic-PIM (same peak, DRAM-process units and 2.68 vs 1.81 pJ/b)."""
    from archsim.systems.duplex.compiler import edap_by_opb

    df = edap_by_opb(timer=TIMER)
    best = df.loc[df.groupby("op_b").edap.idxmin()].set_index("op_b").design
    assert [best[o] for o in (1, 2, 4)] == ["Bank-PIM"] * 3
    assert [best[o] for o in (8, 16, 32)] == ["Logic-PIM"] * 3
    piv = df.pivot(index="design", columns="op_b", values="edap")
    assert (piv.loc["BankGroup-PIM"] > piv.loc["Logic-PIM"]).all()
    lp = df[df.design == "Logic-PIM"]
    assert (lp.engine_delay_s >= lp.delay_s * 0.999).all()


def test_serving_metrics_closed_loop_and_poisson():
    rng = np.random.default_rng(0)
    reqs = make_requests(6, 100, 5, rng)
    assert [r.arrival_s for r in reqs] == [0.0] * 6
    served = ContinuousBatcher(3, 10**9, 1, lambda b: 0.01 + 0.001 * b.prefill_tokens).run(reqs)
    m = serving_metrics(served)
    assert m["output_tokens"] == 30
    assert len(tbt_samples(served)) == 6 * 4                 # every token after the first
    assert m["tbt_p50_s"] == pytest.approx(0.01)
    assert m["ttft_p50_s"] >= 0.11
    poisson = make_requests(200, 10, 10, np.random.default_rng(1), qps=50.0)
    gaps = np.diff([0.0] + [r.arrival_s for r in poisson])
    assert gaps.mean() == pytest.approx(1 / 50, rel=0.2)
    jitter = make_requests(300, 100, 50, np.random.default_rng(2), length_std=0.2, max_context=160)
    assert all(r.prompt_tokens + r.output_tokens <= 160 for r in jitter)
    assert np.std([r.prompt_tokens for r in jitter]) > 5


# batch 64: the regime of the paper's Bank-PIM comparison (at batch 16 a Mixtral expert sees 4 tokens, Op/B 4,
# where Bank-PIM's 16x bandwidth wins)
SMALL = {"requests": 64, "input_len": 256, "output_len": 64, "max_batch": 64}


@pytest.fixture(scope="module")
def small_runs():
    out = {}
    for model in ("mixtral-8x7b", "opt-66b"):
        for dev in ("gpu", "2xgpu", "duplex", "bank_pim"):
            out[model, dev] = DuplexRun({"model": model, "device": dev, **SMALL}, timer=TIMER).run().stats
    return out


def test_small_serving_comparison(small_runs):
    r = small_runs
    mx = {d: r["mixtral-8x7b", d] for d in ("gpu", "2xgpu", "duplex", "bank_pim")}
    assert mx["duplex"]["throughput_tokens_per_s"] > 1.3 * mx["gpu"]["throughput_tokens_per_s"]
    assert mx["duplex"]["tbt_p50_s"] < mx["gpu"]["tbt_p50_s"]
    assert mx["duplex"]["energy_per_token_j"] < mx["gpu"]["energy_per_token_j"]
    assert mx["2xgpu"]["throughput_tokens_per_s"] > mx["gpu"]["throughput_tokens_per_s"]
    # GQA (Mixtral): Duplex above Bank-PIM; MHA (OPT, decode Op/B 1): Bank-PIM above Duplex (the paper's finding)
    assert mx["duplex"]["throughput_tokens_per_s"] > mx["bank_pim"]["throughput_tokens_per_s"]
    assert r["opt-66b", "bank_pim"]["throughput_tokens_per_s"] > r["opt-66b", "duplex"]["throughput_tokens_per_s"]
    for s in r.values():
        assert s["output_tokens"] == 64 * 64
        assert s["tbt_p50_s"] <= s["tbt_p90_s"] <= s["tbt_p99_s"]


def test_expert_tensor_parallelism_splits_experts_over_a_node():
    et = _compiler("grok-1", n=16, expert_coprocessing=True, expert_tensor_parallel=True)
    ep = _compiler("grok-1", n=16)
    assert et.expert_groups() == (8, 2) and ep.expert_groups() == (2, 8)
    assert et.expert_shape()[0] * 4 == pytest.approx(ep.expert_shape()[0])
    ops = et.stage(Stage((), (900,) * 32))[1]
    ar = next(o for o in ops if o.name == "moe_allreduce")
    assert ar.seconds == pytest.approx(et.link_time(ar.bytes, "allreduce", group=8))   # NVLink inside the node
    assert et.link_time(1e6, "allreduce", group=8) < et.link_time(1e6, "allreduce")    # 16 devices: InfiniBand
    mx = _compiler("mixtral-8x7b", n=4, expert_coprocessing=True, expert_tensor_parallel=True)
    assert mx.expert_groups() == (4, 1)
    assert not any(o.name == "moe_all_to_all" for o in mx.stage(Stage((), (900,) * 32))[1])


def test_expert_coprocessing_pays_off_under_skewed_routing():
    """The paper: expert co-processing is best with hot and cold experts and weak under uniform routing. With
    the co-processing interference measured on the engine, the xPU experts slow down beside Logic-PIM, so
    under uniform routing the split (chosen from interference-free lookup tables, as the paper's) loses a
    little; under Zipf routing it still pays off."""
    gain = {}
    for inter in ("none", "engine"):
        for routing in ("uniform", "zipf"):
            tput = [DuplexRun({"routing": routing, "zipf_s": 1.2, **SMALL, "interference": inter,
                               "mapping_overrides": {"expert_coprocessing": pe}},
                              timer=TIMER).run().stats["throughput_tokens_per_s"] for pe in (False, True)]
            gain[inter, routing] = tput[1] / tput[0]
    msg = f"throughput with / without expert co-processing: {gain}"
    assert 1.0 <= gain["none", "uniform"] < 1.05, msg
    assert gain["none", "zipf"] > 1.2 and gain["engine", "zipf"] > 1.2, msg
    assert 0.85 < gain["engine", "uniform"] < gain["none", "uniform"], msg


def test_coprocessing_interference_is_measured_and_switchable():
    """Issue 22 item 5: the pairs that run at once (prefill attention on the xPU beside decode attention on
    Logic-PIM; experts split between the two) are slowed by the slow-downs measured on the channel engine
    and recorded in the result; interference none gives the interference-free time."""
    cfg = {**SMALL, **SHARED, "coprocessing_split": "lookup_table", "requests": 32, "max_batch": 16,
           "length_std": 0.3, "mapping_overrides": {"expert_coprocessing": True, "expert_tensor_parallel": True}}
    on = DuplexRun(cfg, timer=TIMER_SHARED).run()
    off = DuplexRun({**cfg, "interference": "none"}, timer=TIMER_SHARED).run()
    t = on.tables["interference"].set_index(["stage", "pair"])
    assert {("mixed", "attention"), ("decode", "experts")} <= set(t.index), t
    ex = t.loc[("decode", "experts")]
    assert 1.2 < ex.xpu_slowdown < 3 and 1.0 <= ex.low_slowdown < 1.2, t.to_string()
    assert ex.seconds > ex.alone_seconds
    assert on.stats["interference_added_s"] > 0 and off.stats["interference_added_s"] == 0
    assert off.stats["interference"] == "none" and on.stats["interference"] == "engine"
    assert on.stats["throughput_tokens_per_s"] < off.stats["throughput_tokens_per_s"], (
        on.stats["throughput_tokens_per_s"], off.stats["throughput_tokens_per_s"])
    assert (off.tables["interference"].xpu_slowdown == 1).all()
    roof = DuplexRun({**cfg, "pim_timing": "roofline"}, timer=TIMER_SHARED).run().stats
    assert roof["interference"] == "none" and "roofline" in roof["interference_note"]


@pytest.mark.parametrize("path", ["shared_column_bus", "own_path"])
def test_interference_run_on_one_channel(path):
    """The engine run behind the slow-downs: an xPU read stream at full demand beside a Logic-PIM KV stream
    loses a large share of its bandwidth when the bundles' RDBDs take the xPU's column command bus, next to
    nothing when they have their own path (issue 34); a light xPU demand loses nothing; Logic-PIM barely
    slows either way."""
    from archsim.pim.logic_pim import Segment

    timer = TIMER_SHARED if path == "shared_column_bus" else TIMER
    assert timer.spec.options["logic_pim.command_path"] == path
    kv = [Segment(0, 16, 4), Segment(1, 16, 4), Segment(2, 16, 4)]
    full = timer.interference(kv, (3,), 1.0)
    light = timer.interference(kv, (3,), 0.3)
    assert full["xpu_bw_alone"] > 0.85, full
    if path == "shared_column_bus":
        assert 1.5 < full["xpu_slowdown"] < 2.2, full
    else:
        assert full["xpu_slowdown"] < 1.05, full
    assert full["low_slowdown"] < 1.05, full
    assert light["xpu_slowdown"] == pytest.approx(1.0, abs=0.02), light


def test_poisson_load_saturates():
    tput = []
    for qps in (1.0, 1000.0):
        s = DuplexRun({"device": "gpu", "requests": 24, "input_len": 256, "output_len": 32, "max_batch": 8,
                       "qps": qps}).run().stats
        tput.append(s["throughput_requests_per_s"])
    assert tput[0] == pytest.approx(1.0, rel=0.5)            # light load: served as it arrives
    assert tput[1] < 1000 / 4                                # heavy load: capped by the device


def test_prefill_budget_splits_a_burst_into_mixed_stages():
    reqs = make_requests(6, 100, 3, np.random.default_rng(0))
    served = DuplexBatcher(8, 10**9, 1, lambda b: 0.01, max_prefill_tokens=250).run(reqs)
    pre = [sum(1 for e in it.batch.entries if e.phase == "prefill") for it in served.iterations]
    assert pre[:3] == [2, 2, 2]
    assert max(it.batch.size for it in served.iterations) == 6
    unbounded = DuplexBatcher(8, 10**9, 1, lambda b: 0.01).run(reqs)
    assert sum(1 for e in unbounded.iterations[0].batch.entries if e.phase == "prefill") == 6
    # the KV reservation holds requests back like ContinuousBatcher's
    tight = DuplexBatcher(8, 2 * 103, 1, lambda b: 0.01).run(reqs)
    assert max(it.batch.size for it in tight.iterations) == 2


def test_duplex_batcher_is_the_base_batcher_plus_a_prompt_budget():
    """DuplexBatcher runs ContinuousBatcher's loop (admission, one token per request, retirement): without a
    budget every iteration and record equals the base's, and with one the base's invariants still hold (the
    KV recorded for an iteration is what its batch reserved, before its retirements)."""
    reqs = make_requests(60, 40, 6, np.random.default_rng(3), length_std=0.5, qps=400.0)
    fn = lambda b: 1e-3 + 1e-6 * b.prefill_tokens + 1e-5 * b.size      # noqa: E731
    kv_per_token, cap = 3, 3 * 250
    base = ContinuousBatcher(8, cap, kv_per_token, fn).run(reqs)
    dup = DuplexBatcher(8, cap, kv_per_token, fn).run(reqs)
    first_diff = next((i for i, (a, b) in enumerate(zip(base.iterations, dup.iterations, strict=False)) if a != b), None)
    assert len(dup.iterations) == len(base.iterations) and first_diff is None, \
        f"{len(dup.iterations)} vs {len(base.iterations)} iterations; first differing: {first_diff}"
    assert dup.admission_order == base.admission_order
    assert dup.requests_df().equals(base.requests_df())
    by_id = {r.id: r for r in reqs}
    budget = DuplexBatcher(8, cap, kv_per_token, fn, max_prefill_tokens=60).run(reqs)
    over = [it.index for it in base.iterations if sum(by_id[i].prompt_tokens for i in it.admitted) > 60]
    assert over and [it.admitted for it in budget.iterations] != [it.admitted for it in base.iterations], \
        f"the budget never binds: base stages over 60 prompt tokens: {over}"
    for it in budget.iterations:
        reserved = sum(by_id[e.request_id].total_tokens for e in it.batch.entries) * kv_per_token
        assert it.kv_reserved_bytes == reserved, (it.index, it.kv_reserved_bytes, reserved)
        prompts = [by_id[i].prompt_tokens for i in it.admitted]
        assert len(prompts) <= 1 or sum(prompts) <= 60, (it.index, prompts)


def test_registered_and_config_errors():
    from archsim import api

    res = api.run({"system": "duplex", "device": "gpu", "requests": 2, "input_len": 64, "output_len": 4,
                   "max_batch": 2})
    assert res.stats["output_tokens"] == 8
    for bad, key in (({"device": "tpu"}, "device"), ({"pim_timing": "fast"}, "pim_timing"),
                     ({"qps": -1}, "qps"), ({"requests": 0}, "requests"), ({"bogus": 1}, "bogus"),
                     ({"routing": "hot"}, "routing")):
        with pytest.raises(ConfigError) as exc:
            resolve(bad)
        assert exc.value.key_path == key
    with pytest.raises(UserError, match="max context"):
        DuplexRun({"model": "opt-66b", "input_len": 2000, "output_len": 100})
    with pytest.raises(ConfigError, match="dispatch.decode.qkv"):
        load_policy("duplex", {"dispatch": {"decode": {"qkv": "low"}, "mixed": {}}})


def test_policy_switches_are_first_class_keys_and_the_old_paths_still_work():
    """Issue 27 item 13: expert co-processing, expert tensor parallelism, attention co-processing and the Op/B
    rule are keys of system duplex; mapping_overrides still sets them; both ways at odds is an error."""
    from archsim.systems.duplex.system import policy_overrides

    base = {"requests": 4, "input_len": 64, "output_len": 4, "max_batch": 4}
    new = DuplexRun({**base, "expert_coprocessing": True, "expert_tensor_parallel": True, "dispatch_rule": "opb",
                     "opb_threshold": 8}, timer=TIMER).policy
    old = DuplexRun({**base, "mapping_overrides": {"expert_coprocessing": True, "expert_tensor_parallel": True,
                                                   "rule": "opb", "opb_threshold": 8}}, timer=TIMER).policy
    assert new == old and new.expert_coprocessing and new.rule == "opb" and new.opb_threshold == 8
    assert DuplexRun(base, timer=TIMER).policy == load_policy("duplex")        # absent: the mapping file's
    assert "expert_coprocessing" not in resolve(base)                        # absent keys keep the config hash
    with pytest.raises(ConfigError) as exc:
        policy_overrides({"expert_coprocessing": True, "mapping_overrides": {"expert_coprocessing": False}})
    assert exc.value.key_path == "expert_coprocessing"
    with pytest.raises(ConfigError) as exc:
        resolve({"dispatch_rule": "fastest"})
    assert exc.value.key_path == "dispatch_rule"
    from archsim.cli import main

    assert main(["run", "--system", "duplex", "--quiet", "--set", "device=gpu", "--set", "requests=2", "--set",
                 "input_len=32", "--set", "output_len=2", "--expert-coprocessing", "--set", "opb_threshold=8"]) == 0


def test_cli_bad_value_exits_2(tmp_path, capsys):
    from archsim.cli import main

    code = main(["run", "--system", "duplex", "--set", "device=tpu"])
    assert code == 2
    assert "Traceback" not in capsys.readouterr().err


MOE_MODELS = ("mixtral-8x7b", "glam", "grok-1")
VARIANTS = {"Duplex": {}, "Duplex+PE": {"expert_coprocessing": True},
            "Duplex+PE+ET": {"expert_coprocessing": True, "expert_tensor_parallel": True}}


def _duplex_over_gpu(model, cfg):
    gpu = DuplexRun({**cfg, "model": model, "device": "gpu"}).run().stats
    out = {}
    for name, pol in VARIANTS.items():
        s = DuplexRun({**cfg, "model": model, "device": "duplex", "mapping_overrides": pol}, timer=TIMER).run().stats
        out[name] = (s["throughput_tokens_per_s"] / gpu["throughput_tokens_per_s"],
                     s["energy_per_token_j"] / gpu["energy_per_token_j"])
    return out


@pytest.mark.parametrize("model", MOE_MODELS)
def test_duplex_beats_the_gpu_on_every_moe_model_small(model):
    """The paper's claim (Duplex > GPU on every MoE model), on a small case: every Duplex variant, with the
    co-processing interference on, serves more tokens/s and spends less energy per token than the GPU."""
    r = _duplex_over_gpu(model, {"requests": 16, "input_len": 128, "output_len": 32, "max_batch": 16})
    msg = f"{model}: (throughput, energy per token) relative to the GPU: {r}"
    assert all(sp > 1.0 and en < 1.0 for sp, en in r.values()), msg


@pytest.mark.slow
@pytest.mark.parametrize("model", MOE_MODELS)
def test_duplex_beats_the_gpu_on_every_moe_model(model):
    """reports/duplex/ configuration ((1024, 1024), batch 64, 128 requests): every Duplex variant above the GPU
    in throughput and below it in energy per token on every MoE model (the paper: up to 2.67x, -28 % energy)."""
    r = _duplex_over_gpu(model, {"requests": 128, "input_len": 1024, "output_len": 1024, "max_batch": 64})
    msg = f"{model}: (throughput, energy per token) relative to the GPU: {r}"
    assert all(sp > 1.0 and en < 1.0 for sp, en in r.values()), msg


@pytest.mark.slow
@pytest.mark.parametrize("model", ["llama3-70b", "opt-66b"])
def test_full_model_runs_against_gpu(model):
    """Dense models (Logic-PIM runs only decode attention): Duplex at least matches the GPU."""
    cfg = {"model": model, "requests": 128, "input_len": 1024, "output_len": 1024, "max_batch": 64}
    gpu = DuplexRun({**cfg, "device": "gpu"}).run().stats
    dx = DuplexRun({**cfg, "device": "duplex"}, timer=TIMER).run().stats
    msg = (f"{model}: Duplex {dx['throughput_tokens_per_s']:.0f} tok/s, {dx['energy_per_token_j']:.4f} J/token; "
           f"GPU {gpu['throughput_tokens_per_s']:.0f} tok/s, {gpu['energy_per_token_j']:.4f} J/token")
    assert dx["throughput_tokens_per_s"] >= 0.95 * gpu["throughput_tokens_per_s"], msg
    assert dx["energy_per_token_j"] <= gpu["energy_per_token_j"], msg


@pytest.mark.slow
def test_reproduction_against_the_paper():
    """reports/duplex/ configuration ((1024, 1024), batch 64, 128 requests): the figures where archsim claims
    agreement with the paper, with tolerances (the gaps are explained in reports/duplex/README.md)."""
    cfg = {"requests": 128, "input_len": 1024, "output_len": 1024, "max_batch": 64}
    stats = {}
    for model in ("mixtral-8x7b", "glam", "grok-1", "llama3-70b", "opt-66b"):
        for dev in ("gpu", "duplex", "bank_pim"):
            stats[model, dev] = DuplexRun({**cfg, "model": model, "device": dev}, timer=TIMER).run().stats
    rel = lambda m, key: stats[m, "duplex"][key] / stats[m, "gpu"][key] - 1        # noqa: E731
    models = ("mixtral-8x7b", "glam", "grok-1", "llama3-70b", "opt-66b")
    tbt = rel("glam", "tbt_p50_s")
    assert tbt == pytest.approx(-0.583, abs=0.10), f"GLaM median TBT vs GPU {tbt:+.1%} (paper -58.3 %)"
    energy = np.mean([rel(m, "energy_per_token_j") for m in models])
    assert energy == pytest.approx(-0.2819, abs=0.10), f"mean energy per token vs GPU {energy:+.1%} (paper -28.19 %)"
    speed = {m: stats[m, "duplex"]["throughput_tokens_per_s"] / stats[m, "gpu"]["throughput_tokens_per_s"]
             for m in models}
    assert 1.0 < min(speed.values()) and max(speed.values()) <= 2.67 * 1.1, f"Duplex / GPU {speed} (paper: up to 2.51x)"
    tp = {k: s["throughput_tokens_per_s"] for k, s in stats.items()}
    assert tp["opt-66b", "bank_pim"] > tp["opt-66b", "duplex"], tp                 # MHA: Bank-PIM wins
    for m in ("mixtral-8x7b", "llama3-70b", "grok-1"):                               # GQA: Duplex wins
        assert tp[m, "duplex"] > tp[m, "bank_pim"], tp


def test_data_parallel_replicas_serve_their_share_side_by_side():
    """Two replicas of the device group, each serving every second request: with identical requests (fixed
    lengths, closed loop) each replica runs exactly what one group runs for half the requests, so the
    makespan is the same, throughput doubles and the devices double."""
    base = {"model": "mixtral-8x7b", "device": "duplex", "input_len": 128, "output_len": 8, "max_batch": 8}
    one = DuplexRun({**base, "requests": 16}, timer=TIMER).run().stats
    two = DuplexRun({**base, "requests": 32, "data_parallel": 2}, timer=TIMER).run().stats
    assert two["makespan_s"] == pytest.approx(one["makespan_s"], rel=1e-12)
    assert two["throughput_tokens_per_s"] == pytest.approx(2 * one["throughput_tokens_per_s"], rel=1e-12)
    assert two["devices"] == 2 * one["devices"] and two["requests"] == 32
    assert two["tbt_p50_s"] == pytest.approx(one["tbt_p50_s"])
    assert two["energy_j"] == pytest.approx(2 * one["energy_j"], rel=1e-9)


@pytest.mark.parametrize("model", ["mixtral-8x7b", "glam", "grok-1", "llama3-70b", "opt-66b"])
def test_the_weights_rule_gives_the_papers_device_count(model):
    # The count a model outside the paper's Table I gets must be the paper's own sizing: on every model the
    # paper lists, the rule (fewest devices, a power of two, that the weights fill at most half) agrees.
    from archsim.systems.duplex.compiler import make_device, paper_devices
    from archsim.systems.duplex.system import devices_for_weights

    memory = make_device("duplex", "roofline").memory_bytes
    got = devices_for_weights(load_model(model).weight_bytes, memory)
    assert got == paper_devices(model), (model, load_model(model).weight_bytes / memory, got)


def test_a_user_config_json_runs_with_the_weights_rule(tmp_path):
    # A Mixtral config.json under another name is not in the paper's table: it runs on the rule's 4 devices
    # (the result says where the count came from) instead of being refused until `devices` is set.
    import shutil
    from pathlib import Path

    cfg = tmp_path / "config.json"
    shutil.copy(Path(__file__).parent / "fixtures" / "hf" / "mixtral-8x7b.json", cfg)
    run = DuplexRun({"model": str(cfg), "requests": 2, "max_batch": 2, "input_len": 32, "output_len": 2,
                     "pim_timing": "roofline"})
    assert (run.D, run.devices_source) == (4, "weights")
    assert DuplexRun({"model": str(cfg), "devices": 8, "pim_timing": "roofline"}).devices_source == "config"
    assert DuplexRun({"model": "mixtral-8x7b", "pim_timing": "roofline"}).devices_source == "paper"


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 3000), st.integers(0, 40), st.integers(0, 2**31))
def test_sampled_routing_draws_k_distinct_experts_per_token(tokens, layer, seed):
    """routing sampled (LLMSimulator's rule): every token goes to k distinct experts, so the counts sum to
    tokens x k and none exceeds the tokens; the draw is a function of (seed, layer, tokens) alone."""
    m = load_model("mixtral-8x7b")
    c = routing_counts(m, tokens, "sampled", layer=layer, seed=seed)
    assert c.sum() == tokens * m.experts_per_token and c.min() >= 0 and c.max() <= tokens
    assert (c == routing_counts(m, tokens, "sampled", layer=layer, seed=seed)).all()


def test_sampled_routing_unbalances_devices_and_matches_the_binomial_spread():
    """A finite batch routed at random loads experts unequally: over many layers the counts' spread is the
    binomial one (variance T p (1 - p) per expert with p = k / n), where the expected counts have none."""
    m = load_model("mixtral-8x7b")
    tokens, p = 64, m.experts_per_token / m.n_experts
    draws = np.array([routing_counts(m, tokens, "sampled", layer=layer, seed=1) for layer in range(400)])
    assert draws.var() == pytest.approx(tokens * p * (1 - p), rel=0.08)     # each count ~ Binomial(T, k / n)
    assert np.ptp(routing_counts(m, tokens, "uniform")) == 0


def test_sampled_routing_slows_compute_bound_experts_and_not_memory_bound_ones():
    """Logic-PIM runs Mixtral's experts compute-bound (16 tokens per expert at Op/B 8), so the busiest device
    sets the layer's time and random routing slows it; the GPU's experts are memory-bound (weights read once
    whatever the tokens), so it barely moves."""
    tput = {}
    for dev, extra in (("duplex", {"pim_timing": "roofline"}), ("gpu", {})):
        for routing in ("uniform", "sampled"):
            cfg = {"model": "mixtral-8x7b", "device": dev, "routing": routing, **SMALL, **extra}
            tput[dev, routing] = DuplexRun(cfg, timer=TIMER).run().stats["throughput_tokens_per_s"]
    assert tput["duplex", "sampled"] < 0.97 * tput["duplex", "uniform"], tput
    assert tput["gpu", "sampled"] == pytest.approx(tput["gpu", "uniform"], rel=0.01), tput


def test_memory_cap_unlimited_admits_the_whole_batch_where_the_kv_cache_does_not_fit():
    """OPT-66B on 4 devices: the memory beside the weights holds fewer final KV caches than the batch limit,
    so by default fewer requests are in flight; memory_cap unlimited (LLMSimulator as the report's driver runs it)
    keeps the full batch and serves faster. A config without the key keeps its resolved form (and hash)."""
    cfg = {"model": "opt-66b", "device": "gpu", "requests": 128, "max_batch": 64, "input_len": 1024,
           "output_len": 1024}
    on, off = DuplexRun(cfg), DuplexRun({**cfg, "memory_cap": "unlimited"})
    assert on.kv_capacity < 64 * on.model.kv_bytes_per_token * 2048
    assert off.run().stats["throughput_tokens_per_s"] > 1.1 * on.run().stats["throughput_tokens_per_s"]
    assert "memory_cap" not in resolve({"model": "opt-66b"})
    with pytest.raises(ConfigError, match="memory_cap"):
        resolve({"memory_cap": "maybe"})


def _bank_pim_compiler(dispatch: str) -> Compiler:
    """Mixtral on 4 Bank-PIM devices (2 experts each), the report's Bank-PIM row, dispatch `dispatch`."""
    run = DuplexRun({"model": "mixtral-8x7b", "device": "bank_pim", "dispatch": dispatch})
    return run.compiler


def test_per_expert_dispatch_puts_each_expert_on_the_unit_its_own_token_count_favours():
    """Bank-PIM's low unit is faster than the xPU for few tokens per expert and slower for many (the lookup
    table's crossover lies between 1 and 64 tokens); dispatch per_expert puts a 1-token expert on the low unit and
    a 64-token one on the xPU, where dispatch layer keeps both on the decode table's unit (low)."""
    c = _bank_pim_compiler("per_expert")
    assert c.expert_table(1)[1] < c.expert_table(1)[0] and c.expert_table(64)[0] < c.expert_table(64)[1]
    on_x, on_l = c.fastest_units([(0, 64), (4, 1)])
    assert on_x == [(0, 64)] and on_l == [(4, 1)]
    assert c.expert_units == {"xpu": 1, "low": 1}
    # a whole decode stage whose routing is skewed: the hot device's experts move to the xPU and it finishes
    # sooner than with the layer's one unit
    skew = {"routing": "zipf", "zipf_s": 3.0}
    layer, per = (DuplexRun({"model": "mixtral-8x7b", "device": "bank_pim", "dispatch": d, **skew}).compiler
                  for d in ("layer", "per_expert"))
    decode = Stage((), (512,) * 64)
    t_layer, ops_layer = layer.stage(decode)
    t_per, ops_per = per.stage(decode)
    assert {o.unit for o in ops_layer if o.kind == "moe"} == {"low"}
    assert "xpu" in {o.unit for o in ops_per if o.kind == "moe"}
    assert t_per < t_layer
    assert per.expert_units["xpu"] > 0 and per.expert_units["low"] > 0


def test_per_expert_dispatch_equals_layer_dispatch_under_uniform_routing():
    """Uniform routing gives every expert the mean count, where the layer's unit is already the faster one on
    the report's Bank-PIM Mixtral row (16 tokens per expert at batch 64): the two dispatches time every stage
    alike, and a whole run records what per_expert chose."""
    base = {"model": "mixtral-8x7b", "device": "bank_pim", "requests": 64, "max_batch": 64, "input_len": 64,
            "output_len": 32}
    res = {d: DuplexRun({**base, "dispatch": d}).run().stats for d in ("layer", "per_expert")}
    assert res["per_expert"]["throughput_tokens_per_s"] == res["layer"]["throughput_tokens_per_s"]
    assert res["layer"]["dispatch"] == "layer" and "dispatch_experts_on_low" not in res["layer"]
    assert res["per_expert"]["dispatch_experts_on_low"] > 0
    for stage in (Stage((), (100,) * 64), Stage((64,) * 4, (100,) * 60)):
        assert _bank_pim_compiler("layer").stage(stage)[0] == _bank_pim_compiler("per_expert").stage(stage)[0]


def test_dispatch_key_is_optional_and_checked():
    assert "dispatch" not in resolve({"model": "mixtral-8x7b"})
    with pytest.raises(ConfigError, match="dispatch"):
        resolve({"dispatch": "per_token"})


def test_fresh_draws_of_the_measurement_script_draw_anew_every_iteration():
    """reports/duplex/sampled_draws.py's fresh mode: every stage gets its own seed and is timed anew, so two calls
    on one stage shape draw different routings, where archsim's own sampled routing reuses one."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "reports" / "duplex" / "sampled_draws.py"
    spec = importlib.util.spec_from_file_location("sampled_draws", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    cfg = {"model": "mixtral-8x7b", "device": "bank_pim", "routing": "sampled"}
    stage = Stage((), (300,) * 64)
    reused = DuplexRun(cfg)
    assert reused.compiler.stage(stage)[0] == reused.compiler.stage(stage)[0]
    fresh = DuplexRun(cfg)
    mod.fresh_draws(fresh)
    t1, t2 = fresh.compiler.stage(stage)[0], fresh.compiler.stage(stage)[0]
    assert fresh.compiler.seed == 1 and len(fresh.compiler.stage_memo) == 1
    assert t1 != t2
