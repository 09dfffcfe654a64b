"""`archsim config show --system NAME [--config FILE] [--set KEY=VALUE ...] [--KEY VALUE ...]`: the resolved
config of a system as YAML, each key under its help, type and default as `#` comments. The same options as
`archsim run` build it, so what it prints is what `run` would simulate (and `run --config` re-reads it)."""
from __future__ import annotations

import argparse

from archsim.commands.common import add_system_config_parser, print_system_help, system_config


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("config", help="show a system's resolved config with every key's help")
    s = p.add_subparsers(dest="config_cmd", metavar="show")
    show = add_system_config_parser(
        s, "show", help="print a system's resolved config as YAML, each key with its help, type and default",
        description="Print the config `archsim run` would simulate with the same options (defaults filled in) "
        "as YAML; each key is preceded by its help, type, allowed values and default as # comments. "
        "`archsim run --config FILE` reads the output back as is.")
    show.set_defaults(func=run_show)
    p.set_defaults(func=lambda args: p.print_help() or 2)


def run_show(args: argparse.Namespace) -> int:
    import copy

    import yaml

    from archsim import keypaths, registry, schema

    if args.help:
        return print_system_help(args)
    config, _ = system_config(args)
    resolved = registry.resolve_config(copy.deepcopy(config))
    name = resolved["system"]
    cls = registry.schema_of(name)
    print(f"# resolved config of system {name} (`archsim run --config FILE` runs it as is)")
    print(schema.yaml_with_help(cls, resolved) if cls is not None else yaml.safe_dump(resolved, sort_keys=False),
          end="")
    given = set(keypaths.config_leaves(resolved)) - set(_paths(resolved))
    if given:
        tops = sorted({k.split(".")[0] for k in given})
        print(f"# also settable (values from the preset / policy, not part of the config unless set): "
              f"{', '.join(f'{t}.*' if any(k.startswith(t + '.') for k in given) else t for t in tops)} "
              f"({len(given)} keys, e.g. {', '.join(sorted(given)[:3])})")
    return 0


def _paths(data: dict, prefix: str = "") -> list[str]:
    out = []
    for key, value in data.items():
        path = f"{prefix}{key}"
        out.append(path)
        if isinstance(value, dict):
            out.extend(_paths(value, path + "."))
    return out
