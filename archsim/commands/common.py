"""Helpers shared by CLI subcommands."""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any

SET_HELP = ("override a config value by key path, e.g. dram.timing.nRCD=20 (repeatable; the same key paths a "
            "sweep varies; a misspelt key is an error naming the nearest valid ones)")


class HelpFormatter(argparse.HelpFormatter):
    """Every subcommand's help shows each option's default: "(default: X)" is appended when an option has a
    real default (not None / False / empty) and its help does not already say "default". A description or
    epilog written with line breaks (e.g. `run`'s examples) is printed as written; one-line text is wrapped."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" in text:
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (action.option_strings and "default" not in text and default not in (None, False, [], argparse.SUPPRESS)
                and not isinstance(action, argparse._VersionAction | argparse._HelpAction)):
            text += " (default: %(default)s)"
        return text


def add_parser(sub: argparse._SubParsersAction, name: str, **kwargs: Any) -> argparse.ArgumentParser:
    """sub.add_parser with archsim's help formatter (defaults shown)."""
    return sub.add_parser(name, formatter_class=HelpFormatter, **kwargs)


def add_set_option(parser: argparse.ArgumentParser, config_help: str | None = None) -> None:
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help=SET_HELP)
    parser.add_argument("--config", dest="override_file", metavar="FILE",
                        help=config_help or "YAML file of overrides, e.g. {dram: {timing: {nRCD: 20}}} "
                        "(applied before --set)")


def config_file_overrides(path: str) -> tuple[str | None, list[tuple[str, Any, str, int | None]]]:
    """(the system the file names, or None; its values as (key path, value, source, line) overrides)."""
    from archsim.config import flatten, load_yaml
    from archsim.errors import ConfigError

    doc = load_yaml(path)
    if not isinstance(doc.data, dict):
        raise ConfigError("<top>", "must be a mapping of config keys, e.g. {dram: {timing: {nRCD: 20}}}",
                          source=path)
    if not doc.data:      # runs as if it were not given: say so, a wrong file is the likelier story
        print(f"archsim: note: --config {path} holds no keys (it is empty or only comments), so it changes "
              "nothing", file=sys.stderr)
    system = doc.data.get("system")
    if system is not None and not isinstance(system, str):
        raise doc.error("system", f"must be a system name, got {system!r}")
    items = [(k, v, path, doc.line(k)) for k, v in flatten(doc.data).items() if k != "system"]
    return system, items


def set_overrides(args: argparse.Namespace) -> list[tuple[str, Any, str, int | None]]:
    """--set KEY=VALUE items as (key path, value, source, None) overrides."""
    from archsim.config import parse_override

    out = []
    for item in args.overrides or []:
        key, value = parse_override(item)
        out.append((key, value, f"--set {item}", None))
    return out


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (0 is an error, not "the default")."""
    return _int_at_least(text, 1)


def nonnegative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    return _int_at_least(text, 0)


def count_at_most(high: int, why: str) -> Any:
    """argparse type: an integer from 1 to `high` (archsim.limits; `why` says what bounds it)."""
    def parse(text: str) -> int:
        value = _int_at_least(text, 1, high)
        if value > high:
            raise argparse.ArgumentTypeError(f"must be an integer from 1 to {high:,} ({why}), got {value:,}")
        return value
    return parse


def _int_at_least(text: str, low: int, high: int | None = None) -> int:
    allowed = f"an integer >= {low}" if high is None else f"an integer from {low} to {high:,}"
    if len(text) > 30:     # int() of thousands of digits is slow, and beyond every bound anyway
        raise argparse.ArgumentTypeError(f"must be {allowed}, got {len(text):,} characters")
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {allowed}, got {text!r}") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"must be {allowed}, got {value}")
    return value


def with_compile_time(result: Any, compile_before: float) -> Any:
    """Record in result.stats["sim_compile_s"] the seconds spent compiling or loading channel kernels since
    `compile_before` (compile_seconds()); the systems' simulation times (sim_kernel_s, wall_s) exclude them."""
    stats = getattr(result, "stats", None)
    if isinstance(stats, dict):
        stats["sim_compile_s"] = compile_seconds() - compile_before
    return result


def compile_seconds() -> float:
    """archsim.engine.compiling.compile_seconds() if the engine is loaded (0 otherwise; importing it costs)."""
    mod = sys.modules.get("archsim.engine.compiling")
    return mod.compile_seconds() if mod is not None else 0.0


def quiet(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "quiet", False)) or os.environ.get("CI", "").lower() in ("1", "true", "yes")


# ---- system configs: the options every subcommand that builds a system config shares ----------------------
def default_system() -> str:
    """The system a subcommand runs when none is named: the one registered with `default = True`."""
    from archsim import registry

    return registry.default_system()


def _registered() -> list[str]:
    from archsim import registry

    return registry.names()


def extra_flags(only: tuple[str, ...] | None = None) -> dict[str, tuple[str, str, Any, list[str] | None, str,
                                                                       tuple[str, ...]]]:
    """The systems' own flags that are not a schema key (archsim.registry.System.flags), each `--set KEY=VALUE`
    under a friendlier name: dest -> (flag, key path, value to set or None for the flag's value, choices, help,
    the systems that take it)."""
    from archsim import registry

    out: dict[str, Any] = {}
    for name in only or registry.names():
        for dest, flag, key, value, choices, text in registry.get(name).flags:
            owners = out[dest][5] if dest in out else ()
            out[dest] = (flag, key, value, choices, f"[{', '.join((*owners, name))}] {text}", (*owners, name))
    return out


CONFIG_EPILOG = """\
How the config is built (later steps win):
  1. --from-json FILE: the config (and seed) a previous run recorded in its --json manifest, else
     {system: --system} with the system's defaults;
  2. --config FILE: a YAML config; it may be a whole config (a `system:` key selects the system, so a
     manifest's config re-runs as is) or just some keys, e.g. {dram: {timing: {nRCDRD: 20}}};
  3. the config-key flags (--tokens 8 is --set tokens=8; each exists for the systems that have the key);
  4. --set KEY=VALUE. A flag and a --set (or two --set) that give one key different values are refused.
Every key path and value is checked against the system's typed config (archsim.schema; the keys a sweep
may vary); a misspelt key is an error naming the nearest valid keys, a bad value one naming the type or
the allowed values. A flag marked [SYSTEM] is an error with another system.
"""


class SystemConfigParser(argparse.ArgumentParser):
    """The parser of a subcommand that builds a system config (`run`, `config show`). Its config-key flags are
    generated from every system's schema when it is first used: that imports every system (~2 s), which the
    other subcommands must not pay. Its help describes one system's keys (`--system X --help`)."""

    epilog_head = ""
    only: tuple[str, ...] | None = None   # the systems this subcommand takes (None: every system)
    # system -> (description, examples) of its help (`run` sets it; None: the parser's own text)
    describe: Any = None

    # argparse keeps a parser's options in `_actions`; reading it (parsing, help, introspection) first adds the
    # generated flags, once the parser is built (`activate`, called by archsim.cli.build_parser).
    @property
    def _actions(self) -> list[argparse.Action]:
        if self.__dict__.get("_active") and "_config_flags" not in self.__dict__:
            self._ensure_flags()
        return self.__dict__["_actions_list"]

    @_actions.setter
    def _actions(self, value: list[argparse.Action]) -> None:
        self.__dict__["_actions_list"] = value

    def activate(self) -> None:
        self.__dict__["_active"] = True

    def _ensure_flags(self) -> None:
        if "_config_flags" not in self.__dict__:
            self.__dict__["_config_flags"] = []   # guards against re-entry while the flags are added
            self.__dict__["_config_flags"] = _add_schema_flags(self)
            system = self.only[0] if self.only and len(self.only) == 1 else default_system()
            self._system_action.help = (f"registered system: {', '.join(self.only or _registered())} (default: "
                                        f"the --config / --from-json file's system, else {system})")
            describe_system(self, system)

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        self._ensure_flags()
        return super().parse_known_args(args, namespace)

    def format_help(self) -> str:
        self._ensure_flags()
        return super().format_help()


def add_system_config_parser(sub: argparse._SubParsersAction, name: str, epilog: str = "",
                             only: tuple[str, ...] | None = None, **kwargs: Any) -> SystemConfigParser:
    """A SystemConfigParser subcommand with --system, --config, --set, --from-json, -h/--help (help of the
    chosen system) and the generated config-key flags (of the keys of the `only` systems, default every one)."""
    saved = sub._parser_class
    sub._parser_class = SystemConfigParser
    try:
        p = sub.add_parser(name, formatter_class=HelpFormatter, add_help=False, **kwargs)
    finally:
        sub._parser_class = saved
    assert isinstance(p, SystemConfigParser)
    p.epilog_head = epilog
    p.only = only
    p.add_argument("-h", "--help", action="store_true",
                   help="show this help (with --system X: the keys of system X) and exit")
    # its help names the systems when the flags are added (that imports the systems' declarations)
    p._system_action = p.add_argument("--system", default=None, help="registered system")
    p.add_argument("--config", dest="override_file", metavar="FILE",
                   help="YAML config: a whole config (e.g. a --json manifest's config) or some keys to override")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="set a config value by key path, e.g. dram.timing.nRCDRD=20 or trace.requests=2000 "
                   "(repeatable)")
    p.add_argument("--from-json", metavar="FILE",
                   help="start from the config and seed recorded in a run's --json output (then apply the options)")
    p.set_defaults(system_parser=p)
    return p


def schema_keys_by_name(only: tuple[str, ...] | None = None) -> dict[str, dict[str, Any]]:
    """{top-level scalar key: {system: archsim.schema.Key}} over every registered system with a schema (or the
    `only` ones): the keys that get a CLI flag."""
    from archsim import registry, schema

    out: dict[str, dict[str, Any]] = {}
    for name in only or registry.names():
        cls = registry.schema_of(name)
        for key in schema.keys(cls) if cls is not None else []:
            if "." not in key.path and key.scalar() and key.flag:
                out.setdefault(key.path, {})[name] = key
    return out


def _add_schema_flags(parser: argparse.ArgumentParser) -> list[tuple[argparse.Action, str, Any]]:
    """Add `--KEY VALUE` for every top-level scalar key (and `--no-KEY` for true/false ones); returns
    (action, key, constant or None) per flag."""
    group = parser.add_argument_group("config keys")
    parser._config_group = group  # type: ignore[attr-defined]
    taken = {s for a in parser._actions for s in a.option_strings}
    out = []
    for key, by_system in schema_keys_by_name(parser.only).items():  # type: ignore[attr-defined]
        flag = "--" + key.replace("_", "-")
        if flag in taken:
            raise RuntimeError(f"config key {key} would shadow option {flag}; rename one of them")
        dest = f"cfg__{key}"
        specs = list(by_system.values())
        if all(k.bool_only() for k in specs):
            out.append((group.add_argument(flag, dest=dest, action="store_const", const=True, default=None), key, True))
            out.append((group.add_argument("--no-" + flag[2:], dest=dest, action="store_const", const=False,
                                           default=None), key, False))
            continue
        # argparse may check the choices itself only when every system allows the same strings and nothing else
        allowed = [k.allowed() for k in specs]
        choices = allowed[0] if (all(k.closed() and not k.nullable() for k in specs)
                                 and all(a == allowed[0] for a in allowed)
                                 and all(isinstance(v, str) for v in allowed[0])) else None
        metavar = None if choices else key.upper()
        out.append((group.add_argument(flag, dest=dest, default=None, choices=choices, metavar=metavar), key, None))
    extra = []
    for dest, (flag, _key, value, choices, text, only) in extra_flags(parser.only).items():  # type: ignore[attr-defined]
        if value is None:
            action = group.add_argument(flag, dest=f"cfgx__{dest}", choices=choices, default=None, help=text)
        else:
            action = group.add_argument(flag, dest=f"cfgx__{dest}", action="store_true", help=text)
        extra.append((action, only, text))
    parser._extra_flags = extra  # type: ignore[attr-defined]
    return out


def describe_system(parser: argparse.ArgumentParser, system: str) -> None:
    """Make the parser's help describe `system`: its flags (others hidden) and, in the epilog, its other keys."""
    from archsim import registry, schema

    cls = registry.schema_of(system)
    keys = {k.path: k for k in schema.keys(cls)} if cls is not None else {}
    for action, key, const in parser._config_flags:  # type: ignore[attr-defined]
        spec = keys.get(key)
        if spec is None:
            action.help = argparse.SUPPRESS
        elif const is False:
            action.help = f"set {key} to false"
        else:
            text = f"{spec.help} [{spec.describe()}]" + ("" if const is None else f"; sets {key}=true")
            action.help = text.replace("%", "%%")
    # list the flags in the order the system's dataclass declares its keys
    order = {"--" + path.replace("_", "-"): i for i, path in enumerate(keys)}
    group = parser._config_group  # type: ignore[attr-defined]
    group._group_actions.sort(key=lambda a: min((order.get(s.replace("--no-", "--"), len(order))
                                                 for s in a.option_strings), default=len(order)))
    for action, only, text in parser._extra_flags:  # type: ignore[attr-defined]
        action.help = text if system in only else argparse.SUPPRESS
    another = "" if parser.only and len(parser.only) == 1 else "; `--system NAME --help` for another system"  # type: ignore[attr-defined]
    parser._config_group.title = (  # type: ignore[attr-defined]
        f"config keys of system {system} (--KEY VALUE is --set KEY=VALUE{another})")
    others = [k for k in keys.values() if not ("." not in k.path and k.scalar() and k.flag)]
    head = parser.epilog_head  # type: ignore[attr-defined]
    if getattr(parser, "describe", None) is not None:
        parser.description, head = parser.describe(system)  # type: ignore[attr-defined]
    lines = [head.rstrip("\n"), ""] if head else []
    lines.append(CONFIG_EPILOG.rstrip("\n"))
    if cls is None:
        lines.append(f"\nsystem {system} has no typed config: see its module")
    elif others:
        lines.append(f"\nother keys of system {system} (set with --set KEY=VALUE or --config FILE):")
        for k in others:
            lines.append(f"  {k.path}: {k.help}")
            lines.append(f"      [{k.describe()}]")
    parser.epilog = "\n".join(lines) + "\n"


def system_config(args: argparse.Namespace) -> tuple[dict[str, Any], int]:
    """(validated config, seed) of a SystemConfigParser's options: --from-json, --config, the config-key flags
    and --set (CONFIG_EPILOG)."""
    from archsim import keypaths, registry
    from archsim.errors import UserError

    base: dict[str, Any] | None = None
    seed = 0
    if args.from_json:
        base, seed = _from_json(args.from_json)
    file_system, file_items = config_file_overrides(args.override_file) if args.override_file else (None, [])
    system = args.system or (base or {}).get("system") or file_system or default_system()
    registry.get(system)  # unknown -> the known systems, nearest first
    only = args.system_parser.only
    if only is not None and system not in only:
        raise UserError(f"system {system!r}: `archsim {args.system_parser.prog.split()[-1]}` takes "
                        f"{', '.join(only)} configs")
    for origin, named in (("--from-json " + str(args.from_json), (base or {}).get("system")),
                          (str(args.override_file), file_system)):
        if named is not None and named != system:
            raise UserError(f"{origin}: is a config of system {named!r}, but --system is {system!r}")
    config = base if base is not None else {"system": system}
    given = flag_overrides(args, system) + set_overrides(args)
    check_no_conflict(given, system)
    config = keypaths.apply_overrides(config, list(file_items) + given)
    if getattr(args, "seed", None) is not None:
        seed = args.seed
    return config, seed


def check_no_conflict(items: list[tuple[str, Any, str, int | None]], system: str) -> None:
    """Refuse two options that set one key to different values (`--tokens 2 --set tokens=3`, a --set given
    twice): one of them would be dropped without a word. The same value twice is fine."""
    import json

    from archsim import keypaths
    from archsim.errors import UserError

    first: dict[str, tuple[Any, str]] = {}
    for key, value, source, _ in items:
        value = keypaths.coerce_value(key, value, system)
        if key in first and json.dumps(first[key][0], sort_keys=True, default=str) != \
                json.dumps(value, sort_keys=True, default=str):
            raise UserError(f"{first[key][1]} and {source} set {key} to different values "
                            f"({first[key][0]!r} and {value!r}); give one of them")
        first.setdefault(key, (value, source))


def flag_overrides(args: argparse.Namespace, system: str) -> list[tuple[str, Any, str, int | None]]:
    """The config-key flags given, as (key path, value, source, None) overrides: `--tokens 8` is exactly
    `--set tokens=8` (same parsing, same checks). A flag of a key the system does not have is an error."""
    from archsim.config import parse_scalar

    parser = args.system_parser
    by_name = schema_keys_by_name(parser.only)
    items = []
    seen = set()
    for action, key, _ in parser._config_flags:
        given = getattr(args, action.dest, None)
        if given is None or action.dest in seen:
            continue
        seen.add(action.dest)
        flag = "--" + key.replace("_", "-") if given is not False else "--no-" + key.replace("_", "-")
        owners = by_name[key]
        if system not in owners:
            _not_an_option(flag, tuple(owners), system)
        value = given if isinstance(given, bool) else parse_scalar(given)
        items.append((key, value, f"{flag} {given}" if not isinstance(given, bool) else flag, None))
    for dest, (flag, key, value, _, _, only) in extra_flags(args.system_parser.only).items():
        given = getattr(args, f"cfgx__{dest}", None)
        if given is None or given is False:
            continue
        if system not in only:
            _not_an_option(flag, only, system)
        items.append((key, given if value is None else value, flag, None))
    return items


def _not_an_option(flag: str, owners: tuple[str, ...], system: str) -> None:
    from archsim.errors import UserError

    raise UserError(f"{flag} is an option of system{'s' if len(owners) > 1 else ''} {', '.join(owners)}, not "
                    f"{system}; set {system}'s keys with --set KEY=VALUE (see `archsim run --system {system} --help`)")


def _from_json(path: str) -> tuple[dict[str, Any], int]:
    from archsim.config import MAX_RESULT_BYTES, read_json
    from archsim.errors import UserError

    data = read_json(path, "run result (--json output)", MAX_RESULT_BYTES)
    manifest = data.get("manifest") if isinstance(data, dict) else None
    config = manifest.get("config") if isinstance(manifest, dict) else None
    if not isinstance(config, dict) or "system" not in config:
        raise UserError(f"{path}: manifest.config: missing; expected the --json output of `archsim run` or "
                        "`archsim trace`")
    seed = manifest.get("seed") or 0
    return config, int(seed)


def help_system(args: argparse.Namespace) -> str:
    """The system whose keys `--help` describes: --system, else the --config / --from-json file's, else the
    default."""
    from archsim import registry

    system = args.system
    if system is None and args.override_file:
        system = config_file_overrides(args.override_file)[0]
    if system is None and args.from_json:
        system = _from_json(args.from_json)[0]["system"]
    system = system or default_system()
    registry.get(system)
    return system


def print_system_help(args: argparse.Namespace) -> int:
    parser = args.system_parser
    describe_system(parser, help_system(args))
    sys.stdout.write(parser.format_help())
    return 0


def add_threads_option(parser: argparse.ArgumentParser) -> None:
    """`--threads N`: worker threads of the channel engine (archsim/engine/threads.py). Not a config key: it
    changes no result (bit-identical for every N), so it is not part of a run's config or its hash."""
    parser.add_argument("--threads", type=int, metavar="N", default=None,
                        help="threads the channel engine shards a device's channels over (results are identical "
                        "for every N; default 1: no system ran faster on more here, docs/performance.md)")


def apply_threads(args: argparse.Namespace) -> None:
    from archsim.engine.threads import check_threads, set_threads

    if getattr(args, "threads", None) is not None:
        set_threads(check_threads(args.threads, "--threads"))
