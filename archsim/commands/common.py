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


def quiet(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "quiet", False)) or os.environ.get("CI", "").lower() in ("1", "true", "yes")


def print_table(rows: list[tuple[str, Any]], out: Any = None) -> None:
    out = out or sys.stdout
    width = max((len(k) for k, _ in rows), default=0)
    for key, value in rows:
        out.write(f"  {key:<{width}}  {value}\n")
