"""Instruction sets (isa/*.yaml): load/validate specs, encode/decode words, assemble/disassemble text,
generate Verilog headers.

    from archsim import isa
    pim = isa.load("pim")                           # shipped name, or a path to a user's spec
    word = pim.encode("MACAB", row=12, col=3, gb_offset=3, clr=1)
    pim.decode(word)                                 # Instruction("MACAB", {"row": 12, ...})
    isa.assemble(pim, "ACTAB row=12\\nMACAB row=12 col=0 gb_offset=0 clr=1\\n")
"""

from __future__ import annotations

from pathlib import Path

from archsim import paths
from archsim.isa.asm import (
    AsmError,
    assemble,
    disassemble,
    disassemble_hex,
    parse,
    parse_line,
    read_hex,
    to_hex,
)
from archsim.isa.spec import Field, InstrSpec, Instruction, Isa, load_file
from archsim.isa.verilog import header_filename, verilog_header, write_header

__all__ = [
    "AsmError",
    "Field",
    "Instruction",
    "InstrSpec",
    "Isa",
    "assemble",
    "disassemble",
    "disassemble_hex",
    "header_filename",
    "load",
    "load_file",
    "parse",
    "parse_line",
    "read_hex",
    "shipped_isas",
    "to_hex",
    "verilog_header",
    "write_header",
]


def load(name_or_path: str | Path) -> Isa:
    """Load an ISA: a shipped name ("pim", "host") or a path to a spec file."""
    return load_file(paths.resolve("isa", name_or_path))


def shipped_isas() -> list[str]:
    """Names of the ISAs shipped with archsim."""
    return paths.shipped_names("isa", (".yaml", ".yml"))
