"""Regenerate reports/neupims/README.md: NeuPIMs against the paper's baselines (GPU-only, NPU-only, naive
NPU+PIM), its ablation ladder, the utilisation and energy rows, the runs that toggle each gap's cause, the
layer-extrapolation error and a small serving run, next to the paper.

Run:  .venv/bin/python reports/neupims/make_report.py [-o DIR] [--layers N] [--jobs J] [--full]

Every run is `archsim run --system S --set ...` through archsim.api (the config of each is in its JSON under
DIR/runs/, named by the config hash; existing results are reused, delete the folder to re-run). Default: the
first `--layers` layers of every model are simulated cycle-accurately (all of them with --full); whole-model
time then follows NeuPIMs' own stage formula (whole_model_tokens_per_s), and one point is also simulated with
every layer so the report prints the extrapolation's error beside it.
"""
from __future__ import annotations

import argparse
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from archsim import api  # noqa: E402
from archsim.errors import UserError  # noqa: E402
from archsim.report.palette import color_of  # noqa: E402
from archsim.results import atomic_write_text, load_result  # noqa: E402
from archsim.workload.spec import load_model  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run_cache  # noqa: E402

HERE = Path(__file__).resolve().parent
MODELS = ["gpt3-7b", "gpt3-13b", "gpt3-30b"]
DATASETS = ["sharegpt", "alpaca"]
BATCHES = [64, 256, 512]
# GPU-only as a band: the host cost per eager kernel at the two ends of its range (docs/presets.md, a100-40gb:
# 33 us measured on a V100 with HF GPT-2; no A100 figure is public, 10 us the low end); 30 kernels a layer
GPU_HOST_S = {"high": 33e-6, "low": 10e-6}
VARIANTS = {   # label -> (system, extra config); the paper's baselines and NeuPIMs
    "GPU roofline (upper bound)": ("gpu_roofline", {}),
    "GPU-only, 33 us/kernel": ("gpu_only", {"gpu_host_overhead_s": GPU_HOST_S["high"]}),
    "GPU-only, 10 us/kernel": ("gpu_only", {"gpu_host_overhead_s": GPU_HOST_S["low"]}),
    "NPU-only": ("npu_only", {}),
    "NPU+PIM": ("npu_pim", {}),
    # the same baseline with its PIM commands handed to memory as the released code's npu+pim branch does (one PIM
    # instruction per NPU cycle for the device, channel after channel: mappings/npu_pim_issue.yaml, issue_toggle.py)
    "NPU+PIM, the code's issue path": ("npu_pim", {"mapping": "npu_pim_issue"}),
    "NeuPIMs": ("neupims", {"sub_batch": "paper"}),
}
GPU_BAND = ["GPU-only, 33 us/kernel", "GPU-only, 10 us/kernel"]
# NeuPIMs as the paper runs it: sub-batch interleaving only at batch >= 256 (it loses at small batch, where a
# weight-stationary array takes as long for half the rows, so two sub-batches double the GEMM time)
SBI_MIN_BATCH = 256
# The systems as NeuPIMs' released code runs them (its NPU, PIM layout and baselines; reports/neupims/vs_code.csv
# checks that configuration stage by stage), GPT3-7B ShareGPT, beside the headline rows
CODE_POINT = ("gpt3-7b", "sharegpt")
CODE_ROWS = {
    "NeuPIMs, the code's NPU": ("neupims", {"npu": "neupims_code", "mapping": "neupims_code", "sub_batch": "paper"}),
    "NPU+PIM, the code's NPU": ("npu_pim", {"npu": "neupims_code", "mapping": "npu_pim_code"}),
    # the npu+pim branch's core handing memory one PIM instruction a cycle, channel after channel (issue_toggle.py)
    "NPU+PIM, the code's NPU and PIM issue path": ("npu_pim", {"npu": "neupims_code", "mapping": "npu_pim_code_issue"}),
    "NPU-only, the code's NPU and FusedMHA": ("npu_only", {"npu": "neupims_code_npu_only", "npu_attention": "fused_mha"}),
    # the npu+pim branch asserts sub-batch mode (Simulator.cc:43) but baseline_exp serialises it: this row is
    # that assert's reading, not what the code runs
    "NPU+PIM with SBI (the assert's reading)": ("npu_pim", {"sub_batch": True}),
}
# The paper's ablation (Fig. 13, GPT3-7B, ShareGPT): features added to the naive NPU+PIM one at a time
LADDER = {
    "NPU+PIM": ("npu_pim", {}),
    "+ dual row buffers": ("neupims", {"mapping": "npu_pim"}),
    "+ GMLBP": ("neupims", {"mapping": "npu_pim", "channel_assignment": "gmlbp"}),
    "+ SBI (NeuPIMs)": ("neupims", {}),
}
LADDER_POINT = ("gpt3-7b", "sharegpt")
# Runs that toggle one suspected cause of a gap each: label -> (system, extra, model, dataset, batch)
TOGGLES = {
    "npu_only, attention per GEMM (old schedule)": ("npu_only", {"npu_attention": "per_gemm"}, "gpt3-7b", "sharegpt", 256),
    "NeuPIMs, the code's NPU": ("neupims", {"npu": "neupims_code"}, "gpt3-30b", "sharegpt", 256),
    "NPU+PIM, the code's NPU": ("npu_pim", {"npu": "neupims_code"}, "gpt3-30b", "sharegpt", 256),
    "NPU-only, the code's NPU": ("npu_only", {"npu": "neupims_code"}, "gpt3-30b", "sharegpt", 256),
    "NeuPIMs no SBI, the code's NPU, b64": ("neupims", {"npu": "neupims_code", "sub_batch": False}, "gpt3-7b", "sharegpt", 64),
    "NeuPIMs, the code's NPU, b64": ("neupims", {"npu": "neupims_code"}, "gpt3-7b", "sharegpt", 64),
    "NeuPIMs with one row buffer (blocked), b256": ("npu_pim", {"mapping": "neupims"}, "gpt3-7b", "sharegpt", 256),
    "NeuPIMs with one row buffer (blocked), b512": ("npu_pim", {"mapping": "neupims"}, "gpt3-7b", "sharegpt", 512),
}
FULL_POINT = ("gpt3-7b", "sharegpt", 256)     # simulated with every layer beside the extrapolated run
# Serving is small: every decode iteration streams the shard's weights through the channel engine whatever the
# batch (~25 s of CPU per GPT3-7B iteration of all layers), so one layer of each is simulated and the whole
# model's time taken from it (archsim.systems.neupims.modes.whole_model_cycles: at this batch NeuPIMs runs without
# sub-batch interleaving, where every layer is the same, so the simulated time x layers)
SERVING = {"model": "gpt3-7b", "dataset": "alpaca", "mode": "serving", "requests": 8, "batch": 4, "layers": 1}
SERVING_VARIANTS = {"NeuPIMs": ("neupims", {}), "NPU-only": ("npu_only", {}), "GPU-only, 33 us/kernel": VARIANTS["GPU-only, 33 us/kernel"]}


def serving_config(variant: str) -> dict:
    system, extra = SERVING_VARIANTS[variant]
    cfg = {"system": system, **extra, **SERVING}
    if cfg["system"] == "neupims" and SERVING["batch"] < SBI_MIN_BATCH:
        cfg["sub_batch"] = False          # as the paper runs NeuPIMs at small batch
    return cfg


def config(system: str, extra: dict, model: str, dataset: str, batch: int, layers: int | None) -> dict:
    cfg = {"system": system, "model": model, "dataset": dataset, "batch": batch, **extra}
    if cfg.get("sub_batch") == "paper":       # the mapping's SBI from SBI_MIN_BATCH on, none below
        del cfg["sub_batch"]
        if batch < SBI_MIN_BATCH:
            cfg["sub_batch"] = False
    if layers is not None and not system.startswith("gpu"):      # the GPU models are instant: every layer
        cfg["layers"] = min(layers, load_model(model).n_layers)
    return cfg


def _run(job: tuple[dict, Path]) -> Path:
    """Run (or reuse) one point; a batch the devices cannot hold is recorded as such (`.nofit` file)."""
    cfg, runs = job
    path = run_cache.run_path(runs, cfg)        # keyed on the config's content: an edited input re-runs
    nofit = path.with_suffix(".nofit")
    if not path.exists() and not nofit.exists():
        try:
            api.run(cfg, seed=0).write_json(path)
        except UserError as exc:
            atomic_write_text(nofit, str(exc) + "\n")
    return path if path.exists() else nofit


def whole_model_tokens_per_s(res, cfg: dict) -> float:
    """tokens/s of the whole model from a run of its first L layers, with NeuPIMs' own stage formula
    (archsim.systems.neupims.modes.whole_model_cycles: with sub-batch interleaving T(N) = A + B + (C + D)(N - 1)
    + E + F; without it the simulated time x N / L). Exact for --full."""
    from archsim.systems.neupims.modes import layer_kinds, whole_model_cycles

    model = load_model(cfg["model"])
    n = model.n_layers
    sim_layers = cfg.get("layers", n)
    if sim_layers == n:
        return res.stats["tokens_per_s"]
    rows = [g["cycles"].sum() / whole_model_cycles(g, n, sim_layers, layer_kinds(model))[0]
            for _, g in res.tables["stages"].groupby("sample")]
    return res.stats["tokens_per_s"] * float(np.mean(rows))


def pim_busy_share(res) -> float:
    """Share of the iteration during which the PIM side had GEMVs in flight (from each stage's start to its
    last PIM event): the time-based utilisation NeuPIMs' per-stage logs give, not COMP issue slots."""
    st = res.tables["stages"]
    st = st[st["sample"] == 0]
    busy = (st["pim_end_cycle"] - st["start_cycle"]).clip(lower=0).sum()
    return float(busy / st["cycles"].sum())


def row(label: str, cfg: dict, path: Path, **keys) -> dict:
    out = {"system": label, **keys, "config": cfg}
    if path.suffix == ".nofit":
        return {**out, "tokens_per_s": np.nan, "note": path.read_text().strip()}
    res = load_result(path)
    s = res.stats
    out.update(tokens_per_s=whole_model_tokens_per_s(res, cfg), simulated_tokens_per_s=s["tokens_per_s"],
               npu_util=s.get("npu_util", np.nan), pim_util=s.get("pim_util", np.nan),
               pim_busy=pim_busy_share(res) if "stages" in res.tables else np.nan,
               mem_bw_util=s.get("mem_bw_util", np.nan), energy_per_token_j=s.get("dram_energy_per_token_j", s.get("energy_per_token_j", np.nan)),
               wall_s=s.get("wall_s", np.nan), path=path.name)
    return out


def jobs_of(layers: int | None, serving: bool = True) -> list[tuple[str, dict, dict]]:
    """Every run of the report: (table, keys, config), in the order they are run (the longest, the full-model
    runs, last)."""
    jobs: list[tuple[str, dict, dict]] = []
    for m in MODELS:
        for d in DATASETS:
            for b in BATCHES:
                for v, (system, extra) in VARIANTS.items():
                    jobs.append(("grid", {"system": v, "model": m, "dataset": d, "batch": b},
                                 config(system, extra, m, d, b, layers)))
    for b in BATCHES:
        for v, (system, extra) in CODE_ROWS.items():
            jobs.append(("code", {"system": v, "model": CODE_POINT[0], "dataset": CODE_POINT[1], "batch": b},
                         config(system, extra, *CODE_POINT, b, layers)))
        for v, (system, extra) in LADDER.items():
            jobs.append(("ladder", {"system": v, "model": LADDER_POINT[0], "dataset": LADDER_POINT[1], "batch": b},
                         config(system, extra, *LADDER_POINT, b, layers)))
    for v, (system, extra, m, d, b) in TOGGLES.items():
        jobs.append(("toggle", {"system": v, "model": m, "dataset": d, "batch": b}, config(system, extra, m, d, b, layers)))
    if serving:
        for v in SERVING_VARIANTS:
            jobs.append(("serving", {"system": v}, serving_config(v)))
    m, d, b = FULL_POINT
    for v in ("NeuPIMs", "NPU-only"):
        system, extra = VARIANTS[v]
        jobs.append(("full", {"system": v, "model": m, "dataset": d, "batch": b}, config(system, extra, m, d, b, None)))
    return jobs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--out", type=Path, default=HERE, help="output folder (default: the report's own)")
    ap.add_argument("--layers", type=int, default=2, help="layers simulated per model (default 2)")
    ap.add_argument("--full", action="store_true", help="simulate every layer of every model")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--no-serving", action="store_true", help="skip the serving run")
    ap.add_argument("--runs-only", action="store_true", help="run (or reuse) every point, write nothing else")
    args = ap.parse_args(argv)
    out = args.out.resolve()
    os.chdir(ROOT)                 # trace and mapping paths are repo-relative (part of the runs' config hashes)
    runs = out / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    layers = None if args.full else args.layers
    jobs = jobs_of(layers, serving=not args.no_serving)
    with ProcessPoolExecutor(args.jobs) as ex:
        paths = list(ex.map(_run, [(cfg, runs) for _, _, cfg in jobs]))
    if args.runs_only:
        return 0
    tables: dict[str, list[dict]] = {}
    for (kind, keys, cfg), path in zip(jobs, paths, strict=True):
        if kind == "serving":
            res = load_result(path)
            tables.setdefault(kind, []).append({**keys, **res.stats})
        else:
            tables.setdefault(kind, []).append(row(keys.pop("system"), cfg, path, **keys))
    frames = {k: pd.DataFrame(v) for k, v in tables.items()}
    frames["grid"].drop(columns=["config", "path"], errors="ignore").to_csv(out / "throughput.csv", index=False)
    for kind in ("code", "ladder", "toggle", "full"):
        frames[kind].drop(columns=["config", "path"], errors="ignore").to_csv(out / f"{kind}.csv", index=False)
    if "serving" in frames:
        frames["serving"].to_csv(out / "serving.csv", index=False)
    example_cfg = config("neupims", {}, "gpt3-7b", "sharegpt", 256, layers)
    example = load_result(run_cache.run_path(runs, example_cfg))
    timeline(example, out, layers)
    ladder_figure(frames["ladder"], out)
    vs = pd.read_csv(out / "vs_code.csv") if (out / "vs_code.csv").exists() else None
    atomic_write_text(out / "README.md", render(frames, layers, example.tables["stages"], vs, out))
    return 0


def timeline(res, out: Path, layers: int | None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    st = res.tables["stages"]
    st = st[st["sample"] == 0]
    fig, ax = plt.subplots(figsize=(10, 3.2))
    for _, r in st.iterrows():
        t0, t1 = r["start_cycle"] / 1e3, (r["start_cycle"] + r["cycles"]) / 1e3
        ax.axvline(t0, color="black", linewidth=0.8, linestyle=":", zorder=3)
        ax.text((t0 + t1) / 2, 1.55, f"{r['stage']}{int(r['layer'])}", fontsize=8, ha="center")
        ax.barh(1, (r["npu_end_cycle"] - r["start_cycle"]) / 1e3, left=t0, color=color_of("npu"))
        if r["pim_end_cycle"] > r["start_cycle"]:
            ax.barh(0, (r["pim_end_cycle"] - r["start_cycle"]) / 1e3, left=t0, color=color_of("pim"))
    ax.axvline(st["start_cycle"].iloc[-1] / 1e3 + st["cycles"].iloc[-1] / 1e3, color="black", linewidth=0.8, zorder=3,
               linestyle=":")
    ax.set_ylim(-0.6, 1.85)
    ax.set_yticks([0, 1], ["PIM (attention GEMVs)", "NPU (GEMMs, vector ops)"])
    ax.set_xlabel("time (µs; 1 µs = 1,000 cycles at 1 GHz)")
    ax.set_title(f"NeuPIMs, GPT3-7B, batch 256, ShareGPT, first {layers or 'all'} layers: stages A-F (label: stage + "
                 "layer; dotted lines: stage barriers).\nEach bar runs from its stage's start to that side's last "
                 "event; the stage ends when the later side does.", fontsize=9)
    fig.tight_layout()
    fig.savefig(out / "timeline.png", dpi=120)
    plt.close(fig)


def ladder_figure(lad: pd.DataFrame, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.6))
    steps = list(LADDER)
    width = 0.8 / len(BATCHES)
    for i, b in enumerate(BATCHES):
        sub = lad[lad["batch"] == b].set_index("system").loc[steps]
        base = sub["tokens_per_s"].iloc[0]
        x = np.arange(len(steps)) + (i - (len(BATCHES) - 1) / 2) * width
        ax.bar(x, sub["tokens_per_s"] / base, width, label=f"batch {b}")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(np.arange(len(steps)), steps)
    ax.set_ylabel("throughput relative to NPU+PIM\n(tokens/s ÷ NPU+PIM tokens/s)")
    ax.set_title("Ablation, GPT3-7B, ShareGPT: each bar adds one feature to the one on its left", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "ablation.png", dpi=120)
    plt.close(fig)


def _geo(x) -> float:
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    return float(np.exp(np.mean(np.log(x)))) if x.size else float("nan")


def _fmt(x: float, nd: int = 0) -> str:
    return "-" if not np.isfinite(x) else f"{x:,.{nd}f}"


def stage_table(st: pd.DataFrame) -> list[str]:
    out = ["| stage | layer | cycles | NPU busy until | PIM busy until | NPU util | PIM util (COMP slots) | memory BW util |",
           "|---|---|---|---|---|---|---|---|"]
    for _, r in st[st["sample"] == 0].iterrows():
        t0 = r["start_cycle"]
        out.append(f"| {r['stage']} | {int(r['layer'])} | {int(r['cycles']):,} | +{int(r['npu_end_cycle'] - t0):,} | "
                   f"+{int(max(r['pim_end_cycle'] - t0, 0)):,} | {r['npu_util']:.1%} | {r['pim_util']:.1%} | "
                   f"{r['mem_bw_util']:.1%} |")
    return out



# ---- derived tables (every number the prose states comes from one of the CSVs, reports/claims.py) -------------
PAPER = {   # the paper's numbers (Heo et al., ASPLOS'24; /work/shared/reference/neupims.md section 6)
    "vs GPU-only": 3.0, "vs NPU-only": 2.4, "vs NPU+PIM": 1.6, "dual row buffers (+%)": 69.7,
    "NPU util, NeuPIMs (%)": 64.9, "PIM util, NeuPIMs (%)": 26.4, "NPU util, NPU+PIM (%)": 28.0,
    "energy vs NPU-only (%)": -25.0,
}
BASES = {"GPU-only, 33 us/kernel": "vs GPU-only (33 us)", "GPU-only, 10 us/kernel": "vs GPU-only (10 us)",
         "NPU-only": "vs NPU-only", "NPU+PIM": "vs NPU+PIM", "NPU+PIM, the code's issue path": "vs NPU+PIM (code's issue path)",
         "GPU roofline (upper bound)": "vs GPU roofline"}


# code_ratios.csv's source of archsim's NPU+PIM with the npu+pim branch's PIM issue path (issue_toggle.csv)
ISSUE_SOURCE = "archsim, pim_issue per_cycle"
# ... and with the ranks' refreshes staggered as well, as mapping npu_pim_code_issue runs it (npupim_refresh_toggle.csv)
ISSUE_STAGGER_SOURCE = "archsim, pim_issue per_cycle, refresh_stagger"
ISSUE_BASE = BASES["NPU+PIM, the code's issue path"]      # ratios.csv's base of that reading in the headline grid
# code.csv's rows the NPU+PIM comparisons read
CODE_NEUPIMS, CODE_NPU_PIM = "NeuPIMs, the code's NPU", "NPU+PIM, the code's NPU"
CODE_ISSUE = "NPU+PIM, the code's NPU and PIM issue path"


def whole_block_cycles(stages: pd.DataFrame, col: str, layers: int) -> float:
    """A decode iteration of `layers` layers from one block's stages, NeuPIMs' own formula (Scheduler.h:143-144):
    A + B + (C + D)(N - 1) + E + F with sub-batch interleaving, N x (A + B + E) without."""
    c = stages.set_index(stages["stage"].str.rstrip("*"))[col]
    if "C" in c:
        return c["A"] + c["B"] + (c["C"] + c["D"]) * (layers - 1) + c["E"] + c["F"]
    return layers * (c["A"] + c["B"] + c["E"])


def derived_tables(frames: dict[str, pd.DataFrame], vs: pd.DataFrame | None, out: Path) -> None:
    """ratios.csv (NeuPIMs over each baseline per point), paper.csv, code_ratios.csv (the released code's own
    ratios beside archsim's on the same configuration, from vs_code.csv), energy.csv."""
    grid = frames["grid"]
    piv = grid.pivot_table(index=["model", "dataset", "batch"], columns="system", values="tokens_per_s", dropna=False)
    rows = [{"model": m, "dataset": d, "batch": b, "base": name, "ratio": r["NeuPIMs"] / r[base]}
            for (m, d, b), r in piv.iterrows() for base, name in BASES.items()]
    pd.DataFrame(rows).to_csv(out / "ratios.csv", index=False)
    pd.DataFrame([{"claim": k, "paper": v} for k, v in PAPER.items()]).to_csv(out / "paper.csv", index=False)
    gpu = grid[grid["system"].isin(GPU_BAND)].dropna(subset=["path"])
    runs = out / "runs"
    pd.DataFrame([{"system": r["system"], "model": r["model"], "dataset": r["dataset"], "batch": r["batch"],
                   "host_overhead_per_kernel_s": load_result(runs / r["path"]).df["host_overhead_per_kernel_s"].iloc[0],
                   "kernels_per_layer": load_result(runs / r["path"]).df["kernels_per_layer"].iloc[0]}
                  for _, r in gpu.iterrows()]).to_csv(out / "gpu_band.csv", index=False)
    e = grid.pivot_table(index=["model", "dataset", "batch"], columns="system", values="energy_per_token_j")
    (e["NeuPIMs"] / e["NPU-only"] * 100 - 100).rename("neupims_vs_npu_only_pct").reset_index().to_csv(
        out / "energy.csv", index=False)
    if vs is None:
        return
    case = {"NeuPIMs": "gpt3-7B_tp4_bs512_clb0_sbi-on", "NeuPIMs without SBI": "gpt3-7B_tp4_bs512_clb0_sbi-off",
            "NPU+PIM": "npupim-baseline_gpt3-7B_tp4_bs512_clb0", "NPU-only": "npuonly-baseline_gpt3-7B_tp4_bs512_clb0"}
    layers = load_model("gpt3-7b").n_layers
    rows = []
    for src, col in (("code", "code_cycles"), ("archsim", "archsim_cycles")):
        it = {k: whole_block_cycles(vs[(vs["case"] == c) & (vs["stage"] != "block")], col, layers) for k, c in case.items()}
        for base in ("NPU+PIM", "NPU-only", "NeuPIMs without SBI"):
            rows.append({"source": src, "base": base, "ratio": it[base] / it["NeuPIMs"],
                         "neupims_cycles": it["NeuPIMs"], "base_cycles": it[base]})
    if (out / "issue_toggle.csv").exists():    # archsim's NPU+PIM with the npu+pim branch's PIM issue path
        tog = pd.read_csv(out / "issue_toggle.csv")
        base = whole_block_cycles(tog[tog["stage"] != "block"], "archsim_cycles_per_cycle", layers)
        neupims = it["NeuPIMs"]                  # archsim's (the loop's last source)
        rows.append({"source": ISSUE_SOURCE, "base": "NPU+PIM", "ratio": base / neupims, "neupims_cycles": neupims,
                     "base_cycles": base})
    if (out / "npupim_refresh_toggle.csv").exists():
        tog = pd.read_csv(out / "npupim_refresh_toggle.csv")
        base = whole_block_cycles(tog[tog["stage"] != "block"], "archsim_cycles_staggered", layers)
        neupims = it["NeuPIMs"]
        rows.append({"source": ISSUE_STAGGER_SOURCE, "base": "NPU+PIM", "ratio": base / neupims,
                     "neupims_cycles": neupims, "base_cycles": base})
    pd.DataFrame(rows).to_csv(out / "code_ratios.csv", index=False)


def _table(df: pd.DataFrame, cols: list[str], fmts: dict[str, str]) -> list[str]:
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for _, r in df.iterrows():
        out.append("| " + " | ".join(fmts.get(c, "{}").format(r[c]) if pd.notna(r[c]) else "-" for c in cols) + " |")
    return out


def render(frames: dict[str, pd.DataFrame], layers: int | None, stages: pd.DataFrame, vs: pd.DataFrame | None,
           out: Path) -> str:
    """README.md: tables straight from the CSVs, every sentence with a number or a direction through `Claims`."""
    from reports.claims import Claims

    derived_tables(frames, vs, out)
    c = Claims(out)
    md: list[str] = ["# NeuPIMs reproduction (archsim)", "",
                     "Generated by `reports/neupims/make_report.py` "
                     + (f"(`--layers {layers}`: the first layers of each model simulated cycle-accurately, whole-model "
                        "time from NeuPIMs' stage formula; its error against a run of every layer is measured below)"
                        if layers else "(`--full`: every layer simulated)")
                     + " and `reports/neupims/vs_code.py` (`vs_code.csv`), `reports/neupims/queue_toggle.py` (`queue_toggle.csv`), `reports/neupims/beside_pim_toggle.py` (`beside_pim_toggle.csv`), `reports/neupims/controller_toggle.py` (`controller_toggle.csv`), `reports/neupims/refresh_toggle.py` (`refresh_toggle.csv`), `reports/neupims/issue_toggle.py` (`issue_toggle.csv`), `reports/neupims/code_channels.py` (`code_channels.csv`, from the per-channel traffic logs of the code's npu+pim run; `code_channels_norefresh.csv`, of its run without refresh), `reports/neupims/issue_channels.py` (`issue_channels.csv`), `reports/neupims/code_writes.py` (`code_writes.csv`, from the same logs), `reports/neupims/npupim_refresh_toggle.py` (`npupim_refresh_toggle.csv`), `reports/neupims/refresh_cost.py` (`refresh_cost.csv`; the code's runs without refresh in `code_norefresh.csv`), `reports/neupims/code_trace.py` (`code_trace.csv`, from a channel-0 log of NeuPIMs' simulator), `reports/neupims/code_commands.py` (`code_commands.csv`, NewtonSim's command counts beside archsim's), `reports/neupims/code_grid.py` (`code_grid.csv`, the code's own NeuPIMs / NPU+PIM over the headline's points beside archsim's and the headline's), `reports/neupims/gemv_toggle.py` (`gemv_toggle.csv`), `reports/neupims/attend_tile.py` (`attend_tile.csv`). Runs: `runs/*.json`, named by the content of their inputs (`run_cache.py`). Tables: `throughput.csv`, "
                     "`ratios.csv`, `code.csv`, `ladder.csv`, `toggle.csv`, `full.csv`, `serving.csv`, `energy.csv`, "
                     "`vs_code.csv`, `code_results.csv` (NeuPIMs' simulator, measured), `code_ratios.csv`, `paper.csv`; "
                     "every number in the prose is checked against them (`claims.json`, tests/test_report_claims.py).", ""]
    md += _vs_code_section(c, vs)
    md += _code_grid_section(c)
    md += _headline_section(c, frames)
    md += _code_rows_section(c, frames)
    md += _ablation_section(c, frames)
    md += _utilisation_energy_section(c, frames)
    md += _extrapolation_serving_section(c, frames, layers, stages)
    notes = HERE / "README.notes.md"
    md += [notes.read_text()] if notes.exists() else []
    c.write()
    return "\n".join(md) + "\n"


def vs_code_tolerance() -> dict[str, float]:
    import importlib.util

    spec = importlib.util.spec_from_file_location("neupims_vs_code", HERE / "vs_code.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.TOLERANCE


def _code_count(command: str, case: str, over=None):
    """NewtonSim's count of `command` in the code's run of `case` (code_commands.csv)."""
    from reports.claims import Fact

    return Fact("code_commands.csv", "code_count", {"case": case, "command": command}, over=over)


def _summed_distance(c, csv: str, rows: dict, words: tuple[str, str]) -> str:
    """'<shrinking|growing> from X % to Y %': a toggle table's rows' distance from the code, summed without sign,
    with archsim's controller and with the code's, in % of the code's cycles."""
    from reports.claims import Fact

    def pct(arm: str) -> Fact:
        return Fact(csv, f"abs_err_{arm}_controller", rows, "sum", over=Fact(csv, "code_cycles", rows, "sum"), scale=100)
    word = c.cmp(Fact(csv, "abs_err_code_controller", rows, "sum"), "<",
                 Fact(csv, "abs_err_archsim_controller", rows, "sum"), words)
    return f"{word} from {c.num(pct('archsim'), '{:.1f}')} % to {c.num(pct('code'), '{:.1f}')} %"


def _uni_section(c, V: str) -> list[str]:
    """The uni cases' stages A and B: the traced causes (code_trace.csv), with the toggles that take them."""
    from reports.claims import Fact

    CT, RT, TR, CC = "controller_toggle.csv", "refresh_toggle.csv", "code_trace.csv", "code_commands.csv"

    def tr(metric: str) -> Fact:
        return Fact(TR, "value", {"metric": metric})
    uni_a = {"case": "uni32-off", "stage": "A"}
    a_rows = {"stage": "A"}
    md = ["- " + c.say(
        "**Weight streaming alone (stage A of the uni cases: the QKV GEMM of 32 tokens).** archsim's stage A is "
        f"{c.num(Fact(V, 'diff_pct', uni_a), '{:+.1f}')} % off. A channel-0 log of the code's uni32 run (`code_trace.py`: "
        "every transaction the controller accepts and every command it issues; the run's stages take the same cycles "
        f"as without the log) shows its last stage-A read at cycle {c.num(tr('a_last_read_cycle'), '{:,.0f}')} of "
        f"{c.num(tr('a_cycles'), '{:,.0f}')}, and the run's own per-channel statistics (mem_io_A_ch_*.tsv) show no "
        f"channel reading or writing after cycle {c.num(tr('a_last_traffic_interval_end'), '{:,.0f}')}: the rest of the "
        "stage is the array working through instructions whose operands came late. NewtonSim serves the NPU from a 128-entry command queue per bank, banks round robin, a "
        "queue's first ready command, and lets only a queue's first entry precharge (NS/neupims_command_queue.cc:75-90, "
        "119-150, 336-360): a posted write at a queue's head waits for its turnaround while other banks' reads keep the "
        "data bus busy, and its bank serves no read of another row meanwhile, so the sequential weight stream is served "
        f"out of order: the first {c.num(tr('a_first_requests'), '{:,.0f}')} requests channel 0 accepted were all "
        "served only by cycle "
        f"{c.num(tr('a_first1000_served_cycle'), '{:,.0f}')}, when it had issued {c.num(tr('a_served_by_then'), '{:,.0f}')} "
        "reads. archsim's FR-FCFS over one 4096-entry queue serves the oldest row hit first. The mapping policy "
        "`npu_controller: bank_queues` takes NewtonSim's queues (the engine's DRAMsim3 controller with 128-entry bank "
        "queues, posted writes, merged reads and the ranks' refreshes in turn, docs/presets.md); the engine's bank queues "
        "take no PIM stream, so the toggle (`controller_toggle.py`, `controller_toggle.csv`) runs the cases without "
        "interleaving with attention on the NPU and compares the stages where the NPU works alone: uni32's stage A "
        f"{c.num(Fact(CT, 'diff_pct_archsim_controller', uni_a), '{:+.1f}')} % with archsim's controller, "
        f"{c.num(Fact(CT, 'diff_pct_code_controller', uni_a), '{:+.1f}')} % with the code's; "
        f"{c.num(Fact(CT, 'moved_toward_code', a_rows, 'sum'), '{:.0f}')} of "
        f"{c.num(Fact(CT, 'moved_toward_code', a_rows, 'count'), '{:.0f}')} A rows (the four uni cases' stage A is "
        "one and the same run, the QKV GEMM of 32 tokens) and "
        f"{c.num(Fact(CT, 'moved_toward_code', {'stage': 'E'}, 'sum'), '{:.0f}')} of "
        f"{c.num(Fact(CT, 'moved_toward_code', {'stage': 'E'}, 'count'), '{:.0f}')} E rows move closer to the code, their "
        "distance from it, summed without sign, "
        + _summed_distance(c, CT, {}, ("shrinking", "not shrinking"))
        + " of the code's cycles; by stage, A's " + _summed_distance(c, CT, a_rows, ("shrinking", "growing"))
        + ", E's " + _summed_distance(c, CT, {"stage": "E"}, ("shrinking", "growing"))
        + ". The rest of uni32's stage A gap is not traced here; the mapping neupims_code keeps archsim's controller, as the bank queues cannot run beside PIM.")]
    uni_b = {n: {"case": f"uni{n}-off", "stage": "B"} for n in (32, 128)}
    npu_alone = {"stage": ["A", "F"]}
    md += ["- " + c.say(
        "**Attention of very short requests (uni32, uni128: one request of 32 or 128 tokens per channel).** archsim's "
        f"stage B is {c.num(Fact(V, 'diff_pct', uni_b[32]), '{:+.1f}')} % (uni32) and "
        f"{c.num(Fact(V, 'diff_pct', uni_b[128]), '{:+.1f}')} % (uni128) off, "
        + c.cmp(Fact(CC, "abs_diff", {"case": ["uni32-off", "uni128-off"]}, "max"), "<=", Fact.zero(),
                ("with the same PIM command counts in both simulators (`code_commands.csv`), so the gap is time",
                 "with other PIM command counts than the code's (`code_commands.csv`)"))
        + ", and it is refresh: NewtonSim refreshes the two ranks of a channel in turn, one "
        "every tREFI / ranks cycles (its default RANK_LEVEL_STAGGERED, NS/configuration.cc:284, NS/refresh.cc:13-28; "
        f"channel 0 of the code's uni32 run: a REFRESH every {c.num(tr('refresh_median_gap'), '{:,.0f}')} cycles, "
        "median, the ranks "
        + c.cmp(tr('refresh_rank_alternates'), ">", Fact.zero(), ("taking turns", "not always taking turns")) + "), "
        "and a GEMV, which needs every bank, waits for each: that channel refreshes "
        f"{c.num(tr('b_refreshes'), '{:.0f}')} times in its "
        f"{c.num(tr('b_cycles'), '{:,.0f}')}-cycle stage B, where archsim refreshes both ranks at once every tREFI. "
        "The mapping policy `refresh_stagger: true` takes the code's refresh (`refresh_toggle.py`, "
        f"`refresh_toggle.csv`): uni32's stage B {c.num(Fact(RT, 'diff_pct_together', uni_b[32]), '{:+.1f}')} % -> "
        f"{c.num(Fact(RT, 'diff_pct_staggered', uni_b[32]), '{:+.1f}')} %, uni128's "
        f"{c.num(Fact(RT, 'diff_pct_together', uni_b[128]), '{:+.1f}')} % -> "
        f"{c.num(Fact(RT, 'diff_pct_staggered', uni_b[128]), '{:+.1f}')} %. The mapping neupims_code does not take it: "
        "over every stage of the NeuPIMs cases it moves "
        f"{c.num(Fact(RT, 'moved_toward_code', {'stage': ['A', 'B', 'C', 'D', 'E', 'F']}, 'sum'), '{:.0f}')} of "
        f"{c.num(Fact(RT, 'moved_toward_code', {'stage': ['A', 'B', 'C', 'D', 'E', 'F']}, 'count'), '{:.0f}')} rows "
        "closer to the code. Where the NPU works alone (stages A and F) archsim streams on through one rank's refresh "
        "and "
        + c.cmp(Fact(RT, 'archsim_cycles_staggered', npu_alone, 'sum'), "<",
                Fact(RT, 'archsim_cycles_together', npu_alone, 'sum'), ("gets faster", "does not get faster"))
        + " with it ("
        + f"{c.num(Fact(RT, 'archsim_cycles_staggered', npu_alone, 'sum', over=Fact(RT, 'archsim_cycles_together', npu_alone, 'sum'), scale=100, offset=-100), '{:+.1f}')} % "
        "in those rows' cycles summed), their distance from the code summed "
        + c.cmp(Fact(RT, 'abs_err_staggered', npu_alone, 'sum'), ">", Fact(RT, 'abs_err_together', npu_alone, 'sum'),
                ("growing", "not growing"))
        + ", as the code's stages there are long for the reason of the item above; where PIM works the code "
        "hides part of each refresh: a GEMV "
        "admitted right after a rank's REFRESH issues the other rank's G_ACTs during its tRFC, as a channel command's "
        "next G_ACT is the first bank whose command is ready (NS/channel_state.cc:154-186; "
        f"{c.num(tr('b_gact_during_refresh'), '{:.0f}')} of the {c.num(tr('b_gact'), '{:.0f}')} G_ACTs of the "
        "uni32 run's stage B), where archsim's PIM stream issues its G_ACTs in their compiled order and a refreshing "
        "rank holds the other's. Issuing a stream's G_ACTs in ready order is a change of the channel kernel, not made "
        "here (issue 33).")]
    return md


def _refresh_by_operation(c, pim_st: dict) -> str:
    """The PIM operations' gaps with the code's refresh (refresh_toggle.csv)."""
    from reports.claims import Fact

    RT, TR = "refresh_toggle.csv", "code_trace.csv"
    return (
        "With the code's staggered refresh (`refresh_toggle.csv`) archsim's logits over the same stages are from "
        f"{c.num(Fact(RT, 'diff_pct_logits_staggered', pim_st, 'min'), '{:+.1f}')} % to "
        f"{c.num(Fact(RT, 'diff_pct_logits_staggered', pim_st, 'max'), '{:+.1f}')} % off "
        f"({c.num(Fact(RT, 'moved_logits_toward_code', pim_st, 'sum'), '{:.0f}')} of "
        f"{c.num(Fact(RT, 'moved_logits_toward_code', pim_st, 'count'), '{:.0f}')} closer to the code, their distance "
        "from it summed "
        + c.cmp(Fact(RT, 'abs_err_logits_staggered', pim_st, 'sum'), "<", Fact(RT, 'abs_err_logits_together', pim_st, 'sum'),
                ("smaller: part of the logits' gap is the refreshes they wait for", "not smaller"))
        + ") and its attend from "
        f"{c.num(Fact(RT, 'diff_pct_attend_staggered', pim_st, 'min'), '{:+.1f}')} % to "
        f"{c.num(Fact(RT, 'diff_pct_attend_staggered', pim_st, 'max'), '{:+.1f}')} % "
        f"({c.num(Fact(RT, 'moved_attend_toward_code', pim_st, 'sum'), '{:.0f}')} closer): the attend's gap is not "
        "refresh, its distance from the code summed "
        + c.cmp(Fact(RT, 'abs_err_attend_staggered', pim_st, 'sum'), ">", Fact(RT, 'abs_err_attend_together', pim_st, 'sum'),
                ("growing with the code's refresh", "not growing with the code's refresh"))
        + ". The difference found there is the code's PIM precharge: in its uni512 run (`code_trace.csv`) an attend tile's rows start closing "
        f"{c.num(Fact(TR, 'value', {'metric': 'attend_gemv_to_pim_precharge'}), '{:.0f}')} cycles after its fused GEMV "
        "(COMPS_READRES) issues, as a PIM_PRECHARGE waits only tRTP after it (NS/timing.cc:429-441), and only the next "
        "GEMV waits for its COMPs, 2 (max(k, 6) + 1) cycles (NS/channel_state.cc:484-505): a tile's rows close, and the "
        "next tile's row set opens, while its 32 COMPs still read them, one tile every "
        f"{c.num(Fact(TR, 'value', {'metric': 'attend_gemv_period'}), '{:.0f}')} cycles. archsim closes a tile's rows "
        "after its last COMP, as a COMP reads the open row: archsim is right about the hardware, and the code's attend "
        "is faster than its COMPs allow.")


def _gemv_toggle(c) -> str:
    """The code's fused GEMV as a toggle (gemv_toggle.csv): NeuPIMs' SBI-off cases with a row set's last GEMV split
    (archsim) and fused (the code's timing), with refresh, without it on both sides, and with the code's staggered
    refresh as well."""
    from reports.claims import Fact
    G = "gemv_toggle.csv"
    models = ["gpt3-7B_tp4_bs512_clb0_sbi-off", "gpt3-7B_tp4_bs256_genclb0_sbi-off", "gpt3-13B_tp8_bs256_genclb0_sbi-off"]
    unis = [f"uni{s}-off" for s in (32, 128, 512, 1024)]

    def where(part: str, refresh: str, cases: list[str] = models) -> dict:
        return {"case": cases, "part": part, "refresh": refresh}

    def span(col: str, w: dict) -> str:
        return f"{c.num(Fact(G, col, w, 'min'), '{:+.1f}')} .. {c.num(Fact(G, col, w, 'max'), '{:+.1f}')} %"

    def moved(arm: str, w: dict) -> str:
        return c.cmp(Fact(G, f"abs_err_{arm}", w, "sum"), "<", Fact(G, "abs_err_split", w, "sum"),
                     ("toward the code", "away from the code"))

    b_off, at_off, b_on, at_on = where("B", "off"), where("attend", "off"), where("B", "on"), where("attend", "on")
    lg_on = where("logits", "on")
    uni_at = where("attend", "on", unis)
    AT = "attend_tile.csv"

    def tile(arm: str, col: str) -> str:
        return c.num(Fact(AT, col, {"arm": arm}), "{:.0f}")

    return (
        "In archsim's uni512 run without refresh (`attend_tile.py`, `attend_tile.csv`, channel 0's command log) an "
        f"attend tile's rows start closing {tile('split', 'gemv_to_pim_precharge')} cycles after its GEMV's first "
        f"COMP, one tile every {tile('split', 'tile_period')} cycles, against the code's "
        f"{tile('code', 'gemv_to_pim_precharge')} and {tile('code', 'tile_period')}. "
        "The mapping policy `pim_gemv: fused` takes the code's timing (`gemv_toggle.py`, `gemv_toggle.csv`): a row "
        "set's last GEMV is one COMPS_READRES (the DRAM standard `neupims_code_fused`: `neupims_code` with rows from "
        "NS/timing.cc:429-441 and NS/channel_state.cc:484-505, docs/presets.md), its rows closing nRTP after it: "
        f"{tile('fused', 'gemv_to_pim_precharge')} cycles, one attend tile every {tile('fused', 'tile_period')}. "
        "Without refresh on both sides "
        f"it takes the model cases' stage B from {span('diff_pct_split', b_off)} to {span('diff_pct_fused', b_off)} "
        f"off the code's, {moved('fused', b_off)}, their attend from {span('diff_pct_split', at_off)} to "
        f"{span('diff_pct_fused', at_off)}, {moved('fused', at_off)}: the attend's gap without refresh is the code's "
        f"fused GEMV. With each simulator's default refresh it takes their stage B from {span('diff_pct_split', b_on)} "
        f"to {span('diff_pct_fused', b_on)}, {moved('fused', b_on)}, as archsim's default refresh is "
        + c.cmp(Fact("refresh_cost.csv", "archsim_refresh_cost_together", {"part": "B", "case": models}, "sum"), "<",
                Fact("refresh_cost.csv", "code_refresh_cost", {"part": "B", "case": models}, "sum"),
                ("cheaper", "dearer"))
        + " than the code's (`refresh_cost.csv`, the NPU+PIM item below); with the code's staggered refresh as well "
        f"(`refresh_stagger: true`) their stage B is {span('diff_pct_fused_staggered', b_on)} off (summed, "
        f"{moved('fused_staggered', b_on)} when set beside the split arm), their attend "
        f"{span('diff_pct_fused_staggered', at_on)} ({moved('fused_staggered', at_on)}) and their logits "
        f"{span('diff_pct_fused_staggered', lg_on)}, "
        + c.cmp(Fact(G, "diff_pct_fused_staggered", lg_on, "max"), "<", Fact.zero(),
                ("faster than the code's in every case", "not faster in every case"))
        + ": with the code's two rules the attend agrees with the code's and what stage B keeps of a gap is its "
        "logits, no longer two gaps cancelling. On the uni cases the two rules take the attend "
        f"from {span('diff_pct_split', uni_at)} to {span('diff_pct_fused_staggered', uni_at)}, "
        f"{moved('fused_staggered', uni_at)} "
        f"({c.num(Fact(G, 'closer_staggered', uni_at, 'sum'), '{:.0f}')} of "
        f"{c.num(Fact(G, 'closer_staggered', uni_at, 'count'), '{:.0f}')} closer). Mapping `neupims_code` keeps "
        "`pim_gemv: split`, the hardware's order (a COMP reads the open row); `fused` is the code's timing, for "
        "comparing with it.")



def _issue_channels(c) -> str:
    """Where the per_cycle arm's remaining stage-B gap lies, channel by channel (issue_channels.csv): the first
    channel's own end against the spread the channel-after-channel issue makes."""
    from reports.claims import Fact
    IC = "issue_channels.csv"

    def pct(a: str, b: str, channel: int, scale: float = 100.0, offset: float = -100.0) -> Fact:
        return Fact(IC, a, {"channel": channel}, over=Fact(IC, b, {"channel": channel}), scale=scale, offset=offset)

    parts = []
    closer = True
    for part in ("logits", "attend"):
        first = pct(f"archsim_{part}_end", f"code_{part}_end", 0)
        spread = pct(f"archsim_{part}_after_ch0", f"code_{part}_after_ch0", 31)
        # |spread| < |first| when first < 0 (a first channel ahead of the code: the "not" wording)
        closer &= (c.cmp(spread, ">", first, ("in", "out")) == "in"
                   and c.cmp(spread, "<", pct(f"archsim_{part}_end", f"code_{part}_end", 0, -100.0, 100.0),
                             ("in", "out")) == "in")
        parts.append(
            f"its {part}{' (from its release)' if part == 'attend' else ''} at {c.num(Fact(IC, f'archsim_{part}_end', {'channel': 0}), '{:,.0f}')} cycles against the "
            f"code's {c.num(Fact(IC, f'code_{part}_end', {'channel': 0}), '{:,.0f}')} "
            f"({c.num(first, '{:+.1f}')} %), and the channels' {part} ends spread from channel 0 to channel 31 over "
            f"{c.num(Fact(IC, f'archsim_{part}_after_ch0', {'channel': 31}), '{:,.0f}')} cycles against the code's "
            f"{c.num(Fact(IC, f'code_{part}_after_ch0', {'channel': 31}), '{:,.0f}')} ({c.num(spread, '{:+.1f}')} %)")
    every = c.cmp(Fact(IC, "diff_logits", {}, "max"), "<", Fact.zero(),
                  ("every channel's logits end before the code's", "not every channel's logits end before the code's"))
    where = ("so what is left sits in each channel's own PIM execution, not in the issue path's spread" if closer else
             "so the issue path's spread does not agree better than the first channel's own end")
    return ("Channel by channel (`issue_channels.py`, archsim's per-channel ends beside `code_channels.csv`), "
            f"{every}; channel 0, issued first and waiting for no other channel, ends {parts[0]}; it ends {parts[1]}: "
            f"{where}. The code's ends are those of "
            f"{c.num(Fact('code_channels.csv', 'interval', {'channel': 0}), '{:,.0f}')}-cycle log intervals."
            + (" " + _npupim_channel0(c) if closer else ""))


def _npupim_channel0(c) -> str:
    """What channel 0's own PIM execution in the code's NPU+PIM run is (and is not) held back by: the softmax
    results' writes (code_writes.csv, from the code's traffic logs) and the staggered refresh
    (npupim_refresh_toggle.csv; refresh_toggle.csv for NeuPIMs' own cases)."""
    from reports.claims import Fact
    W, R, RT = "code_writes.csv", "npupim_refresh_toggle.csv", "refresh_toggle.csv"
    ch0 = {"channel": 0}
    b, blk = {"stage": "B"}, {"stage": "block"}
    models = {"stage": "B", "case": [f"{m}_{s}" for m in ("gpt3-7B_tp4_bs512_clb0", "gpt3-7B_tp4_bs256_genclb0",
                                                          "gpt3-13B_tp8_bs256_genclb0") for s in ("sbi-on", "sbi-off")]}

    def moved(err: str, where: dict, words=("toward the code", "away from the code")) -> str:
        return c.cmp(Fact(R, f"{err}_staggered", where), "<", Fact(R, f"{err}_together", where), words)

    def change(col: str, where: dict) -> str:
        return (f"{c.num(Fact(R, f'{col}_together', where), '{:+.1f}')} % to "
                f"{c.num(Fact(R, f'{col}_staggered', where), '{:+.1f}')} %")

    in_pim = Fact(W, "logits_write_bytes_in_pim", ch0)
    writes = (
        "The softmax results' writes do not hold channel 0 back: each request's MOVOUT of them follows its logits "
        "GEMVs in the same tile ([npu+pim] NeuPIMSLogitSoftmax.cc:270-290), the core queues its writes behind the "
        "channel's PIM instructions ([npu+pim] NeuPIMSystolicWS.cc:221-254, Core.cc:230-246) and the Newton "
        "controller takes no read or write while its PIM queue holds a command (NS/newton_command_queue.cc:153-165); "
        "in the code's run (`code_writes.py`, from its per-channel traffic logs) "
        f"{c.num(in_pim, '{:,.0f}')} of the {c.num(Fact(W, 'logits_write_bytes', ch0), '{:,.0f}')} bytes written to "
        f"channel 0 during the logits fell inside its own PIM work, in "
        f"{c.num(Fact(W, 'logits_write_intervals_in_pim', ch0), '{:.0f}')} of its "
        f"{c.num(Fact(W, 'logits_pim_intervals', ch0), '{:.0f}')} log intervals, the first at "
        f"{c.num(Fact(W, 'logits_first_write_in_pim', ch0), '{:,.0f}')} cycles, where its last READRES interval "
        f"starts at {c.num(Fact(W, 'logits_pim_last', ch0), '{:,.0f}')} "
        f"({c.num(Fact(W, 'logits_write_bytes_in_pim', {}, 'sum', over=Fact(W, 'logits_write_bytes', {}, 'sum'), scale=100), '{:.0f}')} % "
        "of the logits' writes over all channels fell inside the channel's own PIM work). Nor does the PIM mode by "
        "itself: the Newton controller enters it at a GEMV's PIM_HEADER and leaves it with the GEMV's last command "
        "(NS/newton_command_queue.cc:332-346, 464-468), with no latency of its own; it keeps reads and writes out, "
        "which channel 0 did not have during its PIM work, and the code's G_ACTs, one row set per PIM_HEADER, are "
        "as many as NeuPIMs' own (`code_commands.csv`, above).")
    none_closer = c.cmp(Fact(R, "abs_err_none", b), "<", Fact(R, "abs_err_together", b),
                        ("closer than with refresh", "no closer than with refresh"))

    def cost(col: str) -> str:
        return c.num(Fact(R, col, b), '{:,.0f}')

    refresh = (
        " The refresh does: without refresh on both sides (archsim `refresh: false`; the code's device config with "
        "tREFI past the run's end, `run_neupims.py --newton-set tREFI=100000000`, `code_norefresh.csv`) stage B is "
        f"{c.num(Fact(R, 'diff_pct_none', b), '{:+.1f}')} % off the code's (its logits "
        f"{c.num(Fact(R, 'diff_pct_logits_none', b), '{:+.1f}')} %, its attend "
        f"{c.num(Fact(R, 'diff_pct_attend_none', b), '{:+.1f}')} %), {none_closer}. The branch's device config sets "
        "no refresh policy ([npu+pim] extern/NewtonSim/configs/HBM2_8Gb_x128_singlepim.ini), so NewtonSim's default "
        "staggers the ranks' refreshes (one rank every tREFI / ranks, NS/configuration.cc:284, NS/refresh.cc:13-37), "
        "and the Newton controller admits a GEMV only if its estimated latency fits before the next refresh "
        "(NS/newton_command_queue.cc:332-346, NS/channel_state.cc:271-329). The code's refresh costs its stage B "
        f"{cost('code_refresh_cost')} cycles (logits {cost('code_logits_refresh_cost')}, attend "
        f"{cost('code_attend_refresh_cost')}); archsim's {cost('archsim_refresh_cost_together')} with the ranks "
        f"refreshing together (logits {cost('archsim_logits_refresh_cost_together')}, attend "
        f"{cost('archsim_attend_refresh_cost_together')}) and {cost('archsim_refresh_cost_staggered')} with them in "
        f"turn, `refresh_stagger: true` (logits {cost('archsim_logits_refresh_cost_staggered')}, attend "
        f"{cost('archsim_attend_refresh_cost_staggered')}), "
        + c.cmp(Fact(R, "refresh_cost_off_staggered", b), "<", Fact(R, "refresh_cost_off_together", b),
                ("the staggered rule the closer", "the together rule the closer"))
        + f" (`npupim_refresh_toggle.py`). With the staggered refresh channel 0's logits end goes from "
        f"{change('diff_pct_ch0_logits', b)} off the code's, {moved('abs_err_ch0_logits', b)}, its attend end from "
        f"{change('diff_pct_ch0_attend', b)}, {moved('abs_err_ch0_attend', b)}, stage B from {change('diff_pct', b)} "
        f"(its logits {change('diff_pct_logits', b)}, its attend {change('diff_pct_attend', b)}), "
        f"{moved('abs_err', b)}, and the block from {change('diff_pct', blk)}, {moved('abs_err', blk)}; stage A goes "
        f"from {change('diff_pct', {'stage': 'A'})} and stage E from {change('diff_pct', {'stage': 'E'})}, "
        + c.cmp(Fact(R, "abs_err_staggered", {"stage": ["A", "E"]}, "sum"), "<",
                Fact(R, "abs_err_together", {"stage": ["A", "E"]}, "sum"), ("toward the code", "away from it"))
        + f", as without refresh archsim's stage A is already {c.num(Fact(R, 'diff_pct_none', {'stage': 'A'}), '{:+.1f}')} % "
        f"and its stage E {c.num(Fact(R, 'diff_pct_none', {'stage': 'E'}), '{:+.1f}')} % off the code's. The mapping "
        "`npu_pim_code_issue` (the headline's row of the code's NPU+PIM with its issue path) takes "
        "`refresh_stagger: true`. On NeuPIMs' own cases the same key takes stage B from "
        f"{c.num(Fact(RT, 'diff_pct_together', models, 'min'), '{:+.1f}')} .. "
        f"{c.num(Fact(RT, 'diff_pct_together', models, 'max'), '{:+.1f}')} % to "
        f"{c.num(Fact(RT, 'diff_pct_staggered', models, 'min'), '{:+.1f}')} .. "
        f"{c.num(Fact(RT, 'diff_pct_staggered', models, 'max'), '{:+.1f}')} % (`refresh_toggle.csv`), "
        + c.cmp(Fact(RT, "abs_err_staggered", models, "sum"), "<", Fact(RT, "abs_err_together", models, "sum"),
                ("toward the code", "away from the code"))
        + ". " + _refresh_cost(c) + " " + _channel0_without_refresh(c))
    return writes + refresh


def _channel0_without_refresh(c) -> str:
    """Channel 0's ends without refresh on both sides (npupim_refresh_toggle.csv, the code's from
    code_channels_norefresh.csv): its gap under the staggered refresh split into the two refresh costs' difference
    and what is left without refresh."""
    from reports.claims import Fact
    R, b = "npupim_refresh_toggle.csv", {"stage": "B"}

    def cyc(col: str) -> str:
        return c.num(Fact(R, col, b), '{:+,.0f}')

    return (
        "Without refresh on both sides (the code's run without refresh read the same way, "
        "`code_channels_norefresh.csv`) channel 0's logits end is "
        f"{c.num(Fact(R, 'diff_pct_ch0_logits_none', b), '{:+.1f}')} % off the code's and its attend end "
        f"{c.num(Fact(R, 'diff_pct_ch0_attend_none', b), '{:+.1f}')} %: of the {cyc('ch0_logits_gap_staggered')} "
        "cycles its logits end lies off the code's under the staggered refresh, "
        f"{cyc('ch0_logits_gap_refresh_staggered')} are the two refresh costs' difference (the code's refresh delays "
        f"channel 0's logits end by {c.num(Fact(R, 'code_ch0_logits_refresh_cost', b), '{:,.0f}')} cycles, archsim's "
        f"staggered one by {c.num(Fact(R, 'archsim_ch0_logits_refresh_cost_staggered', b), '{:,.0f}')}) and "
        f"{cyc('ch0_logits_gap_none')} are there without refresh (the code's ends being those of "
        f"{c.num(Fact('code_channels_norefresh.csv', 'interval', {'channel': 0}), '{:,.0f}')}-cycle log intervals). "
        "Why the code's refresh costs channel 0 "
        + c.cmp(Fact(R, "code_ch0_logits_refresh_cost", b), ">",
                Fact(R, "archsim_ch0_logits_refresh_cost_staggered", b), ("more than", "no more than"))
        + " archsim's staggered one is not traced.")

def _refresh_cost(c) -> str:
    """What refresh costs the code's and archsim's stage B on NeuPIMs' own cases without sub-batch interleaving
    (refresh_cost.csv: each side with refresh and without), and how archsim's stage B compares without it."""
    from reports.claims import Fact
    RC = "refresh_cost.csv"
    neu = {"part": "B", "case": ["gpt3-7B_tp4_bs512_clb0_sbi-off", "gpt3-7B_tp4_bs256_genclb0_sbi-off",
                                 "gpt3-13B_tp8_bs256_genclb0_sbi-off"]}
    attend = {**neu, "part": "attend"}

    def span(col: str, where: dict, fmt: str = "{:,.0f}") -> str:
        return f"{c.num(Fact(RC, col, where, 'min'), fmt)} .. {c.num(Fact(RC, col, where, 'max'), fmt)}"

    return (
        "Measured the same way on NeuPIMs' own cases without sub-batch interleaving (`refresh_cost.py`: the code "
        "with and without refresh, archsim in its three arms), the code's refresh costs their stage B "
        f"{span('code_refresh_cost', neu)} cycles, archsim's {span('archsim_refresh_cost_together', neu)} with the "
        f"ranks together and {span('archsim_refresh_cost_staggered', neu)} staggered, "
        + c.cmp(Fact(RC, "refresh_cost_off_staggered", neu, "sum"), "<", Fact(RC, "refresh_cost_off_together", neu, "sum"),
                ("the staggered rule the closer", "the together rule the closer"))
        + " there too; but without refresh archsim's stage B is "
        f"{span('diff_pct_none', neu, '{:+.1f}')} % off the code's (its attend {span('diff_pct_none', attend, '{:+.1f}')} %"
        "), so its agreement with the code's stage B there under the default refresh sets a refresh "
        + c.cmp(Fact(RC, "archsim_refresh_cost_together", neu, "sum"), "<", Fact(RC, "code_refresh_cost", neu, "sum"),
                ("cheaper", "dearer"))
        + " than the code's against an attend "
        + c.cmp(Fact(RC, "diff_pct_none", attend, "min"), ">", Fact.zero(), ("slower", "not slower"))
        + " than the code's (the attend's row closing, above). `neupims_code` keeps the default refresh and split "
        "GEMVs: the code's fused GEMV is toggled together with its staggered refresh in `gemv_toggle.csv` (the PIM "
        "stages by operation, above); taking both there re-makes every table of the code's configuration.")


def _vs_code_section(c, vs: pd.DataFrame | None) -> list[str]:
    from reports.claims import Fact

    if vs is None:
        return []
    md = ["## NeuPIMs' own simulator beside archsim, same input", "",
          "NeuPIMs' released simulator (casys-kaist/NeuPIMs f299af3, built outside this repository as "
          "`benchmarks/neupims_code/README.md` says, run by `benchmarks/neupims_code/run_neupims.py`) and archsim in "
          "the same configuration, by name: NPU preset `neupims_code` (the NPU as that code runs it), mapping "
          "`neupims_code` (its PIM layout, precharge and scheduling beside PIM), DRAM standard `neupims_code` (its "
          "one command a cycle), the same batch snapshot (dataset = the trace file), one "
          "decoder block. The baselines' rows use the code's `npu+pim` and `npu-only` branches against archsim's "
          "`npu_pim` and `npu_only` (NPU preset `neupims_code_npu_only`, `npu_attention: fused_mha`). `pim` = PIM-busy "
          "cycles (the code's `pim_cycles`), `bw` = memory-bandwidth utilisation as the code defines it.", "",
          "| case | stage | code cycles | archsim cycles | diff | code pim | archsim pim | code bw | archsim bw |",
          "|---|---|---|---|---|---|---|---|---|"]
    for _, r in vs.iterrows():
        md.append(f"| {r['case']} | {r['stage']} | {r['code_cycles']:,} | {r['archsim_cycles']:,} | {r['diff_pct']:+.1f}% | "
                  f"{r['code_pim_cycles']:,} | {r['archsim_pim_cycles']:,} | {r['code_mem_bw_util_pct']:.1f}% | "
                  f"{r['archsim_mem_bw_util_pct']:.1f}% |")
    V = "vs_code.csv"
    on_cases = [k for k in vs["case"].unique() if k.endswith("sbi-on")]
    off_cases = [k for k in vs["case"].unique() if k.endswith("sbi-off") and k.startswith("gpt3")]
    tol = vs_code_tolerance()
    md += ["", c.say(f"Within the targets (a stage within {tol['stage']:.0%}, a block within {tol['block']:.0%}): {c.num(Fact(V, 'within_tolerance', agg='sum'), '{:.0f}')} "
                     f"of {c.num(Fact(V, 'within_tolerance', agg='count'), '{:.0f}')} rows. Without sub-batch interleaving "
                     f"every stage of the three model cases is from {c.num(Fact(V, 'diff_pct', {'case': off_cases, 'stage': ['A', 'B', 'E']}, 'min'), '{:.1f}')} % "
                     f"to {c.num(Fact(V, 'diff_pct', {'case': off_cases, 'stage': ['A', 'B', 'E']}, 'max'), '{:.1f}')} % off and every block from "
                     f"{c.num(Fact(V, 'diff_pct', {'case': off_cases, 'stage': 'block'}, 'min'), '{:.1f}')} % to "
                     f"{c.num(Fact(V, 'diff_pct', {'case': off_cases, 'stage': 'block'}, 'max'), '{:.1f}')} %: the NPU as the code "
                     "runs it (stages A and E) and its PIM attention (stage B) agree. With interleaving, the stages where "
                     f"only one side works are (A, B, F: {c.num(Fact(V, 'diff_pct', {'case': on_cases, 'stage': ['A', 'B', 'F']}, 'min'), '{:.1f}')} % to "
                     f"{c.num(Fact(V, 'diff_pct', {'case': on_cases, 'stage': ['A', 'B', 'F']}, 'max'), '{:.1f}')} % off), and where the NPU works beside PIM "
                     f"(C, D, E) archsim is {c.num(Fact(V, 'diff_pct', {'case': on_cases, 'stage': ['C', 'D', 'E']}, 'min'), '{:.1f}')} % to "
                     f"{c.num(Fact(V, 'diff_pct', {'case': on_cases, 'stage': ['C', 'D', 'E']}, 'max'), '{:.1f}')} % off, "
                     + c.cmp(Fact(V, 'diff_pct', {'case': on_cases, 'stage': ['C', 'D', 'E']}, 'min'), ">", Fact.zero(),
                             ("every one of them slower than the code", "not all of them on the same side of the code"))
                     + "."), ""]
    md += ["### The stages outside the targets, and why", ""]
    e_off = Fact(V, "archsim_cycles", {"case": "gpt3-7B_tp4_bs512_clb0_sbi-on", "stage": "E"},
                 over=Fact(V, "archsim_cycles", {"case": "gpt3-7B_tp4_bs512_clb0_sbi-on", "stage": "F"}), scale=100, offset=-100)
    e_code = Fact(V, "code_cycles", {"case": "gpt3-7B_tp4_bs512_clb0_sbi-on", "stage": "E"},
                  over=Fact(V, "code_cycles", {"case": "gpt3-7B_tp4_bs512_clb0_sbi-on", "stage": "F"}), scale=100, offset=-100)
    Q = "queue_toggle.csv"
    def e_over_f(col: str) -> Fact:
        case = {"case": "gpt3-7B_tp4_bs512_clb0_sbi-on"}
        return Fact(Q, col, {**case, "stage": "E"}, over=Fact(Q, col, {**case, "stage": "F"}))
    md += ["- " + c.say(
        "**The NPU beside PIM (stages C, D, E with interleaving).** Stage E (projection and FFN of one sub-batch, the "
        "other's attention on PIM) against stage F (the same NPU work alone) of the batch-512 case, E over F: "
        f"{c.num(e_code, '{:+.0f}')} % in the code, {c.num(e_off, '{:+.0f}')} % in archsim. Every G_ACT holds its "
        "rank's ACTs for tFAW in both simulators (NewtonSim timing.cc:396-401, archsim's Newton extension), so what the "
        "NPU keeps beside PIM depends on how far ahead it has opened banks: NewtonSim schedules the NPU's requests "
        "from a 128-entry command queue per bank, the first ready command of each bank's queue in turn "
        "(HBM2_8Gb_x128_dualpim.ini:58-61, NS/neupims_command_queue.cc:75-90, 336-360), a window of 32 x 128 "
        "requests per channel, where archsim's controller held 32, two rows of the NPU's stream, and stalled at every "
        "row set. Mapping `neupims_code` takes the code's window (`request_queue: 4096`, docs/presets.md); the "
        f"toggle (`queue_toggle.py`, `{Q}`): E over F of the batch-512 case {c.num(e_over_f('archsim_cycles_q32'), '{:.2f}')} "
        f"with 32 entries, {c.num(e_over_f('archsim_cycles_q4096'), '{:.2f}')} with the code's window, "
        f"{c.num(e_over_f('code_cycles'), '{:.2f}')} in the code. Over the interleaving cases, "
        f"{c.num(Fact(Q, 'moved_toward_code', {'stage': ['C', 'D', 'E']}, 'sum'), '{:.0f}')} of the "
        f"{c.num(Fact(Q, 'moved_toward_code', {'stage': ['C', 'D', 'E']}, 'count'), '{:.0f}')} C, D and E rows move "
        "closer to the code with its window, and their distance from it, summed without sign, goes from "
        f"{c.num(Fact(Q, 'abs_err_q32', {'stage': ['C', 'D', 'E']}, 'sum', over=Fact(Q, 'code_cycles', {'stage': ['C', 'D', 'E']}, 'sum'), scale=100), '{:.1f}')} % "
        f"to {c.num(Fact(Q, 'abs_err_q4096', {'stage': ['C', 'D', 'E']}, 'sum', over=Fact(Q, 'code_cycles', {'stage': ['C', 'D', 'E']}, 'sum'), scale=100), '{:.1f}')} % "
        "of the code's cycles (both with the code's other rules, the next item); stage F, with no PIM beside it, "
        f"moves closer in {c.num(Fact(Q, 'moved_toward_code', {'stage': 'F'}, 'sum'), '{:.0f}')} of "
        f"{c.num(Fact(Q, 'moved_toward_code', {'stage': 'F'}, 'count'), '{:.0f}')} cases.")]
    T, big, mid = "beside_pim_toggle.csv", "gpt3-7B_tp4_bs512_clb0_sbi-on", "gpt3-7B_tp4_bs256_genclb0_sbi-on"
    cde = {"case": on_cases, "stage": ["C", "D", "E"]}

    def arm_pct(arm: str, case: str, stage: str) -> str:
        where = {"case": case, "stage": stage}
        return c.num(Fact(T, f"archsim_cycles_{arm}", where, over=Fact(T, "code_cycles", where), scale=100,
                          offset=-100), "{:+.1f}")

    def summed(arm: str) -> str:
        return c.num(Fact(T, f"abs_err_{arm}", cde, "sum", over=Fact(T, "code_cycles", cde, "sum"), scale=100), "{:.1f}")

    def moved(a: str, b: str) -> str:
        return c.num(Fact(T, f"moved_{a}_to_{b}", cde, "sum"), "{:.0f}")
    arch, code_arm = "head_reserved_dual", "code"
    md += ["- " + c.say(
        "**What the NPU keeps beside PIM: three rules of NeuPIMs' code (stages B to E).** (1) Its PIM program runs "
        "its operations one after another: NeuPIMSAttend starts only once NeuPIMSLogitSoftmax's tiles are done on "
        "every channel (src/scheduler/Scheduler.cc:648-729, src/StageProgram.cc:139-148, 182-200), where archsim "
        "started each head's attend once that head's softmax was done on its own channel. (2) Its controller reserves no bank for "
        "PIM: while the PIM queue waits (for tFAW, tRP, or a refresh its next GEMV may not cross: "
        "NS/neupims_command_queue.cc:55-71, 104-116, 289-326) the NPU's commands go to any bank timing allows, "
        "skipping only the row a GEMV has reserved and the bank being GWRITE-d (:341-352), where archsim's controller "
        "kept the NPU from opening the banks of a PIM open waiting to issue (docs/channel-engine.md, reservations); "
        "the code's one limit on the NPU beside a waiting PIM command is channel-wide and not modelled in archsim: "
        "a budget of refresh slack set when a GEMV or GWRITE is admitted (:248-262), which each NPU precharge or "
        "activate spends (tRP, tRCDWR) and below 10 cycles of which no NPU command issues (:57-69, 367-398); "
        "it applies only while PIM commands are queued (:367), so not where the NPU works alone (stage A, E without "
        "interleaving, F). "
        "(3) It issues one command a cycle per channel, row or column, PIM or not (NS/neupims_controller.cc:62-83), "
        "where archsim's HBM2 has separate row and column command buses, so the NPU read on beside a row set's 8 "
        "G_ACTs and 32 PIM precharges. With archsim's first two rules a channel holding only a few short requests "
        "ran its attend at the stage's start, a row set for every 1 to 4 COMPs with its next open nearly always "
        "waiting, so the NPU's requests to its banks waited through it, and with them the NPU's operators, striped "
        "over every channel; with its third the NPU lost less than the code's to a long attend. Mapping "
        "`neupims_code` takes rules 1 and 2 (`attend_start: all_logits`, `pim_reserves_banks: false`, the engine's "
        "`controller.stream_reserve: false`), the DRAM standard `neupims_code` rule 3 (`command_bus: single`; "
        f"docs/presets.md). The toggle (`beside_pim_toggle.py`, `{T}`), archsim's rules against the code's: stage C "
        f"of the batch-512 case {arm_pct(arch, big, 'C')} % and {arm_pct(code_arm, big, 'C')} % off the code, D "
        f"{arm_pct(arch, big, 'D')} % and {arm_pct(code_arm, big, 'D')} %, E {arm_pct(arch, big, 'E')} % and "
        f"{arm_pct(code_arm, big, 'E')} %; batch 256: C {arm_pct(arch, mid, 'C')} % and {arm_pct(code_arm, mid, 'C')} %, "
        f"D {arm_pct(arch, mid, 'D')} % and {arm_pct(code_arm, mid, 'D')} %, E {arm_pct(arch, mid, 'E')} % and "
        f"{arm_pct(code_arm, mid, 'E')} %. Over the interleaving cases {moved(arch, code_arm)} of the "
        f"{c.num(Fact(T, f'moved_{arch}_to_{code_arm}', cde, 'count'), '{:.0f}')} C, D and E rows move closer to the "
        f"code, and their distance from it, summed without sign, goes from {summed(arch)} % to {summed(code_arm)} % of "
        f"the code's cycles. One rule at a time from archsim's: rule 1 alone {summed('all_logits_reserved_dual')} % "
        f"({moved(arch, 'all_logits_reserved_dual')} rows closer), rule 2 alone {summed('head_free_dual')} % "
        f"({moved(arch, 'head_free_dual')}), rule 3 alone {summed('head_reserved_single')} % "
        f"({moved(arch, 'head_reserved_single')}); rules 1 and 2 {summed('all_logits_free_dual')} %, and rule 3 added "
        f"to them {summed(code_arm)} % ({moved('all_logits_free_dual', code_arm)} rows closer): the one command a cycle "
        "matters once the NPU is no longer held out of a short-request channel's banks. Without interleaving rule 1 "
        f"moves stage B (the whole batch's attention, alone) of the 13B case from "
        f"{arm_pct(arch, 'gpt3-13B_tp8_bs256_genclb0_sbi-off', 'B')} % to "
        f"{arm_pct(code_arm, 'gpt3-13B_tp8_bs256_genclb0_sbi-off', 'B')} %.")]
    OPS = "vs_code_ops.csv"

    def ops_sum(stages: list[str], ops: list[str]) -> Fact:
        where = {"case": big, "stage": stages, "op": ops}
        return Fact(OPS, "archsim_cycles", where, "sum", over=Fact(OPS, "code_cycles", where, "sum"), scale=100, offset=-100)

    vec = ["add", "layernorm", "gelu"]

    def ffn_over_f(stage: str, col: str) -> Fact:
        where = {"case": big, "op": ["ffn1", "ffn2"]}
        return Fact(OPS, col, {**where, "stage": stage}, "sum", over=Fact(OPS, col, {**where, "stage": "F"}, "sum"),
                    scale=100, offset=-100)
    md += ["- " + c.say(
        "**Operator by operator** (`vs_code_ops.csv`: the NPU's operators of every stage, the code's per-operation "
        "cycles beside archsim's, in program order). With the code's three rules, the vector operators of the "
        f"batch-512 case (residual adds, LayerNorms, GELU), which read their rows from DRAM, take "
        f"{c.num(ops_sum(['C'], vec), '{:+.0f}')} % (stage C), {c.num(ops_sum(['D'], vec), '{:+.0f}')} % (D), "
        f"{c.num(ops_sum(['E'], vec), '{:+.0f}')} % (E) and {c.num(ops_sum(['F'], vec), '{:+.0f}')} % (F, no PIM beside "
        "them) of the code's cycles, and the FFN GEMMs beside PIM over the same GEMMs alone in stage F take "
        f"{c.num(ffn_over_f('D', 'archsim_cycles'), '{:+.0f}')} % in archsim and "
        f"{c.num(ffn_over_f('D', 'code_cycles'), '{:+.0f}')} % in the code in stage D (the longer sub-batch's "
        f"attention beside them from start to end), {c.num(ffn_over_f('C', 'archsim_cycles'), '{:+.0f}')} % and "
        f"{c.num(ffn_over_f('C', 'code_cycles'), '{:+.0f}')} % in stage C. The C, D and E rows of the interleaving "
        f"cases are from {c.num(Fact(V, 'diff_pct', cde, 'min'), '{:+.1f}')} % to "
        f"{c.num(Fact(V, 'diff_pct', cde, 'max'), '{:+.1f}')} % off the code.")]
    md += _uni_section(c, V)
    pim_st = {"case": on_cases + off_cases, "stage": ["B", "C", "D", "E"]}      # the model cases' PIM stages
    uni = {n: {"case": f"uni{n}-off", "stage": "B"} for n in (32, 128, 512, 1024)}

    def uni_att(side: str) -> str:
        return ", ".join(c.num(Fact(V, f"{side}_attend_cycles", uni[n]), "{:,.0f}") for n in (32, 128, 512, 1024))
    lo_max, at_min = Fact(V, "logits_diff_pct", pim_st, "max"), Fact(V, "attend_diff_pct", pim_st, "min")
    md += ["- " + c.say(
        "**The PIM stages by operation** (`vs_code.csv`'s logits and attend columns: the code's NeuPIMSLogitSoftmax "
        "and NeuPIMSAttend operations, archsim's stage split at the attend's release). Over the model cases' PIM "
        "stages (B, and C to E with interleaving) archsim's logits and softmaxes are from "
        f"{c.num(Fact(V, 'logits_diff_pct', pim_st, 'min'), '{:+.1f}')} % to {c.num(lo_max, '{:+.1f}')} % off the "
        f"code's and its attend from {c.num(at_min, '{:+.1f}')} % to "
        f"{c.num(Fact(V, 'attend_diff_pct', pim_st, 'max'), '{:+.1f}')} %: the first "
        + c.cmp(lo_max, "<", Fact.zero(), ("faster in every stage", "not faster in every stage")) + ", the second "
        + c.cmp(at_min, ">", Fact.zero(), ("slower in every stage", "not slower in every stage")) + ", so the "
        "agreement of stage B (the attention, which sets that stage's length) is two gaps of opposite sign, not an "
        "agreement of each operation. The code's attend takes "
        f"{uni_att('code')} cycles at 32, 128, 512 and 1024 tokens (one GWRITE and four V tiles per head and 512-token "
        f"chunk: NeuPIMSAttend.cc:82, 152-200, 281), archsim's {uni_att('archsim')}: uni32's stage B is "
        f"{c.num(Fact(V, 'attend_diff_pct', uni[32]), '{:+.1f}')} % in its attend and "
        f"{c.num(Fact(V, 'logits_diff_pct', uni[32]), '{:+.1f}')} % in its logits, uni512's "
        f"{c.num(Fact(V, 'attend_diff_pct', uni[512]), '{:+.1f}')} % and "
        f"{c.num(Fact(V, 'logits_diff_pct', uni[512]), '{:+.1f}')} %. " + _refresh_by_operation(c, pim_st) + " "
        + _gemv_toggle(c))]
    npupim, neupims = "npupim-baseline_gpt3-7B_tp4_bs512_clb0", "gpt3-7B_tp4_bs512_clb0_sbi-off"
    T, CH = "issue_toggle.csv", "code_channels.csv"
    md += ["- " + c.say(
        "**The NPU+PIM baseline's attention stage** (the `npu+pim` branch): the code's stage B takes "
        f"{c.num(Fact(V, 'code_cycles', {'case': 'npupim-baseline_gpt3-7B_tp4_bs512_clb0', 'stage': 'B'}, over=Fact(V, 'code_cycles', {'case': 'gpt3-7B_tp4_bs512_clb0_sbi-off', 'stage': 'B'})), '{:.2f}')}x "
        "as long as NeuPIMs' own stage B on the same batch, with the same PIM work in NewtonSim's statistics "
        "(`code_commands.csv`: its COMP, READRES, GWRITE and G_ACT counts "
        + ", ".join(f"{c.num(_code_count(cmd, npupim, over=_code_count(cmd, neupims)), '{:.4f}')}x" for cmd in ("COMP", "READRES", "GWRITE", "G_ACT"))
        + " NeuPIMs' own). The time comes from that branch's issue "
        "path: the Newton device splits each GEMV into separate COMP and READRES instructions "
        "(NeuPIMSLogitSoftmax.cc:231-252, NeuPIMSAttend.cc:204-225), the core hands memory one PIM instruction a "
        "cycle for the whole device (`[npu+pim] NeuPIMSystolicWS.cc:150-178`: one request pushed and popped per "
        "cycle), each operation's instructions for the whole batch are one PIM tile, and `baseline_exp` consolidates "
        "the batch channel after channel ([npu+pim] Scheduler.cc:252-264): a channel's GEMVs arrive in one run while "
        "the other channels wait their turn. In the code's run the channels finish in turn (`code_channels.py`, "
        "from its per-channel READRES traffic): channel 0's logits end "
        f"{c.num(Fact(CH, 'logits_end', {'channel': 0}), '{:,.0f}')} cycles into the operation, channel 31's "
        f"{c.num(Fact(CH, 'logits_end', {'channel': 31}), '{:,.0f}')}, "
        + c.cmp(Fact(CH, 'logits_end', {'channel': 31}), ">=", Fact(CH, 'logits_end', {}, 'max'), ("the last", "not the last"))
        + f", and its attend {c.num(Fact(CH, 'attend_end', {'channel': 0}), '{:,.0f}')} and "
        f"{c.num(Fact(CH, 'attend_end', {'channel': 31}), '{:,.0f}')}, while each channel returned results in only "
        f"{c.num(Fact(CH, 'logits_busy_intervals', {}, 'min'), '{:.0f}')} to "
        f"{c.num(Fact(CH, 'logits_busy_intervals', {}, 'max'), '{:.0f}')} of the logits' "
        f"{c.num(Fact(CH, 'interval', {'channel': 0}), '{:,.0f}')}-cycle log intervals. archsim takes that path with the mapping policy `pim_issue: per_cycle` (`issue_toggle.py`, "
        f"{c.num(Fact(T, 'pim_instructions', {'stage': 'B'}), '{:,.0f}')} PIM instructions handed over in stage B): "
        f"stage B goes from {c.num(Fact(T, 'diff_pct_bus', {'stage': 'B'}), '{:+.1f}')} % to "
        f"{c.num(Fact(T, 'diff_pct_per_cycle', {'stage': 'B'}), '{:+.1f}')} % off the code's, "
        + c.cmp(Fact(T, 'abs_err_per_cycle', {'stage': 'B'}), "<", Fact(T, 'abs_err_bus', {'stage': 'B'}),
                ("toward it", "away from it"))
        + f" (its logits {c.num(Fact(T, 'diff_pct_logits_bus', {'stage': 'B'}), '{:+.1f}')} % to "
        f"{c.num(Fact(T, 'diff_pct_logits_per_cycle', {'stage': 'B'}), '{:+.1f}')} %, its attend "
        f"{c.num(Fact(T, 'diff_pct_attend_bus', {'stage': 'B'}), '{:+.1f}')} % to "
        f"{c.num(Fact(T, 'diff_pct_attend_per_cycle', {'stage': 'B'}), '{:+.1f}')} %), the block "
        f"{c.num(Fact(T, 'diff_pct_bus', {'stage': 'block'}), '{:+.1f}')} % to "
        f"{c.num(Fact(T, 'diff_pct_per_cycle', {'stage': 'block'}), '{:+.1f}')} %. " + _issue_channels(c) + " With the NPU idle "
        "in that stage a single row buffer costs no extra activation, so archsim's blocked single-buffer device, its "
        "commands entering at the bus's rate (`pim_issue: bus`, every other mapping), runs it at the dual device's "
        "pace: that is the hardware, and the code's NPU+PIM is held back by its issue path.")]
    md += ["", c.say(
        "The released code's own ratios on this configuration (GPT3-7B, TP 4, batch 512, clb-0; whole model by its "
        "stage formula): NeuPIMs is "
        f"{c.num(Fact('code_ratios.csv', 'ratio', {'source': 'code', 'base': 'NPU+PIM'}), '{:.2f}')}x its NPU+PIM and "
        f"{c.num(Fact('code_ratios.csv', 'ratio', {'source': 'code', 'base': 'NPU-only'}), '{:.2f}')}x its NPU-only "
        f"(archsim on the same inputs: {c.num(Fact('code_ratios.csv', 'ratio', {'source': 'archsim', 'base': 'NPU+PIM'}), '{:.2f}')}x and "
        f"{c.num(Fact('code_ratios.csv', 'ratio', {'source': 'archsim', 'base': 'NPU-only'}), '{:.2f}')}x; its NPU+PIM "
        f"with the code's issue path, `pim_issue: per_cycle`: {c.num(Fact('code_ratios.csv', 'ratio', {'source': ISSUE_SOURCE, 'base': 'NPU+PIM'}), '{:.2f}')}x, "
        f"{c.num(Fact('code_ratios.csv', 'ratio', {'source': ISSUE_SOURCE, 'base': 'NPU+PIM'}, over=Fact('code_ratios.csv', 'ratio', {'source': 'code', 'base': 'NPU+PIM'}), scale=100, offset=-100), '{:+.1f}')} % "
        "from the code's; with the ranks' refreshes staggered as well, `refresh_stagger: true` as mapping "
        f"`npu_pim_code_issue` has it: {c.num(Fact('code_ratios.csv', 'ratio', {'source': ISSUE_STAGGER_SOURCE, 'base': 'NPU+PIM'}), '{:.2f}')}x, "
        f"{c.num(Fact('code_ratios.csv', 'ratio', {'source': ISSUE_STAGGER_SOURCE, 'base': 'NPU+PIM'}, over=Fact('code_ratios.csv', 'ratio', {'source': 'code', 'base': 'NPU+PIM'}), scale=100, offset=-100), '{:+.1f}')} %"
        "), against the paper's "
        f"{c.num(Fact('paper.csv', 'paper', {'claim': 'vs NPU+PIM'}), '{:.1f}')}x and "
        f"{c.num(Fact('paper.csv', 'paper', {'claim': 'vs NPU-only'}), '{:.1f}')}x: the code's ratio over its NPU+PIM is "
        + c.cmp(Fact('code_ratios.csv', 'ratio', {'source': 'code', 'base': 'NPU+PIM'}), ">",
                Fact('paper.csv', 'paper', {'claim': 'vs NPU+PIM'}), ("above", "below"))
        + " the paper's, its ratio over its NPU-only "
        + c.cmp(Fact('code_ratios.csv', 'ratio', {'source': 'code', 'base': 'NPU-only'}), ">",
                Fact('paper.csv', 'paper', {'claim': 'vs NPU-only'}), ("above", "below"))
        + " the paper's."), ""]
    return md


GRID = "code_grid.csv"       # code_grid.py: the released code's own NeuPIMs / NPU+PIM over the headline's points
GRID_POINTS = {"dataset": DATASETS, "status": "ran"}     # the rows of the points the code ran (not the geomean rows)
GRID_GEO = {"dataset": "geomean", "model": "all"}        # the geomean row over every point the code ran
GRID_REST = "not run by the code"     # code_grid's geomean row of the headline's other points (its model column)
GENERATOR_ABORTS_STATUS = "not run: generator aborts"     # a point the authors' trace generator has no snapshot for
PAPER_BAND_PCT = 15.0      # issue 33's target: NeuPIMs / NPU+PIM within 15 % of the paper's


def _grid_model_label(r) -> str:
    """`gpt3-30b TP8` (the headline's TP), or `gpt3-13b TP8 (headline: TP4)` for a run at the code's configuration."""
    label = f"{r['model']} TP{int(r['tp'])}"
    return label if int(r["tp"]) == int(r["headline_tp"]) else f"{label} (headline: TP{int(r['headline_tp'])})"


def _code_grid_row(r) -> str:
    """One point of the grid's table: the code's cycles and ratio, archsim's readings, the headline's."""
    ran, simulated = r["status"] == "ran", str(r["status"]).startswith("ran") or r["status"] == "not run"
    batch = f"{int(r['batch'])}"
    head = f"{r['headline_ratio_issue']:.2f}x" if np.isfinite(r["headline_ratio_issue"]) else "-"
    if not simulated:                  # no batch snapshot: neither simulator ran it
        return (f"| {_grid_model_label(r)} | {r['dataset']} | {batch} | {r['status']} | - | - | - | - | - | - | - | - "
                f"| {head} | - |")
    # each side's run on its own: at a point whose NeuPIMs run is missing the NPU+PIM run may still be there (and
    # feeds the paper-SBI ratio), so its cycles show rather than "not run"
    cycles = " | ".join(_fmt(r[k]) if np.isfinite(r[k]) else "not run"
                        for k in ("code_neupims_cycles", "code_npu_pim_cycles"))
    walls = [_fmt(r[k]) if np.isfinite(r[k]) else "-" for k in ("code_neupims_wall_s", "code_npu_pim_wall_s")]
    wall = "-" if walls == ["-", "-"] else " / ".join(walls)
    code = f"{r['code_ratio']:.2f}x" if ran else "not run"
    diff = f"{r['diff_pct_issue']:+.1f} %" if ran else "-"
    diff_stagger = f"{r['diff_pct_stagger']:+.1f} %" if ran else "-"
    paper_sbi = (f"{r['code_ratio_paper_sbi']:.2f}x" if r["paper_sbi_status"] == "ran" else "not run") \
        + f" / {r['archsim_ratio_issue_paper_sbi']:.2f}x"
    return (f"| {_grid_model_label(r)} | {r['dataset']} | {batch} | {cycles} | {code} | {r['archsim_ratio_issue']:.2f}x | "
            f"{diff} | {r['archsim_ratio_stagger']:.2f}x | {diff_stagger} | {r['archsim_ratio_bus']:.2f}x | {paper_sbi} | "
            f"{head} | {wall} |")


def _code_grid_section(c) -> list[str]:
    """The released code's NeuPIMs / NPU+PIM at each of the headline's points it could run, archsim's beside it."""
    if not (c.folder / GRID).exists():
        return []
    df = pd.read_csv(c.folder / GRID)
    md = ["## NeuPIMs / NPU+PIM as the released code itself gives it, over the headline's points", "",
          "`code_grid.py` (`code_grid.csv`): NeuPIMs' released simulator (sub-batch interleaving on) and its "
          "`npu+pim` branch on the same batch snapshot at each point of the headline, one decoder block each, "
          "the whole model by the code's stage formula; the snapshots are the code's own (its repository's `clb-0` at "
          "GPT3-7B ShareGPT's largest batch, the others made by its generator with a fixed seed), each model at the "
          "headline's TP. Where the generator aborts (it places requests on channels without checking KV capacity "
          "and stops when a channel overflows, `get_distributions.py:222-232`) there is no snapshot and neither "
          "simulator runs the point. archsim runs each point as in "
          "the first section: NeuPIMs with the code's NPU, mapping and command bus; NPU+PIM with the code's PIM issue "
          "path (`pim_issue: per_cycle`), with that path and the ranks' refreshes staggered as the code's device does "
          "(`refresh_stagger: true` too, as mapping `npu_pim_code_issue` runs it) and, for context, with its commands at "
          "the bus's rate. The headline's column is its own reading at the point (archsim's NPU and batch sampling, "
          "the code's issue path, `ratios.csv`). A point the code was "
          "not run at is marked so. The code's wall times are from a shared machine.", "",
          "| model | dataset | batch | code: NeuPIMs cycles | code: NPU+PIM cycles | code: NeuPIMs / NPU+PIM | archsim, the code's "
          "issue path | archsim / code | archsim, issue path and staggered refresh | archsim / code | archsim, the bus's "
          "rate | NeuPIMs as the paper runs it: code / archsim (issue path) | the headline's reading | code wall time, "
          "NeuPIMs / NPU+PIM (s) |",
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    md += [_code_grid_row(r) for _, r in df[df["dataset"].isin(DATASETS)].iterrows()]
    geo_rows = df[df["dataset"] == "geomean"]
    if (df["status"] == "ran").sum() == 0 or geo_rows.loc[geo_rows["model"] == "all", "status"].iloc[0] != "ran":
        return md + [""]
    return md + ["", *_code_grid_prose(c, df)]


def _grid_model_name(df: pd.DataFrame, model: str) -> str:
    """`gpt3-7b`, or `gpt3-13b at TP8 (not the headline's TP4)` for a model the code ran at another TP only."""
    rows = df[(df["model"] == model) & df["dataset"].isin(DATASETS)]
    if (rows["at_headline_tp"] == True).any():  # noqa: E712
        return model
    return f"{model} at TP{int(rows['tp'].iloc[0])} (not the headline's TP{int(rows['headline_tp'].iloc[0])})"


def _per_model_geomeans(c, df: pd.DataFrame, col: str, where: dict | None = None) -> str:
    """`gpt3-7b 1.47x over 6, gpt3-30b ...` for every model the code ran a point of (of the points `where` selects
    too; the geomean rows' `col` is over those)."""
    from reports.claims import Fact

    pts = {**GRID_POINTS, **(where or {})}
    sel = df["dataset"].isin(DATASETS) & (df["status"] == "ran")
    for k, v in (where or {}).items():
        sel &= df[k] == v
    models = list(dict.fromkeys(df.loc[sel, "model"]))
    return ", ".join(f"{_grid_model_name(df, m)} {c.num(Fact(GRID, col, {'dataset': 'geomean', 'model': m}))}x over "
                     f"{c.num(Fact(GRID, col, {**pts, 'model': m}, 'count'), '{:.0f}')}" for m in models)


def _code_grid_prose(c, df: pd.DataFrame) -> list[str]:
    from reports.claims import Fact

    paper, band = Fact("paper.csv", "paper", {"claim": "vs NPU+PIM"}), Fact("", "", scale=0.0, offset=PAPER_BAND_PCT)
    geo = {col: Fact(GRID, col, GRID_GEO) for col in
           ("code_ratio", "archsim_ratio_issue", "archsim_ratio_stagger", "archsim_ratio_bus", "diff_pct_issue",
            "diff_pct_stagger", "code_vs_paper_pct", "headline_ratio_issue", "headline_vs_code_pct")}
    aborted = df[df["status"] == GENERATOR_ABORTS_STATUS]
    md = [c.say(
        f"Over the {c.num(Fact(GRID, 'code_ratio', GRID_POINTS, 'count'), '{:.0f}')} points the code ran, its own "
        f"NeuPIMs / NPU+PIM is {c.num(geo['code_ratio'])}x on the geomean ({_per_model_geomeans(c, df, 'code_ratio')}), "
        f"{c.num(geo['code_vs_paper_pct'], '{:+.0f}')} % "
        f"from the paper's {c.num(paper, '{:.1f}')}x, and from {c.num(Fact(GRID, 'code_ratio', GRID_POINTS, 'min'))}x to "
        f"{c.num(Fact(GRID, 'code_ratio', GRID_POINTS, 'max'))}x per point ("
        f"{c.num(Fact(GRID, 'code_vs_paper_pct', GRID_POINTS, 'min'), '{:+.0f}')} % to "
        f"{c.num(Fact(GRID, 'code_vs_paper_pct', GRID_POINTS, 'max'), '{:+.0f}')} % from the paper's): the paper's is "
        + c.cmp(paper, ">", geo["code_ratio"], ("above", "at or below")) + " the code's geomean, "
        + c.cmp(paper, ">=", Fact(GRID, "code_ratio", GRID_POINTS, "min"), ("at or above", "below")) + " its lowest point and "
        + c.cmp(paper, "<=", Fact(GRID, "code_ratio", GRID_POINTS, "max"), ("at or below", "above")) + " its highest, "
        "and the code's geomean is "
        + c.cmp(Fact(GRID, "abs_code_vs_paper_pct", GRID_GEO), "<=", band, ("inside", "outside"))
        + f" a band of {c.num(band, '{:.0f}')} % around the paper's."
        + (f" The generator aborts at {c.num(Fact(GRID, 'batch', {'status': GENERATOR_ABORTS_STATUS}, 'count'), '{:.0f}')} "
           "of the points (" + ", ".join(f"{r['model']} {r['dataset']} batch {int(r['batch'])}" for _, r in aborted.iterrows())
           + "): no snapshot, so no simulator's number there." if len(aborted) else "")), "", c.say(
        "archsim in the code's configuration, its NPU+PIM with the code's issue path, gives "
        f"{c.num(geo['archsim_ratio_issue'])}x on the geomean over the same points "
        f"({_per_model_geomeans(c, df, 'archsim_ratio_issue')}), "
        f"{c.num(geo['diff_pct_issue'], '{:+.1f}')} % from the code's, and per point from "
        f"{c.num(Fact(GRID, 'diff_pct_issue', GRID_POINTS, 'min'), '{:+.1f}')} % to "
        f"{c.num(Fact(GRID, 'diff_pct_issue', GRID_POINTS, 'max'), '{:+.1f}')} % off the code's ratio; with the ranks' "
        f"refreshes staggered too {c.num(geo['archsim_ratio_stagger'])}x, "
        f"{c.num(geo['diff_pct_stagger'], '{:+.1f}')} % from the code's (per point "
        f"{c.num(Fact(GRID, 'diff_pct_stagger', GRID_POINTS, 'min'), '{:+.1f}')} % to "
        f"{c.num(Fact(GRID, 'diff_pct_stagger', GRID_POINTS, 'max'), '{:+.1f}')} %); with the NPU+PIM's "
        f"commands at the bus's rate it gives {c.num(geo['archsim_ratio_bus'])}x on the geomean."), ""]
    paper_pts = {"dataset": DATASETS, "paper_sbi_status": "ran"}
    if df.loc[(df["dataset"] == "geomean") & (df["model"] == "all"), "paper_sbi_status"].iloc[0] == "ran":
        small = {**paper_pts, "batch": [b for b in BATCHES if b < SBI_MIN_BATCH]}
        small_ran = df["dataset"].isin(DATASETS) & (df["paper_sbi_status"] == "ran") & df["batch"].isin(small["batch"])
        md += [c.say(
            "With NeuPIMs as the paper runs it (sub-batch interleaving only from batch "
            f"`{SBI_MIN_BATCH}` on, `SBI_MIN_BATCH`, the code's "
            "NeuPIMs without it below), the code's ratio is "
            f"{c.num(Fact(GRID, 'code_ratio_paper_sbi', GRID_GEO))}x on the geomean over "
            f"{c.num(Fact(GRID, 'code_ratio_paper_sbi', paper_pts, 'count'), '{:.0f}')} points "
            f"({_per_model_geomeans_paper(c, df)}; archsim's "
            f"{c.num(Fact(GRID, 'archsim_ratio_issue_paper_sbi', GRID_GEO))}x), "
            f"the paper's {c.num(paper, '{:.1f}')}x " + c.cmp(paper, "<", Fact(GRID, 'code_ratio_paper_sbi', GRID_GEO),
                                                              ("below", "not below"))
            + " it" + (f"; at the smaller batches the code's NeuPIMs / NPU+PIM is at most "
                       f"{c.num(Fact(GRID, 'code_ratio_paper_sbi', small, 'max'))}x" if small_ran.any() else "")
            + "."), ""]
    return md


def _per_model_geomeans_paper(c, df: pd.DataFrame) -> str:
    """As _per_model_geomeans for the code's ratio with NeuPIMs as the paper runs it."""
    from reports.claims import Fact

    pts = {"dataset": DATASETS, "paper_sbi_status": "ran"}
    models = [m for m in dict.fromkeys(df.loc[df["dataset"].isin(DATASETS), "model"])
              if ((df["model"] == m) & (df["paper_sbi_status"] == "ran")).any()]
    return ", ".join(f"{_grid_model_name(df, m)} {c.num(Fact(GRID, 'code_ratio_paper_sbi', {'dataset': 'geomean', 'model': m}))}x over "
                     f"{c.num(Fact(GRID, 'code_ratio_paper_sbi', {**pts, 'model': m}, 'count'), '{:.0f}')}" for m in models)


def _code_grid_headline(c) -> list[str]:
    """The headline's NPU+PIM paragraph's sentence on what the released code itself gives over the same points: with
    NeuPIMs as the headline runs it (sub-batch interleaving from SBI_MIN_BATCH on, the grid's paper_sbi columns)
    where the code ran that, its reading with sub-batch interleaving at every batch beside it."""
    from reports.claims import Fact

    if not (c.folder / GRID).exists():
        return []
    df = pd.read_csv(c.folder / GRID)
    geo_row = df[(df["dataset"] == "geomean") & (df["model"] == "all")].iloc[0]
    if geo_row["status"] != "ran":
        return []
    matched = geo_row["paper_sbi_status"] == "ran"
    paper, band = Fact("paper.csv", "paper", {"claim": "vs NPU+PIM"}), Fact("", "", scale=0.0, offset=PAPER_BAND_PCT)
    sfx, where = ("_paper_sbi", {"dataset": DATASETS, "paper_sbi_status": "ran"}) if matched else ("", GRID_POINTS)
    geo = Fact(GRID, f"code_ratio{sfx}", GRID_GEO)
    setting = (f", its NeuPIMs run as the headline runs it (sub-batch interleaving from batch `{SBI_MIN_BATCH}` on),"
               if matched else ", its NeuPIMs with sub-batch interleaving at every batch (not the headline's setting),")
    per_model = _per_model_geomeans_paper(c, df) if matched else _per_model_geomeans(c, df, "code_ratio")
    other = (f"; with sub-batch interleaving at every batch it gives {c.num(Fact(GRID, 'code_ratio', GRID_GEO))}x over "
             f"{c.num(Fact(GRID, 'code_ratio', GRID_POINTS, 'count'), '{:.0f}')} points "
             f"({c.num(Fact(GRID, 'code_vs_paper_pct', GRID_GEO), '{:+.0f}')} % from the paper's)" if matched else "")
    return [c.say(
        "The released code itself (its NeuPIMs and its `npu+pim` branch, `code_grid.csv`)" + setting + " gives "
        f"NeuPIMs / NPU+PIM {c.num(geo)}x on the geomean over "
        f"{c.num(Fact(GRID, f'code_ratio{sfx}', where, 'count'), '{:.0f}')} points ({per_model}), from "
        f"{c.num(Fact(GRID, f'code_ratio{sfx}', where, 'min'))}x to {c.num(Fact(GRID, f'code_ratio{sfx}', where, 'max'))}x "
        f"per point: the paper's {c.num(paper, '{:.1f}')}x is " + c.cmp(paper, ">", geo, ("above", "at or below"))
        + " the code's own geomean, which is "
        f"{c.num(Fact(GRID, f'code_vs_paper_pct{sfx}', GRID_GEO), '{:+.0f}')} % from the paper's, "
        + c.cmp(Fact(GRID, f"abs_code_vs_paper_pct{sfx}", GRID_GEO), "<=", band, ("inside", "outside"))
        + f" a band of {c.num(band, '{:.0f}')} % around it{other}."),
        *(_headline_on_grid_points(c, paper) if matched else []), *_headline_ladder(c), ""]


LADDER_CSV = "headline_ladder.csv"   # headline_ladder.py: the code configuration to the headline's, one input a rung
# what each rung of headline_ladder.csv switches, as the prose words it
LADDER_WORDS = {"batch": "the batch source (the code's snapshot to archsim's sampler)",
                "dram": "NeuPIMs' DRAM standard (`neupims_code` to `neupims`)",
                "neupims mapping": "NeuPIMs' mapping (`neupims_code` to `neupims`)",
                "npu_pim mapping": "NPU+PIM's mapping (`neupims_code` with the code's issue path to `npu_pim_issue`)",
                "npu": "the NPU preset (`neupims_code` to `neupims_npu`)",
                "headline runs": "the headline's own runs (two layers simulated)"}


def _headline_ladder(c) -> list[str]:
    """Which input, switched one at a time from archsim's code configuration to the headline's, moves the geomean
    NeuPIMs / NPU+PIM (the code's issue path) how much (headline_ladder.csv); only the rungs that ran."""
    from reports.claims import Fact

    if not (c.folder / LADDER_CSV).exists():
        return []
    geo = pd.read_csv(c.folder / LADDER_CSV).query("dataset == 'geomean'").sort_values("rung")
    if len(geo) < 2:
        return []

    def f(rung: int, col: str = "ratio") -> Fact:
        return Fact(LADDER_CSV, col, {"dataset": "geomean", "rung": rung})

    steps, resolution = [], Fact("", "", scale=0.0, offset=0.1)
    for r in geo["rung"].iloc[1:]:
        name = geo.loc[geo["rung"] == r, "rung_name"].iloc[0]
        # a step below the table's resolution (0.1 %) is none
        rises = c.cmp(f(r, "abs_step_pct"), "<", resolution, ("leaves it at", "moves it"))
        if rises == "moves it":
            rises = c.cmp(f(r), ">", f(r - 1), ("raises it to", "lowers it to"))
        steps.append(f"{LADDER_WORDS[name]} {rises} {c.num(f(r))}x ({c.num(f(r, 'step_pct'), '{:+.1f}')} %)")
    big = geo.iloc[1:].sort_values("abs_step_pct", ascending=False)
    top, top_name = int(big["rung"].iloc[0]), LADDER_WORDS[big["rung_name"].iloc[0]]
    last = int(geo["rung"].iloc[-1])
    out = ("Switching archsim's code configuration to the headline's one input at a time (`headline_ladder.py`, "
           f"`headline_ladder.csv`, over {c.num(f(0, 'batch'), '{:.0f}')} points the code ran at the headline's TP "
           "and sub-batch setting, the geomean of NeuPIMs / NPU+PIM with the code's issue path): from "
           f"{c.num(f(0))}x in the code configuration, " + "; ".join(steps) + ". The largest step is "
           f"switching {top_name}, {c.num(f(top, 'step_pct'), '{:+.1f}')} %")
    if len(big) > 1:
        second = int(big["rung"].iloc[1])
        out += (", " + c.cmp(f(top, "abs_step_pct"), ">", f(second, "abs_step_pct"), ("larger than", "not larger than"))
                + f" the next, {LADDER_WORDS[big['rung_name'].iloc[1]]}'s {c.num(f(second, 'step_pct'), '{:+.1f}')} %")
    out += (f"; all rungs together move the geomean {c.num(f(last, 'vs_code_config_pct'), '{:+.1f}')} % from the "
            "code configuration's (the released code's own geomean over these points: "
            f"{c.num(Fact(GRID, 'code_ratio_paper_sbi_at_headline_tp', GRID_GEO))}x)")
    return ["", c.say(out + "."), *_headline_ladder_mapping(c)]


LADDER_SPLIT_CSV = "headline_ladder_mapping.csv"    # headline_ladder.py --mapping-split: NeuPIMs' mapping key by key


def _headline_ladder_mapping(c) -> list[str]:
    """The NeuPIMs-mapping rung split key by key (headline_ladder_mapping.csv): each key's step of the geomean and
    the largest; nothing unless every point of the ladder ran there."""
    from reports.claims import Fact

    if not (c.folder / LADDER_SPLIT_CSV).exists():
        return []
    geo = pd.read_csv(c.folder / LADDER_SPLIT_CSV).query("dataset == 'geomean'").sort_values("rung")
    ladder_geo = pd.read_csv(c.folder / LADDER_CSV).query("dataset == 'geomean'")
    if len(geo) < 2 or geo["batch"].iloc[-1] != ladder_geo["batch"].iloc[0]:
        return []

    def f(rung: int, col: str = "ratio") -> Fact:
        return Fact(LADDER_SPLIT_CSV, col, {"dataset": "geomean", "rung": rung})

    steps = [f"`{geo.loc[geo['rung'] == r, 'rung_name'].iloc[0]}` {c.num(f(r, 'step_pct'), '{:+.1f}')} %"
             for r in geo["rung"].iloc[1:]]
    big = geo.iloc[1:].sort_values("abs_step_pct", ascending=False)
    top, second = int(big["rung"].iloc[0]), int(big["rung"].iloc[1])
    out = ("Split key by key (`headline_ladder.py --mapping-split`, `headline_ladder_mapping.csv`: the keys mapping "
           "`neupims_code` and `neupims` set differently, switched to `neupims`'s one at a time on top of the DRAM "
           f"rung, over the same {c.num(f(0, 'batch'), '{:.0f}')} points), the steps of the geomean are "
           + ", ".join(steps) + f"; the largest is `{big['rung_name'].iloc[0]}`'s, "
           + c.cmp(f(top, "abs_step_pct"), ">", f(second, "abs_step_pct"), ("larger than", "not larger than"))
           + f" `{big['rung_name'].iloc[1]}`'s")
    return [c.say(out + ".")]


def _rest_points(grid: pd.DataFrame) -> str:
    """What code_grid's row of the headline's other points holds, as its trace column words it."""
    return str(grid.loc[(grid["dataset"] == "geomean") & (grid["model"] == GRID_REST), "trace"].iloc[0])


def _headline_on_grid_points(c, paper) -> list[str]:
    """The headline's code-issue-path reading over the points the code ran at the headline's TP and sub-batch
    setting, beside the code's own there, and over the rest, so the headline's geomean can be read beside the
    code's."""
    from reports.claims import Fact

    grid = pd.read_csv(c.folder / GRID)
    pts = {"dataset": DATASETS, "paper_sbi_status": "ran", "at_headline_tp": True}
    if not (grid["dataset"].isin(DATASETS) & (grid["paper_sbi_status"] == "ran") & (grid["at_headline_tp"] == True)).any():  # noqa: E712
        return []
    R = "ratios.csv"
    same = Fact(GRID, "headline_ratio_issue_paper_sbi_pts", GRID_GEO)
    every = Fact(R, "ratio", {"base": ISSUE_BASE}, "geomean")
    lower_end = Fact(paper.csv, paper.column, paper.where, scale=1.0 - PAPER_BAND_PCT / 100.0)
    out = ("The headline's reading with the code's issue path (archsim's own NPU and batches), over the "
           f"{c.num(Fact(GRID, 'batch', pts, 'count'), '{:.0f}')} points the code ran at the headline's TP and "
           f"sub-batch setting, is {c.num(same)}x on the geomean "
           f"({c.num(Fact(GRID, 'headline_ratio_issue_paper_sbi_pts', GRID_GEO, over=paper, scale=100, offset=-100), '{:+.0f}')} % "
           f"from the paper's, {c.num(Fact(GRID, 'headline_vs_code_paper_sbi_pct', GRID_GEO), '{:+.0f}')} % from the "
           f"code's own {c.num(Fact(GRID, 'code_ratio_paper_sbi_at_headline_tp', GRID_GEO))}x there), "
           + c.cmp(same, ">=", lower_end, ("not below", "below")) + " the paper's band")
    rest = Fact(GRID, "headline_ratio_issue", {"dataset": "geomean", "model": GRID_REST})
    if grid.loc[(grid["dataset"] == "geomean") & (grid["model"] == GRID_REST), "status"].iloc[0] == "not run":
        out += (f"; over the headline's other {c.num(Fact(GRID, 'batch', {'dataset': 'geomean', 'model': GRID_REST}), '{:.0f}')} "
                f"points, which the code did not run at the headline's TP ({_rest_points(grid)}), it is {c.num(rest)}x, "
                + c.cmp(rest, ">=", lower_end, ("not below", "below")) + " the band; its geomean over every point "
                f"is {c.num(every)}x, {c.num(Fact(R, 'ratio', {'base': ISSUE_BASE}, 'geomean', over=same, scale=100, offset=-100), '{:+.1f}')} % "
                "from the one over the points the code ran")
    return [c.say(out + ".")]


def _headline_section(c, frames: dict[str, pd.DataFrame]) -> list[str]:
    from reports.claims import Fact

    grid = frames["grid"]
    piv = grid.pivot_table(index=["model", "dataset", "batch"], columns="system", values="tokens_per_s", dropna=False)
    labels = list(VARIANTS)
    ratio_bases = [base for base in BASES if base not in GPU_BAND]     # the GPU band has a column of its own
    md = ["## Throughput (tokens/s of one TP group, decode)", "",
          "Baselines as NeuPIMs' paper and released code define them (docs/presets.md, \"NeuPIMs' baselines as the "
          "released code defines them\"): **GPU-only** is PyTorch eager on an A100 40GB, as a band over the host cost "
          "per kernel (its two ends; the roofline row is an upper bound on any GPU software, not the paper's "
          "baseline); **NPU+PIM** one blocked row buffer, the whole batch through QKV, attention and Proj+FFN one "
          "after the other, KV caches round-robin (the `npu+pim` branch runs it so: its `baseline_exp` overrides the "
          "sub-batch mode it asserts), in two readings: its PIM commands at the command bus's rate (archsim's reading "
          "of the hardware), and handed to memory as that branch's core hands them, one PIM instruction per NPU cycle "
          "for the whole device, channel after channel (`pim_issue: per_cycle`, measured against "
          "the code in the first section); **NPU-only** attention on its arrays, pipelined across heads and requests "
          "(the code's own schedule is a row of the next section); **NeuPIMs** interleaves sub-batches from the batch "
          "the paper does.", "",
          "| model | dataset | batch | " + " | ".join(labels) + " | NeuPIMs / GPU-only | "
          + " | ".join(f"/ {base}" for base in ratio_bases) + " |",
          "|---|---|---|" + "---|" * (len(labels) + 1 + len(ratio_bases))]
    for (m, d, b), r in piv.iterrows():
        cells = [_fmt(r[v]) if np.isfinite(r[v]) else "does not fit" for v in labels]
        lo, hi = sorted(r["NeuPIMs"] / r[g] for g in GPU_BAND)
        band = f"{lo:.2f}-{hi:.2f}x" if np.isfinite(lo) else "-"
        rat = [f"{r['NeuPIMs'] / r[base]:.2f}x" if np.isfinite(r["NeuPIMs"] / r[base]) else "-"
               for base in ratio_bases]
        md.append(f"| {m} | {d} | {b} | " + " | ".join(cells) + f" | {band} | " + " | ".join(rat) + " |")
    if not np.isfinite(piv.to_numpy(dtype=float)).all():
        md += ["", "`does not fit`: the sampled batch's KV cache does not fit the TP group's memory next to the "
               "weights (each run's message is the `note` column of `throughput.csv`); the GPU rows do not check "
               "capacity."]
    R, P = "ratios.csv", "paper.csv"
    geo = {k: Fact(R, "ratio", {"base": k}, "geomean") for k in BASES.values()}
    md += ["", "## Against the paper", "",
           "| claim | paper | archsim (geomean over the table) |", "|---|---|---|",
           f"| NeuPIMs vs GPU-only (PyTorch eager on A100), band over the host cost per kernel | ~{PAPER['vs GPU-only']:.0f}x | "
           f"{geo['vs GPU-only (33 us)'].value(c.folder, c.cache):.2f}x (33 us) - {geo['vs GPU-only (10 us)'].value(c.folder, c.cache):.2f}x (10 us) |",
           f"| NeuPIMs vs NPU-only | ~{PAPER['vs NPU-only']}x | {geo['vs NPU-only'].value(c.folder, c.cache):.2f}x |",
           f"| NeuPIMs vs NPU+PIM, PIM commands at the bus's rate | ~{PAPER['vs NPU+PIM']}x | {geo['vs NPU+PIM'].value(c.folder, c.cache):.2f}x |",
           f"| NeuPIMs vs NPU+PIM, PIM instructions issued as the released code issues them | ~{PAPER['vs NPU+PIM']}x | "
           f"{geo[ISSUE_BASE].value(c.folder, c.cache):.2f}x |",
           f"| NeuPIMs vs the A100 roofline (upper bound; not in the paper) | - | {geo['vs GPU roofline'].value(c.folder, c.cache):.2f}x |", ""]
    within = Fact(R, "ratio", {"base": "vs NPU+PIM"}, "geomean", over=Fact(P, "paper", {"claim": "vs NPU+PIM"}),
                  scale=100, offset=-100)
    within_issue = Fact(R, "ratio", {"base": ISSUE_BASE}, "geomean", over=Fact(P, "paper", {"claim": "vs NPU+PIM"}),
                        scale=100, offset=-100)
    b, code_neupims = max(BATCHES), "NeuPIMs, the code's NPU"
    code_npu_only = Fact("code.csv", "tokens_per_s", {"system": code_neupims, "batch": b},
                         over=Fact("code.csv", "tokens_per_s", {"system": "NPU-only, the code's NPU and FusedMHA", "batch": b}))
    head_npu_only = Fact(R, "ratio", {"base": "vs NPU-only", "model": CODE_POINT[0], "dataset": CODE_POINT[1], "batch": b})
    code_npu_pim = Fact("code_ratios.csv", "ratio", {"source": "code", "base": "NPU+PIM"})
    md += [c.say(
        "**NeuPIMs vs GPU-only is a band, not a point.** The eager GPU is host-bound at small batch: a layer launches "
        f"{c.num(Fact('gpu_band.csv', 'kernels_per_layer', {}, 'max'), '{:.0f}')} kernels whatever the batch, and the "
        "host cost per kernel is not public for an A100 (the measured figure is a V100's, docs/presets.md), so the "
        f"ratio spans {c.num(geo['vs GPU-only (10 us)'])}x (low host cost) to {c.num(geo['vs GPU-only (33 us)'])}x "
        f"(the V100 figure) on the geomean; per point from {c.num(Fact(R, 'ratio', {'base': ['vs GPU-only (33 us)', 'vs GPU-only (10 us)']}, 'min'))}x "
        f"to {c.num(Fact(R, 'ratio', {'base': ['vs GPU-only (33 us)', 'vs GPU-only (10 us)']}, 'max'))}x. The paper's "
        f"{c.num(Fact(P, 'paper', {'claim': 'vs GPU-only'}), '{:.0f}')}x is "
        + c.cmp(Fact(P, 'paper', {'claim': 'vs GPU-only'}), "<=", geo['vs GPU-only (33 us)'], ("at or below", "above"))
        + " the band's upper end."),
           "",
           c.say(
        f"**NeuPIMs vs NPU+PIM**: {c.num(geo['vs NPU+PIM'])}x on the geomean, "
        f"{c.num(within, '{:+.0f}')} % from the paper's {c.num(Fact(P, 'paper', {'claim': 'vs NPU+PIM'}), '{:.1f}')}x; "
        f"from {c.num(Fact(R, 'ratio', {'base': 'vs NPU+PIM'}, 'min'))}x to {c.num(Fact(R, 'ratio', {'base': 'vs NPU+PIM'}, 'max'))}x "
        f"per point. NeuPIMs' released simulator gives {c.num(code_npu_pim)}x over its own NPU+PIM (the section above), "
        + c.cmp(code_npu_pim, ">", Fact(P, "paper", {"claim": "vs NPU+PIM"}), ("above", "below"))
        + " the paper's. With the NPU+PIM's PIM instructions issued as the released code issues them, NeuPIMs is "
        f"{c.num(geo[ISSUE_BASE])}x on the geomean, {c.num(within_issue, '{:+.0f}')} % from the paper's, from "
        f"{c.num(Fact(R, 'ratio', {'base': ISSUE_BASE}, 'min'))}x to {c.num(Fact(R, 'ratio', {'base': ISSUE_BASE}, 'max'))}x "
        "per point: the paper's is "
        + c.cmp(Fact(P, "paper", {"claim": "vs NPU+PIM"}), ">", geo["vs NPU+PIM"], ("above", "below"))
        + " the first reading's geomean and "
        + c.cmp(Fact(P, "paper", {"claim": "vs NPU+PIM"}), ">", geo[ISSUE_BASE], ("above", "below"))
        + " the second's."),
           "", *_code_grid_headline(c),
           c.say(
        "With the code's NPU and definitions (the next section), the paper's "
        f"{c.num(Fact(P, 'paper', {'claim': 'vs NPU+PIM'}), '{:.1f}')}x against two readings of its NPU+PIM, the "
        "hardware's (commands at the bus's rate) and the code's issue path (`pim_issue: per_cycle`): "
        + "; ".join(f"at batch {bb} NeuPIMs is {c.num(hw)}x and {c.num(iss)}x, the paper's is "
                    + c.cmp(Fact(P, 'paper', {'claim': 'vs NPU+PIM'}), ">", hw, ("above", "not above")) + " the first and "
                    + c.cmp(Fact(P, 'paper', {'claim': 'vs NPU+PIM'}), "<", iss, ("below", "not below")) + " the second"
                    for bb in BATCHES
                    for hw, iss in [(Fact("code.csv", "tokens_per_s", {"system": CODE_NEUPIMS, "batch": bb},
                                          over=Fact("code.csv", "tokens_per_s", {"system": CODE_NPU_PIM, "batch": bb})),
                                     Fact("code.csv", "tokens_per_s", {"system": CODE_NEUPIMS, "batch": bb},
                                          over=Fact("code.csv", "tokens_per_s", {"system": CODE_ISSUE, "batch": bb})))])
        + "."),
           "",
           c.say(
        f"**NeuPIMs vs NPU-only**: {c.num(geo['vs NPU-only'])}x on the geomean (from "
        f"{c.num(Fact(R, 'ratio', {'base': 'vs NPU-only'}, 'min'))}x to {c.num(Fact(R, 'ratio', {'base': 'vs NPU-only'}, 'max'))}x), "
        f"against the paper's {c.num(Fact(P, 'paper', {'claim': 'vs NPU-only'}), '{:.1f}')}x. With the NPU and the NPU-only "
        f"attention the released code has (FusedMHA, the next section), at {CODE_POINT[0]} {CODE_POINT[1]} batch {max(BATCHES)}, "
        f"it is {c.num(code_npu_only)}x, "
        + c.cmp(code_npu_only, ">", head_npu_only, ("higher", "lower"))
        + f" than the headline's {c.num(head_npu_only)}x at that point."), "", *_queue_headline(c)]
    return md


QUEUE_CSV = "queue_headline.csv"     # queue_headline.py: the headline's systems with the controller's default window


def _queue_headline(c) -> list[str]:
    """The headline's NeuPIMs ratios with the controller's 32-entry default window beside the shipped one
    (queue_headline.csv); nothing until that table exists."""
    from reports.claims import Fact

    if not (c.folder / QUEUE_CSV).exists():
        return []
    bases = {"NPU+PIM, the code's issue path": "NPU+PIM with the code's issue path", "NPU+PIM": "NPU+PIM at the bus's rate",
             "NPU-only": "NPU-only"}

    def geo(base: str, arm: str) -> Fact:
        return Fact(QUEUE_CSV, f"tokens_per_s_{arm}", {"system": f"NeuPIMs / {base}"}, "geomean")

    parts = [f"NeuPIMs / {words} is {c.num(geo(base, 'q32'))}x, the headline's {c.num(geo(base, 'shipped'))}x (the "
             "shipped windows " + c.cmp(geo(base, "shipped"), ">", geo(base, "q32"), ("raise", "do not raise")) + " it)"
             for base, words in bases.items()]
    return [c.say(
        "**The controller's window.** NeuPIMs and both NPU+PIM readings schedule the NPU's requests from the window "
        "NeuPIMs' simulator gives its PIM devices, 32 banks x 128-entry command queues per channel (`request_queue: "
        "4096`; the paper's text names no depth, docs/presets.md \"The controller's window\"). NPU-only takes the "
        "window the code's own NPU-only has (its `npu-only` branch, plain DRAM): NewtonSim's front end admits at most "
        "96 of a channel's requests until their responses leave (3 x the 32-entry transaction queue, [npu-only] "
        "NewtonSim.cc:39-43, 88-101; `request_queue: 96`, mappings/npu_only.yaml). With archsim's controller default "
        "instead, 32-entry read and write queues for every system (`queue_headline.py`, `queue_headline.csv`, the "
        "geomean over the table): " + "; ".join(parts) + "."), ""]


def _code_rows_section(c, frames: dict[str, pd.DataFrame]) -> list[str]:
    from reports.claims import Fact

    code, grid = frames["code"], frames["grid"]
    pt = grid[(grid["model"] == CODE_POINT[0]) & (grid["dataset"] == CODE_POINT[1])]
    both = pd.concat([pt[pt["system"].isin(["NeuPIMs", "NPU+PIM", "NPU-only"])], code])
    piv = both.pivot_table(index="system", columns="batch", values="tokens_per_s")
    md = ["## The systems as NeuPIMs' released code runs them (GPT3-7B, ShareGPT, tokens/s)", "",
          "The headline rows use archsim's NPU (the paper's eight arrays); these use the NPU as the code simulates it "
          "(`neupims_code`: one array with the code's timing), its PIM layout and precharge, and the NPU-only "
          "attention of its `npu-only` branch (`fused_mha`: per head one q.K^T preload, then one s.V preload per array "
          "width of keys, each waiting for the previous instruction to leave the array). The last row reads the `npu+pim` "
          "branch's sub-batch assert as if it held (the code overrides it).", "",
          "| system | " + " | ".join(f"batch {b}" for b in piv.columns) + " |", "|---|" + "---|" * len(piv.columns)]
    for sysname, r in piv.iterrows():
        md.append(f"| {sysname} | " + " | ".join(_fmt(x) for x in r) + " |")
    C = "code.csv"
    b = max(BATCHES)
    md += ["", c.say(
        f"At batch {b}, with the code's NPU and definitions: NeuPIMs is "
        f"{c.num(Fact(C, 'tokens_per_s', {'system': 'NeuPIMs, the code' + chr(39) + 's NPU', 'batch': b}, over=Fact(C, 'tokens_per_s', {'system': 'NPU+PIM, the code' + chr(39) + 's NPU', 'batch': b})))}x "
        "its NPU+PIM and "
        f"{c.num(Fact(C, 'tokens_per_s', {'system': 'NeuPIMs, the code' + chr(39) + 's NPU', 'batch': b}, over=Fact(C, 'tokens_per_s', {'system': 'NPU-only, the code' + chr(39) + 's NPU and FusedMHA', 'batch': b})))}x "
        "its NPU-only with FusedMHA; NeuPIMs with archsim's NPU is "
        f"{c.num(Fact('throughput.csv', 'tokens_per_s', {'system': 'NeuPIMs', 'model': CODE_POINT[0], 'dataset': CODE_POINT[1], 'batch': b}, over=Fact(C, 'tokens_per_s', {'system': 'NPU+PIM with SBI (the assert' + chr(39) + 's reading)', 'batch': b})))}x "
        "NPU+PIM with sub-batch interleaving (the assert's reading)."), "", c.say(
        "With the `npu+pim` branch's PIM issue path too (mapping `npu_pim_code_issue`: `pim_issue: per_cycle`, one PIM "
        "instruction per NPU cycle for the device, channel after channel), NeuPIMs with the code's NPU is "
        + ", ".join(f"{c.num(Fact(C, 'tokens_per_s', {'system': CODE_NEUPIMS, 'batch': bb}, over=Fact(C, 'tokens_per_s', {'system': CODE_ISSUE, 'batch': bb})))}x"
                    for bb in BATCHES)
        + f" that NPU+PIM at batch {', '.join(str(bb) for bb in BATCHES)}, where it is "
        + ", ".join(f"{c.num(Fact(C, 'tokens_per_s', {'system': CODE_NEUPIMS, 'batch': bb}, over=Fact(C, 'tokens_per_s', {'system': CODE_NPU_PIM, 'batch': bb})))}x"
                    for bb in BATCHES)
        + " the NPU+PIM whose commands enter at the bus's rate."), ""]
    return md


def _ablation_section(c, frames: dict[str, pd.DataFrame]) -> list[str]:
    from reports.claims import Fact

    lad = frames["ladder"]
    lp = lad.pivot_table(index="batch", columns="system", values="tokens_per_s")
    md = ["## Ablation ladder (GPT3-7B, ShareGPT; the paper's Fig. 13)", "",
          "| batch | " + " | ".join(LADDER) + " |", "|---|" + "---|" * len(LADDER)]
    for b, r in lp.iterrows():
        md.append(f"| {b} | " + " | ".join(f"{r[v]:,.0f} ({r[v] / r['NPU+PIM']:.2f}x)" for v in LADDER) + " |")
    L, T = "ladder.csv", "toggle.csv"
    drb = {b: Fact(L, "tokens_per_s", {"system": "+ dual row buffers", "batch": b},
                   over=Fact(L, "tokens_per_s", {"system": "NPU+PIM", "batch": b}), scale=100, offset=-100) for b in BATCHES}
    drb_sbi = {b: Fact(L, "tokens_per_s", {"system": "+ SBI (NeuPIMs)", "batch": b},
                       over=Fact(T, "tokens_per_s", {"system": f"NeuPIMs with one row buffer (blocked), b{b}"}),
                       scale=100, offset=-100) for b in (256, 512)}
    sbi = {b: Fact(L, "tokens_per_s", {"system": "+ SBI (NeuPIMs)", "batch": b},
                   over=Fact(L, "tokens_per_s", {"system": "+ GMLBP", "batch": b})) for b in BATCHES}
    md += ["", "![ablation ladder](ablation.png)", "",
           c.say("Dual row buffers on the naive NPU+PIM: " + ", ".join(f"{c.num(drb[b], '{:+.0f}')} % at batch {b}" for b in BATCHES)
                 + f" (the paper: +{c.num(Fact('paper.csv', 'paper', {'claim': 'dual row buffers (+%)'}), '{:.1f}')} % on average). Without sub-batch "
                 "interleaving the attention stage runs alone and a blocked row buffer costs nothing; once sub-batches "
                 "overlap the NPU with PIM, dual row buffers are worth "
                 + ", ".join(f"{c.num(drb_sbi[b], '{:+.0f}')} % at batch {b}" for b in (256, 512))
                 + " (toggle: NeuPIMs with one blocked row buffer). The ladder's last step, sub-batch interleaving, "
                 "multiplies the throughput by " + ", ".join(f"{c.num(sbi[b])}x at batch {b}" for b in BATCHES) + "."),
           "",
           c.say("Full NeuPIMs against the naive NPU+PIM at the smallest batch, with interleaving forced: "
                 f"{c.num(Fact(L, 'tokens_per_s', {'system': '+ SBI (NeuPIMs)', 'batch': min(BATCHES)}, over=Fact(L, 'tokens_per_s', {'system': 'NPU+PIM', 'batch': min(BATCHES)})))}x. "
                 "The paper runs NeuPIMs without sub-batches below batch 256 for this reason, and its Fig. 13 shows "
                 "interleaving losing at small batch; it does not say whether full NeuPIMs falls below the naive "
                 "baseline there, so this row has no paper value to compare with."), ""]
    return md


def _utilisation_energy_section(c, frames: dict[str, pd.DataFrame]) -> list[str]:
    from reports.claims import Fact

    grid, tog = frames["grid"], frames["toggle"].set_index("system")
    u = grid[(grid["model"] == "gpt3-30b") & (grid["batch"] == 256) & (grid["dataset"] == "sharegpt")].set_index("system")
    md = ["## Utilisation (GPT3-30B, batch 256, ShareGPT; the paper's Table 4)", "",
          "| system | NPU | PIM (COMP issue slots) | PIM busy (time with GEMVs in flight) | memory bandwidth | paper NPU | paper PIM |",
          "|---|---|---|---|---|---|---|"]
    paper = {"NPU+PIM": (f"{PAPER['NPU util, NPU+PIM (%)']}%", "~17%"),
             "NeuPIMs": (f"{PAPER['NPU util, NeuPIMs (%)']}%", f"{PAPER['PIM util, NeuPIMs (%)']}%")}
    for v in ("NPU-only", "NPU+PIM", "NeuPIMs"):
        r, p = u.loc[v], paper.get(v, ("-", "-"))
        md.append(f"| {v} | {r['npu_util']:.1%} | {r['pim_util']:.1%} | {r['pim_busy']:.1%} | {r['mem_bw_util']:.1%} | {p[0]} | {p[1]} |")
    for v in ("NPU-only", "NPU+PIM", "NeuPIMs"):
        r = tog.loc[f"{v}, the code's NPU"]
        md.append(f"| {v}, the code's NPU (toggle) | {r['npu_util']:.1%} | {r['pim_util']:.1%} | {r['pim_busy']:.1%} | "
                  f"{r['mem_bw_util']:.1%} | | |")
    G, T = "throughput.csv", "toggle.csv"
    at = {"model": "gpt3-30b", "dataset": "sharegpt", "batch": 256}
    ours = Fact(G, "npu_util", {**at, "system": "NeuPIMs"}, scale=100)
    code_npu = Fact(T, "npu_util", {"system": "NeuPIMs, the code's NPU"}, scale=100)
    paper_npu = Fact("paper.csv", "paper", {"claim": "NPU util, NeuPIMs (%)"})
    md += ["", c.say(
        f"NPU utilisation of NeuPIMs: {c.num(ours, '{:.0f}')} % with archsim's eight arrays, {c.num(code_npu, '{:.0f}')} % with "
        f"the code's one array (toggle), the paper {c.num(paper_npu, '{:.1f}')} %: one array is "
        + c.cmp(code_npu, ">", ours, ("busier than eight (the same work on an eighth of the arrays)",
                                      "less busy than eight"))
        + "; archsim's eight arrays are "
        + c.cmp(ours, "<", paper_npu, ("below", "above")) + " the paper's figure."), ""]
    E = "energy.csv"
    md += ["## DRAM energy per token (the paper's Table 5: memory power)", "",
           c.say(f"NeuPIMs against NPU-only: {c.num(Fact(E, 'neupims_vs_npu_only_pct', {}, 'mean'), '{:+.0f}')} % on average over "
                 f"the table (from {c.num(Fact(E, 'neupims_vs_npu_only_pct', {}, 'min'), '{:+.0f}')} % to "
                 f"{c.num(Fact(E, 'neupims_vs_npu_only_pct', {}, 'max'), '{:+.0f}')} %), the paper "
                 f"{c.num(Fact('paper.csv', 'paper', {'claim': 'energy vs NPU-only (%)'}), '{:+.0f}')} %. Per point in `energy.csv`; "
                 "NeuPIMs keeps the attention reads inside the banks, but sub-batch interleaving streams every weight "
                 "twice; on average over the table the first "
                 + c.cmp(Fact(E, 'neupims_vs_npu_only_pct', {}, 'mean'), "<", Fact.zero(),
                         ("outweighs the second", "does not outweigh the second"))
                 + "."), ""]
    return md


def _extrapolation_serving_section(c, frames: dict[str, pd.DataFrame], layers: int | None, stages: pd.DataFrame) -> list[str]:
    from reports.claims import Fact

    grid, full = frames["grid"], frames["full"].set_index("system")
    m, d, b = FULL_POINT
    pt = grid[(grid["model"] == m) & (grid["dataset"] == d) & (grid["batch"] == b)].set_index("system")
    md = [f"## Every layer against the extrapolation ({m}, {d}, batch {b})", "",
          f"| system | {layers or 'all'} layers simulated, stage formula | all layers simulated | error |", "|---|---|---|---|"]
    for v in full.index:
        md.append(f"| {v} | {pt.loc[v, 'tokens_per_s']:,.0f} | {full.loc[v, 'tokens_per_s']:,.0f} | "
                  f"{pt.loc[v, 'tokens_per_s'] / full.loc[v, 'tokens_per_s'] - 1:+.2%} |")
    err = [Fact("throughput.csv", "tokens_per_s", {"system": v, "model": m, "dataset": d, "batch": b},
                over=Fact("full.csv", "tokens_per_s", {"system": v}), scale=100, offset=-100) for v in full.index]
    md += ["", c.say("The extrapolation's error at this point: " + ", ".join(
        f"{c.num(e, '{:+.2f}')} % ({v})" for e, v in zip(err, full.index, strict=True)) + "."), ""]
    if "serving" in frames:
        sv = frames["serving"].set_index("system")
        md += [f"## Serving (continuous batching; every decode iteration simulated, {SERVING['layers']} layer(s) of it, "
               "times of the whole model)", "",
               "| system | tokens/s | TTFT p50 / p99 (ms) | TBT p50 / p90 / p99 (ms) | iterations |", "|---|---|---|---|---|"]
        for v, r in sv.iterrows():
            md.append(f"| {v} | {r['tokens_per_s']:,.0f} | {r['ttft_p50_s'] * 1e3:.1f} / {r['ttft_p99_s'] * 1e3:.1f} | "
                      f"{r['tbt_p50_s'] * 1e3:.2f} / {r['tbt_p90_s'] * 1e3:.2f} / {r['tbt_p99_s'] * 1e3:.2f} | {int(r['iterations'])} |")
        how = "; ".join(f"`{m}`" for m in dict.fromkeys(sv["extrapolation"]))
        md += ["", f"Config: `{SERVING}`. Each decode iteration's first layers simulated, the whole model's time "
               f"taken from them (serving.csv's `extrapolation`: {how}); prefill of the whole model on standalone "
               "NPUs.", ""]
    md += ["## Stages and timeline (NeuPIMs, GPT3-7B, batch 256, ShareGPT)", "", *stage_table(stages), "",
           "![stage timeline](timeline.png)", ""]
    return md


if __name__ == "__main__":
    raise SystemExit(main())
