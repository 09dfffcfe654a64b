"""`archsim run --system pimgpt --model NAME --tokens N`: simulate a registered system end to end."""
from __future__ import annotations

import argparse

from archsim.commands.common import print_table


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="simulate a system end to end (e.g. PIM-GPT decode)",
                       description="Simulate a registered system. For --system pimgpt: decode --tokens tokens of "
                       "--model token by token (every layer, KV growing) on GDDR6-AiM PIM channels + the ASIC, "
                       "and compare with the T4 / Xeon baselines.")
    p.add_argument("--system", default="pimgpt", help="registered system (default pimgpt)")
    p.add_argument("--model", default="gpt2-xl", help="model name (workloads/models) or a model YAML/config.json")
    p.add_argument("--tokens", type=int, default=1024, help="tokens to decode (context grows 1..N)")
    p.add_argument("--channels", type=int, help="PIM channels (default: the preset's, 8)")
    p.add_argument("--asic-clock-hz", type=float, help="ASIC clock (default: the ASIC preset's, 1 GHz)")
    p.add_argument("--preset", default="GDDR6_AiM_16Gbps", help="PIM DRAM preset")
    p.add_argument("--mapping", default="pimgpt", help="mapping policy (mappings/*.yaml or a path)")
    p.add_argument("--layout", choices=["packed", "row_aligned"], help="override mapping weights.layout")
    p.add_argument("--engine", choices=["numba", "python"], default="numba")
    p.add_argument("--no-memo", action="store_true", help="simulate every op in full (no reuse of identical steps)")
    p.add_argument("--no-baselines", action="store_true", help="skip the T4 / Xeon comparison")
    p.add_argument("--json", dest="json_out", metavar="FILE", help="write stats, per-op table and manifest")
    p.add_argument("--csv", dest="csv_out", metavar="FILE", help="write the per-op table as CSV")
    p.add_argument("--timeline", action="store_true",
                   help="also record a per-unit (PIM / ASIC) timeline of the last decode step (in --json)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from archsim import systems
    from archsim.errors import UserError

    if args.system != "pimgpt":
        systems.get(args.system)   # unknown -> lists the known systems
        raise UserError(f"`archsim run` drives --system pimgpt; use `archsim trace` / `archsim sweep` for {args.system}")
    config = {"system": "pimgpt", "model": args.model, "tokens": args.tokens, "preset": args.preset,
              "mapping": args.mapping, "engine": args.engine, "memo": not args.no_memo,
              "timeline": args.timeline}
    if args.channels is not None:
        config["channels"] = args.channels
    if args.asic_clock_hz is not None:
        config["asic_clock_hz"] = args.asic_clock_hz
    if args.layout:
        config["mapping_overrides"] = {"weights.layout": args.layout}
    if args.no_baselines:
        config["baselines"] = []
    result = systems.get("pimgpt")(config, args.seed)
    s = result.stats
    from archsim.units import fmt_energy, fmt_time

    if not args.quiet and args.json_out != "-":
        e = s["energy_per_token_by_component_j"]
        rows = [
            ("model / channels", f"{s['model']}  {s['channels']} ch x {s['banks_per_channel']} banks  ({s['preset']}, ASIC {s['asic_clock_hz'] / 1e6:g} MHz)"),
            ("tokens", f"{s['tokens']}"),
            ("latency / token", f"{fmt_time(s['latency_per_token_s'])}  (first {fmt_time(s['latency_first_token_s'])}, last {fmt_time(s['latency_last_token_s'])})"),
            ("tokens / s", f"{s['tokens_per_s']:.1f}"),
            ("energy / token", f"{fmt_energy(s['energy_per_token_j'])}  (" + ", ".join(f"{k} {fmt_energy(v)}" for k, v in e.items()) + ")"),
            ("row-hit rate", f"{100 * s['row_hit_rate']:.2f} %"),
            ("ASIC share of latency", f"{100 * s['asic_share']:.2f} %"),
        ]
        for tag in ("t4", "xeon_gold_6154"):
            if f"speedup_vs_{tag}" in s:
                rows.append((f"vs {tag}", f"speedup {s[f'speedup_vs_{tag}']:.1f}x, energy efficiency "
                             f"{s[f'energy_efficiency_vs_{tag}']:.1f}x"))
        rows.append(("simulator", f"{s['sim_wall_s']:.2f} s wall, {s['sim_commands_simulated']:,} commands simulated, "
                     f"memo {s['sim_memo_hits']} hits / {s['sim_memo_misses']} misses"))
        print_table(rows)
        df = result.df.sort_values("seconds", ascending=False)
        print("  per op (all layers, all tokens):")
        print(f"    {'op':<14}{'kind':<14}{'ms/token':>10}{'share':>8}{'PIM %':>7}{'row hits':>10}")
        for _, r in df.iterrows():
            pim = 100 * r["pim_cycles"] / r["cycles"] if r["cycles"] else 0.0
            hits = f"{100 * r['row_hit_rate']:.1f} %" if r["row_hit_rate"] == r["row_hit_rate"] else "-"
            print(f"    {r['op']:<14}{r['kind']:<14}{r['seconds_per_token'] * 1e3:>10.4f}{100 * r['share']:>7.1f}%"
                  f"{pim:>7.0f}{hits:>10}")
    if args.json_out:
        result.write_json(args.json_out)
    if args.csv_out:
        result.write_csv(args.csv_out)
    return 0
