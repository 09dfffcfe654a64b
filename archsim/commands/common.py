"""Helpers shared by CLI subcommands."""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any


def add_set_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config value by dotted path, e.g. dram.timing.nRCD=20 (repeatable)")
    parser.add_argument("--config", dest="override_file", metavar="FILE",
                        help="YAML file of overrides, e.g. {dram: {timing: {nRCD: 20}}}")


def collect_overrides(args: argparse.Namespace) -> list[str]:
    """Overrides from --config FILE (flattened) then --set (later wins)."""
    from archsim.config import flatten, load_yaml

    items: list[str] = []
    if getattr(args, "override_file", None):
        doc = load_yaml(args.override_file)
        for key, value in flatten(doc.data).items():
            items.append(f"{key}={json.dumps(value)}")
    items.extend(args.overrides or [])
    return items


def quiet(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "quiet", False)) or os.environ.get("CI", "").lower() in ("1", "true", "yes")


def print_table(rows: list[tuple[str, Any]], out: Any = None) -> None:
    out = out or sys.stdout
    width = max((len(k) for k, _ in rows), default=0)
    for key, value in rows:
        out.write(f"  {key:<{width}}  {value}\n")
