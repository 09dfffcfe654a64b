"""T3 reproduction report: sublayer speed-ups, data movement, GEMM reads and T3-MCA per model x TP x sublayer,
next to the paper's (T3, ASPLOS'24; numbers from reference/duplex-t3.md sec. 7).

    .venv/bin/python reports/t3/make_report.py [--tokens 1024] [--cases gpt3-175b:32] [--sublayers op_fwd]
                                                [-o DIR] [--readme-only]

Writes DIR/results.csv (one row per case, appended as each finishes; cases already in it are not run again, so
a killed run resumes) and DIR/README.md from it and from the experiments' CSVs beside it
(reports/t3/experiments.py). Every row is `archsim run --system t3` with the preset's settings (the config
`row_config` gives). FC-1 backward has FC-2 forward's GEMM shape for these (non-gated) models: its row is
FC-2's, marked `copy_of`, not a simulation of its own. Every number and direction in the README's prose comes
from these tables (`claims`; tests/test_t3_report.py holds each one to its table).
"""
from __future__ import annotations

import argparse
import json
import math
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pandas as pd

HERE = Path(__file__).resolve().parent
CASES = [("mega-gpt2", 8), ("mega-gpt2", 16), ("t-nlg", 8), ("t-nlg", 16), ("gpt3-175b", 32), ("palm", 32),
         ("mt-nlg", 32)]
SUBLAYERS = ["op_fwd", "fc2_fwd", "fc1_bwd", "ip_bwd"]
BIG = ("gpt3-175b", "palm", "mt-nlg")           # the paper's 500B-class set (TP 32)
MAIN = ("mega-gpt2", "t-nlg")                   # the paper's main set (TP 8 and 16)
PAPER = {  # metric: (geomean, max) as fractions; reference/duplex-t3.md sec. 7
    "t3_mca": (0.30, 0.47), "t3": (0.20, 0.39), "ideal": (0.35, 0.50), "data_movement": (-0.22, -0.36),
    "mca_over_t3": (0.13, 0.29), "big_t3_mca": (0.29, 0.35)}
PAPER_GEMM_READS = 1.56          # GEMM reads, Sequential over T3 (T3's uncached outputs)
PAPER_COMM_SHARE_MAX = 0.43      # "communication is up to 43% of time" (T-NLG)
MCA_TARGET = PAPER["mca_over_t3"][0] * 2 / 3     # "within a third of the paper's +13%"
KEY = ["model", "tp", "sublayer", "tokens"]


# ---- one row ----------------------------------------------------------------------------------------------
def row_config(model: str, tp: int, sub: str, tokens: int, **keys: Any) -> dict[str, Any]:
    """The `archsim run --system t3` config of one row (`keys`: config keys an experiment toggles)."""
    return {"system": "t3", "model": model, "tp": tp, "sublayer": sub, "tokens": tokens, **keys}


def twin_of(model: str, tp: int, sub: str, tokens: int) -> str | None:
    """FC-2 forward, when `sub` is FC-1 backward and has its GEMM shape (T x d_ff/TP @ d_ff/TP x d_model)."""
    from archsim.systems.t3.shapes import sublayer_shape
    from archsim.workload.spec import load_model

    if sub != "fc1_bwd":
        return None
    m = load_model(model)
    same = sublayer_shape(m, "fc1_bwd", tp, tokens).k == sublayer_shape(m, "fc2_fwd", tp, tokens).k
    return "fc2_fwd" if same else None


def run_stats(cfg: dict[str, Any], preset: dict[str, Any] | None = None) -> dict[str, Any]:
    """The stats of `archsim run` on `cfg`; `preset`: preset key paths set on top (an experiment's toggle of a
    preset value that is no config key, e.g. gpu.flops_per_cu_cycle)."""
    import dataclasses

    from archsim import api
    from archsim.systems.t3 import params as t3params
    from archsim.systems.t3 import system as t3sys

    if not preset:
        return api.run(cfg).stats
    resolved = t3sys.resolve({k: v for k, v in cfg.items() if k != "system"})
    su = t3sys.setup(resolved)
    over = {p: resolved[k] for p, k in t3sys.PRESET_KEYS.items() if resolved.get(k) is not None}
    params = t3params.load_params(resolved["preset"], overrides={**over, **preset})
    su = dataclasses.replace(su, params=params, ring=t3params.load_t3_ring(params, resolved["tp"]))
    return t3sys.run_sublayer(su)[0]


def _run_in_child(cfg: dict[str, Any], preset: dict[str, Any] | None) -> tuple[dict[str, Any], float]:
    import resource

    stats = run_stats(cfg, preset)
    return stats, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


def row_from(stats: dict[str, Any]) -> dict[str, Any]:
    """A results row from a run's stats (keys absent when a configuration was not run stay absent)."""
    s = stats
    us = 1e6
    row: dict[str, Any] = {"model": s["model"], "tp": s["tp"], "sublayer": s["sublayer"], "tokens": s["tokens"],
                           "k": s["k"], "ring_directions": s["ring_directions"], "sim_wall_s": s["sim_wall_s"]}
    for c in ("sequential", "t3", "t3_mca"):
        if f"{c}_gemm_s" in s:
            row[f"{c}_gemm_us"] = s[f"{c}_gemm_s"] * us
            row[f"{c}_rs_end_us"] = s[f"{c}_rs_end_s"] * us
            row[f"gemm_read_bytes_{c}"] = s[f"{c}_gemm_read_bytes"]
    if "sequential_s" in s:
        row.update(comm_fraction=s["comm_fraction"], sequential_us=s["sequential_s"] * us,
                   speedup_ideal=s["speedup_ideal"], sequential_rs_us=s["sequential_rs_s"] * us,
                   gemm_over_rs=s["sequential_gemm_s"] / s["sequential_rs_s"],
                   rs_link_bound_us=s["rs_link_bound_s"] * us,
                   sequential_rs_vs_link_bound=s["sequential_rs_vs_link_bound"],
                   chunk_channels_min=s["chunk_channels_min"], chunk_channels_max=s["chunk_channels_max"])
        for c in ("t3", "t3_mca"):
            if f"speedup_{c}" in s:
                row[f"speedup_{c}"] = s[f"speedup_{c}"]
                row[f"{c}_rs_vs_link_bound"] = s[f"{c}_rs_s"] / s["rs_link_bound_s"]
                row[f"{c}_comm_stall_cycles"] = s[f"{c}_comm_stall_cycles"]
        if "t3_gemm_read_bytes" in s:
            row["gemm_read_ratio"] = s["gemm_read_ratio_sequential_vs_t3"]
            row["data_movement_change_t3"] = s["data_movement_change_t3"]
    if "t3_s" in s and "t3_mca_s" in s:
        row["mca_over_t3"] = s["t3_s"] / s["t3_mca_s"]
    traj = s.get("t3_mca_threshold_trajectory")
    if traj:
        row.update(mca_threshold_trajectory=json.dumps(traj), mca_threshold_min=min(traj),
                   mca_threshold_max=max(traj), mca_threshold_values=len(set(traj)))
    return row


def simulate_table(csv: Path, cases: list[tuple[str, int]], subs: list[str], tokens: int,
                   keys: dict[str, Any] | None = None, preset: dict[str, Any] | None = None,
                   tags: dict[str, Any] | None = None, copies: bool = True) -> pd.DataFrame:
    """Rows of `cases` x `subs` into `csv` (resumable: rows already there with the same `tags` are kept). Each
    simulation runs in a fresh process (a 500B-class case's request pools are GBs; `rss_gb` records each).
    `copies`: FC-1 rows that are FC-2's shape are FC-2's row, marked (else left out)."""
    tags = tags or {}
    rows = pd.read_csv(csv).to_dict("records") if csv.exists() else []
    have = {tuple(r[k] for k in KEY + list(tags)) for r in rows}
    for model, tp in cases:
        for sub in subs:
            if (model, tp, sub, tokens, *tags.values()) in have:
                continue
            twin = twin_of(model, tp, sub, tokens)
            if twin and not copies:
                continue
            src = next((r for r in rows if twin and (r["model"], r["tp"], r["sublayer"], r["tokens"]) ==
                        (model, tp, twin, tokens) and all(r.get(k) == v for k, v in tags.items())), None)
            if src is not None:
                row = {**src, "sublayer": sub, "copy_of": twin, "sim_wall_s": 0.0}
            else:
                cfg = row_config(model, tp, sub, tokens, **(keys or {}))
                with ProcessPoolExecutor(max_workers=1, max_tasks_per_child=1) as ex:
                    stats, rss = ex.submit(_run_in_child, cfg, preset).result()
                row = {**row_from(stats), "rss_gb": rss, "copy_of": ""}
            row.update(tags)
            rows.append(row)
            print({k: row.get(k) for k in KEY + ["speedup_t3", "speedup_t3_mca", "mca_over_t3", "copy_of"]},
                  flush=True)
            pd.DataFrame(rows).to_csv(csv, index=False)
    return pd.DataFrame(rows)


# ---- numbers the prose states -----------------------------------------------------------------------------
def geomean(xs) -> float:
    xs = list(xs)
    if not xs:
        return math.nan           # a subset run (--cases) without the rows a figure needs
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def distinct(df: pd.DataFrame) -> pd.DataFrame:
    """The simulated rows (FC-1 copies left out)."""
    return df[df["copy_of"].fillna("").astype(str) == ""] if "copy_of" in df else df


def _read(out: Path, name: str) -> pd.DataFrame | None:
    p = out / name
    return pd.read_csv(p) if p.exists() else None


def mca_resolution(df: pd.DataFrame, perturbed: list[tuple[str, pd.DataFrame]]) -> dict[str, Any]:
    """How much the T3-MCA-over-T3 geomean over the simulated rows moves under changes that should not matter
    (`perturbed`: (name, the same rows run so) - the windowed driver, 1.6% fewer tokens); the largest move is
    the headline's resolution."""
    base = distinct(df).set_index(["model", "tp", "sublayer"])["mca_over_t3"]
    moves = {}
    for name, t in perturbed:
        got = t.set_index(["model", "tp", "sublayer"])["mca_over_t3"].reindex(base.index)
        if got.notna().all():
            moves[name] = geomean(got) - geomean(base)
    return {"moves": moves, "resolution": max((abs(v) for v in moves.values()), default=float("nan"))}


def perturbations(out: Path) -> list[tuple[str, pd.DataFrame]]:
    """The report's rows run under changes that should not matter (window.csv, experiments_tokens.csv)."""
    got = []
    w = _read(out, "window.csv")
    if w is not None:
        got += [(f"driver window {int(win)} cycles", g) for win, g in w.groupby("window")]
    t = _read(out, "experiments_tokens.csv")
    if t is not None:
        got += [(f"{int(t['tokens'].iloc[0])} tokens", t)]
    return got


def claims(out: Path) -> dict[str, Any]:
    """Every number and direction the README's prose states, computed from the CSVs in `out`."""
    df = pd.read_csv(out / "results.csv")
    d = distinct(df)
    c: dict[str, Any] = {"rows": len(df), "simulated": len(d), "copies": int((df["copy_of"].fillna("") != "").sum())}
    for key in ("t3", "t3_mca", "ideal"):
        c[f"{key}_geomean"] = geomean(df[f"speedup_{key}"]) - 1
        c[f"{key}_max"] = df[f"speedup_{key}"].max() - 1
    c["mca_over_t3_geomean"] = geomean(df["mca_over_t3"]) - 1
    c["mca_over_t3_max"] = df["mca_over_t3"].max() - 1
    c["mca_over_t3_min"] = df["mca_over_t3"].min() - 1
    main = df[df["model"].isin(MAIN)]
    c["mca_over_t3_main_geomean"] = geomean(main["mca_over_t3"]) - 1
    big = df[df["model"].isin(BIG)]
    c["big_t3_mca_geomean"] = geomean(big["speedup_t3_mca"]) - 1
    c["big_t3_mca_max"] = big["speedup_t3_mca"].max() - 1
    c["big_ideal_geomean"] = geomean(big["speedup_ideal"]) - 1
    c["data_movement_geomean"] = geomean(1 + df["data_movement_change_t3"]) - 1
    c["data_movement_min"] = df["data_movement_change_t3"].min()
    c["comm_share_min"], c["comm_share_max"] = df["comm_fraction"].min(), df["comm_fraction"].max()
    gb = df[df["gemm_over_rs"] >= 1]
    c["gemm_bound_rows"] = len(gb)
    c["gemm_read_ratio_gemm_bound_geomean"] = geomean(gb["gemm_read_ratio"]) if len(gb) else float("nan")
    c["gemm_read_ratio_min"], c["gemm_read_ratio_max"] = df["gemm_read_ratio"].min(), df["gemm_read_ratio"].max()
    c["gemm_read_ratio_gemm_bound_min"] = gb["gemm_read_ratio"].min() if len(gb) else float("nan")
    c["gemm_read_ratio_gemm_bound_max"] = gb["gemm_read_ratio"].max() if len(gb) else float("nan")
    c["gemm_read_ratio_in_band_rows"] = int(gb["gemm_read_ratio"].between(1.2, 2.0).sum())
    c["threshold_min"], c["threshold_max"] = int(df["mca_threshold_min"].min()), int(df["mca_threshold_max"].max())
    c["threshold_moves_rows"] = int((d["mca_threshold_values"] > 1).sum())
    c["above_ideal_t3"] = int((df["speedup_t3"] > 1.01 * df["speedup_ideal"]).sum())
    c["above_ideal_t3_mca"] = int((df["speedup_t3_mca"] > 1.01 * df["speedup_ideal"]).sum())
    # the room MCA has: how far T3 ends from the ideal overlap, and how much T3's communication slows its GEMM
    c["ideal_over_t3_geomean"] = geomean(df["speedup_ideal"] / df["speedup_t3"]) - 1
    c["paper_ideal_over_t3"] = (1 + PAPER["ideal"][0]) / (1 + PAPER["t3"][0]) - 1
    c["t3_gemm_slowdown_geomean"] = geomean(d["t3_gemm_us"] / d["sequential_gemm_us"]) - 1
    c["t3_gemm_slowdown_max"] = (d["t3_gemm_us"] / d["sequential_gemm_us"]).max() - 1
    # MCA on the GEMM and on the reduce-scatter: how much earlier the GEMM and the sublayer end
    c["mca_gemm_shorter_rows"] = int((d["t3_mca_gemm_us"] < d["t3_gemm_us"]).sum())
    c["mca_gemm_change_geomean"] = geomean(d["t3_mca_gemm_us"] / d["t3_gemm_us"]) - 1
    c["mca_rs_end_change_geomean"] = geomean(d["t3_mca_rs_end_us"] / d["t3_rs_end_us"]) - 1
    res = mca_resolution(df, perturbations(out))
    c["mca_resolution"] = res["resolution"]
    c["mca_resolution_moves"] = res["moves"]
    c["mca_headline_is_none"] = bool(abs(c["mca_over_t3_geomean"]) <= res["resolution"])
    c["mca_target_met"] = bool(c["mca_over_t3_geomean"] >= MCA_TARGET)
    w = _read(out, "window.csv")
    if w is not None:
        piv = w.pivot_table(index=["model", "tp", "sublayer"], columns="window",
                            values=["speedup_t3", "speedup_t3_mca"])
        c["window_max_gap_points"] = float(max((piv[(k, 16)] - piv[(k, 64)]).abs().max()
                                               for k in ("speedup_t3", "speedup_t3_mca")) * 100)
        exact = d.set_index(["model", "tp", "sublayer"])
        c["window_max_gap_to_exact_points"] = float(max(
            (piv[(k, win)] - exact[k].reindex(piv.index)).abs().max()
            for k in ("speedup_t3", "speedup_t3_mca") for win in (16, 64)) * 100)
        c["window_rows"] = len(piv)
        jit = _read(out, "experiments_jitter.csv")
        if jit is not None:
            c["jitter"] = jitter_claims(jit, piv, exact)
    bi = _read(out, "results_bidir.csv")
    if bi is not None and len(bi) == len(df):
        c["bidir_comm_share_min"], c["bidir_comm_share_max"] = bi["comm_fraction"].min(), bi["comm_fraction"].max()
        c["bidir_gemm_bound_rows"] = int((bi["gemm_over_rs"] >= 1).sum())
        c["bidir_t3_mca_geomean"] = geomean(bi["speedup_t3_mca"]) - 1
        c["bidir_t3_geomean"] = geomean(bi["speedup_t3"]) - 1
        c["bidir_mca_over_t3_geomean"] = geomean(bi["mca_over_t3"]) - 1
        c["bidir_mca_over_t3_max"] = bi["mca_over_t3"].max() - 1
    cz = _read(out, "experiments_causes.csv")
    if cz is not None:
        c["causes"] = cause_table(cz).to_dict("records")
    l2 = _read(out, "experiments_l2.csv")
    if l2 is not None:
        c["l2_tokens"] = {int(t): geomean(g[g["gemm_bound"]]["gemm_read_ratio"]) for t, g in l2.groupby("tokens")
                          if g["gemm_bound"].any()}
    return c


def cause_table(cz: pd.DataFrame) -> pd.DataFrame:
    """experiments_causes.csv per toggle: geomeans over the paper's main rows (Mega-GPT-2, T-NLG at TP 8 and 16,
    FC-1 copies left out) and whether the toggle moves T3-MCA over T3 toward the paper's +13%."""
    out = []
    base = None
    for toggle, g in cz.groupby("toggle", sort=False):
        rec = {"toggle": toggle, "rows": len(g), "mca_over_t3": geomean(g["mca_over_t3"]) - 1,
               "mca_over_t3_max": g["mca_over_t3"].max() - 1,
               "speedup_t3_mca": geomean(g["speedup_t3_mca"]) - 1 if "speedup_t3_mca" in g else float("nan"),
               "comm_share_min": g["comm_fraction"].min(), "comm_share_max": g["comm_fraction"].max(),
               "gemm_bound_rows": int((g["gemm_over_rs"] >= 1).sum()),
               "gemm_read_ratio": geomean(g["gemm_read_ratio"])}
        if base is None:
            base = rec
        rec["toward_paper"] = abs(rec["mca_over_t3"] - PAPER["mca_over_t3"][0]) < \
            abs(base["mca_over_t3"] - PAPER["mca_over_t3"][0])
        out.append(rec)
    return pd.DataFrame(out)


# ---- figures ----------------------------------------------------------------------------------------------
def _label(r) -> str:
    return f"{r['model']} TP{r['tp']} {r['sublayer']}" + (" (= FC-2)" if str(r.get("copy_of", "")) not in ("", "nan") else "")


def figures(out: Path, df: pd.DataFrame) -> list[str]:
    """fig_speedup.png (speed-up per row, the paper's geomeans marked) and fig_rs_link.png (reduce-scatter time
    against the ring link bound per row); the names of the files written."""
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
    ax.set_title(f"T3 sublayer speed-ups ({int(df['tokens'].iloc[0])} tokens). The paper's per-sublayer bars "
                 "could not be read here: only its geomeans are drawn", fontsize=9)
    ax.legend(fontsize=7, ncol=4, loc="upper left")
    fig.tight_layout()
    fig.savefig(out / "fig_speedup.png", dpi=120)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(13, 4.8))
    for j, (key, name) in enumerate((("sequential", "Sequential RS (after the GEMM)"),
                                     ("t3", "T3 RS (first send to last reduction)"), ("t3_mca", "T3-MCA RS"))):
        col = "sequential_rs_vs_link_bound" if key == "sequential" else f"{key}_rs_vs_link_bound"
        ax.bar(x + (j - 1) * 0.27, df[col], 0.27, label=name, color=color_of(key))
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
    return ["fig_speedup.png", "fig_rs_link.png"]


# ---- README -----------------------------------------------------------------------------------------------
def _md(df: pd.DataFrame) -> list[str]:
    cols = list(df.columns)
    return ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols),
            *["| " + " | ".join(str(v) for v in r) + " |" for r in df.itertuples(index=False)]]


def _pct(v: float) -> str:
    return f"{v:+.1%}"


def render(out: Path, tokens: int = 1024) -> str:
    """README.md from the CSVs in `out` (pure: the test regenerates it and compares)."""
    df = pd.read_csv(out / "results.csv")
    c = claims(out)
    figs = [f for f in ("fig_speedup.png", "fig_rs_link.png", "fig_mca.png", "fig_nmc_cost.png") if (out / f).exists()]
    lines = ["# T3 reproduction (generated by `reports/t3/make_report.py`; do not edit)", "",
             f"Command: `.venv/bin/python reports/t3/make_report.py --tokens {tokens}` (every row is `archsim run "
             "--system t3` with the preset `t3_paper`: NMC updates as the memory's NMC_ADD command, the IPoly "
             "channel-hashed address mapping of the paper's Accel-Sim GPU, Accel-Sim's L2 geometry, T3-MCA with "
             "the dynamic threshold and `mca.gate: yield`, the exact event loop; simulation wall time per row in "
             "results.csv, `sim_wall_s`). The experiments are `reports/t3/experiments.py` (CSV files beside this "
             "one); every number in the prose below is computed from those tables (`make_report.claims`, held to "
             "them by tests/test_t3_report.py).", "",
             *[f"![{f}]({f})" for f in figs], "", "## Summary against the paper", "",
             "| metric | paper geomean | ours geomean | paper max | ours max |", "|---|---|---|---|---|"]
    for key, name in (("t3_mca", "T3-MCA sublayer speed-up"), ("t3", "T3 (no MCA) sublayer speed-up"),
                      ("ideal", "Ideal GEMM-RS overlap speed-up")):
        g, m = PAPER[key]
        lines.append(f"| {name} | {g:+.0%} | {_pct(c[f'{key}_geomean'])} | {m:+.0%} | {_pct(c[f'{key}_max'])} |")
    lines.append(f"| Data movement (T3 vs Sequential) | {PAPER['data_movement'][0]:+.0%} | "
                 f"{_pct(c['data_movement_geomean'])} | {PAPER['data_movement'][1]:+.0%} | {_pct(c['data_movement_min'])} |")
    res = ("resolution not measured" if math.isnan(c["mca_resolution"]) else "below the model's resolution: none"
           if c["mca_headline_is_none"] else f"resolution {c['mca_resolution']:.2%}")
    for key, name, ours in (("mca_over_t3", "T3-MCA over T3", f"{_pct(c['mca_over_t3_geomean'])} ({res})"),
                            ("big_t3_mca", "500B-class (GPT-3, PaLM, MT-NLG) T3-MCA", _pct(c["big_t3_mca_geomean"]))):
        g, m = PAPER[key]
        lines.append(f"| {name} | {g:+.0%} | {ours} | {m:+.0%} | {_pct(c[f'{key}_max'])} |")
    lines.append(f"| GEMM DRAM reads, Sequential / T3 (GEMM-bound rows) | {PAPER_GEMM_READS:.2f}x | "
                 f"{c['gemm_read_ratio_gemm_bound_geomean']:.2f}x | - | {c['gemm_read_ratio_gemm_bound_max']:.2f}x |")
    lines.append(f"| Communication share of Sequential | up to {PAPER_COMM_SHARE_MAX:.0%} | "
                 f"{c['comm_share_min']:.0%}-{c['comm_share_max']:.0%} | - | - |")
    lines += ["", headline(c), ""]
    lines += ["## Per model x TP x sublayer", "",
              "Speed-ups over Sequential. *GEMM / RS*: Sequential's GEMM time over its reduce-scatter's (>= 1: the "
              "row is GEMM-bound). *reads S/T3*: the GEMM's DRAM reads in Sequential over T3's. *threshold*: the "
              "T3-MCA threshold's range over the run's K steps (entries per channel). *MCA GEMM, RS end*: T3-MCA's "
              "GEMM end and reduce-scatter end relative to T3's. *RS / bound*: reduce-scatter time over its ring "
              "link bound (N-1) x (hop latency + chunk bytes / link bandwidth). FC-1 backward rows marked *= FC-2* "
              "are FC-2 forward's row (the same GEMM shape), not simulations of their own.", "",
              "| model | TP | sublayer | comm share | sequential us | T3 | T3-MCA | MCA over T3 | ideal | "
              "data movement | GEMM / RS | reads S/T3 | threshold | MCA GEMM | MCA RS end | seq RS / bound | "
              "T3 RS / bound |", "|" + "---|" * 17]
    for r in df.to_dict("records"):
        sub = r["sublayer"] + (" (= FC-2)" if str(r.get("copy_of", "")) not in ("", "nan") else "")
        lines.append(
            f"| {r['model']} | {r['tp']} | {sub} | {r['comm_fraction']:.0%} | {r['sequential_us']:.0f} | "
            f"{_pct(r['speedup_t3'] - 1)} | {_pct(r['speedup_t3_mca'] - 1)} | {_pct(r['mca_over_t3'] - 1)} | "
            f"{_pct(r['speedup_ideal'] - 1)} | {_pct(r['data_movement_change_t3'])} | {r['gemm_over_rs']:.2f} | "
            f"{r['gemm_read_ratio']:.2f} | {int(r['mca_threshold_min'])}-{int(r['mca_threshold_max'])} | "
            f"{_pct(r['t3_mca_gemm_us'] / r['t3_gemm_us'] - 1)} | {_pct(r['t3_mca_rs_end_us'] / r['t3_rs_end_us'] - 1)} | "
            f"{r['sequential_rs_vs_link_bound']:.2f} | {r['t3_rs_vs_link_bound']:.2f} |")
    lines += ["", f"Rows with T3 more than 1% above ideal: {c['above_ideal_t3']}; with T3-MCA: "
              f"{c['above_ideal_t3_mca']}. The T3-MCA thresholds of the {c['simulated']} simulated rows range over "
              f"{c['threshold_min']}-{c['threshold_max']} entries per channel, and move within the run in "
              f"{c['threshold_moves_rows']} of them (`mca_threshold_trajectory` in results.csv, "
              "`t3_mca_threshold_trajectory` in a run's JSON stats).", "",
              "**The paper's per-sublayer bars.** The paper plots per-sublayer bars for Mega-GPT-2 and T-NLG at TP 8 "
              "and 16; their values could not be read here (the project's reference note has only the paper's "
              "geomeans and maxima, and the paper's figures are not available; docs/presets.md, T3 preset). The "
              "comparison row by row is therefore not made: only the geomeans and maxima above stand beside ours.", ""]
    lines += experiments_section(out, c)
    lines += ["", (HERE / "GAPS.md").read_text()]
    return "\n".join(lines) + "\n"


def _speedups(r) -> str:
    return " | ".join(_pct(r[k] - 1) for k in ("speedup_t3", "speedup_t3_mca", "mca_over_t3"))


def jitter_claims(jit: pd.DataFrame, win_piv: pd.DataFrame, exact: pd.DataFrame) -> dict[str, Any]:
    """experiments_jitter.csv against the windowed rows: T3's speed-up moves (points) under a seeded 0..J-cycle
    lateness of every enqueue on the exact driver, and the windowed loop's moves on the same rows."""
    keys = ["model", "tp", "sublayer"]
    moved = (jit["speedup_t3"] - jit["speedup_t3_exact"]).abs() * 100
    rows = jit[keys].drop_duplicates()
    idx = pd.MultiIndex.from_frame(rows)
    win = win_piv[("speedup_t3", 16)].reindex(idx), win_piv[("speedup_t3", 64)].reindex(idx)
    return {"rows": len(rows), "seeds": int(jit.loc[jit["jitter_max_cycles"] > 0, "seed"].nunique()),
            "max_points": {int(j): float(moved[jit["jitter_max_cycles"] == j].max())
                           for j in sorted(jit["jitter_max_cycles"].unique()) if j > 0},
            "window_gap_points": float((win[0] - win[1]).abs().max() * 100),
            "window_to_exact_points": float(max((w - exact["speedup_t3"].reindex(idx)).abs().max()
                                                for w in win) * 100)}


def jitter_lines(c: dict[str, Any]) -> list[str]:
    """Why the windowed loop does not converge: the rows' own sensitivity to a cycle (experiments_jitter.csv)."""
    j = c.get("jitter")
    if not j:
        return []
    moves = ", ".join(f"by up to {v:.2f} points with J = {k}" for k, v in j["max_points"].items())
    one = j["max_points"].get(1, float("nan"))
    verdict = ("a lateness of at most one cycle already moves a row by more than issue 34's 0.5-point bound: no "
               "driver that acts on a completion even one cycle off the exact cycle can hold windows 16 and 64 "
               "within it: the gap is within the rows' resolution under timing perturbations of one cycle, and "
               "the strict xfail stays." if one > 0.5 else
               "a lateness of one cycle moves a row by less than issue 34's 0.5-point bound, so the windowed "
               "loop's larger gaps are not explained by the rows' sensitivity alone.")
    return [f"Why: `experiments.py --part jitter` (experiments_jitter.csv) runs T3 on the {j['rows']} Mega-GPT-2 rows "
            f"on the exact driver with every enqueue entering a seeded 0..J cycles after the cycle its agent asked "
            f"for ({j['seeds']} seeds; `enqueue_jitter` of archsim/systems/t3/sim.py). T3's speed-up moves {moves}; "
            f"on the same rows the windowed loop moves it by up to {j['window_to_exact_points']:.2f} points from "
            f"the exact driver and windows 16 and 64 differ by up to {j['window_gap_points']:.2f} points. So "
            + verdict, ""]


def window_section(out: Path, c: dict[str, Any]) -> list[str]:
    w = _read(out, "window.csv")
    if w is None:
        return []
    df = distinct(pd.read_csv(out / "results.csv")).set_index(["model", "tp", "sublayer"])
    lines = ["## The driver: exact, and the windowed loop at 16 and 64 cycles", "",
             "`experiments.py --part window` (window.csv): every simulated row on the windowed event loop (completions "
             "acted on at 16- or 64-cycle boundaries) beside the report's exact driver (the memory stops at every "
             "completion an agent waits on). The windowed loop used to check a bounded prefix of all waited request "
             "ids in enqueue order, so a GEMM K step's burst hid the reduce-scatter's completions until it drained; "
             "it now checks each source's ids apart (archsim/engine/loop.py).", "",
             "| model | TP | sublayer | T3 exact / 16 / 64 | T3-MCA exact / 16 / 64 | MCA over T3 exact / 16 / 64 |",
             "|---|---|---|---|---|---|"]
    piv = {win: g.set_index(["model", "tp", "sublayer"]) for win, g in w.groupby("window")}
    for idx, r in df.iterrows():
        cells = []
        for k in ("speedup_t3", "speedup_t3_mca", "mca_over_t3"):
            vals = [r[k]] + [piv[win].loc[idx, k] if idx in piv[win].index else float("nan") for win in (16, 64)]
            cells.append(" / ".join(_pct(v - 1) for v in vals))
        lines.append(f"| {idx[0]} | {idx[1]} | {idx[2]} | " + " | ".join(cells) + " |")
    lines += ["", f"Over the {c['window_rows']} rows the speed-ups at windows 16 and 64 differ by at most "
              f"{c['window_max_gap_points']:.2f} points (issue 34's bound: 0.5), and from the exact driver's by at "
              f"most {c['window_max_gap_to_exact_points']:.2f} points: "
              + ("the windowed loop converges within the bound." if c["window_max_gap_points"] <= 0.5 else
                 "the windowed loop does not converge within the bound, so the report's rows use the exact driver "
                 "(whose answer does not depend on a window)."), ""]
    return lines + jitter_lines(c)


def bidir_section(out: Path, c: dict[str, Any]) -> list[str]:
    bi = _read(out, "results_bidir.csv")
    if bi is None or "bidir_comm_share_min" not in c:
        return []
    df = pd.read_csv(out / "results.csv")
    m = df.merge(bi, on=["model", "tp", "sublayer"], suffixes=("", "_bi"))
    lines = ["## The ring on both directions", "",
             "`experiments.py --part bidir` (results_bidir.csv): every row with `ring_directions: 2` - each column "
             "chunk's first half of the rows goes round the ring one way, the second half the other way (the paper's "
             "links are bidirectional; the report's ring, like NCCL's, uses one direction).", "",
             "| model | TP | sublayer | comm share, one / both | GEMM / RS, one / both | T3 | T3-MCA | MCA over T3 |",
             "|---|---|---|---|---|---|---|---|"]
    for r in m.to_dict("records"):
        lines.append(f"| {r['model']} | {r['tp']} | {r['sublayer']} | {r['comm_fraction']:.0%} / "
                     f"{r['comm_fraction_bi']:.0%} | {r['gemm_over_rs']:.2f} / {r['gemm_over_rs_bi']:.2f} | "
                     f"{_pct(r['speedup_t3_bi'] - 1)} | {_pct(r['speedup_t3_mca_bi'] - 1)} | {_pct(r['mca_over_t3_bi'] - 1)} |")
    lines += ["", f"On both directions the communication share of Sequential is {c['bidir_comm_share_min']:.0%}-"
              f"{c['bidir_comm_share_max']:.0%} (one direction: {c['comm_share_min']:.0%}-{c['comm_share_max']:.0%}; "
              f"paper: up to {PAPER_COMM_SHARE_MAX:.0%}), {c['bidir_gemm_bound_rows']} of {c['rows']} rows are "
              f"GEMM-bound (one direction: {c['gemm_bound_rows']}), T3 gains {_pct(c['bidir_t3_geomean'])} and "
              f"T3-MCA {_pct(c['bidir_t3_mca_geomean'])} geomean, and T3-MCA over T3 is "
              f"{_pct(c['bidir_mca_over_t3_geomean'])} (max {_pct(c['bidir_mca_over_t3_max'])}).", ""]
    return lines


def causes_section(c: dict[str, Any]) -> list[str]:
    if "causes" not in c:
        return []
    t = pd.DataFrame(c["causes"])
    lines = ["## What makes T3-MCA matter, one toggle at a time", "",
             "`experiments.py --part causes` (experiments_causes.csv): the paper's main rows (Mega-GPT-2 and T-NLG at "
             "TP 8 and 16, FC-1 copies left out) with one change each. *toward the paper*: T3-MCA over T3 closer to "
             "the paper's +13% than with the report's defaults.", "",
             "| toggle | rows | MCA over T3 (geomean) | MCA over T3 (max) | T3-MCA speed-up | comm share | GEMM-bound rows | "
             "GEMM reads S/T3 | toward the paper |", "|---|---|---|---|---|---|---|---|---|"]
    for r in c["causes"]:
        lines.append(f"| {r['toggle']} | {r['rows']} | {_pct(r['mca_over_t3'])} | {_pct(r['mca_over_t3_max'])} | "
                     f"{_pct(r['speedup_t3_mca'])} | {r['comm_share_min']:.0%}-{r['comm_share_max']:.0%} | "
                     f"{r['gemm_bound_rows']} | {r['gemm_read_ratio']:.2f} | {'yes' if r['toward_paper'] else 'no'} |")
    best = t.iloc[t["mca_over_t3"].idxmax()]
    toward = [r["toggle"] for r in c["causes"] if r["toward_paper"]]
    lines += ["", f"The toggles that move T3-MCA over T3 toward the paper: {', '.join(toward) or 'none'}. The largest "
              f"geomean is {_pct(best['mca_over_t3'])} ({best['toggle']}), "
              f"{'within' if best['mca_over_t3'] >= MCA_TARGET else 'short of'} a third of the paper's +13%.", ""]
    return lines


L2_FIT_RATIO = 1.01      # GEMM reads S/T3 at most this: the wave's operands and outputs fit the L2 together


def devices_section(out: Path) -> list[str]:
    """The report's rows simulate device 0 and its neighbours by ring symmetry (`devices: one`); rows of the main
    set with every device simulated (experiments_devices.csv) show how far that model moves the speed-ups."""
    dv = _read(out, "experiments_devices.csv")
    if dv is None:
        return []
    one = pd.read_csv(out / "results.csv").set_index(KEY)
    d = dv.set_index(KEY)
    cols = {"speedup_t3": "T3", "speedup_t3_mca": "T3-MCA", "mca_over_t3": "MCA over T3"}
    lines = ["## The one-device model against every device", "",
             "`experiments.py --part devices` (experiments_devices.csv): rows of the paper's main set with every "
             "device's memory simulated (`devices: all`) beside the report's rows (`devices: one`: device 0, its "
             "neighbours by ring symmetry). Points = percentage points of speed-up.", "",
             "| model | TP | sublayer | " + " | ".join(f"{v} one / all" for v in cols.values()) + " |",
             "|---|---|---|" + "---|" * len(cols)]
    moves = {k: [] for k in cols}
    for key, r in d.iterrows():
        o = one.loc[key]
        cells = []
        for k in cols:
            cells.append(f"{_pct_minus_one(o[k])} / {_pct_minus_one(r[k])}")
            moves[k].append(abs(o[k] - r[k]) * 100)
        lines.append(f"| {key[0]} | {key[1]} | {key[2]} | " + " | ".join(cells) + " |")
    lines += ["", f"Over these {len(d)} rows the one-device model moves T3's speed-up by up to "
              f"{max(moves['speedup_t3']):.1f} points, T3-MCA's by up to {max(moves['speedup_t3_mca']):.1f} and MCA "
              f"over T3 by up to {max(moves['mca_over_t3']):.1f}: the rows' own resolution is this, not the driver "
              "window's or the token count's (the headline's resolution above), and a toggle that moves a row by "
              "less is within it.", ""]
    return lines


def l2_section(out: Path, c: dict[str, Any]) -> list[str]:
    l2 = _read(out, "experiments_l2.csv")
    if l2 is None:
        return []
    lines = ["## GEMM reads: the L2 and the token count", "",
             "`experiments.py --part l2` (experiments_l2.csv): the GEMM's DRAM reads in Sequential over T3's from the "
             "L2 model alone (`_Sim.replay_l2`, which counts what a timed run reads) on every simulated row at three "
             "token counts. Sequential's output stores allocate L2 lines and evict operands; T3's NMC updates bypass "
             "the L2. *GEMM-bound*: the row's Sequential GEMM is longer than its reduce-scatter at the report's token "
             "count.", "", "| tokens | GEMM-bound rows | reads S/T3 geomean | min | max | in 1.2-2.0 |",
             "|---|---|---|---|---|---|"]
    for tok, g in l2.groupby("tokens"):
        gb = g[g["gemm_bound"]]
        lines.append(f"| {tok} | {len(gb)} | {geomean(gb['gemm_read_ratio']):.2f} | {gb['gemm_read_ratio'].min():.2f} | "
                     f"{gb['gemm_read_ratio'].max():.2f} | {int(gb['gemm_read_ratio'].between(1.2, 2.0).sum())} |")
    toks = sorted(c["l2_tokens"])
    first = l2[(l2["tokens"] == toks[0]) & l2["gemm_bound"]]["gemm_read_ratio"]
    fit = int((first <= L2_FIT_RATIO).sum())
    lines += ["", f"At {toks[0]} tokens Sequential reads at most {L2_FIT_RATIO - 1:.0%} more than T3 (a wave's operands "
              f"fit the L2 beside its outputs) in {fit} of {len(first)} GEMM-bound rows, and up to {first.max():.2f}x "
              f"in the others (geomean {c['l2_tokens'][toks[0]]:.2f}x; paper {PAPER_GEMM_READS:.2f}x); at "
              + ", ".join(f"{t} tokens {c['l2_tokens'][t]:.2f}x" for t in toks[1:])
              + ". The paper's token counts are not in the reference note.", ""]
    wave = _read(out, "experiments_l2_wave.csv")
    if wave is not None:
        best = wave.loc[wave["gemm_read_ratio"].idxmax()]
        per = wave.groupby("tiling", sort=False)["gemm_read_ratio"].max()
        below = best["gemm_read_ratio"] < 1.2
        verdict = (f"below the issue's 1.2-2.0: a larger wave or a shorter K step does not account for the paper's "
                   f"{PAPER_GEMM_READS:.2f}x at this token count" if below else "within the issue's 1.2-2.0")
        lines += [f"`experiments.py --part l2_wave` (experiments_l2_wave.csv): the GEMM's tiling, which the paper does "
                  f"not state, on the {wave.groupby(['model', 'tp', 'sublayer']).ngroups} GEMM-bound rows of its main "
                  f"set at {int(wave['tokens'].iloc[0])} tokens. The largest ratio per tiling: "
                  + ", ".join(f"{k} {v:.2f}x" for k, v in per.items())
                  + f"; the largest of all {best['gemm_read_ratio']:.2f}x ({best['model']} TP {int(best['tp'])} "
                  f"{best['sublayer']}, {best['tiling']}), {verdict}.", ""]
    return lines


def mca_sweep_section(out: Path) -> list[str]:
    m = _read(out, "experiments_mca.csv")
    if m is None:
        return []
    t = m.assign(sublayer_us=m["sublayer_us"].round(1), gemm_us=m["gemm_us"].round(1), rs_end_us=m["rs_end_us"].round(1),
                 speedup=m["speedup"].map(_pct_minus_one))
    keep = ["config", "threshold", "gate", "sublayer_us", "speedup", "gemm_us", "rs_end_us", "comm_stall_cycles"]
    keep += [k for k in ("threshold_min", "threshold_max") if k in t]
    return ["## T3-MCA: threshold and gate", "",
            f"`experiments.py --part mca` (figure `fig_mca.png`): {m['case'].iloc[0]}, {int(m['tokens'].iloc[0])} "
            "tokens. *gate*: what a held-back communication source does - `yield`: nothing, and its open rows yield "
            "to the compute source (engine `threshold_yield`); `all`: nothing, and it keeps them (engine `threshold`, "
            "docs/channel-engine.md clarification 16); `row`: it still issues column commands to rows it opened. "
            "*comm stall*: GEMM compute stall cycles beyond the Sequential GEMM's.", "",
            *_md(t[keep].astype(object).fillna("-")), ""]


def _pct_minus_one(v: float) -> str:
    return _pct(v - 1)


def nmc_section(out: Path) -> list[str]:
    n = _read(out, "experiments_nmc.csv")
    if n is None:
        return []
    g = nmc_table(n)
    t = g.assign(update_vs_write=g["update_vs_write"].round(2), t3_geomean=g["t3_geomean"].map(_pct),
                 t3_mca_geomean=g["t3_mca_geomean"].map(_pct), ideal_geomean=g["ideal_geomean"].map(_pct))
    return ["## NMC update cost against the 500B-class result", "",
            "`experiments.py --part nmc` (figure `fig_nmc_cost.png`): every 500B-class row (GPT-3, PaLM, MT-NLG at TP "
            "32) with the update's adder latency nALU varied and as RD + adder + WR; geomeans over those rows, like "
            f"the paper's 500B-class figure (T3-MCA {MR_PAPER_BIG}). *update / write*: DRAM time per update over a "
            "plain write's on the same 20,480 accesses.", "",
            *_md(t[["update", "update_vs_write", "rows", "t3_geomean", "t3_mca_geomean", "ideal_geomean"]]), ""]


MR_PAPER_BIG = f"+{PAPER['big_t3_mca'][0]:.0%} geomean"


def nmc_table(nmc: pd.DataFrame) -> pd.DataFrame:
    """Per NMC variant: the 500B-class geomeans of T3-MCA and of the ideal overlap (the same rows)."""
    out = []
    for name, g in nmc.groupby("update", sort=False):
        out.append({"update": name, "update_vs_write": g["update_vs_write"].iloc[0], "rows": len(g),
                    "t3_mca_geomean": geomean(g["speedup_t3_mca"]) - 1,
                    "t3_geomean": geomean(g["speedup_t3"]) - 1,
                    "ideal_geomean": geomean(g["speedup_ideal"]) - 1})
    return pd.DataFrame(out)


def hash_section(out: Path) -> list[str]:
    h = _read(out, "experiments_hash.csv")
    if h is None:
        return []
    df = pd.read_csv(out / "results.csv")
    m = h.merge(df, on=["model", "tp", "sublayer", "tokens"], suffixes=("", "_hashed"))
    lines = ["## Sensitivity: the unhashed address layout", "",
             "`experiments.py --part hash`: the same sublayer with the preset's field order and no channel hashing "
             "(`--set memory_mapping=RoRaBgBaChCo`), beside the report's hashed row.", "",
             "| row | layout | channels per chunk | seq RS / bound | T3 | T3-MCA | ideal |", "|---|---|---|---|---|---|---|"]
    for r in m.to_dict("records"):
        for tag, suf in (("unhashed", ""), ("hashed (report)", "_hashed")):
            lines.append(f"| {r['model']} TP{r['tp']} {r['sublayer']} | {tag} | {int(r['chunk_channels_min' + suf])}-"
                         f"{int(r['chunk_channels_max' + suf])} | {r['sequential_rs_vs_link_bound' + suf]:.2f} | "
                         f"{_pct(r['speedup_t3' + suf] - 1)} | {_pct(r['speedup_t3_mca' + suf] - 1)} | "
                         f"{_pct(r['speedup_ideal' + suf] - 1)} |")
    return lines + [""]


def experiments_section(out: Path, c: dict[str, Any]) -> list[str]:
    return (window_section(out, c) + causes_section(c) + bidir_section(out, c) + l2_section(out, c)
            + devices_section(out)
            + mca_sweep_section(out) + nmc_section(out) + hash_section(out))


def headline(c: dict[str, Any]) -> str:
    """The MCA headline, with its resolution and the done-when test (issue 34)."""
    moves = ", ".join(f"{k}: {v:+.2%}" for k, v in c["mca_resolution_moves"].items())
    verdict = ("not measured (window.csv and experiments_tokens.csv are missing)" if math.isnan(c["mca_resolution"])
               else "below the model's resolution, so no difference is reported" if c["mca_headline_is_none"]
               else "above the model's resolution")
    target = ("meets" if c["mca_target_met"] else "does not meet")
    return (f"**T3-MCA over T3** is {_pct(c['mca_over_t3_geomean'])} geomean over the {c['rows']} rows "
            f"({_pct(c['mca_over_t3_main_geomean'])} over the paper's main set, Mega-GPT-2 and T-NLG at TP 8 and 16; "
            f"paper +13%). Its resolution - the largest move of that geomean under changes that should not matter "
            f"({moves}) - is {c['mca_resolution']:.2%}: the headline is {verdict}. It {target} \"within a third of "
            f"the paper's +13%\" (>= {MCA_TARGET:+.1%}); the experiments below take the causes one by one. MCA "
            f"shortens T3's GEMM in {c['mca_gemm_shorter_rows']} of {c['simulated']} simulated rows "
            f"({_pct(c['mca_gemm_change_geomean'])} geomean) while the reduce-scatter, with which the sublayer "
            f"ends, moves by {_pct(c['mca_rs_end_change_geomean'])} (geomean of T3-MCA's end over T3's). The room "
            f"MCA has: our T3 ends {_pct(c['ideal_over_t3_geomean'])} from the ideal overlap (geomean of ideal over "
            f"T3; the paper's geomeans put its T3 {_pct(c['paper_ideal_over_t3'])} from its ideal), and T3's "
            f"communication slows its GEMM by {_pct(c['t3_gemm_slowdown_geomean'])} geomean (max "
            f"{_pct(c['t3_gemm_slowdown_max'])}) over the GEMM alone - all that arbitration can give back.")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=1024)
    ap.add_argument("--readme-only", action="store_true", help="rewrite README.md from the CSVs")
    ap.add_argument("-o", "--out", type=Path, default=HERE,
                    help="output folder (default: the report's own; give another for small runs)")
    ap.add_argument("--cases", default=None, help="only these model:tp pairs, e.g. gpt3-175b:32,t-nlg:8")
    ap.add_argument("--sublayers", default=None, help="only these sublayers, e.g. op_fwd,fc2_fwd")
    args = ap.parse_args()
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    cases = CASES if args.cases is None else [(c.split(":")[0], int(c.split(":")[1])) for c in args.cases.split(",")]
    subs = SUBLAYERS if args.sublayers is None else args.sublayers.split(",")
    if not args.readme_only:
        simulate_table(out / "results.csv", cases, subs, args.tokens)
    df = pd.read_csv(out / "results.csv")
    figures(out, df)
    (out / "README.md").write_text(render(out, args.tokens))


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(HERE))
    main()
