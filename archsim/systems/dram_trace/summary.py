"""What `archsim trace` and `archsim run --system dram-trace` print after a trace run."""
from __future__ import annotations

from typing import Any

from archsim.summary import print_table


def print_trace_summary(s: dict[str, Any], trace: str) -> None:
    """The summary `archsim trace` (and `archsim run --system dram-trace`) prints."""
    from archsim.dram.controller import convention_note
    from archsim.units import fmt_bandwidth, fmt_energy, fmt_time

    e = s["energy_pj"]
    print(f"{s['preset']}  {s['channels']} channel(s)  mapping {s['mapping']}  trace {trace}")
    print_table([
        ("cycles", f"{s['cycles']:,}  ({fmt_time(s['seconds'])} at tCK {s['tCK_ps']:g} ps)"),
        ("requests", f"{s['requests']:,}  ({s['reads']:,} reads, {s['writes']:,} writes)"),
        ("bandwidth", f"{fmt_bandwidth(s['bandwidth_GBps'] * 1e9)}  ({s['bandwidth_pct_of_peak']:.1f}% of "
                      f"{fmt_bandwidth(s['peak_bandwidth_GBps'] * 1e9)} peak)"),
        *_bound_row(s),
        ("row hits/misses/conflicts", f"{s['row_hits']:,} / {s['row_misses']:,} / {s['row_conflicts']:,}  (hit rate {100 * s['row_hit_rate']:.1f}%)"),
        ("read latency (cycles)", f"mean {s['read_latency_mean_cycles']:.1f}  p50 {s['read_latency_p50_cycles']:.0f}  p99 {s['read_latency_p99_cycles']:.0f}"),
        ("commands", "  ".join(f"{k} {v:,}" for k, v in s["commands"].items() if v)),
        ("energy", "  ".join(f"{k} {fmt_energy(v * 1e-12)}" for k, v in e.items())
         + f"  total {fmt_energy(s['energy_total_pj'] * 1e-12)}"),
        ("energy per bit", f"{s['energy_pj_per_bit']:.2f} pJ/bit"),
        ("simulation speed", f"{s['requests'] / max(s['wall_s'], 1e-9) / 1e3:,.0f} K requests/s ({fmt_time(s['wall_s'])}"
         + (f"; kernel compile {fmt_time(s['sim_compile_s'])} apart" if s.get("sim_compile_s", 0) > 1 else "") + ")"),
    ])
    note = convention_note(s["preset"], s.get("convention", "archsim"))
    if note:
        print(f"  note: {note}")


FRONTEND_BOUND = 0.75   # a run using this fraction of what the front end offers is limited by it


def _bound_row(s: dict[str, Any]) -> list[tuple[str, str]]:
    """The front end's ceiling, when it is below the device's peak: it offers frontend_width requests of
    access_bytes per cycle, on a wide device a fraction of the peak (HBM2's 8 channels: 1/8). Said to be the
    bound when the run uses FRONTEND_BOUND of it or more."""
    from archsim.units import fmt_bandwidth

    offered = s.get("frontend_bandwidth_GBps")
    if not offered or offered >= s["peak_bandwidth_GBps"]:
        return []
    width = s.get("frontend_width", 1)
    used = s["bandwidth_GBps"] / offered
    return [("front end", f"{width} request{'s' * (width != 1)} of {s['bytes'] // max(s['requests'], 1)} B per cycle: "
             f"at most {fmt_bandwidth(offered * 1e9)} ({100 * offered / s['peak_bandwidth_GBps']:.1f}% of peak); "
             f"this run used {100 * used:.0f}% of it" + (", the bound here" if used >= FRONTEND_BOUND else "")
             + " (--set controller.frontend_width=N offers more)")]
