"""Simulator speed of PIM-GPT decode (not a timed test; targets on the 2-core machine, single process, after JIT:
one GPT-2 XL token <= 1 s (issue #3), 1024 tokens of GPT-2 XL <= 3 s (issue #7)).

Measures, in this order in one process:
  * JIT / cache load: first calls of the numba kernels (compile, or load from numba's on-disk cache);
  * one token: `run_pimgpt(model, tokens=1)` end to end (layout, streams, simulation, result) and the first
    decode step alone on an already built simulator;
  * N tokens (default 1024): `run_pimgpt(model, tokens=N)` end to end: wall time, simulated tokens per wall
    second, simulated latency per token;
  * peak RSS of the process after each stage.
Prints a Markdown table (and --json writes the numbers).

Run: .venv/bin/python benchmarks/bench_pimgpt.py [--model gpt2-xl] [--tokens 1024] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import resource
import sys
import time

import numpy as np


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024      # ru_maxrss is KiB on Linux


def jit_load() -> tuple[float, str]:
    """Seconds to make the channel kernel callable; 'cache' if it was loaded from the on-disk cache."""
    from archsim.dram.spec import load_spec
    from archsim.engine import channel
    from archsim.engine.reuse import StreamChannels

    spec = load_spec("GDDR6_AiM_16Gbps", overrides={"org.channels": 2})
    eng = StreamChannels(spec, memo=False)
    cmd = np.array([spec.cmd("ACTAB"), spec.cmd("MACAB"), spec.cmd("PREAB")], dtype=np.int64)
    bank = np.zeros(3, dtype=np.int64)
    t0 = time.perf_counter()
    eng.run(None, [(cmd, bank), None], 0)
    secs = time.perf_counter() - t0
    misses = sum(channel.advance.stats.cache_misses.values())
    return secs, "compiled" if misses else "cache"


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="gpt2-xl")
    ap.add_argument("--tokens", type=int, default=1024)
    ap.add_argument("--json", dest="json_out", default=None, help="also write the numbers here")
    a = ap.parse_args(argv)

    t0 = time.perf_counter()
    from archsim.systems.pimgpt.system import PimGptSimulator, run_pimgpt
    import_s = time.perf_counter() - t0
    out: dict = {"model": a.model, "tokens": a.tokens, "import_s": import_s}

    out["jit_s"], out["jit_kind"] = jit_load()
    out["rss_after_jit_mib"] = peak_rss_mib()

    t0 = time.perf_counter()
    r1 = run_pimgpt(a.model, tokens=1, baselines=[])
    out["one_token_s"] = time.perf_counter() - t0
    sim = PimGptSimulator({"model": a.model, "tokens": 1, "baselines": []})
    t0 = time.perf_counter()
    sim.run_token(0)
    out["first_step_s"] = time.perf_counter() - t0
    out["one_token_sim_latency_s"] = r1.stats["latency_per_token_s"]
    out["rss_after_one_mib"] = peak_rss_mib()

    t0, c0 = time.perf_counter(), time.process_time()
    r = run_pimgpt(a.model, tokens=a.tokens, baselines=[])
    wall = time.perf_counter() - t0
    out["n_tokens_cpu_s"] = time.process_time() - c0     # the machine is shared: CPU time beside wall time
    s = r.stats
    out.update({
        "n_tokens_s": wall, "sim_tokens_per_wall_s": a.tokens / wall,
        "sim_latency_per_token_s": s["latency_per_token_s"], "sim_tokens_per_s": s["tokens_per_s"],
        "kernel_s": s["sim_kernel_s"], "commands_simulated": s["sim_commands_simulated"],
        "memo_hits": s["sim_memo_hits"], "memo_misses": s["sim_memo_misses"],
        "layer_memo_hits": s.get("sim_layer_memo_hits"), "layer_memo_misses": s.get("sim_layer_memo_misses"),
        "rss_peak_mib": peak_rss_mib(),
    })

    M, N = a.model, a.tokens
    rows = [
        ("JIT / cache load", f"{out['jit_s']:.2f} s ({out['jit_kind']})", ""),
        (f"1 token of {M}, end to end", f"{out['one_token_s']:.3f} s", "target <= 1 s"),
        (f"first decode step of {M} (simulator built)", f"{out['first_step_s']:.3f} s", ""),
        (f"{N} tokens of {M}, end to end", f"{wall:.2f} s (CPU {out['n_tokens_cpu_s']:.2f} s)",
         "target <= 3 s (1024 tokens)"),
        ("simulation speed", f"{out['sim_tokens_per_wall_s']:.1f} tokens/s", ""),
        ("simulated latency / token", f"{s['latency_per_token_s'] * 1e3:.4f} ms", f"{s['tokens_per_s']:.1f} tokens/s on PIM-GPT"),
        ("kernel", f"{out['kernel_s']:.2f} s", f"{out['commands_simulated']:,} commands"),
        ("memo (op / layer)", f"{out['memo_hits']} / {out['layer_memo_hits']} hits",
         f"{out['memo_misses']} / {out['layer_memo_misses']} misses"),
        ("peak RSS", f"{out['rss_peak_mib']:.0f} MiB",
         f"after JIT {out['rss_after_jit_mib']:.0f}, after 1 token {out['rss_after_one_mib']:.0f}"),
    ]
    print("| measure | value | note |")
    print("| --- | --- | --- |")
    for name, val, note in rows:
        print(f"| {name} | {val} | {note} |")
    sys.stdout.flush()
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(out, f, indent=2)
    return out


if __name__ == "__main__":
    main()
