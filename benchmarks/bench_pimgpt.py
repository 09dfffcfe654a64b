"""Simulator speed of PIM-GPT decode (not a timed test). Targets: one GPT-2 XL token <= 1 s after JIT;
1024 tokens <= 60 s.  Run: .venv/bin/python benchmarks/bench_pimgpt.py [--tokens 1024]"""
from __future__ import annotations

import argparse
import time

from archsim.pim.system import PimGptSimulator


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="gpt2-xl")
    ap.add_argument("--tokens", type=int, default=1024)
    a = ap.parse_args()
    t0 = time.perf_counter()
    warm = PimGptSimulator({"model": "gpt2-small", "tokens": 1, "baselines": []})
    warm.run_token(0)                                  # JIT compile / cache load
    jit_s = time.perf_counter() - t0
    sim = PimGptSimulator({"model": a.model, "tokens": a.tokens, "baselines": []})
    t1 = time.perf_counter()
    sim.run_token(0)
    first_s = time.perf_counter() - t1
    for t in range(1, a.tokens):
        sim.run_token(t)
    total_s = time.perf_counter() - t1
    e = sim.engine
    print(f"jit/cache load {jit_s:.2f} s; {a.model}: first token {first_s:.3f} s, {a.tokens} tokens {total_s:.1f} s "
          f"({total_s / a.tokens * 1e3:.1f} ms/token); {e.commands_simulated:,} commands simulated in "
          f"{e.kernel_s:.1f} s kernel time ({e.commands_simulated / max(e.kernel_s, 1e-9) / 1e6:.0f} M cmd/s); "
          f"memo {e.memo_hits} hits / {e.memo_misses} misses")


if __name__ == "__main__":
    main()
