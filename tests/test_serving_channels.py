"""NeuPIMs channel placement: MHA latency estimator (Alg. 1), greedy min-load bin packing (Alg. 2) vs round
robin, and sub-batch partitioning (Alg. 3, simple)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.workload.serving import (
    assign_channels_gmlbp,
    assign_channels_round_robin,
    channel_loads,
    generate_requests,
    load_imbalance,
    mha_latency_cycles,
    mha_load_fn,
    partition_sub_batches,
)
from archsim.workload.spec import spec_from_mapping

# GPT3-7B as NeuPIMs configures it (NeuPIMs code): E 4096, 32 heads, 32 layers.
GPT3_7B = spec_from_mapping({"d_model": 4096, "n_layers": 32, "n_heads": 32, "vocab": 50257, "max_context": 2048})
LOAD = mha_load_fn(GPT3_7B, tp=4)


def test_mha_estimator_hand_numbers():
    # TP4: E' = 1024 (2 rows of 512), nh = 8, dk = 128 (4 tiles of 32 banks), seq 512 (16 tiles, 1 row).
    assert mha_latency_cycles(512, 4096, 32, 128, tp=4) == 2 * 100 + 2 * 16 * 184 + 1 * 8 * 100 + 1 * 8 * 4 * 184
    assert LOAD(512) == 12776
    # TP1, seq 1: E' = 4096 (8 rows), nh = 32.
    assert mha_latency_cycles(1, 4096, 32, 128) == 8 * 100 + 8 * 1 * 184 + 32 * 100 + 32 * 4 * 184 == 29024
    # seq 513 crosses both a 32-bank tile and a 512-element row
    assert LOAD(513) - LOAD(512) == 2 * 184 + 8 * 100 + 8 * 4 * 184
    loads = [LOAD(s) for s in range(1, 2049)]
    assert all(a <= b for a, b in zip(loads, loads[1:], strict=False))
    with pytest.raises(ValueError, match="tp"):
        mha_latency_cycles(10, 4096, 32, 128, tp=3)


def _imbalances(seq_lens, channels):
    g = assign_channels_gmlbp(seq_lens, channels, LOAD)
    r = assign_channels_round_robin(seq_lens, channels)
    return (load_imbalance(channel_loads(seq_lens, g, channels, LOAD)),
            load_imbalance(channel_loads(seq_lens, r, channels, LOAD)))


@pytest.mark.parametrize("dataset", ["sharegpt", "alpaca"])
def test_gmlbp_beats_round_robin_on_neupims_sized_batches(dataset):
    """NeuPIMs' setting: 64-512 decode requests on 32 channels, sequence = prompt + tokens generated so far.
    Seeded, so the check is deterministic; in all 150 batches GMLBP is no worse (measured: strictly better in 150 ShareGPT and 132 Alpaca batches)."""
    wins = 0
    for seed in range(150):
        rng = np.random.default_rng(seed)
        batch = int(rng.choice([64, 128, 256, 384, 512]))
        reqs = generate_requests(batch, dataset, seed=seed)
        seq = [r.prompt_tokens + int(rng.integers(1, r.output_tokens + 1)) for r in reqs]
        g, r = _imbalances(seq, 32)
        assert g <= r
        wins += g < r
    assert wins >= 120          # strictly better in most; equal when the step-shaped loads tie


@settings(max_examples=300, deadline=None)
@given(seq=st.lists(st.integers(1, 2048), min_size=1, max_size=80), channels=st.integers(1, 16))
def test_gmlbp_is_within_grahams_lpt_bound_of_round_robin(seq, channels):
    """Exactly provable on every input: LPT's makespan <= (4/3 - 1/(3C)) x optimum <= that x round robin's,
    and the greedy rule keeps max - min load <= the largest single request's load."""
    g = channel_loads(seq, assign_channels_gmlbp(seq, channels, LOAD), channels, LOAD)
    r = channel_loads(seq, assign_channels_round_robin(seq, channels), channels, LOAD)
    assert sum(g) == sum(r) == sum(LOAD(s) for s in seq)
    assert max(g) * 3 * channels <= (4 * channels - 1) * max(r)
    assert max(g) - min(g) <= max(LOAD(s) for s in seq)


def test_round_robin_can_beat_gmlbp_on_tiny_inputs():
    """Why the imbalance comparison above is over realistic batches and not every input: greedy is a
    heuristic. Loads 2,3,2,3,2 on 2 channels: round robin happens to split 6 / 6, LPT gives 7 / 5."""
    ident = float
    seq = [2, 3, 2, 3, 2]
    g = channel_loads(seq, assign_channels_gmlbp(seq, 2, ident), 2, ident)
    r = channel_loads(seq, assign_channels_round_robin(seq, 2), 2, ident)
    assert sorted(g) == [5, 7] and sorted(r) == [6, 6]
    assert load_imbalance(g) > load_imbalance(r) == 1.0


@settings(max_examples=200, deadline=None)
@given(seq=st.lists(st.integers(1, 2048), min_size=0, max_size=60), channels=st.integers(1, 8),
       cap=st.integers(1, 6000), rr=st.booleans())
def test_capacity_is_never_exceeded_and_unplaced_had_no_room(seq, channels, cap, rr):
    if rr:
        assign = assign_channels_round_robin(seq, channels, capacity_tokens=cap)
        order = range(len(seq))
    else:
        assign = assign_channels_gmlbp(seq, channels, LOAD, capacity_tokens=cap)
        order = sorted(range(len(seq)), key=lambda j: (-seq[j], j))
    used = [0] * channels
    for i in order:          # replay in placement order: an unplaced request fitted nowhere at its turn
        if assign[i] < 0:
            assert all(u + seq[i] > cap for u in used)
        else:
            used[assign[i]] += seq[i]
            assert used[assign[i]] <= cap


def test_gmlbp_places_longest_first_on_least_loaded():
    assign = assign_channels_gmlbp([100, 2000, 600, 50], 2, LOAD)
    # 2000 -> ch0; 600 -> ch1 (empty); 100 -> ch1 (less loaded); 50 -> ch1 still less loaded than ch0
    assert assign == [1, 0, 1, 1]
    # existing load steers new requests away
    assert assign_channels_gmlbp([10], 2, LOAD, initial_loads=[0, -1]) == [1]


def test_sub_batch_hand_example():
    # channel 0: 3 requests, channel 1: 2, channel 2: 1, channel 3: 0, request 6 unplaced
    assign = [0, 1, 0, 2, 1, 0, -1]
    sb1, sb2 = partition_sub_batches(assign, 4)
    # ch0 odd (first odd channel) -> ceil: [0, 2] | [5]; ch1 -> [1] | [4]; ch2 odd (second) -> floor: [] | [3]
    assert sb1 == [0, 2, 1] and sb2 == [5, 4, 3]


@settings(max_examples=200, deadline=None)
@given(assign=st.lists(st.integers(-1, 9), max_size=200), channels=st.just(10))
def test_sub_batches_balanced_per_the_rule(assign, channels):
    sb1, sb2 = partition_sub_batches(assign, channels)
    placed = [i for i, c in enumerate(assign) if c >= 0]
    assert sorted(sb1 + sb2) == placed
    assert abs(len(sb1) - len(sb2)) <= 1
    extra_to_first = True
    for ch in range(channels):
        mine = [i for i in placed if assign[i] == ch]
        first = [i for i in sb1 if assign[i] == ch]
        second = [i for i in sb2 if assign[i] == ch]
        assert first + second == mine                     # SB1 takes the first half of each channel's list
        if len(mine) % 2:
            assert len(first) - len(second) == (1 if extra_to_first else -1)
            extra_to_first = not extra_to_first
        else:
            assert len(first) == len(second)
