"""ISA specs: load and validate isa/*.yaml and encode/decode instruction words.

A spec gives every field one fixed bit slot for the whole ISA (fields that never meet in one instruction
may share bits), the opcode slot, the executing units and the instructions. Everything else (assembler,
Verilog header, RTL decoder) is derived from the loaded `Isa`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from numbers import Integral
from pathlib import Path
from typing import Any

import yaml

from archsim import schema
from archsim.errors import ConfigError, UserError, unknown_name
from archsim.schema import REQUIRED, opt

_FIELD_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_MNEMONIC = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_ISA_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
# `opcode` is the slot name used in the header and by split_fields, so no field may take it.
_RESERVED_FIELD_NAMES = {"opcode"}
MAX_WORD_BITS = 1024

FieldValue = int | str


@dataclass(frozen=True)
class Field:
    """One bit slot of the instruction word."""

    name: str
    lsb: int
    bits: int
    description: str = ""
    values: Mapping[str, int] = field(default_factory=dict)  # symbolic names accepted for this field
    default: int | None = None  # fields with a default may be omitted in encode() and assembly

    @property
    def msb(self) -> int:
        return self.lsb + self.bits - 1

    @property
    def max(self) -> int:
        return (1 << self.bits) - 1

    @property
    def mask(self) -> int:
        return self.max << self.lsb

    def name_of(self, value: int) -> str | None:
        """Symbolic name of `value`, if the spec gives one."""
        for name, v in self.values.items():
            if v == value:
                return name
        return None


@dataclass(frozen=True)
class InstrSpec:
    """One instruction of the spec."""

    mnemonic: str
    opcode: int
    unit: str
    fields: tuple[Field, ...]
    description: str
    aliases: tuple[str, ...] = ()
    used_mask: int = 0  # opcode bits + the bits of this instruction's fields; the rest must be zero

    @property
    def field_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)


@dataclass(frozen=True)
class Instruction:
    """A decoded instruction: canonical mnemonic and its field values (every field of the instruction)."""

    mnemonic: str
    fields: dict[str, int]

    def __str__(self) -> str:
        return " ".join([self.mnemonic] + [f"{k}={v}" for k, v in self.fields.items()])


class Isa:
    """A validated instruction set. Build with `archsim.isa.load()` or `Isa.from_dict()`."""

    def __init__(
        self,
        name: str,
        description: str,
        word_bits: int,
        opcode: Field,
        units: Mapping[str, str],
        fields: Mapping[str, Field],
        instructions: Iterable[InstrSpec],
        source: str = "<isa>",
        version: int = 1,
    ):
        self.name = name
        self.description = description
        self.word_bits = word_bits
        self.opcode_field = opcode
        self.units = dict(units)
        self.fields = dict(fields)
        self.instructions: tuple[InstrSpec, ...] = tuple(instructions)
        self.source = source
        self.version = version
        self.hex_digits = (word_bits + 3) // 4
        self._by_opcode = {ins.opcode: ins for ins in self.instructions}
        # Mnemonics are matched case-insensitively (assembly text, CLI), aliases included.
        self._by_key: dict[str, InstrSpec] = {}
        for ins in self.instructions:
            for key in (ins.mnemonic, *ins.aliases):
                self._by_key[key.upper()] = ins

    # -- construction -------------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, data: Any, source: str = "<isa>") -> Isa:
        """Validate a parsed spec; raises ConfigError naming `source`, the key path and what is allowed."""
        return _build(data, source)

    # -- lookup ---------------------------------------------------------------------------------------
    @property
    def mnemonics(self) -> list[str]:
        return [ins.mnemonic for ins in self.instructions]

    def instruction(self, mnemonic: str) -> InstrSpec:
        """The spec of `mnemonic` (case-insensitive, aliases allowed); unknown names list the known ones."""
        ins = self._by_key.get(str(mnemonic).upper())
        if ins is None:
            raise unknown_name(f"{self.name} instruction", str(mnemonic), self.mnemonics)
        return ins

    def by_opcode(self, opcode: int) -> InstrSpec | None:
        return self._by_opcode.get(opcode)

    # -- encode / decode ------------------------------------------------------------------------------
    def encode(self, mnemonic: str, /, **fields: FieldValue) -> int:
        """Encode one instruction. Every field of the instruction must be given (unless it has a default);
        values are integers or the field's symbolic names. Out-of-range values raise UserError."""
        ins = self.instruction(mnemonic)
        extra = [k for k in fields if k not in ins.field_names]
        if extra:
            raise UserError(
                f"{ins.mnemonic}: unknown field {extra[0]!r}; fields of {ins.mnemonic}: "
                f"{', '.join(ins.field_names) or '(none)'}"
            )
        word = ins.opcode << self.opcode_field.lsb
        for f in ins.fields:
            if f.name in fields:
                value = self._field_value(ins, f, fields[f.name])
            elif f.default is not None:
                value = f.default
            else:
                missing = [g.name for g in ins.fields if g.name not in fields and g.default is None]
                raise UserError(
                    f"{ins.mnemonic}: missing field(s) {', '.join(missing)}; "
                    f"write e.g. `{self.format_spec_example(ins)}`"
                )
            word |= value << f.lsb
        return word

    def encode_instruction(self, instr: Instruction) -> int:
        return self.encode(instr.mnemonic, **instr.fields)

    def decode(self, word: int) -> Instruction:
        """Decode one word. Unknown opcodes and set reserved bits raise UserError (the RTL flags them too)."""
        if isinstance(word, bool) or not isinstance(word, Integral):
            raise UserError(f"{self.name}: an instruction word must be an integer, got {word!r}")
        word = int(word)
        if word < 0 or word >> self.word_bits:
            raise UserError(f"{self.name}: word {word:#x} does not fit in {self.word_bits} bits")
        op = (word >> self.opcode_field.lsb) & self.opcode_field.max
        ins = self._by_opcode.get(op)
        if ins is None:
            raise UserError(
                f"{self.name}: unknown opcode {op:#04x} in word {word:#0{self.hex_digits + 2}x} "
                f"(`archsim isa show {self.name}` lists the opcodes)"
            )
        reserved = word & ~ins.used_mask
        if reserved:
            raise UserError(
                f"{self.name}: {ins.mnemonic} word {word:#0{self.hex_digits + 2}x} has reserved bits "
                f"{reserved:#x} set (bits outside {ins.mnemonic}'s fields must be zero)"
            )
        return Instruction(ins.mnemonic, {f.name: (word >> f.lsb) & f.max for f in ins.fields})

    def decode_many(self, words: Iterable[int]) -> list[Instruction]:
        return [self.decode(w) for w in words]

    # -- array paths for long streams (compiler / engine) -------------------------------------------
    def encode_many(self, mnemonic: str, /, **columns: Any) -> Any:
        """Vectorised encode of many instances of one instruction: each field is a scalar or an array
        (broadcast together). Returns a numpy array: uint64 when word_bits <= 64, else Python ints."""
        import numpy as np

        ins = self.instruction(mnemonic)
        extra = [k for k in columns if k not in ins.field_names]
        if extra:
            raise UserError(
                f"{ins.mnemonic}: unknown field {extra[0]!r}; fields of {ins.mnemonic}: "
                f"{', '.join(ins.field_names) or '(none)'}"
            )
        wide = self.word_bits > 64
        dtype = object if wide else np.uint64
        arrays = []
        for f in ins.fields:
            raw = columns.get(f.name, f.default)
            if raw is None:
                raise UserError(f"{ins.mnemonic}: missing field {f.name}")
            if isinstance(raw, str):
                raw = self._field_value(ins, f, raw)
            arr = np.asarray(raw)
            if arr.dtype.kind not in "iu" and not (wide and arr.dtype == object):
                raise UserError(f"{ins.mnemonic}: field {f.name} must be integers, got dtype {arr.dtype}")
            if arr.size and (int(arr.min()) < 0 or int(arr.max()) > f.max):
                bad = int(arr.min()) if int(arr.min()) < 0 else int(arr.max())
                raise UserError(self._range_msg(ins, f, bad))
            arrays.append(arr.astype(dtype))
        shape = np.broadcast_shapes(*(a.shape for a in arrays)) if arrays else ()
        words = np.full(shape, ins.opcode << self.opcode_field.lsb, dtype=dtype)
        for f, arr in zip(ins.fields, arrays, strict=True):
            words = words | (arr << (f.lsb if wide else np.uint64(f.lsb)))
        return words

    def split_fields(self, words: Any) -> dict[str, Any]:
        """Slice every field slot (and `opcode`) out of an array of words, without validating them.
        For words from a trusted encoder (e.g. feeding the timing engine); decode() validates."""
        import numpy as np

        w = np.asarray(words)
        if self.word_bits > 64:  # object array of Python ints: slice element by element
            flat = [int(x) for x in w.flat]
            out = {}
            for f in (self.opcode_field, *self.fields.values()):
                sliced = [(x >> f.lsb) & f.max for x in flat]
                out[f.name] = np.array(sliced, dtype=np.int64 if f.bits < 64 else object).reshape(w.shape)
            return out
        w = w.astype(np.uint64)
        out = {
            "opcode": ((w >> np.uint64(self.opcode_field.lsb)) & np.uint64(self.opcode_field.max)).astype(
                np.int64
            )
        }
        for f in self.fields.values():
            out[f.name] = ((w >> np.uint64(f.lsb)) & np.uint64(f.max)).astype(np.int64)
        return out

    # -- text form ------------------------------------------------------------------------------------
    def format(self, instr: Instruction | int) -> str:
        """Assembly text of one instruction (symbolic names where the spec defines them)."""
        # Round-trip through the encoder so the text is validated and canonical (defaults filled in).
        word = self.encode_instruction(instr) if isinstance(instr, Instruction) else instr
        decoded = self.decode(word)
        ins = self.instruction(decoded.mnemonic)
        parts = [ins.mnemonic]
        for f in ins.fields:
            value = decoded.fields[f.name]
            parts.append(f"{f.name}={f.name_of(value) or value}")
        return " ".join(parts)

    def format_spec_example(self, ins: InstrSpec) -> str:
        return " ".join([ins.mnemonic] + [f"{f.name}=N" for f in ins.fields])

    # -- helpers --------------------------------------------------------------------------------------
    def _range_msg(self, ins: InstrSpec, f: Field, value: int) -> str:
        return (
            f"{ins.mnemonic}: field {f.name}={value} does not fit in {f.bits} bit{'s' * (f.bits != 1)} "
            f"(allowed 0..{f.max})"
        )

    def _field_value(self, ins: InstrSpec, f: Field, value: Any) -> int:
        if isinstance(value, str):
            if value in f.values:
                return f.values[value]
            allowed = (
                f"one of {', '.join(f.values)} or an integer 0..{f.max}"
                if f.values
                else f"an integer 0..{f.max}"
            )
            raise UserError(f"{ins.mnemonic}: field {f.name}={value!r} is not valid; allowed: {allowed}")
        if isinstance(value, bool) or not isinstance(value, Integral):
            raise UserError(f"{ins.mnemonic}: field {f.name} must be an integer 0..{f.max}, got {value!r}")
        value = int(value)
        if value < 0 or value > f.max:
            raise UserError(self._range_msg(ins, f, value))
        return value

    def __repr__(self) -> str:
        return f"Isa({self.name!r}, {self.word_bits}-bit, {len(self.instructions)} instructions)"


# ---------------------------------------------------------------------------------------------------
# loading


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate keys (plain PyYAML silently keeps the last one, which would hide
    e.g. two instructions with the same mnemonic)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: set = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise _DuplicateKey(str(key), key_node.start_mark.line + 1)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


class _DuplicateKey(Exception):
    def __init__(self, key: str, line: int):
        self.key, self.line = key, line


def load_file(path: str | Path) -> Isa:
    """Load and validate an ISA spec file (errors name the file)."""
    path = Path(path)
    try:
        st = path.stat()
    except OSError as exc:
        raise UserError(f"{path}: cannot read ISA spec: {exc.strerror or exc}") from None
    return _load_cached(str(path), str(path.resolve()), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=32)
def _load_cached(path: str, _resolved: str, _mtime_ns: int, _size: int) -> Isa:
    # Keyed on the resolved path, mtime and size so an edited spec is re-read; shipped specs load once.
    # Callers share the returned Isa, so treat it as read-only.
    from archsim.config import check_yaml, read_text

    source = path
    text = read_text(path, "ISA spec")
    lines = check_yaml(text, source, syntax=False)   # bounded: size, nesting, aliases (the strict loader below has no limits)
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass: no arbitrary objects
    except _DuplicateKey as exc:
        raise ConfigError(
            exc.key, "duplicate key (each key may appear once)", source=source, line=exc.line
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(
            "(yaml)", f"not valid YAML: {problem}", source=source, line=mark.line + 1 if mark else None
        ) from None
    try:
        return _build(data, source)
    except ConfigError as exc:       # at the line of the key path (or of its nearest enclosing key)
        if exc.line is not None:
            raise
        path = exc.key_path
        while path and path not in lines:
            path = path.rpartition(".")[0]
        raise ConfigError(exc.key_path, exc.problem, source=source, line=lines.get(path)) from None


def _type_name(value: Any) -> str:
    return {
        bool: "a boolean",
        int: "an integer",
        str: "a string",
        list: "a list",
        dict: "a mapping",
        float: "a number",
        type(None): "empty",
    }.get(type(value), type(value).__name__)


# The file's shape, read by archsim.schema.build (types, unknown and missing keys, at their key path and line);
# the rules across keys (bit slots inside the word and clear of the opcode, unique opcodes and names, names of
# the right form) are checked in _build on the built values.
@dataclass(frozen=True)
class OpcodeSlotFile:
    lsb: int = opt(REQUIRED, "the opcode's lowest bit")
    bits: int = opt(REQUIRED, "the opcode's width in bits")


@dataclass(frozen=True)
class FieldFile:
    lsb: int = opt(REQUIRED, "the field's lowest bit")
    bits: int = opt(REQUIRED, "the field's width in bits")
    description: str | None = opt("", "what the field holds")
    values: dict[str, Any] = opt({}, "symbolic names accepted for the field's values")
    default: Any = opt(None, "the value when an instruction omits the field")


@dataclass(frozen=True)
class InstrFile:
    opcode: Any = opt(REQUIRED, "the instruction's opcode")
    unit: str = opt(REQUIRED, "the unit that executes it")
    fields: Any = opt([], "the fields it carries (a list of field names)")
    description: Any = opt("", "what it does (a non-empty string)")
    aliases: Any = opt([], "other mnemonics for it")


@dataclass(frozen=True)
class IsaFile:
    """An ISA spec file (isa/*.yaml)."""

    isa: Any = opt(REQUIRED, "the ISA's name")
    version: Any = opt(1, "the spec's version")
    description: str | None = opt("", "what the ISA is for")
    word_bits: Any = opt(REQUIRED, "bits per instruction word (a multiple of 8)")
    opcode: OpcodeSlotFile = opt(REQUIRED, "the opcode's bit slot")
    units: dict[str, Any] = opt(REQUIRED, "the executing units and what each does")
    fields: dict[str, FieldFile] = opt(REQUIRED, "every field's bit slot, shared by fields that never meet")
    instructions: dict[str, InstrFile] = opt(REQUIRED, "every instruction by mnemonic")


def _need_int(value: Any, key: str, source: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(key, f"must be an integer {lo}..{hi}, got {_type_name(value)} {value!r}", source)
    if not lo <= value <= hi:
        raise ConfigError(key, f"must be an integer {lo}..{hi}, got {value}", source)
    return value


def _need_str(value: Any, key: str, source: str, pattern: re.Pattern | None = None, what: str = "") -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(key, f"must be a non-empty string, got {_type_name(value)} {value!r}", source)
    if pattern is not None and not pattern.match(value):
        raise ConfigError(key, f"{value!r} is not a valid {what} (allowed: {pattern.pattern})", source)
    return value


def _build(data: Any, source: str) -> Isa:
    if not isinstance(data, dict):
        raise ConfigError("(top)", f"an ISA spec must be a mapping, got {_type_name(data)}", source)

    def where(path: str, problem: str) -> ConfigError:
        return ConfigError(path, problem, source)

    top = schema.build(IsaFile, data, where)
    name = _need_str(top.isa, "isa", source, _ISA_NAME, "ISA name")
    description = str(top.description or "")
    version = _need_int(top.version, "version", source, 1, 10**6)
    word_bits = _need_int(top.word_bits, "word_bits", source, 8, MAX_WORD_BITS)
    if word_bits % 8:
        raise ConfigError(
            "word_bits", f"must be a multiple of 8 (whole bytes in hex files), got {word_bits}", source
        )
    opcode_field = _opcode_field(top.opcode, word_bits, source)
    units = _units(top.units, source)
    fields = {fname: _field(fname, fdef, word_bits, opcode_field, source) for fname, fdef in top.fields.items()}
    instructions = _instructions(top.instructions, opcode_field, units, fields, source)
    return Isa(name, description, word_bits, opcode_field, units, fields, instructions, source, version)


def _opcode_field(op: OpcodeSlotFile, word_bits: int, source: str) -> Field:
    op_bits = _need_int(op.bits, "opcode.bits", source, 1, 16)
    op_lsb = _need_int(op.lsb, "opcode.lsb", source, 0, word_bits - 1)
    if op_lsb + op_bits > word_bits:
        raise ConfigError(
            "opcode", f"bits {op_lsb}..{op_lsb + op_bits - 1} overflow the {word_bits}-bit word", source
        )
    return Field("opcode", op_lsb, op_bits, "opcode")


def _units(units_raw: dict[str, Any], source: str) -> dict[str, str]:
    if not units_raw:
        raise ConfigError("units", "must name at least one executing unit", source)
    units: dict[str, str] = {}
    for uname, udesc in units_raw.items():
        _need_str(uname, f"units.{uname}", source, _FIELD_NAME, "unit name")
        units[uname] = str(udesc or "")
    return units


def _field(fname: Any, fdef: FieldFile, word_bits: int, opcode_field: Field, source: str) -> Field:
    """One entry of `fields`: its bits inside the word and clear of the opcode, its named values, default."""
    key = f"fields.{fname}"
    _need_str(fname, key, source, _FIELD_NAME, "field name")
    if fname in _RESERVED_FIELD_NAMES:
        raise ConfigError(key, f"{fname!r} is reserved; pick another field name", source)
    bits = _need_int(fdef.bits, f"{key}.bits", source, 1, word_bits)
    lsb = _need_int(fdef.lsb, f"{key}.lsb", source, 0, word_bits - 1)
    f = Field(fname, lsb, bits, str(fdef.description or ""))
    if f.msb >= word_bits:
        raise ConfigError(
            key,
            f"bits {f.lsb}..{f.msb} overflow the {word_bits}-bit word "
            f"(lsb + bits must be <= {word_bits})",
            source,
        )
    if f.mask & opcode_field.mask:
        raise ConfigError(
            key, f"bits {f.lsb}..{f.msb} overlap the opcode bits {opcode_field.lsb}..{opcode_field.msb}", source
        )
    values: dict[str, int] = {}
    for vname, v in fdef.values.items():
        _need_str(vname, f"{key}.values.{vname}", source, _FIELD_NAME, "value name")
        values[vname] = _need_int(v, f"{key}.values.{vname}", source, 0, f.max)
    dup = _first_duplicate(values.values())
    if dup is not None:
        raise ConfigError(f"{key}.values", f"value {dup} has two names", source)
    default = None if fdef.default is None else _need_int(fdef.default, f"{key}.default", source, 0, f.max)
    return Field(fname, lsb, bits, f.description, values, default)


def _instructions(instr_raw: dict[str, InstrFile], opcode_field: Field, units: dict[str, str],
                  fields: dict[str, Field], source: str) -> list[InstrSpec]:
    if not instr_raw:
        raise ConfigError("instructions", "must define at least one instruction", source)
    instructions: list[InstrSpec] = []
    by_opcode: dict[int, str] = {}
    by_key: dict[str, str] = {}
    for mnemonic, idef in instr_raw.items():
        key = f"instructions.{mnemonic}"
        _need_str(mnemonic, key, source, _MNEMONIC, "mnemonic")
        opcode = _need_int(idef.opcode, f"{key}.opcode", source, 0, opcode_field.max)
        if opcode in by_opcode:
            raise ConfigError(
                f"{key}.opcode",
                f"{opcode:#04x} is already used by {by_opcode[opcode]}; opcodes must be unique",
                source,
            )
        by_opcode[opcode] = mnemonic
        if idef.unit not in units:
            raise ConfigError(f"{key}.unit", f"unknown unit {idef.unit!r}; allowed: {', '.join(units)}", source)
        aliases = _aliases(mnemonic, idef.aliases or [], by_key, key, source)
        ifields, used = _instruction_fields(idef.fields or [], opcode_field, fields, key, source)
        desc = _need_str(idef.description, f"{key}.description", source)
        instructions.append(InstrSpec(mnemonic, opcode, idef.unit, tuple(ifields), desc, aliases, used))
    return instructions


def _aliases(mnemonic: str, aliases_raw: Any, by_key: dict[str, str], key: str, source: str) -> tuple[str, ...]:
    """An instruction's aliases; every name (mnemonic and aliases) unique, case-insensitively, in `by_key`."""
    if not isinstance(aliases_raw, list):
        raise ConfigError(
            f"{key}.aliases", f"must be a list of mnemonics, got {_type_name(aliases_raw)}", source
        )
    aliases = tuple(_need_str(a, f"{key}.aliases", source, _MNEMONIC, "mnemonic") for a in aliases_raw)
    for k in (mnemonic, *aliases):
        # Case-insensitive because assembly text is, and the Verilog macros are upper-case.
        if k.upper() in by_key:
            raise ConfigError(
                key,
                f"name {k!r} clashes with {by_key[k.upper()]!r} (names are "
                f"case-insensitive and must be unique)",
                source,
            )
        by_key[k.upper()] = mnemonic
    return aliases


def _instruction_fields(flist: Any, opcode_field: Field, fields: dict[str, Field], key: str,
                        source: str) -> tuple[list[Field], int]:
    """An instruction's fields (known, listed once, not overlapping) and the mask of every bit it uses."""
    if not isinstance(flist, list):
        raise ConfigError(
            f"{key}.fields", f"must be a list of field names, got {_type_name(flist)}", source
        )
    ifields: list[Field] = []
    used = opcode_field.mask
    for fname in flist:
        if fname not in fields:
            raise ConfigError(
                f"{key}.fields", f"unknown field {fname!r}; allowed: {', '.join(fields)}", source
            )
        f = fields[fname]
        if any(g.name == fname for g in ifields):
            raise ConfigError(f"{key}.fields", f"field {fname!r} is listed twice", source)
        clash = next((g for g in ifields if g.mask & f.mask), None)
        if clash is not None:
            raise ConfigError(
                f"{key}.fields",
                f"{fname} (bits {f.lsb}..{f.msb}) overlaps {clash.name} "
                f"(bits {clash.lsb}..{clash.msb}) in the same instruction",
                source,
            )
        ifields.append(f)
        used |= f.mask
    return ifields, used


def _first_duplicate(items: Iterable[Any]) -> Any:
    seen: set = set()
    for x in items:
        if x in seen:
            return x
        seen.add(x)
    return None
