"""The "Energy against DRAMPower" section of README.md and drampower.png, from drampower.csv (run_drampower.py).

Every sentence with a number or a direction is generated here from the CSV (`claims`), and
tests/test_drampower.py holds each claim to the table.
"""
from __future__ import annotations

import csv
from pathlib import Path

HERE = Path(__file__).resolve().parent
CSV_PATH = HERE / "drampower.csv"
TOL_PCT = 5.0            # the tolerance per component
COMPONENTS = ("act_pre", "read", "write", "refresh", "background")
KIND_ORDER = {"stream": 0, "random": 1, "mixed": 2, "conflict": 3}
# each toggle (run_drampower.py VARIANTS) and the component whose difference it takes away, with what it changes
TOGGLES = {"flat-background": ("background", "archsim's background at IDD3N throughout, `energy.background: active`, "
                                              "its model before the per-state split"),
           "prea-at-end": ("act_pre", "a PREA closing every rank's open rows at the end of DRAMPower's trace")}


def load(path: Path = CSV_PATH) -> list[dict]:
    with path.open() as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        for k in ("archsim_pj", "drampower_pj", "diff_pct"):
            r[k] = float(r[k])
    return rows


def cases(rows: list[dict]) -> dict[tuple[str, str, str], dict[str, dict]]:
    """{(device, kind, variant): {component: row}} in report order."""
    out: dict[tuple[str, str, str], dict[str, dict]] = {}
    for r in sorted(rows, key=lambda r: (r["device"], KIND_ORDER[r["kind"]], r["variant"])):
        out.setdefault((r["device"], r["kind"], r["variant"]), {})[r["component"]] = r
    return out


def claims(rows: list[dict]) -> dict:
    """The figures the prose states, computed from the table."""
    cs = cases(rows)
    asis = {k: v for k, v in cs.items() if k[2] == "as-is"}
    worst = max(((abs(c[comp]["diff_pct"]), comp, k) for k, c in asis.items() for comp in COMPONENTS))
    outside = sorted({(k[0], k[1], comp) for k, c in asis.items() for comp in COMPONENTS
                      if abs(c[comp]["diff_pct"]) > TOL_PCT})
    toggles = {}
    for variant, (comp, _) in TOGGLES.items():
        moves = [(abs(c[comp]["diff_pct"]), abs(cs[(dev, kind, variant)][comp]["diff_pct"]))
                 for (dev, kind, _), c in asis.items() if (dev, kind, variant) in cs]
        toggles[variant] = {"component": comp, "cases": len(moves),
                            "toward": sum(after < before for before, after in moves),
                            "unchanged": sum(after == before for before, after in moves),
                            "before_max": max((b for b, _ in moves), default=0.0),
                            "after_max": max((a for _, a in moves), default=0.0)}
    return {"cases": len(asis), "worst_pct": worst[0], "worst_component": worst[1], "worst_case": worst[2][:2],
            "outside": outside, "toggles": toggles,
            "power_down_pj": max(abs(r["drampower_pj"]) for r in rows if r["component"] == "power_down"),
            "version": rows[0]["drampower_version"], "requests": int(rows[0]["requests"])}


def table(rows: list[dict]) -> str:
    head = " | ".join(COMPONENTS)
    lines = [f"| device | trace | variant | cycles | {head} | total |", "|---|---|---|---|" + "---|" * (len(COMPONENTS) + 1)]
    for (dev, kind, variant), c in cases(rows).items():
        cells = []
        for comp in (*COMPONENTS, "total"):
            r = c[comp]
            cells.append(f"{r['archsim_pj'] / 1e6:.4g} / {r['drampower_pj'] / 1e6:.4g} ({r['diff_pct']:+.2f} %)")
        lines.append(f"| {dev} | {kind} | {variant} | {int(c['total']['cycles']):,} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def prose(rows: list[dict]) -> str:
    c = claims(rows)
    dev, kind = c["worst_case"]
    if c["outside"]:
        where = "; ".join(f"{d} {k} {comp}" for d, k, comp in c["outside"])
        out = [f"With the preset's currents, {len(c['outside'])} (device, trace, component) entries differ by "
               f"more than {TOL_PCT:g} %: {where}. The largest difference is {c['worst_pct']:.2f} % "
               f"({c['worst_component']}, {dev}, {kind})."]
    else:
        out = [f"With the preset's currents, every component of all {c['cases']} (device, trace) cases is within "
               f"{TOL_PCT:g} % of DRAMPower's; the largest difference is {c['worst_pct']:.2f} % "
               f"({c['worst_component']}, {dev}, {kind})."]
    for variant, t in c["toggles"].items():
        if t["toward"] == t["cases"]:
            direction = "toward DRAMPower's in every case"
        elif t["toward"] == 0 and t["unchanged"] == 0:
            direction = "away from DRAMPower's in every case"
        else:
            direction = (f"toward DRAMPower's in {t['toward']} of {t['cases']} cases ({t['unchanged']} unchanged, "
                         f"{t['cases'] - t['toward'] - t['unchanged']} away)")
        out.append(f"The toggle `{variant}` ({TOGGLES[variant][1]}) moves {t['component']} {direction}: its "
                   f"largest difference goes from {t['before_max']:.2f} % to {t['after_max']:.2f} %.")
    out.append(f"DRAMPower's power-down and self-refresh energies are {c['power_down_pj']:g} pJ in every case "
               "(archsim's controller issues no power-down commands, so the logs have none).")
    return " ".join(out)


def figure(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from archsim.report.palette import color_of

    cs = cases(rows)
    keys = [k for k in cs if k[2] == "as-is"]
    labels = [f"{d.replace(' ', chr(10))}\n{k}" for d, k, _ in keys]
    x = np.arange(len(keys))
    width = 0.8 / len(COMPONENTS)
    fig, ax = plt.subplots(figsize=(max(12, 1.05 * len(labels)), 4.8))   # (room for every case label)
    for i, comp in enumerate(COMPONENTS):
        ax.bar(x + (i - (len(COMPONENTS) - 1) / 2) * width, [cs[k][comp]["diff_pct"] for k in keys], width=width,
               label=comp, color=color_of(comp))
    for j, (variant, (comp, _)) in enumerate(TOGGLES.items()):
        toggled = [cs.get((d, k, variant), {}).get(comp) for d, k, _ in keys]
        at = x + (COMPONENTS.index(comp) - (len(COMPONENTS) - 1) / 2) * width
        ax.scatter(at, [t["diff_pct"] if t else 0 for t in toggled],
                   marker="o^"[j], s=40, color="black", zorder=3, label=f"{comp} under toggle {variant}")
    for sign in (-1, 1):       # dashed lines, not a band: the background bars are grey themselves
        ax.axhline(sign * TOL_PCT, color="black", linestyle="--", linewidth=0.8,
                   label=f"issue 39 tolerance (±{TOL_PCT:g} %)" if sign > 0 else None)
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xticks(x, labels, fontsize=8)
    ax.set_ylabel("archsim vs DRAMPower (%)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, ncol=4, loc="upper left")
    lo, hi = ax.get_ylim()
    ax.set_ylim(min(lo, -TOL_PCT - 1), max(hi, TOL_PCT + 1) + 0.3 * (hi - lo))
    ax.set_title("DRAM energy per component: archsim against DRAMPower on the same command logs")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def section(path: Path = CSV_PATH, out: Path = HERE) -> str:
    """The section's generated parts: the table and the claims (figure drampower.png written to `out`)."""
    if not path.exists():
        return "(not run: drampower.csv is missing)"
    rows = load(path)
    figure(rows, out / "drampower.png")
    c = claims(rows)
    return (f"{c['version']}, {c['requests']:,} requests per trace. Each cell: archsim / DRAMPower in µJ "
            f"(archsim minus DRAMPower).\n\n{table(rows)}\n\n![archsim against DRAMPower](drampower.png)\n\n"
            f"{prose(rows)}")
