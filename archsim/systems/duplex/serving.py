"""Duplex-style serving workloads and metrics, on top of archsim.workload.serving (Request, ContinuousBatcher).

Requests (Duplex's evaluation): synthetic (L_in, L_out) pairs, optionally Gaussian-jittered by a fraction
`length_std` of the mean (the Duplex code has the jitter switched off, hence the default 0), arriving all at
t = 0 (closed loop: the batch refills from the backlog as requests finish) or as a Poisson process at `qps`.
Batching (DuplexBatcher): continuous batching as archsim.workload.serving.ContinuousBatcher (FIFO admission
under max_batch and a KV reservation of each request's final size), plus a budget of prompt tokens per stage
(the Duplex code's `max_process_token`): a stage admits new requests only while their prompts fit the budget
(the first always), so a burst of arrivals becomes several mixed stages instead of one huge one.
Metrics: output tokens/s, time between tokens (TBT: each decoding sequence waits one iteration per token;
p50/p90/p99 over all tokens), time to first token (TTFT), end-to-end latency (E2E).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from archsim.errors import UserError
from archsim.workload.serving import ContinuousBatcher, IterationTimeFn, Request, ServingResult


def make_requests(n: int, input_len: int, output_len: int, rng: np.random.Generator, length_std: float = 0.0,
                  qps: float | None = None, max_context: int | None = None) -> list[Request]:
    """`n` requests of about (input_len, output_len) tokens; Poisson arrivals at `qps` or all at t = 0."""
    if n < 1 or input_len < 1 or output_len < 1:
        raise UserError(f"requests, input_len and output_len must be >= 1, got {n}, {input_len}, {output_len}")
    if length_std:
        ins = np.maximum(1, np.round(rng.normal(input_len, length_std * input_len, n))).astype(int)
        outs = np.maximum(1, np.round(rng.normal(output_len, length_std * output_len, n))).astype(int)
    else:
        ins = np.full(n, input_len)
        outs = np.full(n, output_len)
    if max_context is not None:       # clip the jittered tail to the model's context
        over = ins + outs - max_context
        outs = np.where(over > 0, np.maximum(1, outs - over), outs)
        ins = np.minimum(ins, max_context - 1)
    arrivals = np.zeros(n) if qps is None else np.cumsum(rng.exponential(1.0 / qps, size=n))
    return [Request(i, float(arrivals[i]), int(ins[i]), int(outs[i])) for i in range(n)]


def tbt_samples(served: ServingResult) -> np.ndarray:
    """Time between tokens of every decode token: the duration of the iteration that produced it."""
    out = [np.full(it.batch.size - sum(1 for e in it.batch.entries if e.phase == "prefill"), it.duration_s)
           for it in served.iterations]
    return np.concatenate(out) if out else np.zeros(0)


def serving_metrics(served: ServingResult) -> dict[str, Any]:
    req = served.requests_df()
    tbt = tbt_samples(served)
    ttft = (req.first_token_s - req.arrival_s).to_numpy()
    e2e = (req.finish_s - req.arrival_s).to_numpy()
    pct = lambda a, q: float(np.percentile(a, q)) if len(a) else 0.0      # noqa: E731
    tokens = int(req.output_tokens.sum())
    return {
        "requests": len(req), "output_tokens": tokens, "makespan_s": served.makespan_s,
        "throughput_tokens_per_s": served.output_tokens_per_s,
        "throughput_requests_per_s": len(req) / served.makespan_s if served.makespan_s else 0.0,
        "tbt_p50_s": pct(tbt, 50), "tbt_p90_s": pct(tbt, 90), "tbt_p99_s": pct(tbt, 99),
        "ttft_mean_s": float(ttft.mean()), "ttft_p50_s": pct(ttft, 50), "ttft_p99_s": pct(ttft, 99),
        "e2e_mean_s": float(e2e.mean()), "e2e_p50_s": pct(e2e, 50),
        "iterations": len(served.iterations),
    }


class DuplexBatcher(ContinuousBatcher):
    """Continuous batching with mixed prefill/decode stages and a prompt-token budget per stage: the base
    batcher's loop (admission, one token per running request, retirement) with one more admission rule."""

    def __init__(self, max_batch: int, kv_capacity_bytes: int, kv_bytes_per_token: int,
                 iteration_time_s: IterationTimeFn, max_prefill_tokens: int | None = None):
        for name, v in (("max_batch", max_batch), ("kv_capacity_bytes", kv_capacity_bytes),
                        ("kv_bytes_per_token", kv_bytes_per_token)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise UserError(f"{name} must be an integer >= 1, got {v!r}")
        super().__init__(max_batch, kv_capacity_bytes, kv_bytes_per_token, iteration_time_s)
        self.max_prefill_tokens = max_prefill_tokens

    def stage_admits(self, request: Request, n_admitted: int, admitted_prompt_tokens: int) -> bool:
        """The first request of a stage always; later ones while their prompts fit the stage's budget."""
        budget = self.max_prefill_tokens
        return budget is None or n_admitted == 0 or admitted_prompt_tokens + request.prompt_tokens <= budget
