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

from archsim import api, registry  # noqa: E402
from archsim.errors import UserError  # noqa: E402
from archsim.report.palette import color_of  # noqa: E402
from archsim.results import atomic_write_text, config_hash, load_result  # noqa: E402
from archsim.workload.spec import load_model  # noqa: E402

HERE = Path(__file__).resolve().parent
MODELS = ["gpt3-7b", "gpt3-13b", "gpt3-30b"]
DATASETS = ["sharegpt", "alpaca"]
BATCHES = [64, 256, 512]
# The NPU as NeuPIMs' own code simulates it (one array, ONNXim preload rule, unlimited SRAM), repo-relative
NPU_AS_CODE = "reports/neupims/npu_as_neupims_code.yaml"
VARIANTS = {   # label -> (system, extra config); the paper's baselines and NeuPIMs
    "GPU roofline (upper bound)": ("gpu_roofline", {}),
    "GPU-only": ("gpu_only", {}),
    "NPU-only": ("npu_only", {}),
    "NPU+PIM": ("npu_pim", {}),
    "NeuPIMs": ("neupims", {"sub_batch": "paper"}),
}
# NeuPIMs as the paper runs it: sub-batch interleaving only at batch >= 256 (it loses at small batch, where a
# weight-stationary array takes as long for half the rows, so two sub-batches double the GEMM time)
SBI_MIN_BATCH = 256
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
    "NeuPIMs, NPU as NeuPIMs' code (1 array, onnxim)": ("neupims", {"npu": NPU_AS_CODE}, "gpt3-30b", "sharegpt", 256),
    "NPU+PIM, NPU as NeuPIMs' code (1 array, onnxim)": ("npu_pim", {"npu": NPU_AS_CODE}, "gpt3-30b", "sharegpt", 256),
    "NPU-only, NPU as NeuPIMs' code (1 array, onnxim)": ("npu_only", {"npu": NPU_AS_CODE}, "gpt3-30b", "sharegpt", 256),
    "NeuPIMs no SBI, NPU as code, b64": ("neupims", {"npu": NPU_AS_CODE, "sub_batch": False}, "gpt3-7b", "sharegpt", 64),
    "NeuPIMs, NPU as code, b64": ("neupims", {"npu": NPU_AS_CODE}, "gpt3-7b", "sharegpt", 64),
    "NeuPIMs with one row buffer (blocked), b256": ("npu_pim", {"mapping": "neupims"}, "gpt3-7b", "sharegpt", 256),
    "NeuPIMs with one row buffer (blocked), b512": ("npu_pim", {"mapping": "neupims"}, "gpt3-7b", "sharegpt", 512),
}
FULL_POINT = ("gpt3-7b", "sharegpt", 256)     # simulated with every layer beside the extrapolated run
# Serving is small: every decode iteration streams the shard's weights through the channel engine whatever the
# batch (~35 s of CPU per GPT3-7B iteration of all layers), so one layer is simulated; prefill and decode
# time both scale with the layers (decode within the extrapolation error measured above)
SERVING = {"model": "gpt3-7b", "dataset": "alpaca", "mode": "serving", "requests": 8, "batch": 4, "layers": 1}


def serving_config(variant: str) -> dict:
    cfg = {"system": VARIANTS[variant][0], **SERVING}
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
    path = runs / f"{cfg['system']}-{config_hash(cfg)}.json"
    nofit = path.with_suffix(".nofit")
    if path.exists() and load_result(path).manifest["config"] != registry.resolve_config(cfg):
        path.unlink()       # the system's defaults changed since: the stored run is stale
    if not path.exists() and not nofit.exists():
        try:
            api.run(cfg, seed=0).write_json(path)
        except UserError as exc:
            atomic_write_text(nofit, str(exc) + "\n")
    return path if path.exists() else nofit


def whole_model_tokens_per_s(res, cfg: dict) -> float:
    """tokens/s of the whole model from a run of its first L layers, with NeuPIMs' own stage formula: with
    sub-batch interleaving T(N) = A + B + (C + D)(N - 1) + E + F, so the simulated time plus (N - L) x the
    mean simulated C + D; without it T(N) = N x (A + B + E), the simulated time x N / L. Exact for --full."""
    n = load_model(cfg["model"]).n_layers
    sim_layers = cfg.get("layers", n)
    if sim_layers == n:
        return res.stats["tokens_per_s"]
    st = res.tables["stages"]
    rows = []
    for _, g in st.groupby("sample"):
        t = g["cycles"].sum()
        if set(g["stage"]) >= {"C", "D"}:
            steady = g[g["stage"].isin(["C", "D"])]["cycles"].sum() / max(sim_layers - 1, 1)
            t_full = t + (n - sim_layers) * steady
        else:
            t_full = t * n / sim_layers
        rows.append(t / t_full)
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--out", type=Path, default=HERE, help="output folder (default: the report's own)")
    ap.add_argument("--layers", type=int, default=2, help="layers simulated per model (default 2)")
    ap.add_argument("--full", action="store_true", help="simulate every layer of every model")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--no-serving", action="store_true", help="skip the serving run")
    args = ap.parse_args(argv)
    out = args.out.resolve()
    os.chdir(ROOT)                 # NPU_AS_CODE is repo-relative (it is part of the runs' config hashes)
    runs = out / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    layers = None if args.full else args.layers
    jobs: list[tuple[str, dict, dict]] = []      # (label, keys, cfg)
    for m in MODELS:
        for d in DATASETS:
            for b in BATCHES:
                for v, (system, extra) in VARIANTS.items():
                    jobs.append(("grid", {"system": v, "model": m, "dataset": d, "batch": b},
                                 config(system, extra, m, d, b, layers)))
    for b in BATCHES:
        for v, (system, extra) in LADDER.items():
            jobs.append(("ladder", {"system": v, "model": LADDER_POINT[0], "dataset": LADDER_POINT[1], "batch": b},
                         config(system, extra, *LADDER_POINT, b, layers)))
    for v, (system, extra, m, d, b) in TOGGLES.items():
        jobs.append(("toggle", {"system": v, "model": m, "dataset": d, "batch": b}, config(system, extra, m, d, b, layers)))
    m, d, b = FULL_POINT
    for v in ("NeuPIMs", "NPU-only"):
        system, extra = VARIANTS[v]
        jobs.append(("full", {"system": v, "model": m, "dataset": d, "batch": b}, config(system, extra, m, d, b, None)))
    if not args.no_serving:
        for v in ("NeuPIMs", "NPU-only", "GPU-only"):
            jobs.append(("serving", {"system": v}, serving_config(v)))
    with ProcessPoolExecutor(args.jobs) as ex:
        paths = list(ex.map(_run, [(cfg, runs) for _, _, cfg in jobs]))
    tables: dict[str, list[dict]] = {}
    for (kind, keys, cfg), path in zip(jobs, paths, strict=True):
        if kind == "serving":
            res = load_result(path)
            tables.setdefault(kind, []).append({**keys, **res.stats})
        else:
            tables.setdefault(kind, []).append(row(keys.pop("system"), cfg, path, **keys))
    frames = {k: pd.DataFrame(v) for k, v in tables.items()}
    grid = frames["grid"]
    grid.drop(columns=["config", "path"], errors="ignore").to_csv(out / "throughput.csv", index=False)
    for kind in ("ladder", "toggle", "full"):
        frames[kind].drop(columns=["config", "path"], errors="ignore").to_csv(out / f"{kind}.csv", index=False)
    if "serving" in frames:
        frames["serving"].to_csv(out / "serving.csv", index=False)
    example_cfg = config("neupims", {}, "gpt3-7b", "sharegpt", 256, layers)
    example = load_result(runs / f"neupims-{config_hash(example_cfg)}.json")
    timeline(example, out, layers)
    ladder_figure(frames["ladder"], out)
    atomic_write_text(out / "README.md", render(frames, layers, example.tables["stages"]))
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


def render(frames: dict[str, pd.DataFrame], layers: int | None, stages: pd.DataFrame) -> str:
    grid = frames["grid"]
    piv = grid.pivot_table(index=["model", "dataset", "batch"], columns="system", values="tokens_per_s", dropna=False)
    labels = list(VARIANTS)
    bases = ["GPU-only", "NPU-only", "NPU+PIM", "GPU roofline (upper bound)"]
    out = ["# NeuPIMs reproduction (archsim)", "",
           "Generated by `reports/neupims/make_report.py` "
           + (f"(`--layers {layers}`: the first {layers} layers of each model simulated cycle-accurately, "
              "whole-model time from NeuPIMs' stage formula; its error against a run of every layer is measured "
              "below)" if layers else "(`--full`: every layer simulated)")
           + ". Runs: `runs/*.json` (full config and stats each). Per-run numbers: `throughput.csv`, `ladder.csv`, "
           "`toggle.csv`, `full.csv`, `serving.csv`.", "",
           "Baselines as the paper defines them: **GPU-only** is PyTorch eager on an A100 40GB, per kernel "
           "(`gpu_only`); the ideal A100 roofline (`gpu_roofline`) is an upper bound on any GPU software, not the "
           "paper's baseline. **NPU+PIM** is the naive one: one row buffer, blocked arbitration, no sub-batch "
           "interleaving, round-robin KV placement (`mappings/npu_pim.yaml`). **NPU-only** runs attention on its "
           "arrays, pipelined across heads and requests. **NeuPIMs** uses sub-batch interleaving from batch "
           f"{SBI_MIN_BATCH} on, as the paper does (the ablation ladder shows it at every batch).", "",
           "## Throughput (tokens/s of one TP group, decode)", "",
           "| model | dataset | batch | " + " | ".join(labels) + " | NeuPIMs / GPU-only | / NPU-only | / NPU+PIM | / GPU roofline |",
           "|---|---|---|" + "---|" * (len(labels) + 4)]
    ratios: dict[str, list[float]] = {k: [] for k in bases}
    for (m, d, b), r in piv.iterrows():
        cells = [_fmt(r[v]) if np.isfinite(r[v]) else "does not fit" for v in labels]
        rat = []
        for base in bases:
            x = r["NeuPIMs"] / r[base]
            if np.isfinite(x):
                ratios[base].append(x)
            rat.append(f"{x:.2f}x" if np.isfinite(x) else "-")
        out.append(f"| {m} | {d} | {b} | " + " | ".join(cells) + " | " + " | ".join(rat) + " |")
    geo = {k: _geo(v) for k, v in ratios.items()}
    lad = frames["ladder"]
    lp = lad.pivot_table(index="batch", columns="system", values="tokens_per_s")
    drb = _geo(lp["+ dual row buffers"] / lp["NPU+PIM"]) - 1
    out += ["", "## Against the paper", "",
            "| claim | paper | archsim (geomean over the table) |", "|---|---|---|",
            f"| NeuPIMs vs GPU-only (PyTorch eager on A100) | ~3x | {geo['GPU-only']:.2f}x |",
            f"| NeuPIMs vs NPU-only | ~2.4x | {geo['NPU-only']:.2f}x |",
            f"| NeuPIMs vs naive NPU+PIM | ~1.6x | {geo['NPU+PIM']:.2f}x |",
            f"| NeuPIMs vs the A100 roofline (upper bound; not in the paper) | - | {geo['GPU roofline (upper bound)']:.2f}x |",
            f"| dual row buffers alone (NPU+PIM -> + DRB, GPT3-7B ShareGPT, geomean over batch) | +69.7% | {drb:+.0%} |"]
    tg = frames["toggle"].set_index("system")
    drb_sbi = {b: lp.loc[b, "+ SBI (NeuPIMs)"] / tg.loc[f"NeuPIMs with one row buffer (blocked), b{b}", "tokens_per_s"] - 1
               for b in (256, 512)}
    out.append(f"| dual row buffers under SBI + GMLBP (toggle: NeuPIMs with one blocked row buffer -> NeuPIMs, GPT3-7B "
               f"ShareGPT) | - | {drb_sbi[256]:+.0%} (batch 256), {drb_sbi[512]:+.0%} (batch 512) |")
    out += ["", "## Ablation ladder (GPT3-7B, ShareGPT; the paper's Fig. 13)", "",
            "| batch | " + " | ".join(LADDER) + " |", "|---|" + "---|" * len(LADDER)]
    for b, r in lp.iterrows():
        base = r["NPU+PIM"]
        out.append(f"| {b} | " + " | ".join(f"{r[v]:,.0f} ({r[v] / base:.2f}x)" for v in LADDER) + " |")
    out += ["", "![ablation ladder](ablation.png)", "",
            "Each step adds one feature to the step on its left; sub-batch interleaving (the last step) is where the "
            "batch size decides the sign.", ""]
    tog = frames["toggle"].set_index("system")
    u = grid[(grid["model"] == "gpt3-30b") & (grid["batch"] == 256) & (grid["dataset"] == "sharegpt")].set_index("system")
    out += ["## Utilisation (GPT3-30B, batch 256, ShareGPT; the paper's Table 4)", "",
            "| system | NPU | PIM (COMP issue slots) | PIM busy (time with GEMVs in flight) | memory bandwidth | paper NPU | paper PIM |",
            "|---|---|---|---|---|---|---|"]
    paper = {"NPU+PIM": ("28.0%", "~17%"), "NeuPIMs": ("64.9%", "26.4%")}
    for v in ("NPU-only", "NPU+PIM", "NeuPIMs"):
        r = u.loc[v]
        p = paper.get(v, ("-", "-"))
        out.append(f"| {v} | {r['npu_util']:.1%} | {r['pim_util']:.1%} | {r['pim_busy']:.1%} | {r['mem_bw_util']:.1%} | "
                   f"{p[0]} | {p[1]} |")
    for v in ("NPU-only, NPU as NeuPIMs' code (1 array, onnxim)", "NPU+PIM, NPU as NeuPIMs' code (1 array, onnxim)",
              "NeuPIMs, NPU as NeuPIMs' code (1 array, onnxim)"):
        r = tog.loc[v]
        out.append(f"| {v} (toggle) | {r['npu_util']:.1%} | {r['pim_util']:.1%} | {r['pim_busy']:.1%} | "
                   f"{r['mem_bw_util']:.1%} | | |")
    nc = {v: tog.loc[f"{v}, NPU as NeuPIMs' code (1 array, onnxim)", "tokens_per_s"] for v in ("NeuPIMs", "NPU+PIM", "NPU-only")}
    out += ["", "Throughput with the NPU as NeuPIMs' code simulates it (same point): NeuPIMs "
            f"{nc['NeuPIMs']:,.0f}, NPU+PIM {nc['NPU+PIM']:,.0f}, NPU-only {nc['NPU-only']:,.0f} tokens/s; "
            f"NeuPIMs / NPU-only {nc['NeuPIMs'] / nc['NPU-only']:.2f}x, / NPU+PIM {nc['NeuPIMs'] / nc['NPU+PIM']:.2f}x "
            f"(with our 8-array NPU: {u.loc['NeuPIMs', 'tokens_per_s'] / u.loc['NPU-only', 'tokens_per_s']:.2f}x, "
            f"{u.loc['NeuPIMs', 'tokens_per_s'] / u.loc['NPU+PIM', 'tokens_per_s']:.2f}x).", ""]
    # energy: NeuPIMs vs NPU-only, and the ladder's no-SBI step vs NPU-only at the same points
    e = grid.pivot_table(index=["model", "dataset", "batch"], columns="system", values="energy_per_token_j")
    red = _geo(e["NeuPIMs"] / e["NPU-only"]) - 1
    el = lad.pivot_table(index="batch", columns="system", values="energy_per_token_j")
    npu_only_7b = grid[(grid["model"] == LADDER_POINT[0]) & (grid["dataset"] == LADDER_POINT[1])].set_index("batch")
    npu_only_7b = npu_only_7b[npu_only_7b["system"] == "NPU-only"]["energy_per_token_j"]
    out += ["## DRAM energy per token (the paper's Table 5: memory power)", "",
            "| comparison | paper | archsim |", "|---|---|---|",
            f"| NeuPIMs vs NPU-only (geomean over the table) | -25% | {red:+.0%} |"]
    for b in BATCHES:
        out.append(f"| GPT3-7B ShareGPT batch {b}: NeuPIMs / NeuPIMs without SBI (+ GMLBP step) / NPU+PIM, vs NPU-only | "
                   f"| {el.loc[b, '+ SBI (NeuPIMs)'] / npu_only_7b[b] - 1:+.0%} / {el.loc[b, '+ GMLBP'] / npu_only_7b[b] - 1:+.0%} / "
                   f"{el.loc[b, 'NPU+PIM'] / npu_only_7b[b] - 1:+.0%} |")
    sb = tog
    sbi_code = sb.loc["NeuPIMs, NPU as code, b64", "tokens_per_s"] / sb.loc["NeuPIMs no SBI, NPU as code, b64", "tokens_per_s"]
    out += ["", "## Sub-batch interleaving by batch size (GPT3-7B, ShareGPT: ladder's + GMLBP -> + SBI)", "",
            "| batch | without SBI | with SBI | SBI gain |", "|---|---|---|---|"]
    for b, r in lp.iterrows():
        out.append(f"| {b} | {r['+ GMLBP']:,.0f} | {r['+ SBI (NeuPIMs)']:,.0f} | {r['+ SBI (NeuPIMs)'] / r['+ GMLBP']:.2f}x |")
    out += ["", f"Toggle: with the NPU as NeuPIMs' code simulates it (compute-bound: one array), SBI at batch 64 gains "
            f"{sbi_code:.2f}x ({sb.loc['NeuPIMs no SBI, NPU as code, b64', 'tokens_per_s']:,.0f} -> "
            f"{sb.loc['NeuPIMs, NPU as code, b64', 'tokens_per_s']:,.0f} tokens/s).", ""]
    pg = tog.loc["npu_only, attention per GEMM (old schedule)"]
    npo = grid[(grid["model"] == "gpt3-7b") & (grid["dataset"] == "sharegpt") & (grid["batch"] == 256)].set_index("system")
    out += ["## NPU-only attention schedule (toggle)", "",
            "| GPT3-7B ShareGPT batch 256, NPU-only | tokens/s | NPU util |", "|---|---|---|",
            f"| pipelined across heads and requests (default) | {npo.loc['NPU-only', 'tokens_per_s']:,.0f} | "
            f"{npo.loc['NPU-only', 'npu_util']:.1%} |",
            f"| one GEMM per request x head from an empty pipeline (`npu_attention=per_gemm`) | {pg['tokens_per_s']:,.0f} | "
            f"{pg['npu_util']:.1%} |", ""]
    full = frames["full"].set_index("system")
    out += ["## Every layer against the extrapolation (GPT3-7B, ShareGPT, batch 256)", "",
            f"| system | {layers or 'all'} layers simulated, stage formula | all 32 layers simulated | error |", "|---|---|---|---|"]
    for v in full.index:
        scaled = npo.loc[v, "tokens_per_s"]
        f = full.loc[v, "tokens_per_s"]
        out.append(f"| {v} | {scaled:,.0f} | {f:,.0f} | {scaled / f - 1:+.2%} |")
    out.append("")
    if "serving" in frames:
        sv = frames["serving"].set_index("system")
        n = load_model(SERVING["model"]).n_layers
        out += ["", f"## Serving (continuous batching; {SERVING['model']}, {SERVING['dataset']}, {SERVING['requests']} "
                f"requests all at t = 0, at most {SERVING['batch']} in flight, every iteration simulated, "
                f"{SERVING['layers']} of {n} layers)", "",
                f"Times are those of the first layer alone (the GPU row too); for the whole model multiply TTFT and "
                f"TBT by {n} and divide tokens/s by {n} (prefill is linear in the layers, decode to within the "
                "extrapolation error above).", "",
                "| system | tokens/s | TTFT p50 / p99 (ms) | TBT p50 / p90 / p99 (ms) | iterations |", "|---|---|---|---|---|"]
        for v, r in sv.iterrows():
            out.append(f"| {v} | {r['tokens_per_s']:,.0f} | {r['ttft_p50_s'] * 1e3:.1f} / {r['ttft_p99_s'] * 1e3:.1f} | "
                       f"{r['tbt_p50_s'] * 1e3:.2f} / {r['tbt_p90_s'] * 1e3:.2f} / {r['tbt_p99_s'] * 1e3:.2f} | "
                       f"{int(r['iterations'])} |")
        out += ["", "Prefill runs on standalone NPUs (NeuPIMs' system), so TTFT is the prompt on the NPU tile model plus "
                "the wait for a batch slot; TBT is the decode iteration time.", ""]
    out += ["## Stages and timeline (NeuPIMs, GPT3-7B, batch 256, ShareGPT)", "",
            *stage_table(stages), "", "![stage timeline](timeline.png)", ""]
    notes = HERE / "README.notes.md"
    out += [notes.read_text()] if notes.exists() else []
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
