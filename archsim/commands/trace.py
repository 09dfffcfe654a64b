"""`archsim trace TRACE --preset NAME`: simulate a memory trace on a DRAM preset."""
from __future__ import annotations

import argparse
import atexit
import functools
import gc
import json
import sys
from pathlib import Path
from typing import Any

from archsim.commands.common import (
    add_parser,
    add_set_option,
    add_threads_option,
    apply_threads,
    compile_seconds,
    config_file_overrides,
    count_at_most,
    quiet,
    set_overrides,
    with_compile_time,
)
from archsim.limits import MAX_CHANNELS, MAX_QUEUE
from archsim.output import check_distinct, check_writable


def register(sub: argparse._SubParsersAction) -> None:
    p = add_parser(sub, "trace", help="simulate a memory trace (Ramulator 2 or DRAMsim3 format, .gz ok)",
                       description="Simulate a memory trace cycle-accurately on a DRAM preset. Trace formats "
                       "are auto-detected: Ramulator 2 ('LD 0x..' / 'ST 0x..', optional leading bubble count) "
                       "and DRAMsim3 ('0xADDR READ|WRITE cycle'). 'synthetic:KIND:N' "
                       "generates N requests (80% reads; KIND random, stream, mixed or conflict).")
    p.add_argument("trace", help="trace file, or synthetic:KIND:N (KIND: random, stream, mixed, conflict)")
    p.add_argument("--preset", default="DDR4_3200AA_x8_8Gb", help="DRAM preset (see `archsim presets list`)")
    p.add_argument("--channels", type=count_at_most(MAX_CHANNELS, "the most channels archsim simulates"),
                   help="number of channels (default: the preset's)")
    p.add_argument("--address-mapping", help="address mapping MSB..LSB, e.g. RoBaRaCoCh or rorabgbachco, "
                   "optionally with hash clauses, e.g. RoRaBgBaChCo,Ch^Ro (docs/traces.md) "
                   "(default: the preset's `mapping:`, else RoBaRaCoCh)")
    # Old spelling, hidden: in `run` / `compile` --mapping is a mapping *policy file*; here it meant the
    # address-mapping string. Still accepted, with a one-line deprecation note on stderr.
    p.add_argument("--mapping", dest="mapping_deprecated", help=argparse.SUPPRESS)
    p.add_argument("--row-policy", choices=["open", "closed"], help="row-buffer policy (default open)")
    p.add_argument("--refresh", choices=["allbank", "perbank", "none"], help="refresh mode (default allbank)")
    p.add_argument("--queue", type=count_at_most(MAX_QUEUE, "archsim.limits.MAX_QUEUE"),
                   help="read and write queue entries per channel (default 32)")
    p.add_argument("--engine", choices=["numba"], default="numba",
                   help="simulation engine (the channel engine is numba-compiled; the reference scheduler is "
                   "a test oracle, archsim.engine.reference)")
    p.add_argument("--json", dest="json_out", metavar="FILE",
                   help="write stats, per-channel table, manifest (- for standard output)")
    p.add_argument("--csv", dest="csv_out", metavar="FILE", help="write the per-channel table as CSV")
    p.add_argument("--log", dest="log_out", metavar="FILE", help="write the command log (CSV) for check-log")
    p.add_argument("--log-format", choices=["archsim", "drampower"], default="archsim",
                   help="format of --log: archsim (the CSV check-log reads) or drampower (DRAMPower's command "
                   "trace, with its memspec FILE.memspec.json and CLI config FILE.config.json beside it, written "
                   "from the preset; DDR4 and DDR5 presets, one channel)")
    p.add_argument("--quiet", action="store_true", help="print nothing (no summary, no progress bar); --json still writes its file")
    add_threads_option(p)
    add_set_option(p, config_help="YAML file of dram.* / controller.* overrides, e.g. {dram: {timing: {nRCD: 20}}} "
                   "(applied before --set)")
    p.set_defaults(func=run, exit_when_done=True)   # (archsim.cli._exit_now)


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
    # A trace run creates few Python objects but imports many (numba's type system): the cyclic garbage
    # collector would walk them again and again for nothing (~0.05 s), and once more while the interpreter
    # exits (~0.1 s). So it pauses during the run, and everything alive is frozen (left out of collection)
    # when the process exits.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    _freeze_at_exit()
    try:
        return _run(args)
    finally:
        if gc_was_enabled:
            gc.enable()


@functools.cache
def _freeze_at_exit() -> None:
    atexit.register(gc.freeze)    # (once per process)


def _run(args: argparse.Namespace) -> int:
    from archsim.systems.dram_trace.system import run_trace

    apply_threads(args)
    controller = {}
    if args.row_policy:
        controller["row_policy"] = args.row_policy
    if args.refresh:
        controller["refresh"] = args.refresh
    if args.queue is not None:
        controller["read_queue"] = controller["write_queue"] = args.queue
    mapping = args.address_mapping
    if args.mapping_deprecated is not None:
        from archsim.errors import UserError

        if mapping is not None:
            raise UserError("give --address-mapping only (--mapping is its old, deprecated spelling)")
        print("archsim: warning: `trace --mapping` is deprecated, use --address-mapping (in run/compile "
              "--mapping names a mapping policy file)", file=sys.stderr)
        mapping = args.mapping_deprecated
    dram_over, ctrl_over = _checked_overrides(args, mapping)
    if mapping is not None:
        _check_mapping(mapping, {**controller, **ctrl_over})
    if args.log_format == "drampower":
        _check_drampower(args, dram_over)
    check_distinct({"--json": args.json_out, "--csv": args.csv_out, "--log": args.log_out},
                   {"the trace": None if args.trace.startswith("synthetic:") else args.trace, "--config": args.override_file})
    for out in (args.json_out, args.csv_out, args.log_out):
        check_writable(out)          # before the simulation, not after it
    controller.update(ctrl_over)
    c0 = compile_seconds()
    result = run_trace(_trace_arg(args.trace), preset=args.preset, channels=args.channels, mapping=mapping,
                       controller=controller, overrides=dram_over, log=bool(args.log_out), engine=args.engine,
                       quiet=quiet(args))
    with_compile_time(result, c0)
    if not args.quiet and args.json_out != "-":   # --quiet: no summary (the progress bar is also off under CI=true)
        from archsim.systems.dram_trace.summary import print_trace_summary

        print_trace_summary(result.stats, args.trace)
    if args.json_out:
        result.write_json(args.json_out)     # "-" = standard output
    if args.csv_out:
        result.write_csv(args.csv_out)
    if args.log_out and args.log_format == "drampower":
        from archsim.dram import drampower

        drampower.write(result.extra["spec"], result.extra["command_log"].df, result.stats["cycles"], args.log_out)
    elif args.log_out:
        result.extra["command_log"].write(args.log_out)
    return 0


def _check_drampower(args: argparse.Namespace, dram_over: dict[str, Any]) -> None:
    """--log-format drampower: a --log to write, and a preset DRAMPower takes, before the simulation."""
    from archsim.dram import drampower
    from archsim.dram.spec import load_spec
    from archsim.errors import UserError

    if not args.log_out or args.log_out == "-":
        raise UserError("--log-format drampower needs --log FILE (the DRAMPower trace to write; its memspec and "
                        "config go beside it)")
    spec = load_spec(args.preset, overrides=dram_over or None)
    drampower.check(spec, args.channels or spec.channels)
    for path in drampower.companion_paths(args.log_out):
        check_writable(str(path))


def _check_mapping(mapping: str, controller: dict[str, Any]) -> None:
    """A bad --address-mapping is an error naming that option, before the simulation."""
    from archsim.errors import ConfigError
    from archsim.systems.dram_trace.system import with_mapping

    try:
        with_mapping(controller, mapping)
    except ConfigError as exc:
        raise ConfigError(exc.key_path, exc.problem, source=f"--address-mapping {mapping}") from None


def _flag_conflict(args: argparse.Namespace, mapping: str | None, key: str, value: Any, source: str) -> None:
    """A --config / --set value of a key an option also gives, different from it, is refused: the option
    would be dropped without a word (`--row-policy open --set controller.row_policy=closed`)."""
    from archsim.errors import UserError

    flags = {"controller.row_policy": ("--row-policy", args.row_policy), "controller.refresh": ("--refresh", args.refresh),
             "controller.read_queue": ("--queue", args.queue), "controller.write_queue": ("--queue", args.queue),
             "dram.org.channels": ("--channels", args.channels), "controller.mapping": ("--address-mapping", mapping)}
    flag, given = flags.get(key, (None, None))
    if given is not None and value != given:
        raise UserError(f"{flag} {given} and {source} set {key} to different values ({given!r} and {value!r}); "
                        "give one of them")


def _checked_overrides(args: argparse.Namespace, mapping: str | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """--config / --set as (dram overrides {"timing.nRCD": 20}, controller fields), each key path checked
    against the dram-trace system's keys (archsim.keypaths.config_leaves, as sweeps do), none of them
    contradicting an option (_flag_conflict)."""
    from archsim import keypaths
    from archsim.config import flatten
    from archsim.errors import ConfigError

    file_system, items = config_file_overrides(args.override_file) if args.override_file else (None, [])
    if file_system not in (None, "dram-trace"):
        raise ConfigError("system", f"is {file_system!r}; trace runs are system dram-trace",
                          source=args.override_file)
    items += set_overrides(args)
    for key, value, source, line in items:
        if not key.startswith(("dram.", "controller.")):
            raise ConfigError(key, "trace runs accept dram.* and controller.* keys here (the trace, preset, "
                              "channels and mapping are options)", source=source, line=line)
        _flag_conflict(args, mapping, key, value, source if line is None else f"{source}:{line}")
    if not items:
        return {}, {}
    config = keypaths.apply_overrides({"system": "dram-trace", "preset": args.preset}, items)
    return flatten(config.get("dram") or {}), dict(config.get("controller") or {})


def _dump(obj) -> str:  # pragma: no cover - debugging aid
    return json.dumps(obj, indent=2, default=str)
