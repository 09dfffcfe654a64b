"""Report figures. Each builder returns the figures it could make and, if none, why not.

Figures are drawn on matplotlib `Figure` objects directly (Agg canvas, no pyplot), so building a report
never touches a GUI backend or pyplot's global state. The table behind every figure is returned with it
and written next to it as CSV.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from archsim.report.inputs import Source, short_keys
from archsim.sweep.spec import format_value

MAX_BARS = 60  # beyond this a bar chart is unreadable; the CSV still has every run
MAX_LINES = 12
MAX_TIMELINES = 3
MAX_INTERVALS = 20000


@dataclass
class FigureOut:
    slug: str  # file stem under figures/
    title: str
    caption: str
    data: pd.DataFrame
    figure: Figure


Builder = Callable[[list[Source]], "tuple[list[FigureOut], list[str]]"]


def slug(*parts: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", "_".join(parts)).strip("_")[:120]


def _numeric(series: pd.Series) -> pd.Series:
    return pd.to_numeric(series, errors="coerce")


def _is_numeric_values(values: pd.Series) -> bool:
    vals = values.dropna()
    return len(vals) > 0 and all(isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
                                 for v in vals)


def _group_label(row: pd.Series, keys: list[str], short: dict[str, str] | None = None) -> str:
    short = short or short_keys(keys)
    return ", ".join(f"{short[k]}={format_value(row[k])}" for k in keys) or "all"


def _rotate(ax: Axes, labels: list[str]) -> None:
    if max((len(s) for s in labels), default=0) * len(labels) > 60:
        for tick in ax.get_xticklabels():
            tick.set_rotation(30)
            tick.set_horizontalalignment("right")


def _bar_height(n_bars: int) -> float:
    return min(30.0, max(2.5, 0.28 * n_bars + 1.4))


def _label_width(labels: list[str]) -> float:
    """Figure width for horizontal bars: room for the longest y label plus the bars and a legend."""
    return min(22.0, max(7.5, 6.0 + 0.075 * max((len(s) for s in labels), default=0)))


# ----------------------------------------------------------------------------------------------------------
# speedup bars


def _run_speedups(runs: list[Source]) -> FigureOut:
    rows = []
    for src in runs:
        for col in (c for c in src.stats.columns if c.startswith("speedup_vs_")):
            for run, value in zip(src.stats["run"], _numeric(src.stats[col]), strict=True):
                rows.append({"run": str(run), "baseline": col.removeprefix("speedup_vs_"), "speedup": float(value)})
    data = pd.DataFrame(rows).iloc[:MAX_BARS]
    pivot = data.pivot_table(index="run", columns="baseline", values="speedup", aggfunc="first", sort=False)
    fig = Figure(figsize=(_label_width([str(g) for g in pivot.index]), _bar_height(len(data))), layout="constrained")
    ax = fig.add_subplot()
    n_var = max(1, len(pivot.columns))
    height = 0.8 / n_var
    y = np.arange(len(pivot.index))
    for i, base in enumerate(pivot.columns):
        ax.barh(y + (i - (n_var - 1) / 2) * height, pivot[base].to_numpy(dtype=float), height, label=str(base))
    ax.set_yticks(y, [str(g) for g in pivot.index])
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("speedup (x, log scale)")
    ax.set_title("speedup against each run's baselines", fontsize=10)
    fig.legend(loc="outside right upper", fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    return FigureOut("speedup-runs", "Speedup against baselines (single runs)",
                     "Each run's own `speedup_vs_<baseline>` stats (latency of the baseline / latency of the run).",
                     data, fig)


def speedup_figures(sources: list[Source]) -> tuple[list[FigureOut], list[str]]:
    out: list[FigureOut] = []
    reasons: list[str] = []
    sweeps = [s for s in sources if s.kind == "sweep"]
    # Runs that carry their own baseline comparisons (stats `speedup_vs_<baseline>`) get bars of those.
    runs = [s for s in sources if s.kind == "run" and any(c.startswith("speedup_vs_") for c in s.stats.columns)]
    if runs:
        out.append(_run_speedups(runs))
    if not sweeps:
        if not runs:
            reasons.append("needs a sweep with a metric that has a `baseline:`, or runs with speedup_vs_* stats")
        return out, reasons
    for src in sweeps:
        with_base = {n: m for n, m in src.metrics.items() if m.get("baseline")}
        if not with_base:
            reasons.append(f"sweep {src.name}: no metric with a `baseline:` in the sweep file")
            continue
        if src.stats.empty:
            reasons.append(f"sweep {src.name}: no finished points")
            continue
        for name, spec in with_base.items():
            base_keys = [k for k in spec["baseline"] if k in src.stats.columns]
            other = [k for k in src.axis_keys if k not in base_keys and k in src.stats.columns]
            data = src.stats[other + base_keys + [name]].copy()
            short = short_keys(src.axis_keys)
            data["group"] = data.apply(lambda r, keys=other, sh=short: _group_label(r, keys, sh), axis=1)
            data["variant"] = data.apply(lambda r, keys=base_keys, sh=short: _group_label(r, keys, sh), axis=1)
            if len(data) > MAX_BARS:
                data = data.iloc[:MAX_BARS]
            pivot = data.pivot_table(index="group", columns="variant", values=name, aggfunc="first", sort=False)
            # Horizontal bars: point labels are long and read best along the y axis.
            fig = Figure(figsize=(_label_width([str(g) for g in pivot.index]), _bar_height(len(data))),
                         layout="constrained")
            ax = fig.add_subplot()
            n_var = max(1, len(pivot.columns))
            height = 0.8 / n_var
            y = np.arange(len(pivot.index))
            for i, variant in enumerate(pivot.columns):
                ax.barh(y + (i - (n_var - 1) / 2) * height, pivot[variant].to_numpy(dtype=float), height,
                        label=str(variant))
            ax.set_yticks(y, [str(g) for g in pivot.index])
            ax.invert_yaxis()
            ax.set_xlabel(name)
            base_text = ", ".join(f"{k}={format_value(v)}" for k, v in spec["baseline"].items())
            ax.set_title(f"{src.name}: {name}", fontsize=10)
            fig.legend(loc="outside right upper", fontsize=8)
            ax.grid(axis="x", alpha=0.3)
            out.append(FigureOut(slug("speedup", src.name, name), f"{name} — {src.name}",
                                 f"`{name} = {spec['expr']}` per point, against the baseline point with "
                                 f"{base_text} and the same values of the other axes.",
                                 data.drop(columns=["group", "variant"]), fig))
    return out, reasons


# ----------------------------------------------------------------------------------------------------------
# energy breakdown

_ENERGY_UNITS = {"pj": 1e-12, "nj": 1e-9, "uj": 1e-6, "mj": 1e-3, "j": 1.0}
_TABLE_ENERGY = re.compile(r"^energy(_[a-z0-9]+)?_(pj|nj|uj|mj|j)$")
_STATS_ENERGY = re.compile(r"^energy_(.+)_(pj|nj|uj|mj|j)$")


def _display_unit(max_joules: float) -> tuple[str, float]:
    for name, scale in (("J", 1.0), ("mJ", 1e-3), ("µJ", 1e-6), ("nJ", 1e-9)):
        if max_joules >= scale:
            return name, scale
    return "pJ", 1e-12


def _energy_long(sources: list[Source]) -> tuple[pd.DataFrame, list[str]] | None:
    """(run, component, energy_j) rows per source from, in order of preference: table rows with a
    `component` column and an energy column; table columns energy_<component>_<unit> (summed over rows);
    stats named energy_<component>_<unit>."""
    rows: list[dict[str, object]] = []
    origins: list[str] = []
    for src in sources:
        t = src.table
        col = next((c for c in ("energy_pj", "energy_j") if c in t.columns), None) or \
            next((c for c in t.columns if _TABLE_ENERGY.match(str(c))), None)
        wide = [c for c in t.columns if _component(str(c))]
        stat_cols = [c for c in src.stats.columns if _component(str(c))]
        if "component" in t.columns and col:
            unit = _ENERGY_UNITS[str(col).rsplit("_", 1)[1]]
            g = t.assign(energy_j=_numeric(t[col]) * unit).groupby(["run", "component"], sort=False)["energy_j"].sum()
            rows += [{"run": r, "component": str(c), "energy_j": v} for (r, c), v in g.items()]
            origins.append(f"{src.name}: table rows (component, {col})")
        elif wide:
            for c in wide:
                comp, unit = _component(str(c))  # type: ignore[misc]
                g = (_numeric(t[c]) * _ENERGY_UNITS[unit]).groupby(t["run"], sort=False).sum()
                rows += [{"run": r, "component": comp, "energy_j": v} for r, v in g.items()]
            origins.append(f"{src.name}: table columns {', '.join(map(str, wide))}")
        elif stat_cols:
            for c in stat_cols:
                comp, unit = _component(str(c))  # type: ignore[misc]
                for r, v in zip(src.stats["run"], _numeric(src.stats[c]), strict=True):
                    if pd.notna(v):
                        rows.append({"run": r, "component": comp, "energy_j": float(v) * _ENERGY_UNITS[unit]})
            origins.append(f"{src.name}: stats {', '.join(map(str, stat_cols))}")
    return (pd.DataFrame(rows), origins) if rows else None


def _component(col: str) -> tuple[str, str] | None:
    """energy_<component>_<unit> -> (component, unit); totals are not components."""
    m = _STATS_ENERGY.match(col)
    if not m or m.group(1) in ("total", "sum", "all"):
        return None
    return m.group(1), m.group(2)


def energy_figures(sources: list[Source]) -> tuple[list[FigureOut], list[str]]:
    # One figure per sweep and one for all single runs: sources are often different systems whose
    # energies differ by orders of magnitude, so sharing one axis would flatten all but the largest.
    groups = [(s.name, [s]) for s in sources if s.kind == "sweep"]
    runs = [s for s in sources if s.kind == "run"]
    if runs:
        groups.append(("runs", runs))
    out: list[FigureOut] = []
    for name, group in groups:
        found = _energy_long(group)
        if found is not None:
            out.append(_energy_figure(name, *found))
    if not out:
        return [], ["needs table columns `component` + `energy_pj` (or energy_<unit>), table columns "
                    "energy_<component>_<unit>, or stats named energy_<component>_<unit>"]
    return out, []


def _energy_figure(name: str, long: pd.DataFrame, origins: list[str]) -> FigureOut:
    pivot = long.pivot_table(index="run", columns="component", values="energy_j", aggfunc="sum", sort=False).fillna(0)
    note = ""
    pivot_draw = pivot
    if len(pivot) > MAX_BARS:
        note = f" Only the first {MAX_BARS} of {len(pivot)} runs are drawn; the CSV has all."
        pivot_draw = pivot.iloc[:MAX_BARS]
    unit, scale = _display_unit(float(pivot_draw.sum(axis=1).max() or 0.0))
    labels = [str(r) for r in pivot_draw.index]
    fig = Figure(figsize=(_label_width(labels), _bar_height(len(pivot_draw))), layout="constrained")
    ax = fig.add_subplot()
    left = np.zeros(len(pivot_draw))
    y = np.arange(len(pivot_draw))
    for comp in pivot_draw.columns:
        vals = pivot_draw[comp].to_numpy(dtype=float) / scale
        ax.barh(y, vals, 0.7, left=left, label=str(comp))
        left += vals
    ax.set_yticks(y, labels)
    ax.invert_yaxis()
    ax.set_xlabel(f"energy ({unit})")
    ax.set_title(f"Energy by component — {name}", fontsize=10)
    fig.legend(loc="outside right upper", fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    data = pivot.reset_index()
    data.columns = ["run"] + [f"{c}_energy_j" for c in pivot.columns]
    return FigureOut(slug("energy", name), f"Energy breakdown by component — {name}",
                     "Stacked energy per run, from " + "; ".join(origins) + "." + note, data, fig)


# ----------------------------------------------------------------------------------------------------------
# latency / throughput vs a swept parameter


def _is_latency(col: str) -> bool:
    c = col.lower()
    return c == "seconds" or (c.endswith("_s") and not c.endswith("_per_s")
                              and any(w in c for w in ("latency", "time", "runtime", "duration", "total")))


def _is_throughput(col: str) -> bool:
    c = col.lower()
    return not c.startswith("peak_") and ("throughput" in c or "bandwidth" in c or c.endswith("_per_s"))


def sweep_param_figures(sources: list[Source]) -> tuple[list[FigureOut], list[str]]:
    out: list[FigureOut] = []
    reasons: list[str] = []
    sweeps = [s for s in sources if s.kind == "sweep"]
    if not sweeps:
        return [], ["needs a sweep (inputs are single runs)"]
    for src in sweeps:
        if src.stats.empty:
            reasons.append(f"sweep {src.name}: no finished points")
            continue
        stats = src.stats
        ycols = [c for c in src.stat_columns if _is_latency(c) and _numeric(stats[c]).notna().any()][:2]
        ycols += [c for c in src.stat_columns if _is_throughput(c) and _numeric(stats[c]).notna().any()][:2]
        swept = [k for k in src.axis_keys if k != "seed" and k in stats.columns and stats[k].nunique(dropna=False) > 1]
        if not swept:
            reasons.append(f"sweep {src.name}: no axis with two or more values")
            continue
        if not ycols:
            reasons.append(f"sweep {src.name}: no latency (…latency…_s) or throughput (…_per_s, throughput, "
                           "bandwidth) stats")
            continue
        for key in swept:
            out.append(_param_figure(src, key, ycols))
    return out, reasons


def _param_figure(src: Source, key: str, ycols: list[str]) -> FigureOut:
    stats = src.stats
    others = [k for k in src.axis_keys if k != key and k in stats.columns and stats[k].nunique(dropna=False) > 1]
    numeric_x = _is_numeric_values(stats[key])
    data = stats[others + [key] + ycols].copy()
    short = short_keys(src.axis_keys)
    data["_line"] = data.apply(lambda r: _group_label(r, others, short), axis=1)
    lines = list(dict.fromkeys(data["_line"]))
    note = ""
    if len(lines) > MAX_LINES:
        note = f" Only {MAX_LINES} of {len(lines)} combinations of the other axes are drawn; the CSV has all."
        lines = lines[:MAX_LINES]
    if numeric_x:
        order = sorted(data[key].dropna().unique())
    else:
        order = list(dict.fromkeys(data[key].astype(str)))
    fig = Figure(figsize=(4.6 * len(ycols) + (2.8 if len(lines) > 1 else 0), 3.8), layout="constrained")
    axes = fig.subplots(1, len(ycols), squeeze=False)[0]
    for ax, y in zip(axes, ycols, strict=True):
        for line in lines:
            part = data[data["_line"] == line]
            if numeric_x:
                part = part.sort_values(key)
                xs = part[key].to_numpy(dtype=float)
            else:
                pos = {v: i for i, v in enumerate(order)}
                part = part.assign(_x=part[key].astype(str).map(pos)).sort_values("_x")
                xs = part["_x"].to_numpy(dtype=float)
            ax.plot(xs, _numeric(part[y]).to_numpy(dtype=float), marker="o", label=line)
        if numeric_x:
            vals = np.asarray(order, dtype=float)
            if len(vals) and vals.min() > 0 and vals.max() / vals.min() >= 16:
                ax.set_xscale("log", base=2 if all(float(v).is_integer() for v in vals) else 10)
        else:
            ax.set_xticks(range(len(order)), order)
            _rotate(ax, order)
        yv = _numeric(data[y]).dropna()
        if len(yv) and yv.min() > 0 and yv.max() / yv.min() >= 100:
            ax.set_yscale("log")
        ax.set_xlabel(key)
        ax.set_ylabel(y)
        ax.grid(alpha=0.3)
    if len(lines) > 1:  # outside the axes: lines often fill the whole plot area
        handles, labels = axes[-1].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside right upper", fontsize=7)
    fig.suptitle(f"{src.name}: vs {key}", fontsize=10)
    kind = " and ".join(w for w, f in (("latency", _is_latency), ("throughput", _is_throughput))
                        if any(f(c) for c in ycols))
    return FigureOut(slug("vs", src.name, key), f"{', '.join(ycols)} vs {key} — {src.name}",
                     f"{kind.capitalize()} against the swept `{key}`; one line per combination of the other "
                     f"axes.{note}", data.drop(columns=["_line"]), fig)


# ----------------------------------------------------------------------------------------------------------
# roofline

ROOFLINE_COLUMNS = ("op", "op_per_byte", "flops", "seconds")


def roofline_figures(sources: list[Source]) -> tuple[list[FigureOut], list[str]]:
    frames = [s.table for s in sources if all(c in s.table.columns for c in ROOFLINE_COLUMNS)]
    if not frames:
        return [], [f"needs table columns {', '.join(ROOFLINE_COLUMNS)}"]
    t = pd.concat([f[["source", "run", *ROOFLINE_COLUMNS]] for f in frames], ignore_index=True)
    for c in ("op_per_byte", "flops", "seconds"):
        t[c] = _numeric(t[c])
    t = t[(t["op_per_byte"] > 0) & (t["flops"] > 0) & (t["seconds"] > 0)].copy()
    if t.empty:
        return [], ["no operator row has positive op_per_byte, flops and seconds"]
    t["attained_flops_per_s"] = t["flops"] / t["seconds"]
    fig = Figure(figsize=(6.4, 4.6), layout="constrained")
    ax = fig.add_subplot()
    ops = list(dict.fromkeys(t["op"].astype(str)))
    top = ops[:10]
    for op in top:
        part = t[t["op"].astype(str) == op]
        ax.scatter(part["op_per_byte"], part["attained_flops_per_s"], s=18, label=op, alpha=0.8)
    rest = t[~t["op"].astype(str).isin(top)]
    if len(rest):
        ax.scatter(rest["op_per_byte"], rest["attained_flops_per_s"], s=12, label="other ops", c="grey", alpha=0.5)
    roofs = _roofs(sources)
    xlo, xhi = t["op_per_byte"].min() / 4, t["op_per_byte"].max() * 4
    xs = np.logspace(np.log10(xlo), np.log10(xhi), 200)
    for i, (peak, bw) in enumerate(roofs):
        ax.plot(xs, np.minimum(peak, bw * xs), color="k", lw=1, ls=("--", ":", "-.", (0, (5, 1)))[i % 4],
                label=f"roof {peak:.3g} FLOP/s, {bw:.3g} B/s")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("operational intensity (FLOP/byte)")
    ax.set_ylabel("attained FLOP/s")
    ax.set_title("Roofline: operators by Op/B", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    roof_note = (" Dashed lines: roofs from the runs' peak_flops_per_s and peak_bytes_per_s." if roofs else
                 " No roof lines: the runs' stats have no peak_flops_per_s / peak_bytes_per_s.")
    return [FigureOut("roofline", "Roofline", f"Each operator row placed by its Op/B and attained FLOP/s "
                      f"(flops / seconds), {len(t)} rows from {len(t.groupby(['source', 'run']))} runs.{roof_note}", t, fig)], []


def _roofs(sources: list[Source]) -> list[tuple[float, float]]:
    pairs: list[tuple[float, float]] = []
    for s in sources:
        if {"peak_flops_per_s", "peak_bytes_per_s"} <= set(s.stats.columns):
            for p, b in zip(_numeric(s.stats["peak_flops_per_s"]), _numeric(s.stats["peak_bytes_per_s"]), strict=True):
                if p > 0 and b > 0 and (float(p), float(b)) not in pairs:
                    pairs.append((float(p), float(b)))
    return pairs[:4]


# ----------------------------------------------------------------------------------------------------------
# unit-busy timeline (Gantt)

TIMELINE_COLUMNS = ("unit", "start_s", "end_s")


def _time_unit(max_s: float) -> tuple[str, float]:
    for name, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if max_s >= scale:
            return name, scale
    return "ns", 1e-9


def timeline_figures(sources: list[Source]) -> tuple[list[FigureOut], list[str]]:
    with_cols = [s for s in sources if all(c in s.table.columns for c in TIMELINE_COLUMNS) and len(s.table)]
    if not with_cols:
        return [], [f"needs table columns {', '.join(TIMELINE_COLUMNS)}"]
    # A timeline shows one run: every single-run input, else the first finished point of each sweep.
    chosen = [(s, s.table) for s in with_cols if s.kind == "run"]
    if not chosen:
        chosen = [(s, s.table[s.table["run"] == s.table["run"].iloc[0]]) for s in with_cols]
    out = []
    for src, t in chosen[:MAX_TIMELINES]:
        out.append(_timeline(src, t))
    return out, []


def _timeline(src: Source, t: pd.DataFrame) -> FigureOut:
    cols = [c for c in ("unit", "op", "start_s", "end_s") if c in t.columns]
    data = t[cols].copy()
    data["start_s"], data["end_s"] = _numeric(data["start_s"]), _numeric(data["end_s"])
    data = data.dropna(subset=["start_s", "end_s"])
    run = str(t["run"].iloc[0]) if src.kind == "run" else f"{src.name}: {t['run'].iloc[0]}"
    note = ""
    if len(data) > MAX_INTERVALS:
        note = f" Only the first {MAX_INTERVALS} of {len(data)} intervals are drawn; the CSV has all."
    draw = data.iloc[:MAX_INTERVALS]
    unit_name, scale = _time_unit(float(draw["end_s"].max() or 0.0))
    units = list(dict.fromkeys(draw["unit"].astype(str)))
    ops = list(dict.fromkeys(draw["op"].astype(str))) if "op" in draw.columns else []
    cmap = {op: f"C{i % 10}" for i, op in enumerate(ops)}
    fig = Figure(figsize=(8, max(2.0, 0.45 * len(units) + 1.2)), layout="constrained")
    ax = fig.add_subplot()
    for i, unit in enumerate(units):
        part = draw[draw["unit"].astype(str) == unit]
        spans = list(zip(part["start_s"] / scale, (part["end_s"] - part["start_s"]) / scale, strict=True))
        colors = [cmap[str(o)] for o in part["op"]] if ops else "C0"
        ax.broken_barh(spans, (i - 0.4, 0.8), facecolors=colors)
    ax.set_yticks(range(len(units)), units)
    ax.invert_yaxis()
    ax.set_xlabel(f"time ({unit_name})")
    ax.set_title(f"Unit busy timeline — {run}", fontsize=10)
    if 0 < len(ops) <= 12:
        from matplotlib.patches import Patch

        ax.legend(handles=[Patch(color=cmap[o], label=o) for o in ops], fontsize=7, loc="upper right")
    ax.grid(axis="x", alpha=0.3)
    which = "the single run" if src.kind == "run" else f"the first finished point of sweep {src.name}"
    return FigureOut(slug("timeline", run), f"Unit busy timeline — {run}",
                     f"Busy intervals per unit for {which}.{note}", data, fig)


BUILDERS: list[tuple[str, Builder]] = [
    ("Speedup against baselines", speedup_figures),
    ("Energy breakdown", energy_figures),
    ("Latency and throughput vs swept parameters", sweep_param_figures),
    ("Roofline", roofline_figures),
    ("Unit-busy timeline", timeline_figures),
]
