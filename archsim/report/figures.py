"""Report figures. Each builder returns the figures it could make and, if none, why not.

Figures are drawn on matplotlib `Figure` objects directly (Agg canvas, no pyplot), so building a report
never touches a GUI backend or pyplot's global state. The table behind every figure is returned with it
and written next to it as CSV.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from archsim.report.inputs import Source, short_keys
from archsim.report.palette import colors_of
from archsim.sweep.spec import format_value

MAX_BARS = 60  # beyond this a bar chart is unreadable; the CSV still has every run
MAX_LINES = 12
MAX_TIMELINES = 3
MAX_INTERVALS = 20000
MAX_TIMELINE_OPS = 20  # distinct colours in a timeline; further ops are drawn as one grey "other ops"
OTHER = "other ops"
LAYER_PREFIX = r"^L\d+\."  # per-layer op names: L3.ffn1 -> ffn1


@dataclass
class FigureOut:
    slug: str  # file stem under figures/
    title: str
    caption: str
    data: pd.DataFrame
    figure: Figure


Builder = Callable[[list[Source]], "tuple[list[FigureOut], list[str]]"]


def _time_axis(col: str, values: pd.Series) -> tuple[float, str]:
    """(factor, label) that show a column in seconds with an SI prefix ("seconds (µs)"), so its tick labels
    are not 0.000025; other columns unchanged."""
    from archsim.summary import label, unit_of
    from archsim.units import _PREFIX

    if unit_of(col) == "per_s" and len(values):        # a rate: scaled to an SI prefix, "flops (G/s)"
        top = float(values.abs().max())
        if np.isfinite(top) and top >= 1e3:
            exp3 = min(3 * int(np.floor(np.log10(top) / 3)), max(_PREFIX))
            return 10.0 ** -exp3, f"{label(col).removesuffix(' / s')} ({_PREFIX[exp3]}/s)"
    if not _in_seconds(col) or not len(values):
        return 1.0, axis_label(col)
    top = float(values.abs().max())
    if not np.isfinite(top) or top <= 0:
        return 1.0, axis_label(col)
    exp3 = max(min(3 * int(np.floor(np.log10(top) / 3)), 0), min(_PREFIX))
    return 10.0 ** -exp3, axis_label(col, _PREFIX[exp3])


def axis_label(col: str, scale_prefix: str | None = None) -> str:
    """A column as an axis label in words with its unit: "latency_per_token_s" -> "latency per token (ms)",
    "bandwidth_pct_of_peak" -> "bandwidth (% of peak)", "speedup_vs_8ch" -> "speedup vs 8ch (x)",
    "hw.channels" -> "hw channels". `scale_prefix` is the SI prefix the values were scaled to (times)."""
    from archsim.summary import label, unit_of

    unit = unit_of(col)
    words = label(col).replace(".", " ")
    if col.lower().endswith("_pct_of_peak"):
        return words.removesuffix(" of peak") + " (% of peak)"
    units = {"s": f"{scale_prefix or ''}s", "ms": "ms", "ns": "ns", "ps": "ps", "pj": "pJ", "j": "J", "w": "W",
             "mw": "mW", "bytes": "bytes", "gbps": "GB/s", "bandwidth": "B/s", "hz": "Hz", "pct": "%",
             "ratio": "fraction", "factor": "x", "cycles": "cycles", "pj_per_bit": "pJ/bit"}
    if unit == "per_s":
        return words
    if col.lower() == "seconds":
        return f"time ({scale_prefix or ''}s)"
    return f"{words} ({units[unit]})" if unit in units else words


def tick_text(v: float) -> str:
    """A tick value as a person reads it: 0.5, 20, 1,000, then SI prefixes (100 G) instead of 1e+11."""
    from archsim.units import fmt_si

    if v == 0 or 1e-3 <= abs(v) < 1e4:
        return f"{v:,.6g}"
    return fmt_si(v, "", 3).strip()


def readable_log_axis(ax: Axes, which: str = "y") -> None:
    """Label a log axis with plain numbers (1, 2, 5 x 10^k when it spans few decades, else powers of ten)
    instead of matplotlib's 2x10^1 .. 6x10^1 math text, which leaves values unreadable or overlapping."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis = ax.yaxis if which == "y" else ax.xaxis
    lo, hi = (ax.get_ylim() if which == "y" else ax.get_xlim())
    decades = np.log10(hi / lo) if lo > 0 and hi > 0 else 10.0
    subs = (1.0, 2.0, 5.0) if decades <= 2.5 else (1.0,)
    axis.set_major_locator(LogLocator(base=10, subs=subs))
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: tick_text(v)))
    axis.set_minor_formatter(NullFormatter())


def palette(n: int) -> list:
    """n colours, all different: tab10 up to 10, tab20 up to 20 (its 10 strong shades first, then the 10
    light ones), else evenly spaced on a perceptual colormap (the default colour cycle repeats after 10)."""
    from matplotlib import colormaps

    if n <= 10:
        return [colormaps["tab10"](i) for i in range(n)]
    if n <= 20:
        return [colormaps["tab20"](i) for i in [*range(0, 20, 2), *range(1, 20, 2)][:n]]
    cmap = colormaps["turbo"]
    return [cmap(0.05 + 0.9 * i / (n - 1)) for i in range(n)]


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
    fig, ax = _grouped_barh(pivot, len(data))
    ax.invert_yaxis()
    _speedup_axis(ax, pivot.to_numpy(dtype=float), "speedup (x)")
    ax.set_title("speedup against each run's baselines", fontsize=10)
    fig.legend(loc="outside right upper", fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    return FigureOut("speedup-runs", "Speedup against baselines (single runs)",
                     "Each run's own `speedup_vs_<baseline>` stats (latency of the baseline / latency of the run).",
                     data, fig)


LOG_SPEEDUP_RATIO = 100  # speed-ups spanning more than this factor get a (labelled) log axis


def _speedup_axis(ax: Axes, values: np.ndarray, label: str) -> None:
    """Linear axis from 0 with a line at 1 (= the baseline); a labelled log axis only when the values span
    more than LOG_SPEEDUP_RATIO (bars on a log axis have no natural start, so the label says so)."""
    vals = values[np.isfinite(values) & (values > 0)]
    if len(vals) and vals.max() / vals.min() > LOG_SPEEDUP_RATIO:
        ax.set_xscale("log")
        readable_log_axis(ax, "x")
        ax.set_xlabel(f"{label}, log scale (bars start at the axis edge, not at 0)")
    else:
        ax.set_xlim(left=0, right=max(1.0, float(vals.max()) if len(vals) else 1.0) * 1.08)
        ax.set_xlabel(label)
    ax.axvline(1.0, color="k", lw=0.8, ls="--")


def _grouped_barh(pivot: pd.DataFrame, n_bars: int) -> tuple[Figure, Any]:
    """Horizontal grouped bars: one group per row of `pivot`, one coloured bar per column (point labels are
    long and read best along the y axis)."""
    fig = Figure(figsize=(_label_width([str(g) for g in pivot.index]), _bar_height(n_bars)), layout="constrained")
    ax = fig.add_subplot()
    n_var = max(1, len(pivot.columns))
    height = 0.8 / n_var
    y = np.arange(len(pivot.index))
    colors = palette(n_var)
    for i, col in enumerate(pivot.columns):
        ax.barh(y + (i - (n_var - 1) / 2) * height, pivot[col].to_numpy(dtype=float), height, label=str(col),
                color=colors[i])
    ax.set_yticks(y, [str(g) for g in pivot.index])
    return fig, ax


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
        out += [_speedup_figure(src, name, spec) for name, spec in with_base.items()]
    return out, reasons


def _speedup_figure(src: Source, name: str, spec: dict[str, Any]) -> FigureOut:
    """Horizontal bars of one sweep metric with a baseline: one group per combination of the other axes, one
    bar per baseline-key variant (point labels are long and read best along the y axis)."""
    base_keys = [k for k in spec["baseline"] if k in src.stats.columns]
    other = [k for k in src.axis_keys if k not in base_keys and k in src.stats.columns]
    # a key zipped with an earlier one only repeats it in the labels
    other = [k for i, k in enumerate(other) if not any(_determined_by(src.stats, k, e) for e in other[:i])]
    data = src.stats[other + base_keys + [name]].copy()
    short = short_keys(src.axis_keys)
    data["group"] = data.apply(lambda r, keys=other, sh=short: _group_label(r, keys, sh), axis=1)
    data["variant"] = data.apply(lambda r, keys=base_keys, sh=short: _group_label(r, keys, sh), axis=1)
    if len(data) > MAX_BARS:
        data = data.iloc[:MAX_BARS]
    pivot = data.pivot_table(index="group", columns="variant", values=name, aggfunc="first", sort=False)
    fig, ax = _grouped_barh(pivot, len(data))
    ax.invert_yaxis()
    _speedup_axis(ax, pivot.to_numpy(dtype=float), f"{axis_label(name)} (x; dashed line: 1 = baseline)")
    base_text = ", ".join(f"{k}={format_value(v)}" for k, v in spec["baseline"].items())
    ax.set_title(f"{src.name}: {name}", fontsize=10)
    fig.legend(loc="outside right upper", fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    return FigureOut(slug("speedup", src.name, name), f"{name} — {src.name}",
                     f"`{name} = {spec['expr']}` per point, against the baseline point with "
                     f"{base_text} and the same values of the other axes (dashed line: 1 = as the "
                     "baseline).", data.drop(columns=["group", "variant"]), fig)


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


_BY_COMPONENT = re.compile(r"^energy(_per_[a-z]+)?_by_component_(pj|nj|uj|mj|j)$")
_TOTAL_ENERGY = ("energy_total_pj", "energy_total_j", "energy_pj", "energy_j")


def _as_dict(value: object) -> dict | None:
    if isinstance(value, dict):
        return value
    if isinstance(value, str) and value.startswith("{"):
        try:
            import json

            out = json.loads(value)
        except ValueError:
            return None
        return out if isinstance(out, dict) else None
    return None


def _energy_long(sources: list[Source]) -> tuple[pd.DataFrame, list[str], str] | None:
    """(run, component, energy_j) rows, the origins and what the energy is of ("run" or "token").

    Per source, in order of preference: a stats dict energy[_per_<x>]_by_component_<unit> (complete: it
    has the energy that no operator owns, such as DRAM background power); table rows with a `component`
    column and an energy column; table columns energy_<component>_<unit> (summed over rows); stats named
    energy_<component>_<unit>. When a run also states its total energy (stats energy_total_pj, energy_pj
    ...) and the components fall short of it, the rest is drawn as `unattributed`, so a bar is never
    smaller than the run's energy."""
    rows: list[dict[str, object]] = []
    origins: list[str] = []
    bases: list[tuple[Source, str, list[dict[str, object]]]] = []
    for src in sources:
        got = _source_energy(src)
        if got is None:
            continue
        found, per, origin, complete = got
        origins.append(origin)
        if found and not complete:
            found += _unattributed(src, found)
        if found:
            bases.append((src, per, found))
    pers = {per for _, per, _ in bases}
    per = pers.pop() if len(pers) == 1 else "run"
    for src, basis, found in bases:
        if basis != per:   # mixed bases: per-token energies times the run's token count (stats `tokens`)
            counts = dict(zip(src.stats["run"], _numeric(src.stats.get(f"{basis}s", pd.Series(np.nan,
                                                                                              index=src.stats.index))),
                              strict=True))
            found = [{**r, "energy_j": float(r["energy_j"]) * counts.get(r["run"], np.nan)}  # type: ignore[arg-type]
                     for r in found]
            origins.append(f"{src.name}: per-{basis} energies times stats {basis}s")
        rows += found
    return (pd.DataFrame(rows), origins, per) if rows else None


def _source_energy(src: Source) -> tuple[list[dict[str, object]], str, str, bool] | None:
    """One source's (rows, what they are per, where they came from, complete: nothing unattributed to add), by
    the first form it has (_energy_long's order), or None."""
    t = src.table
    by_comp = next((c for c in src.stats.columns if _BY_COMPONENT.match(str(c))
                    and src.stats[c].map(_as_dict).notna().any()), None)
    if by_comp:
        return (*_energy_by_component(src, str(by_comp)), True)
    col = next((c for c in ("energy_pj", "energy_j") if c in t.columns), None) or \
        next((c for c in t.columns if _TABLE_ENERGY.match(str(c))), None)
    if "component" in t.columns and col:
        unit = _ENERGY_UNITS[str(col).rsplit("_", 1)[1]]
        g = t.assign(energy_j=_numeric(t[col]) * unit).groupby(["run", "component"], sort=False)["energy_j"].sum()
        return ([{"run": r, "component": str(c), "energy_j": v} for (r, c), v in g.items()], "run",
                f"{src.name}: table rows (component, {col})", False)
    wide = [c for c in t.columns if _component(str(c))]
    if wide:
        found: list[dict[str, object]] = []
        for c in wide:
            comp, unit_name = _component(str(c))  # type: ignore[misc]
            g = (_numeric(t[c]) * _ENERGY_UNITS[unit_name]).groupby(t["run"], sort=False).sum()
            found += [{"run": r, "component": comp, "energy_j": v} for r, v in g.items()]
        return found, "run", f"{src.name}: table columns {', '.join(map(str, wide))}", False
    stat_cols = [c for c in src.stats.columns if _component(str(c))]
    if stat_cols:
        found = []
        for c in stat_cols:
            comp, unit_name = _component(str(c))  # type: ignore[misc]
            for r, v in zip(src.stats["run"], _numeric(src.stats[c]), strict=True):
                if pd.notna(v):
                    found.append({"run": r, "component": comp, "energy_j": float(v) * _ENERGY_UNITS[unit_name]})
        return found, "run", f"{src.name}: stats {', '.join(map(str, stat_cols))}", False
    return None


def _energy_by_component(src: Source, by_comp: str) -> tuple[list[dict[str, object]], str, str]:
    """Rows of a stats dict energy[_per_<x>]_by_component_<unit>: (rows, per, origin)."""
    m = _BY_COMPONENT.match(by_comp)
    assert m is not None
    unit = _ENERGY_UNITS[m.group(2)]
    per = m.group(1).removeprefix("_per_") if m.group(1) else "run"
    found = [{"run": r, "component": str(comp), "energy_j": float(v) * unit}
             for r, value in zip(src.stats["run"], src.stats[by_comp].map(_as_dict), strict=True)
             for comp, v in (value or {}).items()]
    return found, per, f"{src.name}: stats {by_comp}"


def _unattributed(src: Source, found: list[dict[str, object]]) -> list[dict[str, object]]:
    """Rows for the energy a run's stated total has beyond its components (more than 0.1 % of it)."""
    total_col = next((c for c in _TOTAL_ENERGY if c in src.stats.columns), None)
    if total_col is None:
        return []
    scale = _ENERGY_UNITS[total_col.rsplit("_", 1)[1]]
    sums: dict[object, float] = {}
    for row in found:
        sums[row["run"]] = sums.get(row["run"], 0.0) + float(row["energy_j"])  # type: ignore[arg-type]
    out = []
    for r, total in zip(src.stats["run"], _numeric(src.stats[total_col]) * scale, strict=True):
        rest = float(total) - sums.get(r, 0.0) if pd.notna(total) else 0.0
        if rest > 1e-3 * float(total):
            out.append({"run": r, "component": "unattributed", "energy_j": rest})
    return out


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
        return [], ["needs stats energy_by_component_<unit> (a dict), table columns `component` + `energy_pj` "
                    "(or energy_<unit>), table columns energy_<component>_<unit>, or stats named "
                    "energy_<component>_<unit>"]
    return out, []


def _energy_figure(name: str, long: pd.DataFrame, origins: list[str], per: str = "run") -> FigureOut:
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
    colors = colors_of([str(c) for c in pivot_draw.columns])    # a component's colour is fixed across figures
    for comp, color in zip(pivot_draw.columns, colors, strict=True):
        vals = pivot_draw[comp].to_numpy(dtype=float) / scale
        ax.barh(y, vals, 0.7, left=left, label=str(comp), color="0.6" if comp == "unattributed" else color)
        left += vals
    ax.set_yticks(y, labels)
    ax.invert_yaxis()
    ax.set_xlim(left=0)
    ax.set_xlabel(f"energy per {per} ({unit})")
    ax.set_title(f"Energy by component{' per ' + per if per != 'run' else ''} — {name}", fontsize=10)
    fig.legend(loc="outside right upper", fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    data = pivot.reset_index()
    data.columns = ["run"] + [f"{c}_energy_j" for c in pivot.columns]
    return FigureOut(slug("energy", name), f"Energy breakdown by component — {name}",
                     f"Stacked energy per {per} for each run (background and other energy no operator owns "
                     "included), from " + "; ".join(origins) + "." + note, data, fig)


# ----------------------------------------------------------------------------------------------------------
# latency / throughput vs a swept parameter


def _in_seconds(col: str) -> bool:
    c = col.lower()
    return c == "seconds" or (c.endswith("_s") and not c.endswith("_per_s"))


def _is_latency(col: str) -> bool:
    c = col.lower()
    return _in_seconds(c) and (c == "seconds" or any(w in c for w in ("latency", "time", "runtime", "duration",
                                                                     "total")))


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
        # an axis zipped with an earlier one (a preset and its capacity) adds no figure of its own
        swept = [k for i, k in enumerate(swept) if not any(_determined_by(stats, k, e) for e in swept[:i])]
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


def _determined_by(stats: pd.DataFrame, a: str, b: str) -> bool:
    """True if column a is a function of column b (each value of b comes with one value of a), as an axis
    zipped with an earlier one is (a preset and its capacity); in a grid, a varies within each b."""
    pairs = stats[[a, b]].astype(str).drop_duplicates()
    return bool(pairs[b].is_unique)


def _param_figure(src: Source, key: str, ycols: list[str]) -> FigureOut:
    stats = src.stats
    others = [k for k in src.axis_keys if k != key and k in stats.columns and stats[k].nunique(dropna=False) > 1]
    # a key zipped with an earlier one only repeats it in the legend
    others = [k for i, k in enumerate(others) if not any(_determined_by(stats, k, e) for e in [key, *others[:i]])]
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
    colors = palette(len(lines))
    pos = {v: i for i, v in enumerate(order)}
    width = 0.8 / max(1, len(lines))
    for ax, y in zip(axes, ycols, strict=True):
        yv = _numeric(data[y]).dropna()
        log_y = bool(len(yv) and yv.min() > 0 and yv.max() / yv.min() >= 100)
        factor, ylabel = _time_axis(y, yv)
        for j, (line, color) in enumerate(zip(lines, colors, strict=True)):
            part = data[data["_line"] == line]
            xs = None if numeric_x else \
                part[key].astype(str).map(pos).to_numpy(dtype=float) + (j - (len(lines) - 1) / 2) * width
            _draw_line(ax, part, key, y, factor, xs, log_y, width, line, color)
        _param_axes(ax, key, order, numeric_x, log_y, ylabel)
    if len(lines) > 1:  # outside the axes: lines often fill the whole plot area
        handles, labels = axes[-1].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside right upper", fontsize=7)
    fig.suptitle(f"{src.name}: vs {key}", fontsize=10)
    kind = " and ".join(w for w, f in (("latency", _is_latency), ("throughput", _is_throughput))
                        if any(f(c) for c in ycols))
    return FigureOut(slug("vs", src.name, key), f"{', '.join(ycols)} vs {key} — {src.name}",
                     f"{kind.capitalize()} against the swept `{key}`; one "
                     f"{'line' if numeric_x else 'bar colour'} per combination of the other axes.{note}",
                     data.drop(columns=["_line"]), fig)


def _draw_line(ax: Any, part: pd.DataFrame, key: str, y: str, factor: float, xs: Any, log_y: bool, width: float,
               line: str, color: Any) -> None:
    """One combination of the other axes: a line over a numeric x (`xs` None), else grouped bars at `xs`, or
    dodged points on a log axis (where bars have no natural start): categories have no order in between."""
    if xs is None:
        part = part.sort_values(key)
        ax.plot(part[key].to_numpy(dtype=float), _numeric(part[y]).to_numpy(dtype=float) * factor,
                marker="o", label=line, color=color)
        return
    vals = _numeric(part[y]).to_numpy(dtype=float) * factor
    if log_y:
        ax.plot(xs, vals, marker="o", ls="none", label=line, color=color)
    else:
        ax.bar(xs, vals, width, label=line, color=color)


def _param_axes(ax: Any, key: str, order: list[Any], numeric_x: bool, log_y: bool, ylabel: str) -> None:
    """Scales, ticks and labels of one parameter plot: a log x over a wide numeric range (ticks at the swept
    values when they are whole numbers), category ticks otherwise; a log y over two decades."""
    if numeric_x:
        vals = np.asarray(order, dtype=float)
        if len(vals) and vals.min() > 0 and vals.max() / vals.min() >= 16:
            ax.set_xscale("log", base=2 if all(float(v).is_integer() for v in vals) else 10)
    else:
        ax.set_xticks(range(len(order)), order)
        _rotate(ax, order)
    if log_y:
        ax.set_yscale("log")
        readable_log_axis(ax, "y")
    if numeric_x and ax.get_xscale() == "log" and not all(float(v).is_integer() for v in order):
        readable_log_axis(ax, "x")
    elif numeric_x and ax.get_xscale() == "log":
        from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

        ax.xaxis.set_major_locator(FixedLocator([float(v) for v in order]))   # the swept values
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: tick_text(v)))
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(axis_label(key))
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3, axis="y" if not numeric_x else "both")


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
    fig = Figure(figsize=(8.6, 4.8), layout="constrained")
    ax = fig.add_subplot()
    ops = list(dict.fromkeys(t["op"].astype(str)))
    top = ops[:MAX_TIMELINE_OPS - 1]
    for op, color in zip(top, palette(len(top)), strict=True):
        part = t[t["op"].astype(str) == op]
        ax.scatter(part["op_per_byte"], part["attained_flops_per_s"], s=18, label=op, alpha=0.8, color=[color])
    rest = t[~t["op"].astype(str).isin(top)]
    if len(rest):
        ax.scatter(rest["op_per_byte"], rest["attained_flops_per_s"], s=12, label="other ops", c="grey", alpha=0.5)
    roofs = _roofs(sources)
    xlo, xhi = t["op_per_byte"].min() / 4, t["op_per_byte"].max() * 4
    xs = np.logspace(np.log10(xlo), np.log10(xhi), 200)
    from archsim.units import fmt_bandwidth, fmt_si

    for i, (peak, bw, who) in enumerate(roofs):
        ax.plot(xs, np.minimum(peak, bw * xs), color="k", lw=1, ls=("--", ":", "-.", (0, (5, 1)))[i % 4],
                label=f"roof of {who}: {fmt_si(peak, 'FLOP/s')}, {fmt_bandwidth(bw)}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    readable_log_axis(ax, "x")
    readable_log_axis(ax, "y")
    ax.set_xlabel("operational intensity (FLOP/byte)")
    ax.set_ylabel("attained throughput (FLOP/s)")
    ax.set_title("Roofline: operators by Op/B", fontsize=10)
    ax.grid(alpha=0.3)
    fig.legend(fontsize=7, loc="outside right upper")
    roof_note = (" Dashed lines: roofs from the runs' peak_flops_per_s and peak_bytes_per_s." if roofs else
                 " No roof lines: the runs' stats have no peak_flops_per_s / peak_bytes_per_s.")
    return [FigureOut("roofline", "Roofline", f"Each operator row placed by its Op/B and attained FLOP/s "
                      f"(flops / seconds), {len(t)} rows from {len(t.groupby(['source', 'run']))} runs.{roof_note}", t, fig)], []


def _roofs(sources: list[Source]) -> list[tuple[float, float, str]]:
    """(peak FLOP/s, peak bytes/s, the runs they belong to) of up to four distinct roofs."""
    found: dict[tuple[float, float], list[str]] = {}
    for s in sources:
        if {"peak_flops_per_s", "peak_bytes_per_s"} <= set(s.stats.columns):
            runs = s.stats["run"] if "run" in s.stats.columns else pd.Series([s.name] * len(s.stats))
            for p, b, run in zip(_numeric(s.stats["peak_flops_per_s"]), _numeric(s.stats["peak_bytes_per_s"]),
                                 runs, strict=True):
                if p > 0 and b > 0:
                    found.setdefault((float(p), float(b)), []).append(str(run))
    out = []
    for (p, b), runs in list(found.items())[:4]:
        who = runs[0] if len(runs) == 1 else f"{runs[0]} +{len(runs) - 1} runs"
        out.append((p, b, who))
    return out


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


def _timeline_of(src: Source, t: pd.DataFrame) -> str:
    """What part of the run its timeline shows (the stat `timeline_of`), "" if the run does not say."""
    if "timeline_of" not in src.stats.columns:
        return ""
    rows = src.stats[src.stats["run"] == t["run"].iloc[0]] if "run" in src.stats.columns else src.stats
    value = rows["timeline_of"].iloc[0] if len(rows) else None
    return value if isinstance(value, str) else ""


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
    # Colour by op, with per-layer names (L3.ffn1) folded into their role (ffn1): the MAX_TIMELINE_OPS - 1
    # busiest get their own colours, the rest are drawn hatched as one "other ops".
    if "op" in draw.columns:
        key = draw["op"].astype(str).str.replace(LAYER_PREFIX, "", regex=True)
        busy = (draw["end_s"] - draw["start_s"]).groupby(key, sort=False).sum()
        ops = list(busy.index)
        if len(ops) > MAX_TIMELINE_OPS:
            top = set(busy.sort_values(ascending=False).index[:MAX_TIMELINE_OPS - 1])
            ops = [o for o in ops if o in top]
            key = key.where(key.isin(top), OTHER)
    else:
        ops, key = ["busy"], pd.Series("busy", index=draw.index)
    cmap = dict(zip(ops, palette(len(ops)), strict=True))
    legend_rows = len(ops) + (OTHER in set(key))
    fig = Figure(figsize=(9.5, max(2.2, 0.45 * len(units) + 1.2, 0.19 * legend_rows + 0.9)), layout="constrained")
    ax = fig.add_subplot()
    for i, unit in enumerate(units):
        sel = draw["unit"].astype(str) == unit
        for other in (False, True):
            part = draw[sel & ((key == OTHER) == other)]
            if part.empty:
                continue
            spans = list(zip(part["start_s"] / scale, (part["end_s"] - part["start_s"]) / scale, strict=True))
            if other:
                ax.broken_barh(spans, (i - 0.4, 0.8), facecolors="white", edgecolors="0.4", hatch="////", lw=0.3)
            else:
                ax.broken_barh(spans, (i - 0.4, 0.8), facecolors=[cmap[k] for k in key[part.index]])
    ax.set_yticks(range(len(units)), units)
    ax.invert_yaxis()
    ax.set_xlabel(f"time ({unit_name})")
    step = _timeline_of(src, t)
    ax.set_title(f"Unit busy timeline — {run}" + (f", {step}" if step else ""), fontsize=10)
    from matplotlib.patches import Patch

    handles = [Patch(color=cmap[o], label=o) for o in ops]
    if OTHER in set(key):
        handles.append(Patch(facecolor="white", edgecolor="0.4", hatch="////", label=OTHER))
    fig.legend(handles=handles, fontsize=7, loc="outside right upper",
               title="op" if "op" in draw.columns else None, title_fontsize=7)
    ax.grid(axis="x", alpha=0.3)
    which = "the single run" if src.kind == "run" else f"the first finished point of sweep {src.name}"
    if step:        # a run that records one step of many (PIM-GPT's last decode step) says which
        which = f"{step} of {which}"
    return FigureOut(slug("timeline", run), f"Unit busy timeline — {run}",
                     f"Busy intervals per unit for {which}.{note}", data, fig)


BUILDERS: list[tuple[str, Builder]] = [
    ("Speedup against baselines", speedup_figures),
    ("Energy breakdown", energy_figures),
    ("Latency and throughput vs swept parameters", sweep_param_figures),
    ("Roofline", roofline_figures),
    ("Unit-busy timeline", timeline_figures),
]
