"""`archsim compile --system pimgpt --model NAME -o DIR`: emit the per-channel PIM command streams and the
host instruction stream of one decode step."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from archsim.commands.common import add_parser, add_set_option, config_file_overrides, set_overrides


def register(sub: argparse._SubParsersAction) -> None:
    p = add_parser(sub, "compile", help="compile a model to PIM command streams (one file per channel + host)",
                   description="Lay the model out over the PIM channels and write, for one decode step at "
                   "--context keys, channel<N>.pim.asm (isa/pim.yaml text, SYNC at op boundaries) and "
                   "host.asm (isa/host.yaml text). The hardware is a pimgpt config: --model, --channels, "
                   "--preset, --mapping are shortcuts for its keys; --config / --set take any of them "
                   "(e.g. --set dram.org.rows=8192, --set mapping_overrides.weights.layout=row_aligned).")
    p.add_argument("--system", default="pimgpt", choices=["pimgpt"],
                   help="system to compile for (only pimgpt has a PIM command stream)")
    p.add_argument("--model", help="model name or file (key model; required unless --config gives it)")
    p.add_argument("-o", "--out", required=True, help="output directory")
    p.add_argument("--context", type=int, default=1, help="keys the decoded token attends to")
    p.add_argument("--layers", type=int, help="emit only the first N layers (default: all)")
    p.add_argument("--channels", type=int, help="PIM channels (key channels; default: the preset's)")
    p.add_argument("--preset", help="PIM DRAM preset (key preset; default GDDR6_AiM_16Gbps)")
    p.add_argument("--mapping", help="mapping policy file, mappings/*.yaml or a path (key mapping; default pimgpt)")
    add_set_option(p, config_help="YAML pimgpt config or some of its keys, e.g. a `run --json` manifest's config "
                   "(applied before the shortcuts and --set)")
    p.add_argument("--json", dest="json_out", metavar="FILE",
                   help="write the emitted files, per-file instruction counts and the manifest as JSON "
                   "(- for standard output)")
    p.add_argument("--quiet", action="store_true", help="print nothing (--json still writes its file)")
    p.set_defaults(func=run)


def build_config(args: argparse.Namespace) -> dict[str, Any]:
    from archsim import systems
    from archsim.errors import UserError

    file_system, items = config_file_overrides(args.override_file) if args.override_file else (None, [])
    if file_system not in (None, "pimgpt"):
        raise UserError(f"{args.override_file}: is a config of system {file_system!r}; compile takes pimgpt configs")
    for dest in ("model", "channels", "preset", "mapping"):
        value = getattr(args, dest)
        if value is not None:
            items.append((dest, value, f"--{dest}", None))
    items += set_overrides(args)
    if not any(key == "model" for key, *_ in items):
        raise UserError("compile: give the model (--model NAME, or `model:` in --config)")
    return systems.apply_overrides({"system": "pimgpt"}, items)


def run(args: argparse.Namespace) -> int:
    from archsim.compiler.emit import compile_decode_step
    from archsim.results import make_manifest

    config = build_config(args)
    files = compile_decode_step(config["model"], args.out, context=args.context, layers=args.layers, config=config)
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
        if args.json_out == "-":
            sys.stdout.write(text)
        else:
            Path(args.json_out).write_text(text)
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
