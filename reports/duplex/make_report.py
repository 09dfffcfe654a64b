"""Duplex (MICRO'24) reproduction report: writes reports/duplex/{README.md, *.csv, *.png}.

    .venv/bin/python reports/duplex/make_report.py [--requests N] [--load-requests N] [-o DIR]

`-o DIR` writes somewhere else (default: this folder, the shipped reproduction), so small trial runs do not
overwrite it.

Every number in README.md comes from the runs below (archsim system `duplex`); the paper's numbers are typed
next to them as the paper states them (docs/presets.md [Duplex]).
"""
from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
OUT = Path(__file__).resolve().parent

MODELS = ["mixtral-8x7b", "glam", "grok-1", "llama3-70b", "opt-66b"]
PE = {"expert_coprocessing": True}
ET = {"expert_coprocessing": True, "expert_tensor_parallel": True}
SHARED = {"command_path": "shared_column_bus"}      # the other reading of Logic-PIM's command path
TABLE = {"coprocessing_split": "lookup_table"}      # the paper's split (interference-free lookup tables)
SYSTEMS = [("GPU", {"device": "gpu"}), ("2xGPU", {"device": "2xgpu"}), ("Bank-PIM", {"device": "bank_pim"}),
           ("BankGroup-PIM", {"device": "bankgroup_pim"}), ("Duplex", {"device": "duplex"}),
           ("Duplex+PE", {"device": "duplex", "mapping_overrides": PE}),
           ("Duplex+PE+ET", {"device": "duplex", "mapping_overrides": ET}),
           # the Duplex code's timing: Logic-PIM a roofline, no interference (the LLMSimulator comparison)
           ("Duplex (roofline)", {"device": "duplex", "pim_timing": "roofline"}),
           ("Duplex+PE (roofline)", {"device": "duplex", "pim_timing": "roofline", "mapping_overrides": PE}),
           ("Duplex+PE+ET (roofline)", {"device": "duplex", "pim_timing": "roofline", "mapping_overrides": ET}),
           # toggles of the gaps' causes (issue 22): co-processing interference off, and the expert layout of
           # before issue 22 (a device's experts all in one bundle space when the device count is a multiple of 4)
           ("Duplex (no interference)", {"device": "duplex", "interference": "none"}),
           ("Duplex+PE (no interference)", {"device": "duplex", "interference": "none", "mapping_overrides": PE}),
           ("Duplex+PE+ET (no interference)", {"device": "duplex", "interference": "none", "mapping_overrides": ET}),
           ("Duplex (old layout)", {"device": "duplex", "mapping_overrides": {"layout": {
               "expert_spaces": [0, 1, 2, 3], "kv_spaces": [0, 1, 2], "prefill_qkv_space": 3,
               "expert_placement": "global_modulo"}}}),
           # issue 34: the other command-path reading, and the paper's split rule
           ("Duplex (shared column bus)", {"device": "duplex", **SHARED}),
           ("Duplex+PE (shared column bus)", {"device": "duplex", **SHARED, "mapping_overrides": PE}),
           ("Duplex+PE+ET (shared column bus)", {"device": "duplex", **SHARED, "mapping_overrides": ET}),
           ("Duplex+PE (table split)", {"device": "duplex", **TABLE, "mapping_overrides": PE}),
           ("Duplex+PE+ET (table split)", {"device": "duplex", **TABLE, "mapping_overrides": ET}),
           ("Duplex+PE (shared column bus, table split)", {"device": "duplex", **SHARED, **TABLE,
                                                          "mapping_overrides": PE}),
           ("Duplex+PE+ET (shared column bus, table split)", {"device": "duplex", **SHARED, **TABLE,
                                                             "mapping_overrides": ET})]
VARIANTS = ["Duplex", "Duplex+PE", "Duplex+PE+ET"]          # the paper's Duplex systems
MOE = ["mixtral-8x7b", "glam", "grok-1"]
# the paper's figures (docs/presets.md [Duplex]; /work reference note section 4)
PAPER = {"speedup_avg_best": 2.07, "speedup_max_best": 2.67, "speedup_max_plain": 2.51,
         "tbt_p50_glam": -0.583, "energy_avg": -0.2819,
         "energy": {"mixtral-8x7b": -0.3328, "glam": -0.4203, "grok-1": -0.3459}}


class Timers(dict):
    """One Logic-PIM engine timer per command path (memoised engine runs shared by every run on that path)."""

    def __missing__(self, path):
        from archsim.systems.duplex.compiler import make_device

        self[path] = make_device("duplex", command_path=path).timer
        return self[path]


def default_command_path() -> str:
    from archsim.dram.spec import extension_options

    return extension_options("logic_pim")["command_path"]["default"]


def run(cfg, timer=None, device=None):
    """One run; `timer`: Timers (the engine timer of the run's command path); `device`: a function changing the
    run's device object before it runs (a gap experiment that toggles a hardware assumption; the preset keeps
    the paper's values)."""
    from archsim.systems.duplex.system import DuplexRun

    if timer is not None:
        timer = timer[cfg.get("command_path", default_command_path())]
    r = DuplexRun(cfg, timer=timer)
    if device is not None:
        device(r.device)
    return r.run()


def fmt(x, d=2):
    return f"{x:.{d}f}"


def table(df: pd.DataFrame, cols: list[str], floatfmt: dict[str, int]) -> str:
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for _, r in df.iterrows():
        cells = []
        for c in cols:
            v = r[c]
            cells.append(fmt(v, floatfmt.get(c, 2)) if isinstance(v, float) else str(v))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main_comparison(args, timer):
    rows, inter = [], []
    for model in MODELS:
        for name, over in SYSTEMS:
            cfg = {"model": model, "requests": args.requests, "input_len": args.input_len,
                   "output_len": args.output_len, "max_batch": args.batch, **over}
            t0 = time.perf_counter()
            res = run(cfg, timer)
            s = res.stats
            it = res.tables["interference"]
            if len(it):
                inter.append(it.assign(model=model, system=name))
            rows.append({"model": model, "system": name, "devices": s["devices"],
                         "tokens_per_s": s["throughput_tokens_per_s"], "tbt_p50_ms": s["tbt_p50_s"] * 1e3,
                         "tbt_p90_ms": s["tbt_p90_s"] * 1e3, "tbt_p99_ms": s["tbt_p99_s"] * 1e3,
                         "ttft_s": s["ttft_mean_s"], "e2e_s": s["e2e_mean_s"],
                         "energy_per_token_j": s["energy_per_token_j"], "wall_s": time.perf_counter() - t0})
            print(model, name, f"{rows[-1]['tokens_per_s']:.0f} tok/s", file=sys.stderr)
    df = pd.DataFrame(rows)
    gpu = df[df.system == "GPU"].set_index("model")
    df["speedup_vs_gpu"] = [r.tokens_per_s / gpu.loc[r.model, "tokens_per_s"] for r in df.itertuples()]
    df["tbt_p50_vs_gpu"] = [r.tbt_p50_ms / gpu.loc[r.model, "tbt_p50_ms"] - 1 for r in df.itertuples()]
    df["energy_vs_gpu"] = [r.energy_per_token_j / gpu.loc[r.model, "energy_per_token_j"] - 1 for r in df.itertuples()]
    cols = ["model", "system", "stage", "pair", "overlaps", "serialized", "xpu_seconds", "low_seconds", "alone_seconds", "seconds",
            "xpu_slowdown", "low_slowdown", "added_fraction"]
    return df, pd.concat(inter)[cols].reset_index(drop=True)


def operator_table(args, timer):
    """Per operator of one Mixtral run: engine time vs roofline of the Logic-PIM ops, Op/B of every op."""
    cfg = {"model": "mixtral-8x7b", "device": "duplex", "requests": args.requests, "input_len": args.input_len,
           "output_len": args.output_len, "max_batch": args.batch}
    df = run(cfg, timer).df.copy()
    df["engine_over_roofline"] = df.seconds / df.roofline_seconds.replace(0, np.nan)
    return df


def edap_table():
    from archsim.systems.duplex.compiler import edap_by_opb

    return edap_by_opb()


def load_study(args, timer, qps_list=None, systems=(("GPU", "gpu"), ("2xGPU", "2xgpu"), ("Duplex", "duplex")),
               device=None):
    rows = []
    for qps in qps_list or args.qps:
        for name, dev in systems:
            cfg = {"model": "mixtral-8x7b", "device": dev, "requests": args.load_requests, "input_len": 4096,
                   "output_len": 512, "max_batch": 128, "qps": float(qps)}
            res = run(cfg, timer, device)
            s = res.stats
            # steady-state service rate: completions per second over the middle half of the completions
            # (a system that keeps up completes as fast as requests arrive; a saturated one at its own rate)
            req = res.extra["serving"].requests_df()
            fin, arr = np.sort(req.finish_s.to_numpy()), np.sort(req.arrival_s.to_numpy())
            a, b = len(fin) // 4, 3 * len(fin) // 4
            served = (b - a) / (fin[b] - fin[a])
            offered = (b - a) / (arr[b] - arr[a])       # the realised Poisson rate over the same requests
            rows.append({"qps": qps, "system": name, "offered_req_per_s": offered, "served_req_per_s": served,
                         "tokens_per_s": s["throughput_tokens_per_s"], "tbt_p50_ms": s["tbt_p50_s"] * 1e3,
                         "tbt_p99_ms": s["tbt_p99_s"] * 1e3, "ttft_p50_s": s["ttft_p50_s"], "e2e_s": s["e2e_mean_s"]})
            print("load", qps, name, f"{rows[-1]['served_req_per_s']:.2f} req/s", file=sys.stderr)
    return pd.DataFrame(rows)


XPU_EFFICIENCY = 0.7        # our assumption for the toggle: a kernel reaching 70 % of the H100's peaks


def _xpu_at(eff):
    def tweak(dev):
        dev.xpu_flops *= eff
        dev.xpu_bw *= eff
    return tweak


def _one_node(dev):
    dev.links = {**dev.links, "devices_per_node": 64}


def gap_experiments(args, timer) -> pd.DataFrame:
    """Runs that toggle the suspected cause of each remaining gap to the paper (one row per run):
    layout: the issue-22 case (Mixtral and GLaM, 32 requests, (512, 128), batch 32) with each device's experts
    spread over the bundle spaces vs the old layout; links: Grok-1 (16 devices, 2 nodes) with InfiniBand
    between the nodes vs every device on NVLink; xpu: the load study's points around saturation with the xPU at
    its peaks vs at XPU_EFFICIENCY of them; lengths: Llama-3 70B at (4096, 4096) instead of (1024, 1024)."""
    rows = []

    def add(exp, setting, model, system, cfg, device=None):
        s = run({"model": model, **cfg}, timer, device).stats
        rows.append({"experiment": exp, "setting": setting, "model": model, "system": system,
                     "tokens_per_s": s["throughput_tokens_per_s"], "tbt_p50_ms": s["tbt_p50_s"] * 1e3,
                     "energy_per_token_j": s["energy_per_token_j"]})
        print("gap", exp, setting, model, system, f"{rows[-1]['tokens_per_s']:.0f} tok/s", file=sys.stderr)

    small = {"requests": 32, "input_len": 512, "output_len": 128, "max_batch": 32}
    old = {"layout": {"expert_spaces": [0, 1, 2, 3], "kv_spaces": [0, 1, 2], "prefill_qkv_space": 3,
                      "expert_placement": "global_modulo"}}
    for model in ("mixtral-8x7b", "glam"):
        add("layout", "spread (now)", model, "Duplex", {**small, "device": "duplex"})
        add("layout", "old (one space per device)", model, "Duplex", {**small, "device": "duplex",
                                                                       "mapping_overrides": old})
    paper = {"requests": args.requests, "input_len": args.input_len, "output_len": args.output_len,
             "max_batch": args.batch}
    et = {"device": "duplex", "mapping_overrides": {"expert_coprocessing": True, "expert_tensor_parallel": True}}
    for setting, dev in (("InfiniBand between nodes (paper)", None), ("all devices on NVLink", _one_node)):
        add("links", setting, "grok-1", "GPU", {**paper, "device": "gpu"}, dev)
        add("links", setting, "grok-1", "Duplex+PE+ET", {**paper, **et}, dev)
    long = {**paper, "input_len": 4096, "output_len": 4096, "requests": args.batch}
    for setting, cfg in ((f"({args.input_len}, {args.output_len})", paper), ("(4096, 4096)", long)):
        add("lengths", setting, "llama3-70b", "GPU", {**cfg, "device": "gpu"})
        add("lengths", setting, "llama3-70b", "Duplex", {**cfg, "device": "duplex"})
    return pd.DataFrame(rows)


def stream_efficiency() -> pd.DataFrame:
    """Logic-PIM bundle-stream bandwidth on the channel engine as a fraction of its peak (256 B per
    pseudo-channel per tCCD_L), for a weight striped over 1-4 bundle spaces, with refresh on (the runs) and
    off: what separates the engine from the roofline (toggles: spaces, refresh)."""
    from archsim.pim.logic_pim import LogicPimTimer, Segment, bundle_bandwidth_bytes_per_s, pch_per_stack

    rows = []
    for refresh in ("allbank", "none"):
        t = LogicPimTimer(refresh=refresh, max_sim_rows=512)
        for n in (1, 2, 3, 4):
            r = 192                           # bundle rows per pseudo-channel (a 48 MiB weight per stack)
            cyc = t.time([Segment(s, r // n, 1) for s in range(n)]).cycles
            bw = r * 8192 * pch_per_stack(t.spec) / (cyc * t.spec.tCK_s)
            rows.append({"refresh": refresh, "spaces": n, "fraction_of_peak": bw / bundle_bandwidth_bytes_per_s(t.spec)})
    return pd.DataFrame(rows)


def xpu_efficiency_load(args, timer) -> pd.DataFrame:
    """The load study's points around saturation with the xPU (GPU and Duplex alike) at XPU_EFFICIENCY of its
    peaks: how far the saturation points move with the xPU's kernel efficiency."""
    qps = [q for q in args.qps if 8 <= q <= 20] or args.qps
    return load_study(args, timer, qps, (("GPU", "gpu"), ("Duplex", "duplex")), _xpu_at(XPU_EFFICIENCY))


def saturation(load: pd.DataFrame, name: str) -> float:
    """Highest offered QPS whose served rate stays within 10 % of it (the system keeps up)."""
    d = load[load.system == name]
    ok = d[d.served_req_per_s >= 0.9 * d.offered_req_per_s]
    return float(ok.qps.max()) if len(ok) else float("nan")


LLMSIM_SYSTEMS = {"gpu": "GPU", "2xgpu": "2xGPU", "duplex": "Duplex", "duplex-pe": "Duplex+PE",
                  "duplex-pe-et": "Duplex+PE+ET", "bank-pim": "Bank-PIM", "bankgroup-pim": "BankGroup-PIM"}
ROOFLINE_OF = {"Duplex": "Duplex (roofline)", "Duplex+PE": "Duplex+PE (roofline)",
               "Duplex+PE+ET": "Duplex+PE+ET (roofline)"}
FREE_OF = {"Duplex": "Duplex (no interference)", "Duplex+PE": "Duplex+PE (no interference)",
           "Duplex+PE+ET": "Duplex+PE+ET (no interference)"}
ROOFLINE_TARGET = 0.05      # the issue's target: archsim's roofline mode within 5 % of LLMSimulator


def vs_llmsimulator(df: pd.DataFrame, args, path: Path = OUT / "llmsimulator_runs.csv") -> pd.DataFrame:
    """Per (model, system, fork): LLMSimulator's tokens/s (reports/duplex/llmsimulator_runs.csv, written by
    run_llmsim.py) beside archsim's roofline mode (Logic-PIM a roofline, no interference: the Duplex code's
    timing) and engine mode (the report's runs), on the report's lengths and batch; for the Duplex variants the
    engine / roofline ratio split into its two causes, each a toggle run: Logic-PIM timed on the channel engine
    (engine without interference / roofline) and co-processing interference (engine / engine without it)."""
    ref = pd.read_csv(path)
    ref = ref[(ref.input_len == args.input_len) & (ref.output_len == args.output_len) & (ref.batch == args.batch)]
    # a case run again (the driver appends) counts once: its latest row
    ref = ref.drop_duplicates(["model", "system", "source", "input_len", "output_len", "batch", "devices"], keep="last")
    tp = df.set_index(["model", "system"]).tokens_per_s
    tbt = df.set_index(["model", "system"]).tbt_p50_ms
    rows = []
    for r in ref.itertuples():
        name = LLMSIM_SYSTEMS.get(r.system)
        if name is None or (r.model, name) not in tp.index:
            continue
        roof = ROOFLINE_OF.get(name, name)
        eng, free = tp[r.model, name], tp[r.model, FREE_OF.get(name, name)]
        rows.append({"model": r.model, "system": name, "fork": r.source, "devices": int(r.devices),
                     "llmsim_tokens_per_s": r.tokens_per_s, "archsim_roofline_tokens_per_s": tp[r.model, roof],
                     "roofline_over_llmsim": tp[r.model, roof] / r.tokens_per_s,
                     "archsim_engine_tokens_per_s": eng, "engine_over_llmsim": eng / r.tokens_per_s,
                     "cause_logic_pim_engine_timing": free / tp[r.model, roof],
                     "cause_interference": eng / free,
                     "llmsim_tbt_p50_ms": r.tbt_p50_ms, "archsim_roofline_tbt_p50_ms": tbt[r.model, roof]})
    out = pd.DataFrame(rows)
    if len(out):
        out["roofline_within_5pct"] = (out.roofline_over_llmsim - 1).abs() <= ROOFLINE_TARGET
    return out


# LLMSimulator's size of expert tensor parallelism's all-reduce: the node's own tokens (mappings/duplex.yaml)
NODE_AR = {"expert_allreduce": "node_tokens"}
# LLMSimulator's run conditions that archsim's defaults do not share, each a toggle of a duplex config key
# (docs/duplex-llmsimulator.md): no memory check (the driver runs it with mem_cap_limit false) and routing drawn at
# random per token and layer (Scheduler::getRandomExpert); "both" applies the two together. A third difference
# (issue 34's review): LLMSimulator keeps the fastest unit for every expert (Executor::execution,
# src/hardware/executor.cpp:145-151 of the helios fork), archsim one unit per MoE layer by default: `dispatch
# per_expert` alone, and "all three" with the other two
LLMSIM_CONDITIONS = {"memory_cap unlimited": {"memory_cap": "unlimited"}, "routing sampled": {"routing": "sampled"},
                     "both": {"memory_cap": "unlimited", "routing": "sampled"},
                     "dispatch per_expert": {"dispatch": "per_expert"},
                     "all three": {"memory_cap": "unlimited", "routing": "sampled", "dispatch": "per_expert"},
                     # what LLMSimulator times that archsim does not, and the other way round (issue 34, Llama-3
                     # 2xGPU): each layer's norms and residual adds (layernorm.cpp:38-44, residual.cpp:34-35 of
                     # the helios fork), and the LM head (LmHead::forward, lm_head.cpp:26-34, times nothing)
                     "norm_and_residual timed": {"mapping_overrides": {"norm_and_residual": True}},
                     "LM head untimed": {"mapping_overrides": {"time_lm_head": False}},
                     # how LLMSimulator sizes expert tensor parallelism's all-reduce (the node's own tokens,
                     # expert.cpp:185): equal to archsim's except under the two-node layout, so alone it shows which
                     # rows it can touch at all
                     "allreduce node_tokens": {"mapping_overrides": NODE_AR}}
# the conditions that apply several differences together
COMBINED = ("both", "all three", "routing sampled, split llmsimulator", "layout per_node, routing sampled",
            "layout per_node, routing sampled, allreduce node_tokens")


def with_overrides(cfg: dict, over: dict) -> dict:
    """`cfg` with the keys of `over`, its mapping_overrides merged into cfg's (a system's +PE keeps its own)."""
    out = {**cfg, **over}
    if "mapping_overrides" in over:
        out["mapping_overrides"] = {**cfg.get("mapping_overrides", {}), **over["mapping_overrides"]}
    return out


def llmsim_causes(vs: pd.DataFrame, args, done: pd.DataFrame | None = None) -> pd.DataFrame:
    """Every vs_llmsimulator row re-run in roofline mode under each of LLMSimulator's run conditions: the
    toggled roofline / LLMSimulator ratio beside the default's, and whether the toggle moves it toward 1.
    `done`: rows of an earlier run (the committed table) kept as they are; only the missing ones run."""
    systems = dict(SYSTEMS)
    base = {"requests": args.requests, "input_len": args.input_len, "output_len": args.output_len,
            "max_batch": args.batch}
    memo: dict[tuple, float] = {}
    if done is not None:
        memo = {(r.model, r.system, r.condition): r.toggled_tokens_per_s for r in done.itertuples()}
    rows = []
    for r in vs.itertuples():
        for cond, over in LLMSIM_CONDITIONS.items():
            key = (r.model, r.system, cond)
            if key not in memo:
                cfg = with_overrides({"model": r.model, **base, **systems[ROOFLINE_OF.get(r.system, r.system)]}, over)
                memo[key] = run(cfg).stats["throughput_tokens_per_s"]
                print(r.model, r.system, cond, f"{memo[key]:.0f} tok/s", file=sys.stderr)
            toggled = memo[key] / r.llmsim_tokens_per_s
            rows.append({"model": r.model, "system": r.system, "fork": r.fork, "condition": cond,
                         "llmsim_tokens_per_s": r.llmsim_tokens_per_s,
                         "roofline_over_llmsim": r.roofline_over_llmsim,
                         "toggled_tokens_per_s": memo[key], "toggled_over_llmsim": toggled,
                         "moved_toward_llmsim": abs(toggled - 1) < abs(r.roofline_over_llmsim - 1) - 1e-9,
                         "toggled_within_5pct": abs(toggled - 1) <= ROOFLINE_TARGET})
    return pd.DataFrame(rows)


def devices_per_node() -> int:
    from archsim.systems.duplex.compiler import device_preset

    return int(device_preset().links.devices_per_node)


def multi_node_links(vs: pd.DataFrame, args) -> pd.DataFrame:
    """The vs_llmsimulator rows on more than one node re-run in roofline mode with every device on NVLink
    (_one_node): archsim splits every layer over all the devices, so its all-reduces cross InfiniBand, while
    LLMSimulator (as run_llmsim.py runs it) keeps the non-expert tensor parallelism inside a node. A proxy: it
    takes the all-reduce off InfiniBand and leaves archsim's layout as it is."""
    systems = dict(SYSTEMS)
    base = {"requests": args.requests, "input_len": args.input_len, "output_len": args.output_len,
            "max_batch": args.batch}
    rows = []
    memo: dict[tuple, float] = {}
    for r in vs[vs.devices > devices_per_node()].itertuples():
        if (r.model, r.system) not in memo:
            cfg = {"model": r.model, **base, **systems[ROOFLINE_OF.get(r.system, r.system)]}
            memo[r.model, r.system] = run(cfg, device=_one_node).stats["throughput_tokens_per_s"]
            print(r.model, r.system, "all NVLink", f"{memo[r.model, r.system]:.0f} tok/s", file=sys.stderr)
        toggled = memo[r.model, r.system] / r.llmsim_tokens_per_s
        rows.append({"model": r.model, "system": r.system, "fork": r.fork, "devices": r.devices,
                     "llmsim_tokens_per_s": r.llmsim_tokens_per_s, "roofline_over_llmsim": r.roofline_over_llmsim,
                     "nvlink_tokens_per_s": memo[r.model, r.system], "nvlink_over_llmsim": toggled,
                     "moved_toward_llmsim": abs(r.roofline_over_llmsim - 1) - abs(toggled - 1) >= MATERIAL,
                     "nvlink_within_5pct": abs(toggled - 1) <= ROOFLINE_TARGET})
    return pd.DataFrame(rows)


SPLIT_SYSTEMS = ("Duplex+PE", "Duplex+PE+ET")     # the variants that split experts (expert co-processing)
LLMSIM_SPLIT = {"coprocessing_split": "llmsimulator"}
# LLMSimulator's split rule under archsim's default routing, and under the routing LLMSimulator runs with; each
# beside archsim's own split under the same routing (the causes table's default / routing-sampled rows)
SPLIT_CONDITIONS = {"split llmsimulator": ({}, None),
                    "routing sampled, split llmsimulator": ({"routing": "sampled"}, "routing sampled")}


def _split_run(cfg) -> dict:
    s = run(cfg).stats
    return {"tokens_per_s": s["throughput_tokens_per_s"], "on_xpu": s["coprocessing_split_experts_on_xpu"],
            "on_low": s["coprocessing_split_experts_on_low"]}


def llmsim_split(vs: pd.DataFrame, args) -> pd.DataFrame:
    """The vs_llmsimulator rows of MoE models that split experts (+PE, +PE+ET) re-run in roofline mode with LLMSimulator's split
    rule (coprocessing_split llmsimulator), under default and under sampled routing, beside archsim's own split
    under the same routing (run again here for the experts each rule put on each unit: counted once per distinct
    (stage, MoE layer, device) split)."""
    systems = dict(SYSTEMS)
    base = {"requests": args.requests, "input_len": args.input_len, "output_len": args.output_len,
            "max_batch": args.batch}
    memo: dict[tuple, dict] = {}
    rows = []
    for r in vs[vs.system.isin(SPLIT_SYSTEMS) & vs.model.isin(MOE)].itertuples():
        for cond, (over, _) in SPLIT_CONDITIONS.items():
            cfg = {"model": r.model, **base, **systems[ROOFLINE_OF[r.system]], **over}
            for rule, extra in (("archsim", {}), ("llmsimulator", LLMSIM_SPLIT)):
                if (r.model, r.system, cond, rule) not in memo:
                    memo[r.model, r.system, cond, rule] = _split_run({**cfg, **extra})
                    print(r.model, r.system, cond, rule, f"{memo[r.model, r.system, cond, rule]['tokens_per_s']:.0f}"
                          " tok/s", file=sys.stderr)
            a, b = memo[r.model, r.system, cond, "archsim"], memo[r.model, r.system, cond, "llmsimulator"]
            before, after = a["tokens_per_s"] / r.llmsim_tokens_per_s, b["tokens_per_s"] / r.llmsim_tokens_per_s
            rows.append({"model": r.model, "system": r.system, "fork": r.fork, "condition": cond,
                         "llmsim_tokens_per_s": r.llmsim_tokens_per_s, "roofline_over_llmsim": r.roofline_over_llmsim,
                         "archsim_split_tokens_per_s": a["tokens_per_s"], "archsim_split_over_llmsim": before,
                         "archsim_split_experts_on_xpu": a["on_xpu"], "archsim_split_experts_on_low": a["on_low"],
                         "toggled_tokens_per_s": b["tokens_per_s"], "toggled_over_llmsim": after,
                         "llmsim_split_experts_on_xpu": b["on_xpu"], "llmsim_split_experts_on_low": b["on_low"],
                         "moved_toward_llmsim": abs(before - 1) - abs(after - 1) >= MATERIAL,
                         "toggled_within_5pct": abs(after - 1) <= ROOFLINE_TARGET})
    return pd.DataFrame(rows)


PER_NODE = {"non_expert_parallel": "per_node"}     # LLMSimulator's two-node layout (mappings/duplex.yaml)


# LLMSimulator's layout alone, with the routing LLMSimulator runs with, and with both and its size of the ET
# all-reduce as well (column prefix -> extra keys; condition name in the gap classes)
PER_NODE_RUNS = {"per_node": {}, "per_node_sampled": {"routing": "sampled"},
                 "per_node_sampled_node_ar": {"routing": "sampled", "mapping_overrides": NODE_AR}}
PER_NODE_CONDITIONS = {"per_node": "layout per_node", "per_node_sampled": "layout per_node, routing sampled",
                       "per_node_sampled_node_ar": "layout per_node, routing sampled, allreduce node_tokens"}


def per_node_layout(vs: pd.DataFrame, links: pd.DataFrame, args) -> pd.DataFrame:
    """vs_llmsimulator_links.csv with LLMSimulator's layout as a toggle: every row on more than one node re-run in
    roofline mode with the mapping's non_expert_parallel per_node (non-expert layers tensor-parallel inside a
    node, the nodes data-parallel, the experts over every device), alone, with sampled routing, and with both
    and expert_allreduce node_tokens (PER_NODE_RUNS); only the columns missing from `links` run."""
    systems = dict(SYSTEMS)
    base = {"requests": args.requests, "input_len": args.input_len, "output_len": args.output_len,
            "max_batch": args.batch}
    out = links.copy()
    for prefix, extra in PER_NODE_RUNS.items():
        if f"{prefix}_tokens_per_s" in out:
            continue
        memo: dict[tuple, float] = {}
        got = []
        for r in links.itertuples():
            if (r.model, r.system) not in memo:
                cfg = with_overrides({"model": r.model, **base, **systems[ROOFLINE_OF.get(r.system, r.system)]},
                                     {**extra, "mapping_overrides": {**PER_NODE, **extra.get("mapping_overrides", {})}})
                memo[r.model, r.system] = run(cfg).stats["throughput_tokens_per_s"]
                print(r.model, r.system, prefix, f"{memo[r.model, r.system]:.0f} tok/s", file=sys.stderr)
            got.append(memo[r.model, r.system])
        out[f"{prefix}_tokens_per_s"] = got
        out[f"{prefix}_over_llmsim"] = out[f"{prefix}_tokens_per_s"] / out.llmsim_tokens_per_s
        out[f"{prefix}_moved_toward_llmsim"] = ((out.roofline_over_llmsim - 1).abs()
                                                - (out[f"{prefix}_over_llmsim"] - 1).abs() >= MATERIAL)
        out[f"{prefix}_within_5pct"] = (out[f"{prefix}_over_llmsim"] - 1).abs() <= ROOFLINE_TARGET
    return out


def extra_toggles(split: pd.DataFrame | None, links: pd.DataFrame | None) -> pd.DataFrame:
    """The split-rule and layout toggles in the causes table's shape (model, system, fork, condition,
    roofline_over_llmsim, toggled_over_llmsim, toggled_within_5pct), for classing the gap rows with them."""
    parts = []
    if split is not None and len(split):
        parts.append(split[["model", "system", "fork", "condition", "roofline_over_llmsim", "toggled_over_llmsim",
                            "toggled_within_5pct"]])
    for prefix, cond in PER_NODE_CONDITIONS.items():
        if links is not None and len(links) and f"{prefix}_over_llmsim" in links:
            lay = links[["model", "system", "fork", "roofline_over_llmsim", f"{prefix}_over_llmsim",
                         f"{prefix}_within_5pct"]].rename(columns={f"{prefix}_over_llmsim": "toggled_over_llmsim",
                                                                   f"{prefix}_within_5pct": "toggled_within_5pct"})
            parts.append(lay.assign(condition=cond))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


# one decode iteration's parts: archsim's operator kinds -> LLMSimulator's per-decode-iteration columns
# (llmsimulator_runs.csv); the grouping is ours (e.g. archsim's MoE gate and stack all-reduce go with the experts)
BREAKDOWN = {"qkv": (["qkv"], ["qkvgen"]),
             "attention": (["attention_decode"], ["atten_sum", "atten_gen"]),
             "out_proj": (["out_proj"], ["o_proj"]),
             "dense_ffn": (["dense_ffn"], ["ffn"]),
             "experts": (["moe_gate", "moe", "stack_allreduce"], ["expert_ffn"]),
             # LLMSimulator's communication column holds only all-reduces on the rows below: Llama-3 has no
             # experts, and its MoE scatter and gather count no tokens for Grok-1 (8 experts over 16 devices:
             # num_routed_expert / total_num_device is 0 in integer arithmetic, communication.cpp:140-141 and
             # 202-203 of the helios fork), so archsim's MoE all-to-all has no counterpart there
             "all_reduce": (["allreduce"], ["communication"]),
             "moe_all_to_all": (["alltoall"], []),
             "norm_residual": (["norm_residual"], ["layernorm", "residual"]),
             "lm_head": (["lm_head"], [])}
# issue 34: the Llama-3 2xGPU row and its one-node twin; Grok-1 Duplex, which LLMSimulator's layout moves past it;
# Grok-1 Duplex+PE+ET under LLMSimulator's layout and routing, without and with its size of the ET all-reduce
BREAKDOWN_ROWS = (("llama3-70b", "GPU", {}), ("llama3-70b", "2xGPU", {}),
                  ("grok-1", "Duplex", {"mapping_overrides": {"non_expert_parallel": "per_node"}}),
                  ("grok-1", "Duplex+PE+ET", {"routing": "sampled", "mapping_overrides": PER_NODE}),
                  ("grok-1", "Duplex+PE+ET", {"routing": "sampled", "mapping_overrides": {**PER_NODE, **NODE_AR}}))


def breakdown_keys(keys: dict) -> str:
    """A breakdown row's archsim keys as one string: the run's keys, then its mapping keys; `default` if none."""
    flat = {**{k: v for k, v in keys.items() if k != "mapping_overrides"}, **keys.get("mapping_overrides", {})}
    return ", ".join(f"{k}: {v}" for k, v in flat.items()) or "default"


def decode_parts_ms(res, coprocessing: bool) -> dict[str, float]:
    """Milliseconds per decode-only iteration of each BREAKDOWN part in a run. Under expert co-processing the
    xPU's and the low unit's experts overlap, so their operator times do not add: the experts part is then the
    decode step less every other part."""
    d = res.df[res.df.stage == "decode"]
    per_op = d.groupby("op").seconds.sum() / res.stats["decode_stages"] * 1e3
    parts = {part: float(sum(per_op.get(o, 0.0) for o in ops)) for part, (ops, _) in BREAKDOWN.items()}
    if coprocessing:
        parts["experts"] = res.stats["decode_step_s"] * 1e3 - sum(v for k, v in parts.items() if k != "experts")
    return parts


def decode_breakdown(args, path: Path = OUT / "llmsimulator_runs.csv") -> pd.DataFrame:
    """Per part of a decode iteration (BREAKDOWN), milliseconds per decode-only iteration of archsim's roofline
    mode (the row's keys, and with norm_and_residual timed) beside LLMSimulator's per-decode-iteration columns
    (helios fork), for BREAKDOWN_ROWS: where the decode time goes in each simulator."""
    ref = pd.read_csv(path)
    ref = ref[(ref.source == "helios") & (ref.input_len == args.input_len) & (ref.output_len == args.output_len)
              & (ref.batch == args.batch)].drop_duplicates(["model", "system"], keep="last")
    names = {v: k for k, v in LLMSIM_SYSTEMS.items()}
    systems = dict(SYSTEMS)
    base = {"requests": args.requests, "input_len": args.input_len, "output_len": args.output_len,
            "max_batch": args.batch}
    rows = []
    for model, system, keys in BREAKDOWN_ROWS:
        r = ref[(ref.model == model) & (ref.system == names[system])]
        if not len(r):
            continue
        r = r.iloc[0]
        cfg = with_overrides({"model": model, **base, **systems[ROOFLINE_OF.get(system, system)]}, keys)
        coprocessing = bool(cfg.get("mapping_overrides", {}).get("expert_coprocessing"))
        per = {}
        for label, over in (("default", {}), ("norm", {"mapping_overrides": {"norm_and_residual": True}})):
            per[label] = decode_parts_ms(run(with_overrides(cfg, over)), coprocessing)
        for part, (ops, cols) in BREAKDOWN.items():
            rows.append({"model": model, "system": system, "archsim_keys": breakdown_keys(keys), "part": part,
                         "archsim_ops": "+".join(ops) if part != "experts" or not coprocessing else
                         "decode step less the other parts (experts co-processed)",
                         "archsim_ms_per_decode_iter": per["default"][part],
                         "archsim_norm_residual_ms_per_decode_iter": per["norm"][part],
                         "llmsim_ms_per_decode_iter": float(sum(r[f"{c}_ms_per_decode_iter"] for c in cols)),
                         "llmsim_columns": "+".join(cols) or "none (not timed)"})
    return pd.DataFrame(rows)


def roofline_plot(ops: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from archsim.report.palette import color_of
    from archsim.systems.duplex.compiler import make_device

    dev = make_device("duplex", "roofline")
    x = np.logspace(-1, 4, 200)
    fig, ax = plt.subplots(figsize=(10, 5))
    ax.loglog(x, np.minimum(dev.xpu_flops, x * dev.xpu_bw) / 1e12, color=color_of("xpu"), label="xPU roofline")
    ax.loglog(x, np.minimum(dev.low_flops, x * dev.low_bw) / 1e12, color=color_of("logic_pim"),
              label="Logic-PIM roofline (5 stacks)")
    pts = ops[(ops.flops > 0) & (ops.seconds > 0)].reset_index(drop=True)
    key = []
    xy = []
    for i, r in pts.iterrows():
        perf = r.flops / r.seconds / 1e12
        xpu = r.unit == "xpu"
        ax.scatter(r.op_b, perf, marker="o" if xpu else "s", s=22, color=color_of("xpu" if xpu else "logic_pim"),
                   edgecolor="black", linewidth=0.4, zorder=3)
        xy.append((np.log10(r.op_b), np.log10(perf), i + 1))
        key.append(f"{i + 1}: {r.stage} {r.op} ({'xPU' if xpu else 'Logic-PIM'})")
    # numbered points and a key beside the plot; points closer than ~1/4 decade share one label ("2,6,10")
    clusters: list[list[tuple]] = []
    for p in sorted(xy):
        for c in clusters:
            if abs(c[0][0] - p[0]) < 0.25 and abs(c[0][1] - p[1]) < 0.25:
                c.append(p)
                break
        else:
            clusters.append([p])
    for j, c in enumerate(clusters):
        x0, y0 = c[0][0], c[0][1]
        ax.annotate(",".join(str(n) for _, _, n in sorted(c, key=lambda q: q[2])), (10 ** x0, 10 ** y0),
                    xytext=(-6, 8) if j % 2 else (6, -12), textcoords="offset points", fontsize=8,
                    ha="right" if j % 2 else "left")
    ax.set_xlabel("Op/B (FLOPs per DRAM byte)")
    ax.set_ylabel("attained throughput per device (TFLOP/s)")
    ax.set_ylim(top=dev.xpu_flops / 1e12 * 4)       # room for the labels above the xPU's compute roof
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title("Mixtral 8x7B operators on Duplex (circles: xPU, squares: Logic-PIM)")
    fig.text(0.72, 0.5, "\n".join(key), fontsize=7, va="center", family="monospace")
    fig.subplots_adjust(left=0.08, right=0.7, bottom=0.11, top=0.92)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=128)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--input-len", type=int, default=1024)
    ap.add_argument("--output-len", type=int, default=1024)
    ap.add_argument("--load-requests", type=int, default=400)
    ap.add_argument("--qps", type=float, nargs="+", default=[4, 8, 12, 16, 20, 24, 28])
    ap.add_argument("--reuse", nargs="*", default=[], choices=["comparison", "operators_mixtral", "edap", "load", "gaps",
                                                               "load_xpu_efficiency", "stream_efficiency",
                                                               "vs_llmsimulator_causes", "vs_llmsimulator_links",
                                                               "vs_llmsimulator_split",
                                                               "llmsimulator_decode_breakdown"],
                    help="read these tables from the CSVs of an earlier run (in the output folder) instead of "
                         "running them again (vs_llmsimulator_causes: its rows are kept and only the missing ones "
                         "run, e.g. a condition added since)")
    ap.add_argument("-o", "--out", type=Path, default=OUT, help="output folder (default: the report's own folder)")
    args = ap.parse_args()
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    from archsim import __version__

    timer = Timers()
    t0 = time.perf_counter()
    def part(name, fn):
        return pd.read_csv(out / f"{name}.csv") if name in args.reuse else fn()

    if "comparison" in args.reuse:
        main_df, inter = pd.read_csv(out / "comparison.csv"), pd.read_csv(out / "interference.csv")
    else:
        main_df, inter = main_comparison(args, timer)
    ops = part("operators_mixtral", lambda: operator_table(args, timer))
    edap = part("edap", edap_table)
    load = part("load", lambda: load_study(args, timer))
    gaps = part("gaps", lambda: gap_experiments(args, timer))
    load_eff = part("load_xpu_efficiency", lambda: xpu_efficiency_load(args, timer))
    stream = part("stream_efficiency", stream_efficiency)
    vs = vs_llmsimulator(main_df, args)
    # reused, the causes table keeps its rows and runs only the ones missing (a condition added since)
    done = pd.read_csv(out / "vs_llmsimulator_causes.csv") if "vs_llmsimulator_causes" in args.reuse else None
    causes = llmsim_causes(vs, args, done)
    links = part("vs_llmsimulator_links", lambda: multi_node_links(vs, args))
    links = per_node_layout(vs, links, args)
    split = part("vs_llmsimulator_split", lambda: llmsim_split(vs, args))
    split = split[split.model.isin(MOE)].reset_index(drop=True)        # a dense model has no experts to split
    breakdown = part("llmsimulator_decode_breakdown", lambda: decode_breakdown(args))
    total = time.perf_counter() - t0
    for name, df in (("vs_llmsimulator", vs), ("vs_llmsimulator_causes", causes),
                     ("vs_llmsimulator_links", links), ("vs_llmsimulator_split", split),
                     ("llmsimulator_decode_breakdown", breakdown), ("comparison", main_df), ("interference", inter), ("operators_mixtral", ops), ("edap", edap),
                     ("load", load), ("gaps", gaps), ("load_xpu_efficiency", load_eff), ("stream_efficiency", stream)):
        df.to_csv(out / f"{name}.csv", index=False)
    roofline_plot(ops, out / "roofline.png")
    vs_gpu_plot(main_df, out / "vs_gpu.png", f"(L_in, L_out) = ({args.input_len}, {args.output_len}), batch {args.batch}")
    write_readme(args, main_df, inter, ops, edap, load, gaps, load_eff, stream, total, __version__, vs, causes,
                 links, split, breakdown)


def vs_gpu_plot(df: pd.DataFrame, path: Path, setting: str) -> None:
    """Throughput, median TBT and energy per token of each Duplex variant (and 2xGPU) relative to the GPU,
    per model, with the paper's figures marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from archsim.report.palette import color_of

    systems = ["2xGPU", *VARIANTS]
    models = list(dict.fromkeys(df.model))
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6))
    panels = [("speedup_vs_gpu", "throughput relative to the GPU (x)", 1.0),
              ("tbt_p50_vs_gpu", "median time between tokens vs the GPU (%)", 100.0),
              ("energy_vs_gpu", "energy per token vs the GPU (%)", 100.0)]
    w = 0.8 / len(systems)
    x = np.arange(len(models))
    for ax, (col, label, scale) in zip(axes, panels, strict=True):
        for k, name in enumerate(systems):
            d = df[df.system == name].set_index("model").reindex(models)
            ax.bar(x + (k - (len(systems) - 1) / 2) * w, d[col] * scale, w, label=name, color=color_of(name))
        ax.set_xticks(x, [m.replace("-8x7b", "") for m in models])
        ax.set_xlabel("model")
        ax.set_ylabel(label)
        ax.axhline(1.0 if col == "speedup_vs_gpu" else 0.0, color="black", linewidth=0.6)
    a0, a1, a2 = axes
    paper = color_of("paper")
    a0.axhline(PAPER["speedup_avg_best"], color=paper, linestyle="--", linewidth=1,
               label=f"paper: +PE+ET average {PAPER['speedup_avg_best']}x")
    a0.axhline(PAPER["speedup_max_best"], color=paper, linestyle=":", linewidth=1,
               label=f"paper: +PE+ET max {PAPER['speedup_max_best']}x")
    i = models.index("glam")
    a1.scatter([i], [PAPER["tbt_p50_glam"] * 100], marker="*", s=150, color=paper, zorder=4,
               label="paper: GLaM -58.3 %")
    for m, v in PAPER["energy"].items():
        a2.scatter([models.index(m)], [v * 100], marker="*", s=150, color=paper, zorder=4,
                   label="paper: best Duplex variant" if m == "mixtral-8x7b" else None)
    a2.axhline(PAPER["energy_avg"] * 100, color=paper, linestyle="--", linewidth=1,
               label="paper: average -28.19 %")
    for ax in axes:
        ax.legend(fontsize=7, loc="best")
    fig.suptitle(f"Duplex vs the GPU (H100-class) baseline, {setting}; black stars and lines: the paper's figures")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_readme(args, df, inter, ops, edap, load, gaps, load_eff, stream, total, version, vs, causes,
                 links=None, split=None, breakdown=None):
    dx = df[df.system == "Duplex"]
    pe = df[df.system == "Duplex+PE"]
    et = df[df.system == "Duplex+PE+ET"]
    best = pd.concat([dx, pe, et]).groupby("model").speedup_vs_gpu.max()
    e_best = pd.concat([dx, pe, et]).groupby("model").energy_vs_gpu.min()
    bank = df[df.system == "Bank-PIM"].set_index("model").tokens_per_s
    dxt = dx.set_index("model").tokens_per_s
    sat_gpu, sat_dx, sat_2x = saturation(load, "GPU"), saturation(load, "Duplex"), saturation(load, "2xGPU")
    low = ops[ops.unit == "low"]
    cmd = (f"reports/duplex/make_report.py --requests {args.requests} --batch {args.batch} --input-len "
           f"{args.input_len} --output-len {args.output_len} --load-requests {args.load_requests} --qps "
           + " ".join(f"{q:g}" for q in args.qps))
    L = []
    L.append("# Duplex (MICRO'24) reproduction (archsim, issues #11 and #22)\n")
    took = (f"in {total:.0f} s" if not args.reuse else f"(tables {', '.join(args.reuse)} read from an earlier "
            f"run of it with `--reuse`; the rest took {total:.0f} s)")
    L.append(f"Generated by `{cmd}` with archsim {version} {took}. System `duplex` "
             "(archsim/systems/duplex/system.py): devices per model as in the paper's Table I (Mixtral 4, GLaM 8, "
             "Grok-1 16, Llama-3 4, OPT 4; 2xGPU doubles them), FP16, uniform expert routing, closed-loop "
             f"continuous batching (all {args.requests} requests at t = 0, max batch {args.batch}, prompt budget "
             f"8192 tokens per stage), (L_in, L_out) = ({args.input_len}, {args.output_len}) for every model "
             "(OPT-66B's context is 2048). Logic-PIM operators run as bank-bundle command streams on the "
             "channel engine (HBM3_Duplex, refresh on); the xPU, Bank-PIM and BankGroup-PIM are rooflines with "
             "the Duplex code's peaks. Tables: `comparison.csv`, `interference.csv`, `gaps.csv`, "
             "`load_xpu_efficiency.csv`, `stream_efficiency.csv`, `operators_mixtral.csv`, `edap.csv`, "
             "`load.csv`; figures `vs_gpu.png`, `roofline.png`. Co-processing interference: measured on the "
             "channel engine (system key `interference: engine`, the default; see below).\n")
    L.append("## Headline: ours next to the paper\n")
    L.append("| metric | paper | archsim |\n|---|---|---|")
    L.append(f"| throughput vs H100 (GPU), best Duplex variant, average over models | 2.07x (+PE+ET) | "
             f"{best.mean():.2f}x (Duplex {dx.speedup_vs_gpu.mean():.2f}x, +PE {pe.speedup_vs_gpu.mean():.2f}x, "
             f"+PE+ET {et.speedup_vs_gpu.mean():.2f}x) |")
    moe3 = ["mixtral-8x7b", "glam", "grok-1"]
    L.append(f"| the same, average over the three MoE models only (PE and ET act only on experts) | 2.07x (average "
             f"of its configurations) | "
             f"{best[moe3].mean():.2f}x |")
    L.append(f"| throughput vs GPU, max | 2.67x (+PE+ET); 2.51x plain Duplex | {best.max():.2f}x ({best.idxmax()}); "
             f"plain Duplex {dx.speedup_vs_gpu.max():.2f}x |")
    L.append(f"| +PE+ET over plain Duplex, max | 1.36x | "
             f"{(et.set_index('model').tokens_per_s / dx.set_index('model').tokens_per_s).max():.2f}x |")
    L.append(f"| median TBT vs GPU, average | -58.3 % (GLaM, batch 64) | {dx.tbt_p50_vs_gpu.mean() * 100:.1f} % "
             f"(GLaM {dx.set_index('model').loc['glam', 'tbt_p50_vs_gpu'] * 100:.1f} %) |")
    L.append(f"| energy per token vs GPU, average (the lowest Duplex variant) | -28.19 % | {e_best.mean() * 100:.1f} % "
             f"(Duplex alone {dx.energy_vs_gpu.mean() * 100:.1f} %) |")
    L.append(f"| the same, average over the three MoE models only | -28.19 % | {e_best[moe3].mean() * 100:.1f} % |")
    L.append(f"| energy per token vs GPU, best | -42.03 % (GLaM) | {e_best.min() * 100:.1f} % ({e_best.idxmin()}) |")
    L.append(f"| Bank-PIM vs Duplex on OPT-66B (MHA) | Bank-PIM wins | Bank-PIM / Duplex = "
             f"{bank['opt-66b'] / dxt['opt-66b']:.2f} |")
    L.append(f"| Bank-PIM vs Duplex on GQA models | Duplex wins (Mixtral 1.49x avg, Llama-3) | Duplex / Bank-PIM: "
             f"Mixtral {dxt['mixtral-8x7b'] / bank['mixtral-8x7b']:.2f}, Llama-3 {dxt['llama3-70b'] / bank['llama3-70b']:.2f}, "
             f"Grok-1 {dxt['grok-1'] / bank['grok-1']:.2f} |")
    peak = load.groupby("system").served_req_per_s.max()
    L.append(f"| load: GPU saturates (Mixtral, (4096, 512)) | above ~9 req/s | keeps up to {sat_gpu:g} QPS, "
             f"serves at most {peak['GPU']:.1f} req/s |")
    L.append(f"| load: Duplex sustains | ~14 req/s, about 2xGPU | keeps up to {sat_dx:g} QPS, at most "
             f"{peak['Duplex']:.1f} req/s (2xGPU: {sat_2x:g} QPS, {peak['2xGPU']:.1f} req/s) |")
    L.append(f"| Logic-PIM engine time / roofline (Mixtral, decode MoE + attention) | (Duplex code: roofline by default) | "
             f"{low.seconds.sum() / low.roofline_seconds.sum():.2f} |")
    tpm = df.pivot(index="model", columns="system", values="tokens_per_s")
    moe = ["mixtral-8x7b", "glam", "grok-1"]
    L.append("| co-processing interference: throughput with / without, Duplex+PE+ET | not charged (two-track roofline) | "
             + ", ".join(f"{m} {tpm.loc[m, 'Duplex+PE+ET'] / tpm.loc[m, 'Duplex+PE+ET (no interference)']:.3f}"
                         for m in moe) + " |")
    L.append("| Duplex > GPU on every MoE model (all three variants) | yes | "
             + ("yes" if (df[df.model.isin(moe) & df.system.isin(VARIANTS)].speedup_vs_gpu > 1).all() else "NO")
             + f" (lowest: {df[df.model.isin(moe) & df.system.isin(VARIANTS)].speedup_vs_gpu.min():.2f}x) |\n")
    L.append("![Duplex vs GPU](vs_gpu.png)\n")
    L.append(command_path_text(df, inter, ops))
    L.append(split_text(df))
    extra = extra_toggles(split, links)
    L.append(llmsim_text(vs, causes, extra))
    L.append(split_rule_text(split))
    L.append(links_text(vs, causes, links, extra))
    L.append(breakdown_text(vs, causes, breakdown))
    L.append("## Gaps as experiments: runs that toggle a cause\n")
    L.append("Each column divides a run by the same run with one cause switched (throughput ratio; > 1: the first "
             "is faster). `engine / roofline`: Logic-PIM as bundle command streams on the channel engine vs its "
             "roofline. `interference`: co-processing with the slow-downs measured on the channel engine vs none "
             "(the paper's and the Duplex code's assumption), for plain Duplex (attention co-processing only) and "
             "for +PE+ET (experts split too). `layout`: every device's experts spread over the four bundle spaces "
             "vs the layout before issue 22 (expert e in space e mod 4).\n")
    tp = df.pivot(index="model", columns="system", values="tokens_per_s")
    tog = pd.DataFrame({
        "engine / roofline": tp["Duplex"] / tp["Duplex (roofline)"],
        "interference, Duplex": tp["Duplex"] / tp["Duplex (no interference)"],
        "interference, +PE": tp["Duplex+PE"] / tp["Duplex+PE (no interference)"],
        "interference, +PE+ET": tp["Duplex+PE+ET"] / tp["Duplex+PE+ET (no interference)"],
        "layout: spread / old": tp["Duplex"] / tp["Duplex (old layout)"],
        "GPU speed-up +PE+ET, no interference": tp["Duplex+PE+ET (no interference)"] / tp["GPU"],
    }).reset_index()
    L.append(table(tog, list(tog.columns), {c: 3 for c in tog.columns}))
    L.append("\nMore toggles (`gaps.csv`, `load_xpu_efficiency.csv`; read in the gaps section below):\n")
    L.append(table(gaps, ["experiment", "setting", "model", "system", "tokens_per_s", "tbt_p50_ms"],
                   {"tokens_per_s": 0, "tbt_p50_ms": 2}))
    L.append("\nThe co-processed operator pairs and their measured slow-downs (`interference.csv`; per (model, "
             "system, stage, pair): layer invocations that overlapped, each unit's interference-free time, the "
             "pair's time without and with interference, and the slow-down of each unit while both ran):\n")
    # Logic-PIM only: Bank-PIM and BankGroup-PIM are rooflines with no engine model, so their co-processing
    # is interference-free; the roofline run has no engine either
    shown = inter[inter.system.isin(VARIANTS + [f"{v} (shared column bus)" for v in VARIANTS])]
    shown_cols = [c for c in ("model", "system", "stage", "pair", "overlaps", "serialized", "xpu_slowdown",
                              "low_slowdown", "added_fraction") if c in shown.columns]   # serialized: since issue 34
    L.append(table(shown, shown_cols,
                   {"xpu_slowdown": 2, "low_slowdown": 3, "added_fraction": 3}))
    one = one_channel_interference()
    keep = {p: 100 * r["xpu_bw_beside"] / r["xpu_bw_alone"] for p, r in one.items()}
    top = inter.sort_values("xpu_slowdown", ascending=False).drop_duplicates(["system", "pair"]).head(3)
    worst = "; ".join(f"{r.model} {r.system} {r.stage} {r.pair} {r.xpu_slowdown:.2f}x" for r in top.itertuples())
    L.append("\n" + INTERFERENCE_TEXT.format(keep_own=keep["own_path"], keep_shared=keep["shared_column_bus"],
                                              worst=worst))
    L.append("![roofline](roofline.png)\n")
    L.append("## Per model and system\n")
    show = df.copy()
    L.append(table(show, ["model", "system", "devices", "tokens_per_s", "speedup_vs_gpu", "tbt_p50_ms", "tbt_p90_ms",
                          "tbt_p99_ms", "ttft_s", "e2e_s", "energy_per_token_j", "energy_vs_gpu"],
                   {"tokens_per_s": 0, "tbt_p50_ms": 2, "tbt_p90_ms": 2, "tbt_p99_ms": 2, "energy_per_token_j": 3,
                    "energy_vs_gpu": 3, "speedup_vs_gpu": 2}))
    L.append("\n## Operators of Mixtral 8x7B on Duplex: Op/B, unit, engine vs roofline\n")
    L.append("Totals over the whole run per (stage, operator, unit); `op_b` = FLOPs per DRAM byte; "
             "`engine_over_roofline` = channel-engine time / roofline time (1.00 for roofline units).\n")
    L.append(table(ops, ["stage", "op", "unit", "op_b", "seconds", "roofline_seconds", "engine_over_roofline",
                         "energy_pj"], {"op_b": 2, "seconds": 4, "roofline_seconds": 4, "engine_over_roofline": 2,
                                        "energy_pj": 3}))
    L.append("\n## EDAP vs Op/B (FP16 GEMM, 16384 x 4096 weight, one stack)\n")
    piv = edap.pivot(index="design", columns="op_b", values="edap_norm")
    L.append("Normalized per Op/B column to the worst design (lower is better); paper values in brackets.\n")
    paper = {"Bank-PIM": [0.08, 0.16, 0.35, 0.81, 1.00, 1.00], "BankGroup-PIM": [1.00, 1.00, 1.00, 1.00, 0.96, 0.67],
             "Logic-PIM": [0.66, 0.66, 0.65, 0.65, 0.61, 0.40]}
    L.append("| design | " + " | ".join(f"Op/B {c}" for c in piv.columns) + " |")
    L.append("|---|" + "---|" * len(piv.columns))
    for d in piv.index:
        L.append(f"| {d} | " + " | ".join(f"{piv.loc[d, c]:.2f} [{p:.2f}]" for c, p in zip(piv.columns, paper[d],
                                                                                       strict=True)) + " |")
    lp = edap[edap.design == "Logic-PIM"]
    L.append("\nAreas per stack (archsim/presets/duplex/devices.yaml): "
             + ", ".join(f"{r.design} {r.area_mm2:.2f} mm^2" for r in edap[edap.op_b == 1].itertuples())
             + ". Logic-PIM GEMM on the channel engine instead of its roofline: delay x"
             + ", ".join(f"{r.engine_delay_s / r.delay_s:.2f}" for r in lp.itertuples()) + " for Op/B 1..32.\n")
    L.append("## Load study: Mixtral 8x7B, (4096, 512), max batch 128, Poisson arrivals\n")
    L.append(f"{args.load_requests} requests per point. `served_req_per_s`: completions per second over the middle "
             "half of the completions (the steady-state service rate); `offered_req_per_s`: the realised arrival rate "
             "over the same requests; a system keeps up with a QPS when it serves at least 90 % of what is offered.\n")
    L.append(table(load, ["qps", "system", "offered_req_per_s", "served_req_per_s", "tokens_per_s", "tbt_p50_ms", "tbt_p99_ms",
                          "ttft_p50_s", "e2e_s"], {"offered_req_per_s": 2, "served_req_per_s": 2, "tokens_per_s": 0}))
    L.append("\n" + gaps_text(args, df, gaps, load, load_eff, stream))
    (args.out / "README.md").write_text("\n".join(L) + "\n")

def one_channel_interference() -> dict[str, dict]:
    """Decode attention (Mixtral's KV stream, 3 spaces, Op/B 4) beside a full-rate xPU read stream on one
    channel, per command path (archsim.pim.logic_pim.LogicPimTimer.interference)."""
    from archsim.pim.logic_pim import Segment

    timers = Timers()
    return {p: timers[p].interference([Segment(0, 16, 4), Segment(1, 16, 4), Segment(2, 16, 4)], (3,), 1.0)
            for p in ("own_path", "shared_column_bus")}


def prefill_demand_text(ops: pd.DataFrame) -> str:
    """Mixtral's prefill attention Op/B (operators_mixtral.csv) against the xPU's ridge point: the share of the
    xPU's bandwidth it asks for (all of it below the ridge, ridge / Op/B above)."""
    from archsim.systems.duplex.compiler import make_device

    dev = make_device("duplex", "roofline")
    ridge = dev.xpu_flops / dev.xpu_bw
    row = ops[(ops.op == "attention_prefill") & (ops.unit == "xpu")]
    opb = float((row.flops.sum()) / row.bytes.sum())
    return (f"Mixtral's Op/B {opb:.0f}, `operators_mixtral.csv`, against the xPU's ridge point of {ridge:.0f}: "
            f"it asks for {min(1.0, ridge / opb):.0%} of the xPU's bandwidth")


def command_path_text(df: pd.DataFrame, inter: pd.DataFrame, ops: pd.DataFrame) -> str:
    """Both readings of Logic-PIM's command path side by side (the runs with command_path toggled)."""
    tp = df.pivot(index="model", columns="system", values="tokens_per_s").reindex(MODELS)
    one = one_channel_interference()
    rows = []
    for m in MODELS:
        for v in VARIANTS:
            own, shared = tp.loc[m, v], tp.loc[m, f"{v} (shared column bus)"]
            rows.append({"model": m, "system": v, "own_path": own, "shared_column_bus": shared,
                         "own_vs_gpu": own / tp.loc[m, "GPU"], "shared_vs_gpu": shared / tp.loc[m, "GPU"],
                         "own_over_shared": own / shared})
    t = pd.DataFrame(rows)
    pe = {p: {m: tp.loc[m, "Duplex+PE" + sfx] / tp.loc[m, "Duplex" + sfx] for m in MOE}
          for p, sfx in (("own", ""), ("shared", " (shared column bus)"))}
    old = {m: tp.loc[m, "Duplex+PE (shared column bus, table split)"] / tp.loc[m, "Duplex (shared column bus)"]
           for m in MOE}
    f = lambda d: ", ".join(f"{k} {v:.3f}x" for k, v in d.items())        # noqa: E731
    pre = inter[(inter.pair == "attention") & inter.system.isin(VARIANTS)]
    pre_sh = inter[(inter.pair == "attention") & (inter.system == "Duplex (shared column bus)")]
    return f"""## Logic-PIM's command path: both readings (issue 34)

How Logic-PIM's bundle commands reach the banks decides what co-processing costs. The paper gives Logic-PIM
"a simple DRAM controller for fetching data from HBM" on the logic die and says "Logic-PIM and xPU can operate
simultaneously through independent active paths" (§4 and the DRAM-die figure's caption, quoted in
docs/presets.md); it does not say whether that controller's commands share the channel's command bus with
the xPU's. The config key `command_path` (the memory standard's extension option `logic_pim.command_path`,
archsim/presets/dram/standards/extensions/logic_pim.yaml) takes either reading: `own_path` (default, the
reading the text supports) or `shared_column_bus` (RDBD/WRBD on the xPU's column command bus, archsim's
standard before issue 34). On one channel, decode attention beside a full-rate xPU read stream: the xPU keeps
{100 * one['own_path']['xpu_bw_beside'] / one['own_path']['xpu_bw_alone']:.0f} % of its bandwidth on its own path
(slow-down {one['own_path']['xpu_slowdown']:.2f}x) and {100 * one['shared_column_bus']['xpu_bw_beside'] / one['shared_column_bus']['xpu_bw_alone']:.0f} %
on the shared column bus (slow-down {one['shared_column_bus']['xpu_slowdown']:.2f}x); Logic-PIM slows
{100 * (one['own_path']['low_slowdown'] - 1):.1f} % / {100 * (one['shared_column_bus']['low_slowdown'] - 1):.1f} %. On the channel engine (two
command slots per channel and cycle, row and column) `own_path` puts the bundle column commands in the row slot
the bundle activates already use, so what remains of the coupling is bank and bundle conflicts, the activation
window and row-slot sharing with the xPU's ACT/PRE.

{table(t, list(t.columns), {"own_path": 0, "shared_column_bus": 0, "own_vs_gpu": 2, "shared_vs_gpu": 2,
                             "own_over_shared": 3})}

+PE over plain Duplex, same command path: own path {f(pe['own'])}; shared column bus {f(pe['shared'])}
(the paper: ~1.04x on average). With the shared column bus and the paper's lookup-table split (archsim before
issue 34): {f(old)}. Prefill attention ({prefill_demand_text(ops)}) beside decode attention: xPU slow-down {pre.xpu_slowdown.min():.2f}-{pre.xpu_slowdown.max():.2f}x
on its own path, {pre_sh.xpu_slowdown.min():.2f}-{pre_sh.xpu_slowdown.max():.2f}x on the shared column bus
(`interference.csv`).
"""


def split_text(df: pd.DataFrame) -> str:
    """The interference-aware split vs the paper's lookup-table split (runs with coprocessing_split toggled)."""
    tp = df.pivot(index="model", columns="system", values="tokens_per_s").reindex(MODELS)
    rows = []
    for m in MODELS:
        rows.append({"model": m,
                     "+PE / Duplex, aware": tp.loc[m, "Duplex+PE"] / tp.loc[m, "Duplex"],
                     "+PE / Duplex, table": tp.loc[m, "Duplex+PE (table split)"] / tp.loc[m, "Duplex"],
                     "+PE+ET / Duplex, aware": tp.loc[m, "Duplex+PE+ET"] / tp.loc[m, "Duplex"],
                     "+PE+ET / Duplex, table": tp.loc[m, "Duplex+PE+ET (table split)"] / tp.loc[m, "Duplex"],
                     "+PE / Duplex, shared bus, aware":
                         tp.loc[m, "Duplex+PE (shared column bus)"] / tp.loc[m, "Duplex (shared column bus)"],
                     "+PE / Duplex, shared bus, table":
                         tp.loc[m, "Duplex+PE (shared column bus, table split)"] / tp.loc[m, "Duplex (shared column bus)"]})
    t = pd.DataFrame(rows)
    aware = t[["+PE / Duplex, aware", "+PE / Duplex, shared bus, aware"]].to_numpy()
    table_lost = t[(t["+PE / Duplex, shared bus, table"] < 1) | (t["+PE / Duplex, table"] < 1)].model.tolist()
    return f"""## Co-processing split: interference-aware vs the paper's lookup tables (issue 34)

The paper splits each device's experts between the xPU and Logic-PIM by lookup tables of interference-free
times, so once interference is paid it can pick a split slower than none. `coprocessing_split:
interference_aware` (the default) costs each candidate split (the same prefixes of the experts ordered by
tokens, whole bundle spaces at a time, no split among them) as it will run, with the measured slow-downs,
and takes the fastest; prefill attention beside decode attention runs one after the other when overlapping
would be slower. `lookup_table` is the paper's rule. Throughput ratios to plain Duplex on the same command path:

{table(t, list(t.columns), {c: 3 for c in t.columns if c != "model"})}

With the interference-aware split +PE is at least plain Duplex on every model on both command paths:
{"yes" if (aware >= 1 - 1e-9).all() else "NO"} (lowest {aware.min():.3f}x). The lookup-table split falls below plain
Duplex on: {", ".join(table_lost) or "no model"}.
"""


MATERIAL = 0.01     # a condition explains part of a gap only if it closes at least one point of the ratio


def moves_away(causes: pd.DataFrame) -> pd.Series:
    """Rows whose condition widens the distance to LLMSimulator by at least MATERIAL of the ratio (the same
    resolution a move toward it needs: a smaller change, e.g. a sampled draw's 0.001, is reported as none)."""
    return (causes.toggled_over_llmsim - 1).abs() - (causes.roofline_over_llmsim - 1).abs() >= MATERIAL


def cause_classes(vs: pd.DataFrame, causes: pd.DataFrame) -> dict[str, list[str]]:
    """The rows outside the roofline target, by what LLMSimulator's run conditions do to them: `explained` (a
    single condition, else both, brings the row within target; the row labelled with it), `toward` (one
    closes at least MATERIAL of its distance to LLMSimulator, none within target) and `unexplained` (none does)."""
    out: dict[str, list[str]] = {"explained": [], "toward": [], "unexplained": []}
    material = causes[(causes.roofline_over_llmsim - 1).abs() - (causes.toggled_over_llmsim - 1).abs() >= MATERIAL]
    for r in vs[~vs.roofline_within_5pct].itertuples():
        c = causes[(causes.model == r.model) & (causes.system == r.system) & (causes.fork == r.fork)]
        label = f"{r.model} {r.system} ({r.fork})"
        fixed = c[c.toggled_within_5pct]
        if len(fixed):
            single = fixed[~fixed.condition.isin(COMBINED)]
            best = (single if len(single) else fixed).sort_values("toggled_over_llmsim", key=lambda x: (x - 1).abs())
            b = best.iloc[0]
            out["explained"].append(f"{label} {r.roofline_over_llmsim:.3f} -> {b.toggled_over_llmsim:.3f} "
                                    f"({b.condition})")
        elif len(m := material.loc[material.index.intersection(c.index)]):
            b = m.sort_values("toggled_over_llmsim", key=lambda x: (x - 1).abs()).iloc[0]
            out["toward"].append(f"{label} {r.roofline_over_llmsim:.3f} -> {b.toggled_over_llmsim:.3f} "
                                 f"({b.condition})")
        else:
            out["unexplained"].append(f"{label} {r.roofline_over_llmsim:.3f}")
    return out


def moe_units(mapping: str = "duplex") -> str:
    """Which unit the mapping policy gives the MoE layers per stage (what `dispatch: layer` runs them on)."""
    from archsim.systems.duplex.compiler import load_policy

    pol = load_policy(mapping)
    if pol.rule == "opb":
        return f"mappings/{mapping}.yaml, rule opb: the low unit when the Op/B at the mean count is at most " \
               f"{pol.opb_threshold:g}"
    names = {"low": "the low unit", "xpu": "the xPU"}
    stages = {"decode": "decode", "mixed": "a stage with prefill"}
    return f"mappings/{mapping}.yaml: " + "; ".join(f"{stages.get(st, st)}: {names[units.get('moe', 'xpu')]}"
                                                   for st, units in pol.dispatch.items())


def causes_text(vs: pd.DataFrame, causes: pd.DataFrame, extra: pd.DataFrame | None = None) -> str:
    """The gap causes, generated from vs_llmsimulator_causes.csv; the rows outside the target classed with
    `extra` (extra_toggles: the split-rule and layout toggles of the next two sections) as well."""
    if not len(causes):
        return ""
    both = causes[causes.condition == "both"]
    three = causes[causes.condition == "all three"]
    away = causes[~causes.condition.isin(COMBINED) & moves_away(causes)]
    k = cause_classes(vs, pd.concat([causes, extra], ignore_index=True) if extra is not None else causes)
    also = (" Each row outside the target is classed by these conditions and by the toggles of the next two "
            "sections (`split llmsimulator` and `routing sampled, split llmsimulator`: LLMSimulator's expert "
            "split rule; `layout per_node` and `layout per_node, routing sampled`: its two-node layout; "
            "`layout per_node, routing sampled, allreduce node_tokens`: with its size of the expert "
            "tensor-parallel all-reduce as well)."
            if extra is not None and len(extra) else "")

    def listing(items: list[str]) -> str:
        return "; ".join(items) or "none"

    return f"""
### Gap causes: LLMSimulator's run conditions as toggles (`vs_llmsimulator_causes.csv`)

Three differences between how LLMSimulator runs and archsim's defaults, two in what each times and one in how it
sizes an all-reduce; each is a key of the `duplex` system (the last three keys of the mapping policy), and every
row above is re-run in roofline mode with each, with the first two (`both`) and with the first three (`all three`):
- `memory_cap: unlimited`: the driver runs LLMSimulator with `exit_out_of_memory` and `mem_cap_limit` false
  (`run_llmsim.py` build_config), so it keeps the full batch even where the KV cache exceeds the devices' memory;
  archsim by default admits a request only while the memory beside the weights holds its final KV cache.
- `routing: sampled`: LLMSimulator routes every token of every layer to k distinct experts drawn at random
  (`Scheduler::getRandomExpert`, `src/scheduler/scheduler.cpp:141-153`, called from `src/scheduler/
  sequence.cpp:189-197` of the helios fork), so a finite batch loads the devices unequally; archsim by default
  uses the expected counts (`routing: uniform`), which balance them exactly.
- `dispatch: per_expert`: LLMSimulator times every operator on each unit it may run on and keeps the fastest
  (`Executor::execution`, `src/hardware/executor.cpp:145-151` of the helios fork), so every expert gets the unit
  its own token count favours; archsim by default runs a MoE layer's experts on one unit (`dispatch: layer`),
  the one its mapping policy gives the stage's MoE layers
  ({moe_units()}).
- `norm_and_residual timed` (mapping key `norm_and_residual: true`): LLMSimulator times each decoder layer's two
  norms and two residual adds as xPU rooflines over the whole activations on every device, not split by tensor
  parallelism (`src/module/layernorm.cpp:38-44`, `src/module/residual.cpp:34-35`, called from
  `src/module/decoder.cpp:80-86` of the helios fork); archsim by default does not time them.
- `LM head untimed` (mapping key `time_lm_head: false`): LLMSimulator's LM head times nothing
  (`LmHead::forward`, `src/module/lm_head.cpp:26-34`); archsim by default times it on the xPU.
- `allreduce node_tokens` (mapping key `expert_allreduce: node_tokens`): LLMSimulator sizes expert tensor
  parallelism's all-reduce by the node's own tokens, archsim by every token of the stage (see "The rows on more than
  one node"); the two differ only under the two-node layout, and alone it changes {node_ar_changed(causes)} of
  {int((causes.condition == "allreduce node_tokens").sum())} rows (throughput not bit-identical to the row's
  default run).

With both conditions, archsim's roofline mode is within {ROOFLINE_TARGET:.0%} of LLMSimulator on
{int(both.toggled_within_5pct.sum())} of {len(both)} rows (default conditions: {int(vs.roofline_within_5pct.sum())});
with all three on {int(three.toggled_within_5pct.sum())} of {len(three)}.{also}
Of the {int((~vs.roofline_within_5pct).sum())} rows outside the target by default:
- brought within it by a condition (ratio before -> after, the condition): {listing(k["explained"])};
- moved toward LLMSimulator by at least {MATERIAL:.2f} of the ratio but not within the target: {listing(k["toward"])};
- not moved toward LLMSimulator by that much by any condition (cause not found): {listing(k["unexplained"])}.

Rows outside the target with no cause found: {len(k["unexplained"])} of {int((~vs.roofline_within_5pct).sum())}.
Rows a condition moves toward LLMSimulator only partly (still outside the target, their gap not fully explained):
{len(k["toward"])} of {int((~vs.roofline_within_5pct).sum())}; brought within the target: {len(k["explained"])} of {int((~vs.roofline_within_5pct).sum())}.

A condition that moves a row away from LLMSimulator by at least {MATERIAL:.2f} of the ratio (so it cannot be that
row's cause, and another difference must offset it): {listing([f"{r.model} {r.system} ({r.fork}) {r.condition} {r.roofline_over_llmsim:.3f} -> "
                           f"{r.toggled_over_llmsim:.3f}" for r in away.itertuples()])}.

{per_expert_text(causes)}
{draws_text(causes)}"""


def node_ar_changed(causes: pd.DataFrame) -> int:
    """Rows whose throughput `allreduce node_tokens` alone changes at all (not bit-identical to the default run)."""
    c = causes[causes.condition == "allreduce node_tokens"]
    return int((c.toggled_over_llmsim != c.roofline_over_llmsim).sum())


def draws_text(causes: pd.DataFrame, path: Path = OUT / "sampled_draws.csv") -> str:
    """How much `routing: sampled` owes to reusing its draws, from sampled_draws.csv (written by
    sampled_draws.py, which runs separately); no table, no sentence."""
    if not path.exists():
        return ""
    d = pd.read_csv(path)
    helios = causes[(causes.condition == "routing sampled") & (causes.fork == "helios")]
    ratio = helios.set_index(["model", "system"]).llmsim_tokens_per_s
    items = []
    for r in d.itertuples():
        ref = ratio.get((r.model, r.system))
        vs_ref = (f", ratio to LLMSimulator {r.reused_tokens_per_s / ref:.3f} -> {r.fresh_tokens_per_s / ref:.3f}"
                  if ref is not None else "")
        items.append(f"{r.model} {r.system} {r.reused_tokens_per_s:.0f} -> {r.fresh_tokens_per_s:.0f} tok/s "
                     f"({r.fresh_over_reused - 1:+.1%}{vs_ref})")
    return f"""
`routing: sampled` seeds every layer's draw by (seed, layer, tokens), so stages with the same token count reuse
one routing; LLMSimulator draws anew every iteration. Drawn anew every iteration instead (`sampled_draws.py`,
`sampled_draws.csv`; roofline mode, helios fork's LLMSimulator row): {"; ".join(items)}.
"""


def per_expert_text(causes: pd.DataFrame) -> str:
    """What `dispatch: per_expert` does where sampled routing moved a row away from LLMSimulator: the row under
    the first two conditions (`both`) beside all three, read from the causes table."""
    c = causes.set_index(["model", "system", "fork", "condition"]).toggled_over_llmsim
    sampled = causes[causes.condition == "routing sampled"]
    away = sampled[moves_away(sampled)]
    items = []
    for r in away.itertuples():
        b, a = c[r.model, r.system, r.fork, "both"], c[r.model, r.system, r.fork, "all three"]
        verdict = ("unchanged" if abs(a - b) <= 1e-3 else
                   "toward LLMSimulator" if abs(a - 1) < abs(b - 1) else "away from LLMSimulator")
        items.append(f"{r.model} {r.system} ({r.fork}) {b:.3f} -> {a:.3f} ({verdict})")
    alone = causes[causes.condition == "dispatch per_expert"]
    changed = int(((alone.toggled_over_llmsim - alone.roofline_over_llmsim).abs() > 1e-3).sum())
    return (f"`dispatch: per_expert` alone (uniform routing) changes {changed} of {len(alone)} rows by more than "
            f"0.001 of the ratio. Where `routing: sampled` moves a row away from LLMSimulator (by at least "
            f"{MATERIAL:.2f}), adding "
            "`dispatch: per_expert` to the first two conditions (ratio under `both` -> under `all three`, and "
            f"what it does): {'; '.join(items) or 'no such row'}.")


def links_text(vs: pd.DataFrame, causes: pd.DataFrame, links: pd.DataFrame | None,
               extra: pd.DataFrame | None = None) -> str:
    """The rows on more than one node (vs_llmsimulator_links.csv): how many of the rows the run conditions and
    the split rule leave with no cause found they are, each row's ratio to LLMSimulator with every link NVLink
    (a proxy), and with LLMSimulator's layout (non_expert_parallel per_node, the toggle)."""
    if links is None or not len(links) or not len(causes):
        return ""
    per_node = devices_per_node()
    no_layout = causes if extra is None or not len(extra) else pd.concat(
        [causes, extra[~extra.condition.str.startswith("layout per_node")]], ignore_index=True)
    unexplained = [re.match(r"(.+) \((helios|hbf)\) [\d.]+$", x).groups()
                   for x in cause_classes(vs, no_layout)["unexplained"]]
    multi = {(f"{r.model} {r.system}", r.fork) for r in links.itertuples()}
    shared = [f"{label} ({fork})" for label, fork in unexplained if (label, fork) in multi]

    def verdict(before: float, after: float) -> str:
        if abs(before - 1) - abs(after - 1) >= MATERIAL:
            past = (before - 1) * (after - 1) < 0      # crossed LLMSimulator's value
            return ("toward LLMSimulator" + (", past it" if past else "")
                    + (", within 5 %" if abs(after - 1) <= ROOFLINE_TARGET else ""))
        if abs(after - 1) - abs(before - 1) >= MATERIAL:
            return "away from LLMSimulator"
        return "not toward LLMSimulator by 0.01"

    items = [f"{r.model} {r.system} ({r.fork}, {r.devices} devices) {r.roofline_over_llmsim:.3f} -> "
             f"{r.nvlink_over_llmsim:.3f} ({verdict(r.roofline_over_llmsim, r.nvlink_over_llmsim)})"
             for r in links.itertuples()]
    layout = ""
    if "per_node_over_llmsim" in links:
        lay = [f"{r.model} {r.system} ({r.fork}) {r.roofline_over_llmsim:.3f} -> {r.per_node_over_llmsim:.3f} "
               f"({verdict(r.roofline_over_llmsim, r.per_node_over_llmsim)})" for r in links.itertuples()]
        toward = int(links.per_node_moved_toward_llmsim.sum())
        sampled = ""
        if "per_node_sampled_over_llmsim" in links:
            both = [f"{r.model} {r.system} ({r.fork}) {r.roofline_over_llmsim:.3f} -> {r.per_node_sampled_over_llmsim:.3f} "
                    f"({verdict(r.roofline_over_llmsim, r.per_node_sampled_over_llmsim)})" for r in links.itertuples()]
            sampled = (f"With sampled routing as well (LLMSimulator's routing; `per_node_sampled_*` columns): "
                       f"{'; '.join(both)}. Together they move {int(links.per_node_sampled_moved_toward_llmsim.sum())} "
                       f"of {len(links)} rows toward LLMSimulator by at least {MATERIAL:.2f}, "
                       f"{int(links.per_node_sampled_within_5pct.sum())} of them within {ROOFLINE_TARGET:.0%}.\n")
        sampled += node_allreduce_text(links, verdict)
        layout = f"""
LLMSimulator's layout as a toggle (the mapping policy's `non_expert_parallel: per_node`, default `all_devices`):
attention, the MoE gate, dense FFNs and the LM head tensor-parallel over the {per_node} devices of a node, the
nodes data-parallel (each runs every n-th sequence; the slowest, the first, times the stage), the experts still
over every device, and only the tokens bound for another node's experts crossing InfiniBand, in one transfer
each way (as LLMSimulator times its MoE scatter in decode, `src/module/communication.cpp:117-189` of the helios
fork). Every row on more than one node re-run in roofline mode with it (`per_node_*` columns), ratio to
LLMSimulator before -> after: {"; ".join(lay)}. It moves {toward} of {len(links)} rows toward LLMSimulator by at
least {MATERIAL:.2f} of the ratio, {int(links.per_node_within_5pct.sum())} of them within {ROOFLINE_TARGET:.0%}.
{sampled}"""
    return f"""
### The rows on more than one node (`vs_llmsimulator_links.csv`)

{len(shared)} of the {len(unexplained)} rows the run conditions and the split rule leave with no cause found run on more than {per_node} devices, so
on more than one node: {"; ".join(shared) or "none"}. There the two simulators lay the devices out differently:
LLMSimulator, as `run_llmsim.py` runs it, keeps the non-expert layers' tensor parallelism inside a node
(`none_expert_tensor_degree` = devices per node, the nodes data-parallel), while archsim by default splits every
layer over all the devices, so its all-reduces cross InfiniBand (`Compiler.link_time`). Every row on more than one
node re-run in roofline mode with every device on NVLink (a proxy: it takes the all-reduce off InfiniBand and
leaves archsim's layout as it is), ratio to LLMSimulator before -> after: {"; ".join(items)}.
{layout}{layout_toggle_text(vs)}"""


def node_allreduce_text(links: pd.DataFrame, verdict) -> str:
    """LLMSimulator's size of the expert tensor-parallel all-reduce as a toggle (mapping key expert_allreduce
    node_tokens, the per_node_sampled_node_ar columns): each row on more than one node under LLMSimulator's layout
    and routing, before -> after it; the rows it changes are the ones with expert tensor parallelism."""
    if "per_node_sampled_node_ar_over_llmsim" not in links:
        return ""
    items, changed, et_only = [], [], True
    for r in links.itertuples():
        before, after = r.per_node_sampled_over_llmsim, r.per_node_sampled_node_ar_over_llmsim
        moved = r.per_node_sampled_node_ar_tokens_per_s != r.per_node_sampled_tokens_per_s
        et_only &= moved == r.system.endswith("+ET")
        if moved:
            changed.append(f"{r.model} {r.system} ({r.fork})")
        items.append(f"{r.model} {r.system} ({r.fork}) {before:.3f} -> {after:.3f} "
                     f"({verdict(before, after) if moved else 'unchanged'})")
    return f"""
Expert tensor parallelism's all-reduce (Duplex+PE+ET): a node's expert slices each hold a partial output for
every token routed to the node's experts, from every node, and archsim all-reduces them over the slices' group
for all the stage's tokens (`expert_allreduce: all_tokens`, default). LLMSimulator all-reduces them over the
same group (`moe_all_reduce_for_e_tp`, `src/module/expert.cpp:103-105`, called at `:185` of the helios fork) with
the size of the MoE layer's input (`AllReduce::forward`, `src/module/communication.cpp:18-37`: the tensor passed
in), which is the node's own tensor-parallel group's tokens; `expert_allreduce: node_tokens` takes that size.
Every row on more than one node re-run with it beside LLMSimulator's layout and routing
(`per_node_sampled_node_ar_*` columns), ratio to LLMSimulator under `layout per_node, routing sampled` -> with
it as well: {"; ".join(items)}.
It changes {len(changed)} of {len(links)} rows ({", ".join(changed) or "none"}{
    ": the rows with expert tensor parallelism" if et_only else ""}); on one node the two sizes are equal, so no
other row of the report changes. With LLMSimulator's layout and routing it moves {int(links.per_node_sampled_node_ar_moved_toward_llmsim.sum())} of {len(links)} rows
toward LLMSimulator by at least {MATERIAL:.2f}, {int(links.per_node_sampled_node_ar_within_5pct.sum())} of them within {ROOFLINE_TARGET:.0%}.
"""


def breakdown_text(vs: pd.DataFrame, causes: pd.DataFrame, bd: pd.DataFrame | None) -> str:
    """A decode iteration, part by part, in both simulators (llmsimulator_decode_breakdown.csv), and what the
    norm/residual and LM-head toggles of the causes table do to those rows."""
    if bd is None or not len(bd):
        return ""
    c = causes.set_index(["model", "system", "fork", "condition"]).toggled_over_llmsim
    parts = []
    for (model, system, _), g in bd.groupby(["model", "system", "archsim_keys"], sort=False):
        a, ref = g.archsim_ms_per_decode_iter, g.llmsim_ms_per_decode_iter
        keys = g.archsim_keys.iloc[0]
        shown = g[(g.archsim_ms_per_decode_iter > 0) | (g.llmsim_ms_per_decode_iter > 0)]
        ops = "; ".join(f"{r.part} {r.archsim_ms_per_decode_iter:.3f} / {r.llmsim_ms_per_decode_iter:.3f}"
                        for r in shown.itertuples())
        same = [r.part for r in shown.itertuples()
                if abs(r.archsim_ms_per_decode_iter - r.llmsim_ms_per_decode_iter) <= 1e-3]
        gap = shown.assign(d=shown.llmsim_ms_per_decode_iter - shown.archsim_ms_per_decode_iter)
        big = gap.loc[gap.d.abs().idxmax()]
        moves = ""
        v = vs[(vs.model == model) & (vs.system == system) & (vs.fork == "helios")]
        if len(v) and keys == "default":
            r0 = v.iloc[0]
            moves = (f" Ratio to LLMSimulator {r0.roofline_over_llmsim:.3f}; with `norm_and_residual timed` "
                     f"{c[model, system, 'helios', 'norm_and_residual timed']:.3f}, with `LM head untimed` "
                     f"{c[model, system, 'helios', 'LM head untimed']:.3f}.")
        parts.append(f"- {model} {system} (archsim keys: {keys}): archsim {a.sum():.3f} ms, LLMSimulator "
                     f"{ref.sum():.3f} ms per decode iteration; per part, archsim / LLMSimulator ms: {ops}. Equal "
                     f"within 0.001 ms: {', '.join(same) or 'none'}; the largest difference: {big.part} "
                     f"({big.d:+.3f} ms, LLMSimulator minus archsim).{moves}")
    return f"""
### A decode iteration, part by part (`llmsimulator_decode_breakdown.csv`)

archsim's roofline mode (milliseconds per decode-only iteration: the decode stages' operator time over their
count) beside LLMSimulator's per-decode-iteration columns (helios fork, `llmsimulator_runs.csv`), grouped as
`BREAKDOWN` in make_report.py (`norm_residual` = LLMSimulator's layernorm + residual columns, which archsim times
only with `norm_and_residual: true`; LLMSimulator's LM head times nothing; `moe_all_to_all` = archsim's MoE scatter
and gather, which LLMSimulator times as nothing for Grok-1: its `MoEScatter` and `MoEGather` compute a device's
experts as `num_routed_expert / total_num_device * e_tp_dg` in integer arithmetic, 0 with 8 experts on 16 devices,
`src/module/communication.cpp:140-141, 202-203, 325-326, 394-395` of the helios fork, so its `communication`
column is the all-reduces alone; with experts co-processed, xPU and Logic-PIM experts overlap and the `experts`
part is archsim's decode step less its other parts):
{chr(10).join(parts)}
"""


def split_rule_text(split: pd.DataFrame | None) -> str:
    """LLMSimulator's expert split rule as a toggle (vs_llmsimulator_split.csv): per row and routing, archsim's
    split beside LLMSimulator's, the experts each put on the xPU, and whether the rule moves the row toward
    LLMSimulator."""
    if split is None or not len(split):
        return ""

    def share(x, low) -> str:
        return f"{x / (x + low):.1%}" if x + low else "no split"

    def verdict(r) -> str:
        if r.moved_toward_llmsim:
            return "toward LLMSimulator" + (", within 5 %" if r.toggled_within_5pct else "")
        if abs(r.toggled_over_llmsim - 1) - abs(r.archsim_split_over_llmsim - 1) >= MATERIAL:
            return "away from LLMSimulator"
        return "not toward LLMSimulator by 0.01"

    from archsim.systems.duplex.compiler import LLMSIM_BANDWIDTH_FACTOR, make_device

    d = make_device("duplex", pim_timing="roofline")
    # tokens at which an expert's Logic-PIM cost reaches the xPU's floor of one weight read
    cross = (d.low_bw / d.xpu_bw) * (d.low_flops / d.low_bw) / LLMSIM_BANDWIDTH_FACTOR
    parts = []
    for cond, (_, base) in SPLIT_CONDITIONS.items():
        c = split[split.condition == cond]
        items = [f"{r.model} {r.system} ({r.fork}) {r.archsim_split_over_llmsim:.3f} -> {r.toggled_over_llmsim:.3f} "
                 f"(experts on the xPU {share(r.archsim_split_experts_on_xpu, r.archsim_split_experts_on_low)} -> "
                 f"{share(r.llmsim_split_experts_on_xpu, r.llmsim_split_experts_on_low)}; {verdict(r)})"
                 for r in c.itertuples()]
        routing = "sampled routing" if base else "archsim's default, uniform routing"
        parts.append(f"- `{cond}` ({routing}; {int(c.moved_toward_llmsim.sum())} of {len(c)} rows toward "
                     f"LLMSimulator by at least {MATERIAL:.2f}, {int(c.toggled_within_5pct.sum())} within "
                     f"{ROOFLINE_TARGET:.0%}): " + "; ".join(items) + ".")
    body = "\n".join(parts)
    return f"""
### The co-processing split rule (`vs_llmsimulator_split.csv`)

LLMSimulator splits a device's experts between the xPU and Logic-PIM by its own rule (`getIdxHigh` /
`getIdxHighOptimal`, `src/module/route.cpp:34-127` of the helios fork, called per MoE layer from `Route::forward`,
`route.cpp:235-244`): with at most 4 experts per device, experts, else 4 groups of consecutive local experts, move
to the xPU most tokens first while that lowers the larger of two sums, an expert costing max(1, t x 0.75 / ridge)
on the xPU and max(1, t x 0.75 / Op/B) / (bandwidth multiple) on Logic-PIM, in units of one weight read at the
xPU's bandwidth (with archsim's Duplex device, Op/B {d.low_flops / d.low_bw:.2f} and bandwidth multiple
{d.low_bw / d.xpu_bw:.2f}: an expert with fewer than {cross:.0f} tokens costs Logic-PIM less than the xPU's one
weight read); the first move that does not lower it ends the walk. archsim offers it as `coprocessing_split: llmsimulator` (default `interference_aware`;
`archsim/systems/duplex/compiler.py` llmsimulator_xpu_set). Every MoE row that splits experts re-run in roofline mode
with it, beside archsim's own split under the same routing (ratio to LLMSimulator archsim's split -> LLMSimulator's
rule; the share of the experts each put on the xPU, counted once per distinct stage, MoE layer and device):
{body}
"""


def layout_toggle_text(vs: pd.DataFrame, path: Path = OUT / "llmsimulator_toggles.csv") -> str:
    """LLMSimulator run with archsim's layout (non-expert tensor parallelism over every device, run_llmsim.py
    --ne-tp): its rows in llmsimulator_toggles.csv beside the default run's; no file, no sentence."""
    if not path.exists():
        return ""
    t = pd.read_csv(path)
    items = []
    for r in t.itertuples():
        name = LLMSIM_SYSTEMS.get(r.system, r.system)
        row = vs[(vs.model == r.model) & (vs.system == name) & (vs.fork == r.source) & (vs.devices == r.devices)]
        if not len(row):
            continue
        d = row.iloc[0]
        items.append(f"{r.model} {name} ({r.source}, non-expert tensor parallelism over {r.ne_tp} devices) "
                     f"{d.llmsim_tokens_per_s:.0f} -> {r.tokens_per_s:.0f} tok/s, archsim's roofline mode over it "
                     f"{d.roofline_over_llmsim:.3f} -> {d.archsim_roofline_tokens_per_s / r.tokens_per_s:.3f}")
    if not items:
        return ""
    from archsim.workload.spec import load_model

    refused = []
    for model, devices in sorted(set(zip(vs.model, vs.devices, strict=True))):
        kv = load_model(model).n_kv_heads
        if devices > devices_per_node() and model not in set(t.model) and kv % devices:
            refused.append(f"{model} ({kv} KV heads over {devices} ranks)")
    no_run = (f" Not run that way: {'; '.join(refused)}: the KV heads do not divide over the tensor-parallel ranks, "
              "which LLMSimulator refuses (`src/module/parallel.cpp:145-146` of the helios fork)." if refused else "")
    return f"""
The other way round, LLMSimulator run with archsim's layout (`run_llmsim.py --ne-tp`, rows in
`llmsimulator_toggles.csv`): {"; ".join(items)}.{no_run}
"""


def llmsim_text(vs: pd.DataFrame, causes: pd.DataFrame, extra: pd.DataFrame | None = None) -> str:
    """The authors' simulator beside archsim (vs_llmsimulator.csv) and the gap causes (causes_text)."""
    if not len(vs):
        return "## Beside the authors' simulator (LLMSimulator)\n\nNo LLMSimulator runs at this setting.\n"
    within = vs[vs.roofline_within_5pct]
    out = vs[~vs.roofline_within_5pct]
    cols = ["model", "system", "fork", "llmsim_tokens_per_s", "archsim_roofline_tokens_per_s", "roofline_over_llmsim",
            "archsim_engine_tokens_per_s", "engine_over_llmsim", "cause_logic_pim_engine_timing", "cause_interference"]
    missing = sorted(set(MODELS) - set(vs.model))
    return f"""## Beside the authors' simulator (LLMSimulator)

LLMSimulator (the Duplex authors' simulator, public forks HeliosZhou/LLMSimulator = `helios` and
jeongminl/HBF-LLMSimulator = `hbf`, built outside this repository; docs/duplex-llmsimulator.md) run on the
report's cases by `reports/duplex/run_llmsim.py` (rows in `llmsimulator_runs.csv`), beside archsim's roofline
mode (Logic-PIM a roofline, no interference: the Duplex code's own default timing) and its engine mode (the
report's runs), in `vs_llmsimulator.csv`. The engine / roofline ratio of the Duplex variants is split into
its two causes, each a toggle run: `cause_logic_pim_engine_timing` = engine without interference / roofline,
`cause_interference` = engine / engine without interference (their product is engine / roofline). The forks'
Llama-3 70B and OPT-66B presets and the BankGroup-PIM kind (pim_x 4, Op/B 8) were added to the forks by us
from the paper's Table I and the code's energy table (not the authors'): those rows rest on our presets.

{table(vs, cols, {"llmsim_tokens_per_s": 0, "archsim_roofline_tokens_per_s": 0, "roofline_over_llmsim": 3,
                  "archsim_engine_tokens_per_s": 0, "engine_over_llmsim": 3, "cause_logic_pim_engine_timing": 3,
                  "cause_interference": 3})}

archsim's roofline mode is within {ROOFLINE_TARGET:.0%} of LLMSimulator on {len(within)} of {len(vs)} rows; outside it:
{"; ".join(f"{r.model} {r.system} ({r.fork}) {r.roofline_over_llmsim:.3f}" for r in out.itertuples()) or "none"}.
Models without LLMSimulator runs at this setting: {", ".join(missing) or "none"}.
{causes_text(vs, causes, extra)}"""



INTERFERENCE_TEXT = """How the interference is measured (`archsim.pim.logic_pim.LogicPimTimer.interference`, re-run by
`python -c "from archsim.pim.logic_pim import *; print(LogicPimTimer().interference([Segment(0, 16, 4),
Segment(1, 16, 4), Segment(2, 16, 4)], (3,), 1.0))"` for decode attention beside a full-rate xPU stream):
one HBM3-Duplex channel runs the Logic-PIM operator's bundle streams (both pseudo-channels, its spaces and
Op/B, scaled to 32 bundle rows) beside an FR-FCFS xPU read stream in the xPU operator's spaces, whose requests
arrive at the xPU operator's bandwidth demand (its bytes over its interference-free time, as a fraction of
the xPU path's peak); and each alone. The xPU's slow-down is its bursts served alone over those served beside
Logic-PIM in the same window, Logic-PIM's the ratio of its stream times. The two then progress at those rates
while both run (the first to finish leaves the other alone). At full demand, beside Mixtral's decode-attention
KV stream, the xPU keeps {keep_own:.0f} % of its bandwidth with Logic-PIM's commands on their own path and
{keep_shared:.0f} % when they share its column command bus (section above). The xPU operators with the
highest demand lose most: {worst}.
"""


def gaps_text(args, df, gaps, load, load_eff, stream) -> str:
    """The gaps to the paper, each with the run (gaps.csv, load_xpu_efficiency.csv, comparison.csv) that toggles
    its cause; figures are read from those tables."""
    g = gaps.set_index(["experiment", "setting", "model", "system"]).tokens_per_s
    tp = df.pivot(index="model", columns="system", values="tokens_per_s")
    lay = {m: g["layout", "spread (now)", m, "Duplex"] / g["layout", "old (one space per device)", m, "Duplex"]
           for m in ("mixtral-8x7b", "glam")}
    ib, nv = "InfiniBand between nodes (paper)", "all devices on NVLink"
    grok = {k: g["links", k, "grok-1", "Duplex+PE+ET"] / g["links", k, "grok-1", "GPU"] for k in (ib, nv)}
    lsets = [k for k in gaps[gaps.experiment == "lengths"].setting.unique()]
    llama = {k: g["lengths", k, "llama3-70b", "Duplex"] / g["lengths", k, "llama3-70b", "GPU"] for k in lsets}
    peak = load.groupby("system").served_req_per_s.max()
    peak_eff = load_eff.groupby("system").served_req_per_s.max()
    sat, sat_eff = {n: saturation(load, n) for n in ("GPU", "Duplex")}, {n: saturation(load_eff, n) for n in ("GPU", "Duplex")}
    moe = [m for m in ("mixtral-8x7b", "glam", "grok-1") if m in tp.index]
    pe = {m: tp.loc[m, "Duplex+PE"] / tp.loc[m, "Duplex"] for m in moe}
    inter_own = {m: tp.loc[m, "Duplex+PE"] / tp.loc[m, "Duplex+PE (no interference)"] for m in moe}
    inter_sh = {m: tp.loc[m, "Duplex+PE (shared column bus)"] / tp.loc[m, "Duplex+PE (no interference)"] for m in moe}
    cp = f"+PE, {default_command_path()}"
    pe_free = {m: tp.loc[m, "Duplex+PE (no interference)"] / tp.loc[m, "Duplex (no interference)"] for m in moe}
    f = lambda d: ", ".join(f"{k} {v:.2f}x" for k, v in d.items())        # noqa: E731
    eff = stream.set_index(["refresh", "spaces"]).fraction_of_peak
    e2r = {m: tp.loc[m, "Duplex"] / tp.loc[m, "Duplex (roofline)"] for m in tp.index}
    from archsim.dram.spec import load_spec

    timing = load_spec("HBM3_Duplex").timing
    mx_layout = tp.loc["mixtral-8x7b", "Duplex"] / tp.loc["mixtral-8x7b", "Duplex (old layout)"]
    mx_why = (f" (at batch {args.batch} a Mixtral expert sees ~{args.batch * 2 // 8} tokens, Op/B above Logic-PIM's "
              "8, so the GEMM modules, not the bundles, bound it)") if mx_layout < 1.02 else ""
    return f"""## Gaps to the paper, explained (each with the run that toggles its cause)

* **Expert layout (issue 22).** Before issue 22 a device's experts all sat in one bank-bundle space whenever
  the device count was a multiple of 4 (expert e in space e mod 4), so Logic-PIM could not hide one bundle
  row's precharge and activate behind another bundle's reads. That was a layout accident, not the hardware.
  Spread over the four spaces (now): Duplex throughput {f(lay)} the old layout on the issue's small case
  (32 requests, (512, 128), batch 32; `gaps.csv`, experiment `layout`); at the report's setting GLaM
  {tp.loc['glam', 'Duplex'] / tp.loc['glam', 'Duplex (old layout)']:.2f}x, Mixtral {mx_layout:.2f}x{mx_why}.
* **Timing model of the low unit.** Duplex's own simulator times operators with a roofline by default;
  here Logic-PIM runs as bundle command streams on the channel engine. Duplex over `Duplex (roofline)`:
  {f(e2r)}. On the engine a weight striped over 2-4 spaces streams at {eff['allbank', 4]:.1%} of the bundle
  peak with refresh and {eff['none', 4]:.1%} without; in one space (no other bundle to overlap its
  precharge and activate with) {eff['allbank', 1]:.1%} / {eff['none', 1]:.1%} (`stream_efficiency.csv`, toggles
  spaces and refresh). So refresh (nRFC = {timing['nRFC']} of every nREFI = {timing['nREFI']} cycles) is most
  of the gap where Logic-PIM is bandwidth-bound (GLaM: ~{max(1, args.batch * 2 // 64)} tokens per expert); the xPU roofline, like the
  Duplex code's, pays no refresh. BankGroup-PIM's roofline has Logic-PIM's bandwidth and Op/B but pays more
  energy per bit (2.68 vs 1.81 pJ/b), so it equals `Duplex (roofline)` in throughput.
* **Co-processing interference.** The paper (and the Duplex code's two-track roofline) charges nothing when
  the xPU and Logic-PIM run at once; here both go through the channel engine (the `interference` columns and
  the section above). Throughput of {cp} with interference (its split chosen knowing it) over +PE without
  interference: {f(inter_own)}; with the shared column bus: {f(inter_sh)}.
* **Expert co-processing (+PE).** +PE over Duplex: {f(pe)} with interference,
  {f(pe_free)} without (the paper: 1.04x on average); the split is interference-aware (section above) and
  moves whole bundle spaces (the paper's rule that keeps the xPU off Logic-PIM's bundles), which is coarse
  with 2 experts per device (Mixtral) under uniform routing.
* **Links.** All-reduce and all-to-all are ring formulas with the Duplex code's NVLink (450 GB/s, 0.8 us)
  and InfiniBand (50 GB/s) figures, with no overlap with compute. Grok-1 (16 devices, 2 nodes), Duplex+PE+ET
  over the GPU: {grok[ib]:.2f}x with InfiniBand between the nodes, {grok[nv]:.2f}x with every device on NVLink
  (`gaps.csv`, experiment `links`): the inter-node collectives cap both systems and shrink the ratio.
* **Load study.** GPU / Duplex keep up to {sat['GPU']:g} / {sat['Duplex']:g} QPS and serve at most
  {peak['GPU']:.1f} / {peak['Duplex']:.1f} req/s here, against the paper's ~9 / ~14 req/s. The xPU roofline
  runs at the H100's peaks on every operator (as the Duplex code's does). With the xPU at
  {XPU_EFFICIENCY:.0%} of its peaks (our assumption, one round value set before the run, not fitted; `load_xpu_efficiency.csv`) the GPU keeps up to
  {sat_eff['GPU']:g} QPS, at most {peak_eff['GPU']:.1f} req/s, and Duplex up to {sat_eff['Duplex']:g} QPS,
  at most {peak_eff['Duplex']:.1f} req/s. Under heavy load more stages are mixed (prompts arriving),
  mixed-stage MoE runs on the xPU by the dispatch table, and Duplex's advantage shrinks; 2xGPU (twice the
  devices, KV capacity and compute) then sustains more than Duplex, where the paper puts the two about level.
* **Llama-3 70B** gains little at (1024, 1024): its 141 GB of weights (FC layers, xPU) dominate and the KV
  cache (decode attention, the only Logic-PIM work of a dense model) is small. Duplex over the GPU:
  {f(llama)} (`gaps.csv`, experiment `lengths`, batch {args.batch}): longer sequences make decode attention, and
  Logic-PIM's share, larger. OPT-66B's 2xGPU is above 2x: on 4 devices its KV reservation caps the batch
  below 64.
* **Not toggled (outside the model, stated):** one (L_in, L_out) and batch for all models where the paper
  sweeps (256, 256)-(4096, 4096) and batch 32-128 (averages differ in composition); energy is DRAM bits per
  path x the Duplex code's pJ/b, activates and MACs, with refresh only inside engine-timed Logic-PIM
  streams, no static power and no link energy (the Duplex code also reports DRAM + compute only); the
  softmax unit's time is not modelled (assumed hidden under the V stream of decode attention).
"""


if __name__ == "__main__":
    main()
