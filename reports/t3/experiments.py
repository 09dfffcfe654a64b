"""Experiments behind the T3 report's gaps (issue 22), each a run that toggles one cause:

1. `mca`: T3-MCA's occupancy threshold and starvation cap swept on T-NLG FC-2 (TP 8) - sublayer time, GEMM
   end, reduce-scatter end, and the GEMM's compute stall cycles (CUs waiting for operands) beyond the
   sequential GEMM's own, i.e. the stalls communication traffic causes, with and without MCA;
2. `nmc`: the NMC update's cost (the near-bank adder latency nALU of the NMC_ADD command, and the RD + adder +
   WR form) against the 500B-class result it produces (GPT-3 out-projection, TP 32), the cost measured per
   update as DRAM time against a plain write on the same accesses (diagnose.access_costs);
3. `hash`: the address mapping - the preset's IPoly channel hash against the unhashed RoRaBgBaChCo layout
   (the sensitivity row) on the sublayers whose chunks camp on a few channels unhashed.

    .venv/bin/python reports/t3/experiments.py [--part mca,nmc,hash] [--tokens N] [-o DIR]

Writes DIR/experiments_<part>.csv (rows appended as they finish; a killed run resumes) and the figures
DIR/fig_mca.png, DIR/fig_nmc_cost.png. make_report.py reads the CSVs into README.md.
"""
from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import pandas as pd

from archsim.dram.spec import load_spec
from archsim.systems.t3.params import load_params
from archsim.systems.t3.shapes import sublayer_shape
from archsim.systems.t3.sim import CONFIGS, SublayerRun, rs_link_bound_s, simulate_sublayer
from archsim.workload.spec import load_model

HERE = Path(__file__).resolve().parent
MCA_CASE = ("t-nlg", "fc2_fwd", 8)
NMC_CASE = ("gpt3-175b", "op_fwd", 32)
HASH_CASES = [("gpt3-175b", "op_fwd", 32)]
UNHASHED = "RoRaBgBaChCo"


def _row(r: SublayerRun, seq: SublayerRun | None, **keys) -> dict:
    us = r.spec.tCK_s * 1e6
    out = {**keys, "config": r.config, "sublayer_us": r.sublayer_s * 1e6, "gemm_us": r.gemm_cycles * us,
           "rs_end_us": r.rs_end_cycles * us, "compute_stall_cycles": r.extra["compute_stall_cycles"],
           "comm_latency_max_us": r.comm_latency_max * us, "rs_link_bound_us": rs_link_bound_s(r) * 1e6,
           "chunk_channels_min": r.extra["chunk_channels_min"], "chunk_channels_max": r.extra["chunk_channels_max"]}
    if r.config == "sequential":
        out["rs_us"] = (r.rs_end_cycles - r.gemm_cycles) * us
    else:
        out["rs_us"] = (r.rs_end_cycles - (r.extra["first_send_cycles"] or 0)) * us
    if seq is not None:
        out["speedup"] = seq.sublayer_s / r.sublayer_s
        out["comm_stall_cycles"] = r.extra["compute_stall_cycles"] - seq.extra["compute_stall_cycles"]
    traj = r.extra["threshold_trajectory"]
    if traj:
        out.update(threshold_first=traj[0], threshold_min=min(traj), threshold_max=max(traj),
                   threshold_steps=len(traj))
    return out


def _append(csv: Path, rows: list[dict], row: dict) -> None:
    rows.append(row)
    print(row, flush=True)
    pd.DataFrame(rows).to_csv(csv, index=False)


def _load(csv: Path) -> list[dict]:
    return pd.read_csv(csv).to_dict("records") if csv.exists() else []


def part_mca(out: Path, tokens: int) -> None:
    csv = out / "experiments_mca.csv"
    rows = _load(csv)
    for r in rows:
        r["gate"] = r.get("gate") if isinstance(r.get("gate"), str) else "all"
    done = {(str(r["threshold"]), str(r["starvation_cap"]), r["gate"]) for r in rows}
    model, sub, tp = MCA_CASE
    shape = sublayer_shape(load_model(model), sub, tp, tokens)
    base = load_params()
    seq = simulate_sublayer(base, shape, tp, "sequential", devices="one")
    key = {"case": f"{model} {sub} TP{tp}", "tokens": tokens}
    if ("none", "none", "all") not in done:
        _append(csv, rows, {**_row(seq, seq, **key), "threshold": "none", "starvation_cap": "none", "gate": "all"})
        fr = simulate_sublayer(base, shape, tp, "t3", devices="one")
        _append(csv, rows, {**_row(fr, seq, **key), "threshold": "none (FR-FCFS)", "starvation_cap": "none",
                            "gate": "all"})
    # gate all (the preset): every threshold x cap; gate row (a held-back source finishes accesses to rows it
    # opened): every threshold at the preset's cap - the toggle of the row-holding cause
    sweep = [(thr, cap, "all") for thr in (4, 16, 32, "auto", "dynamic") for cap in (100, 1000, 10000)]
    sweep += [(thr, 1000, "row") for thr in (4, 16, 32, "auto", "dynamic")]
    for thr, cap, gate in sweep:
        if (str(thr), str(cap), gate) in done:
            continue
        p = load_params(overrides={"mca.threshold": thr, "mca.starvation_cap_cycles": cap, "mca.gate": gate})
        r = simulate_sublayer(p, shape, tp, "t3-mca", devices="one")
        _append(csv, rows, {**_row(r, seq, **key), "threshold": thr, "starvation_cap": cap, "gate": gate})


def part_mca32(out: Path, tokens: int) -> None:
    """MCA where T3's GEMM stalls most: GPT-3 out-projection at TP 32 (its communication-caused stalls are
    ~60% of the sequential GEMM); thresholds below the paper's estimate, both gates."""
    csv = out / "experiments_mca_tp32.csv"
    rows = _load(csv)
    done = {(str(r["threshold"]), r["gate"]) for r in rows}
    model, sub, tp = NMC_CASE
    shape = sublayer_shape(load_model(model), sub, tp, tokens)
    key = {"case": f"{model} {sub} TP{tp}", "tokens": tokens}
    seq = simulate_sublayer(load_params(), shape, tp, "sequential", devices="one")
    if ("none", "all") not in done:
        fr = simulate_sublayer(load_params(), shape, tp, "t3", devices="one")
        _append(csv, rows, {**_row(fr, seq, **key), "threshold": "none", "gate": "all"})
    for thr, gate in ((8, "row"), (32, "row"), ("auto", "row"), (32, "all")):
        if (str(thr), gate) in done:
            continue
        p = load_params(overrides={"mca.threshold": thr, "mca.gate": gate})
        r = simulate_sublayer(p, shape, tp, "t3-mca", devices="one")
        _append(csv, rows, {**_row(r, seq, **key), "threshold": thr, "gate": gate})


def part_nmc(out: Path, tokens: int) -> None:
    from diagnose import access_costs

    csv = out / "experiments_nmc.csv"
    rows = _load(csv)
    done = {r["update"] for r in rows}
    model, sub, tp = NMC_CASE
    shape = sublayer_shape(load_model(model), sub, tp, tokens)
    base = load_params()
    seq = None
    variants = [(f"NMC_ADD, nALU {a}", a, "command") for a in (4, 16, 48)] + [("RD + adder + WR", 4, "rd_wr")]
    for name, alu, form in variants:
        if name in done:
            continue
        spec = load_spec(base.spec.raw["name"], overrides={"org.channels": base.spec.channels, "timing.nALU": alu})
        p = dataclasses.replace(base, spec=spec, alu_latency_cycles=alu, nmc_update=form)
        cost = access_costs(p)
        per_update = cost["nmc_update (NMC_ADD command)" if form == "command" else "nmc_update (RD, adder, WR)"]
        if seq is None:
            seq = simulate_sublayer(base, shape, tp, "sequential", devices="one")
        r = simulate_sublayer(p, shape, tp, "t3", devices="one")
        _append(csv, rows, {**_row(r, seq, case=f"{model} {sub} TP{tp}", tokens=tokens), "update": name,
                            "nALU": alu, "update_vs_write": per_update / cost["write"],
                            "ideal_speedup": seq.sublayer_s / (max(seq.gemm_cycles, seq.rs_end_cycles - seq.gemm_cycles)
                                                               * seq.spec.tCK_s + seq.ag_s)})


def part_hash(out: Path, tokens: int) -> None:
    csv = out / "experiments_hash.csv"
    rows = _load(csv)
    done = {(r["case"], r["mapping"]) for r in rows}
    for model, sub, tp in HASH_CASES:
        case = f"{model} {sub} TP{tp}"
        if (case, "unhashed") in done:
            continue
        shape = sublayer_shape(load_model(model), sub, tp, tokens)
        p = load_params(overrides={"memory.mapping": UNHASHED})
        runs = {c: simulate_sublayer(p, shape, tp, c, devices="one") for c in CONFIGS}
        for r in runs.values():
            _append(csv, rows, {**_row(r, runs["sequential"], case=case, tokens=tokens), "mapping": "unhashed"})


def figures(out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from archsim.report.palette import color_of

    made = []
    mca = out / "experiments_mca.csv"
    if mca.exists():
        df = pd.read_csv(mca)
        df["gate"] = df["gate"].fillna("all") if "gate" in df else "all"
        ref = df[df["starvation_cap"].astype(str) == "none"]
        m = df[df["starvation_cap"].astype(str) != "none"].copy()
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.6))
        labels = [str(t) for t in dict.fromkeys(m["threshold"].astype(str))]
        groups = list(dict.fromkeys(zip(m["starvation_cap"].astype(str), m["gate"], strict=True)))
        w = 0.8 / max(len(groups), 1)
        for j, (cap, gate) in enumerate(groups):
            sel = m[(m["starvation_cap"].astype(str) == cap) & (m["gate"] == gate)]
            xs = [labels.index(str(t)) + (j - (len(groups) - 1) / 2) * w for t in sel["threshold"].astype(str)]
            name = f"T3-MCA, cap {cap} cycles" + (", row commands only held" if gate == "row" else "")
            # every bar is T3-MCA (its palette colour); the starvation caps as shades, the row gate hatched
            shade = {"color": color_of("t3_mca"), "alpha": (1.0, 0.7, 0.45, 0.3)[j % 4],
                     "hatch": "//" if gate == "row" else None, "edgecolor": "black", "linewidth": 0.3}
            a1.bar(xs, sel["sublayer_us"], w, label=name, **shade)
            a2.bar(xs, sel["comm_stall_cycles"] / 1e3, w, label=name, **shade)
        for _, r in ref.iterrows():
            name = "Sequential" if r["config"] == "sequential" else "T3 (FR-FCFS, no MCA)"
            style = ":" if r["config"] == "sequential" else "--"
            a1.axhline(r["sublayer_us"], ls=style, color=color_of(r["config"]), label=name)
            if r["config"] != "sequential":
                a2.axhline(r["comm_stall_cycles"] / 1e3, ls="--", color=color_of(r["config"]), label=name)
        shown = []
        for t in labels:
            first = m[m["threshold"].astype(str) == t]["threshold_first"]
            shown.append(f"{t}\n(= {int(first.iloc[0])})" if t in ("auto", "dynamic") and len(first) else t)
        for a in (a1, a2):
            a.set_xticks(range(len(labels)))
            a.set_xticklabels(shown)
            a.set_xlabel("MCA occupancy threshold (compute-queue entries per channel)")
        a1.set_ylabel("sublayer time (microseconds)")
        a2.set_ylabel("GEMM stall caused by communication\n(thousand DRAM cycles, vs sequential GEMM)")
        a1.set_title(f"{df['case'].iloc[0]}, {int(df['tokens'].iloc[0])} tokens: sublayer time")
        a2.set_title("compute stalls caused by communication traffic")
        for a in (a1, a2):
            a.set_ylim(0, a.get_ylim()[1] * 1.45)
            a.legend(fontsize=7, loc="upper right", ncol=2)
        fig.tight_layout()
        p = out / "fig_mca.png"
        fig.savefig(p, dpi=120)
        plt.close(fig)
        made.append(p)
    nmc = out / "experiments_nmc.csv"
    if nmc.exists():
        df = pd.read_csv(nmc)
        fig, ax = plt.subplots(figsize=(7.5, 4.6))
        names = [f"{r['update']}\n({r['update_vs_write']:.2f}x a write's DRAM time)" for _, r in df.iterrows()]
        ax.bar(range(len(df)), (df["speedup"] - 1) * 100, 0.6, label="T3 (ours)", color=color_of("t3"))
        ax.set_xticks(range(len(df)))
        ax.set_xticklabels(names, fontsize=7)
        ax.axhline((df["ideal_speedup"].iloc[0] - 1) * 100, ls="--", lw=2, color=color_of("ideal"),
                   label="ideal GEMM-RS overlap (ours)")
        ax.axhline(29, ls=":", color=color_of("paper"), label="paper: 500B-class T3-MCA geomean (+29%)")
        ax.set_xlabel("NMC update: form and adder latency nALU (cycles of 1 ns)")
        ax.set_ylabel("sublayer speed-up over Sequential (%)")
        ax.set_title(f"{df['case'].iloc[0]}, {int(df['tokens'].iloc[0])} tokens")
        ax.legend(fontsize=7)
        fig.tight_layout()
        p = out / "fig_nmc_cost.png"
        fig.savefig(p, dpi=120)
        plt.close(fig)
        made.append(p)
    return made


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", default="mca,nmc,hash")
    ap.add_argument("--tokens", type=int, default=1024)
    ap.add_argument("--mca-tokens", type=int, default=512, help="tokens of the MCA sweep (15 runs)")
    ap.add_argument("-o", "--out", type=Path, default=HERE, help="output folder (default: the report's own)")
    ap.add_argument("--figures-only", action="store_true")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.figures_only:
        for part in args.part.split(","):
            {"mca": lambda: part_mca(args.out, args.mca_tokens), "nmc": lambda: part_nmc(args.out, args.tokens),
             "hash": lambda: part_hash(args.out, args.tokens),
             "mca32": lambda: part_mca32(args.out, args.tokens)}[part]()
    for p in figures(args.out):
        print("wrote", p)


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(HERE))     # diagnose.access_costs
    main()
