"""Regenerate reports/neupims/README.md: NeuPIMs against NPU-only, NPU+PIM and GPU-only, next to the paper.

Run:  .venv/bin/python reports/neupims/make_report.py [--layers N] [--jobs J] [--full]

Every run is `archsim run --system S --set ...` through archsim.api (the config of each is in its JSON under
reports/neupims/runs/, named by the config hash; existing results are reused, delete the folder to re-run).
Default: the first `--layers` layers of every model are simulated cycle-accurately (all of them with --full);
throughput then scales with the simulated layers (identical layers; tokens/s is quoted for the whole model
as measured_time x n_layers / layers), which the README states next to every table.
"""
from __future__ import annotations

import argparse
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from archsim import api, systems  # noqa: E402
from archsim.errors import UserError  # noqa: E402
from archsim.results import atomic_write_text, config_hash, load_result  # noqa: E402
from archsim.workload.spec import load_model  # noqa: E402

OUT = Path(__file__).resolve().parent
RUNS = OUT / "runs"
MODELS = ["gpt3-7b", "gpt3-13b", "gpt3-30b"]
DATASETS = ["sharegpt", "alpaca"]
BATCHES = [64, 256, 512]
VARIANTS = {   # label -> (system, extra config)
    "GPU-only": ("gpu_only", {}),
    "NPU-only": ("npu_only", {}),
    "NPU+PIM": ("npu_pim", {"sub_batch": True}),
    "NeuPIMs, no SBI": ("neupims", {"sub_batch": False}),
    "NeuPIMs": ("neupims", {"sub_batch": True}),
}


def config(variant: str, model: str, dataset: str, batch: int, layers: int | None) -> dict:
    system, extra = VARIANTS[variant]
    cfg = {"system": system, "model": model, "dataset": dataset, "batch": batch, **extra}
    if layers is not None and system != "gpu_only":      # the GPU roofline is instant: always every layer
        cfg["layers"] = min(layers, load_model(model).n_layers)
    return cfg


def _run(cfg: dict) -> Path:
    """Run (or reuse) one point; a batch the devices cannot hold is recorded as such (`.nofit` file)."""
    path = RUNS / f"{cfg['system']}-{config_hash(cfg)}.json"
    nofit = path.with_suffix(".nofit")
    if path.exists() and load_result(path).manifest["config"] != systems.resolve_config(cfg):
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
        if cfg.get("sub_batch"):
            steady = g[g["stage"].isin(["C", "D"])]["cycles"].sum() / max(sim_layers - 1, 1)
            t_full = t + (n - sim_layers) * steady
        else:
            t_full = t * n / sim_layers
        rows.append(t / t_full)
    return res.stats["tokens_per_s"] * float(np.mean(rows))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=2, help="layers simulated per model (default 2)")
    ap.add_argument("--full", action="store_true", help="simulate every layer of every model")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    layers = None if args.full else args.layers
    RUNS.mkdir(exist_ok=True)
    jobs = [(v, m, d, b) for m in MODELS for d in DATASETS for b in BATCHES for v in VARIANTS]
    cfgs = [config(v, m, d, b, layers) for v, m, d, b in jobs]
    with ProcessPoolExecutor(args.jobs) as ex:
        paths = list(ex.map(_run, cfgs))
    rows = []
    for (v, m, d, b), cfg, path in zip(jobs, cfgs, paths, strict=True):
        if path.suffix == ".nofit":
            rows.append({"system": v, "model": m, "dataset": d, "batch": b, "tokens_per_s": np.nan,
                         "path": path.name, "note": path.read_text().strip()})
            continue
        res = load_result(path)
        s = res.stats
        rows.append({"system": v, "model": m, "dataset": d, "batch": b,
                     "tokens_per_s": whole_model_tokens_per_s(res, cfg),
                     "npu_util": s.get("npu_util", np.nan), "pim_util": s.get("pim_util", np.nan),
                     "mem_bw_util": s.get("mem_bw_util", np.nan),
                     "energy_per_token_j": s.get("energy_per_token_j", np.nan), "wall_s": s.get("wall_s", np.nan),
                     "path": path.name})
    df = pd.DataFrame(rows)
    df.drop(columns=["path"]).to_csv(OUT / "throughput.csv", index=False)
    example = load_result(paths[jobs.index(("NeuPIMs", "gpt3-7b", "sharegpt", 256))])
    timeline(example)
    atomic_write_text(OUT / "README.md", render(df, layers, example.tables["stages"]))
    return 0


def timeline(res) -> None:
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
        ax.barh(1, (r["npu_end_cycle"] - r["start_cycle"]) / 1e3, left=t0, color="tab:blue")
        if r["pim_end_cycle"] > r["start_cycle"]:
            ax.barh(0, (r["pim_end_cycle"] - r["start_cycle"]) / 1e3, left=t0, color="tab:orange")
    ax.axvline(st["start_cycle"].iloc[-1] / 1e3 + st["cycles"].iloc[-1] / 1e3, color="black", linewidth=0.8, zorder=3,
               linestyle=":")
    ax.set_ylim(-0.6, 1.85)
    ax.set_yticks([0, 1], ["PIM (attention GEMVs)", "NPU (GEMMs, vector ops)"])
    ax.set_xlabel("time (µs; 1 µs = 1,000 cycles at 1 GHz)")
    ax.set_title("NeuPIMs, GPT3-7B, batch 256, ShareGPT, first 2 layers: stages A-F (label: stage + layer; "
                 "dotted lines: stage barriers).\nEach bar runs from its stage's start to that side's last "
                 "event; the stage ends when the later side does.", fontsize=9)
    fig.tight_layout()
    fig.savefig(OUT / "timeline.png", dpi=120)
    plt.close(fig)


def _geo(x) -> float:
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    return float(np.exp(np.mean(np.log(x)))) if x.size else float("nan")


def _fmt(x: float, nd: int = 2) -> str:
    return "-" if not np.isfinite(x) else f"{x:,.{nd}f}"


def stage_table(st: pd.DataFrame) -> list[str]:
    out = ["| stage | layer | cycles | NPU busy until | PIM busy until | NPU util | PIM util | memory BW util |",
           "|---|---|---|---|---|---|---|---|"]
    for _, r in st[st["sample"] == 0].iterrows():
        t0 = r["start_cycle"]
        out.append(f"| {r['stage']} | {int(r['layer'])} | {int(r['cycles']):,} | +{int(r['npu_end_cycle'] - t0):,} | "
                   f"+{int(max(r['pim_end_cycle'] - t0, 0)):,} | {r['npu_util']:.1%} | {r['pim_util']:.1%} | "
                   f"{r['mem_bw_util']:.1%} |")
    return out


def render(df: pd.DataFrame, layers: int | None, stages: pd.DataFrame) -> str:
    piv = df.pivot_table(index=["model", "dataset", "batch"], columns="system", values="tokens_per_s", dropna=False)
    out = ["# NeuPIMs reproduction (archsim)", "",
           "Generated by `reports/neupims/make_report.py` "
           + (f"(`--layers {layers}`: the first {layers} layers of each model simulated cycle-accurately, "
              "whole-model time from NeuPIMs' stage formula, see make_report.py)" if layers else "(`--full`: every layer simulated)")
           + ". Runs: `reports/neupims/runs/*.json` (full config and stats each). Per-run numbers: `throughput.csv`.",
           "", "## Throughput (tokens/s of one TP group, decode)", "",
           "| model | dataset | batch | " + " | ".join(VARIANTS) + " | NeuPIMs / GPU | / NPU-only | / NPU+PIM |",
           "|---|---|---|" + "---|" * (len(VARIANTS) + 3)]
    ratios = {"GPU-only": [], "NPU-only": [], "NPU+PIM": []}
    for (m, d, b), r in piv.iterrows():
        cells = [_fmt(r[v], 0) if np.isfinite(r[v]) else "does not fit" for v in VARIANTS]
        rat = []
        for base in ratios:
            x = r["NeuPIMs"] / r[base]
            if np.isfinite(x):
                ratios[base].append(x)
            rat.append(f"{x:.2f}x" if np.isfinite(x) else "-")
        out.append(f"| {m} | {d} | {b} | " + " | ".join(cells) + " | " + " | ".join(rat) + " |")
    geo = {k: _geo(v) for k, v in ratios.items()}
    out += ["", "## Against the paper", "",
            "| claim | paper | archsim (geomean over the table) |", "|---|---|---|",
            f"| NeuPIMs vs GPU-only | ~3x | {geo['GPU-only']:.2f}x |",
            f"| NeuPIMs vs NPU-only | ~2.4x | {geo['NPU-only']:.2f}x |",
            f"| NeuPIMs vs NPU+PIM | ~1.6x | {geo['NPU+PIM']:.2f}x |"]
    sbi = df[df["system"].isin(["NeuPIMs", "NeuPIMs, no SBI"])].pivot_table(
        index="batch", columns="system", values="tokens_per_s", aggfunc=_geo)
    out += ["", "## Sub-batch interleaving by batch size (geomean over models and datasets)", "",
            "| batch | NeuPIMs, no SBI | NeuPIMs (SBI) | SBI gain |", "|---|---|---|---|"]
    for b, r in sbi.iterrows():
        out.append(f"| {b} | {r['NeuPIMs, no SBI']:,.0f} | {r['NeuPIMs']:,.0f} | {r['NeuPIMs'] / r['NeuPIMs, no SBI']:.2f}x |")
    u = df[(df["model"] == "gpt3-30b") & (df["batch"] == 256) & (df["dataset"] == "sharegpt")].set_index("system")
    out += ["", "## Utilisation (GPT3-30B, batch 256, ShareGPT)", "",
            "| system | NPU | PIM | memory bandwidth | paper NPU | paper PIM |", "|---|---|---|---|---|---|"]
    paper = {"NPU+PIM": ("28.0%", "~17%"), "NeuPIMs": ("64.9%", "26.4%")}
    for v in ("NPU-only", "NPU+PIM", "NeuPIMs, no SBI", "NeuPIMs"):
        r = u.loc[v]
        p = paper.get(v, ("-", "-"))
        out.append(f"| {v} | {r['npu_util']:.1%} | {r['pim_util']:.1%} | {r['mem_bw_util']:.1%} | {p[0]} | {p[1]} |")
    e = df[df["system"].isin(["NPU-only", "NeuPIMs"])].pivot_table(index=["model", "dataset", "batch"],
                                                                   columns="system", values="energy_per_token_j")
    red = 1 - _geo(e["NeuPIMs"] / e["NPU-only"])
    drb = df[df["system"].isin(["NPU+PIM", "NeuPIMs"])].pivot_table(index=["model", "dataset", "batch"],
                                                                    columns="system", values="tokens_per_s")
    gain = _geo(drb["NeuPIMs"] / drb["NPU+PIM"]) - 1
    out += ["", "## Energy and dual row buffers", "",
            "| claim | paper | archsim |", "|---|---|---|",
            f"| DRAM energy per token, NeuPIMs vs NPU-only | -25% | {-red:+.0%} |",
            f"| dual row buffers (NPU+PIM with SBI -> NeuPIMs) | +69.7% (GPT3-7B, ShareGPT) | {gain:+.0%} (all) |",
            "", "## Stages and timeline (NeuPIMs, GPT3-7B, batch 256, ShareGPT)", "",
            *stage_table(stages), "", "![stage timeline](timeline.png)", "",
            "GPT3-7B, batch 256, ShareGPT (first sample): NPU busy (GEMMs, vector ops, all-reduces) and PIM busy"
            " (attention GEMVs) per stage; every stage ends at the barrier of the slower side.", ""]
    out += [open(OUT / "README.notes.md").read()] if (OUT / "README.notes.md").exists() else []
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
