"""Assembler / disassembler for the readable text form, and the hex word files the RTL reads.

Text form, one instruction per line:

    ACTAB row=12            # comments start with '#'
    MACAB row=12 col=3 gb_offset=3 clr=1
    AF func=gelu            # symbolic values where the spec names them

Mnemonics are case-insensitive (aliases allowed), fields may come in any order, numbers may be decimal,
0x.., 0b.. or 0o... Hex files hold one zero-padded word per line (Verilog $readmemh format) after a
`// archsim isa=NAME ...` header line, so `disasm` can tell which ISA wrote them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from archsim.errors import UserError
from archsim.isa.spec import Instruction, Isa

_HEADER = re.compile(r"archsim\s+isa=([a-z][a-z0-9_]*)")


class AsmError(UserError):
    """An assembly or hex-file error at `source:line`."""

    def __init__(self, source: str, line: int, problem: str):
        self.source, self.line, self.problem = source, line, problem
        super().__init__(f"{source}:{line}: {problem}")


def _parse_value(text: str) -> int | str:
    try:
        return int(text, 0)
    except ValueError:
        pass
    if text.isdigit():  # int(.., 0) rejects leading zeros such as "007"
        return int(text, 10)
    return text.lower()  # a symbolic name; encode() checks it against the field's values


def parse_line(isa: Isa, text: str, source: str = "<asm>", line: int = 1) -> Instruction | None:
    """Parse one line of assembly; None for a blank or comment-only line."""
    code = text.split("#", 1)[0].strip()
    if not code:
        return None
    tokens = code.replace(",", " ").split()
    try:
        ins = isa.instruction(tokens[0])
    except UserError as exc:
        raise AsmError(source, line, str(exc)) from None
    fields: dict[str, int | str] = {}
    for tok in tokens[1:]:
        key, sep, value = tok.partition("=")
        if not sep or not key or not value:
            raise AsmError(source, line, f"{ins.mnemonic}: expected field=value, got {tok!r}")
        key = key.lower()
        if key in fields:
            raise AsmError(source, line, f"{ins.mnemonic}: field {key} given twice")
        fields[key] = _parse_value(value)
    try:
        isa.encode(ins.mnemonic, **fields)  # validates names, presence and ranges
    except UserError as exc:
        raise AsmError(source, line, str(exc)) from None
    resolved = {}
    for f in ins.fields:
        raw = fields.get(f.name, f.default)
        resolved[f.name] = f.values[raw] if isinstance(raw, str) else int(raw)
    return Instruction(ins.mnemonic, resolved)


def parse(isa: Isa, text: str, source: str = "<asm>") -> list[Instruction]:
    """Parse a whole assembly text into instructions (errors name source:line)."""
    out = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        instr = parse_line(isa, line, source, lineno)
        if instr is not None:
            out.append(instr)
    return out


def assemble(isa: Isa, text: str, source: str = "<asm>") -> list[int]:
    """Assemble text into instruction words."""
    return [isa.encode_instruction(i) for i in parse(isa, text, source)]


def disassemble(isa: Isa, words: Iterable[int]) -> str:
    """Text form of `words`, one instruction per line; assemble(disassemble(w)) == w."""
    return "".join(isa.format(w) + "\n" for w in words)


def to_hex(isa: Isa, words: Iterable[int], note: str = "") -> str:
    """A $readmemh-compatible hex file: header comment, then one zero-padded word per line."""
    words = list(words)
    head = f"// archsim isa={isa.name} word_bits={isa.word_bits} words={len(words)}"
    if note:
        head += f" {note}"
    return head + "\n" + "".join(f"{w:0{isa.hex_digits}x}\n" for w in words)


def read_hex(text: str, source: str = "<hex>") -> tuple[list[int], str | None]:
    """Words of a hex file and the ISA name from its archsim header (None if absent).
    Accepts `//` and `#` comments, several words per line, `_` separators and an optional 0x."""
    words: list[int] = []
    isa_name = None
    for lineno, line in enumerate(text.splitlines(), start=1):
        code, _, comment = line.partition("//")
        if isa_name is None and (m := _HEADER.search(comment)):
            isa_name = m.group(1)
        code = code.split("#", 1)[0]
        for tok in code.split():
            if tok.startswith("@"):
                raise AsmError(
                    source, lineno, f"address directive {tok!r} is not supported; list the words in order"
                )
            digits = tok.replace("_", "")
            if digits[:2].lower() == "0x":
                digits = digits[2:]
            try:
                words.append(int(digits, 16))
            except ValueError:
                raise AsmError(source, lineno, f"{tok!r} is not a hex word") from None
    return words, isa_name


def disassemble_hex(isa: Isa, text: str, source: str = "<hex>") -> str:
    """Disassemble a hex file; decode errors name source:line."""
    out = []
    word_lines = _word_lines(text)
    words, _ = read_hex(text, source)
    for word, lineno in zip(words, word_lines, strict=True):
        try:
            out.append(isa.format(word) + "\n")
        except UserError as exc:
            raise AsmError(source, lineno, str(exc)) from None
    return "".join(out)


def _word_lines(text: str) -> list[int]:
    # Line number of every word, so decode errors can point at the right line.
    lines = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        code = line.partition("//")[0].split("#", 1)[0]
        lines.extend([lineno] * len(code.split()))
    return lines
