"""`archsim trace TRACE --preset NAME`: simulate a memory trace on a DRAM preset."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from archsim.commands.common import add_set_option, collect_overrides, print_table, quiet


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("trace", help="simulate a memory trace (Ramulator 2 or DRAMsim3 format, .gz ok)",
                       description="Simulate a memory trace cycle-accurately on a DRAM preset. Trace formats "
                       "are auto-detected: Ramulator 2 ('LD 0x..' / 'ST 0x..', optional leading bubble count) "
                       "and DRAMsim3 ('0xADDR READ|WRITE cycle'). 'synthetic:KIND:N' "
                       "generates N requests (80% reads; KIND random, stream, mixed or conflict).")
    p.add_argument("trace", help="trace file, or synthetic:KIND:N (KIND: random, stream, mixed, conflict)")
    p.add_argument("--preset", default="DDR4_3200AA_x8_8Gb", help="DRAM preset (see `archsim presets list`)")
    p.add_argument("--channels", type=int, help="number of channels (default: the preset's)")
    p.add_argument("--mapping", help="address mapping MSB..LSB, e.g. RoBaRaCoCh or rorabgbachco")
    p.add_argument("--row-policy", choices=["open", "closed"], help="row-buffer policy (default open)")
    p.add_argument("--refresh", choices=["allbank", "perbank", "none"], help="refresh mode (default allbank)")
    p.add_argument("--queue", type=int, help="read and write queue entries per channel (default 32)")
    p.add_argument("--engine", choices=["numba", "python"], default="numba",
                   help="numba (fast) or the plain-Python reference path")
    p.add_argument("--json", dest="json_out", metavar="FILE", help="write stats, per-channel table, manifest")
    p.add_argument("--csv", dest="csv_out", metavar="FILE", help="write the per-channel table as CSV")
    p.add_argument("--log", dest="log_out", metavar="FILE", help="write the command log (CSV) for check-log")
    p.add_argument("--quiet", action="store_true", help="print nothing (no summary, no progress bar); --json still writes its file")
    add_set_option(p)
    p.set_defaults(func=run)


def _trace_arg(text: str):
    from archsim.errors import UserError

    if text.startswith("synthetic:"):
        from archsim.dram.trace import parse_synthetic

        kind, n = parse_synthetic(text)
        return {"kind": kind, "requests": n}
    if not Path(text).exists():
        raise UserError(f"{text}: trace file not found")
    return text


def run(args: argparse.Namespace) -> int:
    from archsim.dram.system import run_trace

    controller = {}
    if args.row_policy:
        controller["row_policy"] = args.row_policy
    if args.refresh:
        controller["refresh"] = args.refresh
    if args.queue:
        controller["read_queue"] = controller["write_queue"] = args.queue
    overrides = collect_overrides(args)
    dram_over = [o.removeprefix("dram.") for o in overrides if o.startswith("dram.")]
    ctrl_over = [o for o in overrides if o.startswith("controller.")]
    other = [o for o in overrides if not o.startswith(("dram.", "controller."))]
    if other:
        from archsim.errors import UserError

        raise UserError(f"--set {other[0]}: trace runs accept dram.* and controller.* keys")
    from archsim.config import parse_override

    for item in ctrl_over:
        key, value = parse_override(item)
        controller[key.removeprefix("controller.")] = value
    result = run_trace(_trace_arg(args.trace), preset=args.preset, channels=args.channels, mapping=args.mapping,
                       controller=controller, overrides=dram_over, log=bool(args.log_out), engine=args.engine,
                       quiet=quiet(args))
    s = result.stats
    e = s["energy_pj"]
    from archsim.units import fmt_bandwidth, fmt_energy, fmt_time

    if not args.quiet and args.json_out != "-":   # --quiet: no summary (the progress bar is also off under CI=true)
        print(f"{s['preset']}  {s['channels']} channel(s)  mapping {s['mapping']}  trace {args.trace}")
        print_table([
            ("cycles", f"{s['cycles']:,}  ({fmt_time(s['seconds'])} at tCK {s['tCK_ps']:g} ps)"),
            ("requests", f"{s['requests']:,}  ({s['reads']:,} reads, {s['writes']:,} writes)"),
            ("bandwidth", f"{fmt_bandwidth(s['bandwidth_GBps'] * 1e9)}  ({s['bandwidth_pct_of_peak']:.1f}% of "
                          f"{fmt_bandwidth(s['peak_bandwidth_GBps'] * 1e9)} peak)"),
            ("row hits/misses/conflicts", f"{s['row_hits']:,} / {s['row_misses']:,} / {s['row_conflicts']:,}  (hit rate {100 * s['row_hit_rate']:.1f}%)"),
            ("read latency (cycles)", f"mean {s['read_latency_mean_cycles']:.1f}  p50 {s['read_latency_p50_cycles']:.0f}  p99 {s['read_latency_p99_cycles']:.0f}"),
            ("commands", "  ".join(f"{k} {v:,}" for k, v in s["commands"].items() if v)),
            ("energy", "  ".join(f"{k} {fmt_energy(v * 1e-12)}" for k, v in e.items())
             + f"  total {fmt_energy(s['energy_total_pj'] * 1e-12)}"),
            ("energy per bit", f"{s['energy_pj_per_bit']:.2f} pJ/bit"),
            ("simulation speed", f"{s['requests'] / max(s['wall_s'], 1e-9) / 1e3:,.0f} K requests/s ({fmt_time(s['wall_s'])})"),
        ])
    if args.json_out:
        result.write_json(args.json_out)     # "-" = standard output
    if args.csv_out:
        result.write_csv(args.csv_out)
    if args.log_out:
        result.extra["command_log"].write(args.log_out)
    return 0


def _dump(obj) -> str:  # pragma: no cover - debugging aid
    return json.dumps(obj, indent=2, default=str)
