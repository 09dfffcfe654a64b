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
from archsim.interconnect import t3
from archsim.workload.spec import load_model

HERE = Path(__file__).resolve().parent
CASES = [("mega-gpt2", 8), ("mega-gpt2", 16), ("t-nlg", 8), ("t-nlg", 16), ("gpt3-175b", 32), ("palm", 32),
         ("mt-nlg", 32)]
SUBLAYERS = ["op_fwd", "fc2_fwd", "fc1_bwd", "ip_bwd"]
PAPER = {  # metric: (geomean, max) as fractions; reference/duplex-t3.md sec. 7
    "t3_mca": (0.30, 0.47), "t3": (0.20, 0.39), "ideal": (0.35, 0.50), "data_movement": (-0.22, -0.36)}


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
    args = ap.parse_args()
    csv = HERE / ("results.csv" if args.nmc == "command" else "results_rd_wr.csv")
    rows = pd.read_csv(csv).to_dict("records") if csv.exists() else []
    rows = [r for r in rows if r["tokens"] == args.tokens]
    done = {(r["model"], r["tp"], r["sublayer"]) for r in rows}
    missing = []
    for model, tp in CASES:
        for sub in SUBLAYERS[:1] if args.quick else SUBLAYERS:
            if (model, tp, sub) in done:
                continue
            if args.readme_only:
                missing.append(f"{model} TP {tp} {sub}")
                continue
            # FC-1 backward has FC-2 forward's GEMM shape for non-gated models: the same simulation, run once
            k = t3.sublayer_shape(load_model(model), sub, tp, args.tokens).k
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
                         "rss_gb": rss_gb})
            print(rows[-1], flush=True)
            pd.DataFrame(rows).to_csv(csv, index=False)
    if args.nmc == "rd_wr":      # the README's main columns are the command runs
        csv = HERE / "results.csv"
        rows = [r for r in pd.read_csv(csv).to_dict("records") if r["tokens"] == args.tokens] if csv.exists() else []
    alt_csv = HERE / "results_rd_wr.csv"
    alt = pd.read_csv(alt_csv) if alt_csv.exists() else pd.DataFrame()
    alt = alt[alt["tokens"] == args.tokens] if len(alt) else alt
    alt_by = {(r["model"], r["tp"], r["sublayer"]): r for r in alt.to_dict("records")}
    df = pd.DataFrame(rows)
    ours = {"t3_mca": df["speedup_t3_mca"], "t3": df["speedup_t3"], "ideal": df["speedup_ideal"]}
    big = df[df["model"].isin(["gpt3-175b", "palm", "mt-nlg"])]
    lines = ["# T3 reproduction (generated by `reports/t3/make_report.py`; do not edit)", "",
             f"Command: `.venv/bin/python reports/t3/make_report.py --tokens {args.tokens}"
             f"{' --quick' if args.quick else ''}` (NMC updates as the memory's NMC_ADD command; simulation wall "
             "time per case in results.csv, `sim_wall_s`). The *RD+WR* columns: the same with `--nmc rd_wr` "
             "(an update as the engine's RD, adder latency, WR; results_rd_wr.csv).",
             "", *([f"**Not run in this report:** {', '.join(missing)}.", ""] if missing else []),
             "## Summary against the paper", "",
             "| metric | paper geomean | ours geomean | ours RD+WR geomean | paper max | ours max | ours RD+WR max |",
             "|---|---|---|---|---|---|---|"]

    def alt_col(key: str, sel=None) -> tuple[str, str]:
        keys = [(r["model"], r["tp"], r["sublayer"]) for r in (rows if sel is None else sel.to_dict("records"))]
        if not keys or not all(k in alt_by for k in keys):
            return "not run", "not run"
        xs = [alt_by[k][f"speedup_{key}"] for k in keys]
        return f"{geomean(xs) - 1:+.1%}", f"{max(xs) - 1:+.1%}"
    for key, name in (("t3_mca", "T3-MCA sublayer speed-up"), ("t3", "T3 (no MCA) sublayer speed-up"),
                      ("ideal", "Ideal GEMM-RS overlap speed-up")):
        g, m = PAPER[key]
        ag, am = alt_col(key)
        lines.append(f"| {name} | {g:+.0%} | {geomean(list(ours[key])) - 1:+.1%} | {ag} | {m:+.0%} | "
                     f"{ours[key].max() - 1:+.1%} | {am} |")
    dm = df["data_movement_change_t3"]
    dm_geo = geomean(list(1 + dm)) - 1
    lines.append(f"| Data movement (T3 vs sequential) | {PAPER['data_movement'][0]:+.0%} | {dm_geo:+.1%} | same | "
                 f"{PAPER['data_movement'][1]:+.0%} | {dm.min():+.1%} | same |")
    if len(big):
        ag, am = alt_col("t3_mca", big)
        lines.append(f"| 500B-class (GPT-3, PaLM, MT-NLG) T3-MCA | +29% | "
                     f"{geomean(list(big['speedup_t3_mca'])) - 1:+.1%} | {ag} | +35% | "
                     f"{big['speedup_t3_mca'].max() - 1:+.1%} | {am} |")
    lines += ["", "## Per model x TP x sublayer", "",
              "| model | TP | sublayer | K | comm share (seq) | sequential us | T3 | T3-MCA | ideal | data movement "
              "| T3 RD+WR | T3-MCA RD+WR |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        a = alt_by.get((r["model"], r["tp"], r["sublayer"]))
        a_cols = (f"{a['speedup_t3'] - 1:+.1%} | {a['speedup_t3_mca'] - 1:+.1%}" if a is not None
                  else "not run | not run")
        lines.append(f"| {r['model']} | {r['tp']} | {r['sublayer']} | {r['k']} | {r['comm_fraction']:.0%} | "
                     f"{r['sequential_us']:.0f} | {r['speedup_t3'] - 1:+.1%} | {r['speedup_t3_mca'] - 1:+.1%} | "
                     f"{r['speedup_ideal'] - 1:+.1%} | {r['data_movement_change_t3']:+.1%} | {a_cols} |")
    lines += ["", (HERE / "GAPS.md").read_text() if (HERE / "GAPS.md").exists() else ""]
    (HERE / "README.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
