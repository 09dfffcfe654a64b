"""Regenerate reports/dram_trace_cycles/README.md from the sweep sweeps/dram_trace_cycles.yaml.

Run:  .venv/bin/archsim sweep sweeps/dram_trace_cycles.yaml -j 2     (writes results/dram_trace_cycles/)
      .venv/bin/python reports/dram_trace_cycles/make_report.py [RESULTS_DIR] [-o DIR]

-o DIR writes README.md into DIR instead of this folder, so a run with other settings (a smaller sweep, say)
never overwrites the shipped reproduction.

Every number in README.md comes from those runs; Ramulator 2.1's cycle counts are the project's own runs of
Ramulator 2.1 on the same traces (constants in benchmarks/bench_dram.py).
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_dram import RAMULATOR_CYCLES, RAMULATOR_REQUESTS  # noqa: E402

from archsim.results import atomic_write_text  # noqa: E402
from archsim.sweep import load_results  # noqa: E402

OUT = Path(__file__).resolve().parent
RAMULATOR = {("DDR4_3200AA_x8_8Gb", 1, "random"): RAMULATOR_CYCLES["ddr4-random"],
             ("DDR4_3200AA_x8_8Gb", 1, "stream"): RAMULATOR_CYCLES["ddr4-stream"],
             ("HBM2_2Gbps_PC", 1, "random"): RAMULATOR_CYCLES["hbm2-random"],
             ("HBM2_2Gbps_PC", 1, "stream"): RAMULATOR_CYCLES["hbm2-stream"]}


def table(results: Path) -> list[dict]:
    stats, _ = load_results(results)
    rows = {}
    for _, s in stats.iterrows():
        key = (s["preset"], int(s["dram.org.ranks"]), s["trace.kind"])
        rows.setdefault(key, {})[bool(s["controller.active_buffer"])] = s
    out = []
    for (preset, ranks, kind), by_ab in rows.items():
        off, on = by_ab[False], by_ab[True]
        # Ramulator's counts are for 2 M-request traces only
        ram = RAMULATOR.get((preset, ranks, kind)) if int(off["requests"]) == RAMULATOR_REQUESTS else None
        out.append({"preset": preset, "ranks": ranks, "trace": kind, "requests": int(off["requests"]),
                    "cycles": int(off["cycles"]), "GB/s": off["bandwidth_GBps"],
                    "hit": off["row_hit_rate"], "cycles_ab": int(on["cycles"]), "hit_ab": on["row_hit_rate"],
                    "ab_ratio": on["cycles"] / off["cycles"], "ramulator": ram})
    order = {"stream": 0, "random": 1, "mixed": 2, "conflict": 3}
    return sorted(out, key=lambda r: (r["preset"], r["ranks"], order[r["trace"]]))


def render(rows: list[dict]) -> str:
    lines = ["| device | trace | cycles | GB/s | row hits | cycles, active buffer | ratio | row hits, active buffer "
             "| Ramulator 2.1 cycles (ours / theirs) |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        dev = f"{r['preset']}, {r['ranks']} rank{'s' if r['ranks'] > 1 else ''}"
        ram = f"{r['ramulator'] / 1e6:.2f} M ({r['cycles'] / r['ramulator']:.2f})" if r["ramulator"] else "not run"
        lines.append(f"| {dev} | {r['trace']} | {r['cycles'] / 1e6:.3f} M | {r['GB/s']:.1f} | {100 * r['hit']:.1f} % "
                     f"| {r['cycles_ab'] / 1e6:.3f} M | {r['ab_ratio']:.3f} | {100 * r['hit_ab']:.1f} % | {ram} |")
    return "\n".join(lines)


def figure(rows: list[dict], path: Path) -> None:
    """Cycles relative to the default controller's run of the same trace: the active buffer's effect and
    Ramulator 2.1's count (where it was run), one scale for every device and trace."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from archsim.report.palette import color_of

    labels = [f"{r['preset'].split('_')[0]}\n{r['ranks']} rank{'s' if r['ranks'] > 1 else ''}\n{r['trace']}"
              for r in rows]
    x = range(len(rows))
    fig, ax = plt.subplots(figsize=(max(8, 0.75 * len(rows)), 4.4))
    ax.bar([i - 0.2 for i in x], [r["ab_ratio"] for r in rows], 0.4, color=color_of("active_buffer"),
           label="active buffer on (controller.active_buffer=true)")
    ram = [(i, r["ramulator"] / r["cycles"]) for i, r in enumerate(rows) if r["ramulator"]]
    ax.bar([i + 0.2 for i, _ in ram], [v for _, v in ram], 0.4, color=color_of("ramulator"),
           label="Ramulator 2.1 on the same trace (where run)")
    ax.axhline(1.0, color="black", lw=0.8)
    ax.set_ylim(0.85, 1.15)
    ax.set_xticks(list(x), labels, fontsize=7)
    ax.set_ylabel("simulated cycles relative to\narchsim's default controller (x)")
    ax.set_title(f"DRAM trace runs, {rows[0]['requests']:,} requests each: the active buffer and Ramulator 2.1 "
                 "against archsim's default controller", fontsize=9)
    ax.legend(fontsize=8, loc="upper left")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    import argparse

    p = argparse.ArgumentParser(description="Regenerate the DRAM trace cycles report from sweep results.")
    p.add_argument("results", nargs="?", default=str(ROOT / "results" / "dram_trace_cycles"),
                   help="results directory of sweeps/dram_trace_cycles.yaml (default: results/dram_trace_cycles)")
    p.add_argument("-o", "--out", default=str(OUT), metavar="DIR",
                   help="folder to write README.md into (default: this report's folder, the shipped one)")
    args = p.parse_args(argv)
    out = Path(args.out)
    rows = table(Path(args.results))
    text = (OUT / "README.template.md").read_text().replace("{{TABLE}}", render(rows))
    out.mkdir(parents=True, exist_ok=True)
    figure(rows, out / "cycles.png")
    atomic_write_text(out / "README.md", text)
    print(f"wrote {out / 'README.md'} and {out / 'cycles.png'}")


if __name__ == "__main__":
    main()
