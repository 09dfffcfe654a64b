"""`archsim run --system NAME [--config FILE] [--set KEY=VALUE ...]`: simulate a registered system end to end."""
from __future__ import annotations

import argparse
from typing import Any

from archsim import progress
from archsim.commands.common import (
    add_system_config_parser,
    add_threads_option,
    apply_threads,
    compile_seconds,
    print_system_help,
    system_config,
    with_compile_time,
)
from archsim.output import check_distinct, check_writable
from archsim.summary import model_notes


def describe(system: str) -> tuple[str, str]:
    """(description, examples) of `archsim run --system X --help`, as system X's class declares them."""
    from archsim import registry

    cls = registry.get(system)
    text = cls.describe()
    head = f"Simulate system {system} and print its summary. {text}" if text else f"Simulate system {system}."
    examples = cls.examples or (f"  archsim run --system {system}\n"
                                f"  archsim run --system {system} --json run.json && archsim run --from-json run.json")
    return head + " `--system X --help` lists every key of system X.", f"examples (system {system}):\n{examples}\n"


def register(sub: argparse._SubParsersAction) -> None:
    p = add_system_config_parser(
        sub, "run", help="simulate a registered system end to end (`archsim run --system X --help`: its keys)",
        description="Simulate any registered system (see --system) from its config and print its summary. "
        "`--system X --help` lists every key of system X.")
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
        result = with_compile_time(registry.run(config, seed), c0)
    notes = model_notes(registry.resolve_config(dict(config)), modelled_features(config["system"]))
    if not args.quiet and args.json_out != "-":
        summary = registry.get(config["system"]).summary
        if summary is not None:
            summary(result, config)
        else:
            from archsim.summary import print_generic

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
