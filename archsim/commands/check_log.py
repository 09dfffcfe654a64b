"""`archsim check-log LOG --preset NAME`: re-verify every timing constraint on a recorded command log."""
from __future__ import annotations

import argparse

from archsim.commands.common import (
    add_set_option,
    config_file_overrides,
    count_at_most,
    nonnegative_int,
    set_overrides,
)
from archsim.limits import MAX_CHANNELS


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check-log", help="independently re-check a command log against a DRAM standard",
                       description="Re-verify every timing constraint and bank-state rule of the preset's "
                       "standard on a command log written by `archsim trace --log`. Exit 0 if clean, 1 if "
                       "violations were found, 2 on bad input.")
    p.add_argument("log", help="command log CSV (cycle,command,channel,pseudochannel,rank,bankgroup,bank,row,column)")
    p.add_argument("--preset", required=True, help="DRAM preset the log was produced with")
    p.add_argument("--channels", type=count_at_most(MAX_CHANNELS, "the most channels archsim simulates"), help="channel count used for the run (default: the preset's)")
    p.add_argument("--max-report", type=nonnegative_int, default=20, help="violations to print (default 20)")
    add_set_option(p, config_help="YAML file of dram.* overrides the run used, e.g. {dram: {timing: {nRCD: 20}}} "
                   "(applied before --set)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from archsim.dram.checker import check_log
    from archsim.dram.spec import load_spec
    from archsim.errors import RowError, UserError
    from archsim.systems.dram_trace.system import CommandLog

    overrides = _dram_overrides(args)
    if args.channels is not None:
        overrides["org.channels"] = args.channels
    spec = load_spec(args.preset, overrides=overrides)
    log = CommandLog.read(args.log)
    try:
        violations = check_log(spec, log.df)
    except RowError as exc:     # name the file and line, not the 0-based data row
        raise UserError(f"{args.log}:{line_of_row(args.log, exc.row)}: {exc.detail}") from None
    n = len(log.df)
    if not violations:
        print(f"OK: {n:,} commands, {len(spec.constraints)} constraint rows of {spec.standard} ({spec.name}), "
              "no violations")
        return 0
    print(f"FAIL: {len(violations):,} violation(s) in {n:,} commands ({spec.name})")
    for v in violations[: args.max_report]:
        print(f"  {args.log}:{line_of_row(args.log, v.index)}: {v}")
    return 1


def line_of_row(path: str, row: int) -> int:
    """The 1-based line of data row `row` (0-based) of a CSV file with one header line, counting the blank
    lines pandas skips."""
    import gzip

    opener = gzip.open if str(path).endswith(".gz") else open
    seen = -1                     # the header is row -1
    with opener(path, "rt", encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, start=1):
            if line.strip():
                if seen == row:
                    return number
                seen += 1
    return row + 2


def _dram_overrides(args: argparse.Namespace) -> dict:
    """--config / --set as load_spec overrides {"timing.nRCD": 20}, each key path checked against the
    dram-trace system's dram.* keys (archsim.keypaths.config_leaves), as `trace` and sweeps do."""
    from archsim import keypaths
    from archsim.config import flatten
    from archsim.errors import ConfigError

    _, items = config_file_overrides(args.override_file) if args.override_file else (None, [])
    items += set_overrides(args)
    for key, value, source, line in items:
        if not key.startswith("dram."):
            raise ConfigError(key, "check-log accepts dram.* keys (the preset overrides the run used)",
                              source=source, line=line)
        if key == "dram.org.channels" and args.channels is not None and value != args.channels:
            from archsim.errors import UserError

            raise UserError(f"--channels {args.channels} and {source} set dram.org.channels to different values "
                            f"({args.channels} and {value!r}); give one of them")
    if not items:
        return {}
    config = keypaths.apply_overrides({"system": "dram-trace", "preset": args.preset}, items)
    return flatten(config.get("dram") or {})
