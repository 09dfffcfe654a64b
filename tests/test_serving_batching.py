"""Continuous (iteration-level) batching invariants (archsim.workload.serving.ContinuousBatcher)."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.errors import UserError
from archsim.workload import load_model
from archsim.workload.serving import (
    Batch,
    BatchEntry,
    ContinuousBatcher,
    Request,
    analytic_iteration_time,
    generate_requests,
)


def _fixed(batch: Batch) -> float:
    return 0.01


def test_hand_example_prefill_then_decode():
    b = ContinuousBatcher(max_batch=4, kv_capacity_bytes=10_000, kv_bytes_per_token=10, iteration_time_s=_fixed)
    res = b.run([Request(0, 0.0, 10, 3), Request(1, 0.015, 4, 1)])
    shapes = [[(e.request_id, e.phase, e.new_tokens, e.context_tokens) for e in it.batch.entries]
              for it in res.iterations]
    assert shapes == [
        [(0, "prefill", 10, 10)],
        [(0, "decode", 1, 11)],                         # request 1 arrived at 15 ms; admitted at 20 ms
        [(0, "decode", 1, 12), (1, "prefill", 4, 4)],
    ]
    assert [it.start_s for it in res.iterations] == pytest.approx([0.0, 0.01, 0.02])
    r0, r1 = res.records[0], res.records[1]
    assert (r0.first_token_s, r0.finish_s) == pytest.approx((0.01, 0.03))
    assert (r1.admit_s, r1.first_token_s, r1.finish_s) == pytest.approx((0.02, 0.03, 0.03))
    assert res.iterations[2].kv_reserved_bytes == (13 + 5) * 10
    assert res.iterations[2].batch.prefill_tokens == 4 and res.iterations[2].batch.decode_tokens == 1


def test_idle_until_next_arrival():
    b = ContinuousBatcher(2, 10_000, 1, _fixed)
    res = b.run([Request(0, 5.0, 3, 2)])
    assert res.iterations[0].start_s == 5.0 and res.records[0].finish_s == pytest.approx(5.02)


def test_kv_limit_blocks_the_fifo_head():
    # capacity 100 tokens: request 0 holds 60, request 1 needs 50 -> waits; request 2 (10) may not jump it.
    b = ContinuousBatcher(8, 100, 1, _fixed)
    res = b.run([Request(0, 0.0, 50, 10), Request(1, 0.0, 45, 5), Request(2, 0.0, 5, 5)])
    assert res.iterations[0].admitted == (0,)
    assert res.admission_order == [0, 1, 2]
    assert res.records[1].admit_s == pytest.approx(0.10)       # after request 0 retires (10 iterations)
    assert res.records[2].admit_s == pytest.approx(0.10)       # 50 + 10 = 60 <= 100 tokens


def test_request_larger_than_the_kv_cache_is_rejected():
    with pytest.raises(UserError, match="could never be admitted"):
        ContinuousBatcher(4, 1000, 10, _fixed).run([Request(0, 0.0, 90, 20)])


def test_bad_callback_and_parameters():
    with pytest.raises(ValueError, match="finite time > 0"):
        ContinuousBatcher(4, 1000, 1, lambda b: 0.0).run([Request(0, 0.0, 3, 2)])
    with pytest.raises(ValueError, match="max_batch"):
        ContinuousBatcher(0, 1000, 1, _fixed)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), max_batch=st.integers(1, 12), kv_tokens=st.integers(2100, 8000),
       qps=st.one_of(st.none(), st.floats(1.0, 200.0)), n=st.integers(1, 60))
def test_batching_invariants(seed, max_batch, kv_tokens, qps, n):
    bpt = 3
    reqs = generate_requests(n, "alpaca", qps=qps, seed=seed)
    # a few long ones so the KV budget binds
    reqs += [Request(n + i, r.arrival_s, 1024, 1000) for i, r in enumerate(reqs[:3])]
    batcher = ContinuousBatcher(max_batch, kv_tokens * bpt, bpt, lambda b: 1e-3 * (1 + b.size))
    res = batcher.run(reqs)
    by_id = {r.id: r for r in reqs}
    tokens_seen = dict.fromkeys(by_id, 0)
    for prev, it in zip([None] + res.iterations[:-1], res.iterations, strict=True):
        assert it.batch.size <= max_batch
        assert it.kv_reserved_bytes <= kv_tokens * bpt
        assert it.kv_live_bytes <= it.kv_reserved_bytes
        assert it.kv_reserved_bytes == sum(by_id[e.request_id].total_tokens for e in it.batch.entries) * bpt
        if prev is not None:
            assert it.start_s >= prev.start_s + prev.duration_s - 1e-12
        for e in it.batch.entries:
            req = by_id[e.request_id]
            assert req.arrival_s <= it.start_s
            if tokens_seen[e.request_id] == 0:
                assert (e.phase, e.new_tokens, e.context_tokens) == ("prefill", req.prompt_tokens, req.prompt_tokens)
            else:
                assert (e.phase, e.new_tokens) == ("decode", 1)
                assert e.context_tokens == req.prompt_tokens + tokens_seen[e.request_id]
            tokens_seen[e.request_id] += 1
    # every request finishes with exactly its output tokens
    assert tokens_seen == {i: r.output_tokens for i, r in by_id.items()}
    assert all(rec.generated_tokens == rec.request.output_tokens and rec.finish_s is not None
               for rec in res.records.values())
    # FIFO admission: in (arrival, id) order
    assert res.admission_order == [r.id for r in sorted(reqs, key=lambda r: (r.arrival_s, r.id))]


def test_analytic_callback_decode_is_memory_bound_and_prefill_compute_bound():
    model = load_model("gpt3-xl")
    fn = analytic_iteration_time(model, flops_per_s=100e12, bytes_per_s=1e12)
    weights_s = model.n_layers * model.layer_params * model.dtype_bytes / 1e12
    one_decode = fn(Batch((BatchEntry(0, "decode", 1, 100),)))
    assert one_decode == pytest.approx(weights_s + 100 * model.kv_bytes_per_token / 1e12)
    prefill = fn(Batch((BatchEntry(0, "prefill", 2048, 2048),)))
    flops = 2 * model.n_layers * model.layer_params * 2048 + 4 * model.n_layers * model.q_dim * 2048 * 2049 / 2
    assert prefill == pytest.approx(flops / 100e12)
    # End to end: a model-backed batcher finishes a ShareGPT-like trace.
    res = ContinuousBatcher.for_model(model, 32, 8 << 30, fn).run(generate_requests(100, "sharegpt", qps=50, seed=1))
    df = res.requests_df()
    assert len(df) == 100 and (df["latency_s"] > 0).all()
    assert res.output_tokens_per_s > 0
    assert res.iterations_df()["batch_size"].max() <= 32
