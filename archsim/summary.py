"""Formatted run summaries for any system, driven by the unit suffixes of the stat names (DESIGN.md
"Units in names"): `iteration_s 0.000687336` prints as `iteration  687.3 µs`, `dram_energy_pj 1.98574e+09` as
`dram energy  1.99 mJ`, `mem_bw_util 0.42` as `mem bw util  42.0 %`.

A stat's unit is read from the end of its name, longest suffix first:

    _s, _ms, _ns, _ps        time              _j, _pj              energy
    _pj_per_bit              energy per bit    _w, _mw              power
    _bytes                   bytes (SI)        _GBps, _bytes_per_s  bandwidth
    _hz                      frequency         _cycles, cycles      cycles (thousands separators)
    _pct, _pct_of_peak       percent           _util, _rate, _fraction, _share, utilisation   a 0..1 ratio, as %
    _per_s                   a rate ("tokens_per_s" -> "tokens / s")
    speedup*                 a factor ("3.20x")

Anything else: integers with thousands separators, other numbers with 4 significant digits. A mapping (e.g.
`energy_pj: {read: .., write: ..}`) is printed item by item with its name's unit.
"""
from __future__ import annotations

import math
import sys
from typing import Any

from archsim.units import fmt_bandwidth, fmt_energy, fmt_si, fmt_time

# (suffix, label suffix, formatter); the first matching suffix wins, so longer ones come first
_RATIO = ("_util", "_rate", "_fraction", "_share", "utilisation", "utilization")
_SIM = ("wall_s", "sim_wall_s", "sim_kernel_s", "sim_compile_s", "kernel_wall_s", "cycles_per_s")


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _plain(v: float, integer: bool) -> str:
    if integer:
        return f"{int(v):,}"
    if not math.isfinite(v):
        return str(v)
    if v != 0 and abs(v) >= 1e6:
        return fmt_si(v, "", 4).strip()          # 1.194 M
    if v != 0 and abs(v) < 1e-3:
        return f"{v:.4g}"
    return f"{v:,.4g}" if abs(v) < 1000 else f"{v:,.1f}"


def unit_of(key: str) -> str:
    """The unit a stat's name declares ("time", "energy", ... or "" for none)."""
    k = key.lower()
    rules = (
        ("_pj_per_bit", "pj_per_bit"), ("_bytes_per_s", "bandwidth"), ("_gbps", "gbps"),
        ("_pct_of_peak", "pct"), ("_pct", "pct"), ("_per_s", "per_s"),
        ("_cycles", "cycles"), ("_bytes", "bytes"), ("_ms", "ms"), ("_ns", "ns"), ("_ps", "ps"),
        ("_pj", "pj"), ("_mw", "mw"), ("_hz", "hz"), ("_j", "j"), ("_w", "w"), ("_s", "s"),
    )
    if k.startswith("speedup"):
        return "factor"
    if k == "cycles" or k.endswith("_cycles"):
        return "cycles"
    if k in ("seconds", "time_s"):
        return "s"
    if k.endswith(_RATIO):
        return "ratio"
    for suffix, unit in rules:
        if k.endswith(suffix):
            return unit
    return ""


def label(key: str) -> str:
    """A stat's name in words, without its unit suffix: "energy_per_token_j" -> "energy per token"."""
    unit = unit_of(key)
    k = key
    strip = {"s": "_s", "ms": "_ms", "ns": "_ns", "ps": "_ps", "pj": "_pj", "j": "_j", "w": "_w", "mw": "_mw",
             "bytes": "_bytes", "hz": "_hz", "gbps": "_GBps", "pct": "_pct", "pj_per_bit": "_pj_per_bit",
             "bandwidth": "_bytes_per_s", "cycles": "_cycles"}.get(unit)
    if unit == "pct" and k.endswith("_pct_of_peak"):
        k = k[: -len("_pct_of_peak")] + " of peak"
    elif strip and k.lower().endswith(strip.lower()):
        k = k[: -len(strip)]
    if unit == "per_s":
        k = k[: -len("_per_s")] + " / s"
    return k.replace("_", " ")


# How a number with each declared unit is written (the unit comes from the stat's name, unit_of).
def _percent(pct: float) -> str:
    """One decimal, but never a small share shown as 0.0 % (a GEMM's array busy 0.012 % of the time)."""
    return f"{pct:.1f} %" if pct == 0 or abs(pct) >= 0.1 or not math.isfinite(pct) else f"{pct:.2g} %"


_UNIT_FORMAT: dict[str, Any] = {
    "s": fmt_time,
    "ms": lambda v: fmt_time(v * 1e-3),
    "ns": lambda v: fmt_time(v * 1e-9),
    "ps": lambda v: fmt_time(v * 1e-12),
    "j": fmt_energy,
    "pj": lambda v: fmt_energy(v * 1e-12),
    "pj_per_bit": lambda v: f"{v:.3g} pJ/bit",
    "w": lambda v: fmt_si(v, "W"),
    "mw": lambda v: fmt_si(v * 1e-3, "W"),
    "bytes": lambda v: fmt_si(v, "B"),
    "gbps": lambda v: fmt_bandwidth(v * 1e9),
    "bandwidth": fmt_bandwidth,
    "hz": lambda v: fmt_si(v, "Hz"),
    "pct": lambda v: _percent(v),
    "ratio": lambda v: _percent(100 * v),
    "factor": lambda v: f"{v:.2f}x",
    "cycles": lambda v: f"{int(v):,} cycles" if v.is_integer() else f"{v:,.1f} cycles",
    "per_s": lambda v: _plain(v, integer=False),
}


def format_value(key: str, value: Any) -> str:
    """A stat's value with the unit its name declares."""
    if isinstance(value, dict):
        parts = [f"{k} {format_value(key, v)}" for k, v in value.items() if _num(v) is None or _num(v) != 0]
        return ", ".join(parts) if parts else "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    v = _num(value)
    if v is None:
        return "-" if value is None else str(value)
    unit = unit_of(key)
    if unit in _UNIT_FORMAT:
        return _UNIT_FORMAT[unit](v)
    return _plain(v, isinstance(value, int) or (v.is_integer() and abs(v) < 1e15 and unit == ""))


def summary_rows(stats: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, formatted value) of every scalar or mapping stat; the simulator's own figures (wall time,
    compile time) last."""
    keys = [k for k, v in stats.items() if isinstance(v, int | float | str | bool | dict) or v is None]
    sim = [k for k in keys if k in _SIM or k.startswith("sim_")]
    rows = [(label(k), format_value(k, stats[k])) for k in keys if k not in sim]
    if sim:
        rows.append(("simulator", ", ".join(f"{label(k).removeprefix('sim ')} {format_value(k, stats[k])}"
                                            for k in sim)))
    return rows


def stage_rows(stages: Any, max_rows: int = 20) -> list[str]:
    """A per-stage table (lines) of a result's `stages` table: time and share per stage over all layers and
    samples, utilisations weighted by time. Empty if the table has no `stage` and `seconds` columns."""
    if stages is None or not {"stage", "seconds"} <= set(getattr(stages, "columns", ())):
        return []
    utils = [c for c in stages.columns if c.endswith(_RATIO)]
    df = stages.copy()
    for c in utils:
        df[c] = df[c] * df["seconds"]
    g = df.groupby("stage", sort=False)[["seconds", *utils]].sum()
    total = float(g["seconds"].sum()) or 1.0
    for c in utils:
        g[c] = g[c] / g["seconds"].where(g["seconds"] > 0, 1.0)
    g = g.sort_values("seconds", ascending=False)
    head = f"    {'stage':<18}{'time':>11}{'share':>8}" + "".join(f"{label(c):>14}" for c in utils)
    lines = [head]
    for name, r in g.head(max_rows).iterrows():
        lines.append(f"    {str(name):<18}{fmt_time(r['seconds']):>11}{100 * r['seconds'] / total:>7.1f}%"
                     + "".join(f"{100 * r[c]:>13.1f}%" for c in utils))
    if len(g) > max_rows:
        lines.append(f"    ({len(g) - max_rows} more stages: --json FILE writes the whole table)")
    return lines


# Features of a model that a system may or may not model; a system lists the ones it does in its module's
# `features` (registered with it: archsim.registry.model_features). (name, description of the model's instance)
FEATURES = {
    "moe": lambda m: (m.n_experts > 1, f"mixture-of-experts FFN ({m.n_experts} experts, {m.experts_per_token} "
                                       "per token)"),
    "gqa": lambda m: (m.n_kv_heads < m.n_heads, f"grouped-query attention ({m.n_kv_heads} KV heads for "
                                                f"{m.n_heads} query heads)"),
    "gated_ffn": lambda m: (m.gated_ffn, "gated FFN (three weight matrices)"),
}


def model_notes(config: dict[str, Any], modelled: frozenset[str] | None) -> list[str]:
    """What a run's summary must say about its model: the layers simulated when fewer than the model's, and the
    model's features the system does not model (`modelled`: the features the system registered; None: not declared)."""
    model_name = config.get("model")
    if not isinstance(model_name, str):
        return []
    try:
        from archsim.workload.spec import load_model

        model = load_model(model_name)
    except Exception:   # noqa: BLE001  (the run itself loaded it; a note is not worth a second error)
        return []
    notes = []
    layers = config.get("layers")
    if isinstance(layers, int) and 0 < layers < model.n_layers:
        these = "that layer" if layers == 1 else f"those {layers} layers"
        notes.append(f"layers={layers}: {layers} of {model.name}'s {model.n_layers} layers simulated; times, "
                     f"tokens/s and energies are of {these}, not of the whole model")
    if modelled is not None:
        missing = [text for key, probe in FEATURES.items() for has, text in [probe(model)]
                   if has and key not in modelled]
        if missing:
            notes.append(f"{model.name} has {'; '.join(missing)}: not modelled by system {config.get('system')}, "
                         "which simulates the model without it (the figures are not this model's)")
    return notes


def print_table(rows: list[tuple[str, Any]], out: Any = None) -> None:
    out = out or sys.stdout
    width = max((len(k) for k, _ in rows), default=0)
    for key, value in rows:
        out.write(f"  {key:<{width}}  {value}\n")


def print_generic(system: str, stats: dict[str, Any], df: Any = None, max_rows: int = 30,
                  tables: dict[str, Any] | None = None) -> None:
    """A summary of any system: each stat with the unit its name declares (archsim.summary), the per-stage
    table when the result has one, the result table when short, and the notes about the model."""
    print(f"{system}")
    print_table(summary_rows(stats))
    stages = stage_rows((tables or {}).get("stages"))
    if stages:
        print("  per stage (all layers, all samples):")
        print("\n".join(stages))
    if df is not None and len(df):
        if len(df) > max_rows:
            print(f"  ({len(df)} result rows: --csv FILE writes them)")
        else:
            import pandas as pd

            # every cell with the unit its column's name declares (archsim.summary), as the stats above
            cells = df.copy().astype(object)
            for col in df.columns:
                cells[col] = [v if isinstance(v, str) or (v is None) else format_value(str(col), v)
                              for v in df[col].tolist()]
            # a few rows of many columns (one per configuration, say) read better turned on their side
            turned = len(df.columns) > 8 and len(df) <= 8
            table = cells.set_index(df.columns[0]).T if turned else cells
            if turned:
                table.index = [label(str(c)) for c in table.index]
            with pd.option_context("display.width", 200, "display.max_columns", 30, "display.max_rows", 100):
                text = table.to_string(index=turned, na_rep="-")
            print("\n".join("  " + line for line in text.splitlines()))
