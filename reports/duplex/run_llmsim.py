#!/usr/bin/env python3
"""Run one case of the Duplex authors' simulator (LLMSimulator, C++ binary `run`) and reduce its output to one
CSV row (reports/duplex/llmsimulator_runs.csv holds the rows the report compares with; make_report.py reads it).

    python reports/duplex/run_llmsim.py --sim-dir PATH/TO/LLMSimulator --source helios --cycles 1 \
        --model mixtral-8x7b --system duplex --csv reports/duplex/llmsimulator_runs.csv

It only runs a simulator built elsewhere (how the public forks were built: docs/duplex-llmsimulator.md); no
binary under --sim-dir: exit 2 with a message.

A case is (model, system, input length, output length, max batch, devices). The driver:
  1. starts from the simulator's own config.yaml (SIM_DIR/build/config.yaml, else SIM_DIR/config.yaml), so keys
     a fork requires are present, and overrides the keys that define the case (model, processor type,
     parallel_execution, node/device counts, tensor-parallel degrees, lengths, batch, prompt budget, FP16,
     uniform routing, no OOM exit, no KV reuse, closed loop);
  2. writes it to RUN_DIR/config.yaml, runs `SIM_DIR/build/run RUN_DIR/config.yaml` from SIM_DIR/build (the
     binary opens ./dram_config_*.yaml relative to its working directory), stdout/stderr to RUN_DIR;
  3. reads the per-iteration CSV the binary writes into RUN_DIR/out/ and appends one row to --csv.

Metrics (computed here from the per-iteration CSV; the binary prints no throughput):
  tokens_per_s     output tokens / simulated time of the measured iterations. Output tokens = one per
                   decoding sequence in every decode-only iteration + one first token per sequence whose
                   prefill completes inside the window. The window is `iter` iterations after the binary's
                   fixed 10000-iteration warm-up; by default iter = --cycles x (prefill iterations + L_out - 1),
                   i.e. whole lock-step batch lifetimes (all sequences have the same lengths, so a full batch
                   is admitted, prefilled and retired together).
  tbt_p50/p90/p99  durations of decode-only iterations, weighted by the sequences they advance (ms).
  ttft_s, e2e_s    means of the binary's t2ft / e2e rows (requests admitted inside the window), seconds.
  energy_per_token_j  sum of the per-iteration total_energy column (nJ, all devices) / output tokens.
  *_ms_per_decode_iter  mean per decode-only iteration of the binary's breakdown columns (device 0's
                   timeboard: qkvgen, atten_gen, o_proj, ffn, expert_ffn, communication, ...), ms.

Systems (mapping to the simulator's keys):
  gpu            processor_type GPU
  2xgpu          processor_type GPU, twice the paper's devices
  duplex         processor_type GPU+LOGIC, parallel_execution off (each op on the faster unit)
  duplex-pe      GPU+LOGIC, parallel_execution on (expert co-processing + attention co-processing)
  duplex-pe-et   as duplex-pe, expert tensor-parallel degree = devices per node (8 at most)
  bank-pim       processor_type GPU+PIM (preset pim_x 16, pim_op_b 1)
  bankgroup-pim  GPU+PIM with system.pim_kind: bankgroup (pim_x 4, pim_op_b 8; needs the [llmsim-ext] patch)
  logic          processor_type LOGIC (everything on Logic-PIM; not a paper system)
Parallelism: devices per node = min(devices, 8); non-expert tensor parallel degree = devices per node (data
parallel across nodes); expert tensor parallel degree = max(1, devices / experts) (DeepSpeed-MoE style),
or devices per node with -et. Override with --ne-tp / --e-tp.

Exit status: 0 on success, 2 if the simulator binary is missing, 1 if the run fails.
"""
from __future__ import annotations

import argparse
import csv
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

MODELS = {  # our name -> (simulator model_name, routed experts, max context)
    "mixtral-8x7b": ("mixtral", 8, 32768),
    "glam": ("glam", 64, 8192),
    "grok-1": ("grok1", 8, 8192),
    "llama3-70b": ("llama3_70B", 0, 8192),   # preset added by helios_ext.patch
    "opt-66b": ("opt66B", 0, 2048),          # preset added by helios_ext.patch
}
PAPER_DEVICES = {"mixtral-8x7b": 4, "glam": 8, "grok-1": 16, "llama3-70b": 4, "opt-66b": 4}
SYSTEMS = {  # name -> (processor_type, parallel_execution, expert TP over the node, device multiplier, pim kind)
    "gpu": ("GPU", False, False, 1, None),
    "2xgpu": ("GPU", False, False, 2, None),
    "duplex": ("GPU+LOGIC", False, False, 1, None),
    "duplex-pe": ("GPU+LOGIC", True, False, 1, None),
    "duplex-pe-et": ("GPU+LOGIC", True, True, 1, None),
    "bank-pim": ("GPU+PIM", False, False, 1, "bank"),
    "bankgroup-pim": ("GPU+PIM", False, False, 1, "bankgroup"),
    "logic": ("LOGIC", False, False, 1, None),
}
BREAKDOWN = ["qkvgen", "atten_sum", "atten_gen", "o_proj", "ffn", "expert_ffn", "communication", "rope",
             "layernorm", "residual"]
FIELDS = (["model", "system", "input_len", "output_len", "batch", "devices", "tokens_per_s", "source",
           "nodes", "devices_per_node", "ne_tp", "e_tp", "processor_type", "parallel_execution", "pim_kind",
           "max_process_token", "nvlink_gen", "infiniband_gen", "iter", "sim_time_s", "output_tokens",
           "decode_iters", "prefill_iters", "mean_decode_iter_ms", "mean_prefill_iter_ms",
           "tbt_p50_ms", "tbt_p90_ms", "tbt_p99_ms", "ttft_s", "e2e_s", "energy_per_token_j"]
          + [f"{c}_ms_per_decode_iter" for c in BREAKDOWN] + ["wall_s", "run_dir"])


def find_binary(sim_dir: Path) -> Path | None:
    for cand in (sim_dir / "build" / "run", sim_dir / "run"):
        if cand.is_file() and os.access(cand, os.X_OK):
            return cand
    return None


def template(sim_dir: Path, binary: Path) -> dict:
    for cand in (binary.parent / "config.yaml", sim_dir / "config.yaml"):
        if cand.is_file():
            with open(cand) as f:
                return yaml.safe_load(f)
    raise SystemExit(f"no config.yaml template next to {binary} or in {sim_dir}")


def parallelism(args, experts: int, et: bool) -> tuple[int, int, int, int]:
    per_node = min(args.devices, 8)
    if args.devices % per_node:
        raise SystemExit(f"devices {args.devices} is not a multiple of the devices per node {per_node}")
    nodes = args.devices // per_node
    ne_tp = args.ne_tp or per_node
    if args.e_tp:
        e_tp = args.e_tp
    elif experts == 0:
        e_tp = 1
    elif et:
        e_tp = per_node
    else:
        e_tp = max(1, args.devices // experts)
    return nodes, per_node, ne_tp, e_tp


def prefill_iters(input_len: int, batch_per_dp: int, budget: int) -> int:
    """Iterations one lock-step batch spends in prefill: each prefilling sequence gets budget / (sequences in
    prefill) prompt tokens per iteration (no per-iteration cap when budget <= 0)."""
    if budget <= 0:
        return 1
    per_seq = max(1, budget // max(1, batch_per_dp))
    return math.ceil(input_len / per_seq)


def build_config(tpl: dict, args, sim_model: str, proc: str, pe: bool, pim_kind, nodes, per_node, ne_tp, e_tp,
                 out_dir: Path) -> dict:
    cfg = dict(tpl)
    cfg["model"] = {**tpl.get("model", {}), "model_name": sim_model}
    system = dict(tpl["system"])
    system.update(gpu_gen="H100", nvlink_gen=args.nvlink_gen, infiniband_gen=args.ib_gen, num_node=nodes,
                  num_device=per_node, processor_type=proc)
    if pim_kind == "bankgroup":
        system["pim_kind"] = "bankgroup"
    else:
        system.pop("pim_kind", None)
    if "memory_type" in system:          # forks with a memory-tier switch: plain HBM
        system["memory_type"] = "HBM"
    if "optimize_parallelism" in system:
        system["optimize_parallelism"] = False
    dist = dict(system.get("distribution", {}))
    dist.update(expert_tensor_degree=e_tp, none_expert_tensor_degree=ne_tp)
    if "pipeline_degree" in dist:
        dist["pipeline_degree"] = 1
    system["distribution"] = dist
    opt = dict(system.get("optimization", {}))
    opt.update(parallel_execution=pe, hetero_subbatch=False, disagg_system=False, use_low_unit_moe_only=False,
               use_ramulator=args.ramulator, compressed_kv=False, use_absorb=False, reuse_kv_cache=False,
               kv_cache_reuse_rate=0.0, prefill_mode=False, decode_mode=False)
    system["optimization"] = opt
    cfg["system"] = system
    cfg["serving"] = {**tpl.get("serving", {}), "max_batch_size": args.batch,
                      "max_process_token": args.max_process_token}
    sim = dict(tpl["simulation"])
    sim.update(data="synthesis", input_len=args.input_len, output_len=args.output_len, precision_byte=2,
               skewness=args.skewness, iter=args.iter, exit_out_of_memory=False, mem_cap_limit=False)
    if "injection_rate" in sim:
        sim["injection_rate"] = 0        # closed loop
    cfg["simulation"] = sim
    cfg["log"] = {**tpl.get("log", {}), "print_log": False, "export_gantt": False,
                  "output_directory": str(out_dir), "gantt_directory": str(out_dir / "gantt")}
    for item in args.set or []:          # --set a.b.c=value (YAML value)
        path, _, value = item.partition("=")
        node = cfg
        keys = path.split(".")
        for k in keys[:-1]:
            node = node.setdefault(k, {})
        node[keys[-1]] = yaml.safe_load(value)
    return cfg


def pct(values: list[float], weights: list[float], q: float) -> float:
    """Weighted percentile (lower value at the q-th fraction of the total weight)."""
    if not values:
        return float("nan")
    pairs = sorted(zip(values, weights, strict=True))
    total = sum(w for _, w in pairs)
    acc = 0.0
    for v, w in pairs:
        acc += w
        if acc >= q / 100.0 * total:
            return v
    return pairs[-1][0]


def reduce_csv(path: Path) -> dict:
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    steps = [r for r in rows if r["type"] == "t2t"]
    if not steps:
        raise RuntimeError(f"no iteration rows in {path}")
    num = lambda r, k: float(r[k])                        # noqa: E731
    sim_ns = num(steps[-1], "time")
    decode = [r for r in steps if r["mixed"] == "0"]
    prefill = [r for r in steps if r["mixed"] != "0"]
    tokens = sum(num(r, "num_gen_seq") for r in decode)
    first = 0.0
    for i, r in enumerate(steps):                         # sequences leaving prefill in iteration i
        if r["mixed"] == "0":
            continue
        nxt = steps[i + 1] if i + 1 < len(steps) else None
        if nxt is None:
            continue                                       # window ends inside prefill: not counted
        still = num(nxt, "num_sum_seq") if nxt["mixed"] != "0" else 0.0
        first += max(0.0, num(r, "num_sum_seq") - still)
    tokens += first
    lat = [num(r, "latency") / 1e6 for r in decode]
    wts = [num(r, "num_gen_seq") for r in decode]
    ttft = [num(r, "latency") / 1e9 for r in rows if r["type"] == "t2ft"]
    e2e = [num(r, "latency") / 1e9 for r in rows if r["type"] == "e2e"]
    energy_nj = sum(num(r, "total_energy") for r in steps)
    mean = lambda xs: sum(xs) / len(xs) if xs else float("nan")     # noqa: E731
    out = {
        "sim_time_s": sim_ns / 1e9, "output_tokens": int(round(tokens)), "decode_iters": len(decode),
        "prefill_iters": len(prefill),
        "tokens_per_s": tokens / (sim_ns / 1e9) if sim_ns else float("nan"),
        "mean_decode_iter_ms": mean(lat), "mean_prefill_iter_ms": mean([num(r, "latency") / 1e6 for r in prefill]),
        "tbt_p50_ms": pct(lat, wts, 50), "tbt_p90_ms": pct(lat, wts, 90), "tbt_p99_ms": pct(lat, wts, 99),
        "ttft_s": mean(ttft), "e2e_s": mean(e2e),
        "energy_per_token_j": energy_nj * 1e-9 / tokens if tokens else float("nan"),
    }
    for c in BREAKDOWN:
        out[f"{c}_ms_per_decode_iter"] = mean([num(r, c) / 1e6 for r in decode])
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sim-dir", required=True, type=Path, help="LLMSimulator checkout holding build/run")
    p.add_argument("--model", required=True, choices=sorted(MODELS))
    p.add_argument("--system", required=True, choices=sorted(SYSTEMS))
    p.add_argument("--input-len", type=int, default=1024)
    p.add_argument("--output-len", type=int, default=1024)
    p.add_argument("--batch", type=int, default=64, help="max batch (serving.max_batch_size), all devices")
    p.add_argument("--devices", type=int, default=None,
                   help="total devices; default the paper's count for the model (x2 for 2xgpu)")
    p.add_argument("--ne-tp", type=int, default=None, help="non-expert tensor-parallel degree")
    p.add_argument("--e-tp", type=int, default=None, help="expert tensor-parallel degree")
    p.add_argument("--max-process-token", type=int, default=8192,
                   help="prompt-token budget per iteration per data-parallel group (0: the binary's default)")
    p.add_argument("--nvlink-gen", type=int, default=4, help="4: 450 GB/s, 0.8 us (H100)")
    p.add_argument("--ib-gen", type=int, default=400, help="400: 50 GB/s, 0.13 us")
    p.add_argument("--skewness", type=float, default=0.0, help="Zipf skew of expert routing (0: uniform)")
    p.add_argument("--cycles", type=int, default=2, help="lock-step batch lifetimes simulated (sets --iter)")
    p.add_argument("--iter", type=int, default=None, help="iterations simulated after warm-up (overrides --cycles)")
    p.add_argument("--ramulator", action="store_true", help="use_ramulator on (cycle-level DRAM; slow)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="extra config override, e.g. system.x=1")
    p.add_argument("--source", default=None, help="label for the source fork column (default: SIM_DIR name)")
    p.add_argument("--run-dir", type=Path, default=None, help="where config, logs and raw CSV go")
    p.add_argument("--csv", type=Path, default=None, help="append the result row here (header if new)")
    p.add_argument("--timeout", type=float, default=3600.0)
    args = p.parse_args(argv)

    args.sim_dir = args.sim_dir.resolve()
    binary = find_binary(args.sim_dir)
    if binary is None:
        print(f"run_llmsim: simulator binary not found under {args.sim_dir} (expected build/run)", file=sys.stderr)
        return 2

    sim_model, experts, max_ctx = MODELS[args.model]
    proc, pe, et, mult, pim_kind = SYSTEMS[args.system]
    if args.devices is None:
        args.devices = PAPER_DEVICES[args.model] * mult
    nodes, per_node, ne_tp, e_tp = parallelism(args, experts, et)
    dp = args.devices // ne_tp
    if args.iter is None:
        cycle = prefill_iters(args.input_len, args.batch // dp, args.max_process_token) + args.output_len - 1
        args.iter = args.cycles * cycle
    source = args.source or args.sim_dir.resolve().name
    run_dir = (args.run_dir or Path.cwd() / "runs" / f"{source}_{args.model}_{args.system}_{args.input_len}_" \
                                                    f"{args.output_len}_b{args.batch}_d{args.devices}").resolve()
    out_dir = run_dir / "out"
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)

    cfg = build_config(template(args.sim_dir, binary), args, sim_model, proc, pe, pim_kind, nodes, per_node,
                       ne_tp, e_tp, out_dir)
    cfg_path = run_dir / "config.yaml"
    with open(cfg_path, "w") as f:
        yaml.safe_dump(cfg, f, sort_keys=False)

    t0 = time.time()
    with open(run_dir / "stdout.log", "w") as so, open(run_dir / "stderr.log", "w") as se:
        proc_ = subprocess.run([str(binary), str(cfg_path.resolve())], cwd=binary.parent, stdout=so, stderr=se,
                               timeout=args.timeout)
    wall = time.time() - t0
    outs = sorted(out_dir.glob("*.csv"))
    if proc_.returncode != 0 or not outs:
        tail = (run_dir / "stderr.log").read_text()[-400:] + (run_dir / "stdout.log").read_text()[-400:]
        print(f"run_llmsim: run failed (exit {proc_.returncode}), see {run_dir}\n{tail}", file=sys.stderr)
        return 1

    row = {"model": args.model, "system": args.system, "input_len": args.input_len, "output_len": args.output_len,
           "batch": args.batch, "devices": args.devices, "source": source, "nodes": nodes,
           "devices_per_node": per_node, "ne_tp": ne_tp, "e_tp": e_tp, "processor_type": proc,
           "parallel_execution": pe, "pim_kind": pim_kind or "", "max_process_token": args.max_process_token,
           "nvlink_gen": args.nvlink_gen, "infiniband_gen": args.ib_gen, "iter": args.iter, "wall_s": round(wall, 1),
           "run_dir": str(run_dir)}
    row.update(reduce_csv(outs[0]))
    if args.csv:
        new = not args.csv.exists()
        with open(args.csv, "a", newline="") as f:
            w = csv.DictWriter(f, fieldnames=FIELDS, extrasaction="ignore")
            if new:
                w.writeheader()
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in row.items()})
    print(f"{args.model} {args.system} ({args.input_len},{args.output_len}) b{args.batch} d{args.devices} "
          f"[{source}]: {row['tokens_per_s']:.1f} tok/s, TBT p50 {row['tbt_p50_ms']:.3f} ms, "
          f"{row['output_tokens']} tokens in {row['sim_time_s']:.3f} s simulated, wall {wall:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
