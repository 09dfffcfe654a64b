"""T3 reproduction report: sublayer speed-ups and data-movement change per model x TP x sublayer, next to the
paper's (T3, ASPLOS'24; numbers from reference/duplex-t3.md sec. 7).

    .venv/bin/python reports/t3/make_report.py [--tokens 1024] [--quick] [--nmc command|rd_wr]

Writes reports/t3/results.csv (`--nmc command`, the default: an NMC update is the memory standard's NMC_ADD
command) or reports/t3/results_rd_wr.csv (`--nmc rd_wr`: the update as the engine's RD, adder latency, WR) -
one row per case, appended as each finishes; cases already in it are not run again, so a killed run resumes -
and reports/t3/README.md from both (the RD + WR columns when its file exists). Every run is `archsim run --system t3` with the
settings in the table (devices: one - device 0 cycle-accurate, neighbours by ring symmetry).
`--readme-only` rewrites README.md from results.csv (cases not in it are listed as not run).
"""
from __future__ import annotations

import argparse
import math
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pandas as pd

from archsim import api
from archsim.systems.t3.shapes import sublayer_shape
from archsim.workload.spec import load_model

HERE = Path(__file__).resolve().parent
CASES = [("mega-gpt2", 8), ("mega-gpt2", 16), ("t-nlg", 8), ("t-nlg", 16), ("gpt3-175b", 32), ("palm", 32),
         ("mt-nlg", 32)]
SUBLAYERS = ["op_fwd", "fc2_fwd", "fc1_bwd", "ip_bwd"]
PAPER = {  # metric: (geomean, max) as fractions; reference/duplex-t3.md sec. 7
    "t3_mca": (0.30, 0.47), "t3": (0.20, 0.39), "ideal": (0.35, 0.50), "data_movement": (-0.22, -0.36)}


# per-case figures kept beside the speed-ups (archsim.systems.t3.system stats)
EXTRA = ["sequential_rs_s", "t3_rs_s", "t3_mca_rs_s", "rs_link_bound_s", "sequential_rs_vs_link_bound",
         "chunk_channels_min", "chunk_channels_max", "channels", "sequential_gemm_s",
         "sequential_compute_stall_cycles", "t3_compute_stall_cycles", "t3_mca_compute_stall_cycles",
         "t3_comm_stall_cycles", "t3_mca_comm_stall_cycles", "t3_mca_threshold_trajectory", "memory_mapping"]


def geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def _run_case(cfg: dict) -> tuple[dict, float]:
    import resource

    stats = api.run(cfg).stats
    return stats, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=1024)
    ap.add_argument("--quick", action="store_true", help="first sublayer of each case only")
    ap.add_argument("--readme-only", action="store_true", help="rewrite README.md from results.csv")
    ap.add_argument("--nmc", choices=["command", "rd_wr"], default="command",
                    help="NMC update as the standard's update command, or as RD + adder + WR")
    ap.add_argument("-o", "--out", type=Path, default=HERE,
                    help="output folder (default: the report's own; give another for small runs)")
    ap.add_argument("--cases", default=None, help="only these model:tp pairs, e.g. gpt3-175b:32,t-nlg:8")
    ap.add_argument("--sublayers", default=None, help="only these sublayers, e.g. op_fwd,fc2_fwd")
    args = ap.parse_args()
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    cases = CASES if args.cases is None else [(c.split(":")[0], int(c.split(":")[1])) for c in args.cases.split(",")]
    subs = SUBLAYERS if args.sublayers is None else args.sublayers.split(",")
    csv = out / ("results.csv" if args.nmc == "command" else "results_rd_wr.csv")
    rows = pd.read_csv(csv).to_dict("records") if csv.exists() else []
    rows = [r for r in rows if r["tokens"] == args.tokens]
    done = {(r["model"], r["tp"], r["sublayer"]) for r in rows}
    missing = []
    for model, tp in cases:
        for sub in subs[:1] if args.quick else subs:
            if (model, tp, sub) in done:
                continue
            if args.readme_only:
                missing.append(f"{model} TP {tp} {sub}")
                continue
            # FC-1 backward has FC-2 forward's GEMM shape for non-gated models: the same simulation, run once
            k = sublayer_shape(load_model(model), sub, tp, args.tokens).k
            twin = next((r for r in rows if (r["model"], r["tp"], r["k"]) == (model, tp, k)
                         and {r["sublayer"], sub} == {"fc2_fwd", "fc1_bwd"}), None)
            if twin is not None:
                rows.append({**twin, "sublayer": sub, "sim_wall_s": 0.0})
                pd.DataFrame(rows).to_csv(csv, index=False)
                continue
            cfg = {"system": "t3", "model": model, "tp": tp, "sublayer": sub, "tokens": args.tokens,
                   "nmc_update": args.nmc}
            # each case in a fresh process: the request pools of a 500B-class case are GBs, and one process
            # running every case kept them (peak 15 GB); here each case peaks at its own size (csv: rss_gb)
            with ProcessPoolExecutor(max_workers=1, max_tasks_per_child=1) as ex:
                s, rss_gb = ex.submit(_run_case, cfg).result()
            rows.append({"model": model, "tp": tp, "sublayer": sub, "tokens": args.tokens, "k": s["k"],
                         "comm_fraction": s["comm_fraction"], "sequential_us": s["sequential_s"] * 1e6,
                         "speedup_t3": s["speedup_t3"], "speedup_t3_mca": s["speedup_t3_mca"],
                         "speedup_ideal": s["speedup_ideal"],
                         "data_movement_change_t3": s["data_movement_change_t3"], "sim_wall_s": s["sim_wall_s"],
                         "rss_gb": rss_gb, **{k: s[k] for k in EXTRA if k in s}})
            print(rows[-1], flush=True)
            pd.DataFrame(rows).to_csv(csv, index=False)
    if args.nmc == "rd_wr":      # the README's main columns are the command runs
        csv = out / "results.csv"
        rows = [r for r in pd.read_csv(csv).to_dict("records") if r["tokens"] == args.tokens] if csv.exists() else []
    if not rows:
        print("no results to report")
        return
    df = pd.DataFrame(rows)
    figs = figures(out, df)
    write_readme(out, df, args, missing, figs)


def _label(r) -> str:
    return f"{r['model']} TP{r['tp']} {r['sublayer']}"


def figures(out: Path, df: pd.DataFrame) -> list[str]:
    """fig_speedup.png (speed-up per row, the paper's geomeans marked) and fig_rs_link.png (reduce-scatter
    time against the ring link bound per row); the names of the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from archsim.report.palette import color_of

    x = np.arange(len(df))
    labels = [_label(r) for r in df.to_dict("records")]
    fig, ax = plt.subplots(figsize=(13, 5))
    w = 0.2
    for j, (key, name) in enumerate((("sequential", "Sequential"), ("t3", "T3"), ("t3_mca", "T3-MCA"),
                                     ("ideal", "ideal GEMM-RS overlap"))):
        y = np.ones(len(df)) if key == "sequential" else df[f"speedup_{key}"].to_numpy()
        ax.bar(x + (j - 1.5) * w, y, w, label=f"{name} (ours)", color=color_of(key))
    for key, name, style in (("t3", "T3", ":"), ("t3_mca", "T3-MCA", "--"), ("ideal", "ideal", "-.")):
        ax.axhline(1 + PAPER[key][0], ls=style, color=color_of("paper"), lw=1,
                   label=f"paper geomean, {name} (+{PAPER[key][0]:.0%})")
    ax.set_xticks(x)
    ax.set_xticklabels(labels, rotation=70, ha="right", fontsize=7)
    ax.set_ylabel("sublayer speed-up over Sequential (x)")
    ax.set_ylim(0.8, max(1.8, float(df[["speedup_t3", "speedup_t3_mca", "speedup_ideal"]].max().max()) + 0.05))
    ax.set_title("T3 sublayer speed-ups per model, TP and sublayer (1024 tokens; the paper gives geomeans only)")
    ax.legend(fontsize=7, ncol=4, loc="upper left")
    fig.tight_layout()
    fig.savefig(out / "fig_speedup.png", dpi=120)
    plt.close(fig)
    made = ["fig_speedup.png"]
    if "rs_link_bound_s" in df:
        fig, ax = plt.subplots(figsize=(13, 4.8))
        for j, (key, name) in enumerate((("sequential", "Sequential RS (after the GEMM)"),
                                         ("t3", "T3 RS (first send to last reduction)"),
                                         ("t3_mca", "T3-MCA RS"))):
            ax.bar(x + (j - 1) * 0.27, df[f"{key}_rs_s"] / df["rs_link_bound_s"], 0.27, label=name,
                   color=color_of(key))
        ax.axhline(1.0, color="k", lw=1, label="ring link bound, (N-1) x (hop latency + chunk bytes / link bandwidth)")
        ax.axhline(1.1, color="k", lw=1, ls=":", label="link bound + 10%")
        ax.set_xticks(x)
        ax.set_xticklabels(labels, rotation=70, ha="right", fontsize=7)
        ax.set_ylabel("reduce-scatter time / ring link bound (x)")
        ax.set_ylim(0, ax.get_ylim()[1] * 1.25)
        ax.set_title("Reduce-scatter against its ring link bound (hashed address mapping: every chunk on all 32 channels)")
        ax.legend(fontsize=7, loc="upper left")
        fig.tight_layout()
        fig.savefig(out / "fig_rs_link.png", dpi=120)
        plt.close(fig)
        made.append("fig_rs_link.png")
    return made


def _md_table(df: pd.DataFrame) -> list[str]:
    cols = list(df.columns)
    return ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols),
            *["| " + " | ".join(str(v) for v in r) + " |" for r in df.itertuples(index=False)]]


def write_readme(out: Path, df: pd.DataFrame, args, missing: list[str], figs: list[str]) -> None:
    ours = {"t3_mca": df["speedup_t3_mca"], "t3": df["speedup_t3"], "ideal": df["speedup_ideal"]}
    big = df[df["model"].isin(["gpt3-175b", "palm", "mt-nlg"])]
    lines = ["# T3 reproduction (generated by `reports/t3/make_report.py`; do not edit)", "",
             f"Command: `.venv/bin/python reports/t3/make_report.py --tokens {args.tokens}"
             f"{' --quick' if args.quick else ''}` (every case is `archsim run --system t3` with the preset "
             "`t3_paper`: NMC updates as the memory's NMC_ADD command, the IPoly channel-hashed address mapping of "
             "the paper's Accel-Sim GPU, T3-MCA with the paper's first-stage threshold; simulation wall time per "
             "case in results.csv, `sim_wall_s`). The experiments below are `reports/t3/experiments.py` "
             "(CSV files beside this one).", "",
             *([f"**Not run in this report:** {', '.join(missing)}.", ""] if missing else []),
             *[f"![{f}]({f})" for f in figs], "",
             "## Summary against the paper", "",
             "| metric | paper geomean | ours geomean | paper max | ours max |", "|---|---|---|---|---|"]
    for key, name in (("t3_mca", "T3-MCA sublayer speed-up"), ("t3", "T3 (no MCA) sublayer speed-up"),
                      ("ideal", "Ideal GEMM-RS overlap speed-up")):
        g, m = PAPER[key]
        lines.append(f"| {name} | {g:+.0%} | {geomean(list(ours[key])) - 1:+.1%} | {m:+.0%} | {ours[key].max() - 1:+.1%} |")
    dm = df["data_movement_change_t3"]
    lines.append(f"| Data movement (T3 vs sequential) | {PAPER['data_movement'][0]:+.0%} | "
                 f"{geomean(list(1 + dm)) - 1:+.1%} | {PAPER['data_movement'][1]:+.0%} | {dm.min():+.1%} |")
    mca_over_t3 = df["speedup_t3_mca"] / df["speedup_t3"]
    lines.append(f"| T3-MCA over T3 | +13% | {geomean(list(mca_over_t3)) - 1:+.1%} | +29% | {mca_over_t3.max() - 1:+.1%} |")
    if len(big):
        lines.append(f"| 500B-class (GPT-3, PaLM, MT-NLG) T3-MCA | +29% | {geomean(list(big['speedup_t3_mca'])) - 1:+.1%} "
                     f"| +35% | {big['speedup_t3_mca'].max() - 1:+.1%} |")
    lines += ["", "## Per model x TP x sublayer", "",
              "Speed-ups over Sequential. *RS / bound*: reduce-scatter time over its ring link bound "
              "(N-1) x (hop latency + chunk bytes / link bandwidth); Sequential's RS runs after the GEMM, T3's "
              "from its first send to its last reduction (it overlaps the GEMM). *channels*: channels one output "
              "chunk touches (of 32) under the mapping. *stall*: the GEMM's compute stall cycles (CUs waiting for "
              "operands) beyond the sequential GEMM's own, i.e. caused by communication traffic.", "",
              "| model | TP | sublayer | K | comm share (seq) | sequential us | T3 | T3-MCA | ideal | data movement | "
              "seq RS / bound | T3 RS / bound | channels | T3 stall | T3-MCA stall |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in df.to_dict("records"):
        rb = (f"{r['sequential_rs_s'] / r['rs_link_bound_s']:.2f} | {r['t3_rs_s'] / r['rs_link_bound_s']:.2f} | "
              f"{int(r['chunk_channels_min'])}-{int(r['chunk_channels_max'])} | {int(r['t3_comm_stall_cycles'])} | "
              f"{int(r['t3_mca_comm_stall_cycles'])}") if "rs_link_bound_s" in r and r["rs_link_bound_s"] == r["rs_link_bound_s"] \
            else "- | - | - | - | -"
        lines.append(f"| {r['model']} | {r['tp']} | {r['sublayer']} | {r['k']} | {r['comm_fraction']:.0%} | "
                     f"{r['sequential_us']:.0f} | {r['speedup_t3'] - 1:+.1%} | {r['speedup_t3_mca'] - 1:+.1%} | "
                     f"{r['speedup_ideal'] - 1:+.1%} | {r['data_movement_change_t3']:+.1%} | {rb} |")
    above = df[df["speedup_t3"] > 1.01 * df["speedup_ideal"]]
    above_mca = df[df["speedup_t3_mca"] > 1.01 * df["speedup_ideal"]]
    lines += ["", f"Rows with T3 more than 1% above ideal: {len(above)} "
              f"({', '.join(_label(r) for r in above.to_dict('records')) or 'none'}); "
              f"with T3-MCA: {len(above_mca)} "
              f"({', '.join(_label(r) for r in above_mca.to_dict('records')) or 'none'}). "
              "The mechanism is named in the gaps below.", ""]
    lines += experiments_section(out)
    lines += ["", (HERE / "GAPS.md").read_text() if (HERE / "GAPS.md").exists() else ""]
    (out / "README.md").write_text("\n".join(lines) + "\n")


def experiments_section(out: Path) -> list[str]:
    lines: list[str] = []
    h = out / "experiments_hash.csv"
    if h.exists():
        d = pd.read_csv(h)
        lines += ["## Sensitivity: the unhashed address layout", "",
                  "`reports/t3/experiments.py --part hash`: the same sublayers with the preset's field order and no "
                  "channel hashing (`--set memory_mapping=RoRaBgBaChCo`), the layout of the previous report.", ""]
        t = d.assign(sublayer_us=d["sublayer_us"].round(1), rs_us=d["rs_us"].round(1),
                     rs_link_bound_us=d["rs_link_bound_us"].round(1),
                     rs_vs_bound=(d["rs_us"] / d["rs_link_bound_us"]).round(2),
                     speedup=d["speedup"].map(lambda v: f"{v - 1:+.1%}"),
                     channels=d["chunk_channels_min"].astype(str) + "-" + d["chunk_channels_max"].astype(str))
        lines += _md_table(t[["case", "config", "sublayer_us", "speedup", "rs_us", "rs_link_bound_us", "rs_vs_bound",
                              "channels"]])
        lines.append("")
    m = out / "experiments_mca.csv"
    if m.exists():
        d = pd.read_csv(m)
        d["gate"] = d["gate"].fillna("all") if "gate" in d else "all"
        lines += ["## T3-MCA: threshold and starvation cap", "",
                  "`reports/t3/experiments.py --part mca` (figure `fig_mca.png`). *comm stall*: GEMM compute stall "
                  "cycles beyond the sequential GEMM's (which runs with no communication beside it). *gate row*: a "
                  "held-back communication source still issues column commands to rows it opened (only its ACT/PRE "
                  "wait), the toggle of the row-holding cause.", ""]
        t = d.assign(sublayer_us=d["sublayer_us"].round(1), gemm_us=d["gemm_us"].round(1),
                     rs_end_us=d["rs_end_us"].round(1), speedup=d["speedup"].map(lambda v: f"{v - 1:+.1%}"))
        keep = ["config", "threshold", "starvation_cap", "gate", "sublayer_us", "speedup", "gemm_us", "rs_end_us",
                "compute_stall_cycles", "comm_stall_cycles"]
        keep += [c for c in ("threshold_first", "threshold_min", "threshold_max") if c in t]
        lines += _md_table(t[keep].astype(object).fillna("-"))
        lines.append("")
    m32 = out / "experiments_mca_tp32.csv"
    if m32.exists():
        d = pd.read_csv(m32)
        lines += ["MCA where the GEMM stalls most (`experiments.py --part mca32`, T3 and T3-MCA at thresholds below the "
                  "paper's estimate, both gates):", ""]
        t = d.assign(sublayer_us=d["sublayer_us"].round(1), gemm_us=d["gemm_us"].round(1),
                     rs_end_us=d["rs_end_us"].round(1), speedup=d["speedup"].map(lambda v: f"{v - 1:+.1%}"))
        lines += _md_table(t[["case", "config", "threshold", "gate", "sublayer_us", "speedup", "gemm_us", "rs_end_us",
                              "comm_stall_cycles"]])
        lines.append("")
    n = out / "experiments_nmc.csv"
    if n.exists():
        d = pd.read_csv(n)
        lines += ["## NMC update cost against the 500B-class result", "",
                  "`reports/t3/experiments.py --part nmc` (figure `fig_nmc_cost.png`): T3 on the case below with the "
                  "update's adder latency nALU varied and as RD + adder + WR; *update / write*: DRAM time per update "
                  "over a plain write's on the same 20,480 accesses.", ""]
        t = d.assign(update_vs_write=d["update_vs_write"].round(2), sublayer_us=d["sublayer_us"].round(1),
                     speedup=d["speedup"].map(lambda v: f"{v - 1:+.1%}"),
                     ideal=d["ideal_speedup"].map(lambda v: f"{v - 1:+.1%}"))
        lines += _md_table(t[["case", "update", "update_vs_write", "sublayer_us", "speedup", "ideal"]])
        lines.append("")
    return lines

if __name__ == "__main__":
    main()
