"""`archsim compile --model NAME -o DIR`: emit the per-channel PIM command streams and the host instruction stream
of one decode step. The hardware is a pimgpt config, built by the same options as `archsim run`."""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from archsim.commands.common import add_system_config_parser, print_system_help, system_config
from archsim.output import check_distinct, check_writable, write_text


def register(sub: argparse._SubParsersAction) -> None:
    p = add_system_config_parser(
        sub, "compile", only=("pimgpt",), help="compile a model to PIM command streams (one file per channel + host)",
        description="Lay the model out over the PIM channels and write, for one decode step at --context keys, "
        "channel<N>.pim.asm (isa/pim.yaml text, SYNC at op boundaries) and host.asm (isa/host.yaml text). The "
        "hardware is a pimgpt config, built as `archsim run` builds it: --model, --channels, --preset, "
        "--mapping, ... set its keys; --config / --set take any of them (e.g. --set dram.org.rows=8192, "
        "--set mapping_overrides.weights.layout=row_aligned).")
    c = p.add_argument_group("compile")
    c.add_argument("-o", "--out", help="output directory (required)")
    c.add_argument("--context", type=int, default=1, help="keys the decoded token attends to")
    c.add_argument("--layers", type=int, help="emit only the first N layers (default: all)")
    c.add_argument("--json", dest="json_out", metavar="FILE",
                   help="write the emitted files, per-file instruction counts and the manifest as JSON "
                   "(- for standard output)")
    c.add_argument("--quiet", action="store_true", help="print nothing (--json still writes its file)")
    p.set_defaults(func=run)


def build_config(args: argparse.Namespace) -> dict[str, Any]:
    """The pimgpt config of the options (only pimgpt has a PIM command stream)."""
    return system_config(args)[0]


def run(args: argparse.Namespace) -> int:
    from archsim import registry
    from archsim.errors import UserError
    from archsim.results import make_manifest
    from archsim.systems.pimgpt.emit import compile_decode_step

    if args.help:
        return print_system_help(args)
    if not args.out:
        raise UserError("compile: give the output directory (-o DIR)")
    config = build_config(args)
    check_distinct({"-o": args.out, "--json": args.json_out}, {"--config": args.override_file})
    check_writable(args.out, folder=True)
    check_writable(args.json_out)
    model = registry.resolve_config(dict(config))["model"]
    files = compile_decode_step(model, args.out, context=args.context, layers=args.layers, config=config)
    if not args.quiet and args.json_out != "-":
        for f in files:
            print(f)
    if args.json_out:
        counts = {str(f): _instructions(f) for f in files}
        doc = {"stats": {"files": [str(f) for f in files], "instructions": counts,
                         "pim_commands": sum(n for f, n in counts.items() if f.endswith(".pim.asm")),
                         "context": args.context, "layers": args.layers},
               "manifest": make_manifest("pimgpt-compile", config, context=args.context, layers=args.layers)}
        text = json.dumps(doc, indent=2, default=str) + "\n"
        write_text(args.json_out, text)
    return 0


def _instructions(path: Path) -> int:
    """Instruction lines of an emitted file (SYNC / END markers and comments are not instructions)."""
    n = 0
    with open(path) as f:
        for line in f:
            word = line.split("#", 1)[0].strip()
            if word and word not in ("SYNC", "END"):
                n += 1
    return n
