"""`archsim run --system NAME [--config FILE] [--set KEY=VALUE ...]`: simulate a registered system end to end."""
from __future__ import annotations

import argparse
import json
from typing import Any

from archsim import progress
from archsim.commands.common import (
    add_system_config_parser,
    add_threads_option,
    apply_threads,
    compile_seconds,
    print_system_help,
    print_table,
    system_config,
    with_compile_time,
)
from archsim.output import check_distinct, check_writable
from archsim.summary import model_notes

# Examples shown by `archsim run --help`; `--system X --help` shows the examples system X registers with
# (archsim.registry), else these.
GENERIC_EXAMPLES = """\
  archsim run --model gpt2-small --tokens 16
  archsim run --system dram-trace --set trace.kind=random --set trace.requests=2000 --preset HBM2_2Gbps_PC
  archsim run --system neupims --batch 64 --help      # every key of neupims: type, default, allowed values
  archsim run --model gpt2-small --tokens 4 --json run.json && archsim run --from-json run.json"""
EXAMPLES = "examples:\n" + GENERIC_EXAMPLES + "\n"


def describe(system: str) -> tuple[str, str]:
    """(description, examples) of `archsim run --system X --help`."""
    import importlib

    from archsim import registry

    module = importlib.import_module(registry.get(system).__module__)
    doc = (module.__doc__ or "").strip().split("\n\n")[0]
    text = " ".join(doc.split())
    head = f"Simulate system {system} and print its summary. {text}" if text else f"Simulate system {system}."
    return head + " `--system X --help` lists every key of system X.", \
        f"examples (system {system}):\n" + (registry.examples(system) or GENERIC_EXAMPLES) + "\n"


def register(sub: argparse._SubParsersAction) -> None:
    p = add_system_config_parser(
        sub, "run", epilog=EXAMPLES,
        help="simulate a registered system end to end (PIM-GPT decode, DRAM trace runs, NeuPIMs, Duplex, T3)",
        description="Simulate any registered system (see --system) from its config and print its summary. For "
        "pimgpt: decode --tokens tokens of --model token by token (every layer, KV growing) on GDDR6-AiM PIM "
        "channels + the ASIC, and compare with the T4 / Xeon baselines. For dram-trace: run a trace (trace: PATH "
        "or trace.kind/trace.requests for a synthetic one). `--system X --help` lists every key of system X.")
    o = p.add_argument_group("output")
    o.add_argument("--json", dest="json_out", metavar="FILE",
                   help="write stats, table and manifest as JSON (- for standard output)")
    o.add_argument("--csv", dest="csv_out", metavar="FILE", help="write the result table as CSV")
    o.add_argument("--seed", type=int, help="run seed (default: the --from-json run's, else 0)")
    o.add_argument("--quiet", action="store_true", help="print no summary (--json still writes its file)")
    add_threads_option(p)
    p.describe = describe
    p.set_defaults(func=run)


def modelled_features(system: str) -> frozenset[str] | None:
    """The model features a system declares it models (registered with it), None if undeclared."""
    from archsim import registry

    return registry.model_features(system)


def build_config(args: argparse.Namespace) -> tuple[dict[str, Any], int]:
    """(validated config, seed) from --from-json, --config, the config-key flags and --set."""
    return system_config(args)


def run(args: argparse.Namespace) -> int:
    from archsim import registry

    if args.help:
        return print_system_help(args)
    config, seed = build_config(args)
    apply_threads(args)
    check_distinct({"--json": args.json_out, "--csv": args.csv_out},
                   {"--from-json": args.from_json, "--config": args.override_file})
    check_writable(args.json_out)    # before the simulation, not after it
    check_writable(args.csv_out)
    c0 = compile_seconds()
    with progress.live(f"{config['system']}:", enabled=progress.wanted(args.quiet or args.json_out == "-")):
        result = with_compile_time(registry.get(config["system"])(config, seed), c0)
    notes = model_notes(registry.resolve_config(dict(config)), modelled_features(config["system"]))
    if not args.quiet and args.json_out != "-":
        if config["system"] == "pimgpt":
            print_pimgpt(result)
        elif config["system"] == "dram-trace":
            from archsim.commands.trace import print_trace_summary

            trace = config.get("trace")
            print_trace_summary(result.stats, trace if isinstance(trace, str) else json.dumps(trace))
        else:
            print_generic(config["system"], result.stats, getattr(result, "df", None),
                          tables=getattr(result, "tables", None))
        for note in notes:
            print(f"  note: {note}")
    if notes:       # in the result as well, so a --json reader sees what the figures are of
        result.stats["notes"] = " | ".join(notes)
    if args.json_out:
        result.write_json(args.json_out)
    if args.csv_out:
        result.write_csv(args.csv_out)
    return 0


def print_generic(system: str, stats: dict[str, Any], df: Any = None, max_rows: int = 30,
                  tables: dict[str, Any] | None = None) -> None:
    """A summary of any system: each stat with the unit its name declares (archsim.summary), the per-stage
    table when the result has one, the result table when short, and the notes about the model."""
    from archsim.summary import format_value, label, stage_rows, summary_rows

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


def print_pimgpt(result: Any) -> None:
    from archsim.units import fmt_energy, fmt_time

    s = result.stats
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
    # every baseline the run compared with, as its stats name them (speedup_vs_<tag>), in the order it ran them
    tags = [k.removeprefix("speedup_vs_") for k in s if k.startswith("speedup_vs_")]
    c0 = int((getattr(result, "manifest", None) or {}).get("config", {}).get("context_start", 0) or 0)
    contexts = f"contexts {c0 + 1}-{c0 + s['tokens']}" if s["tokens"] > 1 else f"context {c0 + 1}"
    for tag in tags:
        rows.append((f"vs {tag}", f"speedup {s[f'speedup_vs_{tag}']:.1f}x, energy efficiency "
                     f"{s.get(f'energy_efficiency_vs_{tag}', float('nan')):.1f}x  ({contexts})"))
    rows.append(("simulator", f"{s['sim_wall_s']:.2f} s wall, {s['sim_commands_simulated']:,} commands simulated, "
                 f"memo {s['sim_memo_hits']} hits / {s['sim_memo_misses']} misses"))
    print_table(rows)
    if tags:
        print(f"  note: speed-ups are of this run's {s['tokens']} decode steps ({contexts}) of {s['model']}; they "
              "change with the model and the context length (reports/pimgpt: the paper's models and lengths)")
    df = result.df.sort_values("seconds", ascending=False)
    print("  per op (all layers, all tokens):")
    print(f"    {'op':<14}{'kind':<14}{'time/token':>11}{'share':>8}{'PIM %':>7}{'row hits':>10}")
    for _, r in df.iterrows():
        pim = 100 * r["pim_cycles"] / r["cycles"] if r["cycles"] else 0.0
        hits = f"{100 * r['row_hit_rate']:.1f} %" if r["row_hit_rate"] == r["row_hit_rate"] else "-"
        print(f"    {r['op']:<14}{r['kind']:<14}{fmt_time(r['seconds_per_token']):>11}{100 * r['share']:>7.1f}%"
              f"{pim:>7.0f}{hits:>10}")
