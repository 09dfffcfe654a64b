"""Regenerate reports/dram_fidelity/README.md and fidelity.png from the runs of run_cases.py.

    .venv/bin/python reports/dram_fidelity/run_cases.py --requests 200000 -o results/dram_fidelity \
        --ramulator2 /work/refsims/ramulator2 --ramulator2-python /work/refsims/venv/bin/python
    .venv/bin/python reports/dram_fidelity/make_report.py results/dram_fidelity/cases.json [-o DIR]

Every number in README.md comes from cases.json (copied next to this script as the record of the reference
runs, which need the reference simulators built outside the repository).
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import drampower_report  # noqa: E402 (this directory)

from archsim.report.palette import color_of  # noqa: E402
from archsim.results import atomic_write_text  # noqa: E402

HERE = Path(__file__).resolve().parent
ORDER = {"stream": 0, "random": 1, "mixed": 2, "conflict": 3}
# the tolerances
TOL_CYCLES, TOL_HIT_POINTS, TOL_LATENCY = 0.02, 1.0, 0.10
CLIP = 20.0     # percent: the fidelity figure's axis range; bars beyond it are labelled with their value


def load(path: Path, requests: int | None = None) -> tuple[int, list[dict]]:
    recs = json.loads(path.read_text())
    n = requests or max(r["requests"] for r in recs)
    return n, [r for r in recs if r["requests"] == n]


def rows(recs: list[dict], reference: str = "ramulator2") -> list[dict]:
    by = {(r["sim"], r["device"], r["kind"]): r for r in recs}
    out = []
    for (sim, dev, kind), ref in sorted(by.items(), key=lambda kv: (kv[0][1], ORDER[kv[0][2]])):
        if sim != reference:
            continue
        row = {"device": dev, "kind": kind, "ref": ref}
        for conv in ("archsim", reference):
            a = by.get((f"archsim/{conv}", dev, kind))
            if a is None:
                continue
            row[conv] = {"a": a, "cycles": a["cycles"] / ref["cycles"] - 1,
                         "hit": 100 * (a["row_hit_rate"] - ref["row_hit_rate"]),
                         "lat": a["read_latency_mean_cycles"] / ref["read_latency_mean_cycles"] - 1}
        row["ok"] = reference in row and (abs(row[reference]["cycles"]) <= TOL_CYCLES
                                          and abs(row[reference]["hit"]) <= TOL_HIT_POINTS
                                          and abs(row[reference]["lat"]) <= TOL_LATENCY)
        out.append(row)
    return out


def table(rs: list[dict]) -> str:
    lines = ["| device | trace | Ramulator 2.1 cycles | row hits | mean read latency | archsim, `ramulator2` convention: "
             "cycles | row hits | latency | within tolerance | archsim default: cycles | latency |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rs:
        ref, m, d = r["ref"], r["ramulator2"], r["archsim"]
        lines.append(
            f"| {r['device']} | {r['kind']} | {ref['cycles']:,} | {100 * ref['row_hit_rate']:.1f} % "
            f"| {ref['read_latency_mean_cycles']:.1f} | {m['a']['cycles']:,} ({100 * m['cycles']:+.2f} %) "
            f"| {100 * m['a']['row_hit_rate']:.1f} % ({m['hit']:+.1f}) "
            f"| {m['a']['read_latency_mean_cycles']:.1f} ({100 * m['lat']:+.1f} %) | {'yes' if r['ok'] else '**no**'} "
            f"| {100 * d['cycles']:+.2f} % | {100 * d['lat']:+.1f} % |")
    return "\n".join(lines)


STEP_COLUMNS = [("archsim/archsim", "default controller"), ("archsim/step1-active_buffer", "+ active buffer"),
                ("archsim/step2-pinned_leave_queue", "+ pinned requests leave their queue"),
                ("archsim/step3-preset", "+ Ramulator's device preset"),
                ("archsim/ramulator2", "+ Ramulator's run end = `ramulator2` convention")]


def steps(recs: list[dict]) -> str:
    """Cycles and mean read latency relative to Ramulator 2.1, step by step from archsim's default to the
    convention."""
    by = {(r["sim"], r["device"], r["kind"]): r for r in recs}
    keys = sorted({(d, k) for s, d, k in by if s == "ramulator2"}, key=lambda dk: (dk[0], ORDER[dk[1]]))
    if not any((STEP_COLUMNS[1][0], d, k) in by for d, k in keys):
        return ""
    head = " | ".join(name for _, name in STEP_COLUMNS)
    lines = ["### From archsim's default to the convention, one step at a time", "",
             "archsim minus Ramulator 2.1 (the steps are cumulative; `run_cases.py --steps`):"]
    for metric, what in (("cycles", "cycles"), ("read_latency_mean_cycles", "mean read latency")):
        lines += ["", f"| device | trace | {what}: {head} |", "|---|---|" + "---|" * len(STEP_COLUMNS)]
        for d, k in keys:
            ref = by[("ramulator2", d, k)][metric]
            cells = [f"{100 * (by[(s, d, k)][metric] / ref - 1):+.2f} %" if (s, d, k) in by else "-"
                     for s, _ in STEP_COLUMNS]
            lines.append(f"| {d} | {k} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def norefresh(path: Path) -> str:
    """The experiment with refresh off in both simulators (`run_cases.py --no-refresh`)."""
    recs = [r for r in json.loads(path.read_text()) if r["sim"].endswith("+norefresh")]
    # keyed by request count too: a device run at 20 K and 200 K requests has a row for each size
    by = {(r["sim"], r["device"], r["kind"], r["requests"]): r for r in recs}
    lines = ["| device | trace | requests | Ramulator 2.1 cycles | archsim cycles | difference | Ramulator latency "
             "| archsim latency |", "|---|---|---|---|---|---|---|---|"]
    for (sim, d, k, n), ref in sorted(by.items(), key=lambda kv: (kv[0][1], -kv[0][3], ORDER[kv[0][2]])):
        a = by.get(("archsim/ramulator2+norefresh", d, k, n))
        if sim != "ramulator2+norefresh" or a is None:
            continue
        lines.append(f"| {d} | {k} | {ref['requests']:,} | {ref['cycles']:,} | {a['cycles']:,} "
                     f"| {100 * (a['cycles'] / ref['cycles'] - 1):+.2f} % | {ref['read_latency_mean_cycles']:.1f} "
                     f"| {a['read_latency_mean_cycles']:.1f} |")
    return "\n".join(lines) if len(lines) > 2 else "(not run)"


def wck(path: Path) -> str:
    """LPDDR5: Ramulator 2.1 under its default WCK mode `need_sync` (a CAS command before an access once the WCK
    has stopped; record ramulator2-need_sync) beside the `always_on` mode archsim models and is compared with."""
    recs = json.loads(path.read_text())
    by = {(r["sim"], r["device"], r["kind"], r["requests"]): r for r in recs}
    lines = ["| device | trace | requests | Ramulator `always_on` cycles | Ramulator `need_sync` cycles | need_sync "
             "over always_on | archsim (`ramulator2`) over need_sync |", "|---|---|---|---|---|---|---|"]
    for (sim, d, k, n), sync in sorted(by.items(), key=lambda kv: (kv[0][1], -kv[0][3], ORDER[kv[0][2]])):
        on, a = by.get(("ramulator2", d, k, n)), by.get(("archsim/ramulator2", d, k, n))
        if sim != "ramulator2-need_sync" or on is None or a is None:
            continue
        lines.append(f"| {d} | {k} | {n:,} | {on['cycles']:,} | {sync['cycles']:,} "
                     f"| {100 * (sync['cycles'] / on['cycles'] - 1):+.2f} % "
                     f"| {100 * (a['cycles'] / sync['cycles'] - 1):+.2f} % |")
    return "\n".join(lines) if len(lines) > 2 else "(not run)"


def rfm(path: Path) -> str:
    """DDR5's refresh management: what the RFMs cost each simulator, cycles with RFM (device DDR5-4800 1R RFM)
    over cycles without (DDR5-4800 1R, periodic refresh off in both as in the RFM runs)."""
    recs = json.loads(path.read_text())
    by = {(r["sim"], r["device"], r["kind"], r["requests"]): r for r in recs}
    # (the last column: the same difference without RFM, so a gap RFM does not cause shows in both)
    lines = ["| trace | requests | Ramulator 2.1: RFM cost | archsim (`ramulator2`): RFM cost | archsim minus Ramulator, "
             "with RFM | archsim minus Ramulator, without RFM |", "|---|---|---|---|---|---|"]
    for (sim, d, k, n), ref in sorted(by.items(), key=lambda kv: (-kv[0][3], ORDER[kv[0][2]])):
        if sim != "ramulator2" or d != "DDR5-4800 1R RFM":
            continue
        a = by.get(("archsim/ramulator2", d, k, n))
        ref0 = by.get(("ramulator2+norefresh", "DDR5-4800 1R", k, n))
        a0 = by.get(("archsim/ramulator2+norefresh", "DDR5-4800 1R", k, n))
        if a is None or ref0 is None or a0 is None:
            continue
        lines.append(f"| {k} | {n:,} | {100 * (ref['cycles'] / ref0['cycles'] - 1):+.2f} % "
                     f"| {100 * (a['cycles'] / a0['cycles'] - 1):+.2f} % | {100 * (a['cycles'] / ref['cycles'] - 1):+.2f} % "
                     f"| {100 * (a0['cycles'] / ref0['cycles'] - 1):+.2f} % |")
    return "\n".join(lines) if len(lines) > 2 else "(not run)"


def jedec(path: Path) -> str:
    """The ramulator2 convention on archsim's own preset against Ramulator 2.1 (`--conventions ramulator2-jedec`),
    beside the convention on the preset of Ramulator's device files, every trace size run."""
    recs = json.loads(path.read_text())
    by = {(r["sim"], r["device"], r["kind"], r["requests"]): r for r in recs}
    lines = ["| device | trace | requests | convention on archsim's preset: cycles | latency "
             "| on Ramulator's device preset: cycles | latency |", "|---|---|---|---|---|---|---|"]
    for (sim, d, k, n), a in sorted(by.items(), key=lambda kv: (kv[0][1], -kv[0][3], ORDER[kv[0][2]])):
        ref, m = by.get(("ramulator2", d, k, n)), by.get(("archsim/ramulator2", d, k, n))
        if sim != "archsim/ramulator2-jedec" or ref is None or m is None:
            continue
        cells = []
        for x in (a, m):
            cells += [f"{100 * (x['cycles'] / ref['cycles'] - 1):+.2f} %",
                      f"{100 * (x['read_latency_mean_cycles'] / ref['read_latency_mean_cycles'] - 1):+.1f} %"]
        lines.append(f"| {d} | {k} | {n:,} | " + " | ".join(cells) + " |")
    return "\n".join(lines) if len(lines) > 2 else "(not run)"


def walls(rs: list[dict]) -> str:
    lines = ["| device | trace | Ramulator 2.1 `sim.run()` s | archsim engine s | ratio |", "|---|---|---|---|---|"]
    for r in rs:
        rw, aw = r["ref"]["wall_s"], r["ramulator2"]["a"]["wall_s"]
        lines.append(f"| {r['device']} | {r['kind']} | {rw:.2f} | {aw:.3f} | {rw / aw:.0f}x |")
    return "\n".join(lines)


def figure(rs: list[dict], path: Path, n: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    labels = [f"{r['device']} {r['kind']}" for r in rs]
    x = np.arange(len(rs))
    fig, axes = plt.subplots(2, 1, figsize=(16, 8), sharex=True)
    for ax, key, tol, title in ((axes[0], "cycles", TOL_CYCLES, "simulated cycles"),
                                (axes[1], "lat", TOL_LATENCY, "mean read latency")):
        for off, conv, name in ((-0.2, "archsim", "archsim default controller"),
                                (0.2, "ramulator2", "controller.convention=ramulator2")):
            vals = np.array([100 * r[conv][key] for r in rs])
            ax.bar(x + off, np.clip(vals, -CLIP, CLIP), width=0.4, label=name, color=color_of(COMPONENT[conv]))
            # bars beyond the axis (HBM3's default front end offers half Ramulator's requests per CK): value
            for xi, v in zip(x + off, vals, strict=True):
                if abs(v) > CLIP:
                    ax.text(xi, np.sign(v) * CLIP * 0.97, f"{v:+.0f} %", ha="center",
                            va="top" if v > 0 else "bottom", fontsize=7, rotation=90, color="white")
        ax.set_ylim(-CLIP * 1.05, CLIP * 1.05)
        ax.axhspan(-100 * tol, 100 * tol, color=color_of("tolerance"), zorder=0, label=f"tolerance (±{100 * tol:g} %)")
        ax.axhline(0, color="black", linewidth=0.8)
        ax.set_ylabel(f"{title}:\narchsim vs Ramulator 2.1 (%)")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(loc="best", fontsize=8)
    axes[1].set_xticks(x, labels, fontsize=8, rotation=60, ha="right")  # 36 cases: one slanted line each
    axes[0].set_title(f"archsim against Ramulator 2.1 on the same trace files ({n:,} requests each)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


D3_COLUMNS = (("d3/archsim", "archsim default controller"),
              ("d3/closest", "archsim, queues as deep as DRAMsim3's (32 + 8 x banks)"),
              ("d3/dramsim3", "archsim, controller.convention=dramsim3"))
# each controller's colour in every figure (archsim.report.palette: the same component, the same colour)
COMPONENT = {"archsim": "default_controller", "d3/archsim": "default_controller",
             "ramulator2": "ramulator2_convention", "d3/closest": "deep_queues", "d3/keys": "dramsim3_keys",
             "d3/dramsim3": "dramsim3_convention"}
# the dramsim3 convention and the convention with one rule taken out (run_cases.d3_convention)
D3_CONV_COLUMNS = (("d3/dramsim3", "convention"), ("d3/dramsim3-no_bank_queues", "without bank queues"),
                   ("d3/dramsim3-no_merge_reads", "without merge_reads"),
                   ("d3/dramsim3-no_refresh_stagger", "without refresh_stagger"))
# the DRAMsim3 keys one at a time and together (run_cases.d3_keys), for the table of their effect
D3_KEY_COLUMNS = (("d3/archsim", "default controller"), ("d3/row_hit_cap", "+ row_hit_cap 4 alone"),
                  ("d3/refresh_stagger", "+ refresh_stagger alone"), ("d3/keys", "+ both"))


def d3rows(recs: list[dict]) -> list[dict]:
    """DRAMsim3 against archsim on DRAMsim3's trace files, layouts and device timings (run_cases.py --dramsim3)."""
    by = {(r["sim"], r["device"], r["kind"]): r for r in recs}
    out = []
    for (sim, dev, kind), ref in sorted(by.items(), key=lambda kv: (kv[0][1], ORDER[kv[0][2]])):
        if sim != "dramsim3":
            continue
        row = {"device": dev, "kind": kind, "ref": ref}
        for key, _ in D3_COLUMNS + D3_KEY_COLUMNS + D3_CONV_COLUMNS:
            a = by[(key, dev, kind)]
            row[key] = {"a": a, "cycles": a["cycles"] / ref["cycles"] - 1,
                        "hit": 100 * (a["row_hit_rate"] - ref["row_hit_rate"]),
                        "lat": a["read_latency_mean_cycles"] / ref["read_latency_mean_cycles"] - 1}
        out.append(row)
    return out


def d3table(rs: list[dict]) -> str:
    if not rs:
        return "(not run)"
    lines = ["| device | trace | DRAMsim3 cycles | row hits | mean read latency | write commands issued / writes "
             "| archsim default: cycles | row hits | latency | archsim, deep queues: cycles | row hits | latency "
             "| DRAMsim3 loop s | archsim engine s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rs:
        ref = r["ref"]
        cells = []
        for key, _ in D3_COLUMNS[:2]:
            m = r[key]
            cells += [f"{m['a']['cycles']:,} ({100 * m['cycles']:+.1f} %)",
                      f"{100 * m['a']['row_hit_rate']:.1f} % ({m['hit']:+.1f})",
                      f"{m['a']['read_latency_mean_cycles']:.0f} ({100 * m['lat']:+.0f} %)"]
        lines.append(f"| {r['device']} | {r['kind']} | {ref['cycles']:,} | {100 * ref['row_hit_rate']:.1f} % "
                     f"| {ref['read_latency_mean_cycles']:.0f} | {ref['write_cmds']:,} / {ref['writes_done']:,} | "
                     + " | ".join(cells) + f" | {ref['wall_s']:.2f} | {r['d3/archsim']['a']['wall_s']:.3f} |")
    return "\n".join(lines)


def d3keys(rs: list[dict], columns: tuple = D3_KEY_COLUMNS) -> str:
    """Controllers side by side (the DRAMsim3 keys toggled, or the convention with rules taken out): archsim
    minus DRAMsim3 in cycles, row hits and read latency."""
    if not rs:
        return "(not run)"
    lines = []
    for what, fmt in (("cycles", lambda m: f"{100 * m['cycles']:+.2f} %"),
                      ("row hits (points)", lambda m: f"{m['hit']:+.2f}"),
                      ("mean read latency", lambda m: f"{100 * m['lat']:+.1f} %")):
        head = " | ".join(name for _, name in columns)
        lines += ["", f"| device | trace | {what}: {head} |", "|---|---|" + "---|" * len(columns)]
        for r in rs:
            lines.append(f"| {r['device']} | {r['kind']} | " + " | ".join(fmt(r[k]) for k, _ in columns) + " |")
    return "\n".join(lines[1:])


def within(m: dict) -> bool:
    return abs(m["cycles"]) <= TOL_CYCLES and abs(m["hit"]) <= TOL_HIT_POINTS and abs(m["lat"]) <= TOL_LATENCY


def d3convention(rs: list[dict]) -> str:
    """DRAMsim3 beside archsim under controller.convention=dramsim3, with the issue's tolerances."""
    if not rs:
        return "(not run)"
    lines = ["| device | trace | DRAMsim3 cycles | row hits | mean read latency | archsim dramsim3: cycles | row hits "
             "| mean read latency | within tolerance | archsim engine s |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rs:
        ref, m = r["ref"], r["d3/dramsim3"]
        lines.append(f"| {r['device']} | {r['kind']} | {ref['cycles']:,} | {100 * ref['row_hit_rate']:.1f} % | "
                     f"{ref['read_latency_mean_cycles']:.0f} | {m['a']['cycles']:,} ({100 * m['cycles']:+.2f} %) | "
                     f"{100 * m['a']['row_hit_rate']:.1f} % ({m['hit']:+.2f}) | "
                     f"{m['a']['read_latency_mean_cycles']:.0f} ({100 * m['lat']:+.1f} %) | "
                     f"{'yes' if within(m) else '**no**'} | {m['a']['wall_s']:.3f} |")
    return "\n".join(lines)


def d3figure(rs: list[dict], path: Path, n: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    labels = [f"{r['device'].replace(' ', chr(10))}\n{r['kind']}" for r in rs]
    x = np.arange(len(rs))
    fig, axes = plt.subplots(2, 1, figsize=(12, 8), sharex=True)
    ax = axes[0]
    offs, width = (-0.27, 0, 0.27), 0.27
    for off, (conv, name) in zip(offs, D3_COLUMNS, strict=True):
        ax.bar(x + off, [100 * r[conv]["cycles"] for r in rs], width=width, label=name, color=color_of(COMPONENT[conv]))
    ax.axhspan(-100 * TOL_CYCLES, 100 * TOL_CYCLES, color=color_of("tolerance"), zorder=0,
               label=f"issue 24 tolerance (±{100 * TOL_CYCLES:g} %)")
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_ylabel("simulated cycles:\narchsim vs DRAMsim3 (%)")
    ax.grid(axis="y", alpha=0.3)
    lo, hi = ax.get_ylim()
    ax.set_ylim(lo, hi + 0.3 * (hi - lo))     # room for the legend above the bars
    ax.legend(loc="upper left", fontsize=8, ncol=2)
    # latency ratios span 0.2x to 6x: bars from 1 on a log axis
    ax = axes[1]
    for off, (conv, name) in zip(offs, D3_COLUMNS, strict=True):
        ratio = np.array([1 + r[conv]["lat"] for r in rs])
        ax.bar(x + off, ratio - 1, bottom=1, width=width, label=name, color=color_of(COMPONENT[conv]))
    ax.axhspan(1 - TOL_LATENCY, 1 + TOL_LATENCY, color=color_of("tolerance"), zorder=0,
               label=f"issue 24 tolerance (±{100 * TOL_LATENCY:g} %)")
    ax.axhline(1, color="black", linewidth=0.8)
    ax.set_yscale("log", base=2)
    ticks = [0.125, 0.25, 0.5, 1, 2, 4, 8]
    ax.set_yticks(ticks, [f"{t:g}x" for t in ticks])
    ax.set_ylim(0.1, 10)
    ax.set_ylabel("mean read latency:\narchsim / DRAMsim3 (log scale)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(loc="upper left", fontsize=8, ncol=2)
    axes[1].set_xticks(x, labels, fontsize=8)
    axes[0].set_title(f"archsim against DRAMsim3 on the same trace files ({n:,} requests each)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cases", type=Path, nargs="?", default=HERE / "cases.json")
    ap.add_argument("-o", "--out", type=Path, default=HERE)
    ap.add_argument("--requests", type=int, help="which trace size to tabulate (default: the largest)")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.cases.resolve() != (args.out / "cases.json").resolve():
        shutil.copyfile(args.cases, args.out / "cases.json")
    n, recs = load(args.cases, args.requests)
    rs = rows(recs)
    figure(rs, args.out / "fidelity.png", n)
    text = ((HERE / "README.template.md").read_text().replace("{{REQUESTS}}", f"{n:,}")
            .replace("{{TABLE}}", table(rs)).replace("{{WALL}}", walls(rs)).replace("{{STEPS}}", steps(recs))
            .replace("{{NOREFRESH}}", norefresh(args.cases)).replace("{{JEDEC}}", jedec(args.cases))
            .replace("{{WCK}}", wck(args.cases)).replace("{{RFM}}", rfm(args.cases)))
    d3 = d3rows(recs)
    if d3:
        d3figure(d3, args.out / "dramsim3.png", n)
    text = (text.replace("{{D3TABLE}}", d3table(d3)).replace("{{D3KEYS}}", d3keys(d3))
            .replace("{{D3CONV}}", d3convention(d3)).replace("{{D3TOGGLES}}", d3keys(d3, D3_CONV_COLUMNS)))
    text = text.replace("{{DRAMPOWER}}", drampower_report.section(HERE / "drampower.csv", args.out))
    atomic_write_text(args.out / "README.md", text)
    print(f"wrote {args.out / 'README.md'} and fidelity.png ({sum(r['ok'] for r in rs)}/{len(rs)} within tolerance)")


if __name__ == "__main__":
    main()
