"""`archsim isa`: show instruction sets, assemble/disassemble streams, generate the Verilog headers."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from archsim import paths


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "isa",
        help="instruction sets: show, assemble/disassemble, Verilog headers",
        description="Instruction sets defined in isa/*.yaml (shipped name or a path to your own spec).",
    )
    p.set_defaults(func=lambda args: _usage(p))
    sub = p.add_subparsers(dest="isa_command", metavar="ACTION")

    s = sub.add_parser("show", help="table of instructions and fields of an ISA (no NAME: list the ISAs)")
    s.add_argument("name", nargs="?", metavar="NAME", help="shipped ISA name (pim, host) or a spec path")
    s.set_defaults(func=_cmd_show)

    g = sub.add_parser("gen-verilog", help="write rtl/include/<isa>_isa.vh from the spec")
    g.add_argument(
        "--isa",
        action="append",
        metavar="NAME",
        help="ISA to generate (repeatable; default: every shipped ISA)",
    )
    g.add_argument(
        "-o", "--out", metavar="DIR", help="output directory (default: rtl/include/ of the checkout)"
    )
    g.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if a header in DIR is missing or stale"
    )
    g.set_defaults(func=_cmd_gen_verilog)

    a = sub.add_parser("asm", help="assemble a text program into a hex word file")
    a.add_argument("input", metavar="IN", help="assembly text, one instruction per line")
    a.add_argument("-o", "--out", metavar="OUT.hex", required=True, help="hex file to write")
    a.add_argument("--isa", default="pim", metavar="NAME", help="ISA (default: pim)")
    a.set_defaults(func=_cmd_asm)

    d = sub.add_parser("disasm", help="disassemble a hex word file into text")
    d.add_argument("input", metavar="IN.hex", help="hex words, one per line ($readmemh format)")
    d.add_argument("--isa", metavar="NAME", help="ISA (default: from the file's archsim header, else pim)")
    d.add_argument("-o", "--out", metavar="OUT", help="write the text here instead of stdout")
    d.set_defaults(func=_cmd_disasm)


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def _read(path: str) -> str:
    from archsim.config import read_text

    return read_text(path, "program file")


def _write_atomic(path: str | Path, text: str) -> None:
    # archsim.output: temp file + rename for a regular file (mode per umask), through symlinks, in place
    # for devices and pipes.
    from archsim.output import write_text

    write_text(path, text)


def _cmd_show(args: argparse.Namespace) -> int:
    from archsim import isa as isa_mod

    if not args.name:
        rows = [("name", "word bits", "instructions", "description")]
        for name in isa_mod.shipped_isas():
            spec = isa_mod.load(name)
            rows.append((name, str(spec.word_bits), str(len(spec.instructions)), spec.description))
        print(_table(rows))
        print("\n`archsim isa show NAME` prints one ISA's instructions and fields.")
        return 0
    spec = isa_mod.load(args.name)
    op = spec.opcode_field
    print(f"{spec.name}: {spec.description}")
    print(f"{spec.word_bits}-bit words, opcode bits [{op.msb}:{op.lsb}], source {spec.source}\n")
    rows = [("mnemonic", "opcode", "unit", "fields (name:bits)", "description")]
    for ins in spec.instructions:
        name = ins.mnemonic + (f" ({', '.join(ins.aliases)})" if ins.aliases else "")
        fields = " ".join(f"{f.name}:{f.bits}" for f in ins.fields) or "-"
        rows.append((name, f"0x{ins.opcode:0{(op.bits + 3) // 4}x}", ins.unit, fields, ins.description))
    print(_table(rows))
    print()
    rows = [("field", "bits", "slot", "values", "description")]
    for f in spec.fields.values():
        values = ", ".join(f"{k}={v}" for k, v in f.values.items())
        if f.default is not None:
            values = (values + "; " if values else "") + f"default {f.default}"
        rows.append((f.name, str(f.bits), f"[{f.msb}:{f.lsb}]", values or "-", f.description))
    print(_table(rows))
    print()
    rows = [("unit", "description")] + [(u, d) for u, d in spec.units.items()]
    print(_table(rows))
    return 0


def _table(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for n, r in enumerate(rows):
        # Last column unpadded so long descriptions do not drag trailing spaces along.
        lines.append("  ".join(c.ljust(w) for c, w in zip(r[:-1], widths[:-1], strict=True)) + "  " + r[-1])
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(line.rstrip() for line in lines)


def _default_rtl_include() -> Path:
    checkout = paths.REPO_ROOT / "rtl" / "include"
    return checkout if checkout.is_dir() else Path("rtl") / "include"


def _cmd_gen_verilog(args: argparse.Namespace) -> int:
    from archsim import isa as isa_mod

    out_dir = Path(args.out) if args.out else _default_rtl_include()
    specs = [isa_mod.load(n) for n in (args.isa or isa_mod.shipped_isas())]
    stale = []
    for spec in specs:
        text = isa_mod.verilog_header(spec)
        path = out_dir / isa_mod.header_filename(spec)
        if args.check:
            current = path.read_text(encoding="ascii") if path.is_file() else None
            if current != text:
                stale.append(path)
                print(f"{path}: {'missing' if current is None else 'stale'}", file=sys.stderr)
            continue
        _write_atomic(path, text)
        print(f"wrote {path}")
    if stale:
        print("run `archsim isa gen-verilog` to regenerate", file=sys.stderr)
        return 1
    return 0


def _cmd_asm(args: argparse.Namespace) -> int:
    from archsim import isa as isa_mod
    from archsim.output import check_distinct

    check_distinct({"-o": args.out}, {"the input": args.input})
    spec = isa_mod.load(args.isa)
    words = isa_mod.assemble(spec, _read(args.input), source=args.input)
    _write_atomic(args.out, isa_mod.to_hex(spec, words, note=f"from {Path(args.input).name}"))
    print(f"wrote {args.out}: {len(words)} {spec.name} instruction(s)")
    return 0


def _cmd_disasm(args: argparse.Namespace) -> int:
    from archsim import isa as isa_mod
    from archsim.output import check_distinct

    check_distinct({"-o": args.out}, {"the input": args.input})
    text = _read(args.input)
    name = args.isa or isa_mod.read_hex(text, args.input)[1] or "pim"
    spec = isa_mod.load(name)
    out = isa_mod.disassemble_hex(spec, text, source=args.input)
    if args.out:
        _write_atomic(args.out, out)
    else:
        sys.stdout.write(out)
    return 0
