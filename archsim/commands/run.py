"""`archsim run --system NAME [--config FILE] [--set KEY=VALUE ...]`: simulate a registered system end to end."""
from __future__ import annotations

import argparse
import json
from typing import Any

from archsim.commands.common import add_parser, config_file_overrides, print_table, set_overrides

DEFAULT_SYSTEM = "pimgpt"

# Shortcut flags: (argparse dest, config key path, value to set or None for the flag's value, systems or None
# for every system). A shortcut is `--set KEY=VALUE` under a friendlier name; one that belongs to another
# system is an error (not silently ignored).
SHORTCUTS: list[tuple[str, str, Any, tuple[str, ...] | None]] = [
    ("preset", "preset", None, None),
    ("channels", "channels", None, None),
    ("model", "model", None, ("pimgpt",)),
    ("tokens", "tokens", None, ("pimgpt",)),
    ("asic_clock_hz", "asic_clock_hz", None, ("pimgpt",)),
    ("mapping", "mapping", None, ("pimgpt",)),
    ("layout", "mapping_overrides.weights.layout", None, ("pimgpt",)),
    ("no_memo", "memo", False, ("pimgpt",)),
    ("no_baselines", "baselines", [], ("pimgpt",)),
    ("timeline", "timeline", True, ("pimgpt",)),
    ("engine", "engine", None, None),
]

EPILOG = """\
How the run's config is built (later steps win):
  1. --from-json FILE: the config (and seed) a previous run recorded in its --json manifest, else
     {system: --system} with the system's defaults;
  2. --config FILE: a YAML config; it may be a whole config (a `system:` key selects the system, so a
     manifest's config re-runs as is) or just some keys, e.g. {dram: {timing: {nRCDRD: 20}}};
  3. the shortcut flags (group "shortcuts" above: --model, --tokens, ...): each sets one key;
  4. --set KEY=VALUE, in order.
Every key path is checked against the system's keys (the ones a sweep may vary); a misspelt one is an
error naming the nearest valid keys. Shortcuts marked [pimgpt] are an error with another system.

examples:
  archsim run --model gpt2-small --tokens 16
  archsim run --system pimgpt --set dram.timing.nRCDRD=20 --tokens 4
  archsim run --system dram-trace --set trace.kind=random --set trace.requests=2000 --set preset=HBM2_2Gbps_PC
  archsim run --model gpt2-small --tokens 4 --json run.json && archsim run --from-json run.json
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = add_parser(sub, "run", help="simulate a registered system end to end (PIM-GPT decode, DRAM trace runs, ...)",
                   description="Simulate any registered system (see --system) from its config and print its "
                   "summary. For pimgpt: decode --tokens tokens of --model token by token (every layer, KV "
                   "growing) on GDDR6-AiM PIM channels + the ASIC, and compare with the T4 / Xeon baselines. "
                   "For dram-trace: run a trace (trace: PATH or trace.kind/trace.requests for a synthetic one).",
                   epilog=EPILOG)
    p.add_argument("--system", default=None,
                   help=f"registered system: dram-trace, pimgpt, ... (default: the --config / --from-json "
                   f"file's system, else {DEFAULT_SYSTEM})")
    p.add_argument("--config", dest="override_file", metavar="FILE",
                   help="YAML config: a whole config (e.g. a --json manifest's config) or some keys to override")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="set a config value by key path, e.g. dram.timing.nRCDRD=20 or trace.requests=2000 "
                   "(repeatable)")
    p.add_argument("--from-json", metavar="FILE",
                   help="re-run the config and seed recorded in a run's --json output (then apply the options)")
    g = p.add_argument_group("shortcuts (each is --set KEY=VALUE; default: the system's own default)")
    g.add_argument("--preset", help="DRAM preset (key preset; pimgpt default GDDR6_AiM_16Gbps, "
                   "dram-trace default DDR4_3200AA_x8_8Gb)")
    g.add_argument("--channels", type=int, help="channels (key channels; default: the preset's)")
    g.add_argument("--model", help="[pimgpt] model name (workloads/models) or a model YAML/config.json "
                   "(key model; default gpt2-xl)")
    g.add_argument("--tokens", type=int, help="[pimgpt] tokens to decode, context grows 1..N "
                   "(key tokens; default 1024)")
    g.add_argument("--asic-clock-hz", type=float, help="[pimgpt] ASIC clock (key asic_clock_hz; default: the "
                   "ASIC preset's, 1 GHz)")
    g.add_argument("--mapping", help="[pimgpt] mapping policy file, mappings/*.yaml or a path (key mapping; "
                   "default pimgpt)")
    g.add_argument("--layout", choices=["packed", "row_aligned"],
                   help="[pimgpt] weight layout (key mapping_overrides.weights.layout; default: the policy's)")
    g.add_argument("--no-memo", action="store_true", help="[pimgpt] simulate every op in full, no reuse of "
                   "identical steps (key memo=false)")
    g.add_argument("--no-baselines", action="store_true", help="[pimgpt] skip the T4 / Xeon comparison "
                   "(key baselines=[])")
    g.add_argument("--timeline", action="store_true", help="[pimgpt] also record a per-unit (PIM / ASIC) "
                   "timeline of the last decode step, in --json (key timeline=true)")
    g.add_argument("--engine", choices=["numba"], help="simulation engine (key engine; the channel engine is "
                   "numba-compiled, the only one; default numba)")
    o = p.add_argument_group("output")
    o.add_argument("--json", dest="json_out", metavar="FILE",
                   help="write stats, table and manifest as JSON (- for standard output)")
    o.add_argument("--csv", dest="csv_out", metavar="FILE", help="write the result table as CSV")
    o.add_argument("--seed", type=int, help="run seed (default: the --from-json run's, else 0)")
    o.add_argument("--quiet", action="store_true", help="print no summary (--json still writes its file)")
    p.set_defaults(func=run)


def build_config(args: argparse.Namespace) -> tuple[dict[str, Any], int]:
    """(validated config, seed) from --from-json, --config, the shortcuts and --set (see EPILOG)."""
    from archsim import systems
    from archsim.errors import UserError

    base: dict[str, Any] | None = None
    seed = 0
    if args.from_json:
        base, seed = _from_json(args.from_json)
    file_system, file_items = config_file_overrides(args.override_file) if args.override_file else (None, [])
    system = args.system or (base or {}).get("system") or file_system or DEFAULT_SYSTEM
    systems.get(system)  # unknown -> the known systems, nearest first
    for origin, named in (("--from-json " + str(args.from_json), (base or {}).get("system")),
                          (str(args.override_file), file_system)):
        if named is not None and named != system:
            raise UserError(f"{origin}: is a config of system {named!r}, but --system is {system!r}")
    config = base if base is not None else {"system": system}
    items = list(file_items)
    for dest, key, value, only in SHORTCUTS:
        given = getattr(args, dest)
        if given is None or given is False:
            continue
        flag = "--" + dest.replace("_", "-")
        if only is not None and system not in only:
            raise UserError(f"{flag} is an option of system {', '.join(only)}, not {system}; set {system}'s keys "
                            "with --set KEY=VALUE (see `archsim run --help`)")
        items.append((key, given if value is None else value, flag, None))
    items.extend(set_overrides(args))
    config = systems.apply_overrides(config, items)
    if args.seed is not None:
        seed = args.seed
    return config, seed


def _from_json(path: str) -> tuple[dict[str, Any], int]:
    from archsim.errors import UserError

    try:
        with open(path) as f:
            data = json.load(f)
    except FileNotFoundError:
        raise UserError(f"{path}: file not found") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise UserError(f"{path}: not a readable JSON file ({exc})") from None
    manifest = data.get("manifest") if isinstance(data, dict) else None
    config = manifest.get("config") if isinstance(manifest, dict) else None
    if not isinstance(config, dict) or "system" not in config:
        raise UserError(f"{path}: manifest.config: missing; expected the --json output of `archsim run` or "
                        "`archsim trace`")
    seed = manifest.get("seed") or 0
    return config, int(seed)


def run(args: argparse.Namespace) -> int:
    from archsim import systems

    config, seed = build_config(args)
    result = systems.get(config["system"])(config, seed)
    if not args.quiet and args.json_out != "-":
        if config["system"] == "pimgpt":
            print_pimgpt(result)
        elif config["system"] == "dram-trace":
            from archsim.commands.trace import print_trace_summary

            trace = config.get("trace")
            print_trace_summary(result.stats, trace if isinstance(trace, str) else json.dumps(trace))
        else:
            print_generic(config["system"], result.stats)
    if args.json_out:
        result.write_json(args.json_out)
    if args.csv_out:
        result.write_csv(args.csv_out)
    return 0


def print_generic(system: str, stats: dict[str, Any]) -> None:
    print(f"{system}")
    print_table([(k, v) for k, v in stats.items() if isinstance(v, int | float | str | bool)])


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
