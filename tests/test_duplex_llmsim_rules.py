"""Duplex: LLMSimulator's co-processing split rule (coprocessing_split llmsimulator) and its two-node layout
(mapping key non_expert_parallel per_node), the toggles reports/duplex/ runs beside LLMSimulator (issue 34).
The rule's expected splits are worked by hand from its cost model (route.cpp:34-127 of the helios fork, as
compiler.llmsimulator_xpu_set's docstring states it)."""
from __future__ import annotations

import pytest

from archsim.errors import ConfigError
from archsim.systems.duplex.compiler import (
    Compiler,
    Stage,
    llmsimulator_xpu_set,
    load_policy,
    make_device,
)
from archsim.systems.duplex.system import DuplexRun, resolve
from archsim.workload import load_model

RIDGE = 989.4e12 / 3.352e12          # the xPU preset's ridge point (FLOPs per byte)
LOW = {"xpu_ridge": RIDGE, "low_bw_x": 4.0, "low_op_b": 8.0}


@pytest.mark.parametrize("tokens, want", [
    # decode, Mixtral on 4 devices, batch 64: 16 tokens per expert cost Logic-PIM 1.5 / 4 each (0.75 in all),
    # below the xPU's floor of one weight read: nothing moves
    ([16, 16], []),
    # a 1024-token prompt in the stage: 272 tokens per expert cost Logic-PIM 25.5 / 4 each, the xPU 1: both move
    ([272, 272], [0, 1]),
    # 8 local experts move in 4 groups of 2 consecutive ones: Logic-PIM 0.797 each (6.375 in all); the first two
    # groups lower the max (2 vs 4.78, 4 vs 3.19), the third does not (6 vs 1.59)
    ([34] * 8, [0, 1, 2, 3]),
    # the hottest group first, whatever its position
    ([1, 1, 1, 1, 60, 60, 1, 1], [4, 5]),
    # zero-token experts still cost a quarter of a weight read on Logic-PIM: seven idle experts lift the low sum
    # to 2.03, so the one busy expert's group (with its idle neighbour) moves to the xPU (2 < 2.03) ...
    ([12, 0, 0, 0, 0, 0, 0, 0], [0, 1]),
    # ... where alone it would stay (0.28 on Logic-PIM against 1 on the xPU)
    ([12], []),
    # more than 4 experts, not a multiple of 4: one at a time (as the HBF fork; the helios fork aborts)
    ([200, 0, 0, 0, 150], [0, 4]),
])
def test_llmsimulator_rule_moves_the_experts_its_cost_model_says(tokens, want):
    assert llmsimulator_xpu_set(tokens, **LOW) == want


def test_llmsimulator_rule_walks_until_a_move_stops_lowering_the_max():
    """400 tokens: Logic-PIM 9.38, the xPU 1.02 (compute-bound just past the ridge); three 30-token experts 0.70
    each on Logic-PIM. Moving the hot one (max 2.11) and then one 30-token expert (2.02) lower the max, the next
    (3.02) does not; the split is cheaper than all on Logic-PIM."""
    tokens = [400, 30, 30, 30]
    got = llmsimulator_xpu_set(tokens, **LOW)

    def cost(high: set[int]) -> float:
        x = sum(max(1.0, t * 0.75 / RIDGE) for i, t in enumerate(tokens) if i in high)
        lo = sum(max(1.0, t * 0.75 / 8) / 4 for i, t in enumerate(tokens) if i not in high)
        return max(x, lo)

    assert got == [0, 1]
    assert cost(set(got)) < cost(set()) and cost(set(got)) < cost({0, 1, 2})


def _compiler(model="mixtral-8x7b", n=4, split="llmsimulator", routing="uniform", **pol):
    return Compiler(load_model(model), make_device("duplex", "roofline"), n,
                    load_policy("duplex", {"expert_coprocessing": True, **pol}), routing=routing, split=split)


def test_llmsimulator_split_records_which_experts_went_where():
    c = _compiler()
    c.stage(Stage((), (512,) * 64))                     # decode: every expert stays on Logic-PIM
    assert c.split_log and all(s["xpu"] == [] and s["stage"] == "decode" for s in c.split_log)
    assert c.decisions["split_experts_on_xpu"] == 0 and c.decisions["split_experts_on_low"] == 8
    c.stage(Stage((1024,), (512,) * 63))                # a prompt in the stage: both of a device's experts move
    mixed = [s for s in c.split_log if s["stage"] == "mixed"]
    assert len(mixed) == 4 and all(len(s["xpu"]) == 2 and s["low"] == [] for s in mixed)
    # the placement is per device: device d holds experts d and d + 4 (expert e on group e mod 4)
    assert sorted(e for s in mixed for e in s["xpu"]) == list(range(8))


def test_llmsimulator_split_moves_fewer_experts_than_archsims_under_sampled_routing():
    """A decode stage of 64 sequences with sampled routing (devices carry 7-27 tokens per expert): archsim's
    split, which costs both units with the lookup table, moves about a quarter of the experts to the xPU; the
    rule LLMSimulator costs them with moves only a few, and the stage is slower with it."""
    got = {}
    for split in ("interference_aware", "llmsimulator"):
        c = _compiler(split=split, routing="sampled")
        t = c.stage(Stage((), (2048,) * 64))[0]
        d = c.decisions
        got[split] = (t, d["split_experts_on_xpu"] / (d["split_experts_on_xpu"] + d["split_experts_on_low"]))
    assert got["interference_aware"][1] > 0.2 > 0.05 > got["llmsimulator"][1] > 0, got
    assert got["llmsimulator"][0] > got["interference_aware"][0], got


def test_a_run_records_the_split_rule_and_its_expert_counts():
    base = {"model": "mixtral-8x7b", "device": "duplex", "pim_timing": "roofline", "requests": 16, "max_batch": 16,
            "input_len": 64, "output_len": 8, "mapping_overrides": {"expert_coprocessing": True},
            "coprocessing_split": "llmsimulator"}
    s = DuplexRun(base).run().stats
    assert s["coprocessing_split"] == "llmsimulator"
    assert s["coprocessing_split_experts_on_xpu"] > 0 and s["coprocessing_split_experts_on_low"] > 0


def test_the_split_key_takes_llmsimulator_and_names_it_in_errors():
    assert resolve({"coprocessing_split": "llmsimulator"})["coprocessing_split"] == "llmsimulator"
    with pytest.raises(ConfigError, match="llmsimulator"):
        resolve({"coprocessing_split": "greedy"})


def test_per_node_layout_keeps_the_non_expert_all_reduce_inside_a_node():
    """Grok-1 on 16 devices (2 nodes of 8): per_node runs attention over the 8 devices of a node on half of the
    sequences, its all-reduce on NVLink; all_devices runs it over all 16, over InfiniBand."""
    per = _compiler("grok-1", 16, non_expert_parallel="per_node")
    alld = _compiler("grok-1", 16)
    assert (per.ne_tp, per.ne_dp) == (8, 2) and (alld.ne_tp, alld.ne_dp) == (16, 1)
    st = Stage((), (900,) * 32)
    assert per.node_share(st) == Stage((), (900,) * 16) and alld.node_share(st) == st
    ar_per = next(o for o in per.stage(st)[1] if o.name == "allreduce_attention")
    ar_all = next(o for o in alld.stage(st)[1] if o.name == "allreduce_attention")
    assert ar_per.seconds == pytest.approx(per.link_time(ar_per.bytes, "allreduce", group=8))   # NVLink
    assert ar_per.bytes == ar_all.bytes / 2 and ar_per.seconds < ar_all.seconds
    # only the tokens bound for the other node's experts cross InfiniBand: half of each device's share, one
    # direction's bytes (a transfer sends and receives at once: LLMSimulator's communication.cpp:261)
    ops = per.stage(st)[1]
    a2a = next(o for o in ops if o.name == "moe_all_to_all")
    m = load_model("grok-1")
    assert a2a.bytes == pytest.approx(16 * m.experts_per_token * m.d_model * m.dtype_bytes / 8 * 8 / 16)
    assert a2a.seconds == pytest.approx(per.link_time(a2a.bytes, "send", group=16))
    # then the gathered outputs are all-reduced over the node (LLMSimulator's moe_all_reduce_for_gather)
    gather = next(o for o in ops if o.name == "moe_allreduce_gather")
    assert gather.bytes == pytest.approx(16 * m.d_model * m.dtype_bytes)
    assert gather.seconds == pytest.approx(per.link_time(gather.bytes, "allreduce", group=8))
    assert not any(o.name == "moe_allreduce_gather" for o in alld.stage(st)[1])


def test_per_node_layout_changes_nothing_on_one_node():
    for st in (Stage((), (700,) * 64), Stage((1024, 512), (700,) * 40)):
        assert _compiler(non_expert_parallel="per_node").stage(st)[0] == _compiler().stage(st)[0]


def test_per_node_layout_needs_whole_nodes():
    with pytest.raises(ConfigError, match="non_expert_parallel"):
        _compiler("grok-1", 12, non_expert_parallel="per_node")
    with pytest.raises(ConfigError, match="non_expert_parallel"):
        load_policy("duplex", {"non_expert_parallel": "per_rack"})


def test_norm_and_residual_are_timed_as_llmsimulator_times_them_and_only_when_asked():
    """Llama-3 70B on 8 GPUs, a decode stage of 64 tokens: two norms (read activations + weight vector, write
    activations) and two residual adds (read two, write one) per layer, over the whole 64 x 8192 activations on
    every device, each a roofline of its own: 80 layers of them come to LLMSimulator's layernorm + residual
    columns of the Llama-3 2xGPU row (0.100885 + 0.150154 ms per decode iteration, llmsimulator_runs.csv)."""
    def comp(**pol):
        return Compiler(load_model("llama3-70b"), make_device("gpu", "roofline"), 8, load_policy("duplex", pol))

    st = Stage((), (1500,) * 64)
    on, off = comp(norm_and_residual=True), comp()
    t_on, ops_on = on.stage(st)
    t_off, ops_off = off.stage(st)
    nr = next(o for o in ops_on if o.kind == "norm_residual")
    assert not any(o.kind == "norm_residual" for o in ops_off)
    assert nr.count == 80 and t_on - t_off == pytest.approx(80 * nr.seconds)
    assert 80 * nr.seconds * 1e3 == pytest.approx(0.100885 + 0.150154, rel=2e-3)


def test_the_lm_head_can_be_left_untimed():
    def comp(**pol):
        return Compiler(load_model("llama3-70b"), make_device("gpu", "roofline"), 8, load_policy("duplex", pol))

    st = Stage((), (1500,) * 64)
    t_on, ops_on = comp().stage(st)
    t_off, ops_off = comp(time_lm_head=False).stage(st)
    head_on = next(o for o in ops_on if o.kind == "lm_head")
    head_off = next(o for o in ops_off if o.kind == "lm_head")
    assert head_on.seconds > 0 and head_off.seconds == 0 and head_off.energy_pj == 0
    assert t_on - t_off == pytest.approx(head_on.seconds)


def test_expert_allreduce_node_tokens_sizes_the_et_all_reduce_by_the_nodes_own_tokens():
    """Grok-1 +PE+ET on 2 nodes of 8 under per_node: the expert slices' all-reduce covers every token of the stage
    by default and the node's own (half of them) with node_tokens, as LLMSimulator sizes moe_all_reduce_for_e_tp
    (by the MoE layer's input, src/module/expert.cpp:185 of the helios fork); both over the node's 8 devices on
    NVLink, and the stage is faster by exactly the difference of the two all-reduces, once per MoE layer."""
    m = load_model("grok-1")
    st = Stage((), (900,) * 32)
    runs = {}
    for size in ("all_tokens", "node_tokens"):
        c = _compiler("grok-1", 16, split="interference_aware", expert_tensor_parallel=True,
                      non_expert_parallel="per_node", expert_allreduce=size)
        t, ops = c.stage(st)
        ar = next(o for o in ops if o.name == "moe_allreduce")
        assert ar.seconds == pytest.approx(c.link_time(ar.bytes, "allreduce", group=8))      # inside a node
        runs[size] = (t, ar)
    (t_all, ar_all), (t_node, ar_node) = runs["all_tokens"], runs["node_tokens"]
    assert ar_all.bytes == pytest.approx(32 * m.d_model * m.dtype_bytes)
    assert ar_node.bytes == pytest.approx(16 * m.d_model * m.dtype_bytes)
    assert t_all - t_node == pytest.approx(m.n_moe_layers * (ar_all.seconds - ar_node.seconds))
    assert t_node < t_all


@pytest.mark.parametrize("pol", [{"expert_tensor_parallel": True},
                                 {"expert_tensor_parallel": True, "non_expert_parallel": "per_node"},
                                 {"expert_tensor_parallel": False, "non_expert_parallel": "per_node"}])
def test_expert_allreduce_changes_nothing_on_one_node_or_without_et(pol):
    """On one node the node's tokens are the stage's (a one-node +PE+ET, e.g. Mixtral, keeps its times bit for bit);
    without expert tensor parallelism there is no such all-reduce (Grok-1 on two nodes)."""
    stages = (Stage((), (700,) * 64), Stage((1024, 512), (700,) * 40))
    for model, n in (("mixtral-8x7b", 4), ("grok-1", 16)):
        if n > 8 and pol["expert_tensor_parallel"]:
            continue
        for st in stages:
            a = _compiler(model, n, split="interference_aware", **pol).stage(st)[0]
            b = _compiler(model, n, split="interference_aware", expert_allreduce="node_tokens", **pol).stage(st)[0]
            assert a == b


def test_expert_allreduce_takes_two_sizes_and_names_them_in_errors():
    assert load_policy("duplex").expert_allreduce == "all_tokens"
    with pytest.raises(ConfigError, match="expert_allreduce"):
        load_policy("duplex", {"expert_allreduce": "half"})
