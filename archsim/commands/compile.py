"""`archsim compile --system pimgpt --model NAME -o DIR`: emit the per-channel PIM command streams and the
host instruction stream of one decode step."""
from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compile", help="compile a model to PIM command streams (one file per channel + host)",
                       description="Lay the model out over the PIM channels and write, for one decode step at "
                       "--context keys, channel<N>.pim.asm (isa/pim.yaml text, SYNC at op boundaries) and "
                       "host.asm (isa/host.yaml text).")
    p.add_argument("--system", default="pimgpt")
    p.add_argument("--model", required=True)
    p.add_argument("-o", "--out", required=True, help="output directory")
    p.add_argument("--context", type=int, default=1, help="keys the decoded token attends to (default 1)")
    p.add_argument("--layers", type=int, help="emit only the first N layers (default: all)")
    p.add_argument("--channels", type=int)
    p.add_argument("--preset", default="GDDR6_AiM_16Gbps")
    p.add_argument("--mapping", default="pimgpt")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from archsim import systems
    from archsim.compiler.emit import compile_decode_step

    if args.system != "pimgpt":
        systems.get(args.system)
        from archsim.errors import UserError

        raise UserError(f"compile supports --system pimgpt, got {args.system}")
    files = compile_decode_step(args.model, args.out, context=args.context, layers=args.layers,
                                channels=args.channels, preset=args.preset, mapping=args.mapping)
    for f in files:
        print(f)
    return 0
