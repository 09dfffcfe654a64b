#!/usr/bin/env python3
"""How much `routing: sampled` depends on reusing its draws (issue 34's review): writes sampled_draws.csv.

    .venv/bin/python reports/duplex/sampled_draws.py [--requests N] [--models M ...] [--systems S ...]

Sampled routing seeds every MoE layer's draw by (seed, layer, tokens) (compiler.sampled_counts), so stages with
the same token count draw the same routing and a run's stage results stay memoisable. LLMSimulator draws anew
every iteration. This runs each case twice in roofline mode (the LLMSimulator comparison's timing): as archsim
does, and with a fresh draw every iteration (the stage memo dropped, the seed advanced per iteration), and
writes both throughputs and their ratio. It measures; it changes nothing the report's rows use.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
OUT = Path(__file__).resolve().parent

SYSTEMS = {"Duplex": {"device": "duplex", "pim_timing": "roofline"}, "Bank-PIM": {"device": "bank_pim"},
           "GPU": {"device": "gpu"}}


def fresh_draws(run) -> None:
    """Every iteration of `run` draws its routing anew: the seed advances per stage and no stage is memoised."""
    comp = run.compiler
    plain = comp.stage
    base = comp.seed

    def stage(st):
        comp.stage_memo.clear()
        comp.seed = base * 1_000_003 + stage.calls
        stage.calls += 1
        return plain(st)

    stage.calls = 0
    comp.stage = stage


def main() -> None:
    from archsim.systems.duplex.system import DuplexRun

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=128)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--input-len", type=int, default=1024)
    ap.add_argument("--output-len", type=int, default=1024)
    ap.add_argument("--models", nargs="+", default=["mixtral-8x7b"])
    ap.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=list(SYSTEMS))
    ap.add_argument("-o", "--out", type=Path, default=OUT / "sampled_draws.csv")
    args = ap.parse_args()
    rows = []
    for model in args.models:
        for name in args.systems:
            cfg = {"model": model, "requests": args.requests, "max_batch": args.batch, "input_len": args.input_len,
                   "output_len": args.output_len, "routing": "sampled", **SYSTEMS[name]}
            tput = {}
            for draws in ("reused", "fresh"):
                r = DuplexRun(cfg)
                if draws == "fresh":
                    fresh_draws(r)
                tput[draws] = r.run().stats["throughput_tokens_per_s"]
            rows.append({"model": model, "system": name, "reused_tokens_per_s": tput["reused"],
                         "fresh_tokens_per_s": tput["fresh"], "fresh_over_reused": tput["fresh"] / tput["reused"]})
            print(rows[-1], file=sys.stderr)
    pd.DataFrame(rows).to_csv(args.out, index=False)


if __name__ == "__main__":
    main()
