"""A study's report: the comparison table (design x model x memory x batch x devices, the common metrics), the
refusals with their reasons, and figures that compare like with like (decode tokens/s and energy per token per
model, a tokens/s vs J/token Pareto plot, the decode step). Every sentence that states a number or a direction
is generated from the results table (`findings`), and tests hold them to it.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from archsim.metrics import ENERGY_PARTS
from archsim.units import fmt_energy, fmt_si, fmt_time

SYSTEM_COLORS = {"pimgpt": "#ff7f0e", "neupims": "#d62728", "duplex": "#8c564b", "t3": "#393b79"}


def _fmt_rate(v: float) -> str:
    return "-" if not isinstance(v, float) or math.isnan(v) else f"{v:,.0f}"


def _fmt_e(v: float) -> str:
    return "-" if not isinstance(v, float) or math.isnan(v) else fmt_energy(v)


def _fmt_t(v: float) -> str:
    return "-" if not isinstance(v, float) or math.isnan(v) else fmt_time(v)


def findings(results: pd.DataFrame) -> list[str]:
    """Sentences stating what the table shows: per (model, memory, batch, devices) with two or more designs
    run, which design decodes fastest and which spends least energy per token, and by how much."""
    ok = results[results["status"] == "ok"]
    out = []
    for (model, memory, batch, tp), g in ok.groupby(["model", "memory", "batch", "tp"], sort=True):
        if len(g) < 2:
            continue
        fast = g.sort_values("decode_tokens_per_s", ascending=False)
        lean = g.sort_values("energy_per_token_j")
        f1, f2 = fast.iloc[0], fast.iloc[1]
        e1, e2 = lean.iloc[0], lean.iloc[1]
        out.append(f"{model}, {memory}, batch {batch}, {tp} device(s): {f1['design']} decodes fastest "
                   f"({_fmt_rate(f1['decode_tokens_per_s'])} tokens/s, "
                   f"{f1['decode_tokens_per_s'] / f2['decode_tokens_per_s']:.2f}x {f2['design']}); "
                   f"{e1['design']} spends the least energy per token ({_fmt_e(e1['energy_per_token_j'])}, "
                   f"{e2['energy_per_token_j'] / e1['energy_per_token_j']:.2f}x less than {e2['design']}).")
    return out


def _table(results: pd.DataFrame) -> list[str]:
    ok = results[results["status"] == "ok"].sort_values(["model", "memory", "batch", "tp", "system"])
    lines = ["| model | memory | batch | devices | design | decode tokens/s | decode step | TTFT | energy/token | "
             + " | ".join(ENERGY_PARTS) + " |", "|---" * (9 + len(ENERGY_PARTS)) + "|"]
    for r in ok.itertuples():
        parts = " | ".join(_fmt_e(getattr(r, f"energy_per_token_{p}_j")) for p in ENERGY_PARTS)
        lines.append(f"| {r.model} | {r.memory} | {r.batch} | {r.tp} | {r.design} | "
                     f"{_fmt_rate(r.decode_tokens_per_s)} | {_fmt_t(r.decode_step_s)} | {_fmt_t(r.ttft_s)} | "
                     f"{_fmt_e(r.energy_per_token_j)} | {parts} |")
    return lines


def _refusals(results: pd.DataFrame) -> list[str]:
    bad = results[results["status"] != "ok"].sort_values(["system", "model", "memory", "batch", "tp"])
    if not len(bad):
        return ["Every point ran."]
    lines = ["| design | model | memory | batch | devices | status | reason |", "|---|---|---|---|---|---|---|"]
    for r in bad.itertuples():
        lines.append(f"| {r.design} | {r.model} | {r.memory} | {r.batch} | {r.tp} | {r.status} | {r.reason} |")
    return lines


def _scopes(results: pd.DataFrame) -> list[str]:
    """Per design, what its numbers cover (the scope records of its points, the distinct ones)."""
    lines = []
    for _, g in results[results["status"] == "ok"].groupby("system"):
        seen = []
        for s in g["scope"]:
            try:
                d = json.loads(s) if isinstance(s, str) else dict(s)
            except (TypeError, ValueError):
                continue
            text = (f"layers simulated {d.get('layers_simulated')} of {d.get('layers')}; phase {d.get('phase')}; "
                    f"not modelled: {', '.join(d.get('not_modelled', [])) or 'nothing'}")
            if text not in seen:
                seen.append(text)
        first = g.iloc[0]
        lines.append(f"- **{first['design']}** ({first['style']}; runs as system `{first['runs_as']}`; compute: "
                     f"{first['compute']}): " + " / ".join(seen))
    return lines


def _bar_grid(plt: Any, results: pd.DataFrame, metric: str, label: str, path: Path) -> None:
    """One panel per (memory, batch, devices): a row per memory, a column per (batch, devices); in a panel, a
    group of bars per model, one bar per design; a refused point is an 'x' on the axis (not an empty gap)."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    si = FuncFormatter(lambda v, _pos: fmt_si(v, unit, 2))
    unit = {"energy_per_token_j": "J", "decode_step_s": "s"}.get(metric, "")

    memories = sorted(results["memory"].unique())
    columns = sorted(results.groupby(["batch", "tp"]).groups)
    models = sorted(results["model"].unique())
    systems = sorted(results["system"].unique())
    design = {s: results[results["system"] == s]["design"].iloc[0] for s in systems}
    w = 0.8 / max(len(systems), 1)
    fig, axes = plt.subplots(len(memories), len(columns), figsize=(3.4 * len(columns), 2.9 * len(memories)),
                             squeeze=False)
    for r, mem in enumerate(memories):
        for c, (batch, tp) in enumerate(columns):
            ax = axes[r][c]
            g = results[(results["memory"] == mem) & (results["batch"] == batch) & (results["tp"] == tp)]
            for i, s in enumerate(systems):
                for j, m in enumerate(models):
                    row = g[(g["model"] == m) & (g["system"] == s)]
                    x = j + i * w
                    if len(row) and row["status"].iloc[0] == "ok":
                        ax.bar(x, row[metric].iloc[0], w, color=SYSTEM_COLORS.get(s))
                    elif len(row):
                        ax.plot(x, 0.0, "x", color=SYSTEM_COLORS.get(s), transform=ax.get_xaxis_transform(),
                                clip_on=False, markersize=5)
            ax.set_xticks([j + (len(systems) - 1) * w / 2 for j in range(len(models))], models, fontsize=7)
            ax.set_yscale("log")
            vals = g[g["status"] == "ok"][metric]
            if len(vals):   # bars start at the decade below the smallest, so heights compare honestly
                ax.set_ylim(10 ** math.floor(math.log10(vals.min())), 10 ** math.ceil(math.log10(vals.max() * 1.05)))
            else:           # every point of the panel refused: a log axis needs a positive range to draw its x marks
                ax.set_ylim(1.0, 10.0)
            ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
            ax.yaxis.set_major_formatter(si)
            ax.yaxis.set_minor_formatter(FuncFormatter(lambda _v, _pos: ""))
            ax.tick_params(axis="y", which="both", labelsize=6)
            ax.set_title(f"{mem}, batch {batch}, {tp} device(s)", fontsize=8)
            if c == 0:
                ax.set_ylabel(label, fontsize=8)
    handles = [plt.Rectangle((0, 0), 1, 1, color=SYSTEM_COLORS.get(s)) for s in systems]
    fig.legend(handles, [design[s] for s in systems], loc="upper center", ncol=len(systems), fontsize=8,
               title="x on the axis: the design refused the point (see the refusals table)", title_fontsize=7)
    fig.tight_layout(rect=(0, 0, 1, 0.93 if len(memories) > 1 else 0.85))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def figures(results: pd.DataFrame, out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = results[results["status"] == "ok"]
    names = []
    for metric, label, fname in (("decode_tokens_per_s", "decode tokens/s", "tokens_per_s.png"),
                                 ("energy_per_token_j", "energy per token (J)", "energy_per_token.png"),
                                 ("decode_step_s", "decode step (s)", "decode_step.png")):
        if len(ok):
            _bar_grid(plt, results, metric, label, out / fname)
            names.append(fname)
    if len(ok):
        fig, ax = plt.subplots(figsize=(6, 4.5))
        markers = dict(zip(sorted(ok["model"].unique()), "osD^v<>", strict=False))
        for r in ok.itertuples():
            ax.scatter(r.energy_per_token_j, r.decode_tokens_per_s, color=SYSTEM_COLORS.get(r.system),
                       marker=markers.get(r.model, "o"), s=18 + 3 * math.log2(r.batch + 1) ** 2, alpha=0.8)
        for s in sorted(ok["system"].unique()):
            ax.scatter([], [], color=SYSTEM_COLORS.get(s), label=ok[ok["system"] == s]["design"].iloc[0])
        for m, mk in markers.items():
            ax.scatter([], [], color="black", marker=mk, label=m)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("energy per token (J), lower is better")
        ax.set_ylabel("decode tokens/s, higher is better")
        ax.set_title("every point: tokens/s vs J/token (marker size: batch)", fontsize=9)
        ax.legend(fontsize=6)
        fig.tight_layout()
        fig.savefig(out / "pareto.png", dpi=110)
        plt.close(fig)
        names.append("pareto.png")
    return names


def write_report(study: Any, results: pd.DataFrame, out: Path, command: str | None = None) -> Path:
    from archsim.output import write_text

    out.mkdir(parents=True, exist_ok=True)
    figs = figures(results, out)
    n = len(results)
    ok = int((results["status"] == "ok").sum())
    cmd = command or f"archsim study {study.source} -o {out}"
    lines = [f"# Study {study.name}: every PIM design on the same model, batch and memory", "",
             f"Generated by `{cmd}` (do not edit). {n} points: {ok} ran, "
             f"{int((results['status'] == 'refused').sum())} refused with a reason, "
             f"{int((results['status'] == 'failed').sum())} failed. Per point: `results.csv` (the common metric "
             "schema of archsim/metrics.py: decode tokens/s and step of the whole model for the whole batch, TTFT "
             "where a design models prefill, energy per decoded token by part; each point's scope record and "
             "the config it ran).", "",
             f"Intent: models {', '.join(map(str, study.data.get('models', [])))}; memory "
             f"{', '.join(map(str, study.data.get('memory', [])))} (generation x stacks per device: every design "
             "gets the same stacks, channels and capacity, each in its own PIM style; docs/presets.md, \"PIM "
             f"styles on every memory\"); batch {study.data.get('batch')}; prompt {study.data.get('input_len')} "
             f"and {study.data.get('output_len')} decoded tokens per request (decode steps at the requests' mean "
             f"context); devices (tp) {study.data.get('tp', 1)}.", "",
             "## What each design's numbers cover", "", *_scopes(results), "",
             "## Findings (generated from the table below)", "", *[f"- {f}" for f in findings(results)], "",
             "## Comparison", "", *_table(results), "",
             "## Refused and failed points", "", *_refusals(results), "",
             "## Figures", "", *[f"![{f}]({f})" for f in figs], ""]
    path = out / "README.md"
    write_text(path, "\n".join(lines))
    return path
